"""Credentials: setAuth/getAuth rules per host pattern, bearer (token, tokenFile
read at each use), basic, OAuth 2 client credentials with one token request for many
concurrent requests, expiry and refresh, the 401 -> new credential -> one more attempt, the
second 401 as the answer, auth: false, no credential on a redirect to another host, -32001
kind `auth` failures, and no secret in answers, getAuth, HAR files or the --verbose log.

The test server's /oauth/token/<key> counts its requests and issues tokens; /protected/<key>
accepts only the key's current token and answers 401 with a challenge otherwise."""
import base64
import json
import os
import stat
import tempfile
import time
import unittest
import urllib.request

from harness import Daemon, DaemonTestCase, RPCError, closed_port, header_values, run_fetchd, servers, wait_for
from jobhelpers import hits, key, send_request

REDACTED = "<redacted>"


def oauth_info(k):
    with urllib.request.urlopen(f"{servers().test_url}/oauth/info/{k}", timeout=10) as r:
        return json.loads(r.read())


def revoke(k):
    with urllib.request.urlopen(f"{servers().test_url}/oauth/revoke/{k}", timeout=10) as r:
        return json.loads(r.read())


class AuthCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.host = f"127.0.0.1:{self.srv.test_port}"
        self.url = self.srv.test_url
        self.tmp = tempfile.mkdtemp(prefix="auth-", dir=self.daemon.tmpdir)

    def tearDown(self):
        try:
            for rule in self.c.call("getAuth")["rules"]:
                self.c.call("setAuth", {"host": rule["host"], "type": None})
        finally:
            super().tearDown()

    def set_auth(self, **params):
        params.setdefault("host", self.host)
        return self.c.call("setAuth", params)

    def write(self, name, text, mode=0o600):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def authorization(self, params=None):
        p = {"url": self.url + "/echo"}
        p.update(params or {})
        _, echo = self.echo(p)
        return header_values(echo, "Authorization")

    def oauth2(self, k, query="", **extra):
        params = {"type": "oauth2", "tokenUrl": f"{self.url}/oauth/token/{k}{query}", "clientId": "cid",
                  "clientSecret": "csecret"}
        params.update(extra)
        return self.set_auth(**params)


