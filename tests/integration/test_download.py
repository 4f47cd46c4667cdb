"""download: streamed to <path>.part, landed at path only when complete and verified,
resumed with Range + If-Range, and never a broken file at path.

Servers: nginx (static files, native ETag + Range) and the test server's /ranged/<n> (ETag,
Range, If-Range, a first request per key that is reset or stalls mid-body, /ranged-log/<key>)."""
import base64
import json
import os
import resource
import shutil
import signal
import tempfile
import unittest
import urllib.request

from harness import AllowDirCase, Daemon, DaemonTestCase, RPCError, big_bin, closed_port, servers, sha256, wait_for
from jobhelpers import collect, hits, job_entry, key, list_jobs, send_request
import testserver

VALIDATOR = "user.fetchd.validator"


def ranged_log(name):
    with urllib.request.urlopen(f"{servers().test_url}/ranged-log/{name}", timeout=10) as r:
        return json.loads(r.read())["requests"]


def nginx_etag(name):
    req = urllib.request.Request(f"{servers().nginx_url}/{name}", method="HEAD")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers["ETag"]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def getxattr(path):
    try:
        return os.getxattr(path, VALIDATOR).decode()
    except OSError:
        return None


class DownloadCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="dl-", dir=self.daemon.tmpdir)

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name="out.bin"):
        return os.path.join(self.dir, name)

    def download(self, params, timeout=30, client=None):
        return (client or self.c).call("download", params, timeout=timeout)

    def download_error(self, params, timeout=30, client=None):
        try:
            r = (client or self.c).call("download", params, timeout=timeout)
        except RPCError as e:
            return e
        self.fail(f"download {json.dumps(params)[:300]} succeeded, expected an error; result: {json.dumps(r)[:500]}")

    def ranged(self, n, name, **opts):
        q = "&".join([f"key={name}"] + [f"{k.replace('_', '-')}={v}" for k, v in opts.items()])
        return f"{self.srv.test_url}/ranged/{n}?{q}"

    def assertDownloaded(self, r, path, data, resumed):
        self.assertEqual(r.get("path"), path, r)
        self.assertIn(r.get("status"), (200, 206), r)
        self.assertEqual(r.get("bytes"), len(data), f"result bytes: {json.dumps(r)[:400]}")
        self.assertEqual(r.get("sha256"), sha256(data), f"result sha256: {json.dumps(r)[:400]}")
        self.assertIs(r.get("resumed"), resumed, f"result resumed: {json.dumps(r)[:400]}")
        self.assertTrue(os.path.isfile(path), f"nothing at {path}")
        got = read(path)
        self.assertEqual(len(got), len(data), "file size at path")
        self.assertEqual(sha256(got), sha256(data), "file content at path")
        self.assertFalse(os.path.exists(path + ".part"), "the .part file is still there after success")
        self.assertIsNone(getxattr(path), "the validator xattr stayed on the landed file")
        for k in ("body", "bodyBase64", "json"):
            self.assertNotIn(k, r, f"a 2xx download result carries no body: {json.dumps(r)[:400]}")

    def assertNothingAt(self, path, part=False):
        self.assertFalse(os.path.exists(path), f"something was left at {path}")
        if not part:
            self.assertFalse(os.path.exists(path + ".part"), f"a .part file was left at {path}.part")

    def assertFileError(self, e, path=None):
        self.assertEqual(e.code, -32003, e)
        self.assertIsInstance(e.data, dict, e)
        self.assertIsInstance(e.data.get("detail"), str, e)
        if path is not None:
            self.assertEqual(e.data.get("path"), path, e)


