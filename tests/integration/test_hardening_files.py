"""Hardening: files a client names are never written through a
symbolic link or a second hard link, never held open on a FIFO, and a resumable upload whose
chunk fails is never reported as a success. Each case is a reproduction from the probe of the
release daemon, run against the real fetchd, nginx and the test server."""
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import unittest

from harness import AllowDirCase, DaemonTestCase, RPCError, closed_port, ping_seconds, sha256
from jobhelpers import hits, key
import testserver

PRECIOUS = b"precious: must never be overwritten\n"


def read(path):
    with open(path, "rb") as f:
        return f.read()


class FilesCase(AllowDirCase):
    """A daemon with --allow-dir: the attacker plants links inside the allowed directory."""
    OUTSIDE = "elsewhere"

    def setUp(self):
        super().setUp()
        self.elsewhere = self.outside
        self.precious = os.path.join(self.elsewhere, key("precious") + ".txt")
        with open(self.precious, "wb") as f:
            f.write(PRECIOUS)

    def call_error(self, method, params, timeout=10):
        try:
            r = self.c.call(method, params, timeout=timeout)
        except RPCError as e:
            return e
        self.fail(f"{method} {json.dumps(params)[:300]} succeeded, expected an error: {json.dumps(r)[:300]}")

    def assertPing(self):
        """Another client is served at once (nothing holds the engine thread)."""
        self.assertLess(ping_seconds(self.daemon), 2.0)

    def assertPreciousIntact(self):
        self.assertEqual(read(self.precious), PRECIOUS, "a file outside --allow-dir was written through a link")


