"""One way through: diagnose once, and everything downstream reuses what it computed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import curvediag
from curvediag.features import registry
from curvediag.report.markdown import postmortem_markdown
from curvediag.report.writer import render_report
from curvediag.testing.synth import make_run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "overfit"


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count every feature-group computation."""
    calls: Counter[str] = Counter()
    for name, group in list(registry.GROUPS.items()):

        def counting(ctx: Any, _name: str = name, _fn: Any = group.compute) -> Any:
            calls[_name] += 1
            return _fn(ctx)

        monkeypatch.setitem(registry.GROUPS, name, replace(group, compute=counting))
    return calls


def test_diagnose_then_report_computes_each_feature_group_once(
    computed: Counter[str], tmp_path: Path
) -> None:
    d = curvediag.diagnose(FIXTURE)
    during_diagnosis = sum(computed.values())
    assert during_diagnosis > 0
    assert max(computed.values()) == 1
    render_report(d, tmp_path / "report", plots=False)
    postmortem_markdown(d)
    # the report completed the diagnosis' own cache: no group ran twice
    assert max(computed.values()) == 1, computed
    before = sum(computed.values())
    render_report(d, tmp_path / "again", plots=False)
    assert sum(computed.values()) == before  # a second report computes nothing at all


def test_a_report_of_a_diagnosis_computes_nothing_again_and_builds_each_part_once(
    computed: Counter[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    from curvediag.report import plots, timeline

    d = curvediag.diagnose(FIXTURE)
    assert computed == Counter(dict.fromkeys(registry.GROUPS, 1))  # every group, once
    computed.clear()
    built: Counter[str] = Counter()
    parts = [(timeline, "_build"), (plots, "plot_figures")]
    parts += [(plots, name) for name in ("_loss", "_lr", "_grad", "_throughput", "_memory")]
    for module, name in parts:
        monkeypatch.setattr(module, name, _counted(built, name, getattr(module, name)))
    render_report(d, tmp_path / "report", plots=True)
    assert sum(computed.values()) == 0, computed  # the report reads the diagnosis' features
    assert built["_build"] == 1 and built["plot_figures"] == 1, built  # the timeline, the plots
    assert built["_loss"] == 1 and max(built.values()) == 1, built  # each panel drawn once


def _counted(calls: Counter[str], key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[key] += 1
        return fn(*args, **kwargs)

    return counting


def test_a_diagnosis_read_back_from_json_still_reports(tmp_path: Path) -> None:
    # no feature cache travels with JSON: the report computes what it needs itself
    d = curvediag.diagnose(FIXTURE)
    again = curvediag.Diagnosis.model_validate(
        {
            "run": d.run,
            "findings": d.findings,
            "skipped": d.skipped,
            "features": d.features,
            "rules_evaluated": d.rules_evaluated,
        }
    )
    assert again._feature_cache is None
    assert postmortem_markdown(again) == postmortem_markdown(d)


def test_batch_and_python_give_the_same_diagnosis() -> None:
    rows = curvediag.diagnose_many([FIXTURE])
    d = curvediag.diagnose(FIXTURE)
    row = rows.iloc[0] if hasattr(rows, "iloc") else rows[0]
    assert row["verdict"] == d.verdict


def test_verdict_thresholds_are_settings_a_user_can_override() -> None:
    # a run that stopped at 85% of its plan: early by default (< 90%), not with a lower bar
    meta = {"max_steps": 200, "finished": False}
    run = make_run({"train/loss": {"gen": "decay", "n": 17, "start": 3.0, "end": 1.0}}, meta=meta)
    assert "run-ended-early" in curvediag.diagnose(run).finding_ids
    relaxed = curvediag.diagnose(run, overrides={"features.ended_early_progress": 0.8})
    assert "run-ended-early" not in relaxed.finding_ids
    # confidence grows with the points logged: full at confidence_full_points
    d = curvediag.diagnose(run)
    f = next(f for f in d.findings if f.rule_id == "run-ended-early")
    lower = curvediag.diagnose(run, overrides={"features.confidence_full_points": 1000})
    g = next(f for f in lower.findings if f.rule_id == "run-ended-early")
    assert g.confidence < f.confidence
