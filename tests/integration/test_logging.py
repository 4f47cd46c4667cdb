"""HTTP logs: setLogging/getLogging, one HAR 1.2 file per finished job (succeeded,
failed or cancelled) with one entry per attempt and per redirect hop, secrets redacted
everywhere in the log directory, --log-dir as the default directory, fetchctl logging.

HAR files are written asynchronously right after the answer: tests wait for the file with
wait_for. To show that nothing was written, a marker job is logged afterwards: the daemon writes
its logs in order on one queue, so once the marker's file exists, an earlier file would too."""
import base64
import glob
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import unittest
from urllib.parse import quote

from harness import FETCHCTL, Daemon, DaemonTestCase, RPCError, closed_port, servers, wait_for
from jobhelpers import collect, job_entry, key, send_request

ISO_8601 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$")
FILE_NAME = re.compile(r"^(\d{8}-\d{6}\.\d{3})-(.+)\.har$")
REDACTED = "<redacted>"


# --------------------------------------------------------------------------- HAR 1.2 validator
def har_problems(har):
    """Every way `har` breaks the HAR 1.2 spec's required fields and types (empty: valid)."""
    out = []

    def need(obj, field, types, where, optional=False):
        if not isinstance(obj, dict):
            out.append(f"{where}: not an object")
            return None
        if field not in obj:
            if not optional:
                out.append(f"{where}.{field}: missing")
            return None
        v = obj[field]
        # bool is an int in Python: never accept it for a number.
        if isinstance(v, bool) and bool not in types or not isinstance(v, types):
            out.append(f"{where}.{field}: {type(v).__name__} {json.dumps(v)[:80]}, expected {types}")
            return None
        return v

    def pairs(obj, field, where, optional=False):
        items = need(obj, field, list, where, optional)
        for i, p in enumerate(items or []):
            need(p, "name", str, f"{where}.{field}[{i}]")
            need(p, "value", str, f"{where}.{field}[{i}]")
        return items

    def cookies(obj, where):
        for i, c in enumerate(need(obj, "cookies", list, where) or []):
            w = f"{where}.cookies[{i}]"
            need(c, "name", str, w)
            need(c, "value", str, w)
            for f in ("path", "domain", "expires", "comment"):
                need(c, f, str, w, optional=True)
            for f in ("httpOnly", "secure"):
                need(c, f, bool, w, optional=True)

    num = (int, float)
    log = need(har, "log", dict, "har")
    if log is None:
        return out
    version = need(log, "version", str, "log")
    if version is not None and version != "1.2":
        out.append(f"log.version: {version!r}, expected '1.2'")
    creator = need(log, "creator", dict, "log")
    if creator is not None:
        need(creator, "name", str, "log.creator")
        need(creator, "version", str, "log.creator")
    need(log, "pages", list, "log", optional=True)
    need(log, "comment", str, "log", optional=True)
    for n, e in enumerate(need(log, "entries", list, "log") or []):
        w = f"log.entries[{n}]"
        started = need(e, "startedDateTime", str, w)
        if started is not None and not ISO_8601.match(started):
            out.append(f"{w}.startedDateTime: {started!r} is not ISO 8601")
        t = need(e, "time", num, w)
        if t is not None and t < 0:
            out.append(f"{w}.time: {t} < 0")
        req = need(e, "request", dict, w)
        if req is not None:
            rw = w + ".request"
            need(req, "method", str, rw)
            need(req, "url", str, rw)
            need(req, "httpVersion", str, rw)
            cookies(req, rw)
            pairs(req, "headers", rw)
            pairs(req, "queryString", rw)
            need(req, "headersSize", int, rw)
            need(req, "bodySize", int, rw)
            post = need(req, "postData", dict, rw, optional=True)
            if post is not None:
                need(post, "mimeType", str, rw + ".postData")
                need(post, "text", str, rw + ".postData", optional=True)
                for i, p in enumerate(need(post, "params", list, rw + ".postData", optional=True) or []):
                    pw = f"{rw}.postData.params[{i}]"
                    need(p, "name", str, pw)
                    for f in ("value", "fileName", "contentType", "comment"):
                        need(p, f, str, pw, optional=True)
                if "text" not in post and "params" not in post:
                    out.append(f"{rw}.postData: neither text nor params")
        resp = need(e, "response", dict, w)
        if resp is not None:
            sw = w + ".response"
            need(resp, "status", int, sw)
            need(resp, "statusText", str, sw)
            need(resp, "httpVersion", str, sw)
            cookies(resp, sw)
            pairs(resp, "headers", sw)
            content = need(resp, "content", dict, sw)
            if content is not None:
                need(content, "size", int, sw + ".content")
                need(content, "mimeType", str, sw + ".content")
                need(content, "compression", int, sw + ".content", optional=True)
                need(content, "text", str, sw + ".content", optional=True)
                enc = need(content, "encoding", str, sw + ".content", optional=True)
                if enc is not None and enc != "base64":
                    out.append(f"{sw}.content.encoding: {enc!r}")
            need(resp, "redirectURL", str, sw)
            need(resp, "headersSize", int, sw)
            need(resp, "bodySize", int, sw)
        need(e, "cache", dict, w)
        timings = need(e, "timings", dict, w)
        if timings is not None:
            total = 0.0
            for f in ("blocked", "dns", "connect", "send", "wait", "receive", "ssl"):
                required = f in ("send", "wait", "receive")
                v = need(timings, f, num, w + ".timings", optional=not required)
                if v is None:
                    continue
                # send, wait and receive can't be -1 (spec); the others use -1 for "does not apply".
                if v < (0 if required else -1):
                    out.append(f"{w}.timings.{f}: {v}")
                if f != "ssl" and v > 0:  # ssl time is also included in connect
                    total += v
            if t is not None and abs(total - t) > 0.01 + 0.001 * t:
                out.append(f"{w}.time {t} is not the sum of its timings {total}")
    return out


