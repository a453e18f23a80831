"""Reader for the plain-text logs that training scripts print (``text-log``).

These layouts, each recognised line by line; anything else in the file (banners, tables of
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
  ``Epoch [3/10], Loss: 0.5123, Val Loss: 0.61``, ``Epoch 3/10: loss=0.52, val_loss=0.61``,
  ``Epoch: 3  Training Loss: 0.52  Validation Loss: 0.61``, ``Epoch 3 @ 10:27 PM : 0.98 C.E.
  Loss, 94.28% Accuracy`` (each value before its name), ``Train Epoch 3 --- train loss :
  0.52`` beside ``Test Epoch 3 --- test loss : 0.61``
  (names and values as ``name value``, ``name: value`` or ``name=value``; at least one name
  holds "loss"). Keras's ``fit`` output, an ``Epoch 3/10`` line followed by a progress line
  ``... - loss: 0.5123 - accuracy: 0.81 - val_loss: 0.4567``, is read the same way. Each row is
  numbered by its epoch; the total after the slash is the planned number of epochs.

- Hugging Face Trainer's console output: each log entry printed as a Python dict
  (``{'loss': 1.6282, 'learning_rate': 1.86e-05, 'epoch': 0.22}``, ``{'eval_loss': 0.41, ...}``
  and the closing ``{'train_runtime': ..., 'train_loss': ...}``), with progress bars and other
  output around them. The prints carry no step: when the training progress bar's start
  (``| 0/2260 [00:00<?, ?it/s]``) and the closing summary are printed, a print's step is its
  epoch x the bar's total / the summary's epoch, and the total is the planned number of steps;
  otherwise steps are hundredths of an epoch. The epoch is kept as ``train/epoch``. A stdout
  that holds several Trainer runs one after the other (a closing summary, or the epoch going
  back) gives one run each, in order.
- OpenNMT-py's log: ``Step 50/100000; acc: 12.00; ppl: 26.87; xent: 3.29; lr: 1.00000; ...``
  (the cross-entropy is the train loss; the total after the slash is the planned number of
  steps) and ``Validation perplexity: 5.45`` / ``Validation accuracy: 71.3`` after it (the eval
  loss is the log of the perplexity). Its ``Early Stop!`` line marks a run its early stopping
  ended (``Decreasing patience: 0/2``: a patience of 2).

- spaCy's ``spacy train`` table (v3), its header, a rule of dashes, then a row per
  evaluation::

      E    #       LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE
      ---  ------  ------------  --------  ------  ------  ------  ------
        0     200        139.55   6818.43   77.07   77.18   76.96    0.77

  ``#`` is the step and ``E`` the epoch. Each ``LOSS`` is a component's loss summed over the
  steps since the row before; the train loss is the sum of the components' (the ``tok2vec``
  column, the gradient its listeners send back, only when it is the one loss). The row at step
  0 sums one batch, so its losses are left out. The scores are the dev set's (``ENTS_F`` is
  ``eval/ents_f1``, ``_P`` and ``_R`` precision and recall, ``SCORE`` the weighted score).

- pytorch-CycleGAN-and-pix2pix's console and ``loss_log.txt`` (and pix2pixHD's):
  ``(epoch: 1, iters: 20, time: 14.412, data: 0.080) G_GAN: 2.436 G_L1: 54.115 D_real: 0.167
  D_fake: 0.138``. ``iters`` counts the images of the epoch (``The number of training images =
  77`` gives their number; otherwise the most any epoch reached), so the step counts images
  over the epochs. The generator's terms (``G_*``, ``cycle_*``, ``idt_*``) add up to the loss
  it minimises, which is the train loss; the discriminator's (``D_*``) stay beside it.
  ``learning rate 0.0002000 -> 0.0001000`` sets the rate of the lines after it, and ``End of
  epoch 1 / 2`` gives the planned epochs.

- A loop's lines with nothing but names and values, one of them a loss and no counter
  (``Train Loss: 253686.6 Validate Loss 277412.7``, ``train loss = 0.339``): each such line is
  one logging step, numbered 1, 2, ...; behind a split's head (``- Train metrics: accuracy:
  0.404 ; loss: 1.633`` then ``- Eval metrics: ...``) the held-out lines share the step of the
  train line before them.

A logger's prefix before a line (``[2024-05-08 04:06:17,722 INFO]``, Python logging's
``2025-06-04 17:36:55,374 - INFO -``) is set aside first. Only the shapes above are read: a
free-form print log is not guessed at.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

from curvediag.errors import MalformedRunError
from curvediag.ingest._tabular import (
    TENSOR_REPR,
    TableReader,
    decode_console,
    head_bytes,
    read_bytes,
    rows_table,
)
from curvediag.ingest.csv_logs import plain_run, share_kept
from curvediag.ingest.hf_trainer import run_from_history
from curvediag.model import Run
from curvediag.normalize import names_a_cost

__all__ = ["FORMAT", "READER", "read_all", "sniff"]

FORMAT = "text-log"

#: The words that name a data split in printed names: the training set's and a held-out set's.
_TRAIN_SPLIT = "train|training"
_HELD_OUT_SPLIT = "val|valid|validation|test|eval"
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
#: One line per epoch: ``Epoch 3/10 - loss: 0.41``, ``Val Epoch 3: loss 0.61``, ``[Train] Epoch
#: 3 ...``, ``tr @ epoch 3/10 | Loss 0.139 | 41.6 (s)`` (a short tag before ``@``).
_EPOCH_LINE = re.compile(
    rf"^(?:(?P<split>{_TRAIN_SPLIT}|{_HELD_OUT_SPLIT})\s+|\[(?P<tag>[^\]]{{1,40}})\]\s*"
    r"|(?P<at>[A-Za-z]\w{0,11})\s+@\s+)?"
    r"\[?epoch\s*[:\[(]?\s*(?P<epoch>\d+)\s*\]?\s*(?:/\s*\[?\s*(?P<total>\d+))?\s*[\])]?"
    r"(?:\s*[:,|.-]*\s+|(?<=\])[:,|-]+\s*)"
    r"(?P<rest>.*\S)\s*$",
    re.IGNORECASE,
)
#: A name's word that says which split it is (``val_loss``, ``train acc``, ``Test Loss``).
_SPLIT_WORD = re.compile(
    rf"(?:^|[^a-z])(?:{_TRAIN_SPLIT}|{_HELD_OUT_SPLIT}|dev)(?:[^a-z]|$)", re.IGNORECASE
)
#: ... and the words of a held-out split.
_HELD_OUT_WORD = re.compile(rf"(?:^|[^a-z])(?:{_HELD_OUT_SPLIT}|dev)(?:[^a-z]|$)", re.IGNORECASE)
_KERAS_EPOCH = re.compile(r"^epoch (\d+)/(\d+)\s*$", re.IGNORECASE)
#: An epoch's head line with its values on the next line (face-recognition loops' ``Train
#: Epoch: 1/70 ...`` then ``    total_loss: 24.7161 time: 15m 1s``, ``Test Epoch: 5 ...`` then
#: ``    ave: 87.3500``): the split, the epoch, the planned epochs and the trailing dots. A bare
#: ``Epoch: 3`` is not one: many loops print it above several lines of their own.
_EPOCH_HEAD = re.compile(
    rf"^(?:({_TRAIN_SPLIT}|{_HELD_OUT_SPLIT})\s+)?epoch\s*:?\s*(\d+)(?:\s*/\s*(\d+))?"
    r"\s*(\.\.\.|\u2026)?\s*$",
    re.IGNORECASE,
)
_KERAS_PROGRESS = re.compile(rf"\] - .*\bloss: {_NUM}")
_WORD = r"[A-Za-z_][\w./@-]*"  # "Acc@1" too
_END = r"(?=%?(?:[\s,|;)\]]|$))"
#: ``name: value`` / ``name = value`` (a name of one or more words), or ``name value``.
_PAIR = re.compile(
    rf"({_WORD}(?: {_WORD})*)\s*[:=]\s*{_NUM}{_END}|({_WORD}(?: {_WORD})*)\s+{_NUM}{_END}"
    rf"|({_WORD}(?: {_WORD})*)\s*\(\s*{_NUM}\s*\)"  # "Mean Loss (0.1284)"
)
#: Hugging Face Trainer's console print of a log entry (``ProgressCallback`` writes
#: ``str(logs)``), anywhere on a line (a progress bar may precede it).
_HF_LOG = re.compile(r"\{'(?:loss|eval_[\w/.-]+|train_runtime)': [^{}]*\}")
_HF_PAIR = re.compile(rf"'([A-Za-z_][\w/.-]*)': '?{_NUM}'?(?=[,}}])")
#: The head of a split's line of metrics: ``- Train metrics:``, ``Eval metrics -``.
_SPLIT_HEAD = re.compile(
    rf"^-?\s*({_TRAIN_SPLIT}|evaluation|{_HELD_OUT_SPLIT})"
    r"(?:\s+(?:metrics?|set)\s*[:-]|\.|:)\s*",
    re.IGNORECASE,
)
#: PyTorch Lightning's note when Ctrl-C (or a scheduler's SIGINT) stops fit().
_GRACEFUL_STOP = re.compile(r"Detected KeyboardInterrupt, attempting graceful shutdown")
#: A Python traceback and the line naming the exception that ended it.
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
_EXCEPTION = re.compile(
    r"^([A-Za-z_][\w.]{0,80}(?:Error|Exception|Interrupt|Exit))(?::[ \t]*(.*))?$", re.MULTILINE
)
#: A tqdm bar that reached its total, with the values a loop set on it
#: (``100%|####| 1541/1541 [02:19<00:00, 11.08it/s, rpn_loss=0.24, total_loss=1.06]``).
_FINISHED_BAR = r"100%\|[^|]*\|\s*(\d+)/\1 \[[^\],]*,\s*[^\],]*(?:it/s|s/it)"
_BAR_DONE = re.compile(_FINISHED_BAR + r",\s*([^\]]*)\]")
#: PyTorch's examples (mnist/main.py and the loops copied from it): ``Train Epoch: 1
#: [640/60000 (1%)]\tLoss: 0.4123`` (a tqdm description may follow: ``Loss: 0.41: : 65it``).
_EXAMPLE_LINE = re.compile(
    r"^Train Epoch:\s*(\d+)\s*\[\s*(\d+)\s*/\s*(\d+)\s*\(\s*\d+%\)\]\s*(.*)$"
)
_TQDM_TAIL = re.compile(r":?\s*:\s*\d+it\b.*$")
#: An epoch and the batch within it, each out of its total (MiniMind's pretraining and
#: fine-tuning loops): ``Epoch:[1/2](100/9924), loss: 7.2804, lr: 0.00049989, ...``.
_EPOCH_BATCH_LINE = re.compile(
    r"^epoch\s*:?\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]\s*\(\s*(\d+)\s*/\s*(\d+)\s*\)\s*[:,|-]*\s*(.*\S)\s*$",
    re.IGNORECASE,
)
#: The MetricLogger of DeiT, MAE, DINO and the loops copied from them: ``Epoch: [3]  [40/625]
#: eta: 0:01:02  lr: 0.000100  loss: 0.6943 (0.6945)  time: 0.64  data: 0.05  max mem: 1634``
#: (each value its windowed median, the epoch's running mean after it in parentheses), then
#: ``Averaged stats: ...`` and the held-out pass's ``Test stats: ...`` / ``Validation stats:
#: ...`` (or DeiT's ``* Acc@1 81.2 Acc@5 95.4 loss 0.812``); PyTorch's ImageNet example and its
#: copies (``Epoch: [1][200/378]  Time 50.0  Loss 2.7974  Acc@1 67.49``, then `` * Acc@1 68.5
#: Acc@5 100.0`` or `` ** Acc@1 ...`` for the validation; a `` * Epoch 1, ...`` summary is the
#: training's). ``Start training for 300 epochs`` (or a printed configuration's ``Total epochs:
#: 20`` / ``Epochs: 200``) gives the plan.
_METRIC_LOGGER_LINE = re.compile(
    r"^epoch\s*:\s*\[\s*(\d+)\s*\]\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]\s+(.*\S)\s*$", re.IGNORECASE
)
_METRIC_LOGGER_EVAL = re.compile(
    rf"^(?:(?:{_HELD_OUT_SPLIT})\s+stats\s*:|\*{{1,2}})\s+(?!epoch\b)(.*\S)\s*$",
    re.IGNORECASE,
)
#: pytorch-CycleGAN-and-pix2pix's loss line (see the module's docstring), its LR change, its
#: dataset size and its end-of-epoch line (``End of epoch 1 / 2 \t Time Taken: 1101 sec``).
_GAN_LINE = re.compile(
    r"^\(epoch: (\d+), iters: (\d+)(?:, time: [\d.]+)?(?:, data: [\d.]+)?\)\s+(.*\S)\s*$"
)
_GAN_LR = re.compile(rf"^learning rate {_NUM} -> {_NUM}\s*$")
_GAN_IMAGES = re.compile(r"^The number of training images = (\d+)\s*$")
_GAN_EPOCH_END = re.compile(r"^End of epoch (\d+) / (\d+)\b")
_GAN_DISCRIMINATOR = re.compile(r"^D(?:_|$)")
_PLANNED_EPOCHS = re.compile(
    r"^(?:start training for \[?(\d+)\]? epochs\b"
    r"|(?:total |num_|number of )?epochs\s*[:=]\s*(\d+)\s*$)",
    re.IGNORECASE,
)
#: NGCF's log and the recommenders copied from it (KGAT, LightGCN ports): ``Epoch 19 [0.3s +
#: 0.2s]: train==[0.02482=0.00444 + 0.02039], recall=[0.03130, 0.06594], ndcg=[0.01713,
#: 0.02647]``: the total loss before its parts, and each ranking metric at its first cut-off.
_NGCF_LINE = re.compile(
    rf"^epoch\s+(\d+)\s*\[[^\]]*\]\s*:\s*train\s*==\s*\[\s*{_NUM}\s*(?:=[^\]]*)?\](.*)$",
    re.IGNORECASE,
)
_NGCF_METRIC = re.compile(rf"([A-Za-z][\w@-]*)\s*=\s*\[\s*{_NUM}")
#: A loop's one line per logging step: ``Iteration 100/10000, Loss: 10.2377, Grad Norm: 0.0``,
#: ``Step 20 | loss 1.23 | lr 3e-4``, ``Training Iteration 256: loss = 0.3176``,
#: ``<<<iteration:[20/2930] - total_loss: 0.9383`` (the total after the slash is the planned
#: number of steps; ``Batch [i/N]`` counts an epoch's batches).
_STEP_LINE = re.compile(
    r"^(?:<+\s*)?(?:train(?:ing)?\s+)?(?:iteration|iter|step|(?P<batch>batch))"
    r"\s*(?::\s*)?[\[(]?\s*(\d+)\s*(?:/\s*(\d+))?\s*[\])]?\s*[:,|-]*\s+(.*\S)\s*$",
    re.IGNORECASE,
)
#: A progress bar drawn by the loop itself, its count out of the plan and its values in
#: ``|`` fields: ``Training [===   ] 8.5% 5000/58874 | 4.62 it/s | loss=3.91 |
#: validation_loss=3.91`` (the count is the step; the total is the planned number of steps).
_DRAWN_BAR = re.compile(
    r"^[A-Za-z][\w ]{0,40}?\s*\[[=>#\-. *]*\]\s*\d+(?:\.\d+)?%\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$"
)
#: A line that is one JSON object (``{"epoch": 0, "step": 5, "loss": 156.04, "time": 6}``).
_JSON_LINE = re.compile(r"^\{\s*\"[^{}]*\}$")
#: A whole line of one ``name = value`` after a finished bar (``Mean Average Precision =
#: 28.06%``): the evaluation that followed that epoch's training.
_ONE_PAIR = re.compile(rf"^({_WORD}(?: {_WORD})*)\s*[:=]\s*{_NUM}%?$")
#: A tqdm bar drawn at its start, ``  0%|          | 0/2260 [00:00<?, ?it/s]`` (or, where the
#: console cannot draw it, ``  0% 0/2000 [00:00<?, ?it/s]``): its total.
_BAR_START = re.compile(r"(?:\||0%) 0/(\d+) \[00:00<\?, \?it/s\]")
#: A logger's prefix before the printed text: ``[2024-05-08 04:06:17,722 INFO] `` (OpenNMT-py
#: and many others), Python logging's ``2025-06-04 17:36:55,374 - [name - ]INFO - [[name] - ]``
#: (or ``... 17:36:55,374 [INFO] ``, the level in brackets) and
#: ``INFO:root:``, or a bare timestamp. A bracket that opens with an epoch count
#: (``[epoch:1/1200] [loss:0.23]``) is the record itself, not a prefix.
_LOG_PREFIX = re.compile(
    r"^(?:\[(?!\s*epoch\s*[:\d])[^\]]{0,80}\]\s*(?:-\s+)?"
    r"|(?:(?:\d{4}-)?\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?"
    r"(?:(?:\s+-\s+\S+)*?\s*[-:|]?\s*\[?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\]?\s*[-:|]*\s*"
    r"(?:\[?[\w.]+\]? [-|] )?|\s*-?\s*)"
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]*:)"
)
_ONMT_STEP = re.compile(r"^Step (\d+)(?:\s*/\s*(\d+))?;\s*(.*)$")
_ONMT_VAL = re.compile(rf"^Validation (perplexity|accuracy|xent): {_NUM}\s*$")
_ONMT_PATIENCE = re.compile(r"^Decreasing patience: \d+/(\d+)\s*$")
_ONMT_FIELDS = {
    "xent": "train/loss",
    "ppl": "train/perplexity",
    "acc": "train/accuracy",
    "lr": "train/learning_rate",
}
#: ``0.9816 C.E. Loss`` / ``94.28% Accuracy``: a value, then its name, up to a comma or the end.
_VALUE_FIRST = re.compile(
    rf"(?<![\w.:]){_NUM}%?\s+([A-Za-z][\w.]*(?: [A-Za-z][\w.]*)*)(?=\s*(?:[,;|]|$))"
)
_PATTERNS = (_NANOGPT_EVAL, _NANOGPT_ITER, _BUILD_NANOGPT, _LLMC_STEP, _LLMC_VAL)

#: A loop's closing summary of its train loss, the only loss some logs print: "Final training
#: loss: 1.1465", "Final train loss = 0.52".
_FINAL_LOSS = re.compile(rf"^final (?:training|train) loss\s*[:=]\s*{_NUM}\s*$", re.IGNORECASE)
#: Suffixes a saved stdout carries (a job's ``.out`` / ``.log``, a ``log.txt``), or none.
_SUFFIXES = frozenset({".txt", ".log", ".out", ""})
#: Suffixes of a table, which a loop sometimes gives to its printed lines (``train_log.csv``
#: holding ``Epoch:0, mask loss is 0.1411``): read as a console log only when its first line
#: is not a header (every comma-separated cell of it holds a digit) and the lines match.
_TABLE_SUFFIXES = frozenset({".csv", ".tsv"})
#: Lines of the file's head that must match before it is read as a training log.
_MIN_MATCHES = 3


def sniff(path: Path) -> bool:
    """A ``.txt`` / ``.log`` / ``.out`` file whose head holds at least three lines in one of
    the layouts above."""
    if not path.is_file():
        return False
    table = path.suffix.lower() in _TABLE_SUFFIXES
    if not table and path.suffix.lower() not in _SUFFIXES:
        return False
    head = head_bytes(path)
    if b"\0" in head:
        return False
    raws = head.decode("utf-8-sig", errors="replace").splitlines()
    if table and not _headless_text(raws):
        return False
    lines = [_unprefixed(raw) for raw in raws]
    if (
        _records(lines)[0]
        or _printed_history(lines)[0]
        or _spacy_table(lines)
        or _aligned_table(lines)
    ):
        return True
    hits = sum(
        1
        for line in lines
        if any(p.match(line) for p in _PATTERNS)
        or _epoch_pairs(line)
        or _ngcf_values(line)
        or _KERAS_EPOCH.match(line)
        or _epoch_head(line)
        or _KERAS_PROGRESS.search(line)
        or _HF_LOG.search(line)
        or _ONMT_STEP.match(line)
        or _bar_values(line)
        or _json_values(line)
        or _example_values(line)
        or _epoch_batch_values(line)
        or _step_values(line)
        or _drawn_bar_values(line)
        or _gan_values(line)
    )
    return hits >= _MIN_MATCHES or any(_FINAL_LOSS.match(line) for line in lines)


def _headless_text(raws: list[str]) -> bool:
    """Whether a ``.csv`` file's first line is printed text rather than a table's header:
    every comma-separated cell holds a digit and a letter (``Epoch:0, mask loss is 0.1411``),
    which no header of names and no row of bare numbers does."""
    first = next((r for r in raws if r.strip()), "")
    cells = [c.strip() for c in first.split(",")]
    return all(re.search(r"\d", c) and re.search(r"[A-Za-z]", c) for c in cells)


#: One list of a Keras ``History.history`` dict printed by the script (``print("train
#: history:", history.history)``): ``'val_loss': [0.69, 0.52, ...]``, one entry per epoch.
_PRINTED_LIST = re.compile(r"""['"]([A-Za-z_][\w/.-]*)['"]\s*:\s*\[([^\[\]]*)\]""")
#: An entry as numpy 2 prints it inside a list: ``np.float64(0.52)``.
_NUMPY_SCALAR = re.compile(r"^(?:np|numpy)\.(?:float|int)\d*\((.*)\)$")


