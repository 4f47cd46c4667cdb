"""Response and Headers: the results of fetchd_client, shaped like requests' and httpx's.

A :class:`Response` is also the protocol's result object (a dict): ``r["elapsedMs"]``,
``r["attempts"]`` and every other field the daemon sends stay reachable by key.
"""
import base64
import datetime
import http
import json as _json
from typing import (Any, Dict, Iterable, Iterator, List, Mapping, MutableMapping, NamedTuple,
                    Optional, Tuple, Union)

from .errors import HTTPStatusError

__all__ = ["Headers", "Response", "RedirectHop"]


class Headers(MutableMapping[str, str]):
    """A case-insensitive mapping of header names to values (``r.headers["Content-Type"]``
    and ``r.headers["content-type"]`` are the same), like requests' CaseInsensitiveDict and
    httpx's Headers. Iteration gives the names as stored (the daemon sends lowercase ones).
    Repeated response headers arrive joined by ``", "`` (``set-cookie`` by ``"\\n"``)."""

    def __init__(self, data: Optional[Union[Mapping[str, str], Iterable[Tuple[str, str]]]] = None,
                 **kwargs: str):
        self._store: Dict[str, Tuple[str, str]] = {}
        if data is not None:
            self.update(data)
        if kwargs:
            self.update(kwargs)

    def __setitem__(self, key: str, value: str) -> None:
        self._store[key.lower()] = (key, value)

    def __getitem__(self, key: str) -> str:
        return self._store[key.lower()][1]

    def __delitem__(self, key: str) -> None:
        del self._store[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._store.values())

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._store

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            try:
                other_h = other if isinstance(other, Headers) else Headers(other)
            except (AttributeError, TypeError):
                return NotImplemented
            return {k: v for k, (_, v) in self._store.items()} == \
                {k: v for k, (_, v) in other_h._store.items()}
        return NotImplemented

    def get_list(self, key: str) -> List[str]:
        """The values of a repeated header, split as the daemon joined them."""
        value = self.get(key)
        if value is None:
            return []
        sep = "\n" if key.lower() == "set-cookie" else ", "
        return value.split(sep)

    def copy(self) -> "Headers":
        return Headers(dict(self.items()))

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"


class RedirectHop(NamedTuple):
    """One redirect the daemon followed. The daemon reports how many redirects there were
    (``redirects``), not each hop's URL or status, so both are None."""
    url: Optional[str] = None
    status_code: Optional[int] = None


class Response(Dict[str, Any]):
    """The result of a request: the protocol's result object (a dict, so ``r["status"]`` and
    ``r["elapsedMs"]`` work), with requests' and httpx's common surface.

    ``bool(r)`` is False for a 4xx or 5xx status, as in requests (an empty result dict is not
    what decides it). ``r.headers`` is a case-insensitive :class:`Headers`.
    """

    # -- requests / httpx surface
    @property
    def status_code(self) -> int:
        """The HTTP status of the last answer."""
        return int(self.get("status", 0))

    @property
    def status(self) -> int:
        """Same as :attr:`status_code` (the protocol's name)."""
        return self.status_code

    @property
    def ok(self) -> bool:
        """True unless the status is 4xx or 5xx (requests' rule: a 3xx left unfollowed with
        ``max_redirects=0`` is ok). Use :attr:`is_success` for "2xx"."""
        return self.status_code < 400

    @property
    def is_success(self) -> bool:
        """True for a 2xx status (httpx)."""
        return 200 <= self.status_code < 300

    @property
    def is_redirect(self) -> bool:
        """A 3xx answer with a Location header (one that was not followed)."""
        return 300 <= self.status_code < 400 and "location" in self.headers

    def __bool__(self) -> bool:
        return self.ok

    @property
    def reason(self) -> str:
        """The standard reason phrase of the status ("Not Found"); the daemon does not pass
        on the server's own phrase (HTTP/2 has none)."""
        try:
            return http.HTTPStatus(self.status_code).phrase
        except ValueError:
            return ""

    reason_phrase = reason

    @property
    def url(self) -> str:
        """The final URL, after redirects, with the query fetchd appended."""
        return str(self.get("url", ""))

    @property
    def headers(self) -> Headers:
        """Response headers, case-insensitive."""
        cached = self.__dict__.get("_headers")
        if cached is None:
            cached = Headers(self.get("headers") or {})
            self.__dict__["_headers"] = cached
        return cached

    def header(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """One header, by case-insensitive name."""
        return self.headers.get(name, default)

    @property
    def elapsed(self) -> datetime.timedelta:
        """From the request's arrival at the daemon to its answer, queueing and retries
        included (the protocol's ``elapsedMs``)."""
        return datetime.timedelta(milliseconds=float(self.get("elapsedMs") or 0))

    @property
    def history(self) -> List[RedirectHop]:
        """One :class:`RedirectHop` per redirect followed (``len(r.history)`` and
        ``if r.history:`` work as in requests; the hops' URLs are not known)."""
        return [RedirectHop() for _ in range(int(self.get("redirects") or 0))]

    @property
    def redirects(self) -> int:
        return int(self.get("redirects") or 0)

    @property
    def http_version(self) -> str:
        """``"HTTP/1.1"``, ``"HTTP/2"``... (httpx)."""
        return str(self.get("httpVersion", ""))

    @property
    def encoding(self) -> str:
        """Always ``"utf-8"``: text bodies arrive decoded as UTF-8 (others as bytes)."""
        return "utf-8"

    @property
    def content(self) -> bytes:
        """The body as bytes, whichever form the daemon sent (text, base64 or json).
        Empty for a download (the body is in the file)."""
        if "bodyBase64" in self:
            return base64.b64decode(self["bodyBase64"])
        if "body" in self:
            return str(self["body"]).encode("utf-8")
        if "json" in self:
            return _json.dumps(self["json"]).encode("utf-8")
        return b""

    @property
    def text(self) -> str:
        """The body as text (invalid UTF-8 replaced)."""
        if "body" in self:
            return str(self["body"])
        return self.content.decode("utf-8", errors="replace")

    def json(self, **kwargs: Any) -> Any:
        """The body parsed as JSON (already parsed when ``response_body="json"``). Raises
        ``json.JSONDecodeError`` (a ValueError) when it is not JSON."""
        if "json" in self and not kwargs:
            return self["json"]
        return _json.loads(self.content, **kwargs)

    def raise_for_status(self) -> "Response":
        """Raises :class:`HTTPStatusError` for a 4xx or 5xx status; returns the response
        otherwise (so ``c.get(url).raise_for_status().json()`` chains, as in httpx)."""
        code = self.status_code
        if code >= 400:
            kind = "Client Error" if code < 500 else "Server Error"
            raise HTTPStatusError(f"{code} {kind}: {self.reason} for url: {self.url}", self)
        return self

    # -- fetchd's own fields
    @property
    def job_id(self) -> str:
        return str(self.get("jobId", ""))

    @property
    def attempts(self) -> int:
        return int(self.get("attempts") or 0)

    @property
    def path(self) -> Optional[str]:
        """download: where the file landed."""
        return self.get("path")

    @property
    def failed_files(self) -> List[str]:
        """upload: the files left out because they could not be read (``skip_unreadable``)."""
        return list(self.get("failedFiles") or [])

    def __repr__(self) -> str:
        return f"<Response [{self.status_code}]>"
