"""Change points of the train-loss curve, as segments with a level and a slope.

Long runs are binned to at most :data:`MAX_POINTS` points (medians of equal-count bins, so
spikes do not move the segmentation, and the cost stays bounded for any run length). A
penalised piecewise-constant fit of the log-loss (:func:`optimal_partition`, what
``ruptures.KernelCPD(kernel="linear")`` computes) proposes candidate level shifts, with a
penalty from the curve's own noise. On a decaying curve it cuts the smooth decay into a
staircase, so a candidate is kept only if the curve really jumps there: lines fitted to the
``min_size`` bins on either side, extrapolated to the boundary, must differ by at least
:data:`MIN_SHIFT` (~3%) and by :data:`JUMP_Z` standard errors of that difference (noise from
second differences of the bins, which a smooth trend does not inflate). A smooth exponential or
power-law decay therefore gets no change point; a level shift, a restart at a higher loss or a
sudden drop keeps one. Indices are mapped back to steps."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features._stats import LossScale, binned_medians, mad_sigma, robust_slope
from curvediag.features.loss import train_loss
from curvediag.features.registry import FeatureContext, Value, feature_group

MAX_POINTS = 200
#: Smallest level jump (log space) kept as a change point: log(1.03), a 3% step.
MIN_SHIFT = math.log(1.03)
#: ... and it must be this many standard errors of the extrapolated difference.
JUMP_Z = 5.0


@dataclass(frozen=True)
class Segment:
    """One stretch of the curve between change points (transformed, i.e. log, space)."""

    start_step: int
    end_step: int
    level: float
    change: float  # fractional change of the trend across the segment
    start_level: float = math.nan  # local level at its first step (line fit, extrapolated)
    end_level: float = math.nan  # local level at its last step


class _Lines:
    """Least-squares lines through any window ``y[a:e]`` of a series, from cumulative sums."""

    def __init__(self, y: np.ndarray) -> None:
        i = np.arange(y.size, dtype=np.float64)
        zero = np.zeros(1)
        self.c_y = np.concatenate([zero, np.cumsum(y)])
        self.c_iy = np.concatenate([zero, np.cumsum(i * y)])
        self.c_i = np.concatenate([zero, np.cumsum(i)])
        self.c_ii = np.concatenate([zero, np.cumsum(i * i)])

    def at(self, a: np.ndarray, e: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Value at index ``x`` of the line fitted to ``y[a:e]`` (flat for a single point)."""
        n = (e - a).astype(np.float64)
        sy = self.c_y[e] - self.c_y[a]
        si = self.c_i[e] - self.c_i[a]
        sii = self.c_ii[e] - self.c_ii[a]
        siy = self.c_iy[e] - self.c_iy[a]
        den = n * sii - si * si
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(den > 0, (n * siy - si * sy) / np.where(den > 0, den, 1.0), 0.0)
        out: np.ndarray = sy / n + slope * (x - si / n)
        return out


