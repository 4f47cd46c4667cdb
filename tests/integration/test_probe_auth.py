"""Credentials never leak (docs/auth.md, docs/cache.md): every header an auth rule adds stays
on its own origin when redirects are followed, the cache keeps answers apart per credential
whatever header carries it, and a helper's edge cases: an answer followed by an exit is the
end even while a background child holds stdout, its stderr line is told only to the request
that ran it (and the daemon's log), and output whose expiresIn or expiresAt is not a number
fails.

A second test server on another port stands for another origin; localhost against 127.0.0.1
for another host on the same port."""
import glob
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.parse

from harness import SUPPORT, header_values, wait_for
from jobhelpers import key, send_request
from test_auth import AuthCase
from test_cache import CacheCase, origin_count

# What the first origin's rule adds: both are the credential.
RULE_OUTPUT = '{"headers": {"Authorization": "Bearer S1-probe-secret", "X-Api-Key": "S2-probe-secret"}, "expiresIn": 300}'


def start_testserver():
    """Another test server (another port, so another origin): (process, port)."""
    proc = subprocess.Popen([sys.executable, os.path.join(SUPPORT, "testserver.py"), "--port", "0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    line = b""
    deadline = time.monotonic() + 10
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the second test server did not start")
        if select.select([proc.stdout], [], [], left)[0]:
            line += os.read(proc.stdout.fileno(), 1)
    assert line.startswith(b"PORT "), line
    return proc, int(line.split()[1])


def stop_testserver(proc):
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def q(url):
    return urllib.parse.quote(url, safe="")


class ProbeAuthCase(AuthCase):
    def tearDown(self):
        try:
            self.c.call("setLogging", {"enabled": False})
        finally:
            super().tearDown()

    def helper(self, body, name="helper.sh"):
        return self.write(name, "#!/bin/sh\n" + body, mode=0o700)

    def printing(self, output, name="helper.sh"):
        """A helper that reads its input and prints `output`."""
        return self.helper(f"cat > /dev/null\nprintf '%s\\n' '{output}'\n", name)

    def set_helper(self, host, output, name="helper.sh"):
        return self.c.call("setAuth", {"host": host, "type": "helper", "command": [self.printing(output, name)]})

    def har_files(self, directory):
        return sorted(glob.glob(os.path.join(directory, "*.har")))


class TestRedirectsKeepTheCredentialOnItsOrigin(ProbeAuthCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.other, cls.other_port = start_testserver()

    @classmethod
    def tearDownClass(cls):
        stop_testserver(cls.other)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.set_helper(self.host, RULE_OUTPUT)

    def assertNoRuleHeader(self, echo):
        self.assertEqual(header_values(echo, "X-Api-Key"), [], "a header the rule added went to another origin")
        self.assertEqual(header_values(echo, "Authorization"), [])

    def test_another_port_gets_none_of_the_rules_headers(self):
        other = f"http://127.0.0.1:{self.other_port}/echo"
        r, echo = self.echo({"url": f"{self.url}/redirect-to?url={q(other)}"})
        self.assertEqual((r["url"], r["redirects"], r["attempts"]), (other, 1, 1))
        self.assertNoRuleHeader(echo)

    def test_another_host_gets_none_of_the_rules_headers(self):
        other = f"http://localhost:{self.srv.test_port}/echo"
        r, echo = self.echo({"url": f"{self.url}/redirect-to?url={q(other)}"})
        self.assertEqual((r["url"], r["redirects"]), (other, 1))
        self.assertNoRuleHeader(echo)
        # A 307 that keeps the method and body, and a download: the same.
        r, echo = self.echo({"url": f"{self.url}/redirect-to?status=307&url={q(other)}", "method": "POST", "body": "b"})
        self.assertEqual((echo["method"], echo["body"]), ("POST", "b"))
        self.assertNoRuleHeader(echo)
        path = os.path.join(self.tmp, "dl.json")
        r = self.c.call("download", {"url": f"{self.url}/redirect-to?url={q(other)}", "path": path}, timeout=30)
        self.assertEqual(r["redirects"], 1)
        with open(path) as f:
            self.assertNoRuleHeader(json.load(f))

    def test_the_same_origin_keeps_them(self):
        r, echo = self.echo({"url": f"{self.url}/redirect-to?url=/redirect-to%3Furl%3D/echo"})
        self.assertEqual((r["redirects"], r["attempts"]), (2, 1))
        self.assertEqual(header_values(echo, "X-Api-Key"), ["S2-probe-secret"])
        self.assertEqual(header_values(echo, "Authorization"), ["Bearer S1-probe-secret"])

    def test_a_new_origin_gets_its_own_rule(self):
        other_host = f"localhost:{self.srv.test_port}"
        self.set_helper(other_host, '{"headers": {"X-Api-Key": "OTHER-key"}}', name="other.sh")
        other = f"http://{other_host}/echo"
        _, echo = self.echo({"url": f"{self.url}/redirect-to?url={q(other)}"})
        self.assertEqual(header_values(echo, "X-Api-Key"), ["OTHER-key"])
        self.assertEqual(header_values(echo, "Authorization"), [])
        # There and back: the first origin's rule again, the other's not.
        back = f"http://{other_host}/redirect-to?url={q(self.url + '/echo')}"
        r, echo = self.echo({"url": f"{self.url}/redirect-to?url={q(back)}"})
        self.assertEqual(r["redirects"], 2)
        self.assertEqual(header_values(echo, "X-Api-Key"), ["S2-probe-secret"])

    def test_another_scheme_and_the_exchange_of_every_hop(self):
        tls = f"{self.srv.nginx_tls_url}/small.txt"
        r = self.fetch({"url": f"{self.url}/redirect-to?url={q(tls)}", "caFile": self.srv.ca_file, "exchange": True})
        self.assertEqual((r["status"], r["redirects"], r["url"]), (200, 1, tls))
        hops = r["exchange"]
        self.assertEqual([h["url"] for h in hops], [f"{self.url}/redirect-to?url={q(tls)}", tls])
        first = {n.lower(): v for n, v in hops[0]["requestHeaders"]}
        second = {n.lower() for n, _ in hops[1]["requestHeaders"]}
        self.assertEqual((first["x-api-key"], first["authorization"]), ("<redacted>", "<redacted>"))
        self.assertNotIn("x-api-key", second)
        self.assertNotIn("authorization", second)
        self.assertNotIn("probe-secret", json.dumps(r))

    def test_methods_and_bodies_as_without_a_rule(self):
        # libcurl's rules (curl -L): 301, 302 and 303 send no body again, and a POST becomes a
        # GET; 307 and 308 keep the method and the body. The daemon follows a credential's
        # redirects by the same rules.
        for status in (301, 302, 303, 307, 308):
            for method, body in (("POST", "payload"), ("PUT", "payload"), ("DELETE", None), ("HEAD", None)):
                seen = []
                for auth in (False, True):
                    params = {"url": f"{self.url}/redirect-to?status={status}&url=/echo", "method": method, "auth": auth}
                    if body:
                        params["body"] = body
                    r = self.fetch(params)
                    self.assertEqual((r["status"], r["redirects"]), (200, 1), (status, method, auth))
                    echo = json.loads(r["body"]) if r.get("body") else {}
                    seen.append((echo.get("method"), echo.get("body"), echo and header_values(echo, "Content-Type")))
                    if auth and method != "HEAD":
                        self.assertEqual(header_values(echo, "X-Api-Key"), ["S2-probe-secret"])
                self.assertEqual(seen[0], seen[1], (status, method))
        _, echo = self.echo({"url": f"{self.url}/redirect-to?status=303&url=/echo", "method": "POST", "body": "x"})
        self.assertEqual((echo["method"], echo["body"]), ("GET", ""))
        _, echo = self.echo({"url": f"{self.url}/redirect-to?status=308&url=/echo", "method": "PUT", "body": "x"})
        self.assertEqual((echo["method"], echo["body"]), ("PUT", "x"))

    def test_redirect_limits_and_refusals_as_without_a_rule(self):
        for auth in (True, False):
            r = self.fetch({"url": f"{self.url}/redirect/3", "auth": auth})
            self.assertEqual((r["status"], r["redirects"], r["body"]), (200, 3, "done"), auth)
            r = self.fetch({"url": f"{self.url}/redirect/3", "maxRedirects": 0, "auth": auth})
            self.assertEqual((r["status"], r["redirects"]), (302, 0), auth)
            e = self.fetch_error({"url": f"{self.url}/redirect/3", "maxRedirects": 2, "auth": auth})
            self.assertEqual((e.code, e.data["kind"], e.data["attempts"]), (-32001, "tooManyRedirects", 1), auth)
            self.assertEqual(e.data["detail"], "Maximum (2) redirects followed")
            e = self.fetch_error({"url": f"{self.url}/redirect-to?url={q('ftp://127.0.0.1/x')}", "auth": auth})
            self.assertEqual(e.code, -32004, auth)
            self.assertIn("a redirect to a scheme other than http or https is refused", e.data["detail"])

    def test_cookies_and_the_http_log_over_the_hops(self):
        logs = os.path.join(self.tmp, "har")
        self.c.call("setLogging", {"enabled": True, "directory": logs, "redact": False})
        k = key("hopcookie")
        first = f"{self.url}/cache-origin/{k}?status=302&location=/cookies&set-cookie=hop%3D{k}%3B%20Path%3D%2F"
        r = self.fetch({"url": first, "jobId": k})
        self.assertEqual(json.loads(r["body"]), {"cookie": f"hop={k}"}, "the hop's Set-Cookie reached the jar")
        self.assertEqual((r["redirects"], r["attempts"]), (1, 1))
        path = wait_for(lambda: [p for p in self.har_files(logs) if k in p], timeout=5)[0]
        with open(path) as f:
            text = f.read()
        entries = json.loads(text)["log"]["entries"]
        self.assertEqual([e["comment"] for e in entries], ["attempt 1, hop 1", "attempt 1, hop 2"])
        self.assertEqual([e["response"]["status"] for e in entries], [302, 200])
        self.assertNotIn("probe-secret", text)


class TestCacheKeepsCredentialsApart(ProbeAuthCase, CacheCase):
    def test_a_rule_header_is_part_of_the_key(self):
        k = key("credkey")
        url = f"{self.url}/cache-origin/{k}?cc=max-age%3D60"
        self.set_helper(self.host, '{"headers": {"X-Api-Key": "K1-cache-secret"}}', name="k1.sh")
        r = self.fetch({"url": url})
        self.assertEqual((r["cache"], r["body"]), ("miss", f"{k} v1"))
        self.assertEqual(self.fetch({"url": url})["cache"], "hit", "the same credential: reused")
        self.set_helper(self.host, '{"headers": {"X-Api-Key": "K2-cache-secret"}}', name="k2.sh")
        r = self.fetch({"url": url})
        self.assertEqual((r["cache"], r["body"]), ("miss", f"{k} v2"), "another credential: never the first one's answer")
        self.assertEqual(origin_count(k), 2)
        self.set_helper(self.host, '{"headers": {"X-Api-Key": "K1-cache-secret"}}', name="k1b.sh")
        r = self.fetch({"url": url})
        self.assertEqual((r["cache"], r["body"]), ("hit", f"{k} v1"))

    def test_the_index_holds_a_digest_not_the_secret(self):
        k = key("credvary")
        url = f"{self.url}/cache-origin/{k}?cc=max-age%3D60&vary=X-Api-Key"
        self.set_helper(self.host, '{"headers": {"X-Api-Key": "K3-index-secret"}}')
        self.assertEqual(self.fetch({"url": url})["cache"], "miss")
        self.assertEqual(self.fetch({"url": url})["cache"], "hit")
        for path in glob.glob(os.path.join(self.cache_dir, "index.sqlite*")):
            with open(path, "rb") as f:
                self.assertFalse(b"K3-index-secret" in f.read(), f"the secret is in {path}")


class TestHelperEdges(ProbeAuthCase):
    def test_an_exit_with_an_answer_is_the_end(self):
        pidfile = os.path.join(self.tmp, "child.pid")
        script = self.helper("cat > /dev/null\n"
                             "printf '%s\\n' '{\"headers\": {\"X-Held\": \"h1\"}}'\n"
                             f"sleep 30 &\necho $! > {pidfile}\nexit 0\n")
        self.c.call("setAuth", {"host": self.host, "type": "helper", "command": [script]})
        try:
            started = time.monotonic()
            _, echo = self.echo({"url": self.url + "/echo"})
            self.assertLess(time.monotonic() - started, 3, "waited for the background child's stdout")
            self.assertEqual(header_values(echo, "X-Held"), ["h1"])
        finally:
            with open(pidfile) as f:
                os.kill(int(f.read()), signal.SIGKILL)

    def test_a_failed_exit_with_a_background_child_fails_at_once(self):
        pidfile = os.path.join(self.tmp, "child.pid")
        script = self.helper(f"cat > /dev/null\nsleep 30 &\necho $! > {pidfile}\necho 'no token here' >&2\nexit 2\n")
        self.c.call("setAuth", {"host": self.host, "type": "helper", "command": [script]})
        try:
            started = time.monotonic()
            e = self.fetch_error({"url": self.url + "/echo"})
            self.assertLess(time.monotonic() - started, 3)
            self.assertEqual(e.data["detail"], "the helper exited with status 2: no token here")
        finally:
            with open(pidfile) as f:
                os.kill(int(f.read()), signal.SIGKILL)

    def test_the_stderr_line_goes_to_the_request_that_ran_the_helper_only(self):
        logs = os.path.join(self.tmp, "har")
        self.c.call("setLogging", {"enabled": True, "directory": logs})
        said = "helper-said-this see http://me:pw-in-url@h.test/x?token=tok-in-url"
        script = self.helper(f"cat > /dev/null\nsleep 0.5\necho '{said}' >&2\nexit 4\n")
        self.c.call("setAuth", {"host": self.host, "type": "helper", "command": [script]})
        ids = [key("ran"), key("waited")]
        requests = [send_request(self.c, "fetch", {"url": self.url + "/echo", "jobId": j}) for j in ids]
        answers = [self.c.answer_for(r, timeout=20)["error"] for r in requests]
        for a in answers:
            self.assertEqual((a["code"], a["data"]["kind"]), (-32001, "auth"), a)
            self.assertNotIn("pw-in-url", json.dumps(a))
            self.assertNotIn("tok-in-url", json.dumps(a))
        told = [a["data"]["detail"] for a in answers]
        self.assertEqual(told[0], "the helper exited with status 4: helper-said-this see "
                                  "http://me:%3Credacted%3E@h.test/x?token=%3Credacted%3E")
        self.assertEqual(told[1], "the helper exited with status 4", "a request that only waited is not told")
        for j in ids:
            job = self.c.call("getJob", {"jobId": j})
            self.assertEqual(job["error"]["data"]["detail"], "the helper exited with status 4", job)
            self.assertNotIn("helper-said", json.dumps(job))
        rule = self.c.call("getAuth")["rules"][0]
        self.assertEqual(rule["lastError"], "the helper exited with status 4")
        paths = wait_for(lambda: [p for p in self.har_files(logs) if any(j in p for j in ids)] if len(
            [p for p in self.har_files(logs) if any(j in p for j in ids)]) == 2 else None, timeout=5)
        for path in paths:
            with open(path) as f:
                self.assertNotIn("helper-said", f.read(), path)
        log = wait_for(lambda: "helper-said-this" in self.daemon.stderr_text() and self.daemon.stderr_text(), timeout=5)
        self.assertNotIn("pw-in-url", log)
        self.assertNotIn("tok-in-url", log)

    def test_expiry_that_is_not_a_number_fails(self):
        for output, field in [('{"headers": {"X-K": "v"}, "expiresIn": "abc"}', "expiresIn"),
                              ('{"headers": {"X-K": "v"}, "expiresAt": "tomorrow"}', "expiresAt"),
                              ('{"headers": {"X-K": "v"}, "expiresIn": null}', "expiresIn"),
                              ('{"headers": {"X-K": "v"}, "expiresIn": [60]}', "expiresIn")]:
            self.set_helper(self.host, output)
            e = self.fetch_error({"url": self.url + "/echo"})
            self.assertEqual((e.code, e.data["kind"]), (-32001, "auth"), output)
            self.assertEqual(e.data["detail"], f"the helper's output has an \"{field}\" that is not a number of seconds",
                             output)
        self.set_helper(self.host, '{"headers": {"X-K": "v"}, "expiresIn": 60}')
        _, echo = self.echo({"url": self.url + "/echo"})
        self.assertEqual(header_values(echo, "X-K"), ["v"])
