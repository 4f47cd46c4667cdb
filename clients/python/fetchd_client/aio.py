"""AsyncClient: fetchd from asyncio, on one connection, with any number of concurrent awaits.

    import asyncio
    from fetchd_client import AsyncClient

    async def main():
        async with AsyncClient() as c:
            rs = await asyncio.gather(*(c.get(f"https://example.org/{i}") for i in range(10)))
            job = c.download("https://example.org/big.iso", "big.iso")
            async for event in job:               # progress/retrying notifications
                print(event["receivedBytes"])
            r = await job                           # the Response (or the job's error)

Every HTTP method (``request``, ``get``/``post``/..., ``fetch``, ``download``, ``upload``,
``attach``) sends its request at once and returns an :class:`AsyncJob`: await it for the
:class:`Response`, iterate it (``async for``) for its progress events, or pass
``progress=callback``. Cancelling the task that awaits a job (``task.cancel()``,
``asyncio.wait_for`` running out, a TaskGroup failing) cancels the job on the daemon.

Bodies as they arrive: ``async with c.stream("GET", url) as r: async for chunk in
r.aiter_bytes(): ...`` (or ``r = await c.get(url, stream=True)``), and ``async for ev in
c.events(url)`` for Server-Sent Events. ``to=`` and ``data=`` (a pipe, a socket, an iterator
or an async iterator of bytes) hand descriptors to the daemon, as in the synchronous client.
"""
import asyncio
import collections
import itertools
import json as _json
import logging
import os
import socket
import uuid
from typing import (Any, AsyncIterator, Awaitable, Callable, Deque, Dict, Generator, List,
                    Mapping, Optional, Sequence)

from ._body import Descriptors, chunk_bytes
from ._prepare import (AuthArg, Callback, Defaults, HeadersArg, ParamsArg, PathLike, TimeoutArg,
                       camel, messages, put)
from ._api import HTTPMethods, events_params
from ._stream import (JobConnection, ServerSentEvent, StreamCore, StreamingResponse,
                      check_status, request_message)
from ._transport import READ_CHUNK, LineBuffer, check_peer, default_socket_path, encode
from .errors import (ConnectionClosed, DaemonUnreachable, FetchdError, RPCError, Timeout,
                     UntrustedPeer, error_from_answer)
from .models import Response

__all__ = ["AsyncClient", "AsyncJob", "AsyncStreamingResponse", "AsyncEventStream"]

log = logging.getLogger("fetchd_client")

#: Lines from the daemon may be far longer than asyncio's 64 KiB default (a body as base64).
_LINE_LIMIT = 1 << 31


class AsyncJob(Awaitable[Response]):
    """A request sent to the daemon. ``await job`` gives its :class:`Response` (or raises its
    error); ``async for event in job`` gives the ``progress`` and ``retrying`` notifications
    (their params, with ``"method"`` added) until the job ends; ``job.job_id`` is its id;
    ``await job.cancel()`` cancels it. Cancelling the awaiting task cancels the job."""

    def __init__(self, client: "AsyncClient", job_id: str, future: "asyncio.Future[Any]",
                 on_progress: Optional[Callback], on_retrying: Optional[Callback],
                 owns_job: bool, wrap: Callable[[Any], Any]):
        self.client = client
        self.job_id = job_id
        self._future = future
        self._on_progress = on_progress
        self._on_retrying = on_retrying
        self._events: Deque[Dict[str, Any]] = collections.deque()
        self._wakeup: Optional["asyncio.Future[None]"] = None
        self._owns_job = owns_job
        self._wrap = wrap
        future.add_done_callback(self._done)

    # -- called by the client's reader
    def _notify(self, method: str, params: Dict[str, Any]) -> None:
        cb = self._on_progress if method == "progress" else self._on_retrying
        if cb is not None:
            try:
                cb(params)
            except Exception as e:  # as in the sync client: stop the job, raise from await
                if not self._future.done():
                    self._future.set_exception(e)
                return
        self._events.append(dict(params, method=method))
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _done(self, future: "asyncio.Future[Any]") -> None:
        self.client._jobs.pop(self.job_id, None)
        if future.cancelled() or not isinstance(future.exception(), (type(None), RPCError,
                                                                      ConnectionClosed)):
            # The awaiting task was cancelled, a callback raised or rpc_timeout passed: stop
            # the job too.
            if self._owns_job:
                self.client._cancel_nowait(self.job_id)
        self._wake()

    # -- the caller's side
    def __await__(self) -> Generator[Any, None, Response]:
        result = yield from self._future.__await__()
        return self._wrap(result)

    def __aiter__(self) -> AsyncIterator[Dict[str, Any]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Dict[str, Any]]:
        while True:
            while self._events:
                yield self._events.popleft()
            if self._future.done():
                return
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None

    def done(self) -> bool:
        return self._future.done()

    async def cancel(self) -> bool:
        """Cancel the job on the daemon (``await job`` then raises Cancelled)."""
        return await self.client.cancel(self.job_id)


