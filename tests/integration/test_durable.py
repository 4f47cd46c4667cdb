"""Durable jobs: getJob for live and ended jobs, attach from other connections,
and --state-dir with `durable: true` surviving a kill -9 of the daemon."""
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

from harness import FETCHCTL, Daemon, DaemonTestCase, RPCError, closed_port, servers, wait_for
from jobhelpers import collect, hits, key, send_request
from test_download import ranged_log
import testserver

SLOW = "/slow-body?chunks=30&ms=100"  # 30 bytes over ~3 s


def session_info(srv, sid):
    """The test server's view of a resumable upload session ({} before it starts)."""
    try:
        with urllib.request.urlopen(f"{srv.test_url}/resumable/session/{sid}/info", timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError:
        return {}


def job_state(client, job_id):
    """getJob's state, or None while the job is not registered yet (a download starts in a task;
    a fetch sent on another connection may not have been read yet)."""
    try:
        return client.call("getJob", {"jobId": job_id})["state"]
    except RPCError:
        return None


class TestGetJob(DaemonTestCase):
    def get_job(self, job_id, client=None):
        return (client or self.c).call("getJob", {"jobId": job_id})

    def test_live_then_finished(self):
        job = key("gj")
        rid = send_request(self.c, "fetch", {"url": self.srv.test_url + SLOW, "jobId": job})
        with self.daemon.client() as c2:
            # c2 may be read before self.c's fetch is (another engine thread): None until then.
            wait_for(lambda: job_state(c2, job) == "running", timeout=5, message="the job never showed running")
            live = self.get_job(job, c2)
            self.assertEqual(live, {"jobId": job, "state": "running", "durable": False, "restarts": 0})
            answer = collect(self.c, rid, timeout=10).answer
            self.assertEqual(answer["result"]["status"], 200, answer)
            ended = self.get_job(job, c2)
        self.assertEqual(ended["state"], "finished", ended)
        self.assertEqual(ended["restarts"], 0)
        self.assertEqual(ended["result"]["status"], 200, ended)
        self.assertEqual(ended["result"]["jobId"], job, ended)
        self.assertNotIn("body", ended["result"], "an ended fetch keeps no body")
        self.assertTrue(ended["result"]["bodyOmitted"], ended)
        self.assertNotIn("error", ended)

    def test_failed_and_cancelled(self):
        failed = key("gjf")
        with self.assertRaises(RPCError):
            self.c.call("fetch", {"url": "http://127.0.0.1:1/", "jobId": failed, "retry": False})
        got = self.get_job(failed)
        self.assertEqual(got["state"], "failed", got)
        self.assertEqual(got["error"]["code"], -32001, got)
        self.assertNotIn("result", got)
        cancelled = key("gjc")
        rid = send_request(self.c, "fetch", {"url": self.srv.test_url + SLOW, "jobId": cancelled})
        with self.daemon.client() as c2:
            wait_for(lambda: job_state(c2, cancelled) == "running", timeout=5)
            self.assertEqual(c2.call("cancel", {"jobId": cancelled}), {"cancelled": True})
        collect(self.c, rid, timeout=5)
        got = self.get_job(cancelled)
        self.assertEqual(got["state"], "cancelled", got)
        self.assertEqual(got["error"]["code"], -32002, got)
        self.assertEqual(got["error"]["data"], {"jobId": cancelled, "by": "cancel"}, got)

    def test_the_last_1000_ended_jobs_are_kept(self):
        """One job ends, then 1,000 more: the first is forgotten, each of the 1,000 is kept."""
        prefix = key("gj1000")
        url = self.srv.test_url + "/status/200"
        self.c.call("fetch", {"url": url, "jobId": prefix + "-first"})
        ids = {send_request(self.c, "fetch", {"url": url, "jobId": f"{prefix}-{i}"}): i for i in range(1000)}
        answered = {}
        while len(answered) < len(ids):
            m = self.c.recv(timeout=30)
            if m.get("id") in ids:
                answered[m["id"]] = m
        self.assertEqual([a["result"]["status"] for a in answered.values()], [200] * 1000)
        with self.assertRaises(RPCError) as caught:
            self.get_job(prefix + "-first")
        self.assertEqual(caught.exception.code, -32602, "the 1,001st ended job back is forgotten")
        states = {self.get_job(f"{prefix}-{i}")["state"] for i in range(1000)}
        self.assertEqual(states, {"finished"})

    def test_unknown_job(self):
        with self.assertRaises(RPCError) as caught:
            self.get_job("no-such-job-" + key())
        self.assertEqual(caught.exception.code, -32602)
        self.assertEqual(caught.exception.data.get("field"), "jobId", caught.exception.data)


class TestAttach(DaemonTestCase):
    def test_detached_download_whose_client_left(self):
        job = key("att")
        out = os.path.join(self.daemon.tmpdir, job + ".bin")
        first = self.daemon.client()
        send_request(first, "download", {"url": self.srv.test_url + SLOW, "path": out, "jobId": job,
                                         "detach": True})
        wait_for(lambda: job_state(self.c, job) == "running", timeout=5)
        first.close()  # the job's own client is gone; detached, the job goes on
        with self.daemon.client() as c2, self.daemon.client() as c3:
            watching = send_request(c2, "attach", {"jobId": job, "progress": True})
            quiet = send_request(c3, "attach", {"jobId": job})
            got = collect(c2, watching, timeout=15)
            other = collect(c3, quiet, timeout=15)
        result = got.answer["result"]
        self.assertEqual(result["jobId"], job, got.answer)
        self.assertEqual(result["bytes"], 30, result)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"x" * 30)
        self.assertEqual(other.answer, got.answer, "every attached connection gets the same answer")
        progress = got.of("progress")
        self.assertTrue(progress, "progress was asked for but none came")
        self.assertTrue(all(p["jobId"] == job for _, p in progress), progress)
        self.assertEqual(other.of("progress"), [], "progress came to a connection that did not ask for it")
        # Ended: an attach is answered at once from the ring.
        self.assertEqual(self.c.call("attach", {"jobId": job}), result)

    def test_attach_to_failed_job_gets_its_error(self):
        job = key("attf")
        with self.assertRaises(RPCError):
            self.c.call("fetch", {"url": "http://127.0.0.1:1/", "jobId": job, "retry": False})
        with self.assertRaises(RPCError) as caught:
            self.c.call("attach", {"jobId": job})
        self.assertEqual(caught.exception.code, -32001)

    def test_attach_unknown(self):
        with self.assertRaises(RPCError) as caught:
            self.c.call("attach", {"jobId": "nope-" + key()})
        self.assertEqual(caught.exception.code, -32602)
        self.assertEqual(caught.exception.data.get("field"), "jobId")


