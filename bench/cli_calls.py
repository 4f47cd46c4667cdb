"""One command-line call per request: `fetchctl fetch -s URL` against `curl -s URL`.

Each call is a whole process (fork, exec, dynamic linking, the request, exit), timed from the
parent around subprocess.run, the two tools interleaved (the order swapped every pair) so
that a drift of the machine's speed falls on both. This is what a script pays per request.
"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "integration"))
from harness import compiled_fetchctl  # noqa: E402,F401  (the fetchctl the row runs)


def timed(cmd, env):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=30)
    ms = (time.perf_counter() - t0) * 1000
    if r.returncode != 0 or not r.stdout:
        raise RuntimeError(f"{cmd[0]}: exit {r.returncode}: {r.stderr[-300:]!r}")
    return ms, r.stdout


def cli_calls(fetchctl, sock, url, n):
    """n calls of each, interleaved: {"curl": [ms], "fetchctl": [ms], "n": n}."""
    env = dict(os.environ)
    env.pop("FETCHD_SOCKET", None)
    commands = {"curl": ["curl", "-s", url], "fetchctl": [fetchctl, "--socket", sock, "fetch", "-s", url]}
    out = {"curl": [], "fetchctl": [], "n": n}
    for i in range(n):
        order = ("curl", "fetchctl") if i % 2 == 0 else ("fetchctl", "curl")
        bodies = {}
        for tool in order:
            ms, bodies[tool] = timed(commands[tool], env)
            out[tool].append(ms)
        if bodies["curl"] != bodies["fetchctl"]:
            raise RuntimeError("fetchctl and curl printed different bodies")
    return out


def summarize_cli(rounds):
    """min / median / max of every call of every round, by tool."""
    s = {}
    for tool in ("curl", "fetchctl"):
        xs = [x for r in rounds for x in r[tool]]
        s[tool] = {"min_ms": min(xs), "median_ms": statistics.median(xs), "max_ms": max(xs), "n": len(xs)}
    s["ratio_median"] = s["fetchctl"]["median_ms"] / s["curl"]["median_ms"]
    return s
