"""The wire contract's "Version 2 additions" (/work/shared/design/protocol.md), name by name, as
tables of one-line cases against the real daemon, nginx, the test server, redis-server and the
fetchctl that $FETCHCTL names: each request field accepted and having its effect, each result
member, each error kind and code, each method and its members, the daemon's flags, and the
fetchctl version 2 commands and flags. Cases that other files test in depth are kept to the
name, its type and one effect."""
import atexit
import base64
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request
from urllib.parse import parse_qsl

from harness import (FETCHCTL, REPO, SMALL_TXT, Daemon, DaemonTestCase, RPCClient, RPCError, big_bin,
                     closed_port, header_values, testserver, wait_for)
from jobhelpers import hits, key, send_request
from socks5 import Socks5Server
from test_realworld import RecordingProxy, mutual_tls_server, unix_http_server

ISO8601 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$")
NUMBER = (int, float)
REDIS = shutil.which("redis-server")
ACTIVATE = shutil.which("systemd-socket-activate")


# --------------------------------------------------------------------------- servers of this file
_fixtures = {}
_fixtures_lock = threading.Lock()


def _once(name, make):
    with _fixtures_lock:
        if name not in _fixtures:
            _fixtures[name] = make()
        return _fixtures[name]


def _serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop():
        server.shutdown()
        server.server_close()
    atexit.register(stop)
    return server


def mtls():
    """A TLS server that requires a client certificate: (url, server cert, client cert, client key)."""
    def make():
        d = tempfile.mkdtemp(prefix="contract-mtls-")
        atexit.register(shutil.rmtree, d, True)
        server, *files = mutual_tls_server(d)
        atexit.register(server.server_close)
        atexit.register(server.shutdown)
        return (f"https://127.0.0.1:{server.server_address[1]}/", *files)
    return _once("mtls", make)


def http_proxy():
    """A forward proxy that answers "via proxy" itself and records each request: its port."""
    return _once("proxy", lambda: _serve(http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingProxy))
                 ).server_address[1]


def socks():
    return _once("socks", lambda: Socks5Server().start())


def empty_reply_port():
    """A listener that reads the request and closes without a byte: curl's 52."""
    def make():
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)

        def loop():
            while True:
                c, _ = s.accept()
                try:
                    c.recv(65536)
                finally:
                    c.close()
        threading.Thread(target=loop, daemon=True).start()
        return s.getsockname()[1]
    return _once("empty", make)


