"""The command line: output formats, exit codes, one-line errors, rule commands."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, HF_FIXTURES

from curvediag.cli import main

STATE = DATA / "trainer_state"


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["diagnose", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "--fail-on" in out and "exit codes" in out


def test_diagnose_text_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = STATE / "nan_literals.json"
    assert main(["diagnose", str(p)]) == 1  # critical finding, default --fail-on critical
    out = capsys.readouterr().out
    assert "CRITICAL" in out and "verdict: CRITICAL" in out
    assert main(["diagnose", str(p), "--fail-on", "never"]) == 0
    capsys.readouterr()
    healthy = STATE / "old_no_grad_norm.json"
    assert main(["diagnose", str(healthy), "--fail-on", "warning"]) == 0


def test_diagnose_json_and_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    p = STATE / "nan_literals.json"
    main(["diagnose", str(p), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "critical" and data["findings"]
    main(["diagnose", str(p), "--format", "markdown"])
    md = capsys.readouterr().out
    assert md.startswith("# curvediag postmortem") and "## Findings" in md


def test_set_overrides_and_bad_override(capsys: pytest.CaptureFixture[str]) -> None:
    p = STATE / "resumed.json"
    assert main(["diagnose", str(p), "--set", "nosuch.param=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("curvediag: error:") and "nosuch" in err


def test_bad_input_is_one_line_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "trainer_state.json"
    bad.write_text('{"log_history": [')
    proc = subprocess.run(
        [sys.executable, "-m", "curvediag.cli", "diagnose", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "truncated" in lines[0]


def test_rules_list_explain_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "list"]) == 0
    out = capsys.readouterr().out
    assert "overfitting" in out and "loss-nonfinite-at-start" in out
    assert main(["rules", "explain", "overfitting"]) == 0
    out = capsys.readouterr().out
    assert "min_rise" in out and "Why it matters" in out
    assert main(["rules", "explain", "nosuch"]) == 2
    capsys.readouterr()
    assert main(["rules", "schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "curvediag rule"


def test_rules_test_command_on_a_user_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tail-high.yaml").write_text(
        "id: tail-high\ntitle: Tail too high\ncategory: convergence\nseverity: warning\n"
        "requires: [train/loss]\nparams: {level: 2.0}\n"
        'when: {feature: loss.tail, op: ">", value: $level}\n'
        'evidence: "tail {loss.tail}"\nwhy: because\nfixes: [fix it]\n'
    )
    (tmp_path / "tail-high.test.yaml").write_text(
        "rule: tail-high\ncases:\n"
        '  - {name: high, expect: fire, series: {train/loss: "3x10"}}\n'
        '  - {name: low, expect: silent, series: {train/loss: "1x10"}}\n'
    )
    code = main(["rules", "test", str(tmp_path), "--rules", str(tmp_path / "tail-high.yaml")])
    out = capsys.readouterr().out
    assert code == 0 and out.strip().endswith("2 passed, 0 failed")
    (tmp_path / "tail-high.test.yaml").write_text(
        'rule: tail-high\ncases:\n  - {name: wrong, expect: silent, series: {train/loss: "3x10"}}\n'
    )
    assert main(["rules", "test", str(tmp_path), "--rules", str(tmp_path)]) == 1


def test_builtin_rule_tests_pass_from_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "test"]) == 0
    assert " 0 failed" in capsys.readouterr().out


@pytest.mark.skipif(not (HF_FIXTURES / "overfit").is_dir(), reason="fixtures not generated")
def test_demo_command_diagnoses_overfitting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(HF_FIXTURES / "overfit")]) == 0
    out = capsys.readouterr().out
    assert "overfitting" in out and "verdict: WARNING" in out


def test_features_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["features"]) == 0
    assert "grad.clip_fraction" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["diagnose", "batch"])
def test_bad_map_option_is_a_one_line_error(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, str(STATE / "resumed.json"), "--map", "no-equals-sign"]) == 2
    assert "expected RAW=CANONICAL" in capsys.readouterr().err


SUBCOMMANDS = [
    ["diagnose"],
    ["report"],
    ["batch"],
    ["watch"],
    ["features"],
    ["rules"],
    ["rules", "list"],
    ["rules", "explain"],
    ["rules", "validate"],
    ["rules", "test"],
    ["rules", "schema"],
]
#: subcommands that read a run: their help names every input format
READS_RUNS = {"diagnose", "report", "batch", "watch"}


@pytest.mark.parametrize("argv", SUBCOMMANDS, ids=" ".join)
def test_every_subcommand_help_teaches(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out
    examples = out.split("examples:", 1)[1]
    assert examples.count("curvediag " + argv[0]) >= 2, examples
    if argv[0] in READS_RUNS:
        for fmt in ("trainer_state.json", "TensorBoard", "W&B", "Lightning", "CSV"):
            assert fmt in out, (argv, fmt)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_report_shows_its_stages_on_a_terminal_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "overfit"
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["report", str(fixture), "-o", str(tmp_path / "a"), "--no-plots"]) == 0
    drawn = tty.getvalue()
    for stage in ("reading...", "diagnosing...", "writing...", "3/3 done"):
        assert stage in drawn, drawn
    assert drawn.endswith("\n")
    # not a terminal: no bar at all
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert main(["report", str(fixture), "-o", str(tmp_path / "b"), "--no-plots"]) == 0
    assert sys.stderr.getvalue() == ""  # type: ignore[attr-defined]


def test_shell_completion_uses_argcomplete_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    seen: list[object] = []
    fake = types.ModuleType("argcomplete")
    fake.autocomplete = seen.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "argcomplete", fake)
    monkeypatch.delenv("_ARGCOMPLETE", raising=False)
    assert main(["features"]) == 0
    assert seen == []  # an ordinary run never touches it
    monkeypatch.setenv("_ARGCOMPLETE", "1")
    assert main(["features"]) == 0
    assert len(seen) == 1 and "diagnose" in seen[0].format_help()  # type: ignore[attr-defined]
    # not installed: completion is silently unavailable, the command still runs
    monkeypatch.setitem(sys.modules, "argcomplete", None)
    assert main(["features"]) == 0
