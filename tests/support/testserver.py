#!/usr/bin/env python3
"""Scriptable HTTP/1.1 test server for fetchd's integration tests (stdlib only).

Run: python3 tests/support/testserver.py --port 0 [--port-file F]
Binds 127.0.0.1 and prints "PORT <n>" as its first stdout line.

Endpoints (any method unless noted):
  /echo...                       JSON description of the request (method, path, query, headers, body)
  /status/<code>[?retry-after=V] that status, body "status <code>"
  /redirect/<n>                  302 -> /redirect/<n-1>; /redirect/0 answers 200 "done"
  /redirect-to?url=U&status=S    redirect (default 302) to U
  /redirect-loop                 302 to itself
  /slow-headers?ms=N             waits N ms, then 200 "slow"
  /slow-body?chunks=N&ms=M       Content-Length N at once, then N one-byte chunks M ms apart
  /reset                         TCP RST without answering
  /reset-mid-body                Content-Length 100000, 1000 bytes, then RST
  /truncated                     Content-Length 1000, 10 bytes, clean close
  /garbage                       a reply that is not HTTP, then a clean close
  /bytes/<n>                     n deterministic pseudo-random bytes (see det_bytes)
  /binary                        a few bytes of invalid UTF-8
  /json                          {"hello":"world","n":[1,2,3]}
  /gzip                          GZIP_TEXT, gzip-encoded when Accept-Encoding has gzip
  /set-cookie?name=value&...     one Set-Cookie per param; ?raw=<full Set-Cookie value>
  /cookies                       {"cookie": <Cookie header or null>}
  /headers-multi                 two X-Multi and two Set-Cookie headers (see MULTI_*)
  /flaky/<key>?fail=N&status=503[&retry-after=S]  first N requests for key get status, then 200
  /record/<key>[?ms=N]           records the arrival, holds the answer N ms
  /hits/<key>                    {"count", "times", "maxConcurrent", "inFlight"} for key
  /flaky-body/<key>?fail=N&status=503[&retry-after=S]  as /flaky, and records each request body
  /bodies/<key>                  {"bodies": [{"method", "length", "sha256"}...]} seen by /flaky-body/<key>
  /multipart-echo                {"parts": [{"name","filename","contentType","size","sha256",...}]}
  /ranged/<n>?etag=E[&key=K][&seed=S][&reset-after=B][&stall-after=B][&no-range=1][&status=S]
                                 n deterministic bytes with ETag "E" (etag= empty: none) and a fixed
                                 Last-Modified; Range bytes=N-[M] -> 206 + Content-Range when If-Range
                                 is absent or matches, else 200 full (416 past the end). The FIRST
                                 request per key (default: path+query) is cut after B body bytes:
                                 reset-after = TCP RST, stall-after = wait until the client hangs up.
                                 no-range=1: Range is always ignored.
                                 status=S: answer S with all n bytes as the body.
                                 full-delay-ms=T: a 200 (whole file) answer holds its headers up to
                                 T ms, until the client hangs up (a 416 or 206 is not held).
  /ranged-log/<key>              {"requests": [{"range", "ifRange", "status"}...]} seen by /ranged
  /resumable/start[?key=K][&fail-chunk=N[&fail-mode=reset|reset-in-answer|503][&fail-keep=B]][&upload-url=U]
                 [&hold-chunk=N[&hold-ms=T]]
                                 Google resumable upload start (X-Goog-Upload-Protocol: resumable,
                                 X-Goog-Upload-Command: start) -> X-Goog-Upload-URL .../resumable/session/<id>
                                 (id = K when unused). The N-th chunk request of the session fails:
                                 reset = keep B bytes of it (default half), then TCP RST; reset-in-answer =
                                 the same with the start of an answer before the RST; 503 = answer 503.
                                 hold-chunk: the N-th chunk's answer waits for the cancel command (<= T ms).
  /resumable/session/<id>        PUT with X-Goog-Upload-Command upload | "upload, finalize" (with
                                 X-Goog-Upload-Offset; a wrong offset -> 400, status active), query, cancel
  /resumable/session/<id>/info   {"id","size","sha256","commands","status","declaredSize","contentType",
                                  "chunks","offsets","rejected","failures","holding","startMethod",
                                  "authorizations" (each session request's Authorization, or null)}
  /resumable/info/<key>          {"sessions": [info...]} for every session started with ?key=K
  /echo also reports "bodySha256".
  /oauth/token/<key>[?expires_in=S|none][&delay_ms=T][&fail=STATUS][&client_id=I&client_secret=C]
                                 OAuth 2 client-credentials token endpoint (POST, form body with
                                 grant_type=client_credentials, client in HTTP Basic; defaults cid/csecret):
                                 counts its requests per key and issues token "tok-<key>-<n>" (the key's
                                 current token) with expires_in (default 3600); a wrong client -> 401
                                 {"error":"invalid_client"}; fail=S answers S with {"error":"server_error"}
  /oauth/info/<key>              {"count", "maxInFlight", "tokens", "grants", "scopes", "authorizations"}
  /oauth/revoke/<key>            the key's current token stops being accepted
  /protected/<key>[?ms=N]        200 {"ok": true, "token"} when Authorization is "Bearer <the key's current,
                                 unexpired token>", else 401 with WWW-Authenticate: Bearer ... (counted in
                                 /hits/protected-<key>)
  /basic-protected?user=U&password=P  200 when Authorization is Basic U:P, else 401 with a Basic challenge
  /aws-check[?key=AKID][&scope=REGION/SERVICE][&token=T]  200 {"ok", "credential", "signedHeaders",
                                 "amzDate", "authorization"} when Authorization has the AWS SigV4 shape
                                 (AWS4-HMAC-SHA256 Credential=AKID/yyyymmdd/REGION/SERVICE/aws4_request,
                                 SignedHeaders=...;host;...x-amz-date..., Signature=<64 hex>) and X-Amz-Date
                                 is set (with token=T: X-Amz-Security-Token is T and signed), else 403 {"problem"}
  /cache-origin/<key>?...        a scriptable origin for the HTTP cache (see _cache_origin): Cache-Control,
                                 Expires, ETag, Last-Modified, Vary, Age, Date skew, 304s, delays, a counter
  /cache-origin-log/<key>        {"count", "requests": [{method, ifNoneMatch, ifModifiedSince, ...}], "maxInFlight"}
  /big-header?bytes=N[&count=C][&redirect=R]  200 "big" with C (default 1) headers X-Big-<i> of
                                 N bytes each; with R > 0, the same headers on a 302 to redirect=R-1
  /sse/<key>?events=N[&per=P][&retry=MS][&ms=T][&drop=end|cut|reset][&done=204|close|STATUS][&eol=lf|crlf|cr]
                                 Server-Sent Events (text/event-stream, chunked): events 1..N as "id: <n>",
                                 "event: tick", "data: event <n>" (data=2: a second data line "line 2 of <n>"),
                                 after a "retry: MS" line when retry= is given, T ms apart. Each connection
                                 starts after its Last-Event-ID and sends at most P events (default all), then
                                 drops: end = the body ends cleanly, cut = closed without its last chunk,
                                 reset = TCP RST. Once all N were sent, a request answers per done= (default
                                 204; close = an event stream with no events; any other status: that status).
                                 first=STATUS: the key's first request answers that status (retry-after=S adds
                                 Retry-After), as /flaky does
  /sse-log/<key>                 {"requests": [{"lastEventId", "accept", "time"}...]} seen by /sse/<key>
  /ndjson?lines=N[&eol=lf|crlf][&unended=1][&long=BYTES][&pad=P][&ms=T][&chunk=B]
                                 N lines {"n": i, "text": "line i"} (application/x-ndjson, chunked), each ended
                                 by eol (unended=1: the last one without); pad=P adds "pad": P times "x";
                                 long=BYTES: one more line of BYTES "x" before them; written in chunks of B
                                 bytes (default: one line each), T ms apart
  /budget/<key>?form=F&limit=N&window=S[&ms=T]  an API with a budget of N requests per fixed window of S s
                                 (from the key's first request) that says what is left in header form F
                                 (see BUDGET_FORMS: ietf, ietf-dict, ietf-fields, x-seconds, github, openai)
                                 and answers 429 (same headers, no Retry-After) past it; holds T ms
  /budget-log/<key>              {"count", "refused", "window", "requests": [{"t", "status", "window"}...]}
  /overload/<key>?k=K&ms=T       holds each answer T ms; a request that finds K already in flight is
                                 answered 429 at once (no Retry-After)
  /overload-log/<key>            {"ok", "refused", "maxInFlight" (of those answered 200), "requests": [{"t", "status", "inFlight"}]}
  /metered/<key>?bytes=N[&chunk=C]  N deterministic bytes written C (default 4096) at a time through a small
                                 send buffer, each write's time and size logged: what left the origin when
  /metered-log/<key>             {"requests", "sends": [[t, bytes]...]} over every /metered/<key> request
"""
import argparse
import base64
import gzip
import hashlib
import json
import math
import os
import random
import socket
import struct
import sys
import re
import select
import threading
import time
import uuid
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

