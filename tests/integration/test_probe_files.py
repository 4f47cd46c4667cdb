"""Files a client or the command line names: every one is opened the one checked way (a
regular file, never a wait on a FIFO, never written through a link), read with a size bound,
and nothing a client names can hold a shared thread pool. Every file the daemon writes for
itself is 0600. Each case is a reproduction from a probe of the release daemon, run against
the real fetchd, nginx and the test server."""
import concurrent.futures
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

from harness import REPO, Daemon, DaemonTestCase, RPCError, ping_seconds, run_fetchd, servers, wait_for
from jobhelpers import key

MiB = 1 << 20


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def peak_rss_bytes(pid):
    """The process's peak resident memory (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def sparse(path, size):
    """A file of `size` zero bytes that takes no disk (truncate -s)."""
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def release_fifo(path):
    """Opens the FIFO's writing end and closes it, so a reader still waiting in open() (a
    daemon without the fix) goes on: the test can then end cleanly."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


class ProbeCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-probe-")
        self.fifos = []

    def tearDown(self):
        for path in self.fifos:
            release_fifo(path)
        shutil.rmtree(self.tmp, ignore_errors=True)
        super().tearDown()

    def fifo(self, name):
        path = os.path.join(self.tmp, name)
        os.mkfifo(path)
        self.fifos.append(path)
        return path

    def regular(self, name, data=b"a body from a file\n", mode=0o600):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode)
        return path

    def error(self, method, params, timeout=5, client=None):
        """The error `method` answers within `timeout` seconds."""
        started = time.monotonic()
        try:
            r = (client or self.c).call(method, params, timeout=timeout)
        except RPCError as e:
            self.assertLess(time.monotonic() - started, timeout)
            return e
        except (TimeoutError, socket.timeout) as e:
            self.fail(f"{method} got no answer within {timeout}s: {e}")
        self.fail(f"{method} {json.dumps(params)[:300]} succeeded, expected an error: {json.dumps(r)[:300]}")

    def assertAnsweredWithin(self, seconds, method, params):
        """A fresh client's `method` call gets its (successful) answer within `seconds`."""
        with self.daemon.client() as c:
            started = time.monotonic()
            try:
                r = c.call(method, params, timeout=seconds)
            except (TimeoutError, socket.timeout):
                self.fail(f"{method} got no answer within {seconds}s: something holds the daemon's threads")
            self.assertLess(time.monotonic() - started, seconds)
            return r

    def assertWorkStillServed(self):
        """addStub with a regular file, a download and an upload: each answered at once."""
        body = self.regular(key("ok-body"))
        self.assertIn("stubId", self.assertAnsweredWithin(5, "addStub", {"set": key("ok"), "respond": {"bodyFile": body}}))
        target = os.path.join(self.tmp, key("dl") + ".bin")
        r = self.assertAnsweredWithin(5, "download", {"url": self.srv.test_url + "/bytes/1000", "path": target})
        self.assertEqual(r["bytes"], 1000, r)
        r = self.assertAnsweredWithin(5, "upload", {"url": self.srv.test_url + "/multipart-echo",
                                                     "files": [{"path": body}]})
        self.assertEqual(r["status"], 200, r)
        self.assertLess(ping_seconds(self.daemon), 2.0)


