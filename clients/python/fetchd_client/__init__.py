"""fetchd_client: a stdlib-only Python client for fetchd (HTTP over JSON-RPC 2.0 on a Unix socket).

    from fetchd_client import Client
    with Client() as c:                      # $FETCHD_SOCKET, $XDG_RUNTIME_DIR/fetchd.sock, ...
        r = c.fetch("https://example.org/api", json={"q": 1}, headers={"X-A": "b"})
        print(r.status, r.json())

See Client for every method and fetchd_client.errors for the exceptions.
"""
from .client import UNSET, Client, Response, StubSet, default_socket_path
from .errors import (Cancelled, ConnectError, ConnectionClosed, FetchdError, FileError,
                     InternalError, InvalidParams, InvalidRequest, MessageTooLarge,
                     MethodNotFound, NotAllowed, Overloaded, ParseError, RPCError, Timeout,
                     TransportError, UntrustedPeer, error_from_answer)

__version__ = "0.1.0"

__all__ = [
    "Client", "Response", "StubSet", "default_socket_path", "UNSET",
    "FetchdError", "ConnectError", "UntrustedPeer", "ConnectionClosed", "Timeout", "RPCError",
    "ParseError", "InvalidRequest", "MethodNotFound", "InvalidParams", "InternalError",
    "TransportError", "Cancelled", "FileError", "NotAllowed", "Overloaded", "MessageTooLarge",
    "error_from_answer",
]
