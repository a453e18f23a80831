"""Features for checks against what is known outside the curve: chance level, exact zeros, the
usual learning-rate range, the train/eval ratio, and the values a fix should propose.

The ``cfg.*`` features are what fix templates quote: the run's current setting and a target
computed from it. A target that would be a no-op, or that contradicts the configuration (raising
a learning rate that is already above the usual range), is ``None``, so the optional template
segment that quotes it disappears.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features.evalgap import _smoothed_train_at
from curvediag.features.loss import train_loss
from curvediag.features.metrics import CLASS_KEYS
from curvediag.features.registry import FeatureContext, Value, feature_group

#: How to regularise, by whether the run trains adapters (True), a whole model (False) or is
#: not known to do either (None).
_REGULARISE: dict[bool | None, str] = {
    True: "weight_decay around 0.05, a lower LoRA rank or more lora_dropout, or a lower "
    "learning rate (around 1e-4 for adapters)",
    False: "weight_decay around 0.05, more dropout or data augmentation, or a lower learning rate",
    None: "weight_decay around 0.05, more dropout (a lower LoRA rank if it trains adapters), or "
    "a lower learning rate",
}
#: Words in a run's name or configuration that say it trains adapters, not the whole model.
_ADAPTER_HINTS = ("lora", "qlora", "peft", "adapter", "prefix", "p-tuning", "ptuning", "ia3")
#: Highest usual peak learning rate for full fine-tuning of a pretrained transformer.
FULL_FT_MAX_LR = 1e-3
#: ... for adapters (LoRA and the like), or a Trainer run whose method is unknown.
ADAPTER_MAX_LR = 5e-3
#: ... for prefix / P-tuning / prompt tuning, which train a few embeddings at 1e-2 or more.
PROMPT_MAX_LR = 5e-2
#: ... for a Trainer run that trains a model from scratch (no pretrained model named).
SCRATCH_MAX_LR = 2e-2
#: Anywhere (any optimizer, any model): a peak learning rate of 1.0 or more is far outside.
ANY_MAX_LR = 1.0
#: ... and one below 1e-7 is far under what any common recipe uses (DPO and RLHF, the lowest,
#: run at 5e-7 to 5e-6; SGD and from-scratch training far higher).
ANY_MIN_LR = 1e-7
#: ... and for adapters (LoRA and the like), which train at 1e-5 to 1e-3: under 1e-6, ten times
#: below the lowest of those, the adapter barely moves.
ADAPTER_MIN_LR = 1e-6
#: A learning rate to bring one from far below into the usual range: the bottom of full
#: fine-tuning (1e-5), or of adapter fine-tuning (1e-4).
FROM_BELOW_LR = 1e-5
FROM_BELOW_ADAPTER_LR = 1e-4


def _maybe(ctx: FeatureContext, name: str) -> Value:
    """Another feature's value, or None when it is unavailable."""
    try:
        return ctx.get(name)
    except InsufficientDataError:
        return None


def _hp(ctx: FeatureContext) -> dict[str, Any]:
    return ctx.run.meta.hyperparameters or {}


def nice(x: float, *, below: float | None = None, above: float | None = None) -> float:
    """The nearest round value (1, 2, 3 or 5 x 10^k), strictly under ``below`` / over
    ``above`` when given."""
    if x <= 0 or not math.isfinite(x):
        return x
    k = math.floor(math.log10(x))
    cands = sorted({round(m * 10.0**e, 12) for e in (k - 1, k, k + 1) for m in (1, 2, 3, 5)})
    if below is not None:
        cands = [c for c in cands if c < below * (1 - 1e-9)] or cands
    if above is not None:
        cands = [c for c in cands if c > above * (1 + 1e-9)] or cands
    best = min(cands, key=lambda c: (abs(math.log(c / x)), c))
    return float(f"{best:.12g}")


def transformers_major(ctx: FeatureContext) -> int:
    """The transformers major version that wrote the run: its config, else the installed
    package, else 5."""
    hp = _hp(ctx)
    for key in ("transformers_version", "_transformers_version"):
        v = hp.get(key)
        if isinstance(v, str) and v[:1].isdigit():
            return int(v.split(".", 1)[0])
    return _installed_transformers_major()


@functools.cache
def _installed_transformers_major() -> int:
    """The installed transformers' major version, else 5 (looked up once per process: a batch
    must not search the installed packages' metadata for every run)."""
    try:
        from importlib import metadata

        return int(metadata.version("transformers").split(".", 1)[0])
    except Exception:  # not installed, or an odd version string
        return 5


