"""Shared per-host limits: one rate, one concurrency cap, one queue and one Retry-After
pause per host for every client process of the daemon.

Timing is read at the test server (/record/<key> keeps each request's arrival on the system-wide
monotonic clock, /hits/<key> reports them and the most requests it had in flight at once), so the
checks are about what the origin actually saw. Separate client processes run CLIENT below (a
standalone JSON-RPC client). Nothing sleeps to wait for an event: state is polled with deadlines
(getRateLimits' running/queued counts, listJobs), and a slot is held by a slow request that the
test cancels when it is ready, not by a guess at how long setting up takes."""
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

from harness import FETCHD_BIN, Daemon, RPCError, servers, wait_for
from jobhelpers import collect, collect_all, hits, key, send_request

# A client in its own process: argv = socket path, JSON list of fetch params. Sends every fetch
# at once on one connection and prints one JSON line per answer, in request order, as
# {"answer": ..., "t": monotonic time it arrived}.
CLIENT = r"""
import json, socket, sys, time
path, reqs = sys.argv[1], json.loads(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(path)
s.sendall(b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "fetch", "params": p}).encode() + b"\n"
                   for i, p in enumerate(reqs)))
answers, buf = {}, b""
while len(answers) < len(reqs):
    chunk = s.recv(65536)
    if not chunk:
        sys.exit("daemon closed the connection with %d of %d answers" % (len(answers), len(reqs)))
    buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        if line.strip():
            m = json.loads(line)
            if "id" in m and "method" not in m:
                answers[m["id"]] = {"answer": m, "t": time.monotonic()}
for i in range(len(reqs)):
    print(json.dumps(answers[i]))
"""

SLOW = "/slow-headers?ms=20000"  # holds a host slot until the test cancels it


