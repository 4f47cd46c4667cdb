"""pytest fixtures for programs that use fetchd. Enable them in a conftest.py:

    pytest_plugins = ["fetchd_client.pytest_plugin"]

    def test_profile(fetchd_offline):                 # an offline daemon of the test's own
        with fetchd_offline.stub_set() as stubs:
            stubs.add({"url": "https://api.example.com/v1/me"}, {"json": {"name": "ann"}})
            assert stubs.fetch("https://api.example.com/v1/me").json() == {"name": "ann"}

``fetchd_offline``: a Client of a ``fetchd --offline`` started for the test (see
fetchd_client.testing.offline_daemon); mark a test ``@pytest.mark.fetchd_stubs("file.har")``
to start it with ``--stubs``. ``FETCHD_SOCKET`` points at it during the test, so code that
makes its own Client() finds it.
"""
from typing import Any, Iterator

import pytest

from .testing import offline_daemon


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "fetchd_stubs(path): start fetchd_offline with --stubs PATH")


@pytest.fixture
def fetchd_offline(request: Any, monkeypatch: Any) -> Iterator[Any]:
    marker = request.node.get_closest_marker("fetchd_stubs")
    stubs = marker.args[0] if marker and marker.args else None
    with offline_daemon(stubs) as client:
        monkeypatch.setenv("FETCHD_SOCKET", client.socket_path)
        yield client
