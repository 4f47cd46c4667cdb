"""fetch against real servers on loopback: nginx for static files, the scriptable test server
for echoing requests, redirects, slow answers, resets, encodings."""
import base64
import json
import os
import subprocess
import time
import unittest
from urllib.parse import parse_qsl, quote

from harness import (BIG_SIZE, INDEX_HTML, SMALL_TXT, UTF8_TXT, DaemonTestCase, RPCError,
                     big_bin, closed_port, header_values, servers, sha256, testserver, wait_for)

RESULT_KEYS = {"jobId", "status", "url", "headers", "bytes", "attempts", "redirects", "elapsedMs"}
BODY_KEYS = {"body", "bodyBase64", "json"}


class FetchCase(DaemonTestCase):
    def assertResultShape(self, r, body_key):
        missing = RESULT_KEYS - set(r)
        self.assertFalse(missing, f"result lacks {missing}: {json.dumps(r)[:500]}")
        present = BODY_KEYS & set(r)
        if body_key is None:
            self.assertEqual(present, set(), f"no body expected: {list(r)}")
        else:
            self.assertEqual(present, {body_key}, f"expected only {body_key}: {list(r)}")
        self.assertIsInstance(r["jobId"], str)
        self.assertTrue(r["jobId"])
        self.assertIsInstance(r["status"], int)
        self.assertIsInstance(r["headers"], dict)
        for k, v in r["headers"].items():
            self.assertEqual(k, k.lower(), f"header name not lowercase: {k}")
            self.assertIsInstance(v, str)
        self.assertIsInstance(r["bytes"], int)
        # Its value is checked against a server-side delay (test_slow_but_within_timeout) and
        # the wall time the test saw (test_index_html).
        self.assertIsInstance(r["elapsedMs"], (int, float))
        self.assertIsInstance(r["redirects"], int)
        self.assertEqual(r["attempts"], 1, r)

    def assertTransportError(self, e, kind, job_id=None):
        self.assertEqual(e.code, -32001, f"expected -32001, got {e}")
        self.assertIsInstance(e.data, dict, e)
        self.assertEqual(e.data.get("kind"), kind, f"wrong kind: {e}")
        self.assertIsInstance(e.data.get("detail"), str, e)
        self.assertEqual(e.data.get("attempts"), 1, e)
        self.assertIsInstance(e.data.get("jobId"), str, e)
        if job_id:
            self.assertEqual(e.data["jobId"], job_id)


class TestNginx(FetchCase):
    def test_index_html(self):
        url = self.srv.nginx_url + "/index.html"
        t0 = time.monotonic()
        r = self.fetch({"url": url})
        wall_ms = (time.monotonic() - t0) * 1000
        self.assertResultShape(r, "body")
        self.assertEqual(r["status"], 200)
        self.assertEqual(r["body"], INDEX_HTML)
        self.assertEqual(r["url"], url)
        self.assertEqual(r["redirects"], 0)
        self.assertEqual(r["bytes"], len(INDEX_HTML.encode()))
        self.assertEqual(r["headers"].get("content-length"), str(len(INDEX_HTML.encode())))
        self.assertTrue(r["headers"].get("content-type", "").startswith("text/html"), r["headers"])
        self.assertIn("server", r["headers"])
        self.assertLessEqual(r["elapsedMs"], wall_ms + 50)

    def test_small_and_utf8(self):
        r = self.fetch({"url": self.srv.nginx_url + "/small.txt"})
        self.assertEqual((r["status"], r["body"], r["bytes"]), (200, SMALL_TXT, 100))
        r = self.fetch({"url": self.srv.nginx_url + "/utf8.txt"})
        self.assertResultShape(r, "body")
        self.assertEqual(r["body"], UTF8_TXT)
        self.assertEqual(r["bytes"], len(UTF8_TXT.encode()))

    def test_big_binary_auto_is_base64(self):
        r = self.fetch({"url": self.srv.nginx_url + "/big.bin"}, timeout=60)
        self.assertResultShape(r, "bodyBase64")
        data = base64.b64decode(r["bodyBase64"], validate=True)
        self.assertEqual(len(data), BIG_SIZE)
        self.assertEqual(sha256(data), sha256(big_bin()))
        self.assertEqual(r["bytes"], BIG_SIZE)

    def test_not_found_is_a_result(self):
        r = self.fetch({"url": self.srv.nginx_url + "/missing.txt"})
        self.assertResultShape(r, "body")
        self.assertEqual(r["status"], 404)

    def test_head(self):
        r = self.fetch({"url": self.srv.nginx_url + "/small.txt", "method": "HEAD"})
        self.assertEqual(r["status"], 200)
        self.assertEqual(r["bytes"], 0)
        self.assertEqual(r.get("body", ""), "")
        self.assertEqual(r["headers"].get("content-length"), "100")

    def test_connection_reused_many_fetches(self):
        for _ in range(20):
            r = self.fetch({"url": self.srv.nginx_url + "/small.txt"})
            self.assertEqual(r["body"], SMALL_TXT)

    def test_https_self_signed_is_tls_error(self):
        e = self.fetch_error({"url": self.srv.nginx_tls_url + "/small.txt", "retry": False})
        self.assertTransportError(e, "tls")
        self.assertAlive()


