"""listJobs shows each job's kind and the state machine's phase, while the
version 1 `state` keeps its three values. Real fetchd, the test server."""
import os
import unittest

from harness import DaemonTestCase, wait_for
from jobhelpers import job_entry, key, list_jobs, send_request


class TestJobStates(DaemonTestCase):
    def entry(self, client, job_id, phase):
        return wait_for(lambda: (lambda j: j if j and j.get("phase") == phase else None)(job_entry(client, job_id)),
                        timeout=10, message=f"{job_id} never reached {phase}: {list_jobs(client)}")

    def test_running_and_held_by_the_host(self):
        host = f"127.0.0.1:{self.srv.test_port}"
        self.c.call("setRateLimit", {"host": host, "maxConcurrent": 1})
        try:
            first, second = key("run"), key("held")
            slow = self.srv.test_url + "/slow-body?chunks=20&ms=100"
            r1 = send_request(self.c, "fetch", {"url": slow, "jobId": first})
            with self.daemon.client() as c2:
                running = self.entry(c2, first, "running")
                r2 = send_request(self.c, "fetch", {"url": slow, "jobId": second})
                held = self.entry(c2, second, "waitingForHost")
                self.assertEqual((running["kind"], running["state"]), ("fetch", "running"), running)
                self.assertEqual((held["kind"], held["state"], held["attempt"]), ("fetch", "queued", 0), held)
                c2.call("cancel", {"jobId": second})
                c2.call("cancel", {"jobId": first})
            for rid in (r1, r2):
                self.assertEqual(self.c.answer_for(rid, 10)["error"]["code"], -32002)
        finally:
            self.c.call("setRateLimit", {"host": host, "maxConcurrent": None})

    def test_waiting_to_retry(self):
        job = key("retry")
        url = f"{self.srv.test_url}/flaky/{job}?fail=5&status=503&retry-after=30"
        rid = send_request(self.c, "fetch", {"url": url, "jobId": job, "retry": {"maxInterval": 30}})
        with self.daemon.client() as c2:
            waiting = self.entry(c2, job, "waitingToRetry")
            self.assertEqual((waiting["state"], waiting["attempt"]), ("waiting", 1), waiting)
            self.assertTrue(c2.call("cancel", {"jobId": job})["cancelled"])
        self.assertEqual(self.c.answer_for(rid, 10)["error"]["data"]["by"], "cancel")

    def test_download_and_upload_kinds(self):
        out = os.path.join(self.daemon.tmpdir, key("dl") + ".bin")
        dl, up = key("dl"), key("up")
        slow = self.srv.test_url + "/slow-body?chunks=20&ms=100"
        r1 = send_request(self.c, "download", {"url": slow, "path": out, "jobId": dl})
        r2 = send_request(self.c, "upload", {"url": slow, "jobId": up, "files": [{"content": "x"}]})
        with self.daemon.client() as c2:
            self.assertEqual(self.entry(c2, dl, "running")["kind"], "download")
            self.assertEqual(self.entry(c2, up, "running")["kind"], "upload")
            entry = job_entry(c2, up)
            self.assertEqual(entry["method"], "POST", entry)
            c2.call("cancel", {"jobId": dl})
            c2.call("cancel", {"jobId": up})
        for rid in (r1, r2):
            self.assertEqual(self.c.answer_for(rid, 10)["error"]["code"], -32002)


if __name__ == "__main__":
    unittest.main()
