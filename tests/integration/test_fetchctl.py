"""clients/fetchctl (C, on libfetchd) against the real daemon:
byte-exact bodies, curl-style options reaching the server as sent, exit codes, Ctrl-C cancel."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from foreign import IS_ROOT, NOBODY, ForeignListener, clean_env, fallback_daemon, run_as, spare_fallback, taken_fallback
from harness import FETCHCTL, Daemon, DaemonTestCase, big_bin, closed_port, header_values, wait_for, INDEX_HTML, SMALL_TXT


class FetchctlCase(DaemonTestCase):
    def ctl(self, *args, socket_path=None, env=None, timeout=30, stdin=subprocess.DEVNULL):
        """Run fetchctl with --socket; returns CompletedProcess with bytes stdout/stderr."""
        e = dict(os.environ)
        e.pop("FETCHD_SOCKET", None)
        if env:
            e.update(env)
        sock = self.daemon.socket_path if socket_path is None else socket_path
        cmd = [FETCHCTL] + (["--socket", sock] if sock else []) + list(args)
        try:
            return subprocess.run(cmd, capture_output=True, timeout=timeout, env=e, stdin=stdin)
        except subprocess.TimeoutExpired:
            self.fail(f"fetchctl {' '.join(args)} did not finish within {timeout}s")

    def ok(self, *args, **kw):
        r = self.ctl(*args, **kw)
        self.assertEqual(r.returncode, 0, f"fetchctl {args}: exit {r.returncode}, stderr: {r.stderr!r}")
        return r

    def echo(self, *args):
        r = self.ok("fetch", self.srv.test_url + "/echo", *args)
        return json.loads(r.stdout)


class TestFetchctlBody(FetchctlCase):
    def test_text_body_byte_exact(self):
        for name, want in (("index.html", INDEX_HTML.encode()), ("small.txt", SMALL_TXT.encode())):
            r = self.ok("fetch", f"{self.srv.nginx_url}/{name}")
            self.assertEqual(r.stdout, want, name)
            self.assertEqual(r.stderr, b"")

    def test_binary_body_byte_exact(self):
        r = self.ok("fetch", self.srv.nginx_url + "/big.bin")
        self.assertEqual(len(r.stdout), len(big_bin()))
        self.assertTrue(r.stdout == big_bin(), "big.bin differs")

    def test_no_trailing_newline_added(self):
        r = self.ok("fetch", self.srv.test_url + "/bytes/7")
        self.assertEqual(len(r.stdout), 7)

    def test_output_file(self):
        with tempfile.TemporaryDirectory() as d:
            for name, want in (("big.bin", big_bin()), ("small.txt", SMALL_TXT.encode())):
                out = os.path.join(d, name)
                r = self.ok("fetch", f"{self.srv.nginx_url}/{name}", "-o", out)
                self.assertEqual(r.stdout, b"")
                with open(out, "rb") as f:
                    self.assertTrue(f.read() == want, name)

    def test_json_result_shape(self):
        r = self.ok("fetch", self.srv.nginx_url + "/small.txt", "--json-result")
        res = json.loads(r.stdout)
        for k in ("jobId", "status", "url", "headers", "bytes", "attempts", "redirects", "elapsedMs"):
            self.assertIn(k, res, res)
        self.assertEqual(res["status"], 200)
        self.assertEqual(res.get("body"), SMALL_TXT, res)
        self.assertEqual(res["bytes"], len(SMALL_TXT))
        self.assertTrue(res["jobId"].startswith("fetchctl-"), res)

    def test_http_error_without_fail_prints_body(self):
        r = self.ctl("fetch", self.srv.test_url + "/status/404")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_fail_exit_22(self):
        r = self.ctl("fetch", self.srv.test_url + "/status/404", "--fail")
        self.assertEqual(r.returncode, 22, r.stderr)
        self.assertEqual(r.stdout, b"")
        self.assertIn(b"fetchctl: The requested URL returned error: 404", r.stderr)
        r = self.ctl("fetch", self.srv.test_url + "/status/503", "--fail", "--retry", "0")
        self.assertEqual(r.returncode, 22, r.stderr)
        r = self.ctl("fetch", self.srv.test_url + "/status/200", "--fail")
        self.assertEqual(r.returncode, 0, r.stderr)


class TestFetchctlRequest(FetchctlCase):
    def test_method_header_data(self):
        e = self.echo("-X", "PUT", "-H", "X-One: a b", "-H", "X-Two:c", "-d", "hello world")
        self.assertEqual(e["method"], "PUT")
        self.assertEqual(header_values(e, "X-One"), ["a b"])
        self.assertEqual(header_values(e, "X-Two"), ["c"])
        self.assertEqual(e["body"], "hello world")

    def test_data_defaults_to_post_and_joins(self):
        e = self.echo("-d", "a=1", "-d", "b=2")
        self.assertEqual(e["method"], "POST")
        self.assertEqual(e["body"], "a=1&b=2")

    def test_data_from_file(self):
        with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
            f.write(b"line one\nline two\n")
        try:
            e = self.echo("-d", "@" + f.name)
            self.assertEqual(e["body"], "line oneline two")  # curl strips newlines from -d @FILE
            e = self.echo("--data-binary", "@" + f.name)  # exact, streamed by the daemon
            self.assertEqual(e["body"], "line one\nline two\n")
        finally:
            os.unlink(f.name)

    def test_data_binary_relative_path(self):
        with tempfile.TemporaryDirectory() as d:
            data = bytes(range(256)) * 4
            with open(os.path.join(d, "blob.bin"), "wb") as f:
                f.write(data)
            r = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, "fetch",
                                self.srv.test_url + "/echo", "--data-binary", "@blob.bin"],
                               capture_output=True, cwd=d, timeout=30, stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 0, r.stderr)
            e = json.loads(r.stdout)
            self.assertEqual(e["bodyLength"], len(data))
            import base64
            self.assertEqual(base64.b64decode(e["bodyBase64"]), data)

    def test_json_body(self):
        e = self.echo("--json", '{"a": [1, 2, {"b": "\u00e9"}]}')
        self.assertEqual(e["method"], "POST")
        self.assertEqual(json.loads(e["body"]), {"a": [1, 2, {"b": "\u00e9"}]})
        self.assertTrue(header_values(e, "Content-Type")[0].startswith("application/json"), e["headers"])

    def test_get_moves_data_to_query(self):
        e = self.echo("-G", "-d", "a=1", "--data-urlencode", "q=x y&z")
        self.assertEqual(e["method"], "GET")
        self.assertEqual(e["query"], "a=1&q=x+y%26z")  # a space as '+', as curl 7.88 encodes it

    def test_special_characters_are_not_pasted(self):
        tricky = 'quote " backslash \\ newline\n tab\t brace } $(id) `id`'
        e = self.echo("-d", tricky, "-H", 'X-Tricky: a"b\\c')
        self.assertEqual(e["body"], tricky)
        self.assertEqual(header_values(e, "X-Tricky"), ['a"b\\c'])

    def test_comment_and_job_id_reach_the_daemon(self):
        r = self.ok("fetch", self.srv.test_url + "/bytes/3", "--job-id", "my-job-1", "--comment", "hi",
                    "--json-result")
        self.assertEqual(json.loads(r.stdout)["jobId"], "my-job-1")


class TestFetchctlCommands(FetchctlCase):
    def test_status(self):
        r = self.ok("status")
        self.assertIn(b"fetchd", r.stdout)
        self.assertIn(str(self.daemon.pid).encode(), r.stdout)
        r = self.ok("status", "--json")
        st = json.loads(r.stdout)
        self.assertEqual(st["pid"], self.daemon.pid)
        self.assertIn("jobs", st)

    def test_ping(self):
        self.assertEqual(self.ok("ping").stdout, b"pong\n")

    def test_call(self):
        self.assertEqual(json.loads(self.ok("call", "ping").stdout), "pong")
        st = json.loads(self.ok("call", "getStatus", "{}").stdout)
        self.assertEqual(st["pid"], self.daemon.pid)
        res = json.loads(self.ok("call", "fetch", json.dumps({"url": self.srv.nginx_url + "/small.txt"})).stdout)
        self.assertEqual(res["body"], SMALL_TXT)

    def test_call_error_exit_4(self):
        r = self.ctl("call", "noSuchMethod")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn(b"(code -32601)", r.stderr)
        r = self.ctl("call", "fetch", '{"url": "http://127.0.0.1/", "bogusField": 1}')
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn(b"(code -32602)", r.stderr)
        self.assertIn(b"bogusField", r.stderr)

    def test_jobs(self):
        r = self.ok("jobs", "--json")
        self.assertIn("jobs", json.loads(r.stdout))
        self.ok("jobs")

    def test_cancel_unknown_job(self):
        r = self.ctl("cancel", "no-such-job")
        self.assertEqual(r.returncode, 1, r.stderr)


class TestFetchctlErrors(FetchctlCase):
    def test_not_allowed_scheme_exit_4(self):
        r = self.ctl("fetch", "ftp://127.0.0.1/x")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertEqual(r.stdout, b"")
        self.assertIn(b"(code -32004)", r.stderr)
        self.assertTrue(r.stderr.startswith(b"fetchctl: "), r.stderr)

    def test_transport_error_shows_kind(self):
        from harness import closed_port
        r = self.ctl("fetch", f"http://127.0.0.1:{closed_port()}/", "--retry", "0")
        self.assertEqual(r.returncode, 7, r.stderr)  # curl's "could not connect"
        self.assertIn(b"(code -32001)", r.stderr)
        self.assertIn(b"connect", r.stderr)

    def test_usage_errors_exit_2(self):
        for args in (["fetch"], ["fetch", "http://a/", "--json", "{not json"], ["nosuchcommand"],
                     ["fetch", "http://a/", "--no-such-option"], ["fetch", "http://a/", "-H", "no colon"],
                     ["fetch", "http://a/", "--timeout", "soon"], ["call"], ["call", "ping", "{bad"],
                     ["fetch", "http://a/", "-d", "x", "--json", "{}"], ["cancel"], []):
            r = self.ctl(*args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr!r}")
            self.assertTrue(r.stderr.startswith(b"fetchctl: "), f"{args}: {r.stderr!r}")
        self.assertAlive()

    def test_help_and_version(self):
        r = self.ctl("--help", socket_path="")
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"fetch URL", r.stdout)
        r = self.ctl("--version", socket_path="")
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith(b"fetchctl "), r.stdout)

    def test_no_daemon_exit_3(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "none.sock")
            for args in (["status"], ["fetch", self.srv.nginx_url + "/small.txt"], ["call", "ping"]):
                r = self.ctl(*args, socket_path=path)
                self.assertEqual(r.returncode, 3, r.stderr)
                self.assertEqual(r.stdout, b"")
                self.assertEqual(r.stderr.decode(),
                                 f"fetchctl: cannot reach fetchd at {path}: is it running? "
                                 f"(start it with 'make run')\n")

    def test_stale_socket_exit_3(self):
        import socket
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "stale.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.close()  # a socket file nobody listens on
            r = self.ctl("ping", socket_path=path)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn(b"cannot reach fetchd at", r.stderr)


class TestFetchctlSocketPath(FetchctlCase):
    def test_env_rules(self):
        # $FETCHD_SOCKET is used without --socket
        r = self.ctl("ping", socket_path="", env={"FETCHD_SOCKET": self.daemon.socket_path})
        self.assertEqual(r.returncode, 0, r.stderr)
        # --socket wins over $FETCHD_SOCKET
        r = self.ctl("ping", env={"FETCHD_SOCKET": "/nonexistent/x.sock"})
        self.assertEqual(r.returncode, 0, r.stderr)
        # $XDG_RUNTIME_DIR/fetchd.sock, then /tmp/fetchd-<uid>.sock
        with tempfile.TemporaryDirectory() as d:
            r = self.ctl("ping", socket_path="", env={"FETCHD_SOCKET": "", "XDG_RUNTIME_DIR": d})
            self.assertEqual(r.returncode, 3)
            self.assertIn(os.path.join(d, "fetchd.sock").encode(), r.stderr)
            os.symlink(self.daemon.socket_path, os.path.join(d, "fetchd.sock"))
            r = self.ctl("ping", socket_path="", env={"FETCHD_SOCKET": "", "XDG_RUNTIME_DIR": d})
            self.assertEqual(r.returncode, 0, r.stderr)
        env = {k: "" for k in ("FETCHD_SOCKET", "XDG_RUNTIME_DIR")}
        r = self.ctl("ping", socket_path="", env=env)
        if r.returncode == 3:
            self.assertIn(f"/tmp/fetchd-{os.getuid()}/fetchd.sock".encode(), r.stderr)


@unittest.skipUnless(IS_ROOT, "needs root to run listeners and fetchctl as other uids")
class TestFetchctlSocketOwner(unittest.TestCase):
    """fetchctl sends nothing to a socket of another user. Before it connects, it checks the
    path: the socket and every directory on it must be this user's or root's, and no directory
    writable by others unless it is sticky; after, libfetchd checks the peer (SO_PEERCRED)."""

    SECRET = ["fetch", "http://127.0.0.1:1/", "-H", "Authorization: Bearer secret-token"]

    def ctl(self, uid, *args, env=None):
        return run_as(uid, [FETCHCTL, *args], env=env or clean_env(), timeout=30)

    def directory(self, mode=0o755, owner=0):
        d = tempfile.mkdtemp(prefix="fetchd-owner-")
        self.addCleanup(shutil.rmtree, d, True)
        os.chown(d, owner, owner)
        os.chmod(d, mode)
        return d

    def assert_refused(self, r, fake, *words):
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 3, err)
        self.assertIn("refusing fetchd at", err)
        for w in words:
            self.assertIn(w, err)
        self.assertIn("nothing was sent", err)
        self.assertEqual(fake.received, {"accepted": 0, "bytes": 0}, "fetchctl connected to it")

    def test_socket_of_another_user_refused(self):
        path = os.path.join(self.directory(), "fetchd.sock")
        with ForeignListener(path, uid=NOBODY) as fake:
            r = self.ctl(0, "--socket", path, *self.SECRET)
        self.assert_refused(r, fake, path, f"the socket is owned by uid {NOBODY}, not by this user (uid 0)")

    def test_symbolic_link_to_another_users_socket_refused(self):
        path = os.path.join(self.directory(), "fetchd.sock")
        link = os.path.join(self.directory(), "link.sock")
        os.symlink(path, link)
        with ForeignListener(path, uid=NOBODY) as fake:
            r = self.ctl(0, "--socket", link, *self.SECRET)
        self.assert_refused(r, fake, link, f"owned by uid {NOBODY}")

    def test_default_path_taken_by_another_user(self):
        uid = spare_fallback(self)
        with taken_fallback(uid) as fake:
            r = self.ctl(uid, *self.SECRET)
        self.assert_refused(r, fake, f"/tmp/fetchd-{uid}/fetchd.sock",
                            f"its directory /tmp/fetchd-{uid} is owned by uid {NOBODY}, not by this user (uid {uid})")

    def test_directory_others_may_write_refused_unless_sticky(self):
        for mode, refused in ((0o777, True), (0o775, True), (0o1777, False)):
            with self.subTest(mode=oct(mode)):
                path = os.path.join(self.directory(mode=mode), "fetchd.sock")
                with ForeignListener(path, uid=0) as fake:   # root's: only the path is wrong
                    r = self.ctl(0, "--socket", path, "ping")
                if refused:
                    self.assert_refused(r, fake, f"writable by group or others (mode {mode:o}, not sticky)")
                else:
                    self.assertEqual((r.returncode, r.stdout), (0, b"pong\n"), r.stderr)
                    self.assertGreater(fake.received["bytes"], 0)

    def test_non_root_fetchctl_trusts_root(self):
        path = os.path.join(self.directory(), "fetchd.sock")
        with ForeignListener(path, uid=0) as fake:
            r = self.ctl(NOBODY, "--socket", path, "ping")
        self.assertEqual((r.returncode, r.stdout), (0, b"pong\n"), r.stderr)
        self.assertGreater(fake.received["bytes"], 0)

    def test_own_daemon_on_the_default_path(self):
        uid = spare_fallback(self)
        with fallback_daemon(uid):
            r = self.ctl(uid, "ping")
        self.assertEqual((r.returncode, r.stdout), (0, b"pong\n"), r.stderr)


class TestFetchctlProgressAndCancel(FetchctlCase):
    def start_slow_fetch(self, job):
        """fetchctl fetching a 10 s body as `job`, in the background."""
        # A shell cannot trap a signal that was ignored when it started, and a test run
        # launched in the background (as `cmd &` from a script) inherits SIGINT ignored:
        # give fetchctl the default disposition, as a terminal would.
        return subprocess.Popen([FETCHCTL, "--socket", self.daemon.socket_path, "fetch",
                                 self.srv.test_url + "/slow-body?chunks=100&ms=100", "--job-id", job],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def test_progress_bar_on_stderr(self):
        r = self.ok("fetch", self.srv.test_url + "/slow-body?chunks=5&ms=50", "--progress")
        self.assertEqual(len(r.stdout), 5)
        self.assertIn(b"100%", r.stderr)
        self.assertIn(b"\r", r.stderr)

    def test_ctrl_c_cancels_the_job(self):
        job = f"ctl-cancel-{os.getpid()}"
        p = self.start_slow_fetch(job)
        try:
            with self.daemon.client() as c:
                wait_for(lambda: any(j.get("jobId") == job and j.get("state") == "running"
                                     for j in c.call("listJobs", {})["jobs"]),
                         timeout=10, message="the fetch never showed up running in listJobs")
                t0 = time.monotonic()
                p.send_signal(signal.SIGINT)
                out, err = p.communicate(timeout=10)
                self.assertEqual(p.returncode, 5, err)
                self.assertLess(time.monotonic() - t0, 4.0)
                # the body streams to stdout: what arrived before Ctrl-C is there, as with curl
                self.assertEqual(out, b"x" * len(out))
                self.assertLess(len(out), 100)
                self.assertIn(b"cancel", err)
                wait_for(lambda: not any(j.get("jobId") == job for j in c.call("listJobs", {})["jobs"]),
                         timeout=5, message="the job is still listed after Ctrl-C")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

    def test_cancel_command(self):
        job = f"ctl-cancel-cmd-{os.getpid()}"
        p = self.start_slow_fetch(job)
        try:
            with self.daemon.client() as c:
                wait_for(lambda: any(j.get("jobId") == job for j in c.call("listJobs", {})["jobs"]),
                         timeout=10, message="the fetch never showed up in listJobs")
            r = self.ok("cancel", job)
            self.assertIn(job.encode(), r.stdout)
            out, err = p.communicate(timeout=10)
            self.assertEqual(p.returncode, 5, err)
            self.assertIn(b"cancelled by cancel", err)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


if __name__ == "__main__":
    unittest.main()


class TestFetchctlDownloadUpload(FetchctlCase):
    def test_download_with_sha256_and_resume_flag(self):
        import hashlib
        want = big_bin()
        digest = hashlib.sha256(want).hexdigest()
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "big.bin")
            self.ok("download", self.srv.nginx_url + "/big.bin", "-o", out, "-C", "-", "--sha256", digest)
            with open(out, "rb") as f:
                self.assertTrue(f.read() == want, "downloaded file differs")
            self.assertFalse(os.path.exists(out + ".part"))
            # An existing file is refused without --overwrite (JSON-RPC error: exit 4).
            r = self.ctl("download", self.srv.nginx_url + "/big.bin", "-o", out)
            self.assertEqual(r.returncode, 4, r.stderr)
            # A wrong digest leaves nothing behind.
            bad = os.path.join(d, "bad.bin")
            r = self.ctl("download", self.srv.nginx_url + "/big.bin", "-o", bad, "--sha256", "0" * 64)
            self.assertEqual(r.returncode, 4, r.stderr)
            self.assertFalse(os.path.exists(bad) or os.path.exists(bad + ".part"))

    def test_continue_at_takes_only_dash(self):
        r = self.ctl("download", self.srv.nginx_url + "/big.bin", "-o", "/tmp/x.bin", "-C", "100")
        self.assertEqual(r.returncode, 2)

    def test_upload_file_and_field(self):
        import hashlib
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "report.json")
            data = b'{"rows": [1, 2, 3]}'
            with open(path, "wb") as f:
                f.write(data)
            r = self.ok("upload", self.srv.test_url + "/multipart-echo", "-F", f"file=@{path}", "-F", "title=Q3")
            parts = {p["name"]: p for p in json.loads(r.stdout)["parts"]}
            self.assertEqual(parts["file"]["filename"], "report.json")
            self.assertEqual(parts["file"]["contentType"], "application/json")
            self.assertEqual(parts["file"]["sha256"], hashlib.sha256(data).hexdigest())
            self.assertEqual(parts["title"]["size"], 2)


class TestFetchctlAsCurl(FetchctlCase):
    """The same command line through curl and through `fetchctl fetch`, against
    the same local server: the same exit status and the same output."""

    def both(self, *args, timeout=30, cwd=None):
        """(curl, fetchctl, fetchctl's seconds) for one command line."""
        curl = subprocess.run(["curl", *args], capture_output=True, timeout=timeout, cwd=cwd)
        t0 = time.monotonic()
        e = dict(os.environ)
        e.pop("FETCHD_SOCKET", None)
        ours = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, "fetch", *args],
                              capture_output=True, timeout=timeout, cwd=cwd, env=e)
        return curl, ours, time.monotonic() - t0

    def same(self, *args, code, stdout=None, quiet=None, **kw):
        curl, ours, took = self.both(*args, **kw)
        self.assertEqual(curl.returncode, code, f"curl {args}: {curl.stderr!r}")
        self.assertEqual(ours.returncode, code, f"fetchctl fetch {args}: {ours.stderr!r}")
        if stdout is not None:
            self.assertEqual(curl.stdout, stdout)
        self.assertEqual(ours.stdout, curl.stdout)
        if quiet is not None:
            self.assertEqual(curl.stderr == b"", quiet, curl.stderr)
            self.assertEqual(ours.stderr == b"", quiet, ours.stderr)
        return curl, ours, took

    def test_max_time_is_the_whole_command(self):
        _, _, took = self.same("-s", "-m", "1", self.srv.test_url + "/slow-headers?ms=4000", code=28, stdout=b"")
        self.assertLess(took, 2.5)

    def test_refused_connection_answered_at_once(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        _, _, took = self.same("-s", f"http://127.0.0.1:{port}/", code=7, stdout=b"", quiet=True)
        self.assertLess(took, 2.0)

    def test_combined_short_flags_and_fail_quiet(self):
        url = self.srv.test_url + "/status/404"
        self.same("-fsSL", url, code=22, stdout=b"", quiet=False)
        self.same("-sSf", url, code=22, stdout=b"", quiet=False)
        self.same("-fs", url, code=22, stdout=b"", quiet=True)
        self.same("-sL", self.srv.nginx_url + "/small.txt", code=0, stdout=SMALL_TXT.encode(), quiet=True)

    def test_output_dash_is_stdout(self):
        with tempfile.TemporaryDirectory() as d:
            self.same("-s", "-o", "-", self.srv.nginx_url + "/small.txt", code=0, stdout=SMALL_TXT.encode(), cwd=d)
            self.same("-so-", self.srv.nginx_url + "/small.txt", code=0, stdout=SMALL_TXT.encode(), cwd=d)
            self.assertEqual(os.listdir(d), [])

    def sent_headers(self, out):
        return {k.lower(): v for k, v in json.loads(out)["headers"]}

    def test_header_removed_emptied_and_from_file(self):
        url = self.srv.test_url + "/echo"
        curl, ours, _ = self.both("-s", "-H", "Accept:", "-H", "X-Empty;", url)
        for r in (curl, ours):
            self.assertEqual(r.returncode, 0, r.stderr)
            h = self.sent_headers(r.stdout)
            self.assertNotIn("accept", h)
            self.assertEqual(h.get("x-empty"), "")
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "headers.txt")
            with open(f, "w") as out:
                out.write("X-One: 1\r\nX-Two: two words\n\nAccept:\n")
            curl, ours, _ = self.both("-s", "-H", "@" + f, url)
            for r in (curl, ours):
                self.assertEqual(r.returncode, 0, r.stderr)
                h = self.sent_headers(r.stdout)
                self.assertEqual((h.get("x-one"), h.get("x-two")), ("1", "two words"))
                self.assertNotIn("accept", h)

    def test_exit_codes_of_common_failures(self):
        t = self.srv.test_url
        port = t.rsplit(":", 1)[1]
        self.same("-s", "http://no-such-host.invalid/", code=6, stdout=b"", quiet=True)
        self.same("-s", f"https://127.0.0.1:{port}/", code=35, stdout=b"", quiet=True)
        self.same("-s", "-L", "--max-redirs", "2", t + "/redirect-loop", code=47, stdout=b"", quiet=True)
        self.same("-s", "-o", "/dev/null", t + "/reset-mid-body", code=56, quiet=True)
        self.same("-s", self.srv.nginx_tls_url + "/small.txt", code=60, stdout=b"", quiet=True)
        self.same("-s", "-f", t + "/status/500", code=22, stdout=b"", quiet=True)

    def test_empty_reply_is_52(self):
        import socket
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def serve():  # read the request, close without a byte of answer
            for _ in range(2):
                c, _ = listener.accept()
                c.recv(65536)
                c.close()
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            self.same("-s", f"http://127.0.0.1:{listener.getsockname()[1]}/", code=52, stdout=b"", quiet=True)
        finally:
            t.join(5)
            listener.close()

    def test_output_file_streams_a_large_body(self):
        # 80 MB: past fetch's in-memory limit (64 MiB), so -o FILE must stream (a download).
        name = "rw-80mb.bin"
        src = os.path.join(self.srv.static_dir, name)
        with open(src, "wb") as f:
            for i in range(80):
                f.write(bytes([i]) * 1_000_000)
        try:
            with tempfile.TemporaryDirectory() as d:
                a, b = os.path.join(d, "curl.bin"), os.path.join(d, "ours.bin")
                with open(b, "wb") as f:
                    f.write(b"old content, longer than nothing" * 10)  # overwritten, as curl does
                curl = subprocess.run(["curl", "-sS", "-o", a, f"{self.srv.nginx_url}/{name}"], capture_output=True)
                ours = self.ctl("fetch", "-sS", "-o", b, f"{self.srv.nginx_url}/{name}", timeout=120)
                self.assertEqual((curl.returncode, ours.returncode, ours.stdout, ours.stderr), (0, 0, b"", b""), ours.stderr)
                self.assertEqual(os.path.getsize(b), 80_000_000)
                self.assertEqual(hashlib.sha256(open(a, "rb").read()).hexdigest(),
                                 hashlib.sha256(open(b, "rb").read()).hexdigest())
                # fetch's own body limit does not apply to a body streamed to a file.
                ours = self.ctl("fetch", "-sS", "--max-body-bytes", "1000", "-o", b, f"{self.srv.nginx_url}/small.txt")
                self.assertEqual((ours.returncode, open(b, "rb").read()), (0, SMALL_TXT.encode()), ours.stderr)
        finally:
            os.unlink(src)

    def cookie_lines(self, path):
        with open(path) as f:
            return sorted(line.rstrip("\n") for line in f if line.strip() and not line.startswith("# "))

    def test_cookie_files_as_curl(self):
        from urllib.parse import quote
        t = self.srv.test_url
        setter = t + "/set-cookie?raw=" + quote("a=1; Path=/") + "&raw=" + quote("z=2; Path=/; HttpOnly") \
            + "&raw=" + quote("long=3; Path=/; Expires=Wed, 01 Jan 2070 00:00:00 GMT")
        with tempfile.TemporaryDirectory() as d:
            jc, jo = os.path.join(d, "curl.txt"), os.path.join(d, "ours.txt")
            curl = subprocess.run(["curl", "-s", "-c", jc, setter], capture_output=True)
            ours = self.ctl("fetch", "-s", "-c", jo, setter)
            self.assertEqual((curl.returncode, ours.returncode), (0, 0), ours.stderr)
            self.assertEqual(ours.stdout, curl.stdout)
            self.assertEqual(self.cookie_lines(jo), self.cookie_lines(jc))
            self.assertEqual(len(self.cookie_lines(jo)), 3)
            # Each reads the other's file back.
            for jar in (jc, jo):
                curl = subprocess.run(["curl", "-s", "-b", jar, t + "/cookies"], capture_output=True)
                ours = self.ctl("fetch", "-s", "-b", jar, t + "/cookies")
                self.assertEqual(ours.returncode, 0, ours.stderr)
                got = sorted(json.loads(ours.stdout)["cookie"].split("; "))
                self.assertEqual(got, sorted(json.loads(curl.stdout)["cookie"].split("; ")))
                self.assertEqual(got, ["a=1", "long=3", "z=2"])
            # The order curl sends its own file's cookies in (RFC 6265 5.4: earlier created first).
            curl = subprocess.run(["curl", "-s", "-b", jc, t + "/cookies"], capture_output=True)
            ours = self.ctl("fetch", "-s", "-b", jc, t + "/cookies")
            self.assertEqual(json.loads(ours.stdout)["cookie"], json.loads(curl.stdout)["cookie"])
            # Cookie data, and no jar at all by default (curl keeps none between runs).
            ours = self.ctl("fetch", "-s", "-b", "x=9", t + "/cookies")
            self.assertEqual(json.loads(ours.stdout)["cookie"], "x=9")
            self.ctl("fetch", "-s", setter)
            ours = self.ctl("fetch", "-s", t + "/cookies")
            self.assertIsNone(json.loads(ours.stdout)["cookie"])
            jars = self.c.call("getCookies", {})["cookies"]
            self.assertEqual([c for c in jars if c["name"] in ("a", "z", "long")], [])

    def test_write_out(self):
        t = self.srv.test_url
        self.same("-s", "-o", "/dev/null", "-w", "%{http_code}\\n", t + "/status/404", code=0, stdout=b"404\n")
        self.same("-sL", "-w", "[%{http_code} %{num_redirects} %{remote_ip} %{content_type} %{size_download}]",
                  t + "/redirect-to?url=/status/201", code=0)
        self.same("-s", "-o", "/dev/null", "-w", "%{http_code} %{exitcode}", f"http://127.0.0.1:{closed_port()}/",
                  code=7, stdout=b"000 7")
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "out.bin")
            self.same("-s", "-o", f, "-w", "%{http_code} %{size_download} %{url_effective}", self.srv.nginx_url + "/small.txt",
                      code=0)
        curl, ours, _ = self.both("-s", "-o", "/dev/null", "-w", "%{time_total} %{time_starttransfer}", t + "/status/200")
        for r in (curl, ours):
            total, first = (float(x) for x in r.stdout.split())
            self.assertTrue(0 < first <= total < 5, r.stdout)

    def test_tls_and_routing_flags(self):
        tls = self.srv.nginx_tls_url
        self.same("-sk", tls + "/small.txt", code=0, stdout=SMALL_TXT.encode())
        self.same("-s", "--cacert", self.srv.ca_file, tls + "/small.txt", code=0, stdout=SMALL_TXT.encode())
        self.same("-s", "--cacert", self.srv.ca_file, "--http1.1", tls + "/proto", code=0, stdout=b"HTTP/1.1")
        self.same("-s", "--cacert", self.srv.ca_file, "--http2", tls + "/proto", code=0, stdout=b"HTTP/2.0")
        self.same("-s", "-r", "10-19", self.srv.nginx_url + "/big.bin", code=0, stdout=big_bin()[10:20])
        self.same("-s", "-r10-", self.srv.nginx_url + "/small.txt", code=0, stdout=SMALL_TXT.encode()[10:])
        port = self.srv.test_url.rsplit(":", 1)[1]
        curl, ours, _ = self.both("-s", "--resolve", f"fetchd-ctl.invalid:{port}:127.0.0.1",
                                  f"http://fetchd-ctl.invalid:{port}/echo")
        for r in (curl, ours):
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.sent_headers(r.stdout)["host"], f"fetchd-ctl.invalid:{port}")

    def test_unix_socket_flag(self):
        from test_realworld import unix_http_server
        with tempfile.TemporaryDirectory() as d, unix_http_server(d) as path:
            self.same("-s", "--unix-socket", path, "http://docker.invalid/info", code=0,
                      stdout=b'{"path": "/info", "host": "docker.invalid"}')

    def test_data_is_a_form(self):
        url = self.srv.test_url + "/echo"
        curl, ours, _ = self.both("-s", "-d", "a=1&b=two", url)
        for r in (curl, ours):
            self.assertEqual(r.returncode, 0, r.stderr)
            echo = json.loads(r.stdout)
            self.assertEqual((echo["method"], echo["body"]), ("POST", "a=1&b=two"))
            self.assertEqual(self.sent_headers(r.stdout)["content-type"], "application/x-www-form-urlencoded")
        curl, ours, _ = self.both("-s", "-d", "x", "-H", "Content-Type: text/csv", url)
        self.assertEqual(self.sent_headers(ours.stdout)["content-type"], self.sent_headers(curl.stdout)["content-type"])

    def test_limit_rate(self):
        # 2 MB at 400K: the same output; at least about 4 s through fetchctl (a lower bound only).
        for tool in ("curl", "fetchctl"):
            t0 = time.monotonic()
            cmd = ["curl"] if tool == "curl" else [FETCHCTL, "--socket", self.daemon.socket_path, "fetch"]
            r = subprocess.run(cmd + ["-s", "--limit-rate", "400K", "-o", "/dev/null", "-w", "%{size_download}",
                                      self.srv.test_url + "/bytes/2000000"], capture_output=True, timeout=60)
            self.assertEqual((r.returncode, r.stdout), (0, b"2000000"), (tool, r.stderr))
            if tool == "fetchctl":  # curl 7.88 on loopback may let such a body through at once
                self.assertGreater(time.monotonic() - t0, 2.0, tool)


