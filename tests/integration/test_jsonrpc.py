"""JSON-RPC 2.0 over newline-delimited JSON: the specification's own examples adapted to
fetchd's methods, ids, error codes, framing, batches, notifications, half-close."""
import json
import os
import time
import unittest

from harness import Daemon, DaemonTestCase, servers, wait_for

STD_KEYS_OK = {"jsonrpc", "id", "result"}
STD_KEYS_ERR = {"jsonrpc", "id", "error"}


class JSONRPCCase(DaemonTestCase):
    def assertResult(self, answer, req_id, result=None):
        self.assertIsInstance(answer, dict, answer)
        self.assertEqual(set(answer), STD_KEYS_OK, f"answer keys: {answer}")
        self.assertEqual(answer["jsonrpc"], "2.0")
        self.assertEqual(answer["id"], req_id)
        self.assertIs(type(answer["id"]), type(req_id), f"id type changed: {answer}")
        if result is not None:
            self.assertEqual(answer["result"], result)

    def assertError(self, answer, code, req_id=None):
        self.assertIsInstance(answer, dict, f"expected one error object, got {answer}")
        self.assertEqual(set(answer), STD_KEYS_ERR, f"answer keys: {answer}")
        self.assertEqual(answer["jsonrpc"], "2.0")
        err = answer["error"]
        self.assertEqual(err.get("code"), code, f"wrong error code in {answer}")
        self.assertIsInstance(err.get("message"), str)
        self.assertTrue(err["message"], "error message must not be empty")
        self.assertLessEqual(set(err), {"code", "message", "data"}, answer)
        self.assertEqual(answer["id"], req_id, f"wrong id in {answer}")
        if req_id is not None:
            self.assertIs(type(answer["id"]), type(req_id))
        return err

    def raw(self, line, timeout=10):
        """Send one raw line, return the next message."""
        if isinstance(line, str):
            line = line.encode()
        self.c.send_raw(line + b"\n")
        return self.c.recv(timeout)

    def nextIsPing(self, req_id="after"):
        """The next message on this connection is the answer to a fresh ping (so nothing
        was sent for whatever came before)."""
        self.c.send_obj({"jsonrpc": "2.0", "method": "ping", "id": req_id})
        m = self.c.recv(10)
        self.assertResult(m, req_id, "pong")


class TestBasics(JSONRPCCase):
    def test_ping(self):
        a = self.raw('{"jsonrpc": "2.0", "method": "ping", "id": 1}')
        self.assertResult(a, 1, "pong")

    def test_answer_is_one_compact_line(self):
        self.c.send_raw(b'{"jsonrpc":"2.0","method":"ping","id":7}\n')
        line = self.c.recv_line()
        self.assertTrue(line.endswith(b"\n"))
        self.assertNotIn(b"\n", line[:-1].rstrip(b"\r"))
        body = line.rstrip(b"\r\n")
        self.assertNotIn(b": ", body, f"not compact: {line!r}")
        self.assertNotIn(b", ", body, f"not compact: {line!r}")
        self.assertEqual(json.loads(body), {"jsonrpc": "2.0", "result": "pong", "id": 7})

    def test_params_empty_object_and_absent(self):
        self.assertResult(self.raw('{"jsonrpc":"2.0","method":"ping","params":{},"id":2}'), 2, "pong")
        self.assertResult(self.raw('{"jsonrpc":"2.0","method":"ping","id":3}'), 3, "pong")

    def test_crlf_and_blank_lines(self):
        self.c.send_raw(b"\n\r\n\n")
        self.assertResult(self.raw('{"jsonrpc":"2.0","method":"ping","id":"crlf"}\r'), "crlf", "pong")
        # nothing was answered for the blank lines
        self.nextIsPing()

    def test_get_status_shape(self):
        st = self.c.call("getStatus")
        for k in ("version", "pid", "uptimeSeconds", "connections", "jobs", "logging"):
            self.assertIn(k, st, st)
        self.assertIsInstance(st["version"], str)
        self.assertTrue(st["version"])
        self.assertEqual(st["pid"], self.daemon.pid)
        self.assertIsInstance(st["uptimeSeconds"], (int, float))  # its value: TestUptime
        self.assertIsInstance(st["connections"], int)
        self.assertGreaterEqual(st["connections"], 1)
        self.assertEqual(set(st["jobs"]), {"queued", "running", "waiting", "finished", "failed"}, st)
        for v in st["jobs"].values():
            self.assertIsInstance(v, int)
            self.assertGreaterEqual(v, 0)
        self.assertIsInstance(st["logging"].get("enabled"), bool, st)
        self.assertIn("directory", st["logging"])

    def test_connections_counted(self):
        # assumption: a closed connection stops being counted promptly; earlier tests'
        # connections are closed, so only this test's own client remains
        wait_for(lambda: self.c.call("getStatus")["connections"] == 1, 5,
                 message="getStatus.connections did not settle at 1 (this client only)")
        extra = [self.daemon.client() for _ in range(3)]
        for e in extra:
            e.call("ping")
        self.assertEqual(self.c.call("getStatus")["connections"], 4)
        for e in extra:
            e.close()
        wait_for(lambda: self.c.call("getStatus")["connections"] == 1, 5,
                 message="connections count did not go back down after closing clients")


