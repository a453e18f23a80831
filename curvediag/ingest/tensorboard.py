"""Reader for TensorBoard event files: a file, a run folder, or a tree of runs.

Layouts handled: the Trainer's ``runs/<date_host>/`` (one event file per (re)start, merged with
the later write winning), Keras' ``train/`` and ``validation/`` writers that belong to one run,
and several runs side by side (each becomes its own run). The Trainer's arguments come from its
``args/text_summary`` text summary; hparams summaries go to the hyperparameters.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from curvediag.errors import MalformedRunError
from curvediag.ingest import _tfevents
from curvediag.ingest._tabular import assign_names
from curvediag.ingest.aliases import paired_names
from curvediag.ingest.layouts import is_event_file
from curvediag.ingest.trainer_args import (
    apply_lightning_hparams,
    apply_trainer_config,
    apply_ultralytics_args,
    parse_args_text,
)
from curvediag.model import Run, RunMeta
from curvediag.normalize import OutOfRange, build_series, finish_run

__all__ = ["FORMAT", "read_all", "sniff"]

FORMAT = "tensorboard"
_EVAL_DIRS = {"validation", "valid", "val", "eval", "evaluation", "test"}
_TRAIN_DIRS = {"train", "training"}
#: End-of-run values the Trainer logs as scalars: they belong to the summary, not the curves.
_SUMMARY_TAGS = {
    "train/train_runtime",
    "train/train_samples_per_second",
    "train/train_steps_per_second",
    "train/total_flos",
    "train/train_loss",
}


def _is_event_file(p: Path) -> bool:
    return is_event_file(p.name)


def sniff(path: Path) -> bool:
    """True for an event file, or a folder with event files in it (at any depth)."""
    if path.is_file():
        return _is_event_file(path)
    if path.is_dir():
        return bool(_tfevents.iter_event_files(path))
    return False


def _group(files: list[Path]) -> dict[Path, list[tuple[Path, str]]]:
    """Event files by run folder, with the role ('', 'train' or 'eval') of their writer."""
    groups: dict[Path, list[tuple[Path, str]]] = defaultdict(list)
    for f in files:
        parent = f.parent
        name = parent.name.lower()
        if name in _EVAL_DIRS:
            groups[parent.parent].append((f, "eval"))
        elif name in _TRAIN_DIRS:
            groups[parent.parent].append((f, "train"))
        else:
            groups[parent].append((f, ""))
    return groups


def _add_scalars_split(folder: Path, data: _tfevents.EventFileData) -> str | None:
    """The split of a folder ``SummaryWriter.add_scalars(tag, {split: value})`` wrote:
    ``<tag>_<split>/`` (``/`` in the tag written as ``_``), its file holding only ``tag``."""
    if len(data.scalars) != 1:
        return None
    prefix = next(iter(data.scalars)).replace("/", "_") + "_"
    split = folder.name[len(prefix) :]
    return split if folder.name.startswith(prefix) and split else None


def _with_split(data: _tfevents.EventFileData, split: str) -> _tfevents.EventFileData:
    """The file's scalars under ``<tag><split>`` (``split`` is ``/val``)."""
    scalars = {tag + split: col for tag, col in data.scalars.items()}
    return dataclasses.replace(data, scalars=scalars)


def _fold_add_scalars(
    groups: dict[Path, list[tuple[Path, str]]], read: dict[Path, _tfevents.EventFileData]
) -> None:
    """Fold the sub-writers of ``add_scalars`` (``Loss_train/``, ``Loss_val/`` beside the run's
    own event file) into their run, as ``Loss/train`` and ``Loss/val``."""
    for folder in sorted(groups, key=lambda p: len(p.parts), reverse=True):
        members = groups[folder]
        if folder.parent not in groups or any(role for _, role in members):
            continue
        for f, _ in members:
            read.setdefault(f, _tfevents.read_event_file(f, warn=False))
        splits = {_add_scalars_split(folder, read[f]) for f, _ in members}
        split = splits.pop() if len(splits) == 1 else None
        if split is not None:
            groups[folder.parent] += [(f, "/" + split) for f, _ in groups.pop(folder)]