GZIP_TEXT = "hello gzip " * 100
JSON_DOC = {"hello": "world", "n": [1, 2, 3]}
BINARY = b"\xff\xfe\xfd\x00\x80\xc3(abc"
MULTI_X = ["a", "b"]
MULTI_COOKIES = ["a=1; Path=/", "b=2; Path=/; Expires=Wed, 21 Oct 2037 07:28:00 GMT"]
MAX_BYTES = 512 * 1024 * 1024


def det_bytes(n, seed=None):
    """n deterministic pseudo-random bytes; /bytes/<n> serves det_bytes(n)."""
    return random.Random(n if seed is None else seed).randbytes(n)


class _State:
    lock = threading.Lock()
    hits = {}  # key -> {"times": [...], "inFlight": int, "maxConcurrent": int}
    flaky = {}  # key -> count
    bodies = {}  # key -> [{"method", "length", "sha256"}] (/flaky-body)
    ranged = {}  # key -> [{"range", "ifRange", "status"}] (/ranged)
    resumable = {}  # session id -> _ResumableSession
    resumable_keys = {}  # ?key= of /resumable/start -> [session id]
    oauth = {}  # key -> {"count", "inFlight", "maxInFlight", "tokens", "current", "expires", ...}
    sse = {}  # key -> [{"lastEventId", "accept", "time"}] (/sse)


LAST_MODIFIED = "Wed, 21 Oct 2015 07:28:00 GMT"


class _ResumableSession:
    """One upload session of the resumable upload server (/resumable/...)."""

    def __init__(self, sid, q, headers, method):
        self.id = sid
        self.data = bytearray()
        self.commands = ["start"]
        self.status = "active"
        declared = headers.get("X-Goog-Upload-Header-Content-Length")
        self.declared = int(declared) if declared and declared.isdigit() else declared
        self.content_type = headers.get("X-Goog-Upload-Header-Content-Type")
        self.start_method = method
        self.fail_chunk = int(q.get("fail-chunk", "0"))
        self.fail_mode = q.get("fail-mode", "reset")
        self.fail_keep = int(q.get("fail-keep", "-1"))  # bytes of the failing chunk kept; -1: half
        self.hold_chunk = int(q.get("hold-chunk", "0"))
        self.hold_ms = int(q.get("hold-ms", "20000"))
        self.chunks = 0  # chunk requests seen
        self.offsets = []  # X-Goog-Upload-Offset of each chunk request
        self.rejected = 0
        self.failures = []
        self.holding = False
        self.cancelled = threading.Event()
        self.authorizations = []  # the Authorization header of each session request (None: absent)

    def info(self):
        return {"id": self.id, "size": len(self.data), "sha256": hashlib.sha256(self.data).hexdigest(),
                "commands": list(self.commands), "status": self.status, "declaredSize": self.declared,
                "contentType": self.content_type, "chunks": self.chunks, "offsets": list(self.offsets),
                "rejected": self.rejected, "failures": list(self.failures), "holding": self.holding,
                "startMethod": self.start_method, "authorizations": list(self.authorizations)}


def _hit(key):
    with _State.lock:
        h = _State.hits.setdefault(key, {"times": [], "inFlight": 0, "maxConcurrent": 0})
        h["times"].append(time.monotonic())
        return h


