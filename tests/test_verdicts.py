"""Classes of real runs the catalog used to get wrong, each on a realistic Trainer log.

Every case writes a ``trainer_state.json`` shaped like the Trainer writes it (train logs with
``loss``/``grad_norm``/``learning_rate``/``epoch``, separate eval logs, the final summary) and
diagnoses it through the real reader, as a user would.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import curvediag
from curvediag.cli import main


def _state(
    tmp: Path,
    loss: list[float] | np.ndarray,
    *,
    every: int = 10,
    first: int | None = None,
    evals: list[float] | None = None,
    eval_every: int | None = None,
    grad: list[float] | np.ndarray | None = None,
    lr: float | list[float] = 5e-5,
    max_steps: int | None = None,
    finished: bool = True,
    epochs_per_step: float = 0.001,
    extra: dict[str, Any] | None = None,
) -> Path:
    start = every if first is None else first
    hist: list[dict[str, Any]] = []
    lrs = lr if isinstance(lr, list) else [lr] * len(loss)
    for i, v in enumerate(loss):
        step = start + i * every
        e: dict[str, Any] = {
            "step": step,
            "loss": float(v),
            "learning_rate": lrs[i],
            "epoch": step * epochs_per_step,
        }
        if grad is not None:
            e["grad_norm"] = float(grad[i])
        hist.append(e)
    if evals:
        ee = eval_every or every * max(1, len(loss) // len(evals))
        for j, v in enumerate(evals):
            step = start + (j + 1) * ee - every
            hist.append({"step": step, "eval_loss": float(v), "epoch": step * epochs_per_step})
        hist.sort(key=lambda e: (e["step"], "eval_loss" in e))
    last = start + (len(loss) - 1) * every if loss is not None and len(loss) else 0
    if finished and len(loss):
        hist.append({"step": last, "train_runtime": 12.0, "train_loss": float(np.mean(loss))})
    state = {
        "log_history": hist,
        "global_step": last,
        "max_steps": max_steps or last,
        "logging_steps": every,
        "num_train_epochs": 3,
        **(extra or {}),
    }
    folder = tmp / "run"
    folder.mkdir(exist_ok=True)
    path = folder / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2))  # json writes NaN as the bare token, like HF
    return path


def _decay(n: int, start: float = 3.0, end: float = 1.0, noise: float = 0.01, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, n)
    return (end + (start - end) * np.exp(-5 * x)) * np.exp(rng.normal(0, noise, n))


def _ids(d: curvediag.Diagnosis) -> set[str]:
    return {f.rule_id for f in d.findings}


# -- inconclusive ---------------------------------------------------------------------------
def test_no_loss_at_all_is_inconclusive_with_its_own_exit_code(tmp_path: Path, capsys) -> None:
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": [], "global_step": 0, "max_steps": 100}))
    d = curvediag.diagnose(p)
    assert d.verdict == "inconclusive"
    assert "no train or eval loss" in (d.inconclusive_reason or "")
    assert main(["diagnose", str(p)]) == 3
    assert "INCONCLUSIVE" in capsys.readouterr().out
    assert main(["diagnose", str(p), "--fail-on", "never"]) == 0


def test_three_points_are_too_few_to_judge(tmp_path: Path) -> None:
    d = curvediag.diagnose(_state(tmp_path, [2.0, 1.5, 1.2]))
    assert d.verdict == "inconclusive"
    assert d.inconclusive_reason is not None and d.inconclusive_reason.startswith("3 train/loss")
    assert d.to_dict()["verdict"] == "inconclusive"


def test_too_short_to_judge_still_says_how_the_run_ended() -> None:
    from curvediag.model import Run, RunMeta, Series

    run = Run(
        source="x",
        format="wandb-run",
        name="x",
        meta=RunMeta(exit_code=255, max_steps=1000),
        metrics={"eval/loss": Series(name="eval/loss", steps=[40], values=[2.03])},
    )
    d = curvediag.diagnose(run)
    assert d.verdict == "inconclusive"
    reason = d.inconclusive_reason or ""
    assert "exited with code 255" in reason and "of 1000 planned" in reason
    # a clean, finished short run says nothing more
    quiet = run.model_copy(update={"meta": RunMeta(exit_code=0, finished=True)})
    assert "exited" not in (curvediag.diagnose(quiet).inconclusive_reason or "")
    # a W&B binary log cut off without its exit record says so too
    cut = run.model_copy(update={"meta": RunMeta(exit_recorded=False)})
    assert "without its exit record" in (curvediag.diagnose(cut).inconclusive_reason or "")
    closed = run.model_copy(update={"meta": RunMeta(exit_recorded=True, exit_code=0)})
    assert "exit record" not in (curvediag.diagnose(closed).inconclusive_reason or "")


def test_nan_after_a_few_points_is_critical_not_missing(tmp_path: Path) -> None:
    d = curvediag.diagnose(_state(tmp_path, [2.3, 2.1, 1.9, 1.8] + [math.nan] * 6))
    assert d.verdict == "critical"
    assert _ids(d) & {"loss-nonfinite-sudden", "loss-nonfinite-after-grad-growth"}
    nan = next(f for f in d.findings if f.rule_id.startswith("loss-nonfinite"))
    assert nan.onset_step == 50
    # the last finite loss was the best one: no invented rise before the NaN
    assert "+14%" not in nan.evidence and "+0%" in nan.evidence


# -- ended early / still improving ----------------------------------------------------------
def test_run_stopped_at_a_third_while_falling_is_not_healthy(tmp_path: Path) -> None:
    loss = _decay(34, 3.0, 1.0, seed=1)[:34]  # the first third of a 100-log decay
    loss = (1.0 + 2.0 * np.exp(-5 * np.linspace(0, 0.34, 34))) * np.exp(
        np.random.default_rng(2).normal(0, 0.01, 34)
    )
    d = curvediag.diagnose(_state(tmp_path, loss, max_steps=1000, finished=False))
    ids = _ids(d)
    assert "healthy-converged" not in ids
    assert "run-ended-early" in ids and d.verdict == "warning"
    assert "still-improving-at-end" in ids


def test_still_improving_beyond_its_noise_is_said_and_never_converged(tmp_path: Path) -> None:
    # falls 7% over the last quarter with 0.5% noise
    x = np.linspace(0, 1, 200)
    loss = 2.0 * np.exp(-0.3 * x) * np.exp(np.random.default_rng(3).normal(0, 0.005, 200))
    d = curvediag.diagnose(_state(tmp_path, loss))
    assert "still-improving-at-end" in _ids(d)
    assert "healthy-converged" not in _ids(d)


# -- sparse logs ----------------------------------------------------------------------------
def test_overfitting_in_eight_evaluations_is_seen(tmp_path: Path) -> None:
    loss = [2.5, 1.9, 1.5, 1.2, 0.9, 0.7, 0.5, 0.35]
    evals = [2.0, 1.7, 1.6, 1.7, 1.85, 2.0, 2.2, 2.4]
    d = curvediag.diagnose(_state(tmp_path, loss, every=100, evals=evals, eval_every=100))
    assert "overfitting" in _ids(d)


# -- flat, chance level, zeros ---------------------------------------------------------------
def test_flat_but_noisy_loss_is_not_learning(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    loss = 2.0 * np.exp(np.linspace(0, -0.08, 300)) * np.exp(rng.normal(0, 0.15, 300))
    d = curvediag.diagnose(_state(tmp_path, loss))
    assert "loss-not-decreasing" in _ids(d), d.finding_ids


def test_loss_stuck_at_ln2_is_chance_level(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    loss = 0.6932 * np.exp(rng.normal(0, 0.004, 80))
    d = curvediag.diagnose(_state(tmp_path, loss))
    assert "loss-at-chance-level" in _ids(d)
    f = next(f for f in d.findings if f.rule_id == "loss-at-chance-level")
    assert "ln(2)" in f.evidence


def test_chance_level_of_the_configured_number_of_classes(tmp_path: Path) -> None:
    from curvediag.features import FeatureSet
    from curvediag.model import Run, RunMeta, Series

    rng = np.random.default_rng(7)
    v = math.log(7) * np.exp(rng.normal(0, 0.004, 50))
    run = Run(
        source="<t>",
        format="hf-trainer",
        name="t",
        meta=RunMeta(hyperparameters={"num_labels": 7}),
        metrics={"train/loss": Series(name="train/loss", steps=np.arange(1, 51) * 10, values=v)},
    )
    fs = FeatureSet(run)
    assert fs.get("chance.k") == 7 and fs.get("chance.source") == "num_labels"
    assert "loss-at-chance-level" in _ids(curvediag.diagnose(run))


def test_loss_of_exactly_zero_for_most_of_the_run(tmp_path: Path) -> None:
    loss = [1.2, 0.6, 0.1] + [0.0] * 40
    d = curvediag.diagnose(_state(tmp_path, loss, grad=[3.0, 2.0, 1.0] + [0.0] * 40))
    assert "loss-mostly-zero" in _ids(d)
    assert d.verdict == "warning"
    # a ratio of something to zero is never quoted as a percentage in the thousands
    for f in d.findings:
        assert "271200%" not in f.evidence
        for m in __import__("re").findall(r"(\d{4,})%", f.evidence):
            pytest.fail(f"{f.rule_id} quotes {m}%")


def test_improvement_of_a_loss_with_zeros_is_relative_to_its_start(tmp_path: Path) -> None:
    from curvediag.features import FeatureSet

    run = curvediag.load_run(_state(tmp_path, [0.85, 0.6, 0.2712] + [0.0] * 12))
    imp = FeatureSet(run).get("loss.improvement")
    assert isinstance(imp, float) and 0.0 <= imp <= 1.0


# -- gradients ------------------------------------------------------------------------------
def test_clipping_saturated_despite_skipped_fp16_steps(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    n = 200
    grad = 20.0 * np.exp(rng.normal(0, 0.2, n))  # 20x max_grad_norm
    grad[::5] = 0.0  # steps the fp16 loss scaler skipped log a grad norm of 0.0
    loss = _decay(n, seed=8)
    d = curvediag.diagnose(_state(tmp_path, loss, grad=grad))
    # a lone trainer_state.json does not name its optimizer: said as info (the Adam case)...
    assert "grad-clipping-saturated-adam" in _ids(d)
    # ...and as a warning once the optimizer is known to be SGD
    sgd = curvediag.diagnose(
        _state(tmp_path, loss, grad=grad), overrides={"features.optimizer": "sgd"}
    )
    assert "grad-clipping-saturated" in _ids(sgd)


# -- train / eval mismatch ------------------------------------------------------------------
def test_eval_that_never_improves_is_a_mismatch_not_overfitting(tmp_path: Path) -> None:
    loss = _decay(100, 2.0, 0.5, seed=9)
    evals = [1.0, 1.03, 1.06, 1.1, 1.13, 1.16, 1.2, 1.24, 1.27, 1.3]
    d = curvediag.diagnose(_state(tmp_path, loss, evals=evals, eval_every=100))
    ids = _ids(d)
    assert "eval-never-improves" in ids and "overfitting" not in ids


def test_eval_flat_while_train_falls_slowly(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    n = 1000
    loss = np.linspace(2.0, 1.74, n) * np.exp(rng.normal(0, 0.01, n))  # -13% over the run
    evals = list(3.1 * np.exp(rng.normal(0, 0.002, 100)))
    d = curvediag.diagnose(_state(tmp_path, loss, evals=evals, eval_every=100))
    assert _ids(d) & {"eval-flat-while-train-falls", "eval-never-improves"}, d.finding_ids


def test_thirty_x_gap_with_three_evaluations(tmp_path: Path) -> None:
    loss = _decay(60, 1.0, 0.01, seed=11)
    d = curvediag.diagnose(_state(tmp_path, loss, evals=[0.5, 0.4, 0.3], eval_every=200))
    assert "train-eval-gap-huge" in _ids(d)


def test_eval_below_train_is_at_most_info(tmp_path: Path) -> None:
    loss = _decay(100, 2.0, 0.8, seed=12)
    evals = list(_decay(10, 1.6, 0.6, seed=13))
    d = curvediag.diagnose(_state(tmp_path, loss, evals=evals, eval_every=100))
    below = [f for f in d.findings if f.rule_id == "eval-below-train"]
    assert all(f.severity.value == "info" for f in below)


# -- shape ----------------------------------------------------------------------------------
def test_epoch_staircase_is_not_called_oscillation(tmp_path: Path) -> None:
    n_epochs, per = 6, 40
    rng = np.random.default_rng(14)
    loss = np.concatenate(
        [np.full(per, 2.0 * 0.6**e) * np.exp(rng.normal(0, 0.01, per)) for e in range(n_epochs)]
    )
    d = curvediag.diagnose(_state(tmp_path, loss, epochs_per_step=1 / (per * 10)))
    assert "loss-oscillating" not in _ids(d)


# -- learning rate --------------------------------------------------------------------------
def test_learning_rate_far_above_the_usual_range_is_flagged_at_the_first_step(
    tmp_path: Path,
) -> None:
    loss = _decay(50, 0.7, 0.62, seed=15)  # learning little: the LR is not obviously workable
    run = curvediag.load_run(_state(tmp_path, loss, lr=0.02, first=10))
    # the run's config (as W&B / TensorBoard carry it) names a pretrained model: full fine-tuning
    meta = run.meta.model_copy(
        update={"hyperparameters": {"_name_or_path": "roberta-base", "optim": "adamw_torch"}}
    )
    d = curvediag.diagnose(run.model_copy(update={"meta": meta}))
    f = next(f for f in d.findings if f.rule_id == "lr-out-of-range")
    assert f.onset_step == 10
    assert "0.02" in f.evidence
    assert any("->" in fix and "0.02" in fix for fix in f.fixes)


def test_fixes_never_raise_a_learning_rate_that_is_already_too_high(tmp_path: Path) -> None:
    rng = np.random.default_rng(16)
    loss = 2.0 * np.exp(rng.normal(0, 0.01, 80))  # flat: not learning
    d = curvediag.diagnose(_state(tmp_path, loss, lr=0.05))
    for f in d.findings:
        for fix in f.fixes:
            assert "Raise the learning rate" not in fix, (f.rule_id, fix)


def test_intermittent_grad_norm_bursts_are_seen(tmp_path: Path) -> None:
    rng = np.random.default_rng(17)
    n = 200
    grad = 0.8 * np.exp(rng.normal(0, 0.15, n))
    for i in (40, 41, 90, 140, 185):
        grad[i] = 12.0  # a batch the model finds very surprising, again and again
    d = curvediag.diagnose(_state(tmp_path, _decay(n, seed=17), grad=grad))
    f = next(f for f in d.findings if f.rule_id == "grad-norm-bursts")
    assert f.onset_step == 410 and "4 separate bursts" in f.evidence


def test_an_eval_curve_alone_is_inconclusive_not_healthy() -> None:
    # a TensorBoard CSV export of the validation loss only: 100 evaluations, no train loss
    from curvediag.testing.synth import make_run

    run = make_run({"eval/loss": {"gen": "decay", "n": 100, "start": 2.0, "end": 1.2}})
    d = curvediag.diagnose(run)
    assert d.verdict == "inconclusive"
    assert d.inconclusive_reason is not None
    assert "no train loss was logged, only 100 eval loss points" in d.inconclusive_reason
    # ... unless the eval curve alone shows a problem: flat over 100 evaluations (511 -> 501.6)
    flat = make_run({"eval/loss": {"gen": "decay", "n": 100, "start": 511.0, "end": 501.6}})
    d = curvediag.diagnose(flat)
    assert d.verdict == "warning" and d.finding_ids == ["eval-loss-not-decreasing"]
    assert d.inconclusive_reason is not None  # still said: the train loss was not logged


def test_a_slow_creep_under_eval_noise_is_still_improving_but_a_levelling_curve_is_not() -> None:
    from curvediag.testing.synth import make_run

    rng = np.random.default_rng(1)
    n = 100
    creep = 10.1 - 0.8 * np.linspace(0, 1, n) + rng.normal(0, 0.05, n)  # -2% a quarter, steady
    train = {"gen": "decay", "n": 400, "start": 20.0, "end": 1.5}
    d = curvediag.diagnose(
        make_run({"train/loss": train, "eval/loss": {"values": list(creep), "every": 40}})
    )
    assert d.features["eval.projected_gain"] > 0.01
    # a cosine-like finish: the gaps shrink to nothing, whatever the trend of the quarter
    level = 2.36 + 0.4 * np.exp(-np.linspace(0, 6, 16))
    d = curvediag.diagnose(
        make_run({"train/loss": train, "eval/loss": {"values": list(level), "every": 250}})
    )
    assert d.features["eval.projected_gain"] < 0.01
    assert "still-improving-at-end" not in d.finding_ids


def test_a_projected_fall_of_a_positive_eval_loss_stays_under_its_whole_value() -> None:
    # gaps that do not shrink (0.3, 0.3) extrapolate, as a plain geometric series, to 12x the
    # last eval loss of 0.1: "it would fall about 1200% more" is impossible for a loss >= 0.
    # Compounded, the projection is a large fall that stays below 100%; a small one is unchanged
    from curvediag.testing.synth import make_run

    train = {"gen": "decay", "n": 50, "start": 2.0, "end": 0.5}
    steep = make_run({"train/loss": train, "eval/loss": {"values": [1.0, 0.9, 0.7, 0.4, 0.1]}})
    gain = curvediag.diagnose(steep).features["eval.projected_gain"]
    assert isinstance(gain, float) and 0.99 < gain < 1.0
    gentle = make_run({"train/loss": train, "eval/loss": {"values": [1.0, 0.9, 0.85, 0.82, 0.80]}})
    gain = curvediag.diagnose(gentle).features["eval.projected_gain"]
    # last gap 0.02, ratio 0.02 / 0.03: 0.02 x 2 = 0.04 more, 5% of 0.80 (1 - e^-0.05 = 0.049)
    assert gain == pytest.approx(-math.expm1(-0.05), rel=1e-6)