def _prompt_tuning(ctx: FeatureContext) -> bool:
    text = " ".join([ctx.run.name, *map(str, _hp(ctx).keys())]).lower()
    return any(h in text for h in ("prefix", "p-tuning", "ptuning", "prompt_tuning", "pre_seq"))


def _adapter_hint(ctx: FeatureContext) -> bool | None:
    """True: adapters; False: the config is known and names none; None: unknown."""
    hp = _hp(ctx)
    text = " ".join([ctx.run.name, *map(str, hp.keys())]).lower()
    for key in ("peft_config", "adapter_config", "lora_r", "lora_alpha", "use_peft", "r"):
        if key in hp and key != "r":
            return True
    if any(h in text for h in _ADAPTER_HINTS):
        return True
    # a configuration naming a pretrained model and no adapter keys: full fine-tuning
    for k in ("_name_or_path", "model_name_or_path"):
        v = hp.get(k)
        if isinstance(v, str) and v.strip():
            return False
    return None


@feature_group(
    "zero",
    requires=["train/loss"],
    features={
        "zero.fraction": "fraction of the finite train-loss logs that are exactly 0.0",
        "zero.first_step": "first step logged with a loss of exactly 0.0",
        "zero.grad_zero_fraction": "fraction of the grad norms logged as exactly 0.0",
        "zero.rl_run": "the run logs rewards or a KL term (an RL objective, whose loss can be "
        "exactly zero or negative by design)",
        "zero.online_rl": "the run logs rewards earned by the policy itself (episode returns, "
        "GRPO/PPO rewards, a KL to a reference), not DPO's pairwise rewards of a fixed preference "
        "set: its loss is not a supervised loss over a fixed dataset",
        "zero.regression": "the run logs a regression error (MAE, RMSE, MSE, MAPE, R2) and no "
        "classification or language-model score (accuracy, F1, AUC, perplexity, BLEU...), or "
        "its loss is an MSE/MAE by name: a loss whose scale is the targets', which can fall "
        "to ~0 on a fitted curve",
        "zero.box_parts": "the box-regression parts of a detector's train loss (Ultralytics "
        "box_loss / dfl_loss, Detectron2 loss_box_reg, mmdet loss_bbox) that are exactly 0.0 "
        "at every one of at least 3 logs, comma-separated; None when there are none. A class "
        "loss of exactly 0 is normal for a single-class detector and is not counted",
        "zero.box_parts_logs": "how many logs those parts have",
    },
)
def _zero(ctx: FeatureContext) -> dict[str, Value]:
    steps, values = ctx.series("train/loss")
    ok = np.isfinite(values)
    if not bool(ok.any()):
        raise InsufficientDataError("no finite train-loss values")
    zero = ok & (values == 0.0)
    grad = ctx.run.get("train/grad_norm")
    gz: float | None = None
    if grad is not None and len(grad):
        gf = grad.values[np.isfinite(grad.values)]
        gz = float(np.mean(gf == 0.0)) if gf.size else None
    names = " ".join(ctx.run.metrics).lower()
    rl = "reward" in names or "/kl" in names or "train/kl" in names
    pairwise = ("chosen", "rejected", "margins", "rewards/accuracies")
    online = any(
        ("reward" in m or "episode" in m or m.endswith("/kl")) and not any(p in m for p in pairwise)
        for m in (n.lower() for n in ctx.run.metrics)
    )
    box, box_logs = _zero_box_parts(ctx)
    return {
        "zero.box_parts": box,
        "zero.box_parts_logs": box_logs,
        "zero.rl_run": rl,
        "zero.online_rl": online,
        "zero.regression": _regression(ctx),
        "zero.fraction": float(zero.sum() / ok.sum()),
        "zero.first_step": int(steps[int(np.argmax(zero))]) if bool(zero.any()) else None,
        "zero.grad_zero_fraction": gz,
    }


#: Leaf-name tokens of regression errors and of classification / language-model scores.
_REGRESSION_TOKENS = frozenset({"mae", "rmse", "mse", "mape", "smape", "r2", "l1", "huber"})
_CLASSIFICATION_TOKENS = frozenset(
    {"acc", "accuracy", "f1", "auc", "auroc", "precision", "recall", "perplexity", "ppl"}
    | {"bleu", "rouge1", "rouge", "rougel", "wer", "cer", "top1", "top5", "iou", "miou", "map"}
)
_TOKEN = re.compile(r"[a-z0-9]+")


