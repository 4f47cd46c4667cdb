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
