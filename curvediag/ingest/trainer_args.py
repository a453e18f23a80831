"""The Hugging Face Trainer's arguments, wherever a tool stored them, onto :class:`RunMeta`.

TensorBoard keeps them as the JSON text summary ``args/text_summary``; W&B keeps them in the
run config (``files/config.yaml`` with ``{value: ...}`` nesting, or config records inside the
binary ``run-*.wandb`` log). The keys are the same everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from curvediag.model import RunMeta

__all__ = ["apply_trainer_config", "parse_args_text", "unwrap_wandb_config"]

_INT = {
    "max_steps": "max_steps",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "world_size": "world_size",
}
_FLOAT = {
    "max_grad_norm": "max_grad_norm",
    "learning_rate": "learning_rate",
    "num_train_epochs": "num_train_epochs",
    "logging_steps": "logging_steps",
    "eval_steps": "eval_steps",
    "save_steps": "save_steps",
    "warmup_ratio": "warmup_ratio",
}


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def unwrap_wandb_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Remove W&B's ``{key: {value: ..., desc: ...}}`` nesting and its private keys."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if k.startswith("_wandb") or k == "wandb_version":
            continue
        if isinstance(v, Mapping) and "value" in v and set(v) <= {"value", "desc"}:
            v = v["value"]
        out[str(k)] = v
    return out


def parse_args_text(text: str) -> dict[str, Any]:
    """The Trainer's arguments from its TensorBoard text summary (JSON), or {} if not JSON."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def apply_trainer_config(
    meta: RunMeta, config: Mapping[str, Any], *, overwrite: bool = False
) -> None:
    """Copy the Trainer arguments found in ``config`` onto ``meta``.

    All keys go to ``meta.hyperparameters``; the ones rules use (``max_grad_norm``, warmup,
    learning rate, batch size, ...) also to their ``RunMeta`` fields. Fields already set are
    kept unless ``overwrite``.
    """
    cfg = unwrap_wandb_config(config)
    for k, v in cfg.items():
        if overwrite or k not in meta.hyperparameters:
            meta.hyperparameters[k] = v

    def put(field: str, value: Any) -> None:
        if value is None:
            return
        if overwrite or getattr(meta, field) is None:
            setattr(meta, field, value)

    for key, field in _INT.items():
        v = _num(cfg.get(key))
        if v is not None and v > 0:
            put(field, int(v))
    for key, field in _FLOAT.items():
        v = _num(cfg.get(key))
        if v is not None and v > 0:
            put(field, v)
    warm = _num(cfg.get("warmup_steps"))
    if warm is not None and warm > 0:
        # transformers >= 5 folds warmup_ratio into warmup_steps: a value below 1 is a ratio
        if warm < 1:
            put("warmup_ratio", warm)
        else:
            put("warmup_steps", int(warm))
    elif warm == 0 and _num(cfg.get("warmup_ratio")) in (None, 0.0):
        put("warmup_steps", 0)
    bs = _num(cfg.get("per_device_train_batch_size", cfg.get("train_batch_size")))
    if bs is not None and bs > 0:
        put("train_batch_size", int(bs))
    sched = cfg.get("lr_scheduler_type")
    if isinstance(sched, str):
        put("lr_scheduler_type", sched.removeprefix("SchedulerType."))
    flt = cfg.get("logging_nan_inf_filter")
    if isinstance(flt, bool):
        put("logging_nan_inf_filter", flt)