class DurableCase(unittest.TestCase):
    """Daemons that share one --state-dir (made by the first of them), and an output directory."""

    def setUp(self):
        self.srv = servers()
        self.base = tempfile.mkdtemp(prefix="fetchd-state-")
        self.state = os.path.join(self.base, "state", "fetchd")  # made by the daemon
        self.out_dir = tempfile.mkdtemp(prefix="fetchd-durable-out-")
        self.daemons = []

    def tearDown(self):
        for d in self.daemons:
            d.close()
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.out_dir, ignore_errors=True)

    def daemon(self, *args, bin=None):
        d = Daemon("--state-dir", self.state, *args, bin=bin).start()
        self.daemons.append(d)
        return d

    def store_path(self):
        return os.path.join(self.state, "jobs.db")

    @staticmethod
    def kill_9(d):
        os.kill(d.pid, signal.SIGKILL)
        d.proc.wait()

    def attach_after_restart(self, job):
        """A new daemon on the same state directory: the job's answer (attach) and then getJob."""
        second = self.daemon()
        with second.client() as c:
            result = c.call("attach", {"jobId": job}, timeout=30)
            return second, result, c.call("getJob", {"jobId": job})

    def rows(self):
        """The store's jobs, {jobId: {"method", "params", "restarts", "sessionUrl"}}, read-only
        (beside a running daemon: a WAL reader does not block it)."""
        if not os.path.exists(self.store_path()):
            return {}
        db = sqlite3.connect(f"file:{self.store_path()}?mode=ro", uri=True, timeout=5)
        try:
            if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'jobs'").fetchall():
                return {}  # just made: its table comes in the next instant
            return {r[0]: {"method": r[1], "params": json.loads(r[2]), "restarts": r[3], "sessionUrl": r[4]}
                    for r in db.execute("SELECT job_id, method, params, restarts, session_url FROM jobs")}
        finally:
            db.close()

    def set_url(self, job, change):
        """Rewrites a stored job's URL (its daemon is dead) with change(url)."""
        db = sqlite3.connect(self.store_path(), timeout=5)
        try:
            with db:
                (text,) = db.execute("SELECT params FROM jobs WHERE job_id = ?", (job,)).fetchone()
                params = json.loads(text)
                params["url"] = change(params["url"])
                db.execute("UPDATE jobs SET params = ? WHERE job_id = ?", (json.dumps(params), job))
        finally:
            db.close()

    def store_bytes(self):
        """Everything SQLite wrote for the store: the database, its WAL and journal."""
        data = b""
        for suffix in ("", "-wal", "-journal", "-shm"):
            if os.path.exists(self.store_path() + suffix):
                with open(self.store_path() + suffix, "rb") as f:
                    data += f.read()
        return data

    def start_stalled(self, d, job, name, size=200_000, cut=50_000):
        """A durable download from d whose first request stalls after `cut` bytes (in the part file)."""
        out = os.path.join(self.out_dir, job + ".bin")
        url = f"{self.srv.test_url}/ranged/{size}?etag=v1&key={name}&stall-after={cut}"
        c = d.client()
        send_request(c, "download", {"url": url, "path": out, "jobId": job, "durable": True})
        wait_for(lambda: os.path.exists(out + ".part") and os.path.getsize(out + ".part") >= cut, timeout=10,
                 message="the first part never arrived")
        return c, out


