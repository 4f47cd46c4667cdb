"""The Python client (clients/python, package fetchd_client) against the real daemon."""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import unittest

from foreign import (IS_ROOT, NOBODY, PYTHON, ForeignListener, clean_env, fallback_daemon, run_as,
                     spare_fallback, taken_fallback)
from harness import Daemon, closed_port, servers, testserver, wait_for
from jobhelpers import key

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))

import fetchd_client  # noqa: E402
from fetchd_client import (Cancelled, Client, ConnectError, ConnectionClosed, FetchdError,  # noqa: E402
                           FileError, InvalidParams, MethodNotFound, NotAllowed, RPCError,
                           Timeout, TransportError, UntrustedPeer, default_socket_path)


class ClientTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = servers()
        cls.daemon = Daemon().start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()

    def setUp(self):
        self.c = Client(self.daemon.socket_path, rpc_timeout=60)

    def tearDown(self):
        self.c.close()

    def url(self, path):
        return self.srv.test_url + path


class TestBasics(ClientTestCase):
    def test_ping_status_jobs_and_generic_call(self):
        self.assertEqual(self.c.ping(), "pong")
        st = self.c.status()
        self.assertEqual(st["pid"], self.daemon.pid)
        for k in ("queued", "running", "waiting", "finished", "failed"):
            self.assertIn(k, st["jobs"])
        self.assertEqual(self.c.get_status()["pid"], self.daemon.pid)
        self.assertIsInstance(self.c.list_jobs(), list)
        self.assertEqual(self.c.call("ping"), "pong")
        self.assertEqual(self.c.call("fetch", {"url": self.url("/json")})["status"], 200)
        self.c.notify("ping")  # never answered; the connection stays usable
        self.assertEqual(self.c.ping(), "pong")

    def test_socket_path_rules(self):
        saved = {k: os.environ.get(k) for k in ("FETCHD_SOCKET", "XDG_RUNTIME_DIR")}
        try:
            os.environ["FETCHD_SOCKET"] = "/x/env.sock"
            os.environ["XDG_RUNTIME_DIR"] = "/run/user/7"
            self.assertEqual(default_socket_path("/x/arg.sock"), "/x/arg.sock")
            self.assertEqual(default_socket_path(), "/x/env.sock")
            del os.environ["FETCHD_SOCKET"]
            self.assertEqual(default_socket_path(), "/run/user/7/fetchd.sock")
            del os.environ["XDG_RUNTIME_DIR"]
            self.assertEqual(default_socket_path(), f"/tmp/fetchd-{os.getuid()}/fetchd.sock")
            os.environ["FETCHD_SOCKET"] = self.daemon.socket_path
            with Client() as c:
                self.assertEqual(c.socket_path, self.daemon.socket_path)
                self.assertEqual(c.ping(), "pong")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_connect_error(self):
        path = os.path.join(tempfile.mkdtemp(), "nobody.sock")
        with self.assertRaises(ConnectError) as cm:
            Client(path)
        self.assertEqual(cm.exception.socket_path, path)
        self.assertIsNone(cm.exception.code)
        self.assertIsInstance(cm.exception, FetchdError)

    def test_context_manager_closes(self):
        with Client(self.daemon.socket_path) as c:
            self.assertEqual(c.ping(), "pong")
        self.assertTrue(c.closed)
        with self.assertRaises(ConnectionClosed):
            c.ping()


