"""The request model's TLS, routing and protocol fields (insecure, caFile,
httpVersion, range, resolve, unixSocket) and the result's timings and remoteAddress, against
nginx (TLS with a test CA), the test server, and an HTTP server on a Unix socket."""
import contextlib
import http.server
import json
import os
import socketserver
import ssl
import subprocess
import tempfile
import threading
import unittest

from harness import FETCHCTL, DaemonTestCase, RPCError, big_bin, SMALL_TXT


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class UnixHandler(http.server.BaseHTTPRequestHandler):
    def address_string(self):
        return "unix"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"path": self.path, "host": self.headers.get("Host")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def unix_http_server(directory):
    """An HTTP server (UnixHandler) on a Unix socket in directory; yields the socket's path."""
    path = os.path.join(directory, "http.sock")
    server = UnixHTTPServer(path, UnixHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()


def self_signed(directory, name, cn):
    """A self-signed certificate and key made with openssl: (cert path, key path)."""
    cert, key = os.path.join(directory, name + ".pem"), os.path.join(directory, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=" + cn, "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


class EchoHandler(UnixHandler):
    def do_GET(self):
        peer = self.connection.getpeercert()
        subject = dict(x[0] for x in peer["subject"]) if peer else {}
        body = json.dumps({"client": subject.get("commonName")}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def mutual_tls_server(directory):
    """An HTTPS server (EchoHandler) on a thread that requires a client certificate, its files in
    directory: (server, server cert, client cert, client key); the caller shuts it down."""
    server_cert, server_key = self_signed(directory, "server", "127.0.0.1")
    client_cert, client_key = self_signed(directory, "client", "fetchd-client")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(server_cert, server_key)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(client_cert)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server_cert, client_cert, client_key


class TestClientCertificate(DaemonTestCase):
    """certFile/keyFile against a TLS server that requires a client certificate."""

    def test_mutual_tls(self):
        with tempfile.TemporaryDirectory() as d:
            server, server_cert, client_cert, client_key = mutual_tls_server(d)
            url = f"https://127.0.0.1:{server.server_address[1]}/"
            try:
                r = self.c.call("fetch", {"url": url, "caFile": server_cert, "certFile": client_cert,
                                          "keyFile": client_key, "retry": False})
                self.assertEqual((r["status"], json.loads(r["body"])), (200, {"client": "fetchd-client"}))
                with self.assertRaises(RPCError) as cm:  # no certificate: the server refuses the handshake
                    self.c.call("fetch", {"url": url, "caFile": server_cert, "retry": False}, timeout=20)
                self.assertEqual(cm.exception.code, -32001)
                self.assertIn(cm.exception.data["kind"], ("tls", "reset"), cm.exception.data)
                # fetchctl's --cacert/--cert/--key as curl's.
                args = ["-s", "--cacert", server_cert, "--cert", client_cert, "--key", client_key, url]
                curl = subprocess.run(["curl", *args], capture_output=True, timeout=20)
                ours = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path,
                                       "fetch", *args], capture_output=True, timeout=20)
                self.assertEqual((ours.returncode, ours.stdout), (curl.returncode, curl.stdout), ours.stderr)
                self.assertEqual(json.loads(ours.stdout), {"client": "fetchd-client"})
            finally:
                server.shutdown()
                server.server_close()
        with self.assertRaises(RPCError) as cm:
            self.c.call("fetch", {"url": url, "keyFile": "/etc/hostname"})
        self.assertEqual((cm.exception.code, cm.exception.data["field"]), (-32602, "keyFile"))
        with self.assertRaises(RPCError) as cm:
            self.c.call("fetch", {"url": url, "certFile": "client.pem"})
        self.assertEqual((cm.exception.code, cm.exception.data["field"]), (-32602, "certFile"))


class RecordingProxy(http.server.BaseHTTPRequestHandler):
    """A forward proxy that answers itself: it records each request line and Proxy-Authorization."""
    seen = []

    def log_message(self, *args):
        pass

    def do_CONNECT(self):
        """A tunnel (https through the proxy): recorded, then the bytes relayed both ways."""
        import socket
        from socks5 import relay
        RecordingProxy.seen.append({"line": self.requestline, "auth": self.headers.get("Proxy-Authorization")})
        host, port = self.path.rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)), timeout=10)
        self.send_response(200, "Connection established")
        self.end_headers()
        self.wfile.flush()
        relay(self.connection, upstream, idle=10)
        self.close_connection = True

    def do_PUT(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()

    def do_GET(self):
        RecordingProxy.seen.append({"line": self.requestline, "auth": self.headers.get("Proxy-Authorization")})
        body = b"via proxy"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class TestProxy(DaemonTestCase):
    def test_proxy_no_proxy_and_false(self):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingProxy)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        proxy = f"http://user:s3cret@127.0.0.1:{server.server_address[1]}"
        url = self.srv.test_url + "/status/200"
        try:
            RecordingProxy.seen.clear()
            r = self.c.call("fetch", {"url": url, "proxy": proxy})
            self.assertEqual((r["status"], r["body"]), (200, "via proxy"))
            import base64
            self.assertEqual(RecordingProxy.seen, [{"line": f"GET {url} HTTP/1.1",
                                                    "auth": "Basic " + base64.b64encode(b"user:s3cret").decode()}])
            r = self.c.call("fetch", {"url": url, "proxy": proxy, "noProxy": "127.0.0.1"})
            self.assertNotEqual(r["body"], "via proxy")
            r = self.c.call("fetch", {"url": url, "proxy": False})
            self.assertNotEqual(r["body"], "via proxy")
            self.assertEqual(len(RecordingProxy.seen), 1)
            # fetchctl -x as curl -x: the same line reaches the proxy.
            for cmd in (["curl"], [FETCHCTL, "--socket", self.daemon.socket_path, "fetch"]):
                r = subprocess.run(cmd + ["-s", "-x", proxy.replace("http://", ""), url], capture_output=True, timeout=20)
                self.assertEqual((r.returncode, r.stdout), (0, b"via proxy"), (cmd[0], r.stderr))
            self.assertEqual([x["line"] for x in RecordingProxy.seen[1:]], [f"GET {url} HTTP/1.1"] * 2)
            self.assertEqual(RecordingProxy.seen[1]["auth"], RecordingProxy.seen[2]["auth"])
        finally:
            server.shutdown()
            server.server_close()
        with self.assertRaises(RPCError) as cm:
            self.c.call("fetch", {"url": url, "proxy": "http://no-such-proxy.invalid:3128", "retry": False}, timeout=20)
        self.assertEqual((cm.exception.data["kind"], cm.exception.data["curlCode"]), ("proxy", 5))
        self.assertNotIn("s3cret", open(self.daemon.stderr_path).read())
        for bad in ("ftp://p:21", True, "127.0.0.1:3128", 5):
            with self.assertRaises(RPCError) as cm:
                self.c.call("fetch", {"url": url, "proxy": bad})
            self.assertEqual((cm.exception.code, cm.exception.data["field"]), (-32602, "proxy"), bad)


