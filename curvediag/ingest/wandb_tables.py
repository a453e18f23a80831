"""Readers for the tabular files Weights & Biases produces (everything but ``run-*.wandb``).

Three formats:

``wandb-csv`` (:data:`CHART_EXPORT`)
    The web UI's chart export: the first column is the x-axis (``Step``, ``epoch_id``,
    ``train/global_step``, ...), then ``<run> - <metric>`` columns, optionally with
    ``__MIN``/``__MAX`` companions, several runs side by side (one :class:`Run` each). The x-axis
    gives the steps; when it is not a step counter (fractional values, ``Relative Time``) the
    run's own ``<run> - _step`` column is used instead. ``_step`` columns are W&B's counter,
    not metrics; ``__MIN``/``__MAX`` bands are dropped. The *runs table* export (one row per
    run, no step axis) is recognised and refused with a clear message: it is not a curve.
``wandb-history``
    ``run.history()`` / ``scan_history()`` dumps as CSV (sparse rows, an unnamed index column),
    old ``wandb-history.jsonl`` files (media dicts are skipped) and Parquet (needs pyarrow).
    Steps come from ``train/global_step`` (the HF Trainer integration), ``trainer/global_step``
    (Lightning's ``WandbLogger``), else ``_step``; ``_timestamp`` (else ``_runtime``) is the
    wall time. A dump of about 500 rows with irregular step gaps is flagged as sampled.
``wandb-summary``
    ``wandb-summary.json``: final values only. Each numeric value becomes a one-point series at
    the final step, the values also go to ``meta.summary``, and a warning says that only final
    values are available.

A ``config.yaml`` next to a history or summary file (a run's ``files/`` folder) is read with
:func:`read_wandb_config` and applied with :func:`apply_trainer_config`.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from curvediag.errors import MalformedRunError, MissingDependencyError, UnrecognizedFormatError
from curvediag.ingest._tabular import (
    Table,
    TableReader,
    assign_names,
    build_metrics,
    dataframe_table,
    decode_text,
    describe_columns,
    find_column,
    first_json_line,
    flatten,
    head_bytes,
    header_cells,
    is_media,
    is_unnamed,
    json_lines,
    parse_csv,
    read_bytes,
    read_text,
    rows_table,
    to_steps,
    wall_column,
)
from curvediag.ingest._tabular import finish_run as _finish
from curvediag.ingest.aliases import canonical_name
from curvediag.ingest.trainer_args import apply_trainer_config, unwrap_wandb_config
from curvediag.model import Run, RunMeta, Series
from curvediag.normalize import MAX_ABS_VALUE, MAX_STEP, OutOfRange, as_float

__all__ = [
    "CHART_EXPORT",
    "FORMATS",
    "HISTORY",
    "READERS",
    "SUMMARY",
    "read_wandb_config",
    "wandb_metric_name",
]

CHART_FORMAT = "wandb-csv"
HISTORY_FORMAT = "wandb-history"
SUMMARY_FORMAT = "wandb-summary"
FORMATS = (CHART_FORMAT, HISTORY_FORMAT, SUMMARY_FORMAT)

HISTORY_NAME = "wandb-history.jsonl"
SUMMARY_NAME = "wandb-summary.json"
CONFIG_NAME = "config.yaml"
#: Step columns of a history dump, best first.
HISTORY_STEPS = ("train/global_step", "trainer/global_step", "_step")
_WALL = ("_timestamp", "_runtime")
_TIME_AXES = {"relative time (process)", "relative time (wall)", "wall time", "_runtime"}
_RUNS_TABLE = {"name", "state", "notes", "user", "tags", "created", "runtime", "sweep"}
#: End-of-run values the HF Trainer puts in the summary only (never history points).
_HF_END_KEYS = {
    "train_loss",
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
    "total_flos",
}
_SAMPLED_ROWS = range(450, 551)
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_JSON_SUFFIXES = {*_JSONL_SUFFIXES, ".json"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_CONSOLE_SUFFIXES = {".log", ".txt", ".out"}


# --------------------------------------------------------------------------------------------
# Names and config
# --------------------------------------------------------------------------------------------
def wandb_metric_name(raw: str, aliases: Mapping[str, str] | None = None) -> str:
    """Canonical name of a W&B key.

    Like :func:`canonical_name`, plus the ``epoch/`` and ``batch/`` prefixes of W&B's Keras
    callback (``epoch/loss`` -> train/loss, ``epoch/val_loss`` -> eval/loss).
    """
    key = raw.strip()
    if aliases and (key in aliases or key.lower() in {k.lower() for k in aliases}):
        return canonical_name(key, extra=aliases)
    head, sep, rest = key.partition("/")
    if sep and head.lower() in {"epoch", "batch"} and rest and "/" not in rest:
        return canonical_name(rest, extra=aliases)
    return canonical_name(key, extra=aliases)


def read_wandb_config(path: Path) -> dict[str, Any]:
    """A W&B ``config.yaml``, unwrapped; errors name the file. Read with the safe loader only,
    a value under a ``!!python/...`` tag (an object the run's config held) reading as None
    rather than refusing the whole file (:func:`safe_load_config`)."""
    import yaml

    from curvediag.ingest.trainer_args import safe_load_config

    text = read_text(path, "W&B config.yaml")
    try:
        data = safe_load_config(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise MalformedRunError(path, f"not valid YAML ({type(exc).__name__})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MalformedRunError(path, f"expected a mapping, found a {type(data).__name__}")
    return unwrap_wandb_config(data)


def _apply_sidecars(run: Run, folder: Path, *, summary: bool = True) -> None:
    """Apply ``config.yaml`` (and ``wandb-summary.json``) found in a run's ``files/`` folder."""
    cfg = folder / CONFIG_NAME
    if cfg.is_file():
        try:
            apply_trainer_config(run.meta, read_wandb_config(cfg))
        except MalformedRunError as exc:
            run.warnings.append(f"ignored {CONFIG_NAME}: {exc}")
    summ = folder / SUMMARY_NAME
    if summary and summ.is_file():
        try:
            values = _summary_values(summ)
        except MalformedRunError as exc:
            run.warnings.append(f"ignored {SUMMARY_NAME}: {exc}")
        else:
            run.meta.summary.update(values)


def _run_folder_name(path: Path) -> str:
    folder = path.resolve().parent
    if folder.name == "files" and folder.parent.name:
        folder = folder.parent
    return folder.name or str(folder)


# --------------------------------------------------------------------------------------------
# Chart export (and runs table)
# --------------------------------------------------------------------------------------------
def _is_runs_table(cells: list[str]) -> bool:
    if not cells or cells[0].lower() != "name":
        return False
    return len(_RUNS_TABLE & {c.lower() for c in cells[:12]}) >= 3


def _is_chart_export(cells: list[str]) -> bool:
    rest = [c for c in cells[1:] if c]
    return bool(cells) and bool(cells[0]) and bool(rest) and all(" - " in c for c in rest)


def sniff_chart(path: Path) -> bool:
    """A CSV whose header is ``<x-axis>,<run> - <metric>,...`` (or a W&B runs table); never a
    console capture (``.log``, ``.txt``, ``.out``), whose ``2025-06-04 17:36:55,374 - INFO -``
    lines split at their comma look like that header."""
    suffix = path.suffix.lower()
    if not path.is_file() or suffix in _JSON_SUFFIXES | _PARQUET_SUFFIXES | _CONSOLE_SUFFIXES:
        return False
    cells = header_cells(path)
    return _is_runs_table(cells) or _is_chart_export(cells)


def _strip_band(cell: str) -> tuple[str, str]:
    for suffix, kind in (("__MIN", "min"), ("__MAX", "max")):
        if cell.endswith(suffix):
            return cell[: -len(suffix)], kind
    return cell, "value"


def split_header(cells: list[str]) -> list[tuple[str, str, str] | None]:
    """``(run, metric, kind)`` for each ``<run> - <metric>[__MIN|__MAX]`` cell (else None).

    Run names may contain ``-``, ``:`` and even `` - ``; metric names ``/`` and ``.``. The runs
    named by ``<run> - _step`` columns are known exactly; a cell is split after the longest
    known run it starts with, otherwise at its first `` - ``.
    """
    bases = [_strip_band(c) for c in cells]
    known = {b[: -len(" - _step")] for b, _ in bases if b.endswith(" - _step") and len(b) > 8}
    out: list[tuple[str, str, str] | None] = []
    for base, kind in bases:
        cuts = [m.start() for m in re.finditer(" - ", base)]
        cuts = [i for i in cuts if i > 0 and i + 3 < len(base)]
        if not cuts:
            out.append(None)
            continue
        matches = [i for i in cuts if base[:i] in known]
        cut = max(matches) if matches else cuts[0]
        out.append((base[:cut], base[cut + 3 :], kind))
    return out


def read_chart(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Read a W&B chart export: one :class:`Run` per run in the file."""
    text = read_text(path, "W&B CSV export")
    cells = header_cells_of(text)
    if _is_runs_table(cells):
        raise MalformedRunError(
            path,
            "a W&B runs-table export (one row per run, no step axis): it holds final values, "
            "not curves; export a chart instead (a panel's menu > Export > CSV) or the "
            "run's history",
        )
    table = parse_csv(path, text, "W&B CSV export")
    header = table.header
    if len(header) < 2 or not _is_chart_export(header):
        raise UnrecognizedFormatError(
            path,
            f"not a W&B chart export (expected '<run> - <metric>' columns after the x-axis); "
            f"columns: {describe_columns(table)}",
        )
    x_name = header[0]
    x_col = table.columns.get(x_name)
    if x_col is None:
        raise MalformedRunError(path, f"the x-axis column {x_name!r} holds no numbers")
    x_steps, x_ok, x_integral = to_steps(x_col)
    x_is_steps = x_integral and x_name.lower() not in _TIME_AXES
    runs, step_cols, bands = _chart_columns(table, header[1:])
    out: list[Run] = []
    empty: list[str] = []
    for run_name, columns in runs.items():
        warnings: list[str] = []
        any_present = np.zeros(table.nrows, dtype=bool)
        for raw in columns.values():
            any_present |= table.columns[raw].present
        if x_is_steps:
            steps, ok = x_steps, x_ok
        elif run_name in step_cols and step_cols[run_name] in table.columns:
            steps, ok, _ = to_steps(table.columns[step_cols[run_name]])
            warnings.append(
                f"the x-axis {x_name!r} is not a step counter; steps are the run's _step"
            )
        else:
            steps = np.cumsum(any_present, dtype=np.int64) - 1
            ok = any_present.copy()
            warnings.append(
                f"the x-axis {x_name!r} is not a step counter and the export has no _step "
                "column: steps are point numbers (0, 1, 2, ...)"
            )
        counts = {m: table.columns[r].count for m, r in columns.items()}
        names, msgs = assign_names(list(columns), lambda m: wandb_metric_name(m, aliases), counts)
        warnings.extend(msgs)
        dropped = OutOfRange()
        metrics, restarts = build_metrics(
            _remap(table, columns), names, steps, ok, wall=None, sort=True, dropped=dropped
        )
        if not metrics:
            empty.append(run_name)
            continue
        if _band_differs(table, run_name, columns, bands.get(run_name, [])):
            warnings.append(
                f"{run_name!r} is a group of runs: each point aggregates several runs (the "
                "__MIN/__MAX band across them is not used)"
            )
        if x_is_steps and x_name.lower() not in {"step", "_step", *HISTORY_STEPS}:
            warnings.append(f"steps are the export's x-axis {x_name!r}")
        run = Run(
            source=str(path),
            format=CHART_FORMAT,
            name=run_name,
            metrics=metrics,
            warnings=warnings,
        )
        out.append(_finish(run, restarts, dropped=dropped, table=table))
    if not out:
        raise MalformedRunError(
            path, "no numeric metric values in any run of this W&B chart export"
        )
    if empty:
        out[0].warnings.append(
            "runs with no values in this export are left out: " + ", ".join(empty)
        )
    return out


def _chart_columns(
    table: Table, names: list[str]
) -> tuple[dict[str, dict[str, str]], dict[str, str], dict[str, list[str]]]:
    """The columns after the x-axis, by run: run -> metric -> raw column (values only),
    run -> its ``_step`` column, run -> its ``__MIN``/``__MAX`` band columns."""
    runs: dict[str, dict[str, str]] = {}
    step_cols: dict[str, str] = {}
    bands: dict[str, list[str]] = {}
    for raw, parsed in zip(names, split_header(names), strict=True):
        if parsed is None:
            continue
        owner, metric, kind = parsed
        runs.setdefault(owner, {})
        if kind != "value":
            bands.setdefault(owner, []).append(raw)
        elif metric == "_step":
            step_cols[owner] = raw
        elif not metric.startswith("_") and raw in table.columns:
            runs[owner][metric] = raw
    return runs, step_cols, bands


def header_cells_of(text: str) -> list[str]:
    import csv

    line = text.split("\n", 1)[0].rstrip("\r")
    try:
        rows = list(csv.reader([line]))
    except csv.Error:
        return []
    return [c.strip() for c in rows[0]] if rows else []


def _remap(table: Table, columns: Mapping[str, str]) -> Table:
    """A view of ``table`` keyed by metric name instead of the raw header cell."""
    return Table(nrows=table.nrows, columns={m: table.columns[r] for m, r in columns.items()})


def _band_differs(table: Table, run: str, columns: Mapping[str, str], band_cols: list[str]) -> bool:
    for raw_band in band_cols:
        base = raw_band[: -len("__MIN")]
        col = table.columns.get(raw_band)
        val = table.columns.get(base)
        if col is None or val is None or base not in columns.values():
            continue
        both = col.present & val.present & np.isfinite(col.values) & np.isfinite(val.values)
        if both.any() and not np.allclose(col.values[both], val.values[both], rtol=1e-9):
            return True
    return False


# --------------------------------------------------------------------------------------------
# History dumps (CSV, JSON Lines, Parquet)
# --------------------------------------------------------------------------------------------
def _history_file(path: Path) -> Path | None:
    for candidate in (path / HISTORY_NAME, path / "files" / HISTORY_NAME):
        if candidate.is_file():
            return candidate
    return None


def sniff_history(path: Path) -> bool:
    """A ``run.history()`` CSV (has ``_step``), a ``wandb-history.jsonl``, or Parquet."""
    if path.is_dir():
        return _history_file(path) is not None
    if not path.is_file():
        return False
    suffix = path.suffix.lower()
    if path.name == HISTORY_NAME or suffix in _PARQUET_SUFFIXES:
        return True
    if suffix in _JSONL_SUFFIXES:
        row = first_json_line(path)
        return row is not None and ("_step" in row or {"_runtime", "_timestamp"} <= row.keys())
    cells = header_cells(path)
    if _is_chart_export(cells) or _is_runs_table(cells):
        return False
    return "_step" in cells or {"_runtime", "_timestamp"} <= set(cells)


def _parquet_table(path: Path) -> Table:
    try:
        pq: Any = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise MissingDependencyError(
            "pyarrow", "parquet", f"{path}: reading a Parquet history dump"
        ) from None
    try:
        df = pq.read_table(path).to_pandas()
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
        raise MalformedRunError(
            path, f"not a readable Parquet file ({type(exc).__name__})"
        ) from None
    return dataframe_table(df)


def read_history(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Read a W&B history dump (CSV, JSON Lines or Parquet, or a run folder holding one)."""
    if path.is_dir():
        found = _history_file(path)
        if found is None:
            raise UnrecognizedFormatError(path, f"no {HISTORY_NAME} here or in files/")
        path = found
    suffix = path.suffix.lower()
    warnings: list[str] = []
    if suffix in _PARQUET_SUFFIXES:
        table = _parquet_table(path)
    elif suffix in _JSON_SUFFIXES or path.name == HISTORY_NAME:
        rows, warnings = json_lines(
            path, read_text(path, "W&B history (JSON Lines)"), "W&B history"
        )
        table = rows_table(flatten(r) for r in rows)
    else:
        table = parse_csv(path, read_text(path, "W&B history CSV"), "W&B history CSV")
    return [_history_run(path, table, warnings, aliases)]


def _history_run(
    path: Path, table: Table, warnings: list[str], aliases: dict[str, str] | None
) -> Run:
    step_name = find_column(table, HISTORY_STEPS)
    if step_name is None:
        raise MalformedRunError(
            path,
            "no step column (looked for train/global_step, trainer/global_step, _step): not a "
            f"W&B history dump; columns: {describe_columns(table)}",
        )
    steps, ok, integral = to_steps(table.columns[step_name])
    if not integral and step_name != "_step" and "_step" in table.columns:
        warnings.append(f"{step_name} has fractional values; steps are _step")
        step_name = "_step"
        steps, ok, integral = to_steps(table.columns[step_name])
    if not integral:
        raise MalformedRunError(path, f"the step column {step_name!r} has fractional values")
    if step_name != "_step":
        warnings.append(f"steps are {step_name} (not W&B's _step counter)")
    metric_cols = [
        k for k in table.columns if not k.startswith("_") and k != step_name and not is_unnamed(k)
    ]
    if not metric_cols:
        raise MalformedRunError(path, "no numeric metric in this W&B history dump")
    counts = {k: table.columns[k].count for k in metric_cols}
    names, msgs = assign_names(metric_cols, lambda k: wandb_metric_name(k, aliases), counts)
    warnings.extend(msgs)
    lost = 0
    for k in metric_cols:
        lost += int((table.columns[k].present & ~ok).sum())
    if lost:
        warnings.append(f"{lost} value(s) on rows without {step_name} are left out")
    wall = wall_column(table, _WALL)
    dropped = OutOfRange()
    metrics, restarts = build_metrics(table, names, steps, ok, wall, dropped=dropped)
    if step_name == "_step" or "_step" in table.columns:
        _check_sampled(table, warnings)
    name = _run_folder_name(path) if path.name == HISTORY_NAME else path.stem
    fmt = HISTORY_FORMAT if "_step" in table.columns or step_name != "_step" else "parquet"
    run = Run(source=str(path), format=fmt, name=name, metrics=metrics, warnings=warnings)
    if path.name == HISTORY_NAME:
        _apply_sidecars(run, path.parent)
    return _finish(run, restarts, dropped=dropped, table=table)


def _check_sampled(table: Table, warnings: list[str]) -> None:
    col = table.columns.get("_step")
    if col is None or table.nrows not in _SAMPLED_ROWS:
        return
    steps, ok, _ = to_steps(col)
    uniq = np.unique(steps[ok])
    gaps = np.unique(np.diff(uniq))
    if gaps.size > 1:
        warnings.append(
            f"this history has {table.nrows} rows with irregular _step gaps: it looks sampled "
            "(run.history() returns about 500 sampled rows by default); use "
            "run.scan_history() or history(samples=...) for every row"
        )


# --------------------------------------------------------------------------------------------
# wandb-summary.json
# --------------------------------------------------------------------------------------------
def _summary_file(path: Path) -> Path | None:
    for candidate in (path / SUMMARY_NAME, path / "files" / SUMMARY_NAME):
        if candidate.is_file():
            return candidate
    return None


def sniff_summary(path: Path) -> bool:
    """``wandb-summary.json``, a ``.json`` with a ``_wandb`` key, or a folder with one.

    A folder that also holds a ``run-*.wandb`` log or a history file is left to those readers.
    """
    if path.is_dir():
        if _summary_file(path) is None or _history_file(path) is not None:
            return False
        try:
            return not any(path.glob("run-*.wandb"))
        except OSError:
            return False
    if not path.is_file():
        return False
    if path.name == SUMMARY_NAME:
        return True
    if path.suffix.lower() != ".json":
        return False
    head = head_bytes(path, 1 << 16)
    return head.lstrip().startswith(b"{") and b'"_wandb"' in head and b'"log_history"' not in head


def _load_summary(path: Path) -> dict[str, Any]:
    import json

    text = decode_text(path, read_bytes(path), "wandb-summary.json")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedRunError(
            path, f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise MalformedRunError(path, "JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise MalformedRunError(
            path, f"expected a JSON object (a W&B summary), found a {type(data).__name__}"
        )
    return data


def _summary_values(path: Path) -> dict[str, Any]:
    """The summary's scalar values, flattened with ``/`` (media and tables left out)."""
    data = _load_summary(path)
    data.pop("_wandb", None)
    flat = flatten(data)
    return {
        k: v
        for k, v in flat.items()
        if not is_media(v) and (v is None or isinstance(v, (str, bool, int, float)))
    }


def read_summary(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Read ``wandb-summary.json`` (or a run folder holding only one): final values only."""
    if path.is_dir():
        found = _summary_file(path)
        if found is None:
            raise UnrecognizedFormatError(path, f"no {SUMMARY_NAME} here or in files/")
        path = found
    values = _summary_values(path)
    step_raw = next(
        (as_float(values[k]) for k in HISTORY_STEPS if as_float(values.get(k)) is not None), None
    )
    if step_raw is not None and not (math.isfinite(step_raw) and abs(step_raw) <= MAX_STEP):
        step_raw = None  # Infinity, 1e300, hundreds of digits: no usable step
    step = int(step_raw) if step_raw is not None else 0
    hf = "train/global_step" in values or "train_runtime" in values
    numeric = {
        k: float(n)
        for k, v in values.items()
        if (n := as_float(v)) is not None
        and not (math.isfinite(n) and abs(n) > MAX_ABS_VALUE)
        and not k.startswith("_")
        and k not in HISTORY_STEPS
        and not (hf and k in _HF_END_KEYS)
    }
    names, msgs = assign_names(
        list(numeric), lambda k: wandb_metric_name(k, aliases), {k: 1 for k in numeric}
    )
    metrics = {
        name: Series(name=name, steps=[step], values=[numeric[raw]]) for raw, name in names.items()
    }
    meta = RunMeta(summary=values)
    if step_raw is not None:
        meta.global_step = step
    epoch = as_float(values.get("train/epoch", values.get("epoch")))
    if epoch is not None and math.isfinite(epoch):
        meta.epoch = epoch
    warnings = [
        f"{path.name} holds only final values (one point per metric, at step {step}), not "
        "curves: most rules will be skipped; read the run's history or its run-*.wandb log "
        "for the curves",
        *msgs,
    ]
    run = Run(
        source=str(path),
        format=SUMMARY_FORMAT,
        name=_run_folder_name(path),
        meta=meta,
        metrics=metrics,
        warnings=warnings,
    )
    _apply_sidecars(run, path.parent, summary=False)
    return [_finish(run, set())]


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------
CHART_EXPORT = TableReader(CHART_FORMAT, sniff_chart, read_chart)
HISTORY = TableReader(HISTORY_FORMAT, sniff_history, read_history)
SUMMARY = TableReader(SUMMARY_FORMAT, sniff_summary, read_summary)
#: In sniffing order.
READERS = (CHART_EXPORT, HISTORY, SUMMARY)
