"""Hardening, against the real daemon:

- at the open-file limit the daemon neither spins on accept() nor floods its log, and serves
  again once descriptors are free; the soft limit is raised to the hard one at start;
- SIGHUP is ignored with a log line;
- secrets in URLs (userinfo passwords, signature, key, code ... parameters) appear neither in
  HAR files nor in the --verbose log nor in error messages;
- what the log prints is escaped: a jobId, a comment or a URL with a newline or an ESC is one
  line."""
import glob
import json
import os
import resource
import shutil
import signal
import socket
import tempfile
import time
import unittest
from urllib.parse import quote

from harness import Daemon, DaemonTestCase, RPCError, closed_port, servers, wait_for
from jobhelpers import key

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def limit_files(soft, hard):
    def preexec():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return preexec


def log_lines(daemon):
    return daemon.stderr_text().splitlines()


# --------------------------------------------------------------------------- item 3
class TestOpenFileLimit(unittest.TestCase):
    LIMIT = 64
    EXTRA = 120  # connections beyond what the limit lets the daemon accept

    @classmethod
    def setUpClass(cls):
        cls.srv = servers()

    def test_at_the_limit_accept_neither_spins_nor_floods_the_log(self):
        with Daemon(preexec=limit_files(self.LIMIT, self.LIMIT)) as d:
            socks = []
            try:
                for _ in range(self.EXTRA):
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.setblocking(False)
                    try:
                        s.connect(d.socket_path)
                    except BlockingIOError:
                        pass
                    socks.append(s)
                wait_for(lambda: d.fd_count() >= self.LIMIT - 1, timeout=5,
                         message=f"the daemon did not reach its limit: {d.fd_count()} descriptors")
                time.sleep(0.2)
                size0, cpu0, t0 = os.path.getsize(d.stderr_path), cpu_seconds(d.pid), time.monotonic()
                time.sleep(2)
                cpu = cpu_seconds(d.pid) - cpu0
                elapsed = time.monotonic() - t0
                grown = os.path.getsize(d.stderr_path) - size0
                self.assertLess(cpu, 0.5, f"{cpu:.2f} s of CPU in {elapsed:.2f} s at the open-file limit")
                self.assertLess(grown, 2000, f"the log grew {grown} bytes in {elapsed:.2f} s: "
                                             f"{d.stderr_text()[-500:]!r}")
                accept_lines = [l for l in log_lines(d) if "accept:" in l]
                self.assertTrue(1 <= len(accept_lines) <= 2, accept_lines[:5])
                self.assertIn("Too many open files", accept_lines[0])
                self.assertIn(f"open-file limit {self.LIMIT}", accept_lines[0])
            finally:
                for s in socks:
                    s.close()
            # Once the extra connections are gone, a new client is served.
            with d.client(connect_timeout=10) as c:
                self.assertEqual(c.call("ping", timeout=10), "pong")
            self.assertTrue(d.alive())
            wait_for(lambda: "accepting connections again" in d.stderr_text(), timeout=5,
                     message=d.stderr_text()[-1000:])

    def test_soft_limit_is_raised_to_the_hard_limit(self):
        with Daemon("--verbose", preexec=limit_files(64, 4096)) as d:
            with open(f"/proc/{d.pid}/limits") as f:
                row = [l for l in f if l.startswith("Max open files")][0].split()
            self.assertEqual(row[3:5], ["4096", "4096"], row)
            self.assertIn("open-file limit raised from 64 to 4096", d.stderr_text())


# --------------------------------------------------------------------------- item 9
class TestSIGHUP(DaemonTestCase):
    def test_sighup_without_config_keeps_running_with_a_log_line(self):
        self.assertEqual(self.c.call("ping"), "pong")
        os.kill(self.daemon.pid, signal.SIGHUP)
        wait_for(lambda: "SIGHUP: no --config file" in self.daemon.stderr_text(), timeout=5,
                 message=f"no log line for SIGHUP: {self.daemon.stderr_text()[-500:]!r}")
        self.assertTrue(self.daemon.alive())
        self.assertEqual(self.c.call("ping"), "pong", "the connection open before SIGHUP still works")
        self.assertAlive()
        self.assertIn("SIGHUP: no --config file; nothing to reload", self.daemon.stderr_text())