# --------------------------------------------------------------------------- helpers
def dir_bytes(directory):
    """Every byte of every file (hidden ones too) under directory."""
    out = b""
    for root, _, files in os.walk(directory):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out += fh.read()
    return out


def har_files(directory):
    return sorted(f for f in (os.listdir(directory) if os.path.isdir(directory) else [])
                  if FILE_NAME.match(f))


class LoggingCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.base = tempfile.mkdtemp(prefix="logs-", dir=self.daemon.tmpdir)
        self.logdir = os.path.join(self.base, "har", "nested")  # missing: setLogging creates it

    def tearDown(self):
        try:
            self.c.call("setLogging", {"enabled": False, "bodies": True, "maxBodyBytes": 1048576,
                                       "redact": True})
        finally:
            super().tearDown()
            shutil.rmtree(self.base, ignore_errors=True)

    def enable(self, **settings):
        params = {"enabled": True, "directory": self.logdir}
        params.update(settings)
        r = self.c.call("setLogging", params)
        for k, v in params.items():
            self.assertEqual(r.get(k), v, f"setLogging answer {r} should echo {k}={v!r}")
        return r

    def har_path(self, job_id, directory=None, timeout=10):
        directory = directory or self.logdir

        def find():
            hits = [f for f in har_files(directory) if FILE_NAME.match(f).group(2) == job_id]
            return hits[0] if hits else None
        name = wait_for(find, timeout=timeout,
                        message=f"no HAR file for job {job_id} in {directory} within {timeout}s; "
                                f"files: {os.listdir(directory) if os.path.isdir(directory) else 'no dir'}")
        return os.path.join(directory, name)

    def har(self, job_id, directory=None):
        """The job's HAR file, parsed and checked against HAR 1.2."""
        path = self.har_path(job_id, directory)
        with open(path, "rb") as f:
            har = json.loads(f.read())
        problems = har_problems(har)
        self.assertEqual(problems, [], f"{os.path.basename(path)} is not valid HAR 1.2:\n"
                         + "\n".join(problems) + "\n" + json.dumps(har)[:3000])
        return har

    def entries(self, job_id, directory=None):
        return self.har(job_id, directory)["log"]["entries"]

    def header(self, headers, name):
        return [h["value"] for h in headers if h["name"].lower() == name.lower()]