def _read_group(
    run_dir: Path,
    members: list[tuple[Path, str]],
    aliases: dict[str, str] | None,
    cache: dict[Path, _tfevents.EventFileData],
) -> Run:
    steps: dict[str, list[np.ndarray]] = defaultdict(list)
    values: dict[str, list[np.ndarray]] = defaultdict(list)
    walls: dict[str, list[np.ndarray]] = defaultdict(list)
    meta = RunMeta()
    warnings: list[str] = []
    texts: dict[str, str] = {}
    read = [
        (cache.get(path) or _tfevents.read_event_file(path, warn=False), role)
        for path, role in members
    ]
    # an add_scalars sub-writer's tag gets its split: Loss -> Loss/val
    read = [
        (_with_split(data, role), "") if role.startswith("/") else (data, role)
        for data, role in read
    ]
    # Lightning's <name>_step / <name>_epoch pairs are named over all the files of a role
    tags: dict[str, Counter[str]] = defaultdict(Counter)
    last: dict[str, int] = {}
    for data, role in read:
        for tag, col in data.scalars.items():
            tags[role][tag] += int(col.values.size)
            if col.steps.size:
                last[tag] = max(last.get(tag, 0), int(col.steps.max()))
    named = {}
    for role, keys in tags.items():
        paired = paired_names(
            keys, namespace="eval" if role == "eval" else "train", extra=aliases, counts=keys
        )
        # two curves for one name (a plain "loss" every ~70 steps beside Lightning's
        # train_loss_step every 50; a hand-written Loss/Validation at x = epoch beside
        # val_loss): the one with more points keeps the name (ties: the one reaching the later
        # step), the other its own; never one series of both, which reads as a resumed run
        rank = {k: (keys[k], last.get(k, 0)) for k in keys}
        named[role], msgs = assign_names(list(keys), paired.__getitem__, rank, split_words=False)
        warnings += msgs
    for data, role in read:
        warnings += data.warnings
        texts.update(data.texts)
        for k, v in data.hparams.items():
            meta.hyperparameters.setdefault(k, v)
        for tag, col in data.scalars.items():
            if tag in _SUMMARY_TAGS:
                if col.values.size:
                    meta.summary[tag.removeprefix("train/")] = float(col.values[-1])
                continue
            name = named[role].get(tag)
            if name is None:
                continue  # its name and its own name are both taken (assign_names said so)
            if role == "eval" and name.startswith("train/"):
                name = "eval/" + name.removeprefix("train/")
            steps[name].append(col.steps)
            values[name].append(col.values)
            walls[name].append(col.wall_times)
    args = texts.get("args/text_summary")
    if args:
        apply_trainer_config(meta, parse_args_text(args))
    apply_lightning_hparams(meta, run_dir, warnings)
    # YOLOv5 / YOLOv7 keep their options (epochs planned) in opt.yaml beside the event file
    apply_ultralytics_args(meta, run_dir, warnings)
    if meta.summary:
        meta.finished = True
    metrics = {}
    restarts: set[int] = set()
    dropped = OutOfRange()
    for name in steps:
        s, r = build_series(
            name,
            np.concatenate(steps[name]),
            np.concatenate(values[name]),
            np.concatenate(walls[name]),
            dropped=dropped,
        )
        metrics[name] = s
        restarts.update(r)
    if len(members) > 1:
        warnings.append(f"merged {len(members)} event files")
    if not metrics:
        warnings.append("the event files hold no scalars (only text or other summaries)")
    run = Run(
        source=str(run_dir),
        format=FORMAT,
        name=run_dir.name or str(run_dir),
        meta=meta,
        metrics=metrics,
        warnings=warnings,
    )
    return finish_run(run, restarts=restarts, dropped=dropped, infer_loss=True)


def read_all(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Every run under ``path`` (an event file, a run folder or a tree of runs).

    Raises:
        MalformedRunError: No event file, or an event file that is not one.
    """
    files = [path] if path.is_file() else _tfevents.iter_event_files(path)
    if not files:
        raise MalformedRunError(path, "no TensorBoard event files (events.out.tfevents.*) here")
    groups = _group(files)
    cache: dict[Path, _tfevents.EventFileData] = {}
    if path.is_dir():
        _fold_add_scalars(groups, cache)
    runs = []
    for run_dir, members in sorted(groups.items()):
        runs.append(_read_group(run_dir if path.is_dir() else path.parent, members, aliases, cache))
    return runs
