"""The batch table: one row per run, and its writers (CSV, Parquet, JSON Lines, markdown).

Every writer takes rows one at a time (``write``) and keeps nothing but what it must: the CSV
and JSON Lines writers write each row at once, the Parquet writer a row group of
:data:`PARQUET_ROW_GROUP` rows at a time, and the markdown summary only counts, the few worst
runs and the first errors. Memory therefore does not grow with the number of runs.

Columns (:data:`COLUMNS`):

============================  ============================================================
``path``                      the file or folder the run was read from (a URL when remote)
``formats``                   the formats read, ``+``-joined (``hf-trainer+tensorboard``)
``run_name``                  the run's name
``steps``                     the last step logged
``train_loss_final``          the last train loss logged (NaN when it ended on NaN)
``train_loss_min``            the lowest finite train loss
``eval_loss_best``            the lowest finite eval loss, and ``eval_loss_best_step``
``verdict``                   ``healthy``, ``inconclusive``, ``warning``, ``critical`` or ``error``
``top_finding``               the id of the most severe finding, and ``top_severity``
``findings``                  every finding id, most severe first, ``;``-joined
``n_critical`` ...            how many findings of each severity
``error``                     why the run could not be read or diagnosed ("" when it was)
============================  ============================================================
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import math
import os
import re
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from curvediag import escape
from curvediag.errors import MissingDependencyError

if TYPE_CHECKING:
    import pandas as pd

    from curvediag.model import Diagnosis

__all__ = [
    "COLUMNS",
    "FLOAT_COLUMNS",
    "FORMATS",
    "INT_COLUMNS",
    "BatchStats",
    "CsvWriter",
    "JsonlWriter",
    "MarkdownSummary",
    "ParquetWriter",
    "ReportDir",
    "Row",
    "TableWriter",
    "diagnosis_row",
    "error_row",
    "format_for",
    "open_writer",
    "read_table",
    "rows_frame",
]

Row = dict[str, Any]

COLUMNS: tuple[str, ...] = (
    "path",
    "formats",
    "run_name",
    "steps",
    "train_loss_final",
    "train_loss_min",
    "eval_loss_best",
    "eval_loss_best_step",
    "verdict",
    "top_finding",
    "top_severity",
    "findings",
    "n_critical",
    "n_warning",
    "n_info",
    "error",
)
FLOAT_COLUMNS = ("train_loss_final", "train_loss_min", "eval_loss_best")
INT_COLUMNS = ("steps", "eval_loss_best_step", "n_critical", "n_warning", "n_info")
STR_COLUMNS = tuple(c for c in COLUMNS if c not in FLOAT_COLUMNS and c not in INT_COLUMNS)
#: Output formats, and the file extensions that select them.
FORMATS = ("csv", "parquet", "jsonl", "markdown")
_EXTENSIONS = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".md": "markdown",
    ".markdown": "markdown",
}
PARQUET_ROW_GROUP = 4096
_VERDICT_RANK = {"critical": 3, "warning": 2, "error": 1, "healthy": 0}
_SEVERITIES = ("critical", "warning", "info")


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------
def error_row(path: str, message: str, *, formats: str = "", run_name: str = "") -> Row:
    """The row of a run (or unit) that could not be read or diagnosed."""
    row: Row = dict.fromkeys(COLUMNS, "")
    row.update(
        path=path,
        formats=formats,
        run_name=run_name,
        steps=None,
        train_loss_final=math.nan,
        train_loss_min=math.nan,
        eval_loss_best=math.nan,
        eval_loss_best_step=None,
        verdict="error",
        n_critical=0,
        n_warning=0,
        n_info=0,
        error=message or "unknown error",
    )
    return _clean(row)


def _clean(row: Row) -> Row:
    """Text cells made printable and one-line (escape.cell): a run name with a newline or an
    ANSI escape, a folder name that is not UTF-8, cannot break a table or a terminal."""
    for c in STR_COLUMNS:
        v = row.get(c)
        if isinstance(v, str):
            row[c] = escape.cell(v)
    return row


def diagnosis_row(path: str, d: Diagnosis) -> Row:
    """The row of a diagnosed run."""
    import numpy as np

    run = d.run
    final = low = best = math.nan
    best_step: int | None = None
    train = run.get("train/loss")
    if train is not None and len(train):
        final = float(train.values[-1])
        finite = train.values[np.isfinite(train.values)]
        if finite.size:
            low = float(finite.min())
    ev = run.get("eval/loss")
    if ev is not None and len(ev):
        ok = np.flatnonzero(np.isfinite(ev.values))
        if ok.size:
            i = int(ok[np.argmin(ev.values[ok])])
            best, best_step = float(ev.values[i]), int(ev.steps[i])
    counts = Counter(f.severity.value for f in d.findings)
    top = d.findings[0] if d.findings else None
    return _clean(
        {
            "path": path,
            "formats": run.format,
            "run_name": run.name,
            "steps": run.last_step,
            "train_loss_final": final,
            "train_loss_min": low,
            "eval_loss_best": best,
            "eval_loss_best_step": best_step,
            "verdict": d.verdict,
            "top_finding": top.rule_id if top else "",
            "top_severity": top.severity.value if top else "",
            "findings": ";".join(d.finding_ids),
            "n_critical": counts.get("critical", 0),
            "n_warning": counts.get("warning", 0),
            "n_info": counts.get("info", 0),
            "error": "",
        }
    )


def _stats_notes(stats: BatchStats) -> list[str]:
    """What the batch left out and how long it took, for the summary's first paragraph."""
    notes = []
    if stats.below_min_steps:
        notes.append(f"{stats.below_min_steps} run(s) below --min-steps left out")
    if stats.filtered:
        notes.append(f"{stats.filtered} path(s) left out by --include/--exclude")
    if stats.not_logs:
        notes.append(f"{stats.not_logs} CSV/JSON file(s) that are not training logs skipped")
    if stats.duplicates:
        notes.append(f"{stats.duplicates} symbolic link(s) to runs already read skipped")
    if stats.seconds:
        rate = stats.rows / stats.seconds if stats.seconds else 0.0
        notes.append(
            f"{stats.seconds:.1f} s with {stats.jobs} job(s) ({stats.engine}), {rate:.1f} runs/s"
        )
    return notes


