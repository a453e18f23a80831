"""Readers for generic tabular logs: Lightning ``metrics.csv``, TensorBoard CSV, plain CSV/JSONL.

``lightning-csv`` (:data:`LIGHTNING`)
    PyTorch Lightning's ``CSVLogger`` ``metrics.csv``: a ``step`` column, an ``epoch`` column
    and sparse rows (step-level and epoch-level metrics on different rows). A metric logged
    with both ``on_step`` and ``on_epoch`` has ``<name>_step`` and ``<name>_epoch`` columns:
    for training metrics the per-step one is the curve (``train_loss_step`` -> train/loss) and
    the epoch one keeps an ``_epoch`` suffix (``train_loss_epoch`` -> train/loss_epoch); for
    validation metrics the epoch aggregate is the curve (``val_loss_epoch`` -> eval/loss,
    ``val_loss_step`` -> eval/loss_step). Points are sorted by step (Lightning writes
    epoch-end rows out of step order; it never resumes into the same file).
``tensorboard-csv`` (:data:`TENSORBOARD_CSV`)
    TensorBoard's UI export ``Wall time,Step,Value``: one metric per file, named after the
    file. The stem goes through the alias table (``train_loss`` -> train/loss, ``val_loss`` /
    ``valid_loss`` -> eval/loss, ``accuracy`` -> train/accuracy; an unknown name ``x`` becomes
    ``train/x``). TensorBoard's own download names ``run-<run>-tag-<tag>.csv`` use the tag (a
    ``_`` that stood for ``/`` is restored when that gives a known alias: ``Loss_train`` ->
    train/loss), and a run part naming a validation split (``validation``, ``val``, ``eval``,
    ``test``...) moves ``train/...`` to ``eval/...`` (Keras' ``run-validation-tag-epoch_loss``
    -> eval/loss). The user's ``aliases`` can map the file stem to any name.
``csv`` / ``jsonl`` (:data:`PLAIN_CSV`, :data:`PLAIN_JSONL`)
    Any CSV/TSV or JSON Lines file with a step column (``step``, ``global_step``,
    ``train/global_step``, ``trainer/global_step``, ``steps``, ``iteration``, ``iter``,
    ``_step``; ``epoch`` as a last resort). Other numeric columns become metrics through
    :func:`~curvediag.ingest.aliases.canonical_name`; ``wall_time``/``timestamp``/``time`` is
    the wall time. Nested JSON objects are flattened with ``/``. ``jsonl`` also reads a Keras
    ``History.history`` saved with ``json.dump`` (``{"loss": [...], "val_loss": [...]}``, one
    list entry per epoch) and a JSON list of per-epoch objects (``[{"epoch": 1, "loss": ...}]``):
    a ``.json`` file that starts that way and names a loss near its start. These two sniff on
    the file extension alone, so they must come last.
"""

from __future__ import annotations

import csv
import json
import math
import re
from bisect import bisect_right
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from curvediag.errors import MalformedRunError
from curvediag.ingest._tabular import (
    BoolArray,
    Column,
    IntArray,
    Table,
    TableReader,
    assign_names,
    build_metrics,
    describe_columns,
    find_column,
    flatten,
    head_bytes,
    header_cells,
    is_unnamed,
    json_lines,
    parse_csv,
    read_text,
    rows_table,
    to_steps,
    wall_column,
)
from curvediag.ingest._tabular import finish_run as _finish
from curvediag.ingest.aliases import (
    ALIASES,
    EPOCH_COLUMNS,
    STEP_COLUMNS,
    canonical_name,
    paired_names,
)
from curvediag.ingest.trainer_args import (
    apply_lightning_hparams,
    apply_trainer_config,
    apply_ultralytics_args,
)
from curvediag.model import Run
from curvediag.normalize import EVAL_SPLIT_WORDS, OutOfRange

__all__ = [
    "FORMATS",
    "LIGHTNING",
    "PLAIN_CSV",
    "PLAIN_JSONL",
    "READERS",
    "TENSORBOARD_CSV",
    "keras_csv_header",
    "plain_run",
    "table_log_delimiter",
    "tensorboard_csv_metric_name",
]

LIGHTNING_FORMAT = "lightning-csv"
TB_FORMAT = "tensorboard-csv"
CSV_FORMAT = "csv"
JSONL_FORMAT = "jsonl"
FORMATS = (LIGHTNING_FORMAT, TB_FORMAT, CSV_FORMAT, JSONL_FORMAT)

WALL_COLUMNS = ("wall_time", "wall time", "walltime", "timestamp", "_timestamp", "time")
_CSV_SUFFIXES = {".csv", ".tsv"}
#: Suffixes of a saved log that may hold a table (Keras' ``training.log``, a ``train.log``).
_TABLE_LOG_SUFFIXES = {".log", ".txt"}
_JSONL_SUFFIXES = {".jsonl", ".ndjson"}
_TB_HEADER = ["wall time", "step", "value"]
_TB_NAME = re.compile(r"^run[-_](?P<run>.*?)[-_]tag[-_](?P<tag>.+)$")


# --------------------------------------------------------------------------------------------
# Lightning CSVLogger
# --------------------------------------------------------------------------------------------
def sniff_lightning(path: Path) -> bool:
    """``metrics.csv`` with ``step`` and ``epoch`` columns, or ``*_step``/``*_epoch`` pairs."""
    if not path.is_file() or path.suffix.lower() != ".csv":
        return False
    cells = header_cells(path)
    if "step" not in cells or "epoch" not in cells:
        return False
    if path.name == "metrics.csv":
        return True
    return any(c.endswith("_step") and c[:-5] + "_epoch" in cells for c in cells)


