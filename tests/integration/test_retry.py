"""Retry with exponential backoff and Retry-After, against the scriptable test server.

Waits are kept short with Retry-After 0 or a small retry.maxInterval; where a test needs to tell
a honoured Retry-After from the 1-2 s random first backoff it measures the gap between the
attempts' arrival times at the test server."""
import json
import os
import time
import unittest
from urllib.parse import quote

from harness import DaemonTestCase, RPCError, closed_port, sha256
from jobhelpers import bodies, collect, hits, key, send_request


class RetryCase(DaemonTestCase):
    def flaky(self, name, fail, status=503, retry_after=None):
        url = f"{self.srv.test_url}/flaky/{name}?fail={fail}&status={status}"
        if retry_after is not None:
            url += f"&retry-after={retry_after}"
        return url

    def run_fetch(self, params, timeout=30):
        """fetch with progress notifications collected; returns (answer, Collected)."""
        rid = send_request(self.c, "fetch", params)
        got = collect(self.c, rid, timeout=timeout)
        return got.answer, got

    def result_of(self, answer):
        self.assertNotIn("error", answer, f"expected a result, got {json.dumps(answer)[:500]}")
        return answer["result"]

    def error_of(self, answer):
        self.assertIn("error", answer, f"expected an error, got {json.dumps(answer)[:500]}")
        return answer["error"]

    def gaps(self, name):
        t = hits(name)["times"]
        return [b - a for a, b in zip(t, t[1:])]


