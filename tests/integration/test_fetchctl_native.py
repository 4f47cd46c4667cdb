"""The compiled fetchctl (clients/fetchctl-src): the curl flags it adds, each run through real
curl and through `fetchctl fetch` against the same local servers (exit status, stdout, the
files written, what the server received), its cache mode, and Ctrl-C.

Runs $FETCHCTL, else clients/fetchctl once it is the compiled program, else
.build/fetchctl-c/fetchctl (`make fetchctl`); skipped when none is built."""
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest
import uuid

from harness import DaemonTestCase, big_bin, closed_port, compiled_fetchctl, wait_for, SMALL_TXT

FETCHCTL = compiled_fetchctl()


def files(d):
    """Every file below d (relative path -> bytes)."""
    found = {}
    for root, _, names in os.walk(d):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, d)] = f.read()
    return found


@unittest.skipUnless(FETCHCTL, "the compiled fetchctl is not built (make fetchctl)")
class NativeCase(DaemonTestCase):
    def ctl(self, *args, cwd=None, env=None, timeout=30):
        e = dict(os.environ)
        e.pop("FETCHD_SOCKET", None)
        e.update(env or {})
        return subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, *args], capture_output=True,
                              timeout=timeout, cwd=cwd, env=e, stdin=subprocess.DEVNULL)

    def both(self, *args, prepare=None, timeout=30):
        """curl and `fetchctl fetch` with the same arguments, each in a directory of its own
        (prepare(d) fills each first): (curl, fetchctl, curl's files, fetchctl's files)."""
        with tempfile.TemporaryDirectory() as dc, tempfile.TemporaryDirectory() as df:
            for d in (dc, df):
                if prepare:
                    prepare(d)
            curl = subprocess.run(["curl", *args], capture_output=True, timeout=timeout, cwd=dc,
                                  stdin=subprocess.DEVNULL)
            ours = self.ctl("fetch", *args, cwd=df, timeout=timeout)
            return curl, ours, files(dc), files(df)

    def same(self, *args, code, stdout=None, compare_files=True, prepare=None):
        curl, ours, fc, fo = self.both(*args, prepare=prepare)
        self.assertEqual(curl.returncode, code, f"curl {args}: {curl.stderr!r}")
        self.assertEqual(ours.returncode, code, f"fetchctl fetch {args}: {ours.stderr!r}")
        if stdout is not None:
            self.assertEqual(curl.stdout, stdout, args)
        self.assertEqual(ours.stdout, curl.stdout, args)
        if compare_files:
            self.assertEqual(fo, fc, args)
        return curl, ours, fc, fo