def process_age(pid):
    """Seconds since the process started, from /proc (clock ticks: 10 ms steps)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_ticks = int(fields[19])  # field 22, starttime, counted from field 3
    with open("/proc/uptime") as f:
        system_uptime = float(f.read().split()[0])
    return system_uptime - start_ticks / os.sysconf("SC_CLK_TCK")


class TestUptime(unittest.TestCase):
    """getStatus.uptimeSeconds against the process's age and against a known gap."""
    TICK = 0.02  # /proc's clock-tick steps and the answer's millisecond rounding

    def test_uptime_is_the_process_age(self):
        with Daemon() as d, d.client() as c:
            startup = process_age(d.pid)  # from exec until the socket accepted
            time.sleep(0.5)  # a known gap: the age must be far from zero when it is compared
            before = process_age(d.pid)
            up = c.call("getStatus")["uptimeSeconds"]
            after = process_age(d.pid)
            self.assertLessEqual(up, after + self.TICK, f"uptime {up} s, longer than the process has lived ({after} s)")
            self.assertGreaterEqual(up, before - startup - self.TICK,
                                    f"uptime {up} s, but the process is {before} s old and accepted after {startup} s")

    def test_uptime_advances_with_the_clock(self):
        with Daemon() as d, d.client() as c:
            a0 = time.monotonic()
            u0 = c.call("getStatus")["uptimeSeconds"]
            b0 = time.monotonic()
            time.sleep(0.3)  # a known gap between the two readings
            a1 = time.monotonic()
            u1 = c.call("getStatus")["uptimeSeconds"]
            b1 = time.monotonic()
            self.assertGreaterEqual(u1 - u0, a1 - b0 - 0.002, f"uptime {u0} -> {u1} over at least {a1 - b0:.3f} s")
            self.assertLessEqual(u1 - u0, b1 - a0 + 0.002, f"uptime {u0} -> {u1} over at most {b1 - a0:.3f} s")


class TestIds(JSONRPCCase):
    def test_ids_echoed_exactly(self):
        ids = ["abc", "", "1", "ïd-😀", 'quote"back\\slash\ttab', 0, 1, -7, 2**31, 2**53 + 1,
               -(2**62), 9223372036854775807, 1.5, -0.25, None]
        for i in ids:
            with self.subTest(id=i):
                self.c.send_obj({"jsonrpc": "2.0", "method": "ping", "id": i})
                self.assertResult(self.c.recv(), i, "pong")

    def test_int_id_stays_int(self):
        self.c.send_raw(b'{"jsonrpc":"2.0","method":"ping","id":42}\n')
        line = self.c.recv_line()
        self.assertIn(b'"id":42', line.replace(b" ", b""), f"id not echoed as 42: {line!r}")
        self.assertNotIn(b"42.0", line)

    def test_unicode_escape_id(self):
        a = self.raw('{"jsonrpc":"2.0","method":"ping","id":"\\u00e9\\ud83d\\ude00"}')
        self.assertResult(a, "é😀", "pong")

    def test_invalid_id_types(self):
        # JSON-RPC: id is a string, number or null. Anything else is an invalid request,
        # and since its id can't be echoed it is answered with id null.
        for bad in ("{}", "[]", "true", '{"a":1}'):
            with self.subTest(id=bad):
                a = self.raw('{"jsonrpc":"2.0","method":"ping","id":%s}' % bad)
                self.assertError(a, -32600, None)
        self.assertAlive()


