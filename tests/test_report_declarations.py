"""The report knows no rule id: what a finding adds to the timeline and to the next-run plan is
declared in its rule's YAML (``report:``), so a new rule needs its YAML and its test file only."""

from __future__ import annotations

import re
from pathlib import Path

import curvediag
from curvediag.report.markdown import postmortem_markdown
from curvediag.report.next_run import KINDS, next_run_changes
from curvediag.report.timeline import build_timeline
from curvediag.testing.synth import make_run

ROOT = Path(__file__).resolve().parents[1]

NEW_RULE = """\
id: eval-worse-than-start
title: Eval loss ended above its first value
category: generalization
severity: warning
live: false
requires: [train/loss, eval/loss]
params: {max_change: 0.0}
when: {feature: eval.change, op: ">", value: $max_change}
onset: eval.min_step
evidence: Eval loss went from {eval.first:.3g} to {eval.last:.3g}.
why: The model ends worse on held-out data than it started.
fixes: ["Keep the best checkpoint."]
report:
  timeline: best_eval
  next_run: {kind: lower-lr, factor: 4, why: "the eval loss ended above where it started"}
"""


def test_report_modules_name_no_rule() -> None:
    ids = set(curvediag.load_rules().ids)
    for path in sorted((ROOT / "curvediag" / "report").glob("*.py")):
        literals = set(re.findall(r"[\"']([a-z0-9]+(?:-[a-z0-9]+)+)[\"']", path.read_text()))
        assert not (literals & ids), (path.name, sorted(literals & ids))


def test_every_declared_next_run_kind_exists() -> None:
    for rule in curvediag.load_rules():
        if rule.report and rule.report.next_run:
            assert rule.report.next_run.kind in {*KINDS, "lower-lr"}, rule.id


def test_a_new_rule_adds_a_timeline_entry_and_a_plan_change_from_yaml_alone(
    tmp_path: Path,
) -> None:
    (tmp_path / "eval-worse-than-start.yaml").write_text(NEW_RULE, encoding="utf-8")
    rules = curvediag.load_rules(tmp_path, builtin=False)
    run = make_run(
        {
            "train/loss": {"gen": "decay", "n": 50, "start": 3.0, "end": 1.0},
            "eval/loss": {"values": "2.0 1.8 1.9 2.2 2.5", "every": 100},
            "train/learning_rate": "0.002x50",
        }
    )
    d = curvediag.diagnose(run, rules=rules)
    assert d.finding_ids == ["eval-worse-than-start"]
    best = [e for e in build_timeline(d) if e.kind == "best_eval"]
    assert best and best[0].rule_id == "eval-worse-than-start" and best[0].step == 200
    # the best-eval event stands for the finding: no separate onset entry
    assert not [e for e in build_timeline(d) if e.kind == "finding"]
    changes = next_run_changes(d)
    assert changes[0].setting == "learning_rate"
    assert changes[0].current == 0.002 and changes[0].proposed == 0.0005
    assert "the eval loss ended above where it started" in changes[0].why
    assert "learning_rate: 0.002 -> 5e-4" in postmortem_markdown(d)


def test_without_a_declaration_a_finding_contributes_its_first_fix(tmp_path: Path) -> None:
    text = NEW_RULE.split("report:")[0]
    (tmp_path / "eval-worse-than-start.yaml").write_text(text, encoding="utf-8")
    rules = curvediag.load_rules(tmp_path, builtin=False)
    run = make_run(
        {
            "train/loss": {"gen": "decay", "n": 50, "start": 3.0, "end": 1.0},
            "eval/loss": {"values": "2.0 1.8 1.9 2.2 2.5", "every": 100},
        }
    )
    d = curvediag.diagnose(run, rules=rules)
    changes = next_run_changes(d)
    assert [c.change for c in changes] == ["Keep the best checkpoint"]  # ": why" follows
    assert [e.kind for e in build_timeline(d) if e.rule_id == "eval-worse-than-start"] == [
        "finding"
    ]
