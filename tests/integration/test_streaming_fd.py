"""Streaming bodies through descriptors and notifications (protocol.md "Streaming bodies"):
`bodyTo: "fd"` and `bodyFrom: "fd"` with descriptors passed by SCM_RIGHTS on the request
line (socket.send_fds), and `responseBody: "stream"` (responseHead, bodyChunk), against the
real daemon, nginx (large files) and the test server (resets, slow and echoed bodies)."""
import base64
import hashlib
import json
import os
import socket
import threading
import time

from harness import DaemonTestCase, RPCError, testserver, wait_for
from jobhelpers import collect, key, send_request


def send_with_fds(client, method, params, fds, req_id=None):
    """Sends one request line with `fds` attached to its first byte (one sendmsg); its id."""
    if req_id is None:
        req_id = client.new_id()
    msg = {"jsonrpc": "2.0", "method": method, "id": req_id}
    if params is not None:
        msg["params"] = params
    line = json.dumps(msg).encode() + b"\n"
    client.sock.settimeout(30)
    sent = socket.send_fds(client.sock, [line], fds)
    if sent < len(line):
        client.sock.sendall(line[sent:])
    return req_id


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def zeros_sha256(size):
    h = hashlib.sha256()
    block = bytes(1 << 20)
    while size > 0:
        h.update(block[:min(size, len(block))])
        size -= len(block)
    return h.hexdigest()


def read_all(fd):
    out = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(out)
        out.append(b)


class FdCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.opened = []

    def tearDown(self):
        for fd in self.opened:
            try:
                os.close(fd)
            except OSError:
                pass
        super().tearDown()

    def pipe(self):
        r, w = os.pipe()
        self.opened += [r, w]
        return r, w

    def close(self, fd):
        self.opened.remove(fd)
        os.close(fd)

    def sparse(self, name, size):
        """A file of `size` zero bytes that nginx serves (sparse: no disk)."""
        path = os.path.join(self.srv.static_dir, name)
        with open(path, "wb") as f:
            f.truncate(size)
        return f"{self.srv.nginx_url}/{name}"

    def answer(self, req_id, timeout=60, client=None):
        a = (client or self.c).answer_for(req_id, timeout=timeout)
        return a.get("result"), a.get("error")

    def assert_closed_by_daemon(self, read_end, timeout=10):
        """The daemon's copy of a write end is closed: the reader sees the end of the pipe."""
        deadline = time.monotonic() + timeout
        os.set_blocking(read_end, False)
        while True:
            try:
                if os.read(read_end, 1 << 20) == b"":
                    return
            except BlockingIOError:
                pass
            if time.monotonic() > deadline:
                self.fail("the daemon still holds the pipe's write end")
            time.sleep(0.01)


