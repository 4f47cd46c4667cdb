"""The Python client's requests/httpx-style API against the real daemon: Response,
get/post/..., params/data/json/files/auth/timeout, Session defaults, the exception classes,
download with progress, threads, and AsyncClient (concurrent awaits, progress, cancellation)."""
import asyncio
import datetime
import hashlib
import io
import json
import os
import pathlib
import tempfile
import threading
import unittest

from harness import closed_port, testserver, wait_for
from jobhelpers import key
from test_python_client import ClientTestCase  # puts clients/python on sys.path

from fetchd_client import (AsyncClient, Cancelled, Client, ConnectError, DaemonUnreachable,  # noqa: E402
                           FetchdError, FileError, Headers, HTTPStatusError, InvalidParams,
                           RequestTimeout, ServerUnreachable, Session, Timeout, TooManyRedirects,
                           TransportError)


class NativeCase(ClientTestCase):
    def tmp(self):
        return tempfile.mkdtemp(dir=self.daemon.tmpdir)

    def live(self, job_id):
        return any(j["jobId"] == job_id for j in self.c.list_jobs())


class TestResponse(NativeCase):
    def test_requests_surface(self):
        r = self.c.get(self.url("/json"))
        self.assertEqual((r.status_code, r.status, r.ok, bool(r), r.reason), (200, 200, True, True, "OK"))
        self.assertEqual(r.headers["Content-Type"], "application/json")
        self.assertEqual(r.headers["content-type"], "application/json")
        self.assertIn("CONTENT-TYPE", r.headers)
        self.assertIsInstance(r.headers, Headers)
        self.assertEqual(r.json(), testserver.JSON_DOC)
        self.assertEqual(json.loads(r.text), testserver.JSON_DOC)
        self.assertEqual(json.loads(r.content), testserver.JSON_DOC)
        self.assertEqual(r.url, self.url("/json"))
        self.assertIsInstance(r.elapsed, datetime.timedelta)
        self.assertGreater(r.elapsed.total_seconds(), 0)
        self.assertEqual(r.history, [])
        self.assertIs(r.raise_for_status(), r)
        # The protocol's fields stay reachable.
        self.assertEqual((r["status"], r["attempts"]), (200, 1))
        self.assertAlmostEqual(r.elapsed.total_seconds() * 1000, r["elapsedMs"], places=2)
        self.assertTrue(r.job_id)

    def test_error_status_is_falsy_and_raise_for_status(self):
        r = self.c.get(self.url("/status/404"), retry=False)
        self.assertEqual((r.status_code, r.ok, bool(r), r.reason), (404, False, False, "Not Found"))
        with self.assertRaises(HTTPStatusError) as cm:
            r.raise_for_status()
        e = cm.exception
        self.assertIs(e.response, r)
        self.assertEqual(e.status_code, 404)
        self.assertEqual(str(e), f"404 Client Error: Not Found for url: {self.url('/status/404')}")
        self.assertIsInstance(e, FetchdError)
        r = self.c.get(self.url("/status/503"), retry=False)
        self.assertFalse(r)
        with self.assertRaisesRegex(HTTPStatusError, "503 Server Error: Service Unavailable"):
            r.raise_for_status()

    def test_history_and_redirects(self):
        r = self.c.get(self.url("/redirect/2"))
        self.assertEqual((r.status_code, len(r.history), r.url), (200, 2, self.url("/redirect/0")))
        r = self.c.get(self.url("/redirect/2"), allow_redirects=False)
        self.assertEqual((r.status_code, r.ok, r.is_redirect, r.history), (302, True, True, []))
        self.assertEqual(r.headers["Location"], "/redirect/1")
        r = self.c.get(self.url("/redirect/1"), follow_redirects=False)
        self.assertEqual(r.status_code, 302)

    def test_binary_content_and_repeated_headers(self):
        r = self.c.get(self.url("/binary"))
        self.assertEqual(r.content, testserver.BINARY)
        r = self.c.get(self.url("/headers-multi"))
        self.assertEqual(r.headers.get_list("X-Multi"), list(testserver.MULTI_X))
        self.assertEqual(r.headers.get_list("Set-Cookie"), list(testserver.MULTI_COOKIES))