def read_lightning(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Read a Lightning ``CSVLogger`` ``metrics.csv``."""
    table = parse_csv(path, read_text(path, "Lightning metrics.csv"), "Lightning metrics.csv")
    if "step" not in table.columns:
        raise MalformedRunError(
            path,
            f"no numeric 'step' column: not a Lightning metrics.csv; columns: "
            f"{describe_columns(table)}",
        )
    steps, ok, integral = to_steps(table.columns["step"])
    if not integral:
        raise MalformedRunError(path, "the 'step' column has fractional values")
    cols = [c for c in table.columns if c != "step" and not is_unnamed(c)]
    wanted = paired_names(cols, extra=aliases, counts={c: table.columns[c].count for c in cols})
    counts = {c: table.columns[c].count for c in cols}
    names, warnings = assign_names(cols, wanted.__getitem__, counts)
    dropped = OutOfRange()
    metrics, _ = build_metrics(
        table, names, steps, ok, sort=True, dropped=dropped, step_col=table.columns["step"]
    )
    if not metrics:
        raise MalformedRunError(path, "no numeric metric in this Lightning metrics.csv")
    run = Run(
        source=str(path),
        format=LIGHTNING_FORMAT,
        name=_lightning_name(path),
        metrics=metrics,
        warnings=warnings,
    )
    epoch = table.columns.get("epoch")
    if epoch is not None and epoch.present.any():
        last = float(epoch.values[epoch.present][-1])
        run.meta.epoch = last if np.isfinite(last) else None
    apply_lightning_hparams(run.meta, path.parent, run.warnings)
    return [_finish(run, set(), dropped=dropped, table=table)]


def _lightning_name(path: Path) -> str:
    folder = path.resolve().parent
    if re.match(r"^version_\d+$", folder.name) and folder.parent.name:
        return f"{folder.parent.name}/{folder.name}"
    return folder.name or path.stem


# --------------------------------------------------------------------------------------------
# TensorBoard UI CSV export
# --------------------------------------------------------------------------------------------
def sniff_tensorboard_csv(path: Path) -> bool:
    """A CSV whose header is exactly ``Wall time,Step,Value``."""
    return path.is_file() and [c.lower() for c in header_cells(path)] == _TB_HEADER


def tensorboard_csv_metric_name(path: Path, aliases: dict[str, str] | None = None) -> str:
    """The canonical metric name a TensorBoard CSV export stands for (from its file name)."""
    stem = path.stem
    if aliases and stem in aliases:
        return canonical_name(stem, extra=aliases)
    m = _TB_NAME.match(stem)
    run, tag = (m.group("run"), m.group("tag")) if m else ("", stem)
    name = canonical_name(tag, extra=aliases)
    if tag.lower() not in ALIASES and "_" in tag:
        for i, ch in enumerate(tag):  # TensorBoard wrote '/' as '_' in the file name
            if ch == "_" and (tag[:i] + "/" + tag[i + 1 :]).lower() in ALIASES:
                name = ALIASES[(tag[:i] + "/" + tag[i + 1 :]).lower()]
                break
    if set(re.split(r"[^a-z]+", run.lower())) & EVAL_SPLIT_WORDS and name.startswith("train/"):
        name = "eval/" + name[len("train/") :]
    return name


def read_tensorboard_csv(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Read TensorBoard's ``Wall time,Step,Value`` export (one metric, named by the file)."""
    table = parse_csv(path, read_text(path, "TensorBoard CSV export"), "TensorBoard CSV export")
    lower = {k.lower(): k for k in table.columns}
    missing = [c for c in ("step", "value") if c not in lower]
    if missing:
        raise MalformedRunError(
            path,
            f"no numeric {' or '.join(repr(c.title()) for c in missing)} column: not a "
            f"TensorBoard CSV export; columns: {describe_columns(table)}",
        )
    steps, ok, integral = to_steps(table.columns[lower["step"]])
    if not integral:
        raise MalformedRunError(path, "the 'Step' column has fractional values")
    name = tensorboard_csv_metric_name(path, aliases)
    wall = wall_column(table, ["wall time"])
    dropped = OutOfRange()
    metrics, restarts = build_metrics(
        table,
        {lower["value"]: name},
        steps,
        ok,
        wall,
        dropped=dropped,
        step_col=table.columns[lower["step"]],
    )
    if not metrics:
        raise MalformedRunError(path, "no point has both a Step and a Value")
    run = Run(
        source=str(path),
        format=TB_FORMAT,
        name=path.stem,
        metrics=metrics,
        warnings=[f"the metric name {name} comes from the file name {path.name!r}"],
    )
    return [_finish(run, restarts, dropped=dropped, table=table)]


# --------------------------------------------------------------------------------------------
# Plain CSV / JSON Lines
# --------------------------------------------------------------------------------------------
def sniff_plain_csv(path: Path) -> bool:
    """Any ``.csv``/``.tsv`` file (the reader says what is wrong when it is not a log), and a
    ``.log`` / ``.txt`` file whose first line is a comma- or tab-separated header with a step
    or epoch column and a loss column: a Keras ``CSVLogger`` file under its default name
    ``training.log``, a loop's ``step<TAB>loss`` table saved as ``train.log``."""
    if not path.is_file():
        return False
    if path.suffix.lower() in _CSV_SUFFIXES:
        return True
    if path.suffix.lower() not in _TABLE_LOG_SUFFIXES:
        return False
    head = head_bytes(path)
    # the first line, whatever ends it (a log written with bare "\r" line ends)
    first = next(iter(head.decode("utf-8-sig", "replace").splitlines()), "")
    return b"\0" not in head and (
        table_log_delimiter(first) is not None or _headerless_loss_pairs(path, first, ",")
    )


def table_log_delimiter(header: str) -> str | None:
    """The delimiter (comma or tab) that makes ``header``, the first line of a log saved as
    ``.log`` / ``.txt``, a table of a loss by step or epoch (see :func:`keras_csv_header`), or
    None: such a file is a console log, not a table."""
    for sep in (",", "\t"):
        try:
            cells = next(csv.reader([header.rstrip("\r")], delimiter=sep), [])
        except csv.Error:
            continue
        if keras_csv_header(cells):
            return sep
    return None


def keras_csv_header(cells: list[str]) -> bool:
    """``epoch,loss,...`` as Keras' CSVLogger writes it, or ``step,loss``: a header with a
    step or epoch column and a loss column."""
    lowered = [c.strip().lower() for c in cells]
    counter = any(c in STEP_COLUMNS or c in EPOCH_COLUMNS for c in lowered)
    return len(lowered) >= 2 and counter and any("loss" in c for c in lowered)


def _json_lines_in_json(path: Path) -> bool:
    """A ``.json`` file that is JSON Lines (mmengine's ``vis_data/scalars.json``): its first line
    is a whole JSON object naming a loss and a step, and the next line starts another."""
    if path.suffix.lower() != ".json":
        return False
    lines = head_bytes(path).splitlines()
    if len(lines) < 2 or not lines[1].lstrip().startswith(b"{"):
        return False
    try:
        first = json.loads(lines[0])
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(first, dict)
        and any("loss" in str(k).lower() for k in first)
        and any(str(k).lower() in STEP_COLUMNS for k in first)
    )