class TestDurable(DurableCase):
    """A durable download survives kill -9 of its daemon: the next daemon with the same
    --state-dir resumes it, from its part file, with the same jobId."""

    def test_kill_9_mid_transfer_then_resume(self):
        size, cut = 300_000, 100_000
        job, name = key("dur"), key("durlog")
        out = os.path.join(self.out_dir, "big.bin")
        url = f"{self.srv.test_url}/ranged/{size}?etag=v1&key={name}&stall-after={cut}"
        first = self.daemon()
        c = first.client()
        send_request(c, "download", {"url": url, "path": out, "jobId": job, "durable": True,
                                     "headers": {"Authorization": "Bearer s3cret-token", "X-Trace": "t1"}})
        wait_for(lambda: job in self.rows(), timeout=5, message="the job was never written down")
        self.assertEqual(os.stat(self.state).st_mode & 0o777, 0o700)
        self.assertEqual(os.stat(self.store_path()).st_mode & 0o777, 0o600)
        stored = self.rows()[job]
        self.assertEqual(stored["method"], "download")
        self.assertEqual(stored["params"]["jobId"], job)
        self.assertEqual(stored["restarts"], 0)
        self.assertEqual(stored["params"]["headers"], {"X-Trace": "t1"}, "credentials are never stored")
        self.assertNotIn(b"s3cret", self.store_bytes())
        self.assertTrue(c.call("getJob", {"jobId": job})["durable"])
        listed = [j for j in c.call("listJobs")["jobs"] if j["jobId"] == job]
        self.assertEqual([j["durable"] for j in listed], [True], listed)
        wait_for(lambda: os.path.exists(out + ".part") and os.path.getsize(out + ".part") >= cut, timeout=10,
                 message="the first part never arrived")
        self.assertFalse(os.path.exists(out), "nothing under the final name before it is complete")
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()

        second = self.daemon()
        with second.client() as c2:
            got = c2.call("getJob", {"jobId": job})
            self.assertTrue(got["durable"], got)
            self.assertEqual(got["restarts"], 1, got)
            result = c2.call("attach", {"jobId": job}, timeout=30)
            ended = c2.call("getJob", {"jobId": job})
        data = testserver.det_bytes(size)
        self.assertEqual(result["sha256"], hashlib.sha256(data).hexdigest(), result)
        self.assertTrue(result["resumed"], result)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(ended["state"], "finished", ended)
        self.assertEqual(ended["restarts"], 1, ended)
        self.assertEqual(ended["result"]["sha256"], result["sha256"])
        log = ranged_log(name)
        self.assertEqual(len(log), 2, log)
        self.assertIsNone(log[0]["range"], log)
        self.assertEqual(log[1]["range"], f"bytes={cut}-", log)
        self.assertEqual(log[1]["ifRange"], '"v1"', log)
        self.assertEqual(log[1]["status"], 206, log)
        wait_for(lambda: job not in self.rows(), timeout=5, message="the job's row outlived the job")

    def test_a_job_the_daemon_died_during_five_times_in_a_row_is_dropped(self):
        # A job that kills its daemon would kill every daemon after it: after the fifth death
        # in a row it is not resumed. A SIGTERM stop is no death, and starts the count again.
        job = key("crashy")
        d = self.daemon("--shutdown-grace", "0")
        with d.client() as c:
            # Every attempt waits a minute for its headers: the job is unfinished in every daemon.
            send_request(c, "download", {"url": self.srv.test_url + "/slow-headers?ms=60000", "jobId": job,
                                         "path": os.path.join(self.out_dir, "crashy.bin"), "durable": True})
            wait_for(lambda: job in self.rows(), timeout=5, message="the job was never written down")
        restarts = 0

        def next_daemon():
            nonlocal restarts
            n = self.daemon("--shutdown-grace", "0")
            restarts += 1
            with n.client() as c2:
                got = c2.call("getJob", {"jobId": job})
            self.assertEqual((got["durable"], got["restarts"]), (True, restarts), got)
            self.assertIn("resumed 1 durable job(s)", n.stderr_text())
            return n

        for _ in range(2):
            self.kill_9(d)
            d = next_daemon()
        self.assertEqual(d.stop(), 0)  # SIGTERM: the job stays, and this stop is not counted
        self.assertIn(job, self.rows())
        d = next_daemon()
        for _ in range(4):
            self.kill_9(d)
            d = next_daemon()
        self.kill_9(d)  # the fifth death in a row
        last = self.daemon()
        with last.client() as c3:
            with self.assertRaises(RPCError) as e:
                c3.call("getJob", {"jobId": job})
            self.assertEqual(e.exception.code, -32602)
        self.assertIn(f"durable job {job} not resumed: the daemon died while it was unfinished 5 times in a row",
                      last.stderr_text())
        self.assertNotIn(job, self.rows())

    def test_state_dir_with_open_mode_is_refused(self):
        os.makedirs(self.state, mode=0o755)
        os.chmod(self.state, 0o755)
        d = self.daemon()
        name = key("durnotsent")
        with d.client() as c:
            with self.assertRaises(RPCError) as caught:
                c.call("download", {"url": f"{self.srv.test_url}/record/{name}", "durable": True,
                                    "path": os.path.join(self.out_dir, "x")})
        self.assertEqual(caught.exception.code, -32003)
        self.assertIn("has mode 0755", json.dumps(caught.exception.data))
        self.assertEqual(os.listdir(self.out_dir), [])
        self.assertEqual(hits(name)["count"], 0, "a job that cannot be written down is never sent")

    def killed_with_a_job(self, prefix):
        """A daemon killed (-9) while one durable download was under way: its jobId."""
        job = key(prefix)
        first = self.daemon()
        self.start_stalled(first, job, key(prefix + "log"))
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        return job

    def store_with_a_job(self):
        """A store holding one unfinished durable job, checkpointed into jobs.db (no WAL left)."""
        job = self.killed_with_a_job("durbad")
        db = sqlite3.connect(self.store_path())
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()  # the last connection: SQLite removes the WAL
        self.assertFalse(os.path.exists(self.store_path() + "-wal"))
        self.assertGreaterEqual(os.path.getsize(self.store_path()), 3 * 4096)
        return job

    def check_moved_aside(self, job, damaged, reason):
        """The next daemon logs the damaged store, keeps it under another name, starts with a new one."""
        second = self.daemon()
        with second.client() as c:
            self.assertEqual(c.call("ping"), "pong")
            if job:
                with self.assertRaises(RPCError) as caught:
                    c.call("getJob", {"jobId": job})
                self.assertEqual(caught.exception.code, -32602, "a job of the damaged store was resumed")
            r = c.call("download", {"url": self.srv.test_url + "/ranged/1000", "durable": True,
                                    "path": os.path.join(self.out_dir, "after.bin")})
            self.assertEqual(r["bytes"], 1000, "the new store takes durable jobs")
        aside = [n for n in os.listdir(self.state) if n.startswith("jobs.db.corrupt-")]
        self.assertEqual(len(aside), 1, os.listdir(self.state))
        with open(os.path.join(self.state, aside[0]), "rb") as f:
            self.assertEqual(f.read(), damaged, "the damaged store is kept as it was")
        log = second.stderr_text()
        self.assertIn(f"durable job store {self.store_path()} cannot be read (", log)
        self.assertIn(reason, log)
        self.assertIn("moved to " + os.path.join(self.state, aside[0]), log)
        self.assertEqual(self.rows(), {})
        return log

    def test_truncated_store_is_moved_aside(self):
        job = self.store_with_a_job()
        with open(self.store_path(), "r+b") as f:
            f.truncate(4096 + 100)  # the first page and a piece of the second
        with open(self.store_path(), "rb") as f:
            damaged = f.read()
        self.check_moved_aside(job, damaged, "malformed")

    def test_corrupt_store_is_moved_aside(self):
        job = self.store_with_a_job()
        with open(self.store_path(), "r+b") as f:
            f.seek(4096)
            f.write(b"\x5a" * (os.path.getsize(self.store_path()) - 4096))  # every page but the first
        with open(self.store_path(), "rb") as f:
            damaged = f.read()
        self.check_moved_aside(job, damaged, "malformed")

    def test_not_a_database_and_old_job_files(self):
        os.makedirs(os.path.join(self.state, "jobs"), mode=0o700)
        os.chmod(self.state, 0o700)
        with open(os.path.join(self.state, "jobs", "old.json"), "w") as f:
            f.write('{"version": 1, "jobId": "old"}')
        damaged = b"not a database at all\n" * 300
        with open(self.store_path(), "wb") as f:
            f.write(damaged)
        log = self.check_moved_aside(None, damaged, "file is not a database")
        self.assertIn(f"{self.state}/jobs holds 1 job file(s) of an earlier fetchd: they are ignored", log)

    def test_wal_without_its_store_is_not_replayed(self):
        """jobs.db removed, its WAL left: the new store starts empty, and the log says so."""
        job = self.killed_with_a_job("durorphan")
        self.assertTrue(os.path.exists(self.store_path() + "-wal"))
        os.unlink(self.store_path())  # the WAL is left behind
        second = self.daemon()
        with second.client() as c:
            r = c.call("download", {"url": self.srv.test_url + "/ranged/1000", "durable": True,
                                    "path": os.path.join(self.out_dir, "after.bin")})
            self.assertEqual(r["bytes"], 1000)
            with self.assertRaises(RPCError):
                c.call("getJob", {"jobId": job})
        self.assertIn(f"durable job store: {self.store_path()}-wal without {self.store_path()} removed",
                      second.stderr_text())
        self.assertEqual(self.rows(), {})

    def test_no_secret_in_the_store(self):
        size, cut = 150_000, 50_000
        secrets = {"Authorization": "Bearer sekrit-auth-1", "Cookie": "sid=sekrit-cookie-2",
                   "Proxy-Authorization": "Basic sekrit-proxy-3", "X-Api-Key": "sekrit-apikey-4",
                   "X-Auth-Token": "sekrit-token-5", "X-Amz-Security-Token": "sekrit-amz-6"}
        job, name = key("dursec"), key("durseclog")
        out = os.path.join(self.out_dir, "sec.bin")
        url = f"{self.srv.test_url}/ranged/{size}?etag=s&key={name}&stall-after={cut}&sig=query-stays-7"
        first = self.daemon()
        c = first.client()
        send_request(c, "download", {"url": url, "path": out, "jobId": job, "durable": True,
                                     "headers": dict(secrets, **{"X-Trace": "kept-8"})})
        # A password in the URL or the proxy URL would be stored: refused, nothing sent.
        host = self.srv.test_url.split("://", 1)[1]
        for field, params in [("url", {"url": f"http://user:sekrit-url-9@{host}/ranged/10"}),
                              ("proxy", {"url": self.srv.test_url + "/ranged/10",
                                         "proxy": "http://user:sekrit-proxy-10@127.0.0.1:1"})]:
            with self.assertRaises(RPCError) as caught:
                c.call("download", dict(params, path=os.path.join(self.out_dir, field), durable=True))
            self.assertEqual(caught.exception.code, -32602, field)
            self.assertEqual(caught.exception.data.get("field"), field, caught.exception.data)
            self.assertNotIn("sekrit", json.dumps(caught.exception.data))
        wait_for(lambda: os.path.exists(out + ".part") and os.path.getsize(out + ".part") >= cut, timeout=10)
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        self.assertTrue(os.path.exists(self.store_path() + "-wal"), "the WAL is read too")
        data = self.store_bytes()
        for kept in (b"kept-8", b"query-stays-7"):
            self.assertIn(kept, data)
        for secret in list(secrets.values()) + ["sekrit-url-9", "sekrit-proxy-10"]:
            self.assertNotIn(secret.encode(), data, secret)
        self.assertNotIn(b"sekrit", data)
        rows = self.rows()
        self.assertEqual(list(rows), [job], rows)
        self.assertEqual(rows[job]["params"]["headers"], {"X-Trace": "kept-8"})
        second = self.daemon()
        with second.client() as c2:
            result = c2.call("attach", {"jobId": job}, timeout=30)
        self.assertEqual(result["sha256"], hashlib.sha256(testserver.det_bytes(size)).hexdigest())

    def test_sigterm_keeps_the_job_and_disconnect_does_not_cancel(self):
        job, name = key("durterm"), key("durtermlog")
        first = self.daemon()
        c, out = self.start_stalled(first, job, name)
        c.close()  # durable implies detach
        with first.client() as c2:
            self.assertEqual(c2.call("getJob", {"jobId": job})["state"], "running")
        self.assertEqual(first.stop(signal.SIGTERM), 0)
        self.assertIn(job, self.rows(), "a durable job cancelled by the shutdown stays in the store")
        second = self.daemon()
        with second.client() as c3:
            result = c3.call("attach", {"jobId": job}, timeout=30)
            self.assertEqual(c3.call("getJob", {"jobId": job})["restarts"], 1)
        self.assertEqual(result["sha256"], hashlib.sha256(testserver.det_bytes(200_000)).hexdigest())
        self.assertIn("resumed 1 durable job(s)", second.stderr_text())

    def test_cancel_of_a_restored_job(self):
        job, name = key("durcancel"), key("durcancellog")
        first = self.daemon()
        self.start_stalled(first, job, name)
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        # The resumed download goes to a route that sends its body slowly (and ignores the
        # Range: it starts over), so it is still running when the cancel comes.
        self.set_url(job, lambda _: self.srv.test_url + "/slow-body?chunks=100&ms=100")
        second = self.daemon()
        with second.client() as c:
            attached = send_request(c, "attach", {"jobId": job})
            with second.client() as c2:
                wait_for(lambda: job_state(c2, job) == "running", timeout=5)
                self.assertEqual(c2.call("cancel", {"jobId": job}), {"cancelled": True})
            answer = collect(c, attached, timeout=5).answer
            self.assertEqual(answer["error"]["code"], -32002, answer)
            got = c.call("getJob", {"jobId": job})
        self.assertEqual(got["state"], "cancelled", got)
        self.assertEqual(got["restarts"], 1, got)
        wait_for(lambda: job not in self.rows(), timeout=5, message="a cancelled job stays in the store")

    def test_resumable_upload_asks_for_its_offset_after_kill_9(self):
        chunk, size = 64 << 10, 256 << 10
        sid = key("durup")
        src = os.path.join(self.out_dir, "up.bin")
        data = testserver.det_bytes(size, seed=7)
        with open(src, "wb") as f:
            f.write(data)
        info_url = f"{self.srv.test_url}/resumable/session/{sid}/info"

        def info():
            try:
                with urllib.request.urlopen(info_url, timeout=10) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError:
                return {}  # not started yet

        first = self.daemon()
        c = first.client()
        job = key("durupjob")
        send_request(c, "upload", {"url": f"{self.srv.test_url}/resumable/start?key={sid}&hold-chunk=3&hold-ms=1000",
                                   "files": [{"path": src}], "resumable": {"chunkSize": chunk},
                                   "jobId": job, "durable": True})
        wait_for(lambda: info().get("holding"), timeout=10, message="the third chunk was never held")
        self.assertTrue(self.rows()[job]["sessionUrl"].endswith("/resumable/session/" + sid), self.rows())
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        wait_for(lambda: not info()["holding"], timeout=5)  # the server keeps the held chunk
        self.assertEqual(info()["size"], 3 * chunk)

        second = self.daemon()
        with second.client() as c2:
            result = c2.call("attach", {"jobId": job}, timeout=30)
            self.assertEqual(c2.call("getJob", {"jobId": job})["restarts"], 1)
        self.assertEqual(result["status"], 200, result)
        done = info()
        self.assertEqual(done["status"], "final", done)
        self.assertEqual(done["sha256"], hashlib.sha256(data).hexdigest())
        # one session: the start, 3 chunks, the new daemon's query, the last chunk from the offset
        self.assertEqual(done["commands"], ["start", "upload", "upload", "upload", "query", "upload, finalize"], done)
        self.assertEqual(done["offsets"][-1], 3 * chunk, done["offsets"])

    def start_held_upload(self, d, job, sid, size=256 << 10, chunk=64 << 10, seed=7):
        """A durable resumable upload from d whose third chunk the server holds (its answer waits)."""
        src = os.path.join(self.out_dir, job + ".src")
        data = testserver.det_bytes(size, seed=seed)
        with open(src, "wb") as f:
            f.write(data)
        c = d.client()
        send_request(c, "upload", {"url": f"{self.srv.test_url}/resumable/start?key={sid}&hold-chunk=3&hold-ms=4000",
                                   "files": [{"path": src}], "resumable": {"chunkSize": chunk},
                                   "jobId": job, "durable": True})
        return c, data

    def test_ten_downloads_and_two_uploads_killed_and_resumed(self):
        size, cut, chunk = 200_000, 60_000, 64 << 10
        first = self.daemon("--max-per-host", "16")  # all 12 at once: none waits behind a stalled one
        c = first.client()
        jobs = []
        for i in range(10):
            job, name = key(f"dur10-{i}"), key(f"dur10log-{i}")
            out = os.path.join(self.out_dir, f"f{i}.bin")
            url = f"{self.srv.test_url}/ranged/{size}?etag=e{i}&seed={i}&key={name}&stall-after={cut}"
            send_request(c, "download", {"url": url, "path": out, "jobId": job, "durable": True})
            jobs.append((job, name, out, i))
        uploads = []
        for u in range(2):
            job, sid = key(f"dur10up-{u}"), key(f"dur10sid-{u}")
            uploads.append((job, sid) + self.start_held_upload(first, job, sid, seed=20 + u))
        for _, _, out, _ in jobs:
            wait_for(lambda: os.path.exists(out + ".part") and os.path.getsize(out + ".part") >= cut, timeout=15,
                     message=f"{out}: the first part never arrived")
        for _, sid, _, _ in uploads:
            wait_for(lambda: session_info(self.srv, sid).get("holding"), timeout=15,
                     message=f"{sid}: the third chunk was never held")
        self.assertEqual(len(self.rows()), 12, self.rows())
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        self.assertEqual([os.path.exists(out) for _, _, out, _ in jobs], [False] * 10)
        for _, sid, _, _ in uploads:
            wait_for(lambda: not session_info(self.srv, sid)["holding"], timeout=10)  # the server keeps the chunk
            self.assertEqual(session_info(self.srv, sid)["size"], 3 * chunk)

        # Whatever sits under a final name is the whole file, from the kill to the end.
        early, stop = [], threading.Event()

        def watch():
            while not stop.is_set():
                for _, _, out, _ in jobs:
                    try:
                        if os.path.getsize(out) != size:
                            early.append((out, os.path.getsize(out)))
                    except OSError:
                        pass
                stop.wait(0.005)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            second = self.daemon("--max-per-host", "16")
            with second.client() as c2:
                ids = {job: send_request(c2, "attach", {"jobId": job}) for job in
                       [j[0] for j in jobs] + [u[0] for u in uploads]}
                by_id = {}
                while len(by_id) < len(ids):
                    m = c2.recv(timeout=30)
                    if "id" in m:
                        by_id[m["id"]] = m
                answers = {job: by_id[rid] for job, rid in ids.items()}
                restarts = {job: c2.call("getJob", {"jobId": job})["restarts"] for job in ids}
        finally:
            stop.set()
            watcher.join(5)
        self.assertEqual(early, [], "a final name held an incomplete file")
        self.assertEqual(set(restarts.values()), {1}, restarts)
        for job, name, out, i in jobs:
            data = testserver.det_bytes(size, seed=i)
            self.assertEqual(answers[job]["result"]["sha256"], hashlib.sha256(data).hexdigest(), answers[job])
            self.assertTrue(answers[job]["result"]["resumed"], answers[job])
            with open(out, "rb") as f:
                self.assertEqual(f.read(), data, out)
            log = ranged_log(name)
            self.assertEqual([r["range"] for r in log], [None, f"bytes={cut}-"], name)
            self.assertEqual(log[1]["status"], 206, log)
        for job, sid, _, data in uploads:
            self.assertEqual(answers[job]["result"]["status"], 200, answers[job])
            done = session_info(self.srv, sid)
            self.assertEqual(done["status"], "final", done)
            self.assertEqual(done["sha256"], hashlib.sha256(data).hexdigest(), sid)
            self.assertEqual(done["commands"], ["start", "upload", "upload", "upload", "query", "upload, finalize"], done)
            self.assertEqual(done["offsets"][-1], 3 * chunk, done["offsets"])
        wait_for(lambda: self.rows() == {}, timeout=5, message=f"left: {self.rows()}")

    def test_server_without_ranges_now_starts_over(self):
        size, cut = 150_000, 50_000
        job, name = key("dur200"), key("dur200log")
        first = self.daemon()
        c, out = self.start_stalled(first, job, name, size=size, cut=cut)
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        self.set_url(job, lambda url: url + "&no-range=1")  # the server now ignores Range
        second = self.daemon()
        with second.client() as c2:
            result = c2.call("attach", {"jobId": job}, timeout=30)
        data = testserver.det_bytes(size)
        self.assertEqual(result["sha256"], hashlib.sha256(data).hexdigest(), result)
        self.assertFalse(result["resumed"], result)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)

    def test_validator_changed_starts_over(self):
        """The file changed on the server while the daemon was dead (a new ETag, new bytes):
        the If-Range of the resume gets the whole new file, which lands alone."""
        size, cut = 150_000, 50_000
        job, name = key("durnewtag"), key("durnewtaglog")
        first = self.daemon()
        c, out = self.start_stalled(first, job, name, size=size, cut=cut)
        self.kill_9(first)
        self.set_url(job, lambda url: url.replace("etag=v1", "etag=v2") + "&seed=5")
        _, result, _ = self.attach_after_restart(job)
        data = testserver.det_bytes(size, seed=5)
        self.assertEqual(result["sha256"], hashlib.sha256(data).hexdigest(), result)
        self.assertFalse(result["resumed"], result)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)
        log = ranged_log(name)
        self.assertEqual([(r["range"], r["ifRange"], r["status"]) for r in log[1:]],
                         [(f"bytes={cut}-", '"v1"', 200)], log)

    def test_other_upload_is_sent_again_after_kill_9(self):
        """A multipart upload has nothing to resume from: after a restart it is sent whole again."""
        name, job = key("durpost"), key("durpostjob")
        src = os.path.join(self.out_dir, "form.bin")
        with open(src, "wb") as f:
            f.write(testserver.det_bytes(30_000))
        first = self.daemon()
        c = first.client()
        params = {"url": f"{self.srv.test_url}/record/{name}?ms=1500", "files": [{"path": src}],
                  "fields": {"a": "1"}, "jobId": job, "durable": True}
        send_request(c, "upload", params)
        wait_for(lambda: hits(name)["inFlight"] == 1, timeout=10, message="the upload never reached the server")
        self.kill_9(first)
        self.assertEqual(self.rows()[job]["method"], "upload")
        _, result, got = self.attach_after_restart(job)
        self.assertEqual(result["status"], 200, result)
        self.assertGreater(result["sentBytes"], 30_000, result)
        self.assertEqual(got["restarts"], 1, got)
        self.assertEqual(hits(name)["count"], 2, "sent once by each daemon")
        wait_for(lambda: job not in self.rows(), timeout=5, message="the job's row outlived the job")

    def test_resumed_jobs_wait_in_their_hosts_queue(self):
        hold, n = key("durq"), 8
        first = self.daemon("--max-per-host", "1")
        c = first.client()
        for i in range(n):
            send_request(c, "download", {"url": f"{self.srv.test_url}/record/{hold}?ms=300", "durable": True,
                                         "jobId": f"{hold}-{i}", "path": os.path.join(self.out_dir, f"q{i}")})
        wait_for(lambda: len(self.rows()) == n, timeout=10, message="not every job was written down")
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        # On a loaded machine the first job may have ended (its row removed) before the kill:
        # the jobs to resume are those still written down.
        pending = sorted(self.rows())
        self.assertGreaterEqual(len(pending), n - 2, pending)
        wait_for(lambda: hits(hold)["inFlight"] == 0, timeout=5)
        before = hits(hold)["count"]
        second = self.daemon("--max-per-host", "2")
        with second.client() as c2:
            for job in pending:
                self.assertEqual(c2.call("attach", {"jobId": job}, timeout=30)["status"], 200)
        record = hits(hold)
        self.assertEqual(record["count"] - before, len(pending), record)
        self.assertLessEqual(record["maxConcurrent"], 2, f"the restart stampeded the host: {record}")

    def test_non_durable_jobs_never_touch_the_state_dir(self):
        d = self.daemon()
        with d.client() as c:
            r = c.call("download", {"url": self.srv.test_url + "/ranged/1000", "path": os.path.join(self.out_dir, "n")})
            self.assertEqual(r["bytes"], 1000)
            self.assertEqual(c.call("fetch", {"url": self.srv.test_url + "/status/200"})["status"], 200)
        self.assertFalse(os.path.exists(self.state), "the state directory was made without a durable job")


