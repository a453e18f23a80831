"""Turn raw (step, value) logs into clean :class:`~curvediag.model.Series`.

Steps are sorted and made unique. When a run was resumed from a checkpoint, the steps after the
checkpoint are logged twice: the latest segment wins and the restart steps are reported.
NaN/Inf values are kept: they are evidence.

This is also the one place where numbers from a log are made safe (:func:`build_series` does it
for every reader): a step that is not finite or beyond :data:`MAX_STEP` (``Infinity``, ``1e300``,
an integer with hundreds of digits) and a finite value beyond :data:`MAX_ABS_VALUE` (``1e308``,
which overflows as soon as it is squared) are dropped, and an :class:`OutOfRange` counts them
for the run's warnings. Wall times beyond :data:`MAX_WALL_TIME` become missing.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from curvediag.model import Run, Series

__all__ = [
    "MAX_ABS_VALUE",
    "MAX_STEP",
    "MAX_WALL_TIME",
    "OutOfRange",
    "as_float",
    "build_series",
    "choose_primary_eval",
    "latest_segment_mask",
    "sanitize_run",
]

#: Steps beyond this magnitude are dropped (float64 stops counting every integer at 2**53).
MAX_STEP = 2**53
#: Finite values beyond this magnitude are dropped: no float32 logger can write them, and
#: squaring them (variances, penalties) would overflow float64.
MAX_ABS_VALUE = 1e150
#: Wall times beyond this (seconds since 1970: the year 5138) are treated as missing.
MAX_WALL_TIME = 1e11


def as_float(v: Any) -> float | None:
    """A JSON/YAML number as a float; ``None`` when it is not a number (booleans are not).

    An integer too large for a float (hundreds of digits) becomes the largest float of its
    sign, so that :func:`build_series` drops and counts it as out of range.
    """
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        return float(v)
    except OverflowError:
        return sys.float_info.max if v > 0 else -sys.float_info.max


@dataclass
class OutOfRange:
    """Counts of the points :func:`build_series` dropped because a number was out of range."""

    steps: int = 0
    values: int = 0
    wall_times: int = 0

    def __bool__(self) -> bool:
        return bool(self.steps or self.values or self.wall_times)

    def message(self) -> str | None:
        """The run warning that says what was dropped (None when nothing was)."""
        parts = []
        if self.steps:
            parts.append(
                f"dropped {self.steps} point(s) or row(s) whose step is not a finite number "
                f"within +-2**53 (Infinity, 1e300, ...)"
            )
        if self.values:
            parts.append(
                f"dropped {self.values} value(s) out of range (magnitude above {MAX_ABS_VALUE:g})"
            )
        if self.wall_times:
            parts.append(f"ignored {self.wall_times} wall time(s) out of range")
        return "; ".join(parts) or None

    def warn(self, warnings: list[str]) -> None:
        """Append :meth:`message` to ``warnings`` when something was dropped."""
        msg = self.message()
        if msg:
            warnings.append(msg)


def _float_array(x: Sequence[Any] | np.ndarray) -> np.ndarray:
    """Numbers as float64; integers too large for a float become +-float max (never raises
    OverflowError); anything that is not a number becomes NaN."""
    try:
        arr = np.asarray(x)
    except (OverflowError, ValueError):
        arr = np.asarray(list(x), dtype=object)
    if arr.dtype.kind == "f":
        return np.asarray(arr, dtype=np.float64).reshape(-1)
    if arr.dtype.kind in "iu":
        return arr.astype(np.float64).reshape(-1)
    out = [as_float(v) for v in arr.reshape(-1).tolist()]
    return np.array([math.nan if v is None else v for v in out], dtype=np.float64)


def _int_steps(steps: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int64 steps, which ones are usable): finite and within +-MAX_STEP."""
    try:
        arr = np.asarray(steps)
    except (OverflowError, ValueError):
        arr = np.asarray(list(steps), dtype=object)
    if arr.dtype.kind in "iu":
        ok = (arr >= -MAX_STEP) & (arr <= MAX_STEP)
        return np.where(ok, arr, 0).astype(np.int64).reshape(-1), ok.reshape(-1)
    f = _float_array(arr)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(f) & (np.abs(f) <= MAX_STEP)
    return np.where(ok, f, 0.0).astype(np.int64), ok


