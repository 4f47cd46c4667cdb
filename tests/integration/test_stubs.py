"""Stubs: canned answers from named stub sets, in place of the network, that still
pass through the host's limits, retries, a download's part file and progress. Every URL a stub
answers is one of the test server's recording routes (/record/<key>, /flaky/<key>): its
/hits/<key> proves that a stubbed or missed request never reached it."""
import base64
import hashlib
import json
import os
import shutil
import tempfile
import time
import unittest

import glob
import subprocess

from harness import FETCHD_BIN, DaemonTestCase, RPCError, wait_for
from jobhelpers import collect, hits, key, send_request


class StubCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.set = key("set")

    def tearDown(self):
        try:
            self.c.call("removeStubs", {"set": self.set})
        finally:
            super().tearDown()

    def url(self, name, route="record"):
        return f"{self.srv.test_url}/{route}/{name}"

    def add(self, **params):
        params.setdefault("set", self.set)
        return self.c.call("addStub", params)["stubId"]

    def error(self, method, params, timeout=30):
        try:
            r = self.c.call(method, params, timeout=timeout)
        except RPCError as e:
            return e
        self.fail(f"{method} succeeded, expected an error: {json.dumps(r)[:400]}")

    def server_count(self, name):
        return hits(name)["count"]


class TestAnswers(StubCase):
    def test_stub_answers_and_never_reaches_the_server(self):
        name = key("answered")
        sid = self.add(match={"method": "GET", "url": self.url(name)},
                       respond={"status": 201, "json": {"ok": True}, "headers": {"X-Stub": "yes"}})
        r = self.c.call("fetch", {"url": self.url(name), "stubs": self.set})
        self.assertEqual(r["status"], 201, r)
        self.assertEqual(json.loads(r["body"]), {"ok": True}, r)
        self.assertEqual(r["headers"].get("x-stub"), "yes", r)
        self.assertEqual(r["headers"].get("content-type"), "application/json", r)
        self.assertEqual(r["attempts"], 1, r)
        self.assertEqual(self.server_count(name), 0, "a stubbed request reached the test server")
        got = self.c.call("getStubs", {"set": self.set})
        self.assertEqual([(s["stubId"], s["hits"], s["set"]) for s in got["stubs"]], [(sid, 1, self.set)], got)
        self.assertEqual(got["stubs"][0]["match"], {"method": "GET", "url": self.url(name)}, got)

    def test_a_request_without_stubs_goes_to_the_network(self):
        name = key("unstubbed")
        self.add(match={"url": self.url(name)}, respond={"status": 418})
        r = self.c.call("fetch", {"url": self.url(name)})
        self.assertEqual(r["status"], 200, "a request naming no set must not be stubbed")
        self.assertEqual(self.server_count(name), 1)

    def test_matching_members(self):
        name = key("members")
        self.add(match={"method": "POST", "urlPattern": f"/record/{name}\\?page=[0-9]+$", "query": {"page": "7"},
                        "headers": {"X-Token": "t1"}, "bodyJson": {"a": [1, 2]}}, respond={"status": 202, "body": "json"})
        self.add(match={"urlPrefix": self.url(name), "bodyContains": "needle"}, respond={"status": 203, "body": "text"})
        base = {"url": self.url(name), "query": {"page": 7}, "stubs": self.set, "headers": {"X-Token": "t1"}}
        self.assertEqual(self.c.call("fetch", {**base, "json": {"a": [1, 2.0]}})["status"], 202)
        self.assertEqual(self.c.call("fetch", {**base, "body": "a needle here"})["status"], 203)
        self.assertEqual(self.server_count(name), 0)

    def test_priority_times_and_remove(self):
        name = key("prio")
        low = self.add(match={"url": self.url(name)}, respond={"status": 200, "body": "low"})
        self.add(match={"url": self.url(name)}, respond={"status": 200, "body": "high"}, priority=10, times=1)
        bodies = [self.c.call("fetch", {"url": self.url(name), "stubs": self.set})["body"] for _ in range(3)]
        self.assertEqual(bodies, ["high", "low", "low"])
        self.assertEqual(self.c.call("removeStubs", {"set": self.set, "stubId": low}), {"removed": 1})
        e = self.error("fetch", {"url": self.url(name), "stubs": self.set})
        self.assertEqual(e.data["kind"], "stubMiss", e.data)
        self.assertEqual(e.data["nearest"]["differences"], ["times"], e.data)

    def test_a_stubbed_redirect_is_followed_through_the_set(self):
        name = key("redir")
        self.add(match={"url": self.url(name)}, respond={"status": 302, "headers": {"Location": f"/record/{name}-target"}})
        self.add(match={"url": self.url(name + "-target")}, respond={"body": "landed"})
        r = self.c.call("fetch", {"url": self.url(name), "stubs": self.set})
        self.assertEqual((r["status"], r["body"], r["redirects"], r["url"]), (200, "landed", 1, self.url(name + "-target")), r)
        r = self.c.call("fetch", {"url": self.url(name), "stubs": self.set, "maxRedirects": 0})
        self.assertEqual(r["status"], 302, r)
        self.assertEqual(self.server_count(name) + self.server_count(name + "-target"), 0)

    def test_set_cookie_from_a_stub_reaches_the_jar(self):
        name, jar = key("cookie"), key("jar")
        self.add(match={"url": self.url(name)}, respond={"headers": {"Set-Cookie": ["sid=abc; Path=/", "lang=en"]}})
        self.c.call("fetch", {"url": self.url(name), "stubs": self.set, "cookieJar": jar})
        names = sorted(c["name"] for c in self.c.call("getCookies", {"cookieJar": jar})["cookies"])
        self.assertEqual(names, ["lang", "sid"])
        r = self.c.call("fetch", {"url": f"{self.srv.test_url}/cookies", "cookieJar": jar})
        self.assertIn("sid=abc", json.loads(r["body"])["cookie"] or "", r)

    def test_download_from_a_stub_lands_with_its_sha256(self):
        name = key("dl")
        payload = os.urandom(300_000)
        self.add(match={"url": self.url(name)}, respond={"bodyBase64": base64.b64encode(payload).decode(),
                                                         "headers": {"ETag": '"v1"'}})
        d = tempfile.mkdtemp(prefix="fetchd-stub-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "out.bin")
        rid = send_request(self.c, "download", {"url": self.url(name), "path": path, "stubs": self.set, "progress": True})
        got = collect(self.c, rid, timeout=30)
        r = got.answer.get("result")
        self.assertIsNotNone(r, got.answer)
        self.assertEqual((r["status"], r["bytes"], r["sha256"]), (200, len(payload), hashlib.sha256(payload).hexdigest()), r)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), payload)
        self.assertFalse(os.path.exists(path + ".part"))
        progress = [p for _, p in got.of("progress")]
        self.assertTrue(progress and progress[-1]["receivedBytes"] == len(payload), progress)
        # Not 2xx: nothing lands, the body is in the answer.
        self.add(match={"url": self.url(name + "-404")}, respond={"status": 404, "body": "gone"})
        r = self.c.call("download", {"url": self.url(name + "-404"), "path": path + "2", "stubs": self.set})
        self.assertEqual((r["status"], r["body"], r["sha256"]), (404, "gone", None), r)
        self.assertFalse(os.path.exists(path + "2"))
        self.assertEqual(self.server_count(name), 0)

    def test_delay_blocks_no_thread(self):
        name = key("delay")
        self.add(match={"url": self.url(name)}, respond={"body": "late", "delayMs": 400})
        t0 = time.monotonic()
        rids = [send_request(self.c, "fetch", {"url": self.url(name), "stubs": self.set}) for _ in range(8)]
        with self.daemon.client() as other:
            p0 = time.monotonic()
            self.assertEqual(other.call("ping"), "pong")
            self.assertLess(time.monotonic() - p0, 0.2, "a ping waited for stub delays")
        answers = [collect(self.c, rid, timeout=10).answer for rid in rids]
        elapsed = time.monotonic() - t0
        self.assertTrue(all(a["result"]["body"] == "late" for a in answers), answers)
        self.assertGreaterEqual(elapsed, 0.38)
        self.assertLess(elapsed, 2.0, "eight delays of 400 ms should overlap")

    def test_a_delayed_stub_is_cancelled_at_once(self):
        name = key("held")
        self.add(match={"url": self.url(name)}, respond={"body": "late", "delayMs": 10000})
        rid = send_request(self.c, "fetch", {"url": self.url(name), "stubs": self.set, "jobId": name})
        with self.daemon.client() as other:
            wait_for(lambda: any(j["jobId"] == name for j in other.call("listJobs")["jobs"]), timeout=5)
            job = next(j for j in other.call("listJobs")["jobs"] if j["jobId"] == name)
            self.assertEqual((job["state"], job["phase"]), ("queued", "waitingForHost"), job)
            t0 = time.monotonic()
            self.assertEqual(other.call("cancel", {"jobId": name}), {"cancelled": True})
        answer = collect(self.c, rid, timeout=5).answer
        self.assertEqual(answer["error"]["code"], -32002, answer)
        self.assertLess(time.monotonic() - t0, 1.0)

    def test_delay_past_the_timeout_times_out(self):
        name = key("slow")
        self.add(match={"url": self.url(name)}, respond={"body": "late", "delayMs": 5000})
        t0 = time.monotonic()
        e = self.error("fetch", {"url": self.url(name), "stubs": self.set, "timeout": 0.3, "retry": False})
        self.assertEqual((e.code, e.data["kind"]), (-32001, "timeout"), e.data)
        self.assertLess(time.monotonic() - t0, 2.0)