class TestCAFile(FetchCase):
    @classmethod
    def setUpClass(cls):
        cls.DAEMON_ARGS = ("--ca-file", servers().ca_file)
        super().setUpClass()

    def test_https_with_ca_file(self):
        url = self.srv.nginx_tls_url + "/small.txt"
        r = self.fetch({"url": url})
        self.assertResultShape(r, "body")
        self.assertEqual((r["status"], r["body"], r["url"]), (200, SMALL_TXT, url))

    def test_http2_over_tls(self):
        r = self.fetch({"url": self.srv.nginx_tls_url + "/proto"})
        self.assertEqual((r["status"], r["body"]), (200, "HTTP/2.0"), "HTTP/2 was not negotiated over TLS")

    def test_http11_in_clear(self):
        r = self.fetch({"url": self.srv.nginx_url + "/proto"})
        self.assertEqual((r["status"], r["body"]), (200, "HTTP/1.1"))

    def test_https_big(self):
        r = self.fetch({"url": self.srv.nginx_tls_url + "/big.bin"}, timeout=60)
        self.assertEqual(sha256(base64.b64decode(r["bodyBase64"])), sha256(big_bin()))


class TestEcho(FetchCase):
    def test_default_get(self):
        r, e = self.echo({"url": self.srv.test_url + "/echo"})
        self.assertResultShape(r, "body")
        self.assertEqual(e["method"], "GET")
        self.assertEqual(e["path"], "/echo")
        self.assertEqual(e["bodyLength"], 0)
        self.assertEqual(header_values(e, "Host"), [self.srv.test_url[len("http://"):]])

    def test_connection_reused(self):
        ports = set()
        for _ in range(5):
            r, e = self.echo({"url": self.srv.test_url + "/echo"})
            ports.add(e["clientPort"])
        self.assertEqual(len(ports), 1, f"sequential fetches used {len(ports)} connections: not reused")

    def test_methods(self):
        for m in ("PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND"):
            with self.subTest(method=m):
                r, e = self.echo({"url": self.srv.test_url + "/echo", "method": m})
                self.assertEqual(e["method"], m)

    def test_headers_sent(self):
        r, e = self.echo({"url": self.srv.test_url + "/echo",
                          "headers": {"X-Custom": "v1", "X-Spaces": "a  b", "Accept": "text/x-test"}})
        self.assertEqual(header_values(e, "X-Custom"), ["v1"])
        self.assertEqual(header_values(e, "X-Spaces"), ["a  b"])
        self.assertEqual(header_values(e, "Accept"), ["text/x-test"], "Accept given by the caller must replace the default")

    def test_query_percent_encoding(self):
        q = {"b": "x y", "c": 3, "d": True, "e": ["1", "2"], "f": "ä&=/?#+%"}
        r, e = self.echo({"url": self.srv.test_url + "/echo?a=1", "query": q})
        raw = e["query"]
        self.assertTrue(raw.startswith("a=1&"), f"the URL's own query must come first: {raw}")
        self.assertTrue(all(32 < ord(ch) < 127 for ch in raw), f"query not percent-encoded: {raw!r}")
        for bad in (" ", "#"):
            self.assertNotIn(bad, raw)
        pairs = parse_qsl(raw, keep_blank_values=True)
        got = {}
        for k, v in pairs:
            got.setdefault(k, []).append(v)
        # assumption: numbers as their JSON text, booleans as true/false, arrays repeat the key
        self.assertEqual(got, {"a": ["1"], "b": ["x y"], "c": ["3"], "d": ["true"], "e": ["1", "2"],
                               "f": ["ä&=/?#+%"]})
        # "+" in a value must be encoded, or a server would read it as a space
        self.assertIn("%2B", raw.upper())
        self.assertEqual(r["url"].split("?", 1)[1], raw, "result url must be the URL actually requested")

    def test_query_on_url_without_query(self):
        r, e = self.echo({"url": self.srv.test_url + "/echo", "query": {"k": "v"}})
        self.assertEqual(e["query"], "k=v")

    def test_json_body(self):
        doc = {"a": [1, 2, {"b": None}], "u": "ü😀", "n": 1.5, "t": True}
        r, e = self.echo({"url": self.srv.test_url + "/echo", "json": doc})
        self.assertEqual(e["method"], "POST")
        self.assertEqual(len(header_values(e, "Content-Type")), 1)
        self.assertTrue(header_values(e, "Content-Type")[0].startswith("application/json"), e["headers"])
        self.assertEqual(json.loads(e["body"]), doc)
        self.assertEqual(header_values(e, "Content-Length"), [str(e["bodyLength"])])

    def test_json_body_with_own_content_type(self):
        r, e = self.echo({"url": self.srv.test_url + "/echo", "json": [1, 2],
                          "headers": {"content-type": "application/vnd.test+json"}})
        self.assertEqual(header_values(e, "Content-Type"), ["application/vnd.test+json"])
        self.assertEqual(json.loads(e["body"]), [1, 2])

    def test_json_scalar_bodies(self):
        for doc in (0, "text", False):  # (null is left out: "absent" is a fair reading)
            with self.subTest(json=doc):
                r, e = self.echo({"url": self.srv.test_url + "/echo", "json": doc})
                self.assertEqual(json.loads(e["body"]), doc)
                self.assertEqual(e["method"], "POST")

    def test_form_body(self):
        form = {"a": "1", "b": "x y", "c": ["p", "q"], "d": "ä&=+", "n": 7, "t": False}
        r, e = self.echo({"url": self.srv.test_url + "/echo", "form": form})
        self.assertEqual(e["method"], "POST")
        ct = header_values(e, "Content-Type")
        self.assertEqual(len(ct), 1)
        self.assertTrue(ct[0].startswith("application/x-www-form-urlencoded"), ct)
        self.assertTrue(all(32 < ord(ch) < 127 for ch in e["body"]), e["body"])
        got = {}
        for k, v in parse_qsl(e["body"], keep_blank_values=True, strict_parsing=True):
            got.setdefault(k, []).append(v)
        self.assertEqual(got, {"a": ["1"], "b": ["x y"], "c": ["p", "q"], "d": ["ä&=+"], "n": ["7"],
                               "t": ["false"]})

    def test_text_body(self):
        text = "hello ü 😀\nline2"
        r, e = self.echo({"url": self.srv.test_url + "/echo", "body": text})
        self.assertEqual(e["method"], "POST")
        self.assertEqual(e["body"], text)
        self.assertEqual(e["bodyLength"], len(text.encode()))

    def test_large_request_line_is_parsed_off_the_engine_thread_and_others_go_on(self):
        # A 600 KiB line (over the 256 KiB the engine thread parses itself) goes to a task;
        # small requests sent after it on the same connection are answered meanwhile.
        text = "x" * (600 << 10)
        c = self.daemon.client()
        big = c.new_id()
        c.send_obj({"jsonrpc": "2.0", "id": big, "method": "fetch",
                    "params": {"url": self.srv.test_url + "/echo", "body": text}})
        for _ in range(5):
            self.assertEqual(c.call("ping"), "pong")
        answer = c.answer_for(big, timeout=30)
        e = json.loads(answer["result"]["body"])
        self.assertEqual((e["method"], e["bodyLength"]), ("POST", len(text)))
        self.assertEqual(e["body"], text)

    def test_empty_text_body_is_post(self):
        r, e = self.echo({"url": self.srv.test_url + "/echo", "body": ""})
        self.assertEqual(e["method"], "POST")
        self.assertEqual(e["bodyLength"], 0)

    def test_body_base64(self):
        data = bytes(range(256)) * 4
        r, e = self.echo({"url": self.srv.test_url + "/echo", "bodyBase64": base64.b64encode(data).decode()})
        self.assertEqual(e["method"], "POST")
        self.assertEqual(base64.b64decode(e["bodyBase64"]), data)

    def test_body_file(self):
        data = testserver.det_bytes(300_000, seed=7)
        path = os.path.join(self.daemon.tmpdir, "upload.bin")
        with open(path, "wb") as f:
            f.write(data)
        r, e = self.echo({"url": self.srv.test_url + "/echo", "bodyFile": path, "method": "PUT"}, timeout=60)
        self.assertEqual(e["method"], "PUT")
        self.assertEqual(e["bodyLength"], len(data))
        self.assertEqual(sha256(base64.b64decode(e["bodyBase64"])), sha256(data))

    def test_explicit_method_with_body(self):
        r, e = self.echo({"url": self.srv.test_url + "/echo", "body": "x", "method": "PUT"})
        self.assertEqual((e["method"], e["body"]), ("PUT", "x"))

    def test_large_text_body(self):
        text = "0123456789abcdef" * 65536  # 1 MiB
        r, e = self.echo({"url": self.srv.test_url + "/echo", "body": text}, timeout=60)
        self.assertEqual(e["bodyLength"], len(text))
        self.assertEqual(e["body"], text)


