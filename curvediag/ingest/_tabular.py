"""Shared machinery of the tabular readers (W&B CSV/JSONL/summary, Lightning, TensorBoard CSV).

A file is turned into a :class:`Table`: one :class:`Column` per raw column, each a float64
array plus a ``present`` mask. An empty cell (or a key missing from a JSON row) is *absent*;
a ``NaN``/``Inf`` cell is *present* with a non-finite value (it is evidence); a non-numeric
cell (text, media dict, boolean) is absent. Every failure is raised as a curvediag error that
names the file; nothing from pandas or the codecs escapes.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from curvediag import normalize
from curvediag.errors import MalformedRunError
from curvediag.ingest._progress import listening, read_chunked, tell
from curvediag.model import Run, Series
from curvediag.normalize import (
    EVAL_SPLIT_WORDS,
    MAX_STEP,
    TRAIN_SPLIT_WORDS,
    OutOfRange,
    as_float,
    build_series,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Bytes read by ``sniff`` functions (the header line of a wide W&B export can be long).
SNIFF_BYTES = 1 << 18
_NAN_TOKENS = frozenset({"nan", "-nan", "+nan"})
_UNNAMED = re.compile(r"^Unnamed: \d+(_level_\d+)?$")
_SKIPPED_LINE = re.compile(r"Skipping line (\d+)")


@dataclass
class Column:
    """One raw column: values (NaN where absent) and which cells are present."""

    values: FloatArray
    present: BoolArray

    @property
    def count(self) -> int:
        return int(self.present.sum())


@dataclass
class Table:
    """Raw columns in file order, all of length ``nrows``."""

    nrows: int
    columns: dict[str, Column] = field(default_factory=dict)
    #: Every column name in file order (numeric or not).
    header: list[str] = field(default_factory=list)
    #: Raw names of the columns that held no numeric cell at all (text, media, booleans).
    non_numeric: list[str] = field(default_factory=list)
    #: Line numbers of CSV rows skipped for having more cells than the header.
    skipped_lines: list[int] = field(default_factory=list)

    def names(self) -> list[str]:
        return self.header or (list(self.columns) + self.non_numeric)


# --------------------------------------------------------------------------------------------
# Reading bytes and text
# --------------------------------------------------------------------------------------------
def read_bytes(path: Path) -> bytes:
    """The file's bytes; missing, unreadable, folder or empty -> MalformedRunError."""
    try:
        raw = read_chunked(path)
    except FileNotFoundError:
        raise MalformedRunError(path, "file not found") from None
    except PermissionError:
        raise MalformedRunError(path, "permission denied") from None
    except IsADirectoryError:
        raise MalformedRunError(path, "is a folder, not a file") from None
    except OSError as exc:
        raise MalformedRunError(path, f"cannot read file: {exc.strerror or exc}") from None
    if not raw.strip():
        raise MalformedRunError(path, "file is empty")
    return raw


#: The byte-order marks of UTF-16 text (Windows PowerShell's ``>`` and ``Tee-Object`` write
#: a console's output as UTF-16 LE with a BOM).
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _from_utf16(raw: bytes) -> bytes:
    """``raw`` as UTF-8 when it opens with a UTF-16 byte-order mark (a cut-off last character
    is replaced), else unchanged."""
    if raw.startswith(_UTF16_BOMS):
        return raw.decode("utf-16", "replace").encode("utf-8")
    return raw


def decode_text(path: Path, raw: bytes, what: str) -> str:
    """UTF-8 (or BOM-marked UTF-16) text of ``raw``, BOM removed; binary data ->
    MalformedRunError naming ``what``."""
    raw = _checked_text_bytes(path, raw, what)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MalformedRunError(
            path, f"not UTF-8 text (bad byte at offset {exc.start}): not a {what}"
        ) from None


def _checked_text_bytes(path: Path, raw: bytes, what: str) -> bytes:
    """``raw`` transcoded from UTF-16 when BOM-marked; binary data (NUL bytes) ->
    MalformedRunError naming ``what``."""
    raw = _from_utf16(raw)
    if b"\x00" in raw[:SNIFF_BYTES]:
        raise MalformedRunError(path, f"binary data (NUL bytes), not a {what}")
    return raw


