"""A plain GET's easy handle goes back to the engine's pool with its options set, and the next
transfer on that engine takes it without curl_easy_reset: each transfer must still
get exactly its own URL, timeouts, redirect rule, cookies, progress and body decoding, never
its predecessor's. One engine thread and one connection, so every request below reuses the
same handle and the same keep-alive connection to the test server."""
import json

from harness import DaemonTestCase, RPCError


class TestHandleReuse(DaemonTestCase):
    DAEMON_ARGS = ("--engine-threads", "1", "--no-cache")

    def echo_of(self, params, url=None):
        """The echo of a GET; the result's `url` (libcurl's effective URL) must be this
        request's, never the handle's last one."""
        r = self.fetch(dict(params, retry=False))
        self.assertEqual(r["status"], 200, r)
        if url is not None:
            self.assertEqual(r["url"], url, r)
        return json.loads(r["body"])

    def test_each_transfer_goes_to_its_own_url(self):
        base = self.srv.test_url + "/echo"
        first = self.echo_of({"url": base + "/one?a=1"}, url=base + "/one?a=1")
        self.assertEqual((first["path"], first["query"]), ("/echo/one", "a=1"))
        # With `query` the URL is not the text parsed when the request was read: the handle
        # gets the URL as text, and must not keep the last transfer's parse (libcurl prefers it).
        second = self.echo_of({"url": base + "/two", "query": {"b": "2"}}, url=base + "/two?b=2")
        self.assertEqual((second["path"], second["query"]), ("/echo/two", "b=2"))
        third = self.echo_of({"url": base + "/three?c=3"}, url=base + "/three?c=3")
        self.assertEqual((third["path"], third["query"]), ("/echo/three", "c=3"))
        # Two parsed URLs in a row: the effective URL is the second's.
        fifth = self.echo_of({"url": base + "/five"}, url=base + "/five")
        self.assertEqual(fifth["path"], "/echo/five")
        fourth = self.echo_of({"url": base + "/four", "query": {"d": "4"}}, url=base + "/four?d=4")
        self.assertEqual((fourth["path"], fourth["query"]), ("/echo/four", "d=4"))
        # The same connection all along: the handle and the connection were reused.
        self.assertEqual(len({x["clientPort"] for x in (first, second, third, fifth, fourth)}), 1)

    def test_a_short_timeout_does_not_stay_with_the_handle(self):
        self.echo_of({"url": self.srv.test_url + "/echo/quick", "timeout": 0.3})
        r = self.fetch({"url": self.srv.test_url + "/slow-headers?ms=700", "retry": False})
        self.assertEqual((r["status"], r["body"]), (200, "slow"))
        e = self.fetch_error({"url": self.srv.test_url + "/slow-headers?ms=700", "timeout": 0.3, "retry": False})
        self.assertEqual(e.data["kind"], "timeout", e.answer)
        r = self.fetch({"url": self.srv.test_url + "/slow-headers?ms=700", "retry": False})
        self.assertEqual(r["status"], 200, r)

    def test_each_transfer_has_its_own_redirect_rule(self):
        follow = self.srv.test_url + "/redirect-to?url=/echo/landed"
        landed = self.srv.test_url + "/echo/landed"
        r = self.fetch({"url": follow, "retry": False})
        self.assertEqual((r["status"], r["redirects"], r["url"]), (200, 1, landed), r)
        r = self.fetch({"url": follow, "maxRedirects": 0, "retry": False})
        self.assertEqual((r["status"], r["redirects"], r["url"]), (302, 0, follow), r)
        r = self.fetch({"url": follow, "retry": False})
        self.assertEqual((r["status"], r["redirects"], r["url"]), (200, 1, landed), r)

    def test_each_transfer_has_its_own_cookie_jar(self):
        jar = "reuse-jar"
        self.fetch({"url": self.srv.test_url + "/set-cookie?kept=yes", "cookieJar": jar, "retry": False})
        cookies = self.srv.test_url + "/cookies"
        with_jar = self.fetch({"url": cookies, "cookieJar": jar, "responseBody": "json", "retry": False})
        self.assertEqual(with_jar["json"], {"cookie": "kept=yes"})
        without = self.fetch({"url": cookies, "cookieJar": False, "responseBody": "json", "retry": False})
        self.assertEqual(without["json"], {"cookie": None})
        other = self.fetch({"url": cookies, "cookieJar": "reuse-other", "responseBody": "json", "retry": False})
        self.assertEqual(other["json"], {"cookie": None})
        again = self.fetch({"url": cookies, "cookieJar": jar, "responseBody": "json", "retry": False})
        self.assertEqual(again["json"], {"cookie": "kept=yes"})

    def test_progress_and_decoding_after_a_reused_handle(self):
        plain = self.fetch({"url": self.srv.test_url + "/gzip", "retry": False})
        self.assertEqual(plain["headers"].get("content-encoding"), "gzip")
        self.assertNotIn("\x1f\x8b", plain["body"], "the body is decoded on every transfer")
        rid = self.c.send_obj({"jsonrpc": "2.0", "id": 900, "method": "fetch",
                               "params": {"url": self.srv.test_url + "/bytes/300000", "progress": True, "retry": False}})
        progress, answer = [], None
        while answer is None:
            m = self.c.recv(timeout=20)
            if m.get("method") == "progress":
                progress.append(m["params"])
            elif m.get("id") == 900:
                answer = m
        self.assertEqual(answer["result"]["status"], 200, answer)
        self.assertTrue(progress, "progress was sent on a handle a transfer without progress used before")
        quiet = self.fetch({"url": self.srv.test_url + "/gzip", "retry": False})
        self.assertEqual(quiet["body"], plain["body"])

    def test_a_head_or_a_post_between_plain_gets(self):
        url = self.srv.test_url + "/echo/mixed"
        self.assertEqual(self.echo_of({"url": url})["method"], "GET")
        r = self.fetch({"url": url, "method": "HEAD", "retry": False})
        self.assertEqual((r["status"], r.get("body", "")), (200, ""), r)
        got = self.echo_of({"url": url})
        self.assertEqual((got["method"], got["bodyLength"]), ("GET", 0))
        posted = self.echo_of({"url": url, "method": "POST", "body": "hello"})
        self.assertEqual((posted["method"], posted["body"]), ("POST", "hello"))
        got = self.echo_of({"url": url})
        self.assertEqual((got["method"], got["bodyLength"]), ("GET", 0))


if __name__ == "__main__":
    import unittest
    unittest.main()
