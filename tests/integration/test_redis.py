"""Limits shared across daemons through Redis: several fetchd processes, each on its
own socket, use one real redis-server that this module starts on a temporary port, and the test
server's arrival log (/record/<key>, on the system-wide monotonic clock) shows what the origin
saw from all of them together.

Skipped only when redis-server is not installed (make deps installs it)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from harness import Daemon, RPCError, servers, wait_for
from jobhelpers import hits, key, send_request
from test_rate_limits import client_answers, max_in_window, start_client

REDIS = shutil.which("redis-server")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RedisServer:
    """A throwaway redis-server on a loopback port (and a Unix socket), no persistence; stop()
    and start() again keep the port, so daemons can reconnect."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="fetchd-redis-")
        self.port = free_port()
        self.socket = os.path.join(self.dir, "redis.sock")
        self.proc = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        self.proc = subprocess.Popen(
            [REDIS, "--port", str(self.port), "--bind", "127.0.0.1", "--unixsocket", self.socket,
             "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        wait_for(self.ping, timeout=10, message="redis-server did not answer PING")
        return self

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *words):
        """One command in RESP; the raw reply (enough for the checks here)."""
        out = b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w.encode()), w.encode()) for w in words)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(out)
            return s.recv(65536)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def record_url(name, ms=0):
    return f"{servers().test_url}/record/{name}" + (f"?ms={ms}" if ms else "")


@unittest.skipIf(REDIS is None, "redis-server is not installed (make deps installs it)")
class RedisCase(unittest.TestCase):
    RATE = 20.0

    def setUp(self):
        self.srv = servers()
        self.redis = RedisServer().start()
        self.daemons = []
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        for d in self.daemons:
            d.close()
        self.redis.close()

    def start_daemons(self, n, url=None):
        for _ in range(n):
            self.daemons.append(Daemon("--redis", url or self.redis.url).start())
        return self.daemons

    def share(self, limit, daemons=None):
        """setRateLimit on every daemon for the test server's host."""
        for d in daemons or self.daemons:
            with d.client() as c:
                got = c.call("setRateLimit", dict({"host": "127.0.0.1", "shared": True}, **limit))
                self.assertTrue(got["shared"])

    def clients(self, request_lists):
        procs = [start_client(d.socket_path, reqs) for d, reqs in zip(self.daemons, request_lists)]
        self.procs += procs
        return procs

    def status(self, d):
        with d.client() as c:
            return c.call("getStatus")

    def entry(self, d, host="127.0.0.1"):
        with d.client() as c:
            return next(e for e in c.call("getRateLimits")["limits"] if e["host"] == host)

    def check_rate(self, times, burst=1, total=True):
        rate = self.RATE
        for window in (0.5, 1.0, 2.0):
            bound = burst + rate * window
            self.assertLessEqual(max_in_window(times, window), bound,
                                 f"more than {bound:g} arrivals in a {window} s window")
        if not total:
            return
        got = (len(times) - 1) / (max(times) - min(times))
        self.assertLess(abs(got - rate) / rate, 0.03, f"total rate {got:.3f}/s, limit {rate:g}/s")

    def run_shared_rate(self, daemons, per_daemon):
        self.start_daemons(daemons)
        self.share({"requestsPerSecond": self.RATE, "burst": 1, "maxConcurrent": None})
        name = key("shared")
        procs = self.clients([[{"url": record_url(name), "retry": False}] * per_daemon for _ in self.daemons])
        for p in procs:
            answers = client_answers(p, timeout=60)
            self.assertEqual(len(answers), per_daemon)
            self.assertTrue(all(a["answer"].get("result", {}).get("status") == 200 for a in answers),
                            json.dumps(answers[:3]))
        times = hits(name)["times"]
        self.assertEqual(len(times), daemons * per_daemon, "each request reached the server once")
        self.check_rate(times)
        return times


