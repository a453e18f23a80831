"""Notebook and pandas views: short reprs, HTML/markdown displays, to_frame tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import HF_FIXTURES

import curvediag
from curvediag.model import Diagnosis, Finding, Run, RunMeta, Series, Severity
from curvediag.testing.synth import make_run

HOSTILE = '<script>alert("x")</script>&'


@pytest.fixture(scope="module")
def overfit() -> Diagnosis:
    return curvediag.diagnose(HF_FIXTURES / "overfit")


def test_reprs_are_short_and_name_the_essentials(overfit: Diagnosis) -> None:
    run = overfit.run
    for obj in (overfit, run, overfit.findings[0], run.metrics["train/loss"]):
        assert len(repr(obj)) < 250, repr(obj)
    assert "verdict='warning'" in repr(overfit) and "overfitting" in repr(overfit)
    assert f"last_step={run.last_step}" in repr(run)
    assert "onset_step=50" in repr(overfit.findings[0])
    loss = run.metrics["train/loss"]
    assert f"{len(loss)} points" in repr(loss) and str(loss) == repr(loss)
    assert str(run) == repr(run)


def test_run_to_frame_wide_has_every_point_and_wall_time() -> None:
    run = make_run(
        {"train/loss": "3.0-0.1x10", "eval/accuracy": {"values": "0.5+0.05x5", "every": 20}},
        wall_time={"train/loss": "100+10x10"},
    )
    wide = run.to_frame()
    assert list(wide.columns) == ["step", "train/loss", "eval/accuracy", "wall_time"]
    loss = run.metrics["train/loss"]
    acc = run.metrics["eval/accuracy"]
    steps = sorted(set(loss.steps.tolist()) | set(acc.steps.tolist()))
    assert wide["step"].tolist() == steps
    assert wide["step"].dtype == np.int64
    by_step = wide.set_index("step")
    np.testing.assert_allclose(by_step.loc[loss.steps, "train/loss"], loss.values)
    np.testing.assert_allclose(by_step.loc[acc.steps, "eval/accuracy"], acc.values)
    assert loss.wall_time is not None
    np.testing.assert_allclose(by_step.loc[loss.steps, "wall_time"], loss.wall_time)
    assert by_step["eval/accuracy"].isna().sum() == len(steps) - len(acc)


def test_run_to_frame_long_and_empty() -> None:
    run = make_run({"train/loss": "3.0-0.1x4", "eval/loss": "2.5 2.4"})
    long = run.to_frame("long")
    assert list(long.columns) == ["step", "metric", "value", "wall_time"]
    assert len(long) == 6
    assert long.groupby("metric").size().to_dict() == {"train/loss": 4, "eval/loss": 2}
    assert long["wall_time"].isna().all()
    empty = Run(source="x", format="y", name="z").to_frame()
    assert list(empty.columns) == ["step", "wall_time"] and empty.empty
    with pytest.raises(ValueError, match="wide"):
        run.to_frame("tall")  # type: ignore[arg-type]


def test_real_run_to_frame_matches_series(overfit: Diagnosis) -> None:
    wide = overfit.run.to_frame()
    for name, s in overfit.run.metrics.items():
        col = wide.set_index("step").loc[s.steps, name].to_numpy()
        np.testing.assert_allclose(col, s.values)
    assert wide["wall_time"].notna().all()


def test_diagnosis_to_frame_one_row_per_finding(overfit: Diagnosis) -> None:
    frame = overfit.to_frame()
    assert frame["rule_id"].tolist() == overfit.finding_ids
    row = frame.iloc[0]
    f = overfit.findings[0]
    assert row["onset_step"] == f.onset_step
    assert (row["start_step"], row["end_step"]) == f.step_range
    assert row["fixes"] == f.fixes and row["severity"] == "warning"
    healthy = curvediag.diagnose(HF_FIXTURES / "healthy_cosine")
    empty = healthy.to_frame()
    assert len(empty) == len(healthy.findings)
    assert list(empty.columns) == list(frame.columns)


def test_html_shows_verdict_findings_fixes_and_a_plot(overfit: Diagnosis) -> None:
    page = overfit._repr_html_()
    assert "WARNING" in page and "overfitting" in page
    assert "<svg" in page and "<polyline" in page
    for fix in overfit.findings[0].fixes:
        assert fix.replace('"', "&quot;").split(":")[0] in page
    assert "<ol>" in page
    md = overfit._repr_markdown_()
    assert md.startswith("**WARNING**") and "`overfitting`" in md
    assert len(md) < 5000
    assert "<svg" in overfit.run._repr_html_()
    assert "| train/loss |" in overfit.run._repr_markdown_()
    assert "overfitting" in overfit.findings[0]._repr_html_()


def _hostile_diagnosis() -> Diagnosis:
    s = Series(name=HOSTILE, steps=[1, 2, 3], values=[3.0, 2.0, math.nan])
    run = Run(
        source=HOSTILE,
        format=HOSTILE,
        name=HOSTILE,
        meta=RunMeta(finished=False),
        metrics={"train/loss": s.model_copy(update={"name": "train/loss"}), HOSTILE: s},
        warnings=[HOSTILE],
    )
    f = Finding(
        rule_id="x-rule",
        title=HOSTILE,
        category="c",
        severity=Severity.CRITICAL,
        confidence=0.5,
        evidence=HOSTILE,
        why=HOSTILE,
        fixes=[HOSTILE],
        related=[HOSTILE],
        onset_step=2,
    )
    return Diagnosis(run=run, findings=[f], rules_evaluated=1)


def test_html_escapes_every_run_string() -> None:
    d = _hostile_diagnosis()
    for page in (d._repr_html_(), d.run._repr_html_(), d.findings[0]._repr_html_()):
        assert "<script" not in page
        assert "&lt;script&gt;" in page
    assert "<script" not in d._repr_markdown_()
    assert "<script" not in d.run._repr_markdown_()


def test_missing_matplotlib_is_a_one_line_hint(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['matplotlib'] = None;"
        "from curvediag.cli import main;"
        "sys.exit(main(['report', sys.argv[1], '-o', sys.argv[2]]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(HF_FIXTURES / "overfit"), str(tmp_path / "r")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'curvediag[plot]'" in lines[0], out.stderr
    assert "--no-plots" in lines[0]
    code_no_plots = code.replace("sys.argv[2]]", "sys.argv[2], '--no-plots']")
    ok = subprocess.run(
        [sys.executable, "-c", code_no_plots, str(HF_FIXTURES / "overfit"), str(tmp_path / "t")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode in (0, 1), ok.stderr
    assert (tmp_path / "t" / "postmortem.md").is_file()