def _printed_number(text: str) -> float | None:
    t = text.strip()
    if m := _NUMPY_SCALAR.match(t):
        t = m[1].strip()
    try:
        return float(t)  # also nan, inf, -inf as Python prints them
    except ValueError:
        return None


def _printed_history(lines: list[str]) -> tuple[list[dict[str, Any]], int]:
    """The per-epoch rows of the first printed ``History.history`` dict in ``lines`` (its lists
    of numbers, all of one length of 2 or more, one of them a loss), and its line; ([], -1)
    when there is none."""
    for index, line in enumerate(lines):
        if "{" not in line or "[" not in line:
            continue
        lists: dict[str, list[float]] = {}
        for m in _PRINTED_LIST.finditer(line):
            values = [_printed_number(x) for x in m[2].split(",") if x.strip()]
            if values and all(v is not None for v in values):
                lists[m[1]] = [v for v in values if v is not None]
        lengths = {len(v) for v in lists.values()}
        if len(lengths) != 1 or min(lengths) < 2:
            continue
        if not any(k.endswith("loss") for k in lists):
            continue
        n = lengths.pop()
        return [{"epoch": i + 1, **{k: v[i] for k, v in lists.items()}} for i in range(n)], index
    return [], -1


def _without_symbols(line: str) -> str:
    """``line`` without the pictographs, dingbats, their joiners and blanks it starts with."""
    i = 0
    while i < len(line) and (
        line[i].isspace() or unicodedata.category(line[i]) in ("So", "Sk", "Mn", "Cf")
    ):
        i += 1
    return line[i:]


