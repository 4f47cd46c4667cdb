"""Response and Headers: the results of fetchd_client, shaped like requests' and httpx's.

A :class:`Response` is also the protocol's result object (a dict): ``r["elapsedMs"]``,
``r["attempts"]`` and every other field the daemon sends stay reachable by key.
"""
import base64
import codecs
import datetime
import http
import io
import json as _json
from typing import (Any, AsyncIterator, Dict, Iterable, Iterator, List, Mapping, MutableMapping,
                    NamedTuple, Optional, Tuple, Union)

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


class _Rechunk:
    """Cuts a byte stream into pieces of ``size`` bytes (the last may be shorter); None: as
    they come."""

    def __init__(self, size: Optional[int]):
        if size is not None and size < 1:
            raise ValueError("chunk_size must be at least 1")
        self.size = size
        self.buf = bytearray()

    def feed(self, data: bytes) -> List[bytes]:
        if self.size is None:
            return [data] if data else []
        self.buf += data
        out = []
        while len(self.buf) >= self.size:
            out.append(bytes(self.buf[:self.size]))
            del self.buf[:self.size]
        return out

    def flush(self) -> List[bytes]:
        out = [bytes(self.buf)] if self.buf else []
        self.buf.clear()
        return out


class _Lines:
    """Splits a byte stream into lines: at ``delimiter``, else at LF with a CR before it
    removed; a last line without an ending comes out at the end."""

    def __init__(self, delimiter: Optional[bytes] = None):
        self.delimiter = delimiter
        self.pending = bytearray()

    def feed(self, data: bytes) -> List[bytes]:
        sep = self.delimiter or b"\n"
        if sep not in data and len(sep) == 1:
            self.pending += data
            return []
        self.pending += data
        parts = bytes(self.pending).split(sep)
        self.pending = bytearray(parts.pop())
        if self.delimiter is None:
            return [p[:-1] if p.endswith(b"\r") else p for p in parts]
        return parts

    def flush(self) -> List[bytes]:
        if not self.pending:
            return []
        last = bytes(self.pending)
        self.pending.clear()
        return [last[:-1] if self.delimiter is None and last.endswith(b"\r") else last]


class _Text:
    """Decodes a byte stream as UTF-8 (invalid bytes replaced), a character cut between two
    pieces included."""

    def __init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> List[str]:
        text = self.decoder.decode(data)
        return [text] if text else []

    def flush(self) -> List[str]:
        rest = self.decoder.decode(b"", final=True)
        return [rest] if rest else []


def _piece_bytes(piece: Any) -> bytes:
    """A body piece as bytes: bytes as they are, a line (``responseBody: "lines"``) with LF."""
    if isinstance(piece, (bytes, bytearray)):
        return bytes(piece)
    if isinstance(piece, str):
        return piece.encode("utf-8") + b"\n"
    return b""