class AsyncClient(HTTPMethods[AsyncJob]):
    """An asyncio connection to fetchd: ``async with AsyncClient() as c:`` (or
    ``c = await AsyncClient.connect()`` ... ``await c.aclose()``). Takes the same
    ``socket_path`` and defaults (``base_url``, ``headers``, ``params``, ``auth``,
    ``timeout``) as :class:`fetchd_client.Client`; ``rpc_timeout`` bounds each await.

    Connecting raises DaemonUnreachable / UntrustedPeer as Client does."""

    def __init__(self, socket_path: Optional[PathLike] = None, *,
                 rpc_timeout: Optional[float] = None, connect_timeout: float = 5.0,
                 base_url: Optional[str] = None, headers: HeadersArg = None,
                 params: ParamsArg = None, auth: AuthArg = None, timeout: TimeoutArg = None):
        self.socket_path = default_socket_path(socket_path)
        self.rpc_timeout = rpc_timeout
        self.connect_timeout = connect_timeout
        self.defaults = Defaults(base_url, headers, params, auth, timeout)
        self._ids = itertools.count(1)
        self._calls: Dict[int, "asyncio.Future[Any]"] = {}
        self._jobs: Dict[str, AsyncJob] = {}
        self._writer: Optional[asyncio.StreamWriter] = None
        self._reader_task: Optional["asyncio.Task[None]"] = None
        self._closed_error: Optional[FetchdError] = None

    @classmethod
    async def connect(cls, socket_path: Optional[PathLike] = None, **kwargs: Any) -> "AsyncClient":
        client = cls(socket_path, **kwargs)
        await client._open()
        return client

    async def _open(self) -> None:
        sock = await _connect(self.socket_path, self.connect_timeout)
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=_LINE_LIMIT)
        self._writer = writer
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(reader))

    async def __aenter__(self) -> "AsyncClient":
        if self._writer is None:
            await self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection; waiting calls raise ConnectionClosed, and the daemon cancels
        this connection's jobs (unless detached)."""
        if self._closed_error is None:
            self._closed_error = ConnectionClosed("the client was closed")
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
        if self._reader_task is not None:
            try:
                await self._reader_task
            except asyncio.CancelledError:
                pass

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    # ------------------------------------------------------------------ plumbing
    def _send(self, msg: Dict[str, Any]) -> None:
        if self._closed_error is not None:
            raise self._closed_error
        if self._writer is None:
            raise ConnectionClosed("the client is not connected (use `async with AsyncClient()`)")
        data = _json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"
        self._writer.write(data)

    def _request(self, method: str, params: Any) -> "asyncio.Future[Any]":
        req_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        self._calls[req_id] = future
        future.add_done_callback(lambda _: self._calls.pop(req_id, None))
        return future

    def _cancel_nowait(self, job_id: str) -> None:
        try:
            self._send({"jsonrpc": "2.0", "method": "cancel", "params": {"jobId": job_id},
                        "id": f"cancel-{next(self._ids)}"})
        except FetchdError:
            pass

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        reason = "the daemon closed the connection"
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                if line.strip():
                    self._dispatch(line)
        except (OSError, ValueError) as e:
            reason = f"reading from fetchd failed: {e}"
        finally:
            if self._closed_error is None:
                self._closed_error = ConnectionClosed(reason)
            for future in list(self._calls.values()):
                if not future.done():
                    future.set_exception(ConnectionClosed(self._closed_error.message))
            self._calls.clear()

    def _dispatch(self, line: bytes) -> None:
        for m in messages(line):
            if "method" in m and "id" not in m:
                params = m.get("params")
                job_id = params.get("jobId") if isinstance(params, dict) else None
                job = self._jobs.get(job_id) if isinstance(job_id, str) else None
                if job is not None and isinstance(params, dict):
                    job._notify(str(m["method"]), params)
                continue
            req_id = m.get("id")
            future = self._calls.get(req_id) if isinstance(req_id, int) else None
            if future is None and req_id is None and len(self._calls) == 1:
                future = next(iter(self._calls.values()))
            if future is None or future.done():
                continue
            if "error" in m:
                future.set_exception(error_from_answer(m["error"]))
            else:
                future.set_result(m.get("result"))

    async def _await(self, future: "asyncio.Future[Any]", rpc_timeout: Optional[float]) -> Any:
        limit = self.rpc_timeout if rpc_timeout is None else rpc_timeout
        if limit is None:
            return await future
        try:
            return await asyncio.wait_for(future, limit)
        except asyncio.TimeoutError:
            raise Timeout(f"no answer within {limit}s") from None

    def _start(self, method: str, params: Dict[str, Any], on_progress: Optional[Callback],
               on_retrying: Optional[Callback], rpc_timeout: Optional[float],
               fds: Optional[Descriptors] = None) -> AsyncJob:
        if fds is not None:
            return self._own_connection_job(method, params, on_progress, on_retrying,
                                            rpc_timeout, fds, None)
        return self._job(method, params, on_progress, on_retrying, rpc_timeout)

    def _start_stream(self, method: str, params: Dict[str, Any], text_lines: bool,
                      on_progress: Optional[Callback], on_retrying: Optional[Callback],
                      rpc_timeout: Optional[float], fds: Optional[Descriptors]) -> AsyncJob:
        return self._own_connection_job(method, params, on_progress, on_retrying, rpc_timeout,
                                        fds, (text_lines, str(params["responseBody"])))

    def _own_connection_job(self, method: str, params: Dict[str, Any],
                            on_progress: Optional[Callback], on_retrying: Optional[Callback],
                            rpc_timeout: Optional[float], fds: Optional[Descriptors],
                            stream: Optional[Any]) -> AsyncJob:
        """A job on a connection of its own: one that passes descriptors (asyncio's streams
        cannot send them), or a streamed one (``stream`` = (text_lines, mode)), whose job
        resolves to an :class:`AsyncStreamingResponse` once the head is final."""
        self.defaults.apply(params)
        job_id = str(params.setdefault("jobId", f"py-{uuid.uuid4().hex[:16]}"))
        params.setdefault("progress", True)
        loop = asyncio.get_running_loop()
        future: "asyncio.Future[Any]" = loop.create_future()
        job = AsyncJob(self, job_id, future, on_progress, on_retrying, True,
                       Response if stream is None else (lambda r: r))
        core = StreamCore(job_id, lambda p: job._notify("progress", p),
                          lambda p: job._notify("retrying", p))
        conn = _AsyncConnection(core)

        async def run() -> None:
            try:
                await conn.open(self.socket_path, self.connect_timeout, method, params,
                                fds.fds if fds is not None else ())
                if fds is not None:
                    fds.sent()
                    if fds.source is not None:
                        loop.create_task(_feed(self, job_id, fds.take_write_fd(), fds.source,
                                               future))
                    fds.close()
                if stream is not None:
                    while core.head is None and not core.finished:
                        await conn.step()
                    if not future.done():
                        future.set_result(AsyncStreamingResponse._from_core(conn, *stream))
                    return
                while not core.finished:
                    await conn.step()
                if future.done():
                    return
                if core.error is not None:
                    future.set_exception(core.error)
                else:
                    future.set_result(core.result)
            except BaseException as e:
                conn.close()
                if not future.done():
                    future.set_exception(e)
                if not isinstance(e, Exception):
                    raise
            finally:
                if fds is not None:
                    fds.close()
                if stream is None:
                    conn.close()

        task = loop.create_task(run())

        def stop(f: "asyncio.Future[Any]") -> None:
            if f.cancelled() or f.exception() is not None:
                task.cancel()
                conn.close()
        future.add_done_callback(stop)
        self._expire(future, rpc_timeout)
        return job

    def stream(self, method: str, url: str, **kwargs: Any) -> "_StreamContext":
        """httpx's form: ``async with client.stream("GET", url) as r:`` then ``async for
        chunk in r.aiter_bytes()`` (``aiter_text()``, ``aiter_lines()``, ``await r.aread()``);
        leaving the block before the end cancels the job."""
        return _StreamContext(self.request(method, url, stream=True, _text_lines=True, **kwargs))

    def events(self, url: str, method: Optional[str] = None, **kwargs: Any) -> "AsyncEventStream":
        """Server-Sent Events from ``url``, parsed by the daemon (which reconnects when the
        connection drops)::

            async with client.events(url, json={"prompt": "hi", "stream": True}) as events:
                async for ev in events:            # ServerSentEvent: .event, .data, .id, .json()
                    print(ev.data, end="", flush=True)

        Takes request()'s keywords (POST when ``json``/``data`` is given, else GET). The
        request is sent when the stream is first used."""
        kind, p, fds, on_progress, on_retrying, rpc_timeout = events_params(url, method, kwargs)
        return AsyncEventStream(lambda: self._own_connection_job(
            kind, p, on_progress, on_retrying, rpc_timeout, fds, (True, "events")))

    def _expire(self, future: "asyncio.Future[Any]", rpc_timeout: Optional[float]) -> None:
        limit = self.rpc_timeout if rpc_timeout is None else rpc_timeout
        if limit is not None:
            def expire() -> None:
                if not future.done():
                    future.set_exception(Timeout(f"no answer within {limit}s"))
            handle = asyncio.get_running_loop().call_later(limit, expire)
            future.add_done_callback(lambda _: handle.cancel())

    def _job(self, method: str, params: Dict[str, Any], on_progress: Optional[Callback],
             on_retrying: Optional[Callback], rpc_timeout: Optional[float] = None,
             owns_job: bool = True) -> AsyncJob:
        if owns_job:
            self.defaults.apply(params)
            params.setdefault("jobId", f"py-{uuid.uuid4().hex[:16]}")
            params.setdefault("progress", True)
        job_id = str(params["jobId"])
        future = self._request(method, params)
        job = AsyncJob(self, job_id, future, on_progress, on_retrying, owns_job, Response)
        self._jobs[job_id] = job
        self._expire(future, rpc_timeout)
        return job

    # ------------------------------------------------------------------ generic
    async def call(self, method: str, params: Any = None, *,
                   rpc_timeout: Optional[float] = None) -> Any:
        """Any JSON-RPC request; returns its result or raises its error."""
        return await self._await(self._request(method, params), rpc_timeout)

    def notify(self, method: str, params: Any = None) -> None:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    async def ping(self) -> str:
        return str(await self.call("ping"))

    async def status(self) -> Dict[str, Any]:
        return dict(await self.call("getStatus"))

    get_status = status

    def attach(self, job_id: str, *, on_progress: Optional[Callback] = None,
               on_retrying: Optional[Callback] = None,
               rpc_timeout: Optional[float] = None) -> AsyncJob:
        """``attach``: wait for a job of any connection; cancelling the wait leaves the job
        running."""
        params = {"jobId": job_id, "progress": True}
        return self._job("attach", params, on_progress, on_retrying, rpc_timeout, owns_job=False)

    # ------------------------------------------------------------------ other methods
    async def cancel(self, job_id: str) -> bool:
        return bool((await self.call("cancel", {"jobId": job_id}))["cancelled"])

    async def get_job(self, job_id: str) -> Dict[str, Any]:
        return dict(await self.call("getJob", {"jobId": job_id}))

    async def list_jobs(self) -> List[Dict[str, Any]]:
        return list((await self.call("listJobs"))["jobs"])

    async def set_auth(self, host: str, type: Optional[str], **fields: Any) -> Dict[str, Any]:
        params: Dict[str, Any] = {"host": host, "type": type}
        params.update({camel(k): v for k, v in fields.items()})
        return dict(await self.call("setAuth", params))

    async def get_auth(self) -> List[Dict[str, Any]]:
        return list((await self.call("getAuth"))["rules"])

    async def add_stub(self, match: Optional[Mapping[str, Any]] = None,
                       respond: Optional[Mapping[str, Any]] = None, *, set: Optional[str] = None,
                       **options: Any) -> str:
        params: Dict[str, Any] = {camel(k): v for k, v in options.items() if v is not None}
        put(params, "set", set)
        put(params, "match", dict(match) if match is not None else None)
        put(params, "respond", dict(respond) if respond is not None else None)
        return str((await self.call("addStub", params))["stubId"])

    async def get_stubs(self, set: Optional[str] = None) -> Dict[str, Any]:
        params: Dict[str, Any] = {}
        put(params, "set", set)
        return dict(await self.call("getStubs", params))

    async def remove_stubs(self, set: Optional[str] = None, stub_id: Optional[str] = None) -> int:
        params: Dict[str, Any] = {}
        put(params, "set", set)
        put(params, "stubId", stub_id)
        return int((await self.call("removeStubs", params))["removed"])

    async def set_stub_mode(self, set: str, on_miss: str) -> Dict[str, Any]:
        return dict(await self.call("setStubMode", {"set": set, "onMiss": on_miss}))

    async def load_stubs(self, set: str, har: PathLike) -> int:
        har_path = os.path.abspath(os.fspath(har))
        return int((await self.call("loadStubs", {"set": set, "har": har_path}))["loaded"])

    async def record_stubs(self, set: str, har: PathLike) -> Dict[str, Any]:
        har_path = os.path.abspath(os.fspath(har))
        return dict(await self.call("recordStubs", {"set": set, "har": har_path}))