class TestOrder(NativeCase):
    def test_get_keeps_the_order_of_data(self):
        url = self.srv.test_url + "/echo"
        for args, want in ((["-G", "--data-urlencode", "q=a b", "-d", "x=1"], "q=a+b&x=1"),
                           (["-G", "-d", "x=1", "--data-urlencode", "q=a b", "-d", "y=2"], "x=1&q=a+b&y=2")):
            with self.subTest(args=args):
                curl, ours, _, _ = self.both("-s", *args, url)
                self.assertEqual((curl.returncode, ours.returncode), (0, 0), ours.stderr)
                self.assertEqual(json.loads(curl.stdout)["query"], want)
                self.assertEqual(json.loads(ours.stdout)["query"], want)
        curl, ours, _, _ = self.both("-s", "-d", "x=1", "--data-urlencode", "q=a b", url)
        self.assertEqual(json.loads(ours.stdout)["body"], json.loads(curl.stdout)["body"])
        self.assertEqual(json.loads(ours.stdout)["body"], "x=1&q=a+b")

    def parts(self, out):
        return json.loads(out)["parts"]

    def test_form_parts_in_command_line_order(self):
        url = self.srv.test_url + "/multipart-echo"

        def prepare(d):
            with open(os.path.join(d, "a.txt"), "w") as f:
                f.write("hello")
            with open(os.path.join(d, "b.json"), "w") as f:
                f.write('{"x": 1}')
        for form in (["-F", "file=@a.txt", "-F", "title=Q3"],
                     ["-F", "title=Q3", "-F", "file=@b.json", "-F", "f2=@a.txt;type=text/x;filename=n.bin"],
                     ["-F", "a=1", "-F", "a=2"],
                     ["-F", "a=<a.txt", "-F", "b=x", "-F", "c=@a.txt"]):
            with self.subTest(form=form):
                curl, ours, _, _ = self.both("-s", *form, url, prepare=prepare)
                self.assertEqual((curl.returncode, ours.returncode), (0, 0), ours.stderr)
                self.assertEqual(self.parts(ours.stdout), self.parts(curl.stdout))

    def test_large_form_in_order_leaves_no_temporary_file(self):
        # A field after a 5 MiB file: the body is written to a temporary file, then removed.
        url = self.srv.test_url + "/multipart-echo"
        big = os.path.join(self.srv.static_dir, "big.bin")
        with tempfile.TemporaryDirectory() as tmp:
            curl = subprocess.run(["curl", "-s", "-F", f"data=@{big}", "-F", "after=yes", url], capture_output=True, timeout=60)
            ours = self.ctl("fetch", "-s", "-F", f"data=@{big}", "-F", "after=yes", url, env={"TMPDIR": tmp}, timeout=60)
            self.assertEqual((curl.returncode, ours.returncode), (0, 0), ours.stderr)
            self.assertEqual(self.parts(ours.stdout), self.parts(curl.stdout))
            self.assertEqual(self.parts(ours.stdout)[0]["sha256"], hashlib.sha256(big_bin()).hexdigest())
            self.assertEqual(os.listdir(tmp), [])