class TestBodyTo(FdCase):
    def test_gib_into_a_slow_pipe_keeps_rss_bounded(self):
        size = 1 << 30
        url = self.sparse("gib.bin", size)
        pid = self.daemon.proc.pid
        self.fetch({"url": f"{self.srv.nginx_url}/small.txt"})
        base = rss_mb(pid)
        r, w = self.pipe()
        rid = send_with_fds(self.c, "fetch", {"url": url, "bodyTo": "fd"}, [w])
        self.close(w)
        peak = 0.0
        # Nobody reads for a while: the transfer is paused, the daemon holds a few MiB.
        for _ in range(15):
            time.sleep(0.1)
            peak = max(peak, rss_mb(pid))
        # A slow reader (64 KiB every 5 ms), then one at full speed.
        h = hashlib.sha256()
        got = 0
        slow_until = time.monotonic() + 1.0
        while True:
            if time.monotonic() < slow_until:
                b = os.read(r, 64 << 10)
                time.sleep(0.005)
            else:
                b = os.read(r, 1 << 20)
            if not b:
                break
            h.update(b)
            got += len(b)
            if got % (32 << 20) < len(b):
                peak = max(peak, rss_mb(pid))
        result, error = self.answer(rid)
        self.assertIsNone(error)
        self.assertEqual(got, size)
        self.assertEqual(result["bytes"], size)
        self.assertEqual(result["sha256"], h.hexdigest())
        self.assertEqual(result["sha256"], zeros_sha256(size))
        self.assertNotIn("body", result)
        self.assertNotIn("bodyBase64", result)
        self.assertLess(peak - base, 48, f"RSS grew from {base:.1f} MiB to {peak:.1f} MiB")

    def test_exact_bytes_and_descriptor_closed(self):
        r, w = self.pipe()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.nginx_url}/big.bin", "bodyTo": "fd"}, [w])
        self.close(w)
        data = read_all(r)  # the end comes once the daemon has closed its copy
        result, error = self.answer(rid)
        self.assertIsNone(error)
        self.assertEqual(data, testserver.det_bytes(5 * 1024 * 1024, seed=4242))
        self.assertEqual(result["sha256"], hashlib.sha256(data).hexdigest())

    def test_descriptor_flags_unchanged(self):
        r, w = self.pipe()
        before = os.get_blocking(w)
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/bytes/300000", "bodyTo": "fd"}, [w])
        data = b""
        while len(data) < 300000:
            data += os.read(r, 1 << 20)
        result, error = self.answer(rid)
        self.assertIsNone(error)
        # The file description is shared: the daemon never made it non-blocking.
        self.assertEqual(os.get_blocking(w), before)
        self.assertTrue(before)

    def test_reader_gone_is_kind_write(self):
        r, w = self.pipe()
        self.close(r)  # nobody will ever read: the first write fails with EPIPE
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.nginx_url}/big.bin", "bodyTo": "fd"}, [w])
        self.close(w)
        result, error = self.answer(rid)
        self.assertIsNotNone(error, result)
        self.assertEqual(error["code"], -32001, error)
        self.assertEqual(error["data"]["kind"], "write", error)
        self.assertIn("EPIPE", error["data"]["detail"])
        self.assertAlive()

    def test_a_reader_that_does_not_read_pauses_only_its_transfer(self):
        url = self.sparse("stuck.bin", 64 << 20)
        r, w = self.pipe()
        job = key("stuck")
        rid = send_with_fds(self.c, "fetch", {"url": url, "bodyTo": "fd", "jobId": job}, [w])
        self.close(w)
        time.sleep(0.5)  # the pipe and the writer's backlog fill up; nobody reads
        with self.daemon.client() as other:
            for _ in range(5):
                started = time.monotonic()
                r2 = other.call("fetch", {"url": f"{self.srv.test_url}/json"}, timeout=10)
                self.assertEqual(r2["status"], 200)
                self.assertLess(time.monotonic() - started, 2.0)
            jobs = other.call("listJobs")
            self.assertIn(job, [j["jobId"] for j in jobs["jobs"]])
            # Cancelled from another connection: answered at once, though nobody reads.
            self.assertTrue(other.call("cancel", {"jobId": job})["cancelled"])
        result, error = self.answer(rid, timeout=10)
        self.assertIsNotNone(error, result)
        self.assertEqual(error["code"], -32002, error)
        self.assert_closed_by_daemon(r)

    def test_no_retry_once_bytes_were_written(self):
        r, w = self.pipe()
        got = []
        reader = threading.Thread(target=lambda: got.append(read_all(r)))
        reader.start()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/reset-mid-body", "bodyTo": "fd",
                                              "retry": {"maxAttempts": 3, "delay": 0.05}}, [w])
        self.close(w)
        result, error = self.answer(rid)
        reader.join(10)
        self.assertIsNotNone(error, result)
        self.assertEqual(error["code"], -32001, error)
        self.assertEqual(error["data"]["attempts"], 1, error)
        self.assertEqual(error["data"]["streamed"], 1000, error)
        self.assertEqual(got, [b"x" * 1000])

    def test_a_retried_status_is_not_written(self):
        name = key("flaky")
        r, w = self.pipe()
        got = []
        reader = threading.Thread(target=lambda: got.append(read_all(r)))
        reader.start()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/flaky/{name}?fail=1",
                                              "bodyTo": "fd", "retry": {"delay": 0.05}}, [w])
        self.close(w)
        result, error = self.answer(rid)
        reader.join(10)
        self.assertIsNone(error)
        self.assertEqual(result["attempts"], 2)
        self.assertEqual(got, [b"ok after 1"])  # the 503's body never reached the descriptor
        self.assertEqual(result["bytes"], len(b"ok after 1"))

    def test_into_a_regular_file(self):
        path = os.path.join(self.daemon.tmpdir, "out.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.opened.append(fd)
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.nginx_url}/big.bin", "bodyTo": "fd"}, [fd])
        result, error = self.answer(rid)
        self.assertIsNone(error)
        with open(path, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), result["sha256"])
        self.assertEqual(result["bytes"], 5 * 1024 * 1024)


