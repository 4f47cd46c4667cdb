"""Streaming bodies in the clients (Python, Node.js, C) against the real daemon, nginx (large
bodies) and the test server (slow bodies, NDJSON, Server-Sent Events with drops): each idiom a
user of requests, httpx, fetch or libcurl types first, the LLM-style token stream of
docs/clients.md answered by a stub, and a passed pipe nobody reads while other clients keep
being served (protocol.md "Streaming bodies")."""
import asyncio
import io
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

from harness import REPO, big_bin, sha256, wait_for
from jobhelpers import key
import test_c_client
from test_c_client import _have_toolchain, _make
from test_node_client import NODE, _node_major
from test_python_client import ClientTestCase  # puts clients/python on sys.path
from test_streaming_fd import read_all

from fetchd_client import (AsyncClient, Cancelled, Client, HTTPStatusError, ServerSentEvent,  # noqa: E402
                           StreamingResponse, TransportError)

#: A sparse file served by nginx: large enough that nobody's buffers hold it.
HUGE = 200 * 1024 * 1024
#: What a paused transfer may have taken in: the connection's body budget (32 MiB), the
#: engine's buffer and the sockets' and the pipe's.
PAUSED = 48 * 1024 * 1024
#: The LLM-style token stream of docs/clients.md, as a stub answers it.
TOKENS = ["Hel", "lo", ",", " wor", "ld", "!"]


def llm_body():
    return "".join(f"id: {i}\ndata: {json.dumps({'token': t})}\n\n" for i, t in enumerate(TOKENS, 1)) \
        + "data: [DONE]\n\n"


def add_llm_stubs(client, stub_set, url):
    """The token stream once, then 204: the daemon's reconnection ends there."""
    client.add_stub({"url": url}, {"headers": {"Content-Type": "text/event-stream"}, "body": llm_body()},
                    set=stub_set, times=1)
    client.add_stub({"url": url}, {"status": 204}, set=stub_set)


def huge_url(srv):
    path = os.path.join(srv.static_dir, "huge.bin")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.truncate(HUGE)
    return srv.nginx_url + "/huge.bin"


class StreamingClientCase(ClientTestCase):
    def url(self, path):
        return self.srv.test_url + path

    def tmp(self):
        return tempfile.mkdtemp(dir=self.daemon.tmpdir)

    def live(self, job_id):
        return any(j["jobId"] == job_id for j in self.c.list_jobs())