class TestStubBodyFiles(ProbeCase):
    def test_fifos_as_bodyfile_leave_every_pool_free(self):
        """8 addStub calls with a FIFO as respond.bodyFile were never answered, and from then
        on no download, upload or addStub with a regular file was answered either."""
        path = self.fifo("body.fifo")
        c2 = self.daemon.client()
        ids = []
        for i in range(8):
            req_id = f"fifo-{i}"
            c2.send_obj({"jsonrpc": "2.0", "id": req_id, "method": "addStub",
                         "params": {"set": key("fifo"), "respond": {"bodyFile": path}}})
            ids.append(req_id)
        deadline = time.monotonic() + 5
        for req_id in ids:
            answer = c2.answer_for(req_id, timeout=max(0.1, deadline - time.monotonic()))
            self.assertIn("error", answer, answer)
            self.assertEqual(answer["error"]["code"], -32602, answer)
            self.assertEqual(answer["error"]["data"]["field"], "respond.bodyFile", answer)
            self.assertIn("FIFO", answer["error"]["data"]["detail"], answer)
        self.assertTrue(stat.S_ISFIFO(os.lstat(path).st_mode))
        self.assertWorkStillServed()

    def test_other_files_that_are_not_regular(self):
        for path, word in ((self.tmp, "directory"), ("/dev/zero", "character device")):
            with self.subTest(path=path):
                e = self.error("addStub", {"respond": {"bodyFile": path}})
                self.assertEqual((e.code, e.data["field"]), (-32602, "respond.bodyFile"), e.data)
                self.assertIn(word, e.data["detail"])

    def test_a_body_file_past_the_bound_is_refused_before_it_is_read(self):
        path = sparse(os.path.join(self.tmp, "huge.bin"), 600 * MiB)
        e = self.error("addStub", {"respond": {"bodyFile": path}})
        self.assertEqual((e.code, e.data["field"], e.data.get("limit")), (-32602, "respond.bodyFile", 64 * MiB), e.data)


class TestHARFiles(ProbeCase):
    def test_fifo_as_loadstubs_har(self):
        path = self.fifo("in.har")
        e = self.error("loadStubs", {"set": key("har"), "har": path})
        self.assertEqual((e.code, e.data.get("path")), (-32003, path), e.data)
        self.assertIn("FIFO", e.data["detail"])
        self.assertWorkStillServed()

    def test_fifo_as_recordstubs_har(self):
        """The FIFO is neither waited on nor replaced by the HAR file."""
        path = self.fifo("out.har")
        e = self.error("recordStubs", {"set": key("rec"), "har": path})
        self.assertEqual((e.code, e.data.get("path")), (-32003, path), e.data)
        self.assertIn("FIFO", e.data["detail"])
        self.assertTrue(stat.S_ISFIFO(os.lstat(path).st_mode), "the FIFO was replaced")
        self.assertWorkStillServed()

    def test_a_directory_as_recordstubs_har(self):
        path = os.path.join(self.tmp, "adir")
        os.mkdir(path)
        e = self.error("recordStubs", {"set": key("rec"), "har": path})
        self.assertEqual(e.code, -32003, e.data)
        self.assertTrue(os.path.isdir(path))


class TestCredentialFiles(ProbeCase):
    def setUp(self):
        super().setUp()
        self.host = f"127.0.0.1:{self.srv.test_port}"

    def tearDown(self):
        try:
            self.c.call("setAuth", {"host": self.host, "type": None})
        finally:
            super().tearDown()

    def test_fifos_as_secret_files(self):
        """Each rule reads its file at use, on the blocking threads: a FIFO there is refused at
        once (-32001 kind auth), and the blocking threads stay free for downloads."""
        rules = (
            ({"type": "bearer", "tokenFile": self.fifo("token")}, "tokenFile"),
            ({"type": "basic", "user": "u", "passwordFile": self.fifo("password")}, "passwordFile"),
            ({"type": "oauth2", "tokenUrl": self.srv.test_url + "/oauth/token/" + key("o"), "clientId": "cid",
              "clientSecretFile": self.fifo("secret")}, "clientSecretFile"),
            ({"type": "awsSigV4", "provider": "aws:amz:eu-west-1:s3", "credentialsFile": self.fifo("aws")}, "credentialsFile"),
        )
        for rule, field in rules:
            with self.subTest(field=field):
                self.c.call("setAuth", {"host": self.host, **rule})
                e = self.error("fetch", {"url": self.srv.test_url + "/echo", "retry": False}, timeout=5)
                self.assertEqual((e.code, e.data.get("kind")), (-32001, "auth"), e.data)
                self.assertIn(field, e.data["detail"])
                self.assertIn("FIFO", e.data["detail"])
        self.c.call("setAuth", {"host": self.host, "type": None})
        self.assertWorkStillServed()

    def test_a_secret_file_past_the_bound(self):
        self.c.call("setAuth", {"host": self.host, "type": "bearer",
                                "tokenFile": sparse(os.path.join(self.tmp, "huge-token"), 600 * MiB)})
        e = self.error("fetch", {"url": self.srv.test_url + "/echo", "retry": False}, timeout=5)
        self.assertEqual((e.code, e.data.get("kind")), (-32001, "auth"), e.data)
        self.assertIn("larger than", e.data["detail"])