def _regression(ctx: FeatureContext) -> bool:
    taken = next((w for w in ctx.run.warnings if w.startswith("train/loss is taken from")), "")
    if any(t in _REGRESSION_TOKENS for t in _TOKEN.findall(taken.lower().rsplit("/", 1)[-1])):
        return True
    regression = classification = False
    for name in ctx.run.metrics:
        tokens = set(_TOKEN.findall(name.lower().split("/", 1)[-1]))
        regression |= bool(tokens & _REGRESSION_TOKENS)
        classification |= bool(tokens & _CLASSIFICATION_TOKENS)
    return regression and not classification


#: Vocabulary sizes of common model families: a language model's loss stuck at ln(V) is a
#: uniform guess over its vocabulary even when the log does not name V.
COMMON_VOCABS: dict[int, str] = {
    30522: "BERT",
    32000: "LLaMA / Mistral",
    32768: "Mistral v3",
    50257: "GPT-2",
    50265: "RoBERTa / BART",
    49152: "StarCoder / SmolLM",
    128256: "Llama 3",
    151936: "Qwen2",
    256000: "Gemma",
}
_COMMON_VOCAB_TOLERANCE = 0.005
#: Class counts of the benchmark datasets half of all classifiers train on (MNIST, CIFAR-10,
#: Fashion-MNIST; CIFAR-100; ImageNet): a classifier whose loss sits at 2.30 has learned
#: nothing even when its log names no num_labels.
COMMON_CLASS_COUNTS: dict[int, str] = {
    10: "10-class (MNIST, CIFAR-10)",
    100: "100-class (CIFAR-100)",
    1000: "1000-class (ImageNet)",
}
#: ... matched within 1% of ln(K): all there is to go on, so a loss must sit right on it
_COMMON_CLASSES_TOLERANCE = 0.01


#: The box-regression parts of detectors' losses: zero only when no ground-truth box was
#: matched to any prediction (a label folder that was never found, empty label files).
_BOX_PARTS = frozenset({"box_loss", "dfl_loss", "loss_box_reg", "loss_bbox"})


def _zero_box_parts(ctx: FeatureContext) -> tuple[str | None, int | None]:
    zero: list[str] = []
    logs = 0
    for name, series in ctx.run.metrics.items():
        if not name.startswith("train/") or name.split("/")[-1].lower() not in _BOX_PARTS:
            continue
        v = series.values[np.isfinite(series.values)]
        if v.size >= 3 and bool(np.all(v == 0.0)):
            zero.append(name.split("/", 1)[1])
            logs = max(logs, int(v.size))
    return (", ".join(sorted(zero)), logs) if zero else (None, None)


