"""Bodies that flow as they arrive (the protocol's ``responseBody`` ``"stream"``, ``"lines"``
and ``"events"``), for the synchronous Client.

Each streamed job runs on a connection of its own, read by the thread that iterates the body:
a body nobody reads pauses that transfer only (the daemon stops reading from the server), the
client's other calls go on, and closing the response (or leaving its ``with`` block) before
the end cancels the job. The messages are turned into pieces by :class:`StreamCore`, shared
with the asyncio client."""
import base64
import collections
import json as _json
import socket
from typing import Any, Callable, Deque, Dict, Iterator, Optional, Sequence, Tuple

from ._prepare import Callback
from ._transport import LineReader, connect_socket, encode, send_line
from .errors import ConnectionClosed, FetchdError, HTTPStatusError, error_from_answer
from .models import Response

__all__ = ["ServerSentEvent", "StreamCore", "StreamingResponse", "EventStream", "STREAM_MODES"]

#: The ``responseBody`` values whose body comes in notifications.
STREAM_MODES = ("stream", "lines", "events")

#: The id of the job's request on its own connection.
_JOB_ID = 1


class ServerSentEvent:
    """One event of a ``text/event-stream`` (the daemon parses it by the WHATWG rules):
    ``event`` (``"message"`` unless the server named it), ``data`` (its data lines joined by
    ``"\\n"``), ``id`` (None when the event carried none). ``json()`` parses ``data``.
    The attribute names are httpx-sse's."""
    __slots__ = ("event", "data", "id", "retry")

    def __init__(self, event: str = "message", data: str = "", id: Optional[str] = None,
                 retry: Optional[int] = None):
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry

    def json(self) -> Any:
        return _json.loads(self.data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerSentEvent):
            return NotImplemented
        return (self.event, self.data, self.id) == (other.event, other.data, other.id)

    def __repr__(self) -> str:
        return f"ServerSentEvent(event={self.event!r}, data={self.data!r}, id={self.id!r})"


class StreamCore:
    """What the messages of one streamed job mean, whoever reads them: ``head`` (the last
    ``responseHead`` params), ``heads`` (how many came: an event stream sends one per
    connection), ``pieces`` (bytes for ``"stream"``, str lines for ``"lines"``,
    :class:`ServerSentEvent` for ``"events"``), then ``result`` or ``error`` (``finished``).
    Progress and retrying notifications go to the callbacks."""

    def __init__(self, job_id: str, on_progress: Optional[Callback] = None,
                 on_retrying: Optional[Callback] = None):
        self.job_id = job_id
        self.on_progress = on_progress
        self.on_retrying = on_retrying
        self.head: Optional[Dict[str, Any]] = None
        self.heads = 0
        self.pieces: Deque[Any] = collections.deque()
        self.received = 0
        self.result: Optional[Dict[str, Any]] = None
        self.error: Optional[BaseException] = None
        self.finished = False

    def feed(self, m: Dict[str, Any]) -> None:
        method = m.get("method")
        if method is None or "id" in m:
            if m.get("id") == _JOB_ID:
                self.finished = True
                if "error" in m:
                    self.error = error_from_answer(m["error"])
                else:
                    result = m.get("result")
                    self.result = result if isinstance(result, dict) else {}
            return
        params = m.get("params")
        if not isinstance(params, dict) or params.get("jobId") != self.job_id:
            return
        if method == "bodyChunk":
            data = base64.b64decode(params.get("dataBase64") or "")
            self.received += len(data)
            self.pieces.append(data)
        elif method == "bodyLine":
            self.pieces.append(str(params.get("line", "")))
        elif method == "sseEvent":
            self.pieces.append(ServerSentEvent(str(params.get("event") or "message"),
                                               str(params.get("data", "")), params.get("id")))
        elif method == "responseHead":
            self.head = params
            self.heads += 1
        elif method == "progress" and self.on_progress is not None:
            self.on_progress(params)
        elif method == "retrying" and self.on_retrying is not None:
            self.on_retrying(params)

    def response_fields(self) -> Dict[str, Any]:
        """The head as result fields (status, headers, url, httpVersion, jobId)."""
        return dict(self.head or {})