class TestDownloadBasics(DownloadCase):
    def test_nginx_big_file(self):
        path = self.path("big.bin")
        r = self.download({"url": self.srv.nginx_url + "/big.bin", "path": path})
        self.assertEqual(r["status"], 200, r)
        self.assertDownloaded(r, path, big_bin(), resumed=False)
        self.assertIsInstance(r.get("jobId"), str, r)
        self.assertIsInstance(r.get("headers"), dict, r)
        self.assertEqual(r.get("url"), self.srv.nginx_url + "/big.bin", r)
        self.assertEqual(os.listdir(self.dir), ["big.bin"], "only the file is left in the directory")

    def test_test_server_bytes(self):
        path = self.path()
        r = self.download({"url": self.srv.test_url + "/bytes/200000", "path": path})
        self.assertDownloaded(r, path, testserver.det_bytes(200000), resumed=False)

    def test_redirect_followed(self):
        path = self.path()
        r = self.download({"url": self.srv.test_url + "/redirect-to?url=/bytes/1000", "path": path})
        self.assertDownloaded(r, path, testserver.det_bytes(1000), resumed=False)
        self.assertEqual(r.get("url"), self.srv.test_url + "/bytes/1000", r)
        self.assertEqual(r.get("redirects"), 1, r)

    def test_empty_body(self):
        path = self.path()
        r = self.download({"url": self.ranged(0, key("empty")), "path": path})
        self.assertDownloaded(r, path, b"", resumed=False)

    def test_404_writes_nothing(self):
        path = self.path()
        r = self.download({"url": self.srv.test_url + "/status/404", "path": path})
        self.assertEqual(r.get("status"), 404, r)
        self.assertEqual(r.get("body"), "status 404", f"the error answer's body is in the result: {r}")
        self.assertNothingAt(path)
        self.assertEqual(os.listdir(self.dir), [], "nothing at all is left in the directory")

    def test_nginx_404_writes_nothing(self):
        path = self.path()
        r = self.download({"url": self.srv.nginx_url + "/no-such-file", "path": path})
        self.assertEqual(r.get("status"), 404, r)
        self.assertIn("404", r.get("body", ""), r)
        self.assertNothingAt(path)

    def test_error_body_capped_at_64k(self):
        path = self.path()
        n = 200000
        r = self.download({"url": self.ranged(n, key("e500"), status=500), "path": path, "retry": False})
        self.assertEqual(r.get("status"), 500, json.dumps(r)[:300])
        body = base64.b64decode(r["bodyBase64"]) if "bodyBase64" in r else r.get("body", "").encode()
        self.assertEqual(len(body), 64 * 1024, "up to 64 KiB of an error body is kept")
        self.assertEqual(body, testserver.det_bytes(n)[:64 * 1024], "the kept body is the answer's start")
        self.assertNothingAt(path)

    def test_existing_path_refused_before_any_request(self):
        path = self.path()
        with open(path, "wb") as f:
            f.write(b"old")
        name = key("exists")
        e = self.download_error({"url": f"{self.srv.test_url}/record/{name}", "path": path})
        self.assertFileError(e, path)
        self.assertEqual(hits(name)["count"], 0, "a request was sent although the path exists")
        self.assertEqual(read(path), b"old", "the existing file was touched")
        self.assertFalse(os.path.exists(path + ".part"))
        e = self.download_error({"url": f"{self.srv.test_url}/record/{name}", "path": path, "overwrite": False})
        self.assertFileError(e, path)
        self.assertEqual(hits(name)["count"], 0, "a request was sent although the path exists")

        r = self.download({"url": f"{self.srv.test_url}/record/{name}", "path": path, "overwrite": True})
        self.assertDownloaded(r, path, b"recorded", resumed=False)
        self.assertEqual(hits(name)["count"], 1)

    def test_overwrite_a_directory_refused(self):
        path = self.path("sub")
        os.mkdir(path)
        name = key("dir")
        e = self.download_error({"url": f"{self.srv.test_url}/record/{name}", "path": path, "overwrite": True})
        self.assertFileError(e, path)
        self.assertEqual(hits(name)["count"], 0, "a request was sent for a path that is a directory")
        self.assertTrue(os.path.isdir(path))

    def test_sha256_match(self):
        path = self.path()
        r = self.download({"url": self.srv.nginx_url + "/big.bin", "path": path, "sha256": sha256(big_bin())})
        self.assertDownloaded(r, path, big_bin(), resumed=False)

    def test_sha256_match_uppercase(self):
        path = self.path()
        data = testserver.det_bytes(1000)
        r = self.download({"url": self.srv.test_url + "/bytes/1000", "path": path, "sha256": sha256(data).upper()})
        self.assertDownloaded(r, path, data, resumed=False)

    def test_sha256_mismatch_leaves_nothing(self):
        path = self.path()
        e = self.download_error({"url": self.srv.nginx_url + "/big.bin", "path": path, "sha256": "0" * 64})
        self.assertFileError(e, path)
        self.assertNothingAt(path)
        self.assertEqual(os.listdir(self.dir), [], "nothing at all is left in the directory")

    def test_sha256_mismatch_keeps_old_file_with_overwrite(self):
        path = self.path()
        with open(path, "wb") as f:
            f.write(b"old")
        e = self.download_error({"url": self.srv.test_url + "/bytes/5000", "path": path, "overwrite": True,
                                 "sha256": "ab" * 32})
        self.assertFileError(e, path)
        self.assertEqual(read(path), b"old", "a download that failed verification replaced the file")
        self.assertFalse(os.path.exists(path + ".part"))

    def test_bad_params(self):
        url = self.srv.test_url + "/bytes/10"
        cases = [
            ({"url": url}, "path"),
            ({"url": url, "path": "relative/out.bin"}, "path"),
            ({"url": url, "path": "out.bin"}, "path"),
            ({"url": url, "path": 5}, "path"),
            ({"url": url, "path": self.path(), "overwrite": "yes"}, "overwrite"),
            ({"url": url, "path": self.path(), "resume": 1}, "resume"),
            ({"url": url, "path": self.path(), "sha256": "abc"}, "sha256"),
            ({"url": url, "path": self.path(), "sha256": "g" * 64}, "sha256"),
            ({"url": url, "path": self.path(), "pathh": "/tmp/x"}, "pathh"),
        ]
        for params, field in cases:
            with self.subTest(params=params):
                e = self.download_error(params)
                self.assertEqual(e.code, -32602, e)
                self.assertEqual((e.data or {}).get("field"), field, e)
        self.assertEqual(os.listdir(self.dir), [])

    def test_missing_directory(self):
        path = os.path.join(self.dir, "no", "such", "dir", "out.bin")
        name = key("nodir")
        e = self.download_error({"url": f"{self.srv.test_url}/record/{name}", "path": path})
        self.assertFileError(e, path)
        self.assertEqual(hits(name)["count"], 0, "a request was sent although the directory is missing")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "no")))

    def test_transport_failure_leaves_no_empty_part(self):
        path = self.path()
        e = self.download_error({"url": f"http://127.0.0.1:{closed_port()}/x", "path": path, "retry": False})
        self.assertEqual(e.code, -32001, e)
        self.assertNothingAt(path)

    def test_progress(self):
        path = self.path()
        rid = send_request(self.c, "download", {"url": self.srv.nginx_url + "/big.bin", "path": path,
                                                "progress": True})
        got = collect(self.c, rid, timeout=30)
        self.assertIn("result", got.answer, got.answer)
        notes = [p for _, p in got.of("progress")]
        self.assertTrue(notes, "no progress notifications")
        self.assertEqual(notes[-1].get("receivedBytes"), len(big_bin()), notes[-1])