class TestVerbsAndKeywords(NativeCase):
    def echo(self, method, **kw):
        r = getattr(self.c, method)(self.url("/echo"), **kw)
        self.assertEqual(r.status_code, 200, r)
        return r.json()

    def header(self, e, name):
        return [v for k, v in e["headers"] if k.lower() == name.lower()]

    def test_methods(self):
        for verb in ("get", "post", "put", "patch", "delete", "options"):
            self.assertEqual(self.echo(verb)["method"], verb.upper())
        r = self.c.head(self.srv.nginx_url + "/small.txt")
        self.assertEqual((r.status_code, r.content, r.headers["Content-Length"]), (200, b"", "100"))
        self.assertEqual(self.c.request("PROPFIND", self.url("/echo")).json()["method"], "PROPFIND")

    def test_params_data_json_headers(self):
        e = self.echo("get", params={"a": "1 2", "b": [1, 2], "skip": None})
        self.assertEqual(e["query"], "a=1%202&b=1&b=2")
        e = self.echo("get", params=[("n", 1), ("n", 2)])
        self.assertEqual(e["query"], "n=1&n=2")
        e = self.echo("post", data={"a": "b c", "n": 1})
        self.assertEqual((e["method"], e["body"]), ("POST", "a=b+c&n=1"))
        self.assertEqual(self.header(e, "Content-Type"), ["application/x-www-form-urlencoded"])
        e = self.echo("post", data=[("k", "1"), ("k", "2")])
        self.assertEqual(e["body"], "k=1&k=2")
        e = self.echo("put", data=b"\x00\x01raw")
        self.assertEqual((e["method"], e["bodyBase64"]), ("PUT", "AAFyYXc="))
        e = self.echo("patch", data="text body", headers={"Content-Type": "text/x-test"})
        self.assertEqual((e["method"], e["body"]), ("PATCH", "text body"))
        self.assertEqual(self.header(e, "Content-Type"), ["text/x-test"])
        e = self.echo("post", json={"k": [1, "two"]})
        self.assertEqual(json.loads(e["body"]), {"k": [1, "two"]})
        e = self.echo("get", headers={"X-Client": "native"}, cookies={"a": "1", "b": "2"})
        self.assertEqual(self.header(e, "X-Client"), ["native"])
        self.assertEqual(self.header(e, "Cookie"), ["a=1; b=2"])
        # A GET with a body stays a GET.
        self.assertEqual(self.echo("get", data="x")["method"], "GET")

    def test_data_from_a_file_object_is_streamed_by_the_daemon(self):
        path = os.path.join(self.tmp(), "body.bin")
        with open(path, "wb") as f:
            f.write(b"file body")
        with open(path, "rb") as f:
            e = self.echo("post", data=f)
        self.assertEqual(e["body"], "file body")
        e = self.echo("post", data=io.BytesIO(b"in memory"))
        self.assertEqual(e["body"], "in memory")

    def test_files_as_requests_takes_them(self):
        d = self.tmp()
        a = os.path.join(d, "a.txt")
        with open(a, "wb") as f:
            f.write(b"alpha\n")
        with open(a, "rb") as fa:
            r = self.c.post(self.url("/multipart-echo"), data={"note": "hi", "n": 3},
                            files={"doc": fa, "raw": ("b.bin", b"\x00\x01binary", "application/x-b"),
                                   "mem": ("m.txt", io.BytesIO(b"memory"))})
        self.assertEqual(r.status_code, 200, r.text)
        parts = {p["name"]: p for p in r.json()["parts"]}
        self.assertEqual((parts["doc"]["filename"], parts["doc"]["sha256"]),
                         ("a.txt", hashlib.sha256(b"alpha\n").hexdigest()))
        self.assertEqual((parts["raw"]["filename"], parts["raw"]["contentType"], parts["raw"]["size"]),
                         ("b.bin", "application/x-b", 8))
        self.assertEqual((parts["mem"]["filename"], parts["mem"]["size"]), ("m.txt", 6))
        self.assertEqual((parts["note"]["value"], parts["n"]["value"]), ("hi", "3"))
        r = self.c.put(self.url("/multipart-echo"), files=[("f", ("x.txt", "text"))])
        self.assertEqual(r.json()["parts"][0]["size"], 4)
        with self.assertRaises(FileError) as cm:
            self.c.post(self.url("/multipart-echo"), files={"f": pathlib.Path(d, "missing.txt")})
        self.assertIn(os.path.join(d, "missing.txt"), str(cm.exception))

    def test_verify_and_http_version(self):
        url = self.srv.nginx_tls_url + "/small.txt"
        with self.assertRaises(TransportError) as cm:
            self.c.get(url, retry=False)
        self.assertEqual(cm.exception.kind, "tls")
        self.assertEqual(self.c.get(url, verify=False).status_code, 200)
        self.assertEqual(self.c.get(url, verify=self.srv.ca_file).status_code, 200)
        self.assertEqual(self.c.get(url, verify=self.srv.ca_file, http_version="1.1").http_version, "HTTP/1.1")

    def test_basic_auth_tuple(self):
        r = self.c.get(self.url("/basic-protected"), params={"user": "ann", "password": "pw"},
                       auth=("ann", "pw"))
        self.assertEqual((r.status_code, r.json()), (200, {"ok": True}))
        r = self.c.get(self.url("/basic-protected"), params={"user": "ann", "password": "pw"},
                       auth=("ann", "wrong"))
        self.assertEqual(r.status_code, 401)

    def test_timeout_number_and_tuple(self):
        with self.assertRaises(RequestTimeout) as cm:
            self.c.get(self.url("/slow-headers?ms=3000"), timeout=0.3, retry=False)
        e = cm.exception
        self.assertIsInstance(e, TimeoutError)
        self.assertIsInstance(e, TransportError)
        self.assertEqual((e.kind, e.code), ("timeout", -32001))
        with self.assertRaises(TimeoutError):
            self.c.get(self.url("/slow-headers?ms=3000"), timeout=(1, 0.3), retry=False)
        self.assertEqual(self.c.get(self.url("/json"), timeout=(2, 5)).status_code, 200)


