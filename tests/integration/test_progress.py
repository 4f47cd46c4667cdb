"""progress notifications (protocol.md): only with "progress": true, only to the
requesting connection, monotonic, at most one per 100 ms per job, always a last one at the
total; a client that reads slowly still gets every answer and does not hold up other clients."""
import base64
import json
import socket
import time
import unittest

from harness import BIG_SIZE, DaemonTestCase, big_bin, sha256, wait_for
from jobhelpers import collect, collect_all, collect_more, job_entry, key, list_jobs, send_request

PROGRESS_KEYS = {"jobId", "sentBytes", "totalSendBytes", "receivedBytes", "totalReceiveBytes"}


class ProgressCase(DaemonTestCase):
    def run_fetch(self, params, client=None, timeout=30):
        client = client or self.c
        t0 = time.monotonic()
        rid = send_request(client, "fetch", params)
        got = collect(client, rid, timeout=timeout)
        got.start_time = t0
        return got

    def assertSeries(self, notes, job_id, field, total, total_field):
        """notes: [(t, params)] of one job. Monotonic, ending at total; returns the values."""
        self.assertTrue(notes, f"no progress notifications for job {job_id}")
        values = []
        for _, p in notes:
            self.assertTrue(PROGRESS_KEYS <= set(p), f"progress lacks {PROGRESS_KEYS - set(p)}: {p}")
            self.assertEqual(p["jobId"], job_id, p)
            for k in ("sentBytes", "receivedBytes"):
                self.assertIsInstance(p[k], int, p)
                self.assertGreaterEqual(p[k], 0, p)
            values.append(p[field])
        self.assertEqual(values, sorted(values), f"{field} not monotonic: {values}")
        last = notes[-1][1]
        self.assertEqual(last[field], total, f"last progress {last} should be at the total {total}")
        self.assertEqual(last[total_field], total, f"last progress {last}")
        return values

    def assertRate(self, notes, start, end):
        duration = end - start
        self.assertLessEqual(len(notes), duration / 0.1 + 3,
                             f"{len(notes)} progress notifications in {duration:.3f}s: more than one per 100 ms")


class TestProgress(ProgressCase):
    def test_big_body_from_test_server(self):
        job = key("big")
        n = 5_000_000
        got = self.run_fetch({"url": f"{self.srv.test_url}/bytes/{n}", "progress": True, "jobId": job,
                              "responseBody": "none"})
        r = got.answer.get("result")
        self.assertIsNotNone(r, got.answer)
        self.assertEqual((r["status"], r["bytes"]), (200, n), r)
        notes = got.of("progress", job)
        self.assertSeries(notes, job, "receivedBytes", n, "totalReceiveBytes")
        self.assertRate(notes, got.start_time, got.answer_time)
        self.assertEqual(got.of("retrying"), [])

    def test_big_body_from_nginx(self):
        job = key("nginx")
        got = self.run_fetch({"url": f"{self.srv.nginx_url}/big.bin", "progress": True, "jobId": job})
        r = got.answer.get("result")
        self.assertIsNotNone(r, got.answer)
        self.assertEqual((r["status"], r["bytes"]), (200, BIG_SIZE), r)
        self.assertEqual(sha256(base64.b64decode(r["bodyBase64"])), sha256(big_bin()))
        notes = got.of("progress", job)
        self.assertSeries(notes, job, "receivedBytes", BIG_SIZE, "totalReceiveBytes")
        self.assertRate(notes, got.start_time, got.answer_time)

    def test_at_most_one_per_100ms(self):
        # 40 one-byte writes over ~1 s: the engine sees ~40 progress events, the client gets ~10.
        job = key("slow")
        got = self.run_fetch({"url": f"{self.srv.test_url}/slow-body?chunks=40&ms=25", "progress": True,
                              "jobId": job})
        self.assertEqual(got.answer.get("result", {}).get("status"), 200, got.answer)
        notes = got.of("progress", job)
        values = self.assertSeries(notes, job, "receivedBytes", 40, "totalReceiveBytes")
        self.assertRate(notes, got.start_time, got.answer_time)
        self.assertGreaterEqual(len(set(values)), 3,
                                f"a ~1 s transfer should report progress along the way, got {values}")

    def test_last_progress_before_answer(self):
        job = key("order")
        got = self.run_fetch({"url": f"{self.srv.test_url}/slow-body?chunks=5&ms=40", "progress": True,
                              "jobId": job})
        notes = got.of("progress", job)
        self.assertTrue(notes and notes[-1][1]["receivedBytes"] == 5,
                        f"the final progress should come before the answer (fast reader): {[p for _, p in notes]}")

    def test_upload_progress(self):
        job = key("up")
        body = "u" * 2_000_000
        got = self.run_fetch({"url": f"{self.srv.test_url}/status/200", "method": "POST", "body": body,
                              "progress": True, "jobId": job})
        self.assertEqual(got.answer.get("result", {}).get("status"), 200, got.answer)
        notes = got.of("progress", job)
        self.assertSeries(notes, job, "sentBytes", len(body), "totalSendBytes")
        self.assertRate(notes, got.start_time, got.answer_time)

    def test_concurrent_jobs_each_their_own_series(self):
        jobs = {key("multi"): 30, key("multi"): 20, key("multi"): 10}
        rids = {}
        t0 = time.monotonic()
        for job, chunks in jobs.items():
            rids[job] = send_request(self.c, "fetch", {"url": f"{self.srv.test_url}/slow-body?chunks={chunks}&ms=20",
                                                      "progress": True, "jobId": job})
        got, by_id = collect_all(self.c, list(rids.values()), timeout=20)
        answers = {job: by_id[rid] for job, rid in rids.items()}
        for job, chunks in jobs.items():
            self.assertEqual(answers[job].get("result", {}).get("bytes"), chunks, answers[job])
            notes = got.of("progress", job)
            self.assertSeries(notes, job, "receivedBytes", chunks, "totalReceiveBytes")
            self.assertRate(notes, t0, time.monotonic())

    def test_no_notifications_without_progress(self):
        name = key("quiet")
        c2 = self.daemon.client()
        try:
            # c2 watches while c runs a job with progress: notifications go only to c
            loud = send_request(self.c, "fetch", {"url": f"{self.srv.test_url}/slow-body?chunks=6&ms=50",
                                                  "progress": True})
            quiet = [
                send_request(c2, "fetch", {"url": f"{self.srv.test_url}/slow-body?chunks=6&ms=50"}),
                send_request(c2, "fetch", {"url": f"{self.srv.test_url}/flaky/{name}?fail=1&retry-after=0"}),
                send_request(c2, "fetch", {"url": f"{self.srv.test_url}/bytes/1000000", "progress": False}),
            ]
            loud_got = collect(self.c, loud, timeout=10)
            self.assertTrue(loud_got.of("progress"), "the job with progress: true got no notifications")
            got, answers = collect_all(c2, quiet, timeout=10)
            for rid in quiet:
                self.assertEqual(answers[rid].get("result", {}).get("status"), 200, answers[rid])
            self.assertEqual(answers[quiet[1]]["result"]["attempts"], 2, "the flaky URL should have been retried")
            pong = send_request(c2, "ping", None)
            got = collect(c2, pong, timeout=5, into=got)
            self.assertEqual([n for _, n in got.notes], [],
                             "notifications sent to a connection that never asked for progress")
        finally:
            c2.close()