class TestRedisRate(RedisCase):
    def test_two_daemons_share_one_rate(self):
        self.run_shared_rate(2, 40)

    def test_four_daemons_share_one_rate(self):
        self.run_shared_rate(4, 25)

    def test_status_and_limits_report_redis(self):
        d, = self.start_daemons(1)
        self.assertEqual(self.status(d)["redis"], "up")
        self.share({"requestsPerSecond": 5})
        e = self.entry(d)
        self.assertEqual((e["shared"], e["backend"], e["onRedisDown"], e["localShare"]), (True, "redis", "local", 1.0))

    def test_shared_needs_redis(self):
        with Daemon().start() as d, d.client() as c:
            with self.assertRaises(RPCError) as cm:
                c.call("setRateLimit", {"host": "127.0.0.1", "shared": True})
            self.assertEqual(cm.exception.code, -32602)
            self.assertIsNone(c.call("getStatus")["redis"])

    def test_unix_socket_url(self):
        d, = self.start_daemons(1, url=f"unix://{self.redis.socket}")
        self.assertEqual(self.status(d)["redis"], "up")
        self.share({"requestsPerSecond": 50})
        with d.client() as c:
            self.assertEqual(c.call("fetch", {"url": record_url(key("unix"))})["status"], 200)

    def test_password_is_used_and_never_logged(self):
        self.redis.command("CONFIG", "SET", "requirepass", "s3cret-pw")
        d = Daemon("--redis", f"redis://:s3cret-pw@127.0.0.1:{self.redis.port}/2", "--verbose").start()
        self.daemons.append(d)
        self.assertEqual(self.status(d)["redis"], "up")
        bad = Daemon("--redis", f"redis://:wrong-pw@127.0.0.1:{self.redis.port}/0").start()
        self.daemons.append(bad)
        self.assertEqual(self.status(bad)["redis"], "down")
        for x in (d, bad):
            self.assertNotIn("s3cret-pw", x.stderr_text())
            self.assertNotIn("wrong-pw", x.stderr_text())


class TestRedisConcurrency(RedisCase):
    def test_max_concurrent_across_daemons(self):
        self.start_daemons(2)
        self.share({"maxConcurrent": 3, "requestsPerSecond": None})
        name = key("conc")
        procs = self.clients([[{"url": record_url(name, ms=150), "retry": False}] * 12 for _ in self.daemons])
        for p in procs:
            self.assertEqual(len(client_answers(p, timeout=60)), 12)
        h = hits(name)
        self.assertEqual(h["count"], 24)
        self.assertEqual(h["maxConcurrent"], 3, "the shared cap is used and never exceeded")

    def test_kill_9_frees_slots_after_the_lease(self):
        a, b = self.start_daemons(2)
        self.share({"maxConcurrent": 2, "requestsPerSecond": None})
        ca = a.client()
        for i in range(2):
            send_request(ca, "fetch", {"url": f"{self.srv.test_url}/slow-headers?ms=30000", "retry": False})
        wait_for(lambda: self.entry(a)["running"] == 2, timeout=5, message="a holds both slots")
        name = key("lease")
        cb = b.client()
        rid = send_request(cb, "fetch", {"url": record_url(name), "retry": False})
        time.sleep(0.5)
        self.assertEqual(hits(name)["count"], 0, "b waits while a holds both shared slots")
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        killed = time.monotonic()
        wait_for(lambda: hits(name)["count"] == 1, timeout=10, message="b got a slot after a's lease ran out")
        waited = hits(name)["times"][0] - killed
        self.assertGreater(waited, 2.0, "the slot stayed leased for a while after the kill")
        self.assertLess(waited, 6.5, "the lease (5 s) ran out and freed the slot")
        cb.close()
        ca.close()