# --------------------------------------------------------------------------- structure
class TestHARStructure(LoggingCase):
    def test_simple_get_file_name_modes_and_fields(self):
        job = key("get")
        before = time.time()
        r = self.enable()
        self.assertEqual(r, {"enabled": True, "directory": self.logdir, "bodies": True,
                             "maxBodyBytes": 1048576, "redact": True}, "setLogging answer")
        self.assertEqual(stat.S_IMODE(os.stat(self.logdir).st_mode), 0o700,
                         "a missing log directory is created with mode 0700")
        url = self.srv.test_url + "/echo?x=1&y=two"
        res = self.fetch({"url": url, "jobId": job, "comment": "a note for the log",
                          "headers": {"X-Test": "hello"}})
        path = self.har_path(job)
        name = os.path.basename(path)
        stamp = FILE_NAME.match(name).group(1)
        t = time.mktime(time.strptime(stamp[:15], "%Y%m%d-%H%M%S")) - time.timezone
        self.assertLess(abs(t - before), 60, f"{name}: the time stamp is not the current UTC time")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600, f"{name} should be mode 0600")
        self.assertEqual([f for f in os.listdir(self.logdir) if f.startswith(".")], [],
                         "no temporary file left behind")
        har = self.har(job)
        log = har["log"]
        self.assertEqual(log["creator"]["name"], "fetchd")
        self.assertIn(job, log.get("comment", ""), "log.comment names the job")
        self.assertIn("a note for the log", log.get("comment", ""), "log.comment carries the job's comment")
        self.assertEqual(len(log["entries"]), 1, json.dumps(log)[:2000])
        e = log["entries"][0]
        req, resp = e["request"], e["response"]
        self.assertEqual(req["method"], "GET")
        self.assertEqual(req["url"], url)
        self.assertEqual(req["httpVersion"], "HTTP/1.1")
        self.assertEqual(self.header(req["headers"], "X-Test"), ["hello"], req["headers"])
        self.assertEqual([(q["name"], q["value"]) for q in req["queryString"]], [("x", "1"), ("y", "two")])
        self.assertNotIn("postData", req)
        self.assertEqual(resp["status"], 200)
        self.assertEqual(resp["statusText"], "OK")
        self.assertEqual(self.header(resp["headers"], "Content-Type"), ["application/json"])
        self.assertEqual(resp["content"]["mimeType"], "application/json")
        self.assertEqual(resp["content"]["size"], res["bytes"])
        self.assertEqual(resp["content"].get("text"), res["body"], "content.text is the body")
        self.assertNotIn("encoding", resp["content"])
        self.assertEqual(resp["redirectURL"], "")
        started = e["startedDateTime"]
        self.assertTrue(started.endswith("Z") or "+" in started, started)

    def test_post_json_has_post_data(self):
        job = key("post")
        self.enable()
        self.fetch({"url": self.srv.test_url + "/echo", "jobId": job, "json": {"a": [1, 2], "b": "x"}})
        req = self.entries(job)[0]["request"]
        self.assertEqual(req["method"], "POST")
        post = req.get("postData")
        self.assertIsNotNone(post, req)
        self.assertEqual(post["mimeType"], "application/json")
        self.assertEqual(json.loads(post["text"]), {"a": [1, 2], "b": "x"})
        self.assertEqual(req["bodySize"], len(json.dumps({"a": [1, 2], "b": "x"}, separators=(",", ":"))))

    def test_redirect_has_one_entry_per_hop(self):
        job = key("redir")
        self.enable()
        res = self.fetch({"url": self.srv.test_url + "/redirect/2", "jobId": job})
        self.assertEqual(res["redirects"], 2, res)
        entries = self.entries(job)
        self.assertEqual([e["response"]["status"] for e in entries], [302, 302, 200],
                         "one entry per redirect hop")
        self.assertEqual([e["request"]["url"] for e in entries],
                         [self.srv.test_url + p for p in ("/redirect/2", "/redirect/1", "/redirect/0")])
        self.assertTrue(entries[0]["response"]["redirectURL"].endswith("/redirect/1"),
                        entries[0]["response"])
        self.assertTrue(entries[1]["response"]["redirectURL"].endswith("/redirect/0"))
        self.assertEqual(entries[2]["response"]["redirectURL"], "")
        self.assertEqual(entries[2]["response"]["content"].get("text"), "done")
        for e in entries:
            self.assertNotIn("_error", e)

    def test_retried_job_has_one_entry_per_attempt(self):
        job = key("flaky")
        self.enable()
        res = self.fetch({"url": f"{self.srv.test_url}/flaky/{job}?fail=2&status=503&retry-after=0",
                          "jobId": job})
        self.assertEqual((res["status"], res["attempts"]), (200, 3), res)
        entries = self.entries(job)
        self.assertEqual([e["response"]["status"] for e in entries], [503, 503, 200],
                         "one entry per attempt")
        self.assertEqual([self.header(e["response"]["headers"], "Retry-After") for e in entries],
                         [["0"], ["0"], []])
        self.assertEqual(entries[0]["response"]["content"].get("text"), "status 503",
                         "each attempt's own answer")
        self.assertEqual(entries[2]["response"]["content"].get("text"), "ok after 2")
        for e in entries:  # an HTTP status is an answer, not a transport error
            self.assertNotIn("_error", e)
        starts = [e["startedDateTime"] for e in entries]
        self.assertEqual(starts, sorted(starts), "entries in attempt order")

    def test_failed_job_writes_a_file(self):
        job = key("refused")
        self.enable()
        port = closed_port()
        err = self.fetch_error({"url": f"http://127.0.0.1:{port}/x", "jobId": job,
                                "retry": {"maxAttempts": 2, "maxInterval": 0.05}})
        self.assertEqual(err.code, -32001, err)
        log = self.har(job)["log"]
        self.assertIn("failed", log.get("comment", ""), log.get("comment"))
        entries = log["entries"]
        self.assertEqual(len(entries), 2, f"one entry per failed attempt: {json.dumps(entries)[:1500]}")
        for e in entries:
            self.assertEqual(e["request"]["url"], f"http://127.0.0.1:{port}/x")
            self.assertEqual(e["request"]["method"], "GET")
            self.assertEqual(e["response"]["status"], 0, "no answer: status 0")
            self.assertIn("_error", e, "a failed attempt carries _error")
            self.assertEqual(e["_error"].get("kind"), "connect", e["_error"])
            self.assertIsInstance(e["_error"].get("detail"), str)

    def test_cancelled_job_writes_a_file(self):
        job = key("cancel")
        self.enable()
        rid = send_request(self.c, "fetch", {"url": self.srv.test_url + "/slow-headers?ms=3000",
                                             "jobId": job, "retry": False})
        with self.daemon.client() as c2:
            wait_for(lambda: (job_entry(c2, job) or {}).get("state") == "running",
                     message="the job never ran")
            self.assertEqual(c2.call("cancel", {"jobId": job}), {"cancelled": True})
        answer = collect(self.c, rid).answer
        self.assertEqual(answer.get("error", {}).get("code"), -32002, answer)
        log = self.har(job)["log"]
        self.assertIn("cancel", log.get("comment", ""), log.get("comment"))
        self.assertEqual(len(log["entries"]), 1, json.dumps(log)[:1500])
        e = log["entries"][0]
        self.assertTrue(e["request"]["url"].endswith("/slow-headers?ms=3000"))
        self.assertIn("_error", e, "the cancelled attempt carries _error")

    def test_binary_body_is_base64(self):
        job = key("bin")
        self.enable()
        res = self.fetch({"url": self.srv.test_url + "/binary", "jobId": job})
        self.assertIn("bodyBase64", res)
        content = self.entries(job)[0]["response"]["content"]
        self.assertEqual(content.get("encoding"), "base64", content)
        self.assertEqual(base64.b64decode(content["text"]), base64.b64decode(res["bodyBase64"]))
        self.assertEqual(content["size"], res["bytes"])
        self.assertEqual(content["mimeType"], "application/octet-stream")

    def test_bodies_false_omits_content_text(self):
        job = key("nobody")
        self.enable(bodies=False)
        res = self.fetch({"url": self.srv.test_url + "/echo", "jobId": job, "body": "hello body"})
        content = self.entries(job)[0]["response"]["content"]
        self.assertNotIn("text", content, content)
        self.assertEqual(content["size"], res["bytes"], "size is still given")
        self.assertNotIn(b"hello body", dir_bytes(self.logdir), "the request body is left out too")

    def test_max_body_bytes_truncates(self):
        job, job2 = key("trunc"), key("trunc-bin")
        self.enable(maxBodyBytes=40)
        res = self.fetch({"url": self.srv.test_url + "/echo", "jobId": job})
        content = self.entries(job)[0]["response"]["content"]
        self.assertEqual(content.get("text"), res["body"][:40], content)
        self.assertEqual(content["size"], res["bytes"], "size is the whole body's")
        res = self.fetch({"url": self.srv.test_url + "/bytes/1000", "jobId": job2})
        content = self.entries(job2)[0]["response"]["content"]
        self.assertEqual(content.get("encoding"), "base64", content)
        self.assertEqual(base64.b64decode(content["text"]), base64.b64decode(res["bodyBase64"])[:40])
        self.assertEqual(content["size"], 1000)

    def test_max_body_bytes_cut_inside_a_utf8_character_stays_text(self):
        job = key("utf8cut")
        self.enable(maxBodyBytes=3)  # "Grüße": G r then the first byte of the 2-byte "ü"
        res = self.fetch({"url": self.srv.nginx_url + "/utf8.txt", "jobId": job})
        self.assertTrue(res["body"].startswith("Grü"), res)
        content = self.entries(job)[0]["response"]["content"]
        self.assertNotIn("encoding", content,
                         f"a UTF-8 text body cut inside a character should stay text: {content}")
        self.assertTrue(content.get("text") in ("Gr", "Grü"), content)

    def test_download_is_described_not_copied(self):
        job = key("dl")
        self.enable()
        target = os.path.join(self.base, "out.bin")
        res = self.c.call("download", {"url": self.srv.test_url + "/bytes/5000", "path": target, "jobId": job},
                          timeout=30)
        content = self.entries(job)[0]["response"]["content"]
        self.assertNotIn("text", content, "a download's body is in its file, not in the log")
        self.assertEqual(content["size"], 5000)
        self.assertIn(res["sha256"], content.get("comment", ""), content)

    def test_job_id_cannot_escape_the_directory(self):
        job = "../../escape me"
        self.enable()
        self.fetch({"url": self.srv.test_url + "/redirect/0", "jobId": job})
        name = wait_for(lambda: har_files(self.logdir), message="no file for a job id with slashes")[0]
        self.assertEqual(FILE_NAME.match(name).group(2), ".._.._escape_me", name)
        self.assertEqual([f for f in os.listdir(self.base) if f.endswith(".har")], [])
        self.assertIn(job, self.har(".._.._escape_me")["log"]["comment"], "the comment keeps the real id")

    def test_form_body_shows_params(self):
        job = key("form")
        self.enable()
        self.fetch({"url": self.srv.test_url + "/echo", "jobId": job, "form": {"a": "1", "b": "two words"}})
        post = self.entries(job)[0]["request"]["postData"]
        self.assertTrue(post["mimeType"].startswith("application/x-www-form-urlencoded"), post)
        self.assertEqual([(p["name"], p.get("value")) for p in post["params"]],
                         [("a", "1"), ("b", "two words")])

    def test_upload_multipart_shows_params(self):
        job = key("upload")
        path = os.path.join(self.base, "doc.txt")
        with open(path, "w") as f:
            f.write("file content\n")
        self.enable()
        res = self.c.call("upload", {"url": self.srv.test_url + "/multipart-echo", "jobId": job,
                                     "files": [{"path": path, "field": "doc"},
                                               {"content": "inline", "filename": "in.txt", "field": "f2"}],
                                     "fields": {"note": "hi there"}}, timeout=30)
        self.assertEqual(res["status"], 200, res)
        post = self.entries(job)[0]["request"].get("postData")
        self.assertIsNotNone(post)
        self.assertTrue(post["mimeType"].startswith("multipart/form-data"), post)
        params = {p["name"]: p for p in post.get("params", [])}
        self.assertEqual(set(params), {"doc", "f2", "note"}, post)
        self.assertEqual(params["doc"].get("fileName"), "doc.txt")
        self.assertEqual(params["f2"].get("fileName"), "in.txt")
        self.assertEqual(params["note"].get("value"), "hi there")


