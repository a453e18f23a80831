"""The built-in rule catalog: every rule valid, documented, tested both ways, and passing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from curvediag.ruleset.docs import rules_markdown
from curvediag.ruleset.loader import builtin_rules_dir, load_rules
from curvediag.ruleset.schema import rule_json_schema
from curvediag.ruleset.testing import load_test_file, run_case

RULES = load_rules()
RULES_DIR = builtin_rules_dir()
TEST_FILES = {load_test_file(p).rule: p for p in sorted(RULES_DIR.rglob("*.test.yaml"))}


def test_builtin_rules_come_from_the_source_tree_or_package() -> None:
    assert len(RULES) >= 14
    assert (RULES_DIR / "rule.schema.json").is_file()


@pytest.mark.parametrize("rule_id", RULES.ids)
def test_every_rule_is_documented_and_has_fire_and_silent_cases(rule_id: str) -> None:
    rule = RULES.get(rule_id)
    assert rule.why.strip() and rule.fixes and rule.evidence.strip()
    assert Path(RULES.sources[rule_id]).stem == rule_id
    assert rule_id in TEST_FILES, f"{rule_id} has no {rule_id}.test.yaml"
    expects = {c.expect for c in load_test_file(TEST_FILES[rule_id]).cases}
    assert {"fire", "silent"} <= expects, f"{rule_id} needs a must-fire and a must-stay-quiet case"


CASES = [
    (rule_id, case) for rule_id, path in TEST_FILES.items() for case in load_test_file(path).cases
]


@pytest.mark.parametrize(("rule_id", "case"), CASES, ids=[f"{r}::{c.name}" for r, c in CASES])
def test_rule_case(rule_id: str, case) -> None:  # type: ignore[no-untyped-def]
    base = TEST_FILES[rule_id].parent
    if case.fixture:
        # fixtures are committed: a case pointing at a missing one is a broken test
        assert (base / case.fixture).exists(), f"missing fixture {case.fixture}"
    result = run_case(case, rule_id, RULES, base)
    assert result.passed, f"expected {result.expect}, got {result.got}: {result.detail}"


def test_rule_coverage_report(capsys: pytest.CaptureFixture[str]) -> None:
    """Every rule has both kinds of case; report how many are also tested on real runs.

    (Whether the cases pass is test_rule_case's job: this only reads them.)
    """
    fire = {r for r, c in CASES if c.expect == "fire"}
    silent = {r for r, c in CASES if c.expect == "silent"}
    real = {r for r, c in CASES if c.fixture is not None}
    assert set(RULES.ids) <= fire & silent, sorted(set(RULES.ids) - (fire & silent))
    with capsys.disabled():
        print(
            f"\nrule coverage: {len(fire & silent)}/{len(RULES)} rules have must-fire and "
            f"must-stay-quiet cases; {len(real)} are also tested on real training runs"
        )
    assert len(real) >= 18, sorted(real)


def test_schema_file_is_current() -> None:
    on_disk = json.loads((RULES_DIR / "rule.schema.json").read_text())
    assert on_disk == rule_json_schema(), (
        "regenerate with: curvediag rules schema -o rules/rule.schema.json"
    )


def test_rules_doc_is_current() -> None:
    doc = ROOT / "docs" / "rules.md"
    assert doc.read_text() == rules_markdown(RULES), (
        "regenerate with: python -m curvediag.ruleset.docs"
    )