class TestPythonResponses(StreamingClientCase):
    def test_stream_true_hands_out_the_head_then_each_piece_as_it_arrives(self):
        t0 = time.monotonic()
        r = self.c.get(self.url("/slow-body?chunks=5&ms=200"), stream=True)
        head_at = time.monotonic() - t0
        self.assertIsInstance(r, StreamingResponse)
        self.assertEqual((r.status_code, r.headers["Content-Length"]), (200, "5"))
        self.assertLess(head_at, 0.6, "the head waited for the body")
        self.assertNotIn("bytes", r)               # the result comes at the end
        arrivals = []
        for chunk in r.iter_content(chunk_size=None):
            arrivals.append((time.monotonic() - t0, chunk))
        self.assertEqual(b"".join(c for _, c in arrivals), b"xxxxx")
        self.assertGreaterEqual(len(arrivals), 3, arrivals)
        self.assertGreater(arrivals[-1][0] - arrivals[0][0], 0.5, "the pieces came together at the end")
        self.assertEqual((r["bytes"], r["attempts"], r.num_bytes_downloaded), (5, 1, 5))
        self.assertTrue(r.is_stream_consumed)

    def test_iter_content_chunk_size_over_a_large_body_from_nginx(self):
        with self.c.get(self.srv.nginx_url + "/big.bin", stream=True) as r:
            chunks = list(r.iter_content(65536))
        self.assertEqual(b"".join(chunks), big_bin())
        self.assertEqual({len(c) for c in chunks[:-1]}, {65536})
        self.assertLessEqual(len(chunks[-1]), 65536)

    def test_raw_is_a_file_object(self):
        r = self.c.get(self.srv.nginx_url + "/big.bin", stream=True)
        self.assertEqual(r.raw.read(10), big_bin()[:10])
        out = io.BytesIO()
        shutil.copyfileobj(r.raw, out)
        self.assertEqual(out.getvalue(), big_bin()[10:])
        r.close()

    def test_iter_lines_bytes_as_requests_and_str_as_httpx(self):
        want = [json.dumps({"n": i, "text": f"line {i}"}) for i in range(4)]
        r = self.c.get(self.url("/ndjson?lines=4&eol=crlf&chunk=7"), stream=True)
        self.assertEqual(list(r.iter_lines()), [w.encode() for w in want])
        with self.c.stream("GET", self.url("/ndjson?lines=4&unended=1")) as r:
            self.assertEqual(r.status_code, 200)
            self.assertEqual(list(r.iter_lines()), want)
        with self.c.stream("GET", self.url("/ndjson?lines=2")) as r:
            self.assertEqual(r.read(), "".join(w + "\n" for w in want[:2]).encode())
            self.assertEqual([json.loads(x) for x in r.text.splitlines()], [{"n": 0, "text": "line 0"},
                                                                            {"n": 1, "text": "line 1"}])

    def test_response_body_lines_is_the_daemons_own_split(self):
        r = self.c.fetch(self.url("/ndjson?lines=3&eol=crlf&unended=1"), response_body="lines")
        self.assertEqual([json.loads(x)["n"] for x in r.iter_lines()], [0, 1, 2])
        self.assertEqual(r["lines"], 3)

    def test_a_whole_response_has_the_same_methods(self):
        r = self.c.get(self.url("/ndjson?lines=2"))
        self.assertNotIsInstance(r, StreamingResponse)
        self.assertEqual(len(list(r.iter_lines())), 2)
        self.assertEqual(b"".join(r.iter_content(3)), r.content)

    def test_closing_before_the_end_cancels_the_job_and_the_client_goes_on(self):
        job = key("py-close")
        r = self.c.get(self.url("/slow-body?chunks=100&ms=50"), stream=True, job_id=job)
        self.assertEqual(next(r.iter_content(None)), b"x")
        self.assertTrue(self.live(job))
        r.close()
        wait_for(lambda: not self.live(job), timeout=10, message="the job outlived its closed response")
        self.assertEqual(self.c.get(self.url("/json")).json()["hello"], "world")

    def test_a_progress_callback_that_raises_cancels_the_job(self):
        job = key("py-callback")

        def stop(progress):
            if progress["receivedBytes"] >= 3:       # after the head, during the body
                raise KeyError("enough")
        r = self.c.get(self.url("/slow-body?chunks=50&ms=50"), stream=True, job_id=job, on_progress=stop)
        with self.assertRaises(KeyError):
            r.content
        self.assertTrue(r.is_closed)
        wait_for(lambda: not self.live(job), timeout=10, message="the job outlived its callback")

    def test_a_failure_after_the_head_raises_from_the_read(self):
        r = self.c.get(self.url("/reset-mid-body"), stream=True)
        self.assertEqual(r.status_code, 200)
        with self.assertRaises(TransportError) as cm:
            r.content
        self.assertEqual(cm.exception.data.get("streamed"), 1000, cm.exception.data)


class TestPythonEvents(StreamingClientCase):
    def test_events_across_dropped_connections(self):
        name = key("py-sse")
        with self.c.events(self.url(f"/sse/{name}?events=5&per=2&retry=50&data=2")) as events:
            self.assertEqual(events.response.status_code, 200)        # the first answer's head
            self.assertEqual(events.response.headers["Content-Type"], "text/event-stream")
            got = list(events)
            self.assertEqual(events.last_event_id, "5")
        self.assertEqual([(e.event, e.id) for e in got], [("tick", str(i)) for i in range(1, 6)])
        self.assertEqual(got[0].data, "event 1\nline 2 of 1")
        # Two events a connection, then the 204 that ends it: three reconnections.
        self.assertEqual((events.result["status"], events.result["events"], events.result["reconnects"]),
                         (204, 5, 3), events.result)

    def test_an_error_status_raises_after_the_loop(self):
        with self.assertRaises(HTTPStatusError) as cm:
            for _ in self.c.events(self.url(f"/sse/{key('py-401')}?events=2&first=401")):
                pass
        self.assertEqual(cm.exception.status_code, 401)

    def test_llm_token_stream_from_a_stub(self):
        url = "https://llm.example/v1/chat/completions"
        with self.c.stub_set() as stubs:
            add_llm_stubs(self.c, stubs.name, url)
            text = ""
            with self.c.events(url, json={"prompt": "hi", "stream": True}, stubs=stubs.name) as events:
                for ev in events:
                    if ev.data == "[DONE]":
                        break
                    text += ev.json()["token"]
            self.assertEqual(text, "Hello, world!")
            self.assertEqual(stubs.stubs()[0]["hits"], 1)
            self.assertEqual(ServerSentEvent("message", "x"), ServerSentEvent(data="x"))


