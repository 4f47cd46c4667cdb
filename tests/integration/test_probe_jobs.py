"""Jobs seen by other clients, job ids, URL patterns that cannot stall anyone, and the result's
`stub` member, against the real daemon.

- getJob, attach, listJobs and jobEvent from another connection show a job's URL and headers
  redacted as HTTP logs are (a userinfo password, a token in the query, Set-Cookie values);
  the answer to the request that made the job has them whole. A durable job resumed after a
  restart too.
- Job ids the daemon makes are random (`job-` and 16 hex digits), not `job-1`, `job-2` ...
- A back-reference in urlPattern is refused at addStub; a search that takes long (many URL
  patterns against a long URL) runs beside the other clients' stub requests, never in their
  way, and its job is listed and cancellable while it runs.
- Every stubbed answer of fetch, download and upload names the stub that answered (`stub`).
"""
import json
import os
import re
import shutil
import tempfile
import time
import unittest

from harness import DaemonTestCase, RPCError, wait_for
from jobhelpers import collect, key, send_request
from test_durable import DurableCase
from test_stubs import StubCase

PASSWORD = "pw-S3cretPass"
TOKEN = "tok-TopSecret1"
COOKIE = "ck-CookieSecret2"
SECRETS = (PASSWORD, TOKEN, COOKIE)


def with_userinfo(url, user="ann", password=PASSWORD):
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{user}:{password}@{rest}"


def job_state(client, job_id):
    try:
        return client.call("getJob", {"jobId": job_id})["state"]
    except RPCError:
        return None


class TestJobsSeenByOthers(DaemonTestCase):
    def assertRedacted(self, value, what):
        text = json.dumps(value)
        for secret in SECRETS:
            self.assertNotIn(secret, text, f"{what} shows a secret: {text[:600]}")

    def test_get_job_and_attach_of_an_ended_job_are_redacted_the_creator_is_not(self):
        job = key("seen")
        url = with_userinfo(f"{self.srv.test_url}/set-cookie?session={COOKIE}&token={TOKEN}")
        own = self.c.call("fetch", {"url": url, "jobId": job})
        # The request that made the job has everything whole.
        self.assertIn(PASSWORD, own["url"], own)
        self.assertIn(TOKEN, own["url"], own)
        self.assertIn(COOKIE, own["headers"]["set-cookie"], own)
        with self.daemon.client() as other:
            got = other.call("getJob", {"jobId": job})
            self.assertEqual(got["state"], "finished", got)
            self.assertRedacted(got, "getJob")
            result = got["result"]
            self.assertIn("%3Credacted%3E", result["url"], result)
            self.assertTrue(result["url"].startswith(f"{self.srv.test_url.split('://')[0]}://ann:"), result)
            self.assertEqual(result["headers"]["set-cookie"], "<redacted>", result)
            self.assertEqual(result["status"], 200, result)
            attached = other.call("attach", {"jobId": job})
            self.assertRedacted(attached, "attach")
            self.assertEqual(attached["url"], result["url"])
        # The creator's own getJob is another request: redacted too.
        self.assertRedacted(self.c.call("getJob", {"jobId": job}), "getJob on the creator's connection")

    def test_live_job_listed_attached_and_evented_redacted(self):
        job = key("live")
        url = with_userinfo(f"{self.srv.test_url}/slow-body?chunks=10&ms=100&token={TOKEN}")
        with self.daemon.client() as watcher, self.daemon.client() as other:
            self.assertEqual(watcher.call("subscribe", {"jobs": True}), {"subscribed": True})
            rid = send_request(self.c, "fetch", {"url": url, "jobId": job})
            wait_for(lambda: job_state(other, job) == "running", timeout=10, message="the job never ran")
            listed = [j for j in other.call("listJobs")["jobs"] if j["jobId"] == job]
            self.assertEqual(len(listed), 1, listed)
            self.assertRedacted(listed, "listJobs")
            attach_id = send_request(other, "attach", {"jobId": job})
            own = collect(self.c, rid, timeout=20).answer["result"]
            self.assertIn(TOKEN, own["url"])
            self.assertIn(PASSWORD, own["url"])
            attached = collect(other, attach_id, timeout=20).answer
            self.assertIn("result", attached, attached)
            self.assertRedacted(attached, "attach to a live job")
            self.assertIn("%3Credacted%3E", attached["result"]["url"])

            def finished():
                watcher.call("ping")
                events = [n["params"] for n in watcher.notifications
                          if n.get("method") == "jobEvent" and n["params"]["jobId"] == job]
                return events if any(e["event"] == "finished" for e in events) else None
            events = wait_for(finished, timeout=10)
            self.assertRedacted(events, "jobEvent")

    def test_an_error_seen_by_others_is_redacted(self):
        job = key("err")
        url = with_userinfo(f"http://127.0.0.1:1/x?token={TOKEN}")
        with self.assertRaises(RPCError):
            self.c.call("fetch", {"url": url, "jobId": job, "retry": False})
        with self.daemon.client() as other:
            got = other.call("getJob", {"jobId": job})
            self.assertEqual(got["state"], "failed", got)
            self.assertRedacted(got, "getJob of a failed job")


