"""fetchctl streams: `fetchctl fetch` hands its own stdout to the daemon (`bodyTo: "fd"`) and
its stdin (`bodyFrom: "fd"`) for `-T -` and `--data-binary @-`, so bodies of any size pass
with constant memory in fetchctl and in the daemon; `-f` keeps an error's body off stdout;
`fetchctl events URL` prints Server-Sent Events as they arrive; Ctrl-C cancels.

Against the real daemon, nginx (a large generated file) and the test server (uploads, SSE,
slow bodies), with curl run side by side where curl has the same flag. Runs $FETCHCTL, else
clients/fetchctl once it is the compiled program; skipped when none is built."""
import hashlib
import json
import os
import resource
import signal
import subprocess
import threading
import time
import unittest
import urllib.request
import uuid

from harness import DaemonTestCase, compiled_fetchctl, wait_for

FETCHCTL = compiled_fetchctl()
BIG = 256 << 20            # the large body, both ways
MiB = 1 << 20
# fetchctl's peak RSS while a body of BIG passes: it never holds the body
CLIENT_MAX_RSS = 16 * MiB
# how much the daemon's RSS may grow while a body of BIG passes (with a reader that lags):
# written to a descriptor it holds a few buffers; sent as notifications (-f) up to its
# per-connection budget of body bytes, which travel as base64 in JSON lines
DAEMON_MAX_GROWTH = 32 * MiB
DAEMON_MAX_GROWTH_NOTIFIED = 128 * MiB


