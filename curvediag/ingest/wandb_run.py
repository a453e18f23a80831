"""Reader for W&B run folders (``wandb/run-*/``, ``wandb/offline-run-*/``) and their binary log.

The metrics of runs made with wandb >= 0.17 live only in the binary ``run-<id>.wandb`` log
(decoded by :mod:`curvediag.ingest._wandb_log`, no ``wandb`` package needed); older folders
keep them in ``files/wandb-history.jsonl``. The Trainer's arguments come from the run config.
With the HF Trainer's W&B integration, ``_step`` counts ``wandb.log`` calls: the training step
is the logged ``train/global_step``.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

from curvediag.errors import MalformedRunError
from curvediag.ingest._wandb_log import read_wandb_log
from curvediag.ingest.aliases import paired_names
from curvediag.ingest.layouts import WANDB_RUN_DIR
from curvediag.ingest.trainer_args import apply_trainer_config
from curvediag.model import Run, RunMeta
from curvediag.normalize import (
    MAX_ABS_VALUE,
    OutOfRange,
    as_float,
    build_series,
    finish_run,
)

__all__ = ["FORMAT", "history_to_run", "read_all", "run_folders", "sniff"]

FORMAT = "wandb-run"
_RUN_DIR = WANDB_RUN_DIR
_MAGIC = b":W&B"
_STEP_KEYS = ("train/global_step", "global_step", "trainer/global_step")
#: step counters that plain training loops log beside their metrics (nanoGPT logs ``iter``)
_LOOP_STEP_KEYS = ("iter", "iteration", "step", "train/step", "train/iter")
_SUMMARY_KEYS = {
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
    "total_flos",
    "train_loss",
}


def _log_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("run-*.wandb") if p.is_file())


def _history_file(folder: Path) -> Path | None:
    """The ``wandb-history.jsonl`` of an older run folder: under ``files/``, or (W&B before
    0.9, 2019-2020) beside ``config.yaml`` and ``wandb-summary.json`` in the run folder itself."""
    for p in (folder / "files" / "wandb-history.jsonl", folder / "wandb-history.jsonl"):
        if p.is_file():
            return p
    return None


def run_folders(path: Path) -> list[Path]:
    """W&B run folders at ``path``: the folder itself, or the run folders in it or in ``wandb/``,
    else in the ``wandb/`` folders deeper down (a project whose script ran in ``src/``, as the
    TensorBoard reader finds event files at any depth).

    ``latest-run`` (a symlink to one of the others) is skipped, so no run is read twice.
    """
    if _log_files(path) or (
        _history_file(path) is not None and _RUN_DIR.match(path.name) is not None
    ):
        return [path]
    out = [run for base in (path, path / "wandb") for run in _runs_in(base)]
    if out or not path.is_dir():
        return out
    for dirpath, dirnames, _ in os.walk(path):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if here.name == "wandb" and here != path / "wandb":
            out += _runs_in(here)
            dirnames[:] = []  # run folders hold no further runs
    return out


def _runs_in(base: Path) -> list[Path]:
    if not base.is_dir():
        return []
    out = []
    for child in sorted(base.iterdir()):
        if child.name == "latest-run" or child.is_symlink():
            continue
        # a binary run-*.wandb log names its folder as a run whatever the folder is called
        # (a run folder copied as wandb/latest-run.<pid>); a history file needs the run name
        if child.is_dir() and (
            _log_files(child) or (_RUN_DIR.match(child.name) and _history_file(child) is not None)
        ):
            out.append(child)
    return out


def sniff(path: Path) -> bool:
    """True for a ``run-*.wandb`` file or a folder holding W&B run folders."""
    if path.is_file():
        try:
            with path.open("rb") as fh:
                return fh.read(4) == _MAGIC
        except OSError:
            return False
    return path.is_dir() and bool(run_folders(path))


def _in_range(v: Any) -> bool:
    f = as_float(v)
    return f is not None and (not math.isfinite(f) or abs(f) <= MAX_ABS_VALUE)


def _loop_step_key(rows: list[dict[str, Any]]) -> str:
    """A loop's own step counter (``iter``...) when every row logs it as a non-decreasing
    whole number; else W&B's ``_step`` (one per ``wandb.log`` call)."""
    for key in _LOOP_STEP_KEYS:
        vals = [as_float(r.get(key)) for r in rows]
        if not vals or any(v is None or not math.isfinite(v) or v != int(v) for v in vals):
            continue
        nums = [float(v) for v in vals if v is not None]
        if all(b >= a for a, b in pairwise(nums)) and nums[-1] > nums[0]:
            return key
    return "_step"


def _end_of_run_keys(rows: list[dict[str, object]]) -> set[str]:
    """The keys of the Trainer's end-of-run row (its average ``train_loss`` beside
    ``train_runtime``, ``total_flos``...), logged once. A key logged on many rows is a curve,
    and so is a lone ``train_loss`` without the others: a plain loop that logged one epoch."""
    seen: dict[str, int] = defaultdict(int)
    for row in rows:
        for key in row:
            if key.removeprefix("train/") in _SUMMARY_KEYS:
                seen[key] += 1
    out: set[str] = set()
    for row in rows:
        names = [k for k in row if k.removeprefix("train/") in _SUMMARY_KEYS and seen[k] <= 1]
        # train_runtime, total_flos... are never curves; train_loss is one unless the others
        # stand beside it
        alone = len(names) == 1 and names[0].removeprefix("train/") == "train_loss"
        if not alone:
            out.update(names)
    return out


