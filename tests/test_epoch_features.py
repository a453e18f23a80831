"""Epoch-boundary features on the shapes real loggers write."""

from __future__ import annotations

import numpy as np
import pytest

import curvediag
from curvediag.testing.synth import make_run


def _staircase(rounded_epoch: bool) -> curvediag.Diagnosis:
    rng = np.random.default_rng(0)
    n, per_epoch = 600, 200
    level = np.repeat([0.8, 0.55, 0.35], per_epoch)
    loss = level * np.exp(rng.normal(0, 0.15, n))  # per-step batch noise hides single steps
    epoch = np.arange(1, n + 1) / per_epoch
    if rounded_epoch:  # W&B logs epoch rounded to 2 decimals: 0.0, 0.0, 0.01 ...
        epoch = np.round(np.arange(n) / per_epoch, 2)
    run = make_run({"train/loss": list(loss), "train/epoch": list(epoch)}, every=1)
    return curvediag.diagnose(run)


def test_staircase_found_when_epoch_is_logged_rounded_from_zero() -> None:
    for rounded in (False, True):
        d = _staircase(rounded)
        assert d.features["epoch.boundaries"] == 2, rounded
        assert "loss-drops-at-epoch-boundaries" in d.finding_ids, (rounded, d.finding_ids)
        f = next(f for f in d.findings if f.rule_id == "loss-drops-at-epoch-boundaries")
        assert 195 <= (f.onset_step or 0) <= 205


def test_sparse_logs_skip_the_log_that_straddles_the_boundary() -> None:
    # one log per 10 steps, 7 logs per epoch; the first log of each epoch averages the steps
    # on both sides of the boundary (it reads high), the staircase is seen after it
    loss = [2.6, 2.2, 2.06, 1.98, 1.86, 1.81, 1.92, 1.36, 1.34, 1.31, 1.29, 1.28, 1.27]
    loss += [1.30, 0.95, 0.93, 0.92, 0.91, 0.90, 0.90, 0.89]
    epoch = [(i + 1) / 6.5 for i in range(len(loss))]
    run = make_run({"train/loss": loss, "train/epoch": epoch}, every=10)
    d = curvediag.diagnose(run)
    assert d.features["epoch.window_drop"] > 0.2


def test_a_loss_without_measurable_scatter_gets_no_absurd_z() -> None:
    # logged to 4 decimals at its floor: the per-step scatter is exactly zero, and a
    # "133291378 standard errors" figure in the evidence would be nonsense
    loss = [0.3, 0.2, 0.1, 0.05] + [0.0002] * 20 + [0.0001] * 20 + [0.0001] * 16
    epoch = [(i + 1) / 20 for i in range(len(loss))]
    d = curvediag.diagnose(make_run({"train/loss": loss, "train/epoch": epoch}, every=10))
    z = d.features["epoch.window_excess_z"]
    assert z is None or abs(z) < 1e4
    late = d.features["loss.late_drop_z"]
    assert late is None or abs(late) < 1e4


def _per_epoch_run(means: list[float]) -> curvediag.Diagnosis:
    # single-batch losses every 10 steps (scattering 0.5-1.0) beside the per-epoch means that
    # Lightning logs at each validation's step, every 50 steps
    rng = np.random.default_rng(1)
    batches = list(0.75 + 0.25 * rng.uniform(-1, 1, 30))
    val = [0.95, 0.85, 0.80, 0.84, 0.88, 0.92]
    run = make_run(
        {
            "train/loss": {"values": batches, "every": 10},
            "train/loss_epoch": {"values": means, "every": 50},
            "eval/loss": {"values": val, "every": 50},
        }
    )
    return curvediag.diagnose(run)


def test_the_train_change_after_the_eval_minimum_uses_the_epoch_means() -> None:
    d = _per_epoch_run([0.95, 0.88, 0.80, 0.77, 0.74, 0.70])
    # the eval minimum is at step 150 (0.80); the epoch means fall 0.80 -> 0.70 after it
    assert d.features["eval.train_epoch_change_after_min"] == pytest.approx(0.70 / 0.80 - 1)
    assert d.features["eval.train_change_after_min"] == pytest.approx(0.70 / 0.80 - 1)


def test_an_epoch_mean_above_every_logged_batch_is_not_used() -> None:
    # a mean dominated by a burst the per-step log never showed says nothing of the level
    d = _per_epoch_run([0.95, 0.88, 0.80, 0.77, 0.74, 5e6])
    assert d.features["eval.train_epoch_change_after_min"] is None