class TestRedisRevalidation(RedisCase):
    def test_a_background_revalidation_waits_for_the_shared_slot(self):
        # A stale-while-revalidate request is no job's attempt, but a shared limit holds it too.
        cache_dir = tempfile.mkdtemp(prefix="fetchd-cache-")
        self.addCleanup(shutil.rmtree, cache_dir, True)
        a = Daemon("--redis", self.redis.url).start()
        b = Daemon("--redis", self.redis.url, "--cache-dir", os.path.join(cache_dir, "c")).start()
        self.daemons += [a, b]
        self.share({"maxConcurrent": 1, "requestsPerSecond": None})
        k = key("swrshared")
        url = (f"{self.srv.test_url}/cache-origin/{k}?cc=max-age%3D1%2C+stale-while-revalidate%3D600"
               f"&age=5&etag=E&304-cc=max-age%3D600")

        def origin_log():
            with urllib.request.urlopen(f"{self.srv.test_url}/cache-origin-log/{k}", timeout=10) as r:
                return json.loads(r.read())

        with b.client() as cb:
            self.assertEqual(cb.call("fetch", {"url": url}, timeout=30)["cache"], "miss")
            wait_for(lambda: cb.call("getCacheStats")["entries"] == 1, message="the answer stored")
        ca = a.client()
        send_request(ca, "fetch", {"url": f"{self.srv.test_url}/slow-headers?ms=30000", "jobId": "holder",
                                   "retry": False})
        wait_for(lambda: self.entry(a)["running"] == 1, timeout=5, message="a holds the shared slot")
        with b.client() as cb:
            self.assertEqual(cb.call("fetch", {"url": url}, timeout=30)["cache"], "stale")
        time.sleep(0.5)
        self.assertEqual(origin_log()["count"], 1, "the revalidation waits while a holds the slot")
        with a.client() as c2:
            self.assertEqual(c2.call("cancel", {"jobId": "holder"}), {"cancelled": True})
        wait_for(lambda: origin_log()["count"] == 2, timeout=10, message="the revalidation once the slot is free")
        self.assertEqual(origin_log()["requests"][1]["ifNoneMatch"], '"E"')
        ca.close()


class TestRedisPause(RedisCase):
    def test_retry_after_pauses_every_daemon(self):
        a, b, c, idle = self.start_daemons(4)
        self.share({"requestsPerSecond": self.RATE})
        name, flaky = key("paused"), key("flaky")
        procs = self.clients([[], [{"url": record_url(name), "retry": False}] * 30,
                              [{"url": record_url(name), "retry": False}] * 30])
        wait_for(lambda: hits(name)["count"] >= 10, timeout=10)
        with a.client() as ca:
            r = ca.call("fetch", {"url": f"{self.srv.test_url}/flaky/{flaky}?fail=1&status=429&retry-after=2",
                                  "retry": False})
            self.assertEqual(r["status"], 429)
        t429 = hits(flaky)["times"][0]
        # Every daemon hears of it (the pause is set in Redis just after a's answer), the one that
        # has sent nothing to the host too: pub/sub, not a question of its own.
        for d in (b, c, idle):
            wait_for(lambda: self.entry(d)["pausedUntil"] is not None, timeout=1.0,
                     message="the pause reached every daemon")
        for p in procs[1:]:
            self.assertEqual(len(client_answers(p, timeout=60)), 30)
        times = hits(name)["times"]
        during = [t for t in times if t429 + 0.1 < t < t429 + 1.95]
        self.assertEqual(during, [], "no daemon started a request during the pause")
        self.assertTrue(any(t > t429 + 1.95 for t in times), "requests went on after the pause")


