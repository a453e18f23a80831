"""Run rule test cases: ``<rule-id>.test.yaml`` files with must-fire and must-stay-quiet cases.

Used by the test suite and by ``curvediag rules test`` (users test their own rules the same
way). A case is a synthetic run in compact notation (see :mod:`curvediag.testing.synth`) or a
path to a real run (``fixture``, relative to the test file). ``fire`` means the rule reported a
finding; ``folded`` that it matched but a stronger finding folded it in (it does not count as
fired); ``silent`` that it did not match; ``skipped`` that it could not be evaluated.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from curvediag.errors import CurvediagError, RuleSchemaError
from curvediag.ingest import load_run
from curvediag.ruleset.engine import evaluate_rules
from curvediag.ruleset.loader import RuleSet, builtin_rules_dir, load_rules
from curvediag.ruleset.schema import RuleTestCase, RuleTestFile
from curvediag.testing.synth import make_run

__all__ = [
    "CaseResult",
    "format_results",
    "load_test_file",
    "rule_files_beside",
    "run_case",
    "run_rule_tests",
]


@dataclass
class CaseResult:
    rule_id: str
    case: str
    expect: str
    got: str
    passed: bool
    detail: str = ""
    file: str = ""
    missing_fixture: bool = False
    real_run: bool = False


def load_test_file(path: str | Path) -> RuleTestFile:
    """Load and validate one ``*.test.yaml``."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, RecursionError, UnicodeDecodeError) as exc:
        raise RuleSchemaError(p, None, f"cannot read rule test file: {exc}") from None
    try:
        return RuleTestFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise RuleSchemaError(p, None, f"invalid rule test file: {loc}: {first['msg']}") from None


def run_case(case: RuleTestCase, rule_id: str, ruleset: RuleSet, base: Path) -> CaseResult:
    """Run one case against the whole rule set and check what ``rule_id`` did."""
    if case.fixture and not (base / case.fixture).exists():
        # fixtures live in the source tree, not in an installed package
        return CaseResult(
            rule_id,
            case.name,
            case.expect,
            "not run",
            True,
            f"fixture {case.fixture} not found",
            missing_fixture=True,
        )
    try:
        if case.fixture:
            run = load_run(base / case.fixture)
        else:
            run = make_run(
                case.series,
                every=case.every,
                meta=case.meta,
                name=case.name,
                wall_time=case.wall_time,
            )
        rs = ruleset.with_overrides(case.overrides) if case.overrides else ruleset
    except (CurvediagError, ValueError, TypeError, OverflowError) as exc:
        # absurd cases (1e400 steps apart, a dict where a number goes...) are failed cases
        return CaseResult(rule_id, case.name, case.expect, "error", False, str(exc)[:300])
    evals, features = evaluate_rules(run, rs)
    ev = next((e for e in evals if e.rule.id == rule_id), None)
    if ev is None:
        return CaseResult(rule_id, case.name, case.expect, "error", False, "rule not loaded")
    got = {"fired": "fire", "suppressed": "folded", "silent": "silent", "skipped": "skipped"}[
        ev.state
    ]
    detail = ev.reason
    passed = got == case.expect
    # the values a case states are checked whenever the features were computed (a quiet case
    # can state why it is quiet: the feature that keeps the rule silent)
    if passed and got in ("fire", "folded", "silent"):
        for name, want in case.expect_values.items():
            have = features.get(name)
            if isinstance(want, list) and len(want) == 2 and not isinstance(want[0], bool):
                if not all(isinstance(w, (int, float)) for w in want):
                    passed = False
                    # YAML reads 2.0e5 as text (write 2.0e+5 or 200000)
                    detail = f"{name}: the bounds {want!r} are not both numbers"
                    break
                ok = (
                    isinstance(have, (int, float))
                    and not isinstance(have, bool)
                    and want[0] <= have <= want[1]
                )
            elif isinstance(want, list) and len(want) == 2:
                ok = have is want[0] or have is want[1]
            else:
                ok = have == want
            if not ok:
                passed = False
                detail = f"{name} = {have!r}, expected {want!r}"
                break
    if got == "fire" and ev.finding is not None and not detail:
        detail = ev.finding.evidence
    return CaseResult(rule_id, case.name, case.expect, got, passed, detail)


