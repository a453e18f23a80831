"""Reader for the Hugging Face Trainer's ``trainer_state.json``.

Accepts the file itself, an output folder holding it, or a folder of ``checkpoint-N/``
subfolders (the latest checkpoint wins). ``training_args.bin`` beside it is a pickle and is
never opened.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from curvediag.errors import MalformedRunError, UnrecognizedFormatError
from curvediag.ingest._progress import tell
from curvediag.ingest._tabular import head_bytes, read_text
from curvediag.ingest.aliases import canonical_name
from curvediag.ingest.layouts import CHECKPOINT_DIR, STATE_NAME
from curvediag.model import Run, RunMeta
from curvediag.normalize import (
    MAX_ABS_VALUE,
    MAX_STEP,
    OutOfRange,
    as_float,
    build_series,
    finish_run,
)

__all__ = ["FORMAT", "find_state_file", "read", "read_all", "run_from_history", "sniff"]

FORMAT = "hf-trainer"
_CHECKPOINT = CHECKPOINT_DIR
#: Keys of the final summary entry the Trainer appends at the end of training.
_SUMMARY_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second"}
_META_INT = ("global_step", "max_steps", "train_batch_size", "best_global_step")
_META_FLOAT = ("num_train_epochs", "epoch", "logging_steps", "eval_steps", "save_steps")


def find_state_file(path: Path) -> tuple[Path, str | None]:
    """Locate the trainer_state.json for a file or folder.

    Returns:
        (the file, the checkpoint folder name used when it came from ``checkpoint-N/``).

    Raises:
        UnrecognizedFormatError: The folder holds no trainer_state.json.
    """
    if path.is_file():
        return path, None
    direct = path / STATE_NAME
    checkpoints = []
    if path.is_dir():
        for child in path.iterdir():
            m = _CHECKPOINT.match(child.name)
            if m and (child / STATE_NAME).is_file():
                checkpoints.append((int(m.group(1)), child))
    if direct.is_file():
        return direct, None
    if checkpoints:
        _, latest = max(checkpoints)
        return latest / STATE_NAME, latest.name
    raise UnrecognizedFormatError(path, f"no {STATE_NAME} here or in a checkpoint-N/ subfolder")


def sniff(path: Path) -> bool:
    """True when ``path`` looks like a Trainer state file or output folder."""
    if path.is_file():
        if path.name == STATE_NAME:
            return True
        # a state saved or committed under another name (state.json, even __init__.py): the
        # JSON object holding the Trainer's log_history, whatever the file is called. Any other
        # file (a CSV, an event file) costs one small read, not the 64 KB a JSON file gets
        if path.suffix != ".json" and not head_bytes(path, 256).lstrip().startswith(b"{"):
            return False
        return b'"log_history"' in head_bytes(path, 1 << 16)
    try:
        find_state_file(path)
    except UnrecognizedFormatError:
        return False
    return True


def _load_json(path: Path) -> Any:
    text = read_text(path, "trainer_state.json")
    try:
        tell(path, "parsing", len(text), len(text))
        # Python's json accepts the bare NaN / Infinity / -Infinity tokens the Trainer writes.
        return json.loads(text)
    except json.JSONDecodeError as exc:
        tail = text.rstrip()
        hint = "; the file looks truncated" if not tail.endswith(("}", "]")) else ""
        raise MalformedRunError(
            path, f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno}){hint}"
        ) from None
    except RecursionError:
        raise MalformedRunError(path, "JSON nested too deeply") from None


def _number(v: Any) -> float | None:
    """A finite number within range (for metadata), else None."""
    f = as_float(v)
    if f is None or not math.isfinite(f) or abs(f) > MAX_ABS_VALUE:
        return None
    return f


def read_all(path: str | Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """The reader protocol's entry (:mod:`curvediag.ingest.base`): a Trainer state holds one
    run."""
    return [read(path, aliases=aliases)]


def read(path: str | Path, *, aliases: dict[str, str] | None = None) -> Run:
    """Read a trainer_state.json (or a folder holding one) into a :class:`Run`.

    Args:
        path: The file, an output folder, or a folder of ``checkpoint-N/`` folders.
        aliases: Extra metric-name mappings (raw key -> canonical name).

    Raises:
        MalformedRunError: The file is missing, unreadable, not JSON, or not a Trainer state.
        UnrecognizedFormatError: A folder holds no trainer_state.json.
    """
    p = Path(path)
    if not p.exists():
        raise MalformedRunError(p, "file not found")
    state_path, checkpoint = find_state_file(p)
    state = _load_json(state_path)
    history = _log_history(state, state_path)
    warnings: list[str] = []
    if not history:
        warnings.append(f"{state_path}: log_history is empty (nothing was logged yet)")
    if checkpoint:
        warnings.append(f"read {checkpoint}/{STATE_NAME} (the latest checkpoint)")
    return run_from_history(
        state_path,
        history,
        name=_run_name(state_path),
        fmt=FORMAT,
        state=state,
        checkpoint=checkpoint,
        warnings=warnings,
        aliases=aliases,
    )


def run_from_history(
    source: Path,
    history: list[Any],
    *,
    name: str,
    fmt: str,
    state: dict[str, Any] | None = None,
    checkpoint: str | None = None,
    warnings: list[str] | None = None,
    aliases: dict[str, str] | None = None,
) -> Run:
    """A :class:`Run` from Trainer log entries (``log_history``, or the same dicts printed to
    the console), each with a numeric ``step``; ``state`` is the rest of a trainer_state.json."""
    points, summary, bad_entries = _collect_points(history, aliases)
    notes = []
    if bad_entries:
        notes.append(
            f"{source}: skipped {bad_entries} log_history entries without a numeric 'step'"
        )
    notes.extend(warnings or ())
    metrics = {}
    restarts: set[int] = set()
    dropped = OutOfRange()
    for metric, (steps, values) in points.items():
        series, r = build_series(metric, steps, values, dropped=dropped)
        metrics[metric] = series
        restarts.update(r)
    run = Run(
        source=str(source),
        format=fmt,
        name=name,
        meta=_run_meta(state or {}, summary, checkpoint),
        metrics=metrics,
        warnings=notes,
    )
    return finish_run(run, restarts=restarts, dropped=dropped)


def _log_history(state: Any, state_path: Path) -> list[Any]:
    """The state's ``log_history`` list; anything else is a MalformedRunError."""
    if not isinstance(state, dict):
        raise MalformedRunError(
            state_path,
            f"expected a JSON object with 'log_history', found a {type(state).__name__}",
        )
    history = state.get("log_history")
    if history is None:
        raise MalformedRunError(state_path, "no 'log_history' key: not a trainer_state.json")
    if not isinstance(history, list):
        raise MalformedRunError(
            state_path, f"'log_history' should be a list, found a {type(history).__name__}"
        )
    return history


