"""subscribe / unsubscribe and jobEvent: every job of every client, naming the
client process, and bounded for a subscriber that does not read."""
import json
import socket
import subprocess
import sys
import time
import unittest

from harness import DaemonTestCase, RPCError, closed_port, wait_for

# A client in its own process: one fetch, prints the answer. argv: socket, params JSON, marker.
CLIENT = r"""# jobevent-marker
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "fetch", "params": json.loads(sys.argv[2])}) + "\n").encode())
buf = b""
while b"\n" not in buf:
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
print(buf.decode().strip())
"""


class TestSubscribe(DaemonTestCase):
    def send(self, client, method, params):
        rid = client.new_id()
        client.send_obj({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid

    def run_client(self, params):
        r = subprocess.run([sys.executable, "-c", CLIENT, self.daemon.socket_path, json.dumps(params)],
                           capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout)

    def events(self, client, job_id, until, timeout=10):
        def seen():
            # Reading more lines moves notifications into client.notifications.
            try:
                client.call("ping", timeout=timeout)
            except RPCError:
                pass
            got = [n["params"] for n in client.notifications
                   if n.get("method") == "jobEvent" and n["params"]["jobId"] == job_id]
            return got if any(e["event"] == until for e in got) else None
        return wait_for(seen, timeout=timeout, message=f"no {until} event for {job_id}: {self.c.notifications}")

    def test_events_of_another_process_name_it(self):
        self.assertEqual(self.c.call("subscribe", {"jobs": True}), {"subscribed": True})
        answer = self.run_client({"url": self.srv.test_url + "/echo", "jobId": "ev-1"})
        self.assertEqual(answer["result"]["status"], 200)
        events = self.events(self.c, "ev-1", "finished")
        self.assertEqual([e["event"] for e in events], ["queued", "started", "finished"])
        finished = events[-1]
        self.assertEqual(finished["status"], 200)
        self.assertEqual(finished["kind"], "fetch")
        self.assertEqual(finished["url"], self.srv.test_url + "/echo")
        self.assertIsInstance(finished["connection"]["pid"], int)
        self.assertIn("jobevent-marker", finished["connection"]["command"])
        self.assertIn("python", finished["connection"]["command"])
        self.assertNotIn("dropped", finished)

    def test_failed_retrying_and_cancelled(self):
        self.c.call("subscribe")
        url = f"http://127.0.0.1:{closed_port()}/"
        answer = self.run_client({"url": url, "jobId": "ev-fail", "retry": {"maxAttempts": 2, "maxInterval": 0.01}})
        self.assertEqual(answer["error"]["code"], -32001)
        self.assertEqual([e["event"] for e in self.events(self.c, "ev-fail", "failed")],
                         ["queued", "started", "retrying", "started", "failed"])
        other = self.daemon.client()
        req = self.send(other, "fetch", {"url": self.srv.test_url + "/slow-body?chunks=100&ms=50", "jobId": "ev-cancel"})
        wait_for(lambda: any(n["params"]["event"] == "started" for n in self.c.notifications
                             if n.get("method") == "jobEvent" and n["params"]["jobId"] == "ev-cancel")
                 or (self.c.call("ping") and False), timeout=10)
        self.assertTrue(self.c.call("cancel", {"jobId": "ev-cancel"})["cancelled"])
        self.assertEqual(self.events(self.c, "ev-cancel", "cancelled")[-1]["event"], "cancelled")
        other.answer_for(req)

    def test_unsubscribe_stops_events(self):
        self.c.call("subscribe", {"jobs": True})
        self.assertEqual(self.c.call("unsubscribe"), {"subscribed": False})
        self.c.notifications.clear()
        self.run_client({"url": self.srv.test_url + "/echo", "jobId": "ev-after"})
        # The event would have been written before the other client's answer: a ping now comes after it.
        self.assertEqual(self.c.call("ping"), "pong")
        self.assertEqual([n for n in self.c.notifications if n.get("method") == "jobEvent"], [])
        self.assertEqual(self.c.call("subscribe", {"jobs": False}), {"subscribed": False})

    def test_bad_params(self):
        with self.assertRaises(RPCError) as caught:
            self.c.call("subscribe", {"jobs": "yes"})
        self.assertEqual(caught.exception.code, -32602)
        with self.assertRaises(RPCError) as caught:
            self.c.call("subscribe", {"everything": True})
        self.assertEqual(caught.exception.data["field"], "everything")

    def test_a_subscriber_that_does_not_read_loses_events_not_memory(self):
        slow = socket.socket(socket.AF_UNIX)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(self.daemon.socket_path)
        slow.sendall(b'{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"jobs":true}}\n')
        time.sleep(0.2)  # the subscribe is read before the load starts (nothing else orders the two)
        # Events of ~6 KB (the URL): 256 KiB waits for the reader after about 50, past the socket's buffers.
        url = self.srv.test_url + "/echo?pad=" + "x" * 6000
        pending = [self.send(self.c, "fetch", {"url": url, "retry": False}) for _ in range(150)]
        for rid in pending:
            self.c.answer_for(rid, timeout=60)
        text = self.c.call("getMetrics")["text"]
        dropped = [float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("fetchd_job_events_dropped_total")][0]
        self.assertGreater(dropped, 0)
        # It reads now: what was queued for it comes, then a new event says how many it missed.
        buf = b""
        slow.settimeout(1)
        try:
            while True:  # the backlog, until nothing more comes for a second
                buf += slow.recv(1 << 20)
        except socket.timeout:
            pass
        buf = buf[buf.rfind(b"\n") + 1:]
        slow.settimeout(10)
        self.c.call("fetch", {"url": self.srv.test_url + "/echo", "jobId": "ev-late"})
        deadline = time.monotonic() + 30
        late = None
        while late is None and time.monotonic() < deadline:
            buf += slow.recv(1 << 20)
            for line in buf.split(b"\n")[:-1]:
                m = json.loads(line)
                if m.get("method") == "jobEvent" and m["params"]["jobId"] == "ev-late":
                    late = m["params"]
                    break
        slow.close()
        self.assertIsNotNone(late)
        self.assertGreater(late.get("dropped", 0), 0)


if __name__ == "__main__":
    unittest.main()