class TestRules(AuthCase):
    def test_bearer_token_is_added_and_never_shown(self):
        r = self.set_auth(type="bearer", token="sekrit-bearer-1")
        self.assertEqual(r, {"host": self.host, "type": "bearer", "hasCredential": True, "expiresAt": None,
                             "lastError": None})
        self.assertEqual(self.authorization(), ["Bearer sekrit-bearer-1"])
        rules = self.c.call("getAuth")
        self.assertEqual(rules, {"rules": [r]})
        self.assertNotIn("sekrit", json.dumps(rules))

    def test_token_file_is_read_at_each_use(self):
        path = self.write("token", "rotating-1\n")
        r = self.set_auth(type="bearer", tokenFile=path)
        self.assertEqual(r["hasCredential"], False, "a file's token is read at each use, never held")
        self.assertEqual(self.authorization(), ["Bearer rotating-1"])
        self.write("token", "rotating-2")
        self.assertEqual(self.authorization(), ["Bearer rotating-2"])

    def test_basic_password_and_password_file(self):
        self.set_auth(type="basic", user="alice", password="pw-inline-1")
        r = self.fetch({"url": f"{self.url}/basic-protected?user=alice&password=pw-inline-1"})
        self.assertEqual(r["status"], 200, r)
        path = self.write("password", "pw-from-file-2\n")
        self.set_auth(type="basic", user="bob", passwordFile=path)
        want = "Basic " + base64.b64encode(b"bob:pw-from-file-2").decode()
        self.assertEqual(self.authorization(), [want])

    def test_host_patterns(self):
        # name (any port) and name:port: the more specific wins.
        self.set_auth(host="127.0.0.1", type="bearer", token="any-port")
        self.assertEqual(self.authorization(), ["Bearer any-port"])
        self.set_auth(type="bearer", token="this-port")
        self.assertEqual(self.authorization(), ["Bearer this-port"])
        self.assertEqual([x["host"] for x in self.c.call("getAuth")["rules"]], ["127.0.0.1", self.host])
        # *.domain covers subdomains only: localhost is not under *.localhost.
        self.c.call("setAuth", {"host": "127.0.0.1", "type": None})
        self.c.call("setAuth", {"host": self.host, "type": None})
        self.set_auth(host="*.localhost", type="bearer", token="sub")
        self.assertEqual(self.authorization({"url": f"http://localhost:{self.srv.test_port}/echo"}), [])

    def test_auth_false_and_the_clients_own_header(self):
        self.set_auth(type="bearer", token="rule-token")
        self.assertEqual(self.authorization({"auth": False}), [])
        self.assertEqual(self.authorization({"headers": {"Authorization": "Bearer mine"}}), ["Bearer mine"])

    def test_remove(self):
        self.set_auth(type="bearer", token="rule-token")
        self.assertEqual(self.c.call("setAuth", {"host": self.host, "type": None}),
                         {"host": self.host, "removed": True})
        self.assertEqual(self.c.call("setAuth", {"host": self.host, "type": None}),
                         {"host": self.host, "removed": False})
        self.assertEqual(self.authorization(), [])
        self.assertEqual(self.c.call("getAuth"), {"rules": []})

    def test_redirects_keep_the_credential_on_the_host_only(self):
        self.set_auth(type="bearer", token="host-only")
        r, echo = self.echo({"url": f"{self.url}/redirect-to?url=/echo"})
        self.assertEqual(r["redirects"], 1)
        self.assertEqual(header_values(echo, "Authorization"), ["Bearer host-only"], "same host: sent")
        # Same server, another host name: libcurl leaves the header out (UNRESTRICTED_AUTH off).
        other = f"http://localhost:{self.srv.test_port}/echo"
        r, echo = self.echo({"url": f"{self.url}/redirect-to?url={other}"})
        self.assertEqual(r["redirects"], 1)
        self.assertEqual(echo["path"], "/echo")
        self.assertEqual(header_values(echo, "Authorization"), [], "another host: never sent")

    def test_bad_rules(self):
        for params, field in [
            ({"host": "*", "type": "bearer", "token": "t"}, "host"),
            ({"host": "a b", "type": "bearer", "token": "t"}, "host"),
            ({"host": "x.test", "type": "bearer"}, "token"),
            ({"host": "x.test", "type": "bearer", "tokenFile": "relative"}, "tokenFile"),
            ({"host": "x.test", "type": "bearer", "token": "t", "password": "p"}, "password"),
            ({"host": "x.test", "type": "nope"}, "type"),
            ({"host": "x.test", "type": "oauth2", "tokenUrl": "ftp://h/", "clientId": "i", "clientSecret": "s"},
             "tokenUrl"),
        ]:
            with self.assertRaises(RPCError, msg=params) as cm:
                self.c.call("setAuth", params)
            self.assertEqual(cm.exception.code, -32602, params)
            self.assertEqual(cm.exception.data.get("field"), field, params)
            self.assertNotIn('"t"', cm.exception.message)
        with self.assertRaises(RPCError) as cm:
            self.fetch({"url": self.url + "/echo", "auth": "no"})
        self.assertEqual(cm.exception.data.get("field"), "auth")
        self.assertEqual(self.c.call("getAuth"), {"rules": []})

    def test_unreadable_token_file_fails_with_kind_auth(self):
        missing = os.path.join(self.tmp, "missing-token")
        self.set_auth(type="bearer", tokenFile=missing)
        e = self.fetch_error({"url": self.url + "/echo"})
        self.assertEqual(e.code, -32001)
        self.assertEqual(e.data["kind"], "auth")
        self.assertEqual(e.data["rule"], self.host)
        self.assertIn("missing-token", e.data["detail"])
        self.assertIn("No such file", e.data["detail"])
        self.assertEqual(e.data["attempts"], 0)
        self.assertEqual(self.c.call("getAuth")["rules"][0]["lastError"], e.data["detail"])
        # Other hosts are unaffected, and so is this one with auth: false.
        r = self.fetch({"url": self.srv.nginx_url + "/small.txt"})
        self.assertEqual(r["status"], 200)
        self.assertEqual(self.authorization({"auth": False}), [])
        self.assertAlive()