# --------------------------------------------------------------------------- redaction
class TestRedaction(LoggingCase):
    def secrets(self):
        tag = key("s").split("-")[1]
        return {n: f"{n}Secret{tag}" for n in
                ("auth", "proxyauth", "cookie", "setcookie", "password", "clientsecret", "accesstoken",
                 "multipart", "nested")}

    def run_secret_jobs(self, s):
        """Sends each secret the way it is meant to be hidden; most to /echo, which sends it back."""
        t = self.srv.test_url
        jar = key("jar")
        jobs = []

        def go(params, method="fetch"):
            job = key("sec")
            jobs.append(job)
            res = self.c.call(method, dict(params, jobId=job), timeout=30)
            self.assertEqual(res["status"], 200, res)
            return res
        res = go({"url": t + "/echo", "cookieJar": False,
                  "headers": {"Authorization": f"Bearer {s['auth']}",
                              "Proxy-Authorization": f"Basic {s['proxyauth']}",
                              "Cookie": f"sid={s['cookie']}"},
                  "json": {"user": "bob", "password": s["password"], "inner": {"api_token": s["nested"]}}})
        self.assertIn(s["password"], res["body"], "the echo server sends the secret back")
        res = go({"url": t + "/echo?access_token=" + s["accesstoken"] + "&page=2",
                  "form": {"grant_type": "client_credentials", "client_secret": s["clientsecret"]}})
        self.assertIn(s["clientsecret"], res["body"])
        go({"url": t + "/set-cookie?session=" + s["setcookie"], "cookieJar": jar})
        res = go({"url": t + "/echo", "cookieJar": jar})  # the jar sends it back; /echo echoes it
        self.assertIn(s["setcookie"], res["body"])
        go({"url": t + "/multipart-echo", "files": [{"content": "x", "filename": "x.txt"}],
            "fields": {"password": s["multipart"]}}, method="upload")
        return jobs

    def test_secrets_appear_nowhere_in_the_log_directory(self):
        s = self.secrets()
        self.enable()
        jobs = self.run_secret_jobs(s)
        hars = [self.har(j) for j in jobs]  # waits for every file
        data = dir_bytes(self.logdir)
        leaked = [n for n, v in s.items() if v.encode() in data]
        self.assertEqual(leaked, [], f"secrets found in the log directory: {leaked}")

        # ... and they were masked where they belong, not just dropped.
        e1 = hars[0]["log"]["entries"][0]["request"]
        for h in ("Authorization", "Proxy-Authorization", "Cookie"):
            self.assertEqual(self.header(e1["headers"], h), [REDACTED], f"{h}: {e1['headers']}")
        self.assertEqual(e1["cookies"], [{"name": "sid", "value": REDACTED}], e1["cookies"])
        sent = json.loads(e1["postData"]["text"])
        self.assertEqual(sent, {"user": "bob", "password": REDACTED, "inner": {"api_token": REDACTED}})
        e2 = hars[1]["log"]["entries"][0]["request"]
        self.assertEqual([(q["name"], q["value"]) for q in e2["queryString"]],
                         [("access_token", REDACTED), ("page", "2")])
        self.assertEqual([(p["name"], p["value"]) for p in e2["postData"]["params"]],
                         [("grant_type", "client_credentials"), ("client_secret", REDACTED)])
        r3 = hars[2]["log"]["entries"][0]["response"]
        self.assertEqual(self.header(r3["headers"], "Set-Cookie"), [REDACTED], r3["headers"])
        self.assertEqual([(c["name"], c["value"]) for c in r3["cookies"]], [("session", REDACTED)])
        e4 = hars[3]["log"]["entries"][0]["request"]
        self.assertEqual(self.header(e4["headers"], "Cookie"), [REDACTED], e4["headers"])
        p5 = {p["name"]: p for p in hars[4]["log"]["entries"][0]["request"]["postData"]["params"]}
        self.assertEqual(p5["password"].get("value"), REDACTED, p5)

    def test_secret_query_parameter_reached_through_a_redirect(self):
        """The token is first seen in a Location header, then in the next hop's URL (an OAuth-style
        callback): it is a secret in every hop, not only in the hop whose URL names it."""
        secret = "redirSecret" + key("t").split("-")[1]
        job = key("redir-sec")
        self.enable()
        target = "/echo?access_token=" + secret
        res = self.fetch({"url": self.srv.test_url + "/redirect-to?url=" + quote(target, safe=""), "jobId": job})
        self.assertIn(secret, res["body"])
        entries = self.entries(job)
        self.assertEqual(len(entries), 2)
        self.assertEqual([(q["name"], q["value"]) for q in entries[1]["request"]["queryString"]],
                         [("access_token", REDACTED)])
        data = dir_bytes(self.logdir)
        self.assertFalse(secret.encode() in data,
                         f"the access_token reached through a redirect leaks {data.count(secret.encode())} times; "
                         f"hop 1: url {entries[0]['request']['url']}, redirectURL {entries[0]['response']['redirectURL']}")

    def test_redact_false_shows_the_secrets(self):
        """The same jobs without redaction: every secret is in the files (the test above can fail)."""
        s = self.secrets()
        self.enable(redact=False)
        for job in self.run_secret_jobs(s):
            self.har_path(job)
        data = dir_bytes(self.logdir)
        missing = [n for n, v in s.items() if v.encode() not in data]
        self.assertEqual(missing, [], f"with redact false these secrets should be in the logs: {missing}")
        self.assertNotIn(REDACTED.encode(), data)