class TestNoWritingThroughLinks(FilesCase):
    def test_planted_part_symlink_is_refused(self):
        """ln -s /elsewhere/precious.txt /allowed/x.bin.part; download to /allowed/x.bin."""
        path = os.path.join(self.allowed, key("x") + ".bin")
        os.symlink(self.precious, path + ".part")
        e = self.call_error("download", {"url": self.srv.nginx_url + "/big.bin", "path": path})
        self.assertEqual(e.code, -32003, e)
        self.assertEqual((e.data or {}).get("path"), path + ".part", e)
        self.assertIn("symbolic link", (e.data or {}).get("detail", ""), e)
        self.assertPreciousIntact()
        self.assertFalse(os.path.lexists(path), "something landed under the final name")
        self.assertTrue(os.path.islink(path + ".part"), "the planted link should be left as it was")

    def test_planted_part_symlink_with_overwrite_and_resume_off(self):
        path = os.path.join(self.allowed, key("y") + ".bin")
        os.symlink(self.precious, path + ".part")
        e = self.call_error("download", {"url": self.srv.nginx_url + "/big.bin", "path": path,
                                         "overwrite": True, "resume": False})
        self.assertEqual(e.code, -32003, e)
        self.assertPreciousIntact()
        self.assertFalse(os.path.lexists(path))

    def test_planted_part_hard_link_is_refused(self):
        """A second hard link is what O_NOFOLLOW cannot see."""
        inside = os.path.join(self.allowed, key("victim") + ".txt")
        with open(inside, "wb") as f:
            f.write(PRECIOUS)
        path = os.path.join(self.allowed, key("h") + ".bin")
        os.link(inside, path + ".part")
        e = self.call_error("download", {"url": self.srv.nginx_url + "/big.bin", "path": path})
        self.assertEqual(e.code, -32003, e)
        self.assertIn("hard link", (e.data or {}).get("detail", ""), e)
        self.assertEqual(read(inside), PRECIOUS)

    def test_dangling_link_under_final_name_counts_as_existing(self):
        path = os.path.join(self.allowed, key("d") + ".bin")
        target = os.path.join(self.elsewhere, key("created-through-link"))
        os.symlink(target, path)
        e = self.call_error("download", {"url": self.srv.test_url + "/bytes/1000", "path": path})
        self.assertEqual(e.code, -32003, e)
        self.assertFalse(os.path.exists(target), "a file was created through the link")
        self.assertTrue(os.path.islink(path))

    def test_overwrite_replaces_a_link_never_writes_through_it(self):
        inside = os.path.join(self.allowed, key("target") + ".txt")
        with open(inside, "wb") as f:
            f.write(PRECIOUS)
        path = os.path.join(self.allowed, key("o") + ".bin")
        os.symlink(inside, path)
        r = self.c.call("download", {"url": self.srv.test_url + "/bytes/1000", "path": path, "overwrite": True},
                        timeout=20)
        self.assertEqual(r.get("sha256"), sha256(testserver.det_bytes(1000)), r)
        self.assertFalse(os.path.islink(path), "the final name is still a link")
        self.assertEqual(read(path), testserver.det_bytes(1000))
        self.assertEqual(read(inside), PRECIOUS, "the download was written through the link")
        self.assertFalse(os.path.lexists(path + ".part"))

    def test_final_name_linking_outside_is_refused(self):
        path = os.path.join(self.allowed, key("out") + ".bin")
        os.symlink(self.precious, path)
        e = self.call_error("download", {"url": self.srv.test_url + "/bytes/1000", "path": path, "overwrite": True})
        self.assertEqual(e.code, -32004, e)
        self.assertPreciousIntact()

    def test_har_files_never_follow_planted_links(self):
        """The HAR writer's temporary names were predictable (.<name>.har.tmp): links planted
        under every name it could pick pointed outside. Now its names are mkstemp-style."""
        logs = os.path.join(self.allowed, key("logs"))
        os.makedirs(logs)
        job = key("har")
        # Plant links for the old temporary names of every millisecond of the next 3 seconds.
        now = time.time()
        for ms in range(0, 3000, 1):
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now + ms / 1000)) + ".%03d" % int(((now + ms / 1000) % 1) * 1000)
            name = f".{stamp}-{job}.har.tmp"
            try:
                os.symlink(self.precious, os.path.join(logs, name))
            except FileExistsError:
                pass
        self.c.call("setLogging", {"enabled": True, "directory": logs}, timeout=10)
        try:
            self.c.call("fetch", {"url": self.srv.test_url + "/bytes/10", "jobId": job}, timeout=10)
            deadline = time.monotonic() + 10
            hars = []
            while time.monotonic() < deadline and not hars:
                hars = [n for n in os.listdir(logs) if n.endswith(".har") and job in n]
                time.sleep(0.05)
        finally:
            self.c.call("setLogging", {"enabled": False}, timeout=10)
        self.assertEqual(len(hars), 1, os.listdir(logs)[:5])
        har = os.path.join(logs, hars[0])
        self.assertFalse(os.path.islink(har))
        self.assertEqual(os.stat(har).st_mode & 0o777, 0o600)
        json.loads(read(har))
        self.assertPreciousIntact()