class TestOAuth2(AuthCase):
    DAEMON_ARGS = ("--max-per-host", "0")

    def test_one_token_request_for_100_concurrent_requests(self):
        k = key("flight")
        self.oauth2(k, "?delay_ms=300")
        ids = [send_request(self.c, "fetch", {"url": f"{self.url}/protected/{k}"}) for _ in range(100)]
        answers = [self.c.answer_for(i, timeout=30) for i in ids]
        statuses = [a.get("result", {}).get("status") for a in answers]
        self.assertEqual(statuses, [200] * 100, [a for a in answers if "error" in a][:3])
        info = oauth_info(k)
        self.assertEqual(info["count"], 1, "one token request for all of them")
        self.assertEqual(info["grants"], ["client_credentials"])
        self.assertEqual(hits("protected-" + k)["count"], 100, "no request was sent twice")
        rule = self.c.call("getAuth")["rules"][0]
        self.assertTrue(rule["hasCredential"])
        self.assertIsNotNone(rule["expiresAt"])
        self.assertIsNone(rule["lastError"])
        # Held: later requests use it without asking again.
        self.assertEqual(self.fetch({"url": f"{self.url}/protected/{k}"})["status"], 200)
        self.assertEqual(oauth_info(k)["count"], 1)

    def test_scope_and_audience_go_in_the_form(self):
        k = key("scope")
        self.oauth2(k, scope="read write", audience="api")
        self.assertEqual(self.fetch({"url": f"{self.url}/protected/{k}"})["status"], 200)
        self.assertEqual(oauth_info(k)["scopes"], ["read write"])

    def test_client_secret_file(self):
        k = key("secretfile")
        path = self.write("client-secret", "csecret\n")
        self.set_auth(type="oauth2", tokenUrl=f"{self.url}/oauth/token/{k}", clientId="cid", clientSecretFile=path)
        self.assertEqual(self.fetch({"url": f"{self.url}/protected/{k}"})["status"], 200)

    def test_expiring_token_is_renewed_before_it_expires(self):
        k = key("expiry")
        # expires_in 2 s, renewed 1.5 s before: usable for 0.5 s.
        self.oauth2(k, "?expires_in=2", refreshBefore=1.5)
        self.assertEqual(self.fetch({"url": f"{self.url}/protected/{k}"})["status"], 200)
        self.assertEqual(oauth_info(k)["count"], 1)

        def renewed():
            r = self.fetch({"url": f"{self.url}/protected/{k}"})
            self.assertEqual(r["status"], 200, r)
            return json.loads(r["body"])["token"] == f"tok-{k}-2"
        wait_for(renewed, timeout=5, interval=0.05, message="the token was not renewed")
        self.assertEqual(oauth_info(k)["count"], 2)

    def test_a_401_fetches_a_new_token_and_tries_once_more(self):
        k = key("revoked")
        self.oauth2(k)
        self.assertEqual(self.fetch({"url": f"{self.url}/protected/{k}"})["status"], 200)
        revoke(k)
        before = hits("protected-" + k)["count"]
        r = self.fetch({"url": f"{self.url}/protected/{k}"})
        self.assertEqual(r["status"], 200, r)
        self.assertEqual(json.loads(r["body"])["token"], f"tok-{k}-2")
        self.assertEqual(hits("protected-" + k)["count"] - before, 2, "the 401, then one more attempt")
        self.assertEqual(oauth_info(k)["count"], 2)

    def test_a_second_401_is_the_answer(self):
        k = key("always401")
        self.oauth2(k)
        r = self.fetch({"url": f"{self.url}/flaky/{k}?fail=10&status=401"})
        self.assertEqual(r["status"], 401, "a result, not an error")
        self.assertEqual(hits(k)["count"], 2, "one more attempt only")
        self.assertEqual(oauth_info(k)["count"], 2, "the token was renewed once")

    def test_a_fixed_token_is_not_sent_twice_on_a_401(self):
        k = key("fixed401")
        self.set_auth(type="bearer", token="never-right")
        r = self.fetch({"url": f"{self.url}/flaky/{k}?fail=10&status=401"})
        self.assertEqual(r["status"], 401)
        self.assertEqual(hits(k)["count"], 1)

    def test_token_endpoint_failures(self):
        k = key("fail")
        cases = [
            ({"clientSecret": "wrong"}, "", "the token endpoint answered 401 (invalid_client)"),
            ({}, "?fail=400", "the token endpoint answered 400 (server_error)"),
            ({}, "?fail=500", "the token endpoint answered 500 (server_error)"),
        ]
        for extra, query, detail in cases:
            self.oauth2(k, query, **extra)
            e = self.fetch_error({"url": f"{self.url}/protected/{k}"})
            self.assertEqual((e.code, e.data["kind"], e.data["detail"], e.data["rule"]),
                             (-32001, "auth", detail, self.host))
            self.assertIn(detail, e.message)
            rule = self.c.call("getAuth")["rules"][0]
            self.assertEqual((rule["hasCredential"], rule["lastError"]), (False, detail))
        self.set_auth(type="oauth2", tokenUrl=f"http://127.0.0.1:{closed_port()}/token", clientId="cid",
                      clientSecret="csecret")
        e = self.fetch_error({"url": f"{self.url}/protected/{k}"})
        self.assertEqual(e.data["kind"], "auth")
        self.assertTrue(e.data["detail"].startswith("the token request failed (connect)"), e.data["detail"])
        self.assertEqual(hits("protected-" + k)["count"], 0, "nothing was sent without a credential")
        # Other hosts are unaffected.
        self.assertEqual(self.fetch({"url": self.srv.nginx_url + "/small.txt"})["status"], 200)
        self.assertAlive()

    def test_cancel_while_waiting_for_the_token(self):
        k = key("cancel")
        self.oauth2(k, "?delay_ms=1500")
        rid = send_request(self.c, "fetch", {"url": f"{self.url}/protected/{k}", "jobId": k})
        wait_for(lambda: oauth_info(k)["count"] == 1, timeout=5)
        self.assertEqual(self.c.call("cancel", {"jobId": k}), {"cancelled": True})
        a = self.c.answer_for(rid, timeout=10)
        self.assertEqual(a["error"]["code"], -32002, a)
        # The token still arrives and is held for the next request.
        wait_for(lambda: self.c.call("getAuth")["rules"][0]["hasCredential"], timeout=5)
        self.assertEqual(self.fetch({"url": f"{self.url}/protected/{k}"})["status"], 200)
        self.assertEqual(oauth_info(k)["count"], 1)


