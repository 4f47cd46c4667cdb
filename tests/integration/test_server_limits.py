"""Limits the server sets (protocol.md, version 3, "Rate limits the server sets"): its rate limit
headers followed for every client (`followServer`), concurrency that adapts to its 429s
(`adaptive`), requests weighed by `cost`, and a bandwidth budget per host and for the daemon
(`maxRecvBytesPerSecond` on setRateLimit).

Everything is measured at the origin: the test server's /budget, /overload, /record and
/metered routes log each request's arrival (or each write of a body) on the system-wide
monotonic clock. Client processes run test_rate_limits.CLIENT (a standalone JSON-RPC client
on its own connection)."""
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from harness import Daemon, RPCError, servers, wait_for
from jobhelpers import hits, key, send_request
from test_rate_limits import LimitCase, client_answers, max_in_window, parse_iso, start_client
from test_redis import REDIS, RedisCase, RedisServer, free_port

FORMS = ("ietf", "ietf-dict", "ietf-fields", "x-seconds", "github", "openai")


def origin_log(route, name):
    """The test server's log of /<route>/<name> (its /<route>-log/<name>)."""
    with urllib.request.urlopen(f"{servers().test_url}/{route}-log/{name}", timeout=10) as r:
        return json.loads(r.read())


def budget_url(name, form, limit, window, ms=0):
    return f"{servers().test_url}/budget/{name}?form={form}&limit={limit}&window={window}" + (f"&ms={ms}" if ms else "")


def per_window(log):
    """{window index: (arrivals, refused)} of a /budget log."""
    out = {}
    for r in log["requests"]:
        n, refused = out.get(r["window"], (0, 0))
        out[r["window"]] = (n + 1, refused + (r["status"] == 429))
    return out


class ServerLimitCase(LimitCase):
    """A fresh daemon per test (limits are daemon-wide state)."""

    def limit(self, **fields):
        return self.c.call("setRateLimit", dict({"host": "127.0.0.1"}, **fields))

    def all_ok(self, procs, count, timeout=60):
        """Every client process got `count` answers (None: any number), each a 200."""
        for p in procs:
            answers = client_answers(p, timeout=timeout)
            if count is not None:
                self.assertEqual(len(answers), count)
            for a in answers:
                self.assertEqual(a["answer"].get("result", {}).get("status"), 200, json.dumps(a)[:400])