class TestErrorClasses(NativeCase):
    def test_daemon_unreachable(self):
        path = os.path.join(self.tmp(), "none.sock")
        with self.assertRaises(DaemonUnreachable) as cm:
            Client(path)
        e = cm.exception
        self.assertIsInstance(e, ConnectError)        # the old name still catches it
        self.assertIsInstance(e, ConnectionError)
        self.assertNotIsInstance(e, ServerUnreachable)
        self.assertEqual(e.socket_path, path)
        self.assertIn(path, str(e))

    def test_server_unreachable(self):
        with self.assertRaises(ServerUnreachable) as cm:
            self.c.get(f"http://127.0.0.1:{closed_port()}/", retry=False)
        e = cm.exception
        self.assertEqual(e.kind, "connect")
        self.assertIsInstance(e, ConnectionError)
        self.assertIsInstance(e, TransportError)
        self.assertNotIsInstance(e, DaemonUnreachable)
        with self.assertRaises(ServerUnreachable) as cm:
            self.c.get("http://no-such-host.invalid/", retry=False)
        self.assertEqual(cm.exception.kind, "dns")

    def test_too_many_redirects_and_other_transport_errors(self):
        with self.assertRaises(TooManyRedirects) as cm:
            self.c.get(self.url("/redirect/5"), max_redirects=2)
        self.assertEqual(cm.exception.kind, "tooManyRedirects")
        with self.assertRaises(TransportError) as cm:
            self.c.get(self.url("/bytes/10000"), max_body_bytes=100)
        self.assertEqual(type(cm.exception), TransportError)
        self.assertEqual(cm.exception.kind, "bodyTooLarge")

    def test_file_errors_name_their_path(self):
        d = self.tmp()
        path = os.path.join(d, "exists.bin")
        with open(path, "wb") as f:
            f.write(b"x")
        with self.assertRaises(FileError) as cm:
            self.c.download(self.url("/bytes/10"), path)
        self.assertIn(path, str(cm.exception))
        self.assertEqual(cm.exception.path, path)
        missing = os.path.join(d, "nope.bin")
        with self.assertRaises(FileError) as cm:
            self.c.post(self.url("/echo"), data=None, body_file=missing)
        self.assertIn(missing, str(cm.exception))
        with self.assertRaises(FileError) as cm:
            self.c.download(self.url("/bytes/10"), os.path.join(d, "no-dir", "x"))
        self.assertIn(os.path.join(d, "no-dir", "x"), str(cm.exception))

    def test_rpc_timeout_and_invalid_params(self):
        with self.assertRaises(Timeout) as cm:
            self.c.get(self.url("/slow-body?chunks=50&ms=100"), rpc_timeout=0.2)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertNotIsInstance(cm.exception, TransportError)
        with self.assertRaises(InvalidParams) as cm:
            self.c.get(self.url("/echo"), bogus_field=1)
        self.assertEqual(cm.exception.field, "bogusField")