class TokenHandler(http.server.BaseHTTPRequestHandler):
    """An OAuth 2 token endpoint that records each form body and issues "tok-<n>"."""
    forms = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        TokenHandler.forms.append(dict(parse_qsl(body)))
        out = json.dumps({"access_token": f"tok-{len(TokenHandler.forms)}", "token_type": "Bearer",
                          "expires_in": 3600}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def token_server():
    return _once("token", lambda: _serve(http.server.ThreadingHTTPServer(("127.0.0.1", 0), TokenHandler))
                 ).server_address[1]


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


# --------------------------------------------------------------------------- the table machinery
def cases(*tables):
    """Class decorator: one test method per row (name, function(self)) of each table."""
    def deco(cls):
        for table in tables:
            for name, fn in table:
                def test(self, fn=fn):
                    fn(self)
                test.__name__ = "test_" + name
                if getattr(fn, "__unittest_expecting_failure__", False):  # a known gap, reported
                    test = unittest.expectedFailure(test)
                assert not hasattr(cls, test.__name__), name
                setattr(cls, test.__name__, test)
        return cls
    return deco


class V2Case(DaemonTestCase):
    """A daemon per class with a private state directory; helpers that make each case one line."""
    EXTRA_ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.base = tempfile.mkdtemp(prefix="contract-v2-")
        cls.state_dir = os.path.join(cls.base, "state")
        cls.DAEMON_ARGS = ("--state-dir", cls.state_dir) + tuple(a.format(base=cls.base) for a in cls.EXTRA_ARGS)
        super().setUpClass()
        # test server, nginx, nginx over TLS, the test server's port
        cls.T, cls.N, cls.S, cls.port = cls.srv.test_url, cls.srv.nginx_url, cls.srv.nginx_tls_url, cls.srv.test_port

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.base, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="case-", dir=self.base)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write(self, name, data, mode=0o600):
        p = self.path(name)
        with open(p, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        os.chmod(p, mode)
        return p

    # calls
    def call(self, method, params=None, timeout=30, client=None):
        return (client or self.c).call(method, params, timeout=timeout)

    def error(self, method, params=None, code=None, timeout=30, client=None):
        try:
            r = self.call(method, params, timeout, client)
        except RPCError as e:
            if code is not None:
                self.assertEqual(e.code, code, e)
            return e
        self.fail(f"{method} {json.dumps(params)[:300]} answered {json.dumps(r)[:400]}, expected an error")

    def invalid(self, params, field, method="fetch"):
        """-32602 with data.field naming the field."""
        e = self.error(method, params, -32602)
        self.assertEqual(e.data.get("field"), field, e.data)
        return e

    def kind(self, params, kind, curl_code=None, method="fetch", timeout=30):
        """-32001 with data.kind (and data.curlCode); returns data."""
        e = self.error(method, params, -32001, timeout)
        self.assertEqual(e.data["kind"], kind, e.data)
        if curl_code is not None:
            self.assertEqual(e.data.get("curlCode"), curl_code, e.data)
        return e.data

    def echo_of(self, params):
        r = self.call("fetch", params)
        self.assertEqual(r["status"], 200, r)
        return json.loads(r["body"])

    def sent_header(self, params, name):
        return header_values(self.echo_of(params), name)

    def keys(self, obj, names):
        self.assertIsInstance(obj, dict, obj)
        missing = [n for n in names if n not in obj]
        self.assertEqual(missing, [], f"members missing from {json.dumps(obj)[:600]}")

    def timed(self, fn):
        t0 = time.monotonic()
        out = fn()
        return out, time.monotonic() - t0

    def job_listed(self, job_id, client=None, timeout=10):
        return wait_for(lambda: next((j for j in self.call("listJobs", client=client)["jobs"]
                                      if j["jobId"] == job_id), None), timeout=timeout,
                        message=f"job {job_id} never listed")


# --------------------------------------------------------------------------- request model additions
def tls_name(t):
    """nginx's TLS port under a name of its own (a new connection): (URL, the resolve entry)."""
    name, port = key("tls") + ".invalid", t.srv._nginx.tls_port
    return f"https://{name}:{port}", {f"{name}:{port}": "127.0.0.1"}


def _protocols(t, *versions, base=None):
    """(the result's httpVersion, what nginx saw) of one /proto request per version asked."""
    base, resolve = base or tls_name(t)
    out = []
    for v in versions:
        params = {"url": base + "/proto", "insecure": True, "resolve": resolve}
        if v:
            params["httpVersion"] = v
        r = t.call("fetch", params)
        out.append((r["httpVersion"], r["body"]))
    return out


def _http2_after_http1(t):
    # A TLS connection made for a request forced to HTTP/1.1 is not reused by one that wants HTTP/2.
    t.assertEqual(_protocols(t, "1.1", "2", None), [("HTTP/1.1", "HTTP/1.1"), ("HTTP/2", "HTTP/2.0"),
                                                    ("HTTP/2", "HTTP/2.0")])


def _download_range(t):
    p = t.path("range.bin")
    r = t.call("download", {"url": t.N + "/big.bin", "path": p, "range": "0-99"})
    t.assertEqual((r["status"], os.path.getsize(p)), (206, 100), r)
    with open(p, "rb") as f:
        t.assertEqual(f.read(), big_bin()[:100])


def _download_range_not_resumed(t):
    p = t.path("range2.bin")
    url = t.T + f"/ranged/200000?etag=e1&key={key('rg')}&reset-after=50000"
    t.kind({"url": url, "path": p, "retry": False}, "reset", method="download")  # leaves a part file to resume
    t.assertEqual(os.path.getsize(p + ".part"), 50000)
    r = t.call("download", {"url": url, "path": p, "range": "100-199"})
    t.assertEqual((r["status"], r["resumed"], r["bytes"]), (206, False, 100), r)
    with open(p, "rb") as f:
        t.assertEqual(f.read(), testserver.det_bytes(200000)[100:200])


def _mtls_ok(t):
    url, server_cert, client_cert, client_key = mtls()
    r = t.call("fetch", {"url": url, "caFile": server_cert, "certFile": client_cert, "keyFile": client_key,
                         "retry": False})
    t.assertEqual(json.loads(r["body"]), {"client": "fetchd-client"})


def _mtls_without_cert(t):
    url, server_cert, _, _ = mtls()
    e = t.error("fetch", {"url": url, "caFile": server_cert, "retry": False}, -32001)
    t.assertIn(e.data["kind"], ("tls", "reset"), e.data)


def _proxy_http(t):
    port = http_proxy()
    r = t.call("fetch", {"url": "http://contract-proxied.invalid/x", "proxy": f"http://127.0.0.1:{port}"})
    t.assertEqual(r["body"], "via proxy")
    t.assertIn("GET http://contract-proxied.invalid/x", [s["line"].rsplit(" ", 1)[0] for s in RecordingProxy.seen])


def _proxy_socks(t, scheme, host, atyp):
    s = socks()
    before = len(s.seen)
    r = t.call("fetch", {"url": f"http://{host}:{t.port}/echo", "proxy": f"{scheme}://127.0.0.1:{s.port}"})
    t.assertEqual(r["status"], 200)
    t.assertEqual([x["atyp"] for x in s.seen[before:]], [atyp], s.seen[before:])


def _proxy_credentials_hidden(t):
    e = t.error("fetch", {"url": "http://x.invalid/", "proxy": "http://ann:Proxy-Pw-77@no-such-proxy.invalid:3128"},
                -32001)
    t.assertEqual(e.data["kind"], "proxy")
    t.assertNotIn("Proxy-Pw-77", json.dumps(e.answer))


def _unix_socket(t):
    with unix_http_server(t.tmp) as sock:
        r = t.call("fetch", {"url": "http://contract-docker/v1.43/version", "unixSocket": sock})
    t.assertEqual(json.loads(r["body"]), {"path": "/v1.43/version", "host": "contract-docker"})
    t.assertIsNone(r["remoteAddress"])


def _bandwidth(t, params, at_least):
    r, took = t.timed(lambda: t.call("fetch", params))
    t.assertEqual(r["status"], 200)
    t.assertGreaterEqual(took, at_least, r)


def _max_time(t):
    data, took = t.timed(lambda: t.kind({"url": t.T + "/slow-headers?ms=4000", "maxTime": 0.5}, "timeout", 28))
    t.assertLess(took, 3)


def _max_time_counts_retry_waits(t):
    data, took = t.timed(lambda: t.kind({"url": t.T + f"/flaky/{key('mt')}?fail=100&retry-after=1",
                                         "retry": {"maxAttempts": 10}, "maxTime": 1.5}, "timeout", 28))
    t.assertLess(took, 4)


def _auth_false(t):
    host = f"localhost:{t.port}"
    t.call("setAuth", {"host": host, "type": "bearer", "token": "contract-tok"})
    try:
        url = f"http://localhost:{t.port}/echo"
        t.assertEqual(t.sent_header({"url": url}, "Authorization"), ["Bearer contract-tok"])
        t.assertEqual(t.sent_header({"url": url, "auth": False}, "Authorization"), [])
    finally:
        t.call("setAuth", {"host": host, "type": None})


def _stubs_field(t):
    sid = t.call("addStub", {"set": "req-field", "match": {"url": "http://stubbed.invalid/a"},
                             "respond": {"status": 207, "body": "from stub"}})["stubId"]
    r = t.call("fetch", {"url": "http://stubbed.invalid/a", "stubs": "req-field"})
    t.assertEqual((r["status"], r["body"], r.get("stub")), (207, "from stub", sid), r)


def _durable_field(t):
    p = t.path("durable.bin")
    job = key("durable")
    rid = send_request(t.c, "download", {"url": t.T + "/slow-body?chunks=20&ms=50", "path": p, "jobId": job,
                                         "durable": True})
    entry = t.job_listed(job)
    t.assertIs(entry["durable"], True, entry)
    t.assertTrue(wait_for(lambda: os.path.exists(os.path.join(t.state_dir, "jobs.db")), timeout=5))
    t.assertEqual(t.c.answer_for(rid, timeout=30)["result"]["bytes"], 20)
    t.assertIs(t.call("getJob", {"jobId": job})["durable"], True)


def _durable_implies_detach(t):
    p = t.path("detached.bin")
    job = key("detach")
    with t.daemon.client() as other:
        send_request(other, "download", {"url": t.T + "/slow-body?chunks=10&ms=50", "path": p, "jobId": job,
                                         "durable": True})
        t.job_listed(job)
    r = t.call("attach", {"jobId": job})  # the connection that sent it is gone; the job is not cancelled
    t.assertEqual((r["status"], os.path.getsize(p)), (200, 10))


REQUEST_FIELDS = [
    ("req_insecure_true_skips_verification",
     lambda t: t.assertEqual(t.call("fetch", {"url": t.S + "/small.txt", "insecure": True})["body"], SMALL_TXT)),
    ("req_insecure_default_verifies", lambda t: t.kind({"url": t.S + "/small.txt", "retry": False}, "tls", 60)),
    ("req_insecure_is_bool", lambda t: t.invalid({"url": t.S, "insecure": "yes"}, "insecure")),
    ("req_ca_file_verifies",
     lambda t: t.assertEqual(t.call("fetch", {"url": t.S + "/small.txt", "caFile": t.srv.ca_file})["status"], 200)),
    ("req_ca_file_absolute", lambda t: t.invalid({"url": t.S, "caFile": "ca.pem"}, "caFile")),
    ("req_ca_file_unreadable_is_file_error",
     lambda t: t.assertEqual(t.error("fetch", {"url": t.S, "caFile": t.path("nope.pem")}, -32003).data["path"],
                             t.path("nope.pem"))),
    ("req_cert_and_key_file_mutual_tls", _mtls_ok),
    ("req_mutual_tls_without_cert_refused", _mtls_without_cert),
    ("req_key_file_alone_refused", lambda t: t.invalid({"url": t.S, "keyFile": t.srv.ca_file}, "keyFile")),
    ("req_cert_file_absolute", lambda t: t.invalid({"url": t.S, "certFile": "c.pem"}, "certFile")),
    ("req_proxy_http", _proxy_http),
    ("req_proxy_socks5", lambda t: _proxy_socks(t, "socks5", "127.0.0.1", "ipv4")),
    ("req_proxy_socks5h", lambda t: _proxy_socks(t, "socks5h", "contract-name.invalid", "name")),
    ("req_proxy_https_scheme_accepted",
     lambda t: t.kind({"url": t.T + "/json", "proxy": f"https://127.0.0.1:{closed_port()}", "retry": False},
                      "connect")),
    ("req_proxy_false_goes_direct",
     lambda t: t.assertEqual(t.call("fetch", {"url": t.T + "/json", "proxy": False})["status"], 200)),
    ("req_proxy_other_scheme_refused", lambda t: t.invalid({"url": t.T, "proxy": "ftp://127.0.0.1:21"}, "proxy")),
    ("req_proxy_unresolvable_is_kind_proxy",
     lambda t: t.kind({"url": t.T, "proxy": "http://no-such-proxy.invalid:3128"}, "proxy")),
    ("req_proxy_credentials_never_shown", _proxy_credentials_hidden),
    ("req_no_proxy",
     lambda t: t.assertEqual(t.call("fetch", {"url": t.T + "/json", "proxy": f"http://127.0.0.1:{closed_port()}",
                                              "noProxy": "127.0.0.1", "retry": False})["status"], 200)),
    ("req_resolve",
     lambda t: t.assertEqual(t.sent_header({"url": f"http://contract-res.invalid:{t.port}/echo",
                                            "resolve": {f"contract-res.invalid:{t.port}": "127.0.0.1"}}, "Host"),
                             [f"contract-res.invalid:{t.port}"])),
    ("req_resolve_bad_address", lambda t: t.assertTrue(
        t.error("fetch", {"url": t.T, "resolve": {"h:80": "not an address"}}, -32602).data["field"]
        .startswith("resolve"))),
    ("req_http_version_2", lambda t: t.assertEqual(_protocols(t, "2"), [("HTTP/2", "HTTP/2.0")])),
    ("req_http_version_1_1", lambda t: t.assertEqual(_protocols(t, "1.1"), [("HTTP/1.1", "HTTP/1.1")])),
    ("req_http_version_default_2_over_tls", lambda t: t.assertEqual(_protocols(t, None), [("HTTP/2", "HTTP/2.0")])),
    ("req_http_version_2_after_1_1_to_the_same_host", _http2_after_http1),
    ("req_http_version_other_refused", lambda t: t.invalid({"url": t.T, "httpVersion": "3"}, "httpVersion")),
    ("req_range_start_end", lambda t: t.assertEqual(
        [t.call("fetch", {"url": t.N + "/small.txt", "range": "0-9"})[k] for k in ("status", "body")],
        [206, SMALL_TXT[:10]])),
    ("req_range_start_open", lambda t: t.assertEqual(
        t.call("fetch", {"url": t.N + "/small.txt", "range": "90-"})["body"], SMALL_TXT[90:])),
    ("req_range_malformed", lambda t: t.invalid({"url": t.T, "range": "9-1"}, "range")),
    ("req_range_on_download", _download_range),
    ("req_range_on_download_turns_resume_off", _download_range_not_resumed),
    ("req_range_on_download_with_resume_true_refused",
     lambda t: t.invalid({"url": t.N + "/big.bin", "path": t.path("r3"), "range": "0-1", "resume": True}, "resume",
                         method="download")),
    ("req_max_recv_bytes_per_second",
     lambda t: _bandwidth(t, {"url": t.T + "/bytes/150000", "maxRecvBytesPerSecond": 100000}, 1.0)),
    ("req_max_send_bytes_per_second",
     lambda t: _bandwidth(t, {"url": t.T + "/echo", "bodyBase64": base64.b64encode(bytes(150000)).decode(),
                              "maxSendBytesPerSecond": 100000}, 1.0)),
    ("req_max_recv_bytes_per_second_is_int",
     lambda t: t.invalid({"url": t.T, "maxRecvBytesPerSecond": "fast"}, "maxRecvBytesPerSecond")),
    ("req_max_send_bytes_per_second_positive",
     lambda t: t.invalid({"url": t.T, "maxSendBytesPerSecond": 0}, "maxSendBytesPerSecond")),
    ("req_unix_socket", _unix_socket),
    ("req_unix_socket_absolute", lambda t: t.invalid({"url": t.T, "unixSocket": "docker.sock"}, "unixSocket")),
    ("req_max_time", _max_time),
    ("req_max_time_counts_retry_waits", _max_time_counts_retry_waits),
    ("req_max_time_is_seconds", lambda t: t.invalid({"url": t.T, "maxTime": "1s"}, "maxTime")),
    ("req_auth_false", _auth_false),
    ("req_auth_is_bool", lambda t: t.invalid({"url": t.T, "auth": "no"}, "auth")),
    ("req_stubs", _stubs_field),
    ("req_stubs_is_string", lambda t: t.invalid({"url": t.T, "stubs": 1}, "stubs")),
    ("req_cache_mode_other_refused", lambda t: t.invalid({"url": t.T, "cache": "sometimes"}, "cache")),
    ("req_cache_modes_accepted", lambda t: [t.assertEqual(
        t.call("fetch", {"url": t.T + "/json", "cache": m})["status"], 504 if m == "only-if-cached" else 200, m)
        for m in ("default", "no-store", "reload", "no-cache", "force-cache", "only-if-cached")]),
    ("req_durable_download", _durable_field),
    ("req_durable_implies_detach", _durable_implies_detach),
    ("req_durable_upload_accepted", lambda t: t.assertEqual(
        t.call("upload", {"url": t.T + "/multipart-echo", "files": [{"content": "x"}], "durable": True})["status"],
        200)),
    ("req_durable_is_bool",
     lambda t: t.invalid({"url": t.T, "path": t.path("d"), "durable": 1}, "durable", method="download")),
    ("req_redirect_to_ftp_refused", lambda t: t.error(
        "fetch", {"url": t.T + "/redirect-to?url=ftp%3A%2F%2F127.0.0.1%2Fx"}, -32004)),
    ("req_redirect_to_file_refused", lambda t: t.error(
        "fetch", {"url": t.T + "/redirect-to?url=file%3A%2F%2F%2Fetc%2Fpasswd"}, -32004)),
    ("req_url_scheme_file_refused", lambda t: t.error("fetch", {"url": "file:///etc/passwd"}, -32004)),
]


# --------------------------------------------------------------------------- result additions
TIMINGS = ("queuedMs", "dnsMs", "connectMs", "tlsMs", "firstByteMs", "totalMs")


def _timings(t, url, **extra):
    r = t.call("fetch", {"url": url, **extra})
    tm = r["timings"]
    t.keys(tm, TIMINGS)
    for k in TIMINGS:
        t.assertIsInstance(tm[k], NUMBER, k)
        t.assertGreaterEqual(tm[k], 0, k)
    t.assertLessEqual(tm["firstByteMs"], tm["totalMs"])
    return tm


def _timings_tls(t):
    base, resolve = tls_name(t)  # a new connection, with its handshake
    tm = _timings(t, base + "/small.txt", insecure=True, resolve=resolve)
    t.assertGreater(tm["tlsMs"], 0, tm)
    t.assertGreaterEqual(tm["tlsMs"], tm["connectMs"], tm)


def _queued_ms(t):
    host = f"127.0.0.1:{t.port}"
    t.call("setRateLimit", {"host": host, "maxConcurrent": 1})
    try:
        first = send_request(t.c, "fetch", {"url": t.T + "/slow-headers?ms=600"})
        time.sleep(0.1)
        r = t.call("fetch", {"url": t.T + "/json"})
        t.c.answer_for(first, timeout=10)
        t.assertGreaterEqual(r["timings"]["queuedMs"], 300, r["timings"])
    finally:
        t.call("setRateLimit", {"host": host, "maxConcurrent": None})


def _list_jobs_kinds(t):
    jobs = {"fetch": key("kf"), "download": key("kd"), "upload": key("ku")}
    slow = t.T + "/slow-body?chunks=40&ms=50"
    send_request(t.c, "fetch", {"url": slow, "jobId": jobs["fetch"]})
    send_request(t.c, "download", {"url": slow, "path": t.path("k.bin"), "jobId": jobs["download"]})
    send_request(t.c, "upload", {"url": t.T + "/slow-headers?ms=2000", "files": [{"content": "x"}],
                                 "jobId": jobs["upload"]})
    try:
        for kind, job in jobs.items():
            entry = t.job_listed(job)
            t.assertEqual((entry["kind"], entry["method"]), (kind, "POST" if kind == "upload" else "GET"), entry)
            t.assertIs(entry["durable"], False, entry)
    finally:
        for job in jobs.values():
            t.call("cancel", {"jobId": job})


RESULT_MEMBERS = [
    ("result_timings_members", lambda t: _timings(t, t.T + "/json")),
    ("result_timings_tls", _timings_tls),
    ("result_timings_queued_ms_is_the_wait_for_limits", _queued_ms),
    ("result_timings_on_download", lambda t: t.keys(
        t.call("download", {"url": t.T + "/bytes/10", "path": t.path("t.bin")})["timings"], TIMINGS)),
    ("result_timings_on_upload", lambda t: t.keys(
        t.call("upload", {"url": t.T + "/multipart-echo", "files": [{"content": "x"}]})["timings"], TIMINGS)),
    ("result_remote_address",
     lambda t: t.assertEqual(t.call("fetch", {"url": t.T + "/json"})["remoteAddress"], "127.0.0.1")),
    ("result_remote_address_on_download", lambda t: t.assertEqual(
        t.call("download", {"url": t.T + "/bytes/10", "path": t.path("r.bin")})["remoteAddress"], "127.0.0.1")),
    ("result_no_cache_member_without_cache",
     lambda t: t.assertNotIn("cache", t.call("fetch", {"url": t.T + "/json"}))),
    ("result_no_stub_member_from_network",
     lambda t: t.assertNotIn("stub", t.call("fetch", {"url": t.T + "/json"}))),
    ("list_jobs_kind_method_durable", _list_jobs_kinds),
]


# --------------------------------------------------------------------------- error kinds and curlCode
def _auth_kind(t):
    host = f"localhost:{t.port}"
    t.call("setAuth", {"host": host, "type": "bearer", "tokenFile": t.path("missing-token")})
    try:
        d = t.kind({"url": f"http://localhost:{t.port}/json"}, "auth")
        t.assertEqual(d.get("rule"), host, d)
    finally:
        t.call("setAuth", {"host": host, "type": None})


ERRORS = [
    ("error_curl_code_connect_7",
     lambda t: t.kind({"url": f"http://127.0.0.1:{closed_port()}/", "retry": False}, "connect", 7)),
    ("error_curl_code_dns_6", lambda t: t.kind({"url": "http://no-such-host.invalid/"}, "dns", 6)),
    ("error_curl_code_tls_handshake_35",
     lambda t: t.kind({"url": f"https://127.0.0.1:{t.port}/", "retry": False}, "tls", 35)),
    ("error_curl_code_untrusted_60", lambda t: t.kind({"url": t.S + "/", "retry": False}, "tls", 60)),
    ("error_curl_code_timeout_28",
     lambda t: t.kind({"url": t.T + "/slow-headers?ms=3000", "timeout": 0.3, "retry": False}, "timeout", 28)),
    ("error_curl_code_redirects_47",
     lambda t: t.kind({"url": t.T + "/redirect/5", "maxRedirects": 1}, "tooManyRedirects", 47)),
    ("error_curl_code_empty_reply_52",
     lambda t: t.kind({"url": f"http://127.0.0.1:{empty_reply_port()}/", "retry": False}, "reset", 52)),
    ("error_curl_code_recv_56", lambda t: t.kind({"url": t.T + "/reset", "retry": False}, "reset", 56)),
    ("error_kind_proxy", lambda t: t.kind({"url": t.T, "proxy": "socks5://no-such-proxy.invalid:1080"}, "proxy")),
    ("error_kind_stub_miss", lambda t: t.kind({"url": "http://nothing.invalid/", "stubs": "empty-set"}, "stubMiss")),
    ("error_kind_auth", _auth_kind),
]


@cases(REQUEST_FIELDS, RESULT_MEMBERS, ERRORS)
class TestRequestResultErrors(V2Case):
    """fetch, download, upload: the version 2 request fields, result members and error kinds."""


# --------------------------------------------------------------------------- credentials
RULE_MEMBERS = ("host", "type", "hasCredential", "expiresAt", "lastError")


class AuthRules(V2Case):
    """Rules for localhost:PORT (and names given an address with resolve), removed after each case."""

    def tearDown(self):
        try:
            for rule in self.call("getAuth")["rules"]:
                self.call("setAuth", {"host": rule["host"], "type": None})
        finally:
            super().tearDown()

    @property
    def host(self):
        return f"localhost:{self.port}"

    @property
    def L(self):
        return f"http://localhost:{self.port}"

    def rule(self, **params):
        params.setdefault("host", self.host)
        r = self.call("setAuth", params)
        self.assertEqual(sorted(r), sorted(RULE_MEMBERS), r)
        return r

    def authorization(self, url=None, **extra):
        return self.sent_header({"url": url or self.L + "/echo", **extra}, "Authorization")

    def status(self, path, **extra):
        return self.call("fetch", {"url": self.L + path, **extra})["status"]

    def helper(self, body, **rule):
        script = self.write(key("helper") + ".sh", "#!/bin/sh\n" + body, mode=0o700)
        return self.rule(type="helper", command=[script], **rule)

    def oauth(self, k, query="", **extra):
        return self.rule(type="oauth2", tokenUrl=f"{self.T}/oauth/token/{k}{query}", clientId="cid",
                         clientSecret="csecret", **extra)

    def named(self, name):
        """A URL on the test server under another name (resolve), and that fetch's extra params."""
        return f"http://{name}:{self.port}/echo", {"resolve": {f"{name}:{self.port}": "127.0.0.1"}}


def oauth_info(t, k):
    return get_json(f"{t.T}/oauth/info/{k}")


def _bearer_token(t):
    r = t.rule(type="bearer", token="Contract-Token-1")
    t.assertEqual((r["hasCredential"], r["expiresAt"], r["lastError"]), (True, None, None), r)
    t.assertEqual(t.authorization(), ["Bearer Contract-Token-1"])


def _bearer_token_file_read_at_each_use(t):
    f = t.write("token", "first-token\n")
    t.rule(type="bearer", tokenFile=f)
    t.assertEqual(t.authorization(), ["Bearer first-token"])
    t.write("token", "rotated-token\n")
    t.assertEqual(t.authorization(), ["Bearer rotated-token"])


def _basic(t, **cred):
    t.rule(type="basic", user="ann", **cred)
    t.assertEqual(t.status("/basic-protected?user=ann&password=Basic-Pw-2"), 200)


def _oauth2(t, secret_file=False):
    k = key("oa")
    extra = {"clientSecretFile": t.write("secret", "csecret")} if secret_file else {"clientSecret": "csecret"}
    t.rule(type="oauth2", tokenUrl=f"{t.T}/oauth/token/{k}", clientId="cid", **extra)
    for _ in range(2):
        t.assertEqual(t.status(f"/protected/{k}"), 200)
    t.assertEqual(oauth_info(t, k)["count"], 1, "the token is cached until it expires")
    rule = t.call("getAuth")["rules"][0]
    t.assertIs(rule["hasCredential"], True)
    t.assertRegex(rule["expiresAt"], ISO8601)


def _oauth2_scope_audience(t):
    port = token_server()
    before = len(TokenHandler.forms)
    t.rule(type="oauth2", tokenUrl=f"http://127.0.0.1:{port}/token", clientId="cid", clientSecret="cs",
           scope="read write", audience="https://api.contract.test")
    t.assertEqual(t.authorization(), [f"Bearer tok-{before + 1}"])
    form = TokenHandler.forms[before]
    t.assertEqual((form.get("grant_type"), form.get("scope"), form.get("audience")),
                  ("client_credentials", "read write", "https://api.contract.test"), form)


def _oauth2_refresh_before(t):
    k = key("rb")
    t.oauth(k, "?expires_in=3", refreshBefore=2.5)
    t.assertEqual(t.status(f"/protected/{k}"), 200)
    time.sleep(0.8)  # now within refreshBefore of the expiry: a new token
    t.assertEqual(t.status(f"/protected/{k}"), 200)
    t.assertEqual(oauth_info(t, k)["count"], 2)


def _oauth2_default_refresh_half_of_short_expiry(t):
    k = key("half")
    t.oauth(k, "?expires_in=2")  # default refreshBefore: 60, or half of expires_in when shorter: 1 s
    t.assertEqual(t.status(f"/protected/{k}"), 200)
    t.assertEqual(t.status(f"/protected/{k}"), 200)
    t.assertEqual(oauth_info(t, k)["count"], 1)
    time.sleep(1.2)
    t.assertEqual(t.status(f"/protected/{k}"), 200)
    t.assertEqual(oauth_info(t, k)["count"], 2)


def _oauth2_no_expiry_kept_until_401(t):
    k = key("noexp")
    t.oauth(k, "?expires_in=none")
    t.assertEqual([t.status(f"/protected/{k}") for _ in range(2)], [200, 200])
    t.assertEqual(oauth_info(t, k)["count"], 1)
    get_json(f"{t.T}/oauth/revoke/{k}")
    t.assertEqual(t.status(f"/protected/{k}"), 200, "the 401 dropped the token; a new one, one more attempt")
    t.assertEqual(oauth_info(t, k)["count"], 2)


def _second_401_is_the_answer(t):
    k, other = key("a401"), key("never")
    t.oauth(k)
    t.assertEqual(t.status(f"/protected/{other}"), 401)  # the token of k is never accepted there
    t.assertEqual(oauth_info(t, k)["count"], 2)
    t.assertEqual(hits("protected-" + other)["count"], 2)


def _helper(t):
    log = t.path("stdin.json")
    t.helper(f'cat > {log}\necho \'{{"headers": {{"Authorization": "Helper h1", "X-Api-Key": "k1"}}}}\'\n')
    echo = t.echo_of({"url": t.L + "/echo?x=1"})
    t.assertEqual((header_values(echo, "Authorization"), header_values(echo, "X-Api-Key")), (["Helper h1"], ["k1"]))
    with open(log) as f:
        sent = json.loads(f.read())
    t.assertEqual(sent, {"version": 1, "action": "get", "url": t.L + "/echo?x=1", "method": "GET",
                         "host": t.host, "challenge": None})


def _helper_challenge(t):
    log = t.path("challenges")
    k = key("hc")
    t.helper(f'cat >> {log}\necho >> {log}\necho \'{{"headers": {{"Authorization": "Bearer wrong"}}}}\'\n')
    t.assertEqual(t.status(f"/protected/{k}"), 401)
    with open(log) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    t.assertEqual([r["challenge"] for r in runs], [None, 'Bearer realm="fetchd-test", error="invalid_token"'])


def _helper_runs(t, output, requests=2):
    log = t.path("runs")
    t.helper(f'echo run >> {log}\ncat > /dev/null\necho \'{json.dumps(output)}\'\n')
    for _ in range(requests):
        t.assertEqual(t.authorization(), ["Bearer h"])
    with open(log) as f:
        return len(f.readlines())


def _helper_failure(t):
    t.helper('echo "Stdout-Secret-9"\necho "the helper says no" >&2\necho "second line" >&2\nexit 3\n')
    d = t.kind({"url": t.L + "/json"}, "auth")
    t.assertIn("the helper says no", d["detail"])
    t.assertNotIn("Stdout-Secret-9", json.dumps(d))
    t.assertNotIn("second line", d["detail"])


def _helper_timeout(t):
    t.helper("exec sleep 30\n", timeout=0.3)
    d, took = t.timed(lambda: t.kind({"url": t.L + "/json"}, "auth"))
    t.assertLess(took, 5)


def _aws(t, query, **rule):
    t.rule(type="awsSigV4", provider="aws:amz:eu-west-1:s3", **rule)
    r = t.call("fetch", {"url": t.L + "/aws-check?scope=eu-west-1/s3&" + query})
    t.assertEqual(r["status"], 200, r.get("body"))


def _aws_credentials_file(t):
    f = t.write("credentials", "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n"
                               "[ci]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s2\n")
    _aws(t, "key=AKIDPROFILE", credentialsFile=f, profile="ci")
    t.call("setAuth", {"host": t.host, "type": None})
    _aws(t, "key=AKIDDEFAULT", credentialsFile=f)


def _remove(t):
    t.rule(type="bearer", token="x")
    t.assertEqual(t.call("setAuth", {"host": t.host, "type": None}), {"host": t.host, "removed": True})
    t.assertEqual(t.authorization(), [])
    t.assertEqual(t.call("getAuth"), {"rules": []})


def _host_patterns(t):
    t.rule(host="*.contract.test", type="bearer", token="wild")
    t.rule(host="exact.test", type="bearer", token="by-name")
    t.rule(host=f"exact.test:{closed_port()}", type="bearer", token="other-port")
    for name, want in (("api.contract.test", ["Bearer wild"]), ("a.b.contract.test", ["Bearer wild"]),
                       ("contract.test", []), ("exact.test", ["Bearer by-name"])):
        url, extra = t.named(name)
        t.assertEqual(t.authorization(url, **extra), want, name)
    t.rule(host=f"exact.test:{t.port}", type="bearer", token="by-port")
    url, extra = t.named("exact.test")
    t.assertEqual(t.authorization(url, **extra), ["Bearer by-port"], "name:port wins over name")


def _get_auth(t):
    t.rule(type="bearer", token="Inline-Secret-3")
    t.rule(host="*.contract.test", type="basic", user="u", passwordFile=t.write("pw", "File-Secret-4"))
    rules = t.call("getAuth")
    t.assertEqual([(r["host"], r["type"]) for r in rules["rules"]], [(t.host, "bearer"), ("*.contract.test", "basic")])
    for r in rules["rules"]:
        t.assertEqual(sorted(r), sorted(RULE_MEMBERS), r)
    t.assertNotIn("Secret", json.dumps(rules))


def _last_error(t):
    t.rule(type="bearer", tokenFile=t.path("absent"))
    t.kind({"url": t.L + "/json"}, "auth")
    err = t.call("getAuth")["rules"][0]["lastError"]
    t.assertIsInstance(err, str)
    t.assertTrue(err)


def _single_flight(t):
    k = key("sf")
    t.oauth(k, "?delay_ms=300")
    ids = [send_request(t.c, "fetch", {"url": t.L + f"/protected/{k}"}) for _ in range(4)]
    t.assertEqual([t.c.answer_for(i, timeout=20)["result"]["status"] for i in ids], [200] * 4)
    info = oauth_info(t, k)
    t.assertEqual((info["count"], info["maxInFlight"]), (1, 1))


def _token_fetch_not_behind_host_limits(t):
    k = key("lim")
    host = f"127.0.0.1:{t.port}"  # the token endpoint's host
    t.call("setRateLimit", {"host": host, "maxConcurrent": 1})
    try:
        slow = send_request(t.c, "fetch", {"url": t.T + "/slow-headers?ms=1500"})  # holds 127.0.0.1's one slot
        time.sleep(0.1)
        t.oauth(k)
        r, took = t.timed(lambda: t.call("fetch", {"url": t.L + f"/protected/{k}"}))
        t.assertEqual(r["status"], 200)
        t.assertLess(took, 1.2, "the token request waited behind the host's limit")
        t.c.answer_for(slow, timeout=10)
    finally:
        t.call("setRateLimit", {"host": host, "maxConcurrent": None})


def _token_fetch_under_no_rule(t):
    k = key("own")
    t.rule(type="oauth2", tokenUrl=f"{t.L}/oauth/token/{k}", clientId="cid", clientSecret="csecret")  # same host
    t.assertEqual(t.status(f"/protected/{k}"), 200)
    info = oauth_info(t, k)
    t.assertEqual(info["authorizations"], ["Basic " + base64.b64encode(b"cid:csecret").decode()])


def _redirect_to_other_host(t):
    t.rule(type="bearer", token="stay-home")
    target = f"http://127.0.0.1:{t.port}/echo"
    r = t.call("fetch", {"url": t.L + "/redirect-to?url=" + urllib.request.quote(target, safe="")})
    t.assertEqual(header_values(json.loads(r["body"]), "Authorization"), [])


def _har_redacted_whatever_redact_says(t):
    logs = t.path("har")
    t.rule(type="bearer", token="Har-Secret-5")
    t.call("setLogging", {"enabled": True, "directory": logs, "redact": False})
    try:
        job = key("har")
        t.call("fetch", {"url": t.L + "/json", "jobId": job, "headers": {"X-Own": "mine"}})
        f = wait_for(lambda: [n for n in os.listdir(logs) if job in n], timeout=10)
        with open(os.path.join(logs, f[0])) as fh:
            text = fh.read()
    finally:
        t.call("setLogging", {"enabled": False, "redact": True})
    t.assertNotIn("Har-Secret-5", text)
    t.assertIn("<redacted>", text)
    t.assertIn("mine", text)


def _auth_file(t):
    rules = [{"host": "from-file.test", "type": "bearer", "token": "t"}]
    private = t.write("auth.json", json.dumps(rules), mode=0o600)
    with Daemon("--auth-file", private) as d:
        t.assertEqual([r["host"] for r in d.client().call("getAuth")["rules"]], ["from-file.test"])
    readable = t.write("auth-open.json", json.dumps(rules), mode=0o644)
    d = Daemon("--auth-file", readable, wait=False).start()
    try:
        t.assertEqual(d.proc.wait(20), 1, d.stderr_text())
    finally:
        d.close()


CREDENTIALS = [
    ("auth_bearer_token", _bearer_token),
    ("auth_bearer_token_file", _bearer_token_file_read_at_each_use),
    ("auth_basic_password", lambda t: _basic(t, password="Basic-Pw-2")),
    ("auth_basic_password_file", lambda t: _basic(t, passwordFile=t.write("pw", "Basic-Pw-2"))),
    ("auth_oauth2_client_secret", _oauth2),
    ("auth_oauth2_client_secret_file", lambda t: _oauth2(t, secret_file=True)),
    ("auth_oauth2_scope_audience", _oauth2_scope_audience),
    ("auth_oauth2_refresh_before", _oauth2_refresh_before),
    ("auth_oauth2_default_refresh_half_expiry", _oauth2_default_refresh_half_of_short_expiry),
    ("auth_oauth2_without_expires_in_kept_until_401", _oauth2_no_expiry_kept_until_401),
    ("auth_401_second_is_the_answer", _second_401_is_the_answer),
    ("auth_helper_stdin_and_headers", _helper),
    ("auth_helper_challenge", _helper_challenge),
    ("auth_helper_expires_in_kept", lambda t: t.assertEqual(
        _helper_runs(t, {"headers": {"Authorization": "Bearer h"}, "expiresIn": 60}), 1)),
    ("auth_helper_expires_at_kept", lambda t: t.assertEqual(
        _helper_runs(t, {"headers": {"Authorization": "Bearer h"}, "expiresAt": time.time() + 60}), 1)),
    ("auth_helper_neither_used_once", lambda t: t.assertEqual(
        _helper_runs(t, {"headers": {"Authorization": "Bearer h"}}), 2)),
    ("auth_helper_failure_kind_auth_stderr_line", _helper_failure),
    ("auth_helper_timeout", _helper_timeout),
    ("auth_helper_bad_json", lambda t: (t.helper('cat > /dev/null\necho "Not-Json-Out"\n'), t.assertNotIn(
        "Not-Json-Out", json.dumps(t.kind({"url": t.L + "/json"}, "auth"))))),
    ("auth_token_fetch_under_no_rule", _token_fetch_under_no_rule),
    ("auth_aws_sigv4_keys", lambda t: _aws(t, "key=AKIDCONTRACT", accessKeyId="AKIDCONTRACT",
                                           secretAccessKey="secret")),
    ("auth_aws_sigv4_session_token", lambda t: _aws(t, "key=AKIDC&token=Sess-Tok", accessKeyId="AKIDC",
                                                    secretAccessKey="s", sessionToken="Sess-Tok")),
    ("auth_aws_sigv4_credentials_file_profile", _aws_credentials_file),
    ("auth_type_null_removes", _remove),
    ("auth_type_null_without_rule", lambda t: t.assertEqual(
        t.call("setAuth", {"host": "none.test", "type": None}), {"host": "none.test", "removed": False})),
    ("auth_host_patterns", _host_patterns),
    ("auth_host_star_alone_refused", lambda t: t.invalid({"host": "*", "type": "bearer", "token": "x"}, "host",
                                                         method="setAuth")),
    ("auth_unknown_type_refused", lambda t: t.invalid({"host": "h.test", "type": "kerberos"}, "type",
                                                      method="setAuth")),
    ("auth_get_auth_members_no_secret", _get_auth),
    ("auth_last_error", _last_error),
    ("auth_single_flight", _single_flight),
    ("auth_token_fetch_not_behind_host_limits", _token_fetch_not_behind_host_limits),
    ("auth_redirect_to_other_host_carries_none", _redirect_to_other_host),
    ("auth_har_redacted_whatever_redact_says", _har_redacted_whatever_redact_says),
    ("auth_file", _auth_file),
    ("auth_error_kind_auth_no_attempt_sent", lambda t: (
        t.rule(type="bearer", tokenFile=t.path("gone")),
        t.assertEqual(hits(k := key("nosend"))["count"], 0),
        t.kind({"url": t.L + f"/record/{k}"}, "auth"),
        t.assertEqual(hits(k)["count"], 0))),
]


@cases(CREDENTIALS)
class TestCredentials(AuthRules):
    """setAuth (every type and field), getAuth, and the rules' behaviour the contract names."""


# --------------------------------------------------------------------------- stubs
class StubSets(V2Case):
    def setUp(self):
        super().setUp()
        self.set = key("set")

    def add(self, set_name=None, **params):
        r = self.call("addStub", {"set": set_name or self.set, **params})
        self.assertEqual(sorted(r), ["stubId"], r)
        self.assertIsInstance(r["stubId"], str)
        return r["stubId"]

    def via(self, params, set_name=None, method="fetch"):
        return self.call(method, {"stubs": set_name or self.set, **params})

    def miss(self, params, set_name=None):
        e = self.error("fetch", {"stubs": set_name or self.set, **params}, -32001)
        self.assertEqual(e.data["kind"], "stubMiss", e.data)
        return e.data


U = "http://api.stubs.test/v1/items"

MATCH_MEMBERS = [  # member, value, a request that matches, one that does not
    ("method", "POST", {"url": U, "method": "POST", "body": "x"}, {"url": U}),
    ("url", U + "?a=1", {"url": U + "?a=1"}, {"url": U + "?a=2"}),
    ("urlPrefix", U + "/", {"url": U + "/42"}, {"url": U}),
    ("urlPattern", r"^http://api\.stubs\.test/v1/items/[0-9]+$", {"url": U + "/42"}, {"url": U + "/4x2"}),
    ("query", {"q": "a b"}, {"url": U + "?z=1&q=a%20b"}, {"url": U + "?q=ab"}),
    ("headers", {"X-Key": "v1"}, {"url": U, "headers": {"x-key": "v1"}}, {"url": U, "headers": {"X-Key": "v2"}}),
    ("bodyJson", {"a": 1, "b": [True]}, {"url": U, "json": {"b": [True], "a": 1.0}}, {"url": U, "json": {"a": 2}}),
    ("bodyContains", "needle", {"url": U, "body": "hay-needle-hay"}, {"url": U, "body": "hay"}),
]


def _match(t, member, value, hit, miss):
    sid = t.add(match={member: value}, respond={"body": "matched"})
    r = t.via(hit)
    t.assertEqual((r["body"], r["stub"]), ("matched", sid), r)
    t.assertEqual(t.miss(miss)["nearest"]["stubId"], sid)


def _respond(t, respond, check, params=None):
    sid = t.add(respond=respond)
    r = t.via(params or {"url": U})
    t.assertEqual(r["stub"], sid)
    t.assertEqual(r["httpVersion"], "stub")
    check(r)


RESPOND_MEMBERS = [
    ("status", {"status": 418}, lambda t, r: t.assertEqual(r["status"], 418)),
    ("status_default_200", {}, lambda t, r: t.assertEqual(r["status"], 200)),
    ("headers", {"headers": {"X-Stub": "yes", "X-Two": ["a", "b"]}},
     lambda t, r: t.assertEqual((r["headers"]["x-stub"], r["headers"]["x-two"]), ("yes", "a, b"))),
    ("body", {"body": "plain"}, lambda t, r: t.assertEqual(r["body"], "plain")),
    ("body_base64", {"bodyBase64": base64.b64encode(b"\xff\x00\x01").decode()},
     lambda t, r: t.assertEqual(base64.b64decode(r["bodyBase64"]), b"\xff\x00\x01")),
    ("json", {"json": {"items": [1]}},
     lambda t, r: t.assertEqual((json.loads(r["body"]), r["headers"]["content-type"]),
                                ({"items": [1]}, "application/json"))),
]


def _respond_body_file(t):
    f = t.write("body.bin", b"from a file")
    _respond(t, {"bodyFile": f}, lambda r: t.assertEqual(r["body"], "from a file"))


def _delay(t):
    r, took = t.timed(lambda: _respond(t, {"delayMs": 400}, lambda r: None))
    t.assertGreaterEqual(took, 0.38)


def _sequence(t):
    t.add(respondSequence=[{"status": 503}, {"status": 201}, {"status": 202}])
    t.assertEqual([t.via({"url": U, "retry": False})["status"] for _ in range(4)], [503, 201, 202, 202])


def _fault(t, fault, kind):
    t.add(fault=fault)
    e = t.error("fetch", {"url": U, "stubs": t.set, "retry": False, "timeout": 1}, -32001)
    t.assertEqual(e.data["kind"], kind, e.data)


def _priority(t):
    low = t.add(match={"urlPrefix": U}, respond={"body": "low"})
    high = t.add(match={"urlPrefix": U}, respond={"body": "high"}, priority=5)
    t.assertEqual(t.via({"url": U})["stub"], high)
    t.call("removeStubs", {"stubId": high})
    first = t.add(match={"urlPrefix": U}, respond={"body": "later"})
    t.assertEqual(t.via({"url": U})["stub"], low, "equal priority: the earlier stub")
    t.assertNotEqual(low, first)


def _times(t):
    once = t.add(respond={"body": "once"}, times=1, priority=1)
    rest = t.add(respond={"body": "rest"})
    t.assertEqual([t.via({"url": U})["stub"] for _ in range(3)], [once, rest, rest])


def _remove_stubs(t):
    a = t.add(respond={})
    t.add(respond={})
    t.assertEqual(t.call("removeStubs", {"set": t.set, "stubId": a}), {"removed": 1})
    t.assertEqual(t.call("removeStubs", {"set": t.set}), {"removed": 1})
    t.add(respond={})
    t.add(set_name=t.set + "-b", respond={})
    t.assertGreaterEqual(t.call("removeStubs", {})["removed"], 2)
    t.assertEqual(t.call("getStubs")["stubs"], [])


def _get_stubs(t):
    sid = t.add(match={"method": "GET", "urlPrefix": U}, respond={})
    t.via({"url": U})
    t.via({"url": U})
    t.miss({"url": U, "method": "DELETE"})
    r = t.call("getStubs", {"set": t.set})
    t.assertEqual(r["stubs"], [{"stubId": sid, "set": t.set, "match": {"method": "GET", "urlPrefix": U}, "hits": 2}])
    t.assertEqual(r["misses"], [{"set": t.set, "method": "DELETE", "url": U,
                                 "nearest": {"stubId": sid, "differences": ["method"]}}])


def _stub_miss(t):
    d = t.miss({"url": "http://empty.stubs.test/"})
    t.assertEqual((d["nearest"], d["attempts"]), (None, 1), d)
    sid = t.add(match={"url": U, "headers": {"X-A": "1"}}, respond={})
    d = t.miss({"url": U + "?q=1"})
    t.assertEqual(d["nearest"], {"stubId": sid, "differences": ["url", "headers.X-A"]})


def _misses_last_100(t):
    for i in range(105):
        t.miss({"url": f"http://m.stubs.test/{i}"})
    misses = t.call("getStubs", {"set": t.set})["misses"]
    t.assertEqual([m["url"] for m in misses], [f"http://m.stubs.test/{i}" for i in range(5, 105)])


def _stub_mode(t):
    t.assertEqual(t.call("setStubMode", {"set": t.set, "onMiss": "network"}), {"set": t.set, "onMiss": "network"})
    r = t.via({"url": t.T + "/json"})
    t.assertEqual((r["status"], r.get("stub")), (200, None))
    t.assertEqual(t.call("getStubs", {"set": t.set})["misses"][-1]["url"], t.T + "/json")
    t.assertEqual(t.call("setStubMode", {"set": t.set, "onMiss": "error"})["onMiss"], "error")
    t.miss({"url": t.T + "/json"})


def _record(t):
    har = t.path("rec.har")
    k = key("rec")
    t.assertEqual(t.call("recordStubs", {"set": t.set, "har": har}), {"set": t.set, "har": har})
    url = t.T + f"/record/{k}"
    r1 = t.via({"url": url, "headers": {"Authorization": "Bearer Rec-Secret-6"}})
    t.assertNotIn("stub", r1)
    r2 = t.via({"url": url, "headers": {"Authorization": "Bearer Rec-Secret-6"}})
    t.assertEqual((r2["httpVersion"], r2["body"]), ("stub", r1["body"]))
    t.assertEqual(hits(k)["count"], 1)

    def recorded():  # the file is rewritten after each exchange, off the engine thread
        with open(har) as f:
            text = f.read()
        return text if json.loads(text)["log"]["entries"] else None
    text = wait_for(recorded, timeout=5, message="nothing recorded in the HAR file")
    t.assertEqual([e["request"]["url"] for e in json.loads(text)["log"]["entries"]], [url])
    t.assertNotIn("Rec-Secret-6", text)


def _load(t):
    har = t.write("load.har", json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"},
                                                  "entries": [_har_entry(U, "first"), _har_entry(U, "second"),
                                                              _har_entry(U + "/x", "other")]}}))
    t.assertEqual(t.call("loadStubs", {"set": t.set, "har": har}), {"loaded": 2})
    t.assertEqual([t.via({"url": U})["body"] for _ in range(3)], ["first", "second", "second"])