class TestBodyFrom(FdCase):
    def feed(self, w, data, chunk=65536, pause=0.0):
        def run():
            for i in range(0, len(data), chunk):
                os.write(w, data[i:i + chunk])
                if pause:
                    time.sleep(pause)
            self.close(w)
        t = threading.Thread(target=run)
        t.start()
        return t

    def test_pipe_sent_chunked(self):
        data = testserver.det_bytes(3 << 20, seed=7)
        r, w = self.pipe()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/echo", "bodyFrom": "fd"}, [r])
        self.close(r)
        writer = self.feed(w, data, pause=0.001)
        result, error = self.answer(rid)
        writer.join(10)
        self.assertIsNone(error)
        echo = json.loads(result["body"])
        self.assertEqual(echo["method"], "POST")
        self.assertEqual(echo["bodyLength"], len(data))
        self.assertEqual(echo["bodySha256"], hashlib.sha256(data).hexdigest())
        headers = {k.lower(): v for k, v in echo["headers"]}
        self.assertEqual(headers.get("transfer-encoding"), "chunked")
        self.assertNotIn("content-length", headers)
        self.assertEqual(headers.get("content-type"), "application/octet-stream")

    def test_body_size_sends_content_length(self):
        data = testserver.det_bytes(200000, seed=8)
        r, w = self.pipe()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/echo", "bodyFrom": "fd",
                                              "bodySize": len(data), "method": "PUT",
                                              "headers": {"Content-Type": "application/x-test"}}, [r])
        self.close(r)
        writer = self.feed(w, data)
        result, error = self.answer(rid)
        writer.join(10)
        self.assertIsNone(error)
        echo = json.loads(result["body"])
        headers = {k.lower(): v for k, v in echo["headers"]}
        self.assertEqual(echo["method"], "PUT")
        self.assertEqual(headers.get("content-length"), str(len(data)))
        self.assertNotIn("transfer-encoding", headers)
        self.assertEqual(headers.get("content-type"), "application/x-test")
        self.assertEqual(echo["bodySha256"], hashlib.sha256(data).hexdigest())

    def test_early_end_is_kind_read(self):
        r, w = self.pipe()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/echo", "bodyFrom": "fd",
                                              "bodySize": 100000}, [r])
        self.close(r)
        os.write(w, b"only this")
        self.close(w)
        result, error = self.answer(rid)
        self.assertIsNotNone(error, result)
        self.assertEqual(error["code"], -32001, error)
        self.assertEqual(error["data"]["kind"], "read", error)
        self.assertIn("9 of the 100000", error["data"]["detail"])

    def test_both_descriptors_in_order_from_then_to(self):
        data = testserver.det_bytes(100000, seed=9)
        body_r, body_w = self.pipe()
        out_r, out_w = self.pipe()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/echo", "bodyFrom": "fd", "bodyTo": "fd"},
                            [body_r, out_w])
        self.close(body_r)
        self.close(out_w)
        writer = self.feed(body_w, data)
        out = read_all(out_r)
        result, error = self.answer(rid)
        writer.join(10)
        self.assertIsNone(error)
        echo = json.loads(out)
        self.assertEqual(echo["bodySha256"], hashlib.sha256(data).hexdigest())
        self.assertEqual(result["sha256"], hashlib.sha256(out).hexdigest())

    def test_a_body_from_a_descriptor_is_not_sent_twice(self):
        name = key("once")
        r, w = self.pipe()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/flaky-body/{name}?fail=1",
                                              "bodyFrom": "fd", "retry": {"maxAttempts": 3, "delay": 0.05}}, [r])
        self.close(r)
        os.write(w, b"payload")
        self.close(w)
        result, error = self.answer(rid)
        self.assertIsNone(error)
        self.assertEqual(result["status"], 503)  # final: the body cannot be read again
        self.assertEqual(result["attempts"], 1)


