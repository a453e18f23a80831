"""Training-loss features: levels, phase trends, noise, plateaus, non-finite onset and spikes."""

from __future__ import annotations

import re

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features._stats import (
    PHASES,
    LossScale,
    fitted_change,
    last_logs_range,
    mad_sigma,
    phase_mask,
    prefix_medians,
    relative_above,
    rolling_median,
    sliding_medians,
    smoothing_window,
)
from curvediag.features.registry import FeatureContext, Value, feature_group


def train_loss(ctx: FeatureContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Train loss with hidden NaNs made explicit.

    With ``logging_nan_inf_filter=True`` (the Trainer's default) a logging window whose every
    step was NaN is logged as exactly 0.0 while ``grad_norm`` is NaN/Inf. Such points are
    turned back into NaN here.

    Returns:
        (steps, values with hidden NaNs as NaN, mask of the hidden-NaN points)
    """
    steps, values = ctx.series("train/loss")
    values = values.copy()
    hidden = np.zeros(values.size, dtype=bool)
    grad = ctx.run.get("train/grad_norm")
    zero = values == 0.0
    if grad is not None and bool(zero.any()):
        bad_grad_steps = grad.steps[~np.isfinite(grad.values)]
        hidden = zero & np.isin(steps, bad_grad_steps)
        if bool(hidden.any()):
            # Once hidden NaNs started, later exact zeros are NaN too.
            first = int(np.argmax(hidden))
            hidden[first:] |= zero[first:]
    values[hidden] = np.nan
    return steps, values, hidden


@feature_group(
    "loss",
    requires=["train/loss"],
    features={
        "loss.n": "number of logged train-loss points",
        "loss.first": "first finite logged train loss",
        "loss.last": "last logged train loss",
        "loss.min": "lowest train loss",
        "loss.min_step": "step of the lowest train loss",
        "loss.last_above_min": "how far the last log sits above the lowest one, as a fraction "
        "of the lowest (0 when the last log is the run's lowest)",
        "loss.last3_range": "range of the last three logs as a fraction of the lowest of them "
        "(0.02 = within 2% of each other)",
        "loss.max": "highest finite train loss",
        "loss.head": "the loss at the start: the first log, or the median of the first tenth "
        "of the logs (at most 3) when there are 10 or more",
        "loss.tail": "median train loss over the last 10% of logs",
        "loss.log_scale": "losses are positive and analysed in log space",
        "loss.change_total": "signed fractional change from head to tail (-0.6 = fell by 60%, "
        "+0.2 = rose by 20%): -loss.improvement, for evidence text",
        "loss.improvement": "fractional decrease from head to tail (0.6 = fell by 60%), in the "
        "loss's own units",
        "loss.still_improving": "the last quarter still falls clearly: by 10% or more, or by 5% "
        "or more and at least 5 noise standard errors",
        "loss.steady_descent": "the last quarter falls by 3% or more and 2.5 noise standard "
        "errors, at half the pace per quarter of the middle half of the run or faster: a "
        "smaller fall than loss.still_improving asks for, but one that has not slowed down",
        "loss.late_drop_z": "the fall over the last quarter in standard errors of its noise",
        "loss.change_early": "fractional change of the robust trend over the first 25% of the run",
        "loss.change_mid": "fractional change of the robust trend over 25-75% of the run",
        "loss.change_late": "fractional change of the robust trend over the last 25% of the run",
        "loss.noise": "robust relative noise around the smoothed curve",
        "loss.noise_to_drop": "noise / the total log-decrease of the loss (how big the wobble is "
        "against the learning)",
        "loss.tail_ratio": "tail / head: 0.001 means the loss fell to a thousandth of its start",
        "loss.learning_stopped_at": "fraction of the run after which the smoothed loss stayed "
        "within the flat tolerance of its final level",
        "loss.learning_stopped_step": "step at which that happened",
        "loss.drop_before_stop": "fractional decrease from head to the level where it stopped",
        "loss.rise_from_min": "fractional rise of the tail above the smoothed minimum",
        "loss.progress_lost": "(tail - smoothed minimum) / (head - smoothed minimum): share of "
        "the achieved decrease given back by the end",
        "loss.share_given_back": "loss.progress_lost capped at 1 (a loss that ended above its "
        "start gave back all of its decrease), for evidence text",
        "loss.smoothed_min_step": "step of the smoothed minimum",
        "loss.early_rise": "largest fractional rise above the first loss in the early logs",
        "loss.early_rise_z": "that rise in units of the run's noise level (log space)",
        "loss.early_peak_step": "step of that early peak",
        "loss.early_window_end": "last step of the early window",
        "loss.quarter_change": "signed fractional change from the mean of the first quarter of "
        "the logs to the mean of the last quarter (-0.2 = fell by 20%); None under 12 logs",
        "loss.quarter_spread_z": "highest minus lowest of the mean losses of the 2nd, 3rd and "
        "4th quarters of the logs, in standard errors of a quarter's mean (per-log noise from "
        "first differences); three means of a trendless series stay under 3.3 in 95% of runs",
        "loss.quarter_shift_z": "mean loss of the last quarter of the logs minus the first "
        "quarter's, in standard errors of that difference (absolute units, so a loss that "
        "crosses zero is judged too); None under 12 logs",
        "loss.first_quarter_mean": "mean loss of the first quarter of the logs",
        "loss.last_quarter_mean": "mean loss of the last quarter of the logs",
        "loss.below_zero_growth": "how many times further below zero the mean loss of the last "
        "quarter of the logs is than the first quarter's, when both are negative (10 = the "
        "loss went from -100 to -1,000); None otherwise or under 12 logs",
    },
)
def _loss(ctx: FeatureContext) -> dict[str, Value]:
    steps, values, _ = train_loss(ctx)
    s, v = _finite_prefix(steps, values)
    scale = LossScale(v)
    t = scale.forward(v)
    n = v.size
    k = max(min(3, n), n // 10)  # the tail is never a single log
    # the head is the first log on a short run (a median there would quote a later point)
    k_head = 1 if n < 10 else max(1, min(3, n // 10))
    head_t, tail_t = float(np.median(t[:k_head])), float(np.median(t[-k:]))
    span = float(s[-1] - s[0]) or 1.0
    progress = (s - s[0]) / span
    w = smoothing_window(n)
    smooth = rolling_median(t, w)
    # per-log noise from first differences (does not depend on a smoothing window)
    noise = mad_sigma(np.diff(t)) / np.sqrt(2.0) if n > 2 else 0.0
    changes = {phase: _phase_change(progress, t, phase, scale) for phase in PHASES}
    stop_i = _learning_stop(ctx, smooth, tail_t, noise, w, scale)
    i_min_s = int(np.nanargmin(smooth))
    change_late = changes["late"]
    late_z = _late_drop_z(change_late, noise, phase_mask(progress, "late"), scale)
    still = bool(
        change_late is not None
        and (change_late <= -0.1 or (change_late <= -0.05 and (late_z or 0.0) >= 5.0))
    )
    steady = _steady_descent(change_late, changes["mid"], late_z)
    head_raw, tail_raw = float(np.median(v[:k_head])), float(np.median(v[-k:]))
    if scale.log:
        improvement = -scale.ratio(tail_t - head_t)
    else:  # zero or negative losses: relative to the size of the starting loss
        improvement = (head_raw - tail_raw) / abs(head_raw) if head_raw != 0 else 0.0
    quarter_change, quarter_spread_z, shift_z, first_q, last_q = _quarter_trend(v)
    lost = _progress_lost(v, k_head, k, scale.inverse(float(smooth[i_min_s])))
    early_n = int(min(50, max(3, n // 10), n))
    early = t[:early_n]
    i_early = int(np.argmax(early))
    return {
        "loss.n": int(values.size),
        "loss.first": float(v[0]),
        "loss.last": float(values[-1]),
        "loss.min": float(v.min()),
        "loss.min_step": int(s[int(np.argmin(v))]),
        "loss.last_above_min": relative_above(float(v[-1]), float(v.min())),
        "loss.last3_range": last_logs_range(v),
        "loss.max": float(v.max()),
        "loss.head": head_raw,
        "loss.tail": tail_raw,
        "loss.log_scale": scale.log,
        "loss.improvement": improvement,
        "loss.change_total": -improvement,
        "loss.still_improving": still,
        "loss.steady_descent": steady,
        "loss.late_drop_z": late_z,
        "loss.change_early": changes["early"],
        "loss.change_mid": changes["mid"],
        "loss.change_late": change_late,
        "loss.noise": float(noise),
        "loss.noise_to_drop": float(
            noise / max(_smoothed_drop(smooth, k), abs(head_t - tail_t), 1e-9)
        ),
        "loss.tail_ratio": tail_raw / head_raw if head_raw != 0 else None,
        "loss.learning_stopped_at": float(progress[stop_i]),
        "loss.learning_stopped_step": int(s[stop_i]),
        "loss.drop_before_stop": -scale.ratio(float(smooth[stop_i]) - head_t),
        "loss.rise_from_min": scale.ratio(tail_t - float(smooth[i_min_s])),
        "loss.progress_lost": lost,
        "loss.share_given_back": None if lost is None else min(lost, 1.0),
        "loss.smoothed_min_step": int(s[i_min_s]),
        "loss.early_rise": scale.ratio(float(early[i_early] - t[0])),
        "loss.early_rise_z": float(early[i_early] - t[0]) / max(noise, 1e-9),
        "loss.early_peak_step": int(s[i_early]),
        "loss.early_window_end": int(s[early_n - 1]),
        "loss.quarter_change": quarter_change,
        "loss.quarter_spread_z": quarter_spread_z,
        "loss.quarter_shift_z": shift_z,
        "loss.first_quarter_mean": first_q,
        "loss.last_quarter_mean": last_q,
        "loss.below_zero_growth": (
            last_q / first_q
            if first_q is not None and last_q is not None and first_q < 0 and last_q < 0
            else None
        ),
    }


def _finite_prefix(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The finite points before the first non-finite one (all finite points when the run
    starts non-finite); the ``nan`` group describes what came after."""
    ok = np.isfinite(values)
    if int(ok.sum()) < 2:
        raise InsufficientDataError("fewer than 2 finite train-loss points")
    end = int(np.argmin(ok)) if not bool(ok.all()) else values.size
    if end < 2:
        end = values.size
    s, v = steps[:end][ok[:end]], values[:end][ok[:end]]
    if v.size < 2:
        raise InsufficientDataError("fewer than 2 finite train-loss points before the NaN")
    return s, v


def _steady_descent(late: float | None, mid: float | None, late_z: float | None) -> bool:
    """The last quarter falls at no less than half the middle half's pace per quarter.

    A curve that converges slows down: its last quarter falls far less than its middle did.
    A smaller fall that keeps the pace (a 10-step smoke run losing 4% in its last quarter after
    7% in its middle half) is a run cut off mid-descent, not one that levelled off.
    """
    if late is None or mid is None or late_z is None:
        return False
    return late <= -0.03 and late_z >= 2.5 and mid < 0 and late <= 0.5 * mid / 2


def _phase_change(
    progress: np.ndarray, t: np.ndarray, phase: str, scale: LossScale
) -> float | None:
    """Fractional change of the robust trend over one phase of the run (early, mid, late)."""
    n = t.size
    mask = phase_mask(progress, phase)
    if int(mask.sum()) < 3 <= n:
        # a sparse log: the phase is the 3 logs nearest to it (documented in features)
        mask = np.zeros(n, dtype=bool)
        if phase == "early":
            mask[:3] = True
        elif phase == "late":
            mask[-3:] = True
        else:
            mid = n // 2
            mask[max(0, mid - 1) : max(0, mid - 1) + 3] = True
    try:
        return fitted_change(progress, t, mask, scale)
    except InsufficientDataError:
        return None


def _learning_stop(
    ctx: FeatureContext, smooth: np.ndarray, tail_t: float, noise: float, w: int, scale: LossScale
) -> int:
    """First index from which the smoothed curve stays within tolerance of its final level."""
    # the edges of a centred window hold only half the points: allow for their extra variance
    tol = max(ctx.settings.flat_tolerance, 4.0 * noise / max(1.0, np.sqrt(w / 2)))
    if scale.log:
        tol = float(np.log1p(tol))
    not_within = np.flatnonzero(~(np.abs(smooth - tail_t) <= tol))
    stop_i = int(not_within[-1] + 1) if not_within.size else 0
    return min(stop_i, smooth.size - 1)


def _late_drop_z(
    change_late: float | None, noise: float, late: np.ndarray, scale: LossScale
) -> float | None:
    """The fall over the last quarter in standard errors of the per-log noise."""
    if change_late is None:
        return None
    n_late = max(3, int(late.sum()))
    drop = -float(np.log1p(change_late)) if scale.log else -change_late
    return float(drop / max(noise * np.sqrt(2.0 / n_late), 1e-3 if scale.log else 1e-12))


def _quarter_trend(
    v: np.ndarray,
) -> tuple[float | None, float | None, float | None, float | None, float | None]:
    """Per quarter of the logs: the signed relative change from the first quarter's mean loss to
    the last quarter's; the spread of the later three quarters' means in standard errors of a
    quarter's mean; the last minus the first quarter's mean in standard errors of that
    difference (absolute, so a loss crossing zero is judged too); the first and last quarters'
    means. Per-log noise from first differences, robust. Nones under 12 logs."""
    q = v.size // 4
    if q < 3:
        return None, None, None, None, None
    means = [float(np.mean(part)) for part in (v[:q], v[q : 2 * q], v[-2 * q : -q], v[-q:])]
    first, last = means[0], means[-1]
    sigma = mad_sigma(np.diff(v)) / np.sqrt(2.0)
    shift_se = sigma * np.sqrt(2.0 / q)
    shift_z = (last - first) / shift_se if shift_se > 0 else None
    if first == 0:
        return None, None, shift_z, first, last
    se = max(sigma / np.sqrt(q), 1e-12 * abs(first))
    later = means[1:]
    return (last - first) / abs(first), (max(later) - min(later)) / se, shift_z, first, last


def _smoothed_drop(smooth: np.ndarray, k: int) -> float:
    """|start - end| of the smoothed curve (medians of its first and last tenth)."""
    return abs(float(np.nanmedian(smooth[:k])) - float(np.nanmedian(smooth[-k:])))


def _progress_lost(v: np.ndarray, k_head: int, k_tail: int, smin_raw: float) -> float | None:
    head = float(np.median(v[:k_head]))
    tail = float(np.median(v[-k_tail:]))
    smin = min(smin_raw, tail, head)
    if head - smin <= 0:
        return None
    return (tail - smin) / (head - smin)


@feature_group(
    "quarters",
    requires=["train/loss"],
    features={
        "quarters.last_rise": "median of the last quarter of the finite train-loss logs over the "
        "lowest median of the three quarters before it, minus 1: a rise that coarse medians "
        "still show (on a noisy log a smoothed minimum can be a dip of the noise)",
    },
)
def _quarters(ctx: FeatureContext) -> dict[str, Value]:
    _, values, _ = train_loss(ctx)
    v = values[np.isfinite(values)]
    if v.size < 8:
        raise InsufficientDataError(f"only {v.size} finite train-loss points (quarters need 8)")
    meds = [float(np.median(q)) for q in np.array_split(v, 4)]
    low = min(meds[:3])
    return {"quarters.last_rise": meds[3] / low - 1.0 if low > 0 else None}


#: A log at least this multiple of the one before it is a step of a blow-up.
_BLOWUP_STEP = 2.0


@feature_group(
    "blowup",
    requires=["train/loss"],
    features={
        "loss.blowup_logs": "how many of the last finite train-loss logs each were at least "
        f"{_BLOWUP_STEP:g}x the one before: an explosion in progress (the robust tail and "
        "smoothed curve do not move until it is half the tail); None under 2",
        "loss.blowup_factor": "the last finite train loss over the highest one before that "
        "climb began (None as for loss.blowup_logs)",
    },
)
def _blowup(ctx: FeatureContext) -> dict[str, Value]:
    steps, values, _ = train_loss(ctx)
    _, v = _finite_prefix(steps, values)
    n = 0
    while n + 1 < v.size and v[-n - 2] > 0 and v[-n - 1] >= _BLOWUP_STEP * v[-n - 2]:
        n += 1
    before = v[: v.size - n]
    if n < 2 or before.size == 0 or float(before.max()) <= 0:
        return {"loss.blowup_logs": None, "loss.blowup_factor": None}
    return {"loss.blowup_logs": n, "loss.blowup_factor": float(v[-1] / before.max())}


#: The per-epoch mean of the train loss a loop logs beside its per-step curve: Lightning's
#: ``train_loss_epoch`` (``on_epoch=True``), a loop's ``epoch_loss``; not a held-out split's.
_EPOCH_MEAN = re.compile(r"^train/(?:(?:.*[/_])?train_)?(?:loss_epoch|epoch_loss)$")


def epoch_means(ctx: FeatureContext) -> tuple[np.ndarray, np.ndarray] | None:
    """The finite per-epoch means of the train loss, when the run logs exactly one such series
    beside a per-step curve with more logs than it (at least 3 epochs), else None."""
    names = [k for k in ctx.run.metrics if _EPOCH_MEAN.match(k)]
    if len(names) != 1:
        return None
    es, ev = ctx.finite_series(names[0])
    _, lv = ctx.finite_series("train/loss")
    if es.size < 3 or es.size >= lv.size or lv.size == 0:
        return None
    return es, ev


@feature_group(
    "epoch_means",
    requires=["train/loss"],
    features={
        "loss.epoch_mean_rise": "the last per-epoch mean of the train loss (Lightning's "
        "train_loss_epoch, a loop's epoch_loss) over its lowest per-epoch mean, minus 1; None "
        "when the run logs no such means. Each mean averages every batch of its epoch, so it "
        "tells a climbing loss from single-batch logs that scatter",
    },
)
def _epoch_means(ctx: FeatureContext) -> dict[str, Value]:
    means = epoch_means(ctx)
    if means is None:
        return {"loss.epoch_mean_rise": None}
    low, last = float(means[1].min()), float(means[1][-1])
    return {"loss.epoch_mean_rise": last / low - 1.0 if low > 0 else None}


@feature_group(
    "nan",
    requires=["train/loss"],
    features={
        "nan.first_step": "first step with a non-finite loss (train, hidden, or eval); None if "
        "the run stayed finite",
        "nan.source": "where it showed: train/loss, hidden (loss logged as 0.0 beside a "
        "non-finite grad norm) or eval/loss",
        "nan.at_start": "the very first logged loss was already non-finite",
        "nan.finite_before": "number of finite train-loss logs before the first non-finite one",
        "nan.progress": "fraction of the logged steps before the first non-finite value",
        "nan.count": "number of non-finite train-loss logs",
        "nan.persisted": "every train-loss log after the onset was non-finite too",
        "nan.grad_growth": "largest grad norm in the 3 logs before the onset / the median grad "
        "norm before them",
        "nan.grad_growth_step": "step where the grad norm started climbing before the onset",
        "nan.loss_rise": "fractional rise of the last finite losses above the smoothed minimum "
        "before the onset",
    },
)
def _nan(ctx: FeatureContext) -> dict[str, Value]:
    steps, values, hidden = train_loss(ctx)
    bad = ~np.isfinite(values)
    candidates: list[tuple[int, str]] = []
    if bool(bad.any()):
        i = int(np.argmax(bad))
        candidates.append((int(steps[i]), "hidden" if bool(hidden[i]) else "train/loss"))
    ev = ctx.run.get("eval/loss")
    if ev is not None and not bool(np.all(np.isfinite(ev.values))):
        candidates.append((int(ev.steps[int(np.argmax(~np.isfinite(ev.values)))]), "eval/loss"))
    none: dict[str, Value] = {
        "nan.first_step": None,
        "nan.source": None,
        "nan.at_start": False,
        "nan.finite_before": None,
        "nan.progress": None,
        "nan.count": 0,
        "nan.persisted": None,
        "nan.grad_growth": None,
        "nan.grad_growth_step": None,
        "nan.loss_rise": None,
    }
    if not candidates:
        return none
    onset, source = min(candidates)
    before = steps < onset
    finite_before = int(np.isfinite(values[before]).sum())
    after = values[steps >= onset]
    last = ctx.run.last_step or onset
    first_step = int(steps[0])
    out = dict(none)
    out.update(
        {
            "nan.first_step": onset,
            "nan.source": source,
            "nan.at_start": finite_before == 0,
            "nan.finite_before": finite_before,
            "nan.progress": (onset - first_step) / max(1, last - first_step),
            "nan.count": int(bad.sum()),
            "nan.persisted": bool(after.size > 0 and not bool(np.isfinite(after).any())),
        }
    )
    grad = ctx.run.get("train/grad_norm")
    if grad is not None:
        g_ok = (grad.steps < onset) & np.isfinite(grad.values)
        g = grad.values[g_ok]
        gs = grad.steps[g_ok]
        if g.size >= 4:
            recent = g[-3:]
            base = float(np.median(g[:-3]))
            if base > 0:
                out["nan.grad_growth"] = float(recent.max() / base)
                above = np.flatnonzero(g <= 2 * base)
                start = int(above[-1] + 1) if above.size else 0
                out["nan.grad_growth_step"] = int(gs[min(start, gs.size - 1)])
    v = values[before]
    v = v[np.isfinite(v)]
    if v.size >= 4:
        scale = LossScale(v)
        t = scale.forward(v)
        smooth = rolling_median(t, smoothing_window(v.size))
        # the last finite loss against the best level before it (0 when it was the best)
        best = min(float(np.nanmin(smooth)), float(t[-1]))
        out["nan.loss_rise"] = scale.ratio(float(t[-1]) - best)
    return out


@feature_group(
    "spike",
    requires=["train/loss"],
    features={
        "spike.count": "number of loss spikes after warmup (robust, scale-free)",
        "spike.step": "step of the largest spike",
        "spike.ratio": "largest spike / its local baseline",
        "spike.value": "loss at the largest spike",
        "spike.baseline": "local baseline loss before the largest spike",
        "spike.recovered": "the loss came back to its baseline after the largest spike",
        "spike.recovery_steps": "steps the loss took to come back",
        "spike.unrecovered": "number of spikes after which the loss never came back",
        "spike.fast_count": "spikes the loss recovered from within a few logs",
        "spike.slow_count": "spikes the loss recovered from, but only after many logs",
        "spike.recovery_logs": "logs the loss took to come back after the largest spike",
        "spike.fast_horizon": "logs within which a recovery counts as fast",
        "spike.height_vs_range": "(spike - baseline) / (first losses - lowest loss): how big the "
        "spike is against the whole descent",
        "spike.noise_z": "the largest spike's height over its baseline in units of the run's "
        "per-log noise (from first differences, as loss.noise): under 4, a noisy log's "
        "ordinary tail",
        "spike.noise_z_over_chance": "spike.noise_z less ln(number of logs): the largest of n "
        "draws of a heavy-tailed (Laplace) per-log noise reaches about ln(n) by chance, so a long "
        "noisy log's tallest blip is not a spike",
        "spike.first_step": "step of the first spike",
        "spike.window_start_step": "first step of the logging window holding the largest spike",
        "spike.example_lo": "first training example index of that window (when batch size is "
        "known)",
        "spike.example_hi": "one past its last example index",
    },
)
def _spikes(ctx: FeatureContext) -> dict[str, Value]:
    steps, values, _ = train_loss(ctx)
    ok = np.isfinite(values)
    s, v = steps[ok], values[ok]
    if v.size < 8:
        raise InsufficientDataError(f"only {v.size} finite train-loss points (spikes need 8)")
    scale = LossScale(v)
    t = scale.forward(v)
    n = t.size
    w = int(min(25, max(5, n // 20)))
    base = _trailing_baseline(t, w)
    centered = rolling_median(t, smoothing_window(n))
    sigma = max(mad_sigma(t - centered), 1e-12)
    min_jump = (
        float(np.log(ctx.settings.spike_min_ratio))
        if scale.log
        else ctx.settings.spike_min_ratio - 1.0
    )
    thresh = max(ctx.settings.spike_z * sigma, min_jump)
    warm = ctx.get("run.warmup_end_step")
    warm_i = int(np.searchsorted(s, int(warm or 0), side="right"))
    start = max(warm_i, 3, min(w, n // 10))
    resid = t - base
    cand = np.zeros(n, dtype=bool)
    cand[start:] = resid[start:] > thresh
    if not bool(cand.any()):
        return dict(_NO_SPIKE)
    events = _spike_events(t, base, resid, cand, max(2 * sigma, thresh / 2))
    horizon = max(3, n // 20)
    r, peak, b, rec = events[0]
    unrecovered = sum(1 for e in events if e[3] is None)
    fast = sum(1 for e in events if e[3] is not None and e[3] - e[1] <= horizon)
    logging_window = int(s[peak] - s[peak - 1]) if peak > 0 else 1
    window_start = int(s[peak]) - logging_window + 1
    lo, hi = _example_range(ctx, window_start, int(s[peak]))
    per_log = mad_sigma(np.diff(t)) / np.sqrt(2.0) if n > 2 else 0.0
    return {
        "spike.noise_z": float(r / per_log) if per_log > 0 else None,
        "spike.noise_z_over_chance": float(r / per_log - np.log(n)) if per_log > 0 else None,
        "spike.count": len(events),
        "spike.step": int(s[peak]),
        "spike.ratio": float(np.exp(r)) if scale.log else 1.0 + r,
        "spike.value": float(v[peak]),
        "spike.baseline": scale.inverse(b),
        "spike.recovered": rec is not None,
        "spike.recovery_steps": None if rec is None else int(s[rec] - s[peak]),
        "spike.unrecovered": unrecovered,
        "spike.fast_count": fast,
        "spike.slow_count": len(events) - fast - unrecovered,
        "spike.recovery_logs": None if rec is None else int(rec - peak),
        "spike.fast_horizon": horizon,
        "spike.height_vs_range": _height(v, peak, scale.inverse(b)),
        "spike.first_step": int(s[min(e[1] for e in events)]),
        "spike.window_start_step": window_start,
        "spike.example_lo": lo,
        "spike.example_hi": hi,
    }


#: What the spike group says of a run without a spike.
_NO_SPIKE: dict[str, Value] = {
    "spike.noise_z": None,
    "spike.noise_z_over_chance": None,
    "spike.count": 0,
    "spike.step": None,
    "spike.ratio": None,
    "spike.value": None,
    "spike.baseline": None,
    "spike.recovered": None,
    "spike.recovery_steps": None,
    "spike.unrecovered": 0,
    "spike.fast_count": 0,
    "spike.slow_count": 0,
    "spike.recovery_logs": None,
    "spike.fast_horizon": None,
    "spike.height_vs_range": None,
    "spike.first_step": None,
    "spike.window_start_step": None,
    "spike.example_lo": None,
    "spike.example_hi": None,
}


def _trailing_baseline(t: np.ndarray, w: int) -> np.ndarray:
    """Per log, the median of the previous ``w`` logs (of all logs before it, at the start)."""
    n = t.size
    base = np.empty(n, dtype=np.float64)
    base[0] = np.nan
    base[1:w] = prefix_medians(t, 1, w - 1)
    base[w:] = sliding_medians(t[:-1], w)
    return base


def _spike_events(
    t: np.ndarray, base: np.ndarray, resid: np.ndarray, cand: np.ndarray, back_within: float
) -> list[tuple[float, int, float, int | None]]:
    """Consecutive spike logs grouped into events, highest first: (height above the baseline,
    index of the peak, baseline there, index where the loss came back within ``back_within``
    of that baseline or None)."""
    idx = np.flatnonzero(cand)
    groups = np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1)
    events = []
    for g in groups:
        peak = int(g[np.argmax(resid[g])])
        b = float(base[peak])
        back = np.flatnonzero(t[peak + 1 :] <= b + back_within)
        rec = int(back[0] + peak + 1) if back.size else None
        events.append((float(resid[peak]), peak, b, rec))
    events.sort(key=lambda e: -e[0])
    return events


def _example_range(ctx: FeatureContext, window_start: int, step: int) -> tuple[int | None, ...]:
    """The indices of the training examples the Trainer fed over the logged window (with
    sequential sampling), when the batch size is known."""
    bs = ctx.get("run.batch_size")
    accum = ctx.get("run.grad_accum")
    if not (isinstance(bs, int) and bs > 0):
        return None, None
    per_step = bs * (accum if isinstance(accum, int) else 1)
    return (window_start - 1) * per_step, step * per_step


def _height(v: np.ndarray, peak: int, baseline: float) -> float | None:
    head = float(np.median(v[: max(1, min(3, v.size // 10))]))
    span = head - float(v.min())
    if span <= 0:
        return None
    return (float(v[peak]) - baseline) / span