def _har_entry(url, body):
    return {"startedDateTime": "2026-01-01T00:00:00.000Z", "time": 1,
            "request": {"method": "GET", "url": url, "httpVersion": "HTTP/1.1", "headers": [], "queryString": [],
                        "cookies": [], "headersSize": -1, "bodySize": 0},
            "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1",
                         "headers": [{"name": "Content-Type", "value": "text/plain"}], "cookies": [],
                         "content": {"size": len(body), "mimeType": "text/plain", "text": body},
                         "redirectURL": "", "headersSize": -1, "bodySize": len(body)},
            "cache": {}, "timings": {"send": 0, "wait": 1, "receive": 0}}


def _no_auth_rule(t):
    t.call("setAuth", {"host": "api.stubs.test", "type": "bearer", "tokenFile": t.path("absent")})
    try:
        t.add(respond={"body": "no rule ran"})
        t.assertEqual(t.via({"url": U})["body"], "no rule ran")
    finally:
        t.call("setAuth", {"host": "api.stubs.test", "type": None})


def _passes_through(t):
    p = t.path("stub.bin")
    t.add(respond={"body": "to disk", "headers": {"Set-Cookie": "sc=1; Path=/"}})
    r = t.via({"url": U, "path": p, "cookieJar": t.set}, method="download")
    with open(p) as f:
        t.assertEqual((f.read(), r["stub"]), ("to disk", r["stub"]))
    t.assertEqual([c["name"] for c in t.call("getCookies", {"url": U, "cookieJar": t.set})["cookies"]], ["sc"])
    t.add(set_name=t.set + "-r", respondSequence=[{"status": 503, "headers": {"Retry-After": "0"}}, {"body": "ok"}])
    r = t.via({"url": U, "retry": {"maxAttempts": 3}}, set_name=t.set + "-r")
    t.assertEqual((r["status"], r["attempts"]), (200, 2))


