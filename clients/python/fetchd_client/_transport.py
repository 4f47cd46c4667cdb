"""The Unix socket under both clients: where it is, who serves it, and messages on it (a JSON
text per line; descriptors travel with a line's first byte, SCM_RIGHTS)."""
import collections
import json as _json
import os
import socket
import struct
import time
from typing import Any, Deque, Dict, Optional, Sequence, Union

from ._prepare import messages
from .errors import ConnectionClosed, DaemonUnreachable, Timeout, UntrustedPeer

__all__ = ["default_socket_path", "check_peer", "connect_socket", "encode", "send_line",
           "LineBuffer", "LineReader", "READ_CHUNK"]

PathLike = Union[str, "os.PathLike[str]"]

#: Bytes read from the socket at a time.
READ_CHUNK = 1 << 20

#: struct ucred: pid_t pid; uid_t uid; gid_t gid.
_UCRED = struct.Struct("=iII")


def default_socket_path(socket_path: Optional[PathLike] = None) -> str:
    """The socket path by the daemon's rules: the argument, else ``$FETCHD_SOCKET``, else
    ``$XDG_RUNTIME_DIR/fetchd.sock``, else ``/tmp/fetchd-<uid>/fetchd.sock`` (a directory
    the daemon creates with mode 0700)."""
    if socket_path:
        return os.fspath(socket_path)
    env = os.environ.get("FETCHD_SOCKET")
    if env:
        return env
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, "fetchd.sock")
    return f"/tmp/fetchd-{os.getuid()}/fetchd.sock"


def check_peer(sock: socket.socket, socket_path: str) -> None:
    """Raises UntrustedPeer unless the process listening on ``sock`` runs as this process's
    uid or as root (SO_PEERCRED: the kernel's word, not the peer's). Called before anything
    is sent: a socket path someone else took first must not receive the requests."""
    pid, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    me = os.getuid()
    if uid not in (me, 0):
        raise UntrustedPeer(f"refusing fetchd at {socket_path}: the socket is served by uid {uid} "
                            f"(pid {pid}), not by this user (uid {me}) or root; nothing was sent",
                            socket_path, uid, pid)


def connect_socket(socket_path: str, connect_timeout: float) -> socket.socket:
    """A blocking socket connected to the daemon at ``socket_path`` whose peer passed
    :func:`check_peer`. Raises DaemonUnreachable or UntrustedPeer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(connect_timeout)
        sock.connect(socket_path)
        sock.settimeout(None)
        check_peer(sock, socket_path)
    except UntrustedPeer:
        sock.close()
        raise
    except OSError as e:
        sock.close()
        raise DaemonUnreachable(f"cannot connect to fetchd at {socket_path}: "
                                f"{e.strerror or e}", socket_path) from e
    except BaseException:
        sock.close()
        raise
    return sock


def encode(msg: Dict[str, Any]) -> bytes:
    """One message as the line sent for it."""
    return _json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def send_line(sock: socket.socket, data: bytes, fds: Sequence[int] = ()) -> None:
    """Sends ``data`` on a blocking socket; ``fds`` go with its first byte (SCM_RIGHTS)."""
    if fds:
        sent = socket.send_fds(sock, [data], list(fds))
        data = data[sent:]
    if data:
        sock.sendall(data)


class LineBuffer:
    """Splits the bytes read from the daemon into messages."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._scanned = 0
        self._ready: Deque[Dict[str, Any]] = collections.deque()

    def add(self, chunk: bytes) -> None:
        self._buf += chunk
        start = 0
        while True:
            nl = self._buf.find(b"\n", max(start, self._scanned))
            if nl < 0:
                break
            line = bytes(self._buf[start:nl])
            start = nl + 1
            if line.strip():
                self._ready.extend(messages(line))
        if start:
            del self._buf[:start]
        self._scanned = len(self._buf)

    def pop(self) -> Optional[Dict[str, Any]]:
        return self._ready.popleft() if self._ready else None


class LineReader:
    """Reads the daemon's messages from a blocking socket, on the caller's thread."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._lines = LineBuffer()

    def read_message(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The next message. Raises ConnectionClosed at the end of the stream and Timeout when
        nothing came within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            m = self._lines.pop()
            if m is not None:
                return m
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise Timeout(f"no answer within {timeout}s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(READ_CHUNK)
            except socket.timeout:
                raise Timeout(f"no answer within {timeout}s") from None
            except OSError as e:
                raise ConnectionClosed(f"reading from fetchd failed: {e}") from e
            if not chunk:
                raise ConnectionClosed("the daemon closed the connection")
            self._lines.add(chunk)
