#!/usr/bin/env python3
"""fetchd benchmarks (not tests): fetchd against curl, aria2 and a libcurl multi floor, in one run.

    python3 bench/run.py [--bin PATH] [--rounds N] [--large-rounds N] [--quick] [--profile] [--only rate|redis|fetchctl|budget|stream]
    make bench            (builds the release daemon first, under the shared build lock)
    make bench-profile    (perf record -g on the release daemon under the small-GET c=64 load)

Everything is on loopback: nginx (Debian's, in a temporary prefix) serves a 100-byte file and a
1 GiB file; bench/upload_sink.c reads upload bodies fully; bench/echo_server.c is the floor for
`ping`. bench/rpc_floor.c is fetchd's design with nothing else (a JSON-RPC line read from the
socket and parsed with jansson, the GET on a libcurl multi handle, the answer written): the
ceiling of that design, driven by the same load client. The C helpers are compiled here with gcc -O2. fetchd runs with `--max-per-host 0`, so the
daemon's default per-host cap of 10 does not throttle the c=64 rounds.

aria2 is driven two ways: its best case (addUri in system.multicall batches of 250, completion
polled) and like fetchd's clients (bench/aria2_load.c: one addUri per WebSocket message, c in
flight, completion pushed). A second nginx port logs each request's arrival for the rate-limit
rounds: 4 processes share one host limited to 20, 200 and 2,000 requests/s (about 2 s of
requests each), through fetchd's one limit and through curl --rate in each process.
`--only rate` runs just those rounds (nginx and fetchd, nothing else). The server-set budget
row (`--only budget`): bench/budget_origin.py allows 100 requests per 10 s window and answers
429 past it, saying what is left in the IETF RateLimit fields; 4 processes send 3 windows'
budget through fetchd (which follows those fields by default), against 4 naive loops of
`curl -s URL` for 3 windows; the origin counts the 200s and 429s of each window. One more row, when the
compiled fetchctl is built (`make fetchctl`): 200 sequential `fetchctl fetch -s URL` against
`curl -s URL` for the 100-byte file, one process per call (bench/cli_calls.py); `--only
fetchctl` runs just that row. The streaming-body rows (bench/stream_rows.py; `--only stream`):
1 GiB through `bodyTo` into `| cat` and in `bodyChunk` notifications against `curl | cat`, and
Server-Sent Events' write-to-read latency through the daemon against a direct socket read.

Rounds are interleaved (every tool once per round, order rotated each round) and the table shows
medians. CPU: user+sys of the server-side process for fetchd and aria2 (/proc/PID/stat, 10 ms
ticks), of the whole process tree for curl, the floor and per-request curl (getrusage of children).
The results, with every round's raw numbers, go to bench/results/<UTC timestamp>.json.
See docs/performance.md.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procstat import cpu_seconds, mem_kib  # noqa: E402
from cli_calls import cli_calls, compiled_fetchctl, summarize_cli  # noqa: E402
from stream_rows import compile_stream, stream_goals, stream_rounds, stream_table, summarize_stream  # noqa: E402
import urllib.request

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import nginx  # noqa: E402  (free_port, wait_port)

PAGE = os.sysconf("SC_PAGE_SIZE")
BIG = 1 << 30            # download size
UPLOAD = 256 << 20       # upload size
MB = 1e6                 # MB/s means 10^6 bytes per second


# ---------------------------------------------------------------- processes and /proc

class Stack:
    """Background processes started by this run; stopped (by pid, in reverse) at exit."""
    def __init__(self):
        self.procs = []

    def start(self, cmd, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.DEVNULL)
        p = subprocess.Popen(cmd, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, timeout=15):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def close(self):
        for p in reversed(self.procs):
            self.stop(p)






def ctx_switches(pid):
    """{tid: voluntary + involuntary context switches} for every live thread (wake-ups, roughly)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                out[tid] = sum(int(line.split()[-1]) for line in f
                               if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
        except OSError:
            pass
    return out


def reset_peak_rss(pid):
    """Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current RSS."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def run_child(cmd, timeout, **kw):
    """Runs cmd to completion; returns (stdout, wall seconds, user+sys seconds of its tree)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       stdin=subprocess.DEVNULL, **kw)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0] if isinstance(cmd, list) else cmd} failed ({p.returncode}): "
                           f"{p.stderr.decode(errors='replace')[-600:]}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return p.stdout.decode(errors="replace"), wall, cpu


def settle_disk():
    """Not timed: writes back what a download left dirty, so that the writeback of one
    measurement does not slow the next (an upload right after a 1 GiB download took up to 5x
    longer while the kernel flushed it)."""
    os.sync()


def fs_type(path):
    best, kind = "", "?"
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, kind = mnt, parts[2]
    return kind


def disk_tmpdir():
    """A temporary directory on a real disk (not tmpfs), for the 1 GiB file and the downloads."""
    for base in (tempfile.gettempdir(), "/var/tmp", os.path.join(REPO, ".build")):
        if os.path.isdir(base) and fs_type(os.path.realpath(base)) not in ("tmpfs", "ramfs"):
            return tempfile.mkdtemp(prefix="fetchd-bench-disk-", dir=base)
    raise RuntimeError("no disk-backed directory found")


# ---------------------------------------------------------------- JSON-RPC over the Unix socket

def rpc(sock_path, method, params=None, timeout=120):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        msg = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            msg["params"] = params
        s.sendall(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        buf = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            nl = buf.find(b"\n")
            if nl >= 0:
                line, buf = buf[:nl], buf[nl + 1:]
                if not line.strip():
                    continue
                m = json.loads(line)
                if m.get("id") != 1:
                    continue  # a notification
                if "error" in m:
                    raise RuntimeError(f"fetchd {method}: {m['error']}")
                return m["result"]
            chunk = s.recv(1 << 16)
            if not chunk:
                raise RuntimeError("fetchd closed the connection")
            buf += chunk
        raise RuntimeError(f"fetchd {method}: no answer in {timeout} s")
    finally:
        s.close()


class Aria2:
    def __init__(self, port):
        self.url = f"http://127.0.0.1:{port}/jsonrpc"
        self.port = port
        self.n = 0

    def call(self, method, params=None, timeout=60):
        self.n += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                           "params": params or []}).encode()
        req = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            m = json.loads(r.read())
        if "error" in m:
            raise RuntimeError(f"aria2 {method}: {m['error']}")
        return m["result"]


# ---------------------------------------------------------------- the run

def latencies(r):
    """The per-request latency fields a C load client printed (at c=1), in microseconds."""
    return {k: r[k] for k in ("p50_us", "p90_us", "p99_us", "max_us") if k in r}


def spread(xs):
    """min, median, max of one figure across rounds."""
    xs = [x for x in xs if x is not None]
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)} if xs else None


def arrival_stats(ts, limit, streams=1):
    """How a run of requests arrived at the server: the rate over the run, the most in any
    one-second window, and the gaps between arrivals (kernel receive stamps). `streams`
    processes that each send their share one after another span (n - streams) intervals of
    the whole from the first arrival to the last, not n - 1: (n - 1) / span would count 4
    processes of 10 requests at 5/s each as 21.7/s, not 20."""
    ts = sorted(ts)
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    most, j = 0, 0
    for i, t in enumerate(ts):
        while ts[j] <= t - 1.0:
            j += 1
        most = max(most, i - j + 1)
    span = ts[-1] - ts[0] if len(ts) > 1 else 0
    return {"arrived": len(ts), "limit_per_s": limit, "req_per_s": (len(ts) - streams) / span if span > 0 else None,
            "max_in_1s": most, "gap_p50_ms": 1e3 * statistics.median(gaps) if gaps else None,
            "gap_min_ms": 1e3 * min(gaps) if gaps else None}