def decode_console(path: Path, raw: bytes, what: str) -> tuple[str, str | None]:
    """Text of a console log, and a note when it was not UTF-8.

    A console captured on Windows is written in the system's code page: GBK on a Chinese
    machine, whose messages would otherwise make the whole log unreadable. Such a file is
    decoded as GB18030 (a superset of GBK); failing that, any byte that is not UTF-8 becomes
    U+FFFD, which never swallows the ASCII the numbers and names of a log are written in.
    Binary data (NUL bytes) is still refused."""
    raw = _checked_text_bytes(path, raw, what)
    try:
        return raw.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("gb18030"), "the log is not UTF-8: it was read as GBK (GB18030) text"
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        return text, "the log is not UTF-8: bytes that are not were read as U+FFFD"


def read_text(path: Path, what: str) -> str:
    return decode_text(path, read_bytes(path), what)


def head_bytes(path: Path, n: int = SNIFF_BYTES) -> bytes:
    """The first ``n`` bytes (of its UTF-8 transcoding when the file is BOM-marked UTF-16
    text), or b"" when the path is not a readable file (never raises)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(n)
            if head.startswith(_UTF16_BOMS):
                head = _from_utf16(head + fh.read(n))[:n]
            return head
    except (OSError, ValueError):
        return b""


def header_cells(path: Path) -> list[str]:
    """The cells of the first line of a CSV file (for sniffing; [] when unreadable)."""
    head = head_bytes(path)
    if not head or b"\x00" in head:
        return []
    text = head.decode("utf-8-sig", "replace")
    line, newline, _ = text.partition("\n")
    if not newline and len(head) >= SNIFF_BYTES:
        line = line.rsplit(",", 1)[0]  # a truncated very long header: drop the partial cell
    try:
        rows = list(csv.reader([line.rstrip("\r")]))
    except csv.Error:
        return []
    return [c.strip() for c in rows[0]] if rows else []


def first_json_line(path: Path) -> dict[str, Any] | None:
    """The first line of a JSON Lines file as a dict, or None (never raises)."""
    head = head_bytes(path, 1 << 16)
    if not head or b"\x00" in head:
        return None
    line = head.decode("utf-8-sig", "replace").split("\n", 1)[0].strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------
def is_media(v: Any) -> bool:
    return isinstance(v, dict) and isinstance(v.get("_type"), str)


def flatten(row: Mapping[str, Any], sep: str = "/") -> dict[str, Any]:
    """Flatten non-media dict values into ``sep``-joined keys (``{"a": {"b": 1}}`` -> a/b)."""
    out: dict[str, Any] = {}
    stack: list[tuple[str, Mapping[str, Any], int]] = [("", row, 0)]
    while stack:
        prefix, node, depth = stack.pop()
        for k, v in node.items():
            key = f"{prefix}{sep}{k}" if prefix else str(k)
            if isinstance(v, dict) and v and not is_media(v) and depth < 32:
                stack.append((key, v, depth + 1))
            else:
                out[key] = v
    return out


def is_unnamed(name: str) -> bool:
    """pandas' name for a column with an empty header (e.g. a DataFrame index)."""
    return not name.strip() or bool(_UNNAMED.match(name))