class TestFetch(ClientTestCase):
    def echo(self, **kw):
        r = self.c.fetch(self.url("/echo"), **kw)
        self.assertEqual(r.status, 200, r)
        return r, r.json()

    def test_get_with_headers_and_query(self):
        r, e = self.echo(headers={"X-Client": "python"}, query={"a": "1 2", "b": [1, 2], "c": True})
        self.assertEqual(e["method"], "GET")
        self.assertIn(["X-Client", "python"], e["headers"])
        self.assertEqual(e["query"], "a=1%202&b=1&b=2&c=true")
        self.assertTrue(r.ok)
        self.assertTrue(r.job_id)
        self.assertEqual(r.url, self.url("/echo?a=1%202&b=1&b=2&c=true"))
        self.assertEqual(r.header("Content-Type"), "application/json")
        self.assertEqual(r["attempts"], 1)

    def test_bodies(self):
        _, e = self.echo(json={"k": [1, "two"]})
        self.assertEqual(e["method"], "POST")
        self.assertEqual(json.loads(e["body"]), {"k": [1, "two"]})
        _, e = self.echo(json=[1], method="PUT")
        self.assertEqual((e["method"], e["body"]), ("PUT", "[1]"))
        _, e = self.echo(form={"a": "b c", "n": 1})
        self.assertEqual(e["body"], "a=b+c&n=1")
        _, e = self.echo(body="héllo", headers={"Content-Type": "text/plain"})
        self.assertEqual(e["body"], "héllo")
        raw = bytes(range(256))
        _, e = self.echo(body=raw)
        self.assertEqual(e["bodyLength"], 256)
        self.assertEqual(e["bodyBase64"], __import__("base64").b64encode(raw).decode())
        with tempfile.NamedTemporaryFile(delete=False, dir=self.daemon.tmpdir) as f:
            f.write(b"from a file")
        rel = os.path.relpath(f.name)  # the client makes it absolute
        _, e = self.echo(body_file=rel)
        self.assertEqual(e["body"], "from a file")

    def test_response_forms(self):
        r = self.c.fetch(self.url("/json"))
        self.assertEqual(r.json(), testserver.JSON_DOC)
        r = self.c.fetch(self.url("/json"), response_body="json")
        self.assertEqual(r["json"], testserver.JSON_DOC)
        self.assertEqual(r.json(), testserver.JSON_DOC)
        r = self.c.fetch(self.url("/binary"))
        self.assertIn("bodyBase64", r)
        self.assertEqual(r.content, testserver.BINARY)
        r = self.c.fetch(self.url("/bytes/1000"), response_body="base64")
        self.assertEqual(r.content, testserver.det_bytes(1000))
        r = self.c.fetch(self.url("/status/404"), retry=False)
        self.assertEqual((r.status, r.ok, r.text), (404, False, "status 404"))
        r = self.c.fetch(self.url("/redirect/2"))
        self.assertEqual((r.status, r.url, r["redirects"]), (200, self.url("/redirect/0"), 2))

    def test_errors_carry_code_and_data(self):
        with self.assertRaises(InvalidParams) as cm:
            self.c.fetch(self.url("/echo"), bogus_field=1)
        self.assertEqual((cm.exception.code, cm.exception.field), (-32602, "bogusField"))
        with self.assertRaises(InvalidParams) as cm:
            self.c.fetch(self.url("/echo"), json={}, body="x")
        self.assertTrue(cm.exception.field)
        with self.assertRaises(InvalidParams) as cm:
            self.c.fetch(self.url("/echo"), headers={"X-A": 1})
        self.assertTrue(cm.exception.field.startswith("headers"), cm.exception.field)
        with self.assertRaises(NotAllowed) as cm:
            self.c.fetch("ftp://127.0.0.1/x")
        self.assertEqual(cm.exception.code, -32004)
        self.assertTrue(cm.exception.detail)
        with self.assertRaises(TransportError) as cm:
            self.c.fetch(f"http://127.0.0.1:{closed_port()}/", retry=False, job_id="py-err-1")
        e = cm.exception
        self.assertEqual((e.code, e.kind, e.job_id, e.attempts), (-32001, "connect", "py-err-1", 1))
        self.assertIsInstance(e, RPCError)
        self.assertIsInstance(e, FetchdError)
        with self.assertRaises(TransportError) as cm:
            self.c.fetch(self.url("/bytes/10000"), max_body_bytes=1000, retry=False)
        self.assertEqual(cm.exception.kind, "bodyTooLarge")
        with self.assertRaises(MethodNotFound) as cm:
            self.c.call("noSuchMethod")
        self.assertEqual(cm.exception.code, -32601)
        missing = os.path.join(self.daemon.tmpdir, "missing-body")
        with self.assertRaises(RPCError) as cm:
            self.c.fetch(self.url("/echo"), body_file=missing)
        self.assertIn(cm.exception.code, (-32003, -32602))
        if isinstance(cm.exception, FileError):
            self.assertEqual(cm.exception.path, missing)
        # The connection is still fine after all of that.
        self.assertEqual(self.c.ping(), "pong")