STUBS = [
    ("stub_add_returns_stub_id", lambda t: t.add(respond={})),
    ("stub_default_set_is_default", lambda t: (
        t.call("addStub", {"match": {"url": "http://default.stubs.test/"}, "respond": {}}),
        t.assertIn("default", [s["set"] for s in t.call("getStubs", {"set": "default"})["stubs"]]),
        t.call("removeStubs", {"set": "default"}))),
    ("stub_match_every_member_optional", lambda t: (t.add(match={}, respond={"body": "any"}),
                                                    t.assertEqual(t.via({"url": U + "/zz"})["body"], "any"))),
    ("stub_match_two_members_must_both_hold", lambda t: (
        t.add(match={"method": "GET", "urlPrefix": U}, respond={}),
        t.miss({"url": U, "method": "PUT", "body": "x"}))),
    ("stub_match_bad_pattern_refused", lambda t: t.invalid({"set": t.set, "match": {"urlPattern": "("}, "respond": {}},
                                                           "match.urlPattern", method="addStub")),
    ("stub_respond_body_file", _respond_body_file),
    ("stub_respond_delay_ms", _delay),
    ("stub_respond_sequence_last_repeats", _sequence),
    ("stub_fault_reset", lambda t: _fault(t, "reset", "reset")),
    ("stub_fault_timeout", lambda t: _fault(t, "timeout", "timeout")),
    ("stub_fault_refused", lambda t: _fault(t, "refused", "connect")),
    ("stub_fault_other_refused", lambda t: t.invalid({"set": t.set, "fault": "explode"}, "fault", method="addStub")),
    ("stub_priority", _priority),
    ("stub_times", _times),
    ("stub_remove_stubs", _remove_stubs),
    ("stub_get_stubs", _get_stubs),
    ("stub_miss_nearest", _stub_miss),
    ("stub_misses_last_100", _misses_last_100),
    ("stub_set_stub_mode", _stub_mode),
    ("stub_set_stub_mode_other_refused", lambda t: t.invalid({"set": t.set, "onMiss": "ask"}, "onMiss",
                                                             method="setStubMode")),
    ("stub_record", _record),
    ("stub_load", _load),
    ("stub_load_not_har_refused", lambda t: t.invalid({"set": t.set, "har": t.write("x.har", "{}")}, "har",
                                                      method="loadStubs")),
    ("stub_answer_runs_no_auth_rule", _no_auth_rule),
    ("stub_answer_passes_through_download_cookies_retry", _passes_through),
    ("stub_member_is_last_attempts_stub", lambda t: (
        sid := t.add(respondSequence=[{"status": 503, "headers": {"Retry-After": "0"}}, {"status": 200}]),
        t.assertEqual(t.via({"url": U, "retry": {"maxAttempts": 2}})["stub"], sid))),
] + [(f"stub_match_{m}", lambda t, row=(m, v, h, x): _match(t, *row)) for m, v, h, x in MATCH_MEMBERS] + [
    (f"stub_respond_{name}", lambda t, r=respond, c=check: _respond(t, r, lambda res: c(t, res)))
    for name, respond, check in RESPOND_MEMBERS]


@cases(STUBS)
class TestStubs(StubSets):
    """addStub (match, respond, respondSequence, fault, priority, times), removeStubs, getStubs,
    setStubMode, recordStubs, loadStubs, and the result's stub member."""


class TestStubsOffline(V2Case):
    """fetchd --stubs FILE --offline: FILE is the set "default", applied to every request; a miss
    is stubMiss whatever a set's onMiss says; the network is never used."""

    @classmethod
    def setUpClass(cls):
        cls.stubs_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump([{"match": {"urlPrefix": "http://offline.test/"}, "respond": {"body": "from the file"}},
                   {"set": "named", "match": {}, "respond": {"body": "named set"}}], cls.stubs_file)
        cls.stubs_file.close()
        cls.EXTRA_ARGS = ("--stubs", cls.stubs_file.name, "--offline")
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        os.unlink(cls.stubs_file.name)

    def test_offline_default_set_answers_requests_naming_none(self):
        self.assertEqual(self.call("fetch", {"url": "http://offline.test/a"})["body"], "from the file")
        self.assertEqual(self.call("fetch", {"url": "http://x.test/", "stubs": "named"})["body"], "named set")

    def test_offline_miss_never_uses_the_network(self):
        k = key("offline")
        self.call("setStubMode", {"set": "default", "onMiss": "network"})
        self.kind({"url": self.T + f"/record/{k}"}, "stubMiss")
        self.assertEqual(hits(k)["count"], 0)

    def test_stubs_har_file(self):
        har = self.write("start.har", json.dumps({"log": {"version": "1.2", "creator": {"name": "t", "version": "1"},
                                                          "entries": [_har_entry("http://har.test/", "from har")]}}))
        with Daemon("--stubs", har) as d:
            c = d.client()
            self.assertEqual(c.call("fetch", {"url": "http://har.test/"})["body"], "from har")
            self.assertEqual(self.error("fetch", {"url": self.T + "/json"}, -32001, client=c).data["kind"], "stubMiss")
            c.call("setStubMode", {"set": "default", "onMiss": "network"})  # without --offline, onMiss holds
            self.assertEqual(c.call("fetch", {"url": self.T + "/json"})["status"], 200)

    def test_stubs_file_that_cannot_load_stops_the_start(self):
        bad = self.write("bad.json", json.dumps([{"match": {"urlPattern": "("}, "respond": {}}]))
        d = Daemon("--stubs", bad, wait=False).start()
        try:
            self.assertEqual(d.proc.wait(20), 1)
            self.assertIn("urlPattern", d.stderr_text())
        finally:
            d.close()