# --------------------------------------------------------------------------------------------
# CSV and JSON Lines -> Table
# --------------------------------------------------------------------------------------------
def parse_csv(path: Path, text: str, what: str, *, sep: str = ",") -> Table:
    """Parse CSV text into a :class:`Table` (pandas, imported lazily)."""
    import pandas as pd

    if text[:4096].lstrip()[:1] in {"{", "["}:
        raise MalformedRunError(path, f"looks like JSON, not a {what} (wrong file extension?)")
    tell(path, "parsing", len(text), len(text))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = pd.read_csv(
                io.StringIO(text),
                sep=sep,
                keep_default_na=False,
                na_values=[""],
                low_memory=False,
                skipinitialspace=True,
                on_bad_lines="warn",
            )
    except pd.errors.EmptyDataError:
        raise MalformedRunError(path, f"no header line: not a {what}") from None
    except Exception as exc:  # pandas raises many types (ParserError, ValueError, ...)
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MalformedRunError(path, f"not a readable {what} ({msg})") from None
    if len(df) == 0:
        cols = ", ".join(repr(str(c)) for c in list(df.columns)[:12])
        raise MalformedRunError(path, f"a header line ({cols}) but no data rows")
    table = dataframe_table(df)
    for w in caught:
        if issubclass(w.category, pd.errors.ParserWarning):
            table.skipped_lines += [int(n) for n in _SKIPPED_LINE.findall(str(w.message))]
    return table


def dataframe_table(df: Any) -> Table:
    """A pandas DataFrame (all columns) as a :class:`Table`."""
    import pandas as pd

    table = Table(nrows=len(df))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for i, name in enumerate(df.columns):
            key = str(name).strip()
            table.header.append(key)
            col = df.iloc[:, i]
            if pd.api.types.is_bool_dtype(col.dtype):
                table.non_numeric.append(key)
                continue
            if pd.api.types.is_numeric_dtype(col.dtype):
                values = col.to_numpy(dtype=np.float64, na_value=np.nan)
                present = ~col.isna().to_numpy(dtype=bool)
            else:
                absent = col.isna().to_numpy(dtype=bool)
                # a PyTorch tensor written with its repr, ``tensor(3.4634, device='cuda:0')``:
                # the number inside
                strs = col.astype(str).str.strip().str.replace(_TENSOR_REPR, r"\1", regex=True)
                values = pd.to_numeric(strs, errors="coerce").to_numpy(
                    dtype=np.float64, na_value=np.nan
                )
                nan_token = strs.str.lower().isin(_NAN_TOKENS).to_numpy(dtype=bool)
                present = ~absent & (~np.isnan(values) | nan_token)
                values = np.where(present, values, np.nan)
            if not present.any():
                table.non_numeric.append(key)
                continue
            if key in table.columns:  # duplicate header: keep the first
                continue
            table.columns[key] = Column(np.ascontiguousarray(values), present)
    return table


#: A one-element tensor's repr: ``tensor(3.4634)``, ``tensor(0.138, device='cuda:0')``,
#: ``tensor([2.5])``; group 1 is the number.
TENSOR_REPR = (
    r"\btensor\(\s*\[?\s*([-+0-9.eE]+|nan|-?inf)\s*\]?\s*(?:,[^()]*(?:\([^()]*\))?[^()]*)?\)"
)
#: ... as a whole cell.
_TENSOR_REPR = f"^{TENSOR_REPR}$"


