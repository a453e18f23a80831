"""The two file systems discovery walks: the local one (``os.scandir``) and fsspec URLs.

Discovery needs only names, entry types, sizes and the first bytes of a few files; both
implementations give exactly that. Readers work on local paths, so a run unit on a remote file
system is copied to a local temporary folder first (:func:`fetch_unit`), keeping only the files
some reader uses (never checkpoints or weights).
"""

# Discovery handles millions of entries as strings straight from os.scandir: os.path, not Path.
# ruff: noqa: PTH113, PTH114, PTH116, PTH118, PTH119, PTH122, PTH123

from __future__ import annotations

import errno
import importlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curvediag.errors import MissingDependencyError

__all__ = [
    "Entry",
    "FsspecFS",
    "LocalFS",
    "fetch_unit",
    "is_url",
    "local_path_of",
    "open_fs",
    "wanted_for_reading",
]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

#: File names and suffixes some reader uses (the only files copied from a remote unit).
_READER_NAMES = frozenset(
    {
        "trainer_state.json",
        "wandb-history.jsonl",
        "wandb-summary.json",
        "wandb-metadata.json",
        "config.yaml",
        "metrics.csv",
        "hparams.yaml",
    }
)
_READER_SUFFIXES = frozenset({".csv", ".tsv", ".jsonl", ".ndjson", ".parquet", ".pq", ".wandb"})


def is_url(path: str) -> bool:
    """True for ``scheme://...`` (``file://`` included)."""
    return bool(_URL.match(path))


def local_path_of(path: str) -> str | None:
    """The local path of a plain path or a ``file://`` URL; None for other URLs."""
    if not is_url(path):
        return path
    if path.lower().startswith("file://"):
        from urllib.parse import unquote, urlparse

        parsed = urlparse(path)
        return unquote(parsed.netloc + parsed.path) if parsed.netloc else unquote(parsed.path)
    return None


def wanted_for_reading(name: str) -> bool:
    """Whether a reader may use a file of this name (checkpoints, weights, images: no)."""
    return (
        name in _READER_NAMES
        or name.startswith("events.out.tfevents")
        or os.path.splitext(name)[1].lower() in _READER_SUFFIXES
    )


@dataclass(frozen=True)
class Entry:
    """One directory entry.

    ``kind`` is ``dir``, ``file`` (regular), ``other`` (FIFO, socket, device), ``broken`` (a
    symlink to nothing) or ``loop`` (a symlink that resolves to itself). ``key`` is the
    (st_dev, st_ino) of what a local symlink points to; ``size`` is -1 when not yet known.
    """

    name: str
    path: str
    kind: str
    symlink: bool = False
    size: int = -1
    key: tuple[int, int] | None = None


def _kind_of_mode(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


class LocalFS:
    """The local file system. Symlinks are reported, never silently followed."""

    is_local = True

    def entry(self, path: str) -> Entry:
        """The entry at ``path`` itself (a root given by the user)."""
        name = os.path.basename(os.path.normpath(path)) or path
        try:
            is_link = os.path.islink(path)
            st = os.stat(path)
        except FileNotFoundError:
            return Entry(name, path, "broken" if os.path.islink(path) else "missing", True)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return Entry(name, path, "loop", True)
            raise
        return Entry(name, path, _kind_of_mode(st.st_mode), is_link, st.st_size, _key(st))

    def scan(self, path: str) -> list[Entry]:
        """The entries of a folder, sorted by name. Raises OSError (e.g. PermissionError)."""
        out: list[Entry] = []
        with os.scandir(path) as it:
            for e in it:
                try:
                    link = e.is_symlink()
                    if not link:
                        if e.is_dir(follow_symlinks=False):
                            kind = "dir"
                        elif e.is_file(follow_symlinks=False):
                            kind = "file"
                        else:
                            kind = "other"
                        out.append(Entry(e.name, e.path, kind))
                        continue
                    try:
                        st = os.stat(e.path)
                    except FileNotFoundError:
                        out.append(Entry(e.name, e.path, "broken", True))
                        continue
                    except OSError as exc:
                        if exc.errno == errno.ELOOP:
                            out.append(Entry(e.name, e.path, "loop", True))
                            continue
                        raise
                    out.append(
                        Entry(e.name, e.path, _kind_of_mode(st.st_mode), True, st.st_size, _key(st))
                    )
                except OSError:
                    out.append(Entry(e.name, e.path, "other", False))
        out.sort(key=lambda x: x.name)
        return out

    def key(self, path: str) -> tuple[int, int] | None:
        try:
            return _key(os.stat(path))
        except OSError:
            return None

    def size(self, entry: Entry) -> int:
        if entry.size >= 0:
            return entry.size
        try:
            return os.stat(entry.path).st_size
        except OSError:
            return -1

    def head(self, path: str, n: int) -> bytes:
        """The first ``n`` bytes ("" when unreadable; never blocks on a FIFO: files only)."""
        try:
            with open(path, "rb") as fh:
                return fh.read(n)
        except (OSError, ValueError):
            return b""

    def readable(self, path: str) -> bool:
        return os.access(path, os.R_OK)

    def join(self, folder: str, name: str) -> str:
        return os.path.join(folder, name)

    def exists_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)