class TestResumableUpload(AuthCase):
    def resumable_info(self, k):
        with urllib.request.urlopen(f"{self.url}/resumable/info/{k}", timeout=10) as r:
            return json.loads(r.read())["sessions"]

    def upload(self, k, query=""):
        path = self.write("data.bin", "x" * 3000)
        return self.c.call("upload", {"url": f"{self.url}/resumable/start?key={k}{query}", "files": [{"path": path}],
                                      "resumable": {"chunkSize": 1024}}, timeout=30)

    def test_a_session_on_the_same_host_gets_the_credential(self):
        self.set_auth(type="bearer", token="upload-token")
        k = key("up-same")
        self.assertEqual(self.upload(k)["status"], 200)
        auths = self.resumable_info(k)[0]["authorizations"]
        self.assertEqual(auths, ["Bearer upload-token"] * len(auths))
        self.assertGreaterEqual(len(auths), 3)

    def test_a_session_on_another_host_does_not(self):
        self.set_auth(type="bearer", token="upload-token")
        k = key("up-other")
        other = f"http://localhost:{self.srv.test_port}/resumable/session/{k}"
        self.assertEqual(self.upload(k, f"&upload-url={other}")["status"], 200)
        auths = self.resumable_info(k)[0]["authorizations"]
        self.assertEqual(auths, [None] * len(auths))
        self.assertGreaterEqual(len(auths), 3)


class TestAWSSigV4(AuthCase):
    def test_requests_are_signed(self):
        self.set_auth(type="awsSigV4", provider="aws:amz:eu-west-1:s3", accessKeyId="AKIDEXAMPLE",
                      secretAccessKey="aws-secret-key-0123456789")
        r = self.fetch({"url": f"{self.url}/aws-check?key=AKIDEXAMPLE&scope=eu-west-1/s3"})
        self.assertEqual(r["status"], 200, r["body"])
        self.assertNotIn("aws-secret-key", r["body"])
        # Every request is signed anew (its own date and signature).
        r2 = self.fetch({"url": f"{self.url}/aws-check?key=AKIDEXAMPLE&x=2"})
        self.assertEqual(r2["status"], 200, r2["body"])
        self.assertNotEqual(json.loads(r["body"])["authorization"], json.loads(r2["body"])["authorization"])
        self.assertEqual(self.c.call("getAuth")["rules"][0]["hasCredential"], True)

    def test_session_token_and_credentials_file(self):
        path = self.write("credentials", "[default]\naws_access_key_id = AKIDDEFAULT\n"
                          "aws_secret_access_key = default-secret\n\n[profile ci]\n"
                          "aws_access_key_id=AKIDCI\naws_secret_access_key=ci-secret\n"
                          "aws_session_token=ci-session-token\n")
        self.set_auth(type="awsSigV4", provider="aws:amz:us-east-1:execute-api", credentialsFile=path, profile="ci")
        r = self.fetch({"url": f"{self.url}/aws-check?key=AKIDCI&scope=us-east-1/execute-api&token=ci-session-token"})
        self.assertEqual(r["status"], 200, r["body"])
        self.set_auth(type="awsSigV4", provider="aws:amz:us-east-1:s3", credentialsFile=path)
        r = self.fetch({"url": f"{self.url}/aws-check?key=AKIDDEFAULT"})
        self.assertEqual(r["status"], 200, r["body"])
        self.set_auth(type="awsSigV4", provider="aws:amz:us-east-1:s3", credentialsFile=path, profile="none")
        e = self.fetch_error({"url": f"{self.url}/aws-check"})
        self.assertEqual(e.data["kind"], "auth")
        self.assertIn("no aws_access_key_id and aws_secret_access_key for profile none", e.data["detail"])

    def test_no_signature_for_another_host(self):
        self.set_auth(type="awsSigV4", provider="aws:amz:eu-west-1:s3", accessKeyId="AKIDEXAMPLE",
                      secretAccessKey="aws-secret-key-0123456789")
        other = f"http://localhost:{self.srv.test_port}/echo"
        r, echo = self.echo({"url": f"{self.url}/redirect-to?url={other}"})
        self.assertEqual(r["redirects"], 1)
        self.assertEqual(header_values(echo, "Authorization"), [])
        # A session token is a header of the credential too: it stays on its host.
        self.set_auth(type="awsSigV4", provider="aws:amz:eu-west-1:s3", accessKeyId="AKIDEXAMPLE",
                      secretAccessKey="aws-secret-key-0123456789", sessionToken="session-tok")
        r, echo = self.echo({"url": f"{self.url}/redirect-to?url={other}"})
        self.assertEqual(r["redirects"], 1)
        self.assertEqual(header_values(echo, "Authorization"), [])
        self.assertEqual(header_values(echo, "X-Amz-Security-Token"), [])

    def test_bad_aws_rules(self):
        base = {"host": "s3.test", "type": "awsSigV4"}
        for extra, field in [
            ({"accessKeyId": "a", "secretAccessKey": "s"}, "provider"),
            ({"provider": "a:b:c:d:e", "accessKeyId": "a", "secretAccessKey": "s"}, "provider"),
            ({"provider": "aws:amz:r:s"}, "accessKeyId"),
            ({"provider": "aws:amz:r:s", "accessKeyId": "a"}, "secretAccessKey"),
            ({"provider": "aws:amz:r:s", "accessKeyId": "a", "secretAccessKey": "s", "credentialsFile": "/x"},
             "credentialsFile"),
            ({"provider": "aws:amz:r:s", "accessKeyId": "a", "secretAccessKey": "s", "profile": "p"}, "profile"),
        ]:
            with self.assertRaises(RPCError, msg=extra) as cm:
                self.c.call("setAuth", {**base, **extra})
            self.assertEqual(cm.exception.data.get("field"), field, extra)


