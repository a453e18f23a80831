"""Features of any logged metric, not only the loss: eval accuracy, F1, WER, BLEU, reward...

Two shapes:

* The ``metric.<series>.<stat>`` family works on any series a run logged, named in the rule:
  ``metric.eval/accuracy.best``, ``metric.eval/wer.drop_from_best``. Whether higher or lower is
  better is read from the name (accuracy, f1, bleu, rouge, reward, auc ... are higher-is-better;
  loss, wer, cer, perplexity, error ... lower-is-better); ``best``, ``gain`` and the other
  direction-aware statistics are unavailable when the name does not tell.
* The ``score.*`` group picks the run's main evaluation score (the first eval metric, other than
  the loss, whose direction is known, accuracy first) so built-in rules can use it without
  knowing its name.

Statistics relative to the run's own values (best so far, first value, quantiles) let a rule
say "gave back 30% of what it had gained" rather than compare with a constant.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features._stats import second_difference_sigma
from curvediag.features.registry import FeatureContext, Value, feature_family, feature_group
from curvediag.model import Run

__all__ = ["METRIC_STATS", "direction", "metric_stats", "pick_score_metric"]

_HIGHER = {
    "accuracy",
    "acc",
    "acc1",
    "acc5",
    "top1",
    "top5",
    "f1",
    "bleu",
    "sacrebleu",
    "chrf",
    "meteor",
    "exact",
    "em",
    "auc",
    "auroc",
    "roc",
    "map",
    "precision",
    "prec",
    "recall",
    "reward",
    "rewards",
    "return",
    "mcc",
    "matthews",
    "pearson",
    "spearman",
    "r2",
    "iou",
    "miou",
    "dice",
    "score",
    "bertscore",
}
_HIGHER_PREFIX = (
    "rouge",
    "accuracy",
    "f1",
    "bleu",
    "map@",
    "ndcg",
    "mrr",
    "precision@",
    "prec@",
    "recall@",
    "hits@",
    "hit@",
)
_LOWER = {
    "loss",
    "wer",
    "cer",
    "ter",
    "perplexity",
    "ppl",
    "error",
    "err",
    "mse",
    "mae",
    "rmse",
    "nll",
    "bpb",
    "bpc",
}
#: Parts of an eval metric name that say it is bookkeeping, not a score.
#: ... nor TRL's ``mean_token_accuracy`` of a language model: a next-token accuracy that moves a
#: point or two over a fine-tune while the loss falls is not the task's score, and its "perfect"
#: 1.0 is out of reach.
_NOT_SCORES = (
    "runtime",
    "per_second",
    "epoch",
    "step",
    "samples",
    "time",
    "lr",
    "memory",
    "token_accuracy",
)
#: Preference order of the ``score`` group: the first family present wins.
_SCORE_ORDER = (
    ("accuracy", "acc", "acc1", "top1", "exact", "em"),
    ("f1",),
    ("bleu", "sacrebleu", "chrf", "meteor"),
    ("rouge",),
    ("auc", "auroc", "roc", "map", "mcc", "matthews"),
    ("wer", "cer", "ter"),
    ("reward", "rewards", "return"),
    ("precision", "prec", "recall", "iou", "miou", "dice", "pearson", "spearman", "r2"),
)
_ACCURACY = {"accuracy", "acc", "acc1", "top1"}
#: A detector's mAP at an IoU threshold: Ultralytics' mAP50(B), mAP50-95(B), COCO's mAP75.
_MAP_AT_IOU = re.compile(r"map\d+")
#: Where a run names its class count (a Trainer config's num_labels, a Lightning hparams.yaml's
#: num_classes, ...).
CLASS_KEYS = ("num_labels", "num_classes", "n_classes", "nb_classes", "number_of_classes")
_TOKEN = re.compile(r"[a-z0-9@]+")


def _tokens(name: str) -> list[str]:
    return _TOKEN.findall(name.lower())


def direction(name: str) -> bool | None:
    """True when higher is better for a metric called ``name``, False when lower is, None when
    the name does not say. The last word that decides wins (``eval/loss_acc`` -> higher)."""
    verdict: bool | None = None
    for t in _tokens(name):
        if t in _HIGHER or t.startswith(_HIGHER_PREFIX) or _MAP_AT_IOU.fullmatch(t):
            verdict = True
        elif t in _LOWER:
            verdict = False
    return verdict


METRIC_STATS: dict[str, str] = {
    "n": "number of finite logged points",
    "first": "first finite value",
    "last": "last finite value",
    "min": "lowest value",
    "max": "highest value",
    "median": "median of the values",
    "q10": "10th percentile of the values",
    "q90": "90th percentile of the values",
    "range": "highest minus lowest value",
    "higher_is_better": "true when higher is better (read from the name)",
    "best": "best value (the highest or lowest, by direction)",
    "best_step": "step of the best value (the first time it was reached)",
    "gain": "improvement from the first value to the best, in the metric's units (>= 0)",
    "rel_gain": "gain / |first value|",
    "tail": "mean of the last two values (the last value when only one follows the best)",
    "drop_from_best": "how much worse the tail is than the best, in the metric's units (>= 0)",
    "rel_drop_from_best": "drop_from_best / |best|",
    "giveback": "drop_from_best / gain: the share of the improvement given back (None when "
    "it never improved)",
    "points_after_best": "logged points after the best",
    "worsened_after_best": "at least two points followed the best and the tail is worse",
    "last_rank": "share of the run's values better than the last one (0 = the last is the best)",
}


def metric_stats(steps: np.ndarray, values: np.ndarray, higher: bool | None) -> dict[str, Value]:
    """Every :data:`METRIC_STATS` entry for one series (direction-aware ones are None when
    ``higher`` is None)."""
    ok = np.isfinite(values)
    steps, values = steps[ok], values[ok]
    if values.size == 0:
        raise InsufficientDataError("no finite values")
    out: dict[str, Value] = dict.fromkeys(METRIC_STATS)
    out.update(
        n=int(values.size),
        first=float(values[0]),
        last=float(values[-1]),
        min=float(values.min()),
        max=float(values.max()),
        median=float(np.median(values)),
        q10=float(np.quantile(values, 0.1)),
        q90=float(np.quantile(values, 0.9)),
        range=float(values.max() - values.min()),
        higher_is_better=higher,
    )
    if higher is None:
        return out
    sign = 1.0 if higher else -1.0
    good = sign * values  # higher is better in this space
    i_best = int(np.argmax(good))
    best = float(values[i_best])
    after = values.size - 1 - i_best
    tail = float(values[-2:].mean()) if after >= 2 else float(values[-1])
    gain = max(0.0, sign * (best - float(values[0])))
    drop = max(0.0, sign * (best - tail))
    out.update(
        best=best,
        best_step=int(steps[i_best]),
        gain=gain,
        rel_gain=gain / abs(float(values[0])) if values[0] != 0 else None,
        tail=tail,
        drop_from_best=drop,
        rel_drop_from_best=drop / abs(best) if best != 0 else None,
        giveback=drop / gain if gain > 0 else None,
        points_after_best=after,
        worsened_after_best=bool(after >= 2 and drop > 0),
        last_rank=float(np.mean(good > good[-1])),
    )
    return out


@feature_family("metric", stats=METRIC_STATS)
def _metric(run: Run, series: str) -> dict[str, Value]:
    s = run.get(series)
    if s is None or len(s) == 0:
        raise InsufficientDataError(f"the run did not log {series}")
    return metric_stats(s.steps, s.values, direction(series))


def score_candidates(run: Run) -> list[str]:
    """The eval series that are scores (a known direction, not a loss), in logged order."""
    candidates = []
    for name in run.metrics:
        if not name.startswith("eval/") or any(x in name.lower() for x in _NOT_SCORES):
            continue
        if direction(name) is None or "loss" in _tokens(name):
            continue
        candidates.append(name)
    return candidates


def pick_score_metric(run: Run) -> str | None:
    """The run's main evaluation score (see the module docstring), or None."""
    candidates = score_candidates(run)
    for family in _SCORE_ORDER:
        matches = [
            name
            for name in candidates
            if any(t in family or t.startswith(family) for t in _tokens(name)[1:])
        ]
        if matches:
            # several heads' scores (audio_only_pred_accuracy, fused_pred_accuracy): the one
            # with the plainest name is the model's headline number
            return min(matches, key=lambda n: len(_tokens(n)))
    return candidates[0] if candidates else None


