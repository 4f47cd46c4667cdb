"""upload: multipart/form-data streamed from disk and parsed by the real test server;
strict about unreadable files (nothing is sent) unless skipUnreadable; bodyFile for fetch; and
Google's resumable upload protocol against the test server's /resumable/... implementation."""
import base64
import json
import os
import shutil
import tempfile
import unittest
import urllib.request

from harness import DaemonTestCase, RPCError, big_bin, header_values, servers, sha256, wait_for
from jobhelpers import bodies, collect, hits, job_entry, key, list_jobs, send_request
import testserver

MiB = 1024 * 1024


def get_json(path):
    with urllib.request.urlopen(servers().test_url + path, timeout=10) as r:
        return json.loads(r.read())


def session_info(name):
    return get_json(f"/resumable/session/{name}/info")


def sessions(name):
    return get_json(f"/resumable/info/{name}")["sessions"]


class UploadCase(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="up-", dir=self.daemon.tmpdir)

    def tearDown(self):
        super().tearDown()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def upload(self, params, timeout=30, client=None):
        return (client or self.c).call("upload", params, timeout=timeout)

    def upload_error(self, params, timeout=30):
        try:
            r = self.c.call("upload", params, timeout=timeout)
        except RPCError as e:
            return e
        self.fail(f"upload {json.dumps(params)[:300]} succeeded, expected an error; result: {json.dumps(r)[:500]}")

    def parts_of(self, r):
        self.assertEqual(r.get("status"), 200, json.dumps(r)[:500])
        return json.loads(r["body"])["parts"]

    def assertPart(self, part, name, filename, ctype, data):
        self.assertEqual(part["name"], name, part)
        self.assertEqual(part["filename"], filename, part)
        self.assertEqual(part["contentType"], ctype, part)
        self.assertEqual(part["size"], len(data), part)
        self.assertEqual(part["sha256"], sha256(data), part)


class TestMultipart(UploadCase):
    def test_files_by_path_and_inline_with_fields(self):
        doc = json.dumps({"a": [1, 2, 3]}).encode()
        png = b"\x89PNG\r\n\x1a\n" + testserver.det_bytes(3000)
        odd = testserver.det_bytes(70000, seed=7)
        blob = bytes(range(256)) * 4
        pj = self.write("doc.json", doc)
        pp = self.write("pic.png", png)
        po = self.write("data.xyzzy", odd)
        r = self.upload({
            "url": self.srv.test_url + "/multipart-echo",
            "files": [
                {"path": pj},
                {"path": pp, "field": "image"},
                {"path": po, "filename": "renamed.bin", "mimetype": "application/x-custom"},
                {"content": "hello — ünïcode\n", "filename": "note.txt", "field": "notes"},
                {"contentBase64": base64.b64encode(blob).decode(), "filename": "blob", "field": "raw"},
                {"path": po, "field": "again"},
            ],
            "fields": {"title": "Grüße", "empty": ""},
        })
        parts = self.parts_of(r)
        self.assertEqual(r.get("failedFiles"), [], r)
        fields = {p["name"]: p for p in parts if p["filename"] is None}
        files = [p for p in parts if p["filename"] is not None]
        self.assertEqual(sorted(fields), ["empty", "title"], parts)
        self.assertEqual(fields["title"]["value"], "Grüße")
        self.assertEqual(fields["empty"]["value"], "")
        self.assertEqual(len(files), 6, parts)
        self.assertPart(files[0], "file", "doc.json", "application/json", doc)
        self.assertPart(files[1], "image", "pic.png", "image/png", png)
        self.assertPart(files[2], "file", "renamed.bin", "application/x-custom", odd)
        self.assertEqual(files[3]["name"], "notes", files[3])
        self.assertEqual(files[3]["filename"], "note.txt", files[3])
        self.assertTrue((files[3]["contentType"] or "").startswith("text/plain"), files[3])
        self.assertEqual(files[3]["sha256"], sha256("hello — ünïcode\n".encode()), files[3])
        self.assertPart(files[4], "raw", "blob", "application/octet-stream", blob)
        self.assertPart(files[5], "again", "data.xyzzy", "application/octet-stream", odd)

    def test_mimetype_guesses(self):
        cases = {"a.json": "application/json", "b.png": "image/png", "c.unknownext": "application/octet-stream",
                 "noext": "application/octet-stream", "d.JSON": "application/json", "e.jpg": "image/jpeg",
                 "f.pdf": "application/pdf"}
        files = [{"content": "x", "filename": n} for n in cases]
        parts = self.parts_of(self.upload({"url": self.srv.test_url + "/multipart-echo", "files": files}))
        got = {p["filename"]: p["contentType"] for p in parts}
        self.assertEqual(got, cases)

    def test_method_default_post_and_put(self):
        data = testserver.det_bytes(5000)
        path = self.write("x.bin", data)
        for method, expect in ((None, "POST"), ("PUT", "PUT"), ("PATCH", "PATCH")):
            with self.subTest(method=method):
                params = {"url": self.srv.test_url + "/echo", "files": [{"path": path}], "fields": {"k": "v"}}
                if method:
                    params["method"] = method
                r = self.upload(params)
                echo = json.loads(r["body"])
                self.assertEqual(echo["method"], expect)
                ctype = header_values(echo, "Content-Type")
                self.assertEqual(len(ctype), 1, echo["headers"])
                self.assertTrue(ctype[0].startswith("multipart/form-data"), ctype)
                boundary = testserver._header_params(ctype[0])["boundary"]
                parts = testserver.parse_multipart(base64.b64decode(echo["bodyBase64"]), boundary.encode())
                byname = {p["name"]: p for p in parts}
                self.assertEqual(byname["k"]["value"], "v")
                self.assertEqual(byname["file"]["sha256"], sha256(data))
                self.assertEqual(r.get("failedFiles"), [])

    def test_big_file_streams(self):
        path = os.path.join(self.srv.static_dir, "big.bin")
        r = self.upload({"url": self.srv.test_url + "/multipart-echo", "files": [{"path": path}]}, timeout=60)
        parts = self.parts_of(r)
        self.assertEqual(len(parts), 1, parts)
        self.assertPart(parts[0], "file", "big.bin", "application/octet-stream", big_bin())
        self.assertGreater(r.get("sentBytes", 0), len(big_bin()), r.get("sentBytes"))

    def test_headers_and_query_kept(self):
        r = self.upload({"url": self.srv.test_url + "/echo", "query": {"a": 1},
                         "headers": {"X-Test": "yes"}, "files": [{"content": "abc", "filename": "a.txt"}]})
        echo = json.loads(r["body"])
        self.assertEqual(echo["query"], "a=1")
        self.assertEqual(header_values(echo, "X-Test"), ["yes"])