class TestDownloadResume(DownloadCase):
    N = 300000
    CUT = 100000

    def fail_first(self, url, path):
        """A download whose server resets mid-body (no retry): error, nothing at path, a .part."""
        e = self.download_error({"url": url, "path": path, "retry": False})
        self.assertEqual(e.code, -32001, e)
        self.assertFalse(os.path.exists(path), f"a failed download left a file at {path}")
        self.assertTrue(os.path.isfile(path + ".part"), "the .part file was not kept for resuming")
        return read(path + ".part")

    def test_reset_mid_body_then_resume(self):
        name = key("reset")
        url = self.ranged(self.N, name, etag="E1", reset_after=self.CUT)
        data = testserver.det_bytes(self.N)
        path = self.path()
        part = self.fail_first(url, path)
        self.assertTrue(0 < len(part) <= self.CUT, f"part file holds {len(part)} bytes")
        self.assertEqual(part, data[:len(part)], "the part holds the start of the body")
        self.assertEqual(getxattr(path + ".part"), '"E1"', "the validator is kept in the xattr")

        r = self.download({"url": url, "path": path, "retry": False})
        self.assertDownloaded(r, path, data, resumed=True)
        log = ranged_log(name)
        self.assertEqual(len(log), 2, log)
        self.assertEqual(log[1]["range"], f"bytes={len(part)}-", log)
        self.assertEqual(log[1]["ifRange"], '"E1"', log)
        self.assertEqual(log[1]["status"], 206, log)

    def test_reset_mid_body_with_retry_resumes_in_one_job(self):
        name = key("retry")
        url = self.ranged(self.N, name, etag="E2", reset_after=self.CUT)
        data = testserver.det_bytes(self.N)
        path = self.path()
        r = self.download({"url": url, "path": path, "retry": {"maxInterval": 0.05}})
        self.assertDownloaded(r, path, data, resumed=True)
        self.assertEqual(r.get("attempts"), 2, r)
        log = ranged_log(name)
        self.assertEqual([x["status"] for x in log], [200, 206], log)

    def test_resume_false_starts_over(self):
        name = key("noresume")
        url = self.ranged(self.N, name, etag="E3", reset_after=self.CUT)
        data = testserver.det_bytes(self.N)
        path = self.path()
        self.fail_first(url, path)
        r = self.download({"url": url, "path": path, "retry": False, "resume": False})
        self.assertDownloaded(r, path, data, resumed=False)
        log = ranged_log(name)
        self.assertIsNone(log[-1]["range"], f"resume: false still sent a Range: {log}")

    def test_changed_validator_restarts(self):
        name = key("changed")
        path = self.path()
        self.fail_first(self.ranged(self.N, name, etag="v1", seed=1, reset_after=self.CUT), path)
        new = testserver.det_bytes(self.N, seed=2)
        r = self.download({"url": self.ranged(self.N, name, etag="v2", seed=2), "path": path, "retry": False})
        self.assertDownloaded(r, path, new, resumed=False)
        log = ranged_log(name)
        self.assertEqual(log[-1]["ifRange"], '"v1"', log)
        self.assertEqual(log[-1]["status"], 200, log)

    def test_server_ignoring_ranges_restarts_cleanly(self):
        name = key("norange")
        url = self.ranged(self.N, name, etag="E4", reset_after=self.CUT, no_range=1)
        data = testserver.det_bytes(self.N)
        path = self.path()
        self.fail_first(url, path)
        r = self.download({"url": url, "path": path, "retry": False})
        self.assertDownloaded(r, path, data, resumed=False)
        log = ranged_log(name)
        self.assertIsNotNone(log[-1]["range"], f"the resume sent no Range: {log}")
        self.assertEqual(log[-1]["status"], 200, log)

    def test_last_modified_validator(self):
        name = key("lm")
        url = self.ranged(self.N, name, etag="", reset_after=self.CUT)
        data = testserver.det_bytes(self.N)
        path = self.path()
        self.fail_first(url, path)
        self.assertEqual(getxattr(path + ".part"), testserver.LAST_MODIFIED)
        r = self.download({"url": url, "path": path, "retry": False})
        self.assertDownloaded(r, path, data, resumed=True)
        self.assertEqual(ranged_log(name)[-1]["ifRange"], testserver.LAST_MODIFIED)

    def test_part_without_validator_starts_over(self):
        name = key("novalidator")
        data = testserver.det_bytes(self.N)
        path = self.path()
        with open(path + ".part", "wb") as f:
            f.write(b"garbage" * 1000)
        r = self.download({"url": self.ranged(self.N, name, etag="E5"), "path": path})
        self.assertDownloaded(r, path, data, resumed=False)

    def test_sha256_checked_over_resumed_file(self):
        name = key("shaok")
        url = self.ranged(self.N, name, etag="E6", reset_after=self.CUT)
        data = testserver.det_bytes(self.N)
        path = self.path()
        self.fail_first(url, path)
        r = self.download({"url": url, "path": path, "sha256": sha256(data)})
        self.assertDownloaded(r, path, data, resumed=True)

    def test_sha256_mismatch_after_resume_leaves_nothing(self):
        name = key("shabad")
        url = self.ranged(self.N, name, etag="E7", reset_after=self.CUT)
        path = self.path()
        self.fail_first(url, path)
        e = self.download_error({"url": url, "path": path, "sha256": "1" * 64})
        self.assertFileError(e, path)
        self.assertNothingAt(path)

    # nginx: a .part as a broken download leaves it, continued with nginx's own ETag and Range.
    def make_part(self, path, data, validator):
        with open(path + ".part", "wb") as f:
            f.write(data)
        if validator is not None:
            os.setxattr(path + ".part", VALIDATOR, validator.encode())

    def test_nginx_resume(self):
        path = self.path()
        data = big_bin()
        self.make_part(path, data[:2 * 1024 * 1024 + 17], nginx_etag("big.bin"))
        r = self.download({"url": self.srv.nginx_url + "/big.bin", "path": path, "sha256": sha256(data)})
        self.assertEqual(r.get("status"), 206, r)
        self.assertDownloaded(r, path, data, resumed=True)

    def test_nginx_stale_validator_restarts(self):
        path = self.path()
        data = big_bin()
        self.make_part(path, b"x" * 1000, '"0-stale"')
        r = self.download({"url": self.srv.nginx_url + "/big.bin", "path": path})
        self.assertEqual(r.get("status"), 200, r)
        self.assertDownloaded(r, path, data, resumed=False)

    def test_nginx_resume_after_reset_from_test_server(self):
        """The part a reset left (bytes of big.bin from the test server) is finished by nginx."""
        # /ranged with seed 4242 serves big.bin's bytes; its ETag is made to be nginx's.
        etag = nginx_etag("big.bin").strip('"')
        name = key("mixed")
        path = self.path()
        part = self.fail_first(self.ranged(len(big_bin()), name, etag=etag, seed=4242, reset_after=1 << 20), path)
        self.assertEqual(part, big_bin()[:len(part)])
        r = self.download({"url": self.srv.nginx_url + "/big.bin", "path": path})
        self.assertDownloaded(r, path, big_bin(), resumed=True)


