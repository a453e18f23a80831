"""Find the run units under folders, cheaply: names, entry types, sizes and first bytes only.

A *unit* is what one :func:`curvediag.ingest.load_runs` call reads; it yields one or more runs
(a W&B CSV export can hold several). Rules, applied to each folder from the top down:

- **Trainer output folder** (``trainer_state.json``, ``training_args.bin`` or a
  ``checkpoint-N/`` holding a ``trainer_state.json``): one unit; its ``runs/`` (TensorBoard)
  and ``wandb/`` belong to it and are merged into the run, as ``load_run`` does.
- **W&B run folder** (a ``run-*.wandb`` log, ``wandb-history.jsonl``, ``wandb-summary.json``,
  or a ``files/`` folder holding one of the last two): one unit.
- **TensorBoard run folder** (event files in it, or Keras ``train/`` + ``validation/``
  writers under it): one unit (event files deeper down are read with it).
- a folder with both ``runs/`` and ``wandb/`` (a Trainer output folder before its first save):
  one unit.
- otherwise each **log file** in the folder is a unit (CSV/TSV/JSON Lines whose header looks like
  a training log, ``.json`` files with ``log_history`` or ``_wandb``, Parquet history dumps), and
  sub-folders are walked.

A unit folder is never descended into for other units, so no run is counted twice. Skipped
cheaply, without opening them: ``.git``, ``__pycache__``, ``.venv``, ``node_modules`` and other
tool folders, hidden entries, and every file that is not a log by name (checkpoints, weights,
images, archives...). Log files above a size cap become error units.

Symbolic links are followed after the tree itself has been walked; a link into a tree already
walked is a duplicate (such as ``wandb/latest-run``) and skipped, a link back to one of its own
ancestors is a *symlink loop* and becomes an error unit, like a broken link, a FIFO or socket
with a log's name, an unreadable folder or a file over the cap. Error units become error rows.
"""

# Discovery handles millions of entries as strings straight from os.scandir: os.path, not Path.
# ruff: noqa: PTH100, PTH118, PTH119, PTH120, PTH122, PTH123

from __future__ import annotations

import csv
import fnmatch
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from curvediag.batch._fs import Entry, FsspecFS, LocalFS, is_url, local_path_of
from curvediag.ingest.aliases import STEP_COLUMNS
from curvediag.ingest.csv_logs import table_log_delimiter
from curvediag.ingest.layouts import (
    CHECKPOINT_DIR,
    STATE_NAME,
    WANDB_LEGACY_FILES,
    WANDB_RUN_DIR,
    is_event_file,
)

__all__ = [
    "DEFAULT_MAX_FILE_SIZE",
    "IRRELEVANT_SUFFIXES",
    "SKIP_DIRS",
    "Discovery",
    "DiscoveryStats",
    "Unit",
    "discover",
    "matches",
]

#: Folders never walked (tool caches, virtual environments, VCS metadata).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        "node_modules",
        ".ipynb_checkpoints",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".hypothesis",
        ".cache",
        "site-packages",
        "dist-packages",
    }
)
#: Files skipped by extension without a system call (weights, checkpoints, media, archives).
IRRELEVANT_SUFFIXES = frozenset(
    {
        ".safetensors",
        ".bin",
        ".pt",
        ".pth",
        ".ckpt",
        ".h5",
        ".hdf5",
        ".onnx",
        ".gguf",
        ".ggml",
        ".npy",
        ".npz",
        ".pkl",
        ".pickle",
        ".msgpack",
        ".tflite",
        ".arrow",
        ".model",
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".webp",
        ".bmp",
        ".tif",
        ".tiff",
        ".svg",
        ".mp4",
        ".wav",
        ".mp3",
        ".flac",
        ".zip",
        ".tar",
        ".gz",
        ".tgz",
        ".bz2",
        ".xz",
        ".zst",
        ".7z",
    }
)
#: Log files larger than this become error units (``--max-file-size``).
DEFAULT_MAX_FILE_SIZE = 2 << 30