class TestUnreadable(UploadCase):
    def refused(self, bad, good=None):
        name = key("unreadable")
        files = ([{"path": good}] if good else []) + [{"path": bad}]
        e = self.upload_error({"url": f"{self.srv.test_url}/record/{name}", "files": files})
        self.assertEqual(e.code, -32003, e)
        self.assertEqual((e.data or {}).get("path"), bad, e)
        self.assertIsInstance((e.data or {}).get("detail"), str, e)
        self.assertEqual(hits(name)["count"], 0, "a request reached the server although a file is unreadable")

    def test_nonexistent_file(self):
        self.refused(os.path.join(self.dir, "missing.bin"), good=self.write("ok.txt", b"ok"))

    def test_directory(self):
        d = os.path.join(self.dir, "adir")
        os.mkdir(d)
        self.refused(d, good=self.write("ok.txt", b"ok"))

    def test_dangling_symlink(self):
        link = os.path.join(self.dir, "dangling")
        os.symlink(os.path.join(self.dir, "nowhere"), link)
        self.refused(link)

    def test_skip_unreadable(self):
        good = self.write("good.json", b"{}")
        missing = os.path.join(self.dir, "missing.bin")
        d = os.path.join(self.dir, "adir")
        os.mkdir(d)
        r = self.upload({"url": self.srv.test_url + "/multipart-echo", "skipUnreadable": True,
                         "files": [{"path": missing}, {"path": good}, {"path": d, "filename": "named-dir"}]})
        parts = self.parts_of(r)
        self.assertEqual(r.get("failedFiles"), ["missing.bin", "named-dir"], r)
        self.assertEqual(len(parts), 1, parts)
        self.assertPart(parts[0], "file", "good.json", "application/json", b"{}")

    def test_relative_path(self):
        e = self.upload_error({"url": self.srv.test_url + "/multipart-echo", "files": [{"path": "rel/x.bin"}]})
        self.assertEqual(e.code, -32602, e)
        self.assertEqual((e.data or {}).get("field"), "files[0].path", e)

    def test_bad_file_entries(self):
        url = self.srv.test_url + "/multipart-echo"
        cases = [
            ({"url": url}, "files"),
            ({"url": url, "files": []}, "files"),
            ({"url": url, "files": [{"content": "a", "contentBase64": "YQ=="}]}, "files[0]"),
            ({"url": url, "files": [{"filename": "x"}]}, "files[0]"),
            ({"url": url, "files": [{"contentBase64": "***"}]}, "files[0].contentBase64"),
            ({"url": url, "files": [{"content": "a", "colour": 1}]}, "files[0].colour"),
            ({"url": url, "files": [{"content": "a"}], "fields": {"n": 1}}, "fields.n"),
            ({"url": url, "files": [{"content": "a"}], "body": "x"}, "body"),
        ]
        for params, field in cases:
            with self.subTest(params=params):
                e = self.upload_error(params)
                self.assertEqual(e.code, -32602, e)
                self.assertEqual((e.data or {}).get("field"), field, e)


