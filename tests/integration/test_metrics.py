"""getMetrics and --metrics-listen: counts of real requests to real servers, in
Prometheus' text format and as JSON, and a real HTTP GET of /metrics."""
import json
import os
import re
import socket
import unittest
import urllib.error
import urllib.request

from harness import Daemon, DaemonTestCase, RPCError, closed_port, servers, wait_for


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sample(text, name, **labels):
    """The value of one sample in Prometheus text, or None."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(have.get(k) == str(v) for k, v in labels.items()):
            return float(m.group(4))
    return None


METRICS_PORT = free_port()


class TestGetMetrics(DaemonTestCase):
    DAEMON_ARGS = ("--metrics-listen", f"127.0.0.1:{METRICS_PORT}")
    port = METRICS_PORT

    def prometheus(self):
        return self.c.call("getMetrics", {"format": "prometheus"})["text"]

    def test_counts_requests_by_host_and_status_class(self):
        port = self.srv.test_url.rsplit(":", 1)[1]
        host = dict(server_address="127.0.0.1", server_port=port, url_scheme="http")
        before = self.prometheus()
        ok0 = sample(before, "http_client_request_duration_seconds_count", status_class="2xx", **host) or 0
        nf0 = sample(before, "http_client_request_duration_seconds_count", status_class="4xx", **host) or 0
        received0 = sample(before, "fetchd_received_bytes_total")
        for _ in range(3):
            self.assertEqual(self.c.call("fetch", {"url": self.srv.test_url + "/echo"})["status"], 200)
        self.assertEqual(self.c.call("fetch", {"url": self.srv.test_url + "/status/404"})["status"], 404)
        text = self.prometheus()
        self.assertEqual(sample(text, "http_client_request_duration_seconds_count", status_class="2xx", **host), ok0 + 3)
        self.assertEqual(sample(text, "http_client_request_duration_seconds_count", status_class="4xx", **host), nf0 + 1)
        self.assertEqual(sample(text, "http_client_request_duration_seconds_bucket", status_class="2xx", le="+Inf", **host),
                         ok0 + 3)
        self.assertGreater(sample(text, "fetchd_received_bytes_total"), received0)
        self.assertIn("# TYPE http_client_request_duration_seconds histogram", text)
        self.assertEqual(sample(text, "http_client_active_requests"), 0)
        # Kept alive by libcurl for reuse.
        self.assertGreaterEqual(sample(text, "http_client_open_connections"), 1)

    def test_connection_refused_is_an_error_and_retries_count(self):
        url = f"http://127.0.0.1:{closed_port()}/"
        before = self.prometheus()
        errors0 = sample(before, "http_client_request_duration_seconds_count", status_class="error",
                         server_address="127.0.0.1") or 0
        retries0 = sample(before, "fetchd_retries_total")
        with self.assertRaises(RPCError) as caught:
            self.c.call("fetch", {"url": url, "retry": {"maxAttempts": 2, "maxInterval": 0.01}})
        self.assertEqual(caught.exception.code, -32001)
        text = self.prometheus()
        self.assertEqual(sample(text, "http_client_request_duration_seconds_count", status_class="error",
                                server_address="127.0.0.1"), errors0 + 2)
        self.assertEqual(sample(text, "fetchd_retries_total"), retries0 + 1)

    def test_retry_after_pauses_count(self):
        before = sample(self.prometheus(), "fetchd_retry_after_pauses_total")
        port = self.srv.test_url.rsplit(":", 1)[1]
        # A host of its own: the pause holds that host only.
        r = self.c.call("fetch", {"url": f"http://pause.example:{port}/status/503?retry-after=1", "retry": False,
                                  "resolve": {f"pause.example:{port}": "127.0.0.1"}})
        self.assertEqual(r["status"], 503)
        self.assertEqual(sample(self.prometheus(), "fetchd_retry_after_pauses_total"), before + 1)

    def test_stub_hits_and_misses_count_not_as_requests(self):
        text = self.prometheus()
        hits0, misses0 = sample(text, "fetchd_stub_hits_total"), sample(text, "fetchd_stub_misses_total")
        port = self.srv.test_url.rsplit(":", 1)[1]
        series = dict(server_address="127.0.0.1", server_port=port, status_class="2xx")
        requests0 = sample(text, "http_client_request_duration_seconds_count", **series)
        url = self.srv.test_url + "/stubbed-for-metrics"
        self.c.call("addStub", {"set": "metrics", "match": {"method": "GET", "url": url}, "respond": {"status": 200}})
        self.assertEqual(self.c.call("fetch", {"url": url, "stubs": "metrics"})["status"], 200)
        with self.assertRaises(RPCError):
            self.c.call("fetch", {"url": url + "/nothing", "stubs": "metrics", "retry": False})
        text = self.prometheus()
        self.assertEqual(sample(text, "fetchd_stub_hits_total"), hits0 + 1)
        self.assertEqual(sample(text, "fetchd_stub_misses_total"), misses0 + 1)
        # Neither reached the network: no HTTP client request is counted.
        self.assertEqual(sample(text, "http_client_request_duration_seconds_count", **series), requests0)
        self.c.call("removeStubs", {"set": "metrics"})

    def test_json_format(self):
        self.c.call("fetch", {"url": self.srv.test_url + "/echo"})
        metrics = self.c.call("getMetrics", {"format": "json"})["metrics"]
        by_name = {m["name"]: m for m in metrics}
        duration = by_name["http_client_request_duration_seconds"]
        self.assertEqual(duration["type"], "histogram")
        s = next(s for s in duration["samples"] if s["labels"]["status_class"] == "2xx")
        self.assertEqual(s["buckets"][-1], {"le": "+Inf", "count": s["count"]})
        self.assertGreater(s["count"], 0)
        self.assertEqual(by_name["http_client_active_requests"]["samples"], [{"labels": {}, "value": 0}])
        self.assertEqual(by_name["fetchd_build_info"]["samples"][0]["value"], 1)

    def test_bad_format(self):
        with self.assertRaises(RPCError) as caught:
            self.c.call("getMetrics", {"format": "xml"})
        self.assertEqual(caught.exception.code, -32602)
        self.assertEqual(caught.exception.data["field"], "format")

    def test_http_endpoint(self):
        self.c.call("fetch", {"url": self.srv.test_url + "/echo"})
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as answer:
            self.assertEqual(answer.status, 200)
            self.assertTrue(answer.headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            text = answer.read().decode()
        self.assertIn("# TYPE http_client_request_duration_seconds histogram", text)
        self.assertGreater(sample(text, "http_client_request_duration_seconds_count", status_class="2xx",
                                  server_address="127.0.0.1"), 0)
        with self.assertRaises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/other", timeout=10)
        self.assertEqual(caught.exception.code, 404)


class TestHostsFoldIntoOther(unittest.TestCase):
    def test_beyond_100_hosts(self):
        srv = servers()
        port = srv.test_url.rsplit(":", 1)[1]
        with Daemon() as d:
            c = d.client()
            # 105 distinct hosts, all resolved to the test server: 100 get their own series.
            for i in range(105):
                name = f"h{i}.example"
                r = c.call("fetch", {"url": f"http://{name}:{port}/echo", "resolve": {f"{name}:{port}": "127.0.0.1"}})
                self.assertEqual(r["status"], 200)
            text = c.call("getMetrics", {"format": "prometheus"})["text"]
            hosts = set(re.findall(r'http_client_request_duration_seconds_count\{server_address="([^"]+)"', text))
            self.assertEqual(len(hosts), 101, sorted(hosts))
            self.assertIn("other", hosts)
            self.assertEqual(sample(text, "http_client_request_duration_seconds_count", server_address="other",
                                    status_class="2xx"), 5)


class TestMetricsListenFlag(unittest.TestCase):
    def test_bad_address_is_a_usage_error(self):
        from harness import run_fetchd
        r = run_fetchd("--metrics-listen", "example.com:80")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"--metrics-listen", r.stderr)

    def test_non_loopback_address_is_refused(self):
        # The contract: loopback only. 0.0.0.0 (every address) is refused before any socket is served.
        from harness import run_fetchd
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            r = run_fetchd("--socket", os.path.join(tmp, "f.sock"), "--metrics-listen", f"0.0.0.0:{free_port()}")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"not a loopback address", r.stderr)

    def test_port_alone_is_loopback(self):
        port = free_port()
        with Daemon("--metrics-listen", str(port)) as d:
            self.assertIn(f"metrics at http://127.0.0.1:{port}/metrics", wait_for(lambda: d.stderr_text()))
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
                self.assertEqual(answer.status, 200)


if __name__ == "__main__":
    unittest.main()