class _RawBody(io.RawIOBase):
    """``Response.raw``: the body as a binary file object, read as it arrives."""

    def __init__(self, chunks: Iterator[bytes]):
        super().__init__()
        self._chunks = chunks
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            nxt = next(self._chunks, None)
            if nxt is None:
                return 0
            self._buf = nxt
        view = memoryview(b).cast("B")
        n = min(len(view), len(self._buf))
        view[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def read(self, amt: Optional[int] = None, decode_content: Any = None) -> bytes:
        """Up to ``amt`` bytes (fewer only at the end), or the rest; as urllib3's read."""
        if amt is None or amt < 0:
            return self.readall()
        out = bytearray()
        while len(out) < amt:
            piece = super().read(amt - len(out))
            if not piece:
                break
            out += piece
        return bytes(out)


class Response(Dict[str, Any]):
    """The result of a request: the protocol's result object (a dict, so ``r["status"]`` and
    ``r["elapsedMs"]`` work), with requests' and httpx's common surface.

    ``bool(r)`` is False for a 4xx or 5xx status, as in requests (an empty result dict is not
    what decides it). ``r.headers`` is a case-insensitive :class:`Headers`.

    The body can be read as a stream with requests' and httpx's methods (``iter_content``,
    ``iter_lines``, ``raw``, ``iter_bytes``, ``iter_text``, and ``aiter_*`` in asyncio): on a
    response that came whole they go over its content; on a :class:`StreamingResponse`
    (``stream=True``) over the body as it arrives.
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

    # -- the body as a stream (requests, httpx); StreamingResponse reads it as it arrives
    def _pieces(self) -> Iterator[Any]:
        content = self.content
        if content:
            yield content

    async def _apieces(self) -> AsyncIterator[Any]:
        for piece in self._pieces():
            yield piece

    def _body_mode(self) -> str:
        return "stream"

    def _lines_are_text(self) -> bool:
        return False

    def _byte_pieces(self) -> Iterator[bytes]:
        for piece in self._pieces():
            data = _piece_bytes(piece)
            if data:
                yield data

    def iter_bytes(self, chunk_size: Optional[int] = None) -> Iterator[bytes]:
        """The body in pieces of ``chunk_size`` bytes (None: as they arrive). httpx."""
        cut = _Rechunk(chunk_size)
        for data in self._byte_pieces():
            yield from cut.feed(data)
        yield from cut.flush()

    iter_raw = iter_bytes

    def iter_content(self, chunk_size: Optional[int] = 1,
                     decode_unicode: bool = False) -> Iterator[Any]:
        """requests' ``iter_content``: ``chunk_size`` bytes at a time (None: as they arrive),
        str with ``decode_unicode``."""
        if decode_unicode:
            return self.iter_text(chunk_size)
        return self.iter_bytes(chunk_size)

    def iter_text(self, chunk_size: Optional[int] = None) -> Iterator[str]:
        """The body decoded as UTF-8 (invalid bytes replaced), as it arrives."""
        text = _Text()
        for data in self.iter_bytes(chunk_size):
            yield from text.feed(data)
        yield from text.flush()

    def iter_lines(self, chunk_size: Optional[int] = None, decode_unicode: Optional[bool] = None,
                   delimiter: Optional[Union[bytes, str]] = None) -> Iterator[Any]:
        """The body line by line, without the line ends (LF, or CRLF). requests' form
        (``stream=True``, and responses that came whole) gives bytes unless
        ``decode_unicode``; httpx's (``client.stream(...)``) and ``response_body="lines"``
        give str. ``delimiter``: split there instead."""
        text = self._lines_are_text() if decode_unicode is None else decode_unicode
        if self._body_mode() == "lines" and delimiter is None:
            for piece in self._pieces():
                if isinstance(piece, str):
                    yield piece if text else piece.encode("utf-8")
            return
        sep = delimiter.encode("utf-8") if isinstance(delimiter, str) else delimiter
        lines = _Lines(sep)
        for data in self._byte_pieces():
            for line in lines.feed(data):
                yield line.decode("utf-8", errors="replace") if text else line
        for line in lines.flush():
            yield line.decode("utf-8", errors="replace") if text else line

    @property
    def raw(self) -> _RawBody:
        """The body as a binary file object (``r.raw.read(n)``,
        ``shutil.copyfileobj(r.raw, f)``), read as it arrives (requests)."""
        raw = self.__dict__.get("_raw")
        if raw is None:
            raw = _RawBody(self._byte_pieces())
            self.__dict__["_raw"] = raw
        return raw

    def read(self) -> bytes:
        """The whole body (httpx)."""
        return self.content

    def close(self) -> None:
        """Nothing to release for a body that came whole."""

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the same in asyncio (httpx's names)
    async def _abyte_pieces(self) -> AsyncIterator[bytes]:
        async for piece in self._apieces():
            data = _piece_bytes(piece)
            if data:
                yield data

    async def aiter_bytes(self, chunk_size: Optional[int] = None) -> AsyncIterator[bytes]:
        cut = _Rechunk(chunk_size)
        async for data in self._abyte_pieces():
            for piece in cut.feed(data):
                yield piece
        for piece in cut.flush():
            yield piece

    aiter_raw = aiter_bytes

    async def aiter_text(self, chunk_size: Optional[int] = None) -> AsyncIterator[str]:
        text = _Text()
        async for data in self.aiter_bytes(chunk_size):
            for piece in text.feed(data):
                yield piece
        for piece in text.flush():
            yield piece

    async def aiter_lines(self) -> AsyncIterator[str]:
        """The body line by line as str, without the line ends."""
        if self._body_mode() == "lines":
            async for piece in self._apieces():
                if isinstance(piece, str):
                    yield piece
            return
        lines = _Lines()
        async for data in self._abyte_pieces():
            for line in lines.feed(data):
                yield line.decode("utf-8", errors="replace")
        for line in lines.flush():
            yield line.decode("utf-8", errors="replace")

    async def aread(self) -> bytes:
        return self.content

    async def aclose(self) -> None:
        self.close()

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
