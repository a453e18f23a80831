"""Curve-shape features: oscillation, drops at epoch boundaries, level shifts at resumes."""

from __future__ import annotations

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features._stats import LossScale, mad_sigma, rolling_median
from curvediag.features.loss import train_loss
from curvediag.features.registry import FeatureContext, Value, feature_group


def _finite_before_nan(ctx: FeatureContext) -> tuple[np.ndarray, np.ndarray]:
    steps, values, _ = train_loss(ctx)
    ok = np.isfinite(values)
    end = int(np.argmin(ok)) if not bool(ok.all()) else values.size
    return steps[:end][ok[:end]], values[:end][ok[:end]]


#: Autocorrelations are summed lag by lag while ``points x lags`` stays under this; longer
#: series use the FFT (the same values up to float rounding, O(n log n)).
ACF_DIRECT_LIMIT = 20_000_000


def _autocorrelation(r: np.ndarray, max_lag: int) -> np.ndarray:
    """``sum(r[:-k] * r[k:])`` for ``k = 1 .. max_lag``."""
    n = r.size
    if n * max_lag <= ACF_DIRECT_LIMIT:
        return np.array([float(np.dot(r[:-k], r[k:])) for k in range(1, max_lag + 1)])
    size = 1 << int(2 * n - 1).bit_length()  # zero-padded: no circular wrap-around
    spec = np.fft.rfft(r, size)
    full = np.fft.irfft(spec.real**2 + spec.imag**2, size)
    return np.asarray(full[1 : max_lag + 1], dtype=np.float64)


def _acf_peak(r: np.ndarray, max_lag: int) -> tuple[float, int | None]:
    """Highest autocorrelation past the first zero crossing, and its lag (None if none)."""
    denom = float(np.dot(r, r))
    if denom <= 0 or max_lag < 2:
        return 0.0, None
    acf = _autocorrelation(r, max_lag) / denom
    below = np.flatnonzero(acf <= 0)
    if not below.size or int(below[0]) + 1 >= acf.size:
        return 0.0, None
    start = int(below[0])
    j = start + int(np.argmax(acf[start:]))
    return float(acf[j]), j + 1