# --------------------------------------------------------------------------- durable jobs, attach, getJob
GET_JOB = ("jobId", "state", "durable", "restarts")


def _get_job_finished(t):
    job = key("gj")
    t.call("fetch", {"url": t.T + "/json", "jobId": job})
    r = t.call("getJob", {"jobId": job})
    t.keys(r, GET_JOB + ("result",))
    t.assertEqual((r["state"], r["durable"], r["restarts"], r["result"]["status"]), ("finished", False, 0, 200))
    t.assertNotIn("error", r)


def _get_job_failed(t):
    job = key("gjf")
    t.error("fetch", {"url": f"http://127.0.0.1:{closed_port()}/", "jobId": job, "retry": False}, -32001)
    r = t.call("getJob", {"jobId": job})
    t.assertEqual((r["state"], r["error"]["code"], r["error"]["data"]["kind"]), ("failed", -32001, "connect"))
    t.assertNotIn("result", r)


def _get_job_live_then_cancelled(t):
    job = key("gjc")
    rid = send_request(t.c, "fetch", {"url": t.T + "/slow-body?chunks=40&ms=50", "jobId": job})
    live = wait_for(lambda: t.call("getJob", {"jobId": job}), timeout=5)
    t.assertIn(live["state"], ("queued", "running"))
    t.assertNotIn("result", live)
    t.assertEqual(t.call("cancel", {"jobId": job}), {"cancelled": True})
    t.c.answer_for(rid)
    r = t.call("getJob", {"jobId": job})
    t.assertEqual((r["state"], r["error"]["code"]), ("cancelled", -32002))


def _get_job_waiting(t):
    job = key("gjw")
    rid = send_request(t.c, "fetch", {"url": t.T + f"/flaky/{job}?fail=5&retry-after=30", "jobId": job,
                                      "retry": {"maxAttempts": 3, "maxInterval": 30}})
    wait_for(lambda: t.call("getJob", {"jobId": job})["state"] == "waiting", timeout=10)
    t.call("cancel", {"jobId": job})
    t.c.answer_for(rid)


def _attach(t):
    job = key("at")
    with t.daemon.client() as owner:
        send_request(owner, "fetch", {"url": t.T + "/slow-body?chunks=6&ms=100", "jobId": job, "detach": True})
        t.job_listed(job)
    rid = send_request(t.c, "attach", {"jobId": job, "progress": True})
    answer = t.c.answer_for(rid, timeout=20)
    t.assertEqual((answer["result"]["jobId"], answer["result"]["status"]), (job, 200))
    t.assertTrue([n for n in t.c.notifications if n["method"] == "progress" and n["params"]["jobId"] == job])


def _attach_error_and_ended(t):
    job = key("ate")
    rid = send_request(t.c, "fetch", {"url": t.T + "/slow-headers?ms=600", "jobId": job, "timeout": 0.3,
                                      "retry": False})
    with t.daemon.client() as other:
        t.job_listed(job, client=other)
        e = t.error("attach", {"jobId": job}, -32001, client=other)
        t.assertEqual(e.data["kind"], "timeout")
        t.assertEqual(t.error("attach", {"jobId": job}, -32001, client=other).data["kind"], "timeout",
                      "an ended job is answered at once")
    t.c.answer_for(rid)


def _restart(t):
    job = key("dur")
    state = os.path.join(t.tmp, "state")
    p = t.path("restart.bin")
    url = t.T + f"/ranged/300000?etag=e1&key={job}&stall-after=100000"
    d = Daemon("--state-dir", state).start()
    try:
        c = d.client()
        send_request(c, "download", {"url": url, "path": p, "jobId": job, "durable": True})
        wait_for(lambda: os.path.exists(p + ".part") and os.path.getsize(p + ".part") >= 100000, timeout=10)
        d.stop(signal.SIGKILL)
    finally:
        d.close()
    with Daemon("--state-dir", state) as d2:
        c2 = d2.client()
        r = c2.call("attach", {"jobId": job}, timeout=30)
        t.assertEqual((r["status"], r["bytes"], r["resumed"]), (206, 300000, True), r)
        g = c2.call("getJob", {"jobId": job})
        t.assertEqual((g["state"], g["durable"], g["restarts"]), ("finished", True, 1), g)
    t.assertEqual(os.path.getsize(p), 300000)


def _restart_upload(t):
    job, k = key("upd"), key("uprec")
    state = os.path.join(t.tmp, "state")
    d = Daemon("--state-dir", state).start()
    try:
        send_request(d.client(), "upload", {"url": t.T + f"/record/{k}?ms=1500", "files": [{"content": "x"}],
                                            "jobId": job, "durable": True,
                                            "headers": {"Authorization": "Bearer Durable-Secret-8"}})
        wait_for(lambda: hits(k)["count"] == 1, timeout=10)
        d.stop(signal.SIGKILL)
    finally:
        d.close()
    stored = b"".join(open(os.path.join(state, n), "rb").read() for n in os.listdir(state) if n.startswith("jobs.db"))
    t.assertIn(job.encode(), stored)
    t.assertNotIn(b"Durable-Secret-8", stored)
    with Daemon("--state-dir", state) as d2:
        r = d2.client().call("attach", {"jobId": job}, timeout=30)
        t.assertEqual(r["status"], 200)
    t.assertEqual(hits(k)["count"], 2, "an upload that is not resumable is sent again from the start")


def _several_attachers(t):
    job = key("at2")
    rid = send_request(t.c, "fetch", {"url": t.T + "/slow-body?chunks=5&ms=100", "jobId": job})
    t.job_listed(job)
    clients = [t.daemon.client() for _ in range(2)]
    ids = [send_request(c, "attach", {"jobId": job}) for c in clients]
    t.assertEqual([c.answer_for(i, timeout=20)["result"]["status"] for c, i in zip(clients, ids)], [200, 200])
    t.assertEqual(t.c.answer_for(rid)["result"]["status"], 200)


def _last_1000(t):
    first = key("old")
    t.call("addStub", {"set": first, "respond": {}})
    t.call("fetch", {"url": "http://ring.test/", "stubs": first, "jobId": first})
    t.assertEqual(t.call("getJob", {"jobId": first})["state"], "finished")
    ids = [send_request(t.c, "fetch", {"url": "http://ring.test/", "stubs": first}) for _ in range(1000)]
    for i in ids:
        t.c.answer_for(i, timeout=30)
    t.invalid({"jobId": first}, "jobId", method="getJob")


DURABLE = [
    ("get_job_finished", _get_job_finished),
    ("get_job_failed", _get_job_failed),
    ("get_job_live_then_cancelled", _get_job_live_then_cancelled),
    ("get_job_waiting", _get_job_waiting),
    ("get_job_unknown", lambda t: t.invalid({"jobId": "no-such-job"}, "jobId", method="getJob")),
    ("attach_progress_and_result", _attach),
    ("attach_error_and_ended_job", _attach_error_and_ended),
    ("attach_unknown", lambda t: t.invalid({"jobId": "no-such-job"}, "jobId", method="attach")),
    ("durable_state_dir_and_restart", _restart),
    ("durable_upload_restart_sent_again_no_credential_stored", _restart_upload),
    ("attach_several_connections", _several_attachers),
    ("get_job_keeps_the_last_1000", _last_1000),
    ("durable_state_dir_default_home", lambda t: _durable_in(
        t, Daemon(env={"XDG_STATE_HOME": "", "HOME": t.path("home")}),
        os.path.join(t.tmp, "home", ".local", "state", "fetchd"))),
    ("durable_state_dir_default_xdg_state_home", lambda t: (
        env := {"XDG_STATE_HOME": os.path.join(t.tmp, "xdg")},
        _durable_in(t, Daemon(env=env), os.path.join(t.tmp, "xdg", "fetchd")))),
]


def _durable_in(t, daemon, state_dir):
    with daemon as d:
        d.client().call("download", {"url": t.T + "/bytes/10", "path": t.path(key("x")), "durable": True})
    t.assertTrue(os.path.exists(os.path.join(state_dir, "jobs.db")), os.listdir(t.tmp))


@cases(DURABLE)
class TestDurableJobs(V2Case):
    """getJob, attach, --state-dir and a durable download that survives kill -9."""


# --------------------------------------------------------------------------- cache
CACHE_STATS = ("entries", "bytes", "maxBytes", "hits", "misses", "revalidated", "collapsed")


class CacheCase(V2Case):
    EXTRA_ARGS = ("--cache-dir", "{base}/cache", "--cache-max-bytes", "10M")

    def origin(self, query="cc=max-age=60"):
        return f"{self.T}/cache-origin/{key('c')}?{query}"

    def got(self, url, mode=None, **extra):
        params = {"url": url, **extra}
        if mode:
            params["cache"] = mode
        return self.call("fetch", params)["cache"]

    def seen(self, url):
        k = url.split("/cache-origin/")[1].split("?")[0]
        return get_json(f"{self.T}/cache-origin-log/{k}")["count"]


def _sequence_of(t, query, modes, want, origin_count=None):
    url = t.origin(query)
    t.assertEqual([t.got(url, m) for m in modes], want)
    if origin_count is not None:
        t.assertEqual(t.seen(url), origin_count)


def _collapsed(t):
    url = t.origin("cc=max-age=60&ms=500")
    ids = [send_request(t.c, "fetch", {"url": url}) for _ in range(3)]
    got = sorted(t.c.answer_for(i, timeout=10)["result"]["cache"] for i in ids)
    t.assertEqual(got, ["collapsed", "collapsed", "miss"])
    t.assertEqual(t.seen(url), 1)


def _only_if_cached_empty(t):
    url = t.origin()
    r = t.call("fetch", {"url": url, "cache": "only-if-cached"})
    t.assertEqual((r["status"], r["cache"]), (504, "miss"))
    t.assertEqual(t.seen(url), 0)


def _stats(t):
    s = t.call("getCacheStats")
    t.keys(s, CACHE_STATS)
    for k in CACHE_STATS:
        t.assertIsInstance(s[k], int, k)
    t.assertEqual(s["maxBytes"], 10 * 1024 * 1024)
    url = t.origin()
    t.got(url), t.got(url)
    after = t.call("getCacheStats")
    t.assertEqual((after["hits"] - s["hits"], after["misses"] - s["misses"], after["entries"] - s["entries"]),
                  (1, 1, 1))
    t.assertGreater(after["bytes"], s["bytes"])


def _purge(t, how):
    a, b = t.origin(), t.origin()
    t.assertEqual([t.got(u) for u in (a, b, a, b)], ["miss", "miss", "hit", "hit"])  # both in the store
    params = {"url": a} if how == "url" else {"urlPrefix": t.T + "/cache-origin/"} if how == "prefix" else {}
    removed = t.call("purgeCache", params)["removed"]
    t.assertEqual(removed, 1) if how == "url" else t.assertGreaterEqual(removed, 2)
    t.assertEqual((t.got(a), t.got(b)), ("miss", "hit" if how == "url" else "miss"))


def _same_authorization(t):
    url = t.origin("cc=private,max-age=60")
    got = [t.got(url, headers={"Authorization": a}) for a in ("Bearer A", "Bearer B", "Bearer A", "Bearer B")]
    t.assertEqual(got, ["miss", "miss", "hit", "hit"])
    t.assertEqual(t.got(url), "miss", "no Authorization: not the answer given to one")


def _invalidation(t):
    url = t.origin()
    t.assertEqual([t.got(url), t.got(url)], ["miss", "hit"])
    t.call("fetch", {"url": url, "method": "POST", "body": "x"})
    t.assertEqual(t.got(url), "miss")


def _purge_right_after_the_answer(t):
    # An answer is written to the store after it is sent; a purge that comes meanwhile still holds.
    for _ in range(10):
        url = t.origin("cc=max-age=60&bytes=8000000")
        t.call("fetch", {"url": url, "responseBody": "none"})
        # removed: 1, or 0 when the answer was still being written (then it is dropped once written)
        t.assertIn(t.call("purgeCache", {"url": url}), ({"removed": 1}, {"removed": 0}))
        t.assertEqual(t.got(url, responseBody="none"), "miss")


CACHE = [
    ("cache_miss_then_hit", lambda t: _sequence_of(t, "cc=max-age=60", [None, None], ["miss", "hit"], 1)),
    ("cache_hit_members", lambda t: (url := t.origin(), t.got(url), t.assertEqual(
        [t.call("fetch", {"url": url})[k] for k in ("httpVersion", "attempts", "remoteAddress")],
        ["cache", 0, None]))),
    ("cache_revalidated", lambda t: _sequence_of(t, "cc=no-cache&etag=v1", [None, None], ["miss", "revalidated"], 2)),
    ("cache_stale_while_revalidate",
     lambda t: _sequence_of(t, "cc=max-age=0,stale-while-revalidate=60&etag=v1", [None, None], ["miss", "stale"])),
    ("cache_collapsed", _collapsed),
    ("cache_vary", lambda t: (url := t.origin("cc=max-age=60&vary=Accept-Language"), t.assertEqual(
        [t.got(url, headers={"Accept-Language": v}) for v in ("fr", "en", "fr", "en")],
        ["miss", "miss", "hit", "hit"]))),
    ("cache_stale_if_error", lambda t: _sequence_of(
        t, "cc=max-age=0,stale-if-error=60&etag=v1&then-status=500&no304=1", [None, None], ["miss", "stale"])),
    ("cache_must_revalidate", lambda t: _sequence_of(
        t, "cc=max-age=0,must-revalidate&etag=v1", [None, "force-cache"], ["miss", "revalidated"], 2)),
    ("cache_no_store_answer_not_stored", lambda t: _sequence_of(t, "cc=no-store", [None, None], ["miss", "miss"], 2)),
    ("cache_hit_has_age", lambda t: (url := t.origin(), t.got(url), t.assertRegex(
        t.call("fetch", {"url": url})["headers"].get("age", ""), r"^\d+$"))),
    ("cache_mode_default", lambda t: _sequence_of(t, "cc=max-age=60", ["default", "default"], ["miss", "hit"], 1)),
    ("cache_mode_no_store_bypass",
     lambda t: _sequence_of(t, "cc=max-age=60", ["no-store", "no-store", None], ["bypass", "bypass", "miss"], 3)),
    ("cache_mode_reload",
     lambda t: _sequence_of(t, "cc=max-age=60", [None, "reload", None], ["miss", "miss", "hit"], 2)),
    ("cache_mode_no_cache",
     lambda t: _sequence_of(t, "cc=max-age=60&etag=v1", [None, "no-cache"], ["miss", "revalidated"], 2)),
    ("cache_mode_force_cache",
     lambda t: _sequence_of(t, "cc=max-age=0&etag=v1", [None, "force-cache"], ["miss", "stale"], 1)),
    ("cache_mode_only_if_cached_stored",
     lambda t: _sequence_of(t, "cc=max-age=0&etag=v1", [None, "only-if-cached"], ["miss", "stale"], 1)),
    ("cache_mode_only_if_cached_nothing_504", _only_if_cached_empty),
    ("cache_upload_bypass", lambda t: t.assertEqual(
        t.call("upload", {"url": t.T + "/multipart-echo", "files": [{"content": "x"}]})["cache"], "bypass")),
    ("cache_same_authorization_only", _same_authorization),
    ("cache_invalidated_by_unsafe_method", _invalidation),
    ("cache_get_cache_stats", _stats),
    ("cache_purge_url", lambda t: _purge(t, "url")),
    ("cache_purge_url_prefix", lambda t: _purge(t, "prefix")),
    ("cache_purge_everything", lambda t: _purge(t, "all")),
    ("cache_purge_right_after_the_answer", _purge_right_after_the_answer),
    ("cache_metrics", lambda t: (t.got(t.origin()), t.assertRegex(
        t.call("getMetrics")["text"], r'(?m)^fetchd_cache_requests_total\{outcome="miss"\} [1-9]'))),
    ("cache_dir_holds_the_store", lambda t: t.assertTrue(os.listdir(os.path.join(t.base, "cache")))),
]


