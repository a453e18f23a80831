"""Features of a reinforcement-learning run's episode return.

An RL learner's loss says little about whether the policy improves (PPO's value term grows with
the returns it learns to predict), so :func:`curvediag.normalize.set_rl_loss_aside` moves it out
of the loss rules' way and these features judge the mean episode return instead: how far its
last quarter moved from its first, against the scatter of the return itself, and how much of
that move came in the last quarter.
"""

from __future__ import annotations

import math

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features.registry import FeatureContext, Value, feature_group
from curvediag.normalize import RL_LOSS, is_rl_run, rl_return_series

__all__: list[str] = []

#: Fewer logged returns than this give no quarters to compare.
_MIN_POINTS = 4


def _scatter(values: np.ndarray) -> float:
    """The return's point-to-point scatter: the robust spread of its successive differences
    around their median (a trend moves the median, not the spread), per point."""
    if values.size < 3:
        return 0.0
    d = np.diff(values)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2.0))


def _z(shift: float, noise: float, k: int) -> float:
    """A shift between two means of ``k`` points, in standard errors of their difference.
    ``noise`` is floored (:func:`_rl`) so a return that holds still between moves (a logger
    that repeats its last value) gives a large number, not a division by zero."""
    return shift / (noise * math.sqrt(2.0 / k))


@feature_group(
    "rl",
    requires=[],
    features={
        "rl.return_metric": "the series holding the run's mean episode return "
        "(rollout/ep_rew_mean, charts/episodic_return, episode_reward ...)",
        "rl.loss_metric": "where the run's loss was set aside (train/rl_loss), when it logged one",
        "rl.n": "number of finite logged returns",
        "rl.first": "first logged return",
        "rl.last": "last logged return",
        "rl.best": "highest logged return",
        "rl.best_step": "step of the highest return",
        "rl.first_quarter_mean": "mean return over the first quarter of the logs",
        "rl.third_quarter_mean": "mean return over the third quarter of the logs",
        "rl.last_quarter_mean": "mean return over the last quarter of the logs",
        "rl.range": "highest minus lowest return",
        "rl.noise": "the return's point-to-point scatter (robust; 0 when it repeats exactly)",
        "rl.gain": "last quarter's mean minus the first quarter's (negative: it fell)",
        "rl.gain_z": "rl.gain in standard errors of the scatter",
        "rl.rel_gain": "rl.gain / |first quarter's mean|",
        "rl.fall_share": "how far the last quarter's mean fell below the first quarter's, as a "
        "share of the return's whole range (<= 0 when it did not fall)",
        "rl.late_share": "share of rl.gain the last quarter added over the third (None when the "
        "return did not gain)",
        "rl.late_z": "the last quarter's mean minus the third quarter's, in standard errors",
    },
)
def _rl(ctx: FeatureContext) -> dict[str, Value]:
    run = ctx.run
    if not is_rl_run(run):
        raise InsufficientDataError("not a reinforcement-learning run (no episode return)")
    name = rl_return_series(run)
    assert name is not None  # is_rl_run found it
    steps, values = ctx.finite_series(name)
    n = int(values.size)
    if n < _MIN_POINTS:
        raise InsufficientDataError(f"{n} finite {name} points: too few for quarters")
    k = max(1, n // 4)
    q1 = float(values[:k].mean())
    q4 = float(values[-k:].mean())
    q3 = float(values[-2 * k : -k].mean()) if n >= 2 * k + k else q1
    scatter = _scatter(values)
    # the standard errors divide by a floor of a millionth of the return's size: exact repeats
    # have no scatter of their own
    noise = max(scatter, 1e-6 * float(np.abs(values).max()), 1e-12)
    gain = q4 - q1
    span = float(values.max() - values.min())
    i_best = int(np.argmax(values))
    return {
        "rl.return_metric": name,
        "rl.loss_metric": RL_LOSS if RL_LOSS in run.metrics else None,
        "rl.n": n,
        "rl.first": float(values[0]),
        "rl.last": float(values[-1]),
        "rl.best": float(values[i_best]),
        "rl.best_step": int(steps[i_best]),
        "rl.first_quarter_mean": q1,
        "rl.third_quarter_mean": q3,
        "rl.last_quarter_mean": q4,
        "rl.range": span,
        "rl.noise": scatter,
        "rl.gain": gain,
        "rl.gain_z": _z(gain, noise, k),
        "rl.rel_gain": gain / abs(q1) if q1 != 0 else None,
        "rl.fall_share": -gain / span if span > 0 else 0.0,
        "rl.late_share": (q4 - q3) / gain if gain > 0 else None,
        "rl.late_z": _z(q4 - q3, noise, k),
    }