# --------------------------------------------------------------------------- item 8
SECRET_PARAMS = ("sig", "signature", "X-Amz-Signature", "X-Amz-Credential", "X-Goog-Signature",
                 "key", "code", "access_token", "api_key", "token", "session")


class SecretURLs:
    """A URL carrying one secret per parameter of SECRET_PARAMS, plus a userinfo password."""

    def __init__(self, base):
        tag = key("u").split("-")[1]
        self.values = {n: f"{n.replace('-', '')}Sec{tag}" for n in SECRET_PARAMS}
        self.values["password"] = f"userPass{tag}"
        self.values["fragment"] = f"fragTok{tag}"
        host = base.split("://", 1)[1]
        query = "&".join(f"{n}={self.values[n]}" for n in SECRET_PARAMS)
        self.url = f"http://bob:{self.values['password']}@{host}/echo?{query}&page=2"
        self.redirect_target = f"/echo?X-Goog-Signature={self.values['X-Goog-Signature']}#access_token={self.values['fragment']}"

    def leaked(self, data):
        return sorted(n for n, v in self.values.items() if v.encode() in data)


class TestURLSecrets(DaemonTestCase):
    DAEMON_ARGS = ("--verbose",)

    def setUp(self):
        super().setUp()
        self.logdir = tempfile.mkdtemp(prefix="fetchd-har-")
        self.c.call("setLogging", {"enabled": True, "directory": self.logdir, "redact": True})

    def tearDown(self):
        self.c.call("setLogging", {"enabled": False})
        shutil.rmtree(self.logdir, ignore_errors=True)
        # A job that ended after that still writes its HAR (it started with logging on):
        # removed again once the daemon has stopped.
        type(self).logdirs = getattr(type(self), "logdirs", []) + [self.logdir]
        super().tearDown()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        for path in getattr(cls, "logdirs", []):
            shutil.rmtree(path, ignore_errors=True)

    def har(self, job):
        path = wait_for(lambda: glob.glob(os.path.join(self.logdir, f"*-{job}.har")), timeout=10)[0]
        with open(path, "rb") as f:
            return f.read()

    def run_jobs(self, s):
        job1, job2 = key("sec-url"), key("sec-redirect")
        res = self.fetch({"url": s.url, "jobId": job1, "cookieJar": False,
                          "headers": {"Referer": s.url}})
        self.assertEqual(res["status"], 200, res)
        self.assertIn(s.values["sig"], res["body"], "the echo server sends the secrets back")
        res = self.fetch({"url": self.srv.test_url + "/redirect-to?url=" + quote(s.redirect_target, safe=""),
                          "jobId": job2, "cookieJar": False})
        self.assertEqual(res["status"], 200, res)
        return job1, job2

    def test_har_files_hold_no_url_secret(self):
        s = SecretURLs(self.srv.test_url)
        job1, job2 = self.run_jobs(s)
        har1, har2 = self.har(job1), self.har(job2)
        self.assertEqual(s.leaked(har1 + har2), [], f"secrets in the HAR files: {s.leaked(har1 + har2)}")
        entry = json.loads(har1)["log"]["entries"][0]["request"]
        self.assertIn("bob:%3Credacted%3E@", entry["url"])
        self.assertIn("page=2", entry["url"], "innocent parameters stay")
        names = {q["name"]: q["value"] for q in entry["queryString"]}
        self.assertEqual({n: names[n] for n in SECRET_PARAMS}, {n: "<redacted>" for n in SECRET_PARAMS})
        self.assertEqual(names["page"], "2")
        referer = [h["value"] for h in entry["headers"] if h["name"] == "Referer"]
        self.assertEqual(len(referer), 1)
        self.assertIn("sig=%3Credacted%3E", referer[0])
        hop1 = json.loads(har2)["log"]["entries"][0]["response"]
        self.assertIn("X-Goog-Signature=%3Credacted%3E", hop1["redirectURL"])
        self.assertIn("#access_token=%3Credacted%3E", hop1["redirectURL"])

    def test_verbose_log_holds_no_url_secret(self):
        s = SecretURLs(self.srv.test_url)
        job1, _ = self.run_jobs(s)
        self.har(job1)
        log = self.daemon.stderr_text().encode()
        self.assertEqual(s.leaked(log), [], f"secrets in the --verbose log: {s.leaked(log)}")
        line = [l for l in log_lines(self.daemon) if f"job {job1} from connection" in l]
        self.assertEqual(len(line), 1, line)
        self.assertIn("bob:%3Credacted%3E@", line[0])
        self.assertIn("page=2", line[0])

    def test_error_messages_hold_no_url_secret(self):
        """A failed job's error: the answer, the HAR file and the log carry no secret."""
        s = SecretURLs(f"http://127.0.0.1:{closed_port()}")
        job = key("sec-err")
        e = self.fetch_error({"url": s.url, "jobId": job, "retry": False})
        self.assertEqual(e.code, -32001, e)
        text = json.dumps(e.answer).encode() + self.har(job) + self.daemon.stderr_text().encode()
        self.assertEqual(s.leaked(text), [], f"secrets in the error, its HAR file or the log: {s.leaked(text)}")
        # A redirect to a scheme that is refused names the URL in no error either.
        job = key("sec-scheme")
        target = f"ftp://bob:{s.values['password']}@127.0.0.1/?sig={s.values['sig']}"
        e = self.fetch_error({"url": self.srv.test_url + "/redirect-to?url=" + quote(target, safe=""),
                              "jobId": job, "retry": False})
        text = json.dumps(e.answer).encode() + self.har(job) + self.daemon.stderr_text().encode()
        self.assertEqual(s.leaked(text), [], f"secrets in the error: {json.dumps(e.answer)}")