def _finding_ids(row: Mapping[str, Any]) -> list[str]:
    text = row.get("findings") or ""
    return [f for f in str(text).split(";") if f]


# --------------------------------------------------------------------------------------------
# Statistics shown by the markdown summary
# --------------------------------------------------------------------------------------------
@dataclass
class BatchStats:
    """What a batch did, besides the rows (filled by the runner)."""

    units: int = 0
    rows: int = 0
    errors: int = 0
    below_min_steps: int = 0
    not_logs: int = 0
    filtered: int = 0
    duplicates: int = 0
    seconds: float = 0.0
    jobs: int = 1
    engine: str = "local"
    roots: list[str] = field(default_factory=list)
    #: The most severe finding over all runs: 2 critical, 1 warning, 0 info, -1 none.
    worst_rank: int = -1


# --------------------------------------------------------------------------------------------
# Writers
# --------------------------------------------------------------------------------------------
class TableWriter:
    """Base class: ``write(row)`` for each run, then ``close(stats)`` once."""

    format = ""
    #: The file written, when the writer opened one (discovery skips it: a batch run twice
    #: into the same tree must not read its own output).
    path: str | None = None

    def write(self, row: Row) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self, stats: BatchStats | None = None) -> None:
        """Flush and close (a stream the writer did not open is only flushed)."""


def _open_text(target: str | Path | IO[str] | None) -> tuple[IO[str], bool]:
    if target is None or target == "-":
        return sys.stdout, False
    if isinstance(target, (str, Path)):
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        return Path(target).open("w", encoding="utf-8", newline=""), True
    return target, False


def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)  # full precision; nan / inf / -inf
    return v


class CsvWriter(TableWriter):
    """CSV with a header line; floats at full precision (``nan``/``inf`` spelled out)."""

    format = "csv"

    def __init__(self, target: str | Path | IO[str] | None = None) -> None:
        self._fh, self._own = _open_text(target)
        self.path = os.fspath(target) if isinstance(target, (str, Path)) else None
        self._csv = csv.writer(self._fh, lineterminator="\n")
        self._csv.writerow(COLUMNS)

    def write(self, row: Row) -> None:
        self._csv.writerow([_csv_cell(row.get(c)) for c in COLUMNS])

    def close(self, stats: BatchStats | None = None) -> None:
        self._fh.flush()
        if self._own:
            self._fh.close()