class TestDurableRetries(DurableCase):
    """A durable job's retry state is written down: after a restart it goes on with the
    attempts it has used (a restart is not a failed attempt), and ends as it would have."""

    def stored_retry(self, job):
        """The store's (attempts, failures) for job; None when its store has no retry state
        (a fetchd before schema 2) or no such row; "no store" before the first is made."""
        if not os.path.exists(self.store_path()):
            return "no store"
        db = sqlite3.connect(f"file:{self.store_path()}?mode=ro", uri=True, timeout=5)
        try:
            columns = [r[1] for r in db.execute("PRAGMA table_info(jobs)")]
            if "failures" not in columns:
                return None
            return db.execute("SELECT attempts, failures FROM jobs WHERE job_id = ?", (job,)).fetchone()
        finally:
            db.close()

    def test_attempts_used_before_kill_9_count_after_it(self):
        name, job = key("durretry"), key("durretryjob")
        out = os.path.join(self.out_dir, "retry.bin")
        url = f"{self.srv.test_url}/flaky/{name}?fail=1000&status=503"
        # A fixed 2 s between attempts: the kill comes in the wait after the second failure.
        params = {"url": url, "path": out, "jobId": job, "durable": True, "retry": {"maxAttempts": 5, "delay": 2}}
        first = self.daemon()
        c = first.client()
        send_request(c, "download", params)
        with first.client() as c2:
            wait_for(lambda: hits(name)["count"] == 2 and job_state(c2, job) == "waiting", timeout=10,
                     message="the second attempt never failed")
            # The write follows the failure on another thread (a fetchd without retry state: None).
            wait_for(lambda: self.stored_retry(job) in (None, (2, 2)), timeout=5,
                     message="the retry state was never written")
        self.kill_9(first)
        self.assertEqual(hits(name)["count"], 2)

        _, result, got = self.attach_after_restart(job)
        # What the job would have answered without the restart: the last 503, after 5 attempts.
        self.assertEqual(result["status"], 503, result)
        self.assertEqual(result["attempts"], 5, result)
        self.assertEqual(result["bytes"], 0, result)
        self.assertEqual(hits(name)["count"], 5, "attempts across both daemons: the policy's maxAttempts")
        self.assertEqual(got["restarts"], 1, got)
        self.assertEqual(got["state"], "finished", got)
        self.assertFalse(os.path.exists(out))
        wait_for(lambda: job not in self.rows(), timeout=5, message="the job's row outlived the job")

    def test_exhausted_attempts_end_at_the_first_failure_after_restart(self):
        """4 of 5 attempts used, then killed: the resumed job makes one attempt and no retry,
        and that attempt's connection failure is the error (-32001 kind connect, attempts 5)."""
        name, job = key("durexh"), key("durexhjob")
        out = os.path.join(self.out_dir, "exh.bin")
        first = self.daemon()
        first_c = first.client()
        send_request(first_c, "download", {"url": f"{self.srv.test_url}/flaky/{name}?fail=1000&status=503", "path": out,
                                           "jobId": job, "durable": True, "retry": {"maxAttempts": 5, "delay": 1}})
        wait_for(lambda: hits(name)["count"] == 4 and self.stored_retry(job) in (None, (4, 4)), timeout=15,
                 message="four attempts never failed")
        self.kill_9(first)
        self.assertEqual(hits(name)["count"], 4, "the kill came in the wait after the fourth attempt")
        self.set_url(job, lambda _: "http://127.0.0.1:%d/" % closed_port())  # the host is gone now
        second = self.daemon()
        with second.client() as c:
            got = collect(c, send_request(c, "attach", {"jobId": job, "progress": True}), timeout=30)
        error = got.answer.get("error")
        self.assertIsNotNone(error, got.answer)
        self.assertEqual(error["code"], -32001, error)
        self.assertEqual(error["data"]["kind"], "connect", error)
        self.assertEqual(error["data"]["attempts"], 5, "one attempt after the restart, counted with the four before")
        self.assertEqual(got.of("retrying"), [], "the resumed job was given fresh retries")
        self.assertEqual(hits(name)["count"], 4)

    def test_store_of_schema_1_is_migrated_and_its_jobs_resume(self):
        """A store written by fetchd before the retry state (schema 1) is migrated in place,
        not moved aside. FETCHD_SCHEMA1_BIN: such a fetchd writes it (kill -9 mid-download);
        without it the test writes that schema itself."""
        size, cut = 120_000, 40_000
        job, name = key("durv1"), key("durv1log")
        out = os.path.join(self.out_dir, job + ".bin")
        old_bin = os.environ.get("FETCHD_SCHEMA1_BIN")
        if old_bin:
            first = self.daemon(bin=old_bin)
            self.start_stalled(first, job, name, size=size, cut=cut)
            self.kill_9(first)
        else:
            os.makedirs(self.state, mode=0o700)
            os.chmod(self.state, 0o700)
            url = f"{self.srv.test_url}/ranged/{size}?etag=v1&key={name}"
            db = sqlite3.connect(self.store_path())
            db.execute("PRAGMA journal_mode=WAL")
            with db:
                db.execute("""CREATE TABLE jobs (
                    job_id TEXT PRIMARY KEY NOT NULL, method TEXT NOT NULL, params TEXT NOT NULL,
                    restarts INTEGER NOT NULL, session_url TEXT, created INTEGER NOT NULL,
                    updated INTEGER NOT NULL)""")
                db.execute("PRAGMA user_version = 1")
                db.execute("INSERT INTO jobs VALUES (?, 'download', ?, 0, NULL, 1700000000, 1700000000)",
                           (job, json.dumps({"url": url, "path": out, "jobId": job, "durable": True})))
            db.close()
            os.chmod(self.store_path(), 0o600)
        with sqlite3.connect(self.store_path()) as db:
            self.assertEqual(db.execute("PRAGMA user_version").fetchone(), (1,))
        second, result, got = self.attach_after_restart(job)
        self.assertEqual(result["sha256"], hashlib.sha256(testserver.det_bytes(size)).hexdigest(), result)
        self.assertEqual(got["restarts"], 1, got)
        self.assertEqual([n for n in os.listdir(self.state) if "corrupt" in n], [], "the store was moved aside")
        self.assertIn(f"durable job store {self.store_path()}: schema 1 migrated to schema 3", second.stderr_text())
        db = sqlite3.connect(f"file:{self.store_path()}?mode=ro", uri=True, timeout=5)
        try:
            self.assertEqual(db.execute("PRAGMA user_version").fetchone(), (3,))
            columns = [r[1] for r in db.execute("PRAGMA table_info(jobs)")]
        finally:
            db.close()
        for column in ("attempts", "failures", "waited", "jitter", "started", "crashes", "live"):
            self.assertIn(column, columns)
        if old_bin:
            self.assertTrue(result["resumed"], result)


