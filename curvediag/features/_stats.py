"""Small robust-statistics helpers shared by the feature groups."""

from __future__ import annotations

import numpy as np

from curvediag.errors import InsufficientDataError

__all__ = [
    "LossScale",
    "binned_medians",
    "fitted_change",
    "mad_sigma",
    "phase_mask",
    "prefix_medians",
    "rolling_median",
    "sliding_medians",
]

PHASES = {"early": (0.0, 0.25), "mid": (0.25, 0.75), "late": (0.75, 1.0)}


def relative_above(x: float, floor: float) -> float:
    """x over floor as a fraction of floor's size (x - floor when floor is zero)."""
    return (x - floor) / abs(floor) if floor != 0 else x - floor


def last_logs_range(v: np.ndarray, k: int = 3) -> float | None:
    """The range of the last ``k`` values as a fraction of the smallest one's size (0.02 = the
    last three logs lie within 2% of each other), or None with fewer than ``k`` values."""
    if v.size < k:
        return None
    return relative_above(float(v[-k:].max()), float(v[-k:].min()))


def mad_sigma(x: np.ndarray) -> float:
    """Robust standard deviation (1.4826 x median absolute deviation) of the finite values."""
    x = x[np.isfinite(x)]
    if x.size == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


def second_difference_sigma(v: np.ndarray) -> float:
    """The robust point-to-point scatter of ``v`` (3 or more values) from its second
    differences (each point against the mean of its two neighbours), so that a trend, straight
    or V-shaped, is not taken for noise; 0.0 when most points sit on a straight line."""
    second = v[1:-1] - 0.5 * (v[:-2] + v[2:])
    # for independent noise of s.d. sigma, a second difference has s.d. sigma * sqrt(1.5)
    return float(1.4826 * np.median(np.abs(second)) / np.sqrt(1.5))


#: Windows are sorted directly (numpy only) while ``points x window`` stays under this; longer
#: series use scipy's running-median filter (O(n log w)), imported only then.
DIRECT_LIMIT = 2_000_000
#: Elements sorted at once on the direct path (bounds its memory to a few tens of MB).
_CHUNK = 1 << 21
#: Up to this many prefix medians are sorted one by one; more use two heaps.
_HEAP_HALF = 8