class TestDownloadCancel(DownloadCase):
    def test_cancelled_download_then_resumed(self):
        name = key("cancel")
        n, cut = 400000, 150000
        url = self.ranged(n, name, etag="C1", stall_after=cut)
        data = testserver.det_bytes(n)
        path = self.path()
        rid = send_request(self.c, "download", {"url": url, "path": path, "jobId": name})
        wait_for(lambda: os.path.exists(path + ".part") and os.path.getsize(path + ".part") >= cut, timeout=10,
                 message="the part file never got the first bytes")
        with self.daemon.client() as c2:
            self.assertEqual(c2.call("cancel", {"jobId": name}), {"cancelled": True})
        answer = collect(self.c, rid, timeout=10).answer
        self.assertEqual(answer.get("error", {}).get("code"), -32002, answer)
        self.assertEqual(answer["error"].get("data"), {"jobId": name, "by": "cancel"}, answer)
        self.assertFalse(os.path.exists(path), "a cancelled download left a file at path")
        self.assertTrue(os.path.isfile(path + ".part"), "the cancelled download's .part is gone")
        self.assertEqual(read(path + ".part"), data[:cut])

        r = self.download({"url": url, "path": path, "sha256": sha256(data)})
        self.assertDownloaded(r, path, data, resumed=True)
        self.assertEqual(ranged_log(name)[-1]["range"], f"bytes={cut}-")

    def test_cancel_before_body_removes_empty_part(self):
        name = key("cancel0")
        url = self.ranged(1000, name, etag="C2", stall_after=0)
        path = self.path()
        rid = send_request(self.c, "download", {"url": url, "path": path, "jobId": name})
        wait_for(lambda: ranged_log(name), timeout=10, message="the request never reached the server")
        wait_for(lambda: (job_entry(self.c, name) or {}).get("state") == "running", timeout=5,
                 message=f"job not running: {list_jobs(self.c)}")
        self.assertEqual(self.c.call("cancel", {"jobId": name}), {"cancelled": True})
        answer = collect(self.c, rid, timeout=10).answer
        self.assertEqual(answer.get("error", {}).get("code"), -32002, answer)
        self.assertNothingAt(path)

    def test_disconnect_keeps_part(self):
        name = key("disc")
        n, cut = 300000, 50000
        url = self.ranged(n, name, etag="C3", stall_after=cut)
        path = self.path()
        c2 = self.daemon.client()
        send_request(c2, "download", {"url": url, "path": path, "jobId": name})
        wait_for(lambda: os.path.exists(path + ".part") and os.path.getsize(path + ".part") >= cut, timeout=10,
                 message="the part file never got the first bytes")
        c2.close()
        wait_for(lambda: job_entry(self.c, name) is None, timeout=5,
                 message=f"job still listed after its connection closed: {list_jobs(self.c)}")
        self.assertFalse(os.path.exists(path))
        self.assertEqual(os.path.getsize(path + ".part"), cut)
        r = self.download({"url": url, "path": path})
        self.assertDownloaded(r, path, testserver.det_bytes(n), resumed=True)