class TestProgressAndCancel(ClientTestCase):
    def test_progress_callbacks_run_in_the_caller_before_return(self):
        events, threads = [], set()

        def on_progress(p):
            events.append(dict(p))
            threads.add(threading.get_ident())

        r = self.c.fetch(self.url("/slow-body?chunks=6&ms=60"), on_progress=on_progress)
        self.assertEqual(r.status, 200)
        self.assertTrue(events, "no progress callbacks")
        self.assertEqual(threads, {threading.get_ident()})
        self.assertTrue(all(e["jobId"] == r.job_id for e in events))
        self.assertEqual(events[-1]["receivedBytes"], 6)
        got = [e["receivedBytes"] for e in events]
        self.assertEqual(got, sorted(got))

    def test_retrying_callback(self):
        retries, progress = [], []
        k = key("pyretry")
        r = self.c.fetch(self.url(f"/flaky/{k}?fail=2&status=503"),
                         retry={"maxAttempts": 3, "maxInterval": 0.2},
                         on_retrying=retries.append, on_progress=progress.append)
        self.assertEqual((r.status, r["attempts"]), (200, 3))
        self.assertEqual([x["attempt"] for x in retries], [2, 3])  # the attempt about to start
        for x in retries:
            self.assertEqual(x["jobId"], r.job_id)
            self.assertIn("delayMs", x)
            self.assertTrue(x["reason"])

    def test_cancel_from_another_thread(self):
        job = f"py-cancel-{key()}"
        out = {}

        def run():
            try:
                out["r"] = self.c.fetch(self.url("/slow-body?chunks=100&ms=100"), job_id=job)
            except BaseException as e:
                out["e"] = e

        t = threading.Thread(target=run)
        t.start()
        wait_for(lambda: any(j["jobId"] == job for j in self.c.list_jobs()), timeout=10)
        with Client(self.daemon.socket_path) as other:  # cancel works from any connection
            self.assertTrue(other.cancel(job))
        t.join(20)
        self.assertFalse(t.is_alive())
        self.assertIsInstance(out.get("e"), Cancelled, out)
        self.assertEqual((out["e"].code, out["e"].by, out["e"].job_id), (-32002, "cancel", job))
        self.assertFalse(self.c.cancel(job))

    def test_cancel_from_inside_a_progress_callback(self):
        seen = []

        def on_progress(p):
            seen.append(p)
            if len(seen) == 1:
                self.assertTrue(self.c.cancel(p["jobId"]))

        with self.assertRaises(Cancelled) as cm:
            self.c.fetch(self.url("/slow-body?chunks=100&ms=50"), on_progress=on_progress)
        self.assertEqual(cm.exception.by, "cancel")

    def test_exception_in_callback_cancels_the_job(self):
        job = f"py-raise-{key()}"

        def on_progress(p):
            raise ValueError("stop here")

        with self.assertRaisesRegex(ValueError, "stop here"):
            self.c.fetch(self.url("/slow-body?chunks=100&ms=50"), job_id=job, on_progress=on_progress)
        wait_for(lambda: not any(j["jobId"] == job for j in self.c.list_jobs()), timeout=10)
        self.assertEqual(self.c.ping(), "pong")

    def test_rpc_timeout_cancels_the_job(self):
        with self.assertRaises(Timeout) as cm:  # no job_id given: the client made one
            self.c.fetch(self.url("/slow-body?chunks=100&ms=100"), comment="py-timeout", rpc_timeout=0.3)
        self.assertIsInstance(cm.exception, TimeoutError)
        wait_for(lambda: not any(j.get("comment") == "py-timeout" for j in self.c.list_jobs()),
                 timeout=10, message="the timed-out job was not cancelled")

    def test_on_notification_for_jobs_without_callbacks(self):
        notes, errors = [], []

        def on_note(m):
            notes.append(m)
            try:
                c.ping()  # from the reader thread: refused instead of deadlocking
            except RuntimeError as e:
                errors.append(e)

        with Client(self.daemon.socket_path, on_notification=on_note) as c:
            r = c.fetch(self.url("/bytes/50000"), progress=True)
            self.assertEqual(r.status, 200)
            wait_for(lambda: any(n["params"].get("receivedBytes") == 50000 for n in notes), timeout=5)
        self.assertTrue(all(n["method"] == "progress" for n in notes))
        self.assertTrue(errors)


