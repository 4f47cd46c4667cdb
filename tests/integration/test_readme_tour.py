"""README.md's "A 30-second tour", run as written: the transcript in the README's ```sh block is
typed, command by command, into an interactive bash (on a pseudo-terminal, as a user's terminal
is) that talks to the real daemon on its default socket (a temporary $XDG_RUNTIME_DIR) and to
the test server started by the README's own command. What the terminal shows must be what the
README shows, with only these allowances, applied to both sides:

- the port of the test server and the directory of the files (/tmp in the README: a temporary
  directory here), put back as the README writes them;
- values that differ from run to run: process ids, uptime, job ids fetchctl makes up, elapsed
  times, transfer rates, the bytes a running job has received so far, HAR file time stamps
  and the socket's path;
- a line "..." in the README stands for any number of lines, and "..." inside a line for any
  text; blank lines and runs of spaces are not compared.

Then the daemon must be as the tour found it: logging off, no cookies, no rate limit in force,
no jobs, and the tour's files gone.
"""
import difflib
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from harness import REPO, Daemon, wait_for

README = os.path.join(REPO, "README.md")


def tour_section():
    text = open(README, encoding="utf-8").read()
    start = text.index("## A 30-second tour")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def tour_transcript():
    m = re.search(r"^```sh\n(.*?)^```", tour_section(), re.S | re.M)
    if not m:
        raise AssertionError("README.md's tour has no ```sh block")
    return m.group(1)


# Values that differ from run to run (applied to the README's text and to what ran).
VARYING = [
    (r"\(pid \d+\) on /\S+/fetchd\.sock$", "(pid N) on SOCKET"),
    (r'"pid": \d+', '"pid": N'),
    (r"^up \d+s,", "up Ns,"),
    (r"fetchctl-\d+-\d+", "fetchctl-ID"),
    (r'"elapsedMs": [0-9.]+', '"elapsedMs": N'),
    (r"[0-9.]+ (?:B|KiB|MiB|GiB)/s\b", "RATE/s"),
    (r"\b\d+ B/(?=\d)", "N B/"),              # what a running job has received so far
    (r"^\[(\d+)\] \d+$", r"[\1] PID"),          # the shell's line for a job started with &
    (r"\b\d{8}-\d{6}\.\d{3}-", "STAMP-"),       # HAR file names
]


def normalise(text):
    lines = []
    for line in text.split("\n"):
        line = line.rstrip()
        if not line:
            continue
        for pattern, repl in VARYING:
            line = re.sub(pattern, repl, line)
        lines.append(re.sub(r" {2,}", " ", line))
    return lines