async def _connect(socket_path: str, connect_timeout: float) -> socket.socket:
    """A non-blocking socket connected to the daemon, its peer checked before anything is
    sent. Raises DaemonUnreachable or UntrustedPeer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.sock_connect(sock, socket_path), connect_timeout)
        check_peer(sock, socket_path)
    except UntrustedPeer:
        sock.close()
        raise
    except (OSError, asyncio.TimeoutError) as e:
        sock.close()
        why = getattr(e, "strerror", None) or str(e) or "timed out"
        raise DaemonUnreachable(f"cannot connect to fetchd at {socket_path}: {why}",
                                socket_path) from e
    except BaseException:
        sock.close()
        raise
    return sock


async def _writable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: "asyncio.Future[None]" = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)
    loop.add_writer(fd, wake)
    try:
        await ready
    finally:
        loop.remove_writer(fd)


class _AsyncConnection(JobConnection):
    """One job's own connection, read by whoever awaits its pieces."""

    def __init__(self, core: StreamCore):
        self.core = core
        self._lines = LineBuffer()

    async def open(self, socket_path: str, connect_timeout: float, method: str,
                   params: Dict[str, Any], fds: Sequence[int]) -> None:
        self.sock = await _connect(socket_path, connect_timeout)
        data = encode(request_message(method, params))
        try:
            while fds:
                try:
                    data = data[socket.send_fds(self.sock, [data], list(fds)):]
                    break
                except BlockingIOError:
                    await _writable(self.sock.fileno())
            if data:
                await asyncio.get_running_loop().sock_sendall(self.sock, data)
        except OSError as e:
            self.close()
            raise ConnectionClosed(f"sending to fetchd failed: {e}") from e

    async def step(self, timeout: Optional[float] = None) -> None:
        """Reads until one message went into the core."""
        while True:
            m = self._lines.pop()
            if m is not None:
                self._feed(m)
                return
            if self.sock is None:
                raise ConnectionClosed("the response was closed")
            try:
                recv = asyncio.get_running_loop().sock_recv(self.sock, READ_CHUNK)
                chunk = await (recv if timeout is None else asyncio.wait_for(recv, timeout))
            except asyncio.TimeoutError:
                raise Timeout(f"no answer within {timeout}s") from None
            except OSError as e:
                chunk = b""
                why = f"reading from fetchd failed: {e}"
            else:
                why = "the daemon closed the connection"
            if not chunk:
                self._ended(ConnectionClosed(why))
                return
            self._lines.add(chunk)