@feature_group(
    "chance",
    requires=["train/loss"],
    features={
        "chance.k": "number of classes whose chance-level loss ln(K) the final loss sits at "
        "(K from the run's num_labels / num_classes / id2label / vocab_size, else 2), or None",
        "chance.level": "ln(K), the cross-entropy of a uniform guess over K classes",
        "chance.distance": "|final loss - ln(K)| / ln(K)",
        "chance.nats": "|final loss - ln(K)| in nats: exp of it is how many times more (or less) "
        "probability the model puts on the right class than a uniform guess",
        "chance.eval_min_ratio": "the lowest eval loss / ln(K): below 1 the model beat a "
        "uniform guess on held-out data (None without an eval loss)",
        "chance.k_named": "whether K is the run's own class count (num_labels, num_classes, "
        "id2label), not a vocabulary, the binary default nor a guessed common count",
        "chance.source": "where K came from: num_labels (num_classes, n_classes, ...), "
        "id2label, vocab_size, binary, a "
        "common class count (10, 100, 1000: only within 1% of its ln, when the run names no "
        "num_labels) or a common vocabulary size (only within 0.5% of its ln, when the run "
        "names no vocab_size)",
    },
)
def _chance(ctx: FeatureContext) -> dict[str, Value]:
    _steps, values, _ = train_loss(ctx)
    v = values[np.isfinite(values)]
    if v.size < 2 or not bool(np.all(v > 0)):
        raise InsufficientDataError("needs positive finite train losses")
    k_tail = max(min(3, v.size), v.size // 10)
    tail = float(np.median(v[-k_tail:]))
    hp = _hp(ctx)
    cands: list[tuple[int, str]] = []
    for key in (*CLASS_KEYS, "vocab_size"):
        x = hp.get(key)
        if isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 2:
            cands.append((int(x), key))
    id2label = hp.get("id2label")
    if isinstance(id2label, dict) and len(id2label) >= 2:
        cands.append((len(id2label), "id2label"))
    cands.append((2, "binary"))
    if not any(src in (*CLASS_KEYS, "id2label") for _, src in cands):
        cands += [(k, f"the {name} class count") for k, name in COMMON_CLASS_COUNTS.items()]
    if "vocab_size" not in hp:
        cands += [(k, f"the {name} vocabulary size") for k, name in COMMON_VOCABS.items()]
    best: tuple[float, int, str] | None = None
    for k, src in cands:
        d = abs(tail - math.log(k)) / math.log(k)
        if src.startswith("the ") and d > (
            _COMMON_CLASSES_TOLERANCE if src.endswith("class count") else _COMMON_VOCAB_TOLERANCE
        ):
            continue  # a guessed K must match closely: ln(K) is all it has to go on
        if best is None or d < best[0]:
            best = (d, k, src)
    assert best is not None
    d, k, src = best
    ev = ctx.run.get("eval/loss")
    finite = ev.values[np.isfinite(ev.values)] if ev is not None else np.empty(0)
    return {
        "chance.k": k,
        "chance.level": math.log(k),
        "chance.distance": d,
        "chance.nats": d * math.log(k),
        "chance.eval_min_ratio": float(finite.min()) / math.log(k) if finite.size else None,
        "chance.source": src,
        "chance.k_named": src in (*CLASS_KEYS, "id2label"),
    }


@feature_group(
    "ratio",
    requires=["train/loss", "eval/loss"],
    features={
        "ratio.eval_over_train": "eval loss / train loss around it, at the last evaluation",
        "ratio.max": "largest eval / train ratio over the evaluations",
        "ratio.max_step": "step of that evaluation",
        "ratio.train_at_max": "train loss around that evaluation",
        "ratio.eval_at_max": "eval loss at that evaluation",
        "ratio.eval_at_last": "eval loss at the last evaluation the ratio is taken at",
        "ratio.train_at_last": "train loss around that evaluation (ratio.eval_over_train's "
        "denominator)",
    },
)
def _ratio(ctx: FeatureContext) -> dict[str, Value]:
    steps, values = ctx.series("eval/loss")
    ok = np.isfinite(values) & (values > 0)
    s, v = steps[ok], values[ok]
    if v.size == 0:
        raise InsufficientDataError("no positive finite eval-loss values")
    tr = _smoothed_train_at(ctx, s)
    both = np.isfinite(tr) & (tr > 0)
    if not bool(both.any()):
        raise InsufficientDataError("no evaluation falls inside the logged train-loss range")
    r = v[both] / tr[both]
    i = int(np.argmax(r))
    return {
        "ratio.eval_over_train": float(r[-1]),
        "ratio.max": float(r[i]),
        "ratio.max_step": int(s[both][i]),
        "ratio.train_at_max": float(tr[both][i]),
        "ratio.eval_at_max": float(v[both][i]),
        "ratio.eval_at_last": float(v[both][-1]),
        "ratio.train_at_last": float(tr[both][-1]),
    }


def _into_range(usual: float, trainer: bool, optim: str) -> float:
    """A learning rate inside the usual range: a typical fine-tuning value for Adam-family
    Trainer runs (1e-4 full, 5e-4 adapters or from scratch), a tenth of the range's top for SGD,
    prompt tuning and other loops."""
    if trainer and "sgd" not in optim and usual < PROMPT_MAX_LR:
        return nice(1e-4 if usual <= FULL_FT_MAX_LR else 5e-4)
    return nice(usual / 10)


@feature_group(
    "cfg",
    requires=[],
    features={
        "cfg.transformers_major": "transformers major version that wrote the run (its config, "
        "else the installed one, else 5)",
        "cfg.lr": "the run's learning rate: its configured learning_rate, else the logged peak",
        "cfg.adapters": "the run trains adapters (LoRA...): true, false, or None when unknown",
        "cfg.regularise_arg": "how to regularise this kind of run: a lower LoRA rank for "
        "adapters, dropout or augmentation for a whole model, both named when unknown",
        "cfg.lr_usual_max": "highest usual peak learning rate for this kind of run",
        "cfg.run_kind": "the kind of run that range is for",
        "cfg.lr_over_usual": "cfg.lr / cfg.lr_usual_max",
        "cfg.lr_lower": "a learning rate 10x lower than the current one (rounded)",
        "cfg.lr_lower_mild": "a learning rate 3x lower than the current one (rounded)",
        "cfg.lr_raise": "a learning rate 10x higher, capped at the usual range (at the top of "
        "full fine-tuning for a Trainer run whose method is unknown); None when the "
        "current one is already at or above it",
        "cfg.lr_into_range": "a learning rate inside the usual range for this kind of run, when "
        "the current one is above it or far below it",
        "cfg.lr_floor": "the learning rate under which the run is far below what any common "
        "recipe of its kind uses: 1e-7 (DPO and RLHF, the lowest, run at 5e-7 and up), 1e-6 for "
        "adapters (LoRA trains at 1e-5 to 1e-3)",
        "cfg.lr_under_usual": "how many times the learning rate is below cfg.lr_floor: 100 "
        "means 1e-9 against 1e-7; None when it is not below",
        "cfg.warmup_arg": "the argument that sets a 10% warmup in the run's transformers "
        "version (warmup_steps=0.1 in 5.x, warmup_ratio=0.1 in 4.x); for a run the Trainer "
        "did not write (or nothing says it did), a linear warmup over 10% of the planned "
        "steps, in steps; None when the run already warms up over 10% or more",
        "cfg.warmup_now": "the run's warmup as written in its config (e.g. warmup_steps=0)",
        "cfg.warmup_short_arg": "the argument for a 5% warmup in the run's transformers "
        "version (in steps for other loops)",
        "cfg.eval_every_arg": "how to evaluate about every 5% of the planned steps: "
        'eval_strategy="steps" with eval_steps=N for the Trainer, an evaluation every N steps '
        "for other loops",
        "cfg.keep_best_arg": "how to keep the checkpoint of the best evaluation: "
        "load_best_model_at_end=True (save_steps a multiple of eval_steps) for the Trainer, in "
        "words for other loops",
        "cfg.keep_best_loss_arg": "how to keep the checkpoint of the lowest eval loss in the "
        'run\'s loop: load_best_model_at_end=True with metric_for_best_model="eval_loss" for '
        "the Trainer, a ModelCheckpoint callback for Lightning, in words (and Keras's callback) "
        "otherwise",
        "cfg.early_stop_arg": "how to stop once the eval loss stops improving in the run's loop: "
        "EarlyStoppingCallback for the Trainer, an EarlyStopping callback for Lightning, in "
        "words (and Keras's callback) otherwise; None when the run already stops early (its "
        "early stopping fired or its patience is configured)",
        "cfg.keep_best_score_arg": "the same as cfg.keep_best_loss_arg for the run's main eval "
        "score (metric_for_best_model and greater_is_better for the Trainer)",
        "cfg.early_stop_score_arg": "the same as cfg.early_stop_arg for the run's main eval score",
        "cfg.max_grad_norm": "the run's clipping threshold (0 = off), when configured",
        "cfg.clip_on_arg": "how to turn clipping on when it is off (max_grad_norm=1.0 for the "
        "Trainer, grad_clip=1.0 for a nanoGPT-style config, clip_grad_norm_ otherwise), else "
        "None",
        "cfg.length_grouping_arg": "the argument that groups batches by length in the run's "
        "transformers version (in plain words for other loops)",
        "cfg.resume_call": "the call that resumes the run from its last checkpoint with the "
        "optimizer and scheduler state (the Trainer's or Lightning's), None for other loops",
        "cfg.adaptive_optimizer": "the run's configured optimizer (optim / optimizer) adapts its "
        "step to the gradient's scale: true for Adam, AdamW, Adafactor, Lion, RMSprop, "
        "Adagrad ...; false for SGD; None when the config does not say",
        "cfg.trainer_run": "the Hugging Face Trainer wrote the run: true (a Trainer state, a "
        "transformers version or the Trainer's end-of-run summary), false (the run's own config "
        "or format shows another training loop: nanoGPT, Lightning, Keras), None when unknown",
    },
)
def _cfg(ctx: FeatureContext) -> dict[str, Value]:
    meta = ctx.run.meta
    major = transformers_major(ctx)
    lr: float | None = None
    if meta.learning_rate and meta.learning_rate > 0:
        lr = float(meta.learning_rate)
    else:
        peak = _maybe(ctx, "lr.peak")
        if isinstance(peak, (int, float)) and not isinstance(peak, bool) and peak > 0:
            lr = float(peak)
    adapters = _adapter_hint(ctx)
    trainer = "hf-trainer" in ctx.run.format or bool(
        meta.max_grad_norm is not None or meta.lr_scheduler_type
    )
    optim = str(
        ctx.settings.optimizer or _hp(ctx).get("optim") or _hp(ctx).get("optimizer") or ""
    ).lower()
    # Only what the run's own configuration shows narrows the range: a lone trainer_state.json
    # (no optimizer, no model name) is judged against the range of any optimizer, so the same
    # run gets the same verdict from every format that carries the same facts.
    if not trainer or "sgd" in optim or (not optim and adapters is None):
        usual, kind = ANY_MAX_LR, "any optimizer and model"
    elif adapters is True and _prompt_tuning(ctx):
        usual, kind = PROMPT_MAX_LR, "prefix / prompt tuning"
    elif adapters is True:
        usual, kind = ADAPTER_MAX_LR, "adapter (LoRA) fine-tuning"
    elif adapters is False:
        usual, kind = FULL_FT_MAX_LR, "full fine-tuning of a pretrained model"
    else:  # Adam, method unknown or from scratch: the most any Adam run uses
        usual, kind = SCRATCH_MAX_LR, "training with Adam (from scratch or method unknown)"
    raise_cap = min(usual, SCRATCH_MAX_LR) if trainer and "sgd" not in optim else usual
    if trainer and adapters is None and "sgd" not in optim:
        # a Trainer run whose method is unknown is most often a fine-tune of a pretrained
        # model: never propose more than a full fine-tune uses
        raise_cap = min(raise_cap, FULL_FT_MAX_LR)
    floor = ADAPTER_MIN_LR if adapters is True else ANY_MIN_LR
    out: dict[str, Value] = {
        "cfg.transformers_major": major,
        "cfg.lr": lr,
        "cfg.adapters": adapters,
        "cfg.regularise_arg": _REGULARISE[adapters],
        "cfg.lr_usual_max": usual,
        "cfg.run_kind": kind,
        "cfg.lr_over_usual": None if lr is None else lr / usual,
        "cfg.lr_lower": None if lr is None else nice(lr / 10, below=lr),
        "cfg.lr_lower_mild": None if lr is None else nice(lr / 3, below=lr),
        # never propose more than an Adam run uses when the optimizer may be Adam
        "cfg.lr_raise": None
        if lr is None or lr * 1.5 >= raise_cap
        else min(nice(lr * 10, above=lr), nice(raise_cap / 2, above=lr)),
        "cfg.lr_into_range": None
        if lr is None or floor <= lr <= usual
        else _into_range(usual, trainer, optim)
        if lr > usual
        else nice(FROM_BELOW_ADAPTER_LR if adapters is True else FROM_BELOW_LR),
        "cfg.lr_floor": floor,
        "cfg.lr_under_usual": None if lr is None or lr >= floor else floor / lr,
    }
    trainer_run = _trainer_run(ctx)
    out.update(_warmup_args(ctx, major, trainer_run))
    out.update(_eval_args(ctx, trainer_run))
    mgn = meta.max_grad_norm
    out["cfg.max_grad_norm"] = mgn
    clip_arg = "max_grad_norm=1.0"
    if trainer_run is not True:
        # nanoGPT and its descendants call it grad_clip (0.0 = off); other loops clip by hand
        clip_arg = (
            "grad_clip=1.0"
            if "grad_clip" in _hp(ctx)
            else "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) before each step"
        )
    out["cfg.clip_on_arg"] = clip_arg if mgn is not None and mgn <= 0 else None
    out["cfg.length_grouping_arg"] = (
        "batches of similar lengths from the data loader"
        if trainer_run is not True
        else 'train_sampling_strategy="group_by_length"'
        if major >= 5
        else "group_by_length=True"
    )
    out["cfg.trainer_run"] = trainer_run
    out["cfg.resume_call"] = (
        "trainer.train(resume_from_checkpoint=True)"
        if trainer_run is True
        else 'trainer.fit(model, ckpt_path="last")'
        if ctx.run.format.startswith("lightning")
        else None
    )
    out["cfg.adaptive_optimizer"] = _adaptive(optim)
    return out


#: Optimizers whose step does not scale with the gradient's size (steady clipping is ~harmless).
_ADAPTIVE = ("adam", "adafactor", "lion", "rmsprop", "adagrad", "adadelta", "lamb", "sophia")


def _adaptive(optim: str) -> bool | None:
    if not optim:
        return None
    if any(k in optim for k in _ADAPTIVE):
        return True
    return False if "sgd" in optim or "momentum" in optim else None


def _warmup_args(ctx: FeatureContext, major: int, trainer_run: bool | None) -> dict[str, Value]:
    """The run's warmup and the arguments that change it, in its transformers version's words
    (5.x folds warmup_ratio into warmup_steps: a value below 1 is a ratio)."""
    meta = ctx.run.meta
    planned = meta.max_steps or ctx.run.last_step
    share: float | None = None
    now: str | None = None
    if meta.warmup_steps is not None and meta.warmup_steps >= 1:
        share = meta.warmup_steps / planned if planned else None
        now = f"warmup_steps={meta.warmup_steps}"
    elif meta.warmup_ratio:
        share = meta.warmup_ratio
        now = (
            f"warmup_steps={meta.warmup_ratio:g}"
            if major >= 5
            else f"warmup_ratio={meta.warmup_ratio:g}"
        )
    elif meta.warmup_steps == 0 or _maybe(ctx, "lr.has_warmup") is False:
        share, now = 0.0, "no warmup"
    if trainer_run is not True:
        # another training loop (or one nothing names): its own words are unknown, so the
        # target is said in steps, which any loop can set
        if meta.warmup_steps is not None and meta.warmup_steps >= 1:
            now = f"{meta.warmup_steps} warmup steps"
        elif meta.warmup_ratio:
            now = f"warmup over {meta.warmup_ratio:.0%} of the steps"
        return {
            "cfg.warmup_arg": None
            if share is not None and share >= 0.1
            else _warmup_steps_phrase(planned, 0.1),
            "cfg.warmup_now": now or "the current warmup",
            "cfg.warmup_short_arg": _warmup_steps_phrase(planned, 0.05),
        }
    want = "warmup_steps=0.1" if major >= 5 else "warmup_ratio=0.1"
    return {
        "cfg.warmup_arg": None if share is not None and share >= 0.1 else want,
        "cfg.warmup_now": now or "the current warmup",
        "cfg.warmup_short_arg": "warmup_steps=0.05" if major >= 5 else "warmup_ratio=0.05",
    }


def _eval_args(ctx: FeatureContext, trainer_run: bool | None) -> dict[str, Value]:
    """How to evaluate about every 5% of the planned steps (at least every step), and how to
    keep the best checkpoint, in the words of the run's loop."""
    planned = ctx.run.meta.max_steps or ctx.run.last_step
    every = max(1, round(0.05 * planned)) if planned else None
    stops = _early_stopping_on(ctx)
    higher = _higher_is_better(ctx)
    if trainer_run is True:
        return {
            "cfg.eval_every_arg": 'eval_strategy="steps" with '
            + (f"eval_steps={every}" if every else "eval_steps about 5% of max_steps"),
            "cfg.keep_best_arg": "save_steps a multiple of eval_steps and "
            "load_best_model_at_end=True",
            "cfg.keep_best_loss_arg": 'load_best_model_at_end=True with metric_for_best_model="'
            'eval_loss" (and save_steps aligned with eval_steps)',
            "cfg.early_stop_arg": None
            if stops
            else "EarlyStoppingCallback(early_stopping_patience=3, early_stopping_threshold=0.001)",
            "cfg.keep_best_score_arg": "load_best_model_at_end=True with metric_for_best_model "
            f"set to this score (greater_is_better={higher}), and save_steps aligned with "
            "eval_steps",
            "cfg.early_stop_score_arg": None
            if stops
            else "EarlyStoppingCallback(early_stopping_patience=3) on the same metric",
        }
    # Lightning: its CSV logger, or the hp_metric its TensorBoard logger always writes
    mode = "max" if higher else "min"
    if ctx.run.format.startswith("lightning") or "train/hp_metric" in ctx.run.metrics:
        keep = 'a ModelCheckpoint(monitor="val_loss", mode="min") callback'
        stop = 'an EarlyStopping(monitor="val_loss", patience=3, min_delta=0.001) callback'
        keep_score = f'a ModelCheckpoint callback monitoring this score (mode="{mode}")'
        stop_score = f'an EarlyStopping callback on the same score (patience=3, mode="{mode}")'
    else:
        keep = (
            "a checkpoint saved at each evaluation, keeping the one with the lowest eval loss "
            '(Keras: ModelCheckpoint(monitor="val_loss", save_best_only=True))'
        )
        stop = (
            "stopping once the eval loss has not improved for 3 evaluations (Keras: "
            'EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True))'
        )
        keep_score = "a checkpoint saved at each evaluation, keeping the one with the best score"
        stop_score = "stopping once the score has not improved for 3 evaluations"
    return {
        "cfg.keep_best_loss_arg": keep,
        "cfg.early_stop_arg": None if stops else stop,
        "cfg.keep_best_score_arg": keep_score,
        "cfg.early_stop_score_arg": None if stops else stop_score,
        "cfg.eval_every_arg": (
            "an evaluation on held-out data after every step"
            if every == 1
            else f"an evaluation on held-out data every {every} steps"
        )
        if every
        else "an evaluation on held-out data about every 5% of the steps",
        "cfg.keep_best_arg": "a checkpoint saved at each evaluation, keeping the one with the "
        "best eval loss",
    }


def _higher_is_better(ctx: FeatureContext) -> bool:
    """Whether higher is better for the run's main eval score (True when the run logs none or
    its direction is unknown)."""
    try:
        return ctx.get("score.higher_is_better") is not False
    except InsufficientDataError:
        return True


def _early_stopping_on(ctx: FeatureContext) -> bool:
    """The run already stops early: its early stopping fired, or its patience is configured."""
    meta = ctx.run.meta
    return bool(meta.early_stopped) or meta.early_stopping_patience is not None


def _warmup_steps_phrase(planned: int | None, share: float) -> str:
    """A linear warmup over ``share`` of the planned steps, in steps when they are known."""
    if planned:
        return f"a linear warmup over the first {max(1, round(share * planned))} steps"
    return f"a linear warmup over the first {share:.0%} of the steps"


#: config keys that only plain training loops (nanoGPT and its descendants) write
_LOOP_KEYS = ("max_iters", "eval_interval", "warmup_iters", "lr_decay_iters", "grad_clip")


def _trainer_run(ctx: FeatureContext) -> bool | None:
    """Did the Hugging Face Trainer write this run? (Fixes then may name TrainingArguments.)"""
    run, hp = ctx.run, _hp(ctx)
    if "hf-trainer" in run.format or "train_runtime" in run.meta.summary:
        return True
    if any(isinstance(hp.get(k), str) for k in ("transformers_version", "_transformers_version")):
        return True
    if run.format.startswith("lightning") or any(k in hp for k in _LOOP_KEYS):
        return False
    # the Trainer's W&B callback always logs the model config's transformers_version: a W&B
    # run with a config of its own and none is another loop
    if run.format.startswith("wandb-run") and any(not k.startswith("_") for k in hp):
        return False
    return None


@feature_group(
    "gburst",
    requires=["train/grad_norm"],
    features={
        "gburst.count": "separate bursts after warmup: runs of logs whose grad norm is at least "
        "5x the post-warmup median",
        "gburst.max_ratio": "largest grad norm after warmup / the post-warmup median",
        "gburst.first_step": "step of the first burst",
        "gburst.spread": "fraction of the post-warmup logs between the first and the last burst",
        "gburst.median": "post-warmup median grad norm",
        "gburst.share": "fraction of the post-warmup logs that are part of a burst (5x the "
        "median or more)",
    },
)
def _gburst(ctx: FeatureContext) -> dict[str, Value]:
    steps, values = ctx.series("train/grad_norm")
    ok = np.isfinite(values) & (values > 0)
    warm = _maybe(ctx, "run.warmup_end_step")
    after = ok & (steps > int(warm or 0))
    s, g = steps[after], values[after]
    if g.size < 10:
        raise InsufficientDataError("fewer than 10 positive grad norms after warmup")
    med = float(np.median(g))
    high = g >= 5 * med
    starts = np.flatnonzero(high & ~np.concatenate([[False], high[:-1]]))
    idx = np.flatnonzero(high)
    return {
        "gburst.count": int(starts.size),
        "gburst.max_ratio": float(g.max() / med) if med > 0 else None,
        "gburst.first_step": int(s[starts[0]]) if starts.size else None,
        "gburst.spread": float((idx[-1] - idx[0]) / g.size) if idx.size else 0.0,
        "gburst.median": med,
        "gburst.share": float(idx.size / g.size),
    }