def memory(pid, key):
    """VmRSS (now) or VmHWM (the peak since exec) of pid in bytes; None once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None  # a zombie has no memory lines


class Sampler:
    """The highest VmRSS of pid, sampled every 20 ms until stop(); stop() gives how far it
    rose above base (default: its RSS now)."""

    def __init__(self, pid, base=None):
        self.pid = pid
        self.base = self.peak = base or memory(pid, "VmRSS")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, memory(self.pid, "VmRSS") or 0)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak - self.base


def wait_peak(p, timeout):
    """Waits for p, reading its VmHWM (its peak RSS since exec, which rusage would not give:
    ru_maxrss counts the forked test process before exec); (exit status, peak bytes)."""
    deadline = time.monotonic() + timeout
    peak = 0
    while p.poll() is None:
        peak = max(peak, memory(p.pid, "VmHWM") or 0)
        if time.monotonic() > deadline:
            p.kill()
            p.wait()
            raise AssertionError(f"{p.args} did not end within {timeout}s")
        time.sleep(0.005)
    return p.returncode, peak


def generate(path, size):
    """size pseudo-random bytes (fast, not stored in git) written to path; their sha256."""
    h = hashlib.sha256()
    block = hashlib.shake_256(b"fetchctl-streaming").digest(MiB)
    with open(path, "wb") as f:
        for i in range(size // MiB):
            piece = block[i % 251:] + block[:i % 251]  # no two MiB alike
            f.write(piece)
            h.update(piece)
    return h.hexdigest()


@unittest.skipUnless(FETCHCTL, "the compiled fetchctl is not built (make fetchctl)")
class StreamCase(DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # the daemon's RSS once it has served a request: what a large body may add to is
        # measured from here (memory an earlier test left allocated counts against it)
        subprocess.run([FETCHCTL, "--socket", cls.daemon.socket_path, "fetch", "-s", "-o", "/dev/null",
                        cls.srv.nginx_url + "/small.txt"], timeout=30, stdin=subprocess.DEVNULL)
        cls.daemon_base = memory(cls.daemon.pid, "VmRSS")

    def argv(self, *args):
        return [FETCHCTL, "--socket", self.daemon.socket_path, *args]

    def ctl(self, *args, input=None, timeout=60):
        return subprocess.run(self.argv(*args), capture_output=True, timeout=timeout, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)

    def live_jobs(self):
        return [j["jobId"] for j in self.c.call("listJobs", {})["jobs"]]

    def get_json(self, path):
        with urllib.request.urlopen(self.srv.test_url + path, timeout=30) as r:
            return json.loads(r.read())


class TestLargeBodyToStdout(StreamCase):
    """A body of 256 MiB through `fetchctl fetch URL | reader`: byte-exact, and neither
    fetchctl nor the daemon holds it, even while the reader lags behind."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.name = f"stream-{uuid.uuid4().hex[:8]}.bin"
        cls.path = os.path.join(cls.srv.static_dir, cls.name)
        cls.sha = generate(cls.path, BIG)
        cls.url = f"{cls.srv.nginx_url}/{cls.name}"

    @classmethod
    def tearDownClass(cls):
        os.unlink(cls.path)
        super().tearDownClass()

    def piped(self, *args, reader_delay=1.5):
        """`fetchctl fetch ARGS | sha256sum`, the reader starting reader_delay s late:
        (fetchctl's exit, its peak RSS, the daemon's RSS growth, the digest, stderr)."""
        reader = subprocess.Popen(["sh", "-c", f"sleep {reader_delay}; exec sha256sum"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        sampler = Sampler(self.daemon.pid, self.daemon_base)
        try:
            p = subprocess.Popen(self.argv("fetch", *args), stdin=subprocess.DEVNULL, stdout=reader.stdin,
                                 stderr=subprocess.PIPE)
            reader.stdin.close()
            code, peak = wait_peak(p, 120)
            digest = reader.stdout.read().split()[0].decode()
            reader.wait(10)
        finally:
            growth = sampler.stop()
            if reader.poll() is None:
                reader.kill()
        return code, peak, growth, digest, p.stderr.read()

    def check(self, *args, daemon_max=DAEMON_MAX_GROWTH):
        code, peak, growth, digest, err = self.piped(*args)
        self.assertEqual(code, 0, err)
        self.assertEqual(digest, self.sha, "the body arrives whole and in order")
        self.assertLess(peak, CLIENT_MAX_RSS, f"fetchctl's peak RSS {peak / MiB:.1f} MiB")
        self.assertLess(growth, daemon_max, f"the daemon's RSS grew {growth / MiB:.1f} MiB")
        self.assertEqual(self.live_jobs(), [])

    def test_stdout_is_handed_to_the_daemon(self):
        self.check(self.url)

    def test_with_fail_the_body_streams_after_the_head(self):
        self.check("-f", "-o", "-", self.url, daemon_max=DAEMON_MAX_GROWTH_NOTIFIED)

    def test_write_out_after_the_streamed_body(self):
        r = subprocess.run(self.argv("fetch", "-s", self.url, "-o", "/dev/null", "-w", "%{http_code} %{size_download}"),
                           capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual((r.returncode, r.stdout), (0, f"200 {BIG}".encode()), r.stderr)

    def test_reader_gone_is_curls_23(self):
        for extra in ([], ["-f"]):
            with self.subTest(extra=extra):
                outs = {}
                for prog in (["curl"], self.argv("fetch")):
                    p = subprocess.Popen([*prog, "-s", *extra, self.url], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    first = p.stdout.read(1000)
                    p.stdout.close()  # the reader is gone
                    code = p.wait(60)
                    outs[prog[0]] = (code, len(first))
                self.assertEqual(outs[FETCHCTL], (23, 1000))
                self.assertEqual(outs["curl"], outs[FETCHCTL])
                wait_for(lambda: self.live_jobs() == [], timeout=5, message="the job outlived its reader")


class TestFailAndOutput(StreamCase):
    """-f, --fail-with-body, -o to a device and a closed stdout, as curl."""

    def both(self, *args):
        curl = subprocess.run(["curl", *args], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
        ours = self.ctl("fetch", *args)
        return curl, ours

    def test_fail_writes_nothing_of_an_error_body(self):
        for status in (404, 500):
            for flags in (["-f"], ["-sf"], ["--fail-with-body"], []):
                with self.subTest(status=status, flags=flags):
                    url = f"{self.srv.test_url}/status/{status}"
                    curl, ours = self.both(*flags, url, "-w", "[%{http_code}]")
                    self.assertEqual(ours.returncode, curl.returncode, ours.stderr)
                    self.assertEqual(ours.stdout, curl.stdout)
                    if flags in (["-f"], ["-sf"]):
                        self.assertEqual(ours.stdout, f"[{status}]".encode())

    def test_fail_with_a_success_streams_the_body(self):
        for flags in (["-f"], ["-fN"], ["--no-buffer"]):
            with self.subTest(flags=flags):
                curl, ours = self.both(*flags, f"{self.srv.test_url}/slow-body?chunks=5&ms=20")
                self.assertEqual((ours.returncode, ours.stdout), (0, b"x" * 5), ours.stderr)
                self.assertEqual(ours.stdout, curl.stdout)

    def test_redirect_not_followed_goes_to_stdout(self):
        url = f"{self.srv.test_url}/redirect/1"
        curl, ours = self.both(url, "-w", "%{http_code}")
        self.assertEqual((ours.returncode, ours.stdout), (curl.returncode, curl.stdout), ours.stderr)

    def test_output_to_a_fifo_streams(self):
        fifo = os.path.join(self.daemon.tmpdir, "fifo")
        os.mkfifo(fifo)
        try:
            got = []
            reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
            reader.start()
            r = self.ctl("fetch", f"{self.srv.test_url}/bytes/300000", "-o", fifo)
            reader.join(10)
            self.assertEqual(r.returncode, 0, r.stderr)
            with urllib.request.urlopen(f"{self.srv.test_url}/bytes/300000") as u:
                self.assertEqual(got, [u.read()])
        finally:
            os.unlink(fifo)

    def test_closed_stdout_is_curls_23(self):
        url = f"{self.srv.test_url}/json"
        for prog in (["curl", "-s"], self.argv("fetch", "-s")):
            with self.subTest(prog=prog[0]):
                r = subprocess.run([*prog, url], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   preexec_fn=lambda: os.close(1), timeout=30)
                self.assertEqual(r.returncode, 23, r.stderr)
        self.assertEqual(self.live_jobs(), [])


class TestBodyFromStdin(StreamCase):
    """-T - and --data-binary @- hand stdin to the daemon."""

    def echo(self, *args, input):
        r = self.ctl("fetch", "-s", *args, f"{self.srv.test_url}/echo", input=input)
        self.assertEqual(r.returncode, 0, r.stderr)
        e = json.loads(r.stdout)
        headers = {k.lower(): v for k, v in e["headers"]}
        return e, headers

    def test_upload_file_from_stdin_is_chunked_as_curl(self):
        data = os.urandom(200_000)
        e, h = self.echo("-T", "-", input=data)
        self.assertEqual((e["method"], e["bodySha256"]), ("PUT", hashlib.sha256(data).hexdigest()))
        self.assertEqual(h.get("transfer-encoding"), "chunked")
        self.assertNotIn("content-length", h)
        self.assertNotIn("content-type", h)  # curl -T sends none

    def test_data_binary_from_stdin(self):
        data = b"a=1&b=\x00\xff\n" * 1000
        # a pipe: sent as it comes (chunked)
        e, h = self.echo("--data-binary", "@-", input=data)
        self.assertEqual((e["method"], e["bodySha256"]), ("POST", hashlib.sha256(data).hexdigest()))
        self.assertEqual(h.get("content-type"), "application/x-www-form-urlencoded")
        self.assertEqual(h.get("transfer-encoding"), "chunked")
        # a file: its size is known, Content-Length as curl sends it
        path = os.path.join(self.daemon.tmpdir, "data.bin")
        with open(path, "wb") as f:
            f.write(data)
        with open(path, "rb") as f:
            r = subprocess.run(self.argv("fetch", "-s", "--data-binary", "@-", f"{self.srv.test_url}/echo"),
                               stdin=f, capture_output=True, timeout=30)
            c = subprocess.run(["curl", "-s", "--data-binary", "@-", f"{self.srv.test_url}/echo"],
                               stdin=open(path, "rb"), capture_output=True, timeout=30)
        ours, theirs = json.loads(r.stdout), json.loads(c.stdout)
        pick = lambda e: sorted([k.lower(), v] for k, v in e["headers"]
                                if k.lower() in ("content-length", "content-type", "transfer-encoding"))
        self.assertEqual(pick(ours), pick(theirs))
        self.assertEqual(ours["bodySha256"], theirs["bodySha256"])

    def test_d_at_stdin_strips_newlines_as_curl(self):
        # -d @- is not streamed: curl drops its CR and LF, so fetchctl reads it whole
        data = b"a=1\nb=2\r\n"
        e, h = self.echo("-d", "@-", input=data)
        self.assertEqual((e["body"], h.get("content-length")), ("a=1b=2", "6"))

    def test_large_stream_arrives_whole_with_bounded_memory(self):
        key = "stdin-" + uuid.uuid4().hex[:8]
        block = hashlib.shake_256(key.encode()).digest(MiB)
        digest = hashlib.sha256()
        p = subprocess.Popen(self.argv("fetch", "-s", "-T", "-", f"{self.srv.test_url}/flaky-body/{key}?fail=0"),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sampler = Sampler(self.daemon.pid, self.daemon_base)
        out = []

        def drain():
            out.append(p.stdout.read())

        drainer = threading.Thread(target=drain)
        drainer.start()
        try:
            for i in range(BIG // MiB):
                piece = block[i % 251:] + block[:i % 251]
                digest.update(piece)
                p.stdin.write(piece)
            p.stdin.close()
            code, peak = wait_peak(p, 120)
        finally:
            growth = sampler.stop()
            drainer.join(10)
        self.assertEqual(code, 0, p.stderr.read())
        self.assertEqual(self.get_json(f"/bodies/{key}")["bodies"],
                         [{"method": "PUT", "length": BIG, "sha256": digest.hexdigest()}])
        self.assertLess(peak, CLIENT_MAX_RSS, f"fetchctl's peak RSS {peak / MiB:.1f} MiB")
        self.assertLess(growth, DAEMON_MAX_GROWTH, f"the daemon's RSS grew {growth / MiB:.1f} MiB")


class TestEvents(StreamCase):
    """`fetchctl events URL`: each sseEvent as event:, id: and data: lines and a blank line."""

    @staticmethod
    def expected(numbers, two_lines=False):
        text = ""
        for n in numbers:
            text += f"event: tick\nid: {n}\ndata: event {n}\n"
            if two_lines:
                text += f"data: line 2 of {n}\n"
            text += "\n"
        return text.encode()

    def test_events_are_printed(self):
        key = uuid.uuid4().hex[:8]
        r = self.ctl("events", f"{self.srv.test_url}/sse/{key}?events=3&data=2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, self.expected([1, 2, 3], two_lines=True))

    def test_reconnects_where_it_left_off(self):
        key = uuid.uuid4().hex[:8]
        r = self.ctl("events", f"{self.srv.test_url}/sse/{key}?events=5&per=2&retry=50")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, self.expected([1, 2, 3, 4, 5]))
        seen = [q["lastEventId"] for q in self.get_json(f"/sse-log/{key}")["requests"]]
        self.assertEqual(seen[:3], [None, "2", "4"])

    def test_each_event_as_it_arrives(self):
        key = uuid.uuid4().hex[:8]
        p = subprocess.Popen(self.argv("events", f"{self.srv.test_url}/sse/{key}?events=3&ms=1500"),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            t0 = time.monotonic()
            first = p.stdout.read(len(self.expected([1])))
            self.assertEqual(first, self.expected([1]))
            self.assertLess(time.monotonic() - t0, 1.4, "the first event is printed before the second is sent")
            p.wait(10)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

    def test_error_status_exits_22(self):
        r = self.ctl("events", f"{self.srv.test_url}/status/404")
        self.assertEqual((r.returncode, r.stdout), (22, b""), r.stderr)

    def test_an_answer_that_is_no_event_stream_exits_1(self):
        r = self.ctl("events", f"{self.srv.test_url}/json")
        self.assertEqual((r.returncode, r.stdout), (1, b""), r.stderr)
        self.assertIn(b"not an event stream", r.stderr)

    def test_ctrl_c_cancels(self):
        key = uuid.uuid4().hex[:8]
        job = "events-" + key
        p = subprocess.Popen(self.argv("events", "--job-id", job, f"{self.srv.test_url}/sse/{key}?events=100&ms=200"),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            first = p.stdout.read(len(self.expected([1])))
            self.assertEqual(first, self.expected([1]))
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            code = p.wait(10)
            self.assertLess(time.monotonic() - t0, 1.0, "Ctrl-C exits at once")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(code, 5, p.stderr.read())
        wait_for(lambda: job not in self.live_jobs(), timeout=5, message="the events job outlived Ctrl-C")


class TestInterrupt(StreamCase):
    """Ctrl-C during a streamed fetch cancels the job and exits 5 at once, and the daemon lets
    go of fetchctl's stdout and stdin: their other ends see that."""

    def start(self, job, *args):
        reader = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        p = subprocess.Popen(self.argv("fetch", *args, "--job-id", job), stdin=subprocess.PIPE,
                             stdout=reader.stdin, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        reader.stdin.close()
        return p, reader

    def interrupt(self, job, p, reader):
        """Ctrl-C once the job runs; what the reader got after it."""
        try:
            wait_for(lambda: job in self.live_jobs(), timeout=10, message="the job never ran")
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            code = p.wait(10)
            took = time.monotonic() - t0
            rest = reader.stdout.read()  # it ends: nobody holds the pipe any more
            reader.wait(5)
        finally:
            for proc in (p, reader):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        self.assertEqual(code, 5, p.stderr.read())
        self.assertLess(took, 1.0, "Ctrl-C exits at once")
        wait_for(lambda: job not in self.live_jobs(), timeout=5, message="the job outlived Ctrl-C")
        return rest

    def test_ctrl_c_during_a_streamed_body(self):
        for flags in ([], ["-f"]):
            with self.subTest(flags=flags):
                job = "stream-int-" + uuid.uuid4().hex[:8]
                p, reader = self.start(job, *flags, f"{self.srv.test_url}/slow-body?chunks=100&ms=100")
                p.stdin.close()
                self.assertEqual(reader.stdout.read(1), b"x")
                rest = self.interrupt(job, p, reader)
                self.assertEqual(rest, b"x" * len(rest))
                self.assertLess(len(rest), 99)

    def test_ctrl_c_during_a_streamed_upload(self):
        job = "stream-int-" + uuid.uuid4().hex[:8]
        p, reader = self.start(job, "-T", "-", f"{self.srv.test_url}/echo")
        p.stdin.write(b"part of a body that never ends")
        p.stdin.flush()
        self.assertEqual(self.interrupt(job, p, reader), b"")

        def stdin_released():
            try:
                p.stdin.write(b"more")
                p.stdin.flush()
            except BrokenPipeError:
                return True
            return False

        wait_for(stdin_released, timeout=5, message="the daemon still holds fetchctl's stdin")


if __name__ == "__main__":
    unittest.main()
