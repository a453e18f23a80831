"""How far the reading of one file has got, told to whoever listens.

The readers call :func:`tell` as they go (bytes read, bytes decoded); nobody listens unless a
caller wraps the reading in :func:`listen` (the CLI does, to draw a progress bar on a terminal).
Calls are cheap when nobody listens, and the readers make them at most a few hundred times per
file, so the hook costs nothing measurable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

__all__ = ["CHUNK", "MIN_STEP", "Listener", "listen", "listening", "read_chunked", "tell"]

#: ``listener(path, phase, done, total)``: ``phase`` is ``"reading"`` (bytes read from disk),
#: ``"decoding"`` (bytes of the file decoded so far) or ``"parsing"`` (one call of a parser that
#: cannot report inside it: ``done`` and ``total`` are then the file's size).
Listener = Callable[[str, str, int, int], None]

#: Bytes per read when someone listens (small files are read in one go).
CHUNK = 16 << 20
#: The readers tell at most every 1% of a file and never more often than every MIN_STEP bytes.
MIN_STEP = 1 << 20

_listener: ContextVar[Listener | None] = ContextVar("curvediag_read_listener", default=None)


@contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Report the progress of every file read inside the ``with`` block to ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def listening() -> bool:
    return _listener.get() is not None


def tell(path: str | os.PathLike[str], phase: str, done: int, total: int) -> None:
    """Report progress on ``path`` (a no-op unless someone listens)."""
    listener = _listener.get()
    if listener is not None:
        listener(os.fspath(path), phase, done, total)


def read_chunked(path: Path) -> bytes:
    """``path.read_bytes()``, in chunks with progress when someone listens (OSError passes)."""
    if _listener.get() is None:
        return path.read_bytes()
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= CHUNK:
            data = fh.read()
            tell(path, "reading", len(data), len(data))
            return data
        chunks: list[bytes] = []
        done = 0
        tell(path, "reading", 0, size)
        while chunk := fh.read(CHUNK):
            chunks.append(chunk)
            done += len(chunk)
            tell(path, "reading", done, max(size, done))
    return b"".join(chunks)