class ProtocolError(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fetchd-testserver/1"

    def log_message(self, fmt, *args):  # quiet unless asked
        if os.environ.get("TESTSERVER_VERBOSE"):
            sys.stderr.write("testserver: " + (fmt % args) + "\n")

    # Any method token reaches _dispatch (BaseHTTPRequestHandler looks up do_<METHOD>).
    def __getattr__(self, name):
        if name.startswith("do_"):
            return self._dispatch
        raise AttributeError(name)

    # ---- request body -------------------------------------------------------------
    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ProtocolError("eof in chunk size")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers
                        t = self.rfile.readline(65537)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    break
                data = self.rfile.read(size)
                if len(data) != size:
                    raise ProtocolError("eof in chunk")
                chunks.append(data)
                self.rfile.readline(3)  # CRLF after chunk
            return b"".join(chunks)
        cl = self.headers.get("Content-Length")
        if cl:
            n = int(cl)
            data = self.rfile.read(n)
            if len(data) != n:
                raise ProtocolError("eof in body")
            return data
        return b""

    # ---- response helpers ---------------------------------------------------------
    def _send(self, status, body=b"", ctype="text/plain; charset=utf-8", headers=()):
        if isinstance(body, str):
            body = body.encode("utf-8")
        self.send_response(status)
        no_body = status < 200 or status in (204, 304)
        if not no_body:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if not no_body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj, status=200, headers=()):
        self._send(status, json.dumps(obj), "application/json", headers)

    def _rst(self):
        """Close the connection with a TCP RST (SO_LINGER 0)."""
        self.close_connection = True
        sock = self.connection
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        # detach so the fd really closes now even though rfile/wfile still reference it
        os.close(sock.detach())

    def _clean_close(self):
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    # ---- dispatch -----------------------------------------------------------------
    def _dispatch(self):
        if self.path.startswith("/resumable/"):
            try:
                return self._resumable()
            except (ValueError, KeyError) as e:
                self.close_connection = True
                return self._send(400, f"bad request: {e}")
        try:
            body = self._read_body()
        except (ProtocolError, ValueError):
            self.close_connection = True
            self._send(400, "bad request body")
            return
        parts = urlsplit(self.path)
        path, rawq = parts.path, parts.query
        q = dict(parse_qsl(rawq, keep_blank_values=True))
        seg = path.strip("/").split("/")
        head = seg[0] if seg else ""
        try:
            if path.startswith("/echo"):
                return self._echo(path, rawq, body)
            if head == "status" and len(seg) == 2:
                code = int(seg[1])
                hs = [("Retry-After", q["retry-after"])] if "retry-after" in q else []
                return self._send(code, f"status {code}", headers=hs)
            if head == "redirect" and len(seg) == 2:
                n = int(seg[1])
                if n <= 0:
                    return self._send(200, "done")
                return self._send(302, f"redirect to {n - 1}", headers=[("Location", f"/redirect/{n - 1}")])
            if path == "/redirect-to":
                st = int(q.get("status", "302"))
                return self._send(st, "redirecting", headers=[("Location", q.get("url", "/"))])
            if path == "/redirect-loop":
                return self._send(302, "loop", headers=[("Location", "/redirect-loop")])
            if path == "/slow-headers":
                time.sleep(int(q.get("ms", "1000")) / 1000)
                return self._send(200, "slow")
            if path == "/slow-body":
                return self._slow_body(int(q.get("chunks", "10")), int(q.get("ms", "100")))
            if path == "/reset":
                return self._rst()
            if path == "/reset-mid-body":
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                self.wfile.write(b"x" * 1000)
                self.wfile.flush()
                time.sleep(0.05)  # let the first bytes reach the client before the RST
                return self._rst()
            if path == "/truncated":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.write(b"0123456789")
                return self._clean_close()
            if path == "/garbage":
                self.close_connection = True
                self.wfile.write(b"THIS IS NOT HTTP\r\n\x00\x01\x02garbage\r\n\r\n")
                return self._clean_close()
            if head == "bytes" and len(seg) == 2:
                n = int(seg[1])
                if n < 0 or n > MAX_BYTES:
                    return self._send(400, "bad size")
                return self._send(200, det_bytes(n), "application/octet-stream")
            if path == "/binary":
                return self._send(200, BINARY, "application/octet-stream")
            if path == "/json":
                return self._json(JSON_DOC)
            if path == "/gzip":
                ae = (self.headers.get("Accept-Encoding") or "").lower()
                if "gzip" in ae:
                    return self._send(200, gzip.compress(GZIP_TEXT.encode()), "text/plain; charset=utf-8",
                                      headers=[("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")])
                return self._send(200, GZIP_TEXT, headers=[("Vary", "Accept-Encoding")])
            if path == "/set-cookie":
                hs = []
                for k, v in parse_qsl(rawq, keep_blank_values=True):
                    hs.append(("Set-Cookie", v if k == "raw" else f"{k}={v}"))
                return self._send(200, "cookies set", headers=hs)
            if path == "/cookies":
                return self._json({"cookie": self.headers.get("Cookie")})
            if path == "/headers-multi":
                hs = [("X-Multi", v) for v in MULTI_X] + [("Set-Cookie", v) for v in MULTI_COOKIES]
                return self._send(200, "multi", headers=hs)
            if head in ("flaky", "flaky-body") and len(seg) == 2:
                key = seg[1]
                _hit(key)
                if head == "flaky-body":
                    with _State.lock:
                        _State.bodies.setdefault(key, []).append(
                            {"method": self.command, "length": len(body),
                             "sha256": hashlib.sha256(body).hexdigest()})
                with _State.lock:
                    n = _State.flaky.get(key, 0) + 1
                    _State.flaky[key] = n
                fail = int(q.get("fail", "1"))
                if n <= fail:
                    st = int(q.get("status", "503"))
                    hs = [("Retry-After", q["retry-after"])] if "retry-after" in q else []
                    return self._send(st, f"status {st}", headers=hs)
                return self._send(200, f"ok after {fail}")
            if head in ("cache-origin", "cache-origin-log") and len(seg) == 2:
                return _cache_origin(self, head, seg[1], q)
            if head in SERVER_LIMIT_ROUTES and len(seg) == 2:
                return _server_limits(self, head, seg[1], q)
            if head == "record" and len(seg) == 2:
                return self._record(seg[1], int(q.get("ms", "0")))
            if head == "hits" and len(seg) == 2:
                with _State.lock:
                    h = _State.hits.get(seg[1], {"times": [], "inFlight": 0, "maxConcurrent": 0})
                    out = {"count": len(h["times"]), "times": list(h["times"]),
                           "maxConcurrent": h["maxConcurrent"], "inFlight": h["inFlight"]}
                return self._json(out)
            if head == "bodies" and len(seg) == 2:
                with _State.lock:
                    return self._json({"bodies": list(_State.bodies.get(seg[1], []))})
            if path == "/multipart-echo":
                return self._multipart(body)
            if head == "oauth" and len(seg) == 3:
                return self._oauth(seg[1], seg[2], q, body)
            if head == "protected" and len(seg) == 2:
                return self._protected(seg[1], int(q.get("ms", "0")))
            if path == "/basic-protected":
                want = "Basic " + base64.b64encode(f"{q.get('user', '')}:{q.get('password', '')}".encode()).decode()
                if self.headers.get("Authorization") == want:
                    return self._json({"ok": True})
                return self._send(401, "unauthorized", headers=[("WWW-Authenticate", 'Basic realm="fetchd-test"')])
            if path == "/aws-check":
                return self._aws_check(q)
            if path == "/big-header":
                n, count = int(q.get("bytes", "1000")), int(q.get("count", "1"))
                if not (0 <= n <= 8 << 20 and 0 <= count <= 10000):
                    return self._send(400, "bad size")
                hs = [(f"X-Big-{i}", "b" * n) for i in range(count)]
                hops = int(q.get("redirect", "0"))
                if hops > 0:
                    hs.append(("Location", f"/big-header?bytes={n}&count={count}&redirect={hops - 1}"))
                    return self._send(302, "big", headers=hs)
                return self._send(200, "big", headers=hs)
            if head == "ranged" and len(seg) == 2:
                return self._ranged(int(seg[1]), q)
            if head == "sse" and len(seg) == 2:
                return self._sse(seg[1], q)
            if head == "sse-log" and len(seg) == 2:
                with _State.lock:
                    return self._json({"requests": list(_State.sse.get(seg[1], []))})
            if path == "/ndjson":
                return self._ndjson(q)
            if head == "ranged-log" and len(seg) == 2:
                with _State.lock:
                    return self._json({"requests": [dict(r) for r in _State.ranged.get(seg[1], [])]})
        except (ValueError, KeyError) as e:
            return self._send(400, f"bad request: {e}")
        return self._send(404, "not found")

    def _echo(self, path, rawq, body):
        self._json({
            "method": self.command,
            "path": path,
            "query": rawq,
            "version": self.request_version,
            "clientPort": self.client_address[1],  # same port twice = the connection was reused
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("utf-8", errors="replace"),
            "bodyBase64": base64.b64encode(body).decode("ascii"),
            "bodyLength": len(body),
            "bodySha256": hashlib.sha256(body).hexdigest(),
        })

    def _slow_body(self, chunks, ms):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(chunks))
        self.end_headers()
        self.wfile.flush()
        if self.command == "HEAD":
            return
        for i in range(chunks):
            if i:
                time.sleep(ms / 1000)
            self.wfile.write(b"x")
            self.wfile.flush()

    # ---- streamed bodies: Server-Sent Events and NDJSON, chunked --------------------
    def _start_chunked(self, ctype):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _sse(self, key, q):
        total, per = int(q.get("events", "3")), int(q.get("per", "0"))
        eol = {"lf": b"\n", "crlf": b"\r\n", "cr": b"\r"}[q.get("eol", "lf")]
        last = self.headers.get("Last-Event-ID")
        with _State.lock:
            log = _State.sse.setdefault(key, [])
            log.append({"lastEventId": last, "accept": self.headers.get("Accept"), "time": time.monotonic()})
            first_request = len(log) == 1
        if first_request and "first" in q:
            st = int(q["first"])
            hs = [("Retry-After", q["retry-after"])] if "retry-after" in q else []
            return self._send(st, f"status {st}", headers=hs)
        after = int(last) if last and last.isdigit() else 0
        if after >= total:
            done = q.get("done", "204")
            if done == "close":
                self._start_chunked("text/event-stream")
                return self._end_chunked()
            st = int(done)
            return self._send(st, "" if st == 204 else f"status {st}")
        self._start_chunked("text/event-stream")
        if "retry" in q:
            self._chunk(b"retry: " + q["retry"].encode() + eol)
        end = total if per <= 0 else min(total, after + per)
        ms = int(q.get("ms", "0"))
        for n in range(after + 1, end + 1):
            if ms and n > after + 1:
                time.sleep(ms / 1000)
            lines = [b"id: %d" % n, b"event: tick", b"data: event %d" % n]
            if q.get("data") == "2":
                lines.append(b"data: line 2 of %d" % n)
            self._chunk(eol.join(lines) + eol + eol)
        drop = q.get("drop", "end")
        if drop == "reset":
            time.sleep(0.05)  # the events reach the client before the RST
            return self._rst()
        if drop == "cut":
            return self._clean_close()
        self._end_chunked()
        self.close_connection = True

    def _ndjson(self, q):
        n, chunk, ms = int(q.get("lines", "3")), int(q.get("chunk", "0")), int(q.get("ms", "0"))
        eol = b"\r\n" if q.get("eol") == "crlf" else b"\n"
        pad = int(q.get("pad", "0"))

        def lines():  # made as they are sent: a large body is never whole here
            if "long" in q:
                yield b"x" * int(q["long"])
            for i in range(n):
                doc = {"n": i, "text": f"line {i}"}
                if pad:
                    doc["pad"] = "x" * pad
                yield json.dumps(doc).encode()

        def pieces():
            pending, held = b"", None
            for line in lines():
                if held is not None:
                    pending += held + eol
                held = line
                if chunk <= 0:
                    if pending:
                        yield pending
                    pending = b""
                while chunk > 0 and len(pending) >= chunk:
                    yield pending[:chunk]
                    pending = pending[chunk:]
            if held is not None:
                pending += held + (b"" if q.get("unended") == "1" else eol)
            while pending:
                size = chunk if chunk > 0 else len(pending)
                yield pending[:size]
                pending = pending[size:]

        self._start_chunked("application/x-ndjson")
        for i, piece in enumerate(pieces()):
            if ms and i:
                time.sleep(ms / 1000)
            self._chunk(piece)
        self._end_chunked()

    # ---- /ranged: ETag + Range + If-Range, with a first request that breaks ----------
    def _ranged(self, n, q):
        if n < 0 or n > MAX_BYTES:
            return self._send(400, "bad size")
        key = q.get("key") or self.path
        etag_param = q.get("etag", f"r{n}")
        etag = f'"{etag_param}"' if etag_param else None
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        entry = {"range": rng, "ifRange": if_range, "status": None}
        with _State.lock:
            log = _State.ranged.setdefault(key, [])
            first = not log
            log.append(entry)
        data = det_bytes(n, seed=int(q["seed"]) if "seed" in q else None)
        status, start, end = 200, 0, n - 1
        headers = [("Last-Modified", LAST_MODIFIED)]
        if etag:
            headers.append(("ETag", etag))
        if "status" in q:  # that status with all n bytes as its body, ranges ignored
            entry["status"] = int(q["status"])
            return self._send(int(q["status"]), data, "application/octet-stream", headers=headers)
        if q.get("no-range") != "1":
            headers.append(("Accept-Ranges", "bytes"))
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", (rng or "").strip())
            # If-Range: a strong match with the ETag, or exactly the Last-Modified date
            if m and (if_range is None or if_range in ((etag or ""), LAST_MODIFIED)):
                first_byte = int(m.group(1))
                if first_byte >= n:
                    entry["status"] = 416
                    return self._send(416, "range not satisfiable", headers=[("Content-Range", f"bytes */{n}")])
                status, start = 206, first_byte
                end = min(int(m.group(2)), n - 1) if m.group(2) else n - 1
                headers.append(("Content-Range", f"bytes {start}-{end}/{n}"))
        entry["status"] = status
        body = data[start:end + 1]
        if status == 200 and "full-delay-ms" in q:
            # logged first, so that a test sees this attempt waiting before it acts
            if self._wait_for_hangup(int(q["full-delay-ms"]) / 1000):
                self.close_connection = True
                return
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        reset_after = int(q.get("reset-after", "-1")) if first else -1
        stall_after = int(q.get("stall-after", "-1")) if first else -1
        if 0 <= reset_after < len(body):
            self.wfile.write(body[:reset_after])
            self.wfile.flush()
            time.sleep(0.05)  # let the first bytes reach the client before the RST
            return self._rst()
        if 0 <= stall_after < len(body):
            self.wfile.write(body[:stall_after])
            self.wfile.flush()
            self._wait_for_hangup(int(q.get("stall-ms", "30000")) / 1000)
            self.close_connection = True
            return
        self.wfile.write(body)

    def _wait_for_hangup(self, timeout):
        """Block until the client closes the connection (True) or timeout seconds pass (False)."""
        deadline = time.monotonic() + timeout
        sock = self.connection
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            r, _, _ = select.select([sock], [], [], left)
            if r:
                try:
                    if not sock.recv(65536):
                        return True
                except OSError:
                    return True

    # ---- /resumable: Google's resumable upload protocol ----------------------------
    def _resumable(self):
        parts = urlsplit(self.path)
        path = parts.path
        q = dict(parse_qsl(parts.query, keep_blank_values=True))
        seg = path.strip("/").split("/")
        raw_cmd = self.headers.get("X-Goog-Upload-Command") or ""
        cmd = ", ".join(p.strip().lower() for p in raw_cmd.split(",") if p.strip())
        if len(seg) == 3 and seg[1] == "session" and cmd in ("upload", "upload, finalize"):
            with _State.lock:
                s = _State.resumable.get(seg[2])
            if s is not None:
                return self._resumable_chunk(s, cmd)
        try:
            self._read_body()
        except ProtocolError:
            self.close_connection = True
            return self._send(400, "bad request body")
        if path == "/resumable/start":
            proto = (self.headers.get("X-Goog-Upload-Protocol") or "").lower()
            if cmd != "start" or proto != "resumable":
                return self._send(400, "expected X-Goog-Upload-Protocol: resumable and X-Goog-Upload-Command: start")
            with _State.lock:
                key = q.get("key") or uuid.uuid4().hex
                sid, n = key, 1
                while sid in _State.resumable:
                    n += 1
                    sid = f"{key}.{n}"
                _State.resumable[sid] = _ResumableSession(sid, q, self.headers, self.command)
                _State.resumable_keys.setdefault(key, []).append(sid)
            # ?upload-url=U hands out U as the session URL (a hostile or broken server).
            url = q.get("upload-url") or f"http://127.0.0.1:{self.server.server_address[1]}/resumable/session/{sid}"
            return self._send(200, "", headers=[("X-Goog-Upload-Status", "active"), ("X-Goog-Upload-URL", url),
                                                ("X-Goog-Upload-Chunk-Granularity", "1")])
        if len(seg) == 3 and seg[1] == "info":
            with _State.lock:
                out = [_State.resumable[i].info() for i in _State.resumable_keys.get(seg[2], [])]
            return self._json({"sessions": out})
        if len(seg) < 3 or seg[1] != "session":
            return self._send(404, "not found")
        with _State.lock:
            s = _State.resumable.get(seg[2])
        if s is None:
            return self._send(404, "no such upload session")
        if len(seg) == 4 and seg[3] == "info":
            with _State.lock:
                return self._json(s.info())
        if len(seg) != 3:
            return self._send(404, "not found")
        with _State.lock:
            s.commands.append(cmd or raw_cmd)
            s.authorizations.append(self.headers.get("Authorization"))
            size = len(s.data)
            if cmd == "cancel":
                s.status = "cancelled"
            status = s.status
        if cmd == "cancel":
            s.cancelled.set()
            return self._send(200, "", headers=[("X-Goog-Upload-Status", "cancelled")])
        if cmd == "query":
            return self._send(200, "", headers=[("X-Goog-Upload-Status", status),
                                                ("X-Goog-Upload-Size-Received", str(size))])
        return self._send(400, f"unknown X-Goog-Upload-Command {raw_cmd!r}",
                          headers=[("X-Goog-Upload-Status", status)])

    def _resumable_chunk(self, s, cmd):
        try:
            offset = int(self.headers.get("X-Goog-Upload-Offset") or "")
        except ValueError:
            offset = None
        with _State.lock:
            s.commands.append(cmd)
            s.authorizations.append(self.headers.get("Authorization"))
            s.chunks += 1
            n = s.chunks
            s.offsets.append(offset)
            fail = n == s.fail_chunk
            hold = n == s.hold_chunk
        if fail and s.fail_mode in ("reset", "reset-in-answer"):
            cl = self.headers.get("Content-Length")
            if cl is not None:
                total = int(cl)
                keep = total // 2 if s.fail_keep < 0 else min(s.fail_keep, total)
                data = self.rfile.read(keep)
            else:
                data = self._read_body()
                data = data[:len(data) // 2 if s.fail_keep < 0 else s.fail_keep]
            with _State.lock:
                kept = 0
                if offset == len(s.data) and s.status == "active":
                    s.data += data
                    kept = len(data)
                s.failures.append({"chunk": n, "mode": s.fail_mode, "kept": kept})
            if s.fail_mode == "reset-in-answer":
                # the start of an answer, then the RST: the client cannot just send the request again
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Goog-Upload-Status: active\r\n")
                self.wfile.flush()
                time.sleep(0.05)
            return self._rst()
        try:
            body = self._read_body()
        except ProtocolError:
            self.close_connection = True
            return self._send(400, "bad request body")
        if fail:
            with _State.lock:
                s.failures.append({"chunk": n, "mode": "503", "kept": 0})
            return self._send(503, "injected failure", headers=[("X-Goog-Upload-Status", "active")])
        if hold:
            with _State.lock:
                s.holding = True
            s.cancelled.wait(s.hold_ms / 1000)
            with _State.lock:
                s.holding = False
        with _State.lock:
            if s.status != "active":
                return self._send(400, f"upload is {s.status}", headers=[("X-Goog-Upload-Status", s.status)])
            if offset != len(s.data):
                s.rejected += 1
                return self._send(400, f"offset {offset} but {len(s.data)} bytes received",
                                  headers=[("X-Goog-Upload-Status", "active"),
                                           ("X-Goog-Upload-Size-Received", str(len(s.data)))])
            s.data += body
            size = len(s.data)
            if cmd.endswith("finalize"):
                s.status = "final"
            status = s.status
            digest = hashlib.sha256(s.data).hexdigest()
        hs = [("X-Goog-Upload-Status", status), ("X-Goog-Upload-Size-Received", str(size))]
        if status == "final":
            return self._json({"size": size, "sha256": digest}, headers=hs)
        return self._send(200, "", headers=hs)

    def _oauth_state(self, key):
        return _State.oauth.setdefault(key, {"count": 0, "inFlight": 0, "maxInFlight": 0, "tokens": [],
                                             "current": None, "expires": None, "grants": [], "scopes": [],
                                             "authorizations": []})

    def _oauth(self, action, key, q, body):
        with _State.lock:
            st = self._oauth_state(key)
            if action == "info":
                return self._json({k: st[k] for k in ("count", "maxInFlight", "tokens", "grants", "scopes",
                                                        "authorizations")})
            if action == "revoke":
                st["current"] = None
                return self._json({"revoked": True})
            if action != "token":
                return self._send(404, "not found")
            st["count"] += 1
            st["inFlight"] += 1
            st["maxInFlight"] = max(st["maxInFlight"], st["inFlight"])
            n = st["count"]
            form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
            st["grants"].append(form.get("grant_type"))
            st["scopes"].append(form.get("scope"))
            st["authorizations"].append(self.headers.get("Authorization"))
        try:
            time.sleep(int(q.get("delay_ms", "0")) / 1000)
            want = "Basic " + base64.b64encode(
                f"{q.get('client_id', 'cid')}:{q.get('client_secret', 'csecret')}".encode()).decode()
            if self.command != "POST" or form.get("grant_type") != "client_credentials":
                return self._json({"error": "unsupported_grant_type"}, status=400)
            if self.headers.get("Authorization") != want:
                return self._json({"error": "invalid_client"}, status=401)
            if "fail" in q:
                return self._json({"error": "server_error"}, status=int(q["fail"]))
            token = f"tok-{key}-{n}"
            answer = {"access_token": token, "token_type": "Bearer"}
            expires = q.get("expires_in", "3600")
            with _State.lock:
                st["tokens"].append(token)
                st["current"] = token
                st["expires"] = None if expires == "none" else time.monotonic() + float(expires)
            if expires != "none":
                answer["expires_in"] = float(expires) if "." in expires else int(expires)
            return self._json(answer, headers=[("Cache-Control", "no-store")])
        finally:
            with _State.lock:
                st["inFlight"] -= 1

    def _protected(self, key, ms):
        _hit("protected-" + key)
        if ms:
            time.sleep(ms / 1000)
        with _State.lock:
            st = self._oauth_state(key)
            current, expires = st["current"], st["expires"]
        got = self.headers.get("Authorization")
        if current and got == "Bearer " + current and (expires is None or time.monotonic() < expires):
            return self._json({"ok": True, "token": current})
        return self._send(401, "unauthorized", headers=[
            ("WWW-Authenticate", 'Bearer realm="fetchd-test", error="invalid_token"')])

    AWS_AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/, ]+)/(\d{8})/([^/, ]+)/([^/, ]+)/aws4_request, "
                          r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")

    def _aws_check(self, q):
        auth = self.headers.get("Authorization") or ""
        m = self.AWS_AUTH.match(auth)
        date = self.headers.get("X-Amz-Date") or ""
        problem = None
        if not m:
            problem = f"Authorization is not AWS SigV4: {auth[:200]!r}"
        else:
            signed = m.group(5).split(";")
            if "key" in q and m.group(1) != q["key"]:
                problem = f"access key {m.group(1)!r}, expected {q['key']!r}"
            elif "scope" in q and f"{m.group(3)}/{m.group(4)}" != q["scope"]:
                problem = f"scope {m.group(3)}/{m.group(4)}, expected {q['scope']}"
            elif "host" not in signed or "x-amz-date" not in signed:
                problem = f"SignedHeaders {m.group(5)} lacks host or x-amz-date"
            elif not re.match(r"^\d{8}T\d{6}Z$", date) or date[:8] != m.group(2):
                problem = f"X-Amz-Date {date!r} does not match the credential's date"
            elif "token" in q and (self.headers.get("X-Amz-Security-Token") != q["token"]
                                   or "x-amz-security-token" not in signed):
                problem = "X-Amz-Security-Token missing, wrong or not signed"
        if problem:
            return self._json({"problem": problem}, status=403)
        return self._json({"ok": True, "credential": m.group(1), "signedHeaders": m.group(5), "amzDate": date,
                           "authorization": auth})

    def _record(self, key, ms):
        h = _hit(key)
        with _State.lock:
            h["inFlight"] += 1
            h["maxConcurrent"] = max(h["maxConcurrent"], h["inFlight"])
        try:
            if ms:
                time.sleep(ms / 1000)
        finally:
            with _State.lock:
                h["inFlight"] -= 1
        self._send(200, "recorded")

    def _multipart(self, body):
        ctype = self.headers.get("Content-Type") or ""
        params = _header_params(ctype)
        if not ctype.lower().startswith("multipart/form-data") or "boundary" not in params:
            return self._send(400, "not multipart/form-data")
        try:
            parts = parse_multipart(body, params["boundary"].encode("latin-1"))
        except ValueError as e:
            return self._send(400, f"bad multipart: {e}")
        self._json({"parts": parts})