class TestRedirects(FetchCase):
    def test_followed(self):
        r = self.fetch({"url": self.srv.test_url + "/redirect/3"})
        self.assertResultShape(r, "body")
        self.assertEqual((r["status"], r["body"], r["redirects"]), (200, "done", 3))
        self.assertEqual(r["url"], self.srv.test_url + "/redirect/0")

    def test_max_redirects_zero_returns_the_redirect(self):
        r = self.fetch({"url": self.srv.test_url + "/redirect/1", "maxRedirects": 0})
        self.assertEqual(r["status"], 302)
        self.assertEqual(r["headers"].get("location"), "/redirect/0")
        self.assertEqual(r["url"], self.srv.test_url + "/redirect/1")
        self.assertEqual(r["redirects"], 0)

    def test_exactly_max_redirects_ok(self):
        r = self.fetch({"url": self.srv.test_url + "/redirect/2", "maxRedirects": 2})
        self.assertEqual((r["status"], r["redirects"]), (200, 2))

    def test_too_many_redirects(self):
        e = self.fetch_error({"url": self.srv.test_url + "/redirect/3", "maxRedirects": 2, "retry": False})
        self.assertTransportError(e, "tooManyRedirects")
        self.assertAlive()

    def test_redirect_loop(self):
        e = self.fetch_error({"url": self.srv.test_url + "/redirect-loop", "retry": False})
        self.assertTransportError(e, "tooManyRedirects")

    def test_redirect_to_other_server(self):
        target = self.srv.nginx_url + "/index.html"
        r = self.fetch({"url": self.srv.test_url + "/redirect-to?url=" + quote(target, safe="")})
        self.assertEqual((r["status"], r["body"], r["url"], r["redirects"]), (200, INDEX_HTML, target, 1))

    def test_307_keeps_method_and_body(self):
        r = self.fetch({"url": self.srv.test_url + "/redirect-to?status=307&url=%2Fecho%2F307",
                        "body": "keep me"})
        e = json.loads(r["body"])
        self.assertEqual((e["method"], e["path"], e["body"]), ("POST", "/echo/307", "keep me"))

    def test_303_becomes_get(self):
        r = self.fetch({"url": self.srv.test_url + "/redirect-to?status=303&url=%2Fecho%2F303",
                        "body": "drop me"})
        e = json.loads(r["body"])
        self.assertEqual((e["method"], e["path"], e["bodyLength"]), ("GET", "/echo/303", 0))