class TestPythonClient(DurableCase):
    """fetchd_client's durable, attach and get_job against a killed and restarted daemon."""

    def test_attach_and_get_job(self):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                        "clients", "python"))
        from fetchd_client import Client, InvalidParams
        size, cut = 120_000, 40_000
        name, job = key("pydurlog"), key("pydur")
        out = os.path.join(self.out_dir, "py.bin")
        url = f"{self.srv.test_url}/ranged/{size}?etag=p&key={name}&stall-after={cut}"
        first = self.daemon()
        c = Client(first.socket_path, rpc_timeout=60)
        started = threading.Thread(target=lambda: self.assertRaises(Exception, c.download, url, out,
                                                                    durable=True, job_id=job), daemon=True)
        started.start()
        wait_for(lambda: os.path.exists(out + ".part") and os.path.getsize(out + ".part") >= cut, timeout=10)
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        started.join(10)
        c.close()
        second = self.daemon()
        with Client(second.socket_path, rpc_timeout=60) as c2:
            result = c2.attach(job)
            got = c2.get_job(job)
            with self.assertRaises(InvalidParams):
                c2.get_job("no-" + job)
        self.assertEqual(result["sha256"], hashlib.sha256(testserver.det_bytes(size)).hexdigest())
        self.assertEqual(got["restarts"], 1, got)
        self.assertEqual(got["state"], "finished", got)




