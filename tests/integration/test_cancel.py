"""cancel from any connection, disconnects, listJobs, shutdown: every request gets
exactly one answer, also when a cancel races the completion."""
import json
import os
import signal
import time
import unittest

from harness import Daemon, DaemonTestCase, servers, wait_for
from jobhelpers import collect, collect_all, hits, job_entry, key, list_jobs, send_request

SLOW = "/slow-body?chunks=60&ms=100"  # 60 bytes over ~6 s


class CancelCase(DaemonTestCase):
    def start_fetch(self, client, params):
        return send_request(client, "fetch", params)

    def wait_state(self, client, job_id, state, timeout=5.0):
        return wait_for(lambda: (lambda j: j if j and j.get("state") == state else None)(job_entry(client, job_id)),
                        timeout=timeout, message=f"job {job_id} never reached state {state!r}; "
                                                 f"listJobs: {list_jobs(client)}")

    def assertCancelledAnswer(self, answer, job_id, by):
        self.assertIn("error", answer, f"expected -32002, got {json.dumps(answer)[:400]}")
        e = answer["error"]
        self.assertEqual(e.get("code"), -32002, e)
        self.assertEqual(e.get("data"), {"jobId": job_id, "by": by}, e)


class TestCancel(CancelCase):
    def test_cancel_running_from_second_connection(self):
        job = key("run")
        rid = self.start_fetch(self.c, {"url": self.srv.test_url + SLOW, "jobId": job, "comment": "slow one"})
        with self.daemon.client() as c2:
            entry = self.wait_state(c2, job, "running")
            self.assertEqual(entry.get("attempt"), 1, entry)
            t0 = time.monotonic()
            self.assertEqual(c2.call("cancel", {"jobId": job}), {"cancelled": True})
            got = collect(self.c, rid, timeout=5)
            self.assertLess(got.answer_time - t0, 1.5, "the cancelled request was not answered at once")
            self.assertCancelledAnswer(got.answer, job, "cancel")
            wait_for(lambda: job_entry(c2, job) is None, timeout=2,
                     message=f"cancelled job still listed: {list_jobs(c2)}")
            self.assertEqual(c2.call("cancel", {"jobId": job}), {"cancelled": False},
                             "a second cancel of a finished job")

    def test_cancel_from_same_connection(self):
        job = key("same")
        rid = self.start_fetch(self.c, {"url": self.srv.test_url + SLOW, "jobId": job})
        self.wait_state(self.c, job, "running")
        self.assertEqual(self.c.call("cancel", {"jobId": job}), {"cancelled": True})
        self.assertCancelledAnswer(collect(self.c, rid, timeout=5).answer, job, "cancel")

    def test_cancel_unknown_job(self):
        self.assertEqual(self.c.call("cancel", {"jobId": "no-such-job"}), {"cancelled": False})

    def test_cancel_finished_job(self):
        job = key("done")
        r = self.c.call("fetch", {"url": self.srv.test_url + "/status/200", "jobId": job})
        self.assertEqual(r["jobId"], job)
        self.assertEqual(self.c.call("cancel", {"jobId": job}), {"cancelled": False})

    def test_cancel_twice(self):
        job = key("twice")
        rid = self.start_fetch(self.c, {"url": self.srv.test_url + SLOW, "jobId": job})
        self.wait_state(self.c, job, "running")
        first = send_request(self.c, "cancel", {"jobId": job})
        second = send_request(self.c, "cancel", {"jobId": job})
        answers = {}
        got = collect(self.c, rid, timeout=5)
        self.assertCancelledAnswer(got.answer, job, "cancel")
        for m in got.others:
            answers[m.get("id")] = m
        for i in (first, second):
            if i not in answers:
                answers[i] = self.c.answer_for(i, timeout=5)
        results = sorted(json.dumps(answers[i].get("result")) for i in (first, second))
        self.assertEqual(results, [json.dumps({"cancelled": False}), json.dumps({"cancelled": True})],
                         f"exactly one of two cancels succeeds: {answers}")

    def test_job_id_unique_among_live_jobs(self):
        job = key("dup")
        rid = self.start_fetch(self.c, {"url": self.srv.test_url + SLOW, "jobId": job})
        self.wait_state(self.c, job, "running")
        a = self.c.request("fetch", {"url": self.srv.test_url + "/status/200", "jobId": job})
        self.assertEqual(a.get("error", {}).get("code"), -32602, a)
        self.assertEqual(a["error"].get("data", {}).get("field"), "jobId", a)
        self.assertEqual(self.c.call("cancel", {"jobId": job}), {"cancelled": True})
        self.assertCancelledAnswer(collect(self.c, rid, timeout=5).answer, job, "cancel")
        # once the job is gone its id may be used again
        r = self.c.call("fetch", {"url": self.srv.test_url + "/status/200", "jobId": job})
        self.assertEqual((r["jobId"], r["status"]), (job, 200), r)

    def test_cancel_params(self):
        for params in ({}, {"jobId": 5}, {"jobId": "x", "extra": 1}):
            with self.subTest(params=params):
                a = self.c.request("cancel", params)
                self.assertEqual(a.get("error", {}).get("code"), -32602, a)

    def test_list_jobs_running(self):
        job = key("list")
        url = self.srv.test_url + SLOW
        rid = self.start_fetch(self.c, {"url": url, "jobId": job, "comment": "for listJobs"})
        with self.daemon.client() as c2:
            entry = wait_for(lambda: (lambda j: j if j and j.get("receivedBytes", 0) >= 2 else None)(job_entry(c2, job)),
                             timeout=5, message=f"job never showed received bytes: {list_jobs(c2)}")
            self.assertEqual(entry["state"], "running", entry)
            self.assertEqual(entry["attempt"], 1, entry)
            self.assertEqual(entry["method"], "GET", entry)
            self.assertEqual(entry["url"], url, entry)
            self.assertEqual(entry["comment"], "for listJobs", entry)
            self.assertEqual(entry["sentBytes"], 0, entry)
            self.assertEqual(entry["totalBytes"], 60, entry)
            self.assertLessEqual(entry["receivedBytes"], 60, entry)
            later = wait_for(lambda: (lambda j: j if j and j["receivedBytes"] > entry["receivedBytes"] else None)(
                job_entry(c2, job)), timeout=5, message="receivedBytes did not grow")
            self.assertEqual(later["state"], "running")
            c2.call("cancel", {"jobId": job})
        self.assertCancelledAnswer(collect(self.c, rid, timeout=5).answer, job, "cancel")

    def test_list_jobs_masks_secrets_in_urls(self):
        # Any client may list every job: a password in the URL or a token in its query is not
        # shown to them.
        job = key("secret")
        host = self.srv.test_url.split("//", 1)[1]
        url = f"http://user:hunter2@{host}{SLOW}&access_token=tok-123"
        rid = self.start_fetch(self.c, {"url": url, "jobId": job})
        with self.daemon.client() as c2:
            entry = wait_for(lambda: job_entry(c2, job), timeout=5, message="job not listed")
            self.assertNotIn("hunter2", entry["url"], entry)
            self.assertNotIn("tok-123", entry["url"], entry)
            self.assertIn("access_token=", entry["url"], entry)
            self.assertIn("user", entry["url"], entry)
            c2.call("cancel", {"jobId": job})
        self.assertCancelledAnswer(collect(self.c, rid, timeout=5).answer, job, "cancel")

    def test_disconnect_cancels_half_close_does_not(self):
        # half-close: the daemon still answers (protocol.md); the job runs to its end
        c1 = self.daemon.client()
        rid = self.start_fetch(c1, {"url": self.srv.test_url + "/slow-body?chunks=4&ms=100"})
        c1.shutdown_write()
        a = collect(c1, rid, timeout=10).answer
        self.assertEqual(a.get("result", {}).get("status"), 200, f"half-closed client not answered: {a}")
        self.assertTrue(c1.wait_closed(5))
        c1.close()