class TestFollowServer(ServerLimitCase):
    def test_each_header_form_holds_two_clients_to_the_budget(self):
        # Two client connections share a budget of 3 requests per second that the server states
        # in each form; one at a time (maxConcurrent 1), so the first window is held too.
        self.limit(maxConcurrent=1)
        for form in FORMS:
            with self.subTest(form=form):
                name = key(f"budget-{form}")
                url = budget_url(name, form, limit=3, window=1)
                procs = self.clients([{"url": url}] * 5, [{"url": url}] * 5)
                self.all_ok(procs, 5)
                log = origin_log("budget", name)
                self.assertEqual(log["count"], 10, "each request reached the server once")
                self.assertEqual(log["refused"], 0, f"no request past the budget: {per_window(log)}")
                windows = per_window(log)
                self.assertLessEqual(max(n for n, _ in windows.values()), 3, windows)
                self.assertGreaterEqual(len(windows), 4, "the pauses spread them over the windows")
                wait_for(lambda: (self.host_state() or {}).get("pausedUntil") is None, timeout=3,
                         message="the last pause ends at the server's reset")

    def test_requests_in_flight_count_against_what_is_left(self):
        # 4 at a time against a budget of 4 per second: when an answer says 3 left, the 3 others
        # in flight take them, so the host pauses at once (else a fifth would start and get 429).
        self.limit(maxConcurrent=4)
        name = key("inflight")
        url = budget_url(name, "openai", limit=4, window=1, ms=100)
        procs = self.clients([{"url": url, "retry": False}] * 8, [{"url": url, "retry": False}] * 8)
        self.all_ok(procs, 8)
        log = origin_log("budget", name)
        self.assertEqual((log["count"], log["refused"]), (16, 0), per_window(log))
        self.assertLessEqual(max(n for n, _ in per_window(log).values()), 4)

    def test_get_rate_limits_shows_the_server_and_its_pause(self):
        name = key("shown")
        url = budget_url(name, "x-seconds", limit=3, window=30)
        t0 = time.time()
        self.assertEqual(self.c.call("fetch", {"url": url})["status"], 200)
        h = self.host_state()
        self.assertEqual(h["server"]["remaining"], 2, h)
        reset = parse_iso(h["server"]["resetAt"]).timestamp()
        self.assertAlmostEqual(reset, t0 + 30, delta=1.5)
        self.assertIsNone(h["pausedUntil"], "budget left: no pause")
        self.assertEqual(self.entry("*")["server"], h["server"], "the entry shows its host's")
        for _ in range(2):
            self.c.call("fetch", {"url": url})
        h = self.host_state()
        self.assertEqual(h["server"]["remaining"], 0)
        self.assertIsNotNone(h["pausedUntil"], "spent: paused until the reset")
        self.assertAlmostEqual(parse_iso(h["pausedUntil"]).timestamp(), reset, delta=1.5)
        self.assertEqual(self.entry("*")["pausedUntil"], h["pausedUntil"])
        # Another client's request waits for the reset; the origin sees nothing more.
        with self.daemon.client() as other:
            rid = send_request(other, "fetch", {"url": url, "jobId": "waits"})
            wait_for(lambda: (self.host_state() or {}).get("queued") == 1, timeout=5, message="queued behind the pause")
            time.sleep(0.3)
            self.assertEqual(origin_log("budget", name)["count"], 3)
            self.assertEqual(self.c.call("cancel", {"jobId": "waits"}), {"cancelled": True})
            self.assertEqual(other.answer_for(rid)["error"]["code"], -32002)

    def test_follow_server_false_ignores_the_headers(self):
        got = self.limit(followServer=False)
        self.assertIs(got["followServer"], False)
        name = key("ignored")
        url = budget_url(name, "ietf", limit=1, window=30)
        self.assertEqual(self.c.call("fetch", {"url": url})["status"], 200)
        self.assertEqual(self.c.call("fetch", {"url": url, "retry": False})["status"], 429, "not held back")
        self.assertIsNone(self.host_state()["pausedUntil"] if self.host_state() else None)
        self.assertIsNone(self.entry("127.0.0.1")["server"])
        self.assertIs(self.limit(followServer=True)["followServer"], True)
        with self.assertRaises(RPCError) as cm:
            self.limit(followServer="yes")
        self.assertEqual((cm.exception.code, cm.exception.data.get("field")), (-32602, "followServer"))

    def test_many_in_flight_overshoot_only_the_first_window(self):
        # Ten at a time (the default) against 5 per second: before any answer has come, the first
        # window takes more than the budget and those are refused (and retried); after it, none.
        name = key("firstwindow")
        url = budget_url(name, "ietf", limit=5, window=1, ms=50)
        req = {"url": url, "retry": {"maxAttempts": 10, "delay": 0.05}}
        procs = self.clients([req] * 8, [req] * 8)
        self.all_ok(procs, 8)
        windows = per_window(origin_log("budget", name))
        later = {w: v for w, v in windows.items() if w > 0}
        self.assertTrue(later, windows)
        self.assertEqual(sum(r for _, r in later.values()), 0, f"no 429 after the first window: {windows}")


