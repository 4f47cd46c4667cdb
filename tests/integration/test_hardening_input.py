"""Hostile input, each reproduction against the real daemon:
nothing a client gives may end a header line or start another request (the test server must
record nothing smuggled), a NUL never truncates a path (no file is written), ids come back
exactly as sent whatever else the message holds, and requests or answers beyond libcurl's
limits fail with errors that name the limit. After each case the daemon still answers ping."""
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import urllib.request

from harness import DaemonTestCase, RPCError, servers
from jobhelpers import hits, key

KiB = 1024
# docs/protocol.md, "Limits"
MAX_URL_BYTES = 256 * KiB
MAX_HEADER_BYTES = 512 * KiB
MAX_RESPONSE_HEADER_BYTES = 256 * KiB


class HeadSink:
    """A listener that reads a whole request head, however large, and answers 200 with its
    length in bytes as the body (the test server, like most, refuses lines over 64 KiB)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 4 << 20:
                    chunk = conn.recv(1 << 16)
                    if not chunk:
                        break
                    head += chunk
                body = str(head.index(b"\r\n\r\n") + 4 if b"\r\n\r\n" in head else -1).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    def close(self):
        self.sock.close()


def get_json(path):
    with urllib.request.urlopen(servers().test_url + path, timeout=10) as r:
        return json.loads(r.read())


def smuggled_request(name):
    """A whole second request that the test server counts under /hits/<name> if it ever sees it."""
    return f"\r\n\r\nGET /record/{name} HTTP/1.1\r\nHost: x\r\n\r\n"


class HardeningCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="hard-", dir=self.daemon.tmpdir)

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, data=b"hello"):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def refused(self, method, params, field, code=-32602):
        """The call fails with `code` and data.field == field; the daemon still answers ping."""
        try:
            r = self.c.call(method, params, timeout=30)
        except RPCError as e:
            self.assertEqual(e.code, code, f"{method} {json.dumps(params)[:300]}: {e}")
            self.assertIsInstance(e.data, dict, e)
            if field is not None:
                self.assertEqual(e.data.get("field"), field, e)
            self.assertIsInstance(e.data.get("detail"), str, e)
            return e
        finally:
            self.assertAlive()
        self.fail(f"{method} {json.dumps(params)[:300]} was accepted; result {json.dumps(r)[:300]}")


class TestHeaderInjection(HardeningCase):
    """Item 4: every value that becomes part of an HTTP message is checked in one place."""

    def assertNothingSent(self, name):
        self.assertEqual(hits(name)["count"], 0, f"the test server saw a request for {name}")

    def test_resumable_mimetype_cannot_smuggle_a_request(self):
        k, sid = key("smuggle"), key("sess")
        path = self.write("a.bin", b"x" * 1000)
        self.refused("upload", {
            "url": f"{self.srv.test_url}/resumable/start?key={sid}",
            "files": [{"path": path, "mimetype": "text/plain" + smuggled_request(k)}],
            "resumable": {"chunkSize": 512}}, "files[0].mimetype")
        self.assertNothingSent(k)
        self.assertEqual(get_json(f"/resumable/info/{sid}")["sessions"], [], "the start request was sent")

    def test_multipart_mimetype_cannot_add_part_headers(self):
        k = key("mp")
        for mimetype in ("text/plain\r\nContent-Disposition: form-data; name=\"evil\"",
                         "text/plain" + smuggled_request(k), "text/plain\nX: y", "text/plain\rX: y",
                         "text/plain\x00x", "text/plain\x01", "text\x7f/plain"):
            with self.subTest(mimetype=mimetype):
                self.refused("upload", {"url": f"{self.srv.test_url}/record/{k}",
                                        "files": [{"content": "hi", "mimetype": mimetype}]}, "files[0].mimetype")
        self.assertNothingSent(k)

    def test_every_http_value_is_checked(self):
        k = key("inj")
        url = f"{self.srv.test_url}/record/{k}"
        path = self.write("b.txt")
        cases = [
            ("fetch", {"url": url + "\r\nX: y"}, "url"),
            ("fetch", {"url": url + smuggled_request(k)}, "url"),
            ("fetch", {"url": url + "?a=\u0000"}, "url"),
            ("fetch", {"method": "GET\r\nX: y"}, "method"),
            ("fetch", {"method": "GET /x HTTP/1.1\r\n"}, "method"),
            ("fetch", {"headers": {"X\r\nY": "v"}}, "headers.X\r\nY"),
            ("fetch", {"headers": {"X-A": "a" + smuggled_request(k)}}, "headers.X-A"),
            ("fetch", {"headers": {"X-A": "a\x01b"}}, "headers.X-A"),
            ("fetch", {"headers": {"X-A": "a\x7fb"}}, "headers.X-A"),
            ("fetch", {"headers": {"X-A": "a\x00b"}}, "headers.X-A"),
            ("download", {"path": os.path.join(self.dir, "d.bin"), "headers": {"X-A": "a\nb"}}, "headers.X-A"),
            ("upload", {"files": [{"content": "x", "mimetype": "text"}]}, "files[0].mimetype"),
            ("upload", {"files": [{"content": "x", "mimetype": "text/pl ain"}]}, "files[0].mimetype"),
            ("upload", {"files": [{"content": "x", "mimetype": "text/plain" + "a" * 2000}]}, "files[0].mimetype"),
            ("upload", {"files": [{"content": "x", "filename": "a\r\nb"}]}, "files[0].filename"),
            ("upload", {"files": [{"content": "x", "filename": "a\x00b"}]}, "files[0].filename"),
            ("upload", {"files": [{"content": "x", "field": "f\nContent-Type: x"}]}, "files[0].field"),
            ("upload", {"files": [{"path": path}], "fields": {"a\rb": "v"}}, "fields.a\rb"),
            ("upload", {"files": [{"path": path, "mimetype": "a/b\r\nX: y"}], "resumable": {}}, "files[0].mimetype"),
            ("upload", {"headers": {"X-A": "a\r\nb"}, "files": [{"path": path}], "resumable": {}}, "headers.X-A"),
        ]
        for method, extra, field in cases:
            with self.subTest(method=method, params=extra):
                self.refused(method, {"url": url, **extra}, field)
        self.assertNothingSent(k)

    def test_framing_headers_are_the_daemons(self):
        # A Content-Length of the client's choosing would make the rest of the body read as
        # a second request on a connection that other clients' requests reuse.
        k = key("cl")
        for name, value in (("Content-Length", "0"), ("content-length", "3"), ("Transfer-Encoding", "identity")):
            with self.subTest(header=name):
                self.refused("fetch", {"url": f"{self.srv.test_url}/echo", "headers": {name: value},
                                       "body": "GET /record/" + k + " HTTP/1.1\r\nHost: x\r\n\r\n"},
                             "headers." + name)
        self.assertNothingSent(k)

    def test_quote_in_filename_and_field_is_escaped(self):
        # libcurl writes Content-Disposition parameters the way browsers do (WHATWG HTML):
        # `"` as %22, so a quote cannot end the parameter.
        r = self.c.call("upload", {"url": f"{self.srv.test_url}/multipart-echo",
                                   "files": [{"content": "hi", "filename": 'say "hi".txt', "field": 'f"x'}],
                                   "fields": {'n"m': "v"}})
        self.assertEqual(r["status"], 200, r)
        parts = json.loads(r["body"])["parts"]
        self.assertEqual([p["name"] for p in parts], ["n%22m", "f%22x"], parts)
        self.assertEqual(parts[1]["filename"], "say %22hi%22.txt", parts)
        self.assertAlive()

    def test_tab_and_utf8_in_values_still_accepted(self):
        r = self.c.call("fetch", {"url": f"{self.srv.test_url}/echo", "headers": {"X-A": "a\tb", "X-B": "é"}})
        echo = json.loads(r["body"])
        self.assertIn(["X-A", "a\tb"], echo["headers"], echo)
        r = self.c.call("upload", {"url": f"{self.srv.test_url}/multipart-echo",
                                   "files": [{"content": "hi", "filename": "résumé.txt",
                                              "mimetype": "text/plain; charset=utf-8"}]})
        part = json.loads(r["body"])["parts"][0]
        self.assertEqual(part["contentType"], "text/plain; charset=utf-8", part)


class TestNULInPaths(HardeningCase):
    """Item 10: a NUL would end the path where the C library reads it ("f\\u0000.x" is "f")."""

    def assertNoFileWritten(self):
        self.assertEqual(sorted(os.listdir(self.dir)), sorted(self.expected), "a file was written")

    def setUp(self):
        super().setUp()
        self.source = self.write("src.txt")
        self.expected = ["src.txt"]

    def test_download_path(self):
        for name in ("f\u0000.x", "f\u0000", "\u0000"):
            with self.subTest(name=name):
                self.refused("download", {"url": f"{self.srv.test_url}/bytes/10",
                                          "path": os.path.join(self.dir, name)}, "path")
        self.assertNoFileWritten()

    def test_body_file(self):
        self.refused("fetch", {"url": f"{self.srv.test_url}/echo", "bodyFile": self.source + "\u0000.x"}, "bodyFile")
        self.refused("download", {"url": f"{self.srv.test_url}/echo", "path": os.path.join(self.dir, "o"),
                                  "bodyFile": self.source + "\u0000"}, "bodyFile")
        self.assertNoFileWritten()

    def test_upload_file_path(self):
        k = key("nul")
        self.refused("upload", {"url": f"{self.srv.test_url}/record/{k}",
                                "files": [{"content": "a"}, {"path": self.source + "\u0000.x"}]}, "files[1].path")
        self.refused("upload", {"url": f"{self.srv.test_url}/record/{k}", "skipUnreadable": True,
                                "files": [{"path": self.source + "\u0000"}], "resumable": {}}, "files[0].path")
        self.assertEqual(hits(k)["count"], 0)

    def test_logging_directory(self):
        before = self.c.call("getLogging")
        self.refused("setLogging", {"enabled": True, "directory": os.path.join(self.dir, "logs\u0000x")}, "directory")
        self.assertEqual(self.c.call("getLogging"), before)
        self.assertNoFileWritten()


class TestNULInPathsAllowDir(TestNULInPaths):
    """The same with --allow-dir, where the truncated path would also have passed the check."""

    @classmethod
    def setUpClass(cls):
        cls.DAEMON_ARGS = ("--allow-dir", tempfile.gettempdir())
        super().setUpClass()


class TestIDs(HardeningCase):
    """Item 11: a number beyond 64 bits elsewhere in a message leaves every integer exact."""

    def raw_answers(self, line):
        self.c.send_raw(line.encode() + b"\n")
        return self.c.recv_line(timeout=20).decode()

    def test_integer_id_echoed_exactly_beside_a_big_number(self):
        big = "123456789012345678901234567890"
        for req_id in ("7", "-1", "0", "9223372036854775807", "-9223372036854775808"):
            with self.subTest(id=req_id):
                raw = self.raw_answers('{"jsonrpc":"2.0","id":%s,"method":"fetch","params":{"url":"%s/echo",'
                                       '"maxBodyBytes":%s}}' % (req_id, self.srv.test_url, big))
                self.assertIn('"id":%s,' % req_id, raw)
                answer = json.loads(raw)
                self.assertEqual(answer["error"]["code"], -32602, raw)
                self.assertEqual(answer["error"]["data"]["field"], "maxBodyBytes", raw)
        self.assertAlive()

    def test_an_id_beyond_64_bits_comes_back_as_the_nearest_double(self):
        # Documented (protocol.md): use a string for such ids.
        raw = self.raw_answers('{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}')
        self.assertEqual(raw, '{"jsonrpc":"2.0","id":1.2345678901234568e+29,"result":"pong"}\n')

    def test_integers_in_params_stay_integers(self):
        # maxRedirects must be an integer: it still is when another member is beyond Int64.
        raw = self.raw_answers('{"jsonrpc":"2.0","id":8,"method":"fetch","params":{"url":"%s/echo",'
                               '"maxRedirects":3,"comment":"x","priority":-99999999999999999999}}' % self.srv.test_url)
        answer = json.loads(raw)
        self.assertIn('"id":8,', raw)
        self.assertEqual(answer["error"]["data"]["field"], "priority", raw)

    def test_batch_ids_exact(self):
        raw = self.raw_answers('[{"jsonrpc":"2.0","id":1,"method":"ping"},'
                               '{"jsonrpc":"2.0","id":2,"method":"ping","params":{"n":1e400}},'
                               '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"n":99999999999999999999}}]')
        # 1e400 is beyond a double: the whole message is a parse error, as before.
        self.assertEqual(json.loads(raw)["error"]["code"], -32700, raw)
        raw = self.raw_answers('[{"jsonrpc":"2.0","id":1,"method":"ping"},'
                               '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"n":99999999999999999999}},'
                               '{"jsonrpc":"2.0","id":4.5,"method":"ping"}]')
        answers = json.loads(raw)
        self.assertEqual(sorted(json.dumps(a["id"]) for a in answers), ["1", "3", "4.5"], raw)
        self.assertEqual(sorted(re.findall(r'"id":([^,]*)', raw)), ["1", "3", "4.5"], raw)
        self.assertAlive()


class TestLimits(HardeningCase):
    """Item 13: limits named, with the field and the number, instead of "Out of memory"."""

    def test_header_over_the_limit(self):
        e = self.refused("fetch", {"url": f"{self.srv.test_url}/echo", "headers": {"X-Big": "a" * (1100 * KiB)}},
                         "headers.X-Big")
        self.assertEqual(e.data.get("limit"), MAX_HEADER_BYTES, e)
        # Many headers together count too; the one that crosses the limit is named.
        headers = {f"X-H{i}": "a" * (100 * KiB) for i in range(6)}
        e = self.refused("fetch", {"url": f"{self.srv.test_url}/echo", "headers": headers}, "headers.X-H5")
        self.assertEqual(e.data.get("limit"), MAX_HEADER_BYTES, e)

    def test_at_every_limit_at_once_the_request_is_sent(self):
        # The worst case for libcurl's 1 MiB request head: a URL of the largest size that is
        # all user and password (sent again, base64, in Authorization) or all path, and
        # headers of the largest size. Sent whole, not "Out of memory".
        sink = HeadSink()
        self.addCleanup(sink.close)
        headers = {"X-Big": "h" * (MAX_HEADER_BYTES - len("X-Big") - 4)}
        prefix, suffix = "http://u:", f"@127.0.0.1:{sink.port}/x"
        for url in (prefix + "p" * (MAX_URL_BYTES - len(prefix) - len(suffix)) + suffix,
                    f"http://127.0.0.1:{sink.port}/" + "p" * (MAX_URL_BYTES - len(f"http://127.0.0.1:{sink.port}/"))):
            with self.subTest(userinfo=url.startswith(prefix)):
                self.assertEqual(len(url), MAX_URL_BYTES)
                r = self.c.call("fetch", {"url": url, "headers": headers, "retry": False}, timeout=30)
                self.assertEqual(r["status"], 200, r)
                self.assertGreater(int(r["body"]), MAX_HEADER_BYTES + MAX_URL_BYTES, r)
                self.assertLess(int(r["body"]), 1 << 20, r)
        self.assertAlive()

    def test_url_over_the_limit(self):
        long_path = "/echo/" + "p" * (1100 * KiB)
        e = self.refused("fetch", {"url": self.srv.test_url + long_path}, "url")
        self.assertEqual(e.data.get("limit"), MAX_URL_BYTES, e)
        e = self.refused("download", {"url": self.srv.test_url + long_path, "path": os.path.join(self.dir, "x")}, "url")
        self.assertEqual(os.listdir(self.dir), [])
        # The query is part of the URL that is sent.
        e = self.refused("fetch", {"url": self.srv.test_url + "/echo", "query": {"q": "é" * (100 * KiB)}}, "query")
        self.assertEqual(e.data.get("limit"), MAX_URL_BYTES, e)

    def transfer_error(self, params):
        try:
            r = self.c.call("fetch", params, timeout=30)
        except RPCError as e:
            self.assertEqual(e.code, -32001, e)
            self.assertEqual(e.data.get("kind"), "protocol", e)
            return e
        finally:
            self.assertAlive()
        self.fail(f"fetch {json.dumps(params)[:200]} succeeded: {json.dumps(r)[:300]}")

    def test_response_header_line_over_libcurls_limit(self):
        e = self.transfer_error({"url": f"{self.srv.test_url}/big-header?bytes={200 * KiB}"})
        self.assertIn("102400", e.data["detail"], e)
        self.assertIn("header", e.data["detail"], e)

    def test_response_headers_over_the_total_limit(self):
        e = self.transfer_error({"url": f"{self.srv.test_url}/big-header?bytes={50 * KiB}&count=8"})
        self.assertIn(str(MAX_RESPONSE_HEADER_BYTES), e.data["detail"], e)
        # Across redirects too (libcurl counts every hop's headers together).
        e = self.transfer_error({"url": f"{self.srv.test_url}/big-header?bytes={50 * KiB}&count=2&redirect=2"})
        self.assertIn(str(MAX_RESPONSE_HEADER_BYTES), e.data["detail"], e)

    def test_response_headers_under_the_limits(self):
        r = self.c.call("fetch", {"url": f"{self.srv.test_url}/big-header?bytes={90 * KiB}&count=2"})
        self.assertEqual(r["status"], 200, r)
        self.assertEqual(len(r["headers"]["x-big-1"]), 90 * KiB)