class TestTLSFiles(ProbeCase):
    def test_fifos_as_ca_cert_and_key_files(self):
        """libcurl opens these by name on the engine thread: a FIFO there held every transfer
        of that thread. Each is refused with -32003 naming it, before anything is sent."""
        url = self.srv.nginx_tls_url + "/small.txt"
        cert = self.regular("client.pem", b"not a certificate\n")
        for params, field in (({"caFile": self.fifo("ca.pem")}, "caFile"),
                              ({"caFile": self.srv.ca_file, "certFile": self.fifo("cert.pem")}, "certFile"),
                              ({"caFile": self.srv.ca_file, "certFile": cert, "keyFile": self.fifo("key.pem")}, "keyFile")):
            with self.subTest(field=field):
                path = params[field]
                e = self.error("fetch", {"url": url, "retry": False, **params}, timeout=5)
                self.assertEqual((e.code, e.data.get("path")), (-32003, path), e.data)
                self.assertIn("FIFO", e.data["detail"])
                self.assertLess(ping_seconds(self.daemon), 2.0)
        r = self.assertAnsweredWithin(10, "fetch", {"url": url, "caFile": self.srv.ca_file})
        self.assertEqual(r["status"], 200, r)
        self.assertWorkStillServed()

    def test_a_ca_file_swapped_for_a_fifo_after_the_check_is_never_opened_by_name(self):
        """The files are read once, by the checked open, and handed to libcurl as bytes:
        a name swapped for a FIFO a moment later cannot hold the engine thread."""
        url = self.srv.nginx_tls_url + "/small.txt"
        path = os.path.join(self.tmp, "swap.pem")
        shutil.copy(self.srv.ca_file, path)
        stop = threading.Event()

        def swapper():
            spare = path + ".fifo"
            while not stop.is_set():
                try:
                    os.mkfifo(spare)
                    os.rename(spare, path)
                    time.sleep(0.001)
                    shutil.copy(self.srv.ca_file, spare)
                    os.rename(spare, path)
                except OSError:
                    pass

        t = threading.Thread(target=swapper, daemon=True)
        t.start()
        try:
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                def one(_):
                    with self.daemon.client() as c:
                        try:
                            return c.call("fetch", {"url": url, "caFile": path, "retry": False}, timeout=10)["status"]
                        except RPCError as e:
                            return e.code
                outcomes = list(pool.map(one, range(40)))
        finally:
            stop.set()
            t.join()
            release_fifo(path)
        self.assertTrue(set(outcomes) <= {200, -32003}, outcomes)
        self.assertLess(ping_seconds(self.daemon), 2.0)

    def test_a_tls_file_past_the_bound(self):
        path = sparse(os.path.join(self.tmp, "huge.pem"), 600 * MiB)
        e = self.error("fetch", {"url": self.srv.nginx_tls_url + "/small.txt", "caFile": path, "retry": False})
        self.assertEqual((e.code, e.data.get("path")), (-32003, path), e.data)
        self.assertIn("larger than", e.data["detail"])


