"""Live (incremental) diagnosis: findings while the run trains, bounded views, live/end rules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from curvediag.ingest import load_run
from curvediag.live import LiveDiagnosis, severity_at_least
from curvediag.model import RunMeta, Severity
from curvediag.ruleset.loader import builtin_rules_dir, load_rules

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "hf"


@pytest.fixture(scope="module")
def ruleset():  # type: ignore[no-untyped-def]
    return load_rules()


def replay(folder: Path, ruleset, *, force: bool = False) -> LiveDiagnosis:  # type: ignore[no-untyped-def]
    """Feed a fixture's log_history entry by entry, the way the Trainer callback sees it."""
    state_file = folder / "trainer_state.json"
    state = json.loads(state_file.read_text())
    meta = load_run(folder).meta.model_copy(deep=True)
    meta.finished, meta.summary = None, {}
    live = LiveDiagnosis(rules=ruleset, meta=meta, name=folder.name)
    for entry in state["log_history"]:
        if "step" not in entry:
            continue
        live.add_log({k: v for k, v in entry.items() if k != "step"}, entry["step"])
        live.check(force=force)
    return live


def test_every_builtin_rule_says_whether_it_runs_live() -> None:
    files = [p for p in builtin_rules_dir().rglob("*.yaml") if not p.name.endswith(".test.yaml")]
    assert files
    for p in files:
        data = yaml.safe_load(p.read_text())
        if set(data) == {"groups"}:  # named rule groups (rules/groups.yaml), not a rule
            continue
        assert isinstance(data.get("live"), bool), f"{p.name}: no live: true|false"
    rules = load_rules()
    live = {r.id for r in rules if r.live}
    # whole-run rules wait for the end; rules that make sense on a prefix may fire live
    assert {"still-improving-at-end", "healthy-converged", "run-ended-early"}.isdisjoint(live)
    assert {"warmup-longer-than-run", "loss-not-decreasing", "eval-too-rare"}.isdisjoint(live)
    assert {"loss-diverging", "loss-nonfinite-after-grad-growth", "loss-spike"} <= live


@pytest.mark.parametrize("name", ["nan_filter_off", "nan_filter_on"])
def test_blow_up_is_flagged_while_training(ruleset, name: str) -> None:  # type: ignore[no-untyped-def]
    live = replay(FIXTURES / name, ruleset)
    crit = [e for e in live.events if e.finding.severity == Severity.CRITICAL]
    assert crit, [e.finding.rule_id for e in live.events]
    nan_step = live.view(full=True).get("train/grad_norm")
    assert nan_step is not None
    first_bad = int(nan_step.steps[~np.isfinite(nan_step.values)][0])
    # the first critical finding comes no later than the first non-finite value
    assert crit[0].step <= first_bad
    # each finding is reported once
    ids = [e.finding.rule_id for e in live.events]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    "name", ["healthy_cosine", "healthy_log_every_step", "healthy_small_batch", "healthy_short"]
)
def test_healthy_runs_stay_quiet_live(ruleset, name: str) -> None:  # type: ignore[no-untyped-def]
    live = replay(FIXTURES / name, ruleset)
    assert [e.finding.rule_id for e in live.events] == []
    d, late = live.finish()
    assert d.verdict == "healthy"
    assert all(not e.live for e in late)


def test_forced_evaluation_agrees_with_the_schedule(ruleset) -> None:  # type: ignore[no-untyped-def]
    scheduled = replay(FIXTURES / "bad_batch_spike", ruleset)
    every = replay(FIXTURES / "bad_batch_spike", ruleset, force=True)
    assert every.evaluations > scheduled.evaluations
    spike = {e.finding.rule_id: e.step for e in scheduled.events}
    spike_every = {e.finding.rule_id: e.step for e in every.events}
    assert "loss-spike" in spike and "loss-spike" in spike_every
    # the band sentinel makes the scheduled check evaluate at once on the spike
    assert spike["loss-spike"] == spike_every["loss-spike"]


def test_end_only_rules_wait_for_the_end(ruleset) -> None:  # type: ignore[no-untyped-def]
    live = LiveDiagnosis(rules=ruleset, meta=RunMeta(max_steps=1000, warmup_steps=2000))
    for s in range(1, 61):
        live.add(s, {"train/loss": 3.0 - 0.01 * s, "train/learning_rate": 1e-5 * s})
        live.check(force=True)
    assert "warmup-longer-than-run" not in [e.finding.rule_id for e in live.events]
    _, late = live.finish()
    assert "warmup-longer-than-run" in [e.finding.rule_id for e in late]