class TestDurableJobSeenByOthers(DurableCase):
    def test_a_resumed_durable_job_is_redacted_for_attach_and_get_job(self):
        job = key("durseen")
        first = self.daemon()
        # The test server's key for the download's log, and a token after it in the query.
        c, _ = self.start_stalled(first, job, f"{key('durseenlog')}&token={TOKEN}")
        c.close()
        self.kill_9(first)
        second, attached, ended = self.attach_after_restart(job)
        self.assertEqual((attached["status"], attached["resumed"]), (206, True), attached)
        self.assertEqual(ended["restarts"], 1, ended)
        for value, what in ((attached, "attach"), (ended, "getJob")):
            self.assertNotIn(TOKEN, json.dumps(value), f"{what} after a restart: {value}")
        self.assertIn("%3Credacted%3E", attached["url"], attached)


class TestJobIDs(DaemonTestCase):
    def test_generated_ids_are_random_not_sequential(self):
        url = self.srv.test_url + "/status/200"
        ids = [self.c.call("fetch", {"url": url})["jobId"] for _ in range(20)]
        self.assertEqual(len(set(ids)), 20, ids)
        for job_id in ids:
            self.assertRegex(job_id, r"^job-[0-9a-f]{16}$")
        numbers = [int(i[4:], 16) for i in ids]
        steps = {b - a for a, b in zip(numbers, numbers[1:])}
        self.assertNotEqual(steps, {1}, ids)
        self.assertTrue(all(abs(step) > 1_000_000 for step in steps), ids)
        # A client's own id is kept as it is.
        mine = key("mine")
        self.assertEqual(self.c.call("fetch", {"url": url, "jobId": mine})["jobId"], mine)