def latest_segment_mask(steps: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Which points to keep so that later writes win, and where the log restarted.

    A point is kept when every later point has a larger step: a restart from a checkpoint (the
    step going back) therefore drops the earlier copies of the re-logged steps, and a step logged
    twice in a row keeps its later value.

    Args:
        steps: Steps in the order they were logged.

    Returns:
        (boolean mask of points to keep, the steps at which a restart began).
    """
    s = np.asarray(steps, dtype=np.int64)
    if s.size == 0:
        return np.zeros(0, dtype=bool), []
    suffix_min = np.minimum.accumulate(s[::-1])[::-1]
    later_min = np.append(suffix_min[1:], np.iinfo(np.int64).max)
    keep = s < later_min
    restarts = [int(x) for x in s[1:][np.diff(s) < 0]]
    return keep, restarts


def build_series(
    name: str,
    steps: Sequence[int] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    wall_time: Sequence[float] | np.ndarray | None = None,
    *,
    dropped: OutOfRange | None = None,
) -> tuple[Series, list[int]]:
    """Build a sorted, de-duplicated series from points in logged order.

    Steps and values may be any numbers (Python ints of any size, floats, numpy arrays):
    points whose step or value is out of range are dropped and counted in ``dropped``.

    Returns:
        The series and the steps at which a restart (resume) was detected.
    """
    s, step_ok = _int_steps(steps)
    v = _float_array(values)
    if v.size != s.size:
        raise ValueError(f"series {name!r}: {s.size} steps but {v.size} values")
    with np.errstate(invalid="ignore"):
        ok = step_ok & ~(np.isfinite(v) & (np.abs(v) > MAX_ABS_VALUE))
    w = None if wall_time is None else _float_array(wall_time)
    if dropped is not None:
        dropped.steps += int(s.size - np.count_nonzero(step_ok))
        dropped.values += int(np.count_nonzero(step_ok) - np.count_nonzero(ok))
    if not ok.all():
        s, v = s[ok], v[ok]
        w = None if w is None else w[ok]
    if w is not None:
        with np.errstate(invalid="ignore"):
            bad_w = np.isfinite(w) & (np.abs(w) > MAX_WALL_TIME)
        if bad_w.any():
            w = np.where(bad_w, np.nan, w)
            if dropped is not None:
                dropped.wall_times += int(bad_w.sum())
    keep, restarts = latest_segment_mask(s)
    s, v = s[keep], v[keep]
    if w is not None:
        w = w[keep]
    if s.size > 1 and not bool(np.all(np.diff(s) > 0)):  # pragma: no cover - guarded by mask
        order = np.argsort(s, kind="stable")
        s, v = s[order], v[order]
        w = None if w is None else w[order]
    return Series(name=name, steps=s, values=v, wall_time=w), restarts


def sanitize_run(run: Run) -> Run:
    """``run`` itself when every number is in range, else a copy without the points that are
    not (for runs built by hand, which did not go through :func:`build_series`). The input is
    never modified; the copy's warnings say what was dropped."""
    dropped = OutOfRange()
    metrics: dict[str, Series] = {}
    for key, series in run.metrics.items():
        with np.errstate(invalid="ignore"):
            bad = (np.abs(series.steps) > MAX_STEP) | (
                np.isfinite(series.values) & (np.abs(series.values) > MAX_ABS_VALUE)
            )
            if series.wall_time is not None:
                bad_w = np.isfinite(series.wall_time) & (np.abs(series.wall_time) > MAX_WALL_TIME)
            else:
                bad_w = np.zeros(0, dtype=bool)
        if not bad.any() and not bad_w.any():
            metrics[key] = series
            continue
        metrics[key], _ = build_series(
            series.name, series.steps, series.values, series.wall_time, dropped=dropped
        )
    if not dropped:
        return run
    warnings = list(run.warnings)
    dropped.warn(warnings)
    return run.model_copy(update={"metrics": metrics, "warnings": warnings})


def _primary_eval_candidate(name: str) -> bool:
    """``eval/<set>_loss``: a name :func:`choose_primary_eval` picks among."""
    return name.startswith("eval/") and name.endswith("_loss") and name.count("/") == 1


def choose_primary_eval(run: Run) -> None:
    """When a run evaluates several sets (``eval/<set>_loss``) and no plain ``eval/loss``, use one.

    The set with the most points wins (ties: alphabetical); the choice is recorded as a warning.
    A run with no ``train/loss`` whose ``train/<set>_loss`` exists takes it as the train loss
    (named losses and no total on either side), so the two losses compare.
    """
    if "eval/loss" in run.metrics:
        return
    candidates = [k for k in run.metrics if _primary_eval_candidate(k)]
    if not candidates:
        return
    best = sorted(candidates, key=lambda k: (-len(run.metrics[k]), k))[0]
    run.metrics["eval/loss"] = run.metrics[best].model_copy(update={"name": "eval/loss"})
    if len(candidates) > 1:
        run.warnings.append(
            f"several evaluation sets ({', '.join(sorted(candidates))}); "
            f"eval/loss is taken from {best}"
        )
    # a run that logs named losses on both sides and no total (a multi-task model's
    # classification_loss and regression_loss, a VAE's elbo_loss and recon_loss): the train
    # loss is the train side of the one the eval loss was taken from, so the two compare
    partner = "train/" + best.split("/", 1)[1]
    if "train/loss" not in run.metrics and partner in run.metrics:
        run.metrics["train/loss"] = run.metrics[partner].model_copy(update={"name": "train/loss"})
        run.warnings.append(f"train/loss is taken from {partner}, beside {best}")


#: The words of a column name that say it is the training split's (``Training loss``) ...
TRAIN_SPLIT_WORDS = frozenset({"train", "training"})
#: ... or a held-out split's (``val_loss``, ``Loss/test``); a word, not a part of one.
EVAL_SPLIT_WORDS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test", "dev"})
#: Names of a data split that can follow a loss's name (``.../loss/eval``).
_SPLITS = frozenset({"train", "training", "eval", "val", "valid", "validation", "test", "dev"})
#: A word of a name that makes a loss an evaluation's: a split's name, alone (``val_loss``,
#: ``Loss/test``, ``ValLoss``) or run into what follows it (``valloss``, ``testset_loss``). A
#: word that merely contains one is not: ``value_loss`` (an RL critic's), ``retrieval_loss``,
#: ``device_loss``, ``latest_loss`` are train losses.
_EVAL_WORD = re.compile(
    r"(?:val|vali|valid|validate|validation|validating|test|testing|eval|evaluate|evaluation|dev)"
    r"(?:set|data|dataset)?(?:loss)?"
)


def _names_eval(name: str) -> bool:
    """Whether a metric's name (without its namespace) says it is an evaluation's."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name.split("/", 1)[-1])
    return any(_EVAL_WORD.fullmatch(w) for w in re.split(r"[^a-z]+", spaced.lower()))


#: Leaf names that are a loss although they do not say so (an MSE trained directly, the
#: "cost" of TensorFlow-era loops: see :func:`names_a_cost`).
_LOSS_LEAVES = ("mse", "nll", "cross_entropy", "xent", "bce", "cost")
_COST_NAME = re.compile(r"(?<!time)(?:^|_)cost$", re.IGNORECASE)


def names_a_cost(name: str) -> bool:
    """Whether a name ends in "cost", the word TensorFlow-era loops give their loss
    (``training_cost``, ``cost``), but is not a time cost (``time_cost``: seconds per epoch)."""
    return _COST_NAME.search(name) is not None


#: Leaf names of the total a loss of several named terms adds up to, when no name says "loss"
#: (a VAE logging Pixel, Perceptual, KL Divergence and their Overall).
_TOTAL_LEAVES = ("overall", "total")
#: What a loss's leaf name says when it is the total of several (best first).
_TOTAL_WORDS = (("total",), ("mean", "avg", "overall"))


def _is_leaf_of(leaf: str, words: tuple[str, ...]) -> bool:
    """Whether a leaf name is one of ``words`` or ends in one after an underscore (``val_mse``),
    a cost only when :func:`names_a_cost` says so."""
    named = leaf in words or leaf.split("_")[-1] in words
    return named and (not leaf.endswith("cost") or names_a_cost(leaf))


def _unscoped(name: str) -> str:
    """The name without its namespace (``train/s2/loss`` -> ``s2/loss``)."""
    return name.lower().split("/", 1)[-1]


def _pick(cands: list[str], prefer: tuple[tuple[str, ...], ...]) -> str | None:
    """The one candidate a tier of preferred words names (looked for in the name without its
    namespace, so ``train/`` itself prefers nothing); ``None`` when it stays ambiguous."""
    if len(cands) == 1:
        return cands[0]
    for words in prefer:
        preferred = [c for c in cands if any(w in _unscoped(c) for w in words)]
        if len(preferred) == 1:
            return preferred[0]
        if preferred:
            cands = preferred
    # Lightning's per-step curve beside its epoch means under a prefix of the module's own
    # (finetuning/train_loss and finetuning/train_loss_epoch): the per-step one
    plain = [c for c in cands if not (c.endswith("_epoch") and c[: -len("_epoch")] in cands)]
    if len(plain) == 1:
        return plain[0]
    # Train_Loss beside Train_obj_Loss, Train_bbox_Loss: the one that names nothing but its
    # split and "loss" is the total the parts add up to
    bare = [c for c in cands if _bare_loss(c)]
    return bare[0] if len(bare) == 1 else None


#: Split words stripped from a name to see whether anything but "loss" is left (longest first).
_SPLIT_WORDS = tuple(sorted(_SPLITS, key=len, reverse=True))


def _bare_loss(name: str) -> bool:
    """``Train_Loss``, ``val-loss``, ``train/loss``: a split word or none, then just "loss"."""
    letters = re.sub(r"[^a-z]", "", _unscoped(name))
    for word in _SPLIT_WORDS:
        letters = letters.replace(word, "")
    return letters == "loss"


def infer_loss_series(run: Run) -> None:
    """Find the train/eval loss under a free-form name (``Training loss``, ``TrainLoss``,
    ``total_loss`` beside its parts, ``mse`` when nothing is called a loss, ...).

    Only used when the canonical name is absent; the choice is recorded as a warning, and a
    user mapping (``--map``) always wins because it produces the canonical name directly.
    A detector that logs only the parts of its loss (Ultralytics YOLO's ``box_loss``,
    ``cls_loss``, ``dfl_loss``) trains on their sum, which becomes the loss.
    """
    for ns in ("train", "eval"):
        _sum_detection_parts(run, ns)
    train_c: list[str] = []
    eval_c: list[str] = []
    loss_words: tuple[str, ...] = ("loss",)
    for loss_words in (("loss",), _LOSS_LEAVES, _TOTAL_LEAVES):
        for k in run.metrics:
            low = k.lower()
            leaf = low.rsplit("/", 1)[-1]
            if k in ("train/loss", "eval/loss") or "scale" in low:
                continue
            if loss_words == ("loss",):
                segs = low.split("/")
                # Loss/train, task/loss/eval: the split named after the loss
                split_last = len(segs) >= 3 and "loss" in segs[-2] and segs[-1] in _SPLITS
                if "loss" not in leaf and not split_last:
                    continue
            elif not _is_leaf_of(leaf, loss_words):
                continue
            if k.startswith("eval/") or _names_eval(k):
                eval_c.append(k)
            else:
                train_c.append(k)
        if train_c or eval_c:
            break
    train_leaf: str | None = None
    for target, cands, prefer in (
        ("train/loss", train_c, (("train",), *_TOTAL_WORDS)),
        (
            "eval/loss",
            # eval/<set>_loss is choose_primary_eval's; an eval/mse or eval/losses (a list
            # named val_losses) is only found here
            [c for c in eval_c if loss_words != ("loss",) or not _primary_eval_candidate(c)],
            (("val", "eval", "test"), *_TOTAL_WORDS),
        ),
    ):
        if target in run.metrics or not cands:
            continue
        chosen = _pick(sorted(cands), prefer)
        if chosen is None and target == "eval/loss" and train_leaf:
            # several eval losses (PackedNLLLoss, PackedMSELoss, ...): the one the train loss
            # was taken from, evaluated
            same = [c for c in cands if c.lower().rsplit("/", 1)[-1] == train_leaf]
            chosen = same[0] if len(same) == 1 else None
        if chosen is None:
            continue
        run.metrics[target] = run.metrics[chosen].model_copy(update={"name": target})
        run.warnings.append(f"{target} is taken from {chosen!r}")
        if target == "train/loss":
            train_leaf = chosen.lower().rsplit("/", 1)[-1]
    if "train/loss" not in run.metrics and "eval/loss" not in run.metrics:
        _negate_log_probs(run)


#: A mean log-probability (log-likelihood) of the data, the negative of the loss a density
#: model minimises: sbi's ``training_log_probs`` and ``validation_log_probs``.
_LOG_PROB = re.compile(r"(?:^|[^a-z])log[_ -]?(?:probs?|likelihoods?)$")


#: Points a held-out metric needs before it is taken as a curve: a test set scored once at the
#: end (Lightning's ``test_acc``) is a result, not an evaluation curve.
_MIN_HELD_OUT_POINTS = 3


def adopt_held_out_metrics(run: Run, logged: set[str]) -> None:
    """A run that logged (``logged``: its series before any was inferred) no ``eval/`` metric
    of its own but a held-out split's under another name (``Test Acc`` beside ``Test Loss`` in
    a per-epoch table, ``test_f1``): those series are its evaluations. Each is copied to
    ``eval/<name without the split's word>`` (``Test_ACC`` -> ``eval/ACC``) when it has at least
    three points; the copy is recorded as a warning."""
    if any(k.startswith("eval/") for k in logged):
        return
    for name in sorted(run.metrics):
        if name.startswith("eval/") or not _names_eval(name) or "loss" in name.lower():
            continue
        series = run.metrics[name]
        if int(np.isfinite(series.values).sum()) < _MIN_HELD_OUT_POINTS:
            continue
        words = [
            w
            for w in re.split(r"[_\s/-]+", _unscoped(name))
            if w and not _EVAL_WORD.fullmatch(w.lower())
        ]
        target = "eval/" + "_".join(words) if words else ""
        if not words or target in run.metrics:
            continue
        run.metrics[target] = series.model_copy(update={"name": target})
        run.warnings.append(f"{target} is taken from {name!r}, the held-out split's")


def _negate_log_probs(run: Run) -> None:
    """A run that logs no loss but the log-probability of its training (and held-out) data
    trains on the negative of it: that negative is its loss."""
    for name in sorted(run.metrics):
        leaf = _unscoped(name).lower()
        if not _LOG_PROB.search(leaf) or "best" in leaf:
            continue  # best_validation_log_prob is a running best, not a curve
        target = "eval/loss" if name.startswith("eval/") or _names_eval(name) else "train/loss"
        if target in run.metrics:
            continue
        series = run.metrics[name]
        run.metrics[target] = series.model_copy(update={"name": target, "values": -series.values})
        run.warnings.append(
            f"{target} is minus {name!r}: a log-probability of the data, whose negative is "
            "the loss the model minimises"
        )


#: The parts of a detector's loss (Ultralytics YOLO v5-v11: box, objectness / distribution
#: focal, class, mask, keypoint), which it trains on the sum of. YOLOv10 logs its two heads'
#: parts apart (``box_om``... for one-to-many, ``box_oo``... for one-to-one) and trains on the
#: sum of both heads' losses.
_DETECTION_PARTS = frozenset(
    {"box_loss", "cls_loss", "dfl_loss", "obj_loss", "seg_loss", "pose_loss", "kobj_loss"}
    | {f"{part}_{head}" for part in ("box", "cls", "dfl") for head in ("om", "oo")}
)


def _sum_detection_parts(run: Run, ns: str) -> None:
    target = f"{ns}/loss"
    if target in run.metrics:
        return
    parts = sorted(
        k for k in run.metrics if k.startswith(ns + "/") and _unscoped(k) in _DETECTION_PARTS
    )
    if len(parts) < 2:
        return
    series = [run.metrics[k] for k in parts]
    steps = series[0].steps
    if any(not np.array_equal(x.steps, steps) for x in series[1:]):
        return
    total = np.sum([x.values for x in series], axis=0)
    run.metrics[target] = series[0].model_copy(update={"name": target, "values": total})
    run.warnings.append(f"{target} is the sum of {', '.join(parts)} (a detector's loss parts)")


#: A learning rate under the names Lightning's LearningRateMonitor (``lr-AdamW``,
#: ``lr-SGD/pg1``), Ultralytics (``lr/pg0``), YOLOv5 (``x/lr0``), Keras' TensorBoard callback
#: (``epoch_learning_rate``), a loop's own namespace (``trainer/lr``, ``optimizer/lr``) and
#: hand-written loops (``LearnRate``, ``Learning Rate``) write.
_LR_NAME = re.compile(
    r"(?:epoch_|x/|trainer/|optim(?:izer)?/)?(?:lr|learn(?:ing)?[ _-]?rate)(?:-[a-z][a-z0-9]*)?"
    r"(?P<group>(?:/|_)pg\d+|(?<=lr)\d)?"
)


def infer_lr_series(run: Run) -> None:
    """Find the learning rate under a free-form name when ``train/learning_rate`` is absent.

    With one LR per parameter group (``lr/pg0``, ``lr/pg1``, ...) the groups mostly share the
    schedule's shape, which is what the rules read: the group that agrees with the most others
    is taken, the first on a tie. (Ultralytics' bias group pg0 warms up from 0.1 down to the
    learning rate while pg1 and pg2, the weights, rise from 0 to it: the weights' is the run's
    learning rate.) Two differently named rates (a backbone's and a head's) stay ambiguous and
    nothing is taken.
    """
    if "train/learning_rate" in run.metrics:
        return
    groups: dict[str, list[tuple[int, str]]] = {}
    for k in run.metrics:
        m = _LR_NAME.fullmatch(_unscoped(k)) if k.startswith("train/") else None
        if m:
            base = _unscoped(k)[: m.start("group")] if m["group"] else _unscoped(k)
            number = int(re.sub(r"\D", "", m["group"])) if m["group"] else -1
            groups.setdefault(base, []).append((number, k))
    if len(groups) != 1:
        return
    members = sorted(next(iter(groups.values())))
    values = [run.metrics[k].values for _, k in members]

    def agreeing(i: int) -> int:
        return sum(
            j != i
            and v.shape == values[i].shape
            and bool(np.allclose(v, values[i], equal_nan=True))
            for j, v in enumerate(values)
        )

    chosen = members[max(range(len(members)), key=lambda i: (agreeing(i), -i))][1]
    run.metrics["train/learning_rate"] = run.metrics[chosen].model_copy(
        update={"name": "train/learning_rate"}
    )
    run.warnings.append(f"train/learning_rate is taken from {chosen!r}")


def finish_run(
    run: Run,
    *,
    restarts: Iterable[int] = (),
    dropped: OutOfRange | None = None,
    infer_loss: bool = False,
) -> Run:
    """The epilogue every reader shares, once the series are built.

    Says which points were dropped as out of range, records a resume (steps logged again: the
    latest values are kept), finds a loss logged under a free-form name (``infer_loss``, for
    formats without canonical names) and picks the primary eval set.
    """
    if dropped is not None:
        dropped.warn(run.warnings)
    steps = sorted(set(restarts))
    if steps:
        run.meta.resumed = True
        run.meta.resumed_at_steps = steps
        run.warnings.append(
            "the run was resumed: steps were logged again from step "
            + ", ".join(map(str, steps))
            + "; the latest values are kept"
        )
    if infer_loss:
        logged = set(run.metrics)
        infer_loss_series(run)
        infer_lr_series(run)
        adopt_held_out_metrics(run, logged)
    choose_primary_eval(run)
    set_rl_loss_aside(run)
    return run


#: Where reinforcement-learning libraries log the mean episode return (the name without its
#: namespace): Stable-Baselines3's ``rollout/ep_rew_mean``, CleanRL's ``charts/episodic_return``,
#: and the plain names of hand-written loops. A bare ``reward`` is not among them: TRL's GRPO
#: logs one beside a loss it does minimise.
RL_RETURN_NAMES = (
    "rollout/ep_rew_mean",
    "charts/episodic_return",
    "episode_reward",
    "episodic_return",
    "episode_return",
    "ep_rew_mean",
)
#: The loss terms of an actor-critic or value-based learner (SB3, CleanRL, RLlib, DQN loops).
_RL_LOSS_TERMS = frozenset(
    {
        "policy_gradient_loss",
        "policy_loss",
        "value_loss",
        "vf_loss",
        "pg_loss",
        "actor_loss",
        "critic_loss",
        "q_loss",
        "qf_loss",
        "td_loss",
    }
)
#: Where an RL run's loss is kept once set aside.
RL_LOSS = "train/rl_loss"


def rl_return_series(run: Run) -> str | None:
    """The series that holds an RL run's mean episode return (see :data:`RL_RETURN_NAMES`)."""
    for want in RL_RETURN_NAMES:
        for name in run.metrics:
            low = name.lower()
            if low.split("/", 1)[-1] == want or low.endswith("/" + want):
                return name
    return None