@cases(CACHE)
class TestCache(CacheCase):
    """--cache-dir, --cache-max-bytes, the request's cache modes, the result's cache values,
    getCacheStats and purgeCache."""


class TestNoCache(V2Case):
    """--no-cache (the harness's default for a daemon): no cache member, the cache methods refuse."""

    def test_no_cache_result_has_no_cache_member(self):
        self.assertNotIn("cache", self.call("fetch", {"url": self.T + "/json"}))

    def test_no_cache_methods_not_allowed(self):
        for method in ("getCacheStats", "purgeCache"):
            self.error(method, {}, -32004)

    def test_default_cache_dir_home(self):
        home = os.path.join(self.tmp, "home")
        with Daemon("--cache-max-bytes", "1M", env={"XDG_CACHE_HOME": "", "HOME": home}) as d:
            self.assertEqual(d.client().call("getCacheStats")["directory"], os.path.join(home, ".cache", "fetchd"))

    def test_default_cache_dir_xdg_cache_home(self):
        home = os.path.join(self.tmp, "xdg-cache")
        with Daemon("--cache-max-bytes", "1M", env={"XDG_CACHE_HOME": home}) as d:
            r = d.client().call("fetch", {"url": self.T + f"/cache-origin/{key('x')}?cc=max-age=60"})
            self.assertEqual(r["cache"], "miss")
            self.assertEqual(d.client().call("getCacheStats")["maxBytes"], 1024 * 1024)
        self.assertTrue(os.listdir(os.path.join(home, "fetchd")))


# --------------------------------------------------------------------------- shared limits through Redis
@unittest.skipUnless(REDIS, "redis-server is not installed (make deps installs it)")
class TestSharedLimits(V2Case):
    """--redis URL, setRateLimit's shared / onRedisDown / localShare, getRateLimits' shared and
    backend, getStatus' redis."""

    @classmethod
    def setUpClass(cls):
        from test_redis import RedisServer
        cls.redis = RedisServer().start()
        cls.EXTRA_ARGS = ("--redis", cls.redis.url)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.redis.close()

    def entry(self, host):
        return next(e for e in self.call("getRateLimits")["limits"] if e["host"] == host)

    def share(self, host=None, **params):
        host = host or key("h") + ".test"
        return host, self.call("setRateLimit", {"host": host, "shared": True, **params})

    def test_redis_status_up(self):
        self.assertEqual(self.call("getStatus")["redis"], "up")

    def test_redis_status_null_without_redis(self):
        with Daemon() as d:
            self.assertIsNone(d.client().call("getStatus")["redis"])

    def test_shared_result_members(self):
        host, r = self.share(requestsPerSecond=5)
        self.assertEqual((r["shared"], r["onRedisDown"], r["localShare"]), (True, "local", 1.0), r)

    def test_shared_get_rate_limits_members(self):
        host, _ = self.share(requestsPerSecond=5)
        e = self.entry(host)
        self.assertEqual((e["shared"], e["backend"]), (True, "redis"), e)
        plain = self.call("setRateLimit", {"host": key("p") + ".test", "requestsPerSecond": 5})
        e = self.entry(plain["host"])
        self.assertEqual((e["shared"], e["backend"]), (False, "local"), e)

    def test_shared_default_false(self):
        r = self.call("setRateLimit", {"host": key("d") + ".test", "maxConcurrent": 3})
        self.assertIs(r["shared"], False)

    def test_on_redis_down_wait(self):
        self.assertEqual(self.share(onRedisDown="wait")[1]["onRedisDown"], "wait")

    def test_on_redis_down_other_refused(self):
        self.invalid({"host": "x.test", "shared": True, "onRedisDown": "panic"}, "onRedisDown", method="setRateLimit")

    def test_local_share(self):
        self.assertEqual(self.share(localShare=0.25)[1]["localShare"], 0.25)

    def test_local_share_out_of_range(self):
        self.invalid({"host": "x.test", "shared": True, "localShare": 0}, "localShare", method="setRateLimit")

    def test_shared_without_redis_refused(self):
        with Daemon() as d:
            e = self.error("setRateLimit", {"host": "x.test", "shared": True}, -32602, client=d.client())
            self.assertEqual(e.data["field"], "shared")

    def test_shared_limit_counted_in_redis(self):
        host = f"127.0.0.1:{self.port}"
        before = self.redis.command("DBSIZE")
        self.call("setRateLimit", {"host": host, "shared": True, "requestsPerSecond": 50, "burst": 5})
        try:
            self.call("fetch", {"url": self.T + "/json"})
            self.assertNotEqual(self.redis.command("DBSIZE"), b":0\r\n", before)
        finally:
            self.call("setRateLimit", {"host": host, "shared": False, "requestsPerSecond": None, "burst": None})

    def test_shared_rate_holds_across_two_daemons(self):
        host = f"127.0.0.1:{self.port}"
        k = key("two")
        with Daemon("--redis", self.redis.url) as other:
            c2 = other.client()
            for c in (self.c, c2):
                c.call("setRateLimit", {"host": host, "shared": True, "requestsPerSecond": 4, "burst": 1})
            try:
                ids = [(c, send_request(c, "fetch", {"url": self.T + f"/record/{k}"})) for c in (self.c, c2) * 3]
                for c, i in ids:
                    self.assertEqual(c.answer_for(i, timeout=20)["result"]["status"], 200)
            finally:
                for c in (self.c, c2):
                    c.call("setRateLimit", {"host": host, "shared": False, "requestsPerSecond": None})
        times = hits(k)["times"]
        self.assertGreaterEqual(times[-1] - times[0], 5 / 4 * 0.9, "6 requests at 4/s shared take >= 1.25 s")

    def test_redis_unix_socket_url(self):
        with Daemon("--redis", "unix://" + self.redis.socket) as d:
            self.assertEqual(wait_for(lambda: d.client().call("getStatus")["redis"] == "up", timeout=5), True)

    def test_redis_down_status_and_backend(self):
        from test_redis import RedisServer
        r = RedisServer().start()
        try:
            with Daemon("--redis", r.url) as d:
                c = d.client()
                c.call("setRateLimit", {"host": "down.test", "shared": True, "requestsPerSecond": 5})
                r.stop()
                wait_for(lambda: c.call("getStatus")["redis"] == "down", timeout=15)
                e = next(e for e in c.call("getRateLimits")["limits"] if e["host"] == "down.test")
                self.assertEqual(e["backend"], "local", e)
                c.call("setRateLimit", {"host": "wait.test", "shared": True, "onRedisDown": "wait"})
                e = next(e for e in c.call("getRateLimits")["limits"] if e["host"] == "wait.test")
                self.assertEqual(e["backend"], "redis", e)
        finally:
            r.close()


# --------------------------------------------------------------------------- operations
METRIC_NAMES = [  # what the contract lists, by the name operations.md gives it
    ("request counts and duration by host and status class", "http_client_request_duration_seconds"),
    ("active requests", "http_client_active_requests"),
    ("queued requests", "fetchd_queued_requests"),
    ("open connections", "http_client_open_connections"),
    ("retries", "fetchd_retries_total"),
    ("Retry-After pauses", "fetchd_retry_after_pauses_total"),
    ("time waited for limits", "fetchd_host_limit_wait_seconds_total"),
    ("bytes sent", "fetchd_sent_bytes_total"),
    ("bytes received", "fetchd_received_bytes_total"),
    ("auth fetches", "fetchd_auth_credential_fetches_total"),
    ("auth failures", "fetchd_auth_credential_failures_total"),
    ("stub hits", "fetchd_stub_hits_total"),
    ("stub misses", "fetchd_stub_misses_total"),
]
JOB_EVENT = ("jobId", "kind", "url", "event", "connection")


class Events:
    """A subscribed connection: its jobEvents, by job."""

    def __init__(self, t):
        self.t = t
        self.c = t.daemon.client()
        t.assertEqual(self.c.call("subscribe", {"jobs": True}), {"subscribed": True})

    def of(self, job, until, timeout=10):
        out = []

        def seen():
            while True:
                try:
                    m = self.c.recv(timeout=0.05)
                except TimeoutError:
                    break
                if m.get("method") == "jobEvent":
                    self.c.notifications.append(m)
            out[:] = [n["params"] for n in self.c.notifications if n["params"]["jobId"] == job]
            return any(e["event"] == until for e in out)
        wait_for(seen, timeout=timeout, message=f"no {until} event for {job}: {out}")
        return out


def _events(t, params, until, method="fetch", expect_error=False):
    ev = Events(t)
    job = key("ev")
    with t.daemon.client() as other:
        rid = send_request(other, method, {**params, "jobId": job})
        answer = other.answer_for(rid, timeout=30)
        t.assertEqual("error" in answer, expect_error, answer)
    got = ev.of(job, until)
    ev.c.close()
    for e in got:
        t.keys(e, JOB_EVENT)
        t.assertEqual(e["kind"], method)
        t.assertEqual(e["connection"]["pid"], os.getpid())
        t.assertIn("python", e["connection"]["command"])
    return [e["event"] for e in got], got


def _events_finished(t):
    names, got = _events(t, {"url": t.T + "/json"}, "finished")
    t.assertEqual(names, ["queued", "started", "finished"])
    t.assertEqual(got[-1]["status"], 200)
    t.assertEqual(got[0]["url"], t.T + "/json")


def _events_cancelled(t):
    ev = Events(t)
    job = key("evc")
    rid = send_request(t.c, "fetch", {"url": t.T + "/slow-body?chunks=40&ms=50", "jobId": job})
    ev.of(job, "started")
    t.call("cancel", {"jobId": job})
    t.c.answer_for(rid)
    t.assertEqual(ev.of(job, "cancelled")[-1]["event"], "cancelled")
    ev.c.close()


def _unsubscribe(t):
    ev = Events(t)
    t.assertEqual(ev.c.call("unsubscribe"), {"subscribed": False})
    ev.c.notifications.clear()
    t.call("fetch", {"url": t.T + "/json"})
    time.sleep(0.2)
    with t.assertRaises(TimeoutError):
        while True:
            m = ev.c.recv(timeout=0.2)
            if m.get("method") == "jobEvent":
                break
    ev.c.close()


def _metrics_text(t, text):
    for what, name in METRIC_NAMES:
        t.assertRegex(text, rf"(?m)^# TYPE {name} ", what)


def _metrics_hosts_folded(t):
    with Daemon() as d:
        c = d.client()
        for i in range(102):
            name = f"h{i}.fold.invalid"
            c.call("fetch", {"url": f"http://{name}:{t.port}/json", "resolve": {f"{name}:{t.port}": "127.0.0.1"}})
        text = c.call("getMetrics")["text"]
    t.assertIn('server_address="other"', text)
    t.assertIn('server_address="h0.fold.invalid"', text)
    t.assertNotIn('server_address="h101.fold.invalid"', text)


def _metrics_listen(t):
    port = closed_port()
    with Daemon("--metrics-listen", f"127.0.0.1:{port}") as d:
        d.client().call("fetch", {"url": t.T + "/json"})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            t.assertEqual(r.status, 200)
            _metrics_text(t, r.read().decode())
    d = Daemon("--metrics-listen", f"0.0.0.0:{closed_port()}", wait=False).start()
    try:
        t.assertEqual(d.proc.wait(20), 1, "a non-loopback address is refused")
    finally:
        d.close()


def _config(t):
    jar = t.write("cookies.txt", f"127.0.0.1\tFALSE\t/\tFALSE\t0\tfromfile\tv1\n")
    logs = t.path("logs")
    cfg = t.write("config.json", json.dumps({
        "rateLimits": [{"host": "config.test", "maxConcurrent": 3, "requestsPerSecond": 7, "burst": 2}],
        "auth": [{"host": "config.test", "type": "bearer", "token": "x"}],
        "cookieJars": {"default": {"file": jar}},
        "logging": {"enabled": True, "directory": logs},
        "maxPerHost": 6,
    }))
    with Daemon("--config", cfg) as d:
        c = d.client()
        limits = {e["host"]: e for e in c.call("getRateLimits")["limits"]}
        t.assertEqual([limits["config.test"][k] for k in ("maxConcurrent", "requestsPerSecond", "burst")], [3, 7, 2])
        t.assertEqual(limits["*"]["maxConcurrent"], 6)
        t.assertEqual([r["host"] for r in c.call("getAuth")["rules"]], ["config.test"])
        t.assertEqual([k["name"] for k in c.call("getCookies", {"url": t.T + "/"})["cookies"]], ["fromfile"])
        t.assertEqual(c.call("getLogging")["enabled"], True)
        t.assertEqual(c.call("getLogging")["directory"], logs)


def _config_cache_and_redis(t):
    from test_redis import RedisServer
    cache = t.path("cfg-cache")
    r = RedisServer().start() if REDIS else None
    try:
        cfg = t.write("config.json", json.dumps({"cache": {"dir": cache, "maxBytes": 2 * 1024 * 1024},
                                                 **({"redis": r.url} if r else {})}))
        with Daemon("--config", cfg) as d:
            c = d.client()
            t.assertEqual(c.call("getCacheStats")["maxBytes"], 2 * 1024 * 1024)
            if r:
                t.assertEqual(c.call("getStatus")["redis"], "up")
    finally:
        if r:
            r.close()


def _notify(t):
    from test_systemd import NotifySocket
    notify = NotifySocket(t.tmp)
    try:
        with Daemon(env={"NOTIFY_SOCKET": notify.path}) as d:
            wait_for(lambda: notify.saw("READY=1"), timeout=10, message=str(notify.messages))
            t.assertEqual(d.stop(), 0)
            t.assertTrue(notify.saw("STOPPING=1"), notify.messages)
    finally:
        notify.close()


