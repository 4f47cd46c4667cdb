"""`fetchctl fetch` side by side with curl for the fetch flags of `fetchctl fetch --help` that
test_fetchctl.py (TestFetchctlCurlTable, TestFetchctlAsCurl) and test_fetchctl_native.py do not
already compare: the same command line through curl and through fetchctl against the same local
servers, comparing the exit status, stdout, the files written and what the server received.
A row marked "differs" asserts the difference docs/clients.md lists instead."""
import json
import os
import re
import subprocess
import tempfile

import test_fetchctl as tf
import test_fetchctl_native as native
from harness import FETCHCTL, closed_port

TIME = re.compile(rb"\b[0-9]+\.[0-9]{6}\b")


def _norm(out):
    """The Date of two answers may differ; times always do."""
    return TIME.sub(b"T", tf.TestFetchctlCurlTable.printed(out))


class TestFetchctlVsCurl(tf.FetchctlCase):
    # (flags, compare, stdin): compare holds "out" (stdout), "echo" (the request the echo
    # endpoint saw), "files" (files written in the working directory), "quiet" (stderr empty
    # for both); every row compares the exit status; stdin names the file of {d} fed to stdin.
    # {t} test server, {n} nginx, {tls} nginx over TLS (http2), {ca} its certificate, {d} input
    # files, {closed} a closed port.
    ROWS = [
        (["-s", "--data-raw", "@not-a-file", "{t}/echo"], "echo", None),
        (["-s", "--data-ascii", "a=1", "--data", "b=2", "{t}/echo"], "echo", None),
        (["-s", "-d", "@-", "{t}/echo"], "echo", "form.txt"),
        (["-s", "--data-binary", "@-", "{t}/echo"], "echo", "form.txt"),
        (["-s", "-T", "-", "{t}/echo/stdin"], "echo", "form.txt"),
        (["-s", "-K", "-"], "echo", "config.txt"),
        (["-s", "--url", "{t}/status/201", "--url", "{t}/status/202"], "out quiet", None),
        (["-s", "--url", "{n}/small.txt", "--output", "u.out", "--remote-name", "--url", "{n}/index.html"], "out files", None),
        (["-s", "--connect-timeout", "5", "{t}/status/201"], "out quiet", None),
        (["-s", "--connect-timeout", "2", "http://127.0.0.1:{closed}/"], "out quiet", None),
        (["-#", "-o", "bar.out", "{n}/small.txt"], "out files", None),
        (["--progress-bar", "-o", "bar.out", "{n}/small.txt"], "out files", None),
        (["-s", "-N", "{n}/small.txt"], "out quiet", None),
        (["-s", "--no-buffer", "{t}/slow-body?chunks=3&ms=50"], "out quiet", None),
        (["-s", "--http2", "--cacert", "{ca}", "{tls}/proto"], "out quiet", None),
        (["-s", "--http2", "--cacert", "{ca}", "-w", " %{http_version}", "{tls}/small.txt"], "out", None),
        (["-s", "-x", "{t}", "http://fetchd-proxied.invalid/echo?via=proxy"], "echo", None),
        (["-s", "--proxy", "{t}", "--noproxy", "fetchd-proxied.invalid", "http://fetchd-proxied.invalid/"], "out quiet", None),
        (["-s", "-x", "http://127.0.0.1:{closed}", "--noproxy", "127.0.0.1", "{t}/status/201"], "out quiet", None),
        (["-s", "-x", "http://127.0.0.1:{closed}", "{t}/status/201"], "out quiet", None),
        (["-s", "-w", "@{d}/writeout.txt", "{t}/status/201", "{t}/status/202"], "out", None),
        (["-s", "-o", "/dev/null", "-w", "%{time_namelookup} %{time_connect} %{time_appconnect} %%", "{t}/status/200"], "out", None),
        (["-s", "-o", "/dev/null", "-w", "[%{redirect_url}]", "{t}/status/200"], "out", None),
        # the long names of the short flags the other tables compare
        (["--silent", "--show-error", "--request", "PUT", "--header", "X-A: 1", "--user-agent", "ua/2",
          "--user", "u:p", "--referer", "http://r.example/", "--cookie", "c=1", "--data", "x=y", "{t}/echo"], "echo", None),
        (["--silent", "--get", "--data", "q=1", "{t}/echo"], "echo", None),
        (["--silent", "--upload-file", "{d}/form.txt", "{t}/echo/"], "echo", None),
        (["--silent", "--config", "{d}/config.txt"], "echo", None),
        (["--silent", "--include", "--location", "--max-redirs", "3", "{t}/redirect/2"], "out", None),
        (["--silent", "--head", "--dump-header", "h.out", "{t}/status/200"], "out files", None),
        (["--silent", "--fail", "--write-out", "%{http_code}", "{t}/status/404"], "out quiet", None),
        (["--silent", "--max-time", "1", "{t}/slow-headers?ms=3000"], "out quiet", None),
        (["--silent", "--insecure", "--range", "0-4", "{tls}/small.txt"], "out", None),
        (["--silent", "--output", "o.out", "--cookie-jar", "jar.txt", "{t}/set-cookie?k=v"], "out files", None),
        (["--silent", "--parallel", "--output", "p1", "--output", "p2", "{t}/status/201", "{t}/status/202"], "out files", None),
        (["--silent", "--continue-at", "-", "--output", "small.txt", "{n}/small.txt"], "out files", None),
    ]

    # Rows where fetchctl differs from curl, as docs/clients.md lists: (flags, curl's stdout,
    # fetchctl's stdout); the exit status is the same.
    DIFFERS = [
        # an unknown -w variable: curl prints nothing for it (and warns), fetchctl prints it as written
        (["-s", "-o", "/dev/null", "-w", "[%{no_such_variable}]", "{t}/status/200"], b"[]", b"[%{no_such_variable}]"),
        # --retry: curl writes the body of every failed attempt, fetchctl only the last answer's
        (["-s", "--fail-with-body", "--retry", "1", "--retry-delay", "0", "{t}/status/503"],
         b"status 503status 503", b"status 503"),
    ]

    # fetchctl's own flags: curl 7.88 refuses them (exit 2), fetchctl takes them (exit 0; 4 for
    # a stub set without a stub for the request).
    OWN = [
        ["--query", "a=b c"], ["--timeout", "5"], ["--max-redirects", "2"], ["--json-result"],
        ["--cache", "no-store"], ["--jar", "vs-curl"], ["--no-cookies"], ["--priority", "3"],
        ["--max-body-bytes", "1000"], ["--comment", "side by side"], ["--job-id", "vs-curl-own"],
        ["--progress"], ["--stubs", "vs-curl-empty"],
    ]

    def prepare(self, d):
        tf.TestFetchctlCurlTable.prepare(self, d)
        with open(os.path.join(d, "writeout.txt"), "w") as f:
            f.write("%{url} %{urlnum}\\t%{url_effective}\\r\\n")

    @staticmethod
    def files(d):
        return {name: _norm(data) for name, data in native.files(d).items()}

    def run_both(self, args, stdin, dc, df, d):
        def feed():
            return open(os.path.join(d, stdin), "rb") if stdin else subprocess.DEVNULL
        src = feed()
        try:
            curl = subprocess.run(["curl", *args], capture_output=True, timeout=30, cwd=dc, stdin=src)
        finally:
            if stdin:
                src.close()
        e = dict(os.environ)
        e.pop("FETCHD_SOCKET", None)
        src = feed()
        try:
            ours = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, "fetch", *args],
                                  capture_output=True, timeout=30, cwd=df, env=e, stdin=src)
        finally:
            if stdin:
                src.close()
        return curl, ours

    def subst(self, flags, d):
        values = {"t": self.srv.test_url, "n": self.srv.nginx_url, "tls": self.srv.nginx_tls_url,
                  "ca": self.srv.ca_file,
                  "d": d, "closed": str(closed_port())}
        args = list(flags)
        for name, value in values.items():
            args = [a.replace("{" + name + "}", value) for a in args]
        return args

    def test_flags_side_by_side(self):
        table = tf.TestFetchctlCurlTable
        with tempfile.TemporaryDirectory() as d:
            self.prepare(d)
            for flags, compare, stdin in self.ROWS:
                with self.subTest(flags=" ".join(flags)), tempfile.TemporaryDirectory() as dc, \
                        tempfile.TemporaryDirectory() as df:
                    if "small.txt" in flags and "--continue-at" in flags:
                        for where in (dc, df):  # a partial file to continue
                            with open(os.path.join(where, "small.txt"), "w") as f:
                                f.write("Hello")
                    args = self.subst(flags, d)
                    curl, ours = self.run_both(args, stdin, dc, df, d)
                    self.assertEqual(ours.returncode, curl.returncode, (curl.stderr, ours.stderr))
                    if "out" in compare:
                        self.assertEqual(_norm(ours.stdout), _norm(curl.stdout))
                    if "echo" in compare:
                        self.assertEqual(table.received(ours.stdout), table.received(curl.stdout))
                    if "quiet" in compare:
                        self.assertEqual((curl.stderr, ours.stderr), (b"", b""))
                    if "files" in compare:
                        self.assertEqual(self.files(df), self.files(dc))

    def test_documented_differences(self):
        with tempfile.TemporaryDirectory() as d:
            for flags, want_curl, want_ours in self.DIFFERS:
                with self.subTest(flags=" ".join(flags)):
                    curl, ours = self.run_both(self.subst(flags, d), None, d, d, d)
                    self.assertEqual(ours.returncode, curl.returncode, (curl.stderr, ours.stderr))
                    self.assertEqual((curl.stdout, ours.stdout), (want_curl, want_ours))

    def test_own_flags_curl_refuses(self):
        url = self.srv.test_url + "/status/201"
        for flags in self.OWN:
            with self.subTest(flags=" ".join(flags)), tempfile.TemporaryDirectory() as dc:
                curl, ours = self.run_both(["-s", *flags, url], None, dc, dc, dc)
                self.assertEqual(curl.returncode, 2, curl.stderr)
                self.assertEqual(ours.returncode, 4 if flags[0] == "--stubs" else 0, ours.stderr)

    def test_write_out_json_differs_only_by_curl_extra_keys(self):
        # differs: curl's %{json} has variables fetchd does not have; the shared ones agree.
        args = ["-s", "-o", "/dev/null", "-w", "%{json}", self.srv.test_url + "/status/201"]
        with tempfile.TemporaryDirectory() as dc:
            curl, ours = self.run_both(args, None, dc, dc, dc)
        self.assertEqual((curl.returncode, ours.returncode), (0, 0), ours.stderr)
        c, o = json.loads(curl.stdout), json.loads(ours.stdout)
        self.assertLess(set(o), set(c), set(o) - set(c))
        for k in o:
            if not k.startswith("time_") and k not in ("local_port", "remote_port"):
                self.assertEqual(o[k], c[k], k)