def is_rl_loss(name: str) -> bool:
    """Whether a series is an RL learner's loss: the loss set aside (:data:`RL_LOSS`) or one of
    an actor-critic's or a value learner's loss terms."""
    return name == RL_LOSS or name.lower().rsplit("/", 1)[-1] in _RL_LOSS_TERMS


def is_rl_run(run: Run) -> bool:
    """Whether ``run`` is a reinforcement-learning run: it logs an episode return and a loss
    (or an actor-critic's loss terms). A return alone is not enough: such a log has nothing
    of the learner to judge."""
    if rl_return_series(run) is None:
        return False
    return "train/loss" in run.metrics or any(is_rl_loss(k) for k in run.metrics)


def set_rl_loss_aside(run: Run) -> None:
    """An RL learner's loss is not an objective that falls as the policy improves: PPO's value
    term grows with the returns it predicts, a DQN's TD loss with its Q-values. In an RL run
    (:func:`is_rl_run`) ``train/loss`` moves to :data:`RL_LOSS`, out of the loss rules' way, and
    the episode return is what is judged."""
    if not is_rl_run(run) or RL_LOSS in run.metrics:
        return
    ret = rl_return_series(run)
    loss = "its loss terms are"
    if "train/loss" in run.metrics:
        run.metrics[RL_LOSS] = run.metrics.pop("train/loss").model_copy(update={"name": RL_LOSS})
        loss = f"its loss (kept as {RL_LOSS}) is"
    run.warnings.append(
        f"a reinforcement-learning run: it is judged by its episode return ({ret}); {loss} "
        "not expected to fall as the policy improves"
    )
