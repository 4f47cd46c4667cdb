#!/usr/bin/env python3
"""Instructions per small GET through fetchd, counted by callgrind (repeatable, unlike time).

    python3 bench/callgrind.py BIN [BIN...]   (default .build/release/fetchd)

For each binary: fetchd runs under `valgrind --tool=callgrind --separate-threads=yes` on a
temporary socket, `bench/fetchd_load` sends N small GETs (4 clients x 4 in flight, c=16) to a
local nginx, and the daemon is stopped. Two runs (N1, N2) per binary; the difference divided
by N2 - N1 is the cost of one request without the start and the stop. Prints the total and
the busiest thread's share (the thread with the most instructions: the engine thread, or
with two small-request engine threads, the busier of them, about half of what one did)."""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import nginx as _nginx  # noqa: E402

N1, N2 = 300, 1500


def totals(prefix):
    per_thread = []
    for path in glob.glob(prefix + "*"):
        with open(path) as f:
            text = f.read()
        m = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if m:
            per_thread.append(int(m.group(1)))
    return sum(per_thread), max(per_thread)


def run(binary, load, url, n, tmp, tag):
    sock = os.path.join(tmp, f"cg-{tag}-{n}.sock")
    prefix = os.path.join(tmp, f"cg-{tag}-{n}.out")
    # A binary with an HTTP cache (on by default) runs without it: every GET reaches nginx.
    no_cache = ["--no-cache"] if b"--no-cache" in subprocess.run([binary, "--help"], capture_output=True).stdout else []
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--separate-threads=yes",
                             f"--callgrind-out-file={prefix}", binary, "--socket", sock, "--max-per-host", "0"] + no_cache,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            break
        except OSError:
            time.sleep(0.1)
    subprocess.run([load, sock, url, str(n), "4", "4"], check=True, stdout=subprocess.DEVNULL, timeout=600)
    proc.send_signal(signal.SIGTERM)
    proc.wait(120)
    return totals(prefix)


def main():
    # FETCHD_CALLGRIND_KEEP=DIR keeps the callgrind files (for callgrind_annotate) in DIR.
    keep = os.environ.get("FETCHD_CALLGRIND_KEEP")
    bins = sys.argv[1:] or [os.path.join(REPO, ".build", "release", "fetchd")]
    tmp = tempfile.mkdtemp(prefix="fetchd-callgrind-")
    try:
        load = os.path.join(tmp, "fetchd_load")
        subprocess.run(["gcc", "-O2", "-o", load, os.path.join(HERE, "fetchd_load.c")], check=True)
        static = os.path.join(tmp, "static")
        os.makedirs(static)
        with open(os.path.join(static, "small.txt"), "wb") as f:
            f.write(b"x" * 99 + b"\n")
        server = _nginx.Nginx(static).start()
        url = server.url + "/small.txt"
        for tag, binary in enumerate(bins):
            # valgrind 3.19 cannot read the DWARF the Swift 6.3 toolchain writes ("possibly
            # corrupted debuginfo"): it runs a copy without debug sections.
            stripped = os.path.join(tmp, f"fetchd-{tag}")
            subprocess.run(["strip", "--strip-debug", "-o", stripped, binary], check=True)
            (t1, e1), (t2, e2) = run(stripped, load, url, N1, tmp, tag), run(stripped, load, url, N2, tmp, tag)
            per, engine = (t2 - t1) / (N2 - N1), (e2 - e1) / (N2 - N1)
            print(f"{binary}: {per / 1000:.1f}k instructions per small GET (c=16), busiest thread {engine / 1000:.1f}k")
        server.stop()
    finally:
        if keep:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(tmp, keep, ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
