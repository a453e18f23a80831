"""Readers: every supported log format into :class:`~curvediag.model.Run` objects.

``load_run`` detects the format from names and content. A folder holding several formats of
the same run (a Trainer output folder with ``trainer_state.json``, ``runs/`` and ``wandb/``) is
read as ONE run: trainer_state.json's metrics take precedence, and the other formats add
hyperparameters (the Trainer's arguments), wall time and metrics it lacks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from curvediag.errors import (
    IngestError,
    MalformedRunError,
    OutOfMemoryError,
    UnrecognizedFormatError,
)
from curvediag.ingest._progress import listen as reading_progress
from curvediag.ingest.base import Aliases, Reader, readers
from curvediag.model import Run, Series

__all__ = [
    "FORMATS",
    "detect_format",
    "load_run",
    "load_runs",
    "merge_runs",
    "reading_progress",
]


def _modules() -> dict[str, Reader]:
    """Format name -> reader (see :mod:`curvediag.ingest.base`), in the order detection tries
    them."""
    return readers()


#: Format names, in the order they are tried.
FORMATS = (
    "hf-trainer",
    "tensorboard",
    "wandb-run",
    "wandb-csv",
    "wandb-history",
    "lightning-csv",
    "tensorboard-csv",
    "wandb-summary",
    "text-log",
    "csv",
    "jsonl",
)
#: Formats that describe a whole folder; several of them in one folder are one run.
_FOLDER_FORMATS = ("hf-trainer", "tensorboard", "wandb-run")


def _reader(fmt: str) -> Callable[[Path, Aliases], list[Run]]:
    mod = _modules()[fmt]
    return lambda p, a: list(mod.read_all(p, aliases=a))


def detect_format(path: Path) -> str:
    """The first format whose reader recognises ``path``.

    Raises:
        UnrecognizedFormatError: No reader recognises it.
    """
    for name, mod in _modules().items():
        if mod.sniff(path):
            return name
    if path.is_dir():
        raise UnrecognizedFormatError(
            path,
            "no training log found here (looked for trainer_state.json, checkpoint-N/, "
            "TensorBoard event files, W&B run folders and Lightning's "
            "lightning_logs/version_N/metrics.csv)",
        )
    raise UnrecognizedFormatError(
        path, "not a recognised training log (supported: " + ", ".join(FORMATS) + ")"
    )


#: Spreadsheet files users export runs to; refused by name (never parsed as CSV).
_SPREADSHEETS = frozenset({".xlsx", ".xlsm", ".xls", ".xlsb", ".ods", ".numbers"})


def _check_path(p: Path) -> None:
    if not p.exists():
        raise MalformedRunError(p, "no such file or folder")
    if not os.access(p, os.R_OK):
        raise MalformedRunError(p, "permission denied")
    if p.suffix.lower() in _SPREADSHEETS and not p.is_dir():
        raise UnrecognizedFormatError(
            p,
            f"{p.suffix} spreadsheets are not supported: save the sheet as CSV "
            "(File > Save As > CSV) and point curvediag at the .csv",
        )


def _call(p: Path, fmt: str, aliases: Aliases) -> list[Run]:
    try:
        return _reader(fmt)(p, aliases)
    except IngestError:
        raise
    except MemoryError:
        raise OutOfMemoryError(p, "reading it") from None
    except PermissionError:
        raise MalformedRunError(p, "permission denied") from None
    except (OSError, ValueError) as exc:  # a reader bug must still name the file
        raise MalformedRunError(p, f"{type(exc).__name__}: {exc}") from None


def load_runs(
    path: str | os.PathLike[str], *, format: str | None = None, aliases: Aliases = None
) -> list[Run]:
    """Every run at ``path``. A W&B CSV export or a tree of TensorBoard runs can hold several.

    Args:
        path: A log file or a folder.
        format: Force a format (see ``FORMATS``) instead of detecting it.
        aliases: Extra metric-name mappings, raw name -> canonical name.

    Raises:
        IngestError: Missing, unreadable, unrecognised or broken input (names file and problem).
        OutOfMemoryError: The run does not fit in this machine's memory (names the path).
    """
    p = Path(path)
    _check_path(p)
    try:
        return _load_runs(p, format, aliases)
    except MemoryError as exc:
        if isinstance(exc, OutOfMemoryError):
            raise
        raise OutOfMemoryError(p, "reading it") from None


def _load_runs(p: Path, format: str | None, aliases: Aliases) -> list[Run]:
    if format is not None:
        if format not in _modules():
            raise UnrecognizedFormatError(
                p, f"unknown format {format!r} (known: {', '.join(FORMATS)})"
            )
        return _call(p, format, aliases)
    if p.is_file():
        return _call(p, detect_format(p), aliases)
    mods = _modules()
    try:
        found = [name for name in _FOLDER_FORMATS if mods[name].sniff(p)]
        if not found:
            return _load_log_files(p, aliases)
    except PermissionError:
        raise MalformedRunError(p, "permission denied") from None
    groups = [_call(p, fmt, aliases) for fmt in found]
    if "hf-trainer" in found:
        primary = groups[0][0]
        others = [r for g in groups[1:] for r in g]
        return [merge_runs(primary, others)] if others else [primary]
    if len(groups) == 2 and all(len(g) == 1 for g in groups):
        return [merge_runs(groups[0][0], [groups[1][0]])]
    return [r for g in groups for r in g]


def _load_log_files(folder: Path, aliases: Aliases) -> list[Run]:
    """The runs in the log files directly inside ``folder`` (a CSV export, a metrics.csv...)."""
    mods = _modules()
    for name in FORMATS:
        if name not in _FOLDER_FORMATS and mods[name].sniff(folder):
            found = _call(folder, name, aliases)
            if name == "wandb-summary" and len(found) == 1:
                return [_with_console_curves(folder, found[0], aliases)]
            return found
    runs: list[Run] = []
    for f in _files(folder):
        fmt = next((n for n in FORMATS if n not in _FOLDER_FORMATS and mods[n].sniff(f)), None)
        if fmt is not None:
            runs += _call(f, fmt, aliases)
    if not runs:
        runs = _nested_runs(folder, aliases)
    if not runs:
        detect_format(folder)  # raises the explanatory error
    return runs


def _nested_runs(folder: Path, aliases: Aliases) -> list[Run]:
    """A project folder with no log at its top: Lightning ``CSVLogger`` logs a few levels down,
    else what the sub-folders hold (a W&B run synced without its binary log,
    ``wandb/run-*/files/`` with its summary and console; a CSV under ``tmp/exports/``)."""
    subs = _sub_folders(folder)
    lightning = _lightning_logs(folder, subs)
    if lightning:
        return [r for log in lightning for r in _call(log, "lightning-csv", aliases)]
    mods = _modules()
    runs: list[Run] = []
    for here in subs:
        if mods["wandb-summary"].sniff(here):
            runs += _load_log_files(here, aliases)  # the summary with its console's curves
            continue
        for f in _files(here):
            fmt = next((n for n in FORMATS if n not in _FOLDER_FORMATS and mods[n].sniff(f)), None)
            if fmt is not None:
                runs += _call(f, fmt, aliases)
    return runs


def _with_console_curves(folder: Path, summary: Run, aliases: Aliases) -> Run:
    """W&B's files/ folder: its summary holds final values only, while the console capture
    beside it (output.log) may print every step (a nanoGPT run's lines). When one file there is
    a text log, the curves come from it and the summary gives the settings and final values;
    its values and its _step sit at W&B's own row counter, not at the printed steps, so
    neither is kept."""
    beside = Path(summary.source).parent  # files/ when the run folder itself was given
    console = [f for f in _files(beside) if _modules()["text-log"].sniff(f)]
    if len(console) != 1:
        return summary
    meta = summary.meta.model_copy(update={"global_step": None})
    settings = summary.model_copy(update={"metrics": {}, "warnings": [], "meta": meta})
    merged = merge_runs(_call(console[0], "text-log", aliases)[0], [settings])
    merged.warnings.append(
        f"curves read from the console output {console[0].name}; "
        "wandb-summary.json gives the settings and final values"
    )
    # a final value that is NaN or inf (a val loss that blew up after the console's last
    # print) must not vanish with the summary's other values: it is kept at the last step
    last = merged.last_step
    for name, series in summary.metrics.items():
        bad = not np.isfinite(series.values).all()
        if bad and name not in merged.metrics and last is not None:
            merged.metrics[name] = Series(name=name, steps=[last], values=series.values[-1:])
            merged.warnings.append(f"the summary's final {name} is {series.values[-1]}")
    return merged


def _files(folder: Path) -> list[Path]:
    """The files directly inside ``folder``, hidden ones left out, by name."""
    return sorted(f for f in folder.iterdir() if f.is_file() and not f.name.startswith("."))


#: How deep under a project folder logs are looked for (Lightning's
#: ``lightning_logs/version_3/metrics.csv`` is 2 deep; ``logs/<name>/version_0/`` is 3).
_NESTED_DEPTH = 4
#: Installed packages: never walked into.
_PACKAGE_DIRS = frozenset({"node_modules", "__pycache__", "site-packages"})


def _sub_folders(folder: Path) -> list[Path]:
    """The sub-folders of ``folder`` a few levels down, by path; hidden ones, installed
    packages and the inside of a W&B ``files/`` folder (one run's) left out."""
    found: list[Path] = []
    for here, dirs, files in os.walk(folder):
        path = Path(here)
        depth = len(path.relative_to(folder).parts)
        if depth:
            found.append(path)
        run = "wandb-summary.json" in files or (path / "files" / "wandb-summary.json").is_file()
        keep = depth < _NESTED_DEPTH and not (depth and run)
        dirs[:] = (
            sorted(d for d in dirs if not d.startswith(".") and d not in _PACKAGE_DIRS)
            if keep
            else []
        )
    return found


def _lightning_logs(folder: Path, subs: list[Path]) -> list[Path]:
    """Lightning ``CSVLogger`` logs (``**/version_N/metrics.csv``, or any ``metrics.csv`` that
    reads as one) in ``subs``, the sub-folders of a project folder, outside W&B's folders."""
    sniff = _modules()["lightning-csv"].sniff
    return [
        p / "metrics.csv"
        for p in subs
        if "wandb" not in p.relative_to(folder).parts
        and (p / "metrics.csv").is_file()
        and sniff(p / "metrics.csv")
    ]


def load_run(
    path: str | os.PathLike[str], *, format: str | None = None, aliases: Aliases = None
) -> Run:
    """Read a training log into one :class:`Run`.

    Args:
        path: A log file or a folder holding one run (a Trainer output folder, a TensorBoard
            run folder, a W&B run folder, ...).
        format: Force a format instead of detecting it (see ``FORMATS``).
        aliases: Extra metric-name mappings, raw name -> canonical name
            (e.g. ``{"my/loss": "train/loss"}``).

    Raises:
        IngestError: The path is missing, unreadable, of no known format, broken, or holds
            several runs (use :func:`load_runs`). The message names the file and the problem.
    """
    runs = load_runs(path, format=format, aliases=aliases)
    if len(runs) != 1:
        names = ", ".join(f"{r.name} ({r.source})" for r in runs[:5])
        more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
        raise IngestError(
            Path(path),
            f"holds {len(runs)} runs: {names}{more}; point at one of them or use load_runs",
        )
    return runs[0]


def _wall_time_by_step(target: np.ndarray, steps: np.ndarray, wall: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(steps, target)
    idx = np.clip(idx, 0, max(0, steps.size - 1))
    out = np.full(target.size, np.nan)
    if steps.size:
        hit = steps[idx] == target
        out[hit] = wall[idx[hit]]
    return out


def merge_runs(primary: Run, others: Sequence[Run]) -> Run:
    """One run from several formats of it: ``primary``'s metrics win, the others fill gaps.

    The others contribute metrics the primary lacks, wall times for the primary's series (by
    step), and the metadata fields the primary leaves empty (the Trainer's arguments).
    """
    metrics = dict(primary.metrics)
    meta = primary.meta.model_copy(deep=True)
    warnings = list(primary.warnings)
    formats = [primary.format]
    for other in others:
        formats.append(other.format)
        for name, series in other.metrics.items():
            mine = metrics.get(name)
            if mine is None:
                metrics[name] = series
            elif mine.wall_time is None and series.wall_time is not None:
                wt = _wall_time_by_step(mine.steps, series.steps, series.wall_time)
                if np.isfinite(wt).any():
                    metrics[name] = mine.model_copy(update={"wall_time": wt})
        for field in type(meta).model_fields:
            if field in ("hyperparameters", "summary"):
                continue
            if getattr(meta, field) in (None, [], False) and getattr(other.meta, field) not in (
                None,
                [],
                False,
            ):
                setattr(meta, field, getattr(other.meta, field))
        for k, v in other.meta.hyperparameters.items():
            meta.hyperparameters.setdefault(k, v)
        for k, v in other.meta.summary.items():
            meta.summary.setdefault(k, v)
        warnings += [f"{other.format} ({other.source}): {w}" for w in other.warnings]
    fmt = "+".join(dict.fromkeys(formats))
    source = primary.source
    if len(formats) > 1:
        src = Path(primary.source)
        source = str(src.parent if src.is_file() else src)
    return Run(
        source=source,
        format=fmt,
        name=primary.name,
        meta=meta,
        metrics=metrics,
        warnings=warnings,
    )
