"""The streaming-body rows of bench/run.py (`--only stream`), side by side in one run:

- 1 GiB from nginx through `bodyTo: "fd"` into a pipe read by `cat > /dev/null`
  (bench/stream_bench.c `fd`, libfetchd's fetchd_fetch_to_fd on its stdout), against
  `curl -s URL | cat > /dev/null`;
- the same 1 GiB in `bodyChunk` notifications read by the C client (fetchd_fetch_stream);
- Server-Sent Events: bench/sse_server.c writes 10,000 events of 100 bytes as fast as the
  socket takes them, each stamped with CLOCK_MONOTONIC at its write; stream_bench reads them
  through the daemon (`responseBody: "events"`, sseEvent) and, as the baseline, from a socket
  of its own; the figure is each event's write-to-read time, the daemon's minus the direct one.

Throughput is bytes over the whole pipeline's wall time (process start to the reader's EOF);
CPU is the daemon's user+sys (/proc) for fetchd, the whole tree's for curl | cat.
"""
import json
import os
import statistics
import subprocess
import time

from procstat import cpu_seconds

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
MB = 1e6
SSE_EVENTS = 10000


def compile_stream(b, out):
    """stream_bench (with libfetchd's source) and sse_server into out; paths into b.bin."""
    jansson = subprocess.run(["pkg-config", "--cflags", "--libs", "jansson"], check=True,
                             stdout=subprocess.PIPE, text=True).stdout.split()
    cdir = os.path.join(REPO, "clients", "c")
    b.bin["stream_bench"] = os.path.join(out, "stream_bench")
    subprocess.run(["gcc", "-O2", "-o", b.bin["stream_bench"], os.path.join(BENCH, "stream_bench.c"),
                    os.path.join(cdir, "fetchd.c"), "-I", cdir] + jansson + ["-pthread"], check=True, timeout=120)
    b.bin["sse_server"] = os.path.join(out, "sse_server")
    subprocess.run(["gcc", "-O2", "-o", b.bin["sse_server"], os.path.join(BENCH, "sse_server.c"), "-pthread"],
                   check=True, timeout=120)


def start_sse(b):
    p = b.stack.start([b.bin["sse_server"]], stdout=subprocess.PIPE)
    port = int(p.stdout.readline())
    b.sse_url = f"http://127.0.0.1:{port}/sse?n={SSE_EVENTS}"