def limit_file_size_to_1mib():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


class TestDownloadWriteFailure(DownloadCase):
    """A write to the part file that fails (here the daemon's file size limit, RLIMIT_FSIZE at
    1 MiB, with SIGXFSZ ignored: pwrite gets EFBIG) fails the download with -32003 naming the
    part file, lands nothing at path, and the daemon goes on serving. The body reaches the
    file in blocks, so the failing write can come in the middle of the transfer or with the
    last block after libcurl has finished: both must fail the download."""
    LIMIT = 1 << 20
    DAEMON_PREEXEC = staticmethod(limit_file_size_to_1mib)

    def failed_write(self, n):
        name = key("efbig")
        path = self.path(f"{name}.bin")
        url = f"{self.srv.test_url}/ranged/{n}?key={name}&etag=F{n}"
        try:
            r = self.c.call("download", {"url": url, "path": path, "retry": False}, timeout=30)
        except RPCError as e:
            self.assertEqual(e.code, -32003, e)
            self.assertEqual((e.data or {}).get("path"), path + ".part", e)
            self.assertIn("File too large", (e.data or {}).get("detail", ""), e)
        else:
            self.fail(f"a download of {n} bytes past a {self.LIMIT}-byte file limit succeeded: {json.dumps(r)[:400]}")
        self.assertFalse(os.path.exists(path), f"a file was landed at {path}")
        self.assertEqual(self.c.call("ping"), "pong")
        # The daemon goes on: a download under the limit lands whole.
        small = testserver.det_bytes(70000)
        ok_path = self.path(f"{name}-small.bin")
        r = self.c.call("download", {"url": f"{self.srv.test_url}/ranged/70000?key={name}-s&etag=S",
                                     "path": ok_path}, timeout=30)
        self.assertEqual(r.get("sha256"), sha256(small), r)
        self.assertEqual(read(ok_path), small)

    def test_write_fails_in_the_middle_of_the_body(self):
        self.failed_write(4 << 20)

    def test_write_fails_near_the_end_of_the_body(self):
        # A whole number of libcurl's 16 KiB pieces past the limit: the last block may only
        # be written once libcurl has reported the transfer complete.
        self.failed_write(self.LIMIT + (64 << 10))