class TestDescriptorsOnTheLine(FdCase):
    def test_missing_descriptor(self):
        for field in ("bodyTo", "bodyFrom"):
            with self.assertRaises(RPCError) as cm:
                self.c.call("fetch", {"url": f"{self.srv.test_url}/json", field: "fd"})
            self.assertEqual(cm.exception.code, -32602)
            self.assertEqual(cm.exception.data["field"], field)

    def test_bad_values(self):
        for params, field in (({"bodyTo": "stdout"}, "bodyTo"), ({"bodySize": 3}, "bodySize"),
                              ({"bodyFrom": "fd", "body": "x"}, "bodyFrom")):
            with self.assertRaises(RPCError) as cm:
                self.c.call("fetch", {"url": f"{self.srv.test_url}/json", **params})
            self.assertEqual(cm.exception.code, -32602, params)
            self.assertEqual(cm.exception.data["field"], field, params)

    def test_unused_descriptors_are_closed(self):
        before = self.daemon.fd_count()
        r, w = self.pipe()
        rid = send_with_fds(self.c, "ping", None, [w])
        self.close(w)
        self.assertEqual(self.c.answer_for(rid)["result"], "pong")
        self.assert_closed_by_daemon(r)
        # A request that takes one descriptor closes the other.
        r2, w2 = self.pipe()
        r3, w3 = self.pipe()
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/json", "bodyTo": "fd"}, [w2, w3])
        self.close(w2)
        self.close(w3)
        self.assertEqual(json.loads(read_all(r2)), json.loads(json.dumps(testserver.JSON_DOC)))
        self.assertIsNone(self.answer(rid)[1])
        self.assert_closed_by_daemon(r3)
        wait_for(lambda: self.daemon.fd_count() <= before, message="the daemon holds more descriptors than before")

    def test_descriptor_goes_with_its_own_line(self):
        # Two lines back to back, the descriptor on the second: only the second takes it.
        r, w = self.pipe()
        first = {"jsonrpc": "2.0", "id": 1, "method": "fetch", "params": {"url": f"{self.srv.test_url}/json"}}
        second = {"jsonrpc": "2.0", "id": 2, "method": "fetch",
                  "params": {"url": f"{self.srv.test_url}/bytes/1000", "bodyTo": "fd"}}
        self.c.sock.sendall(json.dumps(first).encode() + b"\n")
        socket.send_fds(self.c.sock, [json.dumps(second).encode() + b"\n"], [w])
        self.close(w)
        self.assertEqual(read_all(r), testserver.det_bytes(1000))
        self.assertEqual(self.c.answer_for(1)["result"]["status"], 200)
        self.assertEqual(self.c.answer_for(2)["result"]["bytes"], 1000)

    def test_descriptors_held_per_connection_are_bounded(self):
        # 12 descriptors held by a line still in flight (its request takes none).
        held = [self.pipe() for _ in range(12)]
        slow = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/slow-headers?ms=3000"}, [w for _, w in held])
        # 6 more on the next line, also in flight: 4 fit under the bound of 16, the first of
        # them goes to bodyTo; the last 2 are closed on arrival.
        more = [self.pipe() for _ in range(6)]
        rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.test_url}/slow-headers?ms=3000", "bodyTo": "fd"},
                            [w for _, w in more])
        for _, w in held + more:
            self.close(w)
        for r, _ in more[4:]:
            self.assert_closed_by_daemon(r, timeout=1)
        for r, _ in held + more[:4]:
            os.set_blocking(r, False)
            with self.assertRaises(BlockingIOError):
                os.read(r, 1)
            os.set_blocking(r, True)
        self.assertEqual(read_all(more[0][0]), b"slow")
        self.assertIsNone(self.answer(rid)[1])
        self.assertEqual(self.answer(slow)[0]["status"], 200)
        for r, _ in held + more[1:4]:
            self.assert_closed_by_daemon(r)

    def test_a_batch_takes_no_descriptor(self):
        r, w = self.pipe()
        batch = [{"jsonrpc": "2.0", "id": 1, "method": "fetch",
                  "params": {"url": f"{self.srv.test_url}/json", "bodyTo": "fd"}}]
        self.c.sock.settimeout(30)
        socket.send_fds(self.c.sock, [json.dumps(batch).encode() + b"\n"], [w])
        self.close(w)
        answers = self.c.recv(timeout=30)
        self.assertEqual(answers[0]["error"]["data"]["field"], "bodyTo")
        self.assert_closed_by_daemon(r)