# --------------------------------------------------------------------------- settings
class TestSettings(LoggingCase):
    def test_logging_off_writes_nothing(self):
        job, marker = key("off"), key("marker")
        r = self.c.call("setLogging", {"enabled": False, "directory": self.logdir})
        self.assertEqual((r["enabled"], r["directory"]), (False, self.logdir), r)
        self.assertEqual(self.c.call("getLogging")["enabled"], False)
        self.fetch({"url": self.srv.test_url + "/echo", "jobId": job})
        self.fetch_error({"url": f"http://127.0.0.1:{closed_port()}/", "jobId": job + "-f", "retry": False})
        self.assertFalse(os.path.exists(self.logdir), "logging off: the directory is not even created")
        self.enable()
        self.fetch({"url": self.srv.test_url + "/echo", "jobId": marker})
        self.har_path(marker)
        self.assertEqual([FILE_NAME.match(f).group(2) for f in har_files(self.logdir)], [marker],
                         "only the job finished while logging was on has a file")
        self.assertEqual(os.listdir(self.logdir), har_files(self.logdir), "nothing else in the directory")
        # and off again while running
        self.c.call("setLogging", {"enabled": False})
        self.fetch({"url": self.srv.test_url + "/echo", "jobId": job + "-2"})
        self.enable()
        self.fetch({"url": self.srv.test_url + "/echo", "jobId": marker + "-2"})
        self.har_path(marker + "-2")
        self.assertEqual(len(har_files(self.logdir)), 2, os.listdir(self.logdir))

    def test_set_logging_validation(self):
        before = self.c.call("getLogging")
        bad = [({"enabled": True, "directory": "relative/logs"}, "directory"),
               ({"directory": self.logdir}, "enabled"),
               ({}, "enabled"),
               ({"enabled": "yes"}, "enabled"),
               ({"enabled": True, "directory": 5}, "directory"),
               ({"enabled": True, "maxBodyBytes": -1}, "maxBodyBytes"),
               ({"enabled": True, "bodies": "no"}, "bodies"),
               ({"enabled": True, "redact": 0}, "redact"),
               ({"enabled": True, "redcat": False}, "redcat")]
        for params, field in bad:
            with self.assertRaises(RPCError, msg=f"setLogging {params}") as cm:
                self.c.call("setLogging", params)
            self.assertEqual(cm.exception.code, -32602, f"setLogging {params}: {cm.exception}")
            self.assertIn(field, (cm.exception.data or {}).get("field", ""),
                          f"setLogging {params}: data.field should name {field}: {cm.exception}")
        self.assertEqual(self.c.call("getLogging"), before, "a refused setLogging changes nothing")
        self.assertFalse(os.path.exists(os.path.join(self.base, "relative")))
        with self.assertRaises(RPCError) as cm:
            self.c.call("getLogging", {"extra": 1})
        self.assertEqual(cm.exception.code, -32602)

    def test_directory_that_cannot_be_created_is_refused(self):
        blocker = os.path.join(self.base, "file")
        with open(blocker, "w") as f:
            f.write("x")
        before = self.c.call("getLogging")
        with self.assertRaises(RPCError, msg="a log directory under a regular file") as cm:
            self.c.call("setLogging", {"enabled": True, "directory": blocker + "/logs"})
        self.assertIn(cm.exception.code, (-32003, -32602), cm.exception)
        self.assertEqual(self.c.call("getLogging"), before, "a refused setLogging changes nothing")

    def test_get_logging_and_get_status_reflect_the_state(self):
        self.enable(bodies=False, maxBodyBytes=123, redact=True)
        want = {"enabled": True, "directory": self.logdir, "bodies": False, "maxBodyBytes": 123, "redact": True}
        self.assertEqual(self.c.call("getLogging"), want)
        with self.daemon.client() as other:  # the settings are the daemon's, for every client
            self.assertEqual(other.call("getLogging"), want)
            st = other.call("getStatus")["logging"]
            self.assertEqual((st.get("enabled"), st.get("directory")), (True, self.logdir), st)
        # fields left out keep their values
        r = self.c.call("setLogging", {"enabled": False})
        self.assertEqual(r, dict(want, enabled=False))
        st = self.c.call("getStatus")["logging"]
        self.assertEqual((st.get("enabled"), st.get("directory")), (False, self.logdir), st)
        self.c.call("setLogging", {"enabled": False, "bodies": True, "maxBodyBytes": 1048576})

    def test_existing_directory_is_used_as_is(self):
        # The daemon creates a missing directory 0700 but leaves an existing one's mode alone.
        os.makedirs(self.logdir, mode=0o755)
        os.chmod(self.logdir, 0o755)
        self.enable()
        self.assertEqual(stat.S_IMODE(os.stat(self.logdir).st_mode), 0o755,
                         "setLogging changed the mode of an existing directory")
        job = key("exist")
        self.fetch({"url": self.srv.test_url + "/echo", "jobId": job})
        self.har(job)
        self.assertEqual(stat.S_IMODE(os.stat(self.logdir).st_mode), 0o755,
                         "writing a HAR file changed the mode of an existing directory")
        self.assertEqual(stat.S_IMODE(os.stat(self.har_path(job)).st_mode), 0o600,
                         "a HAR file in an existing directory is still mode 0600")


