#!/usr/bin/env python3
"""Start Debian's nginx on 127.0.0.1 for tests, everything inside a temporary prefix.

    ng = Nginx(static_dir, tls=(cert, key))   # tls optional: adds an https+http2 port
    ng.start(); ng.url, ng.tls_url; ng.stop()

Run as a script to serve a directory by hand: python3 tests/support/nginx.py DIR
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NGINX = os.environ.get("NGINX_BIN", "/usr/sbin/nginx")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, deadline, proc=None, host="127.0.0.1"):
    """Poll connect() until the port accepts or the deadline (time.monotonic()) passes."""
    while True:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


class Nginx:
    def __init__(self, static_dir, tls=None):
        self.static_dir = os.path.abspath(static_dir)
        self.tls = tls  # (certfile, keyfile) or None
        self.prefix = None
        self.proc = None
        self.port = None
        self.tls_port = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    @property
    def tls_url(self):
        return f"https://127.0.0.1:{self.tls_port}" if self.tls_port else None

    def _config(self):
        p = self.prefix
        user = "user root;\n" if os.getuid() == 0 else ""
        tls = ""
        if self.tls:
            cert, key = self.tls
            tls = f"""
    server {{
        listen 127.0.0.1:{self.tls_port} ssl http2;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {self.static_dir};
        location = /proto {{ default_type text/plain; return 200 "$server_protocol"; }}
    }}"""
        return f"""{user}daemon off;
master_process off;
worker_processes 1;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    keepalive_requests 100000;
    client_body_temp_path {p}/client_body_temp;
    proxy_temp_path {p}/proxy_temp;
    fastcgi_temp_path {p}/fastcgi_temp;
    uwsgi_temp_path {p}/uwsgi_temp;
    scgi_temp_path {p}/scgi_temp;
    server {{
        listen 127.0.0.1:{self.port};
        server_name localhost;
        root {self.static_dir};
        location = /proto {{ default_type text/plain; return 200 "$server_protocol"; }}
    }}{tls}
}}
"""

    def start(self, timeout=10.0):
        if not os.path.exists(NGINX):
            raise RuntimeError(f"nginx not found at {NGINX} (apt-get install nginx)")
        self.prefix = tempfile.mkdtemp(prefix="fetchd-nginx-")
        err = ""
        for _ in range(5):  # a freshly picked free port can be taken before nginx binds it
            self.port = free_port()
            self.tls_port = free_port() if self.tls else None
            conf = os.path.join(self.prefix, "nginx.conf")
            with open(conf, "w") as f:
                f.write(self._config())
            self.proc = subprocess.Popen(
                [NGINX, "-p", self.prefix, "-c", conf, "-e", os.path.join(self.prefix, "error.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + timeout
            ok = wait_port(self.port, deadline, self.proc)
            if ok and self.tls_port:
                ok = wait_port(self.tls_port, deadline, self.proc)
            if ok:
                return self
            if self.proc.poll() is None:
                self.proc.kill()
            _, e = self.proc.communicate()
            err = (e or b"").decode(errors="replace") + self._error_log()
            if "Address already in use" not in err:
                break
        self.stop()
        raise RuntimeError(f"nginx did not start: {err}")

    def _error_log(self):
        try:
            with open(os.path.join(self.prefix, "error.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout=10.0):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful shutdown
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None
        if self.prefix:
            shutil.rmtree(self.prefix, ignore_errors=True)
            self.prefix = None


if __name__ == "__main__":
    ng = Nginx(sys.argv[1] if len(sys.argv) > 1 else ".").start()
    print(f"PORT {ng.port}", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        ng.stop()