class TestSlowReader(ProgressCase):
    def test_slow_reader_gets_answer_and_others_are_served(self):
        slow = self.daemon.client()
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        big_job, drip_job = key("slowbig"), key("slowdrip")
        big_rid = send_request(slow, "fetch", {"url": f"{self.srv.nginx_url}/big.bin", "progress": True,
                                               "jobId": big_job})
        drip_rid = send_request(slow, "fetch", {"url": f"{self.srv.test_url}/slow-body?chunks=30&ms=30",
                                                "progress": True, "jobId": drip_job})
        # The slow client reads nothing while both jobs run to their end ...
        with self.daemon.client() as other:
            t0 = time.monotonic()
            self.assertEqual(other.call("ping", timeout=5), "pong")
            r = other.call("fetch", {"url": f"{self.srv.test_url}/bytes/1000"}, timeout=5)
            self.assertEqual((r["status"], r["bytes"]), (200, 1000), r)
            self.assertLess(time.monotonic() - t0, 3, "other clients were held up by a slow reader")
            wait_for(lambda: job_entry(other, big_job) is None and job_entry(other, drip_job) is None,
                     timeout=15, message=f"jobs of the slow reader never finished: {list_jobs(other)}")
            # ... and the daemon still serves others with answers owed to the slow one
            t1 = time.monotonic()
            st = other.call("getStatus", timeout=5)
            self.assertGreaterEqual(st["connections"], 2, st)
            r = other.call("fetch", {"url": f"{self.srv.nginx_url}/small.txt"}, timeout=5)
            self.assertEqual(r["status"], 200, r)
            self.assertLess(time.monotonic() - t1, 3)
        # Now read: both answers arrive, whole, and the progress seen ends at the totals.
        got, answers = collect_all(slow, [big_rid, drip_rid], timeout=30)
        big = answers[big_rid].get("result")
        self.assertIsNotNone(big, json.dumps(answers[big_rid])[:300])
        self.assertEqual(big["bytes"], BIG_SIZE)
        self.assertEqual(sha256(base64.b64decode(big["bodyBase64"])), sha256(big_bin()))
        drip = answers[drip_rid]
        self.assertEqual(drip.get("result", {}).get("bytes"), 30, drip)

        def finished(out):
            return all(out.of("progress", j) and out.of("progress", j)[-1][1]["receivedBytes"] == total
                       for j, total in ((big_job, BIG_SIZE), (drip_job, 30)))
        collect_more(slow, got, finished, timeout=5)
        self.assertSeries(got.of("progress", big_job), big_job, "receivedBytes", BIG_SIZE, "totalReceiveBytes")
        self.assertSeries(got.of("progress", drip_job), drip_job, "receivedBytes", 30, "totalReceiveBytes")
        # coalesced, not queued without bound: no more than the 100 ms rate over the whole time
        self.assertRate(got.of("progress", drip_job), t0, time.monotonic())
        self.assertEqual(slow.call("ping", timeout=5), "pong")
        slow.close()


if __name__ == "__main__":
    unittest.main()