async def _feed(client: AsyncClient, job_id: str, fd: int, source: Any,
                job_future: "asyncio.Future[Any]") -> None:
    """Writes an iterator or async iterator body into the pipe the daemon reads. If it raises,
    the job is cancelled before the pipe is closed, and the job raises that exception."""
    os.set_blocking(fd, False)
    try:
        chunks = source.__aiter__() if hasattr(source, "__aiter__") else None
        it = iter(source) if chunks is None else None
        while True:
            if chunks is not None:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
            else:
                assert it is not None
                chunk = next(it, None)
                if chunk is None:
                    break
            view = memoryview(chunk_bytes(chunk))
            while view:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    await _writable(fd)
    except BrokenPipeError:
        pass
    except Exception as e:
        try:
            await client.cancel(job_id)
        except FetchdError:
            pass
        if not job_future.done():
            job_future.set_exception(e)
    finally:
        os.close(fd)


class AsyncStreamingResponse(StreamingResponse):
    """A :class:`StreamingResponse` for asyncio: read the body with ``aiter_bytes()``,
    ``aiter_text()``, ``aiter_lines()``, ``aiter_raw()`` or ``await aread()``;
    ``await aclose()`` (or leaving ``async with client.stream(...)``) before the end cancels
    the job."""

    def _pieces(self) -> Any:
        if self.__dict__["_content"] is not None:
            return iter([self.__dict__["_content"]])
        raise RuntimeError("an asyncio response is read with aiter_bytes(), aiter_lines()... "
                           "or await aread()")

    async def _apieces(self) -> AsyncIterator[Any]:
        if not self._check_unread():
            yield self.__dict__["_content"]
            return
        while True:
            ready, piece = self._take()
            if not ready:
                await self.__dict__["_conn"].step()
                continue
            if piece is None:
                return
            yield piece

    @property
    def content(self) -> bytes:
        if self.__dict__["_content"] is None:
            raise RuntimeError("the body has not been read: await r.aread() first")
        return bytes(self.__dict__["_content"])

    async def aread(self) -> bytes:
        if self.__dict__["_content"] is None:
            self.__dict__["_content"] = b"".join([b async for b in self.aiter_bytes()])
        return bytes(self.__dict__["_content"])

    def __repr__(self) -> str:
        return f"<AsyncStreamingResponse [{self.status_code}]>"


