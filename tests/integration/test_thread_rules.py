"""Thread rules seen from outside: file system work runs on the blocking threads, never on an
engine thread (the threads that read requests and run transfers). With --allow-dir, the paths
a fetch or a setAuth names are resolved (realpath) on the blocking threads before the job or
the rule exists; a download's part file is removed there after a 416 and when the job fails.

The tests run the debug binary, which asserts each rule (HTTPEngine.assertNotOnAnEngineThread
in FilePolicy.resolve, PartFile and LocalFile): a request that broke one would end the daemon.
So each request here must be answered as protocol.md says, and the daemon must still answer."""
import os
import socket
import unittest

from harness import AllowDirCase, DaemonTestCase, RPCError
from jobhelpers import collect_all, hits, key, send_request


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


class TestAllowDirPathsOffTheEngine(AllowDirCase):
    def error(self, method, params):
        try:
            r = self.c.call(method, params, timeout=20)
        except RPCError as e:
            return e
        self.fail(f"{method} {params} succeeded: {r}")

    def assertStillServing(self):
        self.assertEqual(self.c.call("ping", timeout=5), "pong")

    def test_fetch_body_file_inside_is_sent(self):
        path = os.path.join(self.allowed, key("body") + ".bin")
        write(path, b"x" * 5000)
        r = self.c.call("fetch", {"url": self.srv.test_url + "/echo", "method": "PUT", "bodyFile": path,
                                  "responseBody": "json"}, timeout=20)
        self.assertEqual(r["status"], 200, r)
        self.assertEqual(r["json"]["bodyLength"], 5000, r)
        self.assertStillServing()

    def test_fetch_body_file_outside_is_refused_before_any_request(self):
        path = os.path.join(self.outside, key("out") + ".bin")
        write(path, b"secret")
        name = key("refused")
        e = self.error("fetch", {"url": f"{self.srv.test_url}/record/{name}", "method": "PUT", "bodyFile": path})
        self.assertEqual(e.code, -32004, e)
        self.assertIn(path, (e.data or {}).get("detail", ""), e)
        self.assertEqual(hits(name)["count"], 0, "a request was sent for a refused bodyFile")
        self.assertStillServing()

    def test_link_inside_to_a_file_outside_is_refused(self):
        target = os.path.join(self.outside, key("target") + ".pem")
        write(target, b"not a CA")
        link = os.path.join(self.allowed, key("link") + ".pem")
        os.symlink(target, link)
        e = self.error("fetch", {"url": self.srv.test_url + "/json", "caFile": link})
        self.assertEqual(e.code, -32004, e)
        self.assertStillServing()

    def test_a_refused_path_wins_over_a_later_mistake(self):
        # caFile is read before keyFile, whose missing certFile is a mistake found after both
        # paths: the refused caFile is what is answered, as when each path was checked at once.
        outside = os.path.join(self.outside, key("ca") + ".pem")
        inside = os.path.join(self.allowed, key("key") + ".pem")
        write(outside, b"ca")
        write(inside, b"key")
        e = self.error("fetch", {"url": self.srv.test_url + "/json", "caFile": outside, "keyFile": inside})
        self.assertEqual(e.code, -32004, e)
        self.assertIn(outside, (e.data or {}).get("detail", ""), e)
        # Both allowed: the mistake itself.
        write(outside.replace(self.outside, self.allowed), b"ca")
        e = self.error("fetch", {"url": self.srv.test_url + "/json",
                                 "caFile": outside.replace(self.outside, self.allowed), "keyFile": inside})
        self.assertEqual(e.code, -32602, e)
        self.assertEqual((e.data or {}).get("field"), "keyFile", e)
        # A mistake read before any path: answered at once, as -32602.
        e = self.error("fetch", {"url": self.srv.test_url + "/json", "method": "BAD METHOD", "caFile": outside})
        self.assertEqual(e.code, -32602, e)
        self.assertStillServing()

    def test_pipelined_requests_each_answered_once(self):
        path = os.path.join(self.allowed, key("pipe") + ".bin")
        write(path, b"y" * 100)
        outside = os.path.join(self.outside, key("pipe-out") + ".bin")
        write(outside, b"z")
        ids = [send_request(self.c, "fetch", {"url": self.srv.test_url + "/echo", "method": "PUT", "bodyFile": p})
               for p in (path, outside, path)]
        ping = send_request(self.c, "ping", None)
        _, by_id = collect_all(self.c, ids + [ping], timeout=20)
        answers = [by_id[i] for i in ids + [ping]]
        self.assertEqual(answers[0]["result"]["status"], 200, answers[0])
        self.assertEqual(answers[1]["error"]["code"], -32004, answers[1])
        self.assertEqual(answers[2]["result"]["status"], 200, answers[2])
        self.assertEqual(answers[3]["result"], "pong", answers[3])

    def test_set_auth_secret_file(self):
        host = key("auth").lower() + ".example"
        inside = os.path.join(self.allowed, key("token"))
        write(inside, b"t0ken")
        r = self.c.call("setAuth", {"host": host, "type": "bearer", "tokenFile": inside}, timeout=10)
        self.assertEqual(r.get("host"), host, r)
        outside = os.path.join(self.outside, key("token"))
        write(outside, b"t0ken")
        other = key("auth2").lower() + ".example"
        e = self.error("setAuth", {"host": other, "type": "bearer", "tokenFile": outside})
        self.assertEqual(e.code, -32004, e)
        rules = [rule["host"] for rule in self.c.call("getAuth", {})["rules"]]
        self.assertIn(host, rules)
        self.assertNotIn(other, rules, "a refused rule was set")
        # Removing a rule names no file: answered at once.
        self.assertEqual(self.c.call("setAuth", {"host": host, "type": None}), {"host": host, "removed": True})
        self.assertStillServing()


class TestPartFileOffTheEngine(DaemonTestCase):
    def test_failed_download_leaves_no_empty_part_file(self):
        # The job fails on the bulk engine thread (nothing listens; no retry, whose backoff
        # could outlast the call's timeout on a loaded machine); its empty part file is
        # removed on the blocking threads, before the answer.
        d = self.daemon.tmpdir
        path = os.path.join(d, key("fail") + ".bin")
        # Bound, never listening, and held until the answer: the connection is refused, and no
        # other test's server can take the port meanwhile.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            with self.assertRaises(RPCError) as caught:
                self.c.call("download", {"url": f"http://127.0.0.1:{port}/x", "path": path, "retry": False},
                            timeout=20)
        self.assertEqual(caught.exception.code, -32001, caught.exception)
        self.assertFalse(os.path.exists(path + ".part"), "an empty part file was left")
        self.assertEqual(self.c.call("ping"), "pong")


if __name__ == "__main__":
    unittest.main()