def test_view_is_bounded_and_keeps_the_newest_points_raw() -> None:
    live = LiveDiagnosis(rules=load_rules(), max_points=256, tail=64)
    rng = np.random.default_rng(0)
    n = 50_000
    values = 2.0 + rng.random(n)
    for i in range(n):
        live.add_point("train/loss", i + 1, float(values[i]))
    view = live.view().get("train/loss")
    assert view is not None
    width = live._columns["train/loss"].bins.width
    assert len(view) <= 256 + 64 + width
    assert np.all(np.diff(view.steps) > 0)
    # the newest 64 points are there unbinned
    assert view.steps[-64:].tolist() == list(range(n - 63, n + 1))
    np.testing.assert_allclose(view.values[-64:], values[-64:])
    # a bin holds the mean of its points and is labelled with its last step
    first = int(view.steps[0])
    np.testing.assert_allclose(view.values[0], values[:first].mean())
    assert first == width
    full = live.view(full=True).get("train/loss")
    assert full is not None and len(full) == n


def test_non_finite_point_makes_its_bin_nan() -> None:
    live = LiveDiagnosis(rules=load_rules(), max_points=16, tail=4)
    for i in range(100):
        live.add_point("train/loss", i + 1, float("nan") if i == 10 else 1.0)
    v = live.view().get("train/loss")
    assert v is not None
    bad = v.steps[~np.isfinite(v.values)]
    assert bad.size == 1 and bad[0] >= 11


def test_relogged_and_resumed_steps() -> None:
    live = LiveDiagnosis(rules=load_rules())
    for s in range(1, 11):
        live.add_log({"loss": 2.0, "epoch": s / 10}, s)
    live.add_log({"eval_loss": 2.5, "epoch": 1.0}, 10)  # the same step, another entry
    live.add_log({"loss": 1.0}, 6)  # resumed from an earlier checkpoint
    loss = live.view().get("train/loss")
    assert loss is not None
    assert loss.steps.tolist() == [1, 2, 3, 4, 5, 6] and loss.values[-1] == 1.0
    assert live.meta.resumed and live.meta.resumed_at_steps == [6]
    ev = live.view().get("eval/loss")
    assert ev is not None and ev.steps.tolist() == [10]


def test_summary_entry_is_metadata_not_a_point() -> None:
    live = LiveDiagnosis(rules=load_rules())
    live.add_log({"loss": 2.0}, 1)
    live.add_log({"train_runtime": 12.0, "train_loss": 2.0}, 1)
    assert live.meta.summary["train_runtime"] == 12.0
    assert live.entries == 1


def test_severity_threshold() -> None:
    assert severity_at_least(Severity.CRITICAL, "warning")
    assert not severity_at_least(Severity.WARNING, "critical")
    assert not severity_at_least(Severity.CRITICAL, "never")
    assert not severity_at_least(Severity.CRITICAL, None)


def test_importing_curvediag_does_not_import_transformers() -> None:
    code = (
        "import sys, curvediag, curvediag.live, curvediag.integrations; "
        "curvediag.diagnose; "
        "assert 'transformers' not in sys.modules and 'torch' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_live_checks_drop_out_of_range_numbers_like_a_full_diagnosis(ruleset) -> None:  # type: ignore[no-untyped-def]
    """A training loop can hand the callback 1e308 (an overflowed loss): the live checks see the
    run the way diagnose() does, without the out-of-range point, and raise no numpy warnings."""
    import warnings

    live = LiveDiagnosis(rules=ruleset, meta=RunMeta(max_steps=200))
    for i in range(1, 120):
        loss = 1e308 if i == 60 else 2.0 * 0.99**i
        live.add(i, {"train/loss": loss, "train/grad_norm": 1.0}, wall_time=1.7e9 + i)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        events = live.check(force=True)
    live_ids = {ev.finding.rule_id for ev in events}
    final, _ = live.finish()
    assert "loss-spike" not in live_ids, live_ids
    assert "loss-spike" not in final.finding_ids


def test_a_live_rl_run_is_judged_by_its_return_as_from_its_files() -> None:
    # a PPO learner's loss grows with the returns its critic predicts: watched live, as read
    # from its files, its loss is set aside and its episode return judged
    live = LiveDiagnosis(rules=load_rules())
    for i in range(40):
        live.add(
            (i + 1) * 2048,
            {
                "train/loss": 5.0 + i,
                "train/value_loss": 10.0 + 2 * i,
                "train/rollout/ep_rew_mean": 10.0 + i,
            },
        )
    import curvediag

    run = live.view(full=True)
    assert "train/loss" not in run.metrics and "train/rl_loss" in run.metrics
    assert "loss-diverging" not in curvediag.diagnose(run).finding_ids
