"""The socket server: mode 0600, stale socket replaced, a live daemon refused, shutdown by
signal, many clients at once, a slow reader blocks nobody, other uids refused, no fd leaks;
the fallback directory /tmp/fetchd-<uid> created 0700, and refused when it is not safe."""
import base64
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import unittest

from foreign import IS_ROOT, NOBODY, clean_env, fallback_daemon, run_as, spare_fallback, taken_fallback
from harness import FETCHD_BIN, Daemon, RPCError, run_fetchd, servers, wait_for


class TestSocketFile(unittest.TestCase):
    def test_mode_0600(self):
        with Daemon() as d:
            st = os.stat(d.socket_path)
            self.assertTrue(stat.S_ISSOCK(st.st_mode), "socket path is not a socket")
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, f"mode is {oct(stat.S_IMODE(st.st_mode))}")
            self.assertEqual(st.st_uid, os.getuid())

    def test_stale_socket_replaced(self):
        tmp = tempfile.mkdtemp(prefix="fetchd-stale-")
        path = os.path.join(tmp, "fetchd.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()  # the file stays, nobody listens: a stale socket
        self.assertTrue(os.path.exists(path))
        try:
            with Daemon(socket_path=path) as d:
                with d.client() as c:
                    self.assertEqual(c.call("ping"), "pong")
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_second_daemon_refused(self):
        with Daemon() as d:
            ino = os.stat(d.socket_path).st_ino
            r = run_fetchd("--socket", d.socket_path, timeout=20)
            err = r.stderr.decode(errors="replace")
            self.assertEqual(r.returncode, 1, f"second daemon exit code {r.returncode}; stderr: {err}")
            self.assertTrue(err.strip(), "no message on stderr")
            self.assertTrue(d.socket_path in err or any(w in err.lower() for w in ("already", "in use", "running")),
                            f"message not clear: {err!r}")
            self.assertLess(len(err.strip().splitlines()), 5, f"expected a short clear message: {err!r}")
            # the first daemon is untouched: same socket file, still answering
            self.assertEqual(os.stat(d.socket_path).st_ino, ino, "the live daemon's socket file was replaced")
            with d.client() as c:
                self.assertEqual(c.call("ping"), "pong")


class TestShutdown(unittest.TestCase):
    def _stop_clean(self, sig):
        d = Daemon().start()
        try:
            with d.client() as c:
                self.assertEqual(c.call("ping"), "pong")
            code = d.stop(sig, timeout=10)
            self.assertEqual(code, 0, f"exit code after {sig!r}: {code}; stderr: {d.stderr_text()[-1000:]}")
            self.assertFalse(os.path.exists(d.socket_path), "socket file left behind")
        finally:
            d.close()

    def test_sigterm(self):
        self._stop_clean(signal.SIGTERM)

    def test_sigint(self):
        self._stop_clean(signal.SIGINT)

    def test_sigterm_with_idle_client_connected(self):
        d = Daemon().start()
        try:
            c = d.client()
            self.assertEqual(c.call("ping"), "pong")
            self.assertEqual(d.stop(signal.SIGTERM, timeout=10), 0)
            self.assertTrue(c.wait_closed(10))
            self.assertFalse(os.path.exists(d.socket_path))
        finally:
            d.close()

    def test_sigterm_answers_pending_request(self):
        srv = servers()
        d = Daemon().start()
        try:
            c = d.client()
            c.send_obj({"jsonrpc": "2.0", "method": "fetch", "id": "pending",
                        "params": {"url": srv.test_url + "/slow-headers?ms=1500", "retry": False}})
            probe = d.client()

            def running():
                j = probe.call("getStatus")["jobs"]
                return j["running"] + j["queued"] >= 1
            wait_for(running, 5, message="job never started")
            probe.close()
            d.proc.send_signal(signal.SIGTERM)
            a = c.answer_for("pending", 30)
            if "result" in a:
                self.assertEqual(a["result"]["status"], 200, a)
            else:
                self.assertEqual(a["error"]["code"], -32002, a)
                self.assertEqual(a["error"]["data"]["by"], "shutdown", a)
            self.assertTrue(c.wait_closed(10))
            self.assertEqual(d.stop(timeout=30), 0)
            self.assertFalse(os.path.exists(d.socket_path))
        finally:
            d.close()


class TestManyClients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = servers()
        cls.daemon = Daemon().start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()

    def test_200_concurrent_clients(self):
        n = 200
        clients = [self.daemon.client() for _ in range(n)]
        try:
            for i, c in enumerate(clients):
                c.send_obj({"jsonrpc": "2.0", "method": "ping", "id": i})
            for i, c in enumerate(clients):
                a = c.recv(20)
                self.assertEqual((a.get("id"), a.get("result")), (i, "pong"), a)
            st = clients[0].call("getStatus")
            self.assertGreaterEqual(st["connections"], n)
            # every client has a fetch in flight at the same time
            for i, c in enumerate(clients):
                c.send_obj({"jsonrpc": "2.0", "method": "fetch", "id": f"f{i}",
                            "params": {"url": f"{self.srv.test_url}/echo/client/{i}"}})
            for i, c in enumerate(clients):
                a = c.answer_for(f"f{i}", 60)
                self.assertIn("result", a, a)
                self.assertEqual(json.loads(a["result"]["body"])["path"], f"/echo/client/{i}")
        finally:
            for c in clients:
                c.close()
        with self.daemon.client() as c:
            self.assertEqual(c.call("ping"), "pong")

    def test_slow_reader_blocks_nobody(self):
        slow = self.daemon.client()
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            # ~40 MB of answers that this client never reads
            for i in range(30):
                slow.send_obj({"jsonrpc": "2.0", "method": "fetch", "id": i,
                               "params": {"url": f"{self.srv.test_url}/bytes/1000000", "responseBody": "base64"}})
            with self.daemon.client() as fast:
                for i in range(20):
                    self.assertEqual(fast.call("ping", timeout=5), "pong")
                r = fast.call("fetch", {"url": self.srv.nginx_url + "/small.txt"}, timeout=20)
                self.assertEqual(r["status"], 200)
                # The slow reader's fetches are held to its connection's memory budget
                # (paused, not finished) while it reads nothing; when it reads, every answer comes.
                for i in range(30):
                    a = slow.answer_for(i, 60)
                    self.assertIn("result", a, json.dumps(a)[:300])
                    self.assertEqual(len(base64.b64decode(a["result"]["bodyBase64"])), 1000000)
                wait_for(lambda: fast.call("getStatus")["jobs"]["running"] == 0, 30,
                         message="the fetches never finished")
                for i in range(5):
                    self.assertEqual(fast.call("ping", timeout=5), "pong")
        finally:
            slow.close()
        with self.daemon.client() as c:
            self.assertEqual(c.call("ping"), "pong")

    def test_no_fd_leak(self):
        url = self.srv.test_url + "/json"

        def cycle():
            for _ in range(25):
                with self.daemon.client() as c:
                    c.call("ping")
            with self.daemon.client() as c:
                for _ in range(10):
                    c.call("fetch", {"url": url})
                try:
                    c.call("fetch", {"url": "http://127.0.0.1:1/", "retry": False})
                except RPCError:
                    pass
                # a client that leaves with a request in flight
                c.send_obj({"jsonrpc": "2.0", "method": "fetch", "id": 1,
                            "params": {"url": self.srv.test_url + "/slow-headers?ms=200"}})

        cycle()
        with self.daemon.client() as c:
            wait_for(lambda: c.call("getStatus")["jobs"]["running"] == 0, 10)
        base = self.daemon.fd_count()
        for _ in range(3):
            cycle()
        with self.daemon.client() as c:
            wait_for(lambda: c.call("getStatus")["jobs"]["running"] == 0, 10)
        # closed connections are released promptly; pooled HTTP connections may differ by a few
        wait_for(lambda: self.daemon.fd_count() <= base + 3, 5,
                 message=f"fd count grew: {base} -> {self.daemon.fd_count()}")


@unittest.skipUnless(os.getuid() == 0, "needs root to run a client as another uid")
class TestPeerCredentials(unittest.TestCase):
    def test_other_uid_is_closed(self):
        with Daemon() as d:
            # open the file permissions so only SO_PEERCRED stands in the way
            os.chmod(d.tmpdir, 0o755)
            os.chmod(d.socket_path, 0o666)
            script = (
                "import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX)\n"
                "s.settimeout(10)\n"
                "s.connect(sys.argv[1])\n"
                "try:\n"
                "    s.sendall(b'{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}\\n')\n"
                "    data=s.recv(1000)\n"
                "except (ConnectionError, socket.timeout) as e:\n"
                "    data=repr(e).encode()\n"
                "sys.stdout.write(repr(data))\n")
            py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
            r = subprocess.run([py, "-c", script, d.socket_path], user=65534, group=65534,
                               capture_output=True, timeout=30, cwd="/")
            out = r.stdout.decode()
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            self.assertNotIn("pong", out, "a peer with another uid was served")
            self.assertNotIn("timeout", out, "a peer with another uid was left hanging instead of closed")
            with d.client() as c:
                self.assertEqual(c.call("ping"), "pong")


@unittest.skipUnless(IS_ROOT, "needs root to run the daemon as a spare uid")
class TestFallbackDirectory(unittest.TestCase):
    """With no --socket, $FETCHD_SOCKET or $XDG_RUNTIME_DIR the socket is
    /tmp/fetchd-<uid>/fetchd.sock. The daemon runs as a spare uid, so a real daemon on root's
    own default path is never touched."""

    def setUp(self):
        self.uid = spare_fallback(self)
        self.dir = f"/tmp/fetchd-{self.uid}"
        self.sock = os.path.join(self.dir, "fetchd.sock")

    def refused(self, *reason):
        r = run_as(self.uid, [FETCHD_BIN], env=clean_env(), timeout=20)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 1, f"exit {r.returncode}; stderr: {err}")
        self.assertIn(self.dir, err)
        for words in reason:
            self.assertIn(words, err)
        self.assertLess(len(err.strip().splitlines()), 3, f"expected a short clear message: {err!r}")
        return err

    def test_directory_created_0700_with_the_socket_inside(self):
        for run in ("missing", "left from the last run"):
            with self.subTest(run=run):
                d = fallback_daemon(self.uid)
                try:
                    d.start()
                    st = os.lstat(self.dir)
                    self.assertTrue(stat.S_ISDIR(st.st_mode))
                    self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o700, self.uid))
                    st = os.lstat(self.sock)
                    self.assertTrue(stat.S_ISSOCK(st.st_mode))
                    self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, self.uid))
                    with d.client() as c:   # root is served by every daemon
                        self.assertEqual(c.call("ping"), "pong")
                    self.assertEqual(d.stop(), 0)
                    self.assertFalse(os.path.lexists(self.sock))
                    self.assertTrue(os.path.isdir(self.dir), "the directory is kept for the next start")
                finally:
                    d.close()

    def test_symbolic_link_refused_even_to_a_good_directory(self):
        target = tempfile.mkdtemp(prefix="fetchd-linked-")
        self.addCleanup(shutil.rmtree, target, True)
        os.chown(target, self.uid, self.uid)
        os.symlink(target, self.dir)
        self.refused("symbolic link")
        self.assertEqual(os.listdir(target), [], "something was created through the link")
        self.assertTrue(os.path.islink(self.dir))

    def test_file_refused(self):
        with open(self.dir, "w") as f:
            f.write("not a directory\n")
        os.chown(self.dir, self.uid, self.uid)
        self.refused("not a directory")

    def test_open_modes_refused(self):
        os.mkdir(self.dir)
        os.chown(self.dir, self.uid, self.uid)
        for mode in (0o777, 0o1777, 0o755, 0o750, 0o701):
            with self.subTest(mode=oct(mode)):
                os.chmod(self.dir, mode)
                self.refused(f"mode 0{mode:o}", "must be 0700")
                self.assertEqual(os.listdir(self.dir), [])

    def test_another_users_directory_refused(self):
        os.mkdir(self.dir, 0o700)
        os.chown(self.dir, NOBODY, NOBODY)
        self.refused(f"owned by uid {NOBODY}, not by uid {self.uid}")

    def test_taken_by_another_user_with_a_listener(self):
        # Another user made the path first and listens on it.
        with taken_fallback(self.uid) as fake:
            self.refused(f"owned by uid {NOBODY}")
        self.assertEqual(fake.received, {"accepted": 0, "bytes": 0})


if __name__ == "__main__":
    unittest.main()