class TestPythonAsync(StreamingClientCase):
    def test_async_stream_events_and_stream_true(self):
        name = key("py-async-sse")

        async def main():
            async with AsyncClient(self.daemon.socket_path, rpc_timeout=60) as ac:
                async with ac.stream("GET", self.srv.nginx_url + "/big.bin") as r:
                    self.assertEqual(r.status_code, 200)
                    body = b"".join([chunk async for chunk in r.aiter_bytes()])
                r = await ac.get(self.url("/ndjson?lines=3"), stream=True)
                lines = [line async for line in r.aiter_lines()]
                events = [ev async for ev in ac.events(self.url(f"/sse/{name}?events=3&per=2&retry=50"))]
                url = "https://llm.example/async"
                await ac.add_stub({"url": url}, {"headers": {"Content-Type": "text/event-stream"},
                                                 "body": llm_body()}, set=name)
                tokens = []
                async with ac.events(url, stubs=name) as es:
                    async for ev in es:
                        if ev.data == "[DONE]":
                            break
                        tokens.append(ev.json()["token"])
                await ac.remove_stubs(set=name)
                return body, lines, events, "".join(tokens)

        body, lines, events, text = asyncio.run(main())
        self.assertEqual(sha256(body), sha256(big_bin()))
        self.assertEqual([json.loads(x)["n"] for x in lines], [0, 1, 2])
        self.assertEqual([e.id for e in events], ["1", "2", "3"])
        self.assertEqual(text, "Hello, world!")

    def test_async_to_a_file_and_data_from_an_async_generator(self):
        path = os.path.join(self.tmp(), "big.bin")

        async def parts():
            for i in range(3):
                await asyncio.sleep(0.01)
                yield f"part {i};".encode()

        async def main():
            async with AsyncClient(self.daemon.socket_path, rpc_timeout=60) as ac:
                with open(path, "wb") as f:
                    r = await ac.get(self.srv.nginx_url + "/big.bin", to=f)
                e = await ac.post(self.url("/echo"), data=parts())
                return r, e.json()

        r, echo = asyncio.run(main())
        self.assertEqual((r["bytes"], r["sha256"]), (len(big_bin()), sha256(big_bin())))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), big_bin())
        self.assertEqual(echo["body"], "part 0;part 1;part 2;")


class TestPythonDescriptors(StreamingClientCase):
    def test_to_a_file_object_and_to_a_pipe(self):
        path = os.path.join(self.tmp(), "out.bin")
        with open(path, "wb") as f:
            f.write(b"kept:")                       # written before: the body goes after it
            r = self.c.get(self.srv.nginx_url + "/big.bin", to=f)
        self.assertEqual((r.status_code, r["bytes"], r["sha256"], r.content),
                         (200, len(big_bin()), sha256(big_bin()), b""))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"kept:" + big_bin())
        read_fd, write_fd = os.pipe()
        got = []
        reader = threading.Thread(target=lambda: got.append(read_all(read_fd)))
        reader.start()
        try:
            r = self.c.get(self.url("/bytes/300000"), to=write_fd)
        finally:
            os.close(write_fd)
            reader.join(30)
        self.assertEqual(got, [self.c.get(self.url("/bytes/300000")).content])
        self.assertEqual(r["sha256"], sha256(got[0]))

    def test_data_from_a_generator_a_pipe_and_a_file_not_at_its_start(self):
        def parts():
            for i in range(3):
                yield f"part {i};"
        e = self.c.post(self.url("/echo"), data=parts()).json()
        self.assertEqual((e["method"], e["body"]), ("POST", "part 0;part 1;part 2;"))
        self.assertTrue(any(k.lower() == "transfer-encoding" and v == "chunked" for k, v in e["headers"]), e)
        read_fd, write_fd = os.pipe()
        writer = threading.Thread(target=lambda: (os.write(write_fd, b"through a pipe"), os.close(write_fd)))
        writer.start()
        with os.fdopen(read_fd, "rb") as p:
            e = self.c.put(self.url("/echo"), data=p).json()
        writer.join()
        self.assertEqual((e["method"], e["body"]), ("PUT", "through a pipe"))
        path = os.path.join(self.tmp(), "body.txt")
        with open(path, "wb") as f:
            f.write(b"skip:the rest")
        with open(path, "rb") as f:
            f.read(5)
            e = self.c.post(self.url("/echo"), data=f).json()
        self.assertEqual(e["body"], "the rest")
        self.assertTrue(any(k.lower() == "content-length" and v == "8" for k, v in e["headers"]), e)

    def test_a_generator_that_raises_cancels_the_job_and_raises(self):
        job = key("py-gen")

        def parts():
            yield b"first;"
            time.sleep(0.2)
            raise ValueError("no more data")
        with self.assertRaises(ValueError) as cm:
            self.c.post(self.url("/echo"), data=parts(), job_id=job)
        self.assertIsInstance(cm.exception.__cause__, Cancelled)
        self.assertFalse(self.live(job))
        self.assertEqual(self.c.ping(), "pong")