class TestParallel(NativeCase):
    def test_files_and_exit_status_as_curl(self):
        t = self.srv.test_url
        self.same("-sZ", "-o", "a", "-o", "b", "-o", "c", t + "/bytes/3", t + "/bytes/5", self.srv.nginx_url + "/small.txt",
                  code=0)
        # the exit status is the last failure's (the slow one ends last)
        self.same("-sZ", "-f", "-o", "a", "-o", "b", t + "/status/404", t + "/slow-headers?ms=600", code=22)
        self.same("-sZ", "-f", "-m", "1", "-o", "a", "-o", "b", t + "/status/404", t + "/slow-headers?ms=3000", code=28)
        self.same("-sZ", "-o", "a", "-o", "b", t + "/status/200", f"http://127.0.0.1:{closed_port()}/", code=7)
        # one at a time: the bodies in order on stdout
        self.same("-sZ", "--parallel-max", "1", t + "/status/201", t + "/status/202", t + "/status/203", code=0,
                  stdout=b"status 201status 202status 203")

    def test_at_the_same_time(self):
        urls = [f"{self.srv.test_url}/slow-headers?ms=800&n={i}" for i in range(3)]
        t0 = time.monotonic()
        r = self.ctl("fetch", "-sZ", *urls)
        took = time.monotonic() - t0
        self.assertEqual((r.returncode, r.stdout), (0, b"slow" * 3), r.stderr)
        self.assertLess(took, 2.0, "three 0.8 s answers with -Z")
        t0 = time.monotonic()
        r = self.ctl("fetch", "-sZ", "--parallel-max", "1", *urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(time.monotonic() - t0, 2.4, "--parallel-max 1: one after the other")


class TestOutput(NativeCase):
    def test_output_dir(self):
        t, n = self.srv.test_url, self.srv.nginx_url
        self.same("-s", "--output-dir", "od", "--create-dirs", "-o", "x", t + "/bytes/3", code=0)
        self.same("-s", "--output-dir", "od", "--create-dirs", "-O", n + "/small.txt", code=0)
        self.same("-s", "--output-dir", "od", "-o", "x", t + "/bytes/3", code=23)
        _, _, fc, fo = self.same("-s", "--output-dir", "od", "--create-dirs", "-o", "a", "-o", "b", t + "/bytes/4",
                                 n + "/small.txt", code=0)
        self.assertEqual(sorted(fo), ["od/a", "od/b"])

    def test_remove_on_error(self):
        t = self.srv.test_url
        # a body cut short: curl removes what it wrote; fetchctl never lands it
        self.same("-s", "--remove-on-error", "-o", "out", t + "/reset-mid-body", code=56)

        def old(d):
            with open(os.path.join(d, "out"), "w") as f:
                f.write("old")
        # nothing was written: the file is left as it was
        self.same("-s", "-f", "--remove-on-error", "-o", "out", t + "/status/404", code=22, prepare=old)
        self.same("-s", "--remove-on-error", "-o", "out", f"http://127.0.0.1:{closed_port()}/", code=7, prepare=old)
        # without it, curl keeps the part it received, fetchctl the file as it was (no .part)
        curl, ours, fc, fo = self.both("-s", "-o", "out", t + "/reset-mid-body", prepare=old)
        self.assertEqual((curl.returncode, ours.returncode), (56, 56), ours.stderr)
        self.assertEqual(len(fc["out"]), 1000)
        self.assertEqual(fo, {"out": b"old"})

    def test_continue_at(self):
        t = self.srv.test_url

        def part(size):
            def prepare(d):
                with open(os.path.join(d, "f"), "wb") as f:
                    f.write(b"\0" * size)
            return prepare
        w = ["-w", "%{http_code} %{size_download}"]
        self.same("-s", "-C", "-", "-o", "f", *w, t + "/ranged/5000", code=0, stdout=b"206 4000", prepare=part(1000))
        self.same("-s", "-C", "-", "-o", "f", *w, t + "/ranged/5000", code=0, prepare=part(5000))
        self.same("-s", "-C", "-", "-o", "f", *w, t + "/ranged/5000?no-range=1", code=33, prepare=part(100))
        self.same("-s", "-f", "-C", "-", "-o", "f", t + "/status/404", code=22, prepare=part(100))
        self.same("-s", "-C", "-", "-i", "-o", "f", t + "/ranged/3000", code=0, prepare=part(1000))
        self.same("-s", "-C", "-", "-o", "f", t + "/ranged/300", code=0)
        r = self.ctl("fetch", "-C", "5", "-o", "f", t + "/ranged/300")
        self.assertEqual(r.returncode, 2, r.stderr)


class TestWriteOut(NativeCase):
    def test_redirect_url(self):
        t = self.srv.test_url
        for url in (t + "/redirect/1", t + "/redirect-to?url=../x/y%3Fz%3D1", t + "/redirect-to?url=//example.com/a",
                    t + "/redirect-to?url=http%3A%2F%2Fexample.com%2Fb", t + "/status/200"):
            with self.subTest(url=url):
                self.same("-s", "-o", "/dev/null", "-w", "[%{redirect_url}]", url, code=0)
        self.same("-sL", "-o", "/dev/null", "-w", "[%{redirect_url}] %{num_redirects}", t + "/redirect/2", code=0,
                  stdout=b"[] 2")
        curl, ours, _, _ = self.both("-s", "-o", "/dev/null", "-w", "%{json}", t + "/redirect/1")
        self.assertEqual(json.loads(ours.stdout)["redirect_url"], json.loads(curl.stdout)["redirect_url"])
        self.assertEqual(json.loads(ours.stdout)["redirect_url"], t + "/redirect/0")


class TestHelp(NativeCase):
    def test_fetch_help(self):
        everything = self.ctl("--help")
        r = self.ctl("fetch", "--help")
        self.assertEqual((r.returncode, r.stderr), (0, b""))
        self.assertEqual(r.stdout, everything.stdout)
        text = r.stdout.decode()
        for flag in ("-Z, --parallel", "--parallel-max", "--output-dir", "--remove-on-error", "-C, --continue-at",
                     "%{redirect_url}", "--cache MODE", "metrics"):
            self.assertIn(flag, text)
        self.assertIn("fetch does NOT follow them unless -L, as curl", " ".join(text.split()))


class TestRunsAlone(NativeCase):
    def test_no_helper_programs(self):
        # no jq, socat, bash or coreutils: an empty PATH changes nothing
        r = self.ctl("fetch", "-s", "-w", "%{http_code}", self.srv.nginx_url + "/small.txt", env={"PATH": ""})
        self.assertEqual((r.returncode, r.stdout), (0, SMALL_TXT.encode() + b"200"), r.stderr)
        self.assertEqual(self.ctl("ping", env={"PATH": ""}).stdout, b"pong\n")


class TestInterrupt(NativeCase):
    def start(self, *args, sigint=signal.SIG_DFL, cwd=None):
        return subprocess.Popen([FETCHCTL, "--socket", self.daemon.socket_path, "fetch", *args], cwd=cwd,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))

    def running(self, *jobs):
        live = {j["jobId"]: j["state"] for j in self.c.call("listJobs", {})["jobs"]}
        return all(live.get(j) == "running" for j in jobs)

    def interrupt(self, p, jobs):
        try:
            wait_for(lambda: self.running(*jobs), timeout=10, message="the jobs never ran")
            t0 = time.monotonic()
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=10)
            took = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 5, err)
        self.assertLess(took, 1.0, "Ctrl-C exits at once")
        for job in jobs:
            self.assertIn(f"cancelling job {job}".encode(), err)
        wait_for(lambda: not any(j["jobId"] in jobs for j in self.c.call("listJobs", {})["jobs"]), timeout=5,
                 message="a job is still live after Ctrl-C")
        return out, err

    def test_ctrl_c_cancels_and_leaves_nothing(self):
        job = "native-int-" + uuid.uuid4().hex[:8]
        with tempfile.TemporaryDirectory() as d:
            p = self.start(self.srv.test_url + "/slow-body?chunks=100&ms=100", "-o", "out.bin", "--job-id", job, cwd=d)
            out, _ = self.interrupt(p, [job])
            self.assertEqual(out, b"")
            self.assertEqual(os.listdir(d), [], "no file and no .part")

    def test_ctrl_c_cancels_every_parallel_job(self):
        job = "native-par-" + uuid.uuid4().hex[:8]
        url = self.srv.test_url + "/slow-body?chunks=100&ms=100"
        p = self.start("-Z", "-o", "/dev/null", "-o", "/dev/null", url, url, url, "--job-id", job)
        self.interrupt(p, [job, job + "-1", job + "-2"])

    def test_ignored_sigint_stays_ignored(self):
        # a background job of a script starts with SIGINT ignored: it runs on
        p = self.start(self.srv.test_url + "/slow-body?chunks=8&ms=100", sigint=signal.SIG_IGN)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        self.assertEqual((p.returncode, out), (0, b"x" * 8), err)