class TestConcurrency(ClientTestCase):
    def test_many_threads_share_one_client(self):
        failures, done = [], []

        def worker(t):
            try:
                for n in range(8):
                    if n % 3 == 0:
                        assert self.c.ping() == "pong"
                    r = self.c.fetch(self.url("/echo"), query={"t": t, "n": n},
                                     headers={"X-T": str(t)})
                    e = r.json()
                    assert e["query"] == f"t={t}&n={n}", (t, n, e["query"])
                    assert ["X-T", str(t)] in e["headers"]
                done.append(t)
            except BaseException as e:  # reported below
                failures.append((t, repr(e)))

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(failures, [])
        self.assertEqual(sorted(done), list(range(8)))

    def test_progress_routed_to_the_right_caller(self):
        got = {0: [], 1: [], 2: []}
        results = {}

        def worker(i):
            results[i] = self.c.fetch(self.url(f"/slow-body?chunks={3 + i}&ms=40"),
                                      on_progress=got[i].append)

        threads = [threading.Thread(target=worker, args=(i,)) for i in got]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for i, evs in got.items():
            self.assertTrue(evs)
            self.assertTrue(all(e["jobId"] == results[i].job_id for e in evs))
            self.assertEqual(evs[-1]["receivedBytes"], 3 + i)


class TestDaemonGoesAway(unittest.TestCase):
    def test_pending_call_fails_when_the_daemon_stops(self):
        srv = servers()
        with Daemon() as d:
            c = Client(d.socket_path)
            out = {}

            def run():
                try:
                    c.fetch(srv.test_url + "/slow-body?chunks=200&ms=100", job_id="py-gone")
                except BaseException as e:
                    out["e"] = e

            t = threading.Thread(target=run)
            t.start()
            wait_for(lambda: c.list_jobs(), timeout=10)
            d.stop()
            t.join(30)
            self.assertFalse(t.is_alive())
            e = out.get("e")
            self.assertTrue(isinstance(e, ConnectionClosed)
                            or (isinstance(e, Cancelled) and e.by == "shutdown"), repr(e))
            wait_for(lambda: c.closed, timeout=5)
            with self.assertRaises(ConnectionClosed):
                c.ping()
            c.close()


