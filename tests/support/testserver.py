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
  /multipart-echo                {"parts": [{"name","filename","contentType","size","sha256",...}]}
anything else: 404.
"""
import argparse
import base64
import gzip
import hashlib
import json
import os
import random
import socket
import struct
import sys
import threading
import time
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
            if head == "flaky" and len(seg) == 2:
                key = seg[1]
                _hit(key)
                with _State.lock:
                    n = _State.flaky.get(key, 0) + 1
                    _State.flaky[key] = n
                fail = int(q.get("fail", "1"))
                if n <= fail:
                    st = int(q.get("status", "503"))
                    hs = [("Retry-After", q["retry-after"])] if "retry-after" in q else []
                    return self._send(st, f"status {st}", headers=hs)
                return self._send(200, f"ok after {fail}")
            if head == "record" and len(seg) == 2:
                return self._record(seg[1], int(q.get("ms", "0")))
            if head == "hits" and len(seg) == 2:
                with _State.lock:
                    h = _State.hits.get(seg[1], {"times": [], "inFlight": 0, "maxConcurrent": 0})
                    out = {"count": len(h["times"]), "times": list(h["times"]),
                           "maxConcurrent": h["maxConcurrent"], "inFlight": h["inFlight"]}
                return self._json(out)
            if path == "/multipart-echo":
                return self._multipart(body)
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
