"""Reader for the plain-text logs that GPT training scripts print (``text-log``).

Three layouts, each recognised line by line; anything else in the file (banners, tables of
settings, sample generations, a scheduler's messages) is skipped:

- nanoGPT's ``train.py`` output, often saved as ``log.txt`` or a job's stdout::

      step 250: train loss 1.9635, val loss 2.0707
      iter 260: loss 1.8832, time 35.61ms, mfu 10.41%

  ``iter`` lines give the train loss; ``step`` lines give the evaluation (the val loss, and
  the train loss estimated on the same number of batches, kept as ``train/loss_estimate``).
- build-nanogpt's ``log/log.txt``: ``<step> train <loss>``, ``<step> val <loss>``,
  ``<step> hella <accuracy>``.
- llm.c's stdout: ``step    1/19560 | loss 11.01 (+nanz)| norm 4.5 (+nanz)| lr 8.6e-07 | ...``
  and ``val loss 10.98`` lines (a val loss belongs to the last step printed before it, 0 at
  the start); the total after the slash is the planned number of steps.
- A loop's one line per epoch: ``epoch 3  train_loss 0.1352  val_loss 0.1954  F1 0.601``,
  ``Epoch [3/10], Loss: 0.5123, Val Loss: 0.61``, ``Epoch 3/10: loss=0.52, val_loss=0.61``
  (names and values as ``name value``, ``name: value`` or ``name=value``; at least one name
  holds "loss"). Keras's ``fit`` output, an ``Epoch 3/10`` line followed by a progress line
  ``... - loss: 0.5123 - accuracy: 0.81 - val_loss: 0.4567``, is read the same way. Each row is
  numbered by its epoch; the total after the slash is the planned number of epochs.

Only the shapes above are read: a free-form print log is not guessed at.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from curvediag.errors import MalformedRunError
from curvediag.ingest._tabular import TableReader, head_bytes, read_text, rows_table
from curvediag.ingest.csv_logs import plain_run
from curvediag.model import Run

__all__ = ["FORMAT", "READER", "read_all", "sniff"]

FORMAT = "text-log"

_NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|-?inf))"
_NANOGPT_EVAL = re.compile(rf"^step (\d+): train loss {_NUM}, val loss {_NUM}\s*$", re.IGNORECASE)
_NANOGPT_ITER = re.compile(rf"^iter (\d+): loss {_NUM}(?:, time {_NUM}ms)?", re.IGNORECASE)
_BUILD_NANOGPT = re.compile(rf"^(\d+) (train|val|hella) {_NUM}\s*$", re.IGNORECASE)
_LLMC_STEP = re.compile(
    rf"^step\s+(\d+)/(\d+) \| (?:train )?loss\s+{_NUM}(?: \([^)]*\))?\s*\|"
    rf"(?: norm\s+{_NUM}(?: \([^)]*\))?\s*\|)?(?: lr {_NUM})?",
    re.IGNORECASE,
)
_LLMC_VAL = re.compile(rf"^val loss {_NUM}\s*$", re.IGNORECASE)
_EPOCH_LINE = re.compile(
    r"^epoch\s*[\[(]?\s*(\d+)\s*(?:/\s*(\d+))?\s*[\])]?\s*[:,|-]?\s+(.*\S)\s*$", re.IGNORECASE
)
_KERAS_EPOCH = re.compile(r"^epoch (\d+)/(\d+)\s*$", re.IGNORECASE)
_KERAS_PROGRESS = re.compile(rf"\] - .*\bloss: {_NUM}")
_WORD = r"[A-Za-z_][\w./-]*"
_END = r"(?=[\s,|;)]|$)"
#: ``name: value`` / ``name = value`` (a name of one or more words), or ``name value``.
_PAIR = re.compile(rf"({_WORD}(?: {_WORD})*)\s*[:=]\s*{_NUM}{_END}|({_WORD})\s+{_NUM}{_END}")
_PATTERNS = (_NANOGPT_EVAL, _NANOGPT_ITER, _BUILD_NANOGPT, _LLMC_STEP, _LLMC_VAL)

#: Suffixes a saved stdout carries (a job's ``.out`` / ``.log``, a ``log.txt``), or none.
_SUFFIXES = frozenset({".txt", ".log", ".out", ""})
#: Lines of the file's head that must match before it is read as a training log.
_MIN_MATCHES = 3


def sniff(path: Path) -> bool:
    """A ``.txt`` / ``.log`` / ``.out`` file whose head holds at least three lines in one of
    the layouts above."""
    if not path.is_file() or path.suffix.lower() not in _SUFFIXES:
        return False
    head = head_bytes(path)
    if b"\0" in head:
        return False
    lines = head.decode("utf-8", errors="replace").splitlines()
    hits = sum(
        1
        for raw in lines
        if any(p.match(line := raw.strip()) for p in _PATTERNS)
        or _epoch_pairs(line)
        or _KERAS_EPOCH.match(line)
        or _KERAS_PROGRESS.search(line)
    )
    return hits >= _MIN_MATCHES


def _pairs(text: str) -> dict[str, float]:
    """The ``name value`` pairs of a printed line, first value of each name kept."""
    out: dict[str, float] = {}
    for m in _PAIR.finditer(text):
        name, value = (m[1], m[2]) if m[1] is not None else (m[3], m[4])
        out.setdefault(name.replace(" ", "_"), float(value))
    return out


def _epoch_pairs(line: str) -> tuple[int, int | None, dict[str, float]] | None:
    """A one-line-per-epoch print: (epoch, planned epochs or None, its values), when at least
    one name holds "loss"."""
    m = _EPOCH_LINE.match(line)
    if m is None:
        return None
    values = _pairs(m[3])
    if not _has_loss(values):
        return None
    return int(m[1]), int(m[2]) if m[2] else None, values


def _has_loss(values: dict[str, float]) -> bool:
    return any("loss" in k.lower() for k in values)


def _keras_pairs(line: str) -> dict[str, float]:
    """The values of Keras's last progress-bar update on a line (``- loss: 0.51 - ...``)."""
    last = line.rsplit("\r", 1)[-1].rsplit("]", 1)[-1]
    values = _pairs(last)
    return values if _has_loss(values) else {}


