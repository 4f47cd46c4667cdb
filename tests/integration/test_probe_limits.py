"""Limits that must hold against the real daemon: a job's bandwidth caps over every second of
its transfer, a stale-while-revalidate revalidation waiting for its host's limits, the metrics
listener serving scrapes while other connections idle or drip, and Redis ACL users in --redis."""
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import Daemon, DaemonTestCase, wait_for
from jobhelpers import collect, key, send_request
from test_metrics import free_port


def max_in_window(points, seconds=1.0):
    """points: [(time, cumulative bytes)] in time order. The most bytes between two points at
    most `seconds` apart."""
    best = 0
    j = 0
    for i in range(len(points)):
        while points[i][0] - points[j][0] > seconds:
            j += 1
        best = max(best, points[i][1] - points[j][1])
    return best


class SinkServer:
    """An HTTP server on loopback that reads each request's body as it arrives and answers
    with when each piece came: {"bytes": n, "arrivals": [[seconds since the headers, bytes so far]]}."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn:
            conn.settimeout(60)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            head, rest = head.split(b"\r\n\r\n", 1)
            t0 = time.monotonic()
            headers = {}
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower().decode()] = value.strip().decode()
            length = int(headers.get("content-length", "0"))
            got = len(rest)
            arrivals = [[0.0, got]]
            while got < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                got += len(chunk)
                arrivals.append([time.monotonic() - t0, got])
            body = json.dumps({"bytes": got, "arrivals": arrivals}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (len(body), body))

    def close(self):
        self.sock.close()


class TestBandwidthCaps(DaemonTestCase):
    """maxRecvBytesPerSecond / maxSendBytesPerSecond: 600 kB under 200,000 B/s takes about 3 s
    and no second of it carries much more than the cap (libcurl's own cap let such a body
    through in a quarter of a second)."""

    CAP = 200_000
    SIZE = 600_000
    # A burst of a tenth of a second may go at once; a second then carries at most 1.1x the
    # cap, and the client's view (progress every 100 ms) adds a little.
    WINDOW_LIMIT = 1.25

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.sink = SinkServer()
        cls.tmp = tempfile.mkdtemp(prefix="fetchd-caps-")

    @classmethod
    def tearDownClass(cls):
        cls.sink.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def received_over_time(self, method, params):
        """Runs the job with progress; (seconds it took, [(t, receivedBytes)]) seen by the client."""
        job = key("cap")
        t0 = time.monotonic()
        rid = send_request(self.c, method, dict(params, progress=True, jobId=job))
        got = collect(self.c, rid, timeout=60)
        self.assertIn("result", got.answer, got.answer)
        points = [(0.0, 0)] + [(t - t0, p["receivedBytes"]) for t, p in got.of("progress", job)]
        return got.answer_time - t0, points, got.answer["result"]

    def assertHeld(self, took, points, what):
        most = max_in_window(points)
        self.assertGreaterEqual(took, 2.8, f"{what}: {self.SIZE} bytes at {self.CAP} B/s took {took:.2f} s")
        self.assertLessEqual(most, self.CAP * self.WINDOW_LIMIT,
                             f"{what}: {most} bytes within one second under a cap of {self.CAP}: {points}")

    def test_fetch_receive_cap(self):
        took, points, r = self.received_over_time("fetch", {
            "url": f"{self.srv.test_url}/bytes/{self.SIZE}", "maxRecvBytesPerSecond": self.CAP,
            "responseBody": "none"})
        self.assertEqual((r["status"], r["bytes"]), (200, self.SIZE))
        self.assertHeld(took, points, "fetch")

    def test_download_receive_cap_from_nginx(self):
        path = os.path.join(self.tmp, "capped.bin")
        with open(os.path.join(self.srv.static_dir, "capped-600k.bin"), "wb") as f:
            f.write(os.urandom(self.SIZE))
        took, points, r = self.received_over_time("download", {
            "url": f"{self.srv.nginx_url}/capped-600k.bin", "path": path, "maxRecvBytesPerSecond": self.CAP})
        self.assertEqual(r["status"], 200, r)
        self.assertEqual(os.path.getsize(path), self.SIZE)
        self.assertHeld(took, points, "download")

    def sent_over_time(self, method, params):
        t0 = time.monotonic()
        r = self.c.call(method, dict(params, url=self.sink.url + "/", retry=False), timeout=60)
        took = time.monotonic() - t0
        seen = json.loads(r["body"])
        return took, [tuple(p) for p in seen["arrivals"]], seen["bytes"]

    def test_fetch_send_cap(self):
        body = os.urandom(self.SIZE)
        took, points, n = self.sent_over_time("fetch", {
            "bodyBase64": base64.b64encode(body).decode(), "maxSendBytesPerSecond": self.CAP})
        self.assertEqual(n, self.SIZE)
        self.assertHeld(took, points, "fetch body")

    def test_upload_file_send_cap(self):
        path = os.path.join(self.tmp, "up.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(self.SIZE))
        took, points, n = self.sent_over_time("fetch", {"bodyFile": path, "maxSendBytesPerSecond": self.CAP})
        self.assertEqual(n, self.SIZE)
        self.assertHeld(took, points, "bodyFile")

    def test_multipart_send_cap(self):
        path = os.path.join(self.tmp, "part.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(self.SIZE // 2))
        inline = base64.b64encode(os.urandom(self.SIZE // 2)).decode()
        took, points, n = self.sent_over_time("upload", {
            "files": [{"path": path}, {"contentBase64": inline, "filename": "b.bin"}],
            "maxSendBytesPerSecond": self.CAP})
        self.assertGreater(n, self.SIZE)  # the parts' headers and boundaries too
        self.assertHeld(took, points, "multipart")

    def test_uncapped_is_not_slowed(self):
        t0 = time.monotonic()
        r = self.c.call("fetch", {"url": f"{self.srv.test_url}/bytes/{self.SIZE}", "responseBody": "none"})
        self.assertEqual(r["bytes"], self.SIZE)
        self.assertLess(time.monotonic() - t0, 2.0)


METRICS_PORT = free_port()


class TestMetricsListener(DaemonTestCase):
    """--metrics-listen serves scrapes while other connections idle or drip bytes: 3 idle TCP
    connections delayed a scrape to 15.4 s, and one client sending a byte every 0.5 s blocked
    scrapes for over 20 s, when scrapes were served one at a time."""

    DAEMON_ARGS = ("--metrics-listen", f"127.0.0.1:{METRICS_PORT}")

    def setUp(self):
        super().setUp()
        self.socks = []
        self.stop_drip = threading.Event()

    def tearDown(self):
        self.stop_drip.set()
        for s in self.socks:
            s.close()
        super().tearDown()

    def connect(self):
        s = socket.create_connection(("127.0.0.1", METRICS_PORT), timeout=10)
        self.socks.append(s)
        return s

    def scrape_seconds(self):
        t0 = time.monotonic()
        s = socket.create_connection(("127.0.0.1", METRICS_PORT), timeout=10)
        with s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        took = time.monotonic() - t0
        self.assertTrue(got.startswith(b"HTTP/1.1 200 OK"), got[:200])
        self.assertIn(b"fetchd_build_info", got)
        return took

    def drip(self, s):
        """A request line sent one byte every 0.5 s, never finished."""
        line = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 1000
        try:
            for b in line:
                if self.stop_drip.wait(0.5):
                    return
                s.send(bytes([b]))
        except OSError:
            pass

    def closed_after(self, s, timeout):
        """Seconds until the daemon closes s (reading whatever it sends), or None."""
        t0 = time.monotonic()
        s.settimeout(timeout)
        try:
            while s.recv(4096):
                pass
        except socket.timeout:
            return None
        except OSError:
            pass
        return time.monotonic() - t0

    def test_idle_and_dripping_connections_do_not_delay_a_scrape(self):
        started = time.monotonic()
        idle = [self.connect() for _ in range(3)]
        dripping = self.connect()
        threading.Thread(target=self.drip, args=(dripping,), daemon=True).start()
        time.sleep(0.3)
        for _ in range(3):
            took = self.scrape_seconds()
            self.assertLess(took, 1.0, f"a scrape took {took:.2f} s beside 3 idle connections and a dripping one")
        # Every connection has 5 s in all, however its bytes come: the idle ones and the
        # dripping one are closed then, not kept open by the drip.
        for s in idle + [dripping]:
            after = self.closed_after(s, timeout=10)
            self.assertIsNotNone(after, "a connection that never finished its request was never closed")
        self.assertLess(time.monotonic() - started, 8.0, "closed about 5 s after they were opened")

    def test_more_connections_than_the_bound(self):
        for _ in range(40):
            self.connect()
        time.sleep(0.3)
        took = self.scrape_seconds()
        self.assertLess(took, 1.0, f"a scrape took {took:.2f} s beside 40 idle connections")
        # The daemon keeps at most its bound open: the oldest were closed to make room.
        closed = sum(1 for s in self.socks[:20] if self.closed_after(s, timeout=0.5) is not None)
        self.assertGreaterEqual(closed, 20, "idle connections past the bound were not closed")
        self.assertAlive()


class TestBackgroundRevalidationLimits(unittest.TestCase):
    """A stale-while-revalidate revalidation is a request to the host like any other: it
    waits for the host's requestsPerSecond and maxConcurrent, and a daemon that stops cancels
    it instead of sending it on its way out."""

    def setUp(self):
        from harness import servers
        self.srv = servers()
        self.base = tempfile.mkdtemp(prefix="fetchd-swr-")
        self.daemon = Daemon("--cache-dir", os.path.join(self.base, "cache"), "--verbose",
                             "--shutdown-grace", "0.5").start()
        self.c = self.daemon.client()

    def tearDown(self):
        self.c.close()
        self.daemon.close()
        shutil.rmtree(self.base, ignore_errors=True)

    def host(self, name):
        """A host name of this test's own (its own limits), resolved to the test server."""
        return f"{name}.example:{self.srv.test_port}", {f"{name}.example:{self.srv.test_port}": "127.0.0.1"}

    def stale_url(self, host, k):
        from test_cache import origin
        # Stored already stale (Age 5 > max-age 1), within stale-while-revalidate.
        return origin(k, cc="max-age=1, stale-while-revalidate=600", age="5", etag="E",
                      **{"304-cc": "max-age=600"}).replace(f"127.0.0.1:{self.srv.test_port}", host)

    def host_state(self, host):
        return next((h for h in self.c.call("getRateLimits")["hosts"] if h["host"] == f"http://{host}"),
                    {"running": 0, "queued": 0})

    def test_revalidation_waits_for_the_request_rate(self):
        from test_cache import origin_count, origin_log
        host, resolve = self.host(key("swr-rps"))
        # One request every 2 s: the stored answer's request takes the token.
        self.c.call("setRateLimit", {"host": host.split(":")[0], "requestsPerSecond": 0.5, "burst": 1})
        k = key("swr-rps")
        url = self.stale_url(host, k)
        t0 = time.monotonic()
        self.assertEqual(self.c.call("fetch", {"url": url, "resolve": resolve})["cache"], "miss")
        wait_for(lambda: self.c.call("getCacheStats")["entries"] >= 1, message="the answer stored")
        # Served stale at once; the revalidation waits for the next token, about 2 s after the first.
        self.assertEqual(self.c.call("fetch", {"url": url, "resolve": resolve})["cache"], "stale")
        wait_for(lambda: self.host_state(host)["queued"] == 1, message="the revalidation in the host's queue")
        self.assertEqual(origin_count(k), 1)
        wait_for(lambda: origin_count(k) == 2, timeout=10, message="the revalidation once a token came")
        waited = time.monotonic() - t0
        self.assertGreater(waited, 1.7, "the revalidation went before the host's rate allowed it")
        self.assertEqual(origin_log(k)["requests"][1]["ifNoneMatch"], '"E"')

    def test_revalidation_waiting_for_a_slot_is_cancelled_at_shutdown(self):
        from test_cache import origin_count
        host, resolve = self.host(key("swr-stop"))
        self.c.call("setRateLimit", {"host": host.split(":")[0], "maxConcurrent": 1})
        k = key("swr-stop")
        url = self.stale_url(host, k)
        self.assertEqual(self.c.call("fetch", {"url": url, "resolve": resolve})["cache"], "miss")
        wait_for(lambda: self.c.call("getCacheStats")["entries"] >= 1, message="the answer stored")
        holder = self.daemon.client()
        send_request(holder, "fetch", {"url": f"http://{host}/slow-headers?ms=20000", "resolve": resolve,
                                       "retry": False, "cache": "no-store"})
        wait_for(lambda: self.host_state(host)["running"] == 1, message="the slot held")
        self.assertEqual(self.c.call("fetch", {"url": url, "resolve": resolve})["cache"], "stale")
        wait_for(lambda: self.host_state(host)["queued"] == 1, message="the revalidation waiting for the slot")
        # The daemon stops: the holder is cancelled after the grace period, which frees the
        # slot, and the revalidation must not be sent then.
        self.daemon.stop()
        holder.close()
        time.sleep(0.5)
        self.assertEqual(origin_count(k), 1, "a background revalidation was sent while the daemon stopped")
        self.assertIn("1 background revalidation(s) cancelled", self.daemon.stderr_text())


