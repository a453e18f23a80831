"""Hostile and odd input, each tried as a new user's folder would contain it (issue 12).

Numbers out of range, rule files and overrides that try to do harm, batch trees with links,
odd names and the batch's own outputs, text that breaks markdown or the terminal, and report
targets that are not folders. Every case must end in a clear curvediag error or a warning,
never in a traceback.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

import curvediag
from curvediag.errors import CurvediagError
from curvediag.model import Run, Series

HUGE_INT = int("9" * 300)


def _state(path: Path, entries: list[dict[str, object]], **extra: object) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    f = path / "trainer_state.json"
    f.write_text(json.dumps({"log_history": entries, **extra}), encoding="utf-8")
    return f


def _clean_entries(n: int = 60) -> list[dict[str, object]]:
    return [{"step": i, "loss": 2.0 - 0.01 * i, "learning_rate": 1e-3} for i in range(1, n + 1)]


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad_step",
    [HUGE_INT, -HUGE_INT, 1e300, float("inf"), float("-inf"), 2**63, 2**53 + 1],
    ids=["300-digits", "neg-300-digits", "1e300", "inf", "-inf", "2**63", "2**53+1"],
)
def test_trainer_state_steps_out_of_range_are_dropped_and_counted(
    tmp_path: Path, bad_step: object
) -> None:
    entries = [*_clean_entries(), {"step": bad_step, "loss": 0.5}, {"step": 70, "loss": 0.4}]
    run = curvediag.load_run(_state(tmp_path / "run", entries))
    loss = run.metrics["train/loss"]
    assert loss.steps.tolist() == [*range(1, 61), 70]
    assert 0.5 not in loss.values.tolist()
    assert any("dropped 1 point(s)" in w and "step" in w for w in run.warnings), run.warnings


@pytest.mark.parametrize("bad_value", [1e308, -1e308, 1e200, HUGE_INT, -HUGE_INT])
def test_trainer_state_values_out_of_range_are_dropped_and_counted(
    tmp_path: Path, bad_value: object
) -> None:
    entries = [*_clean_entries(), {"step": 61, "loss": bad_value, "grad_norm": bad_value}]
    run = curvediag.load_run(_state(tmp_path / "run", entries))
    assert run.metrics["train/loss"].steps.tolist() == list(range(1, 61))
    assert "train/grad_norm" not in run.metrics or len(run.metrics["train/grad_norm"]) == 0
    assert any("dropped 2 value(s) out of range" in w for w in run.warnings), run.warnings


def test_trainer_state_infinite_values_are_kept_as_evidence(tmp_path: Path) -> None:
    entries = [*_clean_entries(), {"step": 61, "loss": float("inf")}]
    run = curvediag.load_run(_state(tmp_path / "run", entries))
    assert math.isinf(run.metrics["train/loss"].values[-1])
    assert not any("dropped" in w for w in run.warnings)


def test_trainer_state_metadata_out_of_range_is_ignored(tmp_path: Path) -> None:
    f = _state(
        tmp_path / "run",
        _clean_entries(),
        global_step=float("inf"),
        max_steps=HUGE_INT,
        best_metric=1e308,
        num_train_epochs=1e300,
    )
    run = curvediag.load_run(f)
    assert run.meta.global_step is None
    assert run.meta.max_steps is None
    assert run.meta.num_train_epochs is None


def test_jsonl_history_steps_and_values_out_of_range(tmp_path: Path) -> None:
    rows = [{"_step": i, "train/loss": 2.0 - 0.01 * i} for i in range(50)]
    rows += [{"_step": 1e300, "train/loss": 1.0}, {"_step": 51, "train/loss": 1e308}]
    f = tmp_path / "history.jsonl"
    lines = [json.dumps(r) for r in rows] + ['{"_step": 52, "train/loss": ' + "9" * 400 + "}"]
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = curvediag.load_run(f)
    assert run.metrics["train/loss"].steps.tolist() == list(range(50))
    text = " ".join(run.warnings)
    assert "1 value(s) on rows without _step are left out" in text  # the 1e300 step
    assert "dropped 2 value(s) out of range" in text


def test_csv_huge_steps_and_ragged_rows_are_counted(tmp_path: Path) -> None:
    f = tmp_path / "log.csv"
    f.write_text(
        "step,loss\n1,2.0\n2,1.9,7\n3,1.8\n1e300,1.7\ninf,1.6\n"
        + "9" * 40
        + ",1.5\n7,1e308\n8,1.4\n9,1.3,1,2\n",
        encoding="utf-8",
    )
    run = curvediag.load_run(f)
    assert run.metrics["train/loss"].steps.tolist() == [1, 3, 8]
    text = " ".join(run.warnings)
    assert "skipped 2 CSV row(s) with more cells than the header (line 3, 10)" in text
    assert "dropped 3 point(s) or row(s) whose step" in text
    assert "dropped 1 value(s) out of range" in text


def test_tensorboard_csv_huge_step(tmp_path: Path) -> None:
    f = tmp_path / "train_loss.csv"
    f.write_text(
        "Wall time,Step,Value\n1.7e9,1,2.0\n1.7e9,2,1.9\n1e300,3,1.8\n1.7e9,1e300,1.7\n",
        encoding="utf-8",
    )
    run = curvediag.load_run(f)
    s = run.metrics["train/loss"]
    assert s.steps.tolist() == [1, 2, 3]
    assert s.wall_time is not None and math.isnan(s.wall_time[2])
    assert any("step" in w and "dropped 1" in w for w in run.warnings)


def _api_run(big: float) -> Run:
    n = 400
    steps = np.arange(1, n + 1)
    loss = np.linspace(2.0, 1.0, n)
    loss[200:300] = np.where(np.arange(100) % 2, big, -big)
    return Run(
        source="api",
        format="api",
        name="api",
        metrics={
            "train/loss": Series(name="train/loss", steps=steps, values=loss),
            "train/grad_norm": Series(name="train/grad_norm", steps=steps, values=np.full(n, big)),
            "train/learning_rate": Series(
                name="train/learning_rate", steps=steps, values=np.full(n, big)
            ),
        },
    )


@pytest.mark.parametrize("big", [1e308, 1e150])
def test_diagnose_and_report_of_huge_values_do_not_overflow(tmp_path: Path, big: float) -> None:
    from curvediag.report import render_report

    run = _api_run(big)
    before = run.metrics["train/loss"].values.copy()
    d = curvediag.diagnose(run)
    assert d.verdict in ("healthy", "warning", "critical")
    render_report(d, tmp_path / "rep")
    assert (tmp_path / "rep" / "postmortem.md").is_file()
    np.testing.assert_array_equal(run.metrics["train/loss"].values, before)  # input untouched
    if big > 1e150:
        assert any("out of range" in w for w in d.run.warnings)
        assert not any("out of range" in w for w in run.warnings)


def test_change_points_guard_overflow() -> None:
    from curvediag.errors import InsufficientDataError
    from curvediag.features._stats import LossScale
    from curvediag.features.changepoints import segments

    v = np.linspace(2.0, 1.0, 400)
    v[200:300] = np.where(np.arange(100) % 2, 1e308, -1e308)
    with pytest.raises(InsufficientDataError, match="too large"):
        segments(np.arange(400), v, LossScale(v))


def test_errors_are_curvediag_errors() -> None:
    assert issubclass(curvediag.IngestError, CurvediagError)


def test_wandb_history_rows_out_of_range() -> None:
    """The rows of a run-*.wandb log (decoded) go through the same checks."""
    from curvediag.ingest.wandb_run import history_to_run

    rows: list[dict[str, object]] = [
        {"_step": i, "train/global_step": i * 10, "train/loss": 2.0 - 0.01 * i} for i in range(40)
    ]
    rows.append({"_step": 40, "train/global_step": HUGE_INT, "train/loss": 1.0})
    rows.append({"_step": 41, "train/global_step": 1e300, "train/loss": 1.0})
    rows.append({"_step": 42, "train/global_step": 420, "train/loss": HUGE_INT})
    rows.append({"_step": 43, "train/global_step": 430, "train_runtime": 1e308})
    run = history_to_run(rows, source="x", name="x", fmt="wandb-run")
    assert run.metrics["train/loss"].steps.tolist() == [i * 10 for i in range(40)]
    text = " ".join(run.warnings)
    assert "dropped 2 point(s)" in text and "dropped 1 value(s) out of range" in text
    assert "train_runtime" not in run.meta.summary


# --------------------------------------------------------------------------------------------
# Rule files, overrides and rule tests
# --------------------------------------------------------------------------------------------
_RULE = """\
id: my-rule
title: Final loss above the level we ship
category: convergence
severity: warning
requires: [train/loss]
params: {{level: 2.0}}
when:
  all:
    - {{feature: loss.tail, op: ">", value: $level}}