def start_client(socket_path, requests):
    return subprocess.Popen([sys.executable, "-c", CLIENT, socket_path, json.dumps(requests)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def client_answers(proc, timeout=30):
    """The answers a CLIENT process printed (list of {"answer", "t"}); AssertionError if it failed."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"client process did not finish within {timeout}s; stderr: {err.decode()[-500:]}")
    if proc.returncode != 0:
        raise AssertionError(f"client process exited {proc.returncode}; stderr: {err.decode()[-1000:]}")
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def parse_iso(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def max_in_window(times, window):
    """The most arrivals in any closed window of `window` seconds."""
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] > window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


class LimitCase(unittest.TestCase):
    """A fresh daemon per test (limits are daemon-wide state); DAEMON_ARGS per class."""
    DAEMON_ARGS = ()

    def setUp(self):
        self.srv = servers()
        self.daemon = Daemon(*self.DAEMON_ARGS).start()
        self.c = self.daemon.client()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.daemon.close()

    def clients(self, *request_lists):
        procs = [start_client(self.daemon.socket_path, reqs) for reqs in request_lists]
        self.procs += procs
        return procs

    def limits(self, client=None):
        return (client or self.c).call("getRateLimits")

    def entry(self, host, client=None):
        for e in self.limits(client)["limits"]:
            if e["host"] == host:
                return e
        return None

    def host_state(self):
        """getRateLimits' entry for the test server (scheme://host:port), or None when idle."""
        want = f"http://127.0.0.1:{self.srv.test_port}"
        for h in self.limits()["hosts"]:
            if h["host"] == want:
                return h
        return None

    def wait_counts(self, running=None, queued=None, timeout=5.0):
        def ok():
            h = self.host_state() or {"running": 0, "queued": 0}
            return (running is None or h["running"] == running) and (queued is None or h["queued"] == queued)
        wait_for(ok, timeout=timeout,
                 message=f"expected running={running} queued={queued} for the test server; "
                         f"getRateLimits: {json.dumps(self.limits())}")

    def hold_slot(self, client, job_id):
        """Starts a slow request that holds one of the test server's slots; returns its request id."""
        rid = send_request(client, "fetch", {"url": self.srv.test_url + SLOW, "jobId": job_id, "retry": False})
        self.wait_counts(running=1)
        return rid

    def release_slot(self, job_id):
        """Cancels the slow request started by hold_slot (its -32002 answer is read with answers())."""
        self.assertEqual(self.c.call("cancel", {"jobId": job_id}), {"cancelled": True})

    def answers(self, client, rids, timeout=15):
        """{request id: answer} for every id, read together so that none is lost."""
        return collect_all(client, list(rids), timeout=timeout)[1]

    def assertCancelled(self, answer):
        self.assertEqual(answer.get("error", {}).get("code"), -32002, answer)

    def ok_result(self, answer):
        self.assertNotIn("error", answer, f"expected a result, got {json.dumps(answer)[:400]}")
        self.assertEqual(answer["result"]["status"], 200, answer)
        return answer["result"]


class TestSharedRate(LimitCase):
    RPS, BURST = 5, 2
    DAEMON_ARGS = ("--rate", "127.0.0.1=5:2")

    def test_three_processes_share_five_per_second(self):
        name = key("rate")
        url = f"{self.srv.test_url}/record/{name}"
        per_client = 5
        procs = self.clients(*[[{"url": url, "retry": False, "comment": f"client {c} #{i}"} for i in range(per_client)]
                               for c in range(3)])
        results = [client_answers(p) for p in procs]
        for c, answers in enumerate(results):
            self.assertEqual(len(answers), per_client, f"client {c}: {answers}")
            for a in answers:
                self.ok_result(a["answer"])
        times = sorted(hits(name)["times"])
        n = 3 * per_client
        self.assertEqual(len(times), n, f"the test server saw {len(times)} requests, expected {n}")
        # In any window of T seconds at most burst + rps x T requests start.
        worst = max_in_window(times, 1.0)
        self.assertLessEqual(worst, self.BURST + self.RPS,
                             f"{worst} requests reached the server within one second (limit burst {self.BURST} "
                             f"+ {self.RPS}/s); offsets: {[round(t - times[0], 3) for t in times]}")
        self.assertLessEqual(max_in_window(times, 0.1), self.BURST,
                             f"more than burst={self.BURST} requests within 100 ms; "
                             f"offsets: {[round(t - times[0], 3) for t in times]}")
        # The bucket: burst at once, then one every 1/rps s -> span (n - burst) / rps.
        span = times[-1] - times[0]
        expected = (n - self.BURST) / self.RPS
        self.assertGreaterEqual(span, expected - 0.1,
                                f"span {span:.3f}s shorter than the bucket allows ({expected:.2f}s); "
                                f"offsets: {[round(t - times[0], 3) for t in times]}")
        self.assertLess(span, expected + 0.8,
                        f"span {span:.3f}s much longer than the bucket demands ({expected:.2f}s): "
                        f"requests were held back more than the limit asks; "
                        f"offsets: {[round(t - times[0], 3) for t in times]}")
        # Every request after the burst starts about 1/rps after the one before it.
        gaps = [b - a for a, b in zip(times[self.BURST:], times[self.BURST + 1:])]
        self.assertGreater(min(gaps), 1 / self.RPS - 0.06, f"gaps after the burst: {[round(g, 3) for g in gaps]}")

    def test_retries_go_back_through_the_limit(self):
        # Retry-After: 0 means no retry wait at all: only the 5/s limit spaces the attempts.
        self.c.call("setRateLimit", {"host": "127.0.0.1", "requestsPerSecond": 4, "burst": 1})
        name = key("flaky")
        r = self.c.call("fetch", {"url": f"{self.srv.test_url}/flaky/{name}?fail=2&status=503&retry-after=0"},
                        timeout=20)
        self.assertEqual((r["status"], r["attempts"]), (200, 3), r)
        t = hits(name)["times"]
        gaps = [round(b - a, 3) for a, b in zip(t, t[1:])]
        self.assertEqual(len(t), 3, t)
        self.assertTrue(all(g >= 0.25 - 0.03 for g in gaps),
                        f"retries were not spaced by the 4/s limit (>= 0.25 s apart): gaps {gaps}")


class TestConcurrency(LimitCase):
    DAEMON_ARGS = ("--max-per-host", "2")

    def test_max_concurrent_two_across_processes(self):
        name = key("conc")
        url = f"{self.srv.test_url}/record/{name}?ms=200"
        split = [4, 3, 3]
        procs = self.clients(*[[{"url": url, "retry": False} for _ in range(n)] for n in split])
        for p in procs:
            for a in client_answers(p):
                self.ok_result(a["answer"])
        h = hits(name)
        self.assertEqual(h["count"], 10, h)
        self.assertLessEqual(h["maxConcurrent"], 2,
                             f"the test server had {h['maxConcurrent']} requests in flight at once (limit 2)")
        self.assertEqual(h["maxConcurrent"], 2, "two requests should have run side by side")
        span = max(h["times"]) - min(h["times"])
        # Five rounds of two, 200 ms each: the last pair starts about 0.8 s after the first.
        self.assertGreater(span, 0.8 - 0.1, f"10 x 200 ms requests, 2 at a time, started within {span:.3f}s")

    def test_limit_for_one_port_does_not_touch_another_host(self):
        # A name:port entry governs only that port; nginx (another port) keeps the * default.
        port = self.srv.test_port
        self.c.call("setRateLimit", {"host": f"127.0.0.1:{port}", "maxConcurrent": 1})
        rid = self.hold_slot(self.c, "holder")
        r = self.c.call("fetch", {"url": self.srv.nginx_url + "/small.txt"}, timeout=10)
        self.assertEqual(r["status"], 200, r)
        h = self.host_state()
        self.assertEqual(h["limit"], f"127.0.0.1:{port}", h)
        self.release_slot("holder")
        self.assertCancelled(self.answers(self.c, [rid])[rid])


class TestPriority(LimitCase):
    DAEMON_ARGS = ("--max-per-host", "1")

    def test_higher_priority_first_fifo_among_equals(self):
        rid = self.hold_slot(self.c, "holder")
        prefix = key("prio")
        jobs = [("a", 0), ("b", 5), ("c", 0), ("d", 10), ("e", 5), ("f", -1), ("g", 0)]
        c2 = self.daemon.client()
        rids = {}
        for i, (label, priority) in enumerate(jobs):
            # Two connections take turns; each job is queued before the next is sent (FIFO is by arrival).
            client = self.c if i % 2 == 0 else c2
            rids[label] = (client, send_request(client, "fetch", {
                "url": f"{self.srv.test_url}/record/{prefix}-{label}", "priority": priority, "retry": False}))
            self.wait_counts(running=1, queued=i + 1)
        self.release_slot("holder")
        got = self.answers(self.c, [rid] + [r for client, r in rids.values() if client is self.c])
        got2 = self.answers(c2, [r for client, r in rids.values() if client is c2])
        self.assertCancelled(got.pop(rid))
        for answer in list(got.values()) + list(got2.values()):
            self.ok_result(answer)
        arrival = {label: hits(f"{prefix}-{label}")["times"][0] for label, _ in jobs}
        order = sorted(arrival, key=arrival.get)
        self.assertEqual(order, ["d", "b", "e", "a", "c", "g", "f"],
                         f"start order at the server (priorities {dict(jobs)})")

    def test_cancel_while_queued_leaves_queue_at_once(self):
        rid = self.hold_slot(self.c, "holder")
        rq = send_request(self.c, "fetch", {"url": f"{self.srv.test_url}/record/{key('q')}", "jobId": "queued-1"})
        self.wait_counts(running=1, queued=1)
        self.assertEqual(self.limits()["queued"], 1)
        with self.daemon.client() as c2:
            self.assertEqual(c2.call("cancel", {"jobId": "queued-1"}), {"cancelled": True})
            answer = collect(self.c, rq, timeout=2).answer
            self.assertEqual(answer.get("error", {}).get("code"), -32002, answer)
            self.assertEqual(answer["error"].get("data"), {"jobId": "queued-1", "by": "cancel"}, answer)
            # At once: the holder is still running, the queue is empty.
            got = self.limits(c2)
            self.assertEqual(got["queued"], 0, got)
            h = self.host_state()
            self.assertEqual((h["running"], h["queued"]), (1, 0), h)
            self.assertNotIn("queued-1", [j["jobId"] for j in c2.call("listJobs")["jobs"]])
            self.assertEqual(c2.call("cancel", {"jobId": "queued-1"}), {"cancelled": False})
        self.release_slot("holder")
        self.assertCancelled(self.answers(self.c, [rid])[rid])
        self.wait_counts(running=0, queued=0)

    def test_disconnect_while_queued_leaves_queue(self):
        rid = self.hold_slot(self.c, "holder")
        with self.daemon.client() as c2:
            send_request(c2, "fetch", {"url": f"{self.srv.test_url}/record/{key('q')}"})
            send_request(c2, "fetch", {"url": f"{self.srv.test_url}/record/{key('q')}"})
            self.wait_counts(running=1, queued=2)
        self.wait_counts(running=1, queued=0, timeout=3)
        self.release_slot("holder")
        self.assertCancelled(self.answers(self.c, [rid])[rid])


class TestQueueBound(LimitCase):
    DAEMON_ARGS = ("--max-per-host", "1", "--max-queued", "5")

    def test_seventh_job_overloaded_queued_ones_complete(self):
        self.assertEqual(self.limits()["maxQueued"], 5)
        rid = self.hold_slot(self.c, "holder")
        name = key("bound")
        queued = []
        for i in range(5):
            queued.append(send_request(self.c, "fetch", {"url": f"{self.srv.test_url}/record/{name}", "retry": False}))
            self.wait_counts(running=1, queued=i + 1)
        with self.daemon.client() as c2:
            try:
                r = c2.call("fetch", {"url": f"{self.srv.test_url}/record/{name}"}, timeout=5)
                self.fail(f"the 7th job (5 queued, 1 running, --max-queued 5) was accepted: {r}")
            except RPCError as e:
                self.assertEqual(e.code, -32005, e)
                self.assertEqual(e.data, {"limit": 5}, e)
            # The bound counts waiting jobs only: a job for another host that has room
            # starts at once and never waits, so it is not refused.
            self.assertEqual(c2.call("fetch", {"url": self.srv.nginx_url + "/small.txt"}, timeout=5)["status"], 200)
            # Another job for the full host would wait: refused.
            with self.assertRaises(RPCError) as cm:
                c2.call("fetch", {"url": f"{self.srv.test_url}/record/{name}"}, timeout=5)
            self.assertEqual(cm.exception.code, -32005)
        self.assertEqual(self.limits()["queued"], 5, "a refusal must not drop a queued job")
        self.release_slot("holder")
        got = self.answers(self.c, [rid] + queued)
        self.assertCancelled(got.pop(rid))
        for answer in got.values():
            self.ok_result(answer)
        self.assertEqual(hits(name)["count"], 5, "the 5 queued jobs reach the server; the refused one does not")
        # Room again: a new job is accepted.
        self.assertEqual(self.c.call("fetch", {"url": f"{self.srv.test_url}/record/{name}"})["status"], 200)


    def test_full_queue_does_not_drop_a_retry(self):
        # A job already accepted is not a new job: its retry must not be refused with -32005.
        # "localhost" is another host key than 127.0.0.1 (same test server), with a free slot.
        name = key("retry-full")
        rr = send_request(self.c, "fetch", {
            "url": f"http://localhost:{self.srv.test_port}/flaky/{name}?fail=1&status=500",
            "jobId": "retrier", "retry": {"maxAttempts": 2, "maxInterval": 1}})
        wait_for(lambda: hits(name)["count"] == 1, timeout=5, message="first attempt never reached the server")
        rid = self.hold_slot(self.c, "holder")
        fill = key("fill")
        queued = []
        for i in range(5):
            queued.append(send_request(self.c, "fetch", {"url": f"{self.srv.test_url}/record/{fill}", "retry": False}))
            self.wait_counts(running=1, queued=i + 1)
        state = next((j["state"] for j in self.c.call("listJobs")["jobs"] if j["jobId"] == "retrier"), None)
        if state != "waiting":
            self.skipTest(f"the retry wait (1 s) ended before the queue was full (state {state})")
        got = self.answers(self.c, [rr], timeout=10)
        self.assertNotIn("error", got[rr], f"a job waiting to retry was dropped when the queue was full: "
                                           f"{json.dumps(got[rr])[:300]}")
        self.assertEqual(got[rr]["result"]["attempts"], 2, got[rr])
        self.release_slot("holder")
        got = self.answers(self.c, [rid] + queued)
        self.assertCancelled(got.pop(rid))


class TestRetryAfterPause(LimitCase):
    def test_retry_after_pauses_host_for_other_processes(self):
        name = key("paused")
        (a,) = self.clients([{"url": f"{self.srv.test_url}/status/503?retry-after=1", "retry": False}])
        (got,) = client_answers(a)
        t_answer = got["t"]
        self.assertEqual(got["answer"]["result"]["status"], 503, got)
        # While paused: getRateLimits says until when (ISO 8601, about 1 s from now).
        limits = self.limits()
        star = next(e for e in limits["limits"] if e["host"] == "*")
        h = self.host_state()
        wall = datetime.datetime.now(datetime.timezone.utc)
        self.assertIsNotNone(h, f"no host entry while paused: {limits}")
        for where, value in (("hosts", h["pausedUntil"]), ("limits[*]", star["pausedUntil"])):
            self.assertIsInstance(value, str, f"{where} pausedUntil during a pause: {limits}")
            left = (parse_iso(value) - wall).total_seconds()
            self.assertTrue(0.3 < left <= 1.1, f"{where} pausedUntil {value} is {left:.3f}s from now, expected ~1 s")
        # Another process's requests to the host wait for the pause to end.
        (b,) = self.clients([{"url": f"{self.srv.test_url}/record/{name}"}, {"url": f"{self.srv.test_url}/record/{name}"}])
        for x in client_answers(b):
            self.ok_result(x["answer"])
        first = min(hits(name)["times"])
        self.assertGreaterEqual(first - t_answer, 0.85,
                                f"another client's request reached the server {first - t_answer:.3f}s after "
                                f"the 503 with Retry-After: 1 was answered; expected >= ~1 s")
        self.assertLess(first - t_answer, 3.0, "the pause lasted far longer than Retry-After")
        h = self.host_state()
        self.assertTrue(h is None or h["pausedUntil"] is None, f"pause still shown after it ended: {h}")

    def test_pause_capped_by_max_interval(self):
        name = key("capped")
        t0 = time.monotonic()
        r = self.c.call("fetch", {"url": f"{self.srv.test_url}/status/429?retry-after=30",
                                  "retry": {"maxAttempts": 1, "maxInterval": 0.5}})
        self.assertEqual(r["status"], 429, r)
        h = self.host_state()
        self.assertIsNotNone(h and h["pausedUntil"], f"429 with Retry-After did not pause the host: {h}")
        self.assertEqual(self.c.call("fetch", {"url": f"{self.srv.test_url}/record/{name}"}, timeout=10)["status"], 200)
        waited = hits(name)["times"][0] - t0
        self.assertLess(waited, 3.0, f"Retry-After: 30 paused the host {waited:.2f}s despite maxInterval 0.5")
        self.assertGreater(waited, 0.4, f"the host was not paused (next start after {waited:.2f}s)")

    def test_pause_does_not_touch_other_hosts(self):
        r = self.c.call("fetch", {"url": f"{self.srv.test_url}/status/503?retry-after=3", "retry": False})
        self.assertEqual(r["status"], 503)
        t0 = time.monotonic()
        self.assertEqual(self.c.call("fetch", {"url": self.srv.nginx_url + "/small.txt"}, timeout=10)["status"], 200)
        self.assertLess(time.monotonic() - t0, 1.0, "a pause of the test server delayed nginx (another port)")


class TestSetRateLimit(LimitCase):
    def test_get_rate_limits_shape(self):
        got = self.limits()
        self.assertEqual(set(got), {"limits", "hosts", "queued", "maxQueued"}, got)
        self.assertEqual(got["maxQueued"], 10000, got)
        self.assertEqual(got["queued"], 0, got)
        self.assertEqual(got["limits"], [{"host": "*", "maxConcurrent": 10, "requestsPerSecond": None, "burst": 1,
                                          "followServer": True, "adaptive": False, "maxRecvBytesPerSecond": None,
                                          "running": 0, "queued": 0, "pausedUntil": None, "server": None,
                                          "concurrencyNow": 10}], got)
        rid = self.hold_slot(self.c, "holder")
        h = self.host_state()
        self.assertEqual(h, {"host": f"http://127.0.0.1:{self.srv.test_port}", "limit": "*", "running": 1,
                             "queued": 0, "pausedUntil": None, "server": None, "concurrencyNow": 10}, h)
        self.assertEqual(self.entry("*")["running"], 1)
        self.release_slot("holder")
        self.assertCancelled(self.answers(self.c, [rid])[rid])
        self.wait_counts(running=0, queued=0)

    def test_partial_update_and_null(self):
        r = self.c.call("setRateLimit", {"host": "Example.COM", "requestsPerSecond": 2.5, "burst": 4})
        # A new entry starts from the * defaults.
        v3 = {"followServer": True, "adaptive": False, "maxRecvBytesPerSecond": None}
        self.assertEqual(r, {"host": "example.com", "maxConcurrent": 10, "requestsPerSecond": 2.5, "burst": 4, **v3}, r)
        r = self.c.call("setRateLimit", {"host": "example.com", "maxConcurrent": 3})
        self.assertEqual(r, {"host": "example.com", "maxConcurrent": 3, "requestsPerSecond": 2.5, "burst": 4, **v3}, r)
        r = self.c.call("setRateLimit", {"host": "example.com", "requestsPerSecond": None})
        self.assertEqual(r, {"host": "example.com", "maxConcurrent": 3, "requestsPerSecond": None, "burst": 4, **v3}, r)
        r = self.c.call("setRateLimit", {"host": "example.com", "maxConcurrent": None})
        self.assertEqual(r["maxConcurrent"], None, r)
        e = self.entry("example.com")
        self.assertEqual({k: e[k] for k in ("maxConcurrent", "requestsPerSecond", "burst")},
                         {"maxConcurrent": None, "requestsPerSecond": None, "burst": 4}, e)
        # Port-specific entries and the * default.
        r = self.c.call("setRateLimit", {"host": "example.com:8443", "requestsPerSecond": 1})
        self.assertEqual(r["host"], "example.com:8443")
        r = self.c.call("setRateLimit", {"host": "*", "maxConcurrent": 6})
        self.assertEqual(r, {"host": "*", "maxConcurrent": 6, "requestsPerSecond": None, "burst": 1, **v3}, r)
        hosts = [e["host"] for e in self.limits()["limits"]]
        self.assertEqual(set(hosts), {"*", "example.com", "example.com:8443"}, hosts)
        # Seen by every client.
        with self.daemon.client() as c2:
            self.assertEqual(self.entry("example.com:8443", c2)["requestsPerSecond"], 1)

    def test_validation(self):
        bad = [
            ({}, "host"),
            ({"host": ""}, "host"),
            ({"host": "a b"}, "host"),
            ({"host": "http://example.com"}, "host"),
            ({"host": "example.com:0"}, "host"),
            ({"host": "example.com:99999"}, "host"),
            ({"host": 5}, "host"),
            ({"host": "x", "maxConcurrent": -1}, "maxConcurrent"),
            ({"host": "x", "maxConcurrent": 1.5}, "maxConcurrent"),
            ({"host": "x", "maxConcurrent": "2"}, "maxConcurrent"),
            ({"host": "x", "requestsPerSecond": 0}, "requestsPerSecond"),
            ({"host": "x", "requestsPerSecond": -1}, "requestsPerSecond"),
            ({"host": "x", "requestsPerSecond": "5"}, "requestsPerSecond"),
            ({"host": "x", "burst": 0}, "burst"),
            ({"host": "x", "burst": 2.5}, "burst"),
            ({"host": "x", "rps": 5}, "rps"),
        ]
        for params, field in bad:
            with self.subTest(params=params):
                with self.assertRaises(RPCError) as cm:
                    self.c.call("setRateLimit", params)
                self.assertEqual(cm.exception.code, -32602, cm.exception)
                self.assertEqual((cm.exception.data or {}).get("field"), field, cm.exception)
        with self.assertRaises(RPCError) as cm:
            self.c.call("getRateLimits", {"host": "x"})
        self.assertEqual(cm.exception.code, -32602)
        self.assertEqual([e["host"] for e in self.limits()["limits"]], ["*"], "a refused call changed the limits")

    def test_raising_limit_starts_queued_jobs(self):
        # Raising maxConcurrent while jobs wait starts them at once.
        self.c.call("setRateLimit", {"host": "127.0.0.1", "maxConcurrent": 1})
        rid = self.hold_slot(self.c, "holder")
        name = key("raise")
        r2 = send_request(self.c, "fetch", {"url": f"{self.srv.test_url}/record/{name}"})
        self.wait_counts(running=1, queued=1)
        self.c.call("setRateLimit", {"host": "127.0.0.1", "maxConcurrent": 2})
        self.ok_result(self.answers(self.c, [r2], timeout=3)[r2])
        self.release_slot("holder")
        self.assertCancelled(self.answers(self.c, [rid])[rid])


class TestConfigFile(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fetchd-ratecfg-")

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, text):
        path = os.path.join(self.tmp, "limits.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_config_file_parsed(self):
        path = self.write(
            "# fetchd limits\n"
            "\n"
            "*   maxConcurrent=4\n"
            "api.example.com  rps=5 burst=3   # an API\n"
            "cdn.example.com:8443\tmaxConcurrent=none rps=0.5\n"
            "slow.example.org maxConcurrent=1 rps=none\n")
        with Daemon("--config", path, "--rate", "api.example.com=7", "--max-queued", "99") as d:
            got = d.client().call("getRateLimits")
        limits = {e["host"]: {k: e[k] for k in ("maxConcurrent", "requestsPerSecond", "burst")} for e in got["limits"]}
        self.assertEqual(limits, {
            "*": {"maxConcurrent": 4, "requestsPerSecond": None, "burst": 1},
            # --rate after the file: its rps wins, the file's burst stays.
            "api.example.com": {"maxConcurrent": 4, "requestsPerSecond": 7, "burst": 3},
            "cdn.example.com:8443": {"maxConcurrent": None, "requestsPerSecond": 0.5, "burst": 1},
            "slow.example.org": {"maxConcurrent": 1, "requestsPerSecond": None, "burst": 1},
        }, got)
        self.assertEqual(got["maxQueued"], 99)

    def test_flags(self):
        with Daemon("--max-per-host", "3", "--rate", "127.0.0.1=2.5:4", "--rate", "*=100") as d:
            got = d.client().call("getRateLimits")
        limits = {e["host"]: {k: e[k] for k in ("maxConcurrent", "requestsPerSecond", "burst")} for e in got["limits"]}
        self.assertEqual(limits, {"*": {"maxConcurrent": 3, "requestsPerSecond": 100, "burst": 1},
                                  "127.0.0.1": {"maxConcurrent": 3, "requestsPerSecond": 2.5, "burst": 4}}, got)

    def assertRefused(self, args, *needles):
        sock = os.path.join(self.tmp, "s.sock")
        proc = subprocess.Popen([FETCHD_BIN, "--socket", sock, *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # Either it exits (refused) or it starts listening (accepted the arguments).
        wait_for(lambda: proc.poll() is not None or os.path.exists(sock), timeout=10,
                 message=f"fetchd {args} neither exited nor listened within 10 s")
        if proc.poll() is None:
            proc.kill()
            _, err = proc.communicate()
            os.unlink(sock)
            self.fail(f"fetchd {args} started instead of refusing; stderr: {err.decode(errors='replace')[-500:]}")
        _, err = proc.communicate()
        err = err.decode(errors="replace")
        self.assertNotEqual(proc.returncode, 0, f"fetchd {args} exited 0; stderr: {err}")
        for needle in needles:
            self.assertIn(needle, err, f"fetchd {args}: message should mention {needle!r}")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "s.sock")), "refused daemon left a socket")

    def test_malformed_config_refused(self):
        cases = [
            ("* maxConcurrent=4\nexample.com maxConcurrent=lots\n", "line 2"),
            ("example.com rps=0\n", "line 1"),
            ("example.com burst=0\n", "line 1"),
            ("example.com rps\n", "line 1"),
            ("example.com speed=3\n", "speed"),
        ]
        for text, needle in cases:
            with self.subTest(text=text):
                path = self.write(text)
                self.assertRefused(["--config", path], path, needle)
        self.assertRefused(["--config", os.path.join(self.tmp, "missing.conf")], "missing.conf")
        for bad in ("127.0.0.1", "127.0.0.1=0", "127.0.0.1=x", "127.0.0.1=5:0", "=5"):
            with self.subTest(rate=bad):
                self.assertRefused(["--rate", bad], "--rate")
        self.assertRefused(["--max-queued", "0"], "--max-queued")
        self.assertRefused(["--max-per-host", "-1"], "--max-per-host")

    def test_config_host_pattern_validated(self):
        # The same host patterns setRateLimit accepts; a URL or a typo would silently never match.
        path = self.write("http://example.com rps=1\n")
        self.assertRefused(["--config", path], "line 1")

    def test_rate_flag_host_pattern_validated(self):
        self.assertRefused(["--rate", "http://example.com=5"], "--rate")


if __name__ == "__main__":
    unittest.main()