def pattern(expected):
    """A regular expression for README lines: a line "..." is any lines, "..." in a line any text."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("[^\n]*?".join(re.escape(p) for p in line.split("...")) + r"\n")
    return "".join(parts)


def matches(expected, actual):
    """expected: README lines; actual: the lines that ran. True when they match."""
    return re.fullmatch(pattern(expected), "".join(l + "\n" for l in actual)) is not None


def first_mismatch(expected, actual):
    """The index of the first README line that what ran cannot match."""
    text = "".join(l + "\n" for l in actual)
    k = 0
    while k < len(expected) and re.match(pattern(expected[:k + 1]), text):
        k += 1
    return k


class Terminal:
    """An interactive bash on a pseudo-terminal; type() returns what the terminal shows. The
    prompt is "$ " after an SGR reset, which a terminal does not show but marks the prompt
    even after output that does not end with a newline."""
    MARK = b"\x1b[0m"
    PROMPT = MARK + b"$ "

    def __init__(self, cwd, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: a session of its own, the pty its controlling terminal
            try:
                os.chdir(cwd)
                os.execvpe("bash", ["bash", "--norc", "--noprofile", "--noediting", "-i"], env)
            finally:
                os._exit(127)
        self.shown = self._read_until_prompt(b"")

    def _read_until_prompt(self, buf, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not buf.endswith(self.PROMPT):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no prompt within {timeout}s; the terminal shows: {buf[-2000:]!r}")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the shell ended; the terminal shows: {buf[-2000:]!r}")
                buf += chunk
        return buf

    def type(self, line):
        """Types LINE and Enter; what the terminal showed up to the next prompt (the prompt
        and the echoed line included)."""
        os.write(self.fd, line.encode() + b"\n")
        shown = self._read_until_prompt(b"")
        self.shown += shown
        return shown

    def close(self):
        """Ends the jobs still running (a tour that failed half-way), then the shell."""
        try:
            os.write(self.fd, b"kill $(jobs -p) 2>/dev/null; exit\n")
        except OSError:
            pass
        for sig in (signal.SIGHUP, signal.SIGKILL):
            if self._exited_within(5):
                break
            os.kill(self.pid, sig)
        else:
            self._exited_within(5)
        os.close(self.fd)

    def _exited_within(self, seconds):
        deadline = time.monotonic() + seconds
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True


def as_seen(raw):
    """Terminal bytes as the lines a terminal shows: CR LF is a newline, a bare CR goes back to
    the start of the line (the progress bar redraws itself so)."""
    text = raw.replace(Terminal.MARK, b"").decode("utf-8", errors="replace").replace("\r\n", "\n")
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


class TestReadmeTour(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fetchd-tour-")
        self.runtime = os.path.join(self.tmp, "run")
        self.files = os.path.join(self.tmp, "files")      # the tour's /tmp
        for d in (self.runtime, self.files):
            os.makedirs(d, mode=0o700)
        self.server = None
        self.daemon = None
        self.terminal = None

    def tearDown(self):
        if self.terminal:
            self.terminal.close()
        if self.daemon:
            self.daemon.close()
        if self.server:
            if self.server.poll() is None:
                self.server.terminate()
                self.server.wait(10)
            self.server.stdout.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_test_server(self):
        """The README's own command for the test server, on a port of the system's choosing."""
        m = re.search(r"(python3 tests/support/testserver\.py --port 8080)", tour_section())
        self.assertIsNotNone(m, "the tour no longer says how to start the test server")
        argv = m.group(1).replace("--port 8080", "--port 0").split()
        argv[0] = sys.executable
        self.server = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        line = self.server.stdout.readline().decode()
        self.assertTrue(line.startswith("PORT "), line)
        return int(line.split()[1])

    def test_the_tour_shows_what_runs_and_undoes_itself(self):
        port = self.start_test_server()
        env = dict(os.environ, XDG_RUNTIME_DIR=self.runtime, XDG_STATE_HOME=os.path.join(self.tmp, "state"))
        env.pop("FETCHD_SOCKET", None)
        # As `make run`: no --socket (the default path under $XDG_RUNTIME_DIR), the HTTP cache on.
        self.daemon = Daemon("--cache-dir", os.path.join(self.tmp, "cache"), env=env, pass_socket=False,
                             socket_path=os.path.join(self.runtime, "fetchd.sock")).start()
        with self.daemon.client() as c:
            limits_before = c.call("getRateLimits")["limits"]

        transcript = tour_transcript()
        shell_env = dict(env, PS1=Terminal.PROMPT.decode(), PS2="> ", TERM="dumb", HISTFILE="/dev/null", LC_ALL="C.UTF-8")
        shell_env.pop("PROMPT_COMMAND", None)
        self.terminal = Terminal(REPO, shell_env)
        shown = b""
        for line in transcript.split("\n"):
            if not line.startswith("$ "):
                continue
            command = line[2:].replace("localhost:8080", f"localhost:{port}").replace("/tmp/", self.files + "/")
            if command.startswith("ls ") and "/har" in command:
                # HAR files are written just after the answer (docs/logging.md); a reader who
                # types the next line takes longer than that, this test does not.
                har = os.path.join(self.files, "har")
                wait_for(lambda: os.path.isdir(har) and any(n.endswith(".har") for n in os.listdir(har)),
                         timeout=10, interval=0.02, message="no HAR file was written")
            shown += self.terminal.type(command)
            if command.rstrip().endswith("&"):
                self.wait_until_running(command)

        seen = as_seen(self.terminal.PROMPT + shown)
        seen = seen.replace(f"localhost:{port}", "localhost:8080").replace(self.files + "/", "/tmp/")
        expected, actual = normalise(transcript), normalise(seen)
        # The prompt after the last command.
        self.assertEqual(actual[-1], "$")
        actual = actual[:-1]
        if not matches(expected, actual):
            k = first_mismatch(expected, actual)
            where = f"README line {expected[k]!r} (the tour's line {k + 1})" if k < len(expected) else "the end of the README's tour"
            diff = "\n".join(difflib.unified_diff(expected, actual, "README.md", "terminal", lineterm=""))
            self.fail(f"the tour in README.md is not what runs, from {where}:\n{diff}")

        # Undone: the daemon is as the tour found it.
        with self.daemon.client() as c:
            self.assertFalse(c.call("getLogging")["enabled"], "the tour left HTTP logging on")
            self.assertEqual(c.call("getCookies")["cookies"], [], "the tour left cookies in the default jar")
            self.assertEqual(c.call("listJobs")["jobs"], [], "the tour left jobs running")
            default = [(e["maxConcurrent"], e["requestsPerSecond"], e["burst"]) for e in limits_before if e["host"] == "*"]
            in_force = {(e["maxConcurrent"], e["requestsPerSecond"], e["burst"]) for e in c.call("getRateLimits")["limits"]}
            self.assertEqual(in_force, set(default), "a rate limit of the tour is still in force")
        self.assertEqual(os.listdir(self.files), [], "the tour left files behind")

    def wait_until_running(self, command):
        """A command run in the background (&): the reader types the next line once its job
        runs (and has received its first bytes)."""
        m = re.search(r"--job-id (\S+)", command)
        self.assertIsNotNone(m, f"a background command of the tour needs --job-id for this test: {command}")
        job_id = m.group(1)

        def running():
            with self.daemon.client() as c:
                return any(j["jobId"] == job_id and j["state"] == "running" and (j.get("receivedBytes") or 0) > 0
                           for j in c.call("listJobs")["jobs"])
        wait_for(running, timeout=20, interval=0.05, message=f"job {job_id} did not start")


if __name__ == "__main__":
    unittest.main()