class TestCacheMode(NativeCase):
    """fetch asks the daemon's cache for no-cache (always current, as curl) unless --cache."""

    @classmethod
    def setUpClass(cls):
        cls.base = tempfile.mkdtemp(prefix="fetchd-ctl-cache-")
        cls.DAEMON_ARGS = ("--cache-dir", os.path.join(cls.base, "cache"))
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        import shutil
        super().tearDownClass()
        shutil.rmtree(cls.base, ignore_errors=True)

    def origin_count(self, name):
        import urllib.request
        with urllib.request.urlopen(f"{self.srv.test_url}/cache-origin-log/{name}", timeout=10) as r:
            return json.loads(r.read())["count"]

    def cache_of(self, *args):
        r = self.ctl("fetch", "-s", "--json-result", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout).get("cache")

    def test_no_cache_by_default(self):
        name = "ctl-" + uuid.uuid4().hex[:8]
        url = f"{self.srv.test_url}/cache-origin/{name}?cc=max-age%3D60"
        self.assertEqual(self.c.call("fetch", {"url": url})["status"], 200)   # stored
        self.assertEqual(self.origin_count(name), 1)
        self.cache_of(url)
        self.cache_of(url)
        self.assertEqual(self.origin_count(name), 3, "every fetch reached the origin")
        self.assertEqual(self.cache_of("--cache", "default", url), "hit")
        self.assertEqual(self.cache_of("--cache", "only-if-cached", url), "hit")
        self.assertEqual(self.origin_count(name), 3)
        r = self.ctl("fetch", "--cache", "sometimes", url)
        self.assertEqual(r.returncode, 2, r.stderr)


if __name__ == "__main__":
    unittest.main()