class TestNewerMethods(ClientTestCase):
    """download, upload, cookies, rate limits, logging."""

    def test_download(self):
        d = tempfile.mkdtemp(dir=self.daemon.tmpdir)
        path = os.path.join(d, "out.bin")
        want = testserver.det_bytes(200000)
        progress = []
        r = self.c.download(self.url("/bytes/200000"), path,
                            sha256=hashlib.sha256(want).hexdigest(), on_progress=progress.append)
        self.assertEqual((r.status, r["path"], r["bytes"]), (200, path, 200000))
        self.assertEqual(r["sha256"], hashlib.sha256(want).hexdigest())
        with open(path, "rb") as f:
            self.assertEqual(f.read(), want)
        self.assertTrue(progress)
        self.assertEqual(progress[-1]["receivedBytes"], 200000)
        with self.assertRaises(FileError) as cm:
            self.c.download(self.url("/bytes/10"), path)
        self.assertEqual(cm.exception.code, -32003)
        r = self.c.download(self.url("/bytes/10"), path, overwrite=True)
        self.assertEqual(os.path.getsize(path), 10)
        r = self.c.download(self.url("/status/404"), os.path.join(d, "nf"), retry=False)
        self.assertEqual(r.status, 404)
        self.assertFalse(os.path.exists(os.path.join(d, "nf")))

    def test_upload(self):
        d = tempfile.mkdtemp(dir=self.daemon.tmpdir)
        a = os.path.join(d, "a.txt")
        with open(a, "wb") as f:
            f.write(b"alpha\n")
        r = self.c.upload(self.url("/multipart-echo"),
                          [a, {"content": b"\x00\x01binary", "filename": "b.bin", "field": "second"}],
                          fields={"note": "hi"})
        self.assertEqual(r.status, 200)
        self.assertEqual(r.failed_files, [])
        parts = {p["name"]: p for p in r.json()["parts"]}
        self.assertEqual(parts["file"]["filename"], "a.txt")
        self.assertEqual(parts["file"]["sha256"], hashlib.sha256(b"alpha\n").hexdigest())
        self.assertEqual(parts["second"]["size"], 8)
        self.assertIn("note", parts)
        missing = os.path.join(d, "missing.txt")
        with self.assertRaises(FileError) as cm:
            self.c.upload(self.url("/multipart-echo"), [a, missing])
        self.assertEqual(cm.exception.path, missing)
        r = self.c.upload(self.url("/multipart-echo"), [a, missing], skip_unreadable=True)
        self.assertEqual(r.failed_files, ["missing.txt"])

    def test_cookies(self):
        jar = f"py-{key()}"
        n = self.c.clear_cookies(cookie_jar=jar)
        self.assertEqual(n, 0)
        r = self.c.fetch(self.url("/set-cookie?flavour=oat"), cookie_jar=jar)
        self.assertEqual(r.status, 200)
        got = self.c.get_cookies(self.url("/"), cookie_jar=jar)
        self.assertEqual([(c["name"], c["value"]) for c in got], [("flavour", "oat")])
        stored = self.c.set_cookies([{"name": "extra", "value": "1", "url": self.url("/")}],
                                    cookie_jar=jar)
        self.assertEqual(stored, 1)
        r = self.c.fetch(self.url("/cookies"), cookie_jar=jar)
        self.assertIn("extra=1", r.json()["cookie"])
        self.assertEqual(self.c.clear_cookies(cookie_jar=jar), 2)
        self.assertEqual(self.c.get_cookies(cookie_jar=jar), [])

    def test_rate_limits(self):
        host = "ratelimit-python.invalid"
        lim = self.c.set_rate_limit(host, max_concurrent=2, requests_per_second=5)
        self.assertEqual((lim["host"], lim["maxConcurrent"], lim["requestsPerSecond"]), (host, 2, 5))
        lim = self.c.set_rate_limit(host, requests_per_second=None)  # null clears; others kept
        self.assertEqual((lim["maxConcurrent"], lim["requestsPerSecond"]), (2, None))
        self.assertIn(host, [x["host"] for x in self.c.get_rate_limits()])

    def test_logging(self):
        d = tempfile.mkdtemp(dir=self.daemon.tmpdir)
        st = self.c.set_logging(True, directory=d)
        try:
            self.assertEqual((st["enabled"], st["directory"]), (True, d))
            self.assertEqual(self.c.get_logging()["enabled"], True)
            r = self.c.fetch(self.url("/json"), headers={"Authorization": "Bearer secret"})
            har = wait_for(lambda: [f for f in os.listdir(d) if f.endswith(f"-{r.job_id}.har")],
                           timeout=10)
            with open(os.path.join(d, har[0])) as f:
                text = f.read()
            self.assertIn('"version"', text)
            self.assertNotIn("Bearer secret", text)
        finally:
            self.assertEqual(self.c.set_logging(False)["enabled"], False)


