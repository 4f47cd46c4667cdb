"""The Node.js client (clients/node) against the real daemon: runs its `node --test` suite
(clients/node/test/) with the daemon's socket and the test servers' URLs in the environment,
and checks that it refuses a socket another user serves without sending anything."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from foreign import IS_ROOT, NOBODY, ForeignListener
from harness import REPO, Daemon, DaemonTestCase, closed_port

NODE_DIR = os.path.join(REPO, "clients", "node")
NODE = shutil.which("node")


def _node_major():
    if not NODE:
        return 0
    out = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout
    return int(out.strip().lstrip("v").split(".")[0] or 0)


@unittest.skipUnless(_node_major() >= 18, "needs Node.js 18 or later (`node --test`)")
class TestNodeClient(DaemonTestCase):
    def test_node_test_suite(self):
        tmp = tempfile.mkdtemp(dir=self.daemon.tmpdir)
        env = dict(os.environ, FETCHD_SOCKET=self.daemon.socket_path, FETCHD_TEST_URL=self.srv.test_url,
                   FETCHD_NGINX_URL=self.srv.nginx_url, FETCHD_TEST_TMP=tmp,
                   FETCHD_CLOSED_PORT=str(closed_port()))
        r = subprocess.run([NODE, "--test", "--test-reporter=spec", "test/"], cwd=NODE_DIR, env=env,
                           capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, out[-8000:])
        summary = [line for line in r.stdout.splitlines() if line.lstrip("ℹ ").startswith(("tests", "pass", "fail"))]
        print("\n  node --test: " + ", ".join(s.strip("ℹ ").strip() for s in summary), end=" ... ", flush=True)
        self.assertIn("fail 0", " ".join(summary), out[-3000:])

    PROBE = (
        "const { connect } = require(process.argv[1]);\n"
        "connect({ socketPath: process.argv[2] }).then(\n"
        "  async (c) => { console.log(JSON.stringify({ ping: await c.ping() })); c.close(); },\n"
        "  (e) => console.log(JSON.stringify({ name: e.constructor.name, message: e.message })));\n")

    def probe(self, path):
        r = subprocess.run([NODE, "-e", self.PROBE, NODE_DIR, path], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_connects_to_its_own_daemon(self):
        self.assertEqual(self.probe(self.daemon.socket_path), {"ping": "pong"})

    @unittest.skipUnless(IS_ROOT, "needs root to run a listener as another uid")
    def test_refuses_another_users_socket_and_sends_nothing(self):
        d = tempfile.mkdtemp(prefix="fetchd-nodepeer-")
        os.chmod(d, 0o755)
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "fetchd.sock")
        with ForeignListener(path, uid=NOBODY) as fake:
            out = self.probe(path)
        self.assertEqual(out["name"], "UntrustedPeer", out)
        self.assertIn(f"refusing fetchd at {path}", out["message"])
        self.assertIn("nothing was sent", out["message"])
        self.assertEqual(fake.received["bytes"], 0, "the client sent something")
        self.assertEqual(fake.received["accepted"], 0, "the client connected")

    @unittest.skipUnless(IS_ROOT, "needs root to make a directory of another uid")
    def test_refuses_a_socket_below_a_directory_others_may_write(self):
        d = tempfile.mkdtemp(prefix="fetchd-nodepeer-")
        self.addCleanup(shutil.rmtree, d, True)
        sub = os.path.join(d, "shared")
        os.mkdir(sub)
        os.chmod(sub, 0o777)       # not sticky: another user could swap the socket
        os.chmod(d, 0o755)
        with Daemon(socket_path=os.path.join(sub, "fetchd.sock")) as daemon:
            out = self.probe(daemon.socket_path)
        self.assertEqual(out["name"], "UntrustedPeer", out)
        self.assertIn("writable by others and not sticky", out["message"])


if __name__ == "__main__":
    unittest.main()
