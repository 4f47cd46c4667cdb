"""download's restart after a 416: a part file that already holds the whole file
(or more) makes the resume ask for `Range: bytes=<size>-`, the server answers 416, and the
download starts over from zero. That restart stays the same job: one id, one answer, not
counted as a failure, one HAR file, and cancellable throughout.

Servers: nginx (static files, native ETag + Range: 416 past the end) and the test server's
/ranged/<n>?full-delay-ms=T, whose 200 waits, so that a cancel can arrive during the restart."""
import json
import os
import shutil
import tempfile
import unittest

from harness import DaemonTestCase, big_bin, sha256, wait_for
from jobhelpers import collect, job_entry, key, list_jobs, send_request
from test_download import VALIDATOR, getxattr, nginx_etag, ranged_log, read
import testserver

class RestartCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="dl416-", dir=self.daemon.tmpdir)

    def tearDown(self):
        try:
            self.c.call("setLogging", {"enabled": False})
        finally:
            super().tearDown()
            shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name="out.bin"):
        return os.path.join(self.dir, name)

    def make_part(self, path, data, validator):
        with open(path + ".part", "wb") as f:
            f.write(data)
        os.setxattr(path + ".part", VALIDATOR, validator.encode())

    def jobs_counts(self):
        with self.daemon.client() as c2:
            return c2.call("getStatus")["jobs"]

    def download_once(self, params, timeout=30):
        """Send one download; return (Collected, its answer) after checking that it is the only
        answer: the next message on the connection answers a ping sent after it."""
        rid = send_request(self.c, "download", params)
        got = collect(self.c, rid, timeout=timeout)
        pid = send_request(self.c, "ping", None)
        while True:
            m = self.c.recv(timeout=10)
            if isinstance(m, dict) and "method" in m and "id" not in m:
                continue  # a late notification of the job, not an answer
            self.assertEqual(m.get("id"), pid, f"a second answer to the download: {json.dumps(m)[:500]}")
            self.assertEqual(m.get("result"), "pong", m)
            break
        self.assertEqual(got.others, [], "messages that were neither notifications nor the answer")
        return got, got.answer

    def assertWholeFile(self, answer, path, data, job):
        self.assertIn("result", answer, f"the download failed: {json.dumps(answer)[:600]}")
        r = answer["result"]
        self.assertEqual(r.get("jobId"), job, r)
        self.assertEqual(r.get("status"), 200, r)
        self.assertEqual(r.get("path"), path, r)
        self.assertEqual(r.get("bytes"), len(data), r)
        self.assertEqual(r.get("sha256"), sha256(data), r)
        self.assertIs(r.get("resumed"), False, f"a restarted download is not resumed: {r}")
        self.assertEqual(sha256(read(path)), sha256(data), "file content at path")
        self.assertFalse(os.path.exists(path + ".part"), "the .part file is still there after success")
        self.assertIsNone(getxattr(path), "the validator xattr stayed on the landed file")


class TestRestartAfter416(RestartCase):
    """nginx: a part file of the whole big.bin (or more), with nginx's own ETag."""

    def check_restart(self, part_bytes):
        data = big_bin()
        path = self.path()
        self.make_part(path, part_bytes, nginx_etag("big.bin"))
        job = key("r416")
        before = self.jobs_counts()
        got, answer = self.download_once({"url": self.srv.nginx_url + "/big.bin", "path": path, "jobId": job,
                                          "progress": True})
        self.assertWholeFile(answer, path, data, job)
        notes = [n for _, n in got.notes]
        self.assertTrue(notes, "no progress notifications at all")
        self.assertEqual({n["params"].get("jobId") for n in notes}, {job},
                         f"every notification carries the one jobId: {notes[:5]}")
        wait_for(lambda: job_entry(self.c, job) is None, timeout=5, message=f"job still listed: {list_jobs(self.c)}")
        return before, self.jobs_counts()

    def test_whole_part_file_restarts_and_lands_the_right_file(self):
        before, after = self.check_restart(big_bin())
        self.assertEqual(after["finished"], before["finished"] + 1, (before, after))

    def test_longer_part_file_restarts_and_lands_the_right_file(self):
        self.check_restart(big_bin() + b"more bytes than the file has")

    def test_restart_is_not_counted_as_failed(self):
        before, after = self.check_restart(big_bin())
        self.assertEqual(after["failed"], before["failed"], f"a 416 restart counted as failed: {before} -> {after}")