# --------------------------------------------------------------------------- item 12
class TestLogEscaping(DaemonTestCase):
    DAEMON_ARGS = ("--verbose",)

    def test_client_text_with_newlines_and_escapes_is_one_line(self):
        tag = key("esc").split("-")[1]
        forged = f"fetchd[1] error: forged{tag}"
        job = f"job{tag}\n{forged}\x1b[31m"
        comment = f"note{tag}\r\n{forged}\x1b]0;title\x07"
        url = self.srv.test_url + f"/echo?q=a%0A{tag}"
        res = self.fetch({"url": url, "jobId": job, "comment": comment})
        self.assertEqual(res["status"], 200, res)
        # Raw control characters in a URL are refused before anything is logged.
        for bad in (f"/echo?q=\x1b[2J{tag}", f"/echo?q=a\n{forged}", f"/echo\x7f{tag}"):
            with self.assertRaises(RPCError) as caught:
                self.fetch({"url": self.srv.test_url + bad, "jobId": f"raw{tag}"})
            self.assertEqual(caught.exception.code, -32602, caught.exception)
        wait_for(lambda: f"job job{tag}\\n" in self.daemon.stderr_text() and ": succeeded" in self.daemon.stderr_text(),
                 timeout=5)
        text = self.daemon.stderr_text()
        lines = text.splitlines()
        self.assertFalse([l for l in lines if l.startswith(forged)], "a forged line in the log")
        self.assertNotIn("\x1b", text)
        self.assertNotIn("\x07", text)
        self.assertNotIn("\r", text)
        mine = [l for l in lines if f"job{tag}" in l]
        self.assertEqual(len(mine), 2, mine)  # the job's start and its end
        self.assertIn(f"job job{tag}\\n{forged}\\u001B[31m from connection", mine[0])
        self.assertIn(f"comment: note{tag}\\r\\n{forged}\\u001B]0;title\\u0007", mine[0])
        self.assertIn(f"a%0A{tag}", mine[0], "the URL as sent, percent-encoded")
        self.assertFalse([l for l in lines if f"raw{tag}" in l], "refused requests are not jobs")
        self.assertAlive()


if __name__ == "__main__":
    unittest.main()