def _unprefixed(raw: str) -> str:
    """A printed line without its surrounding blanks, its logger's prefix and a leading emoji
    (``📈 Epoch [1/50] - ...``), a printed tensor (``Train Loss:  tensor(2055.40,
    device='cuda:0')``) replaced by its number."""
    line = _LOG_PREFIX.sub("", raw.strip(), count=1)
    if line and not line[0].isascii():
        line = _without_symbols(line)
    if "%|" in line and (bar := _DESCRIBED_BAR_DONE.search(line)):
        line = line[: bar.start()]
    return _TENSOR.sub(r"\1", line) if "tensor(" in line else line


_TENSOR = re.compile(TENSOR_REPR)
#: A finished tqdm bar after the description a loop set on it, with nothing after its rate
#: (``Epoch: 1 | Loss: 10.804: 100%|██████| 2086/2086 [14:08<00:00,  2.46it/s]``): the line is
#: the description. A bar short of its total is left as it is, its values are a partial epoch's.
_DESCRIBED_BAR_DONE = re.compile(r"(?<=\S)\s*:?\s+" + _FINISHED_BAR + r"\]\s*$")


def _pairs(text: str) -> dict[str, float]:
    """The ``name value`` pairs of a printed line, first value of each name kept."""
    out: dict[str, float] = {}
    for m in _PAIR.finditer(text):
        name, value = next((m[i], m[i + 1]) for i in (1, 3, 5) if m[i] is not None)
        out.setdefault(name.replace(" ", "_"), float(value))
    return out


