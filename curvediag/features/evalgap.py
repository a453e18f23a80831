"""Evaluation-loss features and the train/eval gap."""

from __future__ import annotations

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features._stats import (
    DIRECT_LIMIT,
    LossScale,
    last_logs_range,
    mad_sigma,
    prefix_medians,
    rolling_median,
    second_difference_sigma,
    sliding_medians,
)
from curvediag.features.loss import epoch_means, train_loss
from curvediag.features.registry import FeatureContext, Value, feature_group

#: Evaluations ``eval.scatter`` needs: with fewer, a running median of five is most of the run.
SCATTER_MIN_EVALS = 8

#: Running medians (each O(train logs)) computed for large windows of distinct sizes.
MAX_RUNNING_MEDIANS = 8
#: Logs sampled from each window beyond that.
SAMPLE = 1001


def _smoothed_train_at(ctx: FeatureContext, at_steps: np.ndarray) -> np.ndarray:
    """Train loss around each step: the median of the train logs near it.

    The window spans half a logging interval either side, or 2% of the run when train is logged
    more often, so a dense per-step log is smoothed while a sparse one compares like with like
    (the Trainer logs train and eval at the same step). Without a log in the window, the nearest
    one within a logging interval is used; NaN beyond that.

    Every median is exact, in O((train logs + evals) log window) time, except on dense logs so
    irregular that the windows come in more than :data:`MAX_RUNNING_MEDIANS` sizes too large to
    sort directly: those windows use the median of :data:`SAMPLE` evenly spaced logs of the
    window.
    """
    steps, values, _ = train_loss(ctx)
    ok = np.isfinite(values)
    s, v = steps[ok], values[ok]
    if v.size < 2:
        raise InsufficientDataError("fewer than 2 finite train-loss points")
    interval = float(np.median(np.diff(s)))
    half = max(0.5 * interval, 0.02 * float(s[-1] - s[0]))
    at = np.asarray(at_steps, dtype=np.float64)
    lo = np.searchsorted(s, at - half, side="left")
    hi = np.searchsorted(s, at + half, side="right")
    sizes = hi - lo
    out = np.full(at.size, np.nan)
    n = v.size
    has = sizes > 0
    # windows cut by the start or the end of the logs: prefixes and suffixes of growing length
    for ends, vv, length in (
        (has & (lo == 0) & (hi < n), v, hi),
        (has & (hi == n) & (lo > 0), v[::-1], n - lo),
    ):
        idx = np.flatnonzero(ends)
        if idx.size:
            first, last = int(length[idx].min()), int(length[idx].max())
            out[idx] = prefix_medians(vv, first, last)[length[idx] - first]
    whole = has & (lo == 0) & (hi == n)
    if bool(whole.any()):
        out[whole] = float(np.median(v))
    # windows inside the logs, one size at a time: sorted directly when few, else one running
    # median (regular logging gives a handful of sizes)
    inner = has & (lo > 0) & (hi < n)
    heavy = 0
    for size in np.unique(sizes[inner]).tolist():
        idx = np.flatnonzero(inner & (sizes == size))
        if idx.size * size <= DIRECT_LIMIT:
            rows = max(1, (1 << 21) // size)
            for a in range(0, idx.size, rows):
                part = idx[a : a + rows]
                out[part] = np.median(v[lo[part, None] + np.arange(size)], axis=1)
        elif heavy < MAX_RUNNING_MEDIANS:
            heavy += 1
            out[idx] = sliding_medians(v, size)[lo[idx]]
        else:  # very irregular dense logs: an evenly spaced sample of each window
            pick = np.linspace(0, size - 1, SAMPLE).round().astype(np.int64)
            rows = max(1, (1 << 21) // SAMPLE)
            for a in range(0, idx.size, rows):
                part = idx[a : a + rows]
                out[part] = np.median(v[lo[part, None] + pick], axis=1)
    # sparse logs: the nearest train log, if it is within one logging interval
    empty = np.flatnonzero(sizes == 0)
    if empty.size:
        left = np.clip(lo[empty] - 1, 0, s.size - 1)
        right = np.clip(lo[empty], 0, s.size - 1)
        d_left = np.abs(s[left] - at[empty])
        d_right = np.abs(s[right] - at[empty])
        j = np.where(d_right < d_left, right, left)
        j = np.searchsorted(s, s[j], side="left")  # the first of equal steps, as argmin
        near = np.abs(s[j] - at[empty]) <= interval
        out[empty[near]] = v[j[near]]
    return out


def _late_trend(v: np.ndarray) -> float | None:
    """How much the eval loss would fall over another quarter at the pace of its last quarter
    (a least-squares line over its last quarter, at least 6 evaluations), when that slope is
    negative by at least two standard errors; 0 when it is not; None with too few evaluations."""
    k = max(6, v.size // 4)
    if v.size < 16:
        return None
    y = v[-k:].astype(np.float64)
    x = np.arange(k, dtype=np.float64)
    x -= x.mean()
    slope = float((x * (y - y.mean())).sum() / (x * x).sum())
    resid = y - y.mean() - slope * x
    se = float(np.sqrt((resid**2).sum() / (k - 2) / (x * x).sum()))
    if slope >= 0 or (se > 0 and -slope / se < 2.0):
        return 0.0
    # a curve that is levelling off (a decaying schedule) is not still improving: the last
    # third of the window must still fall at half the window's pace, unless the scatter of
    # those few evaluations cannot tell (its slope within one standard error of that pace)
    tail = y[-max(3, k // 3) :]
    xt = np.arange(tail.size, dtype=np.float64)
    xt -= xt.mean()
    tail_slope = float((xt * (tail - tail.mean())).sum() / (xt * xt).sum())
    # the scatter of single evaluations from third differences: a smooth curve that bends
    # (levelling off) is not scatter, so its levelling is still seen
    scatter = mad_sigma(np.diff(y, 3)) / np.sqrt(20.0)
    tail_se = float(scatter / np.sqrt((xt * xt).sum()))
    if tail_slope > 0.5 * slope + tail_se:
        return 0.0
    return -slope * k


def _eval_trend(v: np.ndarray) -> dict[str, Value]:
    """Is the eval loss still falling at the end, and how much more would it give?

    The gaps between successive evaluations shrink as a run converges. Their recent ratio r
    (the last gap against the one before) extrapolates the rest as a geometric series:
    last gap x r / (1 - r). From eight evaluations on, gaps are averaged in pairs and the last
    ones must stand out of the evaluations' own scatter, so noise does not read as progress.
    """
    if v.size < 4:
        return {"eval.late_drop": None, "eval.projected_gain": None}
    out = _raw_eval_trend(v)
    gain = out["eval.projected_gain"]
    if isinstance(gain, float) and gain > 0 and float(v.min()) > 0:
        # a positive loss cannot fall by its whole value: the extrapolated fall, a fraction of
        # the last loss, compounds (1 - e^-x: the same for small falls, never 100% or more)
        out["eval.projected_gain"] = float(-np.expm1(-gain))
    return out


def _raw_eval_trend(v: np.ndarray) -> dict[str, Value]:
    d = -np.diff(v)  # positive: the eval loss fell
    pair = v.size >= 8
    last = float(np.mean(d[-2:])) if pair else float(d[-1])
    prev = float(np.mean(d[-4:-2])) if pair else float(d[-2])
    late_from = v[-3] if pair else v[-2]
    late_drop = float((late_from - v[-1]) / abs(late_from)) if late_from != 0 else None
    if pair:
        # scatter of single evaluations around their local trend (second differences), over
        # the second half, where the last gaps are: the bend of a fast first descent (a
        # detector's warmup epochs) is curvature, not scatter
        noise = mad_sigma(np.diff(v[v.size // 2 :], 2)) / np.sqrt(6.0)
        if last < 1.41 * noise:  # the mean of two gaps has 0.71x the scatter of one value
            last = 0.0
        # many evaluations: the trend of the last quarter, when it is clear of the noise, says
        # more than the last two gaps (a slow creep under per-eval scatter)
        trend = _late_trend(v)
        if trend is not None and trend > 0 and v[-1] != 0:
            return {"eval.late_drop": late_drop, "eval.projected_gain": trend / abs(v[-1])}
    if last <= 0 or v[-1] == 0 or (not pair and prev <= 0):
        # a fall right after a rise is a zig-zag of a few evaluations, not a trend to extend
        return {"eval.late_drop": late_drop, "eval.projected_gain": 0.0}
    # r is capped at 0.8: beyond about four more gaps at the current pace is speculation
    r = min(last / prev, 0.8) if prev > 0 else 0.8
    return {
        "eval.late_drop": late_drop,
        "eval.projected_gain": float(last * r / (1.0 - r) / abs(v[-1])),
    }


@feature_group(
    "eval",
    requires=["eval/loss"],
    features={
        "eval.n": "number of evaluations",
        "eval.first": "first eval loss",
        "eval.last": "last eval loss",
        "eval.last3_range": "range of the last three evaluations as a fraction of the lowest of "
        "them (0.02 = within 2% of each other)",
        "eval.min": "lowest eval loss",
        "eval.min_step": "step of the lowest eval loss",
        "eval.evals_after_min": "evaluations after the minimum",
        "eval.rise_after_min": "fractional rise of the last eval loss above the minimum",
        "eval.rising_evals": "trailing evaluations that stayed above the minimum by more than "
        "the flat tolerance",
        "eval.rising_share": "eval.rising_evals / eval.evals_after_min: 1.0 when every "
        "evaluation after the minimum stayed above it (None when the minimum is the last)",
        "eval.improvement": "fractional decrease from the first eval loss to the minimum",
        "eval.giveback": "(last - minimum) / (first - minimum) of the eval loss: the share of "
        "its descent given back by the end; None when the minimum is the first evaluation",
        "eval.change": "fractional change from the first to the last eval loss",
        "eval.spread": "(max - min) / |median| of the finite eval losses",
        "eval.scatter": "robust scatter of the log eval loss around its running median over 5 "
        "evaluations: the fractional eval-to-eval noise once the trend is taken out (from "
        f"{SCATTER_MIN_EVALS} evaluations of a positive loss)",
        "eval.scatter_vs_fall": "eval.scatter x the last eval loss / (first - minimum): the "
        "eval-to-eval noise in loss units against the curve's whole fall, how plain it is on a "
        "linear plot (a 13% wobble of a loss that fell from 3.6 to 0.009 is invisible); None "
        "when the first evaluation was the best",
        "eval.frozen_evals": "how many of the last evaluations gave exactly the last eval loss "
        "(to 7 significant digits) at different steps: 1 when the last one differs from the one "
        "before",
        "eval.frozen_from_step": "step of the first of those identical evaluations",
        "eval.train_change_after_min": "fractional change of the smoothed train loss from the "
        "eval minimum to the end (of its per-epoch means when the run logs them: "
        "eval.train_epoch_change_after_min)",
        "eval.train_change": "fractional change of the smoothed train loss between the first and "
        "the last evaluation",
        "eval.train_epoch_change_after_min": "fractional change of the train loss's per-epoch "
        "means (Lightning's train_loss_epoch, a loop's epoch_loss, logged at the steps of the "
        "evaluations) from the eval minimum to the end: a whole epoch's mean against the "
        "next, where a few single batches scatter. None without such means, with the minimum "
        "at the first evaluation (the first epoch's mean holds its fast start) or with a mean "
        "outside the range of the logged batches",
        "eval.train_level_change_after_min": "fractional change of the median train loss over "
        "the steps after the eval minimum from its median over as many steps before it (robust "
        "to a train loss logged from single batches); None with fewer than 3 logs on a side",
        "eval.late_drop": "fractional fall of the eval loss over its last evaluations (the last "
        "two gaps; negative when it rose)",
        "eval.falling_streak": "how many of the last evaluations were each below the one before "
        "(0 when the last rose or held): noise around a level rarely falls 5 times in a row "
        "(1 in 720 for independent scatter)",
        "eval.fall_last5": "fractional fall of the eval loss over its last five gaps (1 - last / "
        "the sixth from last); None under 6 evaluations",
        "eval.projected_gain": "how much further the eval loss would fall, as a fraction of the "
        "last eval loss (compounded: under 1 for a positive loss): from 16 evaluations on, "
        "over another quarter at the pace of its last quarter when that trend is clear of the "
        "noise and not levelling off; else if its recent improvements kept shrinking at their "
        "current rate (geometric extrapolation of the last gaps); 0 when it stopped falling, "
        "or (under 8 evaluations) when its last fall came right after a rise",
        "eval.last_new_min_drop": "how far the last evaluation fell below every earlier one "
        "(1 - last / earlier minimum); None when it is not a new minimum, under 4 evaluations "
        "or for a loss not positive everywhere",
        "eval.last_new_min_z": "that fall (log scale) in units of the eval loss's own "
        "eval-to-eval scatter",
        "eval.after_min_share": "evaluations after the minimum / all evaluations after the "
        "first: how much of the run the eval loss spent past its best",
        "eval.rise_z": "how far the eval loss rose above its minimum (log scale), in units "
        "of its own eval-to-eval scatter: when 3+ evaluations follow the minimum, the median of "
        "the later half of them above the point halfway between the minimum and its lower "
        "neighbour, else "
        "the median of those after it above the minimum itself. A minimum inside a noisy "
        "band scores ~1, a real rise several; None under 6 evaluations (the scatter of 2-3 "
        "second differences is a guess) or for a loss not "
        "positive everywhere",
        "eval.descent_into_min_z": "how much the eval loss was still falling just before its "
        "minimum: the median of the first half of the (up to 8) evaluations before it above "
        "the median of the second half (log scale), in units of the eval-to-eval scatter; "
        "about 0 when the minimum sits in a flat band. None with fewer than 4 evaluations before "
        "the minimum or 2 after it",
        "eval.rise_over_band_z": "where the eval loss got to after its minimum (the median of "
        "the later half of the evaluations after it) above the level it held just before it "
        "(the median of up to 8 evaluations before it), log scale, in units of the "
        "eval-to-eval scatter: 1 or less when the minimum is a low outlier of a band the loss "
        "never left, several for a loss that turned and rose. None as for "
        "eval.descent_into_min_z",
    },
)
def _eval(ctx: FeatureContext) -> dict[str, Value]:
    s, v = ctx.finite_series("eval/loss")
    if v.size == 0:
        raise InsufficientDataError("no finite eval-loss values")
    scale = LossScale(v)
    t = scale.forward(v)
    i_min = int(np.argmin(v))
    tol = ctx.settings.flat_tolerance
    tol_t = float(np.log1p(tol)) if scale.log else tol
    rising = 0
    for x in t[::-1]:
        if x - t[i_min] > tol_t:
            rising += 1
        else:
            break
    med = float(np.median(np.abs(v))) or 1.0
    out: dict[str, Value] = {
        "eval.n": int(v.size),
        "eval.first": float(v[0]),
        "eval.last": float(v[-1]),
        "eval.last3_range": last_logs_range(v),
        "eval.min": float(v[i_min]),
        "eval.min_step": int(s[i_min]),
        "eval.evals_after_min": int(v.size - 1 - i_min),
        "eval.rise_after_min": scale.ratio(float(t[-1] - t[i_min])),
        "eval.rising_evals": rising,
        "eval.rising_share": rising / (v.size - 1 - i_min) if v.size - 1 > i_min else None,
        "eval.improvement": -scale.ratio(float(t[i_min] - t[0])),
        "eval.giveback": float((v[-1] - v[i_min]) / (v[0] - v[i_min])) if v[0] > v[i_min] else None,
        "eval.change": scale.ratio(float(t[-1] - t[0])),
        "eval.spread": float((v.max() - v.min()) / med),
        "eval.scatter": (scatter := _trend_scatter(v)),
        "eval.scatter_vs_fall": scatter * float(v[-1]) / float(v[0] - v[i_min])
        if scatter is not None and v[0] > v[i_min]
        else None,
        **_frozen(s, v),
        "eval.train_change_after_min": None,
        "eval.train_change": None,
        "eval.train_level_change_after_min": None,
        **_eval_trend(v),
        "eval.falling_streak": _falling_streak(v),
        "eval.fall_last5": float(1.0 - v[-1] / v[-6]) if v.size >= 6 and v[-6] != 0 else None,
        **_log_shape(v, i_min),
        "eval.after_min_share": (v.size - 1 - i_min) / (v.size - 1) if v.size > 1 else None,
    }
    if ctx.run.get("train/loss") is not None:
        try:
            tr = _smoothed_train_at(ctx, np.array([s[i_min], s[-1], s[0]]))
        except InsufficientDataError:
            tr = np.full(3, np.nan)
        # relative to the magnitude: a negative loss (a negated log-likelihood) that falls
        # further below zero improved
        if np.isfinite(tr[0]) and np.isfinite(tr[1]) and tr[0] != 0:
            out["eval.train_change_after_min"] = float((tr[1] - tr[0]) / abs(tr[0]))
        if np.isfinite(tr[2]) and np.isfinite(tr[1]) and tr[2] != 0:
            out["eval.train_change"] = float((tr[1] - tr[2]) / abs(tr[2]))
        out["eval.train_level_change_after_min"] = _level_change(ctx, int(s[i_min]))
    epoch_change = _epoch_mean_change(ctx, int(s[i_min]), int(s[-1])) if i_min > 0 else None
    out["eval.train_epoch_change_after_min"] = epoch_change
    if epoch_change is not None:
        out["eval.train_change_after_min"] = epoch_change
    return out


def _epoch_mean_change(ctx: FeatureContext, start: int, end: int) -> float | None:
    """Change of the train loss's per-epoch means from step ``start`` to step ``end`` (both
    logged there, as Lightning logs the epoch's mean at the step of its validation), or None."""
    means = epoch_means(ctx)
    if means is None or end <= start:
        return None
    es, ev = means
    _, lv = ctx.series("train/loss")
    lv = lv[np.isfinite(lv)]
    at = {int(x): float(y) for x, y in zip(es, ev, strict=True)}
    a, b = at.get(start), at.get(end)
    if a is None or b is None or a <= 0:
        return None
    # a mean above every logged batch comes from batches the log never showed (a burst)
    if not all(float(lv.min()) <= x <= float(lv.max()) for x in (a, b)):
        return None
    return b / a - 1.0


def _level_change(ctx: FeatureContext, at: int) -> float | None:
    """Median train loss after ``at`` against its median over as many steps before it."""
    steps, values, _ = train_loss(ctx)
    ok = np.isfinite(values)
    s, v = steps[ok], values[ok]
    if not s.size:
        return None
    span = int(s[-1]) - at
    after = v[s > at]
    before = v[(s <= at) & (s > at - span)]
    if after.size < 3 or before.size < 3:
        return None
    ref = float(np.median(before))
    return float(np.median(after)) / ref - 1 if ref > 0 else None


def _trailing(mask: np.ndarray) -> int:
    """How many of the last entries of ``mask`` are true in a row."""
    false = np.flatnonzero(~mask)
    return int(mask.size - 1 - false[-1]) if false.size else int(mask.size)


def _falling_streak(v: np.ndarray) -> int:
    """The trailing evaluations each lower than the one before."""
    return _trailing(np.diff(v) < 0)


def _trend_scatter(v: np.ndarray) -> float | None:
    """``eval.scatter``: the MAD scatter of the log eval losses around their centred running
    median of five, over the evaluations with two neighbours on each side (a trend, a bend or
    a V keeps its shape in the median; a one-off jump does not move it), or None for fewer
    than :data:`SCATTER_MIN_EVALS` or a loss not positive."""
    if v.size < SCATTER_MIN_EVALS or not bool(np.all(v > 0)):
        return None
    t = np.log(v)
    # the full windows only: a shrunken window at either end turns a steep first descent into
    # residuals of its own
    return float(mad_sigma((t - rolling_median(t, 5))[2:-2]))


#: Evaluations the eval-to-eval scatter needs: under this, two or three second differences
#: make the scatter a guess, and the rise is judged by the other conditions alone.
RISE_Z_MIN_EVALS = 6

#: Evaluations needed before the minimum to read the band it sits in, and after it to read
#: where the loss went (two: the overfitting warning's shortest rise), and the most evaluations
#: before it that make that band (the level just before the best, not the descent from the
#: start).
BAND_MIN_EVALS = 4
BAND_MIN_AFTER = 2
BAND_MAX_EVALS = 8


def _log_shape(v: np.ndarray, i_min: int) -> dict[str, Value]:
    """``eval.rise_z`` and ``eval.last_new_min_*``: both in units of the scatter of the log
    eval losses, computed once here (None for a loss not positive everywhere)."""
    out: dict[str, Value] = {
        "eval.rise_z": None,
        "eval.last_new_min_drop": None,
        "eval.last_new_min_z": None,
        "eval.descent_into_min_z": None,
        "eval.rise_over_band_z": None,
    }
    if v.size < 4 or not bool(np.all(v > 0)):
        return out
    t = np.log(v)
    sigma = _scatter(t)
    out["eval.rise_z"] = _rise_z(t, i_min, sigma)
    after = t[i_min + 1 :]
    if i_min >= BAND_MIN_EVALS and after.size >= BAND_MIN_AFTER:
        before = t[max(0, i_min - BAND_MAX_EVALS) : i_min]
        half = before.size // 2
        out["eval.descent_into_min_z"] = float(
            (np.median(before[:half]) - np.median(before[half:])) / sigma
        )
        out["eval.rise_over_band_z"] = float(
            (np.median(after[after.size // 2 :]) - np.median(before)) / sigma
        )
    before = float(t[:-1].min())
    if t[-1] < before:
        out["eval.last_new_min_drop"] = float(-np.expm1(t[-1] - before))
        out["eval.last_new_min_z"] = float((before - t[-1]) / sigma)
    return out


def _rise_z(t: np.ndarray, i_min: int, sigma: float) -> float | None:
    """How far the log eval losses ``t`` rose above their minimum, in units of ``sigma``."""
    if t.size < RISE_Z_MIN_EVALS or i_min == t.size - 1:
        return None
    # the lowest of many noisy evaluations is a noise extreme: the level there is halfway
    # (log scale) between the minimum and its lower neighbour (a V's bottom keeps its depth, a
    # lone dip in a flat band loses half of it); with fewer than 3 evaluations after it, the
    # minimum itself. The level it rose to is the median of the later half of the evaluations
    # after it, so a gradual rise counts by where it got to
    after = t[i_min + 1 :]
    if i_min >= 1 and after.size >= 3:
        base = float(0.5 * (t[i_min] + min(t[i_min - 1], t[i_min + 1])))
        after = after[after.size // 2 :]
    else:
        base = float(t[i_min])
    return float((np.median(after) - base) / sigma)


def _frozen(s: np.ndarray, v: np.ndarray) -> dict[str, Value]:
    """The trailing run of evaluations, at distinct steps, equal to the last one to 7
    significant digits: a model whose weights change never gives the same eval loss twice."""
    last = float(v[-1])
    same = np.abs(v - last) <= 1e-7 * max(abs(last), 1e-12)
    i = v.size - 1
    while i > 0 and bool(same[i - 1]) and s[i - 1] < s[i]:
        i -= 1
    return {"eval.frozen_evals": int(v.size - i), "eval.frozen_from_step": int(s[i])}


@feature_group(
    "gap",
    requires=["train/loss", "eval/loss"],
    features={
        "gap.first": "eval - smoothed train loss at the first evaluation, relative to eval",
        "gap.last": "eval - smoothed train loss at the last evaluation, relative to eval",
        "gap.at_eval_min": "relative gap at the eval minimum",
        "gap.growth": "relative gap at the last evaluation minus at the eval minimum",
        "gap.eval_below_train": "fraction of evaluations with eval loss below the train loss",
        "gap.trend": "slope of the relative gap per evaluation (least squares)",
        "gap.first_step": "step of the first evaluation with a train loss around it",
        "gap.first_eval": "eval loss at that evaluation",
        "gap.first_train": "smoothed train loss around it",
        "gap.first_ratio": "eval / smoothed train loss at the first evaluation (None unless both "
        "are positive)",
        "gap.last_ratio": "eval / smoothed train loss at the last evaluation (None unless both "
        "are positive)",
    },
)
def _gap(ctx: FeatureContext) -> dict[str, Value]:
    s, v = ctx.finite_series("eval/loss")
    tr = _smoothed_train_at(ctx, s)
    both = np.isfinite(tr) & (np.abs(v) > 0)
    if not bool(both.any()):
        raise InsufficientDataError("no evaluation falls inside the logged train-loss range")
    rel = (v[both] - tr[both]) / np.abs(v[both])
    vb = v[both]
    i_min = int(np.argmin(vb))
    trend = float(np.polyfit(np.arange(rel.size), rel, 1)[0]) if rel.size >= 3 else None
    tb, sb = tr[both], s[both]

    def ratio(i: int) -> float | None:
        return float(vb[i] / tb[i]) if vb[i] > 0 and tb[i] > 0 else None

    return {
        "gap.first_step": int(sb[0]),
        "gap.first_eval": float(vb[0]),
        "gap.first_train": float(tb[0]),
        "gap.first_ratio": ratio(0),
        "gap.last_ratio": ratio(-1),
        "gap.first": float(rel[0]),
        "gap.last": float(rel[-1]),
        "gap.at_eval_min": float(rel[i_min]),
        "gap.growth": float(rel[-1] - rel[i_min]),
        "gap.eval_below_train": float(np.mean(rel < 0)),
        "gap.trend": trend,
    }


@feature_group(
    "evalstop",
    requires=["train/loss", "eval/loss"],
    features={
        "evalstop.n": "evaluations at or after the step where the train loss stopped learning "
        "(loss.learning_stopped_step)",
        "evalstop.change": "fractional change of the eval loss over those evaluations, first to "
        "last (-0.08 = it still fell 8% while the train loss sat flat); None under 2",
    },
)
def _evalstop(ctx: FeatureContext) -> dict[str, Value]:
    s, v = ctx.finite_series("eval/loss")
    stop = ctx.get("loss.learning_stopped_step")
    after = v[s >= int(stop)] if isinstance(stop, (int, float)) else v[:0]
    change = float(after[-1] / after[0] - 1.0) if after.size >= 2 and after[0] > 0 else None
    return {"evalstop.n": int(after.size), "evalstop.change": change}


#: Evaluations either side of an eval that make its local baseline (the eval itself left out).
SPIKE_HALF_WINDOW = 3
#: A later eval back within this factor of the baseline counts as the recovery.
SPIKE_RECOVERED = 1.2


def _scatter(t: np.ndarray) -> float:
    """The robust eval-to-eval scatter of log eval losses ``t`` (3 or more), from the second
    differences (each eval against the mean of its two neighbours), so that a trend, straight or
    V-shaped, is not taken for noise; floored at 1e-3."""
    return max(second_difference_sigma(t), 1e-3)


def _local_baseline(t: np.ndarray) -> np.ndarray:
    """Each evaluation's local baseline: the median of up to :data:`SPIKE_HALF_WINDOW` evals
    either side, itself left out."""
    n = t.size
    h = SPIKE_HALF_WINDOW
    offsets = np.array([k for k in range(-h, h + 1) if k != 0])
    idx = np.arange(n)[:, None] + offsets[None, :]
    padded = np.where((idx >= 0) & (idx < n), t[np.clip(idx, 0, n - 1)], np.nan)
    out: np.ndarray = np.nanmedian(padded, axis=1)
    return out


def _band_before(t: np.ndarray) -> np.ndarray:
    """Each evaluation's band top: the highest of up to :data:`SPIKE_HALF_WINDOW` evals
    before it (-inf for the first)."""
    n = t.size
    idx = np.arange(n)[:, None] - np.arange(1, SPIKE_HALF_WINDOW + 1)[None, :]
    padded = np.where(idx >= 0, t[np.clip(idx, 0, n - 1)], -np.inf)
    out: np.ndarray = padded.max(axis=1)
    return out


@feature_group(
    "evalspike",
    requires=["eval/loss"],
    features={
        "evalspike.step": "step of the largest eval-loss spike: the evaluation (not the first "
        "nor the last) highest above its local baseline among those above both neighbours",
        "evalspike.value": "eval loss at that spike",
        "evalspike.baseline": "its local baseline: the median of the 3 evaluations either side",
        "evalspike.ratio": "spike / baseline",
        "evalspike.noise_z": "the spike's height over its baseline (log scale) in units of the "
        "eval loss's own eval-to-eval scatter (robust)",
        "evalspike.height_vs_range": "(spike - baseline) / the range of all the other "
        "evaluations: a blip inside a long noisy log is small against it",
        "evalspike.recovered": "a later evaluation came back within 1.2x of the baseline, or "
        "below the highest of the 3 evaluations before the spike",
        "evalspike.recovery_step": "step of that evaluation",
        "evalspike.count": "evaluations at least 1.5x their baseline and 5 noise units above "
        "it, above both neighbours",
        "evalspike.n": "finite eval-loss values",
    },
)
def _evalspike(ctx: FeatureContext) -> dict[str, Value]:
    s, v = ctx.finite_series("eval/loss")
    n = int(v.size)
    if n < 6:
        raise InsufficientDataError(f"only {n} finite eval-loss values (an eval spike needs 6)")
    if not bool(np.all(v > 0)):
        raise InsufficientDataError("the eval loss is not positive everywhere")
    t = np.log(v)
    sigma = _scatter(t)
    base = _local_baseline(t)[1:-1]  # interior evals 1 .. n-2
    inner = t[1:-1]
    resid = inner - base
    peak = (inner > t[:-2]) & (inner > t[2:])
    # an eval later back near its baseline, or back inside the band the evaluations just
    # before it covered (a noisy eval log's median understates where it normally sits);
    # suffix minima make it one pass
    later_min = np.minimum.accumulate(t[::-1])[::-1]  # min of t[j:] for every j
    level = np.maximum(base + float(np.log(SPIKE_RECOVERED)), _band_before(t)[1:-1])
    back = later_min[2:] <= level
    big = peak & (resid >= float(np.log(1.5))) & (resid >= 5.0 * sigma)
    out: dict[str, Value] = {
        "evalspike.step": None,
        "evalspike.value": None,
        "evalspike.baseline": None,
        "evalspike.ratio": None,
        "evalspike.noise_z": None,
        "evalspike.height_vs_range": None,
        "evalspike.recovered": False,
        "evalspike.recovery_step": None,
        "evalspike.count": int(np.count_nonzero(big)),
        "evalspike.n": n,
    }
    if not bool(peak.any()):
        return out
    cand = np.flatnonzero(peak)
    j = int(cand[np.argmax(resid[cand])])
    i = j + 1  # index into the evaluations
    b = float(np.exp(base[j]))
    rest = np.delete(v, i)
    span = float(rest.max() - rest.min())
    out.update(
        {
            "evalspike.step": int(s[i]),
            "evalspike.value": float(v[i]),
            "evalspike.baseline": b,
            "evalspike.ratio": float(v[i] / b),
            "evalspike.noise_z": float(resid[j] / sigma),
            "evalspike.height_vs_range": float((v[i] - b) / span) if span > 0 else None,
            "evalspike.recovered": bool(back[j]),
        }
    )
    if back[j]:
        k = i + 1 + int(np.argmax(t[i + 1 :] <= level[j]))
        out["evalspike.recovery_step"] = int(s[k])
    return out


@feature_group(
    "grad",
    requires=["train/grad_norm"],
    features={
        "grad.n": "number of logged grad norms",
        "grad.threshold": "clipping threshold the clip fraction is measured against",
        "grad.clip_fraction": "fraction of finite logged grad norms above the threshold (grad "
        "norms of exactly 0.0 - steps skipped by the fp16 loss scaler - left out)",
        "grad.clip_fraction_after_warmup": "the same, after warmup",
        "grad.median_after_warmup": "median grad norm after warmup",
        "grad.p90_after_warmup": "90th percentile grad norm after warmup",
        "grad.ratio_to_threshold": "median grad norm after warmup / threshold",
        "grad.max": "largest finite grad norm",
        "grad.max_step": "step of the largest grad norm",
        "grad.growth": "median grad norm over the last 20% of the post-warmup logs / over the "
        "first 30%",
        "grad.growth_start_step": "first step of the last 20% window",
        "grad.first_nonfinite_step": "first step with a non-finite grad norm",
        "grad.nonfinite_count": "number of non-finite grad norms",
        "grad.near_zero": "median grad norm after warmup is below 1e-6",
        "grad.zero_tail_logs": "grad norms of exactly 0.0 at every log from some step to the "
        "end, after at least two finite non-zero ones: how many (0 when the last is not zero or "
        "none before it was non-zero)",
        "grad.zero_from_step": "the first step of that all-zero tail",
        "grad.zero_tail_share": "its share of the logged run: (last step - its first step) / "
        "(last step - first step)",
    },
)
def _grad(ctx: FeatureContext) -> dict[str, Value]:
    steps, values = ctx.series("train/grad_norm")
    tail = _zero_tail(steps, values)
    thr_v = ctx.get("run.max_grad_norm")
    thr = float(thr_v) if isinstance(thr_v, (int, float)) else 1.0
    ok = np.isfinite(values)
    bad_i = np.flatnonzero(~ok)
    # A grad norm of exactly 0.0 beside others that are not is a step the fp16 loss scaler
    # skipped: it says nothing about clipping, so it is left out (all zeros are kept: then
    # nothing is being trained).
    zero = ok & (values == 0.0)
    if bool(zero.any()) and int(zero.sum()) < int(ok.sum()):
        ok = ok & ~zero
    s, g = steps[ok], values[ok]
    if g.size == 0:
        raise InsufficientDataError("no finite grad-norm values")
    warm = ctx.get("run.warmup_end_step")
    after = s > int(warm or 0)
    i_max = int(np.argmax(g))
    out: dict[str, Value] = {
        "grad.n": int(values.size),
        "grad.threshold": thr,
        "grad.clip_fraction": float(np.mean(g > thr)),
        "grad.max": float(g[i_max]),
        "grad.max_step": int(s[i_max]),
        "grad.first_nonfinite_step": int(steps[bad_i[0]]) if bad_i.size else None,
        "grad.nonfinite_count": int(bad_i.size),
        # high grad norms during warmup are normal: nothing is judged until warmup is over
        "grad.clip_fraction_after_warmup": None,
        "grad.median_after_warmup": None,
        "grad.p90_after_warmup": None,
        "grad.ratio_to_threshold": None,
        "grad.growth": None,
        "grad.growth_start_step": None,
        "grad.near_zero": None,
        **tail,
    }
    if int(after.sum()) < 3:
        return out
    ga, sa = g[after], s[after]
    m = ga.size
    early = ga[: max(1, int(m * 0.3))]
    late = ga[-max(1, int(m * 0.2)) :]
    base = float(np.median(early))
    med = float(np.median(ga))
    out.update(
        {
            "grad.clip_fraction_after_warmup": float(np.mean(ga > thr)),
            "grad.median_after_warmup": med,
            "grad.p90_after_warmup": float(np.percentile(ga, 90)),
            "grad.ratio_to_threshold": med / thr if thr > 0 else None,
            "grad.growth": float(np.median(late) / base) if base > 0 else None,
            "grad.growth_start_step": int(sa[-max(1, int(m * 0.2))]),
            "grad.near_zero": bool(med < 1e-6),
        }
    )
    return out


def _zero_tail(steps: np.ndarray, values: np.ndarray) -> dict[str, Value]:
    """``grad.zero_tail_*``: the trailing run of grad norms of exactly 0.0 that follows finite
    non-zero ones. A loss scaler skips a step now and then; zero at every log to the end means
    no update reached the trainable weights from then on."""
    n = values.size
    i = n - _trailing(values == 0.0)
    before = values[:i]
    if i == n or int(np.sum(np.isfinite(before) & (before != 0.0))) < 2:
        return {"grad.zero_tail_logs": 0, "grad.zero_from_step": None, "grad.zero_tail_share": None}
    span = float(steps[-1] - steps[0])
    return {
        "grad.zero_tail_logs": int(n - i),
        "grad.zero_from_step": int(steps[i]),
        "grad.zero_tail_share": float(steps[-1] - steps[i]) / span if span > 0 else None,
    }