class TestProxyTunnels(DaemonTestCase):
    """https through an http proxy (CONNECT), and SOCKS5 (the daemon resolves) against
    SOCKS5h (the proxy resolves), with credentials; fetchctl -x as curl -x."""

    def test_connect_tunnel_to_a_tls_server(self):
        import base64
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingProxy)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        proxy = f"http://tun:n3l@127.0.0.1:{server.server_address[1]}"
        url = self.srv.nginx_tls_url + "/small.txt"
        target = url.split("/")[2]
        try:
            RecordingProxy.seen.clear()
            r = self.c.call("fetch", {"url": url, "proxy": proxy, "caFile": self.srv.ca_file, "retry": False})
            self.assertEqual((r["status"], r["body"]), (200, SMALL_TXT))
            self.assertEqual(RecordingProxy.seen, [{"line": f"CONNECT {target} HTTP/1.1",
                                                    "auth": "Basic " + base64.b64encode(b"tun:n3l").decode()}])
            # The certificate is still the server's, checked through the tunnel.
            with self.assertRaises(RPCError) as cm:
                self.c.call("fetch", {"url": url, "proxy": proxy, "retry": False}, timeout=20)
            self.assertEqual((cm.exception.data["kind"], cm.exception.data["curlCode"]), ("tls", 60))
            for cmd in (["curl"], [FETCHCTL, "--socket", self.daemon.socket_path, "fetch"]):
                r = subprocess.run(cmd + ["-s", "--cacert", self.srv.ca_file, "-x", proxy, url], capture_output=True, timeout=20)
                self.assertEqual((r.returncode, r.stdout), (0, SMALL_TXT.encode()), (cmd[0], r.stderr))
            self.assertEqual([x["line"] for x in RecordingProxy.seen[-2:]], [f"CONNECT {target} HTTP/1.1"] * 2)
            self.assertNotIn("n3l", open(self.daemon.stderr_path).read())
        finally:
            server.shutdown()
            server.server_close()

    def test_socks5_and_socks5h(self):
        from socks5 import Socks5Server
        socks = Socks5Server(credentials=("sox", "s3cret")).start()
        port = self.srv.test_url.rsplit(":", 1)[1]
        try:
            # socks5: the daemon resolves the name and hands the proxy an address.
            r = self.c.call("fetch", {"url": self.srv.test_url + "/echo", "proxy": f"socks5://sox:s3cret@127.0.0.1:{socks.port}"})
            self.assertEqual(r["status"], 200)
            self.assertEqual(socks.seen[-1], {"command": 1, "atyp": "ipv4", "host": "127.0.0.1", "port": int(port), "user": "sox"})
            # socks5h: the proxy resolves the name (a .invalid name only it knows).
            url = f"http://fetchd-socks.invalid:{port}/echo"
            r = self.c.call("fetch", {"url": url, "proxy": f"socks5h://sox:s3cret@127.0.0.1:{socks.port}"})
            self.assertEqual(json.loads(r["body"])["path"], "/echo")
            self.assertEqual(socks.seen[-1]["atyp"], "name")
            self.assertEqual(socks.seen[-1]["host"], "fetchd-socks.invalid")
            with self.assertRaises(RPCError) as cm:  # socks5 cannot resolve that name itself
                self.c.call("fetch", {"url": url, "proxy": f"socks5://sox:s3cret@127.0.0.1:{socks.port}", "retry": False}, timeout=20)
            self.assertEqual(cm.exception.code, -32001)
            with self.assertRaises(RPCError) as cm:  # wrong password
                self.c.call("fetch", {"url": url, "proxy": f"socks5h://sox:wrong@127.0.0.1:{socks.port}", "retry": False}, timeout=20)
            self.assertEqual(cm.exception.data["kind"], "proxy", cm.exception.data)
            for cmd in (["curl"], [FETCHCTL, "--socket", self.daemon.socket_path, "fetch"]):
                r = subprocess.run(cmd + ["-s", "-x", f"socks5h://sox:s3cret@127.0.0.1:{socks.port}", url], capture_output=True, timeout=20)
                self.assertEqual(r.returncode, 0, (cmd[0], r.stderr))
                self.assertEqual(json.loads(r.stdout)["path"], "/echo")
                self.assertEqual(socks.seen[-1]["host"], "fetchd-socks.invalid")
            self.assertNotIn("s3cret", open(self.daemon.stderr_path).read())
        finally:
            socks.stop()