class TestFailures(FetchCase):
    def test_timeout(self):
        t0 = time.monotonic()
        e = self.fetch_error({"url": self.srv.test_url + "/slow-headers?ms=5000", "timeout": 0.3,
                              "retry": False})
        took = time.monotonic() - t0
        self.assertTransportError(e, "timeout")
        self.assertLess(took, 3.0, "timeout 0.3 s took far too long")
        self.assertGreaterEqual(took, 0.25, "timed out before the timeout")
        self.assertAlive()

    def test_timeout_covers_whole_transfer(self):
        e = self.fetch_error({"url": self.srv.test_url + "/slow-body?chunks=30&ms=100", "timeout": 0.5,
                              "retry": False})
        self.assertTransportError(e, "timeout")

    def test_slow_but_within_timeout(self):
        t0 = time.monotonic()
        r = self.fetch({"url": self.srv.test_url + "/slow-headers?ms=300", "timeout": 5})
        wall_ms = (time.monotonic() - t0) * 1000
        self.assertEqual((r["status"], r["body"]), (200, "slow"))
        # elapsedMs covers the server's 300 ms wait, and no more than the call took
        self.assertGreaterEqual(r["elapsedMs"], 299, r)
        self.assertLessEqual(r["elapsedMs"], wall_ms, r)

    def test_slow_body_within_timeout(self):
        r = self.fetch({"url": self.srv.test_url + "/slow-body?chunks=5&ms=50", "timeout": 5})
        self.assertEqual((r["status"], r["body"], r["bytes"]), (200, "xxxxx", 5))

    def test_reset(self):
        e = self.fetch_error({"url": self.srv.test_url + "/reset", "retry": False})
        self.assertTransportError(e, "reset")
        self.assertAlive()

    def test_reset_mid_body(self):
        e = self.fetch_error({"url": self.srv.test_url + "/reset-mid-body", "retry": False})
        self.assertTransportError(e, "reset")

    def test_truncated(self):
        # assumption: a body shorter than its Content-Length is a protocol failure
        e = self.fetch_error({"url": self.srv.test_url + "/truncated", "retry": False})
        self.assertTransportError(e, "protocol")

    def test_garbage_reply(self):
        # assumption: a reply that is not HTTP is a protocol failure
        e = self.fetch_error({"url": self.srv.test_url + "/garbage", "retry": False})
        self.assertTransportError(e, "protocol")

    def test_connect_refused(self):
        e = self.fetch_error({"url": f"http://127.0.0.1:{closed_port()}/", "retry": False})
        self.assertTransportError(e, "connect")
        self.assertAlive()

    def test_dns(self):
        e = self.fetch_error({"url": "http://no-such-host.invalid/", "retry": False})
        self.assertTransportError(e, "dns")
        self.assertAlive()

    def test_job_id_in_error(self):
        e = self.fetch_error({"url": f"http://127.0.0.1:{closed_port()}/", "retry": False, "jobId": "err-job"})
        self.assertTransportError(e, "connect", job_id="err-job")

    def test_http_errors_are_results(self):
        for code in (400, 404, 500, 503):
            with self.subTest(code=code):
                r = self.fetch({"url": f"{self.srv.test_url}/status/{code}", "retry": False})
                self.assertResultShape(r, "body")
                self.assertEqual((r["status"], r["body"]), (code, f"status {code}"))

    def test_204_no_body(self):
        r = self.fetch({"url": f"{self.srv.test_url}/status/204"})
        self.assertEqual((r["status"], r["bytes"]), (204, 0))
        self.assertEqual(r.get("body", ""), "")