CACHE_ORIGIN = {}  # key -> {"count", "inFlight", "maxInFlight", "requests"}

# Origins that set their own limits (/budget, /overload, /metered), keyed by (route, key).
SERVER_LIMITS = {}
SERVER_LIMIT_ROUTES = ("budget", "budget-log", "overload", "overload-log", "metered", "metered-log")


def _go_duration(seconds):
    """A duration as Go prints one (OpenAI's x-ratelimit-reset-requests), rounded up to the ms."""
    ms = math.ceil(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms"
    minutes, rest = divmod(ms, 60000)
    text = f"{rest / 1000:g}s"
    return f"{minutes}m{text}" if minutes else text


def _budget_headers(form, limit, remaining, reset, window):
    """The headers of BUDGET_FORMS[form]: `reset` seconds until the window ends (rounded up
    wherever the form takes whole seconds)."""
    whole = math.ceil(reset)
    if form == "ietf":
        return [("RateLimit-Policy", f'"default";q={limit};w={math.ceil(window)}'),
                ("RateLimit", f'"default";r={remaining};t={whole}')]
    if form == "ietf-dict":
        return [("RateLimit", f"limit={limit}, remaining={remaining}, reset={whole}")]
    if form == "ietf-fields":
        return [("RateLimit-Limit", str(limit)), ("RateLimit-Remaining", str(remaining)), ("RateLimit-Reset", str(whole))]
    if form == "x-seconds":
        return [("X-RateLimit-Limit", str(limit)), ("X-RateLimit-Remaining", str(remaining)),
                ("X-RateLimit-Reset", str(whole))]
    if form == "github":
        return [("X-RateLimit-Limit", str(limit)), ("X-RateLimit-Remaining", str(remaining)),
                ("X-RateLimit-Reset", str(math.ceil(time.time() + reset))), ("X-RateLimit-Resource", "core")]
    if form == "openai":
        return [("x-ratelimit-limit-requests", str(limit)), ("x-ratelimit-remaining-requests", str(remaining)),
                ("x-ratelimit-reset-requests", _go_duration(reset))]
    raise ValueError(f"unknown form {form}")


BUDGET_FORMS = ("ietf", "ietf-dict", "ietf-fields", "x-seconds", "github", "openai")


def _server_limits(h, head, key, q):
    """/budget, /overload and /metered (see the module's docstring) and their logs."""
    now = time.monotonic()
    if head in ("budget-log", "overload-log", "metered-log"):
        with _State.lock:
            st = dict(SERVER_LIMITS.get((head[:-4], key), {}))
            st.pop("used", None)
            st.pop("inFlight", None)
            st = json.loads(json.dumps(st))  # a copy, outside the lock
        return h._json(st)
    if head == "budget":
        limit, window = int(q.get("limit", "5")), float(q.get("window", "1"))
        with _State.lock:
            st = SERVER_LIMITS.setdefault(("budget", key), {"t0": now, "used": {}, "count": 0, "refused": 0,
                                                            "window": window, "requests": []})
            index = int((now - st["t0"]) // window)
            used = st["used"].get(index, 0) + 1
            st["used"][index] = used
            status = 200 if used <= limit else 429
            st["count"] += 1
            st["refused"] += status == 429
            st["requests"].append({"t": now, "status": status, "window": index})
            reset = st["t0"] + (index + 1) * window - now
        headers = _budget_headers(q.get("form", "ietf"), limit, max(0, limit - used), reset, window)
        if q.get("ms"):
            time.sleep(int(q["ms"]) / 1000)
        return h._send(status, "ok" if status == 200 else "over budget", headers=headers)
    if head == "overload":
        k = int(q.get("k", "4"))
        with _State.lock:
            st = SERVER_LIMITS.setdefault(("overload", key), {"inFlight": 0, "ok": 0, "refused": 0, "maxInFlight": 0,
                                                              "requests": []})
            accepted = st["inFlight"] < k
            if accepted:
                st["inFlight"] += 1
                st["maxInFlight"] = max(st["maxInFlight"], st["inFlight"])
            st["requests"].append({"t": now, "status": 200 if accepted else 429, "inFlight": st["inFlight"]})
            st["refused"] += not accepted
        if not accepted:
            return h._send(429, "too many in flight")
        try:
            time.sleep(int(q.get("ms", "100")) / 1000)
        finally:
            with _State.lock:
                st["inFlight"] -= 1
                st["ok"] += 1
        return h._send(200, "ok")
    if head == "metered":
        n, chunk = int(q.get("bytes", "100000")), int(q.get("chunk", "4096"))
        if not (0 <= n <= MAX_BYTES and 1 <= chunk <= 1 << 20):
            return h._send(400, "bad size")
        with _State.lock:
            st = SERVER_LIMITS.setdefault(("metered", key), {"requests": 0, "sends": []})
            st["requests"] += 1
        # A small send buffer: what the client has not read stays here, not in the kernel.
        h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        h.send_response(200)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(n))
        h.end_headers()
        h.wfile.flush()
        body = det_bytes(n)
        for offset in range(0, n, chunk):
            piece = body[offset:offset + chunk]
            h.wfile.write(piece)
            h.wfile.flush()
            with _State.lock:
                st["sends"].append([time.monotonic(), len(piece)])
        return None
    return h._send(404, "not found")


def _cache_origin(h, head, key, q):
    """/cache-origin/<key>: an origin whose caching headers the query sets. Every request is
    counted and logged (see /cache-origin-log/<key>). Body: "<key> v<n> <vary values>", n the
    request's number for the key (so a test sees which answer it got). Query:
      cc=V          Cache-Control: V        expires=S   Expires: now+S (expires-raw=V: as given)
      etag=E        ETag: "E" (a matching If-None-Match -> 304)
      lm=S          Last-Modified: S seconds before the key's first request, the same for every
                    request (If-Modified-Since at or after it -> 304, when no etag)
      vary=V        Vary: V (the body names the request's values of those fields)
      age=N         Age: N              date-offset=S  Date is now+S (a skewed origin clock)
      ms=T          hold the answer T ms     status=S  that status (default 200)
      then-status=S every request after the first answers S (a failing origin)
      no304=1       never 304               location=U / content-location=U  those headers
      set-cookie=V  Set-Cookie: V          bytes=N   a body of N deterministic bytes instead
      304-cc=V      the Cache-Control a 304 carries (default: the same as a 200's)
    """
    with _State.lock:
        st = CACHE_ORIGIN.setdefault(key, {"count": 0, "inFlight": 0, "maxInFlight": 0, "requests": [],
                                           "first": time.time()})
        if head == "cache-origin-log":
            out = {"count": st["count"], "requests": list(st["requests"]), "maxInFlight": st["maxInFlight"]}
            return h._json(out)
        st["count"] += 1
        n = st["count"]
        st["inFlight"] += 1
        st["maxInFlight"] = max(st["maxInFlight"], st["inFlight"])
        st["requests"].append({"method": h.command, "ifNoneMatch": h.headers.get("If-None-Match"),
                               "ifModifiedSince": h.headers.get("If-Modified-Since"),
                               "authorization": h.headers.get("Authorization"),
                               "cacheControl": h.headers.get("Cache-Control"), "pragma": h.headers.get("Pragma"),
                               "acceptLanguage": h.headers.get("Accept-Language")})
    try:
        if "ms" in q:
            time.sleep(int(q["ms"]) / 1000)
        now = time.time()
        status = int(q.get("status", "200"))
        if n > 1 and "then-status" in q:
            status = int(q["then-status"])
        headers = [("Date", formatdate(now + float(q.get("date-offset", "0")), usegmt=True))]
        cc = q.get("cc")
        # From the key's first request, not from now: a resource does not change its
        # Last-Modified between two requests that straddle a second.
        lm_time = st["first"] - float(q["lm"]) if "lm" in q else None
        etag = f'"{q["etag"]}"' if q.get("etag") else None
        not_modified = False
        if status == 200 and q.get("no304") != "1":
            inm = h.headers.get("If-None-Match")
            ims = h.headers.get("If-Modified-Since")
            if etag and inm:
                not_modified = etag in [t.strip() for t in inm.split(",")] or inm.strip() == "*"
            elif lm_time is not None and ims and not etag:
                try:
                    not_modified = parsedate_to_datetime(ims).timestamp() >= int(lm_time)
                except (TypeError, ValueError):
                    pass
        if not_modified and "304-cc" in q:
            cc = q["304-cc"]
        if cc is not None:
            headers.append(("Cache-Control", cc))
        if "expires" in q:
            headers.append(("Expires", formatdate(now + float(q["expires"]), usegmt=True)))
        if "expires-raw" in q:
            headers.append(("Expires", q["expires-raw"]))
        if etag:
            headers.append(("ETag", etag))
        if lm_time is not None:
            headers.append(("Last-Modified", formatdate(lm_time, usegmt=True)))
        if "vary" in q:
            headers.append(("Vary", q["vary"]))
        if "age" in q:
            headers.append(("Age", q["age"]))
        for name, param in (("Location", "location"), ("Content-Location", "content-location"), ("Set-Cookie", "set-cookie")):
            if param in q:
                headers.append((name, q[param]))
        headers.append(("X-Origin-Count", str(n)))
        if "bytes" in q:
            body = det_bytes(int(q["bytes"]))
        else:
            varied = [f"{v.strip().lower()}={h.headers.get(v.strip(), '')}" for v in q.get("vary", "").split(",")
                      if v.strip() and v.strip() != "*"]
            body = (" ".join([key, f"v{n}"] + varied)).encode()
        h.send_response_only(304 if not_modified else status)
        no_body = not_modified or status in (204, 304)
        if not no_body:
            headers += [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
        for k, v in headers:
            h.send_header(k, v)
        h.end_headers()
        if not no_body and h.command != "HEAD":
            h.wfile.write(body)
    finally:
        with _State.lock:
            st["inFlight"] -= 1


def _header_params(value):
    """Parse 'type; a=b; c="d"' into {'a': 'b', 'c': 'd'} (keys lowercased)."""
    out = {}
    i = value.find(";")
    rest = value[i + 1:] if i >= 0 else ""
    while rest:
        rest = rest.lstrip(" \t;")
        if not rest:
            break
        eq = rest.find("=")
        semi = rest.find(";")
        if eq < 0 or (0 <= semi < eq):
            rest = rest[semi + 1:] if semi >= 0 else ""
            continue
        key = rest[:eq].strip().lower()
        rest = rest[eq + 1:].lstrip()
        if rest.startswith('"'):
            j, val = 1, []
            while j < len(rest) and rest[j] != '"':
                if rest[j] == "\\" and j + 1 < len(rest):
                    j += 1
                val.append(rest[j])
                j += 1
            out[key] = "".join(val)
            rest = rest[j + 1:]
        else:
            semi = rest.find(";")
            out[key] = (rest[:semi] if semi >= 0 else rest).strip()
            rest = rest[semi + 1:] if semi >= 0 else ""
    return out


def parse_multipart(body, boundary):
    """Small multipart/form-data parser (RFC 7578). Returns a list of part descriptions."""
    delim = b"--" + boundary
    data = b"\r\n" + body
    pieces = data.split(b"\r\n" + delim)
    if len(pieces) < 2:
        raise ValueError("no boundary found")
    out = []
    closed = False
    for piece in pieces[1:]:
        if piece.startswith(b"--"):
            closed = True
            break
        nl = piece.find(b"\r\n")  # end of the boundary line (transport padding allowed)
        if nl < 0:
            raise ValueError("bad boundary line")
        piece = piece[nl + 2:]
        sep = piece.find(b"\r\n\r\n")
        if sep < 0:
            if piece.startswith(b"\r\n"):
                raw_headers, content = b"", piece[2:]
            else:
                raise ValueError("part without header end")
        else:
            raw_headers, content = piece[:sep], piece[sep + 4:]
        headers = {}
        for line in raw_headers.split(b"\r\n"):
            if b":" in line:
                k, v = line.split(b":", 1)
                headers[k.strip().decode("latin-1").lower()] = v.strip().decode("utf-8", errors="replace")
        disp = _header_params(headers.get("content-disposition", ""))
        part = {
            "name": disp.get("name"),
            "filename": disp.get("filename"),
            "contentType": headers.get("content-type"),
            "size": len(content),
            "sha256": hashlib.sha256(content).hexdigest(),
            "headers": headers,
        }
        if part["filename"] is None:
            part["value"] = content.decode("utf-8", errors="replace")
        out.append(part)
    if not closed:
        raise ValueError("missing closing boundary")
    return out


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return  # clients (the daemon under test) hang up on slow answers all the time
        super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    args = ap.parse_args()
    srv = Server(("127.0.0.1", args.port), Handler)
    port = srv.server_address[1]
    print(f"PORT {port}", flush=True)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    try:
        srv.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
