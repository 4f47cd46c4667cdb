"""Testing a program that uses fetchd, without the network (stdlib only).

    from fetchd_client.testing import offline_daemon
    with offline_daemon(stubs="tests/stubs.json") as client:    # fetchd --stubs ... --offline
        r = client.fetch("https://api.example.com/v1/me")          # answered from the file
        os.environ["FETCHD_SOCKET"] = client.socket_path           # for the code under test

The daemon runs on a socket in a private temporary directory, answers every request from its
stubs (``stubs``: a HAR file or a JSON array of addStub params, optional) and never uses the
network: a request no stub matches raises TransportError with ``kind == "stubMiss"``. It is
stopped (SIGTERM) when the block ends. The binary is ``fetchd`` argument, else
``$FETCHD_BIN``, else ``fetchd`` on PATH.
"""
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Iterator, Optional, Sequence, Union

from .client import Client
from .errors import FetchdError

PathLike = Union[str, "os.PathLike[str]"]


@contextlib.contextmanager
def offline_daemon(stubs: Optional[PathLike] = None, *, fetchd: Optional[str] = None,
                   args: Sequence[str] = (), start_timeout: float = 20.0) -> Iterator[Client]:
    """Starts ``fetchd --offline [--stubs FILE]`` for the block; yields a connected Client
    (its ``socket_path`` attribute names the socket)."""
    binary = fetchd or os.environ.get("FETCHD_BIN") or shutil.which("fetchd") or "fetchd"
    directory = tempfile.mkdtemp(prefix="fetchd-test-")
    os.chmod(directory, 0o700)
    socket_path = os.path.join(directory, "fetchd.sock")
    command = [binary, "--socket", socket_path, "--offline", *args]
    if stubs is not None:
        command += ["--stubs", os.path.abspath(os.fspath(stubs))]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    client = None
    try:
        deadline = time.monotonic() + start_timeout
        while client is None:
            if process.poll() is not None:
                err = process.stderr.read().decode(errors="replace") if process.stderr else ""
                raise FetchdError(f"fetchd did not start ({' '.join(command)}): {err.strip()[-500:]}")
            if time.monotonic() > deadline:
                raise FetchdError(f"fetchd did not listen on {socket_path} within {start_timeout} s")
            try:
                client = Client(socket_path)
                client.ping()
            except FetchdError:
                if client is not None:
                    client.close()
                client = None
                time.sleep(0.02)
        yield client
    finally:
        if client is not None:
            client.close()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr:
            process.stderr.close()
        shutil.rmtree(directory, ignore_errors=True)
