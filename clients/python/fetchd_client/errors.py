"""Exceptions raised by fetchd_client.

Every exception is a :class:`FetchdError`. Errors the daemon answered with are
:class:`RPCError` subclasses chosen by the JSON-RPC code (see ``docs/clients.md`` and the
protocol's error table); problems on this side of the socket are :class:`ConnectError` (and its
:class:`UntrustedPeer`), :class:`ConnectionClosed` and :class:`Timeout`.

An HTTP status is never an exception: a 404 comes back as a normal result.
"""
from typing import TYPE_CHECKING, Any, Dict, Optional, Type

if TYPE_CHECKING:  # pragma: no cover
    from .client import Response

__all__ = [
    "FetchdError", "DaemonUnreachable", "ConnectError", "UntrustedPeer", "ConnectionClosed",
    "Timeout", "RPCError", "ParseError", "InvalidRequest", "MethodNotFound", "InvalidParams",
    "InternalError", "TransportError", "ServerUnreachable", "RequestTimeout", "TooManyRedirects",
    "Cancelled", "FileError", "NotAllowed", "Overloaded", "MessageTooLarge", "HTTPStatusError",
    "error_from_answer",
]


class FetchdError(Exception):
    """Base class. ``code`` is the JSON-RPC error code (None for client-side problems),
    ``message`` the daemon's message, ``data`` the error's ``data`` member (or None)."""

    code: Optional[int] = None

    def __init__(self, message: str, code: Optional[int] = None, data: Any = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.data = data

    def _d(self, name: str) -> Any:
        return self.data.get(name) if isinstance(self.data, dict) else None

    def __str__(self) -> str:
        if self.code is None:
            return self.message
        detail = self._d("detail")
        s = f"[{self.code}] {self.message}"
        return f"{s}: {detail}" if isinstance(detail, str) and detail not in self.message else s


class DaemonUnreachable(FetchdError, ConnectionError):
    """The fetchd daemon's socket could not be reached (no daemon, wrong path, permission).
    ``socket_path`` is the path tried. fetchctl exits with 3 in this case. This is about the
    daemon, not the HTTP server: a server that cannot be reached is :class:`ServerUnreachable`.
    Also a builtin ``ConnectionError``."""

    def __init__(self, message: str, socket_path: str):
        super().__init__(message)
        self.socket_path = socket_path


#: The old name of :class:`DaemonUnreachable`, kept so that existing code keeps working.
#: (In httpx, ``ConnectError`` means the *server* is unreachable; here that is
#: :class:`ServerUnreachable`.)
ConnectError = DaemonUnreachable


class UntrustedPeer(DaemonUnreachable):
    """The socket is served by a process of another user: its uid (``peer_uid``, from
    SO_PEERCRED, with ``peer_pid``) is neither this process's uid nor root's. Nothing was sent
    on the connection; it is closed. Someone else may have taken the socket path first (see
    ``docs/clients.md``). fetchctl refuses such a socket with exit code 3 too."""

    def __init__(self, message: str, socket_path: str, peer_uid: int, peer_pid: int):
        super().__init__(message, socket_path)
        self.peer_uid = peer_uid
        self.peer_pid = peer_pid


class ConnectionClosed(FetchdError):
    """The connection ended (the daemon stopped, or the client was closed) before the answer."""


class Timeout(FetchdError, TimeoutError):
    """No answer within the client-side ``rpc_timeout``. The job may still run on the daemon
    (fetch/download/upload cancel their job when this happens)."""


class RPCError(FetchdError):
    """The daemon answered the request with a JSON-RPC error (fetchctl exit code 4)."""


class ParseError(RPCError):
    """-32700: the daemon could not parse a line as JSON."""
    code = -32700


class InvalidRequest(RPCError):
    """-32600: not a valid JSON-RPC request."""
    code = -32600


class MethodNotFound(RPCError):
    """-32601: the daemon has no such method (maybe an older daemon)."""
    code = -32601


class InvalidParams(RPCError):
    """-32602: a parameter is missing, unknown or has the wrong type.
    ``field`` is the JSON path of the bad parameter (e.g. ``"headers.X-A"``), ``detail`` why."""
    code = -32602

    @property
    def field(self) -> Optional[str]:
        return self._d("field")

    @property
    def detail(self) -> Optional[str]:
        return self._d("detail")


class InternalError(RPCError):
    """-32603: a bug in the daemon."""
    code = -32603


class TransportError(RPCError):
    """-32001: the HTTP transfer failed after all attempts. ``kind`` is one of ``dns``,
    ``connect``, ``tls``, ``timeout``, ``reset``, ``protocol``, ``tooManyRedirects``,
    ``bodyTooLarge``, ``other``, or ``stubMiss`` (no stub of the request's set matched;
    ``nearest`` then names the nearest stub and what differed)."""
    code = -32001

    @property
    def kind(self) -> Optional[str]:
        return self._d("kind")

    @property
    def nearest(self) -> Optional[Dict[str, Any]]:
        """For ``stubMiss``: ``{"stubId", "differences"}``, or None."""
        return self._d("nearest")

    @property
    def job_id(self) -> Optional[str]:
        return self._d("jobId")

    @property
    def detail(self) -> Optional[str]:
        return self._d("detail")

    @property
    def attempts(self) -> Optional[int]:
        return self._d("attempts")


class ServerUnreachable(TransportError, ConnectionError):
    """-32001 with ``kind`` ``dns``, ``connect`` or ``proxy``: the HTTP server (or its proxy)
    could not be reached after all attempts. A builtin ``ConnectionError`` too (httpx's
    ``ConnectError``, requests' ``ConnectionError``)."""


class RequestTimeout(TransportError, TimeoutError):
    """-32001 with ``kind`` ``timeout``: the HTTP request took longer than its ``timeout``
    (per attempt) or ``maxTime`` (whole job). A builtin ``TimeoutError`` (httpx's
    ``TimeoutException``, requests' ``Timeout``)."""


class TooManyRedirects(TransportError):
    """-32001 with ``kind`` ``tooManyRedirects``: more than ``max_redirects`` redirects."""


class Cancelled(RPCError):
    """-32002: the job was cancelled. ``by`` is ``"cancel"``, ``"disconnect"`` or ``"shutdown"``
    (fetchctl exit code 5)."""
    code = -32002

    @property
    def by(self) -> Optional[str]:
        return self._d("by")

    @property
    def job_id(self) -> Optional[str]:
        return self._d("jobId")


class FileError(RPCError):
    """-32003: a local file could not be read or written (``path``, ``detail``).
    ``str(e)`` always names the path."""
    code = -32003

    def __str__(self) -> str:
        s = super().__str__()
        path = self.path
        return f"{s} ({path})" if path and path not in s else s

    @property
    def path(self) -> Optional[str]:
        return self._d("path")

    @property
    def detail(self) -> Optional[str]:
        return self._d("detail")


class NotAllowed(RPCError):
    """-32004: a scheme other than http/https, or a path outside the allowed directories."""
    code = -32004

    @property
    def detail(self) -> Optional[str]:
        return self._d("detail")


class Overloaded(RPCError):
    """-32005: the daemon's queue limit is reached (``limit``); try again later."""
    code = -32005

    @property
    def limit(self) -> Optional[int]:
        return self._d("limit")


class MessageTooLarge(RPCError):
    """-32006: the request line was longer than the daemon's --max-message-bytes (``limit``)."""
    code = -32006

    @property
    def limit(self) -> Optional[int]:
        return self._d("limit")


class HTTPStatusError(FetchdError):
    """Raised by :meth:`Response.raise_for_status` for a 4xx or 5xx answer (the daemon never
    raises for a status by itself). ``response`` is the Response, ``status_code`` its status."""

    def __init__(self, message: str, response: "Response"):
        super().__init__(message)
        self.response = response

    @property
    def status_code(self) -> int:
        return self.response.status_code


#: TransportError subclasses by ``data.kind``.
_BY_KIND: Dict[str, Type[TransportError]] = {
    "dns": ServerUnreachable, "connect": ServerUnreachable, "proxy": ServerUnreachable,
    "timeout": RequestTimeout, "tooManyRedirects": TooManyRedirects,
}

_BY_CODE: Dict[int, Type[RPCError]] = {
    cls.code: cls for cls in (ParseError, InvalidRequest, MethodNotFound, InvalidParams,
                              InternalError, TransportError, Cancelled, FileError, NotAllowed,
                              Overloaded, MessageTooLarge)
}


def error_from_answer(error: Any) -> RPCError:
    """The exception for a JSON-RPC ``error`` object: the subclass for its code, else RPCError."""
    if not isinstance(error, dict):
        return RPCError(f"malformed error object: {error!r}", code=-32603, data=error)
    code = error.get("code")
    cls = _BY_CODE.get(code, RPCError) if isinstance(code, int) else RPCError
    data = error.get("data")
    if cls is TransportError and isinstance(data, dict) and isinstance(data.get("kind"), str):
        cls = _BY_KIND.get(data["kind"], TransportError)
    message = error.get("message")
    return cls(message if isinstance(message, str) else "error", code=code, data=error.get("data"))