def _segment_pairs(text: str) -> dict[str, float]:
    """The pairs of a line cut into ``|`` segments, where a segment that starts with a split's
    name lends it to the names after it: ``Train Loss: 0.43 Acc: 0.86 | Val Loss: 0.41 Acc:
    0.85`` gives Train_Loss, Train_Acc, Val_Loss and Val_Acc."""
    segments = re.split(r"\s\|\s", text)
    if len(segments) == 1:
        return _pairs(text)
    out: dict[str, float] = {}
    split: str | None = None  # a split named at a segment's head holds until another is
    for segment in segments:
        values = _pairs(segment)
        if head := _SEGMENT_SPLIT.match(next(iter(values), "")):
            split = head[1]
        for k, v in values.items():
            name = f"{split}_{k}" if split and not _SPLIT_WORD.search(k) else k
            out.setdefault(name, v)
    return out


#: A name that starts with a split's name (``Val_Loss``, ``train_acc``).
_SEGMENT_SPLIT = re.compile(rf"({_TRAIN_SPLIT}|{_HELD_OUT_SPLIT})_", re.IGNORECASE)


def _epoch_pairs(line: str) -> tuple[int, int | None, dict[str, float]] | None:
    """A one-line-per-epoch print: (epoch, planned epochs or None, its values), when at least
    one name holds "loss"."""
    m = _EPOCH_LINE.match(line)
    if m is None:
        return None
    values = _segment_pairs(m["rest"])
    if not _has_loss(values):
        # the value before its name: "Epoch 3 @ 10:27 PM : 0.9816 C.E. Loss, 94.28% Accuracy"
        values = {
            name.replace(" ", "_"): float(value) for value, name in _VALUE_FIRST.findall(m["rest"])
        }
        if not _has_loss(values):
            return None
    split = m["split"] or m["tag"] or m["at"] or ""
    losses = [k for k in values if "loss" in k.lower()]
    if not split and losses and all(_HELD_OUT_WORD.search(k) for k in losses):
        # "Epoch [0]/[4]  Validation Phase Loss: 0.0048  Accuracy: 0.98": the line is the
        # held-out set's, its accuracy too
        split = "val"
    if _HELD_OUT_WORD.search(split):
        # "Val Epoch 3: loss 0.61", "[Diff-Val(Test-Normal)] Epoch 001: loss = 0.0072": the
        # held-out set's values, unless their own names say otherwise
        values = _held_out(values)
    total = m["total"]
    return int(m["epoch"]), int(total) if total else None, values


def _held_out(values: dict[str, float]) -> dict[str, float]:
    """A held-out split's values: each name gets the split, unless it says its own."""
    return {k if _SPLIT_WORD.search(k) else f"val_{k}": v for k, v in values.items()}


def _record(line: str) -> tuple[bool, dict[str, float]]:
    """A line that is nothing but ``name value`` pairs, one name holding "loss" (``Train Loss:
    253686.6 Validate Loss 277412.7``, ``train loss = 0.339``), possibly behind a split's head
    (``- Eval metrics: accuracy: 0.510 ; loss: 1.255``, whose names are the held-out set's):
    (whether it is a held-out split's, its values), or (False, {})."""
    held_out = False
    if head := _SPLIT_HEAD.match(line):
        held_out = head[1].lower() not in ("train", "training")
        line = line[head.end() :]
    values: dict[str, float] = {}
    line = _FRACTION.sub(r"\1", line)  # "ntokens: 485.20/513": the count, not its bound
    rest = _PAIR.sub(" ", line).replace("%", " ")  # a value may end in %
    if rest.strip(" \t,;|:-") or not _has_loss(values := _pairs(line)):
        return False, {}
    if held_out:
        values = {f"val_{k}": v for k, v in values.items()}
    return held_out, values


def _records(lines: list[str]) -> tuple[list[dict[str, Any]], int]:
    """The rows of a log of record lines (``lines`` without their loggers' prefixes) with no
    counter, when there are at least three, and the index of the last: each line is one
    logging step, or each train line when a held-out split's lines follow them (those share
    the step of the train line before them). ([], -1) otherwise."""
    found = [(i, *rec) for i, line in enumerate(lines) if (rec := _record(line))[1]]
    if len(found) < _MIN_MATCHES:
        return [], -1
    split = any(held_out for _, held_out, _ in found) and not all(h for _, h, _ in found)
    rows: list[dict[str, Any]] = []
    counter = next(
        (
            k
            for k in _COUNTERS
            if sum(k in v for _, _, v in found) * 2 > len(found)
            and (k != "batch" or _rising([v[k] for _, _, v in found if k in v]))
        ),
        None,
    )
    if counter is not None:
        # "epoch=1 step=200 train_loss=0.36 val_loss=0.31": the lines number themselves; a line
        # without the counter (an epoch's summary) adds only what the counted lines lack
        counted = {k for _, _, v in found if counter in v for k in v}
        step = 0
        for _, _, values in found:
            if counter in values:
                step = int(values[counter])
                rows.append({**values, "step": step})
            else:
                rows.append({"step": step, **_lacking(values, counted)})
        return rows, found[-1][0]
    step = 0
    for _, held_out, values in found:
        if not (split and held_out) or step == 0:
            step += 1
        rows.append({"step": step, **values})
    return rows, found[-1][0]


#: Names of a step counter a record line may carry (``step=200``), most specific first;
#: ``batch`` only when it rises on every line (``ep: 0, batch: 20, ..., loss: 10.98``), as a
#: batch size it would not.
_COUNTERS = ("global_step", "step", "iteration", "iter", "batch")
#: A value out of its bound in a record line (``ntokens: 485.20/513``), the value kept.
_FRACTION = re.compile(rf"([:=]\s*{_NUM})\s*/\s*\d+{_END}")


def _rising(values: list[float]) -> bool:
    return all(b > a for a, b in itertools.pairwise(values))


def _has_loss(values: dict[str, float]) -> bool:
    """Whether a name holds "loss" or is a cost (``step 51, training cost 4359.25``), or one is
    the "Total" of two or more named terms (``Total: 0.0581 | Recon: 0.0338 | VQ: 0.0243``)."""
    return any("loss" in k.lower() or names_a_cost(k) for k in values) or (
        len(values) >= 3 and any(k.lower() == "total" for k in values)
    )


def _keras_pairs(line: str) -> dict[str, float]:
    """The values of Keras's last progress-bar update on a line (``- loss: 0.51 - ...``)."""
    last = line.rsplit("\r", 1)[-1].rsplit("]", 1)[-1]
    values = _pairs(last)
    return values if _has_loss(values) else {}


def _epoch_head(line: str) -> tuple[int, int | None, bool] | None:
    """An epoch's head line (:data:`_EPOCH_HEAD`) that names its split, its plan or ends in
    dots: (epoch, planned epochs or None, whether it is a held-out split's), or None."""
    m = _EPOCH_HEAD.match(line)
    if m is None or not (m[1] or m[3] or m[4]):
        return None
    held_out = bool(m[1]) and m[1].lower() not in ("train", "training")
    return int(m[2]), int(m[3]) if m[3] else None, held_out


def _bare_epoch(line: str) -> int | None:
    """The epoch of a bare ``Epoch: 3`` line (:data:`_EPOCH_HEAD` with no split, plan or dots):
    the epoch that the split-headed lines after it (``Train set: Average loss: 0.97``, ``Val
    set: Average loss: 1.18, MAE: ...``) belong to."""
    m = _EPOCH_HEAD.match(line)
    return None if m is None or m[1] or m[3] or m[4] else int(m[2])


def _head_values(line: str, held_out: bool) -> dict[str, float]:
    """The values on the line after an epoch's head line (:data:`_EPOCH_HEAD`): a train line
    holds a loss; a held-out line is nothing but ``name: value`` pairs (``ave: 87.3500``)."""
    values = _pairs(line)
    if not held_out:
        return values if _has_loss(values) else {}
    return {} if _PAIR.sub(" ", line).strip(" \t,;|:-") else _held_out(values)


