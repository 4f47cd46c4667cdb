"""Durable jobs (issue 19): getJob for live and ended jobs, attach from other connections,
and --state-dir with `durable: true` surviving a kill -9 of the daemon."""
import json
import os
import shutil
import tempfile
import unittest

from harness import Daemon, DaemonTestCase, RPCError, wait_for
from jobhelpers import collect, key, send_request

SLOW = "/slow-body?chunks=30&ms=100"  # 30 bytes over ~3 s


def job_state(client, job_id):
    """getJob's state, or None while the job is not registered yet (a download starts in a task)."""
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
            live = wait_for(lambda: (lambda j: j if j["state"] == "running" else None)(self.get_job(job, c2)),
                            timeout=5, message="the job never showed running")
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
            wait_for(lambda: self.get_job(cancelled, c2)["state"] == "running", timeout=5)
            self.assertEqual(c2.call("cancel", {"jobId": cancelled}), {"cancelled": True})
        collect(self.c, rid, timeout=5)
        got = self.get_job(cancelled)
        self.assertEqual(got["state"], "cancelled", got)
        self.assertEqual(got["error"]["code"], -32002, got)
        self.assertEqual(got["error"]["data"], {"jobId": cancelled, "by": "cancel"}, got)

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