class TestLogDirOption(unittest.TestCase):
    """--log-dir is the directory setLogging uses when it names none; --verbose logs the switch."""

    def test_log_dir_is_the_default_directory(self):
        srv = servers()
        tmp = tempfile.mkdtemp(prefix="fetchd-logdir-")
        try:
            logdir = os.path.join(tmp, "default-logs")
            with Daemon("--log-dir", logdir, "--verbose") as d:
                c = d.client()
                self.assertEqual(c.call("getLogging"),
                                 {"enabled": False, "directory": logdir, "bodies": True,
                                  "maxBodyBytes": 1048576, "redact": True})
                self.assertFalse(os.path.exists(logdir), "not created while logging is off")
                r = c.call("setLogging", {"enabled": True})
                self.assertEqual((r["enabled"], r["directory"]), (True, logdir), r)
                self.assertEqual(stat.S_IMODE(os.stat(logdir).st_mode), 0o700)
                job = key("default")
                c.call("fetch", {"url": srv.test_url + "/echo", "jobId": job}, timeout=30)
                wait_for(lambda: any(f.endswith(f"-{job}.har") for f in os.listdir(logdir)),
                         message=f"no HAR file for {job} in --log-dir {logdir}: {os.listdir(logdir)}")
                self.assertIn("HTTP logging on", d.stderr_text(), "--verbose logs the switch on stderr")
                self.assertRegex(d.stderr_text(), r"fetchd\[\d+\] (info|notice): ")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_default_diagnostic_log_is_quiet(self):
        tmp = tempfile.mkdtemp(prefix="fetchd-logdir-")
        try:
            with Daemon("--log-dir", os.path.join(tmp, "l")) as d:
                c = d.client()
                c.call("setLogging", {"enabled": True})
                c.call("setLogging", {"enabled": False})
                self.assertEqual(c.call("ping"), "pong")
                self.assertNotIn("HTTP logging", d.stderr_text(), "info lines only with --verbose")
                self.assertNotRegex(d.stderr_text(), r"\] (info|debug): ")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- fetchctl
