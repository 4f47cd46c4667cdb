"""Shared harness for fetchd's integration tests: real servers on loopback, the real daemon
on a temporary socket, and a small JSON-RPC client.

    srv = servers()                 # .test_url, .nginx_url, .nginx_tls_url, .ca_file, .static_dir
    with Daemon("--max-message-bytes", "1024") as d:
        c = d.client()
        c.call("ping")              # -> "pong", or raises RPCError(code, message, data)
"""
import atexit
import collections
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SUPPORT = os.path.join(REPO, "tests", "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)

import nginx as _nginx  # noqa: E402
import testserver  # noqa: E402  (det_bytes, GZIP_TEXT, JSON_DOC, ... for expectations)

FETCHD_BIN = os.environ.get("FETCHD_BIN", os.path.join(REPO, ".build", "debug", "fetchd"))
# The fetchctl the black-box tests run: $FETCHCTL, else the one in clients/.
FETCHCTL = os.environ.get("FETCHCTL") or os.path.join(REPO, "clients", "fetchctl")


def compiled_fetchctl():
    """The compiled fetchctl (clients/fetchctl-src): $FETCHCTL, else clients/fetchctl when it is
    not the shell script, else .build/fetchctl-c/fetchctl (make fetchctl); None when none is built."""
    for path in (os.environ.get("FETCHCTL"), os.path.join(REPO, "clients", "fetchctl"),
                 os.path.join(REPO, ".build", "fetchctl-c", "fetchctl")):
        if path and os.access(path, os.X_OK):
            with open(path, "rb") as f:
                if f.read(2) != b"#!":
                    return path
    return None

INDEX_HTML = "<!doctype html>\n<html><body><h1>fetchd test index</h1></body></html>\n"
SMALL_TXT = ("0123456789" * 10)[:99] + "\n"  # 100 bytes
UTF8_TXT = "Grüße aus Köln — 日本語テキスト — emoji 😀\n"
BIG_SIZE = 5 * 1024 * 1024
BIG_SEED = 4242


def big_bin():
    return testserver.det_bytes(BIG_SIZE, seed=BIG_SEED)


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def wait_for(predicate, timeout=5.0, interval=0.005, message=None):
    """Poll predicate() until it returns something truthy; return that. AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(message or f"condition not met within {timeout}s")
        time.sleep(interval)


# --------------------------------------------------------------------------- servers
class _Servers:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="fetchd-servers-")
        self.static_dir = os.path.join(self.tmp, "static")
        os.makedirs(self.static_dir)
        self._write_static()
        self.ca_file, key = self._make_cert()
        self._ts = None
        self._nginx = None
        try:
            self._start_testserver()
            self._nginx = _nginx.Nginx(self.static_dir, tls=(self.ca_file, key)).start()
        except BaseException:
            self.stop()
            raise
        self.nginx_url = self._nginx.url
        self.nginx_tls_url = self._nginx.tls_url

    def _write_static(self):
        files = {"index.html": INDEX_HTML.encode(), "small.txt": SMALL_TXT.encode(),
                 "utf8.txt": UTF8_TXT.encode("utf-8"), "big.bin": big_bin()}
        for name, data in files.items():
            with open(os.path.join(self.static_dir, name), "wb") as f:
                f.write(data)

    def _make_cert(self):
        cert = os.path.join(self.tmp, "cert.pem")
        key = os.path.join(self.tmp, "key.pem")
        r = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            capture_output=True)
        if r.returncode != 0:
            raise RuntimeError("openssl failed: " + r.stderr.decode(errors="replace"))
        return cert, key

    def _start_testserver(self, timeout=10.0):
        self._ts = subprocess.Popen(
            [sys.executable, os.path.join(SUPPORT, "testserver.py"), "--port", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=None)
        deadline = time.monotonic() + timeout
        line = b""
        fd = self._ts.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self._ts.poll() is not None:
                raise RuntimeError("testserver did not start")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 1)
                if not chunk:
                    raise RuntimeError("testserver exited")
                line += chunk
        assert line.startswith(b"PORT "), line
        self.test_port = int(line.split()[1])
        self.test_url = f"http://127.0.0.1:{self.test_port}"
        _nginx.wait_port(self.test_port, deadline, self._ts)

    def stop(self):
        if self._nginx:
            self._nginx.stop()
            self._nginx = None
        if self._ts and self._ts.poll() is None:
            self._ts.terminate()
            try:
                self._ts.wait(5)
            except subprocess.TimeoutExpired:
                self._ts.kill()
                self._ts.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


_servers = None
_servers_lock = threading.Lock()


def servers():
    """The shared test servers (started on first use, stopped at exit)."""
    global _servers
    with _servers_lock:
        if _servers is None:
            _servers = _Servers()
            atexit.register(_servers.stop)
        return _servers


def closed_port():
    """A loopback port with nothing listening (bound then released)."""
    return _nginx.free_port()


# --------------------------------------------------------------------------- JSON-RPC client
class RPCError(Exception):
    def __init__(self, code, message, data=None, answer=None):
        super().__init__(f"RPC error {code}: {message} data={json.dumps(data)}")
        self.code = code
        self.message = message
        self.data = data
        self.answer = answer


class ConnectionClosed(EOFError):
    pass


def _idkey(i):
    return json.dumps(i, sort_keys=True)


class RPCClient:
    def __init__(self, socket_path, connect_timeout=5.0):
        self.socket_path = socket_path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(connect_timeout)
        self.sock.connect(socket_path)
        self._buf = b""
        self._eof = False
        self._next_id = 1
        self._backlog = collections.deque()  # messages read by call() that were not its answer
        self.notifications = []
        self.last_raw = None  # the raw bytes of the last line received (with its newline)

    # -- sending
    def send_raw(self, data):
        self.sock.settimeout(30)
        self.sock.sendall(data)

    def send_obj(self, obj):
        self.send_raw(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- receiving
    def recv_line(self, timeout=10.0):
        """The next non-blank raw line (bytes, with newline). TimeoutError / ConnectionClosed."""
        deadline = time.monotonic() + timeout
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl + 1], self._buf[nl + 1:]
                if line.strip():
                    self.last_raw = line
                    return line
                continue
            if self._eof:
                raise ConnectionClosed(f"connection closed (pending bytes: {self._buf[:200]!r})")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no message within {timeout}s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                raise TimeoutError(f"no message within {timeout}s") from None
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self._eof = True
            self._buf += chunk

    def recv(self, timeout=10.0):
        """Next parsed message (dict or list) from the stream, including ones call() set aside."""
        if self._backlog:
            return self._backlog.popleft()
        return json.loads(self.recv_line(timeout))

    def recv_until_eof(self, timeout=10.0):
        """Every message until the daemon closes the connection."""
        out = list(self._backlog)
        self._backlog.clear()
        deadline = time.monotonic() + timeout
        while True:
            try:
                out.append(json.loads(self.recv_line(max(0.0, deadline - time.monotonic()))))
            except ConnectionClosed:
                return out

    def wait_closed(self, timeout=10.0):
        """True when the daemon closed the connection without sending anything more."""
        try:
            line = self.recv_line(timeout)
        except ConnectionClosed:
            return True
        raise AssertionError(f"expected the connection to close, got {line[:300]!r}")

    def new_id(self):
        i = self._next_id
        self._next_id += 1
        return i

    def answer_for(self, req_id, timeout=10.0):
        """Wait for the answer object with this id; others are kept for later."""
        key = _idkey(req_id)
        for i, m in enumerate(self._backlog):
            if isinstance(m, dict) and "method" not in m and _idkey(m.get("id")) == key:
                del self._backlog[i]
                return m
        deadline = time.monotonic() + timeout
        while True:
            m = json.loads(self.recv_line(max(0.0, deadline - time.monotonic())))
            if isinstance(m, dict) and "method" in m and "id" not in m:
                self.notifications.append(m)
            elif isinstance(m, dict) and _idkey(m.get("id")) == key:
                return m
            else:
                self._backlog.append(m)

    def request(self, method, params=None, req_id=None, timeout=10.0):
        """Send a request and return the whole answer object."""
        if req_id is None:
            req_id = self.new_id()
        msg = {"jsonrpc": "2.0", "method": method, "id": req_id}
        if params is not None:
            msg["params"] = params
        self.send_obj(msg)
        return self.answer_for(req_id, timeout)

    def call(self, method, params=None, timeout=10.0):
        a = self.request(method, params, timeout=timeout)
        if "error" in a:
            e = a["error"]
            raise RPCError(e.get("code"), e.get("message"), e.get("data"), answer=a)
        return a["result"]

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send_obj(msg)


# --------------------------------------------------------------------------- the daemon
class Daemon:
    """The real fetchd on a temporary socket.

    Daemon(*extra_args, env=None, socket_path=None, pass_socket=True, wait=True, preexec=None)
    preexec: run in the child before exec (resource limits, signal dispositions).
    """

    def __init__(self, *args, env=None, socket_path=None, pass_socket=True, wait=True, bin=None, preexec=None):
        self.tmpdir = tempfile.mkdtemp(prefix="fetchd-test-")
        self.socket_path = socket_path or os.path.join(self.tmpdir, "fetchd.sock")
        self.args = list(args)
        self.env = env
        self.pass_socket = pass_socket
        self.wait = wait
        self.bin = bin or FETCHD_BIN
        self.preexec = preexec
        self.proc = None
        self.stderr_path = os.path.join(self.tmpdir, "stderr.log")
        self.stdout_path = os.path.join(self.tmpdir, "stdout.log")
        self._clients = []

    @property
    def pid(self):
        return self.proc.pid

    def command(self):
        cmd = [self.bin]
        if self.pass_socket:
            cmd += ["--socket", self.socket_path]
        # fetchd keeps an HTTP cache by default; tests see the network unless they ask for a
        # cache (--cache-dir, --cache-max-bytes: the default directory) or configure one (--config).
        if not any(a in ("--cache-dir", "--cache-max-bytes", "--no-cache", "--config") or a.startswith(("--cache-dir=", "--config="))
                   for a in self.args):
            cmd.append("--no-cache")
        return cmd + self.args

    def start(self, timeout=20.0):
        """Start the daemon and (unless wait=False) wait until it accepts; cleans up on failure."""
        try:
            if not os.access(self.bin, os.X_OK):
                raise RuntimeError(f"fetchd binary not found at {self.bin} (build it, or set FETCHD_BIN)")
            env = dict(os.environ)
            env.pop("FETCHD_SOCKET", None)
            if self.env:
                env.update(self.env)
            with open(self.stderr_path, "wb") as err, open(self.stdout_path, "wb") as out:
                self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=err, env=env, preexec_fn=self.preexec)
            if self.wait:
                self.wait_ready(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def wait_ready(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fetchd exited with {self.proc.returncode} before accepting; "
                                   f"stderr: {self.stderr_text()[-2000:]}")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.socket_path)
                return
            except OSError:
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"fetchd did not accept on {self.socket_path} within {timeout}s; "
                                       f"stderr: {self.stderr_text()[-2000:]}")
                time.sleep(0.01)
            finally:
                s.close()

    def client(self, connect_timeout=5.0):
        c = RPCClient(self.socket_path, connect_timeout)
        self._clients.append(c)
        return c

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Send sig and wait for the exit; returns the exit code (negative: killed by a signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"fetchd did not exit within {timeout}s of signal {sig}")
        return self.proc.returncode

    def stderr_text(self):
        try:
            with open(self.stderr_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stdout_text(self):
        try:
            with open(self.stdout_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def fd_count(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def close(self):
        for c in self._clients:
            c.close()
        self._clients.clear()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.close()


def run_fetchd(*args, timeout=20.0, env=None):
    """Run the binary to completion (for --help, --version, refusals); CompletedProcess."""
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([FETCHD_BIN, *args], capture_output=True, timeout=timeout, env=e,
                          stdin=subprocess.DEVNULL)


# --------------------------------------------------------------------------- test helpers
def header_values(echo, name):
    """Values of a request header as the test server saw it (case-insensitive)."""
    return [v for k, v in echo["headers"] if k.lower() == name.lower()]


class DaemonTestCase(unittest.TestCase):
    """Base TestCase: one daemon per class (DAEMON_ARGS, and DAEMON_PREEXEC run in the
    daemon's process before exec), helpers for checks."""
    DAEMON_ARGS = ()
    DAEMON_PREEXEC = None

    @classmethod
    def setUpClass(cls):
        cls.srv = servers()
        cls.daemon = Daemon(*cls.DAEMON_ARGS, preexec=cls.DAEMON_PREEXEC).start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()

    def setUp(self):
        self.c = self.daemon.client()

    def tearDown(self):
        self.c.close()

    def assertAlive(self):
        """The daemon still answers ping on a fresh connection."""
        with self.daemon.client() as c2:
            self.assertEqual(c2.call("ping", timeout=10), "pong",
                             "daemon no longer answers ping")

    def fetch(self, params, timeout=30, client=None):
        return (client or self.c).call("fetch", params, timeout=timeout)

    def fetch_error(self, params, timeout=30, client=None):
        try:
            r = (client or self.c).call("fetch", params, timeout=timeout)
        except RPCError as e:
            return e
        self.fail(f"fetch {json.dumps(params)[:300]} succeeded, expected an error; result: {json.dumps(r)[:500]}")

    def echo(self, params, timeout=30):
        """fetch against the test server's /echo and return (result, parsed echo)."""
        r = self.fetch(params, timeout)
        self.assertEqual(r["status"], 200, r)
        self.assertIn("body", r, r)
        return r, json.loads(r["body"])


def ping_seconds(daemon, timeout=5):
    """How long a ping on a fresh connection takes to be answered (nothing may hold the
    thread that reads requests)."""
    with daemon.client() as c:
        started = time.monotonic()
        if c.call("ping", timeout=timeout) != "pong":
            raise AssertionError("ping was not answered pong")
        return time.monotonic() - started


class AllowDirCase(unittest.TestCase):
    """One daemon per class with --allow-dir: `allowed` inside, `outside` next to it."""
    OUTSIDE = "outside"

    @classmethod
    def setUpClass(cls):
        cls.srv = servers()
        cls.base = tempfile.mkdtemp(prefix="fetchd-allow-")
        cls.allowed = os.path.join(cls.base, "allowed")
        cls.outside = os.path.join(cls.base, cls.OUTSIDE)
        os.makedirs(cls.allowed)
        os.makedirs(cls.outside)
        cls.daemon = Daemon("--allow-dir", cls.allowed).start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()
        shutil.rmtree(cls.base, ignore_errors=True)

    def setUp(self):
        self.c = self.daemon.client()

    def tearDown(self):
        self.c.close()