class TestSession(NativeCase):
    def test_base_url_default_headers_params_auth(self):
        with Session(self.daemon.socket_path, base_url=self.srv.test_url + "/", headers={"X-Default": "d", "X-Gone": "g"},
                     params={"lang": "en"}, timeout=10) as s:
            r = s.get("/echo", params={"page": 2}, headers={"x-default": "override", "X-Gone": None})
            e = r.json()
            self.assertEqual(e["query"], "lang=en&page=2")
            names = {k.lower(): v for k, v in e["headers"]}
            self.assertEqual(names["x-default"], "override")
            self.assertNotIn("x-gone", names)
            s.headers["X-Later"] = "1"
            s.params["extra"] = "y"
            e = s.post("echo", json={"a": 1}).json()
            names = {k.lower(): v for k, v in e["headers"]}
            self.assertEqual((names["x-default"], names["x-later"], names["x-gone"]), ("d", "1", "g"))
            self.assertEqual(e["query"], "lang=en&extra=y")
            # An absolute URL ignores base_url.
            self.assertEqual(s.get(self.srv.nginx_url + "/small.txt").status_code, 200)
        with Session(self.daemon.socket_path, base_url=self.srv.test_url, auth=("ann", "pw")) as s:
            r = s.get("/basic-protected", params={"user": "ann", "password": "pw"})
            self.assertEqual(r.status_code, 200)
            path = os.path.join(self.tmp(), "dl.json")
            r = s.download("/json", path)
            self.assertEqual((r.status_code, r.path), (200, path))

    def test_threads_share_one_session(self):
        failures = []
        with Session(self.daemon.socket_path, base_url=self.srv.test_url, rpc_timeout=60) as s:
            def worker(t):
                try:
                    for n in range(5):
                        e = s.get("/echo", params={"t": t, "n": n}, headers={"X-T": str(t)}).json()
                        assert e["query"] == f"t={t}&n={n}", e["query"]
                        assert ["X-T", str(t)] in e["headers"]
                        assert s.post("/echo", data={"t": t}).json()["body"] == f"t={t}"
                except BaseException as e:
                    failures.append((t, repr(e)))
            threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        self.assertEqual(failures, [])


class TestDownload(NativeCase):
    def test_download_with_progress_streams_in_the_daemon(self):
        path = os.path.join(self.tmp(), "big.bin")
        seen = []
        r = self.c.download(self.url("/bytes/3000000"), path, progress=seen.append)
        want = testserver.det_bytes(3000000)
        self.assertEqual((r.status_code, r.path, r["bytes"]), (200, path, 3000000))
        self.assertEqual(r["sha256"], hashlib.sha256(want).hexdigest())
        self.assertTrue(seen)
        self.assertEqual(seen[-1]["receivedBytes"], 3000000)
        self.assertNotIn("body", r)
        self.assertNotIn("bodyBase64", r)   # the body went to the file, not over the socket
        with open(path, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), r["sha256"])

    def test_cancel_a_download_from_its_progress_callback(self):
        path = os.path.join(self.tmp(), "slow.bin")

        def stop(p):
            raise KeyboardInterrupt

        job = f"py-native-{key()}"
        with self.assertRaises(KeyboardInterrupt):
            self.c.download(self.url("/slow-body?chunks=100&ms=50"), path, progress=stop, job_id=job)
        wait_for(lambda: not self.live(job), timeout=10, message="the download was not cancelled")
        self.assertFalse(os.path.exists(path))