class TestMisses(StubCase):
    def test_miss_fails_with_the_nearest_stub_and_never_reaches_the_server(self):
        name = key("miss")
        sid = self.add(match={"url": self.url(name), "headers": {"X-Token": "t1"}}, respond={})
        self.add(match={"method": "POST", "url": self.url(name + "-other")}, respond={})
        e = self.error("fetch", {"url": self.url(name), "stubs": self.set})
        self.assertEqual(e.code, -32001, e.data)
        self.assertEqual((e.data["kind"], e.data["attempts"]), ("stubMiss", 1), e.data)
        self.assertEqual(e.data["nearest"], {"stubId": sid, "differences": ["headers.X-Token"]}, e.data)
        self.assertEqual(self.server_count(name), 0, "a missed request reached the test server")
        misses = self.c.call("getStubs", {"set": self.set})["misses"]
        self.assertEqual(misses, [{"set": self.set, "method": "GET", "url": self.url(name),
                                   "nearest": {"stubId": sid, "differences": ["headers.X-Token"]}}])

    def test_an_empty_set_misses_with_no_nearest(self):
        name = key("empty")
        e = self.error("fetch", {"url": self.url(name), "stubs": self.set})
        self.assertEqual(e.data["kind"], "stubMiss")
        self.assertIsNone(e.data["nearest"])
        self.assertEqual(self.server_count(name), 0)

    def test_on_miss_network(self):
        name = key("net")
        self.assertEqual(self.c.call("setStubMode", {"set": self.set, "onMiss": "network"}),
                         {"set": self.set, "onMiss": "network"})
        r = self.c.call("fetch", {"url": self.url(name), "stubs": self.set})
        self.assertEqual(r["status"], 200)
        self.assertEqual(self.server_count(name), 1)
        self.c.call("setStubMode", {"set": self.set, "onMiss": "error"})
        self.assertEqual(self.error("fetch", {"url": self.url(name), "stubs": self.set}).data["kind"], "stubMiss")
        self.assertEqual(self.server_count(name), 1)