class TestFetchctlCurlTable(FetchctlCase):
    """A table of curl's flags: each one fetchctl takes, run through real curl and through
    `fetchctl fetch` against the same local server, comparing the exit status, what was
    printed (stdout; stderr only as quiet or not), what the server received (the echo
    endpoint's view of the request) and the files written. {t} is the test server, {n}
    nginx, {tls} nginx over TLS, {ca} its CA, {d} a directory of input files."""

    # (flags, what to compare besides the exit status: "out" stdout, "echo" the request
    # the server saw, "quiet" whether stderr is empty, "files" the files written in cwd)
    ROWS = [
        (["-s", "{t}/status/201"], "out quiet"),
        (["-d", "a=1&b=two", "-s", "{t}/echo"], "echo"),
        (["-s", "-d", "@{d}/form.txt", "{t}/echo"], "echo"),
        (["-s", "--data-binary", "@{d}/form.txt", "{t}/echo"], "echo"),
        (["-s", "--data-urlencode", "q=a b&c", "{t}/echo"], "echo"),
        (["-s", "--json", '{"a":1}', "{t}/echo"], "echo"),
        (["-s", "-G", "-d", "a=1", "-d", "b=2", "{t}/echo"], "echo"),
        (["-s", "-X", "DELETE", "{t}/echo"], "echo"),
        (["-s", "-H", "X-A: 1", "-H", "Accept:", "-H", "X-Empty;", "{t}/echo"], "echo"),
        (["-s", "-H", "@{d}/headers.txt", "{t}/echo"], "echo"),
        (["-s", "-u", "ann:pw", "-A", "agent/1", "-e", "http://ref.example/", "{t}/echo"], "echo"),
        (["-s", "-b", "x=1; y=2", "{t}/echo"], "echo"),
        (["-s", "-T", "{d}/form.txt", "{t}/echo/"], "echo"),
        (["-s", "-T", "{d}/form.txt", "{t}/echo/named"], "echo"),
        (["-s", "-i", "{t}/status/201"], "out"),
        (["-s", "-i", "-L", "{t}/redirect/2"], "out"),
        (["-s", "-I", "{t}/status/200"], "out"),
        (["-sI", "{n}/small.txt"], "out"),
        (["-s", "-D", "-", "-o", "/dev/null", "{t}/status/200"], "out"),
        (["-s", "-D", "headers.out", "{t}/status/200"], "out files"),
        (["-s", "-D", "headers.out", "{t}/status/201", "-I", "{t}/status/202"], "out files"),
        (["-s", "-I", "-o", "head.out", "{t}/status/200"], "out files"),
        (["-s", "-o", "body.out", "{n}/small.txt"], "out files"),
        (["-s", "-o", "error.out", "-w", "%{filename_effective}", "{t}/status/404"], "out files"),
        (["-s", "-O", "{n}/small.txt"], "out files"),
        (["-s", "--create-dirs", "-o", "a/b/c.txt", "{n}/small.txt"], "out files"),
        (["-s", "-O", "{t}/"], "out files quiet"),
        (["-s", "-o", "one.out", "-o", "two.out", "{t}/status/201", "{t}/status/202", "{t}/status/203"], "out files"),
        (["-s", "-O", "{n}/small.txt", "{t}/status/202"], "out files"),
        (["-s", "{t}/status/200", f"http://127.0.0.1:{closed_port()}/"], "out quiet"),
        (["-s", f"http://127.0.0.1:{closed_port()}/", "{t}/status/200"], "out quiet"),
        (["-s", "-f", "{t}/status/404"], "out quiet"),
        (["-sS", "-f", "{t}/status/404"], "out"),
        (["-s", "-f", "-i", "{t}/status/404"], "out"),
        (["-s", "--fail-with-body", "{t}/status/404"], "out quiet"),
        (["-s", "-w", "%{http_code} %{response_code} %{num_redirects} %{size_download} %{content_type}\\n", "-L", "{t}/redirect/1"], "out"),
        (["-s", "-o", "/dev/null", "-w", "%{url_effective} %{remote_ip} %{exitcode} [%{errormsg}] %{size_upload}", "-d", "abc", "{t}/echo"], "out"),
        (["-s", "-o", "/dev/null", "-w", "%{http_code} %{exitcode} %{errormsg}", "-f", "{t}/status/500"], "out"),
        (["-s", "-o", "/dev/null", "-w", "%{header_json}", "{t}/headers-multi"], "out"),
        (["-s", "-w", "%{http_version} %{method} %{scheme}", "-o", "/dev/null", "-I", "{t}/status/200"], "out"),
        (["-sk", "{tls}/small.txt"], "out"),
        (["-s", "--compressed", "{t}/gzip"], "out"),
        (["-s", "--cacert", "{ca}", "--http1.1", "{tls}/proto"], "out"),
        (["-s", "-r", "0-9", "{n}/small.txt"], "out"),
        (["-s", "--max-redirs", "1", "-L", "{t}/redirect/3"], "out quiet"),
        # curl's default: without -L the redirect itself is the answer.
        (["-s", "-w", "[%{http_code} %{num_redirects}]", "{t}/redirect/1"], "out"),
        (["-s", "-o", "/dev/null", "-w", "%{http_code}", "{t}/redirect-to?url=/status/201"], "out"),
        (["-s", "-m", "1", "{t}/slow-headers?ms=3000"], "out quiet"),
        # (curl writes the body of every attempt, fetchctl only the last answer's; curl 7.88
        # cannot retry into -o /dev/null, exit 23: -o FILE here)
        (["-s", "--retry", "2", "--retry-delay", "0", "{t}/flaky/{key}?fail=2", "-o", "r.out", "-w", "%{http_code}"], "out files"),
        (["-s", "--retry", "1", "--retry-delay", "0", "{t}/flaky/{key}?fail=2", "-o", "r.out", "-w", "%{http_code}"], "out"),
        (["-s", "--retry", "1", "--retry-delay", "0", "--retry-all-errors", "-f", "{t}/flaky/{key}?fail=1&status=404"], "out"),
        (["-s", "--retry", "3", "--retry-max-time", "1", "--retry-delay", "2", "{t}/flaky/{key}?fail=3", "-o", "r.out",
          "-w", "%{http_code}"], "out"),
        (["-s", "-K", "{d}/config.txt"], "echo"),
        (["-s", "-T", "{d}/missing.txt", "{t}/echo/"], "out loud"),
        (["-s", "-d", "@{d}/missing.txt", "{t}/echo"], "echo quiet"),
        (["-s", "-o", "/dev/full", "{n}/small.txt"], "out quiet"),
        (["-s", "-o", "no/such/dir/file", "{n}/small.txt"], "out quiet"),
    ]

    def prepare(self, d):
        with open(os.path.join(d, "form.txt"), "w") as f:
            f.write("a=1&b=2\nc=3\n")
        with open(os.path.join(d, "headers.txt"), "w") as f:
            f.write("X-One: 1\r\nX-Two: two words\n")
        with open(os.path.join(d, "config.txt"), "w") as f:
            f.write(f'# curl config\nurl = "{self.srv.test_url}/echo?from=config"\n'
                    'header = "X-Cfg: two words"\n-H "X-Q: a\\"b"\nuser-agent: cfg-agent\ndata = a=1\n')

    @staticmethod
    def printed(out):
        # The Date of two answers may differ by a second; the Server header is the same.
        import re
        out = re.sub(rb"(?im)^date: [^\r\n]*", b"Date: -", out)
        # ... and in -w %{header_json} / %{json}, where it is a JSON member.
        return re.sub(rb'(?i)"date":\["[^"]*"\]', b'"date":["-"]', out)

    @staticmethod
    def received(out):
        """What the echo endpoint saw, without what only says which client sent it."""
        echo = json.loads(out)
        own = {"accept-encoding", "expect"}
        headers = sorted((k.lower(), v) for k, v in echo["headers"]
                         if k.lower() not in own and not (k.lower() == "user-agent" and v.startswith(("curl/", "fetchd/"))))
        return {"method": echo["method"], "path": echo["path"], "query": echo["query"], "body": echo["body"], "headers": headers}

    def files(self, d):
        found = {}
        for root, _, names in os.walk(d):
            for name in names:
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    found[os.path.relpath(path, d)] = self.printed(f.read())
        return found

    def test_flags_as_curl(self):
        import uuid
        with tempfile.TemporaryDirectory() as inputs:
            self.prepare(inputs)
            for flags, compare in self.ROWS:
                key = uuid.uuid4().hex[:8]
                subst = {"t": self.srv.test_url, "n": self.srv.nginx_url, "tls": self.srv.nginx_tls_url,
                         "ca": self.srv.ca_file, "d": inputs, "key": key}
                with self.subTest(flags=" ".join(flags)), tempfile.TemporaryDirectory() as dc, \
                        tempfile.TemporaryDirectory() as df:
                    args = list(flags)
                    for name, value in subst.items():
                        args = [a.replace("{" + name + "}", value) for a in args]
                    curl = subprocess.run(["curl", *args], capture_output=True, timeout=30, cwd=dc)
                    if "flaky" in " ".join(args):  # the server counts per key: a fresh one for fetchctl
                        args = [a.replace(key, key + "f") for a in args]
                    e = dict(os.environ)
                    e.pop("FETCHD_SOCKET", None)
                    ours = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, "fetch", *args],
                                          capture_output=True, timeout=30, cwd=df, env=e)
                    self.assertEqual(ours.returncode, curl.returncode, f"curl stderr {curl.stderr!r}, fetchctl stderr {ours.stderr!r}")
                    if "out" in compare:
                        self.assertEqual(self.printed(ours.stdout), self.printed(curl.stdout))
                    if "echo" in compare:
                        self.assertEqual(self.received(ours.stdout), self.received(curl.stdout))
                    if "quiet" in compare:
                        self.assertEqual((ours.stderr == b"", curl.stderr == b""), (True, True), (ours.stderr, curl.stderr))
                    if "loud" in compare:  # a message even with -s
                        self.assertEqual((ours.stderr == b"", curl.stderr == b""), (False, False), (ours.stderr, curl.stderr))
                    if "files" in compare:
                        self.assertEqual(self.files(df), self.files(dc))

    def test_verbose_shows_the_headers_as_curl(self):
        url = self.srv.test_url + "/redirect/1"
        curl = subprocess.run(["curl", "-sv", "-L", "-H", "X-V: 1", url], capture_output=True, timeout=30)
        ours = self.ctl("fetch", "-sv", "-L", "-H", "X-V: 1", url)
        self.assertEqual((ours.returncode, ours.stdout), (curl.returncode, curl.stdout))

        def lines(err):
            own = (b"> user-agent:", b"> accept-encoding:", b"< date:")
            return [x for x in err.split(b"\n") if x[:2] in (b"> ", b"< ") and not x.lower().startswith(own)]
        self.assertEqual(lines(ours.stderr), lines(curl.stderr))
        self.assertEqual(len(lines(ours.stderr)), 21, ours.stderr)  # two hops: 5 + 5 request lines, 6 + 5 response lines
        ours = self.ctl("fetch", "-v", self.srv.nginx_url + "/small.txt", "-o", "/dev/null")
        self.assertIn(b"< HTTP/1.1 200 OK\r\n", ours.stderr)

    def test_failure_message_says_attempts_and_time(self):
        r = self.ctl("fetch", "--retry", "2", "--retry-delay", "0.2", f"http://127.0.0.1:{closed_port()}/")
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertRegex(r.stderr.decode(), r"3 attempts in [0-9]+\.[0-9]s")
        r = self.ctl("fetch", "-sS", f"http://127.0.0.1:{closed_port()}/")
        self.assertRegex(r.stderr.decode(), r"1 attempt in [0-9]+\.[0-9]s")