def _error_reduction(st: dict[str, Value], name: str) -> float | None:
    """How much of the way from its first value to a perfect score a bounded score went."""
    perfect, first, gain = _perfect(st, name), st["first"], st["gain"]
    if perfect is None or not isinstance(first, float) or not isinstance(gain, float):
        return None
    room = abs(perfect - first)
    return gain / room if room > 0 else None


def _num_classes(run: Run) -> int | None:
    hp: dict[str, Any] = run.meta.hyperparameters
    for key in CLASS_KEYS:
        v = hp.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 2 <= v <= 100_000:
            return int(v)
    labels = hp.get("id2label")
    if isinstance(labels, dict) and len(labels) >= 2:
        return len(labels)
    return None


#: Lower-is-better errors of a regression or a density: their 0 is out of reach (the noise in
#: the targets stays), so they are judged by their relative change, not by how far they went
#: toward 0. Error *rates* (WER, CER, a classifier's error) keep 0 as their perfect value.
_UNBOUNDED_ERRORS = frozenset(
    {"mse", "mae", "rmse", "mape", "smape", "nll", "bpb", "bpc", "perplexity", "ppl"}
)


#: Scores of generated text against references (ROUGE, BLEU, chrF, METEOR): their perfect 1 (or
#: 100) is out of reach (one reference per example, and a good model still words things its own
#: way), so like the unbounded errors they are judged by their relative change.
_TEXT_OVERLAP = ("rouge", "bleu", "sacrebleu", "chrf", "meteor")