class TestFaultsAndRetries(StubCase):
    def test_faults_fail_as_real_failures_do(self):
        for fault, kind in (("reset", "reset"), ("timeout", "timeout"), ("refused", "connect")):
            with self.subTest(fault=fault):
                name = key(fault)
                self.add(match={"url": self.url(name)}, fault=fault)
                e = self.error("fetch", {"url": self.url(name), "stubs": self.set, "retry": False})
                self.assertEqual((e.code, e.data["kind"], e.data["attempts"]), (-32001, kind, 1), e.data)
                self.assertEqual(self.server_count(name), 0)

    def test_a_fault_is_retried_as_a_real_one(self):
        name = key("reset-then-ok")
        self.add(match={"url": self.url(name)}, fault="reset", times=1, priority=1)
        self.add(match={"url": self.url(name)}, respond={"body": "ok"})
        r = self.c.call("fetch", {"url": self.url(name), "stubs": self.set, "retry": {"maxInterval": 0.05}})
        self.assertEqual((r["status"], r["body"], r["attempts"]), (200, "ok", 2), r)

    def test_sequence_503_503_200_is_retried_by_the_client_policy(self):
        name = key("seq")
        self.add(match={"url": self.url(name, "flaky")}, respondSequence=[{"status": 503}, {"status": 503}, {"status": 200, "body": "third"}])
        rid = send_request(self.c, "fetch", {"url": self.url(name, "flaky"), "stubs": self.set, "progress": True,
                                              "retry": {"maxInterval": 0.05}})
        got = collect(self.c, rid, timeout=20)
        r = got.answer["result"]
        self.assertEqual((r["status"], r["body"], r["attempts"]), (200, "third", 3), r)
        retrying = [p for _, p in got.of("retrying")]
        self.assertEqual([(p["attempt"], p["reason"]) for p in retrying], [(2, "status 503"), (3, "status 503")], retrying)
        self.assertEqual(self.server_count(name), 0)

    def test_retry_after_in_a_stubbed_429_pauses_the_host_for_everyone(self):
        name, other = key("ra"), key("ra-other")
        self.add(match={"url": self.url(name)}, respond={"status": 429, "headers": {"Retry-After": "1"}})
        r = self.c.call("fetch", {"url": self.url(name), "stubs": self.set, "retry": False})
        t_answer = time.monotonic()
        self.assertEqual(r["status"], 429, r)
        with self.daemon.client() as c2:
            limits = c2.call("getRateLimits")
            host = next(h for h in limits["hosts"] if h["host"] == f"http://127.0.0.1:{self.srv.test_port}")
            self.assertIsInstance(host["pausedUntil"], str, limits)
            self.assertEqual(c2.call("fetch", {"url": self.url(other)})["status"], 200)
        waited = hits(other)["times"][0] - t_answer
        self.assertGreaterEqual(waited, 0.8, f"a real request reached the server {waited:.3f}s after the stubbed Retry-After: 1")
        self.assertLess(waited, 3.0)


