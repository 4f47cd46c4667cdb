"""Every malformed fetch param gets -32602 with data.field naming it (or -32004 / -32003 where
protocol.md says so), and after each case the daemon still answers ping."""
import json
import os
import unittest

from harness import DaemonTestCase, RPCError, servers


class BadInputCase(DaemonTestCase):
    def base(self, **extra):
        p = {"url": self.srv.test_url + "/echo"}
        p.update(extra)
        return p

    def expect_error(self, params, code, method="fetch"):
        try:
            r = self.c.call(method, params, timeout=20)
        except RPCError as e:
            self.assertEqual(e.code, code, f"params {json.dumps(params)[:300]}: expected {code}, got {e}")
            return e
        finally:
            self.assertAlive()
        self.fail(f"params {json.dumps(params)[:300]} were accepted (expected {code}); result {json.dumps(r)[:300]}")

    def expect_field(self, params, field, prefix=False, method="fetch"):
        """-32602 with data.field == field (or, with prefix, field / field.x / field[..])."""
        e = self.expect_error(params, -32602, method)
        self.assertIsInstance(e.data, dict, e)
        got = e.data.get("field")
        self.assertIsInstance(got, str, e)
        self.assertIsInstance(e.data.get("detail"), str, e)
        if prefix:
            self.assertTrue(got == field or got.startswith(field + ".") or got.startswith(field + "["),
                            f"data.field {got!r} does not name {field!r}: {e}")
        else:
            self.assertEqual(got, field, f"wrong data.field for {json.dumps(params)[:200]}: {e}")
        return e


class TestURL(BadInputCase):
    def test_missing_params_or_url(self):
        a = self.c.request("fetch")
        self.assertEqual(a.get("error", {}).get("code"), -32602, a)
        self.assertEqual(a["error"].get("data", {}).get("field"), "url", a)
        self.assertAlive()
        self.expect_field({}, "url")
        self.expect_field({"method": "GET"}, "url")

    def test_url_wrong_type(self):
        for v in (5, None, True, ["http://x/"], {"u": 1}):
            with self.subTest(url=v):
                self.expect_field({"url": v}, "url")

    def test_malformed_url(self):
        for v in ("", "not a url", "http://", "http:///path", "http://exa mple.com/", "://x",
                  "http://[::1/", "http://127.0.0.1:99999/", "http://host:port/"):
            with self.subTest(url=v):
                self.expect_field({"url": v}, "url")

    def test_scheme_not_allowed(self):
        for v in ("ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1/", "dict://127.0.0.1/",
                  "scp://127.0.0.1/x", "ldap://127.0.0.1/"):
            with self.subTest(url=v):
                e = self.expect_error({"url": v}, -32004)
                self.assertIsInstance(e.data, dict, e)
                self.assertIsInstance(e.data.get("detail"), str, e)

    def test_scheme_case_insensitive_allowed(self):
        # RFC 3986: schemes are case-insensitive; HTTP:// is http
        r = self.c.call("fetch", {"url": servers().test_url.replace("http", "HTTP", 1) + "/json"})
        self.assertEqual(r["status"], 200)


