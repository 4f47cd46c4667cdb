"""The synchronous fetchd client: one Unix-socket connection, shared safely by threads.

How it works: a reader thread reads the daemon's lines and hands each answer to the caller
waiting for its id (answers may come in any order). Sends are serialised by a lock, so any
number of threads can use one Client at once.

Progress callbacks (``on_progress``, ``on_retrying``) are delivered by the reader thread to
the waiting call and run *in the thread that called* ``fetch``/``download``/``upload``, in
arrival order and all before the call returns. They may therefore use the client themselves
(for instance ``client.cancel(job_id)``). If a callback raises, the job is cancelled and the
exception propagates out of the call.

Notifications for jobs without callbacks (``progress=True`` with no callback, detached jobs
of earlier connections...) go to ``on_notification`` if given; that one runs on the reader
thread and must not wait for answers from this client (a call from it raises RuntimeError).
"""
import itertools
import json as _json
import logging
import os
import queue
import socket
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from ._body import Descriptors, feed
from ._prepare import (UNSET, AuthArg, Callback, Defaults, HeadersArg, ParamsArg, PathLike,
                       TimeoutArg, camel, messages, put)
from ._stream import EventStream, StreamCore, StreamingResponse, _Connection
from ._transport import READ_CHUNK, check_peer, connect_socket, default_socket_path, encode, send_line
from .errors import ConnectionClosed, FetchdError, RPCError, Timeout, error_from_answer
from ._api import HTTPMethods, events_params
from .models import Response

__all__ = ["Client", "Session", "Response", "default_socket_path", "UNSET"]

log = logging.getLogger("fetchd_client")

Json = Any

#: The peer check, under its older name (the asyncio client imported it from here).
_check_peer = check_peer


class _Call:
    """One request waiting for its answer; the reader thread feeds its queue."""
    __slots__ = ("id", "job_id", "queue", "on_progress", "on_retrying", "owns_job")

    def __init__(self, req_id: int, job_id: Optional[str], on_progress: Optional[Callback],
                 on_retrying: Optional[Callback], owns_job: bool = True):
        self.id = req_id
        self.job_id = job_id
        # False for attach: an interrupted wait leaves the job running.
        self.owns_job = owns_job
        self.queue: "queue.SimpleQueue[tuple]" = queue.SimpleQueue()
        self.on_progress = on_progress
        self.on_retrying = on_retrying


