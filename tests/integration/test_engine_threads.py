"""Several small-request engine threads (--engine-threads): each serves its share of
the socket's connections with its own multi handle, and every client still sees one daemon:
one cookie store, cancel and getJob from any connection, every request answered once."""
import os
import subprocess
import time
import unittest

from harness import FETCHD_BIN, SMALL_TXT, Daemon, RPCError, servers, wait_for
from jobhelpers import collect, key, send_request


def job_state(client, job_id):
    """The job's state, or None while the daemon does not know it yet (its fetch was sent on
    another connection and may not have been read yet)."""
    try:
        return client.call("getJob", {"jobId": job_id}).get("state")
    except RPCError as e:
        if e.code == -32602:
            return None
        raise


def thread_names(pid):
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


class TestEngineThreads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = servers()

    def test_the_flag_sets_how_many_threads_run_small_requests(self):
        for n in (1, 2, 3):
            daemon = Daemon("--engine-threads", str(n)).start()
            try:
                with daemon.client() as c:
                    self.assertEqual(c.call("ping"), "pong")
                names = thread_names(daemon.pid)
                engines = sorted(x for x in names if x.startswith("fetchd-engine"))
                self.assertEqual(engines, ["fetchd-engine"] + [f"fetchd-engine{i}" for i in range(2, n + 1)], names)
                self.assertEqual(names.count("fetchd-bulk"), 1, names)
            finally:
                daemon.close()

    def test_the_answer_thread_runs_only_with_a_core_of_its_own(self):
        # Answers are handed to fetchd-answers only where the machine has a core beside the
        # small-request threads; elsewhere each is made and written on the thread that ran it.
        cpus = os.cpu_count() or 1
        for n in sorted({1, min(cpus, 16)}):
            daemon = Daemon("--engine-threads", str(n)).start()
            try:
                with daemon.client() as c:
                    # More than 4 in flight on one thread: where there is an answer thread, the
                    # answers go through it; either way each comes once, to its own id.
                    url = self.srv.nginx_url + "/small.txt"
                    ids = [send_request(c, "fetch", {"url": url}, req_id=f"a{i}") for i in range(40)]
                    got = {}
                    while len(got) < len(ids):
                        msg = c.recv(timeout=30)
                        self.assertNotIn(msg["id"], got)
                        got[msg["id"]] = msg["result"]["body"]
                    self.assertEqual(got, {i: SMALL_TXT for i in ids})
                names = thread_names(daemon.pid)
                self.assertEqual(names.count("fetchd-answers"), 1 if cpus > n else 0, (n, cpus, names))
            finally:
                daemon.close()

    def test_generated_job_ids_never_take_ids_clients_chose(self):
        # Clients may name jobs like the daemon does: a generated id is never one a live job
        # has, and is random (`job-` and 16 hex digits), so not one a client could foresee.
        daemon = Daemon().start()
        try:
            with daemon.client() as c:
                slow = self.srv.test_url + "/slow-headers?ms=1500"
                names = [f"job-{i:016x}" for i in range(1, 41)]
                held = [send_request(c, "fetch", {"url": slow, "jobId": n}, req_id=n) for n in names]
                wait_for(lambda: all(job_state(c, n) is not None for n in names), timeout=10)
                quick = [send_request(c, "fetch", {"url": self.srv.nginx_url + "/small.txt"}, req_id=f"q{i}")
                         for i in range(20)]
                answers = {}
                while len(answers) < len(held) + len(quick):
                    msg = c.recv(timeout=30)
                    answers[msg["id"]] = msg
                named = {answers[r]["result"]["jobId"] for r in held}
                self.assertEqual(named, set(names))
                generated = [answers[r]["result"]["jobId"] for r in quick]
                self.assertEqual(len(set(generated)), 20, generated)
                self.assertFalse(named & set(generated), generated)
                for job_id in generated:
                    self.assertRegex(job_id, r"^job-[0-9a-f]{16}$")
        finally:
            daemon.close()

    def test_out_of_range_values_are_refused_at_start(self):
        for value in ("0", "17", "two", "-1"):
            r = subprocess.run([FETCHD_BIN, "--socket", "/nonexistent/x.sock", "--engine-threads", value],
                               capture_output=True, text=True, timeout=20)
            self.assertEqual(r.returncode, 2, (value, r.stderr))
            self.assertIn("--engine-threads takes a whole number from 1 to 16", r.stderr, value)

    def test_connections_on_different_threads_share_one_daemon(self):
        daemon = Daemon("--engine-threads", "2").start()
        try:
            clients = [daemon.client() for _ in range(4)]  # connections go to the threads in turn
            # One cookie store: a cookie set through one connection is sent through every other.
            jar = key("jar")
            r = clients[0].call("fetch", {"url": self.srv.test_url + "/set-cookie?shared=yes", "cookieJar": jar})
            self.assertEqual(r["status"], 200)
            for c in clients[1:]:
                r = c.call("fetch", {"url": self.srv.test_url + "/cookies", "cookieJar": jar, "responseBody": "json"})
                self.assertEqual(r["json"], {"cookie": "shared=yes"})
            # cancel and getJob reach a job running on another thread.
            job = key("slow")
            rid = send_request(clients[1], "fetch", {"url": self.srv.test_url + "/slow-body?chunks=60&ms=100", "jobId": job})
            wait_for(lambda: job_state(clients[2], job) == "running", timeout=10)
            self.assertEqual(clients[2].call("cancel", {"jobId": job}), {"cancelled": True})
            answer = collect(clients[1], rid, timeout=10).answer
            self.assertEqual(answer["error"]["code"], -32002, answer)
            self.assertEqual(clients[3].call("getJob", {"jobId": job})["state"], "cancelled")
            # Pipelined from every connection at once: each request answered once, to its own id.
            url = self.srv.nginx_url + "/small.txt"
            sent = {}
            for i, c in enumerate(clients):
                sent[i] = [send_request(c, "fetch", {"url": url}, req_id=f"c{i}-{n}") for n in range(150)]
            for i, c in enumerate(clients):
                got = {}
                deadline = time.monotonic() + 60
                while len(got) < len(sent[i]) and time.monotonic() < deadline:
                    msg = c.recv(timeout=30)
                    self.assertNotIn(msg.get("id"), got, f"answered twice: {msg.get('id')}")
                    got[msg["id"]] = msg
                self.assertEqual(sorted(got), sorted(sent[i]))
                for msg in got.values():
                    self.assertEqual((msg["result"]["status"], msg["result"]["body"]), (200, SMALL_TXT), msg)
            status = clients[0].call("getStatus")
            self.assertEqual(status["connections"], 4, status)
            for c in clients:
                c.close()
        finally:
            daemon.close()


if __name__ == "__main__":
    unittest.main()