@feature_group(
    "osc",
    requires=["train/loss"],
    features={
        "osc.amplitude": "robust amplitude of the loss around its slow trend after warmup "
        "(fractional)",
        "osc.periodicity": "strongest autocorrelation of that residual at a lag past its first "
        "zero crossing (1 = perfectly periodic, ~0 = noise)",
        "osc.period_logs": "lag of that autocorrelation peak, in logs",
        "osc.period_steps": "the same in steps",
        "osc.cycles": "number of full periods in the analysed stretch",
    },
)
def _osc(ctx: FeatureContext) -> dict[str, Value]:
    s, v = _finite_before_nan(ctx)
    warm = ctx.get("run.warmup_end_step")
    keep = s > int(warm or 0)
    s, v = s[keep], v[keep]
    if v.size < 24:
        raise InsufficientDataError(f"only {v.size} train-loss points after warmup (need 24)")
    scale = LossScale(v)
    t = scale.forward(v)
    trend = rolling_median(t, max(9, (v.size // 4) | 1))
    raw = t - trend
    # per-log noise hides a long period, a 3-point mean hides a short one: keep the stronger
    smoothed = np.convolve(raw, np.ones(3) / 3.0, mode="same")
    peaks = [_acf_peak(x - np.mean(x), v.size // 3) for x in (raw, smoothed)]
    peak_acf, lag = max(peaks, key=lambda p: p[0])
    r = raw - np.mean(raw)
    denom = float(np.dot(r, r))
    if denom <= 0:
        return {
            "osc.amplitude": 0.0,
            "osc.periodicity": 0.0,
            "osc.period_logs": None,
            "osc.period_steps": None,
            "osc.cycles": 0.0,
        }
    amp = scale.ratio(2.0 * 1.4826 * float(np.median(np.abs(r)))) if r.size else 0.0
    step_gap = float(np.median(np.diff(s))) if s.size > 1 else 1.0
    return {
        "osc.amplitude": amp,
        "osc.periodicity": peak_acf,
        "osc.period_logs": lag,
        "osc.period_steps": None if lag is None else round(lag * step_gap),
        "osc.cycles": 0.0 if lag is None else float(v.size / lag),
    }


#: Logs an alternation is judged over, after the first tenth of the run.
_MIN_ALTERNATING_LOGS = 12


@feature_group(
    "alt",
    requires=["train/loss"],
    features={
        "alt.logs": "train-loss logs judged: the finite positive ones after the first tenth of "
        "the logs (at least one log left out: the first fall is not a swing)",
        "alt.share": "share of those logs' successive changes that reverse the one before (1 = "
        "up, down, up, down on every log; about 2/3 for noise)",
        "alt.swing": "median size of a change between successive logs, as a fraction of the "
        "loss (from the changes of its logarithm)",
        "alt.high": "median of the logs above both neighbours",
        "alt.low": "median of the logs below both neighbours",
        "alt.start_step": "step of the first log judged",
    },
)
def _alt(ctx: FeatureContext) -> dict[str, Value]:
    s, v = _finite_before_nan(ctx)
    keep = v > 0
    s, v = s[keep], v[keep]
    skip = max(1, v.size // 10)
    s, v = s[skip:], v[skip:]
    if v.size < _MIN_ALTERNATING_LOGS:
        raise InsufficientDataError(
            f"only {v.size} positive train-loss logs after the first tenth "
            f"(need {_MIN_ALTERNATING_LOGS})"
        )
    t = np.log(v)
    d = np.diff(t)
    signs = np.sign(d)
    flips = float(np.mean(signs[1:] * signs[:-1] < 0))
    inner = v[1:-1]
    peak = (inner > v[:-2]) & (inner > v[2:])
    trough = (inner < v[:-2]) & (inner < v[2:])
    return {
        "alt.logs": int(v.size),
        "alt.share": flips,
        "alt.swing": float(np.expm1(np.median(np.abs(d)))),
        "alt.high": float(np.median(inner[peak])) if peak.any() else None,
        "alt.low": float(np.median(inner[trough])) if trough.any() else None,
        "alt.start_step": int(s[0]),
    }


@feature_group(
    "epoch",
    requires=["train/loss", "train/epoch"],
    features={
        "epoch.boundaries": "number of epoch boundaries inside the logged train loss",
        "epoch.boundary_drop": "median fractional drop of the loss across an epoch boundary; "
        "None (like the drops below) when fewer than two changes within an epoch stand for each "
        "boundary (a log once or twice per epoch)",
        "epoch.boundary_drop_z": "that drop in units of the typical change between logs",
        "epoch.first_boundary_step": "step of the first epoch boundary",
        "epoch.window_drop": "median fractional drop between the logs just before and just "
        "after an epoch boundary (window medians: robust to per-step noise)",
        "epoch.window_excess": "that drop minus the same windowed drop in the middle of epochs "
        "(what the ordinary downward trend gives), in log units",
        "epoch.window_excess_z": "that excess in standard errors of the window medians",
        "epoch.window_steady": "share of the boundaries whose own windowed drop beats the "
        "mid-epoch drop by half the median excess or more: a staircase steps down at every "
        "epoch, a one-off shift or spike at one boundary does not",
    },
)
def _epoch(ctx: FeatureContext) -> dict[str, Value]:
    s, v = _finite_before_nan(ctx)
    es, ev = ctx.series("train/epoch")
    ok = np.isfinite(ev)
    es, ev = es[ok], ev[ok]
    if s.size < 10 or es.size < 2:
        raise InsufficientDataError("too few train-loss or epoch points")
    epoch_at = np.interp(s, es, ev)
    # a boundary between logs i-1 and i when log i is the first of a new epoch
    # a log at epoch 1.0 is the last of epoch 1; one at 0.0 (a rounded epoch, as W&B logs it)
    # is in the first epoch, not an epoch of its own before it
    whole = np.maximum(np.ceil(epoch_at - 1e-9), 1.0)
    idx = np.flatnonzero(np.diff(whole) > 0) + 1
    idx = idx[(idx >= 2) & (idx < s.size)]
    if idx.size == 0:
        return {
            "epoch.window_drop": None,
            "epoch.window_excess": None,
            "epoch.window_excess_z": None,
            "epoch.window_steady": None,
            "epoch.boundaries": 0,
            "epoch.boundary_drop": None,
            "epoch.boundary_drop_z": None,
            "epoch.first_boundary_step": None,
        }
    scale = LossScale(v)
    t = scale.forward(v)
    d = np.diff(t)
    crossing = np.zeros(d.size, dtype=bool)
    crossing[idx - 1] = True
    if int((~crossing).sum()) < 2 * idx.size:
        # one or two logs per epoch: nearly every change crosses a boundary, and there is no
        # change within an epoch to hold the boundary drops against
        return {
            "epoch.window_drop": None,
            "epoch.window_excess": None,
            "epoch.window_excess_z": None,
            "epoch.window_steady": None,
            "epoch.boundaries": int(idx.size),
            "epoch.boundary_drop": None,
            "epoch.boundary_drop_z": None,
            "epoch.first_boundary_step": int(s[idx[0]]),
        }
    typical = max(mad_sigma(d[~crossing]), 1e-9) if bool((~crossing).any()) else 1e-9
    drops = -d[idx - 1]
    med = float(np.median(drops))
    win = _window_drops(t, idx, typical / np.sqrt(2.0))
    return {
        **win,
        "epoch.boundaries": int(idx.size),
        "epoch.boundary_drop": -scale.ratio(-med),
        "epoch.boundary_drop_z": med / typical,
        "epoch.first_boundary_step": int(s[idx[0]]),
    }


def _window_drops(t: np.ndarray, idx: np.ndarray, sigma: float) -> dict[str, Value]:
    """Drops across boundaries measured between window medians, against mid-epoch drops.

    The window is a quarter of the shortest epoch (1-50 logs), so a staircase shows through
    per-step noise that hides it between single logs.
    """
    edges = np.concatenate([[0], idx, [t.size]])
    k = int(min(50, max(1, int(np.diff(edges).min()) // 4)))

    # The first log of an epoch averages steps on both sides of the boundary (the Trainer logs
    # the mean since the last log): when logs are sparse, the window after starts one log later.
    gap = 1 if k < 4 else 0

    def drop_at(i: int) -> float:
        return float(np.median(t[max(0, i - k) : i]) - np.median(t[i + gap : i + gap + k]))

    def fits(i: int) -> bool:
        return i - k >= 0 and i + gap + k <= t.size

    at = np.array([drop_at(int(i)) for i in idx if fits(int(i))])
    mids = (edges[:-1] + edges[1:]) // 2
    mid = np.array([drop_at(int(i)) for i in mids if fits(int(i)) and i > 0])
    if at.size == 0:
        return {
            "epoch.window_drop": None,
            "epoch.window_excess": None,
            "epoch.window_excess_z": None,
            "epoch.window_steady": None,
        }
    base = float(np.median(mid)) if mid.size else 0.0
    excess = float(np.median(at)) - base
    # standard error of a median difference; a loss logged to a few digits (or stuck at a floor)
    # has almost no measured scatter, so it is never taken below 0.1% of the level
    se = max(sigma * 1.2533 * np.sqrt(2.0 / k), 1e-3)
    steady = float(np.mean(at - base >= 0.5 * excess)) if excess > 0 else 0.0
    return {
        "epoch.window_drop": float(-np.expm1(-float(np.median(at)))),
        "epoch.window_excess": excess,
        "epoch.window_excess_z": excess / se,
        "epoch.window_steady": steady,
    }


@feature_group(
    "resume",
    requires=["train/loss"],
    features={
        "resume.count": "number of restarts (steps logged again after a resume)",
        "resume.step": "restart step with the largest level shift",
        "resume.shift": "fractional change of the loss level across that restart (disjoint "
        "windows before and after)",
        "resume.shift_z": "that shift in standard errors (noise of the window medians)",
    },
)
def _resume(ctx: FeatureContext) -> dict[str, Value]:
    restarts = ctx.run.meta.resumed_at_steps
    out: dict[str, Value] = {
        "resume.count": len(restarts),
        "resume.step": None,
        "resume.shift": None,
        "resume.shift_z": None,
    }
    if not restarts:
        return out
    s, v = _finite_before_nan(ctx)
    if v.size < 8:
        raise InsufficientDataError("too few train-loss points around the restart")
    scale = LossScale(v)
    t = scale.forward(v)
    noise = max(mad_sigma(np.diff(t)) / np.sqrt(2.0), 1e-9)
    best: tuple[float, int, float] | None = None
    for r in restarts:
        i = int(np.searchsorted(s, r))
        w = max(3, min(i, s.size - i, 20))
        if i < 3 or s.size - i < 3:
            continue
        before = float(np.median(t[max(0, i - w) : i]))
        after = float(np.median(t[i : i + w]))
        shift = after - before
        # standard error of the difference of two medians of w noisy points
        se = 1.2533 * noise * np.sqrt(2.0 / w)
        if best is None or abs(shift) > abs(best[0]):
            best = (shift, r, shift / se)
    if best is not None:
        out.update(
            {
                "resume.step": best[1],
                "resume.shift": scale.ratio(best[0]),
                "resume.shift_z": best[2],
            }
        )
    return out


@feature_group(
    "warmupend",
    requires=["train/loss", "train/learning_rate"],
    features={
        "warmupend.step": "step at which the learning rate reached its peak after warmup",
        "warmupend.rise": "largest fractional rise of the loss just after warmup ended, over its "
        "level at the end of warmup",
        "warmupend.rise_z": "that rise in units of the loss noise",
        "warmupend.peak_step": "step of that highest loss",
    },
)
def _warmup_end(ctx: FeatureContext) -> dict[str, Value]:
    has = ctx.get("lr.has_warmup")
    end = ctx.get("lr.warmup_end_step")
    out: dict[str, Value] = {
        "warmupend.step": None,
        "warmupend.rise": None,
        "warmupend.rise_z": None,
        "warmupend.peak_step": None,
    }
    if has is not True or not isinstance(end, int):
        return out
    s, v = _finite_before_nan(ctx)
    i = int(np.searchsorted(s, end, side="right"))
    w = max(5, s.size // 10)
    if i < 3 or i + 2 > s.size:
        raise InsufficientDataError("too few train-loss logs around the end of warmup")
    scale = LossScale(v)
    t = scale.forward(v)
    noise = max(mad_sigma(np.diff(t)) / np.sqrt(2.0), 1e-9)
    before = float(np.median(t[max(0, i - 3) : i]))
    window = t[i : i + w]
    j = int(np.argmax(window))
    rise = float(window[j] - before)
    return {
        "warmupend.step": end,
        "warmupend.rise": scale.ratio(rise),
        "warmupend.rise_z": rise / noise,
        "warmupend.peak_step": int(s[i + j]),
    }
