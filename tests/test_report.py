"""The markdown postmortem: sections, timeline events and numbers, next-run changes, plots,
determinism, the ``report`` command and the Diagnosis API."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import HF_FIXTURES

import curvediag
from curvediag.cli import main
from curvediag.model import Diagnosis, Run, RunMeta, Series
from curvediag.report import build_timeline, next_run_changes, postmortem_markdown
from curvediag.report._fmt import elapsed, num, setting_value, utc
from curvediag.report.context import ReportContext
from curvediag.report.markdown import SECTIONS
from curvediag.report.next_run import MAX_CHANGES, nice

REPORTED = ["healthy_cosine", "overfit", "nan_filter_on", "bad_batch_spike", "clipping_always"]

_CACHE: dict[str, Diagnosis] = {}


def _diag(name: str) -> Diagnosis:
    if name not in _CACHE:
        _CACHE[name] = curvediag.diagnose(HF_FIXTURES / name)
    return _CACHE[name]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fixture's report, written once by the command line."""
    out = {}
    for name in REPORTED:
        d = tmp_path_factory.mktemp(name)
        assert main(["report", str(HF_FIXTURES / name), "-o", str(d)]) == 0
        out[name] = d
    return out


def _timeline_rows(md: str) -> list[tuple[int, str, str]]:
    """(step, event title, details) of the timeline table."""
    section = md.split("## Timeline", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\| (\d+) \|.*\| \*\*(.+?)\*\* \| (.*) \|$", line)
        if m:
            rows.append((int(m.group(1)), m.group(2), m.group(3)))
    return rows


def _next_run(md: str) -> list[str]:
    section = md.split("## Next run", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if re.match(r"\d+\. ", line)]


@pytest.mark.parametrize("name", REPORTED)
def test_report_sections_in_order(reports: dict[str, Path], name: str) -> None:
    md = (reports[name] / "postmortem.md").read_text(encoding="utf-8")
    d = _diag(name)
    assert md.startswith(f"# curvediag postmortem: {name}\n")
    positions = [md.index(s + "\n") for s in SECTIONS]
    assert positions == sorted(positions)
    assert f"**Verdict: {d.verdict.upper()}**" in md
    for key in ("| Source |", "| Read as |", "| Progress |", "| Wall time |"):
        assert key in md
    assert "Hugging Face Trainer state + TensorBoard events + W&B run folder" in md
    for f in d.findings:
        assert f"(`{f.rule_id}`)" in md and f.evidence in md
    for s in d.skipped:
        assert f"`{s.rule_id}`" in md.split("## Skipped rules", 1)[1]
    assert f"curvediag report {HF_FIXTURES / name} -o" in md


@pytest.mark.parametrize("name", REPORTED)
def test_timeline_matches_the_diagnosis(reports: dict[str, Path], name: str) -> None:
    md = (reports[name] / "postmortem.md").read_text(encoding="utf-8")
    d = _diag(name)
    events = build_timeline(d)
    rows = _timeline_rows(md)
    assert [(r[0], r[1]) for r in rows] == [(e.step, e.title) for e in events]
    assert [e.step for e in events] == sorted(e.step for e in events)
    # every event has the epoch and the wall-clock time (all fixtures log both)
    assert all(e.epoch is not None and e.wall_time is not None for e in events)
    assert events[-1].title == "Training finished" and events[-1].step == d.run.last_step
    by_title = {r[1]: r for r in rows}
    ctx = ReportContext.of(d)
    best = by_title["Best eval loss"]
    assert best[0] == ctx.features["eval.min_step"]
    assert num(ctx.features["eval.min"]) in best[2]


def test_overfit_report(reports: dict[str, Path]) -> None:
    md = (reports["overfit"] / "postmortem.md").read_text(encoding="utf-8")
    rows = {r[1]: r for r in _timeline_rows(md)}
    assert rows["Best eval loss"][0] == 50
    assert "3.663" in rows["Best eval loss"][2] and "`checkpoint-100`" in rows["Best eval loss"][2]
    assert rows["Warmup ends"][0] == 25
    assert "| 50 | 8.33 |" in md  # epoch column
    steps = _next_run(md)
    assert steps[0].startswith("1. `load_best_model_at_end: False -> True`")
    assert "`save_steps: 100 -> 10`" in steps[0]
    assert steps[1].startswith("2. `max_steps: 300 -> 50`")
    assert any("`weight_decay: 0.0 -> 0.05`" in s for s in steps)
    assert "300 of 300 steps (100%), epoch 50 of 50, finished" in md
    assert "16.8 s (train_runtime)" in md


def test_nan_report(reports: dict[str, Path]) -> None:
    md = (reports["nan_filter_on"] / "postmortem.md").read_text(encoding="utf-8")
    d = _diag("nan_filter_on")
    rows = {r[1]: r for r in _timeline_rows(md)}
    assert rows["First non-finite loss"][0] == d.features["nan.first_step"] == 26
    assert "hidden by logging_nan_inf_filter" in rows["First non-finite loss"][2]
    assert rows["First non-finite grad norm"][0] == 24
    assert rows["Gradient norm climbs"][0] == 18
    assert rows["Warmup longer than the run"][0] == 2
    assert "NaN/Inf" in rows["Best eval loss"][2]  # later evals were non-finite
    steps = _next_run(md)
    # SGD at 30 is far above any usual range (top 1.0): into the range, not just 10x lower
    assert steps[0].startswith("1. `learning_rate: 30.0 -> 0.1`")
    assert "far above the usual range" in steps[0]
    assert any("`max_grad_norm: 0.0 -> 1.0`" in s for s in steps)
    assert "**Verdict: CRITICAL**" in md


def test_spike_report(reports: dict[str, Path]) -> None:
    md = (reports["bad_batch_spike"] / "postmortem.md").read_text(encoding="utf-8")
    rows = {r[1]: r for r in _timeline_rows(md)}
    spike = rows["Loss spike"]
    assert spike[0] == 220 and "6.023" in spike[2] and "examples 3504-3519" in spike[2]
    steps = _next_run(md)
    assert steps[0].startswith("1. Inspect the batch of step 220")


def test_clipping_report(reports: dict[str, Path]) -> None:
    md = (reports["clipping_always"] / "postmortem.md").read_text(encoding="utf-8")
    rows = {r[1]: r for r in _timeline_rows(md)}
    assert rows["Clipping saturated"][0] == 15
    assert "max_grad_norm=0.1 on 100.0%" in rows["Clipping saturated"][2]
    steps = _next_run(md)
    assert steps[0].startswith("1. `learning_rate: 0.3 -> 0.1`")
    assert any("`max_grad_norm: 0.1 -> 1.0`" in s for s in steps)
    assert "clipped on 100.0% of the logged steps (max_grad_norm=0.1)" in md


def test_healthy_report(reports: dict[str, Path]) -> None:
    md = (reports["healthy_cosine"] / "postmortem.md").read_text(encoding="utf-8")
    assert "**Verdict: HEALTHY**" in md
    assert "Nothing to change" in md and "trained cleanly" in md
    titles = [r[1] for r in _timeline_rows(md)]
    assert "First non-finite loss" not in titles and "Loss spike" not in titles


@pytest.mark.parametrize("name", REPORTED)
def test_plots_written_and_non_trivial(reports: dict[str, Path], name: str) -> None:
    from PIL import Image

    md = (reports[name] / "postmortem.md").read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert links == ["loss.png", "learning_rate.png", "grad_norm.png"]
    for link in links:
        assert not Path(link).is_absolute()
        path = reports[name] / link
        assert path.stat().st_size > 15_000
        with Image.open(path) as im:
            assert im.size == (1000, 440)
            pixels = np.asarray(im.convert("RGB"))
        colours = np.unique(pixels.reshape(-1, 3), axis=0)
        assert len(colours) > 100  # lines, text and markers, not a blank canvas
        assert float((pixels < 128).mean()) > 0.005  # some dark ink (text, axes)


def test_same_input_same_bytes(tmp_path: Path) -> None:
    src = str(HF_FIXTURES / "overfit")
    out = tmp_path / "r"
    assert main(["report", src, "-o", str(out)]) == 0
    first = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert main(["report", src, "-o", str(out)]) == 0
    second = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert first["postmortem.md"] == second["postmortem.md"]
    assert first == second  # the PNGs too: fixed dpi, no software/time metadata
    # the markdown does not depend on the process either
    proc = subprocess.run(
        [sys.executable, "-m", "curvediag.cli", "report", src, "-o", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.returncode == 0
    assert (out / "postmortem.md").read_bytes() == first["postmortem.md"]


def test_no_plots(tmp_path: Path) -> None:
    assert main(["report", str(HF_FIXTURES / "overfit"), "-o", str(tmp_path), "--no-plots"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["postmortem.md"]
    md = (tmp_path / "postmortem.md").read_text(encoding="utf-8")
    assert "## Plots" not in md and ".png" not in md and "--no-plots" in md


def test_report_options_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(HF_FIXTURES / "overfit")
    args = ["report", src, "-o", str(tmp_path), "--no-plots", "--set", "overfitting.min_rise=0.9"]
    assert main(args) == 0
    md = (tmp_path / "postmortem.md").read_text(encoding="utf-8")
    assert "(`overfitting`)" not in md and "--set overfitting.min_rise=0.9" in md
    capsys.readouterr()
    assert main(["report", str(tmp_path / "nope"), "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("curvediag: error:")


def test_api_to_markdown_and_plot() -> None:
    from matplotlib.figure import Figure

    d = _diag("overfit")
    md = d.to_markdown()
    assert md == postmortem_markdown(d) == d.to_markdown()
    assert "## Plots" not in md and "## Timeline" in md and "## Next run" in md
    figs = d.plot()
    assert list(figs) == ["loss", "learning_rate", "grad_norm"]
    assert all(isinstance(f, Figure) for f in figs.values())
    ax = figs["loss"].axes[0]
    assert ax.get_yscale() == "log"  # 4.05 -> 0.086 spans decades
    assert ax.get_xlabel() == "optimizer step"
    labels = ax.get_legend_handles_labels()[1]
    assert "best eval 3.663 (step 50)" in labels
    grad_labels = figs["grad_norm"].axes[0].get_legend_handles_labels()[1]
    assert "max_grad_norm = 1.0" in grad_labels


def test_diagnose_format_markdown_prints_the_postmortem(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["diagnose", str(HF_FIXTURES / "overfit"), "--format", "markdown"])
    out = capsys.readouterr().out
    assert out.startswith("# curvediag postmortem: overfit") and "## Next run" in out


def test_changepoints_join_the_timeline_when_computed() -> None:
    feats_cp = {
        "cp.largest_jump_step": 120,
        "cp.largest_jump": 0.5,
        "cp.jump_kept": True,
        "cp.flat_from_step": 200,
        "cp.steps": "40,120,200",
    }
    # a run whose loss really steps up at 120 and is flat from 200 on
    from curvediag.testing.synth import make_run

    run = make_run({"train/loss": "2.0-0.02x11 2.9-0.01x8 2.82x10"}, every=10)
    d = curvediag.diagnose(run)
    feats = {**d.features, **feats_cp}
    events = build_timeline(d.model_copy(update={"features": feats}))
    cps = [(e.step, e.title) for e in events if e.kind == "changepoint"]
    assert cps == [(120, "Loss level jumps"), (200, "Loss flattens")]
    jump = next(e for e in events if e.step == 120 and e.kind == "changepoint")
    assert "+50.0%" in jump.detail and "3 change points" in jump.detail
    # a jump too small to matter stays off the timeline
    feats["cp.largest_jump"] = 0.01
    events = build_timeline(d.model_copy(update={"features": feats}))
    assert [e.step for e in events if e.kind == "changepoint"] == [200]
    # the overfit run's train loss keeps falling through 120 and after 200: neither "jumps" nor
    # "flattens" holds in its data, so the timeline says neither
    d = _diag("overfit")
    events = build_timeline(d.model_copy(update={"features": {**d.features, **feats_cp}}))
    assert [e.title for e in events if e.kind == "changepoint"] == []


def _synthetic_run(finished: bool = False) -> Run:
    steps = np.arange(10, 1010, 10)
    t0 = 1_700_000_000.0
    wall = t0 + steps * 2.5
    loss = 3.0 * np.exp(-steps / 400) + 0.5
    return Run(
        source="memory",
        format="csv",
        name="synthetic",
        meta=RunMeta(finished=finished, max_steps=2000, learning_rate=1e-4),
        metrics={
            "train/loss": Series(name="train/loss", steps=steps, values=loss, wall_time=wall),
            "train/learning_rate": Series(
                name="train/learning_rate", steps=steps, values=np.full(steps.size, 1e-4)
            ),
            "system/samples_per_second": Series(
                name="system/samples_per_second",
                steps=steps,
                values=np.where(steps > 700, 20.0, 100.0),
                wall_time=wall,
            ),
            "system/memory_allocated": Series(
                name="system/memory_allocated", steps=steps, values=10 + steps / 100
            ),
        },
    )


def test_system_plots_wall_clock_and_crash(tmp_path: Path) -> None:
    from curvediag.report.writer import render_report

    d = curvediag.diagnose(_synthetic_run())
    path = render_report(d, tmp_path)
    md = path.read_text(encoding="utf-8")
    assert "![Throughput](throughput.png)" in md and "![Memory](memory.png)" in md
    assert (tmp_path / "throughput.png").stat().st_size > 10_000
    assert (tmp_path / "memory.png").stat().st_size > 10_000
    events = build_timeline(d)
    end = events[-1]
    assert end.title == "Logs end (no final summary)" and end.step == 1000
    assert end.wall_time == pytest.approx(1_700_000_000.0 + 2500.0)
    assert "1000 of 2000 steps (50%)" in md and "did not finish" in md
    assert f"| 1000 | {utc(end.wall_time)[11:19]} | {elapsed(2475.0)} |" in md
    assert "| epoch |" not in md  # no epochs logged: no epoch column


def test_next_run_is_ordered_and_single_minded() -> None:
    for name in REPORTED:
        changes = next_run_changes(_diag(name))
        keys = [c.key for c in changes]
        assert len(keys) == len(set(keys)) and len(changes) <= MAX_CHANGES
        for c in changes:
            if c.is_setting:
                assert c.change.startswith(f"`{c.setting}: ")
    assert next_run_changes(_diag("healthy_cosine")) == []
    crit = next_run_changes(_diag("nan_filter_on"))
    assert crit[0].rule_id == "loss-nonfinite-after-grad-growth"
    assert (crit[0].setting, crit[0].current, crit[0].proposed) == ("learning_rate", 30.0, 0.1)
    # one change per setting: the lower-lr proposals of the other findings were folded into it
    assert [c.setting for c in crit].count("learning_rate") == 1


def test_next_run_brings_a_tiny_learning_rate_up_into_the_usual_range() -> None:
    # a real run (benchmarks/real_runs/ts_gec_vietnamese): the LR peaks at 9.97e-9
    run = Path(__file__).resolve().parents[1] / "benchmarks/real_runs/ts_gec_vietnamese"
    changes = next_run_changes(curvediag.diagnose(run))
    lr = [c for c in changes if c.setting == "learning_rate"]
    assert len(lr) == 1 and lr[0].rule_id == "lr-far-below-range"
    assert lr[0].current == pytest.approx(9.97e-9, rel=1e-3) and lr[0].proposed == 1e-5
    assert "far below" in lr[0].why


def test_logging_starts_says_where_the_train_loss_was_first_logged() -> None:
    # a real run (benchmarks/real_runs/ts_spam_tweets): evaluations from step 50, the first train
    # loss (3.743) and learning rate only at step 500
    run = Path(__file__).resolve().parents[1] / "benchmarks/real_runs/ts_spam_tweets"
    (start,) = [e for e in build_timeline(curvediag.diagnose(run)) if e.kind == "start"]
    assert start.step == 50
    assert "train loss 3.743 (first logged at step 500)" in start.detail
    # where both start together nothing is added
    (start,) = [e for e in build_timeline(_diag("healthy_linear")) if e.kind == "start"]
    assert "first logged at" not in start.detail


def test_an_undertrained_healthy_run_gets_train_longer_not_nothing_to_change() -> None:
    # the still-improving finding is info, but it says the checkpoint is undertrained: the plan
    # and the TL;DR must not say "nothing to change" beside it
    d = _diag("healthy_constant_warmup")
    assert d.verdict == "healthy" and "still-improving-at-end" in d.finding_ids
    (change,) = next_run_changes(d)
    assert change.rule_id == "still-improving-at-end" and change.setting == "num_train_epochs"
    md = postmortem_markdown(d)
    assert "nothing needs to change" not in md and "Nothing to change" not in md
    assert "to do better, try: `num_train_epochs: 1.0 -> 2`" in md
    # the TL;DR names what its "end" figure is
    assert "(median of the last 8 logs)" in md
    # a healthy run with nothing to improve keeps saying so
    assert "nothing needs to change" in postmortem_markdown(_diag("healthy_cosine"))


def test_formatting_helpers() -> None:
    assert [nice(x) for x in (0.000667, 0.1, 3.0, 1.5e-5)] == [5e-4, 0.1, 3.0, 2e-5]
    assert nice(0.3 / 3, below=0.3) == 0.1 and nice(1e-6 * 10, above=1e-6) == 1e-5
    assert setting_value(2e-4) == "2e-4" and setting_value(1e-06) == "1e-6"
    assert setting_value(0.1) == "0.1" and setting_value(1.0) == "1.0"
    assert setting_value(True) == "True" and setting_value(None) == "unset"
    assert num(28590.123) == "2.859e4" and num(float("nan")) == "NaN" and num(3.66270) == "3.663"
    assert (
        elapsed(4.24) == "4.2 s"
        and elapsed(725) == "12 min 05 s"
        and elapsed(11220) == "3 h 07 min"
    )
    assert utc(0) == "1970-01-01 00:00:00 UTC"


def test_help_stays_light() -> None:
    code = (
        "import sys, curvediag.cli as c; p = c._build_parser(); "
        "heavy = [m for m in ('numpy', 'matplotlib', 'pydantic') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