class TestRetryStatuses(RetryCase):
    def test_fails_twice_then_succeeds(self):
        name = key("twice")
        answer, got = self.run_fetch({"url": self.flaky(name, 2, 503, retry_after=0), "progress": True,
                                      "jobId": name})
        r = self.result_of(answer)
        self.assertEqual(r["status"], 200, r)
        self.assertEqual(r["body"], "ok after 2", r)
        self.assertEqual(r["attempts"], 3, r)
        self.assertEqual(hits(name)["count"], 3, "the test server should have seen 3 requests")
        retrying = [p for _, p in got.of("retrying")]
        self.assertEqual([p.get("attempt") for p in retrying], [2, 3],
                         f"retrying notifications: {retrying}")
        for p in retrying:
            self.assertEqual(p.get("jobId"), name, p)
            self.assertEqual(p.get("delayMs"), 0, f"Retry-After: 0 should give delayMs 0: {p}")
            self.assertIsInstance(p.get("reason"), str, p)
            self.assertIn("503", p["reason"], f"reason should name the status: {p}")

    def test_retry_after_one_second_spacing(self):
        name = key("ra1")
        answer, got = self.run_fetch({"url": self.flaky(name, 1, 429, retry_after=1), "progress": True})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        gaps = self.gaps(name)
        self.assertEqual(len(gaps), 1, gaps)
        self.assertGreaterEqual(gaps[0], 0.95, f"429 Retry-After: 1 but the retry came after {gaps[0]:.3f}s")
        self.assertLess(gaps[0], 3.0, f"429 Retry-After: 1 but the retry came after {gaps[0]:.3f}s")
        retrying = [p for _, p in got.of("retrying")]
        self.assertEqual([(p.get("attempt"), p.get("delayMs")) for p in retrying], [(2, 1000)], retrying)

    def test_retry_after_zero_is_not_random_backoff(self):
        # The random first backoff is 1-2 s: a retry well under that can only be Retry-After: 0.
        for status in (429, 503):
            with self.subTest(status=status):
                name = key(f"ra0-{status}")
                answer, _ = self.run_fetch({"url": self.flaky(name, 1, status, retry_after=0)})
                r = self.result_of(answer)
                self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
                gaps = self.gaps(name)
                self.assertLess(gaps[0], 0.8, f"{status} Retry-After: 0 but the retry came after {gaps[0]:.3f}s")

    def test_retry_after_http_date(self):
        # a date in the past means "now": the retry comes at once, not after the 1-2 s backoff
        name = key("radate")
        date = quote("Wed, 21 Oct 2015 07:28:00 GMT")
        answer, got = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=date), "progress": True,
                                      "retry": {"maxInterval": 10}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        self.assertLess(self.gaps(name)[0], 0.8, "Retry-After as a past HTTP date should mean no wait")
        self.assertEqual([p.get("delayMs") for _, p in got.of("retrying")], [0])

    def test_retry_after_unparsable_falls_back_to_backoff(self):
        name = key("rabad")
        answer, got = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after="soon"), "progress": True,
                                      "retry": {"maxInterval": 0.3}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        self.assertEqual([p.get("delayMs") for _, p in got.of("retrying")], [300])

    def test_retry_after_ignored_for_other_statuses(self):
        # 500 is retried but its Retry-After is not honoured: the backoff (1-2 s) capped at 0.3 s.
        name = key("ra500")
        answer, got = self.run_fetch({"url": self.flaky(name, 1, 500, retry_after=0), "progress": True,
                                      "retry": {"maxInterval": 0.3}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        gaps = self.gaps(name)
        self.assertGreaterEqual(gaps[0], 0.27, f"500's Retry-After: 0 was honoured: retry after {gaps[0]:.3f}s")
        retrying = [p for _, p in got.of("retrying")]
        self.assertEqual([(p.get("attempt"), p.get("delayMs")) for p in retrying], [(2, 300)], retrying)

    def test_retry_after_capped_by_max_interval(self):
        name = key("racap")
        t0 = time.monotonic()
        answer, got = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=30), "progress": True,
                                      "retry": {"maxInterval": 0.2}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        self.assertLess(time.monotonic() - t0, 5, "Retry-After 30 was not capped by maxInterval 0.2")
        gaps = self.gaps(name)
        self.assertGreaterEqual(gaps[0], 0.18, gaps)
        retrying = [p for _, p in got.of("retrying")]
        self.assertEqual([p.get("delayMs") for p in retrying], [200], retrying)

    def test_default_max_attempts_is_five(self):
        name = key("five")
        answer, _ = self.run_fetch({"url": self.flaky(name, 100, 503, retry_after=0)})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (503, 5), r)
        self.assertEqual(r["body"], "status 503", r)
        self.assertEqual(hits(name)["count"], 5)

    def test_max_attempts_two(self):
        name = key("two")
        answer, _ = self.run_fetch({"url": self.flaky(name, 100, 503, retry_after=0),
                                    "retry": {"maxAttempts": 2}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (503, 2), r)
        self.assertEqual(hits(name)["count"], 2)

    def test_total_wait_capped_at_three_max_intervals(self):
        # 500 without an honoured Retry-After: waits min(backoff, maxInterval) = maxInterval each;
        # at most 3 x maxInterval of waiting in all, so 3 waits and 4 attempts, not maxAttempts 10.
        for max_interval in (0.25, 0.1):
            with self.subTest(maxInterval=max_interval):
                name = key("total")
                answer, got = self.run_fetch({"url": self.flaky(name, 100, 500), "progress": True,
                                              "retry": {"maxAttempts": 10, "maxInterval": max_interval}})
                r = self.result_of(answer)
                ms = round(max_interval * 1000)
                self.assertEqual([p.get("delayMs") for _, p in got.of("retrying")], [ms, ms, ms],
                                 f"3 waits of maxInterval {max_interval} fit in 3 x maxInterval")
                self.assertEqual((r["status"], r["attempts"]), (500, 4), r)
                self.assertEqual(hits(name)["count"], 4)

    def test_retry_false_on_get(self):
        name = key("off")
        answer, got = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=0), "retry": False,
                                      "progress": True})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (503, 1), r)
        self.assertEqual(hits(name)["count"], 1)
        self.assertEqual(got.of("retrying"), [])

    def test_unlisted_status_not_retried(self):
        for status in (404, 400, 501):
            with self.subTest(status=status):
                name = key(f"no{status}")
                answer, _ = self.run_fetch({"url": self.flaky(name, 1, status, retry_after=0)})
                r = self.result_of(answer)
                self.assertEqual((r["status"], r["attempts"]), (status, 1), r)
                self.assertEqual(hits(name)["count"], 1)

    def test_default_statuses_retried(self):
        for status in (408, 429, 500, 502, 503, 504):
            with self.subTest(status=status):
                name = key(f"yes{status}")
                answer, _ = self.run_fetch({"url": self.flaky(name, 1, status, retry_after=0),
                                            "retry": {"maxInterval": 0.05}})
                r = self.result_of(answer)
                self.assertEqual((r["status"], r["attempts"]), (200, 2), r)

    def test_custom_statuses(self):
        name = key("s404")
        answer, _ = self.run_fetch({"url": self.flaky(name, 1, 404),
                                    "retry": {"statuses": [404], "maxInterval": 0.05}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        # the list replaces the defaults: 503 is no longer retried
        name = key("s404b")
        answer, _ = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=0),
                                    "retry": {"statuses": [404], "maxInterval": 0.05}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (503, 1), r)
        self.assertEqual(hits(name)["count"], 1)


