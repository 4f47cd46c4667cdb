"""Other users, for the socket-ownership tests : a listener run as another
uid that records what reaches it, a spare uid whose /tmp/fetchd-<uid> is free, and running a
command as a given uid. Needs root (the tests skip without it).

    with ForeignListener(path, uid=NOBODY) as fake:   # binds path, then runs as nobody
        ... a client connects to path ...
    fake.received   # {"accepted": N, "bytes": N} once the listener has stopped
"""
import json
import os
import pwd
import random
import shutil
import subprocess
import sys

from harness import Daemon

NOBODY = 65534
IS_ROOT = os.getuid() == 0
# The system's python3, which other uids can run (the runner's may live under /root).
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

_LISTENER = r"""
import json, os, select, socket, sys
path, uid, chown = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o666)
if chown:
    os.chown(path, uid, uid)
if uid != 0:
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
s.listen(16)   # SO_PEERCRED reports the uid at listen() time: the one just set
print("ready", flush=True)
conns, accepted, total, pending = [], 0, 0, {}
def read(c):
    global total
    try:
        data = c.recv(65536)
    except OSError:
        data = b""
    total += len(data)
    if not data:
        conns.remove(c); c.close(); return
    pending[c] = pending.get(c, b"") + data
    *lines, pending[c] = pending[c].split(b"\n")
    for line in lines:   # every request is answered "pong", as a daemon would answer a ping
        try:
            rid = json.loads(line).get("id")
        except ValueError:
            rid = None
        c.sendall(json.dumps({"jsonrpc": "2.0", "id": rid, "result": "pong"}).encode() + b"\n")
done = False
while not done:
    ready, _, _ = select.select([s, sys.stdin] + conns, [], [])
    for c in [c for c in conns if c in ready]:
        read(c)
    if s in ready:
        c, _ = s.accept(); conns.append(c); accepted += 1
    done = sys.stdin in ready and not sys.stdin.buffer.read1(1)
s.setblocking(False)
while True:   # connections still in the backlog when told to stop count too
    try:
        c, _ = s.accept(); conns.append(c); accepted += 1
    except BlockingIOError:
        break
for c in list(conns):   # and whatever is still in flight
    c.setblocking(False)
    try:
        total += len(c.recv(1 << 20))
    except OSError:
        pass
print(json.dumps({"accepted": accepted, "bytes": total}), flush=True)
"""


class ForeignListener:
    """A Unix socket listener of another user. It binds `path` as root (so the directory may be
    root's), makes the socket file owned by `uid` (unless chown=False) and mode 0666, then
    becomes `uid` and listens. It counts connections and bytes, and answers every request line
    with the result "pong". `received` is the count after `stop()`."""

    def __init__(self, path, uid=NOBODY, chown=True):
        self.path, self.uid, self.chown = path, uid, chown
        self.proc = None
        self.received = None

    def start(self):
        self.proc = subprocess.Popen([PYTHON, "-c", _LISTENER, self.path, str(self.uid), "1" if self.chown else "0"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.proc.kill()
            raise RuntimeError(f"the fake listener did not start: {line!r} {self.proc.stderr.read()!r}")
        return self

    def stop(self):
        if self.proc is not None and self.received is None:
            out, err = self.proc.communicate(timeout=10)
            self.received = json.loads(out.decode().strip().splitlines()[-1]) if out.strip() else {"error": err.decode()}
        return self.received

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def spare_uid():
    """A uid with no account and no /tmp/fetchd-<uid>: its fallback directory is free, so a
    test can use it without touching a real daemon's default path."""
    taken = {p.pw_uid for p in pwd.getpwall()}
    while True:
        uid = random.randrange(40000, 60000)
        if uid not in taken and not os.path.lexists(f"/tmp/fetchd-{uid}"):
            return uid


def spare_fallback(test):
    """spare_uid() for a TestCase; its /tmp/fetchd-<uid> is removed when the test ends."""
    uid = spare_uid()
    test.addCleanup(remove_fallback_dir, uid)
    return uid


def fallback_daemon(uid):
    """The real daemon (not started yet) run as uid (when we are root) with no socket chosen:
    it listens on /tmp/fetchd-<uid>/fetchd.sock."""
    return Daemon(pass_socket=False, socket_path=f"/tmp/fetchd-{uid}/fetchd.sock", env=clean_env(XDG_RUNTIME_DIR=""),
                  preexec=as_user(uid) if IS_ROOT else None)


def as_user(uid):
    """preexec_fn that becomes uid (and gid uid, no supplementary groups)."""
    def become():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return become


def run_as(uid, argv, env=None, timeout=60, **kw):
    """Run argv as uid with env (a complete environment), from /; CompletedProcess (bytes)."""
    return subprocess.run(argv, env=env, timeout=timeout, capture_output=True, cwd="/",
                          preexec_fn=as_user(uid), stdin=subprocess.DEVNULL, **kw)


def clean_env(**extra):
    """The environment without any socket choice: clients and the daemon fall back to
    /tmp/fetchd-<uid>/fetchd.sock."""
    env = {k: v for k, v in os.environ.items() if k not in ("FETCHD_SOCKET", "XDG_RUNTIME_DIR")}
    env.update(HOME="/nonexistent", **extra)
    return env


def remove_fallback_dir(uid):
    """Removes /tmp/fetchd-<uid> of a spare uid, whatever a test left there (and the socket
    an older daemon would have made at /tmp/fetchd-<uid>.sock)."""
    if os.path.lexists(f"/tmp/fetchd-{uid}.sock"):
        os.unlink(f"/tmp/fetchd-{uid}.sock")
    path = f"/tmp/fetchd-{uid}"
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)


def taken_fallback(uid, owner=NOBODY):
    """/tmp/fetchd-<uid> made first by `owner` (mode 0755, as an attacker would leave it) with
    a listener of `owner` at fetchd.sock: the path uid's clients fall back to."""
    path = f"/tmp/fetchd-{uid}"
    os.mkdir(path, 0o755)
    os.chmod(path, 0o755)
    os.chown(path, owner, owner)
    return ForeignListener(os.path.join(path, "fetchd.sock"), uid=owner)