class TestDownloadAllowDir(AllowDirCase):
    def refused(self, path):
        name = key("allow")
        try:
            r = self.c.call("download", {"url": f"{self.srv.test_url}/record/{name}", "path": path}, timeout=20)
        except RPCError as e:
            self.assertEqual(e.code, -32004, e)
            self.assertIsInstance((e.data or {}).get("detail"), str, e)
        else:
            self.fail(f"download to {path} outside --allow-dir succeeded: {r}")
        self.assertEqual(hits(name)["count"], 0, "a request was sent for a refused path")
        self.assertFalse(os.path.exists(path))
        self.assertFalse(os.path.exists(path + ".part"))

    def test_outside_refused(self):
        self.refused(os.path.join(self.outside, "x.bin"))

    def test_dotdot_escape_refused(self):
        self.refused(os.path.join(self.allowed, "..", "outside", "y.bin"))

    def test_symlink_escape_refused(self):
        link = os.path.join(self.allowed, "link")
        if not os.path.lexists(link):
            os.symlink(self.outside, link)
        self.refused(os.path.join(link, "z.bin"))

    def test_inside_allowed(self):
        path = os.path.join(self.allowed, "ok.bin")
        r = self.c.call("download", {"url": self.srv.test_url + "/bytes/1000", "path": path, "overwrite": True},
                        timeout=20)
        self.assertEqual(r.get("sha256"), sha256(testserver.det_bytes(1000)), r)
        self.assertEqual(read(path), testserver.det_bytes(1000))


if __name__ == "__main__":
    unittest.main()
