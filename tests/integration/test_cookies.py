"""Cookie jars: shared by every client (and every process), RFC 6265 behaviour from libcurl's
cookie engine, named jars, getCookies/setCookies/clearCookies, and --cookie-file persistence
in the Netscape format curl reads."""
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from urllib.parse import quote

from harness import FETCHCTL, HERE, Daemon, DaemonTestCase, RPCError, header_values, servers, wait_for



def raw(set_cookie):
    """Query for /set-cookie that makes the server send this exact Set-Cookie value."""
    return "raw=" + quote(set_cookie, safe="")


class CookieCase(DaemonTestCase):
    def url(self, host, path):
        return f"http://{host}:{self.srv.test_port}{path}"

    def set_cookie(self, host, set_cookie, **extra):
        r = self.fetch(dict({"url": self.url(host, "/set-cookie?" + raw(set_cookie))}, **extra))
        self.assertEqual(r["status"], 200, r)
        return r

    def sent(self, host, path="/cookies", client=None, **extra):
        """The Cookie header a fetch to host+path carries, as a dict name -> value."""
        if path.startswith("/echo"):
            r = self.fetch(dict({"url": self.url(host, path)}, **extra), client=client)
            values = header_values(json.loads(r["body"]), "Cookie")
            header = values[0] if values else None
        else:
            r = self.fetch(dict({"url": self.url(host, path)}, **extra), client=client)
            self.assertEqual(r["status"], 200, r)
            header = json.loads(r["body"])["cookie"]
        if not header:
            return {}
        return dict(part.split("=", 1) for part in header.split("; "))

    def jar(self, **params):
        return self.c.call("getCookies", params)["cookies"]

    def names(self, **params):
        return sorted(c["name"] for c in self.jar(**params))

    def tearDown(self):
        for jar in ("default", "j1", "j2"):
            self.c.call("clearCookies", {"cookieJar": jar})
        super().tearDown()