def history_to_run(
    rows: list[dict[str, object]],
    *,
    source: str,
    name: str,
    fmt: str,
    aliases: dict[str, str] | None = None,
    meta: RunMeta | None = None,
    warnings: list[str] | None = None,
) -> Run:
    """Build a Run from W&B history rows (binary log, ``wandb-history.jsonl`` or a dump).

    The step is ``train/global_step`` when the rows carry it (the HF Trainer), else ``_step``;
    ``_timestamp`` becomes the wall time; non-numeric values (media, strings) are skipped.
    """
    step_key = next((k for k in _STEP_KEYS if any(k in r for r in rows)), None) or _loop_step_key(
        rows
    )
    pts: dict[str, tuple[list[int], list[float], list[float]]] = defaultdict(lambda: ([], [], []))
    meta = meta or RunMeta()
    end_keys = _end_of_run_keys(rows)
    counts: Counter[str] = Counter()
    for row in rows:
        counts.update(row.keys())
    names = paired_names(counts, namespace="train", extra=aliases, counts=counts)
    for i, row in enumerate(rows):
        step_v = as_float(row.get(step_key))
        if step_v is None:
            step_v = as_float(row.get("_step"))
        if step_v is None or not math.isfinite(step_v):
            step_v = float(i)
        wall = as_float(row.get("_timestamp"))
        wall_f = math.nan if wall is None else wall
        for key, value in row.items():
            if key.startswith("_") or key in _STEP_KEYS or key == step_key:
                continue
            num = as_float(value)
            if num is None:
                continue
            if key in end_keys:
                # end-of-run values (older Trainer integrations logged them as a history row)
                if not _in_range(num):
                    continue
                meta.summary[key.removeprefix("train/")] = num
                continue
            s, v, w = pts[names[key]]
            s.append(int(step_v))
            v.append(num)
            w.append(wall_f)
    metrics = {}
    restarts: set[int] = set()
    dropped = OutOfRange()
    for cname, (s, v, w) in pts.items():
        series, r = build_series(cname, s, v, w, dropped=dropped)
        metrics[cname] = series
        restarts.update(r)
    run = Run(
        source=source,
        format=fmt,
        name=name,
        meta=meta,
        metrics=metrics,
        warnings=list(warnings or []),
    )
    return finish_run(run, restarts=restarts, dropped=dropped, infer_loss=True)


def _read_folder(folder: Path, aliases: dict[str, str] | None) -> Run:
    logs = _log_files(folder)
    history = _history_file(folder)
    if not logs and history is not None:  # an older run folder: wandb-history.jsonl (+ config)
        from curvediag.ingest.wandb_tables import HISTORY

        run = HISTORY.read_all(history, aliases=aliases)[0]
        return run.model_copy(update={"format": FORMAT})
    meta = RunMeta()
    warnings: list[str] = []
    rows: list[dict[str, object]] = []
    name = folder.name
    for log_path in logs:
        log = read_wandb_log(log_path, warn=False)
        warnings += log.warnings
        rows += log.history
        apply_trainer_config(meta, log.config)
        meta.summary.update({k: v for k, v in log.summary.items() if _in_range(v)})
        disp = log.run.get("display_name") or log.run.get("run_id")
        if isinstance(disp, str) and disp:
            name = disp
        code = log.run.get("exit_code")
        # the last log decides: an attempt that crashed and was resumed did not end the run
        meta.exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
        meta.exit_recorded = meta.exit_code is not None
        if isinstance(code, int) and code != 0:
            warnings.append(f"the W&B run exited with code {code} (crashed or killed)")
            meta.finished = False
    metadata = folder / "files" / "wandb-metadata.json"
    if metadata.is_file():
        try:
            info = json.loads(metadata.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            warnings.append(f"{metadata}: unreadable W&B metadata, ignored")
        else:
            if isinstance(info, dict):
                keep = ("program", "args", "python", "gpu", "gpu_count", "cpu_count", "startedAt")
                meta.hyperparameters["wandb_metadata"] = {k: info[k] for k in keep if k in info}
    config_yaml = folder / "files" / "config.yaml"
    if config_yaml.is_file():
        from curvediag.ingest.wandb_tables import read_wandb_config

        try:
            apply_trainer_config(meta, read_wandb_config(config_yaml))
        except MalformedRunError as exc:
            warnings.append(str(exc))
    if "train_runtime" in meta.summary and meta.finished is None:
        meta.finished = True
    if len(logs) > 1:
        warnings.append(f"merged {len(logs)} run-*.wandb logs (the run was resumed)")
    run = history_to_run(
        rows,
        source=str(logs[0] if len(logs) == 1 else folder),
        name=name,
        fmt=FORMAT,
        aliases=aliases,
        meta=meta,
        warnings=warnings,
    )
    return run


def read_all(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Every W&B run at ``path`` (a ``run-*.wandb`` file, a run folder, or a ``wandb/`` tree).

    Raises:
        MalformedRunError: Nothing W&B-shaped is here, or a log is not a W&B log.
    """
    if path.is_file():
        folder = path.parent
        if path in _log_files(folder) and len(_log_files(folder)) == 1:
            return [_read_folder(folder, aliases)]
        log = read_wandb_log(path, warn=False)
        meta = RunMeta()
        apply_trainer_config(meta, log.config)
        return [
            history_to_run(
                log.history,
                source=str(path),
                name=path.stem.removeprefix("run-"),
                fmt=FORMAT,
                aliases=aliases,
                meta=meta,
                warnings=log.warnings,
            )
        ]
    folders = run_folders(path)
    if not folders:
        raise MalformedRunError(path, "no W&B run folder (run-*/ with a run-*.wandb log) here")
    return [_read_folder(f, aliases) for f in folders]
