"""The C client (clients/c, libfetchd): builds it with -Wall -Wextra -Werror, then runs its
test program (clients/c/tests/test_fetchd.c) against the real daemon under valgrind (no leaks,
no memory errors) and built with AddressSanitizer; checks the example program and that the
installed shared library and pkg-config file work."""
import os
import shutil
import subprocess
import tempfile
import unittest

from foreign import IS_ROOT, NOBODY, ForeignListener, clean_env, fallback_daemon, run_as, spare_fallback, taken_fallback
from harness import REPO, Daemon, closed_port, servers

CDIR = os.path.join(REPO, "clients", "c")


def _have_toolchain():
    return (shutil.which("cc") and shutil.which("make") and shutil.which("pkg-config")
            and subprocess.run(["pkg-config", "--exists", "jansson"]).returncode == 0)


def _make(*args, env=None):
    r = subprocess.run(["make", "-C", CDIR, *args], capture_output=True, text=True, env=env,
                       timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"make {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@unittest.skipUnless(_have_toolchain(), "needs cc, make, pkg-config and libjansson-dev")
class TestCClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = servers()
        cls.build = tempfile.mkdtemp(prefix="fetchd-cclient-")
        _make(f"O={cls.build}", "all", "test-program")
        os.chmod(cls.build, 0o755)   # other uids run the programs too (TestCClient.test_peer_*)
        cls.daemon = Daemon().start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.close()
        shutil.rmtree(cls.build, ignore_errors=True)

    def run_program(self, argv, timeout=300, env=None):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        return r

    def c_args(self):
        tmp = tempfile.mkdtemp(dir=self.daemon.tmpdir)
        return [self.daemon.socket_path, self.srv.test_url, str(closed_port()), tmp]

    def assert_passed(self, r, what):
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, f"{what} failed (exit {r.returncode}):\n{out[-6000:]}")
        self.assertIn(", 0 failed", r.stdout, out[-3000:])
        print(f"\n  {what}: {r.stdout.strip().splitlines()[-1]}", end=" ... ", flush=True)

    @unittest.skipUnless(shutil.which("valgrind"), "valgrind is not installed")
    def test_library_under_valgrind_without_leaks(self):
        r = self.run_program(["valgrind", "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
                              "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=1",
                              os.path.join(self.build, "tests", "test_fetchd"), *self.c_args()])
        self.assert_passed(r, "test_fetchd under valgrind")
        self.assertIn("ERROR SUMMARY: 0 errors", r.stderr, r.stderr[-3000:])
        self.assertIn("All heap blocks were freed", r.stderr, r.stderr[-3000:])

    def test_library_with_address_sanitizer(self):
        asan = tempfile.mkdtemp(prefix="fetchd-cclient-asan-")
        try:
            _make(f"O={asan}", "SANITIZE=address", "test-program")
            env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=1")
            r = self.run_program([os.path.join(asan, "tests", "test_fetchd"), *self.c_args()], env=env)
            self.assert_passed(r, "test_fetchd with ASan")
            self.assertNotIn("AddressSanitizer", r.stderr)
            self.assertNotIn("LeakSanitizer", r.stderr)
        finally:
            shutil.rmtree(asan, ignore_errors=True)

    def test_example_prints_status_and_body(self):
        r = self.run_program([os.path.join(self.build, "example"), self.srv.test_url + "/json",
                              self.daemon.socket_path], timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, 'status: 200\n{"hello": "world", "n": [1, 2, 3]}')
        r = self.run_program([os.path.join(self.build, "example"), f"http://127.0.0.1:{closed_port()}/",
                              self.daemon.socket_path], timeout=60)
        self.assertEqual(r.returncode, 4)
        self.assertIn("-32001", r.stderr)
        env = dict(os.environ, FETCHD_SOCKET=self.daemon.socket_path)
        r = self.run_program([os.path.join(self.build, "example"), self.srv.test_url + "/status/404"],
                             timeout=30, env=env)
        self.assertEqual((r.returncode, r.stdout), (0, "status: 404\nstatus 404"))
        r = self.run_program([os.path.join(self.build, "example"), self.srv.test_url,
                              os.path.join(self.daemon.tmpdir, "none.sock")], timeout=30)
        self.assertEqual(r.returncode, 3)

    #: Built from a directory of its own with only pkg-config's flags: fetch with a
    #: per-call progress callback, then upload a file; prints "ok STATUS EVENTS PARTS".
    INSTALLED_PROGRAM = r"""
#include <stdio.h>
#include <fetchd.h>
static int count(const char *method, json_t *params, void *data) {
    (void)method; (void)params; ++*(int *)data; return 0;
}
int main(int argc, char **argv) {
    if (argc != 5) return 2;
    fetchd_client *c = NULL;
    fetchd_error err = {0};
    if (fetchd_connect(argv[1], &c, &err) != FETCHD_OK) { fprintf(stderr, "%s\n", err.message); return 3; }
    int events = 0;
    fetchd_response r = {0};
    json_t *params = json_pack("{s:s}", "url", argv[2]);
    if (fetchd_fetch_progress(c, params, count, &events, &r, &err) != FETCHD_OK) { fprintf(stderr, "%s\n", err.message); return 4; }
    int status = r.status;
    fetchd_response_free(&r);
    json_decref(params);
    const char *paths[] = {argv[4]};
    if (fetchd_upload(c, argv[3], paths, 1, NULL, NULL, NULL, &r, &err) != FETCHD_OK) { fprintf(stderr, "%s\n", err.message); return 4; }
    json_t *echo = json_loads((const char *)r.body, 0, NULL);
    printf("ok %d %d %zu\n", status, events, json_array_size(json_object_get(echo, "parts")));
    json_decref(echo);
    fetchd_response_free(&r);
    fetchd_close(c);
    return 0;
}
"""

    def build_installed(self, prefix, *install_args):
        _make(f"O={self.build}", f"PREFIX={prefix}", *install_args, "install")
        src_dir = tempfile.mkdtemp(prefix="fetchd-cclient-user-")   # no fetchd.h next to it
        self.addCleanup(shutil.rmtree, src_dir, True)
        with open(os.path.join(src_dir, "prog.c"), "w") as f:
            f.write(self.INSTALLED_PROGRAM)
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fetchd"], env=env,
                               capture_output=True, text=True, check=True).stdout.split()
        exe = os.path.join(src_dir, "prog")
        r = subprocess.run(["cc", "-Wall", "-Wextra", "-Werror", "-o", exe, "prog.c", *flags],
                           cwd=src_dir, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return exe

    def installed_args(self, exe):
        d = tempfile.mkdtemp(dir=self.daemon.tmpdir)
        path = os.path.join(d, "upload.txt")
        with open(path, "w") as f:
            f.write("from an installed program\n")
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        return [exe, self.daemon.socket_path, self.srv.test_url + "/slow-body?chunks=3&ms=30",
                self.srv.test_url + "/multipart-echo", path], env

    def test_installed_shared_library_and_pkg_config(self):
        prefix = tempfile.mkdtemp(prefix="fetchd-cclient-prefix-")
        self.addCleanup(shutil.rmtree, prefix, True)
        exe = self.build_installed(prefix)
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
        self.assertIn(os.path.join(prefix, "lib", "libfetchd.so.0"), ldd)
        argv, env = self.installed_args(exe)
        r = self.run_program(argv, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.split()
        self.assertEqual((out[0], out[1], out[3]), ("ok", "200", "1"), r.stdout)
        self.assertGreater(int(out[2]), 0, "no progress events")

    def test_install_without_rpath_needs_the_loader_path(self):
        # RPATH= leaves the run path out (for ldconfig'd system directories): then the
        # loader must be told, which is the failure the rpath avoids.
        prefix = tempfile.mkdtemp(prefix="fetchd-cclient-prefix-")
        self.addCleanup(shutil.rmtree, prefix, True)
        exe = self.build_installed(prefix, "RPATH=")
        argv, env = self.installed_args(exe)
        r = self.run_program(argv, timeout=60, env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("libfetchd.so.0: cannot open shared object file", r.stderr)
        r = self.run_program(argv, timeout=60, env=dict(env, LD_LIBRARY_PATH=os.path.join(prefix, "lib")))
        self.assertEqual(r.returncode, 0, r.stderr)

    # The listener's uid (SO_PEERCRED) must be ours or root's, before anything is sent.
    def peer_dir(self):
        d = tempfile.mkdtemp(prefix="fetchd-cpeer-")
        os.chmod(d, 0o755)
        self.addCleanup(shutil.rmtree, d, True)
        return d

    @unittest.skipUnless(IS_ROOT, "needs root to run listeners and clients as other uids")
    def test_peer_of_another_user_refused(self):
        path = os.path.join(self.peer_dir(), "fetchd.sock")
        with ForeignListener(path, uid=NOBODY) as fake:
            r = self.run_program([os.path.join(self.build, "tests", "test_fetchd"), "--peer", path, "refused", str(NOBODY)],
                                 timeout=30)
        self.assert_passed(r, "test_fetchd --peer refused")
        self.assertEqual(fake.received, {"accepted": 2, "bytes": 0}, "the client sent something")

    @unittest.skipUnless(IS_ROOT, "needs root to run listeners and clients as other uids")
    def test_peer_default_path_taken_by_another_user(self):
        uid = spare_fallback(self)
        with taken_fallback(uid) as fake:
            r = run_as(uid, [os.path.join(self.build, "example"), self.srv.test_url + "/json"], env=clean_env(), timeout=30)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 3, err)
        self.assertIn(f"refusing fetchd at /tmp/fetchd-{uid}/fetchd.sock: the socket is served by uid {NOBODY}", err)
        self.assertIn("nothing was sent", err)
        self.assertEqual(fake.received, {"accepted": 1, "bytes": 0}, "the client sent something")

    @unittest.skipUnless(IS_ROOT, "needs root to run listeners and clients as other uids")
    def test_peer_root_trusted_by_another_user(self):
        path = os.path.join(self.peer_dir(), "fetchd.sock")
        with ForeignListener(path, uid=0) as fake:
            r = run_as(NOBODY, [os.path.join(self.build, "tests", "test_fetchd"), "--peer", path, "trusted"], env=clean_env(),
                       text=True)
        self.assert_passed(r, "test_fetchd --peer trusted (as nobody)")
        self.assertGreater(fake.received["bytes"], 0)

    @unittest.skipUnless(IS_ROOT, "needs root to run the daemon as a spare uid")
    def test_peer_own_daemon_on_the_default_path(self):
        uid = spare_fallback(self)
        with fallback_daemon(uid):
            r = run_as(uid, [os.path.join(self.build, "example"), self.srv.test_url + "/json"], env=clean_env(), timeout=30)
        self.assertEqual((r.returncode, r.stdout), (0, b'status: 200\n{"hello": "world", "n": [1, 2, 3]}'), r.stderr)


if __name__ == "__main__":
    unittest.main()