class TestRetryMethods(RetryCase):
    def test_post_not_retried_by_default(self):
        name = key("post")
        answer, got = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=0), "method": "POST",
                                      "body": "payload", "progress": True})
        self.assertNotIn("error", answer, f"a 503 must be a result, never an error: {answer}")
        r = answer["result"]
        self.assertEqual((r["status"], r["attempts"]), (503, 1), r)
        self.assertEqual(hits(name)["count"], 1)
        self.assertEqual(got.of("retrying"), [])

    def test_post_with_body_implied_not_retried(self):
        name = key("postj")
        answer, _ = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=0), "json": {"a": 1}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (503, 1), r)

    def test_post_retried_when_asked(self):
        name = key("postr")
        answer, _ = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=0), "method": "POST",
                                    "body": "payload", "retry": True})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        self.assertEqual(hits(name)["count"], 2)

    def test_post_retry_object_enables(self):
        name = key("posto")
        answer, _ = self.run_fetch({"url": self.flaky(name, 5, 503, retry_after=0), "method": "POST",
                                    "body": "x", "retry": {"maxAttempts": 3}})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (503, 3), r)

    def test_idempotent_methods_retried(self):
        for method in ("PUT", "DELETE", "OPTIONS", "HEAD"):
            with self.subTest(method=method):
                name = key(method)
                answer, _ = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=0), "method": method})
                r = self.result_of(answer)
                self.assertEqual((r["status"], r["attempts"]), (200, 2), r)

    def test_patch_not_retried(self):
        name = key("patch")
        answer, _ = self.run_fetch({"url": self.flaky(name, 1, 503, retry_after=0), "method": "PATCH",
                                    "body": "x"})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (503, 1), r)

    def test_body_resent_on_each_attempt(self):
        name = key("resend")
        body = "abc" * 20000
        answer, _ = self.run_fetch({"url": f"{self.srv.test_url}/flaky-body/{name}?fail=2&retry-after=0",
                                    "method": "PUT", "body": body})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 3), r)
        want = {"method": "PUT", "length": len(body), "sha256": sha256(body.encode())}
        self.assertEqual(bodies(name), [want] * 3, "each attempt must send the whole body again")

    def test_body_file_read_again(self):
        name = key("resendf")
        data = os.urandom(300000)
        path = os.path.join(self.daemon.tmpdir, name + ".bin")
        with open(path, "wb") as f:
            f.write(data)
        answer, _ = self.run_fetch({"url": f"{self.srv.test_url}/flaky-body/{name}?fail=1&retry-after=0",
                                    "method": "PUT", "bodyFile": path})
        r = self.result_of(answer)
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        want = {"method": "PUT", "length": len(data), "sha256": sha256(data)}
        self.assertEqual(bodies(name), [want] * 2, "each attempt must send the whole body file again")


