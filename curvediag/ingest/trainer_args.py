"""The Hugging Face Trainer's arguments, wherever a tool stored them, onto :class:`RunMeta`.

TensorBoard keeps them as the JSON text summary ``args/text_summary``; W&B keeps them in the
run config (``files/config.yaml`` with ``{value: ...}`` nesting, or config records inside the
binary ``run-*.wandb`` log). The keys are the same everywhere. Lightning writes the module's
hyperparameters (``save_hyperparameters()``) to ``hparams.yaml`` beside its ``metrics.csv`` or
event file: :func:`apply_lightning_hparams` reads it the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from curvediag.model import RunMeta
from curvediag.normalize import MAX_ABS_VALUE, MAX_STEP, as_float

__all__ = [
    "apply_lightning_hparams",
    "apply_trainer_config",
    "apply_ultralytics_args",
    "parse_args_text",
    "unwrap_wandb_config",
]

#: A config file (``hparams.yaml``, ``config.yaml``, ``args.yaml``) larger than this is not
#: read: a run's settings are a few KB.
CONFIG_MAX_BYTES = 1 << 20


class _ConfigLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that reads a node under a tag it does not know as ``None``.

    Lightning writes objects it cannot represent (a loss module, a tensor of class weights) into
    ``hparams.yaml`` as ``!!python/object...`` tags; the plain safe loader refuses the whole file
    for one of them, losing ``max_steps`` and the rest. Here such a value is dropped: its tag is
    never resolved and nothing is imported, constructed or called (the node's children are not
    even visited). Every other construction is the safe loader's own.
    """


def _unknown_tag(loader: yaml.SafeLoader, node: yaml.Node) -> None:
    return None


_ConfigLoader.add_constructor(None, _unknown_tag)


def safe_load_config(text: str) -> Any:
    """Parse a config file's text like ``yaml.safe_load``, with values under unknown tags
    (``!!python/object...``) read as ``None`` instead of failing the whole file."""
    loader = _ConfigLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def apply_lightning_hparams(meta: RunMeta, folder: Path, warnings: list[str]) -> None:
    """Fill ``meta`` from the Lightning ``hparams.yaml`` in ``folder``, and from the
    ``config.yaml`` LightningCLI saves beside it, when there are such files.

    Read with the safe loader only: a value under a Python object tag (Lightning writes them
    for objects it cannot represent) reads as ``None`` and is never constructed. Keys of a
    nested ``trainer`` / ``train`` / ``training`` mapping (``max_epochs``, ``epochs``,
    ``max_steps``) count as top-level ones. Only missing fields are filled, so what the log
    itself says wins.
    """
    for name in ("hparams.yaml", "config.yaml"):
        data = _read_yaml(folder / name, warnings)
        if not isinstance(data, dict):
            continue
        cfg = {str(k): v for k, v in data.items()}
        if name == "config.yaml" and not isinstance(cfg.get("trainer"), dict):
            continue  # not LightningCLI's: some other tool's config
        for section in _TRAINING_SECTIONS:
            nested = cfg.get(section)
            if isinstance(nested, dict):
                for k, v in nested.items():
                    cfg.setdefault(str(k), v)
        apply_trainer_config(meta, cfg)


def apply_ultralytics_args(meta: RunMeta, folder: Path, warnings: list[str]) -> int | None:
    """Fill ``meta`` from the ``args.yaml`` Ultralytics (YOLO) writes beside ``results.csv``
    (``epochs`` is the plan) and return its early-stopping ``patience`` in epochs, or None.

    YOLOv5 and YOLOv7 name the same file ``opt.yaml`` (their ``train.py`` options, beside
    ``results.csv`` / ``results.txt`` and the TensorBoard event file); it is read when there is
    no ``args.yaml``.
    """
    data = None
    for name in ("args.yaml", "opt.yaml"):
        data = _read_yaml(folder / name, warnings)
        if isinstance(data, dict):
            break
    if not isinstance(data, dict):
        return None
    epochs = _as_int(data.get("epochs"), 1)
    if epochs is None:
        return None
    if meta.num_train_epochs is None:
        meta.num_train_epochs = float(epochs)
    for key, value in data.items():
        meta.hyperparameters.setdefault(str(key), value)
    return _as_int(data.get("patience"), 1)


#: Mappings of a Lightning config whose keys are the training settings.
_TRAINING_SECTIONS = ("trainer", "train", "training")


def _read_yaml(path: Path, warnings: list[str]) -> Any:
    try:
        if not path.is_file() or path.stat().st_size > CONFIG_MAX_BYTES:
            return None
        return safe_load_config(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, yaml.YAMLError, RecursionError) as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        warnings.append(f"{path}: not read ({reason})")
        return None