def sliding_medians(y: np.ndarray, w: int) -> np.ndarray:
    """Medians of every full window ``y[i:i+w]`` (``i = 0 .. n-w``) of a finite series, exact.

    Time O(n log w) and memory O(n) for any window (scipy's rank filters on long series; the
    median of an even window is the mean of its two middle values, as ``np.median``).
    """
    n = y.size
    if w < 1 or n < w:
        return np.empty(0, dtype=np.float64)
    if w == 1:
        return np.asarray(y, dtype=np.float64).copy()
    if (n - w + 1) * w <= DIRECT_LIMIT:
        windows = np.lib.stride_tricks.sliding_window_view(y, w)
        rows = max(1, _CHUNK // w)
        out = np.empty(n - w + 1, dtype=np.float64)
        for a in range(0, out.size, rows):
            out[a : a + rows] = np.median(windows[a : a + rows], axis=1)
        return out
    from scipy import ndimage

    x = np.asarray(y, dtype=np.float64)
    h = w // 2
    if w % 2:
        full: np.ndarray = ndimage.median_filter(x, size=w, mode="nearest")
        return np.asarray(full[h : n - h], dtype=np.float64)
    lo = ndimage.rank_filter(x, w // 2 - 1, size=w, mode="nearest")
    hi = ndimage.rank_filter(x, w // 2, size=w, mode="nearest")
    return np.asarray((lo[h : n - h + 1] + hi[h : n - h + 1]) / 2, dtype=np.float64)


def prefix_medians(y: np.ndarray, first: int, last: int) -> np.ndarray:
    """Medians of the prefixes ``y[:k]`` for ``k = first .. last`` (finite ``y``), exact.

    Short ranges sort each prefix; long ones keep two heaps (O(n log n)).
    """
    count = last - first + 1
    if count <= 0:
        return np.empty(0, dtype=np.float64)
    if count <= _HEAP_HALF:
        return np.array([float(np.median(y[:k])) for k in range(first, last + 1)])
    import heapq

    out = np.empty(count, dtype=np.float64)
    start = np.sort(y[: first - 1])
    n_lo = (start.size + 1) // 2
    lo = (-start[:n_lo]).tolist()  # max-heap of the lower half (negated)
    hi = start[n_lo:].tolist()  # min-heap of the upper half
    heapq.heapify(lo)
    heapq.heapify(hi)
    size_lo, size_hi = len(lo), len(hi)
    push, pushpop = heapq.heappush, heapq.heappushpop
    for j, x in enumerate(y[first - 1 : last].tolist()):
        if size_lo and x > -lo[0]:
            x = pushpop(hi, x)
        if size_lo > size_hi:
            push(hi, -pushpop(lo, -x))
            size_hi += 1
            out[j] = (-lo[0] + hi[0]) / 2
        else:
            push(lo, -x)
            size_lo += 1
            out[j] = -lo[0] if size_lo > size_hi else (-lo[0] + hi[0]) / 2
    return out


def rolling_median(y: np.ndarray, window: int) -> np.ndarray:
    """Centered rolling median (NaN-aware), same length as ``y``; edges use shrunken windows.

    A finite series takes O(n log w) time and O(n) memory for any window (see
    :func:`sliding_medians` and :func:`prefix_medians`); one with NaNs is sorted window by
    window in bounded chunks.
    """
    n = y.size
    if n == 0:
        return y.copy()
    w = max(1, min(window, n))
    if w % 2 == 0:
        w -= 1
    half = w // 2
    if half == 0:
        return y.copy()
    if n > 2 * half and bool(np.isfinite(y).all()):
        # no NaN inside: plain medians for the full windows, shrunken windows at the edges
        out = np.empty(n, dtype=np.float64)
        out[half : n - half] = sliding_medians(y, w)
        out[:half] = prefix_medians(y, half + 1, 2 * half)
        out[n - half :] = prefix_medians(y[::-1], half + 1, 2 * half)[::-1]
        return out
    padded = np.concatenate([np.full(half, np.nan), y, np.full(half, np.nan)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, w)
    result = np.empty(n, dtype=np.float64)
    rows = max(1, _CHUNK // w)
    import warnings

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for a in range(0, n, rows):
            result[a : a + rows] = np.nanmedian(windows[a : a + rows], axis=1)
    return result


def smoothing_window(n: int) -> int:
    """A window that smooths logging noise without erasing phases: ~5% of the points."""
    return int(min(51, max(3, (n // 20) | 1)))


def binned_medians(x: np.ndarray, y: np.ndarray, bins: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """Medians of (x, y) in at most ``bins`` equal-count bins (keeps fits robust and cheap)."""
    n = x.size
    if n <= bins:
        return x, y
    edges = np.linspace(0, n, bins + 1).astype(int)
    sizes = np.diff(edges)
    xs = np.empty(bins, dtype=np.float64)
    ys = np.empty(bins, dtype=np.float64)
    # equal-count bins differ in size by at most one: one vectorized median per bin size
    for size in np.unique(sizes):
        idx = np.flatnonzero(sizes == size)
        gather = edges[idx][:, None] + np.arange(size)
        xs[idx] = np.median(x[gather], axis=1)
        ys[idx] = np.median(y[gather], axis=1)
    return xs, ys


def robust_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Theil-Sen slope over binned medians (at most 40 bins), NaN-free input expected."""
    xs, ys = binned_medians(x, y)
    if xs.size < 2:
        raise InsufficientDataError("fewer than 2 points in the phase")
    i, j = np.triu_indices(xs.size, k=1)
    dx = xs[j] - xs[i]
    ok = dx != 0
    if not bool(ok.any()):
        raise InsufficientDataError("all points of the phase share one step")
    return float(np.median((ys[j] - ys[i])[ok] / dx[ok]))


def phase_mask(progress: np.ndarray, phase: str) -> np.ndarray:
    lo, hi = PHASES[phase]
    if phase == "early":
        return progress <= hi
    return (progress >= lo) & (progress <= hi)


class LossScale:
    """Work on a loss in a scale-free space.

    Positive losses are handled in log space (so a change of 0.1 means ~10% everywhere, for a
    loss of 0.01 or 10,000). Losses that can be zero or negative (RL objectives) are handled
    relative to their typical magnitude instead.
    """

    def __init__(self, values: np.ndarray) -> None:
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            raise InsufficientDataError("no finite loss values")
        self.log = bool(np.all(finite > 0))
        scale = float(np.median(np.abs(finite)))
        self.scale = scale if scale > 0 else 1.0

    def forward(self, v: np.ndarray) -> np.ndarray:
        if self.log:
            with np.errstate(all="ignore"):
                out: np.ndarray = np.log(v)
            return out
        return np.asarray(v / self.scale, dtype=np.float64)

    def inverse(self, x: float) -> float:
        """Back from transformed space to the loss's own units."""
        return float(np.exp(x)) if self.log else float(x * self.scale)

    def ratio(self, delta: float) -> float:
        """A difference in transformed space as a fractional change (+0.1 = 10% higher)."""
        if self.log:
            return float(np.expm1(delta))
        return float(delta)


def fitted_change(progress: np.ndarray, t: np.ndarray, mask: np.ndarray, scale: LossScale) -> float:
    """Fractional change of the robust trend across the masked part of the run."""
    x, y = progress[mask], t[mask]
    ok = np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3:
        raise InsufficientDataError("fewer than 3 points in a phase of the run")
    slope = robust_slope(x, y)
    return scale.ratio(slope * float(x.max() - x.min()))