def _mmengine_eval_steps(rows: list[dict[str, Any]], notes: list[str]) -> None:
    """mmengine's epoch-based loops log each validation at ``step`` = the epoch, while the
    train records (which carry ``epoch`` and ``iter``) count iterations: a validation record's
    step becomes the last iteration of its epoch, so both share one axis."""
    train = [r for r in rows if "iter" in r and "epoch" in r and "step" in r]
    if not train:
        return
    last_iter: dict[int, int] = {}
    for r in train:
        e, st = r["epoch"], r["step"]
        if isinstance(e, int) and isinstance(st, int):
            last_iter[e] = max(last_iter.get(e, st), st)
    epochs = sorted(last_iter)
    moved = 0
    for r in rows:
        if "iter" in r or "epoch" in r or not isinstance(r.get("step"), int):
            continue
        i = bisect_right(epochs, r["step"])  # the last epoch logged at or before it
        if i:
            r["step"] = last_iter[epochs[i - 1]]
            moved += 1
            # its metrics (coco/bbox_mAP, mIoU, accuracy/top1) are the evaluation's
            for k in [k for k in r if k not in ("step", "time", "data_time")]:
                r[f"val/{k}"] = r.pop(k)
    if moved:
        notes.append(
            f"{moved} validation records numbered by epoch (mmengine's epoch-based loop) are "
            "placed at the last iteration of their epoch, their metrics read as eval metrics"
        )


def sniff_plain_jsonl(path: Path) -> bool:
    """Any ``.jsonl``/``.ndjson`` file, and a Keras history saved as ``.json``."""
    if not path.is_file():
        return False
    return (
        path.suffix.lower() in _JSONL_SUFFIXES
        or _looks_like_json_history(path)
        or _json_lines_in_json(path)
    )


#: ``{"loss": [`` ... at the start of a Keras ``History.history`` dumped with ``json.dump``,
#: or ``[{"epoch": 1, "loss": ...`` of a list of per-epoch records.
_HISTORY_RECORDS = re.compile(rb"^\s*\[\s*\{")
_LOSS_LIST_KEY = re.compile(rb'"[^"]{0,200}loss[^"]{0,200}"\s*:\s*\[', re.IGNORECASE)
_LOSS_KEY = re.compile(rb'"[^"]{0,200}loss[^"]{0,200}"\s*:', re.IGNORECASE)


#: ``{"train": [...], "val": [...]}`` or ``[[step, train, val], ...]`` in a file its name calls
#: a loss (``loss_history.json``): the lists are that loss's splits.
_SPLIT_NAMES = {
    "train": "train_loss",
    "training": "train_loss",
    "val": "val_loss",
    "valid": "val_loss",
    "validation": "val_loss",
    "eval": "eval_loss",
    "test": "test_loss",
}
_SPLIT_LIST_KEY = re.compile(rb'"(?:' + "|".join(_SPLIT_NAMES).encode() + rb')"\s*:\s*\[')
_ROW_LISTS = re.compile(rb"^\s*\[\s*\[\s*-?\d")
#: ``{"config": {...}, "history": [{"step": 0, "train_loss": 9.03, ...}, ...]}``: a list of
#: per-step records under a key of an object, its first record holding a numeric loss.
_WRAPPED_RECORDS = re.compile(
    rb'"[^"]{1,100}"\s*:\s*\[\s*\{[^\[\]{}]{0,2000}?"[^"]{0,200}loss[^"]{0,200}"\s*:\s*-?\d',
    re.IGNORECASE,
)