class TestSharing(CookieCase):
    def test_cookie_from_one_client_is_sent_by_another_process(self):
        self.set_cookie("127.0.0.1", "shared=from-a; Path=/")
        script = (
            "import json, sys\n"
            "from harness import RPCClient\n"
            "c = RPCClient(sys.argv[1])\n"
            "r = c.call('fetch', {'url': sys.argv[2]}, timeout=30)\n"
            "print(json.loads(r['body'])['cookie'])\n")
        env = dict(os.environ, PYTHONPATH=HERE)
        p = subprocess.run([sys.executable, "-c", script, self.daemon.socket_path,
                            self.url("127.0.0.1", "/cookies")],
                           capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "shared=from-a")

    def test_second_connection_sees_cookie_and_its_replacement(self):
        self.set_cookie("127.0.0.1", "v=1")
        with self.daemon.client() as other:
            self.assertEqual(self.sent("127.0.0.1", client=other), {"v": "1"})
            other.call("fetch", {"url": self.url("127.0.0.1", "/set-cookie?v=2")})
        self.assertEqual(self.sent("127.0.0.1"), {"v": "2"}, "same name, domain and path replaces")

    def test_concurrent_responses_all_land_in_the_jar(self):
        ids = []
        for i in range(40):
            rid = self.c.new_id()
            ids.append(rid)
            self.c.send_obj({"jsonrpc": "2.0", "id": rid, "method": "fetch",
                             "params": {"url": self.url("127.0.0.1", f"/set-cookie?c{i}={i}")}})
            if i % 10 == 0:
                self.c.call("getCookies", {"url": self.url("127.0.0.1", "/")})  # reads interleave
        for rid in ids:
            self.assertIn("result", self.c.answer_for(rid, timeout=30))
        self.assertEqual(len(self.jar()), 40)
        self.assertEqual(len(self.sent("127.0.0.1")), 40)

    def test_downloads_and_fetches_share_the_jar(self):
        # Downloads run on the engine's bulk thread and fetches on the other: one jar for both,
        # its share locked by libcurl for the transfers of either thread.
        d = tempfile.mkdtemp(prefix="fetchd-cookie-dl-")
        self.addCleanup(shutil.rmtree, d, True)
        self.set_cookie("127.0.0.1", "from_fetch=1; Path=/")
        path = os.path.join(d, "sent.json")
        self.c.call("download", {"url": self.url("127.0.0.1", "/cookies"), "path": path}, timeout=30)
        with open(path) as f:
            self.assertEqual(json.load(f)["cookie"], "from_fetch=1", "a download sends the jar's cookies")
        ids = []
        for i in range(30):
            rid = self.c.new_id()
            ids.append(rid)
            if i % 2:
                method, params = "download", {"url": self.url("127.0.0.1", f"/set-cookie?d{i}={i}"),
                                              "path": os.path.join(d, f"{i}.txt")}
            else:
                method, params = "fetch", {"url": self.url("127.0.0.1", f"/set-cookie?f{i}={i}")}
            self.c.send_obj({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        for rid in ids:
            self.assertIn("result", self.c.answer_for(rid, timeout=30))
        self.assertEqual(len(self.jar()), 31, "every download's and fetch's Set-Cookie is in the jar")
        self.assertEqual(len(self.sent("127.0.0.1")), 31)

    def test_cookie_set_by_a_redirect_hop_is_kept_and_sent_on_the_next_hop(self):
        # A one-off server whose 302 sets a cookie; cookies ignore ports, so the next hop
        # (the test server on another port of 127.0.0.1) must already carry it.
        target = self.url("127.0.0.1", "/cookies")

        class Hop(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(302)
                self.send_header("Set-Cookie", "hop=1; Path=/")
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hop)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            r = self.fetch({"url": f"http://127.0.0.1:{server.server_address[1]}/start"})
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(r["redirects"], 1)
        self.assertEqual(json.loads(r["body"])["cookie"], "hop=1")
        self.assertEqual(self.names(), ["hop"])

    def test_cookie_set_then_sent_across_a_redirect(self):
        self.set_cookie("127.0.0.1", "r=1")
        r = self.fetch({"url": self.url("127.0.0.1", "/redirect-to?url=/cookies")})
        self.assertEqual(r["redirects"], 1)
        self.assertEqual(json.loads(r["body"])["cookie"], "r=1")
        # The Set-Cookie of a hop that redirects is kept too (here the last hop sets it).
        r = self.fetch({"url": self.url("127.0.0.1", "/redirect-to?url=" + quote("/set-cookie?hop=1", safe=""))})
        self.assertEqual(r["redirects"], 1)
        self.assertIn("hop", self.names(url=self.url("127.0.0.1", "/")))


class TestDomainPathSecureExpiry(CookieCase):
    def test_host_only_cookie_stays_on_its_host(self):
        self.set_cookie("127.0.0.1", "ho=1")
        self.assertEqual(self.sent("127.0.0.1"), {"ho": "1"})
        self.assertEqual(self.sent("localhost"), {})
        self.set_cookie("x.site.localhost", "xo=1")
        self.assertEqual(self.sent("x.site.localhost"), {"xo": "1"})
        self.assertEqual(self.sent("y.site.localhost"), {}, "host-only leaked to a sibling")
        self.assertEqual(self.sent("z.x.site.localhost"), {}, "host-only leaked to a subdomain")
        [c] = self.jar(domain="x.site.localhost")
        self.assertTrue(c["hostOnly"])
        self.assertEqual(c["domain"], "x.site.localhost")

    def test_domain_cookie_goes_to_subdomains_only(self):
        self.set_cookie("x.site.localhost", "dom=1; Domain=site.localhost")
        self.assertEqual(self.sent("y.site.localhost"), {"dom": "1"})
        self.assertEqual(self.sent("site.localhost"), {"dom": "1"})
        self.assertEqual(self.sent("a.b.site.localhost"), {"dom": "1"})
        self.assertEqual(self.sent("othersite.localhost"), {})
        self.assertEqual(self.sent("127.0.0.1"), {})
        [c] = self.jar(domain="site.localhost")
        self.assertFalse(c["hostOnly"])
        self.assertEqual(c["domain"], "site.localhost")

    def test_public_suffix_and_foreign_domains_refused(self):
        self.set_cookie("x.site.localhost", "psl=1; Domain=localhost")
        self.set_cookie("x.site.localhost", "foreign=1; Domain=example.com")
        self.assertEqual(self.jar(), [])
        self.assertEqual(self.sent("y.localhost"), {})

    def test_path_matches_on_slash_boundaries(self):
        self.set_cookie("127.0.0.1", "p=1; Path=/echo/docs")
        self.assertEqual(self.sent("127.0.0.1", "/echo/docs"), {"p": "1"})
        self.assertEqual(self.sent("127.0.0.1", "/echo/docs/deeper/page"), {"p": "1"})
        self.assertEqual(self.sent("127.0.0.1", "/echo/docsearch"), {})
        self.assertEqual(self.sent("127.0.0.1", "/echo"), {})
        self.assertEqual(self.names(url=self.url("127.0.0.1", "/echo/docs/x?q=1")), ["p"])
        self.assertEqual(self.names(url=self.url("127.0.0.1", "/echo/docsearch")), [])

    def test_secure_cookie_refused_from_plain_http_and_sent_only_to_https(self):
        # "vm" is a loopback name in /etc/hosts that is not "localhost": not a secure context.
        self.set_cookie("vm", "s=1; Secure")
        self.assertEqual(self.jar(), [], "a Secure cookie from plain http must be refused")
        stored = self.c.call("setCookies", {"cookies": [
            {"name": "s", "value": "1", "domain": "vm", "secure": True, "hostOnly": True},
            {"name": "plain", "value": "1", "domain": "vm", "hostOnly": True}]})
        self.assertEqual(stored, {"stored": 2})
        self.assertEqual(self.sent("vm"), {"plain": "1"})
        self.assertEqual(self.names(url=f"http://vm:{self.srv.test_port}/"), ["plain"])
        self.assertEqual(self.names(url="https://vm/"), ["plain", "s"])
        [s] = [c for c in self.jar() if c["name"] == "s"]
        self.assertTrue(s["secure"])

    def test_get_cookies_with_url_lists_what_is_sent_in_that_order(self):
        for c in ("bb=1", "a=1; Path=/cookies", "ccc=1", "z=1; Path=/elsewhere"):
            self.set_cookie("127.0.0.1", c)
        r = self.fetch({"url": self.url("127.0.0.1", "/cookies")})
        header = json.loads(r["body"])["cookie"]
        self.assertEqual(header, "a=1; ccc=1; bb=1")
        listed = self.jar(url=self.url("127.0.0.1", "/cookies"))
        self.assertEqual("; ".join(f"{c['name']}={c['value']}" for c in listed), header)

    def test_httponly_kept(self):
        self.set_cookie("127.0.0.1", "h=1; HttpOnly")
        [c] = self.jar()
        self.assertTrue(c["httpOnly"])
        self.assertEqual(self.sent("127.0.0.1"), {"h": "1"})

    def test_expiry_max_age_and_expires(self):
        self.set_cookie("127.0.0.1", "short=1; Max-Age=2")
        self.set_cookie("127.0.0.1", "long=1; Max-Age=3600")
        self.set_cookie("127.0.0.1", "future=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT")
        self.set_cookie("127.0.0.1", "past=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT")
        self.set_cookie("127.0.0.1", "session=1")
        jar = {c["name"]: c for c in self.jar()}
        self.assertEqual(sorted(jar), ["future", "long", "session", "short"])
        self.assertIsNone(jar["session"]["expires"])
        self.assertEqual(jar["future"]["expires"], 2139722880)
        self.assertAlmostEqual(jar["long"]["expires"], time.time() + 3600, delta=30)
        wait_for(lambda: "short" not in self.names(), timeout=10, interval=0.2,
                 message="Max-Age=2 cookie still there")
        self.assertEqual(sorted(self.sent("127.0.0.1")), ["future", "long", "session"])
        self.set_cookie("127.0.0.1", "long=gone; Max-Age=0")
        self.assertEqual(sorted(self.sent("127.0.0.1")), ["future", "session"])


class TestSecureOverTLS(CookieCase):
    @classmethod
    def setUpClass(cls):
        cls.DAEMON_ARGS = ("--ca-file", servers().ca_file)
        super().setUpClass()

    def test_secure_cookie_over_tls(self):
        tls = self.srv.nginx_tls_url  # https://127.0.0.1:port
        self.c.call("setCookies", {"cookies": [
            {"name": "tls", "value": "1", "url": tls + "/", "secure": True}]})
        self.assertEqual(self.names(url=tls + "/small.txt"), ["tls"])
        r = self.fetch({"url": tls + "/small.txt"})
        self.assertEqual(r["status"], 200)


class TestJars(CookieCase):
    def test_named_jars_are_isolated(self):
        self.set_cookie("127.0.0.1", "in1=1", cookieJar="j1")
        self.set_cookie("127.0.0.1", "in2=1", cookieJar="j2")
        self.assertEqual(self.sent("127.0.0.1", cookieJar="j1"), {"in1": "1"})
        self.assertEqual(self.sent("127.0.0.1", cookieJar="j2"), {"in2": "1"})
        self.assertEqual(self.sent("127.0.0.1"), {})
        self.assertEqual(self.names(cookieJar="j1"), ["in1"])
        self.assertEqual(self.names(), [])
        with self.daemon.client() as other:
            r = other.call("fetch", {"url": self.url("127.0.0.1", "/cookies"), "cookieJar": "j1"})
            self.assertEqual(json.loads(r["body"])["cookie"], "in1=1", "a named jar is shared by every client naming it")

    def test_cookie_jar_false_sends_and_stores_nothing(self):
        self.set_cookie("127.0.0.1", "d=1")
        self.assertEqual(self.sent("127.0.0.1", cookieJar=False), {})
        self.set_cookie("127.0.0.1", "none=1", cookieJar=False)
        self.assertEqual(self.names(), ["d"])
        self.assertEqual(self.sent("127.0.0.1"), {"d": "1"})


class TestMethods(CookieCase):
    def test_set_get_clear(self):
        base = self.url("127.0.0.1", "")
        r = self.c.call("setCookies", {"cookies": [
            {"name": "a", "value": "1", "url": base + "/echo/x"},
            {"name": "b", "value": "2", "domain": "site.localhost", "path": "/", "expires": 2000000000,
             "httpOnly": True},
            {"name": "c", "value": "3", "domain": "other.localhost", "hostOnly": True},
        ]})
        self.assertEqual(r, {"stored": 3})
        jar = {c["name"]: c for c in self.jar()}
        self.assertEqual(jar["a"], {"name": "a", "value": "1", "domain": "127.0.0.1", "path": "/echo",
                                    "expires": None, "secure": False, "httpOnly": False, "hostOnly": True})
        self.assertEqual(jar["b"], {"name": "b", "value": "2", "domain": "site.localhost", "path": "/",
                                    "expires": 2000000000, "secure": False, "httpOnly": True, "hostOnly": False})
        self.assertEqual(self.sent("127.0.0.1", "/echo/page"), {"a": "1"})
        self.assertEqual(self.sent("w.site.localhost"), {"b": "2"})
        self.assertEqual(self.names(url=base + "/echo/y"), ["a"])
        self.assertEqual(self.names(domain="localhost"), ["b", "c"])
        self.assertEqual(self.c.call("clearCookies", {"domain": "site.localhost"}), {"removed": 1})
        self.assertEqual(self.names(), ["a", "c"])
        self.assertEqual(self.c.call("clearCookies", {}), {"removed": 2})
        self.assertEqual(self.jar(), [])

    def test_bad_params(self):
        cases = [
            ("setCookies", {}, "cookies"),
            ("setCookies", {"cookies": [{"name": "a", "value": "1"}]}, "cookies[0].url"),
            ("setCookies", {"cookies": [{"name": "a", "value": "1", "domain": "h", "typo": 1}]}, "cookies[0].typo"),
            ("setCookies", {"cookies": [{"name": "a;b", "value": "1", "domain": "h"}]}, "cookies[0].name"),
            ("setCookies", {"cookies": [], "cookieJar": 5}, "cookieJar"),
            ("getCookies", {"url": "ftp://x/"}, "url"),
            ("getCookies", {"url": "not a url"}, "url"),
            ("getCookies", {"domian": "x"}, "domian"),
            ("clearCookies", {"cookieJar": ""}, "cookieJar"),
        ]
        for method, params, field in cases:
            with self.subTest(method=method, params=params):
                with self.assertRaises(RPCError) as cm:
                    self.c.call(method, params)
                self.assertEqual(cm.exception.code, -32602)
                self.assertEqual(cm.exception.data["field"], field)


@unittest.skipUnless(os.access(FETCHCTL, os.X_OK), f"{FETCHCTL} is missing")
class TestFetchctlCookies(CookieCase):
    def fetchctl(self, *args):
        p = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, *args],
                           capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_cookies_command_and_cookie_jar_option(self):
        self.fetchctl("fetch", self.url("127.0.0.1", "/set-cookie?" + raw("ctl=1; Path=/echo")),
                      "--jar", "j1")
        echo = json.loads(self.fetchctl("fetch", self.url("127.0.0.1", "/echo/x"), "--jar", "j1"))
        self.assertEqual(header_values(echo, "Cookie"), ["ctl=1"])
        echo = json.loads(self.fetchctl("fetch", self.url("127.0.0.1", "/echo/x")))
        self.assertEqual(header_values(echo, "Cookie"), [], "the default jar has no such cookie")
        self.assertEqual(self.names(cookieJar="j1"), ["ctl"])
        self.assertEqual(self.names(), [])
        out = json.loads(self.fetchctl("cookies", self.url("127.0.0.1", "/echo/x"), "--jar", "j1"))
        self.assertEqual([c["name"] for c in out["cookies"]], ["ctl"])
        out = json.loads(self.fetchctl("cookies", self.url("127.0.0.1", "/other"), "--jar", "j1"))
        self.assertEqual(out["cookies"], [])
        self.set_cookie("127.0.0.1", "dflt=1")
        out = json.loads(self.fetchctl("cookies"))
        self.assertEqual([c["name"] for c in out["cookies"]], ["dflt"])


class TestCookieFile(unittest.TestCase):
    def setUp(self):
        self.srv = servers()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-cookiefile-")
        self.path = os.path.join(self.tmp, "cookies.txt")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def url(self, path):
        return f"http://127.0.0.1:{self.srv.test_port}{path}"

    def file_text(self):
        try:
            with open(self.path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def test_survives_restart_and_curl_reads_the_file(self):
        with Daemon("--cookie-file", self.path) as d, d.client() as c:
            c.call("fetch", {"url": self.url("/set-cookie?" + raw("keep=yes; Max-Age=3600"))})
            c.call("fetch", {"url": self.url("/set-cookie?" + raw("sess=1"))})
            # Written shortly after the change, while the daemon runs.
            wait_for(lambda: "\tkeep\tyes" in self.file_text(), timeout=10, interval=0.05,
                     message="cookie file not written after a change")
            self.assertEqual(d.stop(), 0)
        text = self.file_text()
        self.assertTrue(text.startswith("# Netscape HTTP Cookie File"), text)
        self.assertNotIn("sess", text, "session cookies are not written")
        self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o600)
        self.assertEqual([n for n in os.listdir(self.tmp)], ["cookies.txt"], "temporary file left behind")

        with Daemon("--cookie-file", self.path) as d, d.client() as c:
            r = c.call("fetch", {"url": self.url("/cookies")})
            self.assertEqual(json.loads(r["body"])["cookie"], "keep=yes")

        p = subprocess.run(["curl", "-s", "-b", self.path, self.url("/cookies")],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["cookie"], "keep=yes")

    def test_written_at_shutdown_and_cleared_cookies_stay_cleared(self):
        with Daemon("--cookie-file", self.path) as d, d.client() as c:
            c.call("setCookies", {"cookies": [
                {"name": "x", "value": "1", "domain": "127.0.0.1", "expires": 2000000000, "hostOnly": True},
                {"name": "y", "value": "2", "domain": "site.localhost", "expires": 2000000000, "secure": True,
                 "httpOnly": True}]})
            self.assertEqual(d.stop(), 0)  # at once: before the debounced write
        text = self.file_text()
        self.assertIn("127.0.0.1\tFALSE\t/\tFALSE\t2000000000\tx\t1\n", text)
        self.assertIn("#HttpOnly_.site.localhost\tTRUE\t/\tTRUE\t2000000000\ty\t2\n", text)
        with Daemon("--cookie-file", self.path) as d, d.client() as c:
            self.assertEqual(c.call("clearCookies", {"domain": "127.0.0.1"}), {"removed": 1})
            self.assertEqual(d.stop(), 0)
        self.assertNotIn("\tx\t", self.file_text())
        self.assertIn("\ty\t2", self.file_text())

    def test_malformed_lines_are_reported_and_skipped(self):
        with open(self.path, "w") as f:
            f.write("# Netscape HTTP Cookie File\n"
                    "this is not a cookie line\n"
                    "127.0.0.1\tFALSE\t/\tFALSE\t2000000000\tgood\t1\n"
                    "127.0.0.1\tMAYBE\t/\tFALSE\t2000000000\tbad\t2\n")
        with Daemon("--cookie-file", self.path) as d, d.client() as c:
            r = c.call("fetch", {"url": self.url("/cookies")})
            self.assertEqual(json.loads(r["body"])["cookie"], "good=1")
            err = d.stderr_text()
            self.assertIn("line 2", err)
            self.assertIn("line 4", err)

    def test_missing_directory_is_not_fatal(self):
        path = os.path.join(self.tmp, "no", "such", "cookies.txt")
        with Daemon("--cookie-file", path) as d, d.client() as c:
            c.call("setCookies", {"cookies": [{"name": "x", "value": "1", "domain": "h.org", "expires": 2000000000}]})
            self.assertEqual(c.call("ping"), "pong")
            self.assertEqual(d.stop(), 0)
            self.assertIn("cookie file", d.stderr_text())


if __name__ == "__main__":
    unittest.main()