class TestExchange(DaemonTestCase):
    """exchange: true: every hop's headers as sent and received, never a rule's or a proxy's secret."""

    def test_hops_in_order_and_secrets_hidden(self):
        host = "127.0.0.1:" + self.srv.test_url.rsplit(":", 1)[1]
        self.c.call("setAuth", {"host": host, "type": "bearer", "token": "t0ken-from-rule"})
        try:
            r = self.c.call("fetch", {"url": self.srv.test_url + "/redirect/1", "exchange": True, "headers": {"X-Mine": "1"}})
        finally:
            self.c.call("setAuth", {"host": host, "type": None})
        hops = r["exchange"]
        self.assertEqual([(h["method"], h["status"], h["statusText"]) for h in hops], [("GET", 302, "Found"), ("GET", 200, "OK")])
        self.assertEqual(hops[1]["url"], self.srv.test_url + "/redirect/0")
        sent = dict(hops[0]["requestHeaders"])
        self.assertEqual((sent["Host"], sent["X-Mine"]), (host, "1"))
        self.assertEqual(sent["Authorization"], "<redacted>")
        self.assertNotIn("t0ken-from-rule", json.dumps(r))
        self.assertEqual([k for k, _ in hops[0]["responseHeaders"]][-1], "Location")
        self.assertEqual(r["sentBytes"], 0)
        self.assertNotIn("exchange", self.c.call("fetch", {"url": self.srv.test_url + "/status/200"}))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingProxy)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            r = self.c.call("fetch", {"url": self.srv.test_url + "/status/200", "exchange": True, "body": "abc", "method": "PUT",
                                      "proxy": f"http://u:pr0xy-pass@127.0.0.1:{server.server_address[1]}"})
            self.assertEqual(dict(r["exchange"][0]["requestHeaders"])["Proxy-Authorization"], "<redacted>")
            self.assertNotIn("pr0xy-pass", json.dumps(r))
            self.assertEqual(r["sentBytes"], 3)
        finally:
            server.shutdown()
            server.server_close()