class TestFields(BadInputCase):
    def test_unknown_fields(self):
        for name in ("urll", "Method", "header", "timout", "x"):
            with self.subTest(field=name):
                self.expect_field(self.base(**{name: 1}), name)

    def test_method(self):
        for v in (5, "", "GE T", "GET\r\nX: y", "G(E)T", ["GET"]):
            with self.subTest(method=v):
                self.expect_field(self.base(method=v), "method")

    def test_headers(self):
        for v in ("X: y", ["X: y"], 5):
            with self.subTest(headers=v):
                self.expect_field(self.base(headers=v), "headers")
        # (a null value is no longer refused: it removes a header fetchd would send, as curl -H "X:")
        for v in ({"X-A": 5}, {"X-A": ["a"]}, {"Bad Name": "v"}, {"": "v"},
                  {"X-A": "a\r\nInjected: 1"}, {"X-A": "a\nb"}, {"X:A": "v"}):
            with self.subTest(headers=v):
                self.expect_field(self.base(headers=v), "headers", prefix=True)

    def test_query(self):
        for v in ("a=1", ["a", "1"], 5):
            with self.subTest(query=v):
                self.expect_field(self.base(query=v), "query")
        for v in ({"a": {"b": 1}}, {"a": [{"x": 1}]}, {"a": [[1]]}):
            with self.subTest(query=v):
                self.expect_field(self.base(query=v), "query", prefix=True)

    def test_form(self):
        for v in ("a=1", 5, ["a"]):
            with self.subTest(form=v):
                self.expect_field(self.base(form=v), "form")
        for v in ({"a": {"b": 1}}, {"a": [{"x": 1}]}):
            with self.subTest(form=v):
                self.expect_field(self.base(form=v), "form", prefix=True)

    def test_body_types(self):
        for v in (5, {"a": 1}, ["x"], True):
            with self.subTest(body=v):
                self.expect_field(self.base(body=v), "body")
        for v in (5, "!!!not base64!!!", "abc", {"a": 1}):
            with self.subTest(bodyBase64=v):
                self.expect_field(self.base(bodyBase64=v), "bodyBase64")

    def test_body_file(self):
        for v in ("relative/path.txt", "./x", "", 5, ["/etc/hostname"]):
            with self.subTest(bodyFile=v):
                self.expect_field(self.base(bodyFile=v), "bodyFile")

    def test_body_file_missing_is_file_error(self):
        path = os.path.join(self.daemon.tmpdir, "does-not-exist.bin")
        e = self.expect_error(self.base(bodyFile=path), -32003)
        self.assertEqual(e.data.get("path"), path, e)
        self.assertIsInstance(e.data.get("detail"), str, e)

    def test_two_body_fields(self):
        combos = [{"body": "a", "json": 1}, {"form": {"a": "b"}, "bodyBase64": "YQ=="},
                  {"body": "a", "bodyFile": "/etc/hostname"}, {"json": {}, "form": {}}]
        for c in combos:
            with self.subTest(fields=list(c)):
                e = self.expect_error(self.base(**c), -32602)
                self.assertIn(e.data.get("field"), list(c), f"data.field should name one of {list(c)}: {e}")

    def test_timeouts(self):
        for name in ("timeout", "connectTimeout"):
            for v in ("5", -1, [], {}, True):
                with self.subTest(field=name, value=v):
                    self.expect_field(self.base(**{name: v}), name)

    def test_max_redirects(self):
        for v in (-1, 1.5, "3", True):
            with self.subTest(maxRedirects=v):
                self.expect_field(self.base(maxRedirects=v), "maxRedirects")

    def test_retry(self):
        for v in ("yes", 3, []):
            with self.subTest(retry=v):
                self.expect_field(self.base(retry=v), "retry")
        for v in ({"maxAttempts": "5"}, {"maxAttempts": 0}, {"maxInterval": "x"}, {"statuses": "503"},
                  {"statuses": ["x"]}, {"bogus": 1}):
            with self.subTest(retry=v):
                self.expect_field(self.base(retry=v), "retry", prefix=True)

    def test_cookie_jar(self):
        for v in (5, True, [], {}):
            with self.subTest(cookieJar=v):
                self.expect_field(self.base(cookieJar=v), "cookieJar")

    def test_misc_types(self):
        # (explicit nulls for optional fields are left out: reading null as "absent" is fair)
        cases = {"priority": ("high", 1.5), "progress": ("yes", 1), "detach": (1, "no"),
                 "jobId": (5, "", ["a"]), "comment": (5, {}),
                 "responseBody": ("xml", "", 5, "TEXT"), "maxBodyBytes": (-5, "10", 1.5)}
        for name, values in cases.items():
            for v in values:
                with self.subTest(field=name, value=v):
                    self.expect_field(self.base(**{name: v}), name)

    def test_params_as_array(self):
        # assumption: fetch takes named params; positional params are invalid params
        e = self.expect_error([self.srv.test_url + "/echo"], -32602)
        self.assertIsInstance(e.data, dict)


class TestOtherMethods(BadInputCase):
    def test_unknown_method_then_ping(self):
        self.expect_error({}, -32601, method="fetchh")

    def test_bad_input_burst_then_good_fetch(self):
        for _ in range(20):
            with self.assertRaises(RPCError):
                self.c.call("fetch", {"url": 5})
        r = self.c.call("fetch", {"url": self.srv.test_url + "/json"})
        self.assertEqual(r["status"], 200)

    def test_deep_nesting(self):
        # jansson refuses very deep documents; the daemon must answer (not crash) and go on
        self.c.send_raw(b"[" * 100000 + b"]" * 100000 + b"\n")
        a = self.c.recv(20)
        err = a[0]["error"] if isinstance(a, list) else a.get("error")
        self.assertIsNotNone(err, str(a)[:300])
        self.assertIn(err["code"], (-32700, -32600), str(a)[:300])
        self.assertAlive()

    def test_abrupt_disconnects(self):
        for payload in (b'{"jsonrpc":"2.0","method":"pi', b'{"jsonrpc":"2.0","method":"fetch","params":{"url":"'
                        + servers().test_url.encode() + b'/slow-headers?ms=2000"},"id":1}\n', b"\xff\xfe"):
            c = self.daemon.client()
            c.send_raw(payload)
            c.close()
        self.assertAlive()


if __name__ == "__main__":
    unittest.main()
