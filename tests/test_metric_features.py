"""Rules over any metric: the metric.<series>.<stat> family, direction from the name, and the
score.* group the built-in eval-score rules use."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import curvediag
from curvediag.errors import RuleSchemaError
from curvediag.features import FeatureSet, Unavailable, is_feature
from curvediag.features.metrics import direction, metric_stats, pick_score_metric
from curvediag.ruleset.loader import load_rule_file
from curvediag.testing.synth import make_run


@pytest.mark.parametrize(
    ("name", "higher"),
    [
        ("eval/accuracy", True),
        ("eval/acc", True),
        ("eval/f1", True),
        ("eval/macro_f1", True),
        ("eval/bleu", True),
        ("eval/rouge1", True),
        ("eval/rougeL", True),
        ("eval/reward", True),
        ("eval/roc_auc", True),
        # a recommender's precision@5 as prec (holdout23, missed at its blind measurement)
        ("eval/prec", True),
        ("eval/precision@5", True),
        ("eval/recall@10", True),
        ("eval/hits@1", True),
        # a detector's mAP at an IoU threshold: Ultralytics' columns (tune17
        # csv17d_kitti_yolov8m_detect had its noisy precision(B) taken as its score)
        ("eval/mAP50(B)", True),
        ("eval/mAP50-95(B)", True),
        ("eval/mAP75", True),
        ("eval/loss", False),
        ("eval/wer", False),
        ("eval/cer", False),
        ("eval/perplexity", False),
        ("train/loss", False),
        ("eval/runtime", None),
        ("eval/samples_per_second", None),
    ],
)
def test_direction_from_the_name(name: str, higher: bool | None) -> None:
    assert direction(name) is higher


def test_metric_stats_higher_is_better() -> None:
    steps = np.array([10, 20, 30, 40, 50, 60])
    values = np.array([0.5, 0.7, 0.8, 0.75, 0.7, 0.6])
    st = metric_stats(steps, values, True)
    assert st["best"] == 0.8 and st["best_step"] == 30
    assert st["gain"] == pytest.approx(0.3)
    assert st["tail"] == pytest.approx(0.65)
    assert st["drop_from_best"] == pytest.approx(0.15)
    assert st["giveback"] == pytest.approx(0.5)
    assert st["points_after_best"] == 3 and st["worsened_after_best"] is True
    assert st["last_rank"] == pytest.approx(4 / 6)
    assert st["q90"] == pytest.approx(float(np.quantile(values, 0.9)))


def test_metric_stats_lower_is_better_and_unknown_direction() -> None:
    steps = np.arange(1, 6)
    values = np.array([0.6, 0.4, 0.3, 0.35, 0.4])
    st = metric_stats(steps, values, False)
    assert st["best"] == 0.3 and st["best_step"] == 3
    assert st["gain"] == pytest.approx(0.3)
    assert st["drop_from_best"] == pytest.approx(0.075)
    plain = metric_stats(steps, values, None)
    assert plain["best"] is None and plain["min"] == 0.3 and plain["max"] == 0.6


def test_family_names_and_feature_set() -> None:
    assert is_feature("metric.eval/accuracy.best")
    assert is_feature("metric.eval/rouge1.f.giveback")  # a series name with a dot
    assert not is_feature("metric.eval/accuracy.bestest")
    assert not is_feature("metric..best")
    run = make_run({"train/loss": "2.0-0.01x50", "eval/accuracy": "0.5 0.7 0.8 0.75 0.7"})
    fs = FeatureSet(run)
    assert fs.get("metric.eval/accuracy.best") == 0.8
    assert fs.get("metric.eval/accuracy.higher_is_better") is True
    assert isinstance(fs.get("metric.eval/f1.best"), Unavailable)
    assert fs.computed()["metric.eval/accuracy.best_step"] == 30


USER_RULE = """\
id: accuracy-gave-back
title: Accuracy gave back what it gained
category: generalization
severity: warning
requires: [eval/accuracy]
params: {share: 0.3}
when:
  all:
    - {feature: metric.eval/accuracy.worsened_after_best, op: "==", value: true}
    - {feature: metric.eval/accuracy.giveback, op: ">=", value: $share}
onset: metric.eval/accuracy.best_step
evidence: >-
  Accuracy peaked at {metric.eval/accuracy.best:.3f} (step {metric.eval/accuracy.best_step})
  and ended at {metric.eval/accuracy.last:.3f}.
why: The checkpoint you keep is not the best one.
fixes: ["Keep the checkpoint from step {metric.eval/accuracy.best_step}."]
"""


def test_user_rule_on_its_own_metric(tmp_path: Path) -> None:
    rule_dir = tmp_path / "my_rules"
    rule_dir.mkdir()
    (rule_dir / "accuracy-gave-back.yaml").write_text(USER_RULE, encoding="utf-8")
    falls = make_run(
        {"train/loss": "2.0-0.01x50", "eval/accuracy": "0.5 0.7 0.8 0.75 0.7 0.62"}, every=10
    )
    d = curvediag.diagnose(falls, rules=[rule_dir])
    f = next(f for f in d.findings if f.rule_id == "accuracy-gave-back")
    assert f.onset_step == 30
    assert "peaked at 0.800 (step 30) and ended at 0.620" in f.evidence
    assert f.fixes == ["Keep the checkpoint from step 30."]
    rises = make_run({"train/loss": "2.0-0.01x50", "eval/accuracy": "0.5 0.6 0.7 0.8 0.81"})
    assert "accuracy-gave-back" not in curvediag.diagnose(rises, rules=[rule_dir]).finding_ids
    no_acc = make_run({"train/loss": "2.0-0.01x50"})
    d = curvediag.diagnose(no_acc, rules=[rule_dir])
    assert "accuracy-gave-back" in [s.rule_id for s in d.skipped]


def test_unknown_statistic_is_a_load_error(tmp_path: Path) -> None:
    p = tmp_path / "accuracy-gave-back.yaml"
    p.write_text(USER_RULE.replace(".giveback", ".give_back"), encoding="utf-8")
    with pytest.raises(RuleSchemaError, match=r"unknown feature 'metric.eval/accuracy.give_back'"):
        load_rule_file(p)


def test_score_metric_choice() -> None:
    run = make_run(
        {
            "train/loss": "2.0-0.01x50",
            "eval/loss": "2.0 1.9",
            "eval/runtime": "3 3",
            "eval/samples_per_second": "100 100",
            "eval/wer": "0.5 0.4",
            "eval/f1": "0.5 0.6",
            "eval/accuracy": "0.5 0.6",
        }
    )
    assert pick_score_metric(run) == "eval/accuracy"
    del run.metrics["eval/accuracy"]
    assert pick_score_metric(run) == "eval/f1"
    del run.metrics["eval/f1"]
    assert pick_score_metric(run) == "eval/wer"
    del run.metrics["eval/wer"]
    assert pick_score_metric(run) is None


def test_builtin_score_rules_are_listed_with_their_features() -> None:
    text = textwrap.dedent("""\
        eval-score-falls-after-best
        eval-score-at-chance
        eval-score-never-improves""").split()
    ids = curvediag.load_rules().ids
    assert set(text) <= set(ids)