class TestCancelWaiting(CancelCase):
    """Own daemon: a 503 with Retry-After 30 may pause the host for this daemon's other jobs."""

    def test_cancel_while_waiting_to_retry(self):
        job = key("wait")
        url = f"{self.srv.test_url}/flaky/{job}?fail=1&status=503&retry-after=30"
        rid = self.start_fetch(self.c, {"url": url, "jobId": job, "progress": True, "comment": "waiting"})
        with self.daemon.client() as c2:
            entry = self.wait_state(c2, job, "waiting")
            self.assertEqual(entry.get("attempt"), 1, entry)
            self.assertEqual(entry.get("comment"), "waiting", entry)
            self.assertGreaterEqual(c2.call("getStatus")["jobs"]["waiting"], 1)
            t0 = time.monotonic()
            self.assertEqual(c2.call("cancel", {"jobId": job}), {"cancelled": True})
            got = collect(self.c, rid, timeout=10)
            self.assertLess(got.answer_time - t0, 1.5, "a retry wait was not dropped at once")
            self.assertCancelledAnswer(got.answer, job, "cancel")
            retrying = [p for _, p in got.of("retrying", job)]
            self.assertEqual([(p.get("attempt"), p.get("delayMs")) for p in retrying], [(2, 30000)], retrying)
            self.assertIsNone(job_entry(c2, job), "cancelled job still listed")
        self.assertEqual(hits(job)["count"], 1, "a cancelled wait must not make another attempt")


