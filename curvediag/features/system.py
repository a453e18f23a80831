"""System signals when the logs carry them: step time from wall time, throughput, memory."""

from __future__ import annotations

import itertools

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features.registry import FeatureContext, Value, feature_group

THROUGHPUT = ("system/tokens_per_second", "system/samples_per_second", "system/steps_per_second")
MEMORY = ("system/memory_allocated", "system/memory_reserved", "system/gpu_memory")


def _windows(v: np.ndarray, k: int) -> np.ndarray:
    """Medians of ``k`` disjoint, equal-count windows (not overlapping moving averages)."""
    edges = np.linspace(0, v.size, k + 1).astype(int)
    return np.array([float(np.median(v[a:b])) for a, b in itertools.pairwise(edges) if b > a])


@feature_group(
    "steptime",
    requires=["train/loss"],
    features={
        "steptime.median": "median seconds per training step (from wall time)",
        "steptime.max_gap_ratio": "largest time between two logs per step / the median, eval "
        "time removed",
        "steptime.max_gap_seconds": "that gap in seconds",
        "steptime.stall_step": "step at which that gap ended",
    },
)
def _steptime(ctx: FeatureContext) -> dict[str, Value]:
    s = ctx.run.get("train/loss")
    if s is None or s.wall_time is None:
        raise InsufficientDataError(
            "the train loss has no wall time (trainer_state.json keeps none)"
        )
    ok = np.isfinite(s.wall_time)
    steps, wall = s.steps[ok], s.wall_time[ok]
    if steps.size < 8:
        raise InsufficientDataError("fewer than 8 timed train-loss logs")
    dt = np.diff(wall)
    dsteps = np.diff(steps).astype(np.float64)
    ev = ctx.run.get("eval/runtime")
    if ev is not None:  # evaluation pauses are not stalls
        for st, rt in zip(ev.steps, ev.values, strict=True):
            j = int(np.searchsorted(steps, st, side="left"))
            if 0 < j <= dt.size and np.isfinite(rt):
                dt[j - 1] = max(0.0, dt[j - 1] - float(rt))
    else:
        # evaluations whose duration was not logged (Lightning, Keras): the gaps next to one
        # may be that evaluation (before or after a train log at the same step), so they are
        # not judged
        evl = ctx.run.get("eval/loss")
        if evl is not None and evl.steps.size:
            for at in (
                np.searchsorted(steps, evl.steps, side="left"),
                np.searchsorted(steps, evl.steps, side="right"),
            ):
                dt[at[(at > 0) & (at <= dt.size)] - 1] = np.nan
    per = dt / np.maximum(dsteps, 1.0)
    if not bool(np.isfinite(per).any()):
        raise InsufficientDataError("every gap between train logs holds an evaluation")
    med = float(np.nanmedian(per))
    if med <= 0:
        raise InsufficientDataError("wall times do not advance")
    i = int(np.nanargmax(per))
    return {
        "steptime.median": med,
        "steptime.max_gap_ratio": float(per[i] / med),
        "steptime.max_gap_seconds": float(dt[i]),
        "steptime.stall_step": int(steps[i + 1]),
    }


@feature_group(
    "throughput",
    requires=[],
    features={
        "throughput.metric": "which throughput series was used",
        "throughput.baseline": "median throughput over the first quarter of its logs",
        "throughput.min_ratio": "lowest window median / baseline (disjoint windows)",
        "throughput.drop_step": "first step of the lowest window",
    },
)
def _throughput(ctx: FeatureContext) -> dict[str, Value]:
    name = next((m for m in THROUGHPUT if ctx.run.get(m) is not None), None)
    if name is None:
        raise InsufficientDataError(
            "the run logged no throughput (tokens/samples/steps per second)"
        )
    steps, values = ctx.finite_series(name)
    if values.size < 8:
        raise InsufficientDataError(f"only {values.size} throughput points")
    base = float(np.median(values[: max(2, values.size // 4)]))
    k = int(min(10, max(4, values.size // 5)))
    wins = _windows(values, k)
    edges = np.linspace(0, values.size, k + 1).astype(int)
    j = int(np.argmin(wins))
    return {
        "throughput.metric": name,
        "throughput.baseline": base,
        "throughput.min_ratio": float(wins[j] / base) if base > 0 else None,
        "throughput.drop_step": int(steps[edges[j]]),
    }


@feature_group(
    "memory",
    requires=[],
    features={
        "memory.metric": "which memory series was used",
        "memory.growth": "median of the last fifth / median of the first fifth",
        "memory.rising_windows": "fraction of consecutive disjoint windows whose median rose",
        "memory.first": "median of the first fifth",
        "memory.last": "median of the last fifth",
    },
)
def _memory(ctx: FeatureContext) -> dict[str, Value]:
    name = next((m for m in MEMORY if ctx.run.get(m) is not None), None)
    if name is None:
        raise InsufficientDataError("the run logged no memory usage")
    _, values = ctx.series(name)
    values = values[np.isfinite(values)]
    if values.size < 10:
        raise InsufficientDataError(f"only {values.size} memory points")
    wins = _windows(values, 5)
    rising = float(np.mean(np.diff(wins) > 0.005 * max(abs(wins[0]), 1e-12)))
    return {
        "memory.metric": name,
        "memory.growth": float(wins[-1] / wins[0]) if wins[0] > 0 else None,
        "memory.rising_windows": rising,
        "memory.first": float(wins[0]),
        "memory.last": float(wins[-1]),
    }
