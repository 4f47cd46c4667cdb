"""systemd: socket activation through Debian's systemd-socket-activate, and the
notification protocol with a datagram socket standing in for NOTIFY_SOCKET."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from harness import FETCHD_BIN, Daemon, RPCClient, wait_for

ACTIVATE = shutil.which("systemd-socket-activate")


class NotifySocket:
    """A datagram socket that collects what the daemon sends to NOTIFY_SOCKET."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.05)
        self.messages = []

    def poll(self):
        try:
            while True:
                self.messages.append(self.sock.recv(4096).decode())
        except (socket.timeout, BlockingIOError):
            pass
        return self.messages

    def saw(self, line):
        return any(line in m.split("\n") for m in self.poll())

    def close(self):
        self.sock.close()


@unittest.skipUnless(ACTIVATE, "systemd-socket-activate is not installed")
class TestSocketActivation(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fetchd-systemd-")
        self.sock_path = os.path.join(self.tmp, "fetchd.sock")
        self.notify = NotifySocket(self.tmp)
        self.stderr = open(os.path.join(self.tmp, "stderr.log"), "wb")
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.notify.close()
        self.stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def log(self):
        with open(self.stderr.name, errors="replace") as f:
            return f.read()

    def activate(self, *env):
        args = [ACTIVATE, "-l", self.sock_path]
        for e in env:
            args += ["-E", e]
        self.proc = subprocess.Popen(args + [FETCHD_BIN, "--verbose"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.stderr)
        wait_for(lambda: os.path.exists(self.sock_path), timeout=10)

    def connect(self):
        """The first client. systemd-socket-activate binds the socket (the file appears) and
        only then listens: a connect in between is refused, so it is tried again briefly.
        fetchd is not running yet at that point (the first connection starts it)."""
        deadline = time.monotonic() + 10
        while True:
            try:
                return RPCClient(self.sock_path)
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def test_serves_the_passed_socket_notifies_and_leaves_it(self):
        self.activate(f"NOTIFY_SOCKET={self.notify.path}", "WATCHDOG_USEC=200000")
        # The first connection makes systemd-socket-activate start fetchd with the socket.
        c = self.connect()
        self.assertEqual(c.call("ping", timeout=20), "pong")
        wait_for(lambda: self.notify.saw("READY=1"), timeout=10, message=f"no READY=1: {self.notify.messages}")
        ready = next(m for m in self.notify.messages if "READY=1" in m.split("\n"))
        self.assertIn(f"MAINPID={self.proc.pid}", ready)
        # Half of WATCHDOG_USEC: several pings within a second.
        wait_for(lambda: sum(m == "WATCHDOG=1" for m in self.notify.poll()) >= 2, timeout=5,
                 message=f"no WATCHDOG=1: {self.notify.messages}")
        self.assertIn("(socket from systemd)", self.log())
        self.assertIn(f"listening on {self.sock_path}", self.log())
        c.close()
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(20), 0, self.log())
        self.assertTrue(self.notify.saw("STOPPING=1"), self.notify.messages)
        # systemd owns the socket file: fetchd leaves it.
        self.assertTrue(os.path.exists(self.sock_path), self.log())

    def test_without_watchdog_no_pings(self):
        self.activate(f"NOTIFY_SOCKET={self.notify.path}")
        c = self.connect()
        self.assertEqual(c.call("ping", timeout=20), "pong")
        wait_for(lambda: self.notify.saw("READY=1"), timeout=10)
        time.sleep(0.3)  # a watchdog at any interval this test could see would have pinged
        self.assertFalse(any("WATCHDOG=1" in m for m in self.notify.poll()), self.notify.messages)
        c.close()
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(20), 0)


class TestNotifyWithoutActivation(unittest.TestCase):
    def test_ready_and_stopping_and_socket_removed(self):
        tmp = tempfile.mkdtemp(prefix="fetchd-notify-")
        notify = NotifySocket(tmp)
        try:
            # LISTEN_FDS for another process is not ours: the daemon binds its own socket.
            with Daemon(env={"NOTIFY_SOCKET": notify.path, "LISTEN_FDS": "1", "LISTEN_PID": "1"}) as d:
                self.assertEqual(d.client().call("ping"), "pong")
                wait_for(lambda: notify.saw("READY=1"), timeout=10)
                self.assertEqual(d.stop(), 0, d.stderr_text())
                self.assertTrue(notify.saw("STOPPING=1"), notify.messages)
                self.assertFalse(os.path.exists(d.socket_path))
        finally:
            notify.close()
            shutil.rmtree(tmp, ignore_errors=True)

    def test_passed_socket_that_is_not_a_listener_is_refused(self):
        # LISTEN_PID is the daemon's own (it execs in the child): fd 3 is a regular file.
        tmp = tempfile.mkdtemp(prefix="fetchd-notify-")
        try:
            path = os.path.join(tmp, "not-a-socket")
            with open(path, "w") as f:
                f.write("x")
            code = ("import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.dup2(fd, 3); "
                    "os.environ['LISTEN_FDS']='1'; os.environ['LISTEN_PID']=str(os.getpid()); "
                    "os.execv(sys.argv[2], [sys.argv[2], '--socket', sys.argv[3]])")
            r = subprocess.run(["python3", "-c", code, path, FETCHD_BIN, os.path.join(tmp, "s.sock")],
                               capture_output=True, timeout=20, pass_fds=())
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(b"not a listening Unix stream socket", r.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