class TestFetchctlLogging(LoggingCase):
    def fetchctl(self, *args):
        r = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, *args],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        return r

    def test_logging_on_dir_show_off(self):
        r = self.fetchctl("logging", "on", self.logdir)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        settings = (f"directory: {self.logdir}\n"
                    "bodies: on, up to 1048576 bytes\n"
                    "redact: on\n")
        self.assertEqual(r.stdout, f"logging: on, {self.logdir}\n" + settings)
        self.assertEqual(self.c.call("getLogging"), {"enabled": True, "directory": self.logdir, "bodies": True,
                                                     "maxBodyBytes": 1048576, "redact": True})
        self.assertEqual(stat.S_IMODE(os.stat(self.logdir).st_mode), 0o700)
        self.c.call("setLogging", {"enabled": True, "bodies": False, "redact": False})
        r = self.fetchctl("logging")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"logging: on, {self.logdir}\ndirectory: {self.logdir}\n"
                                   "bodies: off\nredact: off\n", "fetchctl logging prints the settings")
        self.c.call("setLogging", {"enabled": True, "bodies": True, "redact": True})
        job = key("ctl")
        self.fetch({"url": self.srv.test_url + "/redirect/0", "jobId": job})
        self.har(job)
        r = self.fetchctl("logging", "--json")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(json.loads(r.stdout), self.c.call("getLogging"))
        r = self.fetchctl("logging", "off")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, "logging: off\n" + settings)
        self.assertEqual(self.c.call("getLogging")["enabled"], False)
        r = self.fetchctl("status")
        self.assertIn("logging: off\n", r.stdout)

    def test_logging_on_relative_dir_and_default(self):
        rel = os.path.relpath(self.logdir, self.base)
        r = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, "logging", "on", rel],
                           capture_output=True, text=True, timeout=30, cwd=self.base)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.c.call("getLogging")["directory"], self.logdir,
                         "a relative DIR is made absolute against the current directory")
        r = self.fetchctl("logging", "off")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.fetchctl("logging", "on")  # no DIR: the directory in force
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.c.call("getLogging"), dict(self.c.call("getLogging"), enabled=True,
                                                         directory=self.logdir))

    def test_usage_errors(self):
        for args in (["logging", "maybe"], ["logging", "off", "extra"], ["logging", "on", "a", "b"]):
            r = self.fetchctl(*args)
            self.assertEqual(r.returncode, 2, f"fetchctl {' '.join(args)}: {r.returncode} {r.stderr}")


if __name__ == "__main__":
    unittest.main()