def _perfect(st: dict[str, Value], name: str) -> float | None:
    """The perfect value of a bounded score: 1 or 100 for a higher-is-better score in [0, 1] or
    [0, 100], 0 for a non-negative lower-is-better error rate; None otherwise (a regression's
    MAE or RMSE and a text-overlap score such as ROUGE or BLEU included)."""
    lo, hi = st["min"], st["max"]
    if not isinstance(lo, float) or not isinstance(hi, float) or lo < 0:
        return None
    if any(t.startswith(_TEXT_OVERLAP) for t in _tokens(name)):
        return None
    if st["higher_is_better"] is True:
        return 1.0 if hi <= 1.0 else (100.0 if hi <= 100.0 else None)
    if st["higher_is_better"] is False:
        return None if set(_tokens(name)) & _UNBOUNDED_ERRORS else 0.0
    return None


@feature_group(
    "score",
    requires=[],
    features={
        "score.metric": "the run's main eval score (accuracy, F1, BLEU, ROUGE, WER, reward ...)",
        "score.higher_is_better": "true when higher is better for the score",
        "score.n": "number of evaluations of the score",
        "score.first": "first value of the score",
        "score.last": "last value of the score",
        "score.best": "best value of the score",
        "score.best_step": "step of the best score",
        "score.gain": "improvement of the score from its first value to its best (>= 0)",
        "score.rel_gain": "score.gain / |first value|",
        "score.error_reduction": "score.gain / the distance from the first value to a perfect "
        "score (1 or 100 for bounded higher-is-better scores, 0 for error rates); None when "
        "the score has no known bound",
        "score.others_error_reduction": "the largest score.error_reduction among the run's other "
        "bounded eval scores (R2 beside MCC, F1 beside accuracy); None when it logs no other",
        "score.first_at_perfect": "the first evaluation already scored (within 0.5% of) the "
        "perfect value of a bounded score (accuracy 1.0, WER 0): it cannot improve",
        "score.last_near_perfect": "the last evaluation scored within 5% of the perfect value "
        "of a bounded score (accuracy 0.95+, WER 0.05 or less)",
        "score.range": "highest minus lowest score",
        "score.tail": "mean of the last two scores",
        "score.drop_from_best": "how much worse the tail is than the best (>= 0)",
        "score.rel_drop_from_best": "score.drop_from_best / |best|",
        "score.giveback": "share of the score's improvement given back by the end",
        "score.evals_after_best": "evaluations after the best score",
        "score.train_change_after_best": "fractional change of the train loss from the best "
        "score's step to the end (negative = still falling)",
        "score.num_classes": "number of classes, from the run's config (num_labels, ...)",
        "score.chance": "accuracy of guessing among num_classes (1 / num_classes)",
        "score.best_over_chance": "best accuracy minus chance, in accuracy units",
        "score.best_accuracy": "the best eval accuracy as a fraction (an accuracy logged in "
        "percent is divided by 100), when the main score is an accuracy; None otherwise",
        "score.new_best_share": "share of the evaluations after the first that beat every "
        "earlier one (1.0: the score set a new best at every evaluation)",
        "score.drop_z": "score.drop_from_best in units of the score's own eval-to-eval scatter "
        "(robust, from second differences, so a trend is not taken for noise): about 1 when "
        "the best was a high point of a noisy band. None under 6 evaluations",
        "score.first_skill": "how far the first evaluation already was from chance to a "
        "perfect score, for a bounded higher-is-better score: (first - chance) / (perfect - "
        "chance), chance being half the perfect value for an AUC, 1 / num_classes for an "
        "accuracy when the config names the classes, else 0; None for other scores",
    },
)
def _score(ctx: FeatureContext) -> dict[str, Value]:
    name = pick_score_metric(ctx.run)
    if name is None:
        raise InsufficientDataError(
            "the run logged no eval score (accuracy, F1, BLEU, ROUGE, WER, reward ...)"
        )
    steps, values = ctx.series(name)
    st = metric_stats(steps, values, direction(name))
    train_change: float | None = None
    loss = ctx.run.get("train/loss")
    if loss is not None and isinstance(st["best_step"], int):
        ok = np.isfinite(loss.values)
        ls, lv = loss.steps[ok], loss.values[ok]
        before = lv[ls <= st["best_step"]]
        after = lv[ls > st["best_step"]]
        if before.size and after.size >= 2:
            ref = float(np.median(before[-3:]))
            end = float(np.median(after[-3:]))
            train_change = (end - ref) / abs(ref) if ref != 0 else None
    perfect = _perfect(st, name)
    first = st["first"]
    error_reduction = _error_reduction(st, name)
    at_perfect = False
    if perfect is not None and isinstance(first, float):
        at_perfect = abs(perfect - first) <= 0.005 * max(abs(perfect), 1.0)
    others = [
        _error_reduction(metric_stats(*ctx.series(o), direction(o)), o)
        for o in score_candidates(ctx.run)
        if o != name
    ]
    known = [x for x in others if x is not None]
    last = st["last"]
    near_perfect = (
        perfect is not None
        and isinstance(last, float)
        and abs(perfect - last) <= 0.05 * max(abs(perfect), 1.0)
    )
    classes = _num_classes(ctx.run)
    is_accuracy = bool(set(_tokens(name)) & _ACCURACY)
    chance = 1.0 / classes if classes and is_accuracy else None
    best = st["best"]
    # accuracies logged as percentages
    percent = is_accuracy and isinstance(best, float) and 1.0 < best <= 100.0
    scale = 100.0 if chance is not None and percent else 1.0
    accuracy = None
    if is_accuracy and isinstance(best, float) and 0.0 <= best <= 100.0:
        accuracy = best / 100.0 if percent else best
    return {
        "score.metric": name,
        "score.higher_is_better": st["higher_is_better"],
        "score.n": st["n"],
        "score.first": st["first"],
        "score.last": st["last"],
        "score.best": best,
        "score.best_step": st["best_step"],
        "score.gain": st["gain"],
        "score.rel_gain": st["rel_gain"],
        "score.error_reduction": error_reduction,
        "score.others_error_reduction": max(known) if known else None,
        "score.first_at_perfect": at_perfect,
        "score.last_near_perfect": near_perfect,
        "score.range": st["range"],
        "score.tail": st["tail"],
        "score.drop_from_best": st["drop_from_best"],
        "score.rel_drop_from_best": st["rel_drop_from_best"],
        "score.giveback": st["giveback"],
        "score.evals_after_best": st["points_after_best"],
        "score.train_change_after_best": train_change,
        "score.num_classes": classes,
        "score.chance": None if chance is None else chance * scale,
        "score.best_over_chance": (
            None if chance is None or not isinstance(best, float) else best / scale - chance
        ),
        "score.best_accuracy": accuracy,
        "score.first_skill": _first_skill(st, name, chance),
        "score.new_best_share": _new_best_share(values, st["higher_is_better"]),
        "score.drop_z": _drop_z(values, st["drop_from_best"]),
    }


