"""fetchd_client: a stdlib-only Python client for fetchd (HTTP over JSON-RPC 2.0 on a Unix socket).

    from fetchd_client import Client
    with Client() as c:                      # $FETCHD_SOCKET, $XDG_RUNTIME_DIR/fetchd.sock, ...
        r = c.fetch("https://example.org/api", json={"q": 1}, headers={"X-A": "b"})
        print(r.status_code, r.json())
        r = c.get("https://example.org/api", params={"q": "x"}).raise_for_status()

See Client for every method and fetchd_client.errors for the exceptions.
"""
from ._stream import EventStream, ServerSentEvent, StreamConsumed, StreamingResponse
from .aio import AsyncClient, AsyncEventStream, AsyncJob
from .client import UNSET, Client, Session, StubSet, default_socket_path
from .errors import (Cancelled, ConnectError, ConnectionClosed, DaemonUnreachable, FetchdError,
                     FileError, HTTPStatusError, InternalError, InvalidParams, InvalidRequest,
                     MessageTooLarge, MethodNotFound, NotAllowed, Overloaded, ParseError,
                     RequestTimeout, RPCError, ServerUnreachable, Timeout, TooManyRedirects,
                     TransportError, UntrustedPeer, error_from_answer)
from .models import Headers, RedirectHop, Response

__version__ = "0.2.0"

__all__ = [
    "Client", "Session", "AsyncClient", "AsyncJob", "Response", "Headers", "RedirectHop",
    "StreamingResponse", "EventStream", "AsyncEventStream", "ServerSentEvent", "StreamConsumed",
    "StubSet", "default_socket_path", "UNSET",
    "FetchdError", "DaemonUnreachable", "ConnectError", "UntrustedPeer", "ConnectionClosed",
    "Timeout", "RPCError", "ParseError", "InvalidRequest", "MethodNotFound", "InvalidParams",
    "InternalError", "TransportError", "ServerUnreachable", "RequestTimeout", "TooManyRedirects",
    "Cancelled", "FileError", "NotAllowed", "Overloaded", "MessageTooLarge", "HTTPStatusError",
    "error_from_answer",
]
