"""responseBody "lines" (bodyLine) and "events" (sseEvent, Server-Sent Events with
reconnection) against the real daemon and the test server's /ndjson and /sse routes, and a
stub whose body is an event stream (protocol.md "Streaming bodies")."""
import json
import socket
import time
import urllib.parse
import urllib.request

from harness import DaemonTestCase
from jobhelpers import Collected, collect, collect_more, key, send_request
from test_streaming_fd import rss_mb

HEAD_KEYS = {"jobId", "status", "headers", "httpVersion", "url"}


def sse_log(srv, name):
    """The requests the test server's /sse/<name> saw: [{"lastEventId", "accept", "time"}]."""
    with urllib.request.urlopen(f"{srv.test_url}/sse-log/{name}", timeout=10) as r:
        return json.loads(r.read())["requests"]


class StreamingCase(DaemonTestCase):
    def stream(self, params, timeout=30, client=None):
        """Sends a fetch; returns (Collected, result or None, error or None)."""
        client = client or self.c
        rid = send_request(client, "fetch", params)
        got = collect(client, rid, timeout=timeout)
        return got, got.answer.get("result"), got.answer.get("error")

    def heads(self, got, job):
        heads = [p for _, p in got.of("responseHead", job)]
        for head in heads:
            self.assertEqual(set(head), HEAD_KEYS, head)
        return heads


class TestLines(StreamingCase):
    def test_ndjson_lines_in_order_with_lf(self):
        job = key("lines")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/ndjson?lines=5", "responseBody": "lines", "jobId": job})
        self.assertIsNone(error, got.answer)
        heads = self.heads(got, job)
        self.assertEqual(len(heads), 1, heads)
        self.assertEqual(heads[0]["status"], 200)
        self.assertEqual(heads[0]["headers"]["content-type"], "application/x-ndjson")
        lines = [p["line"] for _, p in got.of("bodyLine", job)]
        self.assertEqual([json.loads(line) for line in lines], [{"n": i, "text": f"line {i}"} for i in range(5)])
        # The head comes before the first line, every line before the result.
        order = [n["method"] for _, n in got.notes if n["params"].get("jobId") == job]
        self.assertEqual(order, ["responseHead"] + ["bodyLine"] * 5)
        self.assertEqual((result["status"], result["lines"]), (200, 5), result)
        self.assertFalse({"body", "bodyBase64", "json"} & set(result), result)

    def test_crlf_a_last_line_without_newline_and_lines_cut_across_pieces(self):
        for query in ("eol=crlf&unended=1", "eol=crlf&unended=1&chunk=5", "eol=lf&unended=1&chunk=3"):
            with self.subTest(query=query):
                job = key("crlf")
                got, result, error = self.stream({"url": f"{self.srv.test_url}/ndjson?lines=4&{query}",
                                                  "responseBody": "lines", "jobId": job})
                self.assertIsNone(error, got.answer)
                lines = [p["line"] for _, p in got.of("bodyLine", job)]
                self.assertEqual(lines, [json.dumps({"n": i, "text": f"line {i}"}) for i in range(4)])
                self.assertEqual(result["lines"], 4)

    def test_a_line_of_exactly_one_mebibyte_is_a_line(self):
        job = key("mib")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/ndjson?lines=1&long={1 << 20}&chunk=65536",
                                          "responseBody": "lines", "jobId": job}, timeout=60)
        self.assertIsNone(error, got.answer)
        lines = [p["line"] for _, p in got.of("bodyLine", job)]
        self.assertEqual([len(line) for line in lines], [1 << 20, len(json.dumps({"n": 0, "text": "line 0"}))])
        self.assertEqual(result["lines"], 2)

    def test_a_line_over_one_mebibyte_fails_with_kind_protocol(self):
        job = key("long")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/ndjson?lines=3&long={(1 << 20) + 1}&chunk=65536",
                                          "responseBody": "lines", "jobId": job}, timeout=60)
        self.assertIsNone(result, got.answer)
        self.assertEqual(error["code"], -32001, error)
        self.assertEqual(error["data"]["kind"], "protocol", error)
        self.assertIn("streamed", error["data"])
        self.assertEqual(got.of("bodyLine", job), [])
        self.assertAlive()

    def test_a_client_that_reads_late_pauses_its_lines_and_loses_none(self):
        n = 60000  # lines of about 1 KB: 62 MB, twice the connection's budget
        pid = self.daemon.proc.pid
        self.fetch({"url": f"{self.srv.test_url}/json"})
        base = rss_mb(pid)
        job = key("late")
        lazy = self.daemon.client()
        lazy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        rid = send_request(lazy, "fetch", {"url": f"{self.srv.test_url}/ndjson?lines={n}&pad=1000&chunk=65536",
                                           "responseBody": "lines", "jobId": job, "timeout": 300})
        peak = 0.0
        with self.daemon.client() as other:
            for _ in range(10):
                started = time.monotonic()
                self.assertEqual(other.call("ping", timeout=10), "pong")
                self.assertLess(time.monotonic() - started, 1.0, "another client waits for the one that does not read")
                peak = max(peak, rss_mb(pid))
                time.sleep(0.2)
            # The transfer stops where the budget is full, well before the end of the body.
            samples = []
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and (len(samples) < 2 or samples[-1] != samples[-2]):
                entry = [j for j in other.call("listJobs")["jobs"] if j["jobId"] == job]
                self.assertEqual(len(entry), 1, "the job should still be running, paused")
                samples.append(entry[0]["receivedBytes"])
                peak = max(peak, rss_mb(pid))
                time.sleep(0.5)
            self.assertEqual(samples[-1], samples[-2], f"the transfer should be paused: received {samples}")
            self.assertLess(samples[-1], 55 << 20, f"the transfer should be paused, not read to the end: {samples}")
        self.assertLess(peak - base, 64, f"RSS grew from {base:.1f} MiB to {peak:.1f} MiB")
        got = collect(lazy, rid, timeout=120)
        lazy.close()
        self.assertIn("result", got.answer, got.answer)
        numbers = [json.loads(p["line"])["n"] for _, p in got.of("bodyLine", job)]
        self.assertEqual(len(numbers), n)
        self.assertEqual(numbers, list(range(n)), "a line was lost or sent twice across the pauses")
        self.assertEqual(got.answer["result"]["lines"], n)

    def test_lines_of_a_stub_body(self):
        stub_set = key("set")
        url = "http://lines.invalid/log"
        self.c.call("addStub", {"set": stub_set, "match": {"url": url},
                                "respond": {"headers": {"Content-Type": "text/plain"}, "body": "one\r\ntwo\n\nthree"}})
        job = key("stublines")
        got, result, error = self.stream({"url": url, "stubs": stub_set, "responseBody": "lines", "jobId": job})
        self.assertIsNone(error, got.answer)
        self.assertEqual([p["line"] for _, p in got.of("bodyLine", job)], ["one", "two", "", "three"])
        self.assertEqual(len(self.heads(got, job)), 1)
        self.assertEqual(result["lines"], 4)