_TABLE_SUFFIXES = frozenset({".csv", ".tsv"})
_JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
_PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
#: ``.log`` counts only for a table: a Keras ``CSVLogger`` file (``training.log`` by default)
#: or a tab-separated ``step<TAB>loss`` log.
_LOG_SUFFIXES = _TABLE_SUFFIXES | _JSONL_SUFFIXES | _PARQUET_SUFFIXES | {".json", ".wandb", ".log"}
# what a run folder is: the same description the readers use
_STATE = STATE_NAME
_CHECKPOINT = CHECKPOINT_DIR
_WANDB_RUN_DIR = WANDB_RUN_DIR
_WANDB_FILES = WANDB_LEGACY_FILES
_KERAS_DIRS = frozenset(
    {"train", "training", "validation", "valid", "val", "eval", "evaluation", "test"}
)
#: Column names that make a CSV/JSON Lines file look like a training log.
_LOG_COLUMNS = frozenset({*STEP_COLUMNS, "epoch", "_runtime", "_timestamp", "wall time"})
_RUNS_TABLE = {"name", "state", "notes", "user", "tags", "created", "runtime", "sweep"}
_HEAD = 1 << 16
_KIND_PROBLEM = {
    "broken": "broken symbolic link (it points to nothing)",
    "loop": "symlink loop (the link resolves to itself)",
    "other": "not a regular file (a FIFO, socket or device): not read",
    "missing": "no such file or folder",
}


@dataclass(frozen=True)
class Unit:
    """One thing to read: a folder or file ``path`` (a URL for remote files).

    ``kind`` says why it is a unit (``hf-trainer``, ``wandb-run``, ``tensorboard``,
    ``output-folder``, ``file``, or ``error``); ``error`` is set for units that cannot be read
    (the message names the problem) and they become error rows without being opened.
    """

    path: str
    kind: str
    error: str = ""


@dataclass
class DiscoveryStats:
    """What discovery saw besides the units."""

    folders: int = 0
    units: int = 0
    error_units: int = 0
    not_logs: int = 0
    filtered: int = 0
    duplicates: int = 0


def _is_event_file(name: str) -> bool:
    return is_event_file(name)


def _suffix(name: str) -> str:
    return os.path.splitext(name)[1].lower()


def matches(path: str, rel: str, patterns: Iterable[str]) -> bool:
    """Whether a glob matches: patterns with ``/`` against the path (as written or relative to
    its root), others against each path component (``--exclude tmp`` skips every ``tmp/``)."""
    parts = [p for p in re.split(r"[\\/]", rel) if p]
    for pat in patterns:
        if "/" in pat:
            if fnmatch.fnmatchcase(path, pat) or fnmatch.fnmatchcase(rel, pat):
                return True
        elif any(fnmatch.fnmatchcase(p, pat) for p in parts):
            return True
    return False


def _looks_like_log_columns(cells: Iterable[str]) -> bool:
    low = [c.strip().strip('"').lower() for c in cells]
    if any(c in _LOG_COLUMNS or "loss" in c or " - " in c for c in low):
        return True
    return bool(low) and low[0] == "name" and len(_RUNS_TABLE & set(low[:12])) >= 3


def _header_looks_like_log(head: bytes, suffix: str) -> bool:
    if b"\x00" in head:
        return False
    text = head.decode("utf-8-sig", "replace")
    line = next(iter(text.splitlines()), "")  # "\n", "\r\n" or a bare "\r" ends it
    if suffix in _JSONL_SUFFIXES:
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            return False
        return isinstance(obj, dict) and _looks_like_log_columns(obj.keys())
    if suffix == ".log":
        # a console log is not a table: only a header of a step or epoch and a loss counts
        # (Keras' CSVLogger, comma-separated; a loop's step<TAB>loss table)
        return table_log_delimiter(line) is not None
    try:
        rows = list(csv.reader([line], delimiter="\t" if suffix == ".tsv" else ","))
    except csv.Error:
        return False
    return bool(rows) and _looks_like_log_columns(rows[0])


#: The first columns of the table ``curvediag batch`` writes: a batch run again over the same
#: tree must not read its own earlier output as a training log.
_BATCH_COLUMNS = ("path", "formats", "run_name", "steps", "train_loss_final")