def _test_files(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(p.rglob("*.test.yaml"))
        elif p.exists():
            out.append(p)
        else:
            raise RuleSchemaError(p, None, "rule test file or folder not found")
    return out


def rule_files_beside(paths: Iterable[str | Path]) -> list[Path]:
    """The rule files the given test files or folders test: every rule file in a folder, and
    ``<id>.yaml`` beside a ``<id>.test.yaml``. Files of the built-in catalog are left out
    (it is loaded anyway), so ``curvediag rules test my_rules/`` needs no ``--rules``.
    """
    builtin = builtin_rules_dir().resolve()
    out: list[Path] = []
    seen: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found = [
                f
                for f in sorted(p.rglob("*.y*ml"))
                if f.suffix in (".yaml", ".yml")
                and not f.name.endswith((".test.yaml", ".test.yml"))
            ]
        else:
            stem = p.name.removesuffix(".yaml").removesuffix(".yml").removesuffix(".test")
            found = [f for f in (p.with_name(stem + ".yaml"), p.with_name(stem + ".yml"))]
            found = [f for f in found if f.is_file()][:1]
        for f in found:
            r = f.resolve()
            if r in seen or r.is_relative_to(builtin):
                continue
            seen.add(r)
            out.append(f)
    return out


def run_rule_tests(
    paths: Iterable[str | Path] = (), *, ruleset: RuleSet | None = None
) -> list[CaseResult]:
    """Run every case of the given test files (default: the built-in catalog's tests).

    Without ``ruleset``, the built-in rules plus the rules beside the tests are loaded
    (:func:`rule_files_beside`).
    """
    paths = list(paths)
    ruleset = ruleset or load_rules(*rule_files_beside(paths))
    files = _test_files(paths or [builtin_rules_dir()])
    results = []
    for f in files:
        tf = load_test_file(f)
        if tf.rule not in ruleset.ids:
            results.append(
                CaseResult(tf.rule, "-", "-", "error", False, "no such rule loaded", str(f))
            )
            continue
        for case in tf.cases:
            r = run_case(case, tf.rule, ruleset, f.parent)
            r.file = str(f)
            r.real_run = case.fixture is not None
            results.append(r)
    return results


def coverage(results: list[CaseResult]) -> dict[str, dict[str, int]]:
    """Per rule: how many fire / silent / skipped cases, and how many use a real run."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        c = out.setdefault(r.rule_id, {"fire": 0, "silent": 0, "skipped": 0, "real": 0})
        if r.expect in c:
            c[r.expect] += 1
        if r.real_run:
            c["real"] += 1
    return out


def coverage_summary(results: list[CaseResult]) -> str:
    """One paragraph: rules with both must-fire and must-stay-quiet cases, and with real runs."""
    cov = coverage(results)
    both = [rid for rid, c in cov.items() if c["fire"] and c["silent"]]
    real = [rid for rid, c in cov.items() if c["real"]]
    missing = sorted(set(cov) - set(both))
    text = (
        f"rule coverage: {len(both)}/{len(cov)} rules have must-fire and must-stay-quiet cases; "
        f"{len(real)} are also tested on real training runs"
    )
    if missing:
        text += "; missing a case: " + ", ".join(missing)
    return text


def format_results(results: list[CaseResult]) -> str:
    """A readable summary; the last line is ``N passed, M failed``."""
    lines = []
    for r in results:
        mark = "skip" if r.missing_fixture else ("ok  " if r.passed else "FAIL")
        line = f"{mark} {r.rule_id} :: {r.case} (expect {r.expect}, got {r.got})"
        if (not r.passed or r.missing_fixture) and r.detail:
            line += f"\n       {r.detail}"
        lines.append(line)
    rules = {r.rule_id for r in results}
    lines.append("")
    lines.append(coverage_summary(results))
    skipped = sum(r.missing_fixture for r in results)
    passed = sum(r.passed and not r.missing_fixture for r in results)
    failed = sum(not r.passed for r in results)
    lines.append(f"\n{len(rules)} rules, {len(results)} cases")
    lines.append(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return "\n".join(lines)