_Points = dict[str, tuple[list[Any], list[float]]]


def _collect_points(
    history: list[Any], aliases: dict[str, str] | None
) -> tuple[_Points, dict[str, Any], int]:
    """The numbers of every log entry by canonical metric name, the final summary entry's
    numbers, and how many entries had no numeric step."""
    points: _Points = defaultdict(lambda: ([], []))
    summary: dict[str, Any] = {}
    bad_entries = 0
    names: dict[tuple[str, bool], str] = {}  # canonical name of each key, computed once
    for entry in history:
        if not isinstance(entry, dict):
            bad_entries += 1
            continue
        # the end-of-training summary holds train_loss, never a loss: a log entry that also
        # carries its throughput so far (train_runtime, train_tokens_per_second: LLaMA-Factory,
        # include_num_input_tokens_seen) is an ordinary log
        if _SUMMARY_KEYS & entry.keys() and "loss" not in entry:
            summary.update({k: f for k, v in entry.items() if (f := _number(v)) is not None})
            continue
        step = entry.get("step")
        if as_float(step) is None:
            bad_entries += 1
            continue
        is_eval = any(k.startswith("eval_") for k in entry)
        for key, value in entry.items():
            if key == "step":
                continue
            kind = type(value)  # exact types: fast, and booleans are not numbers
            if kind is float:
                num = value
            elif kind is int:
                num = float(as_float(value) or 0.0)  # hundreds of digits: out of range
            else:
                continue  # strings such as remaining_time, nested dicts, booleans
            name = names.get((key, is_eval))
            if name is None:
                name = (
                    "train/epoch"
                    if key == "epoch"
                    else canonical_name(
                        key, namespace="eval" if is_eval else "train", extra=aliases
                    )
                )
                names[(key, is_eval)] = name
            steps, values = points[name]
            steps.append(step)
            values.append(num)
    return points, summary, bad_entries


def _run_meta(state: dict[str, Any], summary: dict[str, Any], checkpoint: str | None) -> RunMeta:
    """Run metadata from the state's top-level keys (steps, cadences, best checkpoint, trial
    parameters, early stopping) and its final summary entry."""
    meta = RunMeta(
        summary=summary,
        finished=bool(summary) or None,
        checkpoint_used=checkpoint,
    )
    for key in _META_INT:
        v = _number(state.get(key))
        if v is not None and abs(v) <= MAX_STEP:
            setattr(meta, key, int(v))
    for key in _META_FLOAT:
        v = _number(state.get(key))
        if v is not None and v > 0:
            setattr(meta, key, v)
    meta.best_metric = _number(state.get("best_metric"))
    if isinstance(state.get("best_model_checkpoint"), str):
        meta.best_model_checkpoint = state["best_model_checkpoint"]
    trial = state.get("trial_params")
    if isinstance(trial, dict):
        meta.hyperparameters.update(trial)
    _early_stopping(meta, state.get("stateful_callbacks"))
    if meta.global_step is not None and meta.max_steps and meta.global_step < meta.max_steps:
        meta.finished = False
    return meta


def _early_stopping(meta: RunMeta, callbacks: Any) -> None:
    """Whether EarlyStoppingCallback ended the run: its patience counter reached its patience
    and the Trainer was told to stop (``stateful_callbacks``, transformers 4.39+)."""
    if not isinstance(callbacks, dict):
        return
    es = callbacks.get("EarlyStoppingCallback")
    if isinstance(es, list):  # several instances are saved as a list
        es = es[0] if es else None
    if not isinstance(es, dict):
        return
    patience = _number((es.get("args") or {}).get("early_stopping_patience"))
    counter = _number((es.get("attributes") or {}).get("early_stopping_patience_counter"))
    control = callbacks.get("TrainerControl")
    stop = isinstance(control, dict) and (control.get("args") or {}).get("should_training_stop")
    if patience is None or counter is None:
        return
    meta.early_stopping_patience = int(patience)
    meta.early_stopped = bool(counter >= patience and stop is True)


def _run_name(state_path: Path) -> str:
    folder = state_path.resolve().parent
    if _CHECKPOINT.match(folder.name):
        folder = folder.parent
    return folder.name or str(folder)