def _timed(b, cmd, daemon_cpu):
    """cmd under bash with pipefail; wall seconds, CPU (the daemon's, else the tree's), stderr."""
    r0 = os.times()
    c0, t0 = cpu_seconds(b.fetchd.pid), time.monotonic()
    p = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=600)
    wall = time.monotonic() - t0
    r1 = os.times()
    if p.returncode != 0:
        raise RuntimeError(f"{cmd}: exit {p.returncode}: {p.stderr.decode(errors='replace')[-600:]}")
    cpu = cpu_seconds(b.fetchd.pid) - c0 if daemon_cpu else \
        (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    return wall, cpu, p.stderr.decode(errors="replace")


def _last_json(err):
    return json.loads(err.strip().splitlines()[-1])


def big_fetchd(b, big, mode):
    """mode "fd": the body into `| cat > /dev/null`; "chunks": in bodyChunk notifications."""
    pipe = " | cat > /dev/null" if mode == "fd" else ""
    wall, cpu, err = _timed(b, f"'{b.bin['stream_bench']}' {mode} '{b.sock}' '{b.base}/big.bin'{pipe}", True)
    got = _last_json(err)["bytes"]
    if got != big:
        raise RuntimeError(f"{mode}: {got} bytes")
    return {"bytes": big, "seconds": wall, "cpu": cpu}


def big_curl(b, big):
    wall, cpu, _ = _timed(b, f"curl -s -f '{b.base}/big.bin' | cat > /dev/null", False)
    return {"bytes": big, "seconds": wall, "cpu": cpu}


def sse(b, via_daemon):
    cmd = f"'{b.bin['stream_bench']}' " + (f"events '{b.sock}' '{b.sse_url}'" if via_daemon else f"direct '{b.sse_url}'")
    wall, cpu, err = _timed(b, cmd, via_daemon)
    r = _last_json(err)
    if r["events"] != SSE_EVENTS:
        raise RuntimeError(f"SSE: {r['events']} events")
    return dict(r, seconds=wall, cpu=cpu)


def stream_rounds(b, rounds, big):
    start_sse(b)
    big_curl(b, big), big_fetchd(b, big, "fd"), big_fetchd(b, big, "chunks")       # warm-up: page cache, connections
    sse(b, True), sse(b, False)
    plan = [(("stream", "bodyto"), big_fetchd, (b, big, "fd")), (("stream", "curl"), big_curl, (b, big)),
            (("stream", "chunks"), big_fetchd, (b, big, "chunks")),
            (("sse", "fetchd"), sse, (b, True)), (("sse", "direct"), sse, (b, False))]
    for rnd in range(rounds):
        rot = rnd % len(plan)
        for key, fn, a in plan[rot:] + plan[:rot]:
            b.record(key, fn, *a)
        print(f"streaming bodies: round {rnd + 1}/{rounds} done", flush=True)


def _spread(xs):
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def summarize_stream(raw):
    s = {}
    for k, rounds in raw.items():
        if k[0] == "stream":
            s[f"stream.{k[1]}"] = {"mb_per_s": _spread([r["bytes"] / MB / r["seconds"] for r in rounds]),
                                   "cpu_s": statistics.median(r["cpu"] for r in rounds), "rounds": len(rounds)}
        elif k[0] == "sse":
            s[f"sse.{k[1]}"] = {q: _spread([r[q] for r in rounds]) for q in ("p50_us", "p99_us", "max_us")}
            s[f"sse.{k[1]}"].update(events=rounds[0]["events"], rounds=len(rounds),
                                    seconds=statistics.median(r["seconds"] for r in rounds))
    return s


def stream_goals(s, add):
    fd, cu, ch = (s.get(f"stream.{t}", {}).get("mb_per_s") for t in ("bodyto", "curl", "chunks"))
    if fd and cu:
        r = fd["median"] / cu["median"]
        add("1 GiB bodyTo pipe | cat vs curl | cat", f"{r:.2f}x", ">= 1.0x", r >= 1.0,
            f"{fd['median']:,.0f} vs {cu['median']:,.0f} MB/s")
    if ch and fd:
        r = ch["median"] / fd["median"]
        add("1 GiB bodyChunk (C client) vs bodyTo pipe", f"{r:.2f}x", ">= 0.5x", r >= 0.5,
            f"{ch['median']:,.0f} vs {fd['median']:,.0f} MB/s")
    f, d = s.get("sse.fetchd"), s.get("sse.direct")
    if f and d:
        for q, target in (("p50_us", 100), ("p99_us", 1000)):
            added = f[q]["median"] - d[q]["median"]
            add(f"SSE {SSE_EVENTS:,} events {q[:3]} added over a direct read", f"{added:,.0f} us",
                f"< {target:,} us", added < target, f"{f[q]['median']:,.0f} vs {d[q]['median']:,.0f} us")


def stream_table(s):
    rows = []
    fd = s.get("stream.bodyto", {}).get("mb_per_s")
    for t, name in (("bodyto", "fetchd bodyTo fd | cat (C client)"), ("curl", "curl -s | cat"),
                    ("chunks", "fetchd bodyChunk (C client)")):
        e = s.get(f"stream.{t}")
        if e:
            m = e["mb_per_s"]
            rows.append(("1 GiB streamed body", name, f"{m['median']:,.0f} MB/s", f"{m['min']:,.0f}-{m['max']:,.0f}",
                         f"{e['cpu_s']:.2f} s total", "",
                         f"{fd['median'] / m['median']:.2f}x" if fd and t != "bodyto" else "",
                         "CPU: daemon's" if t != "curl" else "CPU: curl and cat"))
    for t, name in (("fetchd", "fetchd sseEvent (C client)"), ("direct", "same client, its own socket")):
        e = s.get(f"sse.{t}")
        if e:
            rows.append((f"SSE {e['events']:,} x 100 B, write to read", name,
                         f"p50 {e['p50_us']['median']:,.0f} us  p99 {e['p99_us']['median']:,.0f} us",
                         f"p50 {e['p50_us']['min']:,.0f}-{e['p50_us']['max']:,.0f}, "
                         f"p99 {e['p99_us']['min']:,.0f}-{e['p99_us']['max']:,.0f}", "", "", "",
                         f"max {e['max_us']['median']:,.0f} us, {e['seconds'] * 1000:,.0f} ms per run"))
    return rows
