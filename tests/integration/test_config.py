"""--config FILE: one JSON file with the command line's settings and the daemon's
setup, unknown keys refused with their path, SIGHUP reloads it without dropping jobs; and
the one table of settings, from which --help and docs/operations.md agree."""
import json
import os
import re
import shutil
import signal
import tempfile
import unittest

from harness import REPO, Daemon, run_fetchd, servers, wait_for


def help_facts():
    """flag -> (config key, default, bounds, SIGHUP) from fetchd --help."""
    r = run_fetchd("--help")
    lines = r.stdout.decode().splitlines()
    facts = {}
    for first, second in zip(lines, lines[1:]):
        m = re.match(r"^  (--[a-z-]+)", first)
        d = re.match(r"^ {28}default: (.*); bounds: (.*); config: (.*); SIGHUP: (applied|restart)$", second)
        if m and d:
            facts[m.group(1)] = (d.group(3), d.group(1), d.group(2), d.group(4))
    return facts


def docs_facts():
    """The same from operations.md's table of flags."""
    with open(os.path.join(REPO, "docs", "operations.md")) as f:
        text = f.read()
    facts = {}
    table = text[text.index("| flag | config key | default | bounds | on SIGHUP | meaning |"):]
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        flag = re.match(r"`(--[a-z-]+)", cells[0]).group(1)
        if flag in ("--help", "--version"):
            continue
        unquote = lambda c: c[1:-1] if c.startswith("`") and c.endswith("`") else c
        key = cells[1].replace("`", "")
        facts[flag] = (key, unquote(cells[2]), unquote(cells[3]), cells[4])
    return facts


class TestTable(unittest.TestCase):
    def test_help_and_operations_md_agree(self):
        from_help, from_docs = help_facts(), docs_facts()
        self.assertGreater(len(from_help), 15)
        self.assertEqual(sorted(from_help), sorted(from_docs))
        for flag in from_help:
            self.assertEqual(from_help[flag], from_docs[flag], flag)

    def test_every_config_key_is_documented(self):
        with open(os.path.join(REPO, "docs", "operations.md")) as f:
            text = f.read()
        section = text[text.index("## The config file"):]
        for key in ("rateLimits", "auth", "cookieJars", "logging", "cache", "redis"):
            self.assertIn(f"`{key}`", section, key)


class ConfigCase(unittest.TestCase):
    def setUp(self):
        self.srv = servers()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-config-")
        self.path = os.path.join(self.tmp, "config.json")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, config, mode=0o600):
        with open(self.path, "w") as f:
            json.dump(config, f)
        os.chmod(self.path, mode)

    def refused(self, config, needle, mode=0o600):
        self.write(config, mode)
        r = run_fetchd("--socket", os.path.join(self.tmp, "s.sock"), "--config", self.path)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(needle, r.stderr.decode())
        return r.stderr.decode()