@unittest.skipIf(shutil.which("redis-server") is None, "redis-server is not installed (make deps installs it)")
class TestRedisACLUser(unittest.TestCase):
    """--redis redis://user:password@host authenticates as that ACL user (AUTH user password),
    as redis-cli does; a password alone is the default user's. The user name was ignored."""

    USER, PASSWORD, DEFAULT_PASSWORD = "fetchd-acl", "acl-s3cret-pw", "default-s3cret-pw"

    def setUp(self):
        from test_redis import RedisServer
        self.redis = RedisServer().start()
        self.daemons = []
        # An ACL user of its own, and the default user with another password: only
        # AUTH fetchd-acl acl-s3cret-pw gets in as that user.
        # Kept to the daemon's own keys and channels, as docs/rate-limits.md shows.
        self.assertEqual(self.redis.command("ACL", "SETUSER", self.USER, "on", ">" + self.PASSWORD,
                                            "~fetchd:*", "&fetchd:*", "+@all"), b"+OK\r\n")
        self.assertEqual(self.redis.command("CONFIG", "SET", "requirepass", self.DEFAULT_PASSWORD), b"+OK\r\n")

    def tearDown(self):
        for d in self.daemons:
            d.close()
        self.redis.close()

    def daemon(self, url):
        d = Daemon("--redis", url, "--verbose").start()
        self.daemons.append(d)
        return d

    def redis_status(self, d):
        with d.client() as c:
            return c.call("getStatus")["redis"]

    def url(self, user, password):
        return f"redis://{user}:{password}@127.0.0.1:{self.redis.port}/0"

    def test_acl_user_is_used(self):
        d = self.daemon(self.url(self.USER, self.PASSWORD))
        wait_for(lambda: self.redis_status(d) == "up", timeout=10, message="the daemon did not log in as the ACL user")
        with d.client() as c:
            self.assertTrue(c.call("setRateLimit", {"host": "127.0.0.1", "shared": True, "requestsPerSecond": 50})["shared"])
            entry = next(e for e in c.call("getRateLimits")["limits"] if e["host"] == "127.0.0.1")
            self.assertEqual(entry["backend"], "redis")
            self.assertEqual(c.call("fetch", {"url": self.srv_url() + "/echo"})["status"], 200)
        # The admission ran in Redis, as that user: its keys are there.
        keys = self.redis_command_as_default("KEYS", "fetchd:*")
        self.assertIn(b"fetchd:", keys)
        self.assertIn(f"redis://{self.USER}:", d.stderr_text())  # the user shown, its password not
        self.assertNotIn(self.PASSWORD, d.stderr_text())
        self.assertNotIn(" error: ", d.stderr_text())  # no NOPERM: its keys and channels suffice

    def test_password_alone_is_the_default_user(self):
        d = self.daemon(f"redis://:{self.DEFAULT_PASSWORD}@127.0.0.1:{self.redis.port}/0")
        wait_for(lambda: self.redis_status(d) == "up", timeout=10, message="AUTH with the password alone")
        self.assertNotIn(self.DEFAULT_PASSWORD, d.stderr_text())

    def test_wrong_password_is_down_and_never_logged(self):
        d = self.daemon(self.url(self.USER, "wrong-pw-1234"))
        time.sleep(2)
        self.assertEqual(self.redis_status(d), "down")
        log = wait_for(lambda: "refused" in d.stderr_text() and d.stderr_text(), timeout=10)
        self.assertIn(f"Redis refused user {self.USER} and its password", log)
        self.assertNotIn("wrong-pw-1234", log)
        # Shared limits fall back to the local share: requests are still served.
        with d.client() as c:
            c.call("setRateLimit", {"host": "127.0.0.1", "shared": True, "requestsPerSecond": 50})
            self.assertEqual(c.call("fetch", {"url": self.srv_url() + "/echo"})["status"], 200)

    def srv_url(self):
        from harness import servers
        return servers().test_url

    def redis_command_as_default(self, *words):
        """A command after AUTH with the default user's password, on one connection."""
        def encode(ws):
            return b"*%d\r\n" % len(ws) + b"".join(b"$%d\r\n%s\r\n" % (len(w.encode()), w.encode()) for w in ws)
        with socket.create_connection(("127.0.0.1", self.redis.port), timeout=2) as s:
            s.sendall(encode(["AUTH", self.DEFAULT_PASSWORD]) + encode(list(words)))
            got = b""
            s.settimeout(0.5)
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            except socket.timeout:
                pass
            return got


if __name__ == "__main__":
    unittest.main()