@unittest.skipUnless(IS_ROOT, "needs root to run listeners and clients as other uids")
class TestPeerUid(unittest.TestCase):
    """The client reads the listener's uid (SO_PEERCRED) before sending anything: it must be
    the client's own or root's."""

    #: Run as another uid: connect by the default rules (or argv[1]), ping, print the outcome.
    PROBE = (
        "import json, sys\n"
        "from fetchd_client import Client, ConnectionClosed, UntrustedPeer\n"
        "try:\n"
        "    with Client(sys.argv[1] if len(sys.argv) > 1 else None, rpc_timeout=10) as c:\n"
        "        out = {'ping': c.ping()}\n"
        "except UntrustedPeer as e:\n"
        "    out = {'refused': str(e), 'socket_path': e.socket_path, 'peer_uid': e.peer_uid}\n"
        "except ConnectionClosed as e:\n"
        "    out = {'closed': str(e)}\n"
        "print(json.dumps(out))\n")

    def probe(self, uid, *argv):
        env = clean_env(PYTHONPATH=os.path.join(REPO, "clients", "python"))
        r = run_as(uid, [PYTHON, "-c", self.PROBE, *argv], env=env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return json.loads(r.stdout)

    def root_dir(self):
        d = tempfile.mkdtemp(prefix="fetchd-peer-")
        os.chmod(d, 0o755)
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def test_root_client_refuses_another_users_listener(self):
        path = os.path.join(self.root_dir(), "fetchd.sock")
        with ForeignListener(path, uid=NOBODY) as fake:
            with self.assertRaises(UntrustedPeer) as cm:
                Client(path)
        e = cm.exception
        self.assertIsInstance(e, ConnectError)
        self.assertEqual((e.socket_path, e.peer_uid), (path, NOBODY))
        self.assertIn(path, str(e))
        self.assertIn(f"uid {NOBODY} ", str(e))
        self.assertEqual(fake.received, {"accepted": 1, "bytes": 0}, "the client sent something")

    def test_root_owned_socket_file_does_not_matter(self):
        # The kernel's uid of the listener counts, not the file's owner.
        path = os.path.join(self.root_dir(), "fetchd.sock")
        with ForeignListener(path, uid=NOBODY, chown=False) as fake:
            self.assertEqual(os.stat(path).st_uid, 0)
            with self.assertRaises(UntrustedPeer):
                Client(path)
        self.assertEqual(fake.received["bytes"], 0)

    def test_default_path_taken_by_another_user(self):
        uid = spare_fallback(self)
        with taken_fallback(uid) as fake:
            out = self.probe(uid)
        self.assertEqual(out.get("socket_path"), f"/tmp/fetchd-{uid}/fetchd.sock", out)
        self.assertEqual(out.get("peer_uid"), NOBODY, out)
        self.assertIn(f"not by this user (uid {uid}) or root", out["refused"])
        self.assertEqual(fake.received, {"accepted": 1, "bytes": 0}, "the client sent something")

    def test_non_root_client_trusts_a_root_listener(self):
        path = os.path.join(self.root_dir(), "fetchd.sock")
        with ForeignListener(path, uid=0) as fake:
            out = self.probe(NOBODY, path)
        self.assertEqual(out, {"ping": "pong"})
        self.assertGreater(fake.received["bytes"], 0)

    def test_own_daemon_on_the_default_path(self):
        uid = spare_fallback(self)
        with fallback_daemon(uid):
            self.assertEqual(self.probe(uid), {"ping": "pong"})


if __name__ == "__main__":
    unittest.main()