class TestAsyncClient(NativeCase):
    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 120))

    async def gone(self, job_id):
        """Waits (10 s at most) until the daemon no longer lists job_id."""
        for _ in range(200):
            if not self.live(job_id):
                return
            await asyncio.sleep(0.05)
        self.fail(f"the job {job_id} outlived its cancelled task")

    def test_many_concurrent_awaits_on_one_connection(self):
        async def main():
            async with AsyncClient(self.daemon.socket_path, base_url=self.srv.test_url) as c:
                self.assertEqual(await c.ping(), "pong")
                jobs = [c.get("/echo", params={"i": i}) for i in range(30)]
                jobs += [c.get("/slow-body?chunks=3&ms=100") for _ in range(5)]
                rs = await asyncio.gather(*jobs)
                for i, r in enumerate(rs[:30]):
                    self.assertEqual(r.json()["query"], f"i={i}")
                self.assertTrue(all(r.status_code == 200 for r in rs))
                self.assertEqual(len({r.job_id for r in rs}), 35)
                r = await c.post("/echo", json={"x": 1})
                self.assertEqual(json.loads(r.json()["body"]), {"x": 1})
                st = await c.status()
                self.assertEqual(st["pid"], self.daemon.pid)
        self.run_async(main())

    def test_progress_as_callback_and_as_async_iterator(self):
        async def main():
            async with AsyncClient(self.daemon.socket_path) as c:
                seen = []
                r = await c.get(self.url("/slow-body?chunks=5&ms=60"), progress=seen.append)
                self.assertEqual(r.status_code, 200)
                self.assertTrue(seen)
                self.assertEqual(seen[-1]["receivedBytes"], 5)
                path = os.path.join(self.tmp(), "a.bin")
                job = c.download(self.url("/slow-body?chunks=6&ms=60"), path)
                events = [e async for e in job]
                r = await job
                self.assertEqual((r.status_code, r.path), (200, path))
                self.assertTrue(events)
                self.assertTrue(all(e["jobId"] == job.job_id and e["method"] == "progress" for e in events))
                self.assertEqual(events[-1]["receivedBytes"], 6)
        self.run_async(main())

    def test_cancelling_the_awaiting_task_cancels_the_job(self):
        async def main():
            async with AsyncClient(self.daemon.socket_path) as c:
                job = c.get(self.url("/slow-body?chunks=200&ms=100"))

                async def waiter():
                    return await job

                task = asyncio.ensure_future(waiter())
                await asyncio.sleep(0.3)
                self.assertTrue(self.live(job.job_id))
                task.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task
                await self.gone(job.job_id)
                # A Task made straight from the job (ensure_future) cancels it as well.
                job1 = c.get(self.url("/slow-body?chunks=200&ms=100"))
                task1 = asyncio.ensure_future(job1)
                await asyncio.sleep(0.2)
                task1.cancel()
                with self.assertRaises(asyncio.CancelledError):
                    await task1
                await self.gone(job1.job_id)
                # wait_for running out cancels the job too.
                job2 = c.get(self.url("/slow-body?chunks=200&ms=100"))
                with self.assertRaises(asyncio.TimeoutError):
                    await asyncio.wait_for(job2, 0.3)
                await self.gone(job2.job_id)
                # job.cancel(): the await raises Cancelled.
                job3 = c.get(self.url("/slow-body?chunks=200&ms=100"))
                await asyncio.sleep(0.2)
                self.assertTrue(await job3.cancel())
                with self.assertRaises(Cancelled) as cm:
                    await job3
                self.assertEqual(cm.exception.by, "cancel")
                self.assertEqual(await c.ping(), "pong")
        self.run_async(main())

    def test_error_classes(self):
        async def main():
            with self.assertRaises(DaemonUnreachable):
                async with AsyncClient(os.path.join(self.tmp(), "none.sock")):
                    pass
            async with AsyncClient(self.daemon.socket_path, rpc_timeout=30) as c:
                with self.assertRaises(ServerUnreachable):
                    await c.get(f"http://127.0.0.1:{closed_port()}/", retry=False)
                with self.assertRaises(RequestTimeout):
                    await c.get(self.url("/slow-headers?ms=3000"), timeout=0.3, retry=False)
                with self.assertRaises(Timeout):
                    await c.get(self.url("/slow-body?chunks=50&ms=100"), rpc_timeout=0.2)
                with self.assertRaises(FileError) as cm:
                    await c.download(self.url("/json"), os.path.join(self.tmp(), "nodir", "x"))
                self.assertIn("nodir", str(cm.exception))
                r = await c.get(self.url("/status/500"), retry=False)
                with self.assertRaises(HTTPStatusError):
                    r.raise_for_status()
        self.run_async(main())

    def test_v2_methods(self):
        async def main():
            async with AsyncClient(self.daemon.socket_path) as c:
                stub_set = f"async-{key()}"
                sid = await c.add_stub({"url": "https://api.example.com/me"},
                                       {"json": {"name": "ann"}}, set=stub_set)
                self.assertTrue(sid)
                r = await c.get("https://api.example.com/me", stubs=stub_set)
                self.assertEqual(r.json(), {"name": "ann"})
                self.assertEqual((await c.get_stubs(stub_set))["stubs"][0]["hits"], 1)
                self.assertEqual(await c.remove_stubs(stub_set), 1)
                job = await c.get_job(r.job_id)
                self.assertEqual(job["jobId"], r.job_id)
                self.assertIsInstance(await c.get_auth(), list)
        self.run_async(main())


if __name__ == "__main__":
    unittest.main()
