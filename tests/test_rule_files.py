"""Rule-file errors fail at load time, naming the file, the rule and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import curvediag
from curvediag.errors import RuleSchemaError
from curvediag.ruleset.loader import load_rule_file, load_rules, parse_overrides
from curvediag.testing.synth import make_run

GOOD = """\
id: {id}
title: Loss above a level
category: convergence
severity: warning
requires: [train/loss]
params: {{level: 2.0}}
when: {{feature: loss.tail, op: ">", value: $level}}
evidence: "Tail loss {{loss.tail:.3f}} is above {{level}}."
why: Because.
fixes: ["Do something."]
"""


def write(tmp_path: Path, text: str, name: str = "my-rule.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_user_rule_loads_and_fires(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.format(id="my-rule"))
    rules = load_rules(p)
    assert "my-rule" in rules.ids
    run = make_run({"train/loss": "3.0x10"})
    d = curvediag.diagnose(run, rules=rules)
    f = next(f for f in d.findings if f.rule_id == "my-rule")
    assert f.evidence == "Tail loss 3.000 is above 2.0."
    d2 = curvediag.diagnose(run, rules=rules, overrides={"my-rule.level": 5})
    assert "my-rule" not in d2.finding_ids


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda t: t.replace("loss.tail, op", "loss.nosuch, op"), "unknown feature 'loss.nosuch'"),
        (
            lambda t: t.replace("value: $level", "value: $lvl"),
            "parameter '$lvl' is used but not declared",
        ),
        (lambda t: t.replace("severity: warning", "severity: fatal"), "severity"),
        (lambda t: t.replace("category: convergence", "category: vibes"), "category"),
        (lambda t: t.replace('fixes: ["Do something."]', "fixes: []"), "fixes"),
        (lambda t: t.replace("{loss.tail:.3f}", "{loss.bogus}"), "template field {loss.bogus}"),
        (lambda t: t.replace('op: ">"', 'op: "=~"'), "op"),
        (lambda t: t + "extra_key: 1\n", "extra_key"),
        # why is printed as written: a field there would show raw in every report
        (lambda t: t.replace("why: Because.", "why: Since step {loss.tail}."), "why is not a"),
        # a number compared with text, directly or through a parameter
        (lambda t: t.replace("value: $level", 'value: "high"'), "compares with text 'high'"),
        (lambda t: t.replace("level: 2.0", 'level: "two"'), "compares with text 'two'"),
    ],
)
def test_invalid_rules_fail_at_load_naming_rule_and_file(
    tmp_path: Path, mutate, problem: str
) -> None:  # type: ignore[no-untyped-def]
    p = write(tmp_path, mutate(GOOD.format(id="my-rule")))
    with pytest.raises(RuleSchemaError) as info:
        load_rule_file(p)
    msg = str(info.value)
    assert str(p) in msg and "my-rule" in msg and problem in msg


def test_id_must_match_file_name(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.format(id="other-rule"), name="my-rule.yaml")
    with pytest.raises(RuleSchemaError, match="must equal the file name"):
        load_rule_file(p)


def test_duplicate_id_across_files(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.format(id="overfitting"), name="overfitting.yaml")
    with pytest.raises(RuleSchemaError, match="duplicate rule id"):
        load_rules(p)


def test_not_yaml_and_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(RuleSchemaError, match="not valid YAML"):
        load_rule_file(write(tmp_path, "id: [unclosed"))
    with pytest.raises(RuleSchemaError, match="mapping"):
        load_rule_file(write(tmp_path, "- just\n- a list\n"))


def test_yaml_tags_are_not_constructed(tmp_path: Path) -> None:
    text = "!!python/object/apply:os.system ['touch /tmp/curvediag-pwned']\n"
    with pytest.raises(RuleSchemaError, match="not valid YAML"):
        load_rule_file(write(tmp_path, text))
    assert not Path("/tmp/curvediag-pwned").exists()


def test_condition_text_is_data_not_code(tmp_path: Path) -> None:
    text = GOOD.format(id="my-rule").replace("value: $level", "value: \"__import__('os')\"")
    text = text.replace("params: {level: 2.0}", "params: {}").replace(" is above {level}", "")
    # ordering a number against text is refused when the rule loads; the text never runs
    with pytest.raises(RuleSchemaError, match="compares with text"):
        load_rules(write(tmp_path, text), builtin=False)
    # equality with text is allowed (features such as score.metric are text): just False
    rules = load_rules(write(tmp_path, text.replace('op: ">"', 'op: "=="')), builtin=False)
    run = make_run({"train/loss": "3.0x10"})
    d = curvediag.diagnose(run, rules=rules)
    assert d.findings == []


def test_multi_rule_file(tmp_path: Path) -> None:
    one = GOOD.format(id="rule-one")
    two = GOOD.format(id="rule-two")
    body = "rules:\n" + "\n".join(
        "  - " + "\n    ".join(r.strip().splitlines()) for r in (one, two)
    )
    rules = load_rules(write(tmp_path, body, name="team.yaml"), builtin=False)
    assert rules.ids == ["rule-one", "rule-two"]


def test_overrides_are_checked() -> None:
    rules = load_rules()
    with pytest.raises(RuleSchemaError, match="no rule with id"):
        rules.with_overrides({"nosuch.x": 1})
    with pytest.raises(RuleSchemaError, match="unknown parameter"):
        rules.with_overrides({"overfitting.nosuch": 1})
    with pytest.raises(RuleSchemaError, match="not a number"):
        rules.with_overrides({"overfitting.min_rise": "lots"})
    with pytest.raises(RuleSchemaError, match="unknown feature setting"):
        rules.with_overrides({"features.nosuch": 1})
    assert parse_overrides(["overfitting.min_rise=0.1"]) == {"overfitting.min_rise": 0.1}
    assert (
        rules.with_overrides({"overfitting.min_rise": "0.2"}).params["overfitting"]["min_rise"]
        == 0.2
    )


def test_missing_rule_file() -> None:
    with pytest.raises(RuleSchemaError, match="not found"):
        load_rules("/nonexistent/rules.yaml")


def test_readme_rule_example_works(tmp_path: Path) -> None:
    import re

    from conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```yaml\n(id: tail-too-high.*?)```", readme, re.S)
    assert block, "README lost its rule example"
    p = write(tmp_path, block.group(1), name="tail-too-high.yaml")
    rules = load_rules(p)
    d = curvediag.diagnose(make_run({"train/loss": "3.0x20"}), rules=rules)
    f = next(f for f in d.findings if f.rule_id == "tail-too-high")
    assert "since step 10" in f.evidence
    quiet = curvediag.diagnose(make_run({"train/loss": "1.0x20"}), rules=rules)
    assert "tail-too-high" not in quiet.finding_ids


def test_named_groups_expand_in_suppresses(tmp_path: Path) -> None:
    (tmp_path / "groups.yaml").write_text(
        "groups:\n  mine: [loss-spike, loss-noisy]\n", encoding="utf-8"
    )
    text = GOOD.format(id="my-rule") + 'suppresses: ["@mine", overfitting]\n'
    write(tmp_path, text)
    rules = load_rules(tmp_path)
    assert rules.get("my-rule").suppresses == ["loss-spike", "loss-noisy", "overfitting"]
    # the built-in non-finite rules fold the whole curve-shape group
    builtin = load_rules()
    assert {"loss-spike", "overfitting", "loss-noisy"} <= set(
        builtin.get("loss-nonfinite-sudden").suppresses
    )


def test_an_unknown_group_or_member_is_a_load_error(tmp_path: Path) -> None:
    write(tmp_path, GOOD.format(id="my-rule") + 'suppresses: ["@nosuch"]\n')
    with pytest.raises(RuleSchemaError, match="unknown rule group '@nosuch'") as info:
        load_rules(tmp_path)
    assert "my-rule" in str(info.value)
    other = tmp_path / "other"
    other.mkdir()
    (other / "groups.yaml").write_text("groups:\n  g: [no-such-rule]\n", encoding="utf-8")
    with pytest.raises(RuleSchemaError, match="group 'g' names unknown rule 'no-such-rule'"):
        load_rules(other)


def test_every_must_fire_case_states_a_value() -> None:
    """A rule test checks what the rule computed (an onset step or a key evidence number), not
    only that it fired; and no case states two expect_values (YAML would keep the last)."""
    import re

    root = Path(__file__).resolve().parents[1] / "rules"
    missing = []
    for tf in sorted(root.rglob("*.test.yaml")):
        for block in re.split(r"\n  - name: ", tf.read_text(encoding="utf-8"))[1:]:
            assert block.count("expect_values:") <= 1, (tf.name, block.split("\n")[0])
        for case in yaml.safe_load(tf.read_text(encoding="utf-8"))["cases"]:
            if case["expect"] == "fire" and not case.get("expect_values"):
                missing.append(f"{tf.name}: {case['name']}")
    assert missing == []
