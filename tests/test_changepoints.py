"""Change points: a smooth decay is one segment, a real level shift is found where it is."""

from __future__ import annotations

import numpy as np
import pytest

import curvediag
from curvediag.features import FeatureSet
from curvediag.testing.synth import curve, make_run


def _decay(kind: str, n: int, noise: float, seed: int) -> np.ndarray:
    """A realistic smooth training loss: exponential or power-law decay to a floor, log noise."""
    x = np.linspace(0.0, 1.0, n)
    if kind == "exp":
        clean = 1.2 + 2.3 * np.exp(-6.0 * x)
    else:  # power law, as a language-model loss
        clean = 1.8 + 8.0 * (1.0 + 400.0 * x) ** -0.6
    return clean * np.exp(np.random.default_rng(seed).normal(0.0, noise, n))


def _cp(values: np.ndarray, every: int = 10) -> FeatureSet:
    return FeatureSet(make_run({"train/loss": list(values)}, every=every))


@pytest.mark.parametrize(
    ("kind", "n", "noise"),
    [("exp", 2000, 0.02), ("exp", 400, 0.01), ("pow", 20000, 0.02), ("pow", 5000, 0.04)],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_smooth_decay_gets_at_most_two_change_points(
    kind: str, n: int, noise: float, seed: int
) -> None:
    fs = _cp(_decay(kind, n, noise, seed))
    count = fs.get("cp.count")
    assert isinstance(count, int) and count <= 2, fs.get("cp.steps")
    assert "loss-level-shift" not in curvediag.diagnose(fs.run).finding_ids


@pytest.mark.parametrize("n", [300, 3000, 100_000])
def test_level_shift_on_a_decay_is_found_where_it_happens(n: int) -> None:
    v = _decay("exp", n, 0.02, 7)
    at = int(n * 0.55)
    v[at:] *= 1.5  # the loss jumps 50% and stays there
    fs = _cp(v)
    steps = [int(s) for s in str(fs.get("cp.steps")).split(",") if s]
    true_step = 10 * (at + 1)
    assert steps and min(abs(s - true_step) for s in steps) <= 0.01 * 10 * n, steps
    assert fs.get("cp.largest_jump_step") in steps
    jump = fs.get("cp.largest_jump")
    assert isinstance(jump, float) and 0.35 <= jump <= 0.7
    assert fs.get("cp.jump_kept") is True
    d = curvediag.diagnose(fs.run)
    assert "loss-level-shift" in d.finding_ids


def test_sudden_drop_is_a_change_point_but_not_a_jump_up() -> None:
    v = curve("decay", n=600, start=3.0, end=2.0, noise=0.01, seed=3)
    v[400:] *= 0.7  # e.g. a step decay of the learning rate
    fs = _cp(v)
    steps = [int(s) for s in str(fs.get("cp.steps")).split(",") if s]
    assert any(abs(s - 4010) <= 60 for s in steps), steps
    assert fs.get("cp.largest_jump") is None or fs.get("cp.largest_jump") < 0.1


def test_spike_that_recovers_is_not_kept() -> None:
    v = _decay("exp", 1000, 0.02, 3)
    v[500:520] *= 3.0
    fs = _cp(v)
    assert fs.get("cp.jump_kept") is not True
    assert "loss-level-shift" not in curvediag.diagnose(fs.run).finding_ids


def test_optimal_partition_matches_kernel_cpd_on_level_shifts() -> None:
    rpt = pytest.importorskip("ruptures")
    from curvediag.features.changepoints import optimal_partition

    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(40, 200))
        cuts = sorted(rng.choice(np.arange(15, n - 15), size=2, replace=False).tolist())
        if cuts[1] - cuts[0] < 10:
            continue
        y = np.zeros(n)
        y[cuts[0] :] += 3.0
        y[cuts[1] :] -= 5.0
        y += rng.normal(0, 0.3, n)
        m = max(3, n // 20)
        want = rpt.KernelCPD(kernel="linear", min_size=m, jump=1).fit(y.reshape(-1, 1))
        assert optimal_partition(y, m, 5.0) == [int(b) for b in want.predict(pen=5.0)[:-1]]
        assert optimal_partition(y, m, 5.0) == cuts