class TestStreamMode(FdCase):
    def stream(self, params, client=None, timeout=60):
        client = client or self.c
        rid = send_request(client, "fetch", params)
        got = collect(client, rid, timeout=timeout)
        return got, got.answer.get("result"), got.answer.get("error")

    def reassemble(self, got, job):
        data = bytearray()
        for _, p in got.of("bodyChunk", job):
            self.assertEqual(p["offset"], len(data))
            data += base64.b64decode(p["dataBase64"])
        return bytes(data)

    def test_chunks_reassemble_exactly(self):
        job = key("stream")
        got, result, error = self.stream({"url": f"{self.srv.nginx_url}/big.bin", "responseBody": "stream", "jobId": job})
        self.assertIsNone(error)
        heads = got.of("responseHead", job)
        self.assertEqual(len(heads), 1)
        head = heads[0][1]
        self.assertEqual(set(head), {"jobId", "status", "headers", "httpVersion", "url"})
        self.assertEqual(head["status"], 200)
        self.assertEqual(head["headers"]["content-length"], str(5 * 1024 * 1024))
        # The head comes before every chunk, and every chunk before the answer.
        self.assertLessEqual(heads[0][0], got.of("bodyChunk", job)[0][0])
        data = self.reassemble(got, job)
        self.assertEqual(data, testserver.det_bytes(5 * 1024 * 1024, seed=4242))
        self.assertEqual(result["bytes"], len(data))
        for member in ("body", "bodyBase64", "json"):
            self.assertNotIn(member, result)

    def test_redirects_followed_send_the_last_head(self):
        job = key("redirect")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/redirect/2", "responseBody": "stream", "jobId": job})
        self.assertIsNone(error)
        heads = [p for _, p in got.of("responseHead", job)]
        self.assertEqual([(h["status"], h["url"]) for h in heads], [(200, f"{self.srv.test_url}/redirect/0")])
        self.assertEqual(self.reassemble(got, job), b"done")
        self.assertEqual(result["redirects"], 2)

    def test_retried_status_sends_one_head(self):
        name = key("flaky")
        job = key("stream")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/flaky/{name}?fail=1", "responseBody": "stream",
                                          "jobId": job, "retry": {"delay": 0.05}})
        self.assertIsNone(error)
        self.assertEqual([p["status"] for _, p in got.of("responseHead", job)], [200])
        self.assertEqual(self.reassemble(got, job), b"ok after 1")
        self.assertEqual(result["attempts"], 2)

    def test_no_retry_after_the_head(self):
        job = key("reset")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/reset-mid-body", "responseBody": "stream",
                                          "jobId": job, "retry": {"maxAttempts": 3, "delay": 0.05}})
        self.assertIsNotNone(error, result)
        self.assertEqual(error["code"], -32001)
        self.assertEqual(error["data"]["attempts"], 1)
        self.assertEqual(error["data"]["streamed"], 1000)
        self.assertEqual(len(got.of("responseHead", job)), 1)
        self.assertEqual(self.reassemble(got, job), b"x" * 1000)

    def test_a_stubs_body_streams(self):
        stubs = key("set")
        body = "".join(f"line {i}\n" for i in range(20000))
        self.c.call("addStub", {"set": stubs, "match": {"url": f"{self.srv.test_url}/stubbed"},
                                "respond": {"status": 201, "body": body, "headers": {"Content-Type": "text/plain"}}})
        try:
            job = key("stub")
            got, result, error = self.stream({"url": f"{self.srv.test_url}/stubbed", "responseBody": "stream",
                                              "stubs": stubs, "jobId": job})
        finally:
            self.c.call("removeStubs", {"set": stubs})
        self.assertIsNone(error)
        self.assertEqual([p["status"] for _, p in got.of("responseHead", job)], [201])
        self.assertGreater(len(got.of("bodyChunk", job)), 1)
        self.assertEqual(self.reassemble(got, job), body.encode())
        self.assertEqual(result["bytes"], len(body))

    def test_progress_still_comes(self):
        job = key("progress")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/slow-body?chunks=5&ms=150",
                                          "responseBody": "stream", "progress": True, "jobId": job})
        self.assertIsNone(error)
        self.assertTrue(got.of("progress", job))
        self.assertEqual(self.reassemble(got, job), b"xxxxx")

    def test_http_log_counts_the_streamed_bytes(self):
        logdir = os.path.join(self.daemon.tmpdir, "har-stream")
        self.c.call("setLogging", {"enabled": True, "directory": logdir})
        try:
            job = key("har")
            got, result, error = self.stream({"url": f"{self.srv.nginx_url}/big.bin", "responseBody": "stream", "jobId": job})
            self.assertIsNone(error)
            r, w = self.pipe()
            job2 = key("har")
            rid = send_with_fds(self.c, "fetch", {"url": f"{self.srv.nginx_url}/big.bin", "bodyTo": "fd", "jobId": job2}, [w])
            self.close(w)
            read_all(r)
            self.assertIsNone(self.answer(rid)[1])

            def entry(job_id):
                names = [n for n in os.listdir(logdir) if job_id in n] if os.path.isdir(logdir) else []
                if not names:
                    return None
                with open(os.path.join(logdir, names[0])) as f:
                    return json.load(f)["log"]["entries"][-1]
            for job_id in (job, job2):
                har = wait_for(lambda: entry(job_id), message=f"no HAR file for {job_id}")
                self.assertEqual(har["response"]["content"]["size"], 5 * 1024 * 1024)
                self.assertEqual(har["response"]["bodySize"], 5 * 1024 * 1024)
        finally:
            self.c.call("setLogging", {"enabled": False})

    def test_stream_is_fetch_only(self):
        with self.assertRaises(RPCError) as cm:
            self.c.call("upload", {"url": f"{self.srv.test_url}/multipart-echo", "files": [], "responseBody": "stream"})
        self.assertEqual(cm.exception.code, -32602)
        self.assertEqual(cm.exception.data["field"], "responseBody")

    def test_a_client_that_never_reads_200mb(self):
        url = self.sparse("twohundred.bin", 200 << 20)
        pid = self.daemon.proc.pid
        self.fetch({"url": f"{self.srv.nginx_url}/small.txt"})
        base = rss_mb(pid)
        job = key("noread")
        lazy = self.daemon.client()
        lazy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        send_request(lazy, "fetch", {"url": url, "responseBody": "stream", "jobId": job})
        peak = 0.0
        with self.daemon.client() as other:
            # Another client is served as usual meanwhile.
            for _ in range(10):
                started = time.monotonic()
                self.assertEqual(other.call("fetch", {"url": f"{self.srv.nginx_url}/big.bin", "responseBody": "none"},
                                            timeout=10)["status"], 200)
                self.assertLess(time.monotonic() - started, 2.0)
                peak = max(peak, rss_mb(pid))
                time.sleep(0.2)
            state = [j for j in other.call("listJobs")["jobs"] if j["jobId"] == job]
            self.assertEqual(len(state), 1, "the stream should still be running, paused")
            received = state[0].get("receivedBytes")
            self.assertLess(received, 150 << 20, "the transfer should be paused, not read to the end")
            self.assertTrue(other.call("cancel", {"jobId": job})["cancelled"])
        lazy.close()
        self.assertLess(peak - base, 64, f"RSS grew from {base:.1f} MiB to {peak:.1f} MiB (received {received})")
        self.assertAlive()