class TestResponseBody(FetchCase):
    def test_auto_text(self):
        r = self.fetch({"url": self.srv.test_url + "/json"})
        self.assertResultShape(r, "body")
        self.assertEqual(json.loads(r["body"]), testserver.JSON_DOC)

    def test_auto_binary(self):
        r = self.fetch({"url": self.srv.test_url + "/binary"})
        self.assertResultShape(r, "bodyBase64")
        self.assertEqual(base64.b64decode(r["bodyBase64"]), testserver.BINARY)
        self.assertEqual(r["bytes"], len(testserver.BINARY))

    def test_text(self):
        r = self.fetch({"url": self.srv.test_url + "/json", "responseBody": "text"})
        self.assertResultShape(r, "body")
        self.assertEqual(json.loads(r["body"]), testserver.JSON_DOC)

    def test_base64(self):
        r = self.fetch({"url": self.srv.test_url + "/json", "responseBody": "base64"})
        self.assertResultShape(r, "bodyBase64")
        self.assertEqual(json.loads(base64.b64decode(r["bodyBase64"])), testserver.JSON_DOC)

    def test_json(self):
        r = self.fetch({"url": self.srv.test_url + "/json", "responseBody": "json"})
        self.assertResultShape(r, "json")
        self.assertEqual(r["json"], testserver.JSON_DOC)

    def test_none(self):
        r = self.fetch({"url": self.srv.test_url + "/bytes/5000", "responseBody": "none"})
        self.assertResultShape(r, None)
        self.assertEqual(r["bytes"], 5000)

    def test_bytes_exact(self):
        for n in (0, 1, 65536, 1_000_003):
            with self.subTest(n=n):
                r = self.fetch({"url": f"{self.srv.test_url}/bytes/{n}", "responseBody": "base64"}, timeout=60)
                self.assertEqual(base64.b64decode(r["bodyBase64"]), testserver.det_bytes(n))
                self.assertEqual(r["bytes"], n)

    def test_max_body_bytes(self):
        e = self.fetch_error({"url": self.srv.test_url + "/bytes/10000", "maxBodyBytes": 1000, "retry": False})
        self.assertTransportError(e, "bodyTooLarge")
        r = self.fetch({"url": self.srv.test_url + "/bytes/10000", "maxBodyBytes": 10000})
        self.assertEqual(r["bytes"], 10000)
        self.assertAlive()

    def test_max_body_bytes_with_responsebody_none(self):
        e = self.fetch_error({"url": self.srv.test_url + "/bytes/10000", "maxBodyBytes": 9999,
                              "responseBody": "none", "retry": False})
        self.assertTransportError(e, "bodyTooLarge")

    def test_gzip_decoded(self):
        r = self.fetch({"url": self.srv.test_url + "/gzip"})
        self.assertEqual(r["status"], 200)
        self.assertEqual(r.get("body"), testserver.GZIP_TEXT)

    def test_gzip_on_request_echo(self):
        # the daemon offers gzip (it decodes it); the caller's own Accept-Encoding is not needed
        r, e = self.echo({"url": self.srv.test_url + "/echo"})
        ae = ",".join(header_values(e, "Accept-Encoding")).lower()
        self.assertIn("gzip", ae)

    def test_default_request_headers(self):
        # fetchd's own three, once each, right after Host and in libcurl's order; the
        # encodings are exactly what libcurl offers for CURLOPT_ACCEPT_ENCODING "" (curl
        # --compressed, against the same server).
        _, e = self.echo({"url": self.srv.test_url + "/echo"})
        names = [k.lower() for k, _ in e["headers"]]
        self.assertEqual(names, ["host", "user-agent", "accept", "accept-encoding"], e["headers"])
        self.assertTrue(header_values(e, "User-Agent")[0].startswith("fetchd/"), e["headers"])
        self.assertEqual(header_values(e, "Accept"), ["*/*"])
        out = subprocess.run(["curl", "-s", "--compressed", self.srv.test_url + "/echo"],
                             capture_output=True, timeout=30, check=True).stdout
        curls = header_values(json.loads(out), "Accept-Encoding")
        self.assertEqual(header_values(e, "Accept-Encoding"), curls)

    def test_own_headers_replace_the_defaults(self):
        # Given, removed, or given in another case: never sent twice; gzip still decoded.
        _, e = self.echo({"url": self.srv.test_url + "/echo",
                          "headers": {"user-agent": "me/1", "Accept": None, "ACCEPT-ENCODING": "gzip", "X-A": "b"}})
        self.assertEqual(header_values(e, "User-Agent"), ["me/1"])
        self.assertEqual(header_values(e, "Accept"), [])
        self.assertEqual(header_values(e, "Accept-Encoding"), ["gzip"])
        self.assertEqual(header_values(e, "X-A"), ["b"])
        r = self.fetch({"url": self.srv.test_url + "/gzip", "headers": {"Accept-Encoding": "gzip"}})
        self.assertEqual(r.get("body"), testserver.GZIP_TEXT)
        # With a body: the defaults stay, and no Expect goes out.
        _, e = self.echo({"url": self.srv.test_url + "/echo", "method": "POST", "body": "x=1"})
        self.assertEqual(len(header_values(e, "User-Agent")), 1, e["headers"])
        self.assertEqual(header_values(e, "Accept"), ["*/*"])
        self.assertEqual(len(header_values(e, "Accept-Encoding")), 1, e["headers"])
        self.assertEqual(header_values(e, "Expect"), [])

    def test_multi_headers_joined(self):
        r = self.fetch({"url": self.srv.test_url + "/headers-multi", "cookieJar": False})
        self.assertEqual(r["headers"].get("x-multi"), ", ".join(testserver.MULTI_X))
        self.assertEqual(r["headers"].get("set-cookie"), "\n".join(testserver.MULTI_COOKIES))