def segments(
    steps: np.ndarray, t: np.ndarray, scale: LossScale, penalty: float = 12.0
) -> list[Segment]:
    """Segment a transformed loss curve (see the module docstring).

    Raises:
        InsufficientDataError: Fewer than 12 points.
    """
    if t.size < 12:
        raise InsufficientDataError(f"only {t.size} points (change points need 12)")
    with np.errstate(all="ignore"):
        finite = t[np.isfinite(t)]
        if finite.size and not math.isfinite(float(np.ptp(finite)) ** 2):
            raise InsufficientDataError("values too large for change-point detection")
    bins = min(MAX_POINTS, t.size)
    x, y = binned_medians(steps.astype(np.float64), t, bins=bins)
    n = y.size
    sigma = mad_sigma(np.diff(y)) / math.sqrt(2.0)
    spread = float(np.ptp(y))
    sigma = max(sigma, 1e-3 * spread, 1e-9)
    min_size = max(3, n // 20)
    # ``penalty`` (FeatureSettings.changepoint_penalty) x noise variance x log(points)
    pen = penalty * sigma**2 * math.log(n)
    candidates = optimal_partition(y, min_size, pen)
    lines = _Lines(y)
    bounds = [0, *_real_jumps(y, lines, candidates, min_size), n]
    segs = []
    for a, b in itertools.pairwise(bounds):
        if b <= a:
            continue
        xs, ys = x[a:b], y[a:b]
        change = 0.0
        if b - a >= 3 and xs[-1] > xs[0]:
            slope = robust_slope(xs, ys)
            change = scale.ratio(slope * float(xs[-1] - xs[0]))
        m = min(min_size, b - a)
        segs.append(
            Segment(
                int(xs[0]),
                int(xs[-1]),
                float(np.median(ys)),
                change,
                _clamped_edge(y, lines, a, a + m, a - 0.5),
                _clamped_edge(y, lines, b - m, b, b - 0.5),
            )
        )
    return segs


def optimal_partition(y: np.ndarray, min_size: int, pen: float) -> list[int]:
    """Boundaries of the piecewise-constant fit of ``y`` that minimises the squared error plus
    ``pen`` per segment, segments at least ``min_size`` long (exact dynamic programming; what
    ``ruptures.KernelCPD(kernel="linear", jump=1).predict(pen=...)`` computes, for the few
    hundred points it is given here, without importing ruptures and scipy.stats).
    """
    n = y.size
    if n < 2 * min_size:
        return []
    c1 = np.concatenate([[0.0], np.cumsum(y)])
    c2 = np.concatenate([[0.0], np.cumsum(y * y)])
    s_idx = np.arange(n + 1)[:, None]
    t_idx = np.arange(n + 1)[None, :]
    length = np.maximum(t_idx - s_idx, 1)
    # cost[s, t]: squared error of y[s:t] around its mean (+ the penalty); inf where too short
    cost = np.maximum((c2[t_idx] - c2[s_idx]) - (c1[t_idx] - c1[s_idx]) ** 2 / length, 0.0) + pen
    cost[t_idx - s_idx < min_size] = np.inf
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    prev = np.zeros(n + 1, dtype=np.int64)
    for t in range(min_size, n + 1):
        total = best[: t - min_size + 1] + cost[: t - min_size + 1, t]
        k = int(np.argmin(total))
        best[t], prev[t] = total[k], k
    bounds = []
    t = n
    while t > 0:
        t = int(prev[t])
        if t > 0:
            bounds.append(t)
    return sorted(bounds)


def _clamped(
    y: np.ndarray, lines: _Lines, a: np.ndarray, e: np.ndarray, x: np.ndarray
) -> np.ndarray:
    """The line through each window ``y[a:e]`` at ``x``, kept inside the window's own range: a
    line through a steep initial drop, extrapolated half a bin, would otherwise put the level
    far below every value the curve took there. O(total window length); windows are short."""
    out = lines.at(a, e, x)
    for k in range(out.size):
        w = y[int(a[k]) : int(e[k])]
        out[k] = min(max(out[k], float(w.min())), float(w.max()))
    return out


def _clamped_edge(y: np.ndarray, lines: _Lines, a: int, e: int, x: float) -> float:
    """:func:`_clamped` for one window."""
    return float(_clamped(y, lines, np.array([a]), np.array([e]), np.array([x]))[0])


def _real_jumps(y: np.ndarray, lines: _Lines, candidates: list[int], m: int) -> list[int]:
    """The candidate boundaries where the curve jumps (see the module docstring)."""
    n = y.size
    if not candidates or n < 4:
        return []
    # noise of one bin from second differences: a smooth trend (even a steep one) adds ~nothing
    sigma = max(mad_sigma(np.diff(y, 2)) / math.sqrt(6.0), 1e-12)
    var_edge = 1.0 / m + 3.0 * m / max(m * m - 1.0, 1.0)  # variance of a line's edge / sigma^2
    threshold = max(MIN_SHIFT, JUMP_Z * sigma * math.sqrt(2.0 * var_edge))
    # the jump at every boundary b (before index b): right line minus left line at b - 0.5
    b = np.arange(2, n - 1)
    x = b - 0.5
    right = _clamped(y, lines, b, np.minimum(n, b + m), x)
    left = _clamped(y, lines, np.maximum(0, b - m), b, x)
    jump = right - left
    kept: list[tuple[int, float]] = []
    for c in candidates:
        # the staircase of a decay puts candidates near a jump, not on it: look around; never
        # closer to an end than a segment's minimum size, or a line through the first two
        # points of a steep initial drop is extrapolated into a jump that is not there
        lo, hi = max(2, m, c - m), min(n - 2, n - m, c + m)
        if hi < lo:
            continue
        window = jump[lo - 2 : hi - 1]
        j = int(np.argmax(np.abs(window)))
        best, best_b = float(window[j]), lo + j
        if abs(best) < threshold:
            continue
        # the levels either side agree on the jump by their medians too: a line through a
        # window ending on one outlier (a lone low log of a partial batch) bends its edge by
        # itself, and the curve around it has not moved
        moved = float(np.median(y[best_b : best_b + m]) - np.median(y[max(0, best_b - m) : best_b]))
        if moved * best <= 0 or abs(moved) < threshold:
            continue
        if kept and best_b - kept[-1][0] < m:  # two candidates found the same jump
            if abs(best) > abs(kept[-1][1]):
                kept[-1] = (best_b, best)
            continue
        kept.append((best_b, best))
    return sorted({b for b, _ in kept})


@feature_group(
    "cp",
    requires=["train/loss"],
    features={
        "cp.count": "number of change points in the train-loss curve: level jumps, not the "
        "bends of a smooth decay",
        "cp.steps": "steps of the change points, comma-separated",
        "cp.segments": "number of segments",
        "cp.largest_jump": "largest upward level jump at a change point: local level just after "
        "/ just before, minus 1 (e.g. 0.5 = +50%)",
        "cp.largest_jump_step": "step where that jump starts",
        "cp.jump_kept": "after the largest jump, no segment's median came back below halfway to "
        "the level before it",
        "cp.final_segment_start": "first step of the last segment",
        "cp.final_change": "fractional change of the trend across the last segment",
        "cp.flat_from_step": "first step of the final stretch of flat segments (|change| under "
        "the flat tolerance), None if the run ends on a slope",
    },
)
def _cp(ctx: FeatureContext) -> dict[str, Value]:
    steps, values, _ = train_loss(ctx)
    ok = np.isfinite(values)
    end = int(np.argmin(ok)) if not bool(ok.all()) else values.size
    s, v = steps[:end][ok[:end]], values[:end][ok[:end]]
    scale = LossScale(v)
    t = scale.forward(v)
    segs = segments(s, t, scale, ctx.settings.changepoint_penalty)
    # a jump: the local level just after the change point over the one just before it
    jumps = [
        (scale.ratio(b.start_level - a.end_level), b.start_step, i)
        for i, (a, b) in enumerate(itertools.pairwise(segs), start=1)
    ]
    big = max((j for j in jumps if j[0] > 0), default=None)
    kept = None
    if big is not None:
        before = segs[big[2] - 1].end_level
        halfway = before + 0.5 * (segs[big[2]].start_level - before)
        kept = all(seg.level > halfway for seg in segs[big[2] :])
    tol = ctx.settings.flat_tolerance * 2
    flat_from = None
    for seg in reversed(segs):
        if abs(seg.change) <= tol:
            flat_from = seg.start_step
        else:
            break
    return {
        "cp.count": len(segs) - 1,
        "cp.steps": ",".join(str(g.start_step) for g in segs[1:]),
        "cp.segments": len(segs),
        "cp.largest_jump": big[0] if big else None,
        "cp.largest_jump_step": big[1] if big else None,
        "cp.jump_kept": kept,
        "cp.final_segment_start": segs[-1].start_step,
        "cp.final_change": segs[-1].change,
        "cp.flat_from_step": flat_from,
    }


#: Logs a clean descent needs before a jump can break it, and logs from the jump on.
JUMP_MIN_BEFORE = 3
JUMP_MIN_AFTER = 3
_JUMP_FEATURES = (
    "jump.step",
    "jump.before",
    "jump.ratio",
    "jump.kept_ratio",
    "jump.last_vs_jump",
    "jump.logs_after",
)


@feature_group(
    "jump",
    requires=["train/loss"],
    features={
        "jump.step": "step of the first rise of a positive train loss that had fallen at every "
        f"one of its first {JUMP_MIN_BEFORE} or more logs (None when the descent never broke, "
        f"or broke with fewer than {JUMP_MIN_AFTER} logs left)",
        "jump.before": "the loss at the log before that rise: the level the descent had reached",
        "jump.ratio": "the loss at the rise / jump.before",
        "jump.kept_ratio": "the lowest loss from the rise to the end / jump.before: above 1 when "
        "the loss never came back down to where the descent was",
        "jump.last_vs_jump": "the last loss / the loss at the rise: above 1 when it kept climbing",
        "jump.logs_after": "logs from the rise to the end",
    },
)
def _jump(ctx: FeatureContext) -> dict[str, Value]:
    """A clean descent broken once, for runs too short for change points: a later stage that
    switched its loss, a resume that lost the optimizer state (3.58 after eight falling logs,
    then 8.29 and never below 5.3 again)."""
    steps, values, _ = train_loss(ctx)
    ok = np.isfinite(values)
    s, v = steps[ok], values[ok]
    if v.size < JUMP_MIN_BEFORE + JUMP_MIN_AFTER:
        raise InsufficientDataError(f"only {v.size} finite train-loss logs")
    if not bool(np.all(v > 0)):
        raise InsufficientDataError("the train loss is not positive everywhere")
    rises = np.flatnonzero(np.diff(v) >= 0)
    i = int(rises[0]) + 1 if rises.size else v.size  # the first log not below the one before
    if i < JUMP_MIN_BEFORE or v.size - i < JUMP_MIN_AFTER:
        return dict.fromkeys(_JUMP_FEATURES)
    before = float(v[i - 1])
    return {
        "jump.step": int(s[i]),
        "jump.before": before,
        "jump.ratio": float(v[i] / before),
        "jump.kept_ratio": float(v[i:].min() / before),
        "jump.last_vs_jump": float(v[-1] / v[i]),
        "jump.logs_after": int(v.size - i),
    }
