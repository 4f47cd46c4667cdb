"""Bodies that are descriptors (the protocol's ``bodyFrom: "fd"`` and ``bodyTo: "fd"``): a
file object, a pipe or a socket handed to the daemon with the request line (SCM_RIGHTS), and
an iterator or generator of bytes written into a pipe whose other end is handed over."""
import os
import stat
from typing import Any, Callable, List, Optional

__all__ = ["Descriptors", "is_stream_body", "has_descriptor", "chunk_bytes", "write_all", "feed"]


def has_descriptor(obj: Any) -> bool:
    """True for an int or an object whose ``fileno()`` works."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        return True
    fileno = getattr(obj, "fileno", None)
    if fileno is None:
        return False
    try:
        fileno()
    except (OSError, ValueError):   # io.UnsupportedOperation is both
        return False
    return True


def is_stream_body(obj: Any) -> bool:
    """An iterator or generator of bytes (or str) to send as the body, or an async one:
    anything iterable that is not bytes, str, a mapping, a list or a tuple (those are bodies
    or forms of their own)."""
    if isinstance(obj, (bytes, bytearray, memoryview, str, dict, list, tuple)):
        return False
    if hasattr(obj, "items"):
        return False
    return hasattr(obj, "__iter__") or hasattr(obj, "__aiter__")


class Descriptors:
    """The descriptors of one job, in the protocol's order (bodyFrom, then bodyTo), and what
    to do with them: ``params`` gets ``bodyFrom``/``bodyTo``/``bodySize``; the client sends
    ``fds`` with the request line, then calls :meth:`sent` (our copy of a pipe's read end is
    closed: the daemon has its own), feeds ``source`` into ``write_fd`` if there is one, and
    calls :meth:`close` at the end (files it opened itself)."""

    def __init__(self, params: dict, body_from: Any = None, to: Any = None):
        self.fds: List[int] = []
        self._sent_close: List[int] = []
        self._end_close: List[Any] = []
        self.source: Any = None
        self.write_fd: Optional[int] = None
        try:
            if body_from is not None:
                params["bodyFrom"] = "fd"
                self._body_from(params, body_from)
            if to is not None:
                params["bodyTo"] = "fd"
                self.fds.append(self._to_fd(to))
        except BaseException:
            self.close()
            raise

    def _body_from(self, params: dict, body: Any) -> None:
        if has_descriptor(body):
            fd = body if isinstance(body, int) else body.fileno()
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and not isinstance(body, int):
                # A buffered file object may have read ahead: the daemon starts where the
                # reader is, not where the descriptor's offset went.
                try:
                    pos = body.tell()
                    os.lseek(fd, pos, os.SEEK_SET)
                except (OSError, ValueError, AttributeError):
                    pos = os.lseek(fd, 0, os.SEEK_CUR)
                params.setdefault("bodySize", max(0, st.st_size - pos))
            self.fds.append(fd)
            return
        read_fd, write_fd = os.pipe()
        os.set_inheritable(read_fd, False)
        os.set_inheritable(write_fd, False)
        self.fds.append(read_fd)
        self._sent_close.append(read_fd)
        self.write_fd = write_fd
        self.source = body

    def _to_fd(self, to: Any) -> int:
        if isinstance(to, (str, os.PathLike)):
            f = open(os.fspath(to), "wb")
            self._end_close.append(f)
            return f.fileno()
        if isinstance(to, int) and not isinstance(to, bool):
            return to
        flush = getattr(to, "flush", None)
        if flush is not None:
            flush()
        return int(to.fileno())

    def sent(self) -> None:
        """After the request line went out: our copy of the pipe's read end is not needed."""
        for fd in self._sent_close:
            os.close(fd)
        self._sent_close.clear()

    def close(self) -> None:
        """Everything this object opened (the write end only if nobody took it)."""
        self.sent()
        if self.write_fd is not None:
            os.close(self.write_fd)
            self.write_fd = None
        for f in self._end_close:
            f.close()
        self._end_close.clear()

    def take_write_fd(self) -> int:
        """The pipe's write end, for the feeder (which closes it)."""
        fd = self.write_fd
        assert fd is not None
        self.write_fd = None
        return fd


def chunk_bytes(chunk: Any) -> bytes:
    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    return bytes(chunk)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def feed(fd: int, source: Any, on_error: Callable[[BaseException], None]) -> None:
    """Writes each chunk of ``source`` to ``fd`` (blocking), then closes it. The daemon
    stopping to read (the job ended) ends it quietly; ``source`` raising calls ``on_error``
    first (which cancels the job, so that the end of the pipe is not taken for the end of
    the body)."""
    try:
        for chunk in source:
            write_all(fd, chunk_bytes(chunk))
    except BrokenPipeError:
        pass
    except BaseException as e:
        on_error(e)
    finally:
        os.close(fd)
