"""The HTTP methods shared by Client (they return a Response) and AsyncClient (they return
an AsyncJob to await): fetch, request, get/post/put/patch/delete/head/options, download,
upload. Each builds the protocol's params and hands them to the client's ``_start``."""
import base64
import os
from typing import Any, Dict, Generic, Iterable, Mapping, Optional, Tuple, TypeVar, Union

from ._body import Descriptors
from ._prepare import (UNSET, AuthArg, Callback, HeadersArg, ParamsArg, PathLike, TimeoutArg,
                       file_spec, model_options, put, request_model, requests_params)

#: ``response_body`` values whose body arrives in notifications, as it comes.
STREAM_MODES = ("stream", "lines", "events")

__all__ = ["HTTPMethods"]

Json = Any
T = TypeVar("T")


class HTTPMethods(Generic[T]):
    """Mixin: every method sends one job and returns what ``_start`` makes of it."""

    def _start(self, method: str, params: Dict[str, Any], on_progress: Optional[Callback],
               on_retrying: Optional[Callback], rpc_timeout: Optional[float],
               fds: Optional[Descriptors] = None) -> T:
        raise NotImplementedError

    def _start_stream(self, method: str, params: Dict[str, Any], text_lines: bool,
                      on_progress: Optional[Callback], on_retrying: Optional[Callback],
                      rpc_timeout: Optional[float], fds: Optional[Descriptors]) -> T:
        """Like _start, for ``params["responseBody"]`` in STREAM_MODES: the job on a
        connection of its own, answered with a streaming response once the head is final."""
        raise NotImplementedError

    def fetch(self, url: str, *, method: Optional[str] = None,
              headers: Optional[Mapping[str, str]] = None,
              query: Optional[Mapping[str, Any]] = None, json: Json = UNSET,
              form: Optional[Mapping[str, Any]] = None,
              body: Optional[Union[str, bytes, bytearray]] = None,
              body_base64: Optional[str] = None, body_file: Optional[PathLike] = None,
              timeout: Optional[float] = None, connect_timeout: Optional[float] = None,
              retry: Optional[Union[bool, Mapping[str, Any]]] = None,
              max_redirects: Optional[int] = None,
              cookie_jar: Optional[Union[str, bool]] = None, priority: Optional[int] = None,
              progress: Optional[bool] = None, job_id: Optional[str] = None,
              detach: Optional[bool] = None, comment: Optional[str] = None,
              response_body: Optional[str] = None, max_body_bytes: Optional[int] = None,
              to: Any = None, body_from: Any = None,
              on_progress: Optional[Callback] = None, on_retrying: Optional[Callback] = None,
              rpc_timeout: Optional[float] = None, **extra: Any) -> T:
        """``fetch``: one HTTP request; returns a :class:`Response` (any status, 404 included).

        Body (at most one): ``json`` (any JSON value, None sends ``null``), ``form`` (urlencoded),
        ``body`` (str as UTF-8; bytes are sent as ``bodyBase64``), ``body_base64``, or
        ``body_file`` (a path, made absolute here). ``timeout``/``connect_timeout`` are seconds
        per attempt; ``retry`` is True/False or ``{"maxAttempts", "maxInterval", "statuses"}``;
        ``cookie_jar=False`` sends and keeps no cookies. ``response_body``: ``"auto"``,
        ``"text"``, ``"base64"``, ``"json"`` or ``"none"``; ``"stream"`` or ``"lines"`` return
        a streaming response as soon as the head is final (see ``stream=True`` of
        :meth:`request`; for ``"events"`` use :meth:`events`).

        ``to``: the response body is written by the daemon into this file object, descriptor
        or path (opened ``"wb"`` here) as it arrives (``bodyTo``); the result then has no
        body, but ``bytes`` and ``sha256``. ``body_from``: the request body is read by the
        daemon from this file object, pipe, socket or descriptor until its end, or written
        here from an iterator or generator of bytes (``bodyFrom``).

        ``on_progress(params)`` gets every ``progress`` notification of the job
        (``sentBytes``, ``totalSendBytes``, ``receivedBytes``, ``totalReceiveBytes``) and
        ``on_retrying(params)`` every ``retrying`` one (``attempt``, ``delayMs``, ``reason``);
        they run in this thread before fetch returns. Giving one sets ``progress``. Without
        ``job_id`` the client makes one (``py-<hex>``), so that it can cancel the job when the
        wait is interrupted (Ctrl-C, ``rpc_timeout``, a callback raising).

        Other keyword arguments are sent too, their names turned to camelCase
        (``foo_bar=1`` -> ``"fooBar": 1``), so newer protocol fields need no new client.

        Raises TransportError (``.kind``), Cancelled (``.by``), InvalidParams (``.field``),
        NotAllowed, FileError, Overloaded, ConnectionClosed, Timeout.
        """
        params = request_model(url, method=method, headers=headers, query=query, json=json,
                                form=form, body=body, body_base64=body_base64,
                                body_file=body_file, timeout=timeout,
                                connect_timeout=connect_timeout, retry=retry,
                                max_redirects=max_redirects, cookie_jar=cookie_jar,
                                priority=priority, progress=progress, job_id=job_id,
                                detach=detach, comment=comment, extra=extra)
        put(params, "responseBody", response_body)
        put(params, "maxBodyBytes", max_body_bytes)
        fds = Descriptors(params, body_from, to) if body_from is not None or to is not None else None
        if response_body in STREAM_MODES:
            return self._stream("fetch", params, True, on_progress, on_retrying, rpc_timeout, fds)
        return self._start("fetch", params, on_progress, on_retrying, rpc_timeout, fds)

    def _stream(self, method: str, params: Dict[str, Any], text_lines: bool,
                on_progress: Optional[Callback],
                on_retrying: Optional[Callback], rpc_timeout: Optional[float],
                fds: Optional[Descriptors]) -> T:
        if "bodyTo" in params:
            if fds is not None:
                fds.close()
            raise ValueError("a streamed body cannot also go to a descriptor (to=)")
        if params.get("responseBody") not in STREAM_MODES:
            params["responseBody"] = "stream"
        return self._start_stream(method, params, text_lines, on_progress, on_retrying,
                                  rpc_timeout, fds)

    # ------------------------------------------------------------------ requests / httpx style
    def request(self, method: str, url: str, *, params: ParamsArg = None, data: Any = None,
                json: Json = UNSET, files: Any = None, headers: HeadersArg = None,
                cookies: Optional[Mapping[str, str]] = None, auth: AuthArg = None,
                timeout: TimeoutArg = None, allow_redirects: Optional[bool] = None,
                follow_redirects: Optional[bool] = None, verify: Any = None, cert: Any = None,
                proxy: Optional[Union[str, bool]] = None, stream: bool = False, to: Any = None,
                progress: Optional[Callback] = None, on_progress: Optional[Callback] = None,
                on_retrying: Optional[Callback] = None, rpc_timeout: Optional[float] = None,
                **options: Any) -> T:
        """One HTTP request with requests' and httpx's keywords; returns a :class:`Response`
        for any status (``r.raise_for_status()`` raises for 4xx/5xx).

        ``params``: query (mapping or pairs; lists repeat a name). ``data``: a mapping or
        pairs (a urlencoded form), ``bytes``/``str`` (the body), or a file object (a regular
        file is streamed from disk by the daemon). ``json``: any JSON value. ``files``: as
        requests takes them (``{"field": open("a.pdf", "rb")}``, ``{"f": ("name.txt", b"..",
        "text/plain")}``, or pairs); with ``files`` the request is a multipart ``upload``
        and ``data`` gives the other fields. ``auth``: ``(user, password)`` for Basic, or
        False to turn off the daemon's auth rules for this request. ``timeout``: seconds per
        attempt, or ``(connect, read)``. ``allow_redirects``/``follow_redirects=False``:
        do not follow. ``verify=False`` / ``verify="ca.pem"``, ``cert="c.pem"`` or
        ``(cert, key)``, ``proxy="http://..."``. ``progress``/``on_progress``,
        ``on_retrying``: callbacks as for :meth:`fetch`. Other keywords are :meth:`fetch`'s
        (``retry=``, ``max_body_bytes=``, ``job_id=``, ``response_body=``...).

        ``stream=True``: the response comes back as soon as its head is final, and its body
        is read as it arrives (``iter_content``, ``iter_lines``, ``raw``...; see
        :class:`StreamingResponse`); close it, or use it in a ``with`` block. ``data`` may
        also be a pipe, a socket or an iterator / generator of bytes: the daemon reads it as
        it goes (chunked, or with Content-Length for a file). ``to``: the body goes into
        that file object, descriptor or path as it arrives, written by the daemon.
        """
        text_lines = bool(options.pop("_text_lines", False))
        kind, p, body_from = requests_params(method, url, params=params, data=data, json=json,
                                             files=files, headers=headers, cookies=cookies,
                                             auth=auth, timeout=timeout,
                                             allow_redirects=allow_redirects,
                                             follow_redirects=follow_redirects, verify=verify,
                                             cert=cert, proxy=proxy, **options)
        fds = Descriptors(p, body_from, to) if body_from is not None or to is not None else None
        on_progress = progress or on_progress
        if stream or p.get("responseBody") in STREAM_MODES:
            return self._stream(kind, p, text_lines, on_progress, on_retrying, rpc_timeout, fds)
        return self._start(kind, p, on_progress, on_retrying, rpc_timeout, fds)

    def get(self, url: str, **kwargs: Any) -> T:
        """``request("GET", url, ...)``."""
        return self.request("GET", url, **kwargs)

    def head(self, url: str, **kwargs: Any) -> T:
        """``request("HEAD", url, ...)``."""
        return self.request("HEAD", url, **kwargs)

    def options(self, url: str, **kwargs: Any) -> T:
        """``request("OPTIONS", url, ...)``."""
        return self.request("OPTIONS", url, **kwargs)

    def post(self, url: str, data: Any = None, json: Json = UNSET, **kwargs: Any) -> T:
        """``request("POST", url, data=..., json=..., ...)``."""
        return self.request("POST", url, data=data, json=json, **kwargs)

    def put(self, url: str, data: Any = None, **kwargs: Any) -> T:
        """``request("PUT", url, data=..., ...)``."""
        return self.request("PUT", url, data=data, **kwargs)

    def patch(self, url: str, data: Any = None, **kwargs: Any) -> T:
        """``request("PATCH", url, data=..., ...)``."""
        return self.request("PATCH", url, data=data, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> T:
        """``request("DELETE", url, ...)``."""
        return self.request("DELETE", url, **kwargs)

    def download(self, url: str, path: PathLike, *, overwrite: Optional[bool] = None,
                 resume: Optional[bool] = None, sha256: Optional[str] = None,
                 durable: Optional[bool] = None, progress: Optional[Union[Callback, bool]] = None,
                 on_progress: Optional[Callback] = None, on_retrying: Optional[Callback] = None,
                 rpc_timeout: Optional[float] = None, **options: Any) -> T:
        """``download``: stream the body to ``path`` (made absolute here) through
        ``<path>.part``, renamed when complete and verified against ``sha256`` (hex) if given.
        ``overwrite`` (default False): an existing file otherwise raises FileError before any
        request. ``resume`` (default True) continues a ``.part`` file with Range.

        Returns the result without a body plus ``path``, ``bytes``, ``sha256``, ``resumed``;
        on a status outside 200-299 nothing is written and the result carries the status and
        up to 64 KiB of the body. The daemon streams the body to disk: memory use here does
        not depend on its size. ``progress``: a callback (as ``on_progress``), or a bool for
        the protocol's own field. ``options``: the request-model keywords of :meth:`fetch`,
        and ``params=``, ``auth=(user, password)``, ``timeout=(connect, read)`` as
        :meth:`request` takes them.
        """
        on_progress, options = _progress_option(progress, on_progress, options)
        params = request_model(url, **model_options(_requests_aliases(options)))
        params["path"] = os.path.abspath(os.fspath(path))
        put(params, "overwrite", overwrite)
        put(params, "resume", resume)
        put(params, "sha256", sha256)
        put(params, "durable", durable)
        return self._start("download", params, on_progress, on_retrying, rpc_timeout)

    def upload(self, url: str, files: Iterable[Union[PathLike, Mapping[str, Any]]] = (), *,
               fields: Optional[Mapping[str, str]] = None,
               skip_unreadable: Optional[bool] = None, durable: Optional[bool] = None,
               on_progress: Optional[Callback] = None, on_retrying: Optional[Callback] = None,
               rpc_timeout: Optional[float] = None, **options: Any) -> T:
        """``upload``: a multipart/form-data POST (unless ``method`` says otherwise) streamed
        from disk.

        ``files``: paths, or dicts with one of ``path`` / ``content`` (str, or bytes sent as
        base64) / ``content_base64``, and optional ``filename`` (default: the path's basename),
        ``mimetype`` (default: guessed from the extension) and ``field`` (default ``"file"``).
        ``fields``: extra form fields. A file that cannot be read raises FileError before
        anything is sent, unless ``skip_unreadable``: then it is left out and listed in
        ``Response.failed_files``. ``options``: the request-model keywords of :meth:`fetch`
        (not the body ones).
        """
        on_progress, options = _progress_option(options.pop("progress", None), on_progress, options)
        params = request_model(url, **model_options(_requests_aliases(options)))
        params["files"] = [file_spec(f) for f in files]
        put(params, "fields", dict(fields) if fields is not None else None)
        put(params, "skipUnreadable", skip_unreadable)
        put(params, "durable", durable)
        return self._start("upload", params, on_progress, on_retrying, rpc_timeout)


def _progress_option(progress: Any, on_progress: Optional[Callback],
                     options: Dict[str, Any]) -> Tuple[Optional[Callback], Dict[str, Any]]:
    """``progress=`` is a callback in the requests-style API, a bool in the protocol's."""
    if callable(progress):
        return progress, options
    if progress is not None:
        options["progress"] = progress
    return on_progress, options


def _requests_aliases(options: Dict[str, Any]) -> Dict[str, Any]:
    """download/upload also take request()'s params=, auth=(user, pass), timeout=(c, r),
    allow_redirects/follow_redirects."""
    if "params" in options:
        q = dict(options.pop("params") or {})
        q.update(options.get("query") or {})
        options["query"] = q
    auth = options.get("auth")
    if isinstance(auth, tuple):
        del options["auth"]
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode("ascii")
        options["headers"] = {"Authorization": f"Basic {token}", **dict(options.get("headers") or {})}
    timeout = options.get("timeout")
    if isinstance(timeout, tuple):
        options["connect_timeout"], options["timeout"] = timeout
    for key in ("allow_redirects", "follow_redirects"):
        if options.pop(key, None) is False:
            options.setdefault("max_redirects", 0)
    return options


def events_params(url: str, method: Optional[str],
                  options: Dict[str, Any]) -> Tuple[str, Dict[str, Any], Optional[Descriptors],
                                                    Optional[Callback], Optional[Callback],
                                                    Optional[float]]:
    """(protocol method, params, descriptors, on_progress, on_retrying, rpc_timeout) of
    ``events(url, ...)``: request()'s keywords; the method is POST when a body is given
    (an LLM API's ``json={...}``), else GET."""
    on_progress = options.pop("on_progress", None) or options.pop("progress", None)
    on_retrying = options.pop("on_retrying", None)
    rpc_timeout = options.pop("rpc_timeout", None)
    to = options.pop("to", None)
    if to is not None:
        raise ValueError("events cannot also go to a descriptor (to=)")
    has_body = any(options.get(k) not in (None, UNSET) for k in ("data", "json", "files"))
    kind, p, body_from = requests_params(method or ("POST" if has_body else "GET"), url, **options)
    fds = Descriptors(p, body_from) if body_from is not None else None
    p["responseBody"] = "events"
    return kind, p, fds, on_progress, on_retrying, rpc_timeout