def _bar_values(line: str) -> dict[str, float]:
    """The values set on a finished tqdm bar, when one of them is a loss."""
    m = _BAR_DONE.search(line)
    values = _pairs(m[2]) if m else {}
    return values if _has_loss(values) else {}


def _example_values(line: str) -> tuple[int, int, dict[str, float]] | None:
    """A PyTorch-example progress line: (epoch, items done in it, items per epoch, values)."""
    m = _EXAMPLE_LINE.match(line)
    if m is None:
        return None
    values = _pairs(_TQDM_TAIL.sub("", m[4]))
    if not _has_loss(values):
        return None
    return int(m[1]) * int(m[3]) + int(m[2]), int(m[3]), values


def _epoch_batch_values(line: str) -> tuple[int, int | None, int, int, dict[str, float]] | None:
    """``Epoch:[e/E](i/N), loss: ...`` or a MetricLogger's ``Epoch: [e]  [i/N]  loss: ...``:
    (epoch, planned epochs or None, batch, batches per epoch, values), when a name holds
    "loss"."""
    if m := _EPOCH_BATCH_LINE.match(line):
        epoch, epochs, batch, per_epoch, rest = int(m[1]), int(m[2]), int(m[3]), int(m[4]), m[5]
    elif m := _METRIC_LOGGER_LINE.match(line):
        epoch, epochs, batch, per_epoch, rest = int(m[1]), None, int(m[2]), int(m[3]), m[4]
    else:
        return None
    values = _pairs(rest)
    if not _has_loss(values):
        return None
    return epoch, epochs, batch, per_epoch, values


def _gan_values(line: str) -> tuple[int, int, dict[str, float]] | None:
    """A pytorch-CycleGAN-and-pix2pix loss line: (epoch, images into it, its terms and the
    generator's loss, their sum), when it names two or more terms and a generator's."""
    m = _GAN_LINE.match(line)
    if m is None:
        return None
    values = _pairs(m[3])
    generator = [v for k, v in values.items() if not _GAN_DISCRIMINATOR.match(k)]
    if len(values) < 2 or not generator or "loss" in values:
        return None
    return int(m[1]), int(m[2]), {**values, "loss": float(sum(generator))}


def _ngcf_values(line: str) -> tuple[int, dict[str, float]] | None:
    """An NGCF-style epoch line: (epoch, its train loss and held-out ranking metrics)."""
    m = _NGCF_LINE.match(line)
    if m is None:
        return None
    values = {"loss": float(m[2])}
    for name, value in _NGCF_METRIC.findall(m[3]):
        values[f"val_{name}"] = float(value)
    return int(m[1]), values


def _step_values(line: str) -> tuple[int, int | None, dict[str, float], bool] | None:
    """A per-step line: (step, the total after its slash or None, values, whether it counts
    batches), when a name holds "loss"."""
    m = _STEP_LINE.match(line)
    if m is None:
        return None
    values = _pairs(m[4])
    if not _has_loss(values):
        return None
    return int(m[2]), int(m[3]) if m[3] else None, values, m["batch"] is not None


def _drawn_bar_values(line: str) -> tuple[int, int, dict[str, float]] | None:
    """A drawn progress bar's line: (step, planned steps, values), when a name holds "loss"."""
    m = _DRAWN_BAR.match(line)
    if m is None:
        return None
    values = _segment_pairs(m[3])
    return (int(m[1]), int(m[2]), values) if _has_loss(values) else None


def _count_lines_within_epochs(rows: list[dict[str, Any]]) -> bool:
    """Per-epoch rows of which one kind repeats an epoch (``Epoch 0, Loss: 0.0054`` at every
    step of epoch 0): number that kind's lines 1, 2, ... as steps, the other rows sharing the
    step of the line before them, and keep the epoch. True when it did so."""
    if not rows or any("epoch" not in r or "step" in r for r in rows):
        return False
    kinds = Counter((r["epoch"], frozenset(r)) for r in rows)
    (_, repeated), count = kinds.most_common(1)[0]
    if count < _MIN_MATCHES:
        return False
    if _fresh_restart([r for r in rows if frozenset(r) == repeated]):
        # the epochs start over at a loss back up at the earlier run's level ("Epoch 1" ..
        # "Epoch 10", then "Epoch 1" again): runs appended to one log, not several lines per
        # epoch; the latest is kept, as for a resumed run
        return False
    step = 0
    for r in rows:
        if frozenset(r) == repeated:
            step += 1
        else:
            # an epoch's summary line ("Epoch 1 | Train Loss 0.678 | Valid Loss 0.618") adds
            # what the step lines lack; their own names keep the steps' values
            kept = _lacking(r, repeated - {"epoch"})
            r.clear()
            r.update(kept)
        r["step"] = max(step, 1)
    return True


def _fresh_restart(rows: list[dict[str, Any]]) -> bool:
    """Whether per-epoch ``rows`` start their epochs over with a fresh model: at a restart the
    train loss has given back more than half of its fall from the log's first line to the line
    before the restart (log scale for a positive loss), or nothing had fallen. A later
    ``model.fit`` on the same model (Keras stages at a lower learning rate, a stage that
    unfreezes the backbone or switches the loss) restarts its epochs far below where the log
    began: one run, its lines numbered in order."""
    losses = [k for k in rows[0] if "loss" in k.lower() and not _HELD_OUT_WORD.search(k)]
    if not losses:
        return False
    key = sorted(losses)[0]
    start: float | None = None  # the log's first finite loss, and its last one so far
    end: float | None = None
    for i, row in enumerate(rows):
        here = float(row[key])
        if i and row["epoch"] < rows[i - 1]["epoch"]:
            kept = share_kept(start, end, here)
            if kept is None or kept < _KEPT_BY_A_LATER_FIT:
                return True
        if math.isfinite(here):
            start = here if start is None else start
            end = here
    return False


#: The share of the log's fall a restarted epoch count keeps when the same model trains on.
_KEPT_BY_A_LATER_FIT = 0.5


def _lacking(values: dict[str, Any], known: set[str] | frozenset[str]) -> dict[str, Any]:
    """The values whose names the step lines do not carry."""
    return {k: v for k, v in values.items() if k not in known}


