"""fetchctl limit / limits: setRateLimit and getRateLimits from the shell client."""
import json
import os
import subprocess
import unittest

from harness import FETCHCTL, Daemon, servers


class TestFetchctlLimits(unittest.TestCase):
    """A fresh daemon per test: limits are daemon-wide."""

    def setUp(self):
        self.srv = servers()
        self.daemon = Daemon("--rate", "127.0.0.1=5:2", "--max-queued", "77").start()
        self.c = self.daemon.client()

    def tearDown(self):
        self.daemon.close()

    def ctl(self, *args, timeout=20):
        try:
            r = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, *args], capture_output=True,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            self.fail(f"fetchctl {' '.join(args)} did not finish within {timeout}s")
        return r

    def entry(self, host):
        return next((e for e in self.c.call("getRateLimits")["limits"] if e["host"] == host), None)

    def test_limit_sets_and_keeps_unset_fields(self):
        r = self.ctl("limit", "Example.com", "--rps", "2.5", "--burst", "3", "--concurrent", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("example.com: maxConcurrent 4, rps 2.5, burst 3", r.stdout)
        e = self.entry("example.com")
        self.assertEqual((e["maxConcurrent"], e["requestsPerSecond"], e["burst"]), (4, 2.5, 3), e)
        r = self.ctl("limit", "example.com", "--concurrent", "none")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("example.com: maxConcurrent none, rps 2.5, burst 3", r.stdout)
        r = self.ctl("limit", "example.com", "--rps", "none", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout.split("\n}")[0] + "\n}")
        self.assertEqual(got, {"host": "example.com", "maxConcurrent": None, "requestsPerSecond": None, "burst": 3,
                               "followServer": True, "adaptive": False, "maxRecvBytesPerSecond": None})
        e = self.entry("example.com")
        self.assertEqual((e["maxConcurrent"], e["requestsPerSecond"], e["burst"]), (None, None, 3), e)

    def test_limit_usage_and_refusals(self):
        for args in (["limit"], ["limit", "example.com", "--rps", "fast"], ["limit", "example.com", "--burst", "-1"],
                     ["limit", "example.com", "--concurrent"], ["limit", "a", "b"], ["limit", "x", "--bogus", "1"],
                     ["limits", "extra"]):
            with self.subTest(args=args):
                r = self.ctl(*args)
                self.assertEqual(r.returncode, 2, f"fetchctl {args}: exit {r.returncode}, stderr {r.stderr!r}")
                self.assertTrue(r.stderr.strip(), f"fetchctl {args}: no message")
        # The daemon's own validation: -32602 naming the field, exit 4.
        r = self.ctl("limit", "http://example.com", "--rps", "1")
        self.assertEqual(r.returncode, 4, r)
        self.assertIn("host", r.stderr)
        r = self.ctl("limit", "example.com", "--burst", "0")
        self.assertEqual(r.returncode, 4, r)
        self.assertIn("burst", r.stderr)
        self.assertEqual([e["host"] for e in self.c.call("getRateLimits")["limits"]], ["*", "127.0.0.1"])

    def test_limits_table(self):
        self.assertEqual(self.c.call("fetch", {"url": f"{self.srv.test_url}/status/503?retry-after=3",
                                               "retry": False})["status"], 503)
        r = self.ctl("limits")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["HOST", "CONCURRENT", "RPS", "BURST", "RUNNING", "QUEUED", "PAUSED", "UNTIL"],
                         r.stdout)
        rows = {line.split()[0]: line.split() for line in lines[1:] if line.strip()}
        self.assertEqual(rows["*"], ["*", "10", "none", "1", "0", "0", "-"], r.stdout)
        row = rows["127.0.0.1"]
        self.assertEqual(row[:6], ["127.0.0.1", "10", "5", "2", "0", "0"], r.stdout)
        self.assertRegex(row[6], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", f"pausedUntil column: {r.stdout}")
        active = f"http://127.0.0.1:{self.srv.test_port}"
        self.assertIn(active, rows, f"the paused host should be listed: {r.stdout}")
        self.assertEqual(rows[active][1], "127.0.0.1", r.stdout)
        self.assertIn("waiting: 0 of at most 77", r.stdout)

    def test_limits_json(self):
        r = self.ctl("limits", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout[:r.stdout.rindex("}") + 1])
        self.assertEqual(set(got), {"limits", "hosts", "queued", "maxQueued"}, got)
        self.assertEqual(got["maxQueued"], 77)
        self.assertEqual([e["host"] for e in got["limits"]], ["*", "127.0.0.1"], got)

    def test_output_has_nothing_but_the_answer(self):
        # stdout is for the answer only (scripts parse it).
        r = self.ctl("limits", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            json.loads(r.stdout)
        except ValueError as e:
            self.fail(f"fetchctl limits --json: stdout is not one JSON text ({e}); it ends {r.stdout[-40:]!r}")
        r = self.ctl("limits")
        self.assertEqual(r.stdout.splitlines()[-1], "waiting: 0 of at most 77",
                         f"unexpected trailing output: {r.stdout[-80:]!r}")


if __name__ == "__main__":
    unittest.main()