class TestAdaptive(ServerLimitCase):
    def run_load(self, name, per_client=30):
        url = f"{self.srv.test_url}/overload/{name}?k=4&ms=100"
        req = {"url": url, "retry": {"maxAttempts": 50, "delay": 0.05, "maxElapsed": 60}}
        self.all_ok(self.clients([req] * per_client, [req] * per_client), per_client)
        return origin_log("overload", name)

    def test_concurrency_adapts_to_an_origin_that_refuses_above_four(self):
        # 16 at a time against an origin that answers 429 to any request that finds 4 in flight.
        self.limit(maxConcurrent=16)
        fixed = self.run_load(key("fixed"))
        got = self.limit(adaptive=True)
        self.assertIs(got["adaptive"], True)
        self.assertEqual(self.entry("127.0.0.1")["concurrencyNow"], 16, "starts at maxConcurrent")
        adapted = self.run_load(key("adaptive"))
        self.assertEqual(fixed["ok"], 60)
        self.assertEqual(adapted["ok"], 60)
        self.assertLessEqual(adapted["maxInFlight"], 4)
        self.assertLess(adapted["refused"] * 4, fixed["refused"],
                        f"adaptive: {adapted['refused']} refused, fixed at 16: {fixed['refused']}")
        # After the first burst, it stays near what the origin takes: few refusals.
        t0 = adapted["requests"][0]["t"]
        later = [r for r in adapted["requests"] if r["t"] > t0 + 1.0]
        refused_later = sum(r["status"] == 429 for r in later)
        self.assertLess(refused_later, len(later) / 4, f"{refused_later} of {len(later)} refused after the first second")
        now = self.entry("127.0.0.1")["concurrencyNow"]
        self.assertTrue(1 <= now < 16, now)
        self.assertEqual(self.host_state()["concurrencyNow"], now, "the host is remembered below its ceiling")

    def test_adaptive_needs_a_cap_and_a_bool(self):
        for params, field in (({"adaptive": True, "maxConcurrent": None}, "adaptive"),
                              ({"adaptive": "yes"}, "adaptive")):
            with self.subTest(params=params):
                with self.assertRaises(RPCError) as cm:
                    self.limit(**params)
                self.assertEqual((cm.exception.code, cm.exception.data.get("field")), (-32602, field))
        self.limit(adaptive=True, maxConcurrent=3)
        with self.assertRaises(RPCError) as cm:
            self.limit(maxConcurrent=None)
        self.assertEqual(cm.exception.data.get("field"), "maxConcurrent")
        self.assertIsNone(self.limit(adaptive=False, maxConcurrent=None)["maxConcurrent"])


def record_url(name):
    return f"{servers().test_url}/record/{name}"


class TestCost(ServerLimitCase):
    def test_a_cost_takes_that_many_units_of_the_rate(self):
        # 10 units a second with a bucket of 10; requests of cost 5 from two connections: two at
        # once, then one every 0.5 s at the origin.
        self.limit(requestsPerSecond=10, burst=10, maxConcurrent=None)
        name = key("cost")
        req = {"url": record_url(name), "cost": 5}
        self.all_ok(self.clients([req] * 6, [req] * 6), 6)
        times = hits(name)["times"]
        self.assertEqual(len(times), 12)
        for window in (0.5, 1.0, 2.0):
            bound = (10 + 10 * window) / 5
            self.assertLessEqual(max_in_window(times, window), bound, f"{window} s window")
        times = sorted(times)
        rate = (len(times) - 3) / (times[-1] - times[2])  # after the burst of two
        self.assertAlmostEqual(rate, 2.0, delta=0.1, msg=f"{rate:.3f} requests/s of cost 5 at 10/s")

    def test_costs_mix_with_requests_of_one(self):
        self.limit(requestsPerSecond=20, burst=4, maxConcurrent=None)
        name = key("mixed")
        heavy = {"url": record_url(name), "cost": 4}
        light = {"url": record_url(name)}
        self.all_ok(self.clients([heavy] * 5, [light] * 20), None)
        times = hits(name)["times"]
        self.assertEqual(len(times), 25)
        # 5 x 4 + 20 x 1 = 40 units at 20/s after a burst of 4: about 1.8 s.
        span = max(times) - min(times)
        self.assertGreater(span, 1.6)
        self.assertLess(span, 2.3)

    def test_cost_above_the_burst_and_bad_costs(self):
        self.limit(requestsPerSecond=10, burst=10)
        name = key("refused")
        for cost in (10.5, 11, 1000):
            with self.assertRaises(RPCError) as cm:
                self.c.call("fetch", {"url": record_url(name), "cost": cost})
            self.assertEqual((cm.exception.code, cm.exception.data.get("field")), (-32602, "cost"), cost)
            self.assertIn("burst", cm.exception.data.get("detail", ""))
        target = os.path.join(tempfile.mkdtemp(prefix="fetchd-cost-"), "never.bin")
        self.addCleanup(shutil.rmtree, os.path.dirname(target), True)
        for method, extra in (("download", {"path": target}), ("upload", {"fields": {"a": "b"}})):
            with self.assertRaises(RPCError) as cm:
                self.c.call(method, dict({"url": record_url(name), "cost": 11}, **extra))
            self.assertEqual(cm.exception.data.get("field"), "cost", method)
        self.assertFalse(os.path.exists(target), "no file for a request refused")
        for bad in (0, -1, "5", True, 1e7):
            with self.assertRaises(RPCError) as cm:
                self.c.call("fetch", {"url": record_url(name), "cost": bad})
            self.assertEqual((cm.exception.code, cm.exception.data.get("field")), (-32602, "cost"), bad)
        self.assertEqual(hits(name)["count"], 0, "none was sent")
        self.assertEqual(self.c.call("fetch", {"url": record_url(name), "cost": 10})["status"], 200, "the whole burst")
        self.assertEqual(self.c.call("fetch", {"url": record_url(name), "cost": 0.25})["status"], 200)
        # A host without a rate: a cost means nothing, whatever its size.
        self.limit(requestsPerSecond=None)
        self.assertEqual(self.c.call("fetch", {"url": record_url(name), "cost": 500})["status"], 200)


