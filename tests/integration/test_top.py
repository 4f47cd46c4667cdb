"""fetchctl top under tmux with a fixed terminal size: the live view shows a job
another client process sent (with that process' pid and command), its host, and exits
cleanly on q and on Ctrl-C, leaving the terminal's normal screen."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from harness import FETCHCTL, DaemonTestCase, wait_for

TMUX = shutil.which("tmux")

# A client in its own process, named by its argv: one slow fetch, then it waits to be killed.
SLOW_CLIENT = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "fetch",
                       "params": {"url": sys.argv[2], "jobId": "top-slow"}}) + "\n").encode())
s.recv(65536)
"""


@unittest.skipUnless(TMUX, "tmux is not installed")
class TestTop(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-top-")
        self.server = f"fetchd-top-{os.getpid()}-{id(self)}"
        self.marker = os.path.join(self.tmp, "exited")
        self.clients = []

    def tearDown(self):
        subprocess.run([TMUX, "-L", self.server, "kill-server"], capture_output=True)
        for p in self.clients:
            p.kill()
            p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)
        super().tearDown()

    def tmux(self, *args):
        return subprocess.run([TMUX, "-L", self.server, *args], capture_output=True, text=True, timeout=20)

    def start_top(self):
        command = (f"{FETCHCTL} --socket {self.daemon.socket_path} top --interval 0.2; "
                   f"echo \"exit $?\" > {self.marker}; sleep 30")
        r = self.tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", "top", command)
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_for(lambda: "JOBS (" in self.screen(), timeout=20, message="top did not draw")

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "top").stdout

    def exited(self):
        try:
            with open(self.marker) as f:
                return f.read().strip()
        except OSError:
            return None

    def test_shows_jobs_hosts_and_clients_and_quits_on_q(self):
        self.start_top()
        client = subprocess.Popen([sys.executable, "-c", SLOW_CLIENT, self.daemon.socket_path,
                                   self.srv.test_url + "/slow-body?chunks=200&ms=50"])
        self.clients.append(client)
        port = self.srv.test_url.rsplit(":", 1)[1]
        screen = wait_for(lambda: (lambda s: s if "top-slow" in s and str(client.pid) in s else None)(self.screen()),
                          timeout=20, message=f"the job and its client did not appear: {self.screen()}")
        self.assertIn("/slow-body", screen)
        self.assertIn(f"http://127.0.0.1:{port}", screen)  # the hosts pane
        self.assertIn("CLIENTS", screen)
        self.assertIn(f"{client.pid}", screen)
        self.assertIn("python3", screen.split("CLIENTS", 1)[1])
        self.assertIn("top-slow started", screen)
        self.assertIn(f"(pid {client.pid}: ", screen)
        self.assertLessEqual(max(len(line) for line in screen.splitlines()), 120)
        self.tmux("send-keys", "-t", "top", "q")
        self.assertEqual(wait_for(self.exited, timeout=10, message="top did not exit on q"), "exit 0")
        # Back on the normal screen: the alternate screen's frame is gone.
        self.assertNotIn("JOBS (", self.screen())

    def test_ctrl_c_exits_cleanly(self):
        self.start_top()
        self.tmux("send-keys", "-t", "top", "C-c")
        self.assertEqual(wait_for(self.exited, timeout=10, message="top did not exit on Ctrl-C"), "exit 0")
        self.assertNotIn("JOBS (", self.screen())
        # Its connection is closed: only the test's own client remains.
        wait_for(lambda: self.c.call("getStatus")["connections"] == 1, timeout=10)

    def test_once_prints_one_frame(self):
        r = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, "top", "--once"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("fetchd "), r.stdout)
        self.assertIn("HOSTS", r.stdout)
        self.assertNotIn("\x1b[", r.stdout)


if __name__ == "__main__":
    unittest.main()