class TestRestartHAR(RestartCase):
    def har_files(self, logdir, job):
        return sorted(f for f in os.listdir(logdir) if f.endswith(f"-{job}.har"))

    def test_one_har_file_with_both_attempts(self):
        logdir = os.path.join(self.dir, "har")
        self.c.call("setLogging", {"enabled": True, "directory": logdir})
        data = big_bin()
        path = self.path()
        self.make_part(path, data, nginx_etag("big.bin"))
        job = key("har416")
        _, answer = self.download_once({"url": self.srv.nginx_url + "/big.bin", "path": path, "jobId": job})
        self.assertWholeFile(answer, path, data, job)
        wait_for(lambda: self.har_files(logdir, job), timeout=10, message=f"no HAR file for {job}")
        # HAR files are written in order on one queue: once a later job's file is there,
        # every file of the download (one per restart, if it were so) is there too.
        sentinel = key("sentinel")
        self.c.call("fetch", {"url": self.srv.nginx_url + "/small.txt", "jobId": sentinel}, timeout=30)
        wait_for(lambda: self.har_files(logdir, sentinel), timeout=10, message="no HAR file for the sentinel fetch")
        files = self.har_files(logdir, job)
        entries = []
        for f in files:
            with open(os.path.join(logdir, f)) as fh:
                entries.append([(e["response"]["status"],
                                 [h["value"] for h in e["request"]["headers"] if h["name"].lower() == "range"])
                                for e in json.load(fh)["log"]["entries"]])
        self.assertEqual(len(files), 1, f"one HAR file for the job, not one per restart: {files}: {entries}")
        statuses = [s for s, _ in entries[0]]
        self.assertEqual(statuses, [416, 200], f"the HAR holds the 416 attempt and the full 200: {entries}")
        self.assertEqual(entries[0][0][1], [f"bytes={len(data)}-"], entries)
        self.assertEqual(entries[0][1][1], [], f"the restart asks for the whole file: {entries}")


class TestCancelDuringRestart(RestartCase):
    """The test server: 416 to the range, then a 200 that waits until the client hangs up."""

    def test_cancel_during_the_restart_is_honoured(self):
        n = 300000
        name = key("c416")
        url = f"{self.srv.test_url}/ranged/{n}?key={name}&etag=R416&full-delay-ms=20000"
        path = self.path()
        self.make_part(path, testserver.det_bytes(n), '"R416"')
        job = key("cjob")
        rid = send_request(self.c, "download", {"url": url, "path": path, "jobId": job})
        log = wait_for(lambda: (lambda l: l if len(l) >= 2 else None)(ranged_log(name)), timeout=10,
                       message=f"the restart never reached the server: {ranged_log(name)}")
        self.assertEqual((log[0]["range"], log[0]["ifRange"], log[0]["status"]), (f"bytes={n}-", '"R416"', 416), log)
        self.assertEqual((log[1]["range"], log[1]["status"]), (None, 200), f"the restart asks for the whole file: {log}")
        with self.daemon.client() as c2:
            listed = [j for j in list_jobs(c2) if j.get("jobId") == job]
            self.assertEqual(len(listed), 1, f"the restart is listed as the one job: {list_jobs(c2)}")
            self.assertEqual(c2.call("cancel", {"jobId": job}), {"cancelled": True},
                             "a cancel during the restart must find the job")
        answer = collect(self.c, rid, timeout=10).answer
        self.assertEqual(answer.get("error", {}).get("code"), -32002, answer)
        self.assertEqual(answer["error"].get("data"), {"jobId": job, "by": "cancel"}, answer)
        self.assertFalse(os.path.exists(path), "a cancelled download left a file at path")
        self.assertEqual(len(ranged_log(name)), 2, f"no attempt after the cancel: {ranged_log(name)}")
        wait_for(lambda: job_entry(self.c, job) is None, timeout=5, message=f"job still listed: {list_jobs(self.c)}")
        self.assertEqual(self.c.call("ping"), "pong")


if __name__ == "__main__":
    unittest.main()