def _drop_z(values: np.ndarray, drop: Value) -> float | None:
    """How many eval-to-eval scatters the score's tail sits below its best."""
    v = values[np.isfinite(values)]
    if v.size < 6 or not isinstance(drop, float):
        return None
    sigma = second_difference_sigma(v)
    if sigma <= 0:
        return None
    return drop / sigma


def _new_best_share(values: np.ndarray, higher_is_better: Value) -> float | None:
    """Share of the evaluations after the first that beat every earlier one."""
    v = values[np.isfinite(values)]
    if len(v) < 2 or higher_is_better is None:
        return None
    signed = v if higher_is_better else -v
    records = signed[1:] > np.maximum.accumulate(signed)[:-1]
    return float(records.mean())


#: Name tokens of an area under a curve, whose chance level is half its perfect value.
_AUC = {"auc", "auroc", "roc_auc", "rocauc"}


def _first_skill(st: dict[str, Value], name: str, chance: float | None) -> float | None:
    """(first - chance) / (perfect - chance) of a bounded higher-is-better score."""
    perfect, first = _perfect(st, name), st["first"]
    if st["higher_is_better"] is not True or perfect is None or not isinstance(first, float):
        return None
    # chance: half the perfect value for an AUC, 1 / num_classes for an accuracy, else 0
    floor = perfect / 2 if set(_tokens(name)) & _AUC else (chance or 0.0) * perfect
    return (first - floor) / (perfect - floor) if perfect > floor else None