class Client(HTTPMethods[Response]):
    """A connection to fetchd.

    >>> with Client() as c:
    ...     r = c.fetch("https://example.org/", headers={"Accept": "text/html"})
    ...     print(r.status, r.text[:80])

    ``socket_path``: see :func:`default_socket_path`. ``rpc_timeout``: default seconds to wait
    for any answer (None = wait as long as the daemon takes; its own ``timeout`` bounds HTTP).
    ``on_notification``: called on the reader thread with every notification not routed to a
    waiting call's callbacks.

    ``base_url``, ``headers``, ``params``, ``auth`` (a ``(user, password)`` tuple) and
    ``timeout`` are added to every HTTP request of this client (``fetch``, ``request`` and
    ``get``/``post``/..., ``download``, ``upload``); see :class:`Session`.

    Raises :class:`DaemonUnreachable` (``ConnectError`` is its old name) when the daemon
    cannot be reached, and its subclass :class:`UntrustedPeer` (before sending anything) when
    the socket is served by another user than this process's or root.
    """

    def __init__(self, socket_path: Optional[PathLike] = None, *,
                 rpc_timeout: Optional[float] = None, connect_timeout: float = 5.0,
                 on_notification: Optional[Callable[[Dict[str, Any]], None]] = None,
                 base_url: Optional[str] = None, headers: HeadersArg = None,
                 params: ParamsArg = None, auth: AuthArg = None, timeout: TimeoutArg = None):
        self.defaults = Defaults(base_url, headers, params, auth, timeout)
        self.socket_path = default_socket_path(socket_path)
        self.rpc_timeout = rpc_timeout
        self.connect_timeout = connect_timeout
        self.on_notification = on_notification
        self._ids = itertools.count(1)
        self._lock = threading.Lock()          # guards _calls, _jobs, _closed_error
        self._send_lock = threading.Lock()     # one message on the wire at a time
        self._calls: Dict[int, _Call] = {}
        self._jobs: Dict[str, _Call] = {}
        self._closed_error: Optional[FetchdError] = None
        self._sock = connect_socket(self.socket_path, connect_timeout)
        self._reader = threading.Thread(target=self._read_loop, name="fetchd-client-reader",
                                        daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection. Calls still waiting raise ConnectionClosed; the daemon
        cancels this connection's jobs unless they were started with ``detach=True``."""
        with self._lock:
            if self._closed_error is None:
                self._closed_error = ConnectionClosed("the client was closed")
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if threading.current_thread() is not self._reader:
            self._reader.join()
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    # ------------------------------------------------------------------ generic calls
    def call(self, method: str, params: Optional[Union[Mapping[str, Any], Sequence[Any]]] = None,
             *, rpc_timeout: Optional[float] = None) -> Json:
        """Send any JSON-RPC request and return its ``result``; an error answer raises the
        :class:`RPCError` subclass for its code."""
        return self._call(method, params, rpc_timeout=rpc_timeout)

    def notify(self, method: str, params: Optional[Union[Mapping[str, Any], Sequence[Any]]] = None) -> None:
        """Send a JSON-RPC notification (no id; the daemon never answers it)."""
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    # ------------------------------------------------------------------ protocol methods
    def ping(self) -> str:
        """``ping`` -> ``"pong"``."""
        return self._call("ping")

    def status(self) -> Dict[str, Any]:
        """``getStatus``: version, pid, uptimeSeconds, connections, jobs counts, logging."""
        return self._call("getStatus")

    get_status = status

    def cancel(self, job_id: str) -> bool:
        """``cancel``: True when the job was queued, running or waiting to retry (its own
        call then raises Cancelled with ``by == "cancel"``); False when unknown or finished.
        Works for jobs of any connection."""
        return bool(self._call("cancel", {"jobId": job_id})["cancelled"])

    def get_job(self, job_id: str) -> Dict[str, Any]:
        """``getJob``: ``{"jobId", "state", "durable", "restarts"}`` of a live job, plus
        ``result`` or ``error`` once it has ended (the last 1,000 ended jobs are kept).
        An unknown id raises InvalidParams."""
        return self._call("getJob", {"jobId": job_id})

    def attach(self, job_id: str, *, on_progress: Optional[Callback] = None,
               on_retrying: Optional[Callback] = None, rpc_timeout: Optional[float] = None) -> Response:
        """``attach``: wait for a job of any connection (a detached or durable one whose
        client went away, say) and return its result, or raise its error, as its own request
        would. ``on_progress``/``on_retrying`` get its notifications from now on. An
        interrupted wait leaves the job running (use :meth:`cancel` to stop it)."""
        params = {"jobId": job_id, "progress": on_progress is not None or on_retrying is not None}
        return Response(self._call("attach", params, rpc_timeout=rpc_timeout, job_id=job_id,
                                   on_progress=on_progress, on_retrying=on_retrying, owns_job=False))

    def list_jobs(self) -> List[Dict[str, Any]]:
        """``listJobs``: the live jobs (jobId, method, url, state, attempt, sentBytes,
        receivedBytes, totalBytes, comment)."""
        return self._call("listJobs")["jobs"]

    def set_rate_limit(self, host: str, *, max_concurrent: Any = UNSET,
                       requests_per_second: Any = UNSET, burst: Any = UNSET) -> Dict[str, Any]:
        """``setRateLimit`` for ``host`` (``"name"``, ``"name:port"`` or ``"*"`` for the
        default). Arguments left out keep their value; None clears one. Returns the limit now
        in force."""
        params: Dict[str, Any] = {"host": host}
        for key, value in (("maxConcurrent", max_concurrent),
                           ("requestsPerSecond", requests_per_second), ("burst", burst)):
            if value is not UNSET:
                params[key] = value
        return self._call("setRateLimit", params)

    def get_rate_limits(self) -> List[Dict[str, Any]]:
        """``getRateLimits``: host, maxConcurrent, requestsPerSecond, burst, running, queued,
        pausedUntil (ISO 8601 or None) for each configured host."""
        return self._call("getRateLimits")["limits"]

    def set_auth(self, host: str, type: Optional[str], **fields: Any) -> Dict[str, Any]:
        """``setAuth``: the daemon adds this credential to every request for ``host``
        (``"name"``, ``"name:port"`` or ``"*.domain"``). ``type`` is ``"bearer"``, ``"basic"``,
        ``"oauth2"``, ``"helper"`` or ``"awsSigV4"``, with that type's fields as keywords in
        snake_case (``token=``, ``token_file=``, ``client_id=``, ``secret_access_key=`` ...);
        None removes the host's rule. Returns the rule as get_auth shows it (never the
        secret), or ``{"host", "removed"}``. Requests opt out with ``fetch(..., auth=False)``."""
        params: Dict[str, Any] = {"host": host, "type": type}
        params.update({camel(k): v for k, v in fields.items()})
        return self._call("setAuth", params)

    def get_auth(self) -> List[Dict[str, Any]]:
        """``getAuth``: host, type, hasCredential, expiresAt (ISO 8601 or None) and lastError
        of each rule, in the order set."""
        return self._call("getAuth")["rules"]

    def get_cookies(self, url: Optional[str] = None, *, domain: Optional[str] = None,
                    cookie_jar: Optional[str] = None) -> List[Dict[str, Any]]:
        """``getCookies``: with ``url``, exactly the cookies a request there would send."""
        params: Dict[str, Any] = {}
        put(params, "url", url)
        put(params, "domain", domain)
        put(params, "cookieJar", cookie_jar)
        return self._call("getCookies", params)["cookies"]

    def set_cookies(self, cookies: Iterable[Mapping[str, Any]], *,
                    cookie_jar: Optional[str] = None) -> int:
        """``setCookies``: each cookie needs ``name``, ``value`` and ``url`` or ``domain``
        (optional path, expires, secure, httpOnly...). Returns how many were stored."""
        params: Dict[str, Any] = {"cookies": [dict(c) for c in cookies]}
        put(params, "cookieJar", cookie_jar)
        return self._call("setCookies", params)["stored"]

    def clear_cookies(self, domain: Optional[str] = None, *,
                      cookie_jar: Optional[str] = None) -> int:
        """``clearCookies`` (all of the jar, or one domain's). Returns how many were removed."""
        params: Dict[str, Any] = {}
        put(params, "domain", domain)
        put(params, "cookieJar", cookie_jar)
        return self._call("clearCookies", params)["removed"]

    def set_logging(self, enabled: bool, *, directory: Optional[PathLike] = None,
                    bodies: Optional[bool] = None, max_body_bytes: Optional[int] = None,
                    redact: Optional[bool] = None) -> Dict[str, Any]:
        """``setLogging``: HAR files per finished job in ``directory`` (made absolute here).
        Returns ``{"enabled", "directory"}``."""
        params: Dict[str, Any] = {"enabled": enabled}
        if directory is not None:
            params["directory"] = os.path.abspath(os.fspath(directory))
        put(params, "bodies", bodies)
        put(params, "maxBodyBytes", max_body_bytes)
        put(params, "redact", redact)
        return self._call("setLogging", params)

    def get_logging(self) -> Dict[str, Any]:
        """``getLogging`` -> ``{"enabled", "directory"}``."""
        return self._call("getLogging")

    # ------------------------------------------------------------------ stubs
    def add_stub(self, match: Optional[Mapping[str, Any]] = None,
                 respond: Optional[Mapping[str, Any]] = None, *, set: Optional[str] = None,
                 respond_sequence: Optional[Sequence[Mapping[str, Any]]] = None,
                 fault: Optional[str] = None, priority: Optional[int] = None,
                 times: Optional[int] = None) -> str:
        """``addStub``: a canned answer for requests that name ``set`` (default
        ``"default"``) with ``stubs=``. ``match`` (method, url, urlPrefix, urlPattern, query,
        headers, bodyJson, bodyContains); exactly one of ``respond`` (status, headers, body,
        bodyBase64, json, bodyFile, delayMs), ``respond_sequence`` and ``fault`` ("reset",
        "timeout", "refused"). Returns the stub's id."""
        params: Dict[str, Any] = {}
        put(params, "set", set)
        put(params, "match", dict(match) if match is not None else None)
        put(params, "respond", dict(respond) if respond is not None else None)
        put(params, "respondSequence", [dict(r) for r in respond_sequence] if respond_sequence is not None else None)
        put(params, "fault", fault)
        put(params, "priority", priority)
        put(params, "times", times)
        return self._call("addStub", params)["stubId"]

    def remove_stubs(self, set: Optional[str] = None, stub_id: Optional[str] = None) -> int:
        """``removeStubs``: one stub, a set's, or (neither given) every stub. Returns how many."""
        params: Dict[str, Any] = {}
        put(params, "set", set)
        put(params, "stubId", stub_id)
        return self._call("removeStubs", params)["removed"]

    def get_stubs(self, set: Optional[str] = None) -> Dict[str, Any]:
        """``getStubs`` -> ``{"stubs": [{stubId, set, match, hits}], "misses": [{set, method,
        url, nearest}]}`` (the last 100 misses)."""
        params: Dict[str, Any] = {}
        put(params, "set", set)
        return self._call("getStubs", params)

    def set_stub_mode(self, set: str, on_miss: str) -> Dict[str, Any]:
        """``setStubMode``: ``on_miss`` is ``"error"`` (a miss raises TransportError with kind
        ``stubMiss``) or ``"network"``."""
        return self._call("setStubMode", {"set": set, "onMiss": on_miss})

    def load_stubs(self, set: str, har: PathLike) -> int:
        """``loadStubs``: a HAR file (made absolute here) as stubs of ``set``. Returns how many."""
        return self._call("loadStubs", {"set": set, "har": os.path.abspath(os.fspath(har))})["loaded"]

    def record_stubs(self, set: str, har: PathLike) -> Dict[str, Any]:
        """``recordStubs``: ``set``'s misses go to the network and are recorded, to the set and
        to the HAR file ``har`` (made absolute here)."""
        return self._call("recordStubs", {"set": set, "har": os.path.abspath(os.fspath(har))})

    def stub_set(self, prefix: str = "test") -> "StubSet":
        """A stub set of its own for one test, removed at exit::

            with client.stub_set() as stubs:
                stubs.add({"url": "https://api.example.com/v1/me"}, {"json": {"name": "ann"}})
                r = stubs.fetch("https://api.example.com/v1/me")
        """
        return StubSet(self, f"{prefix}-{uuid.uuid4().hex[:12]}")

    # ------------------------------------------------------------------ internals
    def _start(self, method: str, params: Dict[str, Any], on_progress: Optional[Callback],
               on_retrying: Optional[Callback], rpc_timeout: Optional[float],
               fds: Optional[Descriptors] = None) -> Response:
        return Response(self._job_call(method, params, on_progress, on_retrying, rpc_timeout, fds))

    def _job_params(self, params: Dict[str, Any], on_progress: Optional[Callback],
                    on_retrying: Optional[Callback]) -> str:
        # A job id made here lets the client route this job's notifications and cancel the
        # job when the caller is interrupted (Ctrl-C, rpc_timeout, a callback raising).
        self.defaults.apply(params)
        params.setdefault("jobId", f"py-{uuid.uuid4().hex[:16]}")
        if on_progress is not None or on_retrying is not None:
            params.setdefault("progress", True)
        return str(params["jobId"])

    def _job_call(self, method: str, params: Dict[str, Any], on_progress: Optional[Callback],
                  on_retrying: Optional[Callback], rpc_timeout: Optional[float],
                  fds: Optional[Descriptors] = None) -> Json:
        job_id = self._job_params(params, on_progress, on_retrying)
        if fds is None:
            return self._call(method, params, rpc_timeout=rpc_timeout, job_id=job_id,
                              on_progress=on_progress, on_retrying=on_retrying)
        feeder = _Feeder(self, job_id, fds)
        try:
            result = self._call(method, params, rpc_timeout=rpc_timeout, job_id=job_id,
                                on_progress=on_progress, on_retrying=on_retrying, fds=fds,
                                sent=feeder.start)
        except RPCError as e:
            feeder.raise_error(e)
            raise
        finally:
            fds.close()
        feeder.raise_error(None)
        return result

    def _stream_connection(self, method: str, params: Dict[str, Any],
                           on_progress: Optional[Callback], on_retrying: Optional[Callback],
                           fds: Optional[Descriptors]) -> _Connection:
        """A streamed job started on a connection of its own."""
        job_id = self._job_params(params, on_progress, on_retrying)
        if self._closed_error is not None:
            raise self._closed_error
        core = StreamCore(job_id, on_progress, on_retrying)
        try:
            conn = _Connection(self.socket_path, self.connect_timeout, method, params,
                               fds.fds if fds is not None else (), core)
            if fds is not None:
                _Feeder(self, job_id, fds).start()
        finally:
            if fds is not None:
                fds.close()
        return conn

    def _start_stream(self, method: str, params: Dict[str, Any], text_lines: bool,
                      on_progress: Optional[Callback], on_retrying: Optional[Callback],
                      rpc_timeout: Optional[float], fds: Optional[Descriptors]) -> Response:
        conn = self._stream_connection(method, params, on_progress, on_retrying, fds)
        return StreamingResponse._open(conn, text_lines, str(params["responseBody"]),
                                       self.rpc_timeout if rpc_timeout is None else rpc_timeout)

    def stream(self, method: str, url: str, **kwargs: Any) -> StreamingResponse:
        """httpx's form: ``with client.stream("GET", url) as r:`` then ``r.iter_bytes()``,
        ``r.iter_text()``, ``r.iter_lines()`` (str), ``r.read()``. The same as
        ``request(method, url, stream=True, ...)``; leaving the block before the end cancels
        the job."""
        r = self.request(method, url, stream=True, _text_lines=True, **kwargs)
        assert isinstance(r, StreamingResponse)
        return r

    def events(self, url: str, method: Optional[str] = None, **kwargs: Any) -> EventStream:
        """Server-Sent Events from ``url`` (``responseBody: "events"``), parsed by the daemon,
        which reconnects when the connection drops::

            with client.events(url, json={"prompt": "hi", "stream": True}) as events:
                for ev in events:                  # ServerSentEvent: .event, .data, .id, .json()
                    print(ev.data, end="", flush=True)

        Takes request()'s keywords; POST when ``json``/``data`` is given, else GET. The request
        is sent now; see :class:`EventStream`."""
        kind, p, fds, on_progress, on_retrying, rpc_timeout = events_params(url, method, kwargs)
        conn = self._stream_connection(kind, p, on_progress, on_retrying, fds)
        limit = self.rpc_timeout if rpc_timeout is None else rpc_timeout
        return EventStream(lambda: StreamingResponse._open(conn, True, "events", limit))

    def _call(self, method: str, params: Any = None, *, rpc_timeout: Optional[float] = None,
              job_id: Optional[str] = None, on_progress: Optional[Callback] = None,
              on_retrying: Optional[Callback] = None, owns_job: bool = True,
              fds: Optional[Descriptors] = None, sent: Optional[Callable[[], None]] = None) -> Json:
        if threading.current_thread() is self._reader:
            raise RuntimeError("fetchd_client: a call from on_notification (the reader thread) "
                               "would wait forever; use notify() or another thread")
        call = _Call(next(self._ids), job_id, on_progress, on_retrying, owns_job)
        with self._lock:
            if self._closed_error is not None:
                raise self._closed_error
            self._calls[call.id] = call
            if job_id is not None and (on_progress or on_retrying):
                self._jobs[job_id] = call
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": call.id}
        if params is not None:
            msg["params"] = params
        try:
            self._send(msg, fds.fds if fds is not None else ())
            if sent is not None:
                sent()
            return self._wait(call, self.rpc_timeout if rpc_timeout is None else rpc_timeout)
        finally:
            with self._lock:
                self._calls.pop(call.id, None)
                if job_id is not None and self._jobs.get(job_id) is call:
                    del self._jobs[job_id]

    def _wait(self, call: _Call, rpc_timeout: Optional[float]) -> Json:
        deadline = None if rpc_timeout is None else time.monotonic() + rpc_timeout
        failure: Optional[BaseException] = None
        try:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout(f"no answer within {rpc_timeout}s")
                try:
                    kind, item = call.queue.get(timeout=left)
                except queue.Empty:
                    continue
                if kind == "answer":
                    if failure is not None:
                        raise failure
                    if "error" in item:
                        raise error_from_answer(item["error"])
                    return item.get("result")
                if kind == "closed":
                    raise item
                if failure is None:  # a notification for this call's job
                    cb = call.on_progress if item.get("method") == "progress" else call.on_retrying
                    if cb is not None:
                        try:
                            cb(item.get("params") or {})
                        except BaseException as e:  # stop the job, then re-raise
                            failure = e
                            if call.owns_job:
                                self._cancel_quietly(call.job_id)
        except BaseException as e:
            if e is not failure and not isinstance(e, (RPCError, ConnectionClosed)):
                # Interrupted (Ctrl-C) or timed out here: do not leave the job running.
                if call.owns_job:
                    self._cancel_quietly(call.job_id)
            raise

    def _cancel_quietly(self, job_id: Optional[str]) -> None:
        """Send cancel without waiting (its answer is dropped by the reader)."""
        if job_id is None:
            return
        try:
            self._send({"jsonrpc": "2.0", "method": "cancel", "params": {"jobId": job_id},
                        "id": f"cancel-{next(self._ids)}"})
        except FetchdError:
            pass

    def _send(self, msg: Dict[str, Any], fds: Sequence[int] = ()) -> None:
        data = encode(msg)
        with self._send_lock:
            if self._closed_error is not None:
                raise self._closed_error
            try:
                send_line(self._sock, data, fds)
            except OSError as e:
                raise ConnectionClosed(f"sending to fetchd failed: {e}") from e

    # -- the reader thread
    def _read_loop(self) -> None:
        buf = bytearray()
        scanned = 0
        reason = "the daemon closed the connection"
        try:
            while True:
                chunk = self._sock.recv(READ_CHUNK)
                if not chunk:
                    break
                buf += chunk
                start = 0
                while True:
                    nl = buf.find(b"\n", max(start, scanned))
                    if nl < 0:
                        break
                    line = bytes(buf[start:nl])
                    start = nl + 1
                    scanned = start
                    if line.strip():
                        self._dispatch_line(line)
                if start:
                    del buf[:start]
                scanned = len(buf)
        except OSError as e:
            reason = f"reading from fetchd failed: {e}"
        finally:
            self._fail_all(reason)

    def _dispatch_line(self, line: bytes) -> None:
        for m in messages(line):
            if "method" in m and "id" not in m:
                self._dispatch_notification(m)
            else:
                self._dispatch_answer(m)

    def _dispatch_answer(self, m: Dict[str, Any]) -> None:
        req_id = m.get("id")
        with self._lock:
            call = self._calls.get(req_id) if isinstance(req_id, int) else None
            if call is None and req_id is None and len(self._calls) == 1:
                # An error the daemon could not tie to an id (-32700, -32006): with a single
                # call outstanding it can only be that one's.
                call = next(iter(self._calls.values()))
        if call is not None:
            call.queue.put(("answer", m))
        elif req_id is None:
            log.warning("fetchd_client: unmatched answer: %s", _json.dumps(m)[:300])

    def _dispatch_notification(self, m: Dict[str, Any]) -> None:
        params = m.get("params")
        job_id = params.get("jobId") if isinstance(params, dict) else None
        with self._lock:
            call = self._jobs.get(job_id) if isinstance(job_id, str) else None
        if call is not None:
            call.queue.put(("note", m))
        elif self.on_notification is not None:
            try:
                self.on_notification(m)
            except Exception:
                log.exception("fetchd_client: on_notification raised")

    def _fail_all(self, reason: str) -> None:
        with self._lock:
            if self._closed_error is None:
                self._closed_error = ConnectionClosed(reason)
            err = self._closed_error
            calls = list(self._calls.values())
        for call in calls:
            call.queue.put(("closed", ConnectionClosed(err.message)))


class _Feeder:
    """Writes an iterator body into the pipe the daemon reads (a thread of its own). When the
    iterator raises, the job is cancelled before the pipe is closed (its end must not pass
    for the end of the body), and the call raises that exception."""

    def __init__(self, client: Client, job_id: str, fds: Descriptors):
        self.client = client
        self.job_id = job_id
        self.fds = fds
        self.error: Optional[BaseException] = None

    def start(self) -> None:
        self.fds.sent()
        if self.fds.source is None:
            return
        threading.Thread(target=feed, args=(self.fds.take_write_fd(), self.fds.source, self._failed),
                         name="fetchd-client-body", daemon=True).start()

    def _failed(self, e: BaseException) -> None:
        self.error = e
        try:
            self.client.cancel(self.job_id)
        except FetchdError:
            pass

    def raise_error(self, cause: Optional[BaseException]) -> None:
        if self.error is not None:
            raise self.error from cause


class StubSet:
    """A uniquely named stub set (see :meth:`Client.stub_set`): ``add`` stubs to it, make
    requests through it (``fetch``, ``download``, ``upload`` with ``stubs=name``); its stubs are
    removed when the ``with`` block ends."""

    def __init__(self, client: Client, name: str):
        self.client = client
        self.name = name

    def __enter__(self) -> "StubSet":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.client.closed:
            self.client.remove_stubs(set=self.name)

    def add(self, match: Optional[Mapping[str, Any]] = None,
            respond: Optional[Mapping[str, Any]] = None, **options: Any) -> str:
        """:meth:`Client.add_stub` in this set."""
        return self.client.add_stub(match, respond, set=self.name, **options)

    def on_miss(self, mode: str) -> None:
        self.client.set_stub_mode(self.name, mode)

    def stubs(self) -> List[Dict[str, Any]]:
        """This set's stubs with their ``hits``."""
        return self.client.get_stubs(self.name)["stubs"]

    def misses(self) -> List[Dict[str, Any]]:
        """This set's last misses, each with its ``nearest`` stub."""
        return self.client.get_stubs(self.name)["misses"]

    def fetch(self, url: str, **options: Any) -> Response:
        return self.client.fetch(url, stubs=self.name, **options)

    def download(self, url: str, path: PathLike, **options: Any) -> Response:
        return self.client.download(url, path, stubs=self.name, **options)

    def upload(self, url: str, files: Iterable[Union[PathLike, Mapping[str, Any]]] = (), **options: Any) -> Response:
        return self.client.upload(url, files, stubs=self.name, **options)


class Session(Client):
    """A :class:`Client` for code written against ``requests.Session`` or ``httpx.Client``:
    the same class, with its defaults given by keyword::

        with Session(base_url="https://api.example.com/v1", headers={"Accept": "application/json"},
                     params={"lang": "en"}, auth=("ann", "secret"), timeout=10) as s:
            r = s.get("/users", params={"page": 2})   # https://api.example.com/v1/users?lang=en&page=2
            r.raise_for_status()

    ``s.headers``, ``s.params`` (``s.defaults``) can be changed afterwards.
    """

    @property
    def headers(self) -> Any:
        """The default headers (a case-insensitive mapping; change it in place)."""
        return self.defaults.headers

    @property
    def params(self) -> Dict[str, Any]:
        """The default query parameters (change them in place)."""
        return self.defaults.params

    @property
    def base_url(self) -> Optional[str]:
        return self.defaults.base_url

    @base_url.setter
    def base_url(self, value: Optional[str]) -> None:
        self.defaults.base_url = value
