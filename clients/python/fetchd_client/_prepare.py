"""Turns requests/httpx-style keywords (params=, data=, files=, auth=, timeout=...) and a
client's defaults (base_url, headers, params) into the protocol's request model. Shared by
the synchronous Client and the AsyncClient; no I/O here."""
import base64
import json as _json
import logging
import os
from typing import (Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from ._body import has_descriptor, is_stream_body

__all__ = ["messages", "Defaults", "PathLike", "Callback", "UNSET", "camel", "put", "file_spec",
           "request_model", "requests_params"]

Callback = Callable[[Dict[str, Any]], None]
PathLike = Union[str, "os.PathLike[str]"]
HeadersArg = Optional[Mapping[str, Optional[str]]]
ParamsArg = Optional[Union[Mapping[str, Any], Sequence[Tuple[str, Any]]]]
TimeoutArg = Optional[Union[float, Tuple[Optional[float], Optional[float]]]]
AuthArg = Optional[Union[Tuple[str, str], bool]]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()
"""Marks an argument as "not given" where None has a meaning (a JSON ``null`` body, or
``set_rate_limit(..., requests_per_second=None)`` which clears the rate)."""


def messages(line: bytes) -> List[Dict[str, Any]]:
    """The JSON-RPC messages of one line from the daemon (a batch answer gives several);
    a line that is not JSON is logged and skipped."""
    try:
        msg = _json.loads(line)
    except ValueError:
        logging.getLogger("fetchd_client").warning(
            "fetchd_client: ignoring a line that is not JSON: %r", line[:200])
        return []
    return [m for m in (msg if isinstance(msg, list) else [msg]) if isinstance(m, dict)]


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def put(params: Dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value is not UNSET:
        params[key] = value


def _query_dict(params: ParamsArg) -> Dict[str, Any]:
    """requests' params: a mapping or a list of pairs; None values are left out, repeated
    names become lists (the protocol repeats a name for an array)."""
    out: Dict[str, Any] = {}
    if params is None:
        return out
    items: Iterable[Tuple[str, Any]] = params.items() if isinstance(params, Mapping) else params
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, tuple):
            v = list(v)
        if k in out:
            prev = out[k]
            out[k] = (prev if isinstance(prev, list) else [prev]) + (v if isinstance(v, list) else [v])
        else:
            out[k] = v
    return out


def _basic(user: str, password: str) -> str:
    token = base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")
    return f"Basic {token}"


class Defaults:
    """What a Client or Session adds to every HTTP request: ``base_url`` (relative URLs are
    joined to it as httpx does: ``base_url="https://api/v1"`` + ``"/users"`` ->
    ``https://api/v1/users``), ``headers`` (the request's own win; a request header set to
    None removes a default one), ``params`` (merged under the request's), ``auth`` (a
    ``(user, password)`` tuple for Basic) and ``timeout``."""

    def __init__(self, base_url: Optional[str] = None, headers: HeadersArg = None,
                 params: ParamsArg = None, auth: AuthArg = None, timeout: TimeoutArg = None):
        from .models import Headers  # models imports errors only; no cycle at import time
        self.base_url = base_url
        self.headers = Headers({k: v for k, v in (headers or {}).items() if v is not None})
        self.params: Dict[str, Any] = _query_dict(params)
        self.auth = auth
        self.timeout = timeout

    def join(self, url: str) -> str:
        if not self.base_url or "://" in url:
            return url
        if not url:
            return self.base_url
        return self.base_url.rstrip("/") + "/" + url.lstrip("/")

    def apply(self, p: Dict[str, Any]) -> Dict[str, Any]:
        """Adds the defaults to protocol params ``p`` (in place) and returns it."""
        p["url"] = self.join(p["url"])
        if self.params:
            merged = dict(self.params)
            merged.update(p.get("query") or {})
            p["query"] = merged
        given = p.get("headers") or {}
        lower = {k.lower() for k in given}
        if len(self.headers):
            headers: Dict[str, Any] = {k: v for k, v in self.headers.items() if k.lower() not in lower}
            headers.update(given)
            p["headers"] = headers
            lower = {k.lower() for k in headers}
        if isinstance(self.auth, tuple) and "authorization" not in lower and "auth" not in p:
            p.setdefault("headers", {})["Authorization"] = _basic(*self.auth)
        elif self.auth is False:
            p.setdefault("auth", False)
        if self.timeout is not None and "timeout" not in p and "connectTimeout" not in p:
            _put_timeout(p, self.timeout)
        return p


def _put_timeout(p: Dict[str, Any], timeout: TimeoutArg) -> None:
    if isinstance(timeout, tuple):
        connect, read = timeout
        put(p, "connectTimeout", connect)
        put(p, "timeout", read)
    else:
        put(p, "timeout", timeout)


def _as_path(obj: Any) -> Optional[str]:
    """The absolute path of an open regular file read from its start, else None: such a file
    is streamed from disk by the daemon instead of read here."""
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not os.path.isfile(name):
        return None
    try:
        if obj.tell() != 0:
            return None
    except (AttributeError, OSError, ValueError):
        return None
    return os.path.abspath(name)


def _content(value: Any, spec: Dict[str, Any]) -> None:
    """Puts a requests-style file value (a file object, bytes, str, a path) into spec."""
    if isinstance(value, os.PathLike):
        spec["path"] = os.path.abspath(os.fspath(value))
        return
    if hasattr(value, "read"):
        path = _as_path(value)
        if path is not None:
            spec["path"] = path
            return
        value = value.read()
    if isinstance(value, (bytes, bytearray, memoryview)):
        spec["contentBase64"] = base64.b64encode(bytes(value)).decode("ascii")
    else:
        spec["content"] = str(value)


def requests_files(files: Any) -> List[Dict[str, Any]]:
    """requests' ``files=``: ``{field: value}`` or ``[(field, value)]``; value is a file
    object, bytes, a str (the content), an ``os.PathLike`` (a path, streamed by the daemon),
    or a tuple ``(filename, value[, content_type[, headers]])``."""
    items = files.items() if isinstance(files, Mapping) else files
    out: List[Dict[str, Any]] = []
    for field, value in items:
        spec: Dict[str, Any] = {"field": field}
        if isinstance(value, tuple):
            filename = value[0]
            _content(value[1], spec)
            if filename is not None:
                spec["filename"] = filename
            if len(value) > 2 and value[2]:
                spec["mimetype"] = value[2]
        else:
            _content(value, spec)
            name = getattr(value, "name", None)
            if isinstance(name, str) and "filename" not in spec and "path" not in spec:
                spec["filename"] = os.path.basename(name)
        out.append(spec)
    return out


def file_spec(f: Union[PathLike, Mapping[str, Any]]) -> Dict[str, Any]:
    """upload()'s own file form: a path, or a dict of the protocol's fields in snake_case."""
    if not isinstance(f, Mapping):
        return {"path": os.path.abspath(os.fspath(f))}
    spec: Dict[str, Any] = {}
    for k, v in f.items():
        if v is None:
            continue
        key = camel(k)
        if key == "path":
            v = os.path.abspath(os.fspath(v))
        elif key == "content" and isinstance(v, (bytes, bytearray, memoryview)):
            key, v = "contentBase64", base64.b64encode(bytes(v)).decode("ascii")
        spec[key] = v
    return spec


def request_model(url: str, *, method: Optional[str] = None, headers: Any = None,
                  query: Any = None, json: Any = UNSET, form: Any = None, body: Any = None,
                  body_base64: Optional[str] = None, body_file: Optional[PathLike] = None,
                  timeout: Optional[float] = None, connect_timeout: Optional[float] = None,
                  retry: Any = None, max_redirects: Optional[int] = None, cookie_jar: Any = None,
                  priority: Optional[int] = None, progress: Optional[bool] = None,
                  job_id: Optional[str] = None, detach: Optional[bool] = None,
                  comment: Optional[str] = None,
                  extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The protocol's request model from fetch()'s snake_case keywords."""
    p: Dict[str, Any] = {"url": url}
    put(p, "method", method)
    put(p, "headers", dict(headers) if headers is not None else None)
    put(p, "query", dict(query) if query is not None else None)
    if json is not UNSET:
        p["json"] = json
    put(p, "form", dict(form) if form is not None else None)
    if isinstance(body, (bytes, bytearray, memoryview)):
        p["bodyBase64"] = base64.b64encode(bytes(body)).decode("ascii")
    else:
        put(p, "body", body)
    put(p, "bodyBase64", body_base64)
    if body_file is not None:
        p["bodyFile"] = os.path.abspath(os.fspath(body_file))
    put(p, "timeout", timeout)
    put(p, "connectTimeout", connect_timeout)
    put(p, "retry", retry)
    put(p, "maxRedirects", max_redirects)
    put(p, "cookieJar", cookie_jar)
    put(p, "priority", priority)
    put(p, "progress", progress)
    put(p, "jobId", job_id)
    put(p, "detach", detach)
    put(p, "comment", comment)
    for k, v in (extra or {}).items():
        if v is not UNSET:
            p[camel(k)] = v
    return p


MODEL_KEYS = ("method", "headers", "query", "json", "form", "body", "body_base64", "body_file",
              "timeout", "connect_timeout", "retry", "max_redirects", "cookie_jar", "priority",
              "progress", "job_id", "detach", "comment")


def model_options(options: Dict[str, Any]) -> Dict[str, Any]:
    known = {k: options.pop(k) for k in list(options) if k in MODEL_KEYS}
    known["extra"] = options
    return known


def requests_params(method: str, url: str, *, params: ParamsArg = None, data: Any = None,
                    json: Any = UNSET, files: Any = None, headers: HeadersArg = None,
                    cookies: Optional[Mapping[str, str]] = None, auth: AuthArg = None,
                    timeout: TimeoutArg = None, allow_redirects: Optional[bool] = None,
                    follow_redirects: Optional[bool] = None, verify: Any = None,
                    cert: Any = None, proxy: Optional[Union[str, bool]] = None,
                    **options: Any) -> Tuple[str, Dict[str, Any], Any]:
    """(protocol method, params, stream body) for a requests-style call. ``files`` makes it
    an ``upload`` (multipart, ``data`` then gives the other form fields); everything else is
    a ``fetch``. Keywords not named here are fetch()'s (``retry=``, ``max_body_bytes=``,
    ``job_id=``...). The stream body is ``data`` when it must be read as it goes (a pipe, a
    socket, a file not at its start, an iterator or generator), else None: the caller hands
    it to the daemon with ``bodyFrom``."""
    hdrs: Dict[str, Optional[str]] = dict(headers or {})
    if cookies:
        hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    if isinstance(auth, tuple):
        hdrs["Authorization"] = _basic(*auth)
    elif auth is False:
        options["auth"] = False
    body: Dict[str, Any] = {}
    kind = "fetch"
    stream_body: Any = None
    if files is not None:
        kind = "upload"
        body["files"] = requests_files(files)
        if data is not None:
            body["fields"] = {k: str(v) for k, v in _query_dict(data).items()}
    elif data is not None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            body["body"] = bytes(data)
        elif isinstance(data, str):
            body["body"] = data
        elif hasattr(data, "read"):
            path = _as_path(data)
            if path is not None:
                body["body_file"] = path
            elif has_descriptor(data):
                stream_body = data
            else:
                body["body"] = data.read()
        elif is_stream_body(data) or (has_descriptor(data) and not isinstance(data, int)):
            stream_body = data
        else:
            body["form"] = _query_dict(data)
    if json is not UNSET:
        body["json"] = json
    if allow_redirects is False or follow_redirects is False:
        options.setdefault("max_redirects", 0)
    if verify is False:
        options["insecure"] = True
    elif isinstance(verify, (str, os.PathLike)):
        options["ca_file"] = os.path.abspath(os.fspath(verify))
    if isinstance(cert, tuple):
        options["cert_file"] = os.path.abspath(os.fspath(cert[0]))
        options["key_file"] = os.path.abspath(os.fspath(cert[1]))
    elif cert is not None:
        options["cert_file"] = os.path.abspath(os.fspath(cert))
    if proxy is not None:
        options["proxy"] = proxy
    m = method.upper()
    files_part: Dict[str, Any] = {k: body.pop(k) for k in ("files", "fields") if k in body}
    p = request_model(url, method=m if (kind == "fetch" or m != "POST") else None,
                      headers=hdrs or None, query=_query_dict(params) or None,
                      **body, **model_options(options))
    p.update(files_part)
    if timeout is not None:
        p.pop("timeout", None)
        _put_timeout(p, timeout)
    return kind, p, stream_body
