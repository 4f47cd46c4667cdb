#!/usr/bin/env python3
"""Run fetchd's integration tests: python3 tests/integration/run.py [-k PATTERN]...

Ends with a line "N passed, N failed[, N skipped]"; exits non-zero on any failure or error.
"""
import argparse
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def private_cache_home():
    """fetchd keeps an HTTP cache in $XDG_CACHE_HOME/fetchd by default: every daemon the tests
    start (the harness passes --no-cache unless a test asks for a cache) keeps it in a
    directory of this run, never in the user's ~/.cache."""
    import atexit
    import shutil
    import tempfile
    home = tempfile.mkdtemp(prefix="fetchd-test-cache-home-")
    os.environ["XDG_CACHE_HOME"] = home
    atexit.register(shutil.rmtree, home, True)


def main():
    private_cache_home()
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", action="append", default=[], metavar="PATTERN",
                    help="only tests whose name contains PATTERN (unittest -k semantics)")
    ap.add_argument("-q", action="store_true", help="less output")
    ap.add_argument("-x", "--failfast", action="store_true")
    args = ap.parse_args()

    sys.path.insert(0, HERE)
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in args.k]
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    runner = unittest.TextTestRunner(verbosity=1 if args.q else 2, failfast=args.failfast)
    result = runner.run(suite)

    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = max(0, result.testsRun - failed - skipped - len(result.expectedFailures))
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    sys.stdout.flush()
    print(line, flush=True)
    if failed or (result.testsRun == 0 and not args.k):
        sys.exit(1)


if __name__ == "__main__":
    main()