class Bench:
    def __init__(self, args):
        self.args = args
        self.stack = Stack()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-bench-")
        self.disk = disk_tmpdir()
        self.shm = tempfile.mkdtemp(prefix="fetchd-bench-aria2-", dir="/dev/shm") \
            if os.path.isdir("/dev/shm") else tempfile.mkdtemp(prefix="fetchd-bench-aria2-")
        self.bin = {}
        self.raw = {}      # key -> list of per-round dicts
        # No per-host cap (the default is 10), so the c=64 rounds are not throttled.
        self.fetchd_args = ["--max-per-host", "0"]
        # Set in main() for a binary that has an HTTP cache (on by default): --no-cache, so every
        # request reaches nginx as the other tools' do.

    # -- setup
    def compile(self):
        out = os.path.join(self.tmp, "bin")
        os.makedirs(out)
        curl_flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libcurl"], check=True,
                                    stdout=subprocess.PIPE, text=True).stdout.split()
        jansson_flags = subprocess.run(["pkg-config", "--cflags", "--libs", "jansson"], check=True,
                                       stdout=subprocess.PIPE, text=True).stdout.split()
        for name, extra in (("floor", curl_flags), ("fetchd_load", []), ("echo_server", ["-pthread"]),
                            ("rpc_floor", curl_flags + jansson_flags + ["-pthread"]),
                            ("ping_rtt", []), ("upload_sink", ["-pthread"]), ("aria2_load", []),
                            ("arrival_server", ["-pthread"])):
            exe = os.path.join(out, name)
            subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(BENCH, name + ".c")] + extra,
                           check=True, timeout=120)
            self.bin[name] = exe
        compile_stream(self, out)

    def start_nginx(self):
        static = os.path.join(self.disk, "static")
        os.makedirs(static)
        with open(os.path.join(static, "small.txt"), "wb") as f:
            f.write(b"x" * 99 + b"\n")                 # 100 bytes
        with open(os.path.join(static, "big.bin"), "wb") as f:
            f.truncate(BIG)                            # sparse: no disk I/O to create it
        with open(os.path.join(self.disk, "upload.bin"), "wb") as f:
            f.truncate(UPLOAD)
        prefix = os.path.join(self.tmp, "nginx")
        os.makedirs(prefix)
        for attempt in range(5):
            port = nginx.free_port()
            user = "user root;\n" if os.getuid() == 0 else ""
            conf = f"""{user}daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    client_body_temp_path {prefix}/client_body_temp;
    proxy_temp_path {prefix}/proxy_temp;
    fastcgi_temp_path {prefix}/fastcgi_temp;
    uwsgi_temp_path {prefix}/uwsgi_temp;
    scgi_temp_path {prefix}/scgi_temp;
    server {{ listen 127.0.0.1:{port}; server_name localhost; root {static}; }}
}}
"""
            path = os.path.join(prefix, "nginx.conf")
            with open(path, "w") as f:
                f.write(conf)
            p = self.stack.start([nginx.NGINX, "-p", prefix, "-c", path, "-e", os.path.join(prefix, "error.log")],
                                 stderr=subprocess.DEVNULL)
            if nginx.wait_port(port, time.monotonic() + 10, p):
                self.nginx, self.base = p, f"http://127.0.0.1:{port}"
                self.small = self.base + "/small.txt"
                return
            self.stack.stop(p)
        raise RuntimeError("nginx did not start")

    def start_arrivals(self):
        """The rate-limit rounds' host: bench/arrival_server logs each request's arrival as
        the kernel stamped its packet (ns), where nginx logs milliseconds at the request's end."""
        self.arrivals_log = os.path.join(self.tmp, "arrivals.log")
        for attempt in range(5):
            port = nginx.free_port()
            p = self.stack.start([self.bin["arrival_server"], str(port), self.arrivals_log], stderr=subprocess.DEVNULL)
            if nginx.wait_port(port, time.monotonic() + 5, p):
                self.limited_host = f"127.0.0.1:{port}"
                self.limited_small = f"http://{self.limited_host}/small.txt"
                return
            self.stack.stop(p)
        raise RuntimeError("arrival_server did not start")

    def start_sink(self):
        for attempt in range(5):
            port = nginx.free_port()
            p = self.stack.start([self.bin["upload_sink"], str(port)], stderr=subprocess.DEVNULL)
            if nginx.wait_port(port, time.monotonic() + 5, p):
                self.sink_url = f"http://127.0.0.1:{port}/upload"
                return
            self.stack.stop(p)
        raise RuntimeError("upload_sink did not start")

    def start_fetchd(self, name="fetchd.sock", extra=()):
        sock = os.path.join(self.tmp, name)
        log = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = self.stack.start([self.fetchd_bin, "--socket", sock] + self.fetchd_args + list(extra), stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if p.poll() is not None:
                raise RuntimeError(f"fetchd exited ({p.returncode}); see {log.name}")
            if os.path.exists(sock):
                try:
                    if rpc(sock, "ping", timeout=5) == "pong":
                        return p, sock
                except (OSError, RuntimeError):
                    pass
            time.sleep(0.02)
        raise RuntimeError("fetchd did not answer ping in 20 s")

    def start_echo(self):
        sock = os.path.join(self.tmp, "echo.sock")
        p = self.stack.start([self.bin["echo_server"], sock], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while not os.path.exists(sock):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("echo_server did not start")
            time.sleep(0.01)
        self.echo_sock = sock

    def start_aria2(self):
        for attempt in range(5):
            port = nginx.free_port()
            p = self.stack.start(["aria2c", "--enable-rpc", "--rpc-listen-all=false", f"--rpc-listen-port={port}",
                                  f"--dir={self.shm}", "--no-conf", "--quiet", "--disable-ipv6",
                                  "--max-concurrent-downloads=64", "--split=1", "--max-connection-per-server=1",
                                  "--file-allocation=none", "--allow-overwrite=true", "--auto-file-renaming=false",
                                  "--max-download-result=100000", "--summary-interval=0", "--rpc-max-request-size=64M",
                                  "--enable-http-keep-alive=true", "--max-tries=1"], stderr=subprocess.DEVNULL)
            if nginx.wait_port(port, time.monotonic() + 10, p):
                self.aria2, self.aria2_rpc = p, Aria2(port)
                self.aria2_rpc.call("aria2.getVersion")
                return
            self.stack.stop(p)
        raise RuntimeError("aria2c did not start")

    # -- small GETs
    def small_floor(self, c, n):
        out, wall, cpu = run_child([self.bin["floor"], self.small, str(n), str(c)], 120)
        r = json.loads(out)
        return dict({"n": n, "seconds": r["seconds"], "cpu": cpu}, **latencies(r))

    def small_fetchd(self, c, n):
        procs, inflight = (1, 1) if c == 1 else (4, c // 4)
        pid = self.fetchd.pid
        reset_peak_rss(pid)
        cpu0 = cpu_seconds(pid)
        out, wall, _ = run_child([self.bin["fetchd_load"], self.sock, self.small, str(n), str(procs), str(inflight)], 120)
        cpu = cpu_seconds(pid) - cpu0
        r = json.loads(out)
        return dict({"n": n, "seconds": r["seconds"], "cpu": cpu, "peak_rss_kib": mem_kib(pid)["VmHWM"],
                     "clients": f"{procs} x {inflight}"}, **latencies(r))

    def start_rpc_floor(self):
        """bench/rpc_floor: the least a daemon of fetchd's design does per fetch, in C. One
        thread: on this project's 2-core machine it serves more than two (c=64, 5 rounds:
        31,158 against 27,404 req/s)."""
        sock = os.path.join(self.tmp, "rpc_floor.sock")
        p = self.stack.start([self.bin["rpc_floor"], sock, "1"], stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while not os.path.exists(sock):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("rpc_floor did not start")
            time.sleep(0.01)
        self.rpc_floor, self.rpc_floor_sock = p, sock

    def small_rpc_floor(self, c, n):
        procs, inflight = (1, 1) if c == 1 else (4, c // 4)
        pid = self.rpc_floor.pid
        cpu0 = cpu_seconds(pid)
        out, wall, _ = run_child([self.bin["fetchd_load"], self.rpc_floor_sock, self.small, str(n), str(procs),
                                  str(inflight)], 120)
        r = json.loads(out)
        return dict({"n": n, "seconds": r["seconds"], "cpu": cpu_seconds(pid) - cpu0, "clients": f"{procs} x {inflight}"},
                    **latencies(r))

    def small_curl_parallel(self, c, n):
        cfg = os.path.join(self.tmp, f"urls-{n}.cfg")
        if not os.path.exists(cfg):
            with open(cfg, "w") as f:
                for _ in range(n):
                    f.write(f'url = "{self.small}"\noutput = "/dev/null"\n')
        cmd = ["curl", "-s", "-K", cfg, "-w", "%{http_code}\\n"]
        if c > 1:
            cmd += ["--parallel", "--parallel-max", str(c)]
        out, wall, cpu = run_child(cmd, 120)
        ok = out.split().count("200")
        if ok != n:
            raise RuntimeError(f"curl --parallel: {ok}/{n} answers were 200")
        return {"n": n, "seconds": wall, "cpu": cpu}

    def small_curl_per_request(self, c, n):
        if c == 1:
            cmd = ["bash", "-c", f'for ((i=0;i<{n};i++)); do curl -s -o /dev/null -w "%{{http_code}}\\n" "{self.small}"; done']
        else:
            cmd = ["bash", "-c", f'seq {n} | xargs -P {c} -I{{}} curl -s -o /dev/null -w "%{{http_code}}\\n" "{self.small}?i={{}}"']
        out, wall, cpu = run_child(cmd, 180)
        ok = out.split().count("200")
        if ok != n:
            raise RuntimeError(f"curl per request: {ok}/{n} answers were 200")
        return {"n": n, "seconds": wall, "cpu": cpu}

    def small_aria2(self, c, n):
        """aria2's best case: addUri calls in system.multicall batches of 250, completion polled."""
        a, pid = self.aria2_rpc, self.aria2.pid
        a.call("aria2.changeGlobalOption", [{"max-concurrent-downloads": str(c)}])
        a.call("aria2.purgeDownloadResult")
        before = int(a.call("aria2.getGlobalStat")["numStoppedTotal"])
        self.aria2_round = getattr(self, "aria2_round", 0) + 1
        cpu0 = cpu_seconds(pid)
        t0 = time.monotonic()
        batch = 250
        for start in range(0, n, batch):
            calls = [{"methodName": "aria2.addUri",
                      "params": [[self.small], {"out": f"r{self.aria2_round}-{i}"}]}
                     for i in range(start, min(n, start + batch))]
            a.call("system.multicall", [calls])
        deadline = t0 + 120
        while True:
            st = a.call("aria2.getGlobalStat")
            if int(st["numStoppedTotal"]) - before >= n and int(st["numActive"]) == 0 and int(st["numWaiting"]) == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("aria2: not done in 120 s")
            time.sleep(0.01)
        wall = time.monotonic() - t0
        cpu = cpu_seconds(pid) - cpu0
        stopped = a.call("aria2.tellStopped", [0, n + 10, ["status"]])
        ok = sum(1 for d in stopped if d["status"] == "complete")
        a.call("aria2.purgeDownloadResult")
        for name in os.listdir(self.shm):
            os.unlink(os.path.join(self.shm, name))
        if ok != n:
            raise RuntimeError(f"aria2: {ok}/{n} complete")
        return {"n": n, "seconds": wall, "cpu": cpu, "peak_rss_kib": mem_kib(pid)["VmHWM"]}

    def small_aria2_ws(self, c, n):
        """aria2 driven like fetchd: one addUri message per request on one WebSocket, c in flight,
        each completion notification lets the next one go (bench/aria2_load.c)."""
        a, pid = self.aria2_rpc, self.aria2.pid
        a.call("aria2.changeGlobalOption", [{"max-concurrent-downloads": str(c)}])
        a.call("aria2.purgeDownloadResult")
        self.aria2_round = getattr(self, "aria2_round", 0) + 1
        cpu0 = cpu_seconds(pid)
        out, wall, _ = run_child([self.bin["aria2_load"], str(a.port), self.small, str(n), str(c),
                                  f"w{self.aria2_round}"], 150)
        cpu = cpu_seconds(pid) - cpu0
        r = json.loads(out)
        a.call("aria2.purgeDownloadResult")
        for name in os.listdir(self.shm):
            os.unlink(os.path.join(self.shm, name))
        if r["ok"] != n:
            raise RuntimeError(f"aria2 over WebSocket: {r['ok']}/{n} complete")
        return {"n": n, "seconds": r["seconds"], "cpu": cpu, "peak_rss_kib": mem_kib(pid)["VmHWM"]}

    # -- large transfers
    def dl_fetchd(self, fsync=True, where=None):
        dest = os.path.join(where or self.disk, "dl-fetchd.bin")
        pid = self.fetchd.pid
        reset_peak_rss(pid)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        r = rpc(self.sock, "download", {"url": self.base + "/big.bin", "path": dest, "overwrite": True, "fsync": fsync},
                timeout=300)
        wall = time.monotonic() - t0
        cpu = cpu_seconds(pid) - cpu0
        size = os.path.getsize(dest)
        os.unlink(dest)
        settle_disk()
        if r.get("status") != 200 or size != BIG:
            raise RuntimeError(f"fetchd download: status {r.get('status')}, {size} bytes")
        return {"bytes": BIG, "seconds": wall, "cpu": cpu, "peak_rss_kib": mem_kib(pid)["VmHWM"]}

    def dl_fetchd_nofsync(self):
        # Like for like with curl -o, which does not fsync either.
        return self.dl_fetchd(fsync=False)

    def dl_fetchd_tmpfs(self):
        return self.dl_fetchd(fsync=False, where=self.shm)

    def dl_curl_tmpfs(self):
        return self.dl_curl(where=self.shm)

    def mixed(self, n):
        """The fairness row: small GETs at c=1 (their latency distribution) while four
        1 GiB downloads run through the same daemon (fsync false, to tmpfs)."""
        import threading
        errors = []

        def download(i):
            dest = os.path.join(self.shm, f"mixed-{i}.bin")
            try:
                r = rpc(self.sock, "download", {"url": self.base + "/big.bin", "path": dest, "overwrite": True,
                                                "fsync": False}, timeout=300)
                if r.get("status") != 200:
                    errors.append(f"download {i}: status {r.get('status')}")
            except Exception as e:  # noqa: BLE001 -- reported below
                errors.append(f"download {i}: {e}")
        threads = [threading.Thread(target=download, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.3)    # the four are under way
        out, wall, _ = run_child([self.bin["fetchd_load"], self.sock, self.small, str(n), "1", "1"], 120)
        still = sum(t.is_alive() for t in threads)
        for t in threads:
            t.join(300)
        for i in range(4):
            try:
                os.unlink(os.path.join(self.shm, f"mixed-{i}.bin"))
            except FileNotFoundError:
                pass
        if errors:
            raise RuntimeError("; ".join(errors))
        r = json.loads(out)
        return dict({"n": n, "seconds": r["seconds"], "downloads_running_at_end": still}, **latencies(r))

    def dl_curl(self, where=None):
        dest = os.path.join(where or self.disk, "dl-curl.bin")
        out, wall, cpu = run_child(["curl", "-s", "-f", "-o", dest, self.base + "/big.bin"], 300)
        size = os.path.getsize(dest)
        os.unlink(dest)
        settle_disk()
        if size != BIG:
            raise RuntimeError(f"curl download: {size} bytes")
        return {"bytes": BIG, "seconds": wall, "cpu": cpu}

    def ul_fetchd(self):
        src = os.path.join(self.disk, "upload.bin")
        pid = self.fetchd.pid
        reset_peak_rss(pid)
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        r = rpc(self.sock, "upload", {"url": self.sink_url, "files": [{"path": src}]}, timeout=300)
        wall = time.monotonic() - t0
        cpu = cpu_seconds(pid) - cpu0
        got = int(str(r.get("body", "0")).strip() or 0)
        if r.get("status") != 200 or got < UPLOAD:
            raise RuntimeError(f"fetchd upload: status {r.get('status')}, sink read {got} bytes")
        return {"bytes": UPLOAD, "seconds": wall, "cpu": cpu, "peak_rss_kib": mem_kib(pid)["VmHWM"], "sink_bytes": got}

    def ul_curl(self):
        src = os.path.join(self.disk, "upload.bin")
        out, wall, cpu = run_child(["curl", "-s", "-f", "-F", f"file=@{src}", self.sink_url], 300)
        got = int(out.strip() or 0)
        if got < UPLOAD:
            raise RuntimeError(f"curl upload: sink read {got} bytes")
        return {"bytes": UPLOAD, "seconds": wall, "cpu": cpu, "sink_bytes": got}

    # -- ping
    def ping(self, sock, n):
        pid = self.fetchd.pid if sock == self.sock else None
        if pid:
            reset_peak_rss(pid)
        cpu0 = cpu_seconds(pid) if pid else 0
        out, wall, _ = run_child([self.bin["ping_rtt"], sock, str(n)], 120)
        r = json.loads(out)
        if pid:
            r["cpu"] = cpu_seconds(pid) - cpu0
            r["peak_rss_kib"] = mem_kib(pid)["VmHWM"]
        return r

    # -- idle
    def idle(self, pid, seconds=5.0):
        cpu0, cs0, t0 = cpu_seconds(pid), ctx_switches(pid), time.monotonic()
        time.sleep(seconds)
        cpu1, cs1, t1 = cpu_seconds(pid), ctx_switches(pid), time.monotonic()
        m = mem_kib(pid)
        wakeups = sum(v - cs0.get(tid, 0) for tid, v in cs1.items())   # threads that exited are not counted
        return {"seconds": t1 - t0, "cpu_percent": 100 * (cpu1 - cpu0) / (t1 - t0),
                "wakeups_per_s": wakeups / (t1 - t0), "threads": len(cs1), "rss_kib": m["VmRSS"], "peak_rss_kib": m["VmHWM"]}

    # -- a request-rate limit shared by several processes
    def arrivals_since(self, offset):
        """Arrival times (s) that arrival_server logged for the rate-limited host after byte `offset`."""
        with open(self.arrivals_log, "rb") as f:
            f.seek(offset)
            return [float(line) for line in f.read().split()]

    def log_offset(self):
        return os.path.getsize(self.arrivals_log) if os.path.exists(self.arrivals_log) else 0

    def rate_fetchd(self, rate, procs, n):
        """procs client processes send their share of n fetches through one daemon, whose
        limit for the host (setRateLimit) holds for all of them together."""
        rpc(self.sock, "setRateLimit", {"host": self.limited_host, "requestsPerSecond": rate, "burst": RATE_BURST})
        offset = self.log_offset()
        out, wall, _ = run_child([self.bin["fetchd_load"], self.sock, self.limited_small, str(n), str(procs), "16"], 120)
        r = json.loads(out)
        if r["ok"] != n:
            raise RuntimeError(f"fetchd under a rate limit: {r['ok']}/{n} answers were 200")
        return dict(arrival_stats(self.arrivals_since(offset), rate), n=n, seconds=wall)

    def rate_curl(self, rate, procs, n, per_process_rate):
        """procs curl processes at once, each with --rate: what independent scripts can do."""
        cfg = os.path.join(self.tmp, f"limited-{n // procs}.cfg")
        with open(cfg, "w") as f:
            for _ in range(n // procs):
                f.write(f'url = "{self.limited_small}"\noutput = "/dev/null"\n')
        offset = self.log_offset()
        script = " & ".join(f'curl -s --rate {per_process_rate:g}/s -K {cfg} -w "%{{http_code}}\\n"'
                            for _ in range(procs)) + " & wait"
        out, wall, _ = run_child(["bash", "-c", script], 120)
        if out.split().count("200") != n // procs * procs:
            raise RuntimeError(f"curl --rate: {out.split().count('200')}/{n} answers were 200")
        return dict(arrival_stats(self.arrivals_since(offset), rate, streams=procs), n=n // procs * procs, seconds=wall,
                    per_process_limit=per_process_rate)

    # -- a limit shared by several daemons through Redis
    def start_redis(self):
        """A throwaway redis-server and REDIS_DAEMONS daemons that count shared limits in it."""
        for attempt in range(5):
            port = nginx.free_port()
            p = self.stack.start([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", self.tmp], stderr=subprocess.DEVNULL)
            if nginx.wait_port(port, time.monotonic() + 5, p):
                self.redis_port = port
                break
            self.stack.stop(p)
        else:
            raise RuntimeError("redis-server did not start")
        url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.redis_socks = [self.start_fetchd(f"redis-{i}.sock", ["--redis", url])[1] for i in range(REDIS_DAEMONS)]

    def share_limit(self, rate, shared=True):
        for sock in self.redis_socks:
            rpc(sock, "setRateLimit", {"host": self.limited_host.split(":")[0], "requestsPerSecond": rate,
                                       "burst": RATE_BURST, "maxConcurrent": None, "shared": shared})

    def redis_rate(self, rate):
        """Every daemon sends its share of about REDIS_SECONDS of requests at once (one fetchd_load
        process each, 16 in flight), all under one shared limit."""
        self.share_limit(rate)
        each = rate * REDIS_SECONDS // REDIS_DAEMONS
        offset = self.log_offset()
        t0 = time.monotonic()
        loads = [subprocess.Popen([self.bin["fetchd_load"], sock, self.limited_small, str(each), "1", "16"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
                 for sock in self.redis_socks]
        per = []
        for p in loads:
            out, err = p.communicate(timeout=300)
            if p.returncode != 0 or json.loads(out)["ok"] != each:
                raise RuntimeError(f"fetchd_load under a shared limit: {out[-300:]!r} {err[-300:]!r}")
            per.append(each / json.loads(out)["seconds"])
        wall = time.monotonic() - t0
        # One stream: the daemons' starts interleave on the one schedule Redis keeps.
        return dict(arrival_stats(self.arrivals_since(offset), rate), n=each * REDIS_DAEMONS,
                    seconds=wall, per_daemon_req_per_s=per)

    def redis_latency(self, shared, n=1000):
        """One request at a time through one daemon, its host limited (1,000,000/s: never waits)
        locally or in Redis: the difference is what a round trip to Redis adds per request."""
        self.share_limit(1_000_000, shared=shared)
        out, wall, _ = run_child([self.bin["fetchd_load"], self.redis_socks[0], self.limited_small, str(n), "1", "1"], 120)
        r = json.loads(out)
        if r["ok"] != n:
            raise RuntimeError(f"fetchd_load c=1: {r['ok']}/{n} answers were 200")
        return {"n": n, "seconds": r["seconds"], "us_per_req": 1e6 * r["seconds"] / n}

    def redis_admissions(self):
        """Admissions per second one Redis handles: redis-benchmark runs the admit script with
        EVALSHA (50 connections, 16 pipelined), over 1,000 hosts, with a rate and a cap that
        always admit, so every call takes the whole path (GCRA write, lease ZADD)."""
        with open(os.path.join(REPO, "Sources", "FetchDaemon", "Redis", "SharedLimitScripts.swift")) as f:
            swift = f.read()
        def body(name):  # a Swift multi-line string literal, its indentation removed
            m = re.search(r"let " + name + r' = [^\n]*"""\n(.*?)\n\s*"""', swift, re.S)
            return "\n".join(line.strip() for line in m.group(1).splitlines())
        source = body("clock") + "\n" + body("admit")
        cli = ["redis-cli", "-p", str(self.redis_port)]
        sha = subprocess.run(cli + ["SCRIPT", "LOAD", source], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
        check = subprocess.run(cli + ["EVALSHA", sha, "3", "fetchd:{b}:tat", "fetchd:{b}:leases", "fetchd:{b}:pause",
                                      "1000000000", "1", "1000000000", "5000000", "x"], stdout=subprocess.PIPE, text=True).stdout
        if not check.startswith("1"):
            raise RuntimeError(f"admit script: {check!r}")
        n = 200_000
        out, wall, _ = run_child(["redis-benchmark", "-p", str(self.redis_port), "-c", "50", "-P", "16", "-n", str(n),
                                  "-r", "1000", "--csv", "EVALSHA", sha, "3", "fetchd:{h__rand_int__}:tat",
                                  "fetchd:{h__rand_int__}:leases", "fetchd:{h__rand_int__}:pause", "1000000000", "1",
                                  "1000000000", "5000000", "lease__rand_int__"], 300)
        rps = float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
        return {"n": n, "admissions_per_s": rps}

    # -- an API that sets its own budget and answers 429 past it
    def start_budget_origin(self):
        """bench/budget_origin.py: BUDGET_LIMIT requests per BUDGET_WINDOW s per key, 429 past it."""
        for attempt in range(5):
            port = nginx.free_port()
            p = self.stack.start([sys.executable, os.path.join(BENCH, "budget_origin.py"), str(port),
                                  str(BUDGET_LIMIT), str(BUDGET_WINDOW)], stderr=subprocess.DEVNULL)
            if nginx.wait_port(port, time.monotonic() + 10, p):
                self.budget_base = f"http://127.0.0.1:{port}"
                self.budget_keys = 0
                return
            self.stack.stop(p)
        raise RuntimeError("budget_origin did not start")

    def budget_key(self, tool):
        self.budget_keys += 1
        return f"{tool}-{self.budget_keys}"

    def budget_log(self, key):
        with urllib.request.urlopen(f"{self.budget_base}/log/{key}", timeout=30) as r:
            return json.loads(r.read())["requests"]

    def budget_fetchd(self):
        """RATE_PROCS client processes (fetchd_load, 16 in flight each) send BUDGET_WINDOWS windows'
        budget through one daemon that follows the server's headers (the default)."""
        key = self.budget_key("fetchd")
        n = BUDGET_LIMIT * BUDGET_WINDOWS
        t0 = time.monotonic()
        p = subprocess.run([self.bin["fetchd_load"], self.sock, f"{self.budget_base}/budget/{key}", str(n),
                            str(RATE_PROCS), "16"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=BUDGET_WINDOWS * BUDGET_WINDOW + 120)
        wall = time.monotonic() - t0
        r = json.loads(p.stdout)   # fetchd_load exits 1 when an answer is not a 200; counted below
        return dict(budget_stats(self.budget_log(key)), seconds=wall, client_ok=r["ok"], client_errors=r["errors"])

    def budget_curl(self):
        """RATE_PROCS naive loops, `curl -s URL` one call after another, for BUDGET_WINDOWS windows."""
        key = self.budget_key("curl")
        url = f"{self.budget_base}/budget/{key}"
        seconds = BUDGET_WINDOWS * BUDGET_WINDOW
        loop = f'end=$(( ${{EPOCHREALTIME/./}} + {int(seconds * 1e6)} )); ' \
               f'while (( ${{EPOCHREALTIME/./}} < end )); do curl -s -o /dev/null {url}; done'
        t0 = time.monotonic()
        run_child(["bash", "-c", " & ".join(f"({loop})" for _ in range(RATE_PROCS)) + " & wait"], seconds + 60)
        return dict(budget_stats(self.budget_log(key)), seconds=time.monotonic() - t0)

    def record(self, key, fn, *a):
        r = fn(*a)
        self.raw.setdefault(key, []).append(r)
        return r


SMALL_TOOLS = [  # key, label, method, n at c=1, n at c=64 (None: use --n, --n64)
    ("floor", "libcurl multi floor (C)", "small_floor", None, None),
    ("fetchd", "fetchd (C client on the socket)", "small_fetchd", None, None),
    ("rpc_floor", "fetchd's design in C (rpc_floor)", "small_rpc_floor", None, None),
    ("curl_parallel", "curl -K urls (--parallel at c>1)", "small_curl_parallel", None, None),
    ("aria2", "aria2c, 250 addUri per multicall", "small_aria2", 500, 1000),
    ("aria2_ws", "aria2c, 1 addUri per WebSocket msg", "small_aria2_ws", 500, 1000),
    ("curl_per_request", "one curl process per request", "small_curl_per_request", 300, 300),
]


RATE_LIMITS, RATE_PROCS, RATE_SECONDS = (20, 200, 2000), 4, 2   # req/s for the host, client processes
RATE_BURST = 1   # fetchd's burst for the host; curl --rate has none


def rate_n(rate):
    """Requests per rate round: about RATE_SECONDS of them, a multiple of RATE_PROCS."""
    return rate * RATE_SECONDS // RATE_PROCS * RATE_PROCS


BUDGET_LIMIT, BUDGET_WINDOW, BUDGET_WINDOWS = 100, 10.0, 3   # the origin's budget per window (s), windows run


def budget_stats(log):
    """What the budget origin saw in the first BUDGET_WINDOWS windows: 200s and 429s per window."""
    ok = [0] * BUDGET_WINDOWS
    refused = [0] * BUDGET_WINDOWS
    for _, status, w in log:
        if w < BUDGET_WINDOWS:
            (ok if status == 200 else refused)[w] += 1
    return {"delivered": sum(ok), "delivered_per_window": ok, "refused": sum(refused),
            "refused_per_window": refused, "refused_after_first": sum(refused[1:]), "requests": len(log)}


REDIS_DAEMONS, REDIS_SECONDS, REDIS_LIMITS = 4, 4, (20, 200)   # daemons on one shared limit, s of requests


RATE_TOOLS = [  # key, label (of the limit), method, per-process curl --rate (of the limit)
    ("fetchd", lambda r: "fetchd: one limit for every client", "rate_fetchd", None),
    ("curl_each", lambda r: f"curl --rate {r:g}/s in each process", "rate_curl", lambda r: r),
    ("curl_split", lambda r: f"curl --rate {r / RATE_PROCS:g}/s each (split by hand)", "rate_curl",
     lambda r: r / RATE_PROCS),
]


def med(xs):
    return statistics.median(xs) if xs else None


def summarize(b):
    s = {}
    for k, rounds in b.raw.items():
        if k[0] == "small":
            _, tool, c = k
            s[f"small.{tool}.c{c}"] = {
                "req_per_s": med([r["n"] / r["seconds"] for r in rounds]),
                "req_per_s_spread": spread([r["n"] / r["seconds"] for r in rounds]),
                **{f"{k}": spread([r.get(k) for r in rounds]) for k in ("p50_us", "p99_us") if k in rounds[0]},
                "cpu_us_per_req": med([1e6 * r["cpu"] / r["n"] for r in rounds]),
                "n": rounds[0]["n"], "rounds": len(rounds),
                "peak_rss_kib": max((r.get("peak_rss_kib", 0) for r in rounds), default=None) or None,
            }
        elif k[0] in ("download", "upload"):
            _, tool = k
            s[f"{k[0]}.{tool}"] = {
                "mb_per_s": med([r["bytes"] / MB / r["seconds"] for r in rounds]),
                "mb_per_s_spread": spread([r["bytes"] / MB / r["seconds"] for r in rounds]),
                "cpu_s": med([r["cpu"] for r in rounds]), "rounds": len(rounds),
                "peak_rss_kib": max((r.get("peak_rss_kib", 0) for r in rounds), default=None) or None,
            }
        elif k[0] == "ping":
            s[f"ping.{k[1]}"] = {"p50_us": med([r["p50_us"] for r in rounds]),
                                 "p50_us_spread": spread([r["p50_us"] for r in rounds]),
                                 "p99_us": med([r["p99_us"] for r in rounds]),
                                 "count": rounds[0]["count"], "rounds": len(rounds),
                                 "cpu_us_per_ping": med([1e6 * r["cpu"] / r["count"] for r in rounds])
                                 if "cpu" in rounds[0] else None,
                                 "peak_rss_kib": max((r.get("peak_rss_kib", 0) for r in rounds), default=None) or None}
        elif k[0] == "rate":
            _, tool, rate = k
            rates = [r["req_per_s"] for r in rounds if r["req_per_s"]]
            s[f"rate.{tool}.{rate}"] = {"limit_per_s": rounds[0]["limit_per_s"], "processes": RATE_PROCS,
                                 "n": rounds[0]["n"], "rounds": len(rounds),
                                 "req_per_s": med(rates), "req_per_s_min": min(rates, default=None),
                                 "req_per_s_max": max(rates, default=None),
                                 "max_in_1s": max(r["max_in_1s"] for r in rounds),
                                 "gap_p50_ms": med([r["gap_p50_ms"] for r in rounds if r["gap_p50_ms"] is not None]),
                                 "gap_min_ms": min(r["gap_min_ms"] for r in rounds if r["gap_min_ms"] is not None)}
        elif k[0] == "idle":
            s[f"idle.{k[1]}"] = rounds[-1]
        elif k[0] == "mixed":
            s["mixed.fetchd"] = {"p50_us": spread([r["p50_us"] for r in rounds]),
                                 "p99_us": spread([r["p99_us"] for r in rounds]),
                                 "max_us": spread([r["max_us"] for r in rounds]),
                                 "n": rounds[0]["n"], "rounds": len(rounds),
                                 "downloads_running_at_end": min(r["downloads_running_at_end"] for r in rounds)}
        elif k[0] == "redis" and k[1] == "rate":
            rates = [r["req_per_s"] for r in rounds if r["req_per_s"]]
            s[f"redis.rate.{k[2]}"] = {"limit_per_s": k[2], "daemons": REDIS_DAEMONS, "n": rounds[0]["n"],
                                      "rounds": len(rounds), "req_per_s": med(rates),
                                      "req_per_s_min": min(rates, default=None), "req_per_s_max": max(rates, default=None),
                                      "max_in_1s": max(r["max_in_1s"] for r in rounds),
                                      "per_daemon_req_per_s": med([x for r in rounds for x in r["per_daemon_req_per_s"]])}
        elif k[0] == "redis" and k[1] == "latency":
            s[f"redis.latency.{k[2]}"] = {"us_per_req": med([r["us_per_req"] for r in rounds]), "n": rounds[0]["n"],
                                         "rounds": len(rounds)}
        elif k[0] == "cli":
            s["cli"] = summarize_cli(rounds)
        elif k[0] == "budget":
            s[f"budget.{k[1]}"] = {
                "rounds": len(rounds), "processes": RATE_PROCS,
                "delivered": med([r["delivered"] for r in rounds]),
                "refused": med([r["refused"] for r in rounds]),
                "refused_first_window": max(r["refused_per_window"][0] for r in rounds),
                "refused_after_first": max(r["refused_after_first"] for r in rounds),
                "delivered_per_window": [r["delivered_per_window"] for r in rounds],
                "seconds": med([r["seconds"] for r in rounds])}
        elif k[0] == "redis" and k[1] == "admissions":
            s["redis.admissions"] = {"admissions_per_s": med([r["admissions_per_s"] for r in rounds]),
                                     "rounds": len(rounds)}
    s.update(summarize_stream(b.raw))
    return s


def goals(s):
    g = []

    def add(name, value, target, met, detail):
        g.append({"goal": name, "value": value, "target": target, "met": bool(met), "detail": detail})

    f64, fl64, cp64 = (s.get(f"small.{t}.c64", {}).get("req_per_s") for t in ("fetchd", "floor", "curl_parallel"))
    if f64 and fl64:
        r = f64 / fl64
        add("small GETs c=64 vs libcurl floor", f"{r:.2f}x", ">= 0.5x", r >= 0.5, f"{f64:,.0f} vs {fl64:,.0f} req/s")
    if f64 and cp64:
        r = f64 / cp64
        add("small GETs c=64 vs curl --parallel", f"{r:.2f}x", ">= 1.0x", r >= 1.0, f"{f64:,.0f} vs {cp64:,.0f} req/s")
    # c=1: the latency distribution from per-request timestamps in the C clients (medians of
    # the rounds' p50 and p99), fetchd's minus the floor's.
    f1, fl1 = s.get("small.fetchd.c1", {}), s.get("small.floor.c1", {})
    for q, target in (("p50_us", 60), ("p99_us", 250)):
        if f1.get(q) and fl1.get(q):
            added = f1[q]["median"] - fl1[q]["median"]
            add(f"small GETs c=1 {q[:3]} added over the floor", f"{added:.0f} us", f"< {target} us", added < target,
                f"{f1[q]['median']:.0f} vs {fl1[q]['median']:.0f} us")
    m = s.get("mixed.fetchd")
    if m:
        p99 = m["p99_us"]["median"]
        add("small GETs c=1 p99 during four 1 GiB downloads", f"{p99 / 1000:.2f} ms", "< 2 ms", p99 < 2000,
            f"p50 {m['p50_us']['median']:.0f} us, max {m['max_us']['median'] / 1000:.1f} ms; "
            f"{m['rounds']} rounds p99 {m['p99_us']['min'] / 1000:.2f}-{m['p99_us']['max'] / 1000:.2f} ms")
    for kind, mine, theirs, label in (
            ("download", "fetchd_nofsync", "curl", "1 GiB download vs curl -o, disk (both without fsync)"),
            ("download", "fetchd_tmpfs", "curl_tmpfs", "1 GiB download vs curl -o, tmpfs"),
            ("upload", "fetchd", "curl", "256 MiB multipart upload vs curl -F")):
        fd, cu = s.get(f"{kind}.{mine}", {}).get("mb_per_s"), s.get(f"{kind}.{theirs}", {}).get("mb_per_s")
        if fd and cu:
            r = fd / cu
            add(label, f"{r:.2f}x", ">= 1.0x", r >= 1.0, f"{fd:,.0f} vs {cu:,.0f} MB/s")
    pf, pe = s.get("ping.fetchd", {}).get("p50_us"), s.get("ping.echo", {}).get("p50_us")
    if pf and pe:
        r = pf / pe
        add("ping p50 vs C echo server", f"{r:.2f}x", "<= 1.2x", r <= 1.2, f"{pf:.1f} vs {pe:.1f} us")
    for which, label in (("fresh", "idle daemon (fresh)"), ("after_load", "idle daemon (after the load)")):
        i = s.get(f"idle.{which}")
        if i:
            mb = i["rss_kib"] / 1024
            add(label, f"{i['cpu_percent']:.1f}% CPU, {mb:.1f} MB RSS", "0% CPU, < 30 MB",
                i["cpu_percent"] == 0 and mb < 30, f"{i['wakeups_per_s']:.1f} wake-ups/s")
    # The shared limit delivers its budget and never more than burst + rate x T + 1
    # (the 1: arrival times at the server are the starts plus a varying delay).
    for rate in RATE_LIMITS:
        e = s.get(f"rate.fetchd.{rate}")
        if e and e["req_per_s"]:
            low, cap = e["req_per_s_min"] / rate, RATE_BURST + rate + 1
            add(f"limit {rate}/s, 4 procs: rate, most in 1 s", f"{e['req_per_s'] / rate:.3f}x, {e['max_in_1s']}",
                f">= 0.99x, <= {cap}", low >= 0.99 and e["max_in_1s"] <= cap,
                f"{e['rounds']} rounds {e['req_per_s_min'] / rate:.3f}x-{e['req_per_s_max'] / rate:.3f}x")
    e = s.get("budget.fetchd")
    if e:
        add(f"server budget {BUDGET_LIMIT}/{BUDGET_WINDOW:g} s: 429s after the first window",
            str(e["refused_after_first"]), "0", e["refused_after_first"] == 0,
            f"{e['rounds']} rounds, most of any round; {e['delivered']:.0f} delivered in {BUDGET_WINDOWS} windows")
    cli = s.get("cli")
    if cli:
        add("fetchctl fetch, a process per call", f"{cli['ratio_median']:.2f}x curl", "<= 1.5x curl",
            cli["ratio_median"] <= 1.5,
            f"median {cli['fetchctl']['median_ms']:.2f} ms against curl's {cli['curl']['median_ms']:.2f} ms")
    stream_goals(s, add)
    return g


def print_table(s, g, meta):
    rows = []
    label = {k: l for k, l, *_ in SMALL_TOOLS}
    for c in (1, 64):
        fd = s.get(f"small.fetchd.c{c}", {}).get("req_per_s")
        for key, *_ in SMALL_TOOLS:
            e = s.get(f"small.{key}.c{c}")
            if not e:
                continue
            ratio = f"{fd / e['req_per_s']:.2f}x" if fd and key != "fetchd" else ""
            rss = f"{e['peak_rss_kib'] / 1024:.1f}" if e.get("peak_rss_kib") else ""
            default_n = meta["n_small"] if c == 1 else meta.get("n_small_c64", meta["n_small"])
            n = f"n={e['n']}" + (" (scaled)" if e["n"] != default_n else "")
            sp = e.get("req_per_s_spread")
            rows.append((f"small GET c={c}", label[key], f"{e['req_per_s']:,.0f} req/s",
                         f"{sp['min']:,.0f}-{sp['max']:,.0f}" if sp else "",
                         f"{e['cpu_us_per_req']:,.1f}", rss, ratio, n))
            if e.get("p50_us"):
                p50, p99 = e["p50_us"], e["p99_us"]
                rows.append((f"  latency c={c}", label[key], f"p50 {p50['median']:.0f} us  p99 {p99['median']:.0f} us",
                             f"p50 {p50['min']:.0f}-{p50['max']:.0f}, p99 {p99['min']:.0f}-{p99['max']:.0f}",
                             "", "", "", "per-request timestamps in the C client"))
    disk_fs = meta.get("disk_dir_fs", "disk")
    for kind, scenario, tools, mine in (
            ("download", f"1 GiB download, {disk_fs}", ("fetchd", "fetchd_nofsync", "curl"), "fetchd_nofsync"),
            ("download", "1 GiB download, tmpfs", ("fetchd_tmpfs", "curl_tmpfs"), "fetchd_tmpfs"),
            ("upload", "256 MiB upload", ("fetchd", "curl"), "fetchd")):
        fd = s.get(f"{kind}.{mine}", {}).get("mb_per_s")
        for t in tools:
            e = s.get(f"{kind}.{t}")
            if not e:
                continue
            name = {"download": {"fetchd": "fetchd download (fsync, default)",
                                 "fetchd_nofsync": "fetchd download (fsync: false)", "curl": "curl -o",
                                 "fetchd_tmpfs": "fetchd download (fsync: false)", "curl_tmpfs": "curl -o"},
                    "upload": {"fetchd": "fetchd upload (files: path)", "curl": "curl -F"}}[kind][t]
            rss = f"{e['peak_rss_kib'] / 1024:.1f}" if e.get("peak_rss_kib") else ""
            sp = e.get("mb_per_s_spread")
            rows.append((scenario, name, f"{e['mb_per_s']:,.0f} MB/s", f"{sp['min']:,.0f}-{sp['max']:,.0f}" if sp else "",
                         f"{e['cpu_s']:.2f} s total", rss,
                         f"{fd / e['mb_per_s']:.2f}x" if fd and not t.startswith("fetchd") else "", ""))
    pf = s.get("ping.fetchd")
    for t, name in (("fetchd", "fetchd"), ("echo", "C echo server")):
        e = s.get(f"ping.{t}")
        if e:
            sp = e.get("p50_us_spread")
            rows.append(("ping, 1 in flight", name, f"p50 {e['p50_us']:.1f} us  p99 {e['p99_us']:.1f} us",
                         f"p50 {sp['min']:.1f}-{sp['max']:.1f}" if sp else "",
                         f"{e['cpu_us_per_ping']:.1f}" if e.get("cpu_us_per_ping") else "",
                         f"{e['peak_rss_kib'] / 1024:.1f}" if e.get("peak_rss_kib") else "",
                         f"{pf['p50_us'] / e['p50_us']:.2f}x (p50)" if pf and t != "fetchd" else "",
                         f"n={e['count']}"))
    for rate in RATE_LIMITS:
        for key, name, *_ in RATE_TOOLS:
            e = s.get(f"rate.{key}.{rate}")
            if e and e["req_per_s"]:
                rows.append((f"limit {rate:,}/s, {e['processes']} procs", name(rate),
                             f"{e['req_per_s']:,.1f} req/s, max {e['max_in_1s']} in 1 s",
                             f"{e['req_per_s_min']:,.1f}-{e['req_per_s_max']:,.1f}", "", "", "",
                             f"{e['req_per_s'] / rate:.3f}x the limit ({e['req_per_s_min'] / rate:.3f}-"
                             f"{e['req_per_s_max'] / rate:.3f}), n={e['n']}"))
    for rate in REDIS_LIMITS:
        e = s.get(f"redis.rate.{rate}")
        if e and e["req_per_s"]:
            rows.append((f"shared limit {rate:,}/s, {e['daemons']} daemons", "fetchd --redis, one fetchd_load each",
                         f"{e['req_per_s']:,.1f} req/s, max {e['max_in_1s']} in 1 s", "", "", "",
                         f"{e['req_per_s'] / rate:.3f}x the limit ({e['req_per_s_min'] / rate:.3f}-"
                         f"{e['req_per_s_max'] / rate:.3f}), {e['per_daemon_req_per_s']:,.1f} req/s each, n={e['n']}"))
    for key, name in (("fetchd", "fetchd, following the server's headers"), ("curl", "curl -s URL in a loop")):
        e = s.get(f"budget.{key}")
        if e:
            rows.append((f"budget {BUDGET_LIMIT}/{BUDGET_WINDOW:g} s, {e['processes']} procs", name,
                         f"{e['delivered']:.0f} delivered, {e['refused']:.0f} x 429", "", "", "", "",
                         f"{BUDGET_WINDOWS} windows; 429s in window 1: {e['refused_first_window']}, after: "
                         f"{e['refused_after_first']}; {e['rounds']} rounds"))
    lo, sh = s.get("redis.latency.local"), s.get("redis.latency.shared")
    if lo and sh:
        rows.append(("c=1, limit that never waits", "fetchd, local limit", f"{lo['us_per_req']:,.0f} us/request",
                     "", "", "", f"n={lo['n']}"))
        rows.append(("c=1, limit that never waits", "fetchd, shared limit (Redis)", f"{sh['us_per_req']:,.0f} us/request",
                     "", "", "", f"+{sh['us_per_req'] - lo['us_per_req']:,.0f} us per request"))
    a = s.get("redis.admissions")
    if a:
        rows.append(("one Redis, admit script", "redis-benchmark EVALSHA (-c 50 -P 16)",
                     f"{a['admissions_per_s']:,.0f} admissions/s", "", "", "", "1,000 hosts, rate and lease"))
    cli = s.get("cli")
    if cli:
        for tool, name in (("fetchctl", "fetchctl fetch -s URL (C)"), ("curl", "curl -s URL")):
            e = cli[tool]
            rows.append(("100-byte GET, a process per call", name, f"{e['median_ms']:.2f} ms/call",
                         f"{e['min_ms']:.2f}-{e['max_ms']:.2f}", "", "",
                         f"{cli['ratio_median']:.2f}x curl (median)" if tool == "fetchctl" else "",
                         f"n={e['n']}, sequential, interleaved"))
    for which in ("fresh", "after_load"):
        e = s.get(f"idle.{which}")
        if e:
            rows.append((f"idle 5 s ({which.replace('_', ' ')})", "fetchd",
                         f"{e['cpu_percent']:.1f}% CPU, {e['wakeups_per_s']:.1f} wake-ups/s", "1 round", "",
                         f"{e['rss_kib'] / 1024:.1f} (now)", "", ""))
    m = s.get("mixed.fetchd")
    if m:
        rows.append(("c=1 GETs + 4 x 1 GiB downloads", "fetchd (C client on the socket)",
                     f"p50 {m['p50_us']['median']:.0f} us  p99 {m['p99_us']['median']:.0f} us",
                     f"p99 {m['p99_us']['min']:.0f}-{m['p99_us']['max']:.0f}", "", "", "",
                     f"max {m['max_us']['median'] / 1000:.1f} ms, n={m['n']}, {m['rounds']} rounds"))
    rows.extend(stream_table(s))
    head = ("scenario", "tool", "median", "min-max", "CPU us/req", "peak RSS MB", "fetchd vs it", "")
    print_rows(head, rows)
    print()
    print_rows(("goal", "value", "target", "status", "detail"),
               [(x["goal"], x["value"], x["target"], "met" if x["met"] else "NOT MET", x["detail"]) for x in g])


def print_rows(head, rows):
    # A row with fewer cells than the head leaves the last ones empty.
    rows = [tuple(r) + ("",) * (len(head) - len(r)) for r in rows]
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda r: "  ".join(str(v).ljust(w[i]) for i, v in enumerate(r)).rstrip()
    print(line(head))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print(line(r))


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) // 1024
    return {"cpus": os.cpu_count(), "cpu_model": model, "mem_mb": mem, "kernel": platform.release()}


def versions(fetchd_bin):
    def first(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=10).stdout.strip().splitlines()[0]
        except Exception as e:  # noqa: BLE001
            return f"? ({e})"
    git = first(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "Sources"],
                           stdout=subprocess.PIPE, text=True).stdout.strip() != ""
    return {"fetchd": first([fetchd_bin, "--version"]), "git": git + ("+dirty Sources" if dirty else ""),
            "curl": first(["curl", "--version"]), "aria2": first(["aria2c", "--version"]),
            "nginx": first([nginx.NGINX, "-v"]), "gcc": first(["gcc", "--version"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", help="fetchd binary (default .build/release/fetchd)")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("BENCH_ROUNDS", 5)), help="small-GET rounds")
    ap.add_argument("--large-rounds", type=int, default=int(os.environ.get("BENCH_LARGE_ROUNDS", 5)))
    ap.add_argument("--n", type=int, default=5000, help="small GETs per c=1 round (floor, fetchd, curl --parallel)")
    ap.add_argument("--n64", type=int, default=20000,
                    help="small GETs per c=64 round (floor, fetchd, curl --parallel): about a second each, "
                         "so a round outlasts the machine's short stalls")
    ap.add_argument("--pings", type=int, default=20000)
    ap.add_argument("--quick", action="store_true", help="1 round each, small counts: checks the harness")
    ap.add_argument("--profile", action="store_true", help="perf record fetchd under the c=64 small-GET load")
    ap.add_argument("--results", default=os.path.join(BENCH, "results"))
    ap.add_argument("--only", choices=["rate", "redis", "fetchctl", "budget", "stream"],
                    help="run only these rounds (rate: the request-rate limit rows; redis: the shared limit rows; stream: the streaming-body rows; "
                         "budget: the server-set budget row)")
    ap.add_argument("--rate-rounds", type=int, default=3, help="rounds of the rate-limit rows")
    ap.add_argument("--budget-rounds", type=int, default=1,
                    help=f"rounds of the server-set budget row ({BUDGET_WINDOWS * BUDGET_WINDOW:g} s per tool each)")
    ap.add_argument("--cli-calls", type=int, default=200, help="calls of each tool in the fetchctl-vs-curl row")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.large_rounds, args.n, args.n64, args.pings = 1, 1, 1000, 1000, 2000
    args.rounds = max(1, min(args.rounds, 50))
    args.large_rounds = max(1, min(args.large_rounds, 20))

    src = args.bin or os.environ.get("FETCHD_BIN") or os.path.join(REPO, ".build", "release", "fetchd")
    if not os.access(src, os.X_OK):
        sys.exit(f"no fetchd binary at {src}: run `make bench` (it builds the release daemon)")
    for tool in ("gcc", "curl", "pkg-config") + (("aria2c",) if args.only not in ("rate", "redis", "fetchctl", "budget", "stream") else ()) + \
            (("redis-server", "redis-benchmark", "redis-cli") if args.only in (None, "redis") else ()) + \
            (("perf",) if args.profile else ()):
        if not shutil.which(tool):
            sys.exit(f"bench needs {tool}: `make bench` installs its prerequisites")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    b = Bench(args)
    try:
        # A private copy, so a rebuild during the run cannot swap the binary under us.
        b.fetchd_bin = os.path.join(b.tmp, "fetchd")
        shutil.copy2(src, b.fetchd_bin)
        if b"--no-cache" in subprocess.run([b.fetchd_bin, "--help"], capture_output=True, timeout=20).stdout:
            b.fetchd_args.append("--no-cache")
        b.compile()
        b.start_nginx()
        b.start_arrivals()
        if args.profile:
            return profile(b, args)
        meta = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "machine": machine(), "versions": versions(b.fetchd_bin), "fetchd_binary": src,
                "fetchd_binary_mtime": datetime.datetime.fromtimestamp(os.path.getmtime(src), datetime.timezone.utc)
                .isoformat(timespec="seconds"),
                "fetchd_args": b.fetchd_args, "n_small": args.n, "n_small_c64": args.n64, "rounds": args.rounds,
                "large_rounds": args.large_rounds, "pings": args.pings,
                "disk_dir_fs": fs_type(os.path.realpath(b.disk)), "aria2_dir_fs": fs_type(os.path.realpath(b.shm)),
                "c64_fetchd_clients": "4 processes x 16 pipelined requests, one connection each",
                "only": args.only, "rate_limits": list(RATE_LIMITS), "rate_burst": RATE_BURST,
                "rate_processes": RATE_PROCS}
        print(f"fetchd bench on {meta['machine']['cpus']} cores ({meta['machine']['cpu_model']}), "
              f"fetchd {meta['versions']['git']}, binary {src} built {meta['fetchd_binary_mtime']}")
        meta["loadavg_start"] = os.getloadavg()
        if meta["loadavg_start"][0] > 0.7:
            print(f"warning: load average {meta['loadavg_start'][0]:.1f} before the run: other work on this "
                  f"{os.cpu_count()}-core machine makes the numbers noisy")
        print("fetchd runs with --max-per-host 0 (no per-host cap; the default is 10); "
              "loopback nginx, 1 worker; medians of interleaved rounds", flush=True)
        if args.only not in ("rate", "redis", "fetchctl", "budget", "stream"):
            b.start_sink()
            b.start_echo()
            b.start_aria2()
            b.start_rpc_floor()
        b.fetchd, b.sock = b.start_fetchd()
        time.sleep(1.0)
        t_start = time.monotonic()
        if args.only not in ("rate", "redis", "fetchctl", "budget", "stream"):
            print("idle (fresh daemon, 5 s) ...", flush=True)
            b.record(("idle", "fresh"), b.idle, b.fetchd.pid)
            # Warm-up, not recorded: connections, page cache, first allocations.
            b.small_floor(64, 500), b.small_fetchd(64, 1000), b.small_fetchd(1, 200), b.small_rpc_floor(64, 1000)
            b.small_curl_parallel(64, 200), b.small_aria2(64, 100), b.small_aria2_ws(64, 100)

            plan = []
            for c in (1, 64):
                for key, _, method, n1, n64 in SMALL_TOOLS:
                    n = (n1 if c == 1 else n64) or (args.n if c == 1 else args.n64)
                    if args.quick:
                        n = min(n, 200 if key in ("aria2", "aria2_ws", "curl_per_request") else n)
                    plan.append((("small", key, c), getattr(b, method), c, n))
            t_start = time.monotonic()
            for rnd in range(args.rounds):
                rot = rnd % len(plan)
                for key, fn, c, n in plan[rot:] + plan[:rot]:
                    b.record(key, fn, c, n)
                print(f"small GETs: round {rnd + 1}/{args.rounds} done ({time.monotonic() - t_start:.0f} s)", flush=True)

            large = [(("download", "fetchd"), b.dl_fetchd), (("download", "fetchd_nofsync"), b.dl_fetchd_nofsync),
                     (("download", "curl"), b.dl_curl),
                     (("download", "fetchd_tmpfs"), b.dl_fetchd_tmpfs), (("download", "curl_tmpfs"), b.dl_curl_tmpfs),
                     (("upload", "fetchd"), b.ul_fetchd), (("upload", "curl"), b.ul_curl)]
            b.dl_curl(), b.dl_fetchd(), b.ul_curl()   # warm-up: the 1 GiB file and the upload file into the page cache
            for rnd in range(args.large_rounds):
                order = large if rnd % 2 == 0 else large[::-1]
                for key, fn in order:
                    b.record(key, fn)
                b.record(("mixed", "fetchd"), b.mixed, 500 if args.quick else 2000)
                for key, sock in ((("ping", "echo"), b.echo_sock), (("ping", "fetchd"), b.sock))[::1 if rnd % 2 == 0 else -1]:
                    b.record(key, b.ping, sock, args.pings)
                print(f"downloads, uploads, pings: round {rnd + 1}/{args.large_rounds} done", flush=True)

        if args.only in (None, "stream"):
            stream_rounds(b, 1 if args.quick else args.large_rounds, BIG)
        if args.only in (None, "fetchctl"):
            fetchctl = compiled_fetchctl()
            if fetchctl:
                n = 30 if args.quick else max(10, args.cli_calls)
                print(f"fetchctl fetch against curl, {n} calls each ...", flush=True)
                cli_calls(fetchctl, b.sock, b.small, 5)   # warm-up: page cache, the daemon's connection
                b.record(("cli", "fetchctl"), cli_calls, fetchctl, b.sock, b.small, n)
            else:
                print("fetchctl against curl: skipped, the compiled fetchctl is not built (make fetchctl)")
        if args.only not in ("redis", "fetchctl", "budget", "stream"):
            rate_rounds(b, 1 if args.quick else max(1, args.rate_rounds))
        if args.only in (None, "budget"):
            budget_rounds(b, max(1, args.budget_rounds))
        if args.only in (None, "redis"):
            redis_rounds(b, 1 if args.quick else max(1, args.rate_rounds))

        if args.only not in ("rate", "redis", "fetchctl", "budget", "stream"):
            # The daemon hands freed memory back to the system once, 2 s after its last job
            # (IdleMemoryRelease); idle is measured once that has happened.
            time.sleep(3.0)
            print("idle (after the load, 5 s) ...", flush=True)
            b.record(("idle", "after_load"), b.idle, b.fetchd.pid)
        meta["seconds"] = round(time.monotonic() - t_start, 1)
        meta["loadavg_end"] = os.getloadavg()

        s = summarize(b)
        g = goals(s)
        os.makedirs(args.results, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        suffix = ("-quick" if args.quick else "") + (f"-{args.only}" if args.only else "")
        path = os.path.join(args.results, f"{stamp}{suffix}.json")
        raw = [{"scenario": list(k), "rounds": v} for k, v in b.raw.items()]
        with open(path + ".tmp", "w") as f:
            json.dump({"meta": meta, "summary": s, "goals": g, "raw": raw}, f, indent=1)
        os.replace(path + ".tmp", path)
        print()
        print_table(s, g, meta)
        print(f"\nresults: {os.path.relpath(path, os.getcwd())}")
        return 0
    finally:
        b.stack.close()
        for d in (b.tmp, b.disk, b.shm):
            shutil.rmtree(d, ignore_errors=True)


def rate_rounds(b, rounds):
    """The request-rate rows: every rate, every tool once per round, the order rotated."""
    plan = [(("rate", key, rate), getattr(b, method), (rate, RATE_PROCS, rate_n(rate)) +
             ((per_process(rate),) if per_process else ()))
            for rate in RATE_LIMITS for key, _, method, per_process in RATE_TOOLS]
    for rnd in range(rounds):
        rot = rnd % len(RATE_TOOLS)
        for i in range(0, len(plan), len(RATE_TOOLS)):
            same_rate = plan[i:i + len(RATE_TOOLS)]
            for key, fn, a in same_rate[rot:] + same_rate[:rot]:
                b.record(key, fn, *a)
        print(f"rate limit: round {rnd + 1}/{rounds} done", flush=True)


def budget_rounds(b, rounds):
    """The server-set budget row: fetchd and the curl loops against an origin that allows
    BUDGET_LIMIT requests per BUDGET_WINDOW s and answers 429 past it, the order rotated."""
    b.start_budget_origin()
    plan = [(("budget", "fetchd"), b.budget_fetchd), (("budget", "curl"), b.budget_curl)]
    for rnd in range(rounds):
        for key, fn in plan[rnd % 2:] + plan[:rnd % 2]:
            b.record(key, fn)
        print(f"server budget: round {rnd + 1}/{rounds} done", flush=True)


def redis_rounds(b, rounds):
    """The shared-limit rows: REDIS_DAEMONS daemons on one limit in Redis at each rate, the
    added latency of a round trip (local and shared limit interleaved), and one Redis's
    admissions per second."""
    b.start_redis()
    b.redis_latency(False, 200), b.redis_latency(True, 200)   # warm-up: connections, scripts loaded
    for rnd in range(rounds):
        for rate in REDIS_LIMITS:
            b.record(("redis", "rate", rate), b.redis_rate, rate)
        for shared in ((False, True) if rnd % 2 == 0 else (True, False)):
            b.record(("redis", "latency", "shared" if shared else "local"), b.redis_latency, shared)
        print(f"shared limit: round {rnd + 1}/{rounds} done", flush=True)
    b.record(("redis", "admissions"), b.redis_admissions)


def profile(b, args):
    """perf record -g on fetchd while the c=64 small-GET load runs; prints the top of the report."""
    b.fetchd, b.sock = b.start_fetchd()
    b.small_fetchd(64, 2000)                              # warm-up
    data = os.path.join(b.tmp, "perf.data")
    perf = subprocess.Popen(["perf", "record", "-g", "-F", "999", "-o", data, "-p", str(b.fetchd.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)
    total, t0 = 0, time.monotonic()
    for _ in range(6):                                    # bounded: 6 x n requests, ~10-20 s
        total += b.small_fetchd(64, args.n * 2)["n"]
    wall = time.monotonic() - t0
    perf.send_signal(signal.SIGINT)
    try:
        perf.wait(30)
    except subprocess.TimeoutExpired:
        perf.kill()
        perf.wait()
    print(f"profiled {total} fetches at c=64 in {wall:.1f} s ({total / wall:,.0f} req/s under perf)")
    rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "--stdio",
                          "-g", "none", "--percent-limit", "0.4"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=300).stdout
    dem = shutil.which("swift-demangle") or None
    if dem:
        rep = subprocess.run([dem, "--simplified"], input=rep, stdout=subprocess.PIPE, text=True, timeout=60).stdout
    elif shutil.which("swift"):
        rep = subprocess.run(["swift", "demangle", "--simplified"], input=rep, stdout=subprocess.PIPE,
                             text=True, timeout=60).stdout
    dso = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "comm,dso", "--stdio", "-g", "none",
                          "--percent-limit", "0.5"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=300).stdout
    out = os.path.join(args.results, "profile-" +
                       datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + ".txt")
    os.makedirs(args.results, exist_ok=True)
    with open(out, "w") as f:
        f.write(dso + "\n" + rep)
    tidy = lambda text, limit: "\n".join(re.sub(r"\s{2,}", "  ", l).rstrip(" -") for l in text.splitlines()
                                         if l.strip() and not l.startswith("#"))[:limit]
    print("by thread (comm; 'oot.default-qos' = Swift concurrency's executor threads) and library:")
    print(tidy(dso, 3000))
    print()
    print("by library and symbol (--no-children --sort dso,symbol):")
    print(tidy(rep, 12000))
    print(f"\nfull report: {os.path.relpath(out, os.getcwd())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