class TestStartupFiles(unittest.TestCase):
    """Files the command line names: a FIFO or an oversized file is a clear error at start
    (exit 1), never a daemon that hangs before it serves."""

    def setUp(self):
        servers()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-probe-start-")
        self.fifo = os.path.join(self.tmp, "f.fifo")
        os.mkfifo(self.fifo, 0o600)

    def tearDown(self):
        release_fifo(self.fifo)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def refused(self, *args):
        socket_path = os.path.join(self.tmp, key("s") + ".sock")
        try:
            done = run_fetchd("--socket", socket_path, "--no-cache", *args, timeout=10)
        except subprocess.TimeoutExpired:
            self.fail(f"fetchd {' '.join(args)} neither started nor refused within 10 s")
        self.assertEqual(done.returncode, 1, done.stderr)
        return done.stderr.decode(errors="replace")

    def test_fifo_as_config_auth_file_stubs_and_ca_file(self):
        for flag in ("--config", "--auth-file", "--stubs", "--ca-file"):
            with self.subTest(flag=flag):
                err = self.refused(flag, self.fifo)
                self.assertIn(flag, err)
                self.assertIn("not a regular file (a FIFO)", err)

    def test_oversized_config_auth_file_and_stubs(self):
        huge = sparse(os.path.join(self.tmp, "huge"), 600 * MiB)
        os.chmod(huge, 0o600)
        for flag in ("--config", "--auth-file", "--stubs", "--ca-file"):
            with self.subTest(flag=flag):
                err = self.refused(flag, huge)
                self.assertIn(flag, err)
                self.assertIn("larger than", err)

    def test_fifo_as_cookie_file(self):
        """The daemon starts, says why the file is not used, and leaves it as it is."""
        with Daemon("--cookie-file", self.fifo) as d:
            self.assertLess(ping_seconds(d), 2.0)
            wait_for(lambda: "FIFO" in d.stderr_text(), timeout=5, message="the cookie file's problem logged")
            self.assertIn("not a regular file (a FIFO)", d.stderr_text())
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.fifo).st_mode))

    def test_oversized_cookie_file_is_not_read(self):
        huge = sparse(os.path.join(self.tmp, "cookies.txt"), 600 * MiB)
        with Daemon("--cookie-file", huge) as d:
            self.assertLess(ping_seconds(d), 2.0)
            wait_for(lambda: "larger than" in d.stderr_text(), timeout=5, message="the cookie file's size logged")
            self.assertLess(peak_rss_bytes(d.pid), 150 * MiB)
        self.assertEqual(os.path.getsize(huge), 600 * MiB, "the file it could not load was written over")


class TestHugeHAR(unittest.TestCase):
    """loadStubs of a 600 MiB HAR took the daemon from 26 MB to a 2.46 GB peak for 18 s
    before it refused the file."""

    def setUp(self):
        servers()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-probe-har-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_huge_har_is_refused_before_parsing(self):
        path = os.path.join(self.tmp, "huge.har")
        with open(path, "wb") as f:
            f.write(b'{"log": {"version": "1.2", "entries": [')
            f.truncate(600 * MiB)
        with Daemon() as d:
            c = d.client()
            started = time.monotonic()
            with self.assertRaises(RPCError) as cm:
                c.call("loadStubs", {"set": "big", "har": path}, timeout=10)
            self.assertLess(time.monotonic() - started, 2.0)
            e = cm.exception
            self.assertEqual((e.code, e.data["field"], e.data["limit"]), (-32602, "har", 64 * MiB), e.data)
            self.assertIn("larger than", e.data["detail"])
            self.assertLess(peak_rss_bytes(d.pid), 100 * MiB)
            self.assertEqual(c.call("getStubs", {"set": "big"})["stubs"], [])

    def test_a_large_har_within_the_bound_is_parsed_entry_by_entry(self):
        """60 MiB of HAR (30 entries of 2 MiB bodies): loaded with a peak of about the file and
        its bodies, not a parse tree of the whole document beside them."""
        body = "x" * (2 * MiB)
        entries = [{"request": {"method": "GET", "url": f"http://big.test/{i}", "headers": []},
                    "response": {"status": 200, "headers": [], "content": {"size": len(body), "text": body}}}
                   for i in range(30)]
        path = os.path.join(self.tmp, "large.har")
        with open(path, "w") as f:
            json.dump({"log": {"version": "1.2", "creator": {"name": "t"}, "entries": entries}}, f)
        size = os.path.getsize(path)
        self.assertLess(size, 64 * MiB)
        with Daemon() as d:
            c = d.client()
            before = peak_rss_bytes(d.pid)
            self.assertEqual(c.call("loadStubs", {"set": "large", "har": path}, timeout=30), {"loaded": 30})
            grown = peak_rss_bytes(d.pid) - before
            self.assertLess(grown, 2.5 * size, f"the peak grew by {grown / MiB:.0f} MiB for a {size / MiB:.0f} MiB file")
            r = c.call("fetch", {"url": "http://big.test/7", "stubs": "large"})
            self.assertEqual(r["bytes"], len(body))

    def test_har_shapes(self):
        """The entry-by-entry reading keeps what loadStubs accepted and refused."""
        cases = (
            (b'{"log": {"entries": []}}', None),
            (b' \n{"log": {"pages": [{"a": "}]"}], "entries": [{"request": {"method": "GET", "url": "http://h/\\"]}"}, '
             b'"response": {"status": 200, "content": {"text": "ok"}}}], "x": [1, {"y": null}]}, "z": true}\n', None),
            (b'{not json', "not JSON"),
            (b'{"log": {}}', "log.entries"),
            (b'{"log": {"entries": {}}}', "log.entries"),
            (b'[1, 2]', "log.entries"),
            (b'{"log": {"entries": [{"request": {"method": "GET"}}]}}', "log.entries[0]"),
            (b'{"log": {"entries": [{"request": {"method": "GET", "url": "http://h/"}, "response": {"status": 200}}, x]}}', "not JSON"),
            (b'{"log": {"entries": []}} trailing', "not JSON"),
            (b'{"log": {"entries": [', "not JSON"),
        )
        with Daemon() as d:
            c = d.client()
            for i, (text, problem) in enumerate(cases):
                path = os.path.join(self.tmp, f"{i}.har")
                with open(path, "wb") as f:
                    f.write(text)
                with self.subTest(text=text):
                    if problem is None:
                        self.assertIn("loaded", c.call("loadStubs", {"set": f"s{i}", "har": path}))
                    else:
                        with self.assertRaises(RPCError) as cm:
                            c.call("loadStubs", {"set": f"s{i}", "har": path})
                        self.assertEqual((cm.exception.code, cm.exception.data["field"]), (-32602, "har"), cm.exception.data)
                        self.assertIn(problem, cm.exception.data["detail"])