class TestRacingCancels(CancelCase):
    def check_race(self, n, cancel_client):
        prefix = key("race")
        fetch_ids, cancel_ids = {}, {}
        lines = []
        cancel_lines = []
        for i in range(n):
            job = f"{prefix}-{i}"
            fid, cid = f"f{i}", f"c{i}"
            fetch_ids[fid] = job
            cancel_ids[cid] = job
            lines.append({"jsonrpc": "2.0", "id": fid, "method": "fetch",
                          "params": {"url": f"{self.srv.test_url}/bytes/{i % 7 * 100}", "jobId": job}})
            cancel_lines.append({"jsonrpc": "2.0", "id": cid, "method": "cancel", "params": {"jobId": job}})
        if cancel_client is self.c:
            data = b"".join(json.dumps(m).encode() + b"\n" for pair in zip(lines, cancel_lines) for m in pair)
            self.c.send_raw(data)
        else:
            for f, c in zip(lines, cancel_lines):
                self.c.send_obj(f)
                cancel_client.send_obj(c)

        answers = {}

        def take(client, expected):
            deadline = time.monotonic() + 30
            while len([k for k in answers if k in expected]) < len(expected):
                m = client.recv(timeout=max(0.01, deadline - time.monotonic()))
                self.assertIsInstance(m, dict, m)
                self.assertNotIn("method", m, f"unexpected notification {m}")
                i = m.get("id")
                self.assertIn(i, expected, f"answer with an unknown id: {m}")
                self.assertNotIn(i, answers, f"second answer for {i}: {m} (first: {answers.get(i)})")
                answers[i] = m

        if cancel_client is self.c:
            take(self.c, set(fetch_ids) | set(cancel_ids))
        else:
            take(self.c, set(fetch_ids))
            take(cancel_client, set(cancel_ids))

        done = cancelled = 0
        for cid, job in cancel_ids.items():
            fid = "f" + cid[1:]
            ca, fa = answers[cid], answers[fid]
            self.assertIn("result", ca, ca)
            self.assertIn(ca["result"].get("cancelled"), (True, False), ca)
            if "error" in fa:
                self.assertCancelledAnswer(fa, job, "cancel")
                self.assertTrue(ca["result"]["cancelled"], f"job answered -32002 but its cancel said false: {ca}")
                cancelled += 1
            else:
                self.assertEqual(fa["result"].get("jobId"), job, fa)
                self.assertEqual(fa["result"].get("status"), 200, fa)
                self.assertFalse(ca["result"]["cancelled"],
                                 f"cancel said true but the job's request got a result: {fa['result'].get('jobId')}")
                done += 1
        # nothing more arrives: a ping on each connection is answered, with nothing before it
        for client in {id(self.c): self.c, id(cancel_client): cancel_client}.values():
            pid = send_request(client, "ping", None)
            m = client.recv(timeout=10)
            self.assertEqual(m.get("id"), pid, f"extra message after all answers: {m}")
            self.assertEqual(m.get("result"), "pong", m)
            try:
                extra = client.recv(timeout=0.3)  # measures that nothing arrives in 0.3 s
            except TimeoutError:
                pass
            else:
                self.fail(f"an extra message arrived after every request was answered: {extra}")
        with self.daemon.client() as c3:
            wait_for(lambda: not [j for j in list_jobs(c3) if j["jobId"].startswith(prefix)], timeout=5,
                     message="raced jobs still listed")
        if os.environ.get("FETCHD_TEST_VERBOSE"):
            print(f"race: {done} completed, {cancelled} cancelled")
        return done, cancelled

    def test_200_cancels_racing_completions_one_connection(self):
        self.check_race(200, self.c)

    def test_200_cancels_racing_completions_two_connections(self):
        with self.daemon.client() as c2:
            self.check_race(200, c2)