class TestHelper(AuthCase):
    """helper rules: argv without a shell, JSON in and out, a clean environment, a timeout."""

    def helper(self, body, name="helper.sh"):
        return self.write(name, "#!/bin/sh\n" + body, mode=0o700)

    def log_lines(self, path):
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def test_helper_makes_the_header(self):
        log = os.path.join(self.tmp, "inputs.log")
        script = self.helper('cat >> "$LOG"\nenv > "$LOG.env"\n'
                             'echo \'{"headers": {"Authorization": "Bearer helper-tok-1", "X-Extra": "e1"}, "expiresIn": 60}\'\n')
        r = self.set_auth(type="helper", command=[script, "--flag"], env={"LOG": log})
        self.assertEqual(r["type"], "helper")
        _, echo = self.echo({"url": self.url + "/echo?a=1", "method": "PUT", "body": "x"})
        self.assertEqual(header_values(echo, "Authorization"), ["Bearer helper-tok-1"])
        self.assertEqual(header_values(echo, "X-Extra"), ["e1"])
        self.assertEqual(self.log_lines(log), [{"version": 1, "action": "get", "url": self.url + "/echo?a=1",
                                                "method": "PUT", "host": self.host, "challenge": None}])
        with open(log + ".env") as f:
            names = sorted(line.split("=", 1)[0] for line in f if "=" in line)
        self.assertNotIn("HOME", names, "a clean environment")
        self.assertIn("LOG", names)
        self.assertIn("PATH", names)
        # Kept for its expiresIn: the helper is not run again.
        self.authorization()
        self.assertEqual(len(self.log_lines(log)), 1)
        rule = self.c.call("getAuth")["rules"][0]
        self.assertTrue(rule["hasCredential"])
        self.assertIsNotNone(rule["expiresAt"])

    def test_a_401_runs_the_helper_again_with_the_challenge(self):
        k = key("helper401")
        log = os.path.join(self.tmp, "inputs.log")
        script = self.helper('cat >> "$LOG"\necho \'{"headers": {"Authorization": "Bearer stale"}}\'\n')
        self.set_auth(type="helper", command=[script], env={"LOG": log})
        r = self.fetch({"url": f"{self.url}/protected/{k}"})
        self.assertEqual(r["status"], 401)
        inputs = self.log_lines(log)
        self.assertEqual([i["challenge"] for i in inputs], [None, 'Bearer realm="fetchd-test", error="invalid_token"'])
        self.assertEqual(hits("protected-" + k)["count"], 2)

    def test_helper_failures(self):
        cases = [
            ('echo "stdout-secret-text"\necho "first line of stderr" >&2\necho "second line" >&2\nexit 3\n',
             "the helper exited with status 3: first line of stderr"),
            ('echo "not json stdout-secret-text"\n', "the helper's output is not one JSON object"),
            ('echo \'{"headers": {"Bad Name": "v"}}\'\n', "the helper's output has a header that cannot be sent (Bad Name)"),
            ('echo \'{"nothing": 1}\'\n', "the helper's output has no \"headers\" object"),
        ]
        for body, detail in cases:
            self.set_auth(type="helper", command=[self.helper(body)])
            e = self.fetch_error({"url": self.url + "/echo"})
            self.assertEqual((e.code, e.data["kind"], e.data["detail"]), (-32001, "auth", detail))
            self.assertNotIn("stdout-secret-text", json.dumps(e.data) + e.message)
            self.assertNotIn("second line", e.data["detail"])
        self.set_auth(type="helper", command=[os.path.join(self.tmp, "no-such-helper")])
        e = self.fetch_error({"url": self.url + "/echo"})
        self.assertIn("cannot start the helper", e.data["detail"])
        self.assertAlive()

    def test_a_helper_past_its_timeout_is_killed(self):
        pidfile = os.path.join(self.tmp, "pid")
        script = self.helper(f'echo $$ > {pidfile}\nexec sleep 30\n')
        self.set_auth(type="helper", command=[script], timeout=0.5)
        started = time.monotonic()
        e = self.fetch_error({"url": self.url + "/echo"})
        self.assertLess(time.monotonic() - started, 5)
        self.assertEqual(e.data["detail"], "the helper ran past its timeout of 0.5 s and was killed")
        with open(pidfile) as f:
            pid = int(f.read())
        self.assertFalse(os.path.exists(f"/proc/{pid}"), "the helper is gone (killed and reaped)")

    def test_bad_helper_rules(self):
        for extra, field in [({}, "command"), ({"command": []}, "command"), ({"command": ["relative"]}, "command[0]"),
                             ({"command": ["/bin/true", 1]}, "command[1]"), ({"command": ["/bin/true"], "timeout": 0}, "timeout"),
                             ({"command": ["/bin/true"], "env": {"A=B": "x"}}, "env.A=B")]:
            with self.assertRaises(RPCError, msg=extra) as cm:
                self.c.call("setAuth", {"host": "h.test", "type": "helper", **extra})
            self.assertEqual(cm.exception.data.get("field"), field, extra)