class TestURLPatterns(StubCase):
    def test_a_back_reference_is_refused_and_a_plain_pattern_works(self):
        with self.assertRaises(RPCError) as caught:
            self.add(match={"urlPattern": r"(a*)*\1b"}, respond={"status": 200})
        error = caught.exception
        self.assertEqual(error.code, -32602)
        self.assertEqual(error.data["field"], "match.urlPattern", error.data)
        self.assertEqual(error.data["detail"], "back-references (\\1) are not allowed: matching them takes backtracking, "
                                               "which can take exponential time")
        with self.assertRaises(RPCError) as caught:
            self.add(match={"urlPattern": "("}, respond={"status": 200})
        self.assertEqual(caught.exception.data["detail"], "not a POSIX extended regular expression: Unmatched ( or \\(")
        name = key("pat")
        sid = self.add(match={"urlPattern": f"/record/{name}/items/[0-9]+$"}, respond={"status": 203})
        r = self.c.call("fetch", {"url": self.url(name) + "/items/42", "stubs": self.set})
        self.assertEqual((r["status"], r["stub"]), (203, sid), r)
        # The probe's pattern without its back-reference: nested repetition, one pass.
        self.add(match={"urlPattern": "(a*)*b$"}, respond={"status": 204})
        started = time.monotonic()
        with self.assertRaises(RPCError) as missed:
            self.c.call("fetch", {"url": self.url(name) + "/" + "a" * 170, "stubs": self.set})
        self.assertEqual(missed.exception.data["kind"], "stubMiss")
        self.assertLess(time.monotonic() - started, 2.0)

    def test_a_long_search_is_listed_cancellable_and_in_nobody_s_way(self):
        # Many patterns against a long URL: minutes of matching for this one request.
        for i in range(200):
            self.add(match={"urlPattern": f"(.*a){{60}}x{i}$"}, respond={"status": 200})
        slow_url = self.url(key("slow")) + "?q=" + "a" * 100_000
        job = key("matching")
        rid = send_request(self.c, "fetch", {"url": slow_url, "stubs": self.set, "jobId": job})
        with self.daemon.client() as other:
            other_set = key("other")
            name = key("quick")
            sid = other.call("addStub", {"set": other_set, "match": {"url": self.url(name)},
                                         "respond": {"body": "quick"}})["stubId"]
            wait_for(lambda: job_state(other, job) is not None, timeout=10)
            # Another client's stubbed fetches go on at once, on every engine thread.
            for _ in range(4):
                with self.daemon.client() as third:
                    started = time.monotonic()
                    r = third.call("fetch", {"url": self.url(name), "stubs": other_set}, timeout=10)
                    self.assertLess(time.monotonic() - started, 1.0, "a stubbed fetch waited for another client's search")
                    self.assertEqual((r["body"], r["stub"]), ("quick", sid), r)
            listed = [j for j in other.call("listJobs")["jobs"] if j["jobId"] == job]
            self.assertEqual(len(listed), 1, "the job is listed while its stubs are searched")
            self.assertEqual(listed[0]["phase"], "waitingForHost", listed)
            started = time.monotonic()
            self.assertEqual(other.call("cancel", {"jobId": job}), {"cancelled": True})
            answer = collect(self.c, rid, timeout=10).answer
            self.assertEqual(answer["error"]["code"], -32002, answer)
            self.assertLess(time.monotonic() - started, 2.0)
            other.call("removeStubs", {"set": other_set})
        self.assertAlive()


class TestStubMember(StubCase):
    def test_fetch_download_and_upload_name_the_stub_that_answered(self):
        name = key("member")
        first = self.add(match={"method": "GET", "url": self.url(name)}, respond={"status": 200, "body": "one"})
        second = self.add(match={"method": "POST", "url": self.url(name)}, respond={"status": 201, "json": {"ok": 1}})
        r = self.c.call("fetch", {"url": self.url(name), "stubs": self.set})
        self.assertEqual(r["stub"], first, r)
        d = tempfile.mkdtemp(prefix="fetchd-stub-member-")
        self.addCleanup(shutil.rmtree, d, True)
        r = self.c.call("download", {"url": self.url(name), "path": os.path.join(d, "out.txt"), "stubs": self.set})
        self.assertEqual((r["status"], r["stub"]), (200, first), r)
        r = self.c.call("upload", {"url": self.url(name), "files": [{"content": "x", "filename": "x.txt"}],
                                   "stubs": self.set})
        self.assertEqual((r["status"], r["stub"]), (201, second), r)
        # A redirect followed through the set: the stub of the last answer.
        hop = self.add(match={"url": self.url(name + "-from")}, respond={"status": 302, "headers": {"Location": f"/record/{name}"}})
        r = self.c.call("fetch", {"url": self.url(name + "-from"), "stubs": self.set})
        self.assertEqual((r["status"], r["redirects"], r["stub"]), (200, 1, first), (r, hop))
        # No stub answered: no member.
        r = self.c.call("fetch", {"url": self.srv.test_url + "/status/200"})
        self.assertNotIn("stub", r)

    def test_a_retried_stub_answer_names_the_last_stub(self):
        name = key("seq")
        sid = self.add(match={"url": self.url(name)}, respondSequence=[{"status": 503}, {"status": 200, "body": "ok"}])
        r = self.c.call("fetch", {"url": self.url(name), "stubs": self.set, "retry": {"maxInterval": 0.05}})
        self.assertEqual((r["status"], r["attempts"], r["stub"]), (200, 2, sid), r)
        self.assertTrue(re.match(r"^stub-\d+$", sid), sid)


if __name__ == "__main__":
    unittest.main()