class TestBadStubs(StubCase):
    def test_bad_stubs_name_their_field(self):
        for params, field in (({"match": {"urlPattern": "a("}, "respond": {}}, "match.urlPattern"),
                              ({"respond": {"bodyFile": "/nonexistent/fetchd-stub-body"}}, "respond.bodyFile"),
                              ({"fault": "explode"}, "fault"),
                              ({"match": {"url": "a", "urlPattern": "b"}, "respond": {}}, "match.urlPattern"),
                              ({"respondSequence": []}, "respondSequence")):
            with self.subTest(field=field):
                e = self.error("addStub", params)
                self.assertEqual((e.code, e.data.get("field")), (-32602, field), e.data)
        self.assertEqual(self.c.call("getStubs", {"set": "default"})["stubs"], [], "a refused stub was added")
        e = self.error("setStubMode", {"set": self.set, "onMiss": "sometimes"})
        self.assertEqual((e.code, e.data.get("field")), (-32602, "onMiss"))
        e = self.error("fetch", {"url": self.url("x"), "stubs": ""})
        self.assertEqual((e.code, e.data.get("field")), (-32602, "stubs"))

    def test_body_file(self):
        d = tempfile.mkdtemp(prefix="fetchd-stub-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "body.txt")
        with open(path, "w") as f:
            f.write("from a file")
        name = key("file")
        self.add(match={"url": self.url(name)}, respond={"bodyFile": path})
        self.assertEqual(self.c.call("fetch", {"url": self.url(name), "stubs": self.set})["body"], "from a file")


def har_entry(method, url, status, text="", headers=(), post=None):
    request = {"method": method, "url": url, "httpVersion": "HTTP/1.1", "headers": [], "queryString": [],
               "cookies": [], "headersSize": -1, "bodySize": 0}
    if post is not None:
        request["postData"] = {"mimeType": "text/plain", "text": post}
    return {"startedDateTime": "2026-12-01T10:00:00.000Z", "time": 1, "request": request,
            "response": {"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [],
                         "headers": [{"name": n, "value": v} for n, v in headers],
                         "content": {"size": len(text), "mimeType": "text/plain", "text": text},
                         "redirectURL": "", "headersSize": -1, "bodySize": len(text)},
            "cache": {}, "timings": {"send": 0, "wait": 0, "receive": 0}}


def har(*entries):
    return {"log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": list(entries)}}


