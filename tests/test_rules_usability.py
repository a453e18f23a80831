"""Writing your own rules: `rules test DIR` as the README says, one-line `when:` errors, and
warnings for --map targets no rule reads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import HF_FIXTURES

from curvediag.cli import main
from curvediag.errors import RuleSchemaError
from curvediag.ruleset.loader import load_rule_file
from curvediag.ruleset.testing import rule_files_beside, run_rule_tests

RULE = """\
id: tail-too-high
title: Final loss above the level we ship
category: convergence
severity: warning
requires: [train/loss]
params: {level: 2.0}
when:
  all:
    - {feature: loss.tail, op: ">", value: $level}
    - {series: train/loss, op: ">", value: $level, for: 5, as: high}   # persistence
evidence: "The last tenth sits at {loss.tail:.3f}, above {level} since step {high.step}."
why: Checkpoints above this loss fail our eval gate.
fixes: ["Train longer or raise the learning rate."]
"""

TESTS = """\
rule: tail-too-high
cases:
  - {name: high, expect: fire, series: {train/loss: "3.0-0.001x50"}}
  - {name: low, expect: silent, series: {train/loss: "1.5-0.001x50"}}
"""


@pytest.fixture
def my_rules(tmp_path: Path) -> Path:
    d = tmp_path / "my_rules"
    d.mkdir()
    (d / "tail-too-high.yaml").write_text(RULE, encoding="utf-8")
    (d / "tail-too-high.test.yaml").write_text(TESTS, encoding="utf-8")
    return d


def test_rules_test_dir_exactly_as_the_readme_says(
    my_rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", "test", str(my_rules)]) == 0
    out = capsys.readouterr().out
    assert "2 passed, 0 failed" in out and "no such rule" not in out
    # one test file, or the rule passed again with --rules: still loaded once
    assert main(["rules", "test", str(my_rules / "tail-too-high.test.yaml")]) == 0
    assert main(["rules", "test", str(my_rules), "--rules", str(my_rules)]) == 0
    f = str(my_rules / "tail-too-high.yaml")
    assert main(["rules", "test", str(my_rules), "--rules", f]) == 0
    capsys.readouterr()


def test_rules_test_dir_fails_when_a_case_fails(
    my_rules: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (my_rules / "tail-too-high.yaml").write_text(RULE.replace("2.0}", "5.0}"), encoding="utf-8")
    assert main(["rules", "test", str(my_rules)]) == 1
    assert "FAIL tail-too-high :: high" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("values", "passes", "detail"),
    [
        ("{loss.tail: [2.5, 3.5]}", True, ""),
        # a quiet case states why it is quiet, and that is checked too
        ("{loss.tail: [0.0, 0.5]}", False, "loss.tail = "),
        # YAML 1.1 reads 2.0e5 as text: a clear failure, not a TypeError from deep inside
        ("{loss.tail: [2.0e5, 3.0e5]}", False, "are not both numbers"),
    ],
)
def test_expect_values_are_checked_and_bad_bounds_named(
    my_rules: Path, values: str, passes: bool, detail: str
) -> None:
    quiet = values.replace("[2.5, 3.5]", "[1.3, 1.5]") if passes else values
    (my_rules / "tail-too-high.test.yaml").write_text(
        TESTS.replace(
            'series: {train/loss: "3.0-0.001x50"}}',
            f'series: {{train/loss: "3.0-0.001x50"}}, expect_values: {values}}}',
        ).replace(
            'series: {train/loss: "1.5-0.001x50"}}',
            f'series: {{train/loss: "1.5-0.001x50"}}, expect_values: {quiet}}}',
        ),
        encoding="utf-8",
    )
    results = run_rule_tests([my_rules])
    assert [r.passed for r in results] == [passes, passes], [r.detail for r in results]
    assert all(detail in r.detail for r in results)


def test_run_rule_tests_loads_rules_beside_the_tests(my_rules: Path) -> None:
    assert rule_files_beside([my_rules]) == [my_rules / "tail-too-high.yaml"]
    results = run_rule_tests([my_rules])
    assert [(r.case, r.got) for r in results] == [("high", "fire"), ("low", "silent")]


def test_builtin_folder_is_not_loaded_twice(capsys: pytest.CaptureFixture[str]) -> None:
    from curvediag.ruleset.loader import builtin_rules_dir

    assert rule_files_beside([builtin_rules_dir() / "stability"]) == []


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ('{feature: loss.tail, op: "=>", value: 2}', "op '=>' is not allowed"),
        ('{feature: loss.tail, op: ">", value: 2, for: 3}', "unknown key 'for'"),
        ('{series: train/loss, op: ">", value: 2, fro: 3}', "did you mean 'for'"),
        ('{series: train/loss, op: "==", value: 2}', "op '==' is not allowed"),
        ("{feature: loss.tail, value: 2}", "needs 'op'"),
        ("{featur: loss.tail, op: '>', value: 2}", "found 'featur'"),
        ("{any: []}", "when.all[0].any: expected a non-empty list"),
        ("3", "a condition is a mapping"),
    ],
)
def test_when_errors_are_one_readable_line(tmp_path: Path, condition: str, expected: str) -> None:
    text = RULE.replace(
        '    - {feature: loss.tail, op: ">", value: $level}\n', f"    - {condition}\n"
    )
    assert text != RULE
    p = tmp_path / "tail-too-high.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(RuleSchemaError) as info:
        load_rule_file(p)
    msg = str(info.value)
    assert "\n" not in msg
    assert str(p) in msg and "'tail-too-high'" in msg
    assert expected in msg, msg
    assert "AnyOf" not in msg and "NotOf" not in msg and "when.all[0]" in msg


def test_nested_when_error_names_its_place(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        id: nested
        title: nested rule
        category: convergence
        severity: warning
        when:
          any:
            - {feature: loss.tail, op: ">", value: 1}
            - not: {all: [{feature: loss.tail, op: "~", value: 1}]}
        evidence: "xxx"
        why: yyy
        fixes: ["z"]
        """)
    p = tmp_path / "nested.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(RuleSchemaError, match=r"when\.any\[1\]\.not\.all\[0\]: op '~'"):
        load_rule_file(p)


def test_map_to_unknown_target_warns(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(HF_FIXTURES / "overfit")
    main(["diagnose", path, "--map", "loss=train/los", "--fail-on", "never"])
    err = capsys.readouterr().err
    assert "warning: --map 'loss=train/los'" in err and "did you mean 'train/loss'" in err
    main(["diagnose", path, "--map", "loss=accuracy", "--fail-on", "never"])
    assert "not a canonical metric name" in capsys.readouterr().err
    main(["diagnose", path, "--map", "my_acc=eval/accuracy", "--fail-on", "never"])
    assert "warning" not in capsys.readouterr().err