class TestFileModes(unittest.TestCase):
    """The cache's index.sqlite and its -wal/-shm were 0644 and hold URLs with token values.
    Every file the daemon writes for itself is 0600 whatever the umask; a user's download
    keeps the umask's mode, as curl -o's does."""

    def setUp(self):
        self.srv = servers()
        self.base = tempfile.mkdtemp(prefix="fetchd-probe-modes-")

    def tearDown(self):
        shutil.rmtree(self.base, ignore_errors=True)

    def daemon(self, *args):
        return Daemon(*args, preexec=lambda: os.umask(0o022)).start()

    def test_every_file_of_the_daemon_is_0600(self):
        cache = os.path.join(self.base, "cache")
        state = os.path.join(self.base, "state")
        cookies = os.path.join(self.base, "cookies.txt")
        logs = os.path.join(self.base, "har")
        recorded = os.path.join(self.base, "rec.har")
        download = os.path.join(self.base, "mine.bin")
        k = key("modes")
        url = f"{self.srv.test_url}/cache-origin/{k}?" + urllib.parse.urlencode({"cc": "max-age=600", "token": "secret-token"})
        with self.daemon("--cache-dir", cache, "--state-dir", state, "--cookie-file", cookies) as d:
            c = d.client()
            c.call("setLogging", {"enabled": True, "directory": logs})
            self.assertEqual(c.call("fetch", {"url": url})["status"], 200)
            wait_for(lambda: c.call("getCacheStats")["entries"] == 1, message="the answer stored")
            c.call("fetch", {"url": self.srv.test_url + "/set-cookie?raw=" + urllib.parse.quote("k=v; Max-Age=3600")})
            c.call("download", {"url": self.srv.test_url + "/bytes/1000", "path": download, "durable": True})
            c.call("recordStubs", {"set": "rec", "har": recorded})
            c.call("setStubMode", {"set": "rec", "onMiss": "network"})
            c.call("fetch", {"url": self.srv.test_url + "/json", "stubs": "rec"})
            wait_for(lambda: os.path.exists(cookies), message="the cookie file written")
            wait_for(lambda: len(os.listdir(logs)) >= 3, message="HAR logs written")
            wait_for(lambda: os.path.getsize(recorded) > 300, message="the recorded exchange written")
            files = {os.path.join(cache, "index.sqlite"), os.path.join(cache, "index.sqlite-wal"),
                     os.path.join(cache, "index.sqlite-shm"), cookies, recorded}
            files |= {os.path.join(cache, "bodies", n) for n in os.listdir(os.path.join(cache, "bodies"))}
            files |= {os.path.join(logs, n) for n in os.listdir(logs)}
            files |= {os.path.join(state, n) for n in os.listdir(state) if n.startswith("jobs.db")}
            self.assertIn(os.path.join(state, "jobs.db"), files)
            for path in sorted(files):
                with self.subTest(path=path):
                    self.assertEqual(oct(mode(path)), oct(0o600))
            for path in (cache, os.path.join(cache, "bodies"), os.path.join(cache, "tmp"), state, logs):
                with self.subTest(path=path):
                    self.assertEqual(oct(mode(path)), oct(0o700))
            self.assertEqual(oct(mode(download)), oct(0o644), "a user's download keeps the umask's mode")

    def test_an_older_index_is_made_private_at_open(self):
        cache = os.path.join(self.base, "cache")
        with self.daemon("--cache-dir", cache) as d:
            d.client().call("getCacheStats")
        index = os.path.join(cache, "index.sqlite")
        present = [p for p in (index, index + "-wal", index + "-shm") if os.path.exists(p)]
        for path in present:
            os.chmod(path, 0o644)
        with self.daemon("--cache-dir", cache) as d:
            d.client().call("getCacheStats")
            for path in (index, index + "-wal", index + "-shm"):
                with self.subTest(path=path):
                    self.assertEqual(oct(mode(path)), oct(0o600))