class TestFIFOs(FilesCase):
    def fifo(self, name):
        path = os.path.join(self.allowed, key(name))
        os.mkfifo(path)
        return path

    def test_fifo_body_file(self):
        path = self.fifo("body")
        name = key("fifo-body")
        e = self.call_error("fetch", {"url": f"{self.srv.test_url}/record/{name}", "bodyFile": path}, timeout=5)
        self.assertEqual(e.code, -32003, e)
        self.assertEqual((e.data or {}).get("path"), path, e)
        self.assertIn("FIFO", (e.data or {}).get("detail", ""), e)
        self.assertEqual(hits(name)["count"], 0)
        self.assertPing()

    def test_fifo_in_upload_files(self):
        path = self.fifo("up")
        good = os.path.join(self.allowed, key("good") + ".txt")
        with open(good, "wb") as f:
            f.write(b"ok")
        url = self.srv.test_url + "/multipart-echo"
        e = self.call_error("upload", {"url": url, "files": [{"path": good}, {"path": path}]}, timeout=5)
        self.assertEqual(e.code, -32003, e)
        self.assertEqual((e.data or {}).get("path"), path, e)
        r = self.c.call("upload", {"url": url, "files": [{"path": good}, {"path": path, "filename": "pipe"}],
                                   "skipUnreadable": True}, timeout=10)
        self.assertEqual(r.get("failedFiles"), ["pipe"], r)
        self.assertPing()

    def test_fifo_as_part_file(self):
        path = os.path.join(self.allowed, key("p") + ".bin")
        os.mkfifo(path + ".part")
        e = self.call_error("download", {"url": self.srv.test_url + "/bytes/1000", "path": path}, timeout=5)
        self.assertEqual(e.code, -32003, e)
        self.assertEqual((e.data or {}).get("path"), path + ".part", e)
        self.assertFalse(os.path.lexists(path))
        self.assertPing()

    def test_fifo_resumable_upload(self):
        path = self.fifo("resumable")
        e = self.call_error("upload", {"url": self.srv.test_url + "/resumable/start", "files": [{"path": path}],
                                       "resumable": {"chunkSize": 1 << 20}}, timeout=5)
        self.assertEqual(e.code, -32003, e)
        self.assertPing()

    def test_multipart_file_swapped_for_fifo_after_the_check(self):
        """libcurl no longer opens multipart files by name on the engine thread: the daemon
        opens them (non-blocking) before the transfer, so the bytes sent are the file's."""
        data = testserver.det_bytes(200_000, seed=7)
        path = os.path.join(self.allowed, key("m") + ".bin")
        with open(path, "wb") as f:
            f.write(data)
        r = self.c.call("upload", {"url": self.srv.test_url + "/multipart-echo", "files": [{"path": path}]},
                        timeout=20)
        parts = json.loads(r["body"])["parts"]
        self.assertEqual(parts[0]["sha256"], sha256(data), parts)
        self.assertEqual(parts[0]["filename"], os.path.basename(path), parts)


class TestResumableChunkFailure(DaemonTestCase):
    """A chunk that fails with an error that is not retried fails the upload with that error."""

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="rs-", dir=self.daemon.tmpdir)
        self.path = os.path.join(self.dir, "up.bin")
        with open(self.path, "wb") as f:
            f.write(testserver.det_bytes(300_000, seed=3))

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.dir, ignore_errors=True)

    def upload_error(self, upload_url):
        from urllib.parse import quote
        params = {"url": f"{self.srv.test_url}/resumable/start?upload-url={quote(upload_url, safe='')}",
                  "files": [{"path": self.path}], "resumable": {"chunkSize": 100_000},
                  "retry": {"maxAttempts": 2, "maxInterval": 0.05}}
        try:
            r = self.c.call("upload", params, timeout=30)
        except RPCError as e:
            return e
        self.fail(f"the upload to {upload_url} reported success: {json.dumps(r)[:400]}")

    def test_file_url(self):
        e = self.upload_error("file:///etc/hostname")
        self.assertIn(e.code, (-32001, -32004), e)

    def test_non_http_listener(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        stop = threading.Event()

        def garbage():
            listener.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                try:
                    conn.sendall(b"SSH-2.0-not-http\r\n\x00\x01\x02garbage\r\n\r\n")
                    time.sleep(0.05)
                finally:
                    conn.close()

        t = threading.Thread(target=garbage, daemon=True)
        t.start()
        try:
            e = self.upload_error(f"http://127.0.0.1:{port}/session")
        finally:
            stop.set()
            t.join(2)
            listener.close()
        self.assertEqual(e.code, -32001, e)
        self.assertGreaterEqual((e.data or {}).get("attempts", 0), 2, e)

    def test_https_on_a_plain_port(self):
        e = self.upload_error(f"https://127.0.0.1:{self.srv.test_port}/resumable/session/x")
        self.assertEqual(e.code, -32001, e)
        self.assertIn((e.data or {}).get("kind"), ("tls", "protocol", "connect", "other"), e)

    def test_refused_port(self):
        e = self.upload_error(f"http://127.0.0.1:{closed_port()}/session")
        self.assertEqual(e.code, -32001, e)
        self.assertEqual((e.data or {}).get("kind"), "connect", e)


if __name__ == "__main__":
    unittest.main()