class TestBodyFile(UploadCase):
    def test_body_file_streams_5mib(self):
        path = os.path.join(self.srv.static_dir, "big.bin")
        for method in ("POST", "PUT"):
            with self.subTest(method=method):
                name = key("bodyfile")
                r = self.fetch({"url": f"{self.srv.test_url}/flaky-body/{name}?fail=0", "method": method,
                                "bodyFile": path}, timeout=60)
                self.assertEqual(r["status"], 200, r)
                seen = bodies(name)
                self.assertEqual(len(seen), 1, seen)
                self.assertEqual(seen[0], {"method": method, "length": len(big_bin()), "sha256": sha256(big_bin())})

    def test_body_file_default_method_is_post(self):
        path = self.write("b.txt", b"hello body file")
        r, echo = self.echo({"url": self.srv.test_url + "/echo", "bodyFile": path})
        self.assertEqual(echo["method"], "POST")
        self.assertEqual(echo["bodyLength"], 15)
        self.assertEqual(echo.get("bodySha256"), sha256(b"hello body file"))

    def test_body_file_missing(self):
        name = key("bodyfile-missing")
        e = self.fetch_error({"url": f"{self.srv.test_url}/record/{name}",
                              "bodyFile": os.path.join(self.dir, "missing")})
        self.assertEqual(e.code, -32003, e)
        self.assertEqual(hits(name)["count"], 0, "a request was sent with a missing bodyFile")