class TestNobodyReads(StreamingClientCase):
    def received(self, job):
        return [j for j in self.c.list_jobs() if j["jobId"] == job][0]["receivedBytes"]

    def assertPaused(self, earlier, later):
        """A second later the transfer has taken in (next to) nothing more, and no more than
        a paused one may."""
        self.assertLess(later, PAUSED, f"the transfer went on with nobody reading ({earlier}, then {later} bytes)")
        self.assertLess(later - earlier, 1 << 20, f"the transfer went on with nobody reading ({earlier}, then {later})")

    def test_a_passed_pipe_nobody_reads_pauses_that_job_only(self):
        url = huge_url(self.srv)
        job = key("unread-pipe")
        read_fd, write_fd = os.pipe()
        outcome = []

        def run():
            try:
                with Client(self.daemon.socket_path) as c:
                    outcome.append(c.get(url, to=write_fd, job_id=job))
            except BaseException as e:  # noqa: BLE001 - handed to the test
                outcome.append(e)
        t = threading.Thread(target=run)
        t.start()
        try:
            wait_for(lambda: self.live(job), timeout=10)
            time.sleep(1.0)
            received = self.received(job)
            # Other clients, and this one, are served meanwhile.
            t0 = time.monotonic()
            with Client(self.daemon.socket_path) as other:
                for _ in range(20):
                    self.assertEqual(other.get(self.url("/json")).status_code, 200)
            self.assertEqual(self.c.get(self.srv.nginx_url + "/small.txt").status_code, 200)
            self.assertLess(time.monotonic() - t0, 10)
            time.sleep(1.0)
            self.assertPaused(received, self.received(job))
        finally:
            os.close(read_fd)       # the reader is gone: the daemon's next write fails
            t.join(30)
            os.close(write_fd)
        self.assertEqual(len(outcome), 1)
        self.assertIsInstance(outcome[0], TransportError, outcome)
        self.assertEqual(outcome[0].kind, "write", outcome[0].data)

    def test_a_streamed_response_nobody_reads_leaves_the_client_usable(self):
        job = key("unread-stream")
        r = self.c.get(huge_url(self.srv), stream=True, job_id=job)
        self.assertEqual(r.status_code, 200)
        for _ in range(10):
            self.assertEqual(self.c.get(self.url("/json")).status_code, 200)
        time.sleep(1.0)
        received = self.received(job)
        time.sleep(1.0)
        self.assertPaused(received, self.received(job))
        self.assertEqual(len(r.raw.read(1 << 20)), 1 << 20)
        r.close()
        wait_for(lambda: not self.live(job), timeout=10)


@unittest.skipUnless(_node_major() >= 18, "needs Node.js 18 or later")
class TestNodeStreaming(StreamingClientCase):
    def test_node_streaming_suite(self):
        env = dict(os.environ, FETCHD_SOCKET=self.daemon.socket_path, FETCHD_TEST_URL=self.srv.test_url,
                   FETCHD_NGINX_URL=self.srv.nginx_url, FETCHD_BIG_SHA256=sha256(big_bin()),
                   FETCHD_HUGE_URL=huge_url(self.srv))
        r = subprocess.run([NODE, "--test", "--test-reporter=spec", "test-streaming/"],
                           cwd=os.path.join(REPO, "clients", "node"), env=env, capture_output=True,
                           text=True, timeout=300)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, out[-8000:])
        summary = [line.strip("ℹ ").strip() for line in r.stdout.splitlines()
                   if line.lstrip("ℹ ").startswith(("tests", "pass", "fail"))]
        print("\n  node --test test-streaming: " + ", ".join(summary), end=" ... ", flush=True)
        self.assertIn("fail 0", summary, out[-3000:])


@unittest.skipUnless(_have_toolchain(), "needs cc, make, pkg-config and libjansson-dev")
class TestCStreaming(StreamingClientCase):
    check = test_c_client.TestCClient.assert_passed   # exit 0 and ", 0 failed", as the C client's tests

    def build(self, *args):
        out = tempfile.mkdtemp(prefix="fetchd-cstream-")
        self.addCleanup(shutil.rmtree, out, True)
        _make(f"O={out}", *args, "test-program")
        return os.path.join(out, "tests", "test_streaming")

    @unittest.skipUnless(shutil.which("valgrind"), "valgrind is not installed")
    def test_c_streaming_under_valgrind(self):
        program = self.build()
        r = subprocess.run(["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
                            "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=1",
                            program, self.daemon.socket_path, self.srv.test_url, self.tmp()],
                           capture_output=True, text=True, timeout=300)
        self.check(r, "test_streaming under valgrind")
        self.assertIn("ERROR SUMMARY: 0 errors", r.stderr, r.stderr[-3000:])

    def test_c_streaming_with_address_sanitizer(self):
        program = self.build("SANITIZE=address")
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=1")
        r = subprocess.run([program, self.daemon.socket_path, self.srv.test_url, self.tmp()],
                           capture_output=True, text=True, timeout=300, env=env)
        self.check(r, "test_streaming with ASan")
        self.assertNotIn("AddressSanitizer", r.stderr)


if __name__ == "__main__":
    unittest.main()