def parse_args_text(text: str) -> dict[str, Any]:
    """The Trainer's arguments from its TensorBoard text summary (JSON), or {} if not JSON."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def unwrap_wandb_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """W&B's ``{key: {"value": v, "desc": ...}}`` nesting removed; ``_wandb`` keys dropped."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        k = str(key)
        if k in {"_wandb", "wandb_version"}:
            continue
        if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
            value = value["value"]
        out[k] = value
    return out


def _as_int(v: Any, minimum: int) -> int | None:
    num = as_float(v)
    if num is None or not math.isfinite(num) or num != math.floor(num) or num < minimum:
        return None
    if num > MAX_STEP:
        return None
    return int(num)


def _as_float(v: Any, minimum: float, strict: bool = False) -> float | None:
    num = as_float(v)
    if num is None or not math.isfinite(num) or num < minimum or (strict and num <= minimum):
        return None
    if abs(num) > MAX_ABS_VALUE:
        return None
    return num


def _scheduler(v: Any) -> str | None:
    if not isinstance(v, str) or not v.strip():
        return None
    s = v.strip()
    if s.startswith("SchedulerType."):  # str(enum) in some transformers versions
        s = s.split(".", 1)[1]
    return s.lower()


def apply_trainer_config(
    meta: RunMeta, config: Mapping[str, Any], *, overwrite: bool = False
) -> None:
    """Fill ``meta`` from a run's config (the HF Trainer's ``TrainingArguments`` keys).

    Works for any source of those keys: W&B's ``config.yaml`` (its ``{value: ..., desc: ...}``
    nesting is removed here), the Trainer's arguments text summary in TensorBoard, the config
    records of a ``run-*.wandb`` file. Known keys set ``max_grad_norm``, ``warmup_steps``,
    ``warmup_ratio``, ``learning_rate``, ``lr_scheduler_type``, ``train_batch_size`` (from
    ``per_device_train_batch_size``, else ``train_batch_size``), ``gradient_accumulation_steps``,
    ``logging_steps``, ``eval_steps``, ``save_steps``, ``max_steps`` (the Trainer's -1 means
    unset), ``num_train_epochs`` (else ``epochs``, ``num_epochs``, ``n_epochs`` or
    ``max_epochs``) and ``logging_nan_inf_filter``; invalid values are ignored.
    The whole (unwrapped) config is merged into ``meta.hyperparameters``.

    Args:
        meta: Updated in place.
        config: The config mapping.
        overwrite: Replace fields (and hyperparameters) that are already set; by default only
            missing ones are filled, so values a Trainer state already gave win.
    """
    cfg = unwrap_wandb_config(config)

    def put(field: str, value: Any) -> None:
        if value is not None and (overwrite or getattr(meta, field) is None):
            setattr(meta, field, value)

    put("max_grad_norm", _as_float(cfg.get("max_grad_norm"), 0.0))
    # plain training loops (nanoGPT and its descendants) name their settings differently;
    # their grad_clip of 0.0 means "no clipping"
    put("max_grad_norm", _as_float(cfg.get("grad_clip"), 0.0, strict=True))
    warm = _as_float(cfg.get("warmup_steps"), 0.0)
    if warm is not None and 0 < warm < 1:
        # transformers >= 5 folds warmup_ratio into warmup_steps: a value below 1 is a ratio
        put("warmup_ratio", warm)
    else:
        put("warmup_steps", _as_int(cfg.get("warmup_steps"), 0))
    put("warmup_steps", _as_int(cfg.get("warmup_iters"), 0))
    ratio = _as_float(cfg.get("warmup_ratio"), 0.0)
    put("warmup_ratio", ratio if ratio is not None and ratio <= 1.0 else None)
    put("learning_rate", _as_float(cfg.get("learning_rate"), 0.0))
    put("lr_scheduler_type", _scheduler(cfg.get("lr_scheduler_type")))
    batch = _as_int(cfg.get("per_device_train_batch_size"), 1)
    put("train_batch_size", batch if batch is not None else _as_int(cfg.get("train_batch_size"), 1))
    put("gradient_accumulation_steps", _as_int(cfg.get("gradient_accumulation_steps"), 1))
    for key in ("logging_steps", "eval_steps", "save_steps"):
        put(key, _as_float(cfg.get(key), 0.0, strict=True))
    put("max_steps", _as_int(cfg.get("max_steps"), 1))
    put("max_steps", _as_int(cfg.get("max_iters"), 1))
    put("world_size", _as_int(cfg.get("world_size"), 1))
    put("num_train_epochs", _as_float(cfg.get("num_train_epochs"), 0.0, strict=True))
    # ... and the names other training loops give the planned epochs
    for key in ("epochs", "num_epochs", "n_epochs", "max_epochs"):
        put("num_train_epochs", _as_float(cfg.get(key), 0.0, strict=True))
    nan_filter = cfg.get("logging_nan_inf_filter")
    put("logging_nan_inf_filter", nan_filter if isinstance(nan_filter, bool) else None)
    for key, value in cfg.items():
        if overwrite or key not in meta.hyperparameters:
            meta.hyperparameters[key] = value