class TestLoad(ConfigCase):
    def test_settings_and_setup_from_the_file(self):
        token = os.path.join(self.tmp, "token")
        with open(token, "w") as f:
            f.write("s3cret\n")
        har = os.path.join(self.tmp, "har")
        self.write({
            "maxPerHost": 3, "maxQueued": 77, "rate": ["slow.example=2:4"],
            "rateLimits": [{"host": "api.example", "maxConcurrent": 5, "requestsPerSecond": 9}],
            "auth": [{"host": "127.0.0.1", "type": "bearer", "tokenFile": token}],
            "logging": {"enabled": True, "directory": har},
            "cookieJars": {"default": {"file": os.path.join(self.tmp, "cookies.txt")}},
            "cache": {"dir": os.path.join(self.tmp, "cache"), "maxBytes": 1000},
            "redis": "redis://127.0.0.1:6379/0",
        })
        with Daemon("--config", self.path, "--max-per-host", "4") as d:
            c = d.client()
            limits = {l["host"]: l for l in c.call("getRateLimits")["limits"]}
            self.assertEqual(limits["*"]["maxConcurrent"], 4)  # the flag wins over the file
            self.assertEqual(limits["api.example"]["maxConcurrent"], 5)
            self.assertEqual(limits["api.example"]["requestsPerSecond"], 9)
            self.assertEqual(limits["slow.example"]["requestsPerSecond"], 2)
            self.assertEqual(limits["slow.example"]["burst"], 4)
            self.assertEqual(c.call("getRateLimits")["maxQueued"], 77)
            self.assertEqual([(r["host"], r["type"]) for r in c.call("getAuth")["rules"]], [("127.0.0.1", "bearer")])
            logging = c.call("getLogging")
            self.assertTrue(logging["enabled"])
            self.assertEqual(logging["directory"], har)
            r = c.call("fetch", {"url": self.srv.test_url + "/echo"})
            self.assertIn(["Authorization", "Bearer s3cret"], json.loads(r["body"])["headers"])
            # The credential fetch (a file read) is counted in the metrics.
            text = c.call("getMetrics")["text"]
            self.assertRegex(text, r"\nfetchd_auth_credential_fetches_total [1-9]")
            self.assertRegex(text, r"\nfetchd_auth_credential_failures_total 0\n")
            self.assertIn("the cache and redis keys are checked and kept", d.stderr_text())

    def test_unknown_keys_are_refused_with_their_path(self):
        self.refused({"maxPerHost": 1, "bogus": True}, "bogus: unknown key")
        self.refused({"rateLimits": [{"host": "a.example", "bogus": 1}]}, "rateLimits[0].bogus")
        self.refused({"cache": {"size": 1}}, "cache.size: unknown key")
        self.refused({"cookieJars": {"default": {"path": "/x"}}}, "cookieJars.default.path: unknown key")
        self.refused({"logging": {"enabled": True, "colour": "red"}}, "logging.colour")
        self.refused({"auth": [{"host": "a.example", "type": "bearer", "token": "t", "extra": 1}]}, "auth[0].extra")

    def test_bad_values_name_the_key(self):
        self.refused({"maxPerHost": -1}, "maxPerHost: --max-per-host takes a whole number >= 0")
        self.refused({"offline": "yes"}, "offline: expected true or false")
        self.refused({"allowDir": "/tmp"}, "allowDir: expected an array")
        self.refused({"redis": "http://x"}, "redis: --redis takes redis://")
        self.refused([1, 2], "expected a JSON object")

    def test_auth_in_a_file_others_can_read_is_refused(self):
        self.refused({"auth": [{"host": "a.example", "type": "bearer", "token": "t"}]}, "can be read or written by other users",
                     mode=0o644)

    def test_older_rate_limit_file_still_works(self):
        with open(self.path, "w") as f:
            f.write("api.example maxConcurrent=2 rps=3\n")
        with Daemon("--config", self.path) as d:
            limits = {l["host"]: l for l in d.client().call("getRateLimits")["limits"]}
            self.assertEqual(limits["api.example"]["maxConcurrent"], 2)


class TestReload(ConfigCase):
    def test_sighup_changes_limits_and_auth_without_dropping_jobs(self):
        token = os.path.join(self.tmp, "token")
        with open(token, "w") as f:
            f.write("first\n")
        self.write({"maxPerHost": 3, "rateLimits": [{"host": "gone.example", "maxConcurrent": 1}],
                    "auth": [{"host": "old.example", "type": "bearer", "tokenFile": token}]})
        with Daemon("--config", self.path) as d:
            c = d.client()
            slow = c.new_id()
            c.send_obj({"jsonrpc": "2.0", "id": slow, "method": "fetch",
                        "params": {"url": self.srv.test_url + "/slow-body?chunks=20&ms=50", "jobId": "reload-slow"}})
            wait_for(lambda: any(j["state"] == "running" for j in d.client().call("listJobs")["jobs"]), timeout=10)
            self.write({"maxPerHost": 6, "spinUs": 7, "verbose": True,
                        "rateLimits": [{"host": "new.example", "requestsPerSecond": 5}],
                        "auth": [{"host": "127.0.0.1", "type": "bearer", "tokenFile": token}]})
            os.kill(d.pid, signal.SIGHUP)
            wait_for(lambda: "SIGHUP: reloaded" in d.stderr_text(), timeout=10, message=d.stderr_text())
            self.assertIn("SIGHUP: spinUs changed", d.stderr_text())
            self.assertNotIn("maxPerHost changed", d.stderr_text())
            c2 = d.client()
            limits = {l["host"]: l for l in c2.call("getRateLimits")["limits"]}
            self.assertEqual(limits["*"]["maxConcurrent"], 6)
            self.assertNotIn("gone.example", limits)
            self.assertEqual(limits["new.example"]["requestsPerSecond"], 5)
            self.assertEqual([r["host"] for r in c2.call("getAuth")["rules"]], ["127.0.0.1"])
            # The job running across the reload finishes.
            answer = c.answer_for(slow, timeout=30)
            self.assertEqual(answer["result"]["status"], 200, answer)
            # verbose is applied: debug lines from now on.
            c2.call("ping")
            d3 = d.client()
            d3.call("ping")
            wait_for(lambda: "debug: connection" in d.stderr_text(), timeout=10)
            # A broken file changes nothing.
            with open(self.path, "w") as f:
                f.write('{"maxPerHost": "many"}')
            os.kill(d.pid, signal.SIGHUP)
            wait_for(lambda: "the running settings stay" in d.stderr_text(), timeout=10, message=d.stderr_text())
            self.assertEqual({l["host"]: l for l in c2.call("getRateLimits")["limits"]}["*"]["maxConcurrent"], 6)
            self.assertTrue(d.alive())


if __name__ == "__main__":
    unittest.main()