@unittest.skipUnless(ACTIVATE, "systemd-socket-activate is not installed")
def _socket_activation(t):
    sock = t.path("activated.sock")
    proc = subprocess.Popen([ACTIVATE, "-l", sock, Daemon().bin, "--no-cache"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(sock), timeout=10)
        c = wait_for(lambda: _connect(sock), timeout=10)
        t.assertEqual(c.call("ping", timeout=20), "pong")
        c.close()
        proc.send_signal(signal.SIGTERM)
        t.assertEqual(proc.wait(20), 0)
        t.assertTrue(os.path.exists(sock), "systemd owns the socket: it is left")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _connect(path):
    try:
        return RPCClient(path)
    except ConnectionRefusedError:
        return None


def _contrib(t):
    with open(os.path.join(REPO, "contrib", "fetchd.socket")) as f:
        t.assertRegex(f.read(), r"(?m)^ListenStream=")
    with open(os.path.join(REPO, "contrib", "fetchd.service")) as f:
        t.assertRegex(f.read(), r"(?m)^ExecStart=.*fetchd")


OPERATIONS = [
    ("metrics_prometheus", lambda t: _metrics_text(t, t.call("getMetrics", {"format": "prometheus"})["text"])),
    ("metrics_default_prometheus", lambda t: t.assertEqual(sorted(t.call("getMetrics")), ["text"])),
    ("metrics_json", lambda t: t.assertEqual(
        next(m["type"] for m in t.call("getMetrics", {"format": "json"})["metrics"]
             if m["name"] == "http_client_request_duration_seconds"), "histogram")),
    ("metrics_json_names", lambda t: t.assertLessEqual(
        {n for _, n in METRIC_NAMES}, {m["name"] for m in t.call("getMetrics", {"format": "json"})["metrics"]})),
    ("metrics_format_other_refused", lambda t: t.invalid({"format": "xml"}, "format", method="getMetrics")),
    ("metrics_hosts_beyond_100_folded", _metrics_hosts_folded),
    ("metrics_listen", _metrics_listen),
    ("subscribe_job_events_finished", _events_finished),
    ("subscribe_job_event_failed", lambda t: t.assertEqual(_events(
        t, {"url": f"http://127.0.0.1:{closed_port()}/", "retry": False}, "failed", expect_error=True)[0],
        ["queued", "started", "failed"])),
    ("subscribe_job_event_retrying", lambda t: t.assertIn("retrying", _events(
        t, {"url": t.T + f"/flaky/{key('r')}?fail=1&retry-after=0", "retry": {"maxAttempts": 2}}, "finished")[0])),
    ("subscribe_job_event_cancelled", _events_cancelled),
    ("subscribe_job_event_kind_download", lambda t: _events(
        t, {"url": t.T + "/bytes/10", "path": t.path("ev.bin")}, "finished", method="download")),
    ("subscribe_job_event_kind_upload", lambda t: _events(
        t, {"url": t.T + "/multipart-echo", "files": [{"content": "x"}]}, "finished", method="upload")),
    ("unsubscribe", _unsubscribe),
    ("config_file", _config),
    ("config_file_cache_and_redis", _config_cache_and_redis),
    ("systemd_notify_ready_stopping", _notify),
    ("systemd_socket_activation", _socket_activation),
    ("contrib_socket_and_service", _contrib),
]


@cases(OPERATIONS)
class TestOperations(V2Case):
    """getMetrics, --metrics-listen, subscribe/jobEvent/unsubscribe, --config, systemd."""


# --------------------------------------------------------------------------- the shell client, version 2
class Ctl(V2Case):
    EXTRA_ARGS = ("--cache-dir", "{base}/cache")

    def ctl(self, *args, cwd=None, stdin=subprocess.DEVNULL, timeout=30, env=None):
        e = dict(os.environ)
        e.pop("FETCHD_SOCKET", None)
        e.update(env or {})
        try:
            return subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, *args], capture_output=True,
                                  timeout=timeout, cwd=cwd or self.tmp, stdin=stdin, env=e)
        except subprocess.TimeoutExpired:
            self.fail(f"fetchctl {args} did not finish within {timeout}s")

    def ok(self, *args, **kw):
        r = self.ctl(*args, **kw)
        self.assertEqual(r.returncode, 0, f"fetchctl {args}: exit {r.returncode}, stderr {r.stderr[-800:]!r}")
        return r

    def echo(self, *args):
        return json.loads(self.ok("fetch", self.T + "/echo", *args).stdout)

    def header(self, *args, name):
        return header_values(self.echo(*args), name)

    def exit_code(self, *args, **kw):
        return self.ctl(*args, **kw).returncode

    def read(self, name, mode="r"):
        with open(self.path(name), mode) as f:
            return f.read()


def _w(var, *args, url="/json"):
    """-w with one variable: what fetchctl printed for it."""
    return lambda t: t.ctl("fetch", t.T + url, "-o", "/dev/null", "-w", var, *args).stdout.decode()


WRITE_OUT = [  # variable, what it prints (from a function of the case), the check
    ("http_code", _w("%{http_code}"), lambda t, out: t.assertEqual(out, "200")),
    ("response_code", _w("%{response_code}", url="/status/404"), lambda t, out: t.assertEqual(out, "404")),
    ("url_effective", _w("%{url_effective}", "-L", url="/redirect/1"),
     lambda t, out: t.assertEqual(out, t.T + "/redirect/0")),
    ("content_type", _w("%{content_type}"), lambda t, out: t.assertEqual(out, "application/json")),
    ("size_download", _w("%{size_download}"), lambda t, out: t.assertEqual(out, "34")),
    ("size_upload", _w("%{size_upload}", "-d", "abcde", url="/echo"), lambda t, out: t.assertEqual(out, "5")),
    ("time_total", _w("%{time_total}"), lambda t, out: t.assertRegex(out, r"^\d+\.\d{6}$")),
    ("time_namelookup", _w("%{time_namelookup}"), lambda t, out: t.assertRegex(out, r"^\d+\.\d{6}$")),
    ("time_connect", _w("%{time_connect}"), lambda t, out: t.assertRegex(out, r"^\d+\.\d{6}$")),
    ("time_appconnect", _w("%{time_appconnect}"), lambda t, out: t.assertRegex(out, r"^\d+\.\d{6}$")),
    ("time_starttransfer", _w("%{time_starttransfer}"), lambda t, out: t.assertRegex(out, r"^\d+\.\d{6}$")),
    ("num_redirects", _w("%{num_redirects}", "-L", url="/redirect/2"), lambda t, out: t.assertEqual(out, "2")),
    ("remote_ip", _w("%{remote_ip}"), lambda t, out: t.assertEqual(out, "127.0.0.1")),
    ("header_json", _w("%{header_json}"),
     lambda t, out: t.assertEqual(json.loads(out)["content-type"], ["application/json"])),
    ("json", _w("%{json}"), lambda t, out: t.assertEqual(json.loads(out)["http_code"], 200)),
    ("exitcode", lambda t: t.ctl("fetch", f"http://127.0.0.1:{closed_port()}/", "-s", "-w", "%{exitcode}")
     .stdout.decode(), lambda t, out: t.assertEqual(out, "7")),
    ("errormsg", lambda t: t.ctl("fetch", f"http://127.0.0.1:{closed_port()}/", "-s", "-w", "%{errormsg}")
     .stdout.decode(), lambda t, out: t.assertTrue(out.strip())),
    ("newline", _w("a\\nb"), lambda t, out: t.assertEqual(out, "a\nb")),
    ("write_out_long", _w("%{http_code}", "--write-out", "%{http_code}!"), lambda t, out: t.assertEqual(out, "200!")),
]


def _cookie_file_in(t):
    f = t.write("in.txt", f"127.0.0.1\tFALSE\t/\tFALSE\t0\tfromfile\tv1\n")
    t.assertEqual(t.header("-b", f, name="Cookie"), ["fromfile=v1"])


def _cookie_jar_out(t, flag):
    out = t.path("out.txt")
    t.ok("fetch", t.T + "/set-cookie?written=w1", flag, out, "-o", "/dev/null")
    t.assertRegex(t.read("out.txt"), r"(?m)^127\.0\.0\.1\tFALSE\t/\tFALSE\t0\twritten\tw1$")


def _named_jar(t):
    jar = key("jar")
    t.ok("fetch", t.T + "/set-cookie?named=n1", "--jar", jar, "-o", "/dev/null")
    t.assertEqual([c["name"] for c in t.call("getCookies", {"cookieJar": jar})["cookies"]], ["named"])
    t.assertEqual(t.header("--jar", jar, name="Cookie"), ["named=n1"])


def _no_cookies_by_default(t):
    name = key("nc").replace("-", "")
    t.ok("fetch", t.T + f"/set-cookie?{name}=1", "-o", "/dev/null")
    t.assertNotIn(name, json.dumps(t.call("getCookies", {"cookieJar": "default"})))


def _no_retry_by_default(t):
    k = key("nr")
    r = t.ok("fetch", t.T + f"/flaky/{k}?fail=1&retry-after=0")
    t.assertEqual((r.stdout, hits(k)["count"]), (b"status 503", 1))


def _retry(t, *flags, fail="1&retry-after=0", want=b"ok after 1"):
    k = key("rt")
    r, took = t.timed(lambda: t.ok("fetch", t.T + f"/flaky/{k}?fail={fail}", *flags))
    t.assertEqual(r.stdout, want)
    return took, hits(k)["count"]


def _mtls_ctl(t):
    url, server_cert, client_cert, client_key = mtls()
    r = t.ok("fetch", url, "--cacert", server_cert, "--cert", client_cert, "--key", client_key)
    t.assertEqual(json.loads(r.stdout), {"client": "fetchd-client"})


def _proxy_ctl(t, flag):
    r = t.ok("fetch", "http://contract-ctl-proxy.invalid/p", flag, f"http://127.0.0.1:{http_proxy()}")
    t.assertEqual(r.stdout, b"via proxy")


def _several_urls(t):
    r = t.ok("fetch", t.N + "/small.txt", t.T + "/json")
    t.assertEqual(r.stdout, SMALL_TXT.encode() + b'{"hello": "world", "n": [1, 2, 3]}')


def _config_file(t):
    cfg = t.write("curl.cfg", f'url = "{t.T}/echo"\nheader = "X-From-Config: yes"\n-A "cfg-agent"\n')
    echo = json.loads(t.ok("fetch", "-K", cfg).stdout)
    t.assertEqual((header_values(echo, "X-From-Config"), header_values(echo, "User-Agent")),
                  (["yes"], ["cfg-agent"]))


def _headers_from_file(t):
    f = t.write("headers.txt", "X-One: 1\nX-Two: 2\n")
    echo = t.echo("-H", "@" + f)
    t.assertEqual((header_values(echo, "X-One"), header_values(echo, "X-Two")), (["1"], ["2"]))


def _include(t, flag):
    out = t.ok("fetch", t.T + "/json", flag).stdout
    t.assertTrue(out.startswith(b"HTTP/1.1 200"), out[:100])
    t.assertTrue(out.endswith(b'\r\n\r\n{"hello": "world", "n": [1, 2, 3]}'), out[-100:])


def _head(t, flag):
    out = t.ok("fetch", t.N + "/small.txt", flag).stdout
    t.assertTrue(out.startswith(b"HTTP/1.1 200"), out[:100])
    t.assertNotIn(b"0123456789", out)


def _dump_header(t, flag):
    r = t.ok("fetch", t.T + "/json", flag, t.path("h.txt"))
    t.assertTrue(t.read("h.txt").startswith("HTTP/1.1 200"))
    t.assertEqual(r.stdout, b'{"hello": "world", "n": [1, 2, 3]}')


def _verbose(t, flag):
    err = t.ok("fetch", t.T + "/json", flag, "-o", "/dev/null").stderr.decode()
    t.assertRegex(err, r"(?m)^> GET /json HTTP/1\.1")
    t.assertRegex(err, r"(?m)^< HTTP/1\.1 200")


def _upload_file(t, flag):
    f = t.write("put.txt", "put body")
    echo = json.loads(t.ok("fetch", t.T + "/echo", flag, f).stdout)
    t.assertEqual((echo["method"], echo["body"]), ("PUT", "put body"))


def _output(t, *flags, name="o.txt"):
    t.ok("fetch", t.N + "/small.txt", *flags)
    t.assertEqual(t.read(name), SMALL_TXT)


def _big_output(t):
    t.ok("fetch", t.N + "/big.bin", "-o", t.path("big.bin"))
    t.assertTrue(t.read("big.bin", "rb") == big_bin())


def _ctl_proto(t, flag):
    base, resolve = tls_name(t)
    (entry, address), = resolve.items()
    return t.ok("fetch", base + "/proto", "-k", flag, "--resolve", f"{entry}:{address}").stdout


def _limit_rate(t):
    r, took = t.timed(lambda: t.ok("fetch", t.T + "/bytes/150000", "--limit-rate", "100K", "-o", "/dev/null"))
    t.assertGreaterEqual(took, 1.0)