def _json_cell(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


class JsonlWriter(TableWriter):
    """JSON Lines, one object per run; NaN/Infinity as the strings ``"NaN"``/``"Infinity"``."""

    format = "jsonl"

    def __init__(self, target: str | Path | IO[str] | None = None) -> None:
        self._fh, self._own = _open_text(target)
        self.path = os.fspath(target) if isinstance(target, (str, Path)) else None

    def write(self, row: Row) -> None:
        obj = {c: _json_cell(row.get(c)) for c in COLUMNS}
        self._fh.write(json.dumps(obj, allow_nan=False, ensure_ascii=False) + "\n")

    def close(self, stats: BatchStats | None = None) -> None:
        self._fh.flush()
        if self._own:
            self._fh.close()


def _pyarrow() -> Any:
    try:
        pa = importlib.import_module("pyarrow")
        importlib.import_module("pyarrow.parquet")  # makes pa.parquet available
    except ImportError:
        raise MissingDependencyError("pyarrow", "parquet", "writing a Parquet table") from None
    return pa


class ParquetWriter(TableWriter):
    """Parquet (needs ``pip install 'curvediag[parquet]'``), written a row group at a time."""

    format = "parquet"

    def __init__(self, target: str | Path) -> None:
        pa = _pyarrow()
        self._pa = pa
        fields = []
        for c in COLUMNS:
            t = (
                pa.float64()
                if c in FLOAT_COLUMNS
                else pa.int64()
                if c in INT_COLUMNS
                else pa.string()
            )
            fields.append(pa.field(c, t))
        self._schema = pa.schema(fields)
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        self.path = os.fspath(target)
        self._writer = pa.parquet.ParquetWriter(str(target), self._schema)
        self._buf: list[Row] = []

    def write(self, row: Row) -> None:
        self._buf.append(row)
        if len(self._buf) >= PARQUET_ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        cols = {c: [r.get(c) for r in self._buf] for c in COLUMNS}
        self._writer.write_table(self._pa.table(cols, schema=self._schema))
        self._buf.clear()

    def close(self, stats: BatchStats | None = None) -> None:
        if self._buf:
            self._flush()
        self._writer.close()


def _md(text: Any) -> str:
    """A markdown table cell: one line showing the text literally (no HTML, links, pipes)."""
    return escape.md_text(str(text).strip())


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


class MarkdownSummary(TableWriter):
    """A markdown report of the batch: verdicts, counts per finding and severity, worst runs
    first, and the errors. Keeps only counts and the few rows it shows."""

    format = "markdown"

    def __init__(
        self,
        target: str | Path | IO[str] | None = None,
        *,
        severity_of: Mapping[str, str] | None = None,
        worst: int = 25,
        errors: int = 25,
    ) -> None:
        self._target = target
        self.path = os.fspath(target) if isinstance(target, (str, Path)) else None
        self._severity_of = dict(severity_of or {})
        self._n_worst = worst
        self._n_errors = errors
        self.verdicts: Counter[str] = Counter()
        self.findings: Counter[str] = Counter()
        self.severity_findings: Counter[str] = Counter()
        self.severity_runs: Counter[str] = Counter()
        self.rows = 0
        self._worst: list[tuple[tuple[int, int, int], str, Row]] = []
        self._errors: list[Row] = []
        self.error_count = 0

    def write(self, row: Row) -> None:
        self.rows += 1
        verdict = str(row.get("verdict") or "")
        self.verdicts[verdict] += 1
        if verdict == "error":
            self.error_count += 1
            if len(self._errors) < self._n_errors:
                self._errors.append(row)
            return
        for fid in _finding_ids(row):
            self.findings[fid] += 1
        for sev in _SEVERITIES:
            n = int(row.get(f"n_{sev}") or 0)
            self.severity_findings[sev] += n
            if n:
                self.severity_runs[sev] += 1
        if verdict in ("critical", "warning"):
            score = (
                _VERDICT_RANK[verdict],
                int(row.get("n_critical") or 0),
                int(row.get("n_warning") or 0),
            )
            self._worst.append((score, str(row.get("path")), row))
            if len(self._worst) > 4 * self._n_worst:
                self._trim()

    def _trim(self) -> None:
        self._worst.sort(key=lambda t: (tuple(-x for x in t[0]), t[1]))
        del self._worst[self._n_worst :]

    def render(self, stats: BatchStats | None = None) -> str:
        self._trim()
        out = ["# curvediag batch summary", ""]
        parts = [f"{self.rows} run(s)"]
        for v in ("critical", "warning", "inconclusive", "healthy", "error"):
            parts.append(f"{self.verdicts.get(v, 0)} {v}")
        out.append(", ".join(parts[:1]) + ": " + ", ".join(parts[1:]) + ".")
        notes = _stats_notes(stats) if stats is not None else []
        if notes:
            text = "; ".join(notes)
            out += ["", text[:1].upper() + text[1:] + "."]
        out += ["", "## Verdicts", "", "| verdict | runs | share |", "|---|---:|---:|"]
        for v in ("critical", "warning", "inconclusive", "healthy", "error"):
            n = self.verdicts.get(v, 0)
            share = 100.0 * n / self.rows if self.rows else 0.0
            out.append(f"| {v} | {n} | {share:.1f}% |")
        out += ["", "## Findings by severity", ""]
        out += ["| severity | findings | runs with one or more |", "|---|---:|---:|"]
        for sev in _SEVERITIES:
            n_found, n_runs = self.severity_findings.get(sev, 0), self.severity_runs.get(sev, 0)
            out.append(f"| {sev} | {n_found} | {n_runs} |")
        out += self._findings_section() + self._worst_section() + self._errors_section()
        return "\n".join(out) + "\n"

    def _findings_section(self) -> list[str]:
        out = ["", "## Findings", ""]
        if not self.findings:
            return [*out, "No rule fired."]
        diagnosed = self.rows - self.error_count
        out += ["| finding | severity | runs | share of diagnosed runs |", "|---|---|---:|---:|"]
        rank = {"critical": 0, "warning": 1, "info": 2}
        order = sorted(
            self.findings.items(),
            key=lambda kv: (rank.get(self._severity_of.get(kv[0], ""), 3), -kv[1], kv[0]),
        )
        for fid, n in order:
            share = 100.0 * n / diagnosed if diagnosed else 0.0
            sev = self._severity_of.get(fid, "")
            out.append(f"| {_md(fid)} | {sev} | {n} | {share:.1f}% |")
        return out

    def _worst_section(self) -> list[str]:
        out = ["", "## Worst runs", ""]
        if not self._worst:
            return [*out, "No run has a warning or a critical finding."]
        out += [
            "| run | verdict | top finding | findings | steps | path |",
            "|---|---|---|---|---:|---|",
        ]
        for _, _, r in self._worst:
            out.append(
                f"| {_md(r.get('run_name'))} | {r.get('verdict')} | "
                f"{_md(r.get('top_finding'))} | {_md(', '.join(_finding_ids(r)))} | "
                f"{_fmt(r.get('steps'))} | {_md(r.get('path'))} |"
            )
        return out

    def _errors_section(self) -> list[str]:
        if not self.error_count:
            return []
        out = ["", "## Errors", "", "| path | error |", "|---|---|"]
        for r in self._errors:
            out.append(f"| {_md(r.get('path'))} | {_md(r.get('error'))} |")
        more = self.error_count - len(self._errors)
        if more > 0:
            out += ["", f"... and {more} more (the table's `error` column has them all)."]
        return out

    def close(self, stats: BatchStats | None = None) -> None:
        text = self.render(stats)
        fh, own = _open_text(self._target)
        try:
            fh.write(text)
            fh.flush()
        finally:
            if own:
                fh.close()


def format_for(target: str | None, fmt: str | None) -> str:
    """The format of an output: ``fmt`` when given, else from the extension, else markdown
    (stdout) or CSV (a file with an unknown extension).

    Raises:
        ValueError: Unknown format.
    """
    if fmt:
        if fmt not in FORMATS:
            raise ValueError(f"unknown table format {fmt!r} (known: {', '.join(FORMATS)})")
        return fmt
    if target in (None, "-"):
        return "markdown"
    return _EXTENSIONS.get(Path(str(target)).suffix.lower(), "csv")


def open_writer(
    target: str | Path | None,
    fmt: str | None = None,
    *,
    severity_of: Mapping[str, str] | None = None,
) -> TableWriter:
    """A writer for ``target`` (a path, or None / ``-`` for stdout).

    Raises:
        ValueError: Unknown format, or Parquet to stdout.
        MissingDependencyError: Parquet without pyarrow.
    """
    name = None if target is None else str(target)
    kind = format_for(name, fmt)
    if kind == "csv":
        return CsvWriter(name)
    if kind == "jsonl":
        return JsonlWriter(name)
    if kind == "markdown":
        return MarkdownSummary(name, severity_of=severity_of)
    if name in (None, "-"):
        raise ValueError("a Parquet table needs a file: -o table.parquet")
    return ParquetWriter(str(name))


class ReportDir:
    """``--reports DIR``: one markdown postmortem per run, named after its path."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.written = 0
        self._used: set[str] = set()

    @staticmethod
    def file_name(path: str, run_name: str = "", index: int = 0) -> str:
        """A file name unique per (path, run): the path's characters made safe."""
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", path.replace("://", "_").strip("/\\")).strip("_.")
        if run_name:
            slug += "--" + re.sub(r"[^A-Za-z0-9._-]+", "_", run_name).strip("_.")
        if index:
            slug += f"-{index + 1}"
        return (slug[-180:] or "run") + ".md"

    def write(self, name: str, text: str) -> None:
        """Write one report; a name already written by this batch (``a b/`` and ``a_b/`` make
        the same slug) gets a numbered twin, so no report overwrites another."""
        stem, n = name.removesuffix(".md"), 1
        while name.lower() in self._used:  # lower: case-insensitive file systems
            n += 1
            name = f"{stem}~{n}.md"
        self._used.add(name.lower())
        (self.folder / name).write_text(text, encoding="utf-8")
        self.written += 1


# --------------------------------------------------------------------------------------------
# Reading tables back, DataFrames
# --------------------------------------------------------------------------------------------
def rows_frame(rows: list[Row]) -> pd.DataFrame:
    """Rows as a DataFrame with the table's dtypes (Int64 counts, float64 losses, strings)."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(COLUMNS))
    return _normalize(df)


def _to_float(v: Any) -> float:
    if v is None or v == "":
        return math.nan
    if isinstance(v, str):
        return float(v.replace("Infinity", "inf"))
    return float(v)


def _normalize(df: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    for c in COLUMNS:
        if c not in df.columns:
            df[c] = None
    df = df[list(COLUMNS)].copy()
    for c in FLOAT_COLUMNS:
        df[c] = pd.Series([_to_float(v) for v in df[c]], index=df.index, dtype="float64")
    for c in INT_COLUMNS:
        df[c] = pd.array(
            [None if v is None or v == "" or v != v else int(v) for v in df[c]], dtype="Int64"
        )
    for c in STR_COLUMNS:
        df[c] = pd.Series(
            ["" if v is None or v != v else str(v) for v in df[c]], index=df.index, dtype="object"
        )
    return df.reset_index(drop=True)


def read_table(path: str | os.PathLike[str], fmt: str | None = None) -> pd.DataFrame:
    """Read a CSV, Parquet or JSON Lines batch table back into a DataFrame (same dtypes as
    :func:`curvediag.diagnose_many`)."""
    import pandas as pd

    kind = format_for(os.fspath(path), fmt)
    if kind == "csv":
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    elif kind == "jsonl":
        text = Path(path).read_text(encoding="utf-8")
        df = pd.DataFrame(
            [json.loads(line) for line in io.StringIO(text) if line.strip()], columns=list(COLUMNS)
        )
    elif kind == "parquet":
        pa = _pyarrow()
        df = pa.parquet.read_table(os.fspath(path)).to_pandas()
    else:
        raise ValueError("a markdown summary is not a table; write CSV, Parquet or JSON Lines")
    return _normalize(df)