class TestRetryNetwork(RetryCase):
    def test_connect_refused_retried_then_error(self):
        port = closed_port()
        t0 = time.monotonic()
        answer, got = self.run_fetch({"url": f"http://127.0.0.1:{port}/x", "progress": True, "jobId": "refused",
                                      "retry": {"maxAttempts": 3, "maxInterval": 0.05}})
        elapsed = time.monotonic() - t0
        e = self.error_of(answer)
        self.assertEqual(e.get("code"), -32001, e)
        d = e.get("data") or {}
        self.assertEqual(d.get("kind"), "connect", e)
        self.assertEqual(d.get("attempts"), 3, f"attempts should be maxAttempts: {e}")
        self.assertEqual(d.get("jobId"), "refused", e)
        retrying = [p for _, p in got.of("retrying")]
        self.assertEqual([p.get("attempt") for p in retrying], [2, 3], retrying)
        self.assertEqual([p.get("delayMs") for p in retrying], [50, 50], retrying)
        for p in retrying:
            self.assertIn("connect", p.get("reason", ""), p)
        self.assertLess(elapsed, 5, "waits should have been capped at 0.05 s")

    def test_connect_refused_without_retry(self):
        port = closed_port()
        answer, _ = self.run_fetch({"url": f"http://127.0.0.1:{port}/x", "retry": False})
        e = self.error_of(answer)
        self.assertEqual((e.get("code"), (e.get("data") or {}).get("attempts")), (-32001, 1), e)

    def test_reset_retried(self):
        answer, _ = self.run_fetch({"url": f"{self.srv.test_url}/reset",
                                    "retry": {"maxAttempts": 2, "maxInterval": 0.05}})
        e = self.error_of(answer)
        d = e.get("data") or {}
        self.assertEqual((e.get("code"), d.get("kind"), d.get("attempts")), (-32001, "reset", 2), e)

    def test_timeout_retried(self):
        answer, _ = self.run_fetch({"url": f"{self.srv.test_url}/slow-headers?ms=2000", "timeout": 0.2,
                                    "retry": {"maxAttempts": 2, "maxInterval": 0.05}})
        e = self.error_of(answer)
        d = e.get("data") or {}
        self.assertEqual((e.get("code"), d.get("kind"), d.get("attempts")), (-32001, "timeout", 2), e)

    def test_protocol_error_not_retried(self):
        answer, _ = self.run_fetch({"url": f"{self.srv.test_url}/garbage",
                                    "retry": {"maxAttempts": 3, "maxInterval": 0.05}})
        e = self.error_of(answer)
        d = e.get("data") or {}
        self.assertEqual(e.get("code"), -32001, e)
        self.assertEqual(d.get("attempts"), 1, f"a {d.get('kind')} failure is not worth a retry: {e}")

    def test_retry_param_validation(self):
        for bad, field in (({"maxAttempts": 0}, "retry.maxAttempts"), ("yes", "retry"),
                           ({"statuses": ["x"]}, "retry.statuses[0]"), ({"maxAtempts": 2}, "retry.maxAtempts")):
            with self.subTest(retry=bad):
                try:
                    r = self.c.call("fetch", {"url": f"{self.srv.test_url}/status/200", "retry": bad})
                except RPCError as e:
                    self.assertEqual(e.code, -32602, e)
                    self.assertEqual((e.data or {}).get("field"), field, e)
                else:
                    self.fail(f"retry={bad!r} accepted: {r}")


if __name__ == "__main__":
    unittest.main()


class TestMaxTime(RetryCase):
    """`maxTime` limits the whole job, every attempt and retry wait included."""

    def call_error(self, params, timeout=30):
        t0 = time.monotonic()
        with self.assertRaises(RPCError) as cm:
            self.c.call("fetch", params, timeout=timeout)
        return cm.exception, time.monotonic() - t0

    def test_retry_waits_are_cut_by_max_time(self):
        # Without maxTime this job would retry 503s for many seconds (backoff 1-2 s, then more).
        url = self.flaky(key("maxtime"), fail=100)
        e, took = self.call_error({"url": url, "retry": {"maxAttempts": 10}, "maxTime": 1.5})
        self.assertEqual(e.code, -32001, e)
        self.assertEqual(e.data["kind"], "timeout")
        self.assertEqual(e.data["curlCode"], 28)
        self.assertIn("maxTime", e.data["detail"])
        self.assertLess(took, 2.5)

    def test_an_attempt_is_cut_at_the_deadline(self):
        e, took = self.call_error({"url": self.srv.test_url + "/slow-headers?ms=5000", "maxTime": 0.8,
                                   "timeout": 30, "retry": True})
        self.assertEqual((e.code, e.data["kind"], e.data["attempts"]), (-32001, "timeout", 1), e)
        self.assertGreaterEqual(took, 0.7)
        self.assertLess(took, 2.0)

    def test_curl_code_in_failures(self):
        e, _ = self.call_error({"url": f"http://127.0.0.1:{closed_port()}/", "retry": False})
        self.assertEqual((e.data["kind"], e.data["curlCode"]), ("connect", 7))

    def test_max_time_is_checked(self):
        for bad in (0, -1, "1", 10 ** 7):
            with self.assertRaises(RPCError) as cm:
                self.c.call("fetch", {"url": self.srv.test_url + "/echo", "maxTime": bad})
            self.assertEqual((cm.exception.code, cm.exception.data["field"]), (-32602, "maxTime"))

    def test_null_header_leaves_out_libcurls_own(self):
        r = self.c.call("fetch", {"url": self.srv.test_url + "/echo", "headers": {"Accept": None, "X-E": ""}})
        sent = {k.lower(): v for k, v in json.loads(r["body"])["headers"]}
        self.assertNotIn("accept", sent)
        self.assertEqual(sent["x-e"], "")