class TestEvents(StreamingCase):
    def events_of(self, got, job):
        events = [p for _, p in got.of("sseEvent", job)]
        for event in events:
            self.assertLessEqual(set(event), {"jobId", "event", "data", "id"}, event)
        return events

    def test_events_in_order_then_a_204_stops(self):
        name = key("sse")
        job = key("events")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/sse/{name}?events=5&retry=50&data=2",
                                          "responseBody": "events", "jobId": job})
        self.assertIsNone(error, got.answer)
        events = self.events_of(got, job)
        self.assertEqual(events, [{"jobId": job, "event": "tick", "data": f"event {n}\nline 2 of {n}", "id": str(n)}
                                  for n in range(1, 6)])
        self.assertEqual((result["status"], result["events"], result["reconnects"], result["bytes"]), (204, 5, 1, 0), result)
        self.assertFalse({"body", "bodyBase64"} & set(result), result)
        heads = self.heads(got, job)
        self.assertEqual([h["status"] for h in heads], [200])
        self.assertEqual(heads[0]["headers"]["content-type"], "text/event-stream")
        log = sse_log(self.srv, name)
        self.assertEqual([r["lastEventId"] for r in log], [None, "5"])
        self.assertEqual(log[0]["accept"], "text/event-stream")

    def test_a_dropped_connection_reconnects_with_last_event_id_after_the_servers_retry(self):
        for drop in ("end", "cut", "reset"):
            with self.subTest(drop=drop):
                name = key("drop")
                job = key("events")
                got, result, error = self.stream({"url": f"{self.srv.test_url}/sse/{name}?events=6&per=2&retry=300&drop={drop}",
                                                  "responseBody": "events", "jobId": job})
                self.assertIsNone(error, got.answer)
                self.assertEqual([e["id"] for e in self.events_of(got, job)], ["1", "2", "3", "4", "5", "6"])
                self.assertEqual((result["status"], result["events"], result["reconnects"]), (204, 6, 3), result)
                # Each connection's head, and the last answer (the 204) is the result.
                self.assertEqual([h["status"] for h in self.heads(got, job)], [200, 200, 200])
                log = sse_log(self.srv, name)
                self.assertEqual([r["lastEventId"] for r in log], [None, "2", "4", "6"])
                gaps = [b["time"] - a["time"] for a, b in zip(log, log[1:])]
                self.assertTrue(all(gap >= 0.29 for gap in gaps), f"reconnected sooner than the server's retry: {gaps}")

    def test_a_redirect_to_an_event_stream(self):
        name = key("moved")
        job = key("events")
        target = urllib.parse.quote(f"/sse/{name}?events=2&retry=20", safe="")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/redirect-to?url={target}",
                                          "responseBody": "events", "jobId": job})
        self.assertIsNone(error, got.answer)
        self.assertEqual([e["data"] for e in self.events_of(got, job)], ["event 1", "event 2"])
        heads = self.heads(got, job)
        self.assertEqual([h["status"] for h in heads], [200])
        self.assertIn(f"/sse/{name}", heads[0]["url"])
        self.assertEqual((result["status"], result["events"], result["reconnects"]), (204, 2, 1), result)
        # The reconnection asks the request's own URL again, and is redirected again.
        self.assertEqual([r["lastEventId"] for r in sse_log(self.srv, name)], [None, "2"])

    def test_without_retry_the_wait_is_one_second(self):
        name = key("default")
        job = key("events")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/sse/{name}?events=1",
                                          "responseBody": "events", "jobId": job})
        self.assertIsNone(error, got.answer)
        self.assertEqual((result["status"], result["events"], result["reconnects"]), (204, 1, 1), result)
        log = sse_log(self.srv, name)
        self.assertEqual(len(log), 2)
        self.assertGreaterEqual(log[1]["time"] - log[0]["time"], 0.95)

    def test_a_reconnection_answered_with_an_error_status_is_the_result(self):
        name = key("fail")
        job = key("events")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/sse/{name}?events=2&retry=20&done=500",
                                          "responseBody": "events", "jobId": job})
        self.assertIsNone(error, got.answer)
        self.assertEqual((result["status"], result["events"], result["reconnects"]), (500, 2, 1), result)
        self.assertEqual(result.get("body"), "status 500", result)
        self.assertEqual(len(sse_log(self.srv, name)), 2, "a 500 after a stream is not retried")

    def test_an_answer_that_is_no_event_stream_is_the_result(self):
        job = key("json")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/json", "responseBody": "events", "jobId": job})
        self.assertIsNone(error, got.answer)
        self.assertEqual((result["status"], result["events"], result["reconnects"]), (200, 0, 0), result)
        self.assertEqual(json.loads(result["body"]), {"hello": "world", "n": [1, 2, 3]})
        self.assertEqual(self.events_of(got, job), [])

    def test_the_first_request_is_retried_as_any_request(self):
        name = key("first")
        job = key("events")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/sse/{name}?events=2&retry=20&first=503&retry-after=0",
                                          "responseBody": "events", "jobId": job, "retry": {"delay": 0.05}})
        self.assertIsNone(error, got.answer)
        self.assertEqual((result["status"], result["events"], result["reconnects"]), (204, 2, 1), result)
        self.assertEqual([r["lastEventId"] for r in sse_log(self.srv, name)], [None, None, "2"])

    def test_max_time_ends_an_endless_stream(self):
        name = key("endless")
        job = key("events")
        t0 = time.monotonic()
        got, result, error = self.stream({"url": f"{self.srv.test_url}/sse/{name}?events=100000&ms=50",
                                          "responseBody": "events", "jobId": job, "maxTime": 1})
        self.assertIsNone(result, got.answer)
        self.assertEqual((error["code"], error["data"]["kind"]), (-32001, "timeout"), error)
        self.assertGreater(error["data"]["streamed"], 0, error)
        self.assertLess(time.monotonic() - t0, 5)
        events = self.events_of(got, job)
        self.assertGreater(len(events), 5)
        self.assertEqual([e["id"] for e in events], [str(n) for n in range(1, len(events) + 1)])

    def test_cancel_ends_a_stream_and_a_reconnection_wait(self):
        for query in ("events=100000&ms=50", "events=1&retry=60000"):
            with self.subTest(query=query):
                name = key("cancel")
                job = key("events")
                rid = send_request(self.c, "fetch", {"url": f"{self.srv.test_url}/sse/{name}?{query}",
                                                     "responseBody": "events", "jobId": job})
                got = collect_more(self.c, Collected(), lambda g: bool(g.of("sseEvent", job)), timeout=10)
                with self.daemon.client() as other:
                    self.assertEqual(other.call("cancel", {"jobId": job})["cancelled"], True)
                answer = next((m for m in got.others if m.get("id") == rid), None) or collect(self.c, rid, timeout=10).answer
                self.assertEqual(answer["error"]["code"], -32002, answer)

    def test_a_stub_event_stream_reconnects_with_last_event_id(self):
        stub_set = key("set")
        url = "https://llm.invalid/v1/chat"
        tokens = ["Hel", "lo", ",", " wor", "ld"]
        body = "retry: 10\n" + "".join(f"id: {i}\nevent: token\ndata: {{\"t\": {json.dumps(t)}}}\n\n"
                                       for i, t in enumerate(tokens, 1))
        self.c.call("addStub", {"set": stub_set, "match": {"url": url, "headers": {"Last-Event-ID": "5"}},
                                "respond": {"status": 204}})
        self.c.call("addStub", {"set": stub_set, "match": {"url": url}, "times": 1,
                                "respond": {"headers": {"Content-Type": "text/event-stream"}, "body": body}})
        job = key("stubsse")
        got, result, error = self.stream({"url": url, "stubs": stub_set, "responseBody": "events", "jobId": job})
        self.assertIsNone(error, got.answer)
        events = self.events_of(got, job)
        self.assertEqual("".join(json.loads(e["data"])["t"] for e in events), "Hello, world")
        self.assertEqual({e["event"] for e in events}, {"token"})
        self.assertEqual((result["status"], result["events"], result["reconnects"]), (204, 5, 1), result)

    def test_events_without_ids_have_no_id(self):
        stub_set = key("set")
        url = "https://plain.invalid/stream"
        self.c.call("addStub", {"set": stub_set, "match": {"url": url}, "times": 1,
                                "respond": {"headers": {"Content-Type": "text/event-stream; charset=utf-8"},
                                            "body": ": hi\n\ndata: a\n\nevent: x\ndata: b\r\ndata: c\r\n\r\n"}})
        self.c.call("addStub", {"set": stub_set, "match": {"url": url}, "respond": {"status": 204}})
        job = key("noid")
        got, result, error = self.stream({"url": url, "stubs": stub_set, "responseBody": "events", "jobId": job,
                                          "headers": {"Accept": "text/event-stream"}})
        self.assertIsNone(error, got.answer)
        self.assertEqual(self.events_of(got, job), [{"jobId": job, "event": "message", "data": "a"},
                                                    {"jobId": job, "event": "x", "data": "b\nc"}])


class TestEventsThroughHostLimits(StreamingCase):
    def test_reconnections_wait_for_the_hosts_rate_limit(self):
        host = self.srv.test_url.split("//", 1)[1]
        self.c.call("setRateLimit", {"host": host, "requestsPerSecond": 2, "burst": 1})
        name = key("limited")
        job = key("events")
        got, result, error = self.stream({"url": f"{self.srv.test_url}/sse/{name}?events=3&per=1&retry=0",
                                          "responseBody": "events", "jobId": job})
        self.assertIsNone(error, got.answer)
        self.assertEqual((result["events"], result["reconnects"]), (3, 3), result)
        log = sse_log(self.srv, name)
        self.assertEqual([r["lastEventId"] for r in log], [None, "1", "2", "3"])
        gaps = [b["time"] - a["time"] for a, b in zip(log, log[1:])]
        self.assertTrue(all(gap >= 0.4 for gap in gaps), f"reconnections passed the host's 2 requests/s: {gaps}")
