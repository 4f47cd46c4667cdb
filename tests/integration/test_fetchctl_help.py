"""clients/fetchctl as a black box: --help after every command, `fetchctl metrics`, and -L as in
curl (a redirect is the answer unless -L)."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from harness import FETCHCTL, DaemonTestCase
# Gauges that count the connections of the moment (the test's, fetchctl's, libcurl's idle ones).
MOMENTARY = ("fetchd_clients", "http_client_open_connections")


def run(*args, timeout=30):
    env = dict(os.environ)
    env.pop("FETCHD_SOCKET", None)
    return subprocess.run([FETCHCTL, *args], capture_output=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)


class TestHelp(unittest.TestCase):
    """--help needs no daemon: a socket path where nothing listens shows that nothing is sent."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="fetchctl-help-")
        cls.nowhere = os.path.join(cls.tmp.name, "nobody-listens.sock")
        r = run("--help")
        cls.help = r.stdout
        assert r.returncode == 0, r

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def commands(self):
        """The commands the help lists (its "Commands:" section)."""
        section = self.help.decode().split("Commands:\n", 1)[1].split("\n\n", 1)[0]
        names = []
        for line in section.splitlines():
            m = re.match(r"^  ([a-z]+)\b", line)
            if m and m.group(1) not in names:
                names.append(m.group(1))
        return names

    def test_help_goes_to_stdout_and_exits_0(self):
        self.assertTrue(self.help.startswith(b"Usage: fetchctl"), self.help[:200])
        for form in (["-h"], ["help"], ["--socket", self.nowhere, "--help"]):
            r = run(*form)
            self.assertEqual((r.returncode, r.stderr), (0, b""), form)
            self.assertEqual(r.stdout, self.help, form)

    def test_every_command_prints_the_help(self):
        commands = self.commands()
        for name in ("fetch", "download", "upload", "status", "jobs", "cancel", "call", "limit", "top",
                     "auth", "cookies", "stub", "cache", "metrics"):
            self.assertIn(name, commands)
        for name in commands:
            for flag in ("--help", "-h"):
                with self.subTest(command=name, flag=flag):
                    r = run("--socket", self.nowhere, name, flag)
                    self.assertEqual(r.returncode, 0, f"fetchctl {name} {flag}: exit {r.returncode}, stderr {r.stderr!r}")
                    self.assertEqual(r.stderr, b"")
                    self.assertEqual(r.stdout, self.help)

    def test_help_after_other_arguments(self):
        for args in (["fetch", "http://127.0.0.1:1/", "-s", "--help"], ["fetch", "-sh"],
                     ["download", "http://127.0.0.1:1/", "-o", "x", "--help"], ["limit", "localhost", "--help"],
                     ["cookies", "clear", "--help"], ["top", "--once", "--help"]):
            with self.subTest(args=args):
                r = run("--socket", self.nowhere, *args)
                self.assertEqual((r.returncode, r.stderr), (0, b""), args)
                self.assertEqual(r.stdout, self.help, args)

    def test_a_value_that_looks_like_help_is_a_value(self):
        # An option's value is taken whatever it is; the request is then sent (nothing listens: exit 3).
        for args in (["fetch", "http://127.0.0.1:1/", "-d", "--help"],
                     ["auth", "localhost", "--helper", "/bin/echo", "--help"]):  # the helper's own argument
            with self.subTest(args=args):
                r = run("--socket", self.nowhere, *args)
                self.assertEqual(r.returncode, 3, r)
                self.assertEqual(r.stdout, b"")

    def test_help_says_redirects_need_L(self):
        text = self.help.decode()
        self.assertIsNotNone(re.search(r"-L, --location +[^\n]*follow", text), "no -L, --location line that follows")
        self.assertIsNone(re.search(r"followed\s+by\s+default", text), "the help says redirects are followed by default")


class TestRedirectsAsCurl(DaemonTestCase):
    def ctl(self, *args):
        r = run("--socket", self.daemon.socket_path, *args)
        self.assertEqual(r.returncode, 0, r)
        return r.stdout.decode()

    def test_redirect_is_the_answer_without_L(self):
        url = self.srv.test_url + "/redirect/2"
        self.assertEqual(self.ctl("fetch", url, "-w", " %{http_code}"), "redirect to 1 302")
        # --max-redirs alone follows nothing, as in curl.
        self.assertEqual(self.ctl("fetch", "--max-redirs", "5", url, "-w", " %{http_code}"), "redirect to 1 302")
        self.assertEqual(self.ctl("fetch", "-L", url, "-w", " %{http_code}"), "done 200")
        self.assertEqual(self.ctl("fetch", "-sL", "--max-redirs", "5", url, "-w", " %{num_redirects}"), "done 2")


class TestMetrics(DaemonTestCase):
    def ctl(self, *args):
        return run("--socket", self.daemon.socket_path, *args)

    @staticmethod
    def steady(text):
        return [line for line in text.splitlines() if not line.startswith(MOMENTARY)]

    def test_prints_the_prometheus_text(self):
        self.assertEqual(self.c.call("fetch", {"url": self.srv.test_url + "/echo"})["status"], 200)
        before = self.c.call("getMetrics", {"format": "prometheus"})["text"]
        r = self.ctl("metrics")
        after = self.c.call("getMetrics", {"format": "prometheus"})["text"]
        self.assertEqual((r.returncode, r.stderr), (0, b""), r)
        text = r.stdout.decode()
        self.assertTrue(text.endswith("\n"))
        self.assertEqual(self.steady(before), self.steady(after), "the metrics moved during the test")
        self.assertEqual(self.steady(text), self.steady(after))
        port = self.srv.test_url.rsplit(":", 1)[1]
        self.assertRegex(text, r'(?m)^http_client_request_duration_seconds_count\{server_address="127\.0\.0\.1",'
                               rf'server_port="{port}",url_scheme="http",status_class="2xx"\}} [1-9]')

    def test_json(self):
        self.assertEqual(self.c.call("fetch", {"url": self.srv.test_url + "/echo"})["status"], 200)
        r = self.ctl("metrics", "--json")
        self.assertEqual((r.returncode, r.stderr), (0, b""), r)
        ours = json.loads(r.stdout)
        theirs = self.c.call("getMetrics", {"format": "json"})
        self.assertEqual([m["name"] for m in ours["metrics"]], [m["name"] for m in theirs["metrics"]])
        by_name = {m["name"]: m for m in ours["metrics"]}
        self.assertEqual(by_name["http_client_request_duration_seconds"],
                         next(m for m in theirs["metrics"] if m["name"] == "http_client_request_duration_seconds"))

    def test_usage_and_no_daemon(self):
        r = self.ctl("metrics", "extra")
        self.assertEqual(r.returncode, 2, r)
        self.assertIn(b"usage: fetchctl metrics [--json]", r.stderr)
        with tempfile.TemporaryDirectory() as d:
            r = run("--socket", os.path.join(d, "none.sock"), "metrics")
        self.assertEqual(r.returncode, 3, r)
        self.assertEqual(r.stdout, b"")


if __name__ == "__main__":
    unittest.main()