def _key(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def open_fs(url: str) -> tuple[Any, str]:
    """(fsspec file system, path inside it) for a URL; a clear error without fsspec."""
    try:
        url_to_fs = importlib.import_module("fsspec.core").url_to_fs
    except ImportError:
        raise MissingDependencyError(
            "fsspec", "remote", f"{url}: reading runs from a URL"
        ) from None
    fs, inner = url_to_fs(url)
    return fs, str(inner)


class FsspecFS:
    """A file system reached through fsspec (``s3://``, ``gs://``, ``memory://``, ...).

    Paths handed out are URLs built from the root as the user wrote it, so that they can be
    opened again (on another machine too).
    """

    is_local = False

    def __init__(self, root_url: str) -> None:
        self.fs, self.root_inner = open_fs(root_url)
        self.root_url = root_url.rstrip("/") or root_url

    def _inner(self, path: str) -> str:
        rel = path[len(self.root_url) :].lstrip("/")
        return self.root_inner.rstrip("/") + ("/" + rel if rel else "")

    def _url(self, inner: str) -> str:
        base = self.root_inner.rstrip("/")
        rel = inner[len(base) :].lstrip("/") if inner.startswith(base) else inner.lstrip("/")
        return self.root_url + ("/" + rel if rel else "")

    def entry(self, path: str) -> Entry:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        try:
            info = self.fs.info(self._inner(path))
        except FileNotFoundError:
            return Entry(name, path, "missing")
        kind = "dir" if info.get("type") == "directory" else "file"
        return Entry(name, path, kind, False, int(info.get("size") or 0))

    def scan(self, path: str) -> list[Entry]:
        out = []
        inner = self._inner(path)
        for info in self.fs.ls(inner, detail=True):
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            if not name or str(info["name"]).rstrip("/") == inner.rstrip("/"):
                continue
            kind = "dir" if info.get("type") == "directory" else "file"
            out.append(Entry(name, self.join(path, name), kind, False, int(info.get("size") or 0)))
        out.sort(key=lambda x: x.name)
        return out

    def key(self, path: str) -> tuple[int, int] | None:
        return None

    def size(self, entry: Entry) -> int:
        return entry.size

    def head(self, path: str, n: int) -> bytes:
        try:
            with self.fs.open(self._inner(path), "rb") as fh:
                data: bytes = fh.read(n)
                return data
        except (OSError, ValueError):
            return b""

    def readable(self, path: str) -> bool:
        return True

    def join(self, folder: str, name: str) -> str:
        return folder.rstrip("/") + "/" + name

    def exists_file(self, path: str) -> bool:
        try:
            return bool(self.fs.isfile(self._inner(path)))
        except OSError:
            return False

    def realpath(self, path: str) -> str:
        return path


def fetch_unit(url: str, dest: Path) -> Path:
    """Copy a remote run unit (a file, or the reader-relevant files of a folder) under ``dest``.

    Returns:
        The local path standing for ``url`` (same base name, so run names are kept).
    """
    fs, inner = open_fs(url)
    name = inner.rstrip("/").rsplit("/", 1)[-1] or "run"
    target = dest / name
    if not fs.isdir(inner):
        fs.get_file(inner, str(target))
        return target
    target.mkdir(parents=True, exist_ok=True)
    base = inner.rstrip("/")
    for remote, info in sorted(fs.find(base, detail=True, withdirs=False).items()):
        rel = str(remote)[len(base) :].lstrip("/")
        parts = rel.split("/")
        if not rel or not wanted_for_reading(parts[-1]) or info.get("type") == "directory":
            continue
        local = target.joinpath(*parts)
        local.parent.mkdir(parents=True, exist_ok=True)
        fs.get_file(str(remote), str(local))
    return target