def _is_batch_table(head: bytes) -> bool:
    line = head.split(b"\n", 1)[0].decode("utf-8-sig", "replace").strip()
    if line.startswith("{"):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            return False
        return isinstance(obj, dict) and tuple(obj)[: len(_BATCH_COLUMNS)] == _BATCH_COLUMNS
    cells = [c.strip().strip('"') for c in line.split(",")]
    return tuple(cells[: len(_BATCH_COLUMNS)]) == _BATCH_COLUMNS


def _is_batch_parquet(fs: LocalFS | FsspecFS, e: Entry) -> bool:
    """A Parquet file whose footer names the batch table's columns (read from its last bytes)."""
    if not fs.is_local:
        return False
    try:
        with open(e.path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - _HEAD))
            tail = fh.read(_HEAD)
    except OSError:
        return False
    return all(c.encode() in tail for c in ("top_finding", "eval_loss_best_step", "n_critical"))


@dataclass
class Discovery:
    """An iterable of :class:`Unit` for some roots (folders, files or URLs).

    Units come out in a deterministic order (each folder's entries sorted by name, depth first,
    symbolic links last). ``stats`` is filled as the iteration proceeds.
    """

    roots: list[str]
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    stats: DiscoveryStats = field(default_factory=DiscoveryStats)
    #: Absolute paths never read (the batch's own outputs and --reports folder).
    skip: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self._skip_names = frozenset(os.path.basename(p) for p in self.skip)

    def __iter__(self) -> Iterator[Unit]:
        for root in self.roots:
            before = (self.stats.units, self.stats.filtered)
            yield from self._root(root)
            if (self.stats.units, self.stats.filtered) == before:
                yield self._error(
                    root,
                    "no training logs found here (looked for trainer_state.json, checkpoint-N/, "
                    "TensorBoard event files, W&B run folders and CSV/JSON Lines logs)",
                )

    # ------------------------------------------------------------------------------------
    def _error(self, path: str, problem: str) -> Unit:
        self.stats.units += 1
        self.stats.error_units += 1
        return Unit(path, "error", problem)

    def _emit(self, path: str, rel: str, kind: str, problem: str = "") -> Iterator[Unit]:
        if (self.include and not matches(path, rel, self.include)) or (
            self.exclude and matches(path, rel, self.exclude)
        ):
            self.stats.filtered += 1
            return
        self.stats.units += 1
        if problem:
            self.stats.error_units += 1
        yield Unit(path, kind, problem)

    def _root(self, root: str) -> Iterator[Unit]:
        local = local_path_of(root)
        fs: LocalFS | FsspecFS
        if local is not None:
            fs, start = LocalFS(), local
            display_root = root if is_url(root) else os.path.normpath(root)
        else:
            try:
                fs = FsspecFS(root)
            except Exception as exc:  # missing extra, unknown protocol, no credentials...
                yield self._error(root, f"cannot open: {exc}")
                return
            start = display_root = fs.root_url
        try:
            entry = fs.entry(start)
        except OSError as exc:
            yield self._error(root, f"cannot read: {exc.strerror or exc}")
            return
        if entry.kind in _KIND_PROBLEM:
            yield self._error(root, _KIND_PROBLEM[entry.kind])
            return
        if entry.kind == "file":
            # a file named explicitly is always a unit: its reader says what is wrong with it
            yield from self._emit(
                root, os.path.basename(start), "file", self._file_problem(fs, entry)
            )
            return
        walked = [fs.realpath(start)]
        deferred: list[tuple[Entry, str]] = []
        yield from self._walk(fs, start, display_root, start, deferred)
        while deferred:
            link, rel = deferred.pop(0)
            yield from self._follow(fs, link, rel, display_root, start, walked, deferred)

    def _display(self, fs: LocalFS | FsspecFS, display_root: str, start: str, path: str) -> str:
        if not fs.is_local:
            return path
        rel = os.path.relpath(path, start)
        if rel == ".":
            return display_root
        if is_url(display_root):
            return display_root.rstrip("/") + "/" + rel.replace(os.sep, "/")
        return os.path.join(display_root, rel)

    def _rel(self, fs: LocalFS | FsspecFS, start: str, path: str) -> str:
        if fs.is_local:
            rel = os.path.relpath(path, start)
            return "" if rel == "." else rel.replace(os.sep, "/")
        return path[len(start) :].lstrip("/")

    def _walk(
        self,
        fs: LocalFS | FsspecFS,
        folder: str,
        display_root: str,
        start: str,
        deferred: list[tuple[Entry, str]],
    ) -> Iterator[Unit]:
        stack = [folder]
        while stack:
            current = stack.pop()
            shown = self._display(fs, display_root, start, current)
            rel = self._rel(fs, start, current)
            self.stats.folders += 1
            try:
                entries = fs.scan(current)
            except PermissionError:
                yield from self._emit(
                    shown, rel, "error", "permission denied: cannot list this folder"
                )
                continue
            except OSError as exc:
                yield from self._emit(
                    shown, rel, "error", f"cannot list this folder: {exc.strerror or exc}"
                )
                continue
            kind = self._classify(fs, current, entries)
            if kind is not None:
                yield from self._emit(shown, rel, kind, self._unit_problem(fs, current, entries))
                continue
            subdirs: list[str] = []
            for e in entries:
                if e.name.startswith(".") or (e.kind == "dir" and e.name in SKIP_DIRS):
                    continue
                e_rel = f"{rel}/{e.name}" if rel else e.name
                if (
                    e.name in self._skip_names
                    and fs.is_local
                    and os.path.abspath(e.path) in self.skip
                ):
                    self.stats.not_logs += 1  # this batch's own output
                    continue
                if self.exclude and matches(
                    self._display(fs, display_root, start, e.path), e_rel, self.exclude
                ):
                    self.stats.filtered += 1
                    continue
                if e.symlink and e.kind in ("dir", "file"):
                    deferred.append((e, e_rel))
                elif e.kind == "dir":
                    subdirs.append(e.path)
                else:
                    yield from self._file(
                        fs, e, self._display(fs, display_root, start, e.path), e_rel
                    )
            stack.extend(reversed(subdirs))

    def _follow(
        self,
        fs: LocalFS | FsspecFS,
        link: Entry,
        rel: str,
        display_root: str,
        start: str,
        walked: list[str],
        deferred: list[tuple[Entry, str]],
    ) -> Iterator[Unit]:
        shown = self._display(fs, display_root, start, link.path)
        target = fs.realpath(link.path)
        parent = fs.realpath(os.path.dirname(link.path))
        for w in walked:
            if target == w or target.startswith(w.rstrip(os.sep) + os.sep):
                if link.kind == "dir" and (
                    parent == target or parent.startswith(target.rstrip(os.sep) + os.sep)
                ):
                    yield from self._emit(
                        shown,
                        rel,
                        "error",
                        f"symlink loop: points back to its own ancestor {target}; not followed",
                    )
                else:
                    self.stats.duplicates += 1  # e.g. wandb/latest-run: read once, by its name
                return
        if link.kind == "dir" and fs.is_local:
            root = walked[0].rstrip(os.sep) + os.sep
            if not target.startswith(root):
                # a link out of the tree (to /, to $HOME...) would walk a whole file system
                yield from self._emit(
                    shown,
                    rel,
                    "error",
                    f"symlink to a folder outside the tree ({target}): not followed; "
                    "pass that folder itself to read it",
                )
                return
        walked.append(target)
        if link.kind == "file":
            yield from self._file(fs, link, shown, rel)
            return
        # walk the linked folder under the link's own name
        sub_deferred: list[tuple[Entry, str]] = []
        yield from self._walk(fs, link.path, display_root, start, sub_deferred)
        deferred.extend(sub_deferred)

    # ------------------------------------------------------------------------------------
    def _classify(self, fs: LocalFS | FsspecFS, folder: str, entries: list[Entry]) -> str | None:
        names = {e.name: e for e in entries}
        if _STATE in names or "training_args.bin" in names:
            return "hf-trainer"
        dirs = [e for e in entries if e.kind == "dir"]
        for e in dirs:
            if _CHECKPOINT.match(e.name) and fs.exists_file(fs.join(e.path, _STATE)):
                return "hf-trainer"
        if any(n in names for n in _WANDB_FILES) or any(
            n.startswith("run-") and n.endswith(".wandb") for n in names
        ):
            return "wandb-run"
        files = names.get("files")
        if (
            files is not None
            and files.kind == "dir"
            and (
                _WANDB_RUN_DIR.match(os.path.basename(folder.rstrip("/")))
                or any(fs.exists_file(fs.join(files.path, n)) for n in _WANDB_FILES)
            )
        ):
            return "wandb-run"
        if any(_is_event_file(n) for n in names):
            return "tensorboard"
        for e in dirs:
            if e.name.lower() in _KERAS_DIRS:
                try:
                    if any(_is_event_file(x.name) for x in fs.scan(e.path)):
                        return "tensorboard"
                except OSError:
                    continue
        run_dirs = names.get("runs")
        wandb_dir = names.get("wandb")
        if run_dirs and wandb_dir and run_dirs.kind == "dir" and wandb_dir.kind == "dir":
            return "output-folder"
        return None

    def _unit_problem(self, fs: LocalFS | FsspecFS, folder: str, entries: list[Entry]) -> str:
        """A problem that makes a Trainer folder's own state file unreadable (else "")."""
        state = next((e for e in entries if e.name == _STATE), None)
        if state is None:
            return ""
        if state.kind in _KIND_PROBLEM:
            return f"{_STATE}: {_KIND_PROBLEM[state.kind]}"
        if state.kind == "dir":
            return f"{_STATE} is a folder, not a file"
        if not fs.readable(state.path):
            return f"{_STATE}: permission denied"
        return ""

    def _file_problem(self, fs: LocalFS | FsspecFS, e: Entry) -> str:
        if e.kind in _KIND_PROBLEM:
            return _KIND_PROBLEM[e.kind]
        if not fs.readable(e.path):
            return "permission denied"
        size = fs.size(e)
        if size > self.max_file_size:
            return (
                f"skipped: {size / 2**30:.2f} GiB is over the size cap of "
                f"{self.max_file_size / 2**30:.2f} GiB (--max-file-size)"
            )
        return ""

    def _file(self, fs: LocalFS | FsspecFS, e: Entry, shown: str, rel: str) -> Iterator[Unit]:
        """A file inside a folder that is not itself a unit: a unit when it is a log."""
        suffix = _suffix(e.name)
        if suffix in IRRELEVANT_SUFFIXES or suffix not in _LOG_SUFFIXES:
            return
        if e.kind != "file":  # broken link, loop, FIFO... with a log's name
            yield from self._emit(shown, rel, "error", _KIND_PROBLEM.get(e.kind, "unreadable"))
            return
        if not fs.readable(e.path):
            yield from self._emit(shown, rel, "error", "permission denied")
            return
        if suffix != ".wandb" and suffix not in _PARQUET_SUFFIXES:
            head = fs.head(e.path, _HEAD)
            if suffix == ".json":
                is_log = b'"log_history"' in head or b'"_wandb"' in head
            else:
                is_log = not head.strip() or (
                    _header_looks_like_log(head, suffix) and not _is_batch_table(head)
                )
            if not is_log:
                self.stats.not_logs += 1
                return
        elif suffix in _PARQUET_SUFFIXES and _is_batch_parquet(fs, e):
            self.stats.not_logs += 1  # a table an earlier `curvediag batch` wrote here
            return
        yield from self._emit(shown, rel, "file", self._file_problem(fs, e))


def discover(
    paths: Iterable[str | os.PathLike[str]],
    *,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    skip: Iterable[str | os.PathLike[str]] = (),
) -> Discovery:
    """The run units under ``paths`` (folders, files, ``file://`` or fsspec URLs).

    Args:
        paths: Where to look.
        include: Keep only units whose path matches one of these globs.
        exclude: Skip units and folders matching one of these globs.
        max_file_size: Log files larger than this (bytes) become error units.
        skip: Files and folders never read (local paths), e.g. the batch's own outputs.

    Returns:
        A :class:`Discovery`: iterate it for the units; its ``stats`` count what was skipped.
    """
    return Discovery(
        roots=[os.fspath(p) for p in paths],
        include=tuple(include),
        exclude=tuple(exclude),
        max_file_size=max_file_size,
        skip=frozenset(os.path.abspath(os.fspath(p)) for p in skip),
    )