def _names_a_loss(path: Path) -> bool:
    return "loss" in path.stem.lower()


#: Names of a file holding a loop's whole history: split-named lists in it are its loss curves
#: (``json.dump({"train": train_losses, "val": val_losses}, open("history.json", "w"))``).
_HISTORY_STEMS = frozenset({"history", "train_history", "training_history", "loss_history"})


def _split_lists_are_losses(path: Path) -> bool:
    return _names_a_loss(path) or path.stem.lower() in _HISTORY_STEMS


def _looks_like_json_history(path: Path) -> bool:
    if path.suffix.lower() != ".json":
        return False
    head = head_bytes(path)
    if head.lstrip().startswith(b"{"):
        # the loss lists may sit after metadata (a timestamp, class names...)
        return (
            bool(_LOSS_LIST_KEY.search(head))
            or (_split_lists_are_losses(path) and bool(_SPLIT_LIST_KEY.search(head)))
            or bool(_WRAPPED_RECORDS.search(head))
        )
    if _names_a_loss(path) and _ROW_LISTS.match(head):
        return True
    return bool(_HISTORY_RECORDS.match(head)) and bool(_LOSS_KEY.search(head))


def _loss_rows(path: Path, obj: list[Any]) -> list[dict[str, Any]] | None:
    """``[[step, train, val], ...]`` (or ``[step, loss]`` pairs) in a file named for its loss:
    rows of 2 or 3 numbers whose first is a rising whole step."""
    if not _names_a_loss(path) or not all(
        isinstance(r, list)
        and len(r) in (2, 3)
        and len(r) == len(obj[0])
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in r)
        for r in obj
    ):
        return None
    steps = [r[0] for r in obj]
    if any(float(x) != int(x) for x in steps) or any(b <= a for a, b in pairwise(steps)):
        return None
    names = ("step", "train_loss", "val_loss")[: len(obj[0])]
    return [dict(zip(names, r, strict=True)) for r in obj]


def _has_numeric_loss(record: Any) -> bool:
    return isinstance(record, dict) and any(
        "loss" in str(k).lower() and isinstance(v, (int, float)) and not isinstance(v, bool)
        for k, v in record.items()
    )


def _settings(obj: dict[str, Any], skip: object = None) -> dict[str, Any]:
    """The scalar settings in the mappings of ``obj`` (``training_config``, ``config``), all
    merged, for :func:`apply_trainer_config`; ``skip`` is the mapping that holds the curves."""
    config: dict[str, Any] = {}
    for value in obj.values():
        if isinstance(value, dict) and value is not skip:
            config.update({str(k): v for k, v in value.items() if not isinstance(v, (dict, list))})
    return config


def _wrapped_records(obj: dict[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """``{"training_config": {...}, "history": [{...}, ...]}``: the one list of records holding
    a numeric loss, and the settings in the object's other mappings (``max_steps``,
    ``learning_rate`` ...) for :func:`apply_trainer_config`."""
    found = [
        v
        for v in obj.values()
        if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)
        if any(_has_numeric_loss(r) for r in v[:10])
    ]
    if len(found) != 1:
        return None
    return found[0], _settings(obj)


def _numeric_lists(obj: dict[str, Any]) -> dict[str, list[Any]]:
    """The values of ``obj`` that are non-empty lists of numbers (None allowed)."""
    return {
        k: v
        for k, v in obj.items()
        if isinstance(v, list)
        and v
        and all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in v)
    }