class TestLoadStubs(StubCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-har-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, doc, name="in.har"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    def test_identical_requests_are_answered_in_the_files_order(self):
        name = key("har")
        url = self.url(name)
        path = self.write(har(har_entry("GET", url, 503, "busy", [("Retry-After", "0"), ("Content-Length", "4")]),
                              har_entry("GET", url, 200, "first"),
                              har_entry("GET", url + "?x=1", 200, "other"),
                              har_entry("GET", url, 200, "second"),
                              har_entry("POST", url, 201, "posted", post="a=1"),
                              har_entry("GET", url + "-failed", 0)))
        self.assertEqual(self.c.call("loadStubs", {"set": self.set, "har": path}), {"loaded": 3})
        get = lambda u: self.c.call("fetch", {"url": u, "stubs": self.set, "retry": False})
        first = get(url)
        self.assertEqual((first["status"], first["body"], first["headers"].get("retry-after")), (503, "busy", "0"), first)
        self.assertNotIn("content-length", first["headers"], "a recorded Content-Length is not replayed")
        self.assertEqual([get(url)["body"] for _ in range(3)], ["first", "second", "second"])
        self.assertEqual(get(url + "?x=1")["body"], "other")
        r = self.c.call("fetch", {"url": url, "method": "POST", "body": "a=1", "stubs": self.set})
        self.assertEqual((r["status"], r["body"]), (201, "posted"))
        self.assertEqual(self.server_count(name), 0)

    def test_a_file_that_is_not_har_is_refused_whole(self):
        for doc, needle in (("{not json", "not JSON"), ({"log": {}}, "log.entries"),
                            (har(har_entry("GET", "http://h/a", 200), {"request": {"method": "GET"}}), "log.entries[1]")):
            with self.subTest(needle=needle):
                e = self.error("loadStubs", {"set": self.set, "har": self.write(doc)})
                self.assertEqual((e.code, e.data.get("field")), (-32602, "har"), e.data)
                self.assertIn(needle, e.data["detail"])
        self.assertEqual(self.c.call("getStubs", {"set": self.set})["stubs"], [], "a refused file was half-loaded")
        e = self.error("loadStubs", {"set": self.set, "har": os.path.join(self.tmp, "missing.har")})
        self.assertEqual(e.code, -32003, e.data)

    def test_a_har_log_of_fetchd_replays_without_the_server(self):
        name = key("replay")
        logs = os.path.join(self.tmp, "logs")
        self.c.call("setLogging", {"enabled": True, "directory": logs})
        try:
            real = self.c.call("fetch", {"url": self.url(name), "jobId": name})
            wait_for(lambda: glob.glob(os.path.join(logs, f"*-{name}.har")), timeout=10)
            # A stubbed answer is logged too, with its status.
            self.add(match={"url": self.url(name + "-stubbed")}, respond={"status": 207, "body": "s"})
            self.c.call("fetch", {"url": self.url(name + "-stubbed"), "stubs": self.set, "jobId": name + "-stubbed"})
            wait_for(lambda: glob.glob(os.path.join(logs, f"*-{name}-stubbed.har")), timeout=10)
        finally:
            self.c.call("setLogging", {"enabled": False})
        with open(glob.glob(os.path.join(logs, f"*-{name}-stubbed.har"))[0]) as f:
            entry = json.load(f)["log"]["entries"][0]
        self.assertEqual(entry["response"]["status"], 207, entry)
        self.assertEqual(self.server_count(name), 1)
        other = key("replayset")
        loaded = self.c.call("loadStubs", {"set": other, "har": glob.glob(os.path.join(logs, f"*-{name}.har"))[0]})
        self.assertEqual(loaded, {"loaded": 1})
        again = self.c.call("fetch", {"url": self.url(name), "stubs": other})
        self.assertEqual((again["status"], again["body"]), (real["status"], real["body"]))
        self.assertEqual(self.server_count(name), 1, "the replayed request reached the server")
        self.c.call("removeStubs", {"set": other})


class TestRecordStubs(StubCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-rec-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def entries(self, path, count):
        def read():
            try:
                with open(path) as f:
                    e = json.load(f)["log"]["entries"]
                return e if len(e) >= count else None
            except (OSError, ValueError):
                return None
        wait_for(read, timeout=10, message=f"{path} never held {count} entries")
        return read()

    def test_misses_are_recorded_to_the_set_and_the_har_file(self):
        name, flaky = key("rec"), key("rec-flaky")
        path = os.path.join(self.tmp, "rec.har")
        self.assertEqual(self.c.call("recordStubs", {"set": self.set, "har": path}), {"set": self.set, "har": path})
        first = self.c.call("fetch", {"url": self.url(name), "stubs": self.set, "headers": {"Authorization": "Bearer s3cret"}})
        self.assertNotEqual(first["httpVersion"], "stub", first)
        again = self.c.call("fetch", {"url": self.url(name), "stubs": self.set})
        self.assertEqual((again["httpVersion"], again["status"], again["body"]), ("stub", first["status"], first["body"]))
        self.assertEqual(self.server_count(name), 1, "the recorded answer was not replayed")
        # A retried request is recorded attempt by attempt, and replays the same way.
        url = f"{self.url(flaky, 'flaky')}?fail=1&status=503&retry-after=0"
        r = self.c.call("fetch", {"url": url, "stubs": self.set})
        self.assertEqual((r["status"], r["attempts"]), (200, 2), r)
        r = self.c.call("fetch", {"url": url, "stubs": self.set})
        self.assertEqual((r["status"], r["attempts"], r["httpVersion"]), (200, 2, "stub"), r)
        self.assertEqual(self.server_count(flaky), 2)
        entries = self.entries(path, 3)
        self.assertEqual([e["response"]["status"] for e in entries], [200, 503, 200])
        auth = [h["value"] for h in entries[0]["request"]["headers"] if h["name"].lower() == "authorization"]
        self.assertEqual(auth, ["<redacted>"], entries[0]["request"]["headers"])
        # The file replays in another set.
        other = key("replayed")
        self.assertEqual(self.c.call("loadStubs", {"set": other, "har": path}), {"loaded": 2})
        self.assertEqual(self.c.call("fetch", {"url": self.url(name), "stubs": other})["body"], first["body"])
        self.c.call("removeStubs", {"set": other})
        self.assertEqual(self.server_count(name), 1)

    def test_a_har_path_that_cannot_be_written(self):
        e = self.error("recordStubs", {"set": self.set, "har": os.path.join(self.tmp, "no", "such", "dir.har")})
        self.assertEqual(e.code, -32003, e.data)
        e = self.error("recordStubs", {"set": self.set, "har": "relative.har"})
        self.assertEqual((e.code, e.data.get("field")), (-32602, "har"))


class TestOfflineDaemon(StubCase):
    """fetchd --stubs FILE --offline: every request is answered from FILE, or fails with stubMiss."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="fetchd-offline-")
        cls.name = key("offline")
        from harness import servers
        cls.stub_url = f"{servers().test_url}/record/{cls.name}"
        path = os.path.join(cls.tmp, "stubs.json")
        with open(path, "w") as f:
            json.dump([{"match": {"url": cls.stub_url}, "respond": {"status": 200, "body": "offline answer"}},
                       {"set": "named", "match": {"urlPrefix": "http://"}, "respond": {"status": 299}}], f)
        cls.DAEMON_ARGS = ("--stubs", path, "--offline")
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.tmp, True)

    def test_every_request_is_answered_from_the_file(self):
        r = self.c.call("fetch", {"url": self.stub_url})
        self.assertEqual((r["status"], r["body"]), (200, "offline answer"))
        self.assertEqual(self.c.call("fetch", {"url": self.url("x"), "stubs": "named"})["status"], 299)
        self.assertEqual(self.server_count(self.name), 0)

    def test_offline_never_uses_the_network(self):
        name = key("offline-miss")
        self.c.call("setStubMode", {"set": "default", "onMiss": "network"})
        e = self.error("fetch", {"url": self.url(name)})
        self.assertEqual(e.data["kind"], "stubMiss", e.data)
        self.assertEqual(self.server_count(name), 0)

    def test_a_bad_stubs_file_stops_the_start(self):
        for doc, needle in (([{"match": {"urlPattern": "("}, "respond": {}}], "[0].match.urlPattern"), ({"log": 1}, "log.entries")):
            with self.subTest(needle=needle):
                path = os.path.join(self.tmp, "bad.json")
                with open(path, "w") as f:
                    json.dump(doc, f)
                sock = os.path.join(self.tmp, "bad.sock")
                r = subprocess.run([FETCHD_BIN, "--socket", sock, "--stubs", path], capture_output=True, timeout=20,
                                   stdin=subprocess.DEVNULL)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(needle, r.stderr.decode(errors="replace"))


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON_CLIENT = os.path.join(REPO, "clients", "python")


class TestPythonClientStubs(StubCase):
    """clients/python: the stub methods, the stub_set context manager, offline_daemon and the
    pytest fixture."""

    def setUp(self):
        super().setUp()
        import sys
        if PYTHON_CLIENT not in sys.path:
            sys.path.insert(0, PYTHON_CLIENT)

    def test_stub_set_context_manager(self):
        from fetchd_client import Client, TransportError
        name = key("py")
        with Client(self.daemon.socket_path) as client:
            with client.stub_set() as stubs:
                made = stubs.name
                stubs.add({"url": self.url(name)}, respond_sequence=[{"status": 503}, {"json": {"ok": 1}}])
                r = stubs.fetch(self.url(name), retry={"maxInterval": 0.05})
                self.assertEqual((r.status, r.json(), r["attempts"]), (200, {"ok": 1}, 2))
                with self.assertRaises(TransportError) as caught:
                    stubs.fetch(self.url(name + "-other"))
                self.assertEqual(caught.exception.kind, "stubMiss")
                self.assertEqual(caught.exception.nearest["differences"], ["url"])
                self.assertEqual([s["hits"] for s in stubs.stubs()], [2])
                self.assertEqual(len(stubs.misses()), 1)
            self.assertEqual(client.get_stubs(made)["stubs"], [], "the set was not removed at exit")
        self.assertEqual(self.server_count(name), 0)

    def test_offline_daemon_and_the_pytest_fixture(self):
        from fetchd_client import TransportError
        from fetchd_client.testing import offline_daemon
        d = tempfile.mkdtemp(prefix="fetchd-pyt-")
        self.addCleanup(shutil.rmtree, d, True)
        stubs = os.path.join(d, "stubs.json")
        with open(stubs, "w") as f:
            json.dump([{"match": {"url": "https://api.example.com/v1/me"}, "respond": {"json": {"name": "ann"}}}], f)
        with offline_daemon(stubs) as client:
            self.assertEqual(client.fetch("https://api.example.com/v1/me").json(), {"name": "ann"})
            with self.assertRaises(TransportError) as caught:
                client.fetch(self.url(key("never")))
            self.assertEqual(caught.exception.kind, "stubMiss")
            path = client.socket_path
        self.assertFalse(os.path.exists(path), "the daemon's socket outlived the block")
        test = os.path.join(d, "test_uses_fixture.py")
        with open(test, "w") as f:
            f.write(
                "import os, pytest\n"
                "pytest_plugins = ['fetchd_client.pytest_plugin']\n"
                "def test_one(fetchd_offline):\n"
                "    with fetchd_offline.stub_set() as s:\n"
                "        s.add({'urlPrefix': 'https://x.test/'}, {'status': 204})\n"
                "        assert s.fetch('https://x.test/a').status == 204\n"
                "    assert os.environ['FETCHD_SOCKET'] == fetchd_offline.socket_path\n"
                f"@pytest.mark.fetchd_stubs({stubs!r})\n"
                "def test_marked(fetchd_offline):\n"
                "    assert fetchd_offline.fetch('https://api.example.com/v1/me').json() == {'name': 'ann'}\n")
        env = dict(os.environ, PYTHONPATH=PYTHON_CLIENT)
        r = subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=d, env=env,
                           capture_output=True, timeout=120)
        out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 0, out[-2000:])
        self.assertIn("2 passed", out)


class TestFetchctlStub(StubCase):
    def fetchctl(self, *args):
        from harness import FETCHCTL
        r = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, *args],
                           capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def test_stub_add_list_remove_load_record(self):
        name = key("ctl")
        code, out, err = self.fetchctl("stub", "add", "--set", self.set,
                                       json.dumps({"match": {"url": self.url(name)}, "respond": {"status": 200, "body": "canned"}}))
        self.assertEqual(code, 0, err)
        sid = json.loads(out)["stubId"]
        code, out, err = self.fetchctl("fetch", self.url(name), "--stubs", self.set)
        self.assertEqual((code, out), (0, "canned"), err)
        code, out, _ = self.fetchctl("fetch", self.url(name + "-x"), "--stubs", self.set)
        self.assertEqual(code, 4, "a stubMiss is a JSON-RPC error")
        code, out, err = self.fetchctl("stub", "list", "--set", self.set)
        listed = json.loads(out)
        self.assertEqual([(s["stubId"], s["hits"]) for s in listed["stubs"]], [(sid, 1)])
        self.assertEqual(listed["misses"][-1]["nearest"]["stubId"], sid)
        code, out, err = self.fetchctl("stub", "remove", "--set", self.set, sid)
        self.assertEqual(json.loads(out), {"removed": 1}, err)
        d = tempfile.mkdtemp(prefix="fetchd-ctl-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "rec.har")
        code, out, err = self.fetchctl("stub", "record", "--set", self.set, path)
        self.assertEqual((code, json.loads(out)), (0, {"set": self.set, "har": path}), err)
        self.assertEqual(self.fetchctl("fetch", self.url(name), "--stubs", self.set)[0], 0)
        other = key("ctl-load")
        wait_for(lambda: os.path.getsize(path) > 200, timeout=10)
        code, out, err = self.fetchctl("stub", "load", "--set", other, path)
        self.assertEqual((code, json.loads(out)), (0, {"loaded": 1}), err)
        code, out, err = self.fetchctl("fetch", self.url(name), "--stubs", other)
        self.assertEqual((code, out), (0, "recorded"), err)
        self.assertEqual(self.server_count(name), 1)
        self.fetchctl("stub", "remove", "--set", other)
        self.assertEqual(self.fetchctl("stub", "add", "not json")[0], 2)


if __name__ == "__main__":
    unittest.main()