class TestResumable(UploadCase):
    SIZE = 3 * MiB + MiB // 2

    def start_url(self, name, **opts):
        q = "&".join([f"key={name}"] + [f"{k.replace('_', '-')}={v}" for k, v in opts.items()])
        return f"{self.srv.test_url}/resumable/start?{q}"

    def data_file(self, size=None, name="upload.bin"):
        data = testserver.det_bytes(self.SIZE if size is None else size, seed=99)
        return data, self.write(name, data)

    def assertFinal(self, r, name, data):
        self.assertEqual(r.get("status"), 200, json.dumps(r)[:500])
        info = session_info(name)
        self.assertEqual(info["status"], "final", info)
        self.assertEqual(info["size"], len(data), info)
        self.assertEqual(info["sha256"], sha256(data), info)
        self.assertEqual(json.loads(r["body"]), {"size": len(data), "sha256": sha256(data)},
                         "the result is the server's answer to the finalizing chunk")
        return info

    def test_chunks(self):
        name = key("chunks")
        data, path = self.data_file()
        r = self.upload({"url": self.start_url(name), "files": [{"path": path}],
                         "resumable": {"chunkSize": MiB}}, timeout=60)
        info = self.assertFinal(r, name, data)
        self.assertEqual(info["commands"], ["start", "upload", "upload", "upload", "upload, finalize"], info)
        self.assertEqual(info["offsets"], [0, MiB, 2 * MiB, 3 * MiB], info)
        self.assertEqual(info["declaredSize"], len(data), info)
        self.assertEqual(info["contentType"], "application/octet-stream", info)
        self.assertEqual(info["startMethod"], "POST", info)
        self.assertEqual(info["rejected"], 0, info)
        self.assertEqual(r.get("failedFiles"), [], r)

    def test_content_type_and_exact_multiple(self):
        name = key("exact")
        data, path = self.data_file(2 * MiB, name="doc.json")
        r = self.upload({"url": self.start_url(name), "files": [{"path": path}],
                         "resumable": {"chunkSize": MiB}}, timeout=60)
        info = self.assertFinal(r, name, data)
        self.assertEqual(info["commands"], ["start", "upload", "upload, finalize"], info)
        self.assertEqual(info["contentType"], "application/json", info)

    def test_single_chunk(self):
        name = key("one")
        data, path = self.data_file(1000)
        r = self.upload({"url": self.start_url(name), "files": [{"path": path, "mimetype": "image/png"}],
                         "resumable": {"chunkSize": MiB}})
        info = self.assertFinal(r, name, data)
        self.assertEqual(info["commands"], ["start", "upload, finalize"], info)
        self.assertEqual(info["contentType"], "image/png", info)

    def test_empty_file(self):
        name = key("empty")
        data, path = self.data_file(0)
        r = self.upload({"url": self.start_url(name), "files": [{"path": path}],
                         "resumable": {"chunkSize": MiB}})
        info = self.assertFinal(r, name, data)
        self.assertEqual(info["commands"], ["start", "upload, finalize"], info)

    def assertQueriedThenContinued(self, info, resume_at):
        """After the failed chunk: a query, and the next chunk at the size the server reported."""
        cmds = info["commands"]
        self.assertIn("query", cmds, f"no query after the failed chunk: {info}")
        q = cmds.index("query")
        chunks_before = sum(1 for c in cmds[:q] if c.startswith("upload"))
        self.assertGreater(len(info["offsets"]), chunks_before, info)
        self.assertEqual(info["offsets"][chunks_before], resume_at,
                         f"the chunk after the query does not start where the server said: {info}")
        self.assertEqual(cmds[-1], "upload, finalize", info)

    def test_chunk_reset_then_query_and_continue(self):
        """The connection is reset while chunk 2 is sent; the server kept half of it."""
        name = key("reset")
        data, path = self.data_file()
        r = self.upload({"url": self.start_url(name, fail_chunk=2), "files": [{"path": path}],
                         "resumable": {"chunkSize": MiB}, "retry": {"maxInterval": 0.05}}, timeout=60)
        info = self.assertFinal(r, name, data)
        self.assertEqual(info["failures"], [{"chunk": 2, "mode": "reset", "kept": MiB // 2}], info)
        self.assertQueriedThenContinued(info, MiB + MiB // 2)

    def test_chunk_reset_in_answer_then_query_and_continue(self):
        """As above, but the reset comes after the start of an answer (no silent re-send possible)."""
        name = key("resetans")
        data, path = self.data_file()
        r = self.upload({"url": self.start_url(name, fail_chunk=2, fail_mode="reset-in-answer"),
                         "files": [{"path": path}], "resumable": {"chunkSize": MiB},
                         "retry": {"maxInterval": 0.05}}, timeout=60)
        info = self.assertFinal(r, name, data)
        self.assertEqual(info["failures"], [{"chunk": 2, "mode": "reset-in-answer", "kept": MiB // 2}], info)
        self.assertEqual(info["commands"][:4], ["start", "upload", "upload", "query"], info)
        self.assertEqual(info["commands"].count("query"), 1, info)
        self.assertEqual(info["offsets"][:3], [0, MiB, MiB + MiB // 2], info)
        self.assertEqual(info["commands"][-1], "upload, finalize", info)
        self.assertEqual(info["rejected"], 0, info)

    def test_chunk_reset_with_default_retry(self):
        """A resumable upload retries by default (POST otherwise does not)."""
        name = key("defretry")
        data, path = self.data_file(MiB + 1000)
        r = self.upload({"url": self.start_url(name, fail_chunk=1, fail_mode="reset-in-answer", fail_keep=1000),
                         "files": [{"path": path}], "resumable": {"chunkSize": MiB}}, timeout=60)
        info = self.assertFinal(r, name, data)
        # the server kept 1000 bytes of chunk 1: the rest (MiB) fits in one finalizing chunk
        self.assertEqual(info["commands"], ["start", "upload", "query", "upload, finalize"], info)
        self.assertEqual(info["offsets"], [0, 1000], info)

    def test_chunk_503_then_query_and_continue(self):
        name = key("s503")
        data, path = self.data_file()
        r = self.upload({"url": self.start_url(name, fail_chunk=3, fail_mode=503), "files": [{"path": path}],
                         "resumable": {"chunkSize": MiB}, "retry": {"maxInterval": 0.05}}, timeout=60)
        info = self.assertFinal(r, name, data)
        self.assertEqual(info["commands"],
                         ["start", "upload", "upload", "upload", "query", "upload", "upload, finalize"], info)
        self.assertEqual(info["offsets"], [0, MiB, 2 * MiB, 2 * MiB, 3 * MiB], info)

    def test_cancel_sends_cancel_command(self):
        name = key("cancel")
        data, path = self.data_file()
        rid = send_request(self.c, "upload", {"url": self.start_url(name, hold_chunk=2), "jobId": name,
                                              "files": [{"path": path}], "resumable": {"chunkSize": MiB}})
        wait_for(lambda: sessions(name) and sessions(name)[0]["holding"], timeout=15,
                 message=f"the upload never reached chunk 2: {sessions(name)}")
        with self.daemon.client() as c2:
            self.assertEqual(c2.call("cancel", {"jobId": name}), {"cancelled": True})
        answer = collect(self.c, rid, timeout=10).answer
        self.assertEqual(answer.get("error", {}).get("code"), -32002, answer)
        self.assertEqual(answer["error"].get("data"), {"jobId": name, "by": "cancel"}, answer)
        info = wait_for(lambda: (lambda i: i if "cancel" in i["commands"] else None)(session_info(name)),
                        timeout=10, message=f"the server never got the cancel command: {session_info(name)}")
        self.assertEqual(info["status"], "cancelled", info)
        self.assertEqual(info["commands"][-1], "cancel", info)
        self.assertEqual(info["commands"][:3], ["start", "upload", "upload"], info)

    def test_not_a_resumable_endpoint(self):
        data, path = self.data_file(1000)
        r = self.upload({"url": self.srv.test_url + "/status/404", "files": [{"path": path}],
                         "resumable": {"chunkSize": MiB}})
        self.assertEqual(r.get("status"), 404, r)
        r = self.upload({"url": self.srv.test_url + "/echo", "files": [{"path": path}],
                         "resumable": {"chunkSize": MiB}})
        self.assertEqual(r.get("status"), 200, r)
        echo = json.loads(r["body"])
        self.assertEqual(header_values(echo, "X-Goog-Upload-Command"), ["start"], echo)
        self.assertEqual(header_values(echo, "X-Goog-Upload-Protocol"), ["resumable"], echo)
        self.assertEqual(header_values(echo, "X-Goog-Upload-Header-Content-Length"), ["1000"], echo)

    def test_resumable_params(self):
        url = self.srv.test_url + "/resumable/start"
        a = self.write("a.bin", b"a")
        b = self.write("b.bin", b"b")
        cases = [
            ({"url": url, "files": [{"path": a}, {"path": b}], "resumable": {"chunkSize": MiB}}, "files"),
            ({"url": url, "files": [{"content": "x"}], "resumable": {"chunkSize": MiB}}, "files"),
            ({"url": url, "files": [{"path": a}], "resumable": {"chunkSize": 0}}, "resumable.chunkSize"),
            ({"url": url, "files": [{"path": a}], "resumable": {"chunk": 5}}, "resumable.chunk"),
        ]
        for params, field in cases:
            with self.subTest(params=params):
                e = self.upload_error(params)
                self.assertEqual(e.code, -32602, e)
                self.assertEqual((e.data or {}).get("field"), field, e)

    def test_resumable_unreadable_file(self):
        name = key("unread")
        e = self.upload_error({"url": self.start_url(name), "files": [{"path": os.path.join(self.dir, "nope")}],
                               "resumable": {"chunkSize": MiB}})
        self.assertEqual(e.code, -32003, e)
        self.assertEqual(sessions(name), [], "a session was started for an unreadable file")

    def test_resumable_skip_unreadable_names_the_path(self):
        """skipUnreadable cannot help a resumable upload of its only file: -32003 naming that file's path."""
        name = key("unreadskip")
        missing = os.path.join(self.dir, "nope.bin")
        e = self.upload_error({"url": self.start_url(name), "files": [{"path": missing}], "skipUnreadable": True,
                               "resumable": {"chunkSize": MiB}})
        self.assertEqual(e.code, -32003, e)
        self.assertEqual((e.data or {}).get("path"), missing, f"data.path must be the file's path: {e}")
        self.assertEqual(sessions(name), [], "a session was started for an unreadable file")


if __name__ == "__main__":
    unittest.main()
