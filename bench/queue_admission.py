#!/usr/bin/env python3
"""Benchmark (not a test): 10,000 jobs waiting behind a host limited to 1 request at a time.

    python3 bench/queue_admission.py [--jobs N] [--bin PATH]

Starts nginx (tests/support/nginx.py) serving a 2-byte file and a fresh fetchd on a temporary
socket. Phase 1 ("enqueue"): the host gets a rate of one request per million seconds and its
one token is spent, so every job waits, and one connection sends N fetches; it ends once
getRateLimits shows all N queued. Phase 2 ("drain"): the rate is lifted and maxConcurrent set
to 1, and the jobs start one by one until all N are answered.

The report shows:
  - daemon RSS (VmRSS, and the peak VmHWM from /proc/<pid>/status) before, with N queued,
    and after;
  - CPU (utime+stime from /proc/<pid>/stat) per enqueued job and per admission. A drain
    admission includes that job's whole HTTP transfer and its answer; that is the daemon's
    real cost per job under this limit.
Uses .build/release/fetchd when it exists, else .build/debug/fetchd (override with --bin or
$FETCHD_BIN), and prints which one.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procstat import cpu_seconds, mem_kib  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import nginx  # noqa: E402



def pick_binary(explicit):
    if explicit:
        return explicit, "given"
    if os.environ.get("FETCHD_BIN"):
        return os.environ["FETCHD_BIN"], "$FETCHD_BIN"
    release = os.path.join(REPO, ".build", "release", "fetchd")
    if os.access(release, os.X_OK):
        return release, "release"
    return os.path.join(REPO, ".build", "debug", "fetchd"), "debug"






class Conn:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1_000_000

    def send(self, objs):
        self.sock.sendall(b"".join(json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in objs))

    def lines(self):
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1:]
                if line.strip():
                    yield json.loads(line)
                continue
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("daemon closed the connection")
            self.buf += chunk

    def call(self, method, params=None):
        self.next_id += 1
        rid = self.next_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send([msg])
        for m in self.lines():
            if m.get("id") == rid:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            raise RuntimeError(f"unexpected message on the control connection: {m}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--bin")
    args = ap.parse_args()
    n = args.jobs
    binary, kind = pick_binary(args.bin)
    if not os.access(binary, os.X_OK):
        sys.exit(f"no fetchd binary at {binary}: run swift build (or -c release)")

    tmp = tempfile.mkdtemp(prefix="fetchd-bench-")
    static = os.path.join(tmp, "static")
    os.makedirs(static)
    with open(os.path.join(static, "ok.txt"), "w") as f:
        f.write("ok")
    ng = nginx.Nginx(static).start()
    sock = os.path.join(tmp, "fetchd.sock")
    daemon = subprocess.Popen([binary, "--socket", sock, "--max-queued", str(n + 10)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(sock):
            if daemon.poll() is not None or time.monotonic() > deadline:
                sys.exit("fetchd did not start")
            time.sleep(0.01)
        time.sleep(0.05)
        pid = daemon.pid
        host = ng.url.split("//", 1)[1]  # 127.0.0.1:PORT
        url = ng.url + "/ok.txt"
        ctl = Conn(sock)
        jobs = Conn(sock)
        # Warm up: a few requests through the daemon (libcurl, first allocations).
        for _ in range(20):
            ctl.call("fetch", {"url": url, "retry": False, "responseBody": "none", "cookieJar": False})
        # Hold the host: a rate that refills once in 11 days, and its one token spent now.
        ctl.call("setRateLimit", {"host": host, "requestsPerSecond": 0.000001, "burst": 1})
        ctl.call("fetch", {"url": url, "retry": False, "responseBody": "none", "cookieJar": False})
        mem0 = mem_kib(pid)

        # Phase 1: enqueue N jobs behind a host that takes none.
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        batch = 500
        for start in range(0, n, batch):
            jobs.send([{"jsonrpc": "2.0", "id": i, "method": "fetch",
                        "params": {"url": url, "retry": False, "responseBody": "none", "cookieJar": False}}
                       for i in range(start, min(n, start + batch))])
        while ctl.call("getRateLimits")["queued"] < n:
            time.sleep(0.05)
        cpu1, t1 = cpu_seconds(pid), time.monotonic()
        mem1 = mem_kib(pid)

        # Phase 2: one at a time.
        ctl.call("setRateLimit", {"host": host, "maxConcurrent": 1, "requestsPerSecond": None})
        answered = failed = 0
        for m in jobs.lines():
            if "id" in m and "method" not in m:
                answered += 1
                if "error" in m or m["result"].get("status") != 200:
                    failed += 1
                if answered == n:
                    break
        cpu2, t2 = cpu_seconds(pid), time.monotonic()
        mem2 = mem_kib(pid)
        left = ctl.call("getRateLimits")

        print(f"fetchd binary: {binary} ({kind} build)")
        print(f"jobs: {n} behind {host} (maxConcurrent 1), nginx static 2-byte file; {failed} failed; "
              f"queue afterwards: {left['queued']}")
        print(f"RSS idle:            VmRSS {mem0['VmRSS']:>7} KiB   VmHWM {mem0['VmHWM']:>7} KiB")
        print(f"RSS with {n} queued: VmRSS {mem1['VmRSS']:>7} KiB   VmHWM {mem1['VmHWM']:>7} KiB   "
              f"(+{(mem1['VmRSS'] - mem0['VmRSS']) * 1024 / n:.0f} bytes per queued job)")
        print(f"RSS after drain:     VmRSS {mem2['VmRSS']:>7} KiB   VmHWM {mem2['VmHWM']:>7} KiB")
        print(f"enqueue: {t1 - t0:.2f} s wall, {cpu1 - cpu0:.2f} s CPU -> {(cpu1 - cpu0) / n * 1e6:.0f} us CPU per job")
        print(f"drain:   {t2 - t1:.2f} s wall ({n / (t2 - t1):.0f} admissions/s), {cpu2 - cpu1:.2f} s CPU -> "
              f"{(cpu2 - cpu1) / n * 1e6:.0f} us CPU per admission (incl. the transfer and its answer)")
        print(f"total daemon CPU for {n} jobs: {cpu2 - cpu0:.2f} s -> {(cpu2 - cpu0) / n * 1e6:.0f} us per job")
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        ng.stop()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