def request_message(method: str, params: Dict[str, Any]) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": _JOB_ID, "method": method, "params": params}


class JobConnection:
    """A job's own connection (the sync and asyncio ones read it their way)."""
    sock: Optional[socket.socket] = None
    core: StreamCore

    def _feed(self, m: Dict[str, Any]) -> None:
        """One message into the core; a callback that raises closes the connection (the
        daemon cancels the job) and the exception goes on to the reader."""
        try:
            self.core.feed(m)
        except BaseException:
            self.close()
            raise
        self._ended(None)

    def _ended(self, error: Optional[BaseException]) -> None:
        """After a read: the connection is done with once the job has ended (or it closed)."""
        if error is not None:
            self.core.finished = True
            self.core.error = error
        if self.core.finished:
            self.close()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class _Connection(JobConnection):
    """One streamed job's own connection, read on the iterating thread."""

    def __init__(self, socket_path: str, connect_timeout: float, method: str,
                 params: Dict[str, Any], fds: Sequence[int], core: StreamCore):
        self.sock = connect_socket(socket_path, connect_timeout)
        self.reader = LineReader(self.sock)
        self.core = core
        try:
            send_line(self.sock, encode(request_message(method, params)), fds)
        except OSError as e:
            self.close()
            raise ConnectionClosed(f"sending to fetchd failed: {e}") from e

    def step(self, timeout: Optional[float] = None) -> None:
        """Reads one message into the core."""
        if self.sock is None:
            raise ConnectionClosed("the response was closed")
        try:
            m = self.reader.read_message(timeout)
        except ConnectionClosed as e:
            self._ended(e)
            return
        self._feed(m)


class StreamingResponse(Response):
    """A :class:`Response` whose body is still arriving: returned by ``stream=True``,
    ``client.stream(...)`` and ``response_body="stream"`` / ``"lines"`` as soon as the answer's
    head is final. ``status_code``, ``headers`` and ``url`` are known; read the body once,
    with ``iter_content(chunk_size)``, ``iter_lines()``, ``raw.read(n)``, ``iter_bytes()``,
    ``iter_text()``, or ``content``/``text``/``json()`` (which read the rest). The result's
    other fields (``bytes``, ``attempts``, ``elapsedMs``...) are added when the body has
    ended. A failure after the head raises from the read (a TransportError whose
    ``data["streamed"]`` counts the bytes delivered). ``close()`` (or the end of a ``with``
    block) before the end cancels the job."""

    @classmethod
    def _from_core(cls, conn: Any, text_lines: bool, mode: str) -> "StreamingResponse":
        """The response once the core has its head (or ended without one)."""
        core: StreamCore = conn.core
        if core.error is not None and core.head is None:
            raise core.error
        r = cls(core.response_fields() if core.head is not None else (core.result or {}))
        r.__dict__.update(_conn=conn, _core=core, _text_lines=text_lines, _mode=mode,
                          _consumed=False, _content=None, _heads=core.heads)
        return r

    @classmethod
    def _open(cls, conn: "_Connection", text_lines: bool, mode: str,
              rpc_timeout: Optional[float]) -> "StreamingResponse":
        try:
            while conn.core.head is None and not conn.core.finished:
                conn.step(rpc_timeout)
        except BaseException:
            conn.close()
            raise
        return cls._from_core(conn, text_lines, mode)

    def _take(self) -> Tuple[bool, Any]:
        """(True, the next piece) when one is there, (True, None) at the end (raising the
        job's error, if any), (False, None) when the connection must be read first."""
        core: StreamCore = self.__dict__["_core"]
        if core.heads != self.__dict__["_heads"] and core.head is not None:
            self.__dict__["_heads"] = core.heads   # an event stream's reconnection
            self.update(core.head)
            self.__dict__.pop("_headers", None)
        if core.pieces:
            return True, core.pieces.popleft()
        if not core.finished:
            return False, None
        self.__dict__["_consumed"] = True
        if core.error is not None:
            raise core.error
        if core.result is not None:
            self.update(core.result)
            self.__dict__.pop("_headers", None)
        return True, None

    def _check_unread(self) -> bool:
        """False when the body was read into ``content`` already (then that is the body)."""
        if self.__dict__["_content"] is not None:
            return False
        if self.__dict__["_consumed"]:
            raise StreamConsumed("the body was read already")
        return True

    def _pieces(self) -> Iterator[Any]:
        if not self._check_unread():
            yield self.__dict__["_content"]
            return
        while True:
            ready, piece = self._take()
            if not ready:
                self.__dict__["_conn"].step()
                continue
            if piece is None:
                return
            yield piece

    def _body_mode(self) -> str:
        return str(self.__dict__["_mode"])

    def _lines_are_text(self) -> bool:
        return bool(self.__dict__["_text_lines"])

    @property
    def content(self) -> bytes:
        """The rest of the body, read now (and kept)."""
        if self.__dict__["_content"] is None:
            self.__dict__["_content"] = b"".join(self.iter_bytes())
        return bytes(self.__dict__["_content"])

    def close(self) -> None:
        """Closes the job's connection; a job still running is cancelled."""
        self.__dict__["_conn"].close()
        self.__dict__["_consumed"] = True

    @property
    def is_closed(self) -> bool:
        return self.__dict__["_conn"].sock is None

    @property
    def is_stream_consumed(self) -> bool:
        return bool(self.__dict__["_consumed"])

    @property
    def num_bytes_downloaded(self) -> int:
        return int(self.__dict__["_core"].received)

    def __repr__(self) -> str:
        return f"<StreamingResponse [{self.status_code}]>"