CURL_FLAGS = [
    ("d_posts_form", lambda t: t.assertEqual(
        [(e := t.echo("-d", "a=1&b=2"))["method"], header_values(e, "Content-Type"), e["body"]],
        ["POST", ["application/x-www-form-urlencoded"], "a=1&b=2"])),
    ("G_puts_data_in_query", lambda t: t.assertEqual(
        [(e := t.echo("-G", "-d", "a=1"))["method"], e["query"]], ["GET", "a=1"])),
    ("get_long", lambda t: t.assertEqual(t.echo("--get", "-d", "x=2")["query"], "x=2")),
    ("i_include", lambda t: _include(t, "-i")),
    ("include_long", lambda t: _include(t, "--include")),
    ("I_head", lambda t: _head(t, "-I")),
    ("head_long", lambda t: _head(t, "--head")),
    ("D_dump_header", lambda t: _dump_header(t, "-D")),
    ("dump_header_long", lambda t: _dump_header(t, "--dump-header")),
    ("f_fail", lambda t: t.assertEqual((r := t.ctl("fetch", t.T + "/status/404", "-f"), r.returncode, r.stdout)[1:],
                                       (22, b""))),
    ("fail_long", lambda t: t.assertEqual(t.exit_code("fetch", t.T + "/status/404", "--fail", "-s"), 22)),
    ("fail_with_body", lambda t: t.assertEqual(
        (r := t.ctl("fetch", t.T + "/status/404", "--fail-with-body"), r.returncode, r.stdout)[1:],
        (22, b"status 404"))),
    ("o_output", lambda t: _output(t, "-o", t.path("o.txt"))),
    ("o_dash_is_stdout", lambda t: t.assertEqual(t.ok("fetch", t.N + "/small.txt", "-o", "-").stdout,
                                                 SMALL_TXT.encode())),
    ("o_file_streamed_whatever_its_size", _big_output),
    ("O_remote_name", lambda t: _output(t, "-O", name="small.txt")),
    ("remote_name_long", lambda t: _output(t, "--remote-name", name="small.txt")),
    ("create_dirs", lambda t: _output(t, "-o", t.path("a/b/c.txt"), "--create-dirs", name="a/b/c.txt")),
    ("T_upload_file", lambda t: _upload_file(t, "-T")),
    ("upload_file_long", lambda t: _upload_file(t, "--upload-file")),
    ("u_user", lambda t: t.assertEqual(t.header("-u", "ann:pw", name="Authorization"),
                                       ["Basic " + base64.b64encode(b"ann:pw").decode()])),
    ("A_user_agent", lambda t: t.assertEqual(t.header("-A", "agent/1", name="User-Agent"), ["agent/1"])),
    ("e_referer", lambda t: t.assertEqual(t.header("-e", "http://ref.test/", name="Referer"), ["http://ref.test/"])),
    ("referer_long", lambda t: t.assertEqual(t.header("--referer", "http://r.test/", name="Referer"),
                                             ["http://r.test/"])),
    ("b_cookie_data", lambda t: t.assertEqual(t.header("-b", "x=1; y=2", name="Cookie"), ["x=1; y=2"])),
    ("cookie_long", lambda t: t.assertEqual(t.header("--cookie", "z=3", name="Cookie"), ["z=3"])),
    ("b_cookie_file", _cookie_file_in),
    ("c_cookie_jar_file", lambda t: _cookie_jar_out(t, "-c")),
    ("cookie_jar_long_is_a_file", lambda t: _cookie_jar_out(t, "--cookie-jar")),
    ("jar_named_daemon_jar", _named_jar),
    ("no_cookies_unless_asked", _no_cookies_by_default),
    ("k_insecure", lambda t: t.assertEqual(t.ok("fetch", t.S + "/small.txt", "-k").stdout, SMALL_TXT.encode())),
    ("insecure_long", lambda t: t.assertEqual(t.ok("fetch", t.S + "/small.txt", "--insecure").stdout,
                                              SMALL_TXT.encode())),
    ("cacert", lambda t: t.assertEqual(t.ok("fetch", t.S + "/small.txt", "--cacert", t.srv.ca_file).stdout,
                                       SMALL_TXT.encode())),
    ("cert_key", _mtls_ctl),
    ("x_proxy", lambda t: _proxy_ctl(t, "-x")),
    ("proxy_long", lambda t: _proxy_ctl(t, "--proxy")),
    ("noproxy", lambda t: t.assertEqual(t.ok("fetch", t.T + "/json", "-x", f"http://127.0.0.1:{closed_port()}",
                                             "--noproxy", "127.0.0.1").stdout, b'{"hello": "world", "n": [1, 2, 3]}')),
    ("resolve", lambda t: t.assertEqual(json.loads(t.ok(
        "fetch", f"http://ctl-res.invalid:{t.port}/echo", "--resolve", f"ctl-res.invalid:{t.port}:127.0.0.1").stdout)
        ["path"], "/echo")),
    ("http1_1", lambda t: t.assertEqual(_ctl_proto(t, "--http1.1"), b"HTTP/1.1")),
    ("http2", lambda t: t.assertEqual(_ctl_proto(t, "--http2"), b"HTTP/2.0")),
    ("r_range",
     lambda t: t.assertEqual(t.ok("fetch", t.N + "/small.txt", "-r", "0-9").stdout, SMALL_TXT[:10].encode())),
    ("range_long", lambda t: t.assertEqual(t.ok("fetch", t.N + "/small.txt", "--range", "95-").stdout,
                                           SMALL_TXT[95:].encode())),
    ("limit_rate", _limit_rate),
    ("m_max_time_whole_command", lambda t: t.assertLess(t.timed(lambda: t.assertEqual(
        t.exit_code("fetch", t.T + "/slow-headers?ms=5000", "-m", "0.5", "-s"), 28))[1], 3)),
    ("connect_timeout", lambda t: t.assertEqual(t.ok("fetch", t.T + "/json", "--connect-timeout", "5").returncode, 0)),
    ("retry_off_unless_asked", _no_retry_by_default),
    ("retry", lambda t: t.assertEqual(_retry(t, "--retry", "2")[1], 2)),
    ("retry_delay", lambda t: t.assertLess(_retry(t, "--retry", "2", "--retry-delay", "0",
                                                  fail="1&status=500")[0], 0.9)),
    ("retry_max_time", lambda t: t.assertLess(_retry(t, "--retry", "5", "--retry-max-time", "1",
                                                     fail="100&retry-after=3", want=b"status 503")[0], 2.5)),
    ("retry_all_errors", lambda t: t.assertEqual(_retry(t, "--retry", "1", "--retry-delay", "0", "-f",
                                                        "--retry-all-errors", fail="1&status=404")[1], 2)),
    ("L_follows", lambda t: t.assertEqual(t.ok("fetch", t.T + "/redirect/2", "-L").stdout, b"done")),
    ("location_long", lambda t: t.assertEqual(t.ok("fetch", t.T + "/redirect/1", "--location").stdout, b"done")),
    ("redirect_is_the_answer_without_L", lambda t: t.assertEqual(t.ok("fetch", t.T + "/redirect/1").stdout,
                                                                 b"redirect to 0")),
    ("max_redirs", lambda t: t.assertEqual(t.exit_code("fetch", t.T + "/redirect/3", "-L", "--max-redirs", "1", "-s"),
                                           47)),
    ("s_silent", lambda t: t.assertEqual((r := t.ctl("fetch", f"http://127.0.0.1:{closed_port()}/", "-s"),
                                          r.returncode, r.stderr)[1:], (7, b""))),
    ("S_show_error", lambda t: t.assertTrue(t.ctl("fetch", f"http://127.0.0.1:{closed_port()}/", "-sS").stderr)),
    ("v_verbose", lambda t: _verbose(t, "-v")),
    ("verbose_long", lambda t: _verbose(t, "--verbose")),
    ("compressed", lambda t: t.assertEqual(t.ok("fetch", t.T + "/gzip", "--compressed").stdout,
                                           ("hello gzip " * 100).encode())),
    ("H_at_file", _headers_from_file),
    ("several_urls", _several_urls),
    ("K_config", _config_file),
    ("config_long", lambda t: t.assertEqual(json.loads(t.ok(
        "fetch", "--config", t.write("c.cfg", f'url = "{t.T}/echo"\n')).stdout)["path"], "/echo")),
    ("combined_short_flags", lambda t: t.assertEqual(t.ok("fetch", t.T + "/redirect/1", "-fsSL").stdout, b"done")),
    ("combined_short_flags_fail", lambda t: t.assertEqual(t.exit_code("fetch", t.T + "/status/500", "-fsSL"), 22)),
] + [(f"w_{name}", lambda t, g=get, c=check: c(t, g(t))) for name, get, check in WRITE_OUT]


def _cancelled_exit_5(t):
    job = key("ctl5")
    p = subprocess.Popen([FETCHCTL, "--socket", t.daemon.socket_path, "fetch", t.T + "/slow-body?chunks=50&ms=100",
                          "--job-id", job, "-s", "-o", "/dev/null"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        t.job_listed(job)
        t.call("cancel", {"jobId": job})
        t.assertEqual(p.wait(20), 5)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


EXIT_CODES = [
    ("exit_6_resolve", lambda t: ("fetch", "http://no-such-host.invalid/", "-s"), 6),
    ("exit_7_connect", lambda t: ("fetch", f"http://127.0.0.1:{closed_port()}/", "-s"), 7),
    ("exit_28_timeout", lambda t: ("fetch", t.T + "/slow-headers?ms=3000", "-m", "0.3", "-s"), 28),
    ("exit_35_tls_handshake", lambda t: ("fetch", f"https://127.0.0.1:{t.port}/", "-s"), 35),
    ("exit_47_redirects", lambda t: ("fetch", t.T + "/redirect-loop", "-L", "--max-redirs", "2", "-s"), 47),
    ("exit_52_empty_reply", lambda t: ("fetch", f"http://127.0.0.1:{empty_reply_port()}/", "-s"), 52),
    ("exit_56_receive", lambda t: ("fetch", t.T + "/reset", "-s"), 56),
    ("exit_60_untrusted", lambda t: ("fetch", t.S + "/", "-s"), 60),
    ("exit_22_fail", lambda t: ("fetch", t.T + "/status/403", "-f", "-s"), 22),
    ("exit_23_write", lambda t: ("fetch", t.T + "/json", "-o", t.path("no/such/dir/f"), "-s"), 23),
    ("exit_26_read", lambda t: ("fetch", t.T + "/echo", "-T", t.path("no-such-file"), "-s"), 26),
    ("exit_2_usage", lambda t: ("fetch", t.T + "/json", "--no-such-flag"), 2),
    ("exit_3_unreachable", lambda t: ("--socket", t.path("nobody.sock"), "status"), 3),
    ("exit_4_rpc_error", lambda t: ("call", "noSuchMethod"), 4),
]


def _auth_cmd(t, *args, check):
    host = f"localhost:{t.port}"
    t.ok("auth", host, *args)
    try:
        check(t.call("getAuth")["rules"][0], f"http://localhost:{t.port}")
        t.assertIn(host, t.ok("auth").stdout.decode())
    finally:
        t.ok("auth", host, "--remove")
        t.assertEqual(t.call("getAuth")["rules"], [])


def _auth_bearer_file(t):
    f = t.write("tok", "ctl-token")
    _auth_cmd(t, "--bearer-file", f, check=lambda rule, base: t.assertEqual(
        t.sent_header({"url": base + "/echo"}, "Authorization"), ["Bearer ctl-token"]))


def _auth_basic(t):
    f = t.write("pw", "ctl-pw")
    _auth_cmd(t, "--basic", "ann:" + f, check=lambda rule, base: t.assertEqual(
        t.call("fetch", {"url": base + "/basic-protected?user=ann&password=ctl-pw"})["status"], 200))


def _auth_helper(t):
    script = t.write("h.sh", '#!/bin/sh\ncat > /dev/null\necho \'{"headers": {"X-Ctl-Helper": "yes"}}\'\n', 0o700)
    _auth_cmd(t, "--helper", script, check=lambda rule, base: t.assertEqual(
        t.sent_header({"url": base + "/echo"}, "X-Ctl-Helper"), ["yes"]))


def _auth_oauth2(t):
    k = key("ctloa")
    f = t.write("secret", "csecret")
    _auth_cmd(t, "--oauth2", f"{t.T}/oauth/token/{k}", "--client-id", "cid", "--client-secret-file", f,
              "--scope", "s1", check=lambda rule, base: (
                  t.assertEqual(rule["type"], "oauth2"),
                  t.assertEqual(t.call("fetch", {"url": base + f"/protected/{k}"})["status"], 200),
                  t.assertEqual(oauth_info(t, k)["scopes"], ["s1"])))


def _auth_aws(t):
    f = t.write("creds", "[p1]\naws_access_key_id = AKIDCTL\naws_secret_access_key = s\n")
    _auth_cmd(t, "--aws-sigv4", "aws:amz:eu-west-1:s3", "--credentials-file", f, "--profile", "p1",
              check=lambda rule, base: t.assertEqual(t.call("fetch", {
                  "url": base + "/aws-check?key=AKIDCTL&scope=eu-west-1/s3"})["status"], 200))


def _stub_cmds(t):
    s = key("ctlset")
    added = json.loads(t.ok("stub", "add", "--set", s, json.dumps({"match": {"url": "http://ctl.stub.test/"},
                                                                  "respond": {"body": "ctl stub"}})).stdout)
    t.assertIn("stubId", added)
    t.assertEqual(t.ok("fetch", "http://ctl.stub.test/", "--stubs", s).stdout, b"ctl stub")
    listed = json.loads(t.ok("stub", "list", "--set", s).stdout)
    t.assertEqual([(x["stubId"], x["hits"]) for x in listed["stubs"]], [(added["stubId"], 1)])
    t.assertEqual(json.loads(t.ok("stub", "remove", "--set", s).stdout)["removed"], 1)


def _stub_record_load(t):
    s, har = key("ctlrec"), t.path("ctl.har")
    t.ok("stub", "record", "--set", s, har)
    t.ok("fetch", t.T + "/json", "--stubs", s, "-o", "/dev/null")
    wait_for(lambda: json.loads(t.read("ctl.har"))["log"]["entries"], timeout=5)
    loaded = json.loads(t.ok("stub", "load", "--set", s + "-l", har).stdout)
    t.assertEqual(loaded, {"loaded": 1})
    t.assertEqual(json.loads(t.ok("fetch", t.T + "/json", "--stubs", s + "-l").stdout),
                  {"hello": "world", "n": [1, 2, 3]})


def _attach_cmd(t):
    job = key("ctlat")
    with t.daemon.client() as other:
        send_request(other, "fetch", {"url": t.T + "/slow-body?chunks=5&ms=50", "jobId": job, "detach": True})
        t.job_listed(job)
    r = json.loads(t.ok("attach", job).stdout)
    t.assertEqual((r["jobId"], r["status"]), (job, 200))


def _top_once(t):
    job = key("ctltop")
    rid = send_request(t.c, "fetch", {"url": t.T + "/slow-body?chunks=40&ms=50", "jobId": job})
    try:
        t.job_listed(job)
        t.assertIn(job[:16], t.ok("top", "--once").stdout.decode())  # the column holds 16
    finally:
        t.call("cancel", {"jobId": job})
        t.c.answer_for(rid)


def _cache_cmds(t):
    url = f"{t.T}/cache-origin/{key('ctlc')}?cc=max-age=60"
    t.call("fetch", {"url": url}), t.call("fetch", {"url": url})
    stats = json.loads(t.ok("cache", "stats").stdout)
    t.keys(stats, CACHE_STATS)
    t.assertGreaterEqual(stats["entries"], 1)
    t.assertEqual(json.loads(t.ok("cache", "purge", url).stdout), {"removed": 1})
    t.call("fetch", {"url": url})
    t.call("fetch", {"url": url})
    t.assertGreaterEqual(json.loads(t.ok("cache", "purge").stdout)["removed"], 1)
    t.assertEqual(t.call("getCacheStats")["entries"], 0)


COMMANDS = [
    ("cmd_auth_bearer_file", _auth_bearer_file),
    ("cmd_auth_basic_user_passfile", _auth_basic),
    ("cmd_auth_helper", _auth_helper),
    ("cmd_auth_oauth2", _auth_oauth2),
    ("cmd_auth_aws_sigv4", _auth_aws),
    ("cmd_auth_list_empty", lambda t: t.assertEqual(t.ok("auth").returncode, 0)),
    ("cmd_stub_add_list_remove", _stub_cmds),
    ("cmd_stub_record_load", _stub_record_load),
    ("cmd_attach", _attach_cmd),
    ("cmd_top_once", _top_once),
    ("cmd_metrics", lambda t: t.assertIn(b"# TYPE http_client_request_duration_seconds histogram",
                                         t.ok("metrics").stdout)),
    ("cmd_cache_stats_purge", _cache_cmds),
    ("exit_5_cancelled", _cancelled_exit_5),
] + [(name, lambda t, a=args, c=code: t.assertEqual(t.exit_code(*a(t)), c, a(t))) for name, args, c_, code in
     [(n, a, None, c) for n, a, c in EXIT_CODES]]


@cases([("flag_" + n, f) for n, f in CURL_FLAGS], COMMANDS)
class TestFetchctl(Ctl):
    """fetchctl ($FETCHCTL, else clients/fetchctl): curl's flags with curl's meaning, curl's exit
    codes, and the version 2 commands."""
