"""Map the metric names that training tools write onto curvediag's canonical names.

Canonical names are slash-namespaced: ``train/loss``, ``train/grad_norm``,
``train/learning_rate``, ``train/epoch``, ``eval/loss``, ``eval/<metric>``, ``system/<metric>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["ALIASES", "EPOCH_COLUMNS", "STEP_COLUMNS", "canonical_name", "paired_names"]

#: "Epoch" in the languages course and thesis logs are written in (see ALIASES).
_EPOCH_WORDS = ("epoca", "època", "época", "epoche", "époque")

#: Exact (case-insensitive) spellings -> canonical name.
ALIASES: dict[str, str] = {
    # training loss
    "loss": "train/loss",
    "train_loss": "train/loss",
    "train/loss": "train/loss",
    "training_loss": "train/loss",
    "training/loss": "train/loss",
    "loss/train": "train/loss",
    "train_loss_step": "train/loss",
    "epoch_loss": "train/loss",
    # evaluation loss
    "eval_loss": "eval/loss",
    "eval/loss": "eval/loss",
    "val_loss": "eval/loss",
    "val/loss": "eval/loss",
    "valid_loss": "eval/loss",
    "valid/loss": "eval/loss",
    "validation_loss": "eval/loss",
    "validation/loss": "eval/loss",
    "loss/val": "eval/loss",
    "loss/validation": "eval/loss",
    "loss/eval": "eval/loss",
    "val_loss_epoch": "eval/loss",
    # learning rate
    "learning_rate": "train/learning_rate",
    "lr": "train/learning_rate",
    "train/learning_rate": "train/learning_rate",
    "train/lr": "train/learning_rate",
    "lr-adamw": "train/learning_rate",
    "lr-adam": "train/learning_rate",
    "optimizer/lr": "train/learning_rate",
    # gradient norm
    "grad_norm": "train/grad_norm",
    "train/grad_norm": "train/grad_norm",
    "gradient_norm": "train/grad_norm",
    "grad_norm/total": "train/grad_norm",
    "train/gradient_norm": "train/grad_norm",
    # progress
    "epoch": "train/epoch",
    "train/epoch": "train/epoch",
    # throughput / memory
    "train_samples_per_second": "system/samples_per_second",
    "train/samples_per_second": "system/samples_per_second",
    "samples_per_second": "system/samples_per_second",
    "tokens_per_second": "system/tokens_per_second",
    "train/tokens_per_second": "system/tokens_per_second",
    "train_steps_per_second": "system/steps_per_second",
    "steps_per_second": "system/steps_per_second",
    "memory_allocated": "system/memory_allocated",
    "train/memory_allocated": "system/memory_allocated",
    "gpu_mem": "system/memory_allocated",
    # memory under the names Trainer callbacks, Lightning and W&B system metrics use
    "gpu_memory_allocated_gb": "system/memory_allocated",
    "gpu_memory_allocated": "system/memory_allocated",
    "memory/allocated": "system/memory_allocated",
    "memory/allocated_gb": "system/memory_allocated",
    "memory/max_allocated": "system/memory_allocated",
    "memory/reserved": "system/memory_reserved",
    "gpu_memory_reserved_gb": "system/memory_reserved",
    "system/gpu.0.memoryallocated": "system/memory_allocated",
    "system/gpu.0.memoryallocatedbytes": "system/memory_allocated",
    "gpu_0/memory_allocated_gb": "system/memory_allocated",
    "gpu.0.memoryallocated": "system/memory_allocated",
    # train / eval loss under the names of Lightning, Keras, nanoGPT and W&B exports
    "train_loss_epoch": "train/loss",
    "train/loss_step": "train/loss",
    "train/loss_epoch": "train/loss",
    "trainer/loss": "train/loss",
    "train/avg_loss": "train/loss",
    "val/loss_epoch": "eval/loss",
    "val_loss_step": "eval/loss",
    "validation/epoch_loss": "eval/loss",
    "epoch_val_loss": "eval/loss",
    "test/loss": "eval/loss",
    "grad_norm/total_norm": "train/grad_norm",
    "train/grad_norm_total": "train/grad_norm",
    "grad/norm": "train/grad_norm",
    "train/global_grad_norm": "train/grad_norm",
    # the loss and the epoch in the languages course and thesis logs are written in (Catalan,
    # Spanish, Portuguese, Italian, French, German, Chinese, Japanese, Korean)
    **dict.fromkeys(
        ("perdua", "pèrdua", "perdida", "pérdida", "perda", "perdita", "perte", "verlust"),
        "train/loss",
    ),
    **dict.fromkeys(("损失", "損失", "손실"), "train/loss"),
    **dict.fromkeys(_EPOCH_WORDS, "train/epoch"),
    # a hand-written table's plural header (``Epochs,Train Loss,Test Loss,...``)
    "epochs": "train/epoch",
}

#: Epoch columns of a tabular log (the English name and the same words as above).
EPOCH_COLUMNS = ("epoch", "epochs", *_EPOCH_WORDS)

#: Step columns of a tabular log, best first (``epoch`` is only a fallback).
STEP_COLUMNS = (
    "step",
    "global_step",
    "train/global_step",
    "trainer/global_step",
    "steps",
    "iteration",
    "iter",
    "_step",
    "current_steps",  # LLaMA-Factory's trainer_log.jsonl
)

_PREFIXES = (
    ("eval_", "eval/"),
    ("val_", "eval/"),
    ("validation_", "eval/"),
    ("valid_", "eval/"),
    ("train_", "train/"),
)
_NAMESPACES = {"train", "eval", "system"}
_EVAL_HEADS = {"val", "valid", "validation"}
_SLUG = re.compile(r"\s+")
#: per-device memory logged by Trainer callbacks and W&B: gpu_0/memory_allocated_GB, ...
_GPU_MEMORY = re.compile(r"(?:system/)?gpu[._]?\d+[/.]memory_?allocated(?:_?gb|_?bytes)?")


def canonical_name(
    raw: str, *, namespace: str = "train", extra: Mapping[str, str] | None = None
) -> str:
    """The canonical name for a metric key as a tool wrote it.

    Args:
        raw: The key as written (``loss``, ``eval_loss``, ``Loss/train``, ...).
        namespace: Namespace for bare keys that are not in the alias table (``train`` for a
            Trainer training log entry, ``eval`` for an evaluation entry).
        extra: User mappings (raw key -> canonical name), checked first.

    Returns:
        A slash-namespaced name such as ``train/loss`` or ``eval/accuracy``.
    """
    key = raw.strip()
    if extra:
        if key in extra:
            return extra[key]
        low = {k.lower(): v for k, v in extra.items()}
        if key.lower() in low:
            return low[key.lower()]
    low_key = key.lower()
    if low_key in ALIASES:
        return ALIASES[low_key]
    if _GPU_MEMORY.fullmatch(low_key):
        return "system/memory_allocated"
    if "/" in key:
        head, rest = key.split("/", 1)
        if head.lower() in _EVAL_HEADS:  # val/rmse_loss, validation/acc, test/loss
            if "/" in rest:  # val/coco/bbox_mAP, val/accuracy/top1: the rest is already a path
                return f"eval/{rest}"
            return canonical_name(f"eval_{rest}", namespace="eval", extra=extra)
        return key if head.lower() in _NAMESPACES else f"{namespace}/{key}"
    for prefix, ns in _PREFIXES:
        if low_key.startswith(prefix) and len(key) > len(prefix):
            return ns + key[len(prefix) :]
    return f"{namespace}/{_SLUG.sub('_', key)}"


def paired_names(
    keys: Iterable[str],
    *,
    namespace: str = "train",
    extra: Mapping[str, str] | None = None,
    counts: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """Canonical names for a run's keys, aware of Lightning's ``<name>_step``/``_epoch`` pairs.

    A metric logged with both ``on_step`` and ``on_epoch`` (``self.log(..., on_step=True,
    on_epoch=True)``) gets both keys, in every logger Lightning writes to (CSV, TensorBoard, W&B).
    For training metrics the per-step one is the curve (``train_loss_step`` -> train/loss) and
    the epoch aggregate keeps an ``_epoch`` suffix (train/loss_epoch); for validation metrics
    the epoch aggregate is the curve (``val_loss_epoch`` -> eval/loss) and the per-step one
    keeps its suffix. Without this both would land in one series, the epoch means (the first
    one spanning the whole first epoch) interleaved with single-batch values. Given ``counts``
    (points per key), a training metric whose per-step series has fewer points than its epoch
    series (epochs shorter than ``log_every_n_steps``) takes the epoch series as its curve. A
    key the user mapped in ``extra`` keeps that mapping.
    """
    present = set(keys)
    out: dict[str, str] = {}
    for key in present:
        if extra and key in extra:
            out[key] = canonical_name(key, namespace=namespace, extra=extra)
            continue
        name = canonical_name(key, namespace=namespace, extra=extra)
        for suffix, other in (("_step", "_epoch"), ("_epoch", "_step")):
            base = key[: -len(suffix)]
            if key.endswith(suffix) and base and base + other in present:
                canon = canonical_name(base, namespace=namespace, extra=extra)
                primary = "_epoch" if canon.startswith("eval/") else "_step"
                if (
                    primary == "_step"
                    and counts is not None
                    and counts.get(base + "_step", 0) < counts.get(base + "_epoch", 0)
                ):
                    primary = "_epoch"
                name = canon if suffix == primary else canon + suffix
                break
        out[key] = name
    return out