class TestPythonClient(AuthCase):
    def test_set_auth_and_get_auth(self):
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                        "clients", "python"))
        from fetchd_client import Client, FetchdError
        with Client(self.daemon.socket_path) as client:
            rule = client.set_auth(self.host, "bearer", token="py-client-token")
            self.assertEqual((rule["host"], rule["type"], rule["hasCredential"]), (self.host, "bearer", True))
            self.assertEqual([r["host"] for r in client.get_auth()], [self.host])
            echo = json.loads(client.fetch(self.url + "/echo").text)
            self.assertEqual(header_values(echo, "Authorization"), ["Bearer py-client-token"])
            echo = json.loads(client.fetch(self.url + "/echo", auth=False).text)
            self.assertEqual(header_values(echo, "Authorization"), [])
            path = self.write("py-token", "py-file-token")
            client.set_auth(self.host, "bearer", token_file=path)
            echo = json.loads(client.fetch(self.url + "/echo").text)
            self.assertEqual(header_values(echo, "Authorization"), ["Bearer py-file-token"])
            with self.assertRaises(FetchdError):
                client.set_auth("*", "bearer", token="t")
            self.assertEqual(client.set_auth(self.host, None), {"host": self.host, "removed": True})
            self.assertEqual(client.get_auth(), [])


class TestFetchctl(AuthCase):
    def ctl(self, *args, code=0):
        import subprocess
        from harness import FETCHCTL
        r = subprocess.run([FETCHCTL, "--socket", self.daemon.socket_path, *args], capture_output=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, code, r)
        return r.stdout.decode(), r.stderr.decode()

    def test_fetchctl_auth(self):
        self.assertEqual(self.ctl("auth")[0], "no auth rules\n")
        token = self.write("token", "ctl-token-1")
        self.assertEqual(self.ctl("auth", self.host, "--bearer-file", token)[0], f"{self.host}: bearer rule set\n")
        self.assertEqual(self.authorization(), ["Bearer ctl-token-1"])
        out, _ = self.ctl("fetch", self.url + "/echo")
        self.assertEqual(header_values(json.loads(out), "Authorization"), ["Bearer ctl-token-1"])
        pw = self.write("pw", "ctl-pw")
        self.ctl("auth", "*.example.com", "--basic", f"u:{pw}")
        script = self.write("helper.sh", '#!/bin/sh\ncat >/dev/null\nprintf \'{"headers": {"X-Ctl": "%s %s"}}\' "$1" "$2"\n', 0o700)
        self.ctl("auth", "localhost", "--helper", script, "helper-arg", "--timeout-looking-arg")
        _, echo = self.echo({"url": f"http://localhost:{self.srv.test_port}/echo"})
        self.assertEqual(header_values(echo, "X-Ctl"), ["helper-arg --timeout-looking-arg"])
        k = key("ctl")
        secret = self.write("cs", "csecret")
        self.ctl("auth", "127.0.0.1", "--oauth2", f"{self.url}/oauth/token/{k}", "--client-id", "cid",
                 "--client-secret-file", secret, "--scope", "read")
        self.c.call("setAuth", {"host": self.host, "type": None})
        self.assertEqual(self.fetch({"url": f"{self.url}/protected/{k}"})["status"], 200)
        out, _ = self.ctl("auth")
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("HOST"), out)
        self.assertEqual([line.split()[:3] for line in lines[1:]],
                         [["*.example.com", "basic", "-"], ["localhost", "helper", "-"], ["127.0.0.1", "oauth2", "held"]])
        for secret_text in ("ctl-token-1", "ctl-pw", "csecret"):
            self.assertNotIn(secret_text, out)
        rules = json.loads(self.ctl("auth", "--json")[0])["rules"]
        self.assertEqual(len(rules), 3)
        self.assertEqual(self.ctl("auth", "localhost", "--remove")[0], "localhost: rule removed\n")
        self.assertEqual(self.ctl("auth", "localhost", "--remove")[0], "localhost: no rule to remove\n")
        _, err = self.ctl("auth", "h.test", code=2)
        self.assertIn("needs one of", err)
        _, err = self.ctl("auth", "h.test", "--bearer-file", token, "--remove", code=2)
        self.assertIn("takes one of", err)
        _, err = self.ctl("auth", "*", "--bearer-file", token, code=4)
        self.assertIn("host", err)