class _StreamContext:
    """``async with client.stream(...) as r``: the response at the head; closed at the end."""

    def __init__(self, job: AsyncJob):
        self.job = job
        self.response: Optional[Response] = None

    async def __aenter__(self) -> Response:
        self.response = await self.job
        return self.response

    async def __aexit__(self, *exc: Any) -> None:
        if self.response is not None:
            await self.response.aclose()


class AsyncEventStream:
    """Server-Sent Events for asyncio (see :class:`fetchd_client.EventStream`): ``async for
    ev in stream`` (or ``aiter_sse()``) gives :class:`ServerSentEvent` objects; ``response``
    is the head once the stream was entered (``async with``) or iterated; an answer of
    status 400 or above raises HTTPStatusError from the loop; ``await aclose()`` (or the end
    of the ``async with`` block) cancels the job."""

    def __init__(self, start: Callable[[], AsyncJob]):
        self._start = start
        self._job: Optional[AsyncJob] = None
        self.response: Optional[StreamingResponse] = None
        self.last_event_id: Optional[str] = None

    async def _response(self) -> StreamingResponse:
        if self.response is None:
            if self._job is None:
                self._job = self._start()
            r = await self._job
            assert isinstance(r, StreamingResponse)
            self.response = r
        return self.response

    @property
    def result(self) -> Optional[Dict[str, Any]]:
        r = self.response
        return r.__dict__["_core"].result if r is not None else None

    async def __aenter__(self) -> "AsyncEventStream":
        await self._response()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[ServerSentEvent]:
        return self.aiter_sse()

    async def aiter_sse(self) -> AsyncIterator[ServerSentEvent]:
        r = await self._response()
        async for piece in r._apieces():
            if isinstance(piece, ServerSentEvent):
                if piece.id is not None:
                    self.last_event_id = piece.id
                yield piece
        check_status(r)

    async def aclose(self) -> None:
        if self.response is not None:
            self.response.close()
        elif self._job is not None and not self._job.done():
            await self._job.cancel()
