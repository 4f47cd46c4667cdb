#!/usr/bin/env python3
"""budget_origin: an API with a request budget per fixed window, for the bench (not a test).

    python3 bench/budget_origin.py PORT LIMIT WINDOW_SECONDS

GET /budget/<key>   counts against <key>'s budget: LIMIT requests per fixed window of
                    WINDOW_SECONDS, the first window starting at the key's first request. Every
                    answer says what is left in the IETF form (RateLimit-Policy and RateLimit,
                    `t` rounded up to whole seconds); past the budget the answer is 429, with the
                    same fields and a Retry-After, as GitHub's and most APIs' are.
GET /log/<key>      {"limit", "window", "requests": [[t, status, window index]...]}, t in seconds
                    from the key's first request.
Other paths: 404. HTTP/1.1 with keep-alive; one thread per connection; loopback only.
"""
import json
import math
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
KEYS = {}   # key -> {"t0": monotonic of the first request, "used": {window index: count}, "log": [...]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    limit, window = 100, 10.0

    def log_message(self, *_):
        pass

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) == 2 and parts[0] == "budget":
            now = time.monotonic()
            with LOCK:
                k = KEYS.setdefault(parts[1], {"t0": now, "used": {}, "log": []})
                t = now - k["t0"]
                w = int(t // self.window)
                used = k["used"][w] = k["used"].get(w, 0) + 1
                status = 200 if used <= self.limit else 429
                k["log"].append([round(t, 6), status, w])
            reset = math.ceil((w + 1) * self.window - t)
            fields = [("RateLimit-Policy", f'"default";q={self.limit};w={math.ceil(self.window)}'),
                      ("RateLimit", f'"default";r={max(0, self.limit - used)};t={reset}')]
            if status == 429:
                self.answer(429, b"too many requests\n", fields + [("Retry-After", str(reset))])
            else:
                self.answer(200, b"x" * 99 + b"\n", fields)
        elif len(parts) == 2 and parts[0] == "log":
            with LOCK:
                k = KEYS.get(parts[1], {"log": []})
                body = json.dumps({"limit": self.limit, "window": self.window, "requests": list(k["log"])}).encode()
            self.answer(200, body, [("Content-Type", "application/json")])
        else:
            self.answer(404, b"not found\n")


def main():
    port, Handler.limit, Handler.window = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
