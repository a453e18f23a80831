"""Map the metric names that training tools write onto curvediag's canonical names.

Canonical names are slash-namespaced: ``train/loss``, ``train/grad_norm``,
``train/learning_rate``, ``train/epoch``, ``eval/loss``, ``eval/<metric>``, ``system/<metric>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["ALIASES", "STEP_COLUMNS", "canonical_name"]

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
}

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
)

_PREFIXES = (
    ("eval_", "eval/"),
    ("val_", "eval/"),
    ("validation_", "eval/"),
    ("train_", "train/"),
)
_NAMESPACES = {"train", "eval", "system"}
_SLUG = re.compile(r"\s+")


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
    if "/" in key:
        head = key.split("/", 1)[0].lower()
        return key if head in _NAMESPACES else f"{namespace}/{key}"
    for prefix, ns in _PREFIXES:
        if low_key.startswith(prefix) and len(key) > len(prefix):
            return ns + key[len(prefix) :]
    return f"{namespace}/{_SLUG.sub('_', key)}"