class TestAuthFile(unittest.TestCase):
    """--auth-file: setAuth params loaded at start; a file others can read is refused."""

    def setUp(self):
        self.srv = servers()
        self.tmp = tempfile.mkdtemp(prefix="fetchd-authfile-")
        self.host = f"127.0.0.1:{self.srv.test_port}"

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, rules, mode=0o600):
        path = os.path.join(self.tmp, "auth.json")
        with open(path, "w") as f:
            f.write(json.dumps(rules) if not isinstance(rules, str) else rules)
        os.chmod(path, mode)
        return path

    def refused(self, path):
        r = run_fetchd("--socket", os.path.join(self.tmp, "s.sock"), "--auth-file", path)
        self.assertEqual(r.returncode, 1, r)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "s.sock")), "no socket was made")
        return r.stderr.decode()

    def test_rules_are_loaded_at_start(self):
        path = self.write([{"host": self.host, "type": "bearer", "token": "from-the-file-1"},
                           {"host": "*.example.com", "type": "basic", "user": "u", "password": "p"}])
        with Daemon("--auth-file", path) as d:
            c = d.client()
            rules = c.call("getAuth")["rules"]
            self.assertEqual([(x["host"], x["type"]) for x in rules], [(self.host, "bearer"), ("*.example.com", "basic")])
            r = c.call("fetch", {"url": self.srv.test_url + "/echo"})
            self.assertEqual(header_values(json.loads(r["body"]), "Authorization"), ["Bearer from-the-file-1"])

    def test_a_file_others_can_read_is_refused(self):
        for mode in (0o644, 0o640, 0o602):
            path = self.write([{"host": self.host, "type": "bearer", "token": "t-0123456789"}], mode)
            err = self.refused(path)
            self.assertIn("can be read or written by other users", err)
            self.assertIn(f"chmod 600 {path}", err)
            self.assertNotIn("t-0123456789", err)

    def test_bad_files(self):
        err = self.refused(self.write([{"host": self.host, "type": "bearer", "token": "ok-token"},
                                       {"host": self.host, "type": "bearer"}]))
        self.assertIn("[1].token: required", err)
        self.assertNotIn("ok-token", err)
        self.assertIn("expected a JSON array", self.refused(self.write({"host": "x"})))
        self.assertIn("not valid JSON", self.refused(self.write("[{")))
        self.assertIn("No such file", self.refused(os.path.join(self.tmp, "missing.json")))