def metered(route_key, url_host=None, size=600000):
    """A fetch of /metered (its body not kept); `url_host`: another name for the test server
    (connected to it with `resolve`), so it is another host key."""
    srv = servers()
    if url_host is None:
        return {"url": f"{srv.test_url}/metered/{route_key}?bytes={size}", "responseBody": "none"}
    return {"url": f"http://{url_host}:{srv.test_port}/metered/{route_key}?bytes={size}", "responseBody": "none",
            "resolve": {f"{url_host}:{srv.test_port}": "127.0.0.1"}}


class TestBandwidthBudget(ServerLimitCase):
    RATE = 300000
    # What the origin can write ahead of what fetchd has taken, per connection: its own send
    # buffer, the client's receive buffer and libcurl's (measured here at about 190 kB).
    AHEAD = 256 * 1024

    def check_budget(self, name, transfers, wall):
        """The origin's writes of `transfers` bodies held to RATE in all."""
        sends = origin_log("metered", name)["sends"]
        total = sum(n for _, n in sends)
        self.assertEqual(total, transfers * 600000)
        times = [t for t, _ in sends]
        first, last = min(times), max(times)
        # Everything but what the buffers took at once went at the budget.
        self.assertGreater(last - first, (total - transfers * self.AHEAD) / self.RATE,
                           f"{total} bytes in {last - first:.2f} s at the origin")
        settled = [(t, n) for t, n in sends if t >= first + 1.5]
        if len(settled) > 1 and last - first > 3:
            rate = sum(n for _, n in settled) / (last - (first + 1.5))
            self.assertLess(rate, self.RATE * 1.25, f"{rate:.0f} B/s at the origin once the buffers were full")
        self.assertGreater(wall, total / self.RATE * 0.9, f"{wall:.2f} s for {total} bytes at the client")

    def run_transfers(self, requests):
        start = time.monotonic()
        self.all_ok(self.clients(*[[r] for r in requests]), 1)
        return time.monotonic() - start

    def test_a_hosts_budget_is_shared_by_all_its_jobs(self):
        got = self.limit(maxRecvBytesPerSecond=self.RATE)
        self.assertEqual(got["maxRecvBytesPerSecond"], self.RATE)
        name = key("hostbudget")
        wall = self.run_transfers([metered(name)] * 3)
        self.check_budget(name, 3, wall)

    def test_the_star_budget_holds_the_whole_daemon(self):
        # Two host keys (two names for the test server), one budget for the daemon.
        got = self.c.call("setRateLimit", {"host": "*", "maxRecvBytesPerSecond": self.RATE})
        self.assertEqual(got["maxRecvBytesPerSecond"], self.RATE)
        name = key("daemonbudget")
        wall = self.run_transfers([metered(name), metered(name, "a.fetchd.test"), metered(name, "b.fetchd.test")])
        self.check_budget(name, 3, wall)
        # A new entry starts from *, but not with the daemon's budget.
        self.assertIsNone(self.c.call("setRateLimit", {"host": "example.com", "burst": 2})["maxRecvBytesPerSecond"])

    def test_a_jobs_own_cap_and_the_hosts_budget_the_stricter_wins(self):
        self.limit(maxRecvBytesPerSecond=1000000)
        name = key("stricter")
        req = dict(metered(name, size=600000), maxRecvBytesPerSecond=self.RATE)
        wall = self.run_transfers([req])
        self.check_budget(name, 1, wall)

    def test_without_a_budget_it_is_not_held(self):
        name = key("free")
        wall = self.run_transfers([metered(name)] * 3)
        # 1.8 MB on loopback, unheld: far below the 6 s that a budget of RATE takes.
        self.assertLess(wall, 1.5, f"{wall:.2f} s")

    def test_budget_values(self):
        for bad in (0, -1, 2 ** 41, 1.5, "1000"):
            with self.assertRaises(RPCError) as cm:
                self.limit(maxRecvBytesPerSecond=bad)
            self.assertEqual((cm.exception.code, cm.exception.data.get("field")), (-32602, "maxRecvBytesPerSecond"), bad)
        self.assertEqual(self.limit(maxRecvBytesPerSecond=5000)["maxRecvBytesPerSecond"], 5000)
        self.assertIsNone(self.limit(maxRecvBytesPerSecond=None)["maxRecvBytesPerSecond"])
        self.assertIsNone(self.entry("127.0.0.1")["maxRecvBytesPerSecond"])