def _json_values(line: str) -> dict[str, float]:
    """The numbers of a line that is one JSON object holding a loss (a loop that prints
    ``json.dumps(stats)``); {} for any other line."""
    if not _JSON_LINE.match(line):
        return {}
    try:
        obj = json.loads(line)
    except ValueError:
        return {}
    values = {
        str(k): float(v)
        for k, v in obj.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return values if _has_loss(values) else {}


def _hf_entries(text: str) -> list[tuple[int, dict[str, float]]]:
    """The Trainer log entries printed in ``text``, in order (numbers only), each with its
    offset in the text."""
    entries = []
    for m in _HF_LOG.finditer(text):
        entry = {k: float(v) for k, v in _HF_PAIR.findall(m[0])}
        if entry:
            entries.append((m.start(), entry))
    return entries


def _is_summary(entry: dict[str, float]) -> bool:
    return "train_runtime" in entry and "loss" not in entry


def _hf_runs(
    path: Path,
    text: str,
    entries: list[tuple[int, dict[str, float]]],
    aliases: dict[str, str] | None,
) -> list[Run]:
    """One run per Trainer run printed in a console log (see the module docstring)."""
    groups: list[list[tuple[int, dict[str, float]]]] = [[]]
    closed: float | None = None  # the epoch at which the current group's summary was printed
    for pos, entry in entries:
        epoch = entry.get("epoch")
        group = groups[-1]
        if group:
            last = next((e["epoch"] for _, e in reversed(group) if "epoch" in e), None)
            # a final trainer.evaluate() after the summary, at the same epoch, still belongs
            late_eval = closed is not None and "loss" not in entry and epoch == closed
            restart = epoch is not None and last is not None and epoch < last
            if (closed is not None and not late_eval) or restart:
                groups.append([])
                closed = None
        groups[-1].append((pos, entry))
        if _is_summary(entry):
            closed = epoch
    learned = [g for g in groups if any("loss" in e or "eval_loss" in e for _, e in g)]
    runs = []
    after = 0  # where the previous run's prints ended
    for i, group in enumerate(learned):
        total = _bar_total(text, after, group[0][0])
        end = learned[i + 1][0][0] if i + 1 < len(learned) else len(text)
        reached = _bar_reached(text, total, after, end) if total else 0
        tail_start = group[-1][0] + 1
        after = tail_start
        history, planned, note = _number_steps([e for _, e in group], total, reached)
        name = path.stem if len(learned) == 1 else f"{path.stem} (run {i + 1} of {len(learned)})"
        notes = [note]
        if len(learned) > 1:
            notes.append(
                f"{path.name} holds {len(learned)} Trainer runs printed one after the other; "
                f"this is run {i + 1}"
            )
        run = run_from_history(
            path, history, name=name, fmt=FORMAT, warnings=notes, aliases=aliases
        )
        if planned:
            run.meta.max_steps = planned
        if not _is_summary(group[-1][1]):
            _crash_note(run, text, group[0][0] if i else 0, tail_start, end)
        runs.append(run)
    return runs


def _crash_note(run: Run, text: str, start: int, tail: int, end: int) -> None:
    """When a run's console output (``text[start:end]``) holds a traceback and, after the run's
    last log line (``tail``), the exception that ended it, the run ended on that uncaught
    exception: its class name goes to ``meta.error``, its message to the warnings, and the run
    is not finished. (stderr and stdout interleave: the traceback may start before the last
    lines printed.)"""
    if _TRACEBACK.search(text, start, end) is None:
        # Lightning catches Ctrl-C and says so instead of printing a traceback
        if _GRACEFUL_STOP.search(text, tail, end) is not None:
            run.meta.error = "KeyboardInterrupt"
            run.meta.finished = False
            run.warnings.append(
                "the console output says the run was interrupted (KeyboardInterrupt) and shut down"
            )
        return
    exc = None
    for exc in _EXCEPTION.finditer(text, tail, end):  # noqa: B007 - the last one is kept
        pass
    if exc is None:
        return
    run.meta.error = exc[1]
    run.meta.finished = False
    message = (exc[2] or "").strip()
    run.warnings.append(
        f"the console output ends with an uncaught {exc[1]}"
        + (f": {message[:200]}" if message else "")
    )


def _offset_after(lines: list[str], index: int) -> int:
    """The offset in the text (``lines`` joined by newlines) just after line ``index``."""
    return sum(len(line) + 1 for line in lines[: index + 1])


def _bar_reached(text: str, total: int, start: int, end: int) -> int:
    """The furthest position the progress bar of ``total`` steps reached in ``text[start:end]``."""
    found = re.findall(rf"\| (\d+)/{total} \[", text[start:end])
    return max((int(n) for n in found if int(n) <= total), default=0)


def _bar_total(text: str, start: int, end: int) -> int | None:
    """The total of the last progress bar that starts (``0/T [``, in iterations per second)
    in ``text[start:end]``: the Trainer's training bar, drawn before its first log."""
    totals = _BAR_START.findall(text, start, end)
    return int(totals[-1]) if totals else None


def _number_steps(
    group: list[dict[str, float]], total: int | None, reached: int = 0
) -> tuple[list[dict[str, Any]], int | None, str]:
    """Give each printed entry a step: from its epoch, in real steps when the training bar's
    total and the closing summary's epoch are printed (steps per epoch = total / epochs) or,
    for a run that stopped without a summary, the step its bar reached and the last printed
    epoch; else in hundredths of an epoch; the count of train-loss prints when the printed
    epochs do not tell (rounded to the same value). Also the planned steps, when known."""
    summary = next((e for e in group if _is_summary(e)), None)
    epochs = summary.get("epoch") if summary else None
    per_epoch: float | None = None
    if total and epochs and epochs > 0:
        per_epoch = total / epochs
    elif total and reached and summary is None:
        last = max((e["epoch"] for e in group if "epoch" in e), default=0.0)
        if last > 0:
            per_epoch, epochs = reached / last, last
    scale = per_epoch or 100.0
    # two train-loss prints must not share a step (the Trainer prints the epoch to two
    # decimals: 24 prints early in a 51,966-step epoch all say 0.0), nor two evaluations at
    # different epochs (the same epoch printed twice, a final trainer.evaluate() after the
    # last epoch's, may)
    train_epochs = [e["epoch"] for e in group if "loss" in e and "epoch" in e]
    eval_epochs = {e["epoch"] for e in group if "eval_loss" in e and "epoch" in e}
    distinct = len({round(x * scale) for x in train_epochs}) == len(train_epochs) and len(
        {round(x * scale) for x in eval_epochs}
    ) == len(eval_epochs)
    history: list[dict[str, Any]] = []
    count = 0
    for entry in group:
        if "loss" in entry:
            count += 1
        if distinct and "epoch" in entry:
            step = max(1, round(entry["epoch"] * scale))
        else:
            step = max(count, 1)
        history.append({**entry, "step": step})
    if not distinct:
        note = "the Trainer's console prints hold no step: steps count the train-loss prints"
    elif per_epoch and summary is None:
        note = (
            "the Trainer's console prints hold no step: steps are the epoch x "
            f"{per_epoch:.6g} (its progress bar reached step {reached} of {total} at epoch "
            f"{epochs:g}, the last printed)"
        )
    elif per_epoch:
        note = (
            "the Trainer's console prints hold no step: steps are the epoch x "
            f"{per_epoch:.6g} (its progress bar's {total} steps over {epochs:g} epochs)"
        )
    else:
        note = (
            "the Trainer's console prints hold no step: steps are hundredths of an epoch "
            "(epoch 2.8 is step 280)"
        )
    return history, (total if per_epoch and distinct else None), note


def _onmt_runs(
    path: Path, text: str, lines: list[str], bare: list[str], aliases: dict[str, str] | None
) -> list[Run] | None:
    """The run in an OpenNMT-py log (``text``, split into ``lines``; ``bare``: those lines
    without their loggers' prefixes), or None when it holds no ``Step N/M;`` line."""
    rows: list[dict[str, Any]] = []
    planned: int | None = None
    step = 0
    early = False
    patience: int | None = None
    last_line = -1
    for index, line in enumerate(bare):
        if m := _ONMT_STEP.match(line):
            last_line = index
            step = int(m[1])
            planned = int(m[2]) if m[2] else planned
            values = _pairs(m[3])
            row: dict[str, Any] = {"step": step}
            row.update({_ONMT_FIELDS[k]: v for k, v in values.items() if k in _ONMT_FIELDS})
            rows.append(row)
        elif m := _ONMT_VAL.match(line):
            last_line = index
            value = float(m[2])
            if m[1] == "perplexity":
                rows.append({"step": step, "eval/perplexity": value})
                if value > 0:
                    rows.append({"step": step, "eval/loss": math.log(value)})
            else:
                rows.append({"step": step, f"eval/{m[1]}": value})
        elif m := _ONMT_PATIENCE.match(line):
            patience = int(m[1])
        elif "Early Stop!" in line:
            early = True
    if not any("train/loss" in r for r in rows):
        return None
    run = plain_run(path, rows_table(rows), FORMAT, [], aliases)
    run.warnings.append(
        "OpenNMT-py log: the train loss is its cross-entropy (xent), the eval loss the log of "
        "its validation perplexity"
    )
    if planned:
        run.meta.max_steps = planned
    if early:
        # stopped by its own early stopping: a finished run, not one that died
        run.meta.early_stopped = True
        run.meta.finished = True
        run.meta.early_stopping_patience = patience
    _crash_note(run, text, 0, _offset_after(lines, last_line), len(text))
    return [run]


#: spaCy v3's training table: its header (columns two or more blanks apart) and the rule below.
_SPACY_HEAD = re.compile(r"^E {2,}# {2,}(?:LOSS \S+ {2,})+\S.*$")
_SPACY_RULE = re.compile(r"^-+(?: +-+)+$")
#: The last word of a spaCy score column: ``ENTS_F`` is an F1 score.
_SPACY_SCORE_SUFFIX = {"f": "f1", "p": "precision", "r": "recall"}


def _spacy_table(bare: list[str]) -> tuple[list[str], list[list[float]], int] | None:
    """spaCy's training table in ``bare``: (its columns, its rows, the last row's line)."""
    for index, line in enumerate(bare[:-1]):
        if _SPACY_HEAD.match(line) and _SPACY_RULE.match(bare[index + 1]):
            columns = re.split(r" {2,}", line.strip())
            rows, last = _table_rows(bare, index + 2, len(columns))
            return (columns, rows, last) if rows else None
    return None


#: A unit printed after a table's number, as its own word or stuck to it (``0.55 s``, ``12s``).
_CELL_UNIT = re.compile(r"^(?:s|sec|secs|ms|min|%)$", re.IGNORECASE)
_UNIT_AFTER = re.compile(rf"^{_NUM}(?:s|sec|ms|min|%)$", re.IGNORECASE)


def _table_rows(bare: list[str], start: int, width: int) -> tuple[list[list[float]], int]:
    """The rows of numbers of a printed table from line ``start`` (a units' word such as the
    ``s`` of ``0.55 s`` dropped), up to the first line that is not one with ``width`` cells:
    (the rows, the last row's line, ``start - 1`` when there is none)."""
    rows: list[list[float]] = []
    last = start - 1
    for i in range(start, len(bare)):
        cells = [c for c in bare[i].split() if not _CELL_UNIT.match(c)]
        try:
            values = [float(u[1] if (u := _UNIT_AFTER.match(c)) else c) for c in cells]
        except ValueError:
            break
        if len(values) != width:
            break
        rows.append(values)
        last = i
    return rows, last


#: The counter that heads a printed table's first column.
_TABLE_COUNTERS = frozenset({"epoch", "epochs", "ep", "step", "iter", "iteration"})
#: The rule of dashes (or ``=``) under a printed table's header, whole or one per column.
_TABLE_RULE = re.compile(r"^[-=]{3,}(?: +[-=]+)*$")
#: A column name of a printed table: words, no number of their own.
_TABLE_NAME = re.compile(r"^[A-Za-z][\w.@/()-]*(?: [A-Za-z][\w.@/()-]*)*$")


def _aligned_table(bare: list[str]) -> tuple[list[dict[str, Any]], int] | None:
    """A table printed with its columns aligned by blanks: a header whose names are two or
    more blanks apart, the first a counter (``Epoch    Train Loss   Train Acc    Test Loss``),
    one name holding "loss", an optional rule of dashes, then its rows (the header may be
    printed again above later rows). (The rows, the last row's line), or None: numbered by
    epoch when the counter is one (``Epoch``, ``Ep``), else by step."""
    rows: list[dict[str, Any]] = []
    last = -1
    counter = ""
    for index, line in enumerate(bare):
        columns = re.split(r" {2,}|\t", line.strip())
        if (
            len(columns) < 2
            or columns[0].lower() not in _TABLE_COUNTERS
            or not all(_TABLE_NAME.match(c) for c in columns)
            or not any("loss" in c.lower() for c in columns)
        ):
            continue
        start = (
            index + 2 if index + 1 < len(bare) and _TABLE_RULE.match(bare[index + 1]) else index + 1
        )
        table, end = _table_rows(bare, start, len(columns))
        if not table:
            continue
        counter = counter or columns[0].lower()
        names = [c.replace(" ", "_") for c in columns[1:]]
        for values in table:
            rows.append(
                {"epoch" if counter.startswith("ep") else "step": int(values[0])}
                | dict(zip(names, values[1:], strict=True))
            )
        last = end
    return (rows, last) if rows else None


def _spacy_name(column: str) -> str:
    """A spaCy table column's metric name (``LOSS NER`` -> train/loss_ner, ``ENTS_F`` ->
    eval/ents_f1)."""
    low = column.lower()
    if low.startswith("loss "):
        return "train/loss_" + low[5:].replace(" ", "_")
    head, _, last = low.rpartition("_")
    if head and last in _SPACY_SCORE_SUFFIX:
        return f"eval/{head}_{_SPACY_SCORE_SUFFIX[last]}"
    return "eval/" + low.replace(" ", "_")


def _spacy_runs(
    path: Path, text: str, lines: list[str], bare: list[str], aliases: dict[str, str] | None
) -> list[Run] | None:
    """The run in spaCy's training table, or None when ``bare`` holds none."""
    table = _spacy_table(bare)
    if table is None:
        return None
    columns, values, last_line = table
    names = [_spacy_name(c) for c in columns]
    losses = [n for n in names if n.startswith("train/loss_")]
    objective = [n for n in losses if n != "train/loss_tok2vec"] or losses
    rows: list[dict[str, Any]] = []
    for cells in values:
        row: dict[str, Any] = {"step": int(cells[1]), "train/epoch": cells[0]}
        for name, value in zip(names[2:], cells[2:], strict=True):
            if name in losses and row["step"] == 0:
                continue  # one batch's sum, not comparable with the rows after it
            row[name] = value
        if row["step"] > 0:
            row["train/loss"] = sum(row[n] for n in objective)
        rows.append(row)
    run = plain_run(path, rows_table(rows), FORMAT, [], aliases)
    run.warnings.append(
        "spaCy training table: the train loss is "
        + " + ".join(f"'{c}'" for c, n in zip(columns, names, strict=True) if n in objective)
        + ", summed over the steps since the row before; the losses of the row at step 0 (one "
        "batch) are left out; the scores are the dev set's"
    )
    _crash_note(run, text, 0, _offset_after(lines, last_line), len(text))
    return [run]


def read_all(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """The runs in a nanoGPT, build-nanogpt, llm.c, per-epoch, Hugging Face Trainer console
    or OpenNMT-py text log (UTF-8, or a console's legacy code page: see decode_console)."""
    text, note = decode_console(path, read_bytes(path), "text training log")
    runs = _read_text(path, text, aliases)
    if note:
        for run in runs:
            run.warnings.append(note)
    return runs


def _read_text(path: Path, text: str, aliases: dict[str, str] | None) -> list[Run]:
    entries = _hf_entries(text)
    if any("loss" in e or "eval_loss" in e for _, e in entries):
        return _hf_runs(path, text, entries, aliases)
    lines = text.split("\n")
    bare = [_unprefixed(raw) for raw in lines]
    if (onmt := _onmt_runs(path, text, lines, bare, aliases)) is not None:
        return onmt
    if (spacy := _spacy_runs(path, text, lines, bare, aliases)) is not None:
        return spacy
    rows: list[dict[str, Any]] = []
    planned: int | None = None
    planned_epochs: int | None = None
    keras_epoch: int | None = None
    head: tuple[int, int, bool] | None = None  # the last epoch head's line, epoch, held out
    current_epoch: int | None = None  # the last "Epoch N/M" line's N
    last_step = 0
    last_line = -1  # the last line that gave a row
    bars = 0  # finished training bars: one per epoch
    notes: set[str] = set()
    batched: list[tuple[int, int, int, int]] = []  # (row, epoch, batch, batches per epoch)
    batch_lines: list[int] = []  # the counts of "Batch [i/N]" step lines
    batch_epoch = 0  # their epoch, from 0: one more each time the count starts again
    bare_steps = False  # step lines without a total of their own ("Iteration 256: loss ...")
    gan: list[tuple[int, int, int]] = []  # a GAN loss line's (row, epoch, images into it)
    gan_images: int | None = None
    gan_lr: float | None = None
    for index, line in enumerate(bare):
        found = len(rows)
        if example := _example_values(line):
            step, per_epoch, values = example
            rows.append({"step": step, **values})
            notes.add(
                f"steps are the items of the progress lines ({per_epoch} per epoch), counted "
                "over the epochs"
            )
        elif batch_line := _epoch_batch_values(line):
            epoch, epochs, batch, per_epoch, values = batch_line
            batched.append((len(rows), epoch, batch, per_epoch))
            planned_epochs = epochs or planned_epochs
            rows.append({"step": batch, **values})
        elif batched and (m := _METRIC_LOGGER_EVAL.match(line)) and (v := _pairs(m[1])):
            # the held-out pass after an epoch's batches: at the step of the last of them
            batched.append((len(rows), *batched[-1][1:]))
            rows.append({"step": 0, **_held_out(v)})
        elif gan_line := _gan_values(line):
            epoch, images, values = gan_line
            gan.append((len(rows), epoch, images))
            lr = {} if gan_lr is None else {"learning_rate": gan_lr}
            rows.append({"step": images, **values, **lr})
        elif m := _GAN_LR.match(line):
            gan_lr = float(m[2])
        elif m := _GAN_IMAGES.match(line):
            gan_images = int(m[1])
        elif m := _GAN_EPOCH_END.match(line):
            planned_epochs = int(m[2])
        elif m := _PLANNED_EPOCHS.match(line):
            planned_epochs = int(m[1] or m[2])
        elif values := _bar_values(line):
            bars += 1
            rows.append({"epoch": bars, **values})
        elif bars and rows and (m := _ONE_PAIR.match(line)):
            rows[-1][f"eval/{m[1].replace(' ', '_')}"] = float(m[2])
        elif values := _json_values(line):
            rows.append(values)
        elif m := _KERAS_EPOCH.match(line):
            keras_epoch, planned_epochs = int(m[1]), int(m[2])
            current_epoch = keras_epoch
        elif (
            current_epoch is not None
            and (split_head := _SPLIT_HEAD.match(line))
            and (rec := _record(line))[1]
        ):
            # "Epoch 1/10", then "- Train metrics: ..." and "- Eval metrics: ..." lines
            if split_head[1].lower() == "test" and any(
                r.get("epoch") == current_epoch and any(k.startswith("val_") for k in r)
                for r in rows[-2:]
            ):
                # "Test set: ..." after the epoch's "Val set: ...": the final test, not the curve
                notes.add("a test-set line after its epoch's validation line is left out")
            else:
                rows.append({"epoch": current_epoch, **rec[1]})
            keras_epoch = None
        elif (bare_epoch := _bare_epoch(line)) is not None:
            current_epoch = bare_epoch
        elif epoch_head := _epoch_head(line):
            epoch, epochs, held_out = epoch_head
            head = (index, epoch, held_out)
            planned_epochs = epochs or planned_epochs
        elif head is not None and head[0] == index - 1 and (values := _head_values(line, head[2])):
            # the line right after the head holds its values
            if head[2] and rows and rows[-1].get("epoch") == head[1]:
                rows[-1].update(values)  # the held-out pass after the epoch's training
            else:
                rows.append({"epoch": head[1], **values})
        elif keras_epoch is not None and (values := _keras_pairs(line)):
            rows.append({"epoch": keras_epoch, **values})
            keras_epoch = None
        elif ngcf := _ngcf_values(line):
            rows.append({"epoch": ngcf[0], **ngcf[1]})
        elif epoch_line := _epoch_pairs(line):
            epoch, total, values = epoch_line
            planned_epochs = total or planned_epochs
            rows.append({"epoch": epoch, **values})
            current_epoch = epoch  # "Train. ..." / "Val. ..." lines may follow
        elif (
            current_epoch is not None
            and rows
            and rows[-1].get("epoch") == current_epoch
            and (values := _keras_pairs(line))
            and _has_loss(values)
            and not set(values) & set(rows[-1])
        ):
            # "Epoch 1/10", "Train Loss: 0.75, Train Acc: 0.59", "Val Loss: 0.48, Val Acc:
            # 0.76": a later line of the same epoch adds the names the first one lacked
            rows[-1].update(values)
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
        elif drawn := _drawn_bar_values(line):
            last_step, total, values = drawn
            planned = total
            rows.append({"step": last_step, **values})
        elif step_line := _step_values(line):
            last_step, total, values, counts_batches = step_line
            if total and counts_batches:
                # "Batch [10/788] Loss: ...": the total is the epoch's batches, and the count
                # starts again with each epoch
                if batch_lines and last_step <= batch_lines[-1]:
                    batch_epoch += 1
                batch_lines.append(last_step)
                batched.append((len(rows), batch_epoch, last_step, total))
            else:
                planned = total or planned
                bare_steps = bare_steps or total is None
            rows.append({"step": last_step, **values})
        if len(rows) > found:
            last_line = index
    if gan:
        # "(epoch: e, iters: i, ...)": i counts the epoch's images; the step counts them over
        # the epochs, an epoch being the dataset's images (or the most any epoch reached)
        per_epoch = gan_images or max(images for _, _, images in gan)
        batched.extend((at, epoch, images, per_epoch) for at, epoch, images in gan)
        terms = [k for k in rows[gan[0][0]] if k not in ("step", "loss", "learning_rate")]
        notes.add(
            "loss is the generator's, the sum of "
            + ", ".join(k for k in terms if not _GAN_DISCRIMINATOR.match(k))
            + f"; steps are the images of the loss lines ({per_epoch} per epoch)"
        )
    if batched:
        # "Epoch:[e/E](i/N)": the step counts the batches over the epochs, from the first one
        # (epochs numbered from 1 unless a 0 shows up); the plan is E epochs of N batches
        base = 0 if any(epoch == 0 for _, epoch, _, _ in batched) else 1
        for at, epoch, batch, per_epoch in batched:
            rows[at]["step"] = (epoch - base) * per_epoch + batch
        per_epoch = batched[-1][3]
        if planned_epochs:
            planned = planned or per_epoch * planned_epochs
        if not gan:
            notes.add(f"steps are the batches of the epoch lines ({per_epoch} per epoch)")
    starts = _BAR_START.findall(text) if bare_steps and not planned else []
    if len(starts) == 1 and int(starts[0]) >= last_step:
        # "Iteration 256: loss = 0.32" under the one progress bar the loop drew for the whole
        # training ("0/50000 [00:00<?, ?it/s]"): the bar's total is the planned steps
        planned = int(starts[0])
        notes.add(f"the planned {planned} steps are the total of the progress bar")
    if not rows:
        rows, last_line = _records(bare)
    if not rows:
        rows, last_line = _printed_history(bare)
        if rows:
            notes.add(
                "a Keras History.history dict printed by the script: one entry per epoch, "
                "numbered from 1"
            )
    if not rows and (aligned := _aligned_table(bare)):
        rows, last_line = aligned
        notes.add("a table printed with its columns aligned by blanks")
    if not rows:
        # nothing per step or epoch, only the loop's closing "Final training loss: 1.1465"
        finals = [(i, m) for i, line in enumerate(bare) if (m := _FINAL_LOSS.match(line))]
        if finals:
            last_line, m = finals[-1]
            rows = [{"step": planned or 1, "train/loss": float(m[1])}]
            notes.add("the only loss in the log is its final summary line")
    if _count_lines_within_epochs(rows):
        notes.add("several lines per epoch: each is a step, numbered in order from 1")
    if not rows:
        raise MalformedRunError(
            path,
            "no training-log lines (nanoGPT 'iter N: loss X', build-nanogpt 'N train X', "
            "llm.c 'step N/M | loss X', 'epoch N train_loss X val_loss Y', "
            "'Train Loss: X Val Loss: Y' on every line)",
        )
    if any("epoch" in r and "step" not in r for r in rows) and any(
        "step" in r and "epoch" not in r for r in rows
    ):
        raise MalformedRunError(path, "mixes per-epoch lines with per-step lines")
    run = plain_run(path, rows_table(rows), FORMAT, sorted(notes), aliases)
    if planned:
        run.meta.max_steps = planned
    if planned_epochs:
        run.meta.num_train_epochs = planned_epochs
    tail = _offset_after(lines, last_line)
    if any(_EARLY_STOP.match(line) for line in bare[last_line + 1 :]):
        # the loop's own early stopping ended it: a finished run, not one that died
        run.meta.early_stopped = True
        run.meta.finished = True
        run.warnings.append("the console output says early stopping ended the run")
    _crash_note(run, text, 0, tail, len(text))
    return [run]


#: A loop's note, after its last logged line, that its early stopping ended the run: "Early
#: stopping triggered.", Keras's "Epoch 00028: early stopping", "Early stopping at epoch 28"
#: (not a setting such as "early_stopping_patience: 5", nor a patience counter's "EarlyStopping
#: counter: 3 out of 10"), also after the word "triggered" ("Triggered early stopping",
#: "触发 Early Stopping，提前结束训练。").
_EARLY_STOP = re.compile(
    r"^(?:epoch \d+\s*:\s*|(?:triggered|触发)\s*)?early[ -]?stop(?:ping|ped)?\b(?![_:=])"
    r"(?!.*\bcounter\b)",
    re.IGNORECASE,
)


READER = TableReader(FORMAT, sniff, read_all)