class TestSecretsStayInside(unittest.TestCase):
    """Every file the daemon wrote (HAR files with redact: false, the --verbose log) and every
    answer is scanned for the secrets' text."""

    def test_no_secret_in_har_log_or_answers(self):
        srv = servers()
        host = f"127.0.0.1:{srv.test_port}"
        k = key("scan")
        bearer = "Bearer-Secret-Value-0001"
        password = "Basic-Password-Value-0002"
        client_secret = "Client-Secret-Value-0003"
        token = f"tok-{k}-1"
        with Daemon("--verbose") as d:
            c = d.client()
            logdir = os.path.join(d.tmpdir, "har")
            c.call("setLogging", {"enabled": True, "directory": logdir, "redact": False})
            answers = []
            answers.append(c.call("setAuth", {"host": host, "type": "bearer", "token": bearer}))
            answers.append(c.call("fetch", {"url": f"{srv.test_url}/echo", "jobId": "scan-bearer"}))
            self.assertIn(bearer, answers[-1]["body"], "the echo shows what was sent")
            answers[-1] = {k2: v for k2, v in answers[-1].items() if k2 != "body"}
            answers.append(c.call("setAuth", {"host": host, "type": "basic", "user": "u", "password": password}))
            answers.append(c.call("fetch", {"url": f"{srv.test_url}/basic-protected?user=u&password=x",
                                            "jobId": "scan-basic"}))
            answers.append(c.call("setAuth", {
                "host": host, "type": "oauth2", "tokenUrl": f"{srv.test_url}/oauth/token/{k}?client_secret={client_secret}",
                "clientId": "cid", "clientSecret": client_secret}))
            r = c.call("fetch", {"url": f"{srv.test_url}/protected/{k}", "jobId": "scan-oauth"})
            self.assertEqual(json.loads(r["body"])["token"], token, "the server echoes the token")
            answers.append({k2: v for k2, v in r.items() if k2 != "body"})
            aws_secret = "Aws-Secret-Value-0004"
            answers.append(c.call("setAuth", {"host": host, "type": "awsSigV4", "provider": "aws:amz:eu-west-1:s3",
                                              "accessKeyId": "AKIDSCAN", "secretAccessKey": aws_secret}))
            r = c.call("fetch", {"url": f"{srv.test_url}/aws-check?key=AKIDSCAN", "jobId": "scan-aws"})
            self.assertEqual(r["status"], 200, r)
            signature = json.loads(r["body"])["authorization"].rsplit("Signature=", 1)[1]
            answers.append({k2: v for k2, v in r.items() if k2 != "body"})
            helper_secret = "Helper-Secret-Value-0005"
            script = os.path.join(d.tmpdir, "helper.sh")
            with open(script, "w") as f:
                f.write('#!/bin/sh\necho \'{"headers": {"X-Api-Key": "%s"}}\'\n' % helper_secret)
            os.chmod(script, 0o700)
            answers.append(c.call("setAuth", {"host": host, "type": "helper", "command": [script]}))
            r = c.call("fetch", {"url": f"{srv.test_url}/echo", "jobId": "scan-helper"})
            self.assertIn(helper_secret, r["body"])
            answers.append({k2: v for k2, v in r.items() if k2 != "body"})
            os.remove(script)
            # A client's own header is shown as sent with redact: false.
            c.call("fetch", {"url": f"{srv.test_url}/echo", "jobId": "scan-own", "auth": False,
                             "headers": {"Authorization": "Bearer clients-own-header"}})
            answers.append(c.call("getAuth"))
            answers.append(c.call("listJobs"))
            for job in ("scan-bearer", "scan-basic", "scan-oauth", "scan-aws", "scan-helper", "scan-own"):
                wait_for(lambda: any(job in f for f in os.listdir(logdir)) if os.path.isdir(logdir) else False,
                         timeout=10)
            d.stop()
            written = {}
            for root, _, files in os.walk(d.tmpdir):
                for f in files:
                    with open(os.path.join(root, f), "rb") as fh:
                        written[os.path.join(root, f)] = fh.read().decode("utf-8", "replace")
            b64 = base64.b64encode(f"u:{password}".encode()).decode()
            for secret in (bearer, password, b64, client_secret, token, aws_secret, signature, helper_secret):
                for path, text in written.items():
                    self.assertNotIn(secret, text, f"{secret} in {path}")
                self.assertNotIn(secret, json.dumps(answers))
            for path in written:
                if path.endswith(".har"):
                    self.assertEqual(stat.S_IMODE(os.stat(path).st_mode) & 0o077, 0, f"{path} is private")
            hars = "".join(t for p, t in written.items() if p.endswith(".har"))
            self.assertIn(REDACTED, hars)
            self.assertIn("Bearer clients-own-header", hars, "redact: false shows the client's own header")
            self.assertIn("auth: bearer rule set", d.stderr_text())


if __name__ == "__main__":
    unittest.main()


class TestStubsRunNoAuthRule(AuthCase):
    """A request a stub answers runs no auth rule: no token is fetched for it (the stub stage
    decides before the credential stage); a miss sent to the network does get the credential."""

    def test_stubbed_request_fetches_no_token(self):
        k = key("stubbed")
        self.oauth2(k)
        url = f"{self.url}/protected/{k}"
        self.c.call("addStub", {"set": k, "match": {"url": url}, "respond": {"status": 200, "body": "stubbed"}})
        r = self.fetch({"url": url, "stubs": k})
        self.assertEqual((r["status"], r.get("body")), (200, "stubbed"), r)
        self.assertEqual(oauth_info(k)["count"], 0, "a token was fetched for a request a stub answered")
        self.assertEqual(hits("protected-" + k)["count"], 0)
        # The set sends misses to the network: that request gets its credential.
        self.c.call("setStubMode", {"set": k, "onMiss": "network"})
        r = self.fetch({"url": url + "?other=1", "stubs": k})
        self.assertEqual(r["status"], 200, r)
        self.assertEqual(oauth_info(k)["count"], 1)