class TestDisconnect(CancelCase):
    """Own daemon: Retry-After answers may pause the host for this daemon."""

    def test_disconnect_cancels_but_not_detached(self):
        gone, kept = key("gone"), key("kept")
        c1 = self.daemon.client()
        slow = key("slowgone")
        send_request(c1, "fetch", {"url": self.srv.test_url + SLOW, "jobId": slow})
        send_request(c1, "fetch", {"url": f"{self.srv.test_url}/flaky/{gone}?fail=1&status=503&retry-after=1",
                                   "jobId": gone})
        send_request(c1, "fetch", {"url": f"{self.srv.test_url}/flaky/{kept}?fail=1&status=503&retry-after=1",
                                   "jobId": kept, "detach": True})
        with self.daemon.client() as c2:
            self.wait_state(c2, slow, "running")
            self.wait_state(c2, gone, "waiting")
            self.wait_state(c2, kept, "waiting")
            c1.close()  # fully: the peer is gone
            wait_for(lambda: {slow, gone}.isdisjoint(j["jobId"] for j in list_jobs(c2)), timeout=2,
                     message=f"jobs of a closed connection still listed: {list_jobs(c2)}")
            self.assertIsNotNone(job_entry(c2, kept), f"detached job was dropped: {list_jobs(c2)}")
            # the detached job makes its second attempt and finishes
            wait_for(lambda: hits(kept)["count"] == 2, timeout=5,
                     message=f"detached job never retried: {hits(kept)}")
            wait_for(lambda: job_entry(c2, kept) is None, timeout=5, message="detached job never finished")
            self.assertEqual(hits(gone)["count"], 1, "a cancelled (disconnected) job retried anyway")
            status = c2.call("getStatus")
            self.assertEqual(status["jobs"]["running"] + status["jobs"]["waiting"] + status["jobs"]["queued"], 0,
                             status)


class TestShutdown(unittest.TestCase):
    def test_sigterm_answers_running_job_with_shutdown(self):
        srv = servers()
        with Daemon("--shutdown-grace", "0.2") as d:
            c = d.client()
            job, waiting = key("term"), key("termwait")
            rid = send_request(c, "fetch", {"url": srv.test_url + SLOW, "jobId": job})
            wid = send_request(c, "fetch", {"url": f"{srv.test_url}/flaky/{waiting}?fail=1&status=503&retry-after=30",
                                            "jobId": waiting})
            with d.client() as c2:
                wait_for(lambda: (job_entry(c2, job) or {}).get("state") == "running", timeout=5,
                         message="job never ran")
                wait_for(lambda: (job_entry(c2, waiting) or {}).get("state") == "waiting", timeout=5,
                         message="job never waited")
            t0 = time.monotonic()
            d.proc.send_signal(signal.SIGTERM)
            got, answers = collect_all(c, [rid, wid], timeout=5)
            self.assertLess(time.monotonic() - t0, 3.0, "grace of 0.2 s but the answers took longer")
            for i, j in ((rid, job), (wid, waiting)):
                a = answers[i]
                self.assertIn("error", a, a)
                self.assertEqual(a["error"].get("code"), -32002, a)
                self.assertEqual(a["error"].get("data"), {"jobId": j, "by": "shutdown"}, a)
            self.assertEqual(c.recv_until_eof(timeout=5), [], "messages after the shutdown answer")
            self.assertEqual(d.stop(timeout=10), 0, f"exit code; stderr: {d.stderr_text()[-1000:]}")
            self.assertFalse(os.path.exists(d.socket_path), "socket file left behind")

    def test_sigterm_lets_short_job_finish_within_grace(self):
        srv = servers()
        with Daemon("--shutdown-grace", "5") as d:
            c = d.client()
            job = key("grace")
            rid = send_request(c, "fetch", {"url": srv.test_url + "/slow-body?chunks=5&ms=100", "jobId": job})
            with d.client() as c2:
                wait_for(lambda: (job_entry(c2, job) or {}).get("state") == "running", timeout=5,
                         message="job never ran")
            d.proc.send_signal(signal.SIGTERM)
            a = collect(c, rid, timeout=8).answer
            self.assertEqual(a.get("result", {}).get("status"), 200, f"job within the grace period: {a}")
            self.assertEqual(d.stop(timeout=10), 0)


if __name__ == "__main__":
    unittest.main()