def json_lines(path: Path, text: str, what: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Parse JSON Lines: (the object rows, warnings about skipped lines)."""
    rows: list[dict[str, Any]] = []
    bad: list[int] = []
    not_object = 0
    lines = text.splitlines()
    # progress: tell every ~1% of the lines, by their share of the text (when someone listens)
    every = max(len(lines) // 100, 1000) if listening() else len(lines) + 1
    size = len(text)
    for lineno, line in enumerate(lines, 1):
        if lineno % every == 0:
            tell(path, "decoding", size * lineno // len(lines), size)
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)  # accepts the bare NaN / Infinity tokens
        except (ValueError, RecursionError):
            bad.append(lineno)
            continue
        if isinstance(obj, dict):
            rows.append(obj)
        else:
            not_object += 1
    if not rows:
        first = f" (line {bad[0]} is not JSON)" if bad else ""
        raise MalformedRunError(path, f"no JSON object lines{first}: not a {what}")
    msgs = []
    if bad:
        last = bad[-1] == len(lines) or all(not x.strip() for x in lines[bad[-1] :])
        tail = "; the file looks truncated" if last and len(bad) == 1 else ""
        msgs.append(
            f"{path}: skipped {len(bad)} line(s) that are not valid JSON "
            f"(first: line {bad[0]}){tail}"
        )
    if not_object:
        msgs.append(f"{path}: skipped {not_object} line(s) that are not JSON objects")
    return rows, msgs


def rows_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    """JSON object rows (already flattened) as a :class:`Table`; non-numbers are absent."""
    cols: dict[str, tuple[list[int], list[float]]] = {}
    seen: dict[str, None] = {}
    n = 0
    for i, row in enumerate(rows):
        n = i + 1
        for key, v in row.items():
            seen.setdefault(key, None)
            num = as_float(v)
            if num is None:
                continue
            entry = cols.get(key)
            if entry is None:
                entry = cols[key] = ([], [])
            entry[0].append(i)
            entry[1].append(num)
    table = Table(nrows=n)
    table.header = list(seen)
    for key in seen:
        if key not in cols:
            table.non_numeric.append(key)
            continue
        idx, vals = cols[key]
        values = np.full(n, np.nan)
        present = np.zeros(n, dtype=bool)
        values[idx] = vals
        present[idx] = True
        table.columns[key] = Column(values, present)
    return table


# --------------------------------------------------------------------------------------------
# Steps, names, series
# --------------------------------------------------------------------------------------------
def to_steps(col: Column) -> tuple[IntArray, BoolArray, bool]:
    """(int steps, which rows have a usable step, whether all usable values are integers)."""
    with np.errstate(all="ignore"):
        ok = col.present & np.isfinite(col.values) & (np.abs(col.values) <= MAX_STEP)
        vals = col.values[ok]
        integral = bool(np.all(vals == np.floor(vals)))
        steps = np.zeros(col.values.size, dtype=np.int64)
        steps[ok] = vals.astype(np.int64)
    return steps, ok, integral


def find_column(table: Table, candidates: Iterable[str]) -> str | None:
    """The first candidate (case-insensitive) that is a numeric column of ``table``."""
    lower = {k.lower(): k for k in reversed(list(table.columns))}
    for c in candidates:
        if c.lower() in lower:
            return lower[c.lower()]
    return None


#: The words that name a namespace's split in a raw column name.
_SPLIT_NAMES = {"train": TRAIN_SPLIT_WORDS, "eval": EVAL_SPLIT_WORDS}


def assign_names(
    raws: list[str],
    namer: Callable[[str], str],
    counts: Mapping[str, int] | Mapping[str, tuple[int, int]],
    *,
    split_words: bool = True,
) -> tuple[dict[str, str], list[str]]:
    """Canonical name for each raw column, resolving collisions.

    When several raw columns map to one canonical name, the one spelled exactly like it wins,
    else (with ``split_words``) one whose name says its split, else the one with the most
    points (ties: the first). The others keep ``<namespace>/<raw>`` (or are dropped when that
    is taken too); a warning says so.
    """
    wanted: dict[str, list[str]] = {}
    for raw in raws:
        wanted.setdefault(namer(raw), []).append(raw)
    out: dict[str, str] = {}
    losers: list[tuple[str, str]] = []
    for name, group in wanted.items():
        if len(group) == 1:
            out[group[0]] = name
            continue
        exact = [r for r in group if r.lower() == name.lower()]
        # a name that says its split ("Training loss") over one that does not ("Epoch Loss",
        # a per-sample sum printed beside it)
        words = _SPLIT_NAMES.get(name.split("/", 1)[0], frozenset())
        named = [r for r in group if words & set(re.split(r"[^a-z]+", r.lower()))]
        if not split_words:
            named = []
        pool = named or group
        winner = exact[0] if exact else max(pool, key=lambda r: counts[r])
        out[winner] = name
        losers.extend((r, name) for r in group if r != winner)
    msgs = []
    taken = set(out.values())
    for raw, name in losers:
        ns = name.split("/", 1)[0] if "/" in name else "train"
        alt = raw if raw.split("/", 1)[0] in {"train", "eval", "system"} else f"{ns}/{raw}"
        winner = next(r for r, n in out.items() if n == name)
        if alt in taken:
            msgs.append(f"{raw!r} also maps to {name} (taken by {winner!r}); it is dropped")
            continue
        out[raw] = alt
        taken.add(alt)
        msgs.append(f"{raw!r} also maps to {name} (taken by {winner!r}); kept as {alt}")
    return out, msgs


def build_metrics(
    table: Table,
    names: Mapping[str, str],
    steps: IntArray,
    step_ok: BoolArray,
    wall: FloatArray | None = None,
    *,
    sort: bool = False,
    dropped: OutOfRange | None = None,
    step_col: Column | None = None,
) -> tuple[dict[str, Series], set[int]]:
    """One :class:`Series` per named column (rows without a usable step are left out).

    With ``sort`` the points are stably sorted by step first (for logs whose rows are not in
    step order by design, e.g. Lightning's epoch-end rows); otherwise a step going back is
    treated as a resume (the latest segment wins). ``dropped`` counts the values out of range
    and, given the ``step_col``, the rows whose step is there but unusable (``1e300``, ``inf``).
    """
    metrics: dict[str, Series] = {}
    restarts: set[int] = set()
    if dropped is not None and step_col is not None:
        lost = step_col.present & ~step_ok
        if lost.any():
            has_value = np.zeros(table.nrows, dtype=bool)
            for raw in names:
                has_value |= table.columns[raw].present
            dropped.steps += int((lost & has_value).sum())
    for raw, name in names.items():
        col = table.columns[raw]
        m = col.present & step_ok
        if not m.any():
            continue
        s, v = steps[m], col.values[m]
        w = None if wall is None else wall[m]
        if sort:
            order = np.argsort(s, kind="stable")
            s, v = s[order], v[order]
            w = None if w is None else w[order]
        series, r = build_series(name, s, v, w, dropped=dropped)
        metrics[name] = series
        restarts.update(r)
    return metrics, restarts


def wall_column(table: Table, candidates: Iterable[str]) -> FloatArray | None:
    name = find_column(table, candidates)
    if name is None:
        return None
    col = table.columns[name]
    return np.where(col.present, col.values, np.nan)


def finish_run(
    run: Run,
    restarts: set[int],
    *,
    dropped: OutOfRange | None = None,
    table: Table | None = None,
) -> Run:
    """Record resumes, dropped points and skipped lines, and pick the primary eval set
    (shared epilogue of every reader)."""
    if table is not None and table.skipped_lines:
        lines = table.skipped_lines
        run.warnings.append(
            f"skipped {len(lines)} CSV row(s) with more cells than the header "
            f"(line {', '.join(map(str, lines[:5]))}{', ...' if len(lines) > 5 else ''})"
        )
    return normalize.finish_run(run, restarts=restarts, dropped=dropped, infer_loss=True)


def describe_columns(table: Table, limit: int = 12) -> str:
    names = table.names()
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", ... ({len(names)} columns)" if len(names) > limit else "")


def finite_or_none(v: float) -> float | None:
    return v if math.isfinite(v) else None


@dataclass(frozen=True)
class TableReader:
    """One format: ``FORMAT``, ``sniff(path)``, ``read_all(path, aliases=)`` and ``read``.

    Has the same shape as a reader module (``FORMAT``, ``sniff``, ``read``), so it can be
    registered in :data:`curvediag.ingest.FORMATS` directly.
    """

    FORMAT: str
    sniff: Callable[[Path], bool]
    read_all: Callable[..., list[Run]]

    def read(self, path: str | Path, *, aliases: dict[str, str] | None = None) -> Run:
        """The file's run; for a file holding several runs, the first (with a warning)."""
        runs = self.read_all(Path(path), aliases=aliases)
        run = runs[0]
        if len(runs) > 1:
            others = ", ".join(r.name for r in runs[1:6]) + (", ..." if len(runs) > 6 else "")
            run.warnings.append(
                f"the file holds {len(runs)} runs; this is the first ({run.name!r}); "
                f"the others: {others}"
            )
        return run