class TestRedisDown(RedisCase):
    def stream(self, per_daemon, name):
        return self.clients([[{"url": record_url(name), "retry": False}] * per_daemon for _ in self.daemons])

    def test_local_mode_enforces_the_local_share_and_hands_back(self):
        self.start_daemons(2)
        self.share({"requestsPerSecond": self.RATE, "onRedisDown": "local", "localShare": 0.5})
        name = key("down-local")
        procs = self.stream(60, name)  # 120 requests: about 6 s at 20/s
        wait_for(lambda: hits(name)["count"] >= 20, timeout=10)
        self.redis.stop()
        stopped = time.monotonic()
        for d in self.daemons:
            wait_for(lambda: self.status(d)["redis"] == "down", timeout=5, message="getStatus says down")
            self.assertEqual(self.entry(d)["backend"], "local")
        wait_for(lambda: hits(name)["count"] >= 60, timeout=10)
        restarted = time.monotonic()
        self.redis.start()
        for d in self.daemons:
            wait_for(lambda: self.status(d)["redis"] == "up", timeout=10, message="getStatus says up again")
            self.assertEqual(self.entry(d)["backend"], "redis")
        for p in procs:
            answers = client_answers(p, timeout=60)
            self.assertEqual(len(answers), 60)
            self.assertTrue(all(a["answer"].get("result", {}).get("status") == 200 for a in answers))
        times = hits(name)["times"]
        self.assertEqual(len(times), 120, "no request lost or sent twice")
        # Two daemons at 0.5 x 20/s each: the whole limit while Redis was away, and at the
        # switch to the local share at most one more start per daemon (its local burst). (Once
        # Redis is back, each daemon returns on its own backoff: for that moment one may be on
        # Redis's whole limit while the other is still on its share; docs/rate-limits.md.)
        away = [t for t in times if stopped < t < restarted]
        self.assertLessEqual(max_in_window(away, 1.0), 1 + self.RATE * 1.0 + 2)

    def test_a_stalled_redis_counts_as_down(self):
        d, = self.start_daemons(1)
        self.share({"requestsPerSecond": self.RATE, "onRedisDown": "local"})
        self.redis.proc.send_signal(signal.SIGSTOP)  # still accepts connections, never answers
        try:
            with d.client() as c:
                t0 = time.monotonic()
                self.assertEqual(c.call("fetch", {"url": record_url(key("stalled")), "retry": False},
                                        timeout=20)["status"], 200)
                waited = time.monotonic() - t0
            self.assertLess(waited, 5, "the question timed out (1 s) and the local share took the request")
            self.assertEqual(self.status(d)["redis"], "down")
            self.assertEqual(self.entry(d)["backend"], "local")
        finally:
            self.redis.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: self.status(d)["redis"] == "up", timeout=10, message="up again after SIGCONT")

    def test_wait_mode_queues_until_redis_is_back(self):
        self.start_daemons(2)
        self.share({"requestsPerSecond": self.RATE, "onRedisDown": "wait"})
        self.redis.stop()
        for d in self.daemons:
            wait_for(lambda: self.status(d)["redis"] == "down", timeout=5, message="getStatus says down")
        name = key("down-wait")
        procs = self.stream(10, name)
        for d in self.daemons:
            wait_for(lambda: self.entry(d)["queued"] == 10, timeout=5, message="requests wait for Redis")
            self.assertEqual(self.entry(d)["backend"], "redis")
        time.sleep(0.5)
        self.assertEqual(hits(name)["count"], 0, "nothing starts while Redis is down")
        self.redis.start()
        for p in procs:
            self.assertEqual(len(client_answers(p, timeout=30)), 10)
        times = hits(name)["times"]
        self.assertEqual(len(times), 20)
        # The window bound; not the total rate: each daemon reconnects on its own backoff, so
        # one may start its share up to a couple of seconds after the other.
        self.check_rate(times, total=False)


if __name__ == "__main__":
    unittest.main()


class TestSharedFromConfigFile(RedisCase):
    """A --config file's rateLimits may make a limit shared when the daemon runs with --redis
    (and are refused, naming the entry, without it)."""

    def write_config(self):
        import tempfile
        tmp = tempfile.mkdtemp(prefix="fetchd-redis-config-")
        self.addCleanup(__import__("shutil").rmtree, tmp, True)
        path = os.path.join(tmp, "fetchd.json")
        with open(path, "w") as f:
            json.dump({"rateLimits": [{"host": "127.0.0.1", "requestsPerSecond": 5, "shared": True}]}, f)
        return path

    def test_shared_limit_from_the_file(self):
        path = self.write_config()
        self.daemons.append(Daemon("--redis", self.redis.url, "--config", path).start())
        e = self.entry(self.daemons[0])
        self.assertTrue(e["shared"], e)
        self.assertEqual(e["requestsPerSecond"], 5)

    def test_refused_without_redis(self):
        from harness import run_fetchd
        import tempfile
        path = self.write_config()
        with tempfile.TemporaryDirectory() as tmp:
            r = run_fetchd("--socket", os.path.join(tmp, "s"), "--config", path)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"rateLimits[0].shared", r.stderr)
        self.assertIn(b"--redis", r.stderr)