class StreamConsumed(FetchdError, RuntimeError):
    """The body of a streamed response was read already (it can be read once)."""


def check_status(r: Response) -> None:
    """An event stream that ended with an error status raises HTTPStatusError."""
    if r.status_code >= 400:
        kind = "Client Error" if r.status_code < 500 else "Server Error"
        raise HTTPStatusError(f"{r.status_code} {kind}: {r.reason} for url: {r.url}", r)


class EventStream:
    """Server-Sent Events as the daemon parses them (``responseBody: "events"``): iterate it
    for :class:`ServerSentEvent` objects (``iter_sse()`` is the same, as in httpx-sse). The
    daemon reconnects by itself when the connection drops (with ``Last-Event-ID`` and the
    server's ``retry:``); ``response`` is the answer's head (the latest connection's),
    ``last_event_id`` the last id seen, and once the stream has ended ``result`` has
    ``events`` and ``reconnects``. The stream ends when the server says so (a 204, or an
    answer that is not an event stream): an answer of status 400 or above raises
    :class:`HTTPStatusError` (its ``response``) from the loop. ``close()`` or the end of a
    ``with`` block cancels the job."""

    def __init__(self, response_factory: Callable[[], StreamingResponse]):
        self._factory = response_factory
        self._response: Optional[StreamingResponse] = None
        self.last_event_id: Optional[str] = None

    @property
    def response(self) -> StreamingResponse:
        """The head of the answer (waits for it)."""
        if self._response is None:
            self._response = self._factory()
        return self._response

    @property
    def result(self) -> Optional[Dict[str, Any]]:
        """The job's result once the stream has ended (``events``, ``reconnects``...)."""
        r = self._response
        return r.__dict__["_core"].result if r is not None else None

    def __iter__(self) -> Iterator[ServerSentEvent]:
        return self.iter_sse()

    def iter_sse(self) -> Iterator[ServerSentEvent]:
        r = self.response
        for piece in r._pieces():
            if isinstance(piece, ServerSentEvent):
                if piece.id is not None:
                    self.last_event_id = piece.id
                yield piece
        check_status(r)

    def close(self) -> None:
        if self._response is not None:
            self._response.close()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
