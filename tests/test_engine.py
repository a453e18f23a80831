"""Diagnosis engine: verdicts, echo suppression, skipped rules, templates, features."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import curvediag
from curvediag.features import FEATURES, FeatureSet, Unavailable
from curvediag.model import Severity
from curvediag.ruleset.engine import render_template
from curvediag.testing.synth import curve, expand, make_run


def test_compact_notation() -> None:
    assert expand("1.0x3").tolist() == [1.0, 1.0, 1.0]
    assert expand("2.0-0.5x3 8*0.5x2").tolist() == [2.0, 1.5, 1.0, 8.0, 4.0]
    v = expand("nan inf -inf 1e-3")
    assert math.isnan(v[0]) and v[1] == math.inf and v[2] == -math.inf and v[3] == 1e-3
    with pytest.raises(ValueError, match="bad series token"):
        expand("1.0y3")


def test_curve_is_seeded() -> None:
    a = curve("decay", n=50, noise=0.1, seed=3)
    assert np.array_equal(a, curve("decay", n=50, noise=0.1, seed=3))
    assert not np.array_equal(a, curve("decay", n=50, noise=0.1, seed=4))


def test_divergence_suppresses_its_echoes() -> None:
    run = make_run({"train/loss": "3.0-0.05x30 1.5+0.1x30"})
    d = curvediag.diagnose(run)
    assert d.verdict == "critical"
    assert d.finding_ids[0] == "loss-diverging"
    assert "loss-not-decreasing" not in d.finding_ids


def test_nan_run_is_one_critical_finding_with_folded_evidence() -> None:
    run = make_run(
        {
            "train/loss": "3.0-0.02x30 2.5+0.3x6 0x10",
            "train/grad_norm": "1.0x30 2*2x6 nanx10",
            "train/learning_rate": "0.001x46",
        }
    )
    d = curvediag.diagnose(run)
    assert [f.rule_id for f in d.findings if f.severity == Severity.CRITICAL] == [
        "loss-nonfinite-after-grad-growth"
    ]
    f = d.findings[0]
    assert f.onset_step == 370 and "hidden" in f.evidence
    assert "healthy-converged" not in d.finding_ids
    assert "0.001 -> 0.0001" in f.fixes[0]


def test_missing_signals_are_reported_as_skipped() -> None:
    run = make_run({"train/loss": curve("decay", n=50)})
    d = curvediag.diagnose(run)
    reasons = {s.rule_id: s.reason for s in d.skipped}
    assert "train/grad_norm" in reasons["grad-clipping-saturated"]
    assert "eval/loss" in reasons["overfitting"]
    assert d.rules_evaluated == len(curvediag.load_rules())


def test_healthy_run_gets_only_the_info_finding() -> None:
    run = make_run(
        {
            "train/loss": {"gen": "decay", "n": 100, "noise": 0.03, "seed": 1},
            "eval/loss": {"gen": "decay", "n": 10, "start": 3.1, "end": 1.1, "every": 100},
            "train/learning_rate": "0+0.0001x10 0.001-0.00001x90",
        }
    )
    d = curvediag.diagnose(run)
    assert d.verdict == "healthy"
    assert d.finding_ids == ["healthy-converged"]


def test_findings_sorted_by_severity() -> None:
    run = make_run(
        {
            "train/loss": "3.0-0.05x30 1.5+0.1x30",
            "train/grad_norm": {"gen": "flat", "n": 60, "start": 30.0, "noise": 0.3},
        }
    )
    d = curvediag.diagnose(run)
    ranks = [f.severity.rank for f in d.findings]
    assert ranks == sorted(ranks, reverse=True)


def test_json_round_trip_is_strict_json() -> None:
    run = make_run({"train/loss": "3.0-0.02x30 nanx3"})
    d = curvediag.diagnose(run)

    def reject(token: str) -> None:
        raise AssertionError(f"non-standard JSON token {token}")

    data = json.loads(d.to_json(), parse_constant=reject)
    assert data["verdict"] == "critical"
    assert data["findings"][0]["rule_id"] == "loss-nonfinite-sudden"


def test_template_is_not_code() -> None:
    values = {"a": 1.23456, "b": None}
    assert render_template("x={a:.2f} y={b}", values) == "x=1.23 y=n/a"
    assert render_template("{a.__class__}", values) == "n/a"
    assert render_template("keep[[ drop {b}]] end", values) == "keep end"
    assert render_template("keep[[ show {a:.1f}]]", values) == "keep show 1.2"
    assert render_template("{a:%Y}", values) == "1.23456"


def test_unavailable_feature_is_not_a_value() -> None:
    run = make_run({"train/loss": "1.0 0.9"})
    fs = FeatureSet(run)
    assert isinstance(fs.get("spike.count"), Unavailable)
    assert isinstance(fs.get("eval.min"), Unavailable)
    with pytest.raises(KeyError):
        fs.get("no.such.feature")


def test_every_feature_is_documented() -> None:
    for name, spec in FEATURES.items():
        assert spec.description and "." in name


def test_hidden_nan_feature() -> None:
    run = make_run({"train/loss": "2.0 1.9 1.8 0 0", "train/grad_norm": "1 1 1 nan nan"})
    fs = FeatureSet(run)
    assert fs.get("nan.first_step") == 40 and fs.get("nan.source") == "hidden"
    # a genuine zero loss with finite gradients is not hidden NaN
    run = make_run({"train/loss": "2.0 1.9 1.8 0 0", "train/grad_norm": "1 1 1 0.1 0.1"})
    assert FeatureSet(run).get("nan.first_step") is None


def test_warmup_end_from_lr_curve_and_config() -> None:
    run = make_run({"train/loss": "3x20", "train/learning_rate": "0+0.1x10 1.0x10"})
    assert FeatureSet(run).get("run.warmup_end_step") == 110
    run = make_run({"train/loss": "3x20"}, meta={"warmup_steps": 50})
    assert FeatureSet(run).get("run.warmup_end_step") == 50


def test_scale_free_thresholds() -> None:
    """The same curve shape at 1e-3 and at 1e4 gets the same findings."""
    shape = curve("decay", n=100, start=1.0, end=0.3, noise=0.02, seed=8)
    ids = []
    for scale in (1e-3, 1.0, 1e4):
        d = curvediag.diagnose(make_run({"train/loss": list(shape * scale)}))
        ids.append(d.finding_ids)
    assert ids[0] == ids[1] == ids[2]


def test_a_change_too_small_to_show_has_no_sign() -> None:
    from curvediag.ruleset.engine import render_template

    text = "{a:+.1%} / {b:.1%} / {c:.2f} / {d:+.0%}"
    values = {"a": -2e-5, "b": -0.5, "c": -0.001, "d": -0.26}
    assert render_template(text, values) == "+0.0% / -50.0% / 0.00 / -26%"


def test_a_skip_reason_is_said_once_for_all_the_features_that_need_it() -> None:
    from curvediag.ruleset.engine import _merge_reasons

    reasons = [
        "score.n: the run logged no eval score",
        "score.best: the run logged no eval score",
        "memory.growth: the run logged no memory usage",
        "score.n: the run logged no eval score",
        "the run did not log train/grad_norm",
    ]
    assert _merge_reasons(reasons) == (
        "score.n, score.best: the run logged no eval score; "
        "memory.growth: the run logged no memory usage; the run did not log train/grad_norm"
    )


def test_an_unjudgeable_run_names_the_loss_like_series_it_did_log() -> None:
    # a real GAN (tune14 pl_genrisk_gan_nan): gen_loss and disc_loss, NaN from step 1; the
    # reason said "nothing to judge" as if no loss had been logged
    from pathlib import Path

    import curvediag

    d = curvediag.diagnose(
        Path(__file__).resolve().parents[1] / "benchmarks/real_runs/pl_genrisk_gan_nan"
    )
    assert d.verdict == "inconclusive"
    reason = d.inconclusive_reason or ""
    assert "train/gen_loss (320 of 320 values NaN/Inf)" in reason
    assert "train/disc_loss" in reason and "--map" in reason


def test_eval_far_below_train_quotes_the_two_numbers_of_its_ratio() -> None:
    # the ratio is the last evaluation's eval loss over the train loss around it; the evidence
    # quotes those two numbers (not the run's last eval and last-tenth train loss)
    run = make_run(
        {
            "train/loss": {"gen": "decay", "n": 100, "start": 3.0, "end": 1.0},
            "eval/loss": {"values": [0.05, 0.04, 0.03, 0.03, 0.02], "every": 200},
        }
    )
    d = curvediag.diagnose(run)
    f = next(f for f in d.findings if f.rule_id == "eval-far-below-train")
    e, t = d.features["ratio.eval_at_last"], d.features["ratio.train_at_last"]
    assert d.features["ratio.eval_over_train"] == pytest.approx(e / t)
    assert f"({e:.4g} against a train loss near {t:.4g})" in f.evidence