class TestFollowServerShared(RedisCase):
    def test_two_daemons_pause_together(self):
        self.start_daemons(2)
        self.share({"maxConcurrent": 1})
        name = key("sharedbudget")
        url = budget_url(name, "github", limit=3, window=1)
        for p in self.clients([[{"url": url}] * 5] * 2):
            answers = client_answers(p, timeout=60)
            self.assertEqual([a["answer"].get("result", {}).get("status") for a in answers], [200] * 5)
        log = origin_log("budget", name)
        self.assertEqual(log["count"], 10)
        self.assertEqual(log["refused"], 0, f"one daemon's answer paused the other: {per_window(log)}")
        self.assertLessEqual(max(n for n, _ in per_window(log).values()), 3)

    def test_cost_counts_the_same_in_redis(self):
        # Two daemons share 10 units a second (bucket 10); requests of cost 4: 2.5 a second in all.
        self.start_daemons(2)
        self.share({"requestsPerSecond": 10, "burst": 10, "maxConcurrent": None})
        name = key("sharedcost")
        for p in self.clients([[{"url": record_url(name), "cost": 4}] * 6] * 2):
            self.assertEqual(len(client_answers(p, timeout=60)), 6)
        times = hits(name)["times"]
        self.assertEqual(len(times), 12)
        for window in (1.0, 2.0):
            self.assertLessEqual(max_in_window(times, window) * 4, 10 + 10 * window, f"{window} s window")
        times = sorted(times)
        rate = (len(times) - 3) / (times[-1] - times[2])  # after the burst of two
        self.assertAlmostEqual(rate, 2.5, delta=0.15, msg=f"{rate:.3f} requests/s of cost 4 at 10/s")
        with self.daemons[0].client() as c:
            with self.assertRaises(RPCError) as cm:
                c.call("fetch", {"url": record_url(name), "cost": 12})
            self.assertEqual(cm.exception.data.get("field"), "cost")


