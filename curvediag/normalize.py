"""Turn raw (step, value) logs into clean :class:`~curvediag.model.Series`.

Steps are sorted and made unique. When a run was resumed from a checkpoint, the steps after the
checkpoint are logged twice: the latest segment wins and the restart steps are reported.
NaN/Inf values are kept: they are evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from curvediag.model import Run, Series

__all__ = ["build_series", "choose_primary_eval", "latest_segment_mask"]


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
) -> tuple[Series, list[int]]:
    """Build a sorted, de-duplicated series from points in logged order.

    Returns:
        The series and the steps at which a restart (resume) was detected.
    """
    s = np.asarray(steps, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    w = None if wall_time is None else np.asarray(wall_time, dtype=np.float64)
    keep, restarts = latest_segment_mask(s)
    s, v = s[keep], v[keep]
    if w is not None:
        w = w[keep]
    if s.size > 1 and not bool(np.all(np.diff(s) > 0)):  # pragma: no cover - guarded by mask
        order = np.argsort(s, kind="stable")
        s, v = s[order], v[order]
        w = None if w is None else w[order]
    return Series(name=name, steps=s, values=v, wall_time=w), restarts


def choose_primary_eval(run: Run) -> None:
    """When a run evaluates several sets (``eval/<set>_loss``) and no plain ``eval/loss``, use one.

    The set with the most points wins (ties: alphabetical); the choice is recorded as a warning.
    """
    if "eval/loss" in run.metrics:
        return
    candidates = [
        k
        for k in run.metrics
        if k.startswith("eval/") and k.endswith("_loss") and k.count("/") == 1
    ]
    if not candidates:
        return
    best = sorted(candidates, key=lambda k: (-len(run.metrics[k]), k))[0]
    run.metrics["eval/loss"] = run.metrics[best].model_copy(update={"name": "eval/loss"})
    if len(candidates) > 1:
        run.warnings.append(
            f"several evaluation sets ({', '.join(sorted(candidates))}); "
            f"eval/loss is taken from {best}"
        )


def _pick(cands: list[str], prefer: tuple[str, ...]) -> str | None:
    if len(cands) == 1:
        return cands[0]
    preferred = [c for c in cands if any(p in c.lower() for p in prefer)]
    return preferred[0] if len(preferred) == 1 else None


def infer_loss_series(run: Run) -> None:
    """Find the train/eval loss under a free-form name (``Training loss``, ``Logloss``, ...).

    Only used when the canonical name is absent; the choice is recorded as a warning, and a
    user mapping (``--map``) always wins because it produces the canonical name directly.
    """
    train_c: list[str] = []
    eval_c: list[str] = []
    for k in run.metrics:
        low = k.lower()
        if k in ("train/loss", "eval/loss") or "loss" not in low.rsplit("/", 1)[-1]:
            continue
        if "scale" in low:
            continue
        if k.startswith("eval/") or any(w in low for w in ("val", "test", "eval")):
            eval_c.append(k)
        else:
            train_c.append(k)
    for target, cands, prefer in (
        ("train/loss", train_c, ("train",)),
        ("eval/loss", [c for c in eval_c if not c.startswith("eval/")], ("val", "eval", "test")),
    ):
        if target in run.metrics or not cands:
            continue
        chosen = _pick(sorted(cands), prefer)
        if chosen is None:
            continue
        run.metrics[target] = run.metrics[chosen].model_copy(update={"name": target})
        run.warnings.append(f"{target} is taken from {chosen!r}")