class TestCookieOrder(DaemonTestCase):
    """RFC 6265 5.4: among cookies of equal path, the earlier-created first (libcurl 7.88 sends
    its newest first); a replaced cookie keeps its place; a longer path goes first."""

    def sent(self, jar):
        return self.c.call("fetch", {"url": self.srv.test_url + "/cookies", "cookieJar": jar})["body"]

    def set(self, jar, query):
        self.c.call("fetch", {"url": self.srv.test_url + "/set-cookie?" + query, "cookieJar": jar})

    def test_earlier_created_first(self):
        self.set("ord", "a=1&z=2&m=3")
        self.assertEqual(json.loads(self.sent("ord"))["cookie"], "a=1; z=2; m=3")
        self.set("ord", "b=4")
        self.assertEqual(json.loads(self.sent("ord"))["cookie"], "a=1; z=2; m=3; b=4")
        self.set("ord", "z=9")
        self.assertEqual(json.loads(self.sent("ord"))["cookie"], "a=1; z=9; m=3; b=4")
        self.set("ord", "raw=p%3D5%3B%20Path%3D%2Fcookies")
        self.assertEqual(json.loads(self.sent("ord"))["cookie"], "p=5; a=1; z=9; m=3; b=4")
        self.c.call("clearCookies", {"cookieJar": "ord", "domain": "no-such.example"})
        self.assertEqual(json.loads(self.sent("ord"))["cookie"], "p=5; a=1; z=9; m=3; b=4")
        host = "127.0.0.1"
        self.c.call("setCookies", {"cookieJar": "ord2", "cookies": [
            {"name": n, "value": "v", "domain": host, "path": "/"} for n in ("y", "c", "x")]})
        self.assertEqual(json.loads(self.sent("ord2"))["cookie"], "y=v; c=v; x=v")


class TestRedirectSchemes(DaemonTestCase):
    """Only http and https, redirects included: a redirect to file:// or ftp:// is refused
    with -32004 and its target is never read."""

    def test_redirect_to_file_and_ftp_refused(self):
        import socket
        from urllib.parse import quote
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "target")
            os.mkfifo(fifo)
            opened = threading.Event()

            def writer():  # open() returns only once someone opens the FIFO to read it
                with open(fifo, "wb") as f:
                    opened.set()
                    f.write(b"secret")
            t = threading.Thread(target=writer, daemon=True)
            t.start()
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listener.settimeout(0.3)
            try:
                for target in ("file://" + fifo, f"ftp://127.0.0.1:{listener.getsockname()[1]}/x"):
                    with self.assertRaises(RPCError) as cm:
                        self.c.call("fetch", {"url": self.srv.test_url + "/redirect-to?url=" + quote(target, safe="")}, timeout=20)
                    self.assertEqual(cm.exception.code, -32004, cm.exception)
                    self.assertIn("redirect", cm.exception.data["detail"])
                self.assertFalse(opened.is_set(), "the file:// target was opened")
                with self.assertRaises(socket.timeout):
                    listener.accept()  # nobody connected to the ftp:// target
            finally:
                listener.close()
                with open(fifo, "rb") as f:  # let the writer go
                    f.read()
                t.join(5)