class TestRedisFleet(RedisCase):
    """What a fleet's Redis does to fetchd: the keys a Cluster needs together, a failover that
    leaves the daemon's server a replica, TLS through a local tunnel."""

    def evalsha_calls(self, redis=None):
        info = (redis or self.redis).command("INFO", "commandstats").decode(errors="replace")
        m = re.search(r"cmdstat_evalsha:calls=(\d+)", info)
        return int(m.group(1)) if m else 0

    def test_keys_are_hash_tagged_by_host(self):
        d, = self.start_daemons(1)
        self.share({"requestsPerSecond": 50, "maxConcurrent": 5})
        with d.client() as c:
            rid = send_request(c, "fetch", {"url": f"{self.srv.test_url}/slow-headers?ms=2000", "retry": False})
            wait_for(lambda: self.entry(d)["running"] == 1, timeout=5, message="running on a lease")
            keys = self.redis.command("KEYS", "fetchd:*").decode(errors="replace")
            tag = "{http://127.0.0.1:%d}" % self.srv.test_port
            self.assertIn(f"fetchd:{tag}:tat", keys)
            self.assertIn(f"fetchd:{tag}:leases", keys, "one slot for every key of the host")
            c.answer_for(rid, timeout=10)

    def test_a_primary_turned_replica_is_left_until_promoted(self):
        # A failover as a daemon sees it when its address now answers as a replica: the old
        # primary came back and follows the new one. Its writes answer READONLY.
        other = RedisServer().start()
        self.addCleanup(other.close)
        d, = self.start_daemons(1)
        self.share({"requestsPerSecond": 50, "onRedisDown": "local"})
        name = key("failover")
        with d.client() as c:
            self.assertEqual(c.call("fetch", {"url": record_url(name)})["status"], 200)
            self.assertEqual(self.redis.command("REPLICAOF", "127.0.0.1", str(other.port))[:3], b"+OK")
            # Served on the local share meanwhile, without asking the replica over and over.
            for _ in range(5):
                self.assertEqual(c.call("fetch", {"url": record_url(name), "retry": False}, timeout=10)["status"], 200)
            wait_for(lambda: c.call("getStatus")["redis"] == "down", timeout=5, message="a replica counts as down")
            self.assertEqual(self.entry(d)["backend"], "local")
            before = self.evalsha_calls()
            for _ in range(20):
                self.assertEqual(c.call("fetch", {"url": record_url(name), "retry": False}, timeout=10)["status"], 200)
            time.sleep(1.0)
            self.assertLess(self.evalsha_calls() - before, 5, "the replica is not asked in a loop")
            self.assertIn("replica", d.stderr_text())
            # Promoted again (a failover back): shared once more.
            self.redis.command("REPLICAOF", "NO", "ONE")
            wait_for(lambda: c.call("getStatus")["redis"] == "up", timeout=10, message="a primary again")
            self.assertEqual(self.entry(d)["backend"], "redis")
            before = self.evalsha_calls()
            self.assertEqual(c.call("fetch", {"url": record_url(name)})["status"], 200)
            self.assertGreater(self.evalsha_calls(), before, "counted in Redis again")
        self.assertEqual(hits(name)["count"], 27, "no request lost or sent twice")

    @unittest.skipIf(shutil.which("socat") is None or shutil.which("openssl") is None, "needs socat and openssl")
    def test_tls_through_a_local_tunnel(self):
        # Debian 12's hiredis has no TLS: fetchd talks plain Redis to a local tunnel (socat here;
        # stunnel or spiped do the same) that speaks TLS to the real server.
        tmp = tempfile.mkdtemp(prefix="fetchd-redis-tls-")
        self.addCleanup(shutil.rmtree, tmp, True)
        cert, keyfile = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", keyfile,
                        "-out", cert, "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        tls_port, tunnel_port = free_port(), free_port()
        server = subprocess.Popen([shutil.which("redis-server"), "--port", "0", "--tls-port", str(tls_port),
                                   "--bind", "127.0.0.1", "--tls-cert-file", cert, "--tls-key-file", keyfile,
                                   "--tls-ca-cert-file", cert, "--tls-auth-clients", "no", "--save", "",
                                   "--appendonly", "no", "--dir", tmp],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(server)
        tunnel = subprocess.Popen(["socat", f"TCP-LISTEN:{tunnel_port},bind=127.0.0.1,reuseaddr,fork",
                                   f"OPENSSL:127.0.0.1:{tls_port},cafile={cert},verify=1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(tunnel)

        def answers():
            try:
                with socket.create_connection(("127.0.0.1", tunnel_port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False
        wait_for(answers, timeout=10, message="redis-server over TLS through socat")
        d = Daemon("--redis", f"redis://127.0.0.1:{tunnel_port}").start()
        self.daemons.append(d)
        self.assertEqual(self.status(d)["redis"], "up")
        self.share({"requestsPerSecond": 50})
        name = key("tls")
        with d.client() as c:
            for _ in range(3):
                self.assertEqual(c.call("fetch", {"url": record_url(name)})["status"], 200)
        self.assertEqual(self.entry(d)["backend"], "redis")
        self.assertEqual(hits(name)["count"], 3)


if __name__ == "__main__":
    unittest.main()