def _wrapped_lists(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``{"config": {...}, "metrics_history": {"step": [...], "loss": [...]}}``: the one
    mapping of lists of numbers that names a loss, when the object's top level holds none, and
    the settings in its other mappings."""
    if any("loss" in k.lower() for k in _numeric_lists(obj)):
        return None
    found = [
        v
        for v in obj.values()
        if isinstance(v, dict) and any("loss" in k.lower() for k in _numeric_lists(v))
    ]
    if len(found) != 1:
        return None
    return found[0], _settings(obj, skip=found[0])


def _align_steps(lists: dict[str, list[Any]], notes: list[str]) -> dict[str, list[Any]]:
    """A step list longer than the loss list it numbers: a logger that records the step (and
    epoch) of every log, evaluations included, but the loss only at the train logs. The
    evaluations are the entries that repeat the step before them (the Trainer evaluates at the
    step it has just logged); when dropping those leaves exactly one step per loss, they are
    dropped from every list of the step list's length. Any other mismatch leaves the lists
    as they are."""
    step_key = next((k for k in lists if k.lower() in STEP_COLUMNS), None)
    loss_keys = [k for k in lists if "loss" in k.lower()]
    if step_key is None or not loss_keys:
        return lists
    steps, n_loss = lists[step_key], len(lists[loss_keys[0]])
    if len(steps) <= n_loss or any(len(lists[k]) != n_loss for k in loss_keys):
        return lists
    keep = [i for i, x in enumerate(steps) if i == 0 or x != steps[i - 1]]
    if len(keep) != n_loss:
        return lists
    notes.append(
        f"the {step_key} list has {len(steps)} entries and the loss {n_loss}: the "
        f"{len(steps) - n_loss} entries that repeat the step before them (evaluations) are "
        "left out so that each loss keeps its step"
    )
    long = len(steps)
    return {k: ([v[i] for i in keep] if len(v) == long else v) for k, v in lists.items()}


def _falls(lists: dict[str, list[Any]]) -> bool:
    """The train list (``train`` / ``training``) ends below where it started."""
    train = next((v for k, v in lists.items() if k.lower() in ("train", "training")), None)
    vals = [x for x in train or [] if x is not None and math.isfinite(x)]
    return len(vals) >= 2 and vals[-1] < vals[0]


def _json_history_rows(
    path: Path, text: str, notes: list[str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The per-epoch rows of a Keras ``History.history`` dict (each key a list, one entry per
    epoch), of a JSON list of per-epoch objects (``[{"epoch": 1, "train_loss": ...}, ...]``),
    or of such a list under a key of an object whose other mappings hold the run's settings;
    with those settings (empty when there are none). Raises :class:`MalformedRunError` naming
    the problem when it is none of these."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise MalformedRunError(path, f"not valid JSON ({exc})") from None
    config: dict[str, Any] = {}
    if isinstance(obj, dict) and (wrapped := _wrapped_records(obj)) is not None:
        obj, config = wrapped
    elif isinstance(obj, dict) and (inner := _wrapped_lists(obj)) is not None:
        obj, config = inner
    if isinstance(obj, list) and obj and (rows := _loss_rows(path, obj)) is not None:
        return rows, config
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
        if any("epoch" in r or "step" in r for r in obj):
            return [dict(r) for r in obj], config
        return [{"epoch": i + 1, **r} for i, r in enumerate(obj)], config
    if not isinstance(obj, dict) or not obj:
        raise MalformedRunError(
            path,
            "not a training history: the JSON is neither an object of lists nor a list of objects",
        )
    # the curves are the lists of numbers; metadata beside them (a timestamp, class names,
    # phase labels) is left out
    lists = _numeric_lists(obj)
    if (
        not any("loss" in k.lower() for k in lists)
        and _split_lists_are_losses(path)
        and (_names_a_loss(path) or _falls(lists))
    ):
        # {"train": [...], "val": [...]} in loss_history.json: the splits of the loss it names;
        # in a plain history.json, only when its train curve falls (an accuracy rises)
        lists = {_SPLIT_NAMES.get(k.lower(), k): v for k, v in lists.items()}
        if not _names_a_loss(path):
            notes.append(
                f"{path.name} names no metric: its split-named lists "
                f"({', '.join(sorted(lists))}) are read as the loss because the train curve "
                "falls; map them with --map if they hold another metric"
            )
    if not any("loss" in k.lower() for k in lists):
        raise MalformedRunError(
            path, "not a training history: no key holding a list of numbers names a loss"
        )
    lists = _align_steps(lists, notes)
    n = max(len(v) for v in lists.values())
    rows = [{k: v[i] for k, v in lists.items() if i < len(v)} for i in range(n)]
    if any(k.lower() in STEP_COLUMNS for k in lists):
        return rows, config  # a list of the steps the entries were logged at numbers them
    return [{"epoch": i + 1, **r} for i, r in enumerate(rows)], config


def _planned_steps(table: Table) -> int | None:
    """The last ``total_steps`` of a LLaMA-Factory log: the steps the run planned."""
    col = table.columns.get("total_steps")
    if col is None:
        return None
    total = col.values[np.isfinite(col.values)]
    if not total.size or float(total[-1]) < 1 or not float(total[-1]).is_integer():
        return None
    return int(total[-1])


#: A first line that is one bare name, with no separator: a title, not a header.
_TITLE_LINE = re.compile(r"^\s*[A-Za-z][\w.\- ]{0,80}\s*$")


def read_plain_csv(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Read a CSV/TSV log with a step column."""
    text = read_text(path, "CSV log").lstrip("\ufeff")
    warnings: list[str] = []
    first, _, rest = text.partition("\n")
    if _TITLE_LINE.match(first) and any(c in rest.split("\n", 1)[0] for c in ",;\t"):
        # a title line above the header (a CSVLogger file someone named: "model_history_log")
        text = rest
        warnings.append(f"the first line of {path.name} ({first.strip()!r}) is a title: skipped")
    header = text.split("\n", 1)[0]
    suffix = path.suffix.lower()
    sep = "\t" if suffix == ".tsv" else ","
    if suffix in _TABLE_LOG_SUFFIXES:
        sep = table_log_delimiter(header) or sep
    if sep == "," and "," not in header:
        if ";" in header:
            sep = ";"  # Keras' CSVLogger(separator=";")
        elif "\t" in header:
            sep = "\t"  # a tab-separated table saved as .csv (pandas' to_csv(sep="\t"))
    if _headerless_loss_pairs(path, text, sep):
        # "0,0.4069" rows with no header in loss.csv / loss_log.txt: a row counter and the loss
        held_out = set(re.split(r"[^a-z]+", path.stem.lower())) & EVAL_SPLIT_WORDS
        text = f"step{sep}{'val_loss' if held_out else 'loss'}\n" + text
        warnings.append(
            f"{path.name} has no header: its two columns are read as a row counter and the "
            "loss its file name names"
        )
    table = parse_csv(path, text, "CSV log", sep=sep)
    return [plain_run(path, table, CSV_FORMAT, warnings, aliases)]


def _headerless_loss_pairs(path: Path, text: str, sep: str) -> bool:
    """A table named for its loss (``loss.csv``, ``loss_log.txt``) whose first line is already
    two numbers, the first a whole row counter."""
    if not _names_a_loss(path):
        return False
    first = text.split("\n", 1)[0].strip().split(sep)
    try:
        return len(first) == 2 and float(first[0]).is_integer() and bool(float(first[1]) >= 0)
    except ValueError:
        return False


def read_plain_jsonl(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Read a JSON Lines log (one object per line) with a step key, or a Keras history."""
    if path.suffix.lower() == ".json" and _json_lines_in_json(path):
        rows, warnings = json_lines(path, read_text(path, "JSON Lines log"), "JSON Lines log")
        _mmengine_eval_steps(rows, warnings)
        table = rows_table(flatten(r) for r in rows)
        return [plain_run(path, table, JSONL_FORMAT, warnings, aliases)]
    if path.suffix.lower() == ".json":
        text = read_text(path, "JSON training history")
        notes: list[str] = []
        rows, config = _json_history_rows(path, text, notes)
        table = rows_table(flatten(r) for r in rows)
        run = plain_run(path, table, JSONL_FORMAT, [], aliases)
        if config:
            apply_trainer_config(run.meta, config)
        if text.lstrip().startswith("{"):
            run.warnings[:] = [
                "a Keras History.history saved as JSON: one entry per epoch, numbered from 1"
                if w.startswith("no step column")
                else w
                for w in run.warnings
            ]
        run.warnings.extend(notes)
        return [run]
    rows, warnings = json_lines(path, read_text(path, "JSON Lines log"), "JSON Lines log")
    table = rows_table(flatten(r) for r in rows)
    return [plain_run(path, table, JSONL_FORMAT, warnings, aliases)]


#: Counters of the batch within its epoch (``epoch,batch,loss``).
_BATCH_COLUMNS = ("batch", "batch_idx", "batch_index", "batch_id", "batch_num")


def _epoch_batch_steps(
    table: Table, step_name: str | None
) -> tuple[str, str, IntArray, int] | None:
    """Global steps for a log whose step counter restarts at every epoch.

    ``epoch,batch,loss`` (or ``epoch,iter,loss``) rows number the batch within its epoch: read as
    steps, every epoch would overwrite the one before. When the epoch never goes back and the
    counter falls back at each new epoch, step = epochs done x batches per epoch + batch.
    """
    epoch_name = find_column(table, EPOCH_COLUMNS)
    inner = step_name if step_name is not None else find_column(table, _BATCH_COLUMNS)
    if epoch_name is None or inner is None or inner == epoch_name:
        return None
    e_col, b_col = table.columns[epoch_name], table.columns[inner]
    rows = e_col.present & b_col.present
    if rows.sum() < 2 or not rows.all():
        return None
    e, b = e_col.values, b_col.values
    if not (np.all(np.isfinite(e)) and np.all(np.isfinite(b))):
        return None
    if np.any(e != np.floor(e)) or np.any(b != np.floor(b)) or b.min() < 0:
        return None
    de, db = np.diff(e), np.diff(b)
    new_epoch = de > 0
    if np.any(de < 0) or not new_epoch.any():
        return None
    # the counter restarts at every new epoch and only rises within one
    if not (np.all(db[new_epoch] < 0) and np.all(db[~new_epoch] > 0)):
        return None
    width = int(b.max() - b.min()) + 1
    epochs_done = (e - e.min()).astype(np.int64)
    steps = epochs_done * width + (b - b.min()).astype(np.int64)
    return epoch_name, inner, steps, width


def plain_run(
    path: Path, table: Table, fmt: str, warnings: list[str], aliases: dict[str, str] | None
) -> Run:
    _name_series_from_file(path, table, warnings, aliases)
    step_name = find_column(table, STEP_COLUMNS)
    nested = _epoch_batch_steps(table, step_name)
    if nested is not None:
        epoch_name, step_name, _, width = nested
        warnings.append(
            f"the {step_name!r} column restarts at every epoch: steps are epochs done x {width} "
            f"+ {step_name!r}, and {epoch_name!r} is kept as a metric"
        )
    if step_name is None:  # (a restarting counter, when found, is the step column now)
        step_name = find_column(table, EPOCH_COLUMNS)
        if step_name is not None:
            warnings.append("no step column: steps are the 'epoch' column")
        elif _has_loss_column(table, aliases):
            # a loop that writes one row per epoch (train_loss, val_loss, ...) and no counter
            warnings.append(
                "no step or epoch column: each row is one logging step, numbered 1, 2, ... "
                "(a log written once per epoch reads as epochs)"
            )
        else:
            raise MalformedRunError(
                path,
                "no step column (looked for " + ", ".join(STEP_COLUMNS) + ", epoch) and no "
                f"loss column to number by row; columns: {describe_columns(table)}",
            )
    wall_name = find_column(table, WALL_COLUMNS)
    # LLaMA-Factory's trainer_log.jsonl: each row's progress against the planned total
    progress_cols = {"total_steps", "percentage"} if step_name == "current_steps" else set()
    cols = [
        c
        for c in table.columns
        if c not in {step_name, wall_name, *progress_cols} and not is_unnamed(c)
    ]
    planned = _planned_steps(table) if progress_cols else None
    if not cols and progress_cols:
        # a LLaMA-Factory log of progress alone (a prediction run, do_predict): nothing to judge
        empty = Run(
            source=str(path),
            format=fmt,
            name=_run_name(path),
            warnings=[
                *warnings,
                f"{path.name} records progress only (steps and times, no loss or other metric): "
                "the log of a prediction or evaluation run",
            ],
        )
        empty.meta.max_steps = planned
        return _finish(empty, set(), dropped=OutOfRange(), table=table)
    if not cols:
        raise MalformedRunError(
            path,
            f"no numeric metric column besides {step_name!r}; columns: {describe_columns(table)}",
        )
    if nested is not None:
        steps, ok, integral = nested[2], np.ones(table.nrows, dtype=bool), True
    elif step_name is None:
        steps = np.arange(1, table.nrows + 1, dtype=np.int64)
        ok, integral = np.ones(table.nrows, dtype=bool), True
    else:
        steps, ok, integral = to_steps(table.columns[step_name])
    if integral and step_name is not None and step_name.lower() in EPOCH_COLUMNS:
        # steps are whole epochs: the epoch is kept too, so that how far the run got against
        # its planned epochs is known
        cols.append(step_name)
    if not integral:
        assert step_name is not None
        warnings.append(
            f"the step column {step_name!r} has fractional values: steps are row numbers and "
            f"{step_name!r} is kept as a metric"
        )
        steps = np.arange(table.nrows, dtype=np.int64)
        ok = np.ones(table.nrows, dtype=bool)
        cols.append(step_name)
    counts = {c: table.columns[c].count for c in cols}
    if path.name == "results.csv" and any(c.startswith("val/") for c in cols):
        aliases = _ultralytics_eval(table, cols, warnings, aliases)
    names, msgs = assign_names(cols, lambda c: canonical_name(c, extra=aliases), counts)
    warnings.extend(msgs)
    loss_raw = next((raw for raw, name in names.items() if name == "train/loss"), None)
    if step_name is not None and nested is None and loss_raw is not None:
        steps = _continued_sessions(steps, ok, table.columns[loss_raw], step_name, warnings)
    wall = wall_column(table, [wall_name]) if wall_name else None
    dropped = OutOfRange()
    step_col = table.columns[step_name] if step_name is not None else None
    metrics, restarts = build_metrics(
        table, names, steps, ok, wall, dropped=dropped, step_col=step_col
    )
    if not metrics:
        raise MalformedRunError(path, f"no row has both a {step_name!r} and a metric value")
    run = Run(
        source=str(path), format=fmt, name=_run_name(path), metrics=metrics, warnings=warnings
    )
    if planned is not None:
        run.meta.max_steps = planned
    if path.name == "results.csv":
        patience = apply_ultralytics_args(run.meta, path.parent, run.warnings)
        if patience is not None:
            _yolo_early_stop(run, table, patience)
    return _finish(run, restarts, dropped=dropped, table=table)


#: The share of the session before's fall a later session's first loss must keep to carry on.
_CARRIED_ON = 0.75


def share_kept(start: float | None, end: float | None, here: float) -> float | None:
    """How much of a session's fall from its first loss ``start`` to its last ``end`` still
    holds at ``here`` (1 = at the last value, 0 = back at the first), on a log scale for
    positive losses; None when the session logged no finite loss or did not fall."""
    if start is None or end is None or not math.isfinite(here):
        return None
    a, b, x = start, end, here
    if min(a, b, x) > 0:
        a, b, x = math.log(a), math.log(b), math.log(x)
    return (a - x) / (a - b) if a > b else None


def _continued_sessions(
    steps: IntArray, ok: BoolArray, loss: Column, step_name: str, warnings: list[str]
) -> IntArray:
    """Steps for a log appended by several sessions of one training, each counting from the
    start again (a loop that reloads its saved model and numbers its epochs from 1): where the
    counter falls back to its first value and the train loss there keeps at least three
    quarters of what the session before had taken off its first value (the model carried on; a
    fresh model starts high again, and a resume from a checkpoint rewinds only part of the way),
    the later session's steps follow the earlier's. One pass over the rows."""
    rows = np.flatnonzero(ok)
    if rows.size < 3:
        return steps.copy()
    first = int(steps[rows[0]])
    offset = 0
    sessions: list[tuple[int, int]] = []  # (index into rows where a later session starts, offset)
    sess_first: float | None = None  # the first and last finite loss of the session so far
    sess_last: float | None = None
    for k in range(rows.size):
        i = rows[k]
        if k and steps[i] < steps[rows[k - 1]]:
            here = float(loss.values[i]) if loss.present[i] else math.nan
            kept = share_kept(sess_first, sess_last, here)
            if steps[i] > first or kept is None or kept < _CARRIED_ON:
                return steps  # a resume that rewinds, or a fresh start: left to the resume logic
            offset += int(steps[rows[k - 1]]) - int(steps[i]) + 1
            sessions.append((k, offset))
            sess_first = sess_last = None
        if loss.present[i] and math.isfinite(x := float(loss.values[i])):
            sess_first = x if sess_first is None else sess_first
            sess_last = x
    out = steps.copy()
    for n, (k, off) in enumerate(sessions):
        end = sessions[n + 1][0] if n + 1 < len(sessions) else rows.size
        out[rows[k:end]] = steps[rows[k:end]] + off
    if sessions:
        warnings.append(
            f"the {step_name!r} column starts again from {first} at "
            f"{len(sessions)} row(s) with the loss where it had got to: read as later sessions "
            "of one training, their steps following on"
        )
    return out


def _ultralytics_eval(
    table: Table, cols: list[str], warnings: list[str], aliases: dict[str, str] | None
) -> dict[str, str]:
    """An Ultralytics results.csv's evaluation: its metrics/* columns (accuracy_top1,
    mAP50(B), ...) are computed on the validation set after each epoch, so they are eval
    scores (the user's own aliases first). Trained with ``val=False``, it validates after the
    last epoch only and writes 0 in every val/* and metrics/* cell of the others: those rows
    hold no evaluation and are left out of the eval curves."""
    held_out = [c for c in cols if c.startswith(("val/", "metrics/"))]
    skipped = np.ones(table.nrows, dtype=bool)
    for c in held_out:
        col = table.columns[c]
        skipped &= col.present & (col.values == 0.0)
    if skipped.any() and not skipped.all():
        for c in held_out:
            col = table.columns[c]
            table.columns[c] = Column(
                values=np.where(skipped, np.nan, col.values), present=col.present & ~skipped
            )
        warnings.append(
            f"{int(skipped.sum())} rows have 0 in every val/ and metrics/ column: no validation "
            "ran after those epochs (val=False), so they are left out of the eval curves"
        )
    scores = {c: "eval/" + c.split("/", 1)[1] for c in cols if c.startswith("metrics/")}
    return {**scores, **(aliases or {})}


def _yolo_early_stop(run: Run, table: Table, patience: int) -> None:
    """A YOLO run that stopped ``patience`` or more epochs after its best fitness (Ultralytics'
    0.1 mAP50 + 0.9 mAP50-95 of boxes) before its planned epochs was stopped by its own early
    stopping: it finished."""
    cols = table.columns
    e, m50, m95 = cols.get("epoch"), cols.get("metrics/mAP50(B)"), cols.get("metrics/mAP50-95(B)")
    planned = run.meta.num_train_epochs
    if e is None or m50 is None or m95 is None or planned is None:
        return
    ok = e.present & m50.present & m95.present
    if not ok.any():
        return
    epochs = e.values[ok]
    fitness = 0.1 * m50.values[ok] + 0.9 * m95.values[ok]
    since_best = int(epochs[-1]) - int(epochs[int(np.argmax(fitness))])
    if int(epochs[-1]) < planned and since_best >= patience:
        run.meta.finished = True
        run.warnings.append(
            f"stopped by early stopping: {since_best} epochs after its best fitness "
            f"(patience {patience} in args.yaml)"
        )


def _name_series_from_file(
    path: Path, table: Table, warnings: list[str], aliases: dict[str, str] | None
) -> None:
    """A pandas Series saved with ``to_csv`` (an index column and one column headed ``0``)
    holds the metric its file is named after: ``loss.csv`` -> train/loss."""
    named = [c for c in table.columns if not is_unnamed(c)]
    if len(named) != 1 or not named[0].strip().isdigit():
        return
    canon = canonical_name(path.stem, extra=aliases)
    header = path.stem
    if canon not in ("train/loss", "eval/loss"):
        # a name run together, cifarlosses2.csv / val_losses_run3.csv: "loss" inside it
        stem = path.stem.lower()
        if "loss" not in stem:
            return
        held_out = any(w in stem for w in ("val", "eval", "test"))
        canon, header = ("eval/loss", "val_loss") if held_out else ("train/loss", "loss")
    table.columns = {(header if c == named[0] else c): col for c, col in table.columns.items()}
    warnings.append(
        f"the only column is headed {named[0]!r} (a pandas Series): it is {canon}, "
        f"from the file name {path.name!r}"
    )


def _has_loss_column(table: Table, aliases: dict[str, str] | None) -> bool:
    """A column that names a train or eval loss (``loss``, ``train_loss``, ``val_loss`` ...)."""
    return any(
        canonical_name(c, extra=aliases) in ("train/loss", "eval/loss")
        for c in table.columns
        if table.columns[c].count
    )


#: File names that say nothing about the run (Keras' ``training.log``, ``history.csv`` ...): the
#: run is named after its folder instead.
_GENERIC_STEMS = frozenset(
    {
        "training",
        "train",
        "history",
        "log",
        "logs",
        "metrics",
        "train_log",
        "training_log",
        "results",
        "progress",
    }
)


def _run_name(path: Path) -> str:
    parent = path.resolve().parent.name
    return parent if path.stem.lower() in _GENERIC_STEMS and parent else path.stem


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------
LIGHTNING = TableReader(LIGHTNING_FORMAT, sniff_lightning, read_lightning)
TENSORBOARD_CSV = TableReader(TB_FORMAT, sniff_tensorboard_csv, read_tensorboard_csv)
PLAIN_CSV = TableReader(CSV_FORMAT, sniff_plain_csv, read_plain_csv)
PLAIN_JSONL = TableReader(JSONL_FORMAT, sniff_plain_jsonl, read_plain_jsonl)
#: In sniffing order (the plain readers accept any file with their extension: keep them last).
READERS = (LIGHTNING, TENSORBOARD_CSV, PLAIN_CSV, PLAIN_JSONL)