class TestProxyEnvironment(unittest.TestCase):
    def test_http_proxy_from_the_daemons_environment_and_proxy_false(self):
        from harness import Daemon, servers
        srv = servers()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingProxy)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        daemon = Daemon(env={"http_proxy": f"http://127.0.0.1:{server.server_address[1]}", "no_proxy": ""}).start()
        try:
            with daemon.client() as c:
                url = srv.test_url + "/status/200"
                self.assertEqual(c.call("fetch", {"url": url})["body"], "via proxy")
                self.assertNotEqual(c.call("fetch", {"url": url, "proxy": False})["body"], "via proxy")
        finally:
            daemon.close()
            server.shutdown()
            server.server_close()


class TestRequestRouting(DaemonTestCase):
    def error(self, params):
        with self.assertRaises(RPCError) as cm:
            self.c.call("fetch", params, timeout=20)
        return cm.exception

    def test_insecure_and_verifying_requests_alternate(self):
        url = self.srv.nginx_tls_url + "/small.txt"
        for _ in range(3):
            r = self.c.call("fetch", {"url": url, "insecure": True, "retry": False})
            self.assertEqual((r["status"], r["body"]), (200, SMALL_TXT))
            # The insecure request's connection must not serve a verifying one.
            e = self.error({"url": url, "retry": False})
            self.assertEqual((e.code, e.data["kind"], e.data["curlCode"]), (-32001, "tls", 60), e)

    def test_ca_file(self):
        r = self.c.call("fetch", {"url": self.srv.nginx_tls_url + "/small.txt", "caFile": self.srv.ca_file})
        self.assertEqual((r["status"], r["body"]), (200, SMALL_TXT))
        e = self.error({"url": self.srv.nginx_tls_url + "/small.txt", "caFile": "relative.pem"})
        self.assertEqual((e.code, e.data["field"]), (-32602, "caFile"))

    def test_http_version(self):
        url = self.srv.nginx_tls_url + "/proto"
        r = self.c.call("fetch", {"url": url, "caFile": self.srv.ca_file})
        self.assertEqual((r["body"], r["httpVersion"]), ("HTTP/2.0", "HTTP/2"))
        r = self.c.call("fetch", {"url": url, "caFile": self.srv.ca_file, "httpVersion": "1.1"})
        self.assertEqual(r["body"], "HTTP/1.1")
        e = self.error({"url": url, "httpVersion": "3"})
        self.assertEqual((e.code, e.data["field"]), (-32602, "httpVersion"))

    def test_range(self):
        want = big_bin()
        r = self.c.call("fetch", {"url": self.srv.nginx_url + "/big.bin", "range": "100-199", "responseBody": "base64"})
        import base64
        self.assertEqual((r["status"], base64.b64decode(r["bodyBase64"])), (206, want[100:200]))
        r = self.c.call("fetch", {"url": self.srv.nginx_url + "/big.bin", "range": f"{len(want) - 5}-", "responseBody": "base64"})
        self.assertEqual((r["status"], base64.b64decode(r["bodyBase64"])), (206, want[-5:]))
        for bad in ("", "5", "a-b", "9-1", "-5", "1-2-3"):
            e = self.error({"url": self.srv.nginx_url + "/big.bin", "range": bad})
            self.assertEqual((e.code, e.data["field"]), (-32602, "range"), bad)

    def test_resolve(self):
        port = self.srv.test_url.rsplit(":", 1)[1]
        url = f"http://fetchd-resolve.invalid:{port}/echo"
        r = self.c.call("fetch", {"url": url, "resolve": {f"fetchd-resolve.invalid:{port}": "127.0.0.1"}})
        self.assertEqual(r["status"], 200)
        sent = {k.lower(): v for k, v in json.loads(r["body"])["headers"]}
        self.assertEqual(sent["host"], f"fetchd-resolve.invalid:{port}")
        # Not kept for other requests: without resolve the name does not resolve.
        e = self.error({"url": url, "retry": False})
        self.assertEqual(e.data["kind"], "dns")
        for bad in ({"nohost": "127.0.0.1"}, {"h:99999": "127.0.0.1"}, {"h:80": "not an address"}, {"h:80": 1}):
            e = self.error({"url": url, "resolve": bad})
            self.assertEqual(e.code, -32602, bad)
            self.assertTrue(e.data["field"].startswith("resolve."), e.data)

    def test_unix_socket(self):
        with tempfile.TemporaryDirectory() as d, unix_http_server(d) as path:
            r = self.c.call("fetch", {"url": "http://docker.invalid/v1.43/info?x=1", "unixSocket": path})
            self.assertEqual(r["status"], 200)
            self.assertEqual(json.loads(r["body"]), {"path": "/v1.43/info?x=1", "host": "docker.invalid"})
        e = self.error({"url": "http://x/", "unixSocket": "rel.sock"})
        self.assertEqual((e.code, e.data["field"]), (-32602, "unixSocket"))

    def test_queued_ms_is_the_wait_for_the_host(self):
        host = "127.0.0.1:" + self.srv.test_url.rsplit(":", 1)[1]
        self.c.call("setRateLimit", {"host": host, "maxConcurrent": 1})
        try:
            slow = {}
            def first():
                with self.daemon.client() as c2:
                    slow["r"] = c2.call("fetch", {"url": self.srv.test_url + "/slow-headers?ms=800"}, timeout=20)
            t = threading.Thread(target=first)
            t.start()
            import time
            deadline = time.monotonic() + 5
            while not self.c.call("listJobs")["jobs"] and time.monotonic() < deadline:
                time.sleep(0.01)
            r = self.c.call("fetch", {"url": self.srv.test_url + "/echo"}, timeout=20)
            t.join(20)
            self.assertGreater(r["timings"]["queuedMs"], 300, r["timings"])
            self.assertLess(slow["r"]["timings"]["queuedMs"], 100, slow["r"]["timings"])
        finally:
            self.c.call("setRateLimit", {"host": host, "maxConcurrent": None})

    def test_bandwidth_caps(self):
        import time
        # 2 MB at 400 KiB/s: at least about 4 s, libcurl letting the first buffers through (a lower bound only).
        t0 = time.monotonic()
        r = self.c.call("fetch", {"url": self.srv.test_url + "/bytes/2000000", "maxRecvBytesPerSecond": 400 * 1024,
                                  "responseBody": "none"}, timeout=30)
        took = time.monotonic() - t0
        self.assertEqual((r["status"], r["bytes"]), (200, 2_000_000))
        self.assertGreater(took, 2.0)
        t0 = time.monotonic()
        r = self.c.call("fetch", {"url": self.srv.test_url + "/echo", "bodyBase64": __import__("base64").b64encode(b"x" * 300_000).decode(),
                                  "maxSendBytesPerSecond": 200_000}, timeout=30)
        self.assertEqual(json.loads(r["body"])["bodyLength"], 300_000)
        self.assertGreater(time.monotonic() - t0, 0.9)
        for name in ("maxRecvBytesPerSecond", "maxSendBytesPerSecond"):
            for bad in (0, -1, "1", 1.5):
                e = self.error({"url": self.srv.test_url + "/echo", name: bad})
                self.assertEqual((e.code, e.data["field"]), (-32602, name), bad)

    def test_timings_and_remote_address(self):
        r = self.c.call("fetch", {"url": self.srv.nginx_tls_url + "/small.txt", "caFile": self.srv.ca_file})
        t = r["timings"]
        self.assertEqual(set(t), {"queuedMs", "dnsMs", "connectMs", "tlsMs", "firstByteMs", "totalMs"})
        # A reused connection has connect and TLS times of 0, as curl's time_connect.
        self.assertTrue(all(v >= 0 for v in t.values()), t)
        self.assertTrue(max(t["dnsMs"], t["connectMs"], t["tlsMs"]) <= t["firstByteMs"] <= t["totalMs"], t)
        self.assertGreater(t["totalMs"], 0)
        self.assertEqual(r["remoteAddress"], "127.0.0.1")


if __name__ == "__main__":
    unittest.main()
