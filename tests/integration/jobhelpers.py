"""Helpers shared by test_retry, test_cancel and test_progress: reading a request's answer
together with the notifications (time-stamped) that came before it, the test server's /hits,
and listJobs look-ups."""
import json
import time
import urllib.request
import uuid

from harness import servers


def key(prefix="k"):
    """A key unique to this run, for /flaky, /record and /hits."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def hits(name):
    """The test server's record for a key, read directly (not through the daemon)."""
    with urllib.request.urlopen(f"{servers().test_url}/hits/{name}", timeout=10) as r:
        return json.loads(r.read())


def bodies(name):
    """The request bodies the test server's /flaky-body/<name> saw, in order."""
    with urllib.request.urlopen(f"{servers().test_url}/bodies/{name}", timeout=10) as r:
        return json.loads(r.read())["bodies"]


def send_request(client, method, params, req_id=None):
    """Send a request without waiting; returns its id."""
    if req_id is None:
        req_id = client.new_id()
    msg = {"jsonrpc": "2.0", "method": method, "id": req_id}
    if params is not None:
        msg["params"] = params
    client.send_obj(msg)
    return req_id


class Collected:
    def __init__(self):
        self.answer = None
        self.answer_time = None
        self.notes = []   # (monotonic time, notification dict), in arrival order
        self.others = []  # answers to other requests

    def of(self, method, job_id=None):
        return [(t, n["params"]) for t, n in self.notes
                if n.get("method") == method and (job_id is None or n["params"].get("jobId") == job_id)]


def collect(client, req_id, timeout=20.0, into=None):
    """Read messages until the answer with req_id; keep every notification with its arrival time."""
    out = into or Collected()
    deadline = time.monotonic() + timeout
    want = json.dumps(req_id, sort_keys=True)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no answer to request {req_id!r} within {timeout}s; "
                                 f"notifications so far: {len(out.notes)}")
        try:
            m = client.recv(timeout=left)
        except TimeoutError:
            raise AssertionError(f"no answer to request {req_id!r} within {timeout}s; "
                                 f"notifications so far: {len(out.notes)}") from None
        now = time.monotonic()
        if isinstance(m, dict) and "method" in m and "id" not in m:
            out.notes.append((now, m))
        elif isinstance(m, dict) and json.dumps(m.get("id"), sort_keys=True) == want:
            out.answer = m
            out.answer_time = now
            return out
        else:
            out.others.append(m)


def collect_all(client, req_ids, timeout=20.0, into=None):
    """Read until every request in req_ids is answered; returns (Collected, {id: answer})."""
    out = into or Collected()
    answers = {}
    keys = {json.dumps(i, sort_keys=True): i for i in req_ids}
    for m in out.others:
        k = json.dumps(m.get("id"), sort_keys=True) if isinstance(m, dict) else None
        if k in keys:
            answers[keys[k]] = m
    out.others = [m for m in out.others if m not in answers.values()]
    deadline = time.monotonic() + timeout
    for i in req_ids:
        if i in answers:
            continue
        collect(client, i, timeout=max(0.01, deadline - time.monotonic()), into=out)
        answers[i] = out.answer
        rest = []
        for m in out.others:
            k = json.dumps(m.get("id"), sort_keys=True) if isinstance(m, dict) else None
            if k in keys and keys[k] not in answers:
                answers[keys[k]] = m
            else:
                rest.append(m)
        out.others = rest
    return out, answers


def collect_more(client, out, until, timeout=5.0):
    """Keep reading notifications into out until until(out) is true (AssertionError at timeout)."""
    deadline = time.monotonic() + timeout
    while not until(out):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"condition not met within {timeout}s; notifications: "
                                 f"{[n for _, n in out.notes][-5:]}")
        try:
            m = client.recv(timeout=left)
        except TimeoutError:
            continue
        if isinstance(m, dict) and "method" in m and "id" not in m:
            out.notes.append((time.monotonic(), m))
        else:
            out.others.append(m)
    return out


def list_jobs(client):
    return client.call("listJobs", timeout=10)["jobs"]


def job_entry(client, job_id):
    for j in list_jobs(client):
        if j.get("jobId") == job_id:
            return j
    return None
