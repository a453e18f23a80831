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
    hits = sum(1 for line in lines if any(p.match(line.strip()) for p in _PATTERNS))
    return hits >= _MIN_MATCHES


def read_all(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """The run in a nanoGPT, build-nanogpt or llm.c text log."""
    text = read_text(path, "text training log")
    rows: list[dict[str, Any]] = []
    planned: int | None = None
    last_step = 0
    for raw in text.splitlines():
        line = raw.strip()
        if m := _NANOGPT_EVAL.match(line):
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
            "llm.c 'step N/M | loss X')",
        )
    run = plain_run(path, rows_table(rows), FORMAT, [], aliases)
    if planned:
        run.meta.max_steps = planned
    return [run]


READER = TableReader(FORMAT, sniff, read_all)