class TestFetchctl(DurableCase):
    """fetchctl attach and wait: a job's answer after a restart, with fetch's exit statuses."""

    def ctl(self, d, *args, timeout=60):
        env = dict(os.environ)
        env.pop("FETCHD_SOCKET", None)
        return subprocess.run([FETCHCTL, "--socket", d.socket_path] + list(args), capture_output=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)

    def test_attach_and_wait_after_restart(self):
        a, b = key("ctla"), key("ctlb")
        first = self.daemon()
        self.start_stalled(first, a, key("ctlalog"), size=200_000, cut=50_000)
        self.start_stalled(first, b, key("ctlblog"), size=100_000, cut=30_000)
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait()
        second = self.daemon()
        r = self.ctl(second, "attach", a)
        self.assertEqual(r.returncode, 0, r.stderr)
        result = json.loads(r.stdout)
        self.assertEqual(result["sha256"], hashlib.sha256(testserver.det_bytes(200_000)).hexdigest(), result)
        self.assertTrue(result["resumed"], result)
        r = self.ctl(second, "wait", a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode(), f"{a}: HTTP 206\n{b}: HTTP 206\n", "resumed: the 206 of the range")
        with open(os.path.join(self.out_dir, b + ".bin"), "rb") as f:
            self.assertEqual(f.read(), testserver.det_bytes(100_000))

    def test_exit_status_as_fetch(self):
        d = self.daemon()
        ok, failed, missing, cancelled, slow = key("ctlok"), key("ctlfail"), key("ctl404"), key("ctlcan"), key("ctlslow")
        with d.client() as c:
            c.call("fetch", {"url": self.srv.test_url + "/status/200", "jobId": ok})
            c.call("fetch", {"url": self.srv.test_url + "/status/404", "jobId": missing})
            with self.assertRaises(RPCError):
                c.call("fetch", {"url": "http://127.0.0.1:1/", "jobId": failed, "retry": False})
            send_request(c, "fetch", {"url": self.srv.test_url + SLOW, "jobId": cancelled, "detach": True})
            wait_for(lambda: job_state(c, cancelled) == "running", timeout=5)
            c.call("cancel", {"jobId": cancelled})
            slow_rid = send_request(c, "fetch", {"url": self.srv.test_url + "/slow-body?chunks=10&ms=100",
                                                 "jobId": slow, "detach": True})
            wait_for(lambda: job_state(c, slow) == "running", timeout=5)
            # wait follows a job still running to its end
            r = self.ctl(d, "wait", slow, ok)
            self.assertEqual((r.returncode, r.stdout.decode()), (0, f"{slow}: HTTP 200\n{ok}: HTTP 200\n"), r.stderr)
            self.assertEqual(collect(c, slow_rid, timeout=5).answer["result"]["status"], 200)
        self.assertEqual(self.ctl(d, "attach", failed).returncode, 7, "connection refused, as curl's 7")
        r = self.ctl(d, "wait", ok, failed, cancelled)
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertEqual(r.stdout.decode(), f"{ok}: HTTP 200\n")
        self.assertIn(f"{failed}: exit status 7", r.stderr.decode())
        self.assertIn(f"{cancelled}: exit status 5", r.stderr.decode())
        self.assertEqual(self.ctl(d, "attach", cancelled).returncode, 5)
        self.assertEqual(self.ctl(d, "attach", missing).returncode, 0, "a 404 without -f, as curl")
        self.assertEqual(self.ctl(d, "attach", "-f", missing).returncode, 22)
        self.assertEqual(self.ctl(d, "wait", "--fail", ok, missing).returncode, 22)
        self.assertEqual(self.ctl(d, "attach", "no-such-" + ok).returncode, 4)
        self.assertEqual(self.ctl(d, "attach").returncode, 2)
        self.assertEqual(self.ctl(d, "wait").returncode, 2)