class TestSpecExamples(JSONRPCCase):
    """https://www.jsonrpc.org/specification section 7, adapted to fetchd's methods."""

    def test_notification_not_answered(self):
        self.c.send_raw(b'{"jsonrpc":"2.0","method":"ping"}\n')
        self.c.send_raw(b'{"jsonrpc":"2.0","method":"getStatus","params":{}}\n')
        self.nextIsPing()

    def test_notification_of_unknown_method_not_answered(self):
        self.c.send_raw(b'{"jsonrpc":"2.0","method":"foobar"}\n')
        self.nextIsPing()

    def test_notification_with_bad_params_not_answered(self):
        self.c.send_raw(b'{"jsonrpc":"2.0","method":"fetch","params":{"url":5}}\n')
        self.nextIsPing()

    def test_method_not_found(self):
        self.assertError(self.raw('{"jsonrpc": "2.0", "method": "foobar", "id": "1"}'), -32601, "1")
        self.assertError(self.raw('{"jsonrpc":"2.0","method":"rpc.discover","id":2}'), -32601, 2)
        self.assertError(self.raw('{"jsonrpc":"2.0","method":"PING","id":3}'), -32601, 3)
        self.nextIsPing()

    def test_invalid_json(self):
        a = self.raw('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
        self.assertError(a, -32700, None)
        self.nextIsPing()

    def test_invalid_request_object(self):
        a = self.raw('{"jsonrpc": "2.0", "method": 1, "params": "bar"}')
        self.assertError(a, -32600, None)
        self.nextIsPing()

    def test_batch_invalid_json(self):
        a = self.raw('[ {"jsonrpc": "2.0", "method": "ping", "params": [1,2,4], "id": "1"},'
                     ' {"jsonrpc": "2.0", "method" ]')
        self.assertError(a, -32700, None)
        self.nextIsPing()

    def test_empty_array(self):
        a = self.raw("[]")
        self.assertIsInstance(a, dict, f"[] must get one error object, not {a!r}")
        self.assertError(a, -32600, None)
        self.nextIsPing()

    def test_invalid_batch_one(self):
        a = self.raw("[1]")
        self.assertIsInstance(a, list, a)
        self.assertEqual(len(a), 1)
        self.assertError(a[0], -32600, None)

    def test_invalid_batch_three(self):
        a = self.raw("[1,2,3]")
        self.assertIsInstance(a, list, a)
        self.assertEqual(len(a), 3, a)
        for x in a:
            self.assertError(x, -32600, None)
        self.nextIsPing()

    def test_mixed_batch(self):
        batch = [
            {"jsonrpc": "2.0", "method": "ping", "id": "1"},
            {"jsonrpc": "2.0", "method": "ping"},  # notification
            {"jsonrpc": "2.0", "method": "getStatus", "params": {}, "id": "2"},
            {"foo": "boo"},
            {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
            {"jsonrpc": "2.0", "method": "ping", "id": 9},
        ]
        self.c.send_obj(batch)
        a = self.c.recv()
        self.assertIsInstance(a, list, a)
        self.assertEqual(len(a), 5, f"5 answers expected (no answer for the notification): {a}")
        by_id = {}
        for x in a:
            by_id.setdefault(json.dumps(x.get("id")), []).append(x)
        self.assertResult(by_id['"1"'][0], "1", "pong")
        self.assertResult(by_id['"2"'][0], "2")
        self.assertIn("version", by_id['"2"'][0]["result"])
        self.assertError(by_id["null"][0], -32600, None)
        self.assertError(by_id['"5"'][0], -32601, "5")
        self.assertResult(by_id["9"][0], 9, "pong")
        self.nextIsPing()

    def test_all_notification_batch_gets_no_answer(self):
        self.c.send_raw(b'[{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","method":"getStatus"},'
                        b'{"jsonrpc":"2.0","method":"nope"}]\n')
        self.nextIsPing()

    def test_batch_of_one_request_is_array(self):
        a = self.raw('[{"jsonrpc":"2.0","method":"ping","id":1}]')
        self.assertIsInstance(a, list, a)
        self.assertEqual(len(a), 1)
        self.assertResult(a[0], 1, "pong")

    def test_missing_or_wrong_jsonrpc_member(self):
        # The request is invalid; the spec lets the id be echoed when it could be read.
        for line in ('{"method":"ping","id":1}', '{"jsonrpc":"1.0","method":"ping","id":1}',
                     '{"jsonrpc":2.0,"method":"ping","id":1}'):
            with self.subTest(line=line):
                a = self.raw(line)
                self.assertIn("error", a, a)
                self.assertEqual(a["error"]["code"], -32600, a)
                self.assertIn(a["id"], (1, None), a)
        self.nextIsPing()

    def test_missing_method(self):
        a = self.raw('{"jsonrpc":"2.0","id":1}')
        self.assertEqual(a.get("error", {}).get("code"), -32600, a)
        self.nextIsPing()

    def test_non_object_messages(self):
        for line in ('"ping"', "42", "null", "true"):
            with self.subTest(line=line):
                self.assertError(self.raw(line), -32600, None)
        self.nextIsPing()

    def test_params_not_structured(self):
        # JSON-RPC: params MUST be an object or array. Either -32600 (not a valid Request
        # object) or -32602 (invalid params) is defensible; it must be an error.
        a = self.raw('{"jsonrpc":"2.0","method":"fetch","params":"http://x/","id":1}')
        self.assertIn(a.get("error", {}).get("code"), (-32600, -32602), a)
        self.nextIsPing()

    def test_invalid_params_has_field(self):
        a = self.raw('{"jsonrpc":"2.0","method":"fetch","params":{"url":5},"id":"p"}')
        err = self.assertError(a, -32602, "p")
        self.assertEqual(err["data"]["field"], "url", err)
        self.assertIsInstance(err["data"]["detail"], str)
        self.nextIsPing()


class TestFraming(JSONRPCCase):
    def test_many_messages_in_one_write(self):
        n = 200
        self.c.send_raw(b"".join(b'{"jsonrpc":"2.0","method":"ping","id":%d}\n' % i for i in range(n)))
        got = set()
        for _ in range(n):
            m = self.c.recv()
            self.assertEqual(m.get("result"), "pong", m)
            got.add(m["id"])
        self.assertEqual(got, set(range(n)))

    def test_byte_by_byte(self):
        data = b'{"jsonrpc":"2.0","method":"ping","id":"bytewise"}\n'
        for b in data:
            self.c.send_raw(bytes([b]))
        self.assertResult(self.c.recv(), "bytewise", "pong")

    def test_message_split_across_writes_with_next_one(self):
        self.c.send_raw(b'{"jsonrpc":"2.0","meth')
        self.c.send_raw(b'od":"ping","id":1}\n{"jsonrpc":"2.0","method":"ping","id":2}\n{"jsonrpc"')
        self.c.send_raw(b':"2.0","method":"ping","id":3}\n')
        self.assertEqual(sorted(self.c.recv()["id"] for _ in range(3)), [1, 2, 3])

    def test_invalid_utf8(self):
        a = self.raw(b'{"jsonrpc":"2.0","method":"ping","id":"\xff\xfe"}')
        self.assertError(a, -32700, None)
        self.nextIsPing()

    def test_trailing_garbage_and_two_values(self):
        for line in ('{"jsonrpc":"2.0","method":"ping","id":1} x',
                     '{"jsonrpc":"2.0","method":"ping","id":1}{"jsonrpc":"2.0","method":"ping","id":2}'):
            with self.subTest(line=line):
                self.assertError(self.raw(line), -32700, None)
        self.nextIsPing()

    def test_whitespace_inside_json_is_fine(self):
        a = self.raw('  { "jsonrpc" : "2.0" ,\t"method" : "ping" , "id" : 5 }  ')
        self.assertResult(a, 5, "pong")

    def test_answers_in_any_order_slow_fetch_does_not_block_ping(self):
        url = servers().test_url + "/slow-headers?ms=1500"
        self.c.send_obj({"jsonrpc": "2.0", "method": "fetch", "params": {"url": url, "retry": False},
                         "id": "slow"})
        self.c.send_obj({"jsonrpc": "2.0", "method": "ping", "id": "fast"})
        first = self.c.recv(10)
        self.assertEqual(first.get("id"), "fast", "a ping waited behind a slow fetch on the same connection")
        second = self.c.recv(20)
        self.assertEqual(second.get("id"), "slow")
        self.assertEqual(second["result"]["status"], 200, second)

    def test_half_close_flushes_every_answer(self):
        url = servers().test_url + "/slow-headers?ms=500"
        self.c.send_raw(
            b'{"jsonrpc":"2.0","method":"ping","id":1}\n'
            + json.dumps({"jsonrpc": "2.0", "method": "fetch", "params": {"url": url, "retry": False},
                          "id": 2}).encode() + b"\n"
            + b'[{"jsonrpc":"2.0","method":"ping","id":3},{"jsonrpc":"2.0","method":"nope","id":4}]\n'
            + b'{"jsonrpc":"2.0","method":"ping"}\n')
        self.c.shutdown_write()
        msgs = self.c.recv_until_eof(20)
        self.assertEqual(len(msgs), 3, msgs)
        singles = {m["id"]: m for m in msgs if isinstance(m, dict)}
        batches = [m for m in msgs if isinstance(m, list)]
        self.assertEqual(singles[1]["result"], "pong")
        self.assertEqual(singles[2]["result"]["status"], 200, singles[2])
        self.assertEqual(len(batches), 1)
        self.assertEqual(sorted(x["id"] for x in batches[0]), [3, 4])

    def test_half_close_with_unterminated_last_line(self):
        # assumption: a final line without its newline at EOF is still a message (as most
        # line readers treat it); either way the connection must be closed, not hang.
        self.c.send_raw(b'{"jsonrpc":"2.0","method":"ping","id":1}\n{"jsonrpc":"2.0","method":"ping","id":2}')
        self.c.shutdown_write()
        msgs = self.c.recv_until_eof(10)
        ids = sorted(m["id"] for m in msgs)
        self.assertIn(1, ids)
        self.assertIn(ids, ([1], [1, 2]))


class TestMessageLimit(JSONRPCCase):
    DAEMON_ARGS = ("--max-message-bytes", "1024")

    def padded_ping(self, size, req_id):
        base = {"jsonrpc": "2.0", "method": "ping", "id": req_id, "params": {}}
        s = json.dumps(base, separators=(",", ":"))
        pad = size - len(s)
        assert pad >= 0
        return (s[:-1] + " " * pad + "}").encode()  # whitespace padding keeps it valid

    def test_oversize_line_answered_and_connection_usable(self):
        self.c.send_raw(self.padded_ping(5000, "big") + b"\n")
        a = self.c.recv()
        err = self.assertError(a, -32006, None)
        self.assertEqual(err.get("data", {}).get("limit"), 1024, err)
        self.nextIsPing()

    def test_under_limit_ok(self):
        self.c.send_raw(self.padded_ping(1000, "ok") + b"\n")
        self.assertResult(self.c.recv(), "ok", "pong")

    def test_oversize_line_in_pieces_then_more(self):
        line = self.padded_ping(100000, "huge")
        for i in range(0, len(line), 7000):
            self.c.send_raw(line[i:i + 7000])
        self.c.send_raw(b'\n{"jsonrpc":"2.0","method":"ping","id":"next"}\n')
        a = self.c.recv()
        self.assertError(a, -32006, None)
        self.assertResult(self.c.recv(), "next", "pong")

    def test_two_oversize_lines_two_errors(self):
        self.c.send_raw(b"x" * 3000 + b"\n" + b"[" * 3000 + b"\n")
        self.assertError(self.c.recv(), -32006, None)
        self.assertError(self.c.recv(), -32006, None)
        self.nextIsPing()
        self.assertAlive()


class TestDefaultMessageLimit(JSONRPCCase):
    def test_default_limit_is_16_mib(self):
        # 17 MiB line: over the default 16 MiB limit
        size = 17 * 1024 * 1024
        self.c.send_raw(b'{"jsonrpc":"2.0","method":"ping","id":1,"params":{"x":"' + b"a" * size + b'"}}\n')
        a = self.c.recv(60)
        self.assertEqual(a.get("error", {}).get("code"), -32006, str(a)[:300])
        self.assertEqual(a["error"].get("data", {}).get("limit"), 16 * 1024 * 1024)
        self.assertIsNone(a["id"])
        self.nextIsPing()

    def test_one_mib_message_is_fine(self):
        # a big but legal message: a ping with a 1 MiB params member
        s = b'{"jsonrpc":"2.0","method":"ping","id":"mib","params":{}}'
        line = s[:-1] + b" " * (1024 * 1024) + b"}\n"
        self.c.send_raw(line)
        a = self.c.recv(30)
        self.assertEqual(a.get("result"), "pong", str(a)[:300])


if __name__ == "__main__":
    unittest.main()