class TestOneCheckedOpen(unittest.TestCase):
    """No source file but LocalFile (and the daemon's own stores) opens or reads a file by
    name: every path a client or the command line names goes through the one checked open."""

    # The daemon's own files and directories, never a name a client gives.
    OWN = {
        "Sources/FetchEngine/LocalFile.swift",
        "Sources/FetchDaemon/Storage/SQLiteDatabase.swift",  # the stores' database files
        "Sources/FetchDaemon/Jobs/DurableStore.swift",        # --state-dir/jobs.db, made O_EXCL
        "Sources/FetchDaemon/Cache/CacheStore.swift",         # the cache's bodies (0700 directory)
        "Sources/FetchDaemon/Config/SocketPath.swift",        # directories, O_DIRECTORY
        "Sources/FetchDaemon/Server/ClientDirectory.swift",   # /proc/<pid>/...
    }
    PATTERN = re.compile(r"(?<![\w.])(?<!func )(?:Glibc\.)?(?:open|fopen|openat)\(|String\(contentsOfFile:|Data\(contentsOf:|"
                         r"\.contents\(atPath:|FileHandle\(for|CURLOPT_(?:CAINFO|CAPATH|SSLCERT|SSLKEY|COOKIEFILE|COOKIEJAR|ISSUERCERT|CRLFILE)\b")
    # libcurl options set to nothing (no file), and the daemon's own --ca-file, checked at start.
    ALLOWED = re.compile(r'CURLOPT_\w+, (?:nil|"")\)|settings\.caFile.*CURLOPT_CAINFO\b')

    def test_no_other_open_by_name(self):
        found = []
        for root in ("Sources/FetchDaemon", "Sources/FetchEngine"):
            for folder, _, names in os.walk(os.path.join(REPO, root)):
                for name in names:
                    if not name.endswith(".swift"):
                        continue
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, REPO)
                    if rel in self.OWN:
                        continue
                    with open(path) as f:
                        for n, line in enumerate(f, 1):
                            code = line.split("//", 1)[0]
                            if self.PATTERN.search(code) and not self.ALLOWED.search(code):
                                found.append(f"{rel}:{n}: {line.strip()}")
        self.assertEqual(found, [], "open a client-named file with LocalFile instead:\n" + "\n".join(found))


if __name__ == "__main__":
    unittest.main()