evidence: "The tail sits at {{loss.tail{spec}}}, above {{level}}."
why: Checkpoints above this loss fail our eval gate.
fixes: ["Train longer."]
"""


@pytest.mark.parametrize("spec", [":999999999", ":>999999999", ":x<99999", ":.999999999f", ":{x}"])
def test_rule_template_format_spec_must_be_safe(tmp_path: Path, spec: str) -> None:
    from curvediag.errors import RuleSchemaError
    from curvediag.ruleset.loader import load_rule_file

    f = tmp_path / "my-rule.yaml"
    f.write_text(_RULE.format(spec=spec), encoding="utf-8")
    with pytest.raises(RuleSchemaError, match=r"my-rule|not allowed|not a feature"):
        load_rule_file(f)


@pytest.mark.parametrize("spec", ["", ":.3g", ":+.1%", ":.2f", ":8.2e", ":,.0f", ":g"])
def test_rule_template_ordinary_specs_pass(tmp_path: Path, spec: str) -> None:
    from curvediag.ruleset.loader import load_rule_file

    f = tmp_path / "my-rule.yaml"
    f.write_text(_RULE.format(spec=spec), encoding="utf-8")
    assert [r.id for r in load_rule_file(f)] == ["my-rule"]


def test_render_template_ignores_unsafe_spec_of_a_rule_built_by_hand() -> None:
    from curvediag.ruleset.engine import render_template

    out = render_template("x={v:999999999} y={w:.2f}", {"v": 1.5, "w": 2.0})
    assert out == "x=1.5 y=2.00"


def test_rules_validate_cli_refuses_huge_format_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from curvediag.cli import main

    f = tmp_path / "my-rule.yaml"
    f.write_text(_RULE.format(spec=":999999999"), encoding="utf-8")
    assert main(["rules", "validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert "'999999999' is not allowed" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("overfitting.min_rise=.nan", "not a finite number"),
        ("overfitting.min_rise=.inf", "not a finite number"),
        ("overfitting.min_rise=-.inf", "not a finite number"),
        ("overfitting.min_rise=" + "9" * 400, "not a finite number"),
        ("overfitting.min_rise=[[[[", "not a valid YAML value"),
        ("overfitting.min_rise=" + "[" * 3000 + "]" * 3000, "YAML value|one value"),
        ("overfitting.min_rise={a: 1}", "expected one value"),
        ("overfitting.min_rise=true", "is not a number"),
        ("overfitting.min_rise=fast", "is not a number"),
        ("features.spike_z=.nan", "not a finite number"),
        ("overfitting.min_rise=", "is not a number"),
    ],
)
def test_set_with_broken_or_wrong_values_names_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], item: str, message: str
) -> None:
    from curvediag.cli import main

    f = _state(tmp_path / "run", _clean_entries())
    assert main(["diagnose", str(f), "--set", item]) == 2
    err = capsys.readouterr().err
    key = item.split("=", 1)[0]
    assert key in err, err
    assert re.search(message, err), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "case",
    [
        {"series": {"train/loss": "2.0x99999999999999"}},
        {"series": {"train/loss": "2.0x" + "9" * 50}},
        {"series": {"train/loss": "1e300*1e300x50"}},
        {"series": {"train/loss": "1e400x50"}},
        {"series": {"train/loss": "2.0-0.01x50"}, "every": 10**300},
        {"series": {"train/loss": {"values": "2.0-0.01x50", "first_step": 10**30}}},
        {"series": {"train/loss": {"values": "2.0-0.01x50", "every": 1e300}}},
        {"series": {"train/loss": {"gen": "decay", "n": 10**15}}},
        {"series": {"train/loss": [1, 2, int("9" * 400)]}},
        {"series": {"train/loss": [1, 2, {"a": 1}]}},
        {"series": {"train/loss": "2.0-0.01x50"}, "meta": {"global_step": 10**300}},
        {"series": {"train/loss": "2.0-0.01x50"}, "overrides": {"loss-spike.min_ratio": ".nan"}},
    ],
)
def test_rules_test_cases_with_absurd_numbers_fail_cleanly(
    tmp_path: Path, case: dict[str, object]
) -> None:
    import yaml

    from curvediag.ruleset.loader import load_rules
    from curvediag.ruleset.testing import run_rule_tests

    f = tmp_path / "loss-spike.test.yaml"
    f.write_text(
        yaml.safe_dump(
            {"rule": "loss-spike", "cases": [{"name": "absurd", "expect": "fire", **case}]}
        ),
        encoding="utf-8",
    )
    results = run_rule_tests([f], ruleset=load_rules())
    assert len(results) == 1
    absurd_input = "1e300*1e300" not in str(case) and "1e400" not in str(case)
    assert results[0].got == "error" if absurd_input else results[0].got != "error", results[0]


# --------------------------------------------------------------------------------------------
# Batch trees
# --------------------------------------------------------------------------------------------
def _good_run(folder: Path, n: int = 60) -> Path:
    return _state(folder, _clean_entries(n), global_step=n, max_steps=n)


def _units(*roots: Path) -> list[tuple[str, str, str]]:
    from curvediag.batch.discover import discover

    return [(u.path, u.kind, u.error) for u in discover([str(r) for r in roots])]


def test_directory_symlink_out_of_the_tree_is_not_followed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _good_run(tree / "ok")
    outside = tmp_path / "outside"
    _good_run(outside / "elsewhere")
    (tree / "to-root").symlink_to("/")
    (tree / "to-outside").symlink_to(outside)
    units = _units(tree)
    paths = {Path(p).name: (kind, error) for p, kind, error in units}
    assert paths["ok"][0] == "hf-trainer"
    for name in ("to-root", "to-outside"):
        assert paths[name][0] == "error" and "outside the tree" in paths[name][1]
    assert not any("elsewhere" in p for p, _, _ in units)


def test_non_utf8_folder_name_does_not_abort_the_batch(tmp_path: Path) -> None:
    from curvediag.batch.runner import run_batch
    from curvediag.batch.table import CsvWriter, JsonlWriter, MarkdownSummary

    tree = tmp_path / "tree"
    _good_run(tree / "fine")
    bad = os.fsencode(tree) + b"/bad\xffname"
    os.mkdir(bad)  # noqa: PTH102 - a bytes path
    _good_run(Path(os.fsdecode(bad)))
    outs = [tmp_path / "t.csv", tmp_path / "t.jsonl", tmp_path / "t.md"]
    stats = run_batch(
        [tree], [CsvWriter(outs[0]), JsonlWriter(outs[1]), MarkdownSummary(outs[2])], jobs=1
    )
    assert stats.rows == 2 and stats.errors == 0
    text = outs[0].read_text(encoding="utf-8")
    assert "bad\\xffname" in text
    assert "bad\\\\xffname" in outs[1].read_text(encoding="utf-8")  # JSON escapes the backslash


def test_batch_twice_into_the_same_tree_skips_its_own_outputs(tmp_path: Path) -> None:
    from curvediag.cli import main

    tree = tmp_path / "tree"
    _good_run(tree / "a")
    _good_run(tree / "b")
    args = ["batch", str(tree), "-q", "--jobs", "1", "--reports", str(tree / "reports")]
    for ext in ("csv", "jsonl", "md", "parquet"):
        args += ["-o", str(tree / f"runs.{ext}")]
    for _ in range(2):
        assert main(args) == 0
        rows = (tree / "runs.csv").read_text(encoding="utf-8").splitlines()
        assert len(rows) == 3, rows  # header + a + b: no row for runs.csv/.jsonl/.parquet
    # and a later batch into another file skips the earlier tables too
    assert main(["batch", str(tree), "-q", "--jobs", "1", "-o", str(tmp_path / "x.csv")]) == 0
    assert len((tmp_path / "x.csv").read_text(encoding="utf-8").splitlines()) == 3


def test_colliding_run_names_get_distinct_report_files(tmp_path: Path) -> None:
    from curvediag.cli import main

    tree = tmp_path / "tree"
    _good_run(tree / "a b")
    _good_run(tree / "a_b")
    _good_run(tree / "a+b")
    rep = tmp_path / "reports"
    assert main(["batch", str(tree), "-q", "--jobs", "1", "--reports", str(rep)]) == 0
    files = sorted(p.name for p in rep.iterdir())
    assert len(files) == 3, files
    bodies = {(rep / f).read_text(encoding="utf-8").splitlines()[0] for f in files}
    assert len(bodies) == 3  # three different runs, none overwritten


def test_bad_dask_scheduler_address_fails_fast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    from curvediag.cli import main

    _good_run(tmp_path / "a")
    t0 = time.perf_counter()
    code = main(["batch", str(tmp_path), "-q", "--engine", "dask", "--scheduler", "not an address"])
    assert code == 2
    assert time.perf_counter() - t0 < 5
    err = capsys.readouterr().err
    assert "not a Dask scheduler address" in err and "Traceback" not in err


def test_unreachable_dask_scheduler_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    from curvediag.batch import runner

    monkeypatch.setattr(runner, "SCHEDULER_TIMEOUT", 1.0)
    client_class = __import__("distributed").Client
    with pytest.raises(CurvediagError, match="cannot reach the Dask scheduler"):
        runner._connect(client_class, "tcp://127.0.0.1:1")


# --------------------------------------------------------------------------------------------
# Text from the run, escaped for each output
# --------------------------------------------------------------------------------------------
EVIL_NAME = "evil`name\n# heading <img src=x onerror=alert(1)> [link](http://x) |pipe| \x1b[31mred"


def _evil_diagnosis(tmp_path: Path) -> curvediag.Diagnosis:
    run = curvediag.load_run(_good_run(tmp_path / "run"))
    run = run.model_copy(update={"name": EVIL_NAME, "warnings": [*run.warnings, EVIL_NAME]})
    run.meta.hyperparameters = {"evil`key|": EVIL_NAME, "lr_scheduler_type": "<b>cos</b>"}
    run.meta.best_model_checkpoint = "out/checkpoint-`1`\n<b>"
    return curvediag.diagnose(run)


def test_escape_helpers() -> None:
    from curvediag import escape

    assert escape.terminal("a\x1b[31mb\nc\r\x07") == "a\\x1b[31mb\nc\\r\\x07"
    assert escape.cell("a\nb\tc\udcff") == "a\\nb\\tc\\xff"
    assert escape.md_text("<b>[x](y)</b> *a* _b_ `c` | d") == (
        "\\<b\\>\\[x\\](y)\\</b\\> \\*a\\* \\_b\\_ \\`c\\` \\| d"
    )
    assert escape.md_text("constant_with_warmup 1.5") == "constant_with_warmup 1.5"
    assert escape.md_text("- item") == "\\- item" and escape.md_text("1. x") == "1\\. x"
    assert escape.md_code("plain") == "`plain`"
    assert escape.md_code("a`b") == "`` a`b ``"
    assert escape.md_code("``") == "``` `` ```"


def test_markdown_postmortem_escapes_run_text(tmp_path: Path) -> None:
    md = _evil_diagnosis(tmp_path).to_markdown()
    title = md.splitlines()[0]
    assert title.startswith("# curvediag postmortem: evil\\`name\\\\n# heading \\<img")
    outside_code = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", md)  # code spans show text as is
    assert not re.search(r"(?<!\\)<(img|b)\b", outside_code)  # HTML only as escaped text
    assert not re.search(r"(?<!\\)\]\(http", outside_code)  # no live link
    assert "\x1b" not in md
    # no line of the document starts with the name's second line as a heading
    assert not any(line.startswith("# heading") for line in md.splitlines())
    # table rows keep their number of cells despite the pipes in the name
    for line in md.splitlines():
        if line.startswith("| Run |"):
            assert line.replace("\\|", "").count("|") == 3, line


def test_terminal_output_escapes_ansi(tmp_path: Path) -> None:
    text = _evil_diagnosis(tmp_path).to_text()
    assert "\x1b" not in text and "\\x1b[31mred" in text


def test_batch_tables_escape_run_text(tmp_path: Path) -> None:
    import csv

    from curvediag.batch.table import CsvWriter, MarkdownSummary, diagnosis_row

    row = diagnosis_row(EVIL_NAME, _evil_diagnosis(tmp_path))
    with (tmp_path / "t.csv").open("w", encoding="utf-8", newline="") as fh:
        w = CsvWriter(fh)
        w.write(row)
        w.close()
    lines = (tmp_path / "t.csv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and "\x1b" not in lines[1]
    cells = next(csv.reader([lines[1]]))
    assert cells[2] == EVIL_NAME.replace("\n", "\\n").replace("\x1b", "\\x1b")
    md = MarkdownSummary(tmp_path / "s.md")
    md.write({**row, "verdict": "warning", "top_finding": "x", "findings": "x", "n_warning": 1})
    md.close()
    text = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert not re.search(r"(?<!\\)<img", text) and "\x1b" not in text
    for line in text.splitlines():
        if "evil" in line and line.startswith("|"):
            assert line.replace("\\|", "").count("|") == 7, line


def test_error_lines_escape_ansi(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from curvediag.cli import main

    bad = tmp_path / "\x1b[2Jevil.csv"
    bad.write_text("not,a\nlog,at all\n", encoding="utf-8")
    assert main(["diagnose", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[2Jevil.csv" in err


# --------------------------------------------------------------------------------------------
# Report targets, stale plots, spreadsheets
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["file", "fifo", "under-a-file", "md-is-a-folder"])
def test_report_onto_something_that_is_not_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    from curvediag.cli import main

    run = _good_run(tmp_path / "run")
    out = tmp_path / "out"
    if target == "file":
        out.write_text("keep me", encoding="utf-8")
    elif target == "fifo":
        os.mkfifo(out)
    elif target == "under-a-file":
        (tmp_path / "f").write_text("keep me", encoding="utf-8")
        out = tmp_path / "f" / "out"
    else:
        (out / "postmortem.md").mkdir(parents=True)
    assert main(["report", str(run), "-o", str(out), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("curvediag: error: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    if target == "file":
        assert out.read_text(encoding="utf-8") == "keep me"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_report_into_unwritable_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from curvediag.cli import main

    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        assert main(["report", str(_good_run(tmp_path / "r")), "-o", str(out)]) == 2
    finally:
        out.chmod(0o700)
    assert "not writable" in capsys.readouterr().err


def test_report_removes_only_its_own_stale_plots(tmp_path: Path) -> None:
    from curvediag.report import render_report

    out = tmp_path / "rep"
    out.mkdir()
    for name in ("throughput.png", "memory.png", "grad_norm.png", "mine.png", "notes.md"):
        (out / name).write_bytes(b"old")
    render_report(curvediag.diagnose(_good_run(tmp_path / "run")), out, plots=False)
    left = sorted(p.name for p in out.iterdir())
    assert left == ["mine.png", "notes.md", "postmortem.md"]


@pytest.mark.parametrize("suffix", [".xlsx", ".xls", ".ods"])
def test_spreadsheet_input_is_refused_by_name(tmp_path: Path, suffix: str) -> None:
    f = tmp_path / f"runs{suffix}"
    f.write_text("step,loss\n1,2.0\n2,1.9\n", encoding="utf-8")  # CSV inside: still refused
    with pytest.raises(curvediag.UnrecognizedFormatError, match=r"not supported.*CSV"):
        curvediag.load_run(f)


# --------------------------------------------------------------------------------------------
# All of it at once: a batch over a tree holding every hostile input
# --------------------------------------------------------------------------------------------
def _hostile_tree(root: Path) -> tuple[Path, list[str], list[str]]:
    """A tree with every hostile input; returns it and the roots to pass to the batch, plus
    the names of the inputs that must become error rows."""
    import shutil

    tree = root / "tree"
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "hf" / "overfit"
    (tree / "overfit").mkdir(parents=True)
    shutil.copy(fixture / "trainer_state.json", tree / "overfit" / "trainer_state.json")
    _good_run(tree / "a b")
    _good_run(tree / "a_b")  # same report file name as "a b"
    _state(
        tree / "huge-numbers",
        [*_clean_entries(), {"step": HUGE_INT, "loss": 1.0}, {"step": 61, "loss": 1e308}],
    )
    inf = tree / "inf-step"
    inf.mkdir()
    (inf / "trainer_state.json").write_text(
        '{"log_history": [' + ", ".join(json.dumps(e) for e in _clean_entries()) + ', {"step": '
        "Infinity, "
        '"loss": 1.0}]}',
        encoding="utf-8",
    )
    bad = Path(os.fsdecode(os.fsencode(tree) + b"/latin1-\xe9t\xe9"))
    _good_run(bad)
    _good_run(tree / "evil\x1b[31m`name\n<b>x")
    (tree / "logs").mkdir()
    (tree / "logs" / "ragged.csv").write_text(
        "step,loss\n1,2.0\n2,1.9,7\n3,1.8\n1e300,1.7\n"
        + "".join(f"{i},1.5\n" for i in range(4, 40)),
        encoding="utf-8",
    )
    # inputs that must each become one error row
    (tree / "broken").mkdir()
    (tree / "broken" / "trainer_state.json").write_text('{"log_history": [', encoding="utf-8")
    (tree / "to-root").symlink_to("/")
    (tree / "logs" / "dangling.csv").symlink_to(root / "nowhere.csv")
    os.mkfifo(tree / "logs" / "pipe.jsonl")
    sheet = root / "runs.xlsx"
    sheet.write_text("step,loss\n1,2\n", encoding="utf-8")
    errors = ["broken", "to-root", "dangling.csv", "pipe.jsonl", "runs.xlsx"]
    return tree, [str(tree), str(sheet)], errors


def _cli(*args: str) -> tuple[int, str, str]:
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from curvediag.cli import main; sys.exit(main())",
            *args,
        ],
        capture_output=True,
        timeout=600,
        env=env,
        check=False,
    )
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode()


def test_batch_over_a_tree_of_every_hostile_input(tmp_path: Path) -> None:
    import csv

    tree, roots, errors = _hostile_tree(tmp_path)
    out = tree / "runs.csv"
    common = [*roots, "-o", str(out), "-o", str(tree / "summary.md"), "--jobs", "1"]
    common += ["--reports", str(tree / "reports")]
    for attempt in range(2):  # the second run meets the first run's outputs in the tree
        code, _, err = _cli("batch", *common, "--fail-on", "never")
        assert code == 0, err
        assert "Traceback" not in err and "\x1b" not in err, err
        with out.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        error_rows = [r for r in rows if r["verdict"] == "error"]
        assert sorted(Path(r["path"]).name for r in error_rows) == sorted(errors), (
            attempt,
            error_rows,
        )
        ok = {Path(r["path"]).name: r for r in rows if r["verdict"] != "error"}
        assert {"overfit", "a b", "a_b", "huge-numbers", "inf-step", "ragged.csv"} <= set(ok)
        assert any(name.startswith("latin1-") for name in ok)
        assert any(name.startswith("evil") and "\\x1b" in name for name in ok)
        assert len(rows) == len(error_rows) + 8
        assert len(list((tree / "reports").iterdir())) == 8
    code, _, err = _cli("batch", *common, "--fail-on", "warning", "-q")
    assert code == 1 and "Traceback" not in err  # the overfit run has a warning


def test_lightning_hparams_with_python_tags_are_never_executed(tmp_path: Path) -> None:
    """A real Lightning hparams.yaml can hold pickled tensors as !!python/object tags; beside a
    metrics.csv it must never be executed or unpickled, and the run still loads."""
    marker = tmp_path / "PWNED"
    (tmp_path / "hparams.yaml").write_text(
        f'class_weights: !!python/object/apply:os.system ["touch {marker}"]\nlr: 0.0001\n'
    )
    rows = ["epoch,step,train_loss,val_loss"] + [
        f"{i // 10},{i},{2.0 - i * 0.01:.4f}," for i in range(1, 60)
    ]
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
    run = curvediag.load_run(tmp_path)
    assert len(run.metrics["train/loss"]) == 59
    curvediag.diagnose(run)
    assert not marker.exists()