class TestJobs(FetchCase):
    def test_job_id_given_and_assigned(self):
        r = self.fetch({"url": self.srv.test_url + "/json", "jobId": "my-job-1", "comment": "hello"})
        self.assertEqual(r["jobId"], "my-job-1")
        a = self.fetch({"url": self.srv.test_url + "/json"})["jobId"]
        b = self.fetch({"url": self.srv.test_url + "/json"})["jobId"]
        self.assertNotEqual(a, b)
        # a finished job's id may be used again
        r = self.fetch({"url": self.srv.test_url + "/json", "jobId": "my-job-1"})
        self.assertEqual(r["jobId"], "my-job-1")

    def test_duplicate_live_job_id(self):
        other = self.daemon.client()
        other.send_obj({"jsonrpc": "2.0", "method": "fetch", "id": "first",
                        "params": {"url": self.srv.test_url + "/slow-headers?ms=1500", "jobId": "dup",
                                   "retry": False}})

        def live():
            j = self.c.call("getStatus")["jobs"]
            return j["running"] + j["queued"] >= 1
        wait_for(live, 5, message="the slow job never showed up as running/queued in getStatus")
        try:
            self.c.call("fetch", {"url": self.srv.test_url + "/json", "jobId": "dup"})
            self.fail("a second live job with the same jobId was accepted")
        except RPCError as e:
            self.assertEqual(e.code, -32602, e)
            self.assertEqual(e.data.get("field"), "jobId", e)
        first = other.answer_for("first", 20)
        self.assertEqual(first.get("result", {}).get("status"), 200, first)
        self.assertEqual(first["result"]["jobId"], "dup")
        other.close()
        self.assertAlive()

    def test_later_issue_fields_accepted(self):
        r = self.fetch({"url": self.srv.test_url + "/json", "retry": False, "connectTimeout": 5,
                        "timeout": 10, "cookieJar": False, "priority": 5, "progress": False,
                        "detach": False, "comment": "c", "maxRedirects": 3, "maxBodyBytes": 100000})
        self.assertEqual(r["status"], 200)
        r = self.fetch({"url": self.srv.test_url + "/json",
                        "retry": {"maxAttempts": 1, "maxInterval": 1, "statuses": [503]},
                        "cookieJar": "named-jar", "priority": -3})
        self.assertEqual(r["status"], 200)

    def test_status_counts_finished_and_failed(self):
        before = self.c.call("getStatus")["jobs"]
        self.fetch({"url": self.srv.test_url + "/json"})
        self.fetch_error({"url": f"http://127.0.0.1:{closed_port()}/", "retry": False})
        after = self.c.call("getStatus")["jobs"]
        self.assertEqual(after["finished"], before["finished"] + 1, (before, after))
        self.assertEqual(after["failed"], before["failed"] + 1, (before, after))

    def test_fetches_run_concurrently(self):
        # 5 answers that each take 600 ms: well under 5 x 600 ms when they run side by side
        t0 = time.monotonic()
        for i in range(5):
            self.c.send_obj({"jsonrpc": "2.0", "method": "fetch", "id": f"c{i}",
                             "params": {"url": f"{self.srv.test_url}/record/conc?ms=600"}})
        for i in range(5):
            a = self.c.answer_for(f"c{i}", 30)
            self.assertEqual(a.get("result", {}).get("status"), 200, a)
        took = time.monotonic() - t0
        self.assertLess(took, 2.0, f"5 slow fetches took {took:.2f}s: not run concurrently")
        hits = json.loads(self.fetch({"url": self.srv.test_url + "/hits/conc"})["body"])
        self.assertGreaterEqual(hits["maxConcurrent"], 5, hits)

    def test_many_concurrent_fetches_one_connection(self):
        n = 50
        for i in range(n):
            self.c.send_obj({"jsonrpc": "2.0", "method": "fetch", "id": i,
                             "params": {"url": f"{self.srv.test_url}/echo/{i}"}})
        for i in range(n):
            a = self.c.answer_for(i, 60)
            self.assertEqual(json.loads(a["result"]["body"])["path"], f"/echo/{i}")


if __name__ == "__main__":
    unittest.main()