def read_all(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """The run in a nanoGPT, build-nanogpt, llm.c or per-epoch text log."""
    text = read_text(path, "text training log")
    rows: list[dict[str, Any]] = []
    planned: int | None = None
    planned_epochs: int | None = None
    keras_epoch: int | None = None
    last_step = 0
    for raw in text.split("\n"):
        line = raw.strip()
        if m := _KERAS_EPOCH.match(line):
            keras_epoch, planned_epochs = int(m[1]), int(m[2])
        elif keras_epoch is not None and (values := _keras_pairs(line)):
            rows.append({"epoch": keras_epoch, **values})
            keras_epoch = None
        elif epoch_line := _epoch_pairs(line):
            epoch, total, values = epoch_line
            planned_epochs = total or planned_epochs
            rows.append({"epoch": epoch, **values})
        elif m := _NANOGPT_EVAL.match(line):
            step = int(m[1])
            rows.append(
                {"step": step, "train/loss_estimate": float(m[2]), "eval/loss": float(m[3])}
            )
        elif m := _NANOGPT_ITER.match(line):
            row: dict[str, Any] = {"step": int(m[1]), "train/loss": float(m[2])}
            if m[3] is not None:
                row["system/step_time_ms"] = float(m[3])
            rows.append(row)
        elif m := _BUILD_NANOGPT.match(line):
            name = {"train": "train/loss", "val": "eval/loss", "hella": "eval/hellaswag_acc"}
            rows.append({"step": int(m[1]), name[m[2].lower()]: float(m[3])})
        elif m := _LLMC_STEP.match(line):
            last_step = int(m[1])
            planned = int(m[2]) or planned
            row = {"step": last_step, "train/loss": float(m[3])}
            if m[4] is not None:
                row["train/grad_norm"] = float(m[4])
            if m[5] is not None:
                row["train/learning_rate"] = float(m[5])
            rows.append(row)
        elif m := _LLMC_VAL.match(line):
            rows.append({"step": last_step, "eval/loss": float(m[1])})
    if not rows:
        raise MalformedRunError(
            path,
            "no training-log lines (nanoGPT 'iter N: loss X', build-nanogpt 'N train X', "
            "llm.c 'step N/M | loss X', 'epoch N train_loss X val_loss Y')",
        )
    if any("epoch" in r for r in rows) and any("step" in r for r in rows):
        raise MalformedRunError(path, "mixes per-epoch lines with per-step lines")
    run = plain_run(path, rows_table(rows), FORMAT, [], aliases)
    if planned:
        run.meta.max_steps = planned
    if planned_epochs:
        run.meta.num_train_epochs = planned_epochs
    return [run]


READER = TableReader(FORMAT, sniff, read_all)
