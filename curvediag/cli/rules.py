"""``curvediag rules``: list, explain, validate, test rule files and print their schema."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from curvediag.cli.options import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, add_rule_options, err

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = (
    "Work with the rule catalog and your own rule files.\n\nexamples:\n"
    "  curvediag rules list\n"
    "  curvediag rules explain overfitting\n"
    "  curvediag rules validate my_rules/\n"
    "  curvediag rules test my_rules/\n"
    "  curvediag rules schema -o rule.schema.json"
)

_RULES_HELP = {
    "list": """\
A table of the rules: id, severity, category, title and whether it fires on a live run.

examples:
  curvediag rules list
  curvediag rules list --rules my_rules/        # with your own rules
  curvediag rules list --no-builtin --rules my_rules/""",
    "explain": """\
A rule's documentation: what it detects, why it matters, its condition, its parameters
with their defaults (override them with --set ID.PARAM=VALUE) and the fixes it proposes.

examples:
  curvediag rules explain overfitting
  curvediag rules explain loss-spike
  curvediag rules explain accuracy-gave-back --rules my_rules/""",
    "validate": """\
Check rule files without running them: the schema, that every feature, parameter and
template field exists, and that no condition orders a number against text. Each problem is
one line naming the file and the rule.

exit codes: 0 = every file is valid, 2 = a file has a problem.

examples:
  curvediag rules validate my_rules/
  curvediag rules validate my_rules/tail-too-high.yaml""",
    "schema": """\
The JSON Schema of a rule file, for editors that check YAML as you type.

examples:
  curvediag rules schema -o rule.schema.json
  curvediag rules schema | jq '.properties | keys'""",
}


def add_arguments(r: argparse.ArgumentParser) -> None:
    """The actions of ``curvediag rules`` and their options."""
    rsub = r.add_subparsers(dest="rules_command", metavar="ACTION")
    raw = argparse.RawDescriptionHelpFormatter
    lst = rsub.add_parser(
        "list", help="table of the rules", description=_RULES_HELP["list"], formatter_class=raw
    )
    add_rule_options(lst, with_set=False)
    ex = rsub.add_parser(
        "explain",
        help="a rule's documentation, parameters and defaults",
        description=_RULES_HELP["explain"],
        formatter_class=raw,
    )
    ex.add_argument("rule_id", metavar="ID")
    add_rule_options(ex, with_set=False)
    va = rsub.add_parser(
        "validate",
        help="check rule files (schema, features, parameters)",
        description=_RULES_HELP["validate"],
        formatter_class=raw,
    )
    va.add_argument("files", nargs="+", metavar="FILE", help="rule files or folders")
    te = rsub.add_parser(
        "test",
        help="run rule test cases (<id>.test.yaml beside each rule)",
        description="Run the must-fire / must-stay-quiet cases of rules. Without FILE, the "
        "built-in catalog's own tests run. The rules in a given folder (or <id>.yaml beside a "
        "given <id>.test.yaml) are loaded with the built-in ones, so no --rules is needed."
        "\n\nexamples:\n"
        "  curvediag rules test                      # the built-in catalog's tests\n"
        "  curvediag rules test my_rules/            # your rules and their .test.yaml files\n"
        "  curvediag rules test my_rules/tail-too-high.test.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    te.add_argument("files", nargs="*", metavar="FILE", help="test files or folders")
    add_rule_options(te, with_set=False)
    sc = rsub.add_parser(
        "schema",
        help="print the JSON Schema of a rule file",
        description=_RULES_HELP["schema"],
        formatter_class=raw,
    )
    sc.add_argument("-o", "--output", help="write to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    """Run the rules action; 0 on success."""
    from curvediag.ruleset.loader import load_rule_file, load_rules

    action = args.rules_command
    if action is None:
        err("rules needs an action: list, explain, validate, test or schema")
        return EXIT_ERROR
    if action == "schema":
        from curvediag.ruleset.schema import rule_json_schema

        text = json.dumps(rule_json_schema(), indent=2) + "\n"
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            print(text, end="")
        return EXIT_OK
    if action == "validate":
        total = 0
        for f in args.files:
            p = Path(f)
            files = sorted(p.rglob("*.yaml")) if p.is_dir() else [p]
            for file in files:
                if file.name.endswith(".test.yaml"):
                    continue
                total += len(load_rule_file(file))
        print(f"{total} rule(s) valid")
        return EXIT_OK
    if action == "test":
        from curvediag.ruleset.testing import format_results, rule_files_beside, run_rule_tests

        given = {Path(r).resolve() for r in args.rules}
        beside = [f for f in rule_files_beside(args.files) if f.resolve() not in given]
        if any(Path(r).is_dir() for r in args.rules):
            dirs = [Path(r).resolve() for r in args.rules if Path(r).is_dir()]
            beside = [f for f in beside if not any(f.resolve().is_relative_to(d) for d in dirs)]
        ruleset = load_rules(*args.rules, *beside, builtin=not args.no_builtin)
        results = run_rule_tests(args.files, ruleset=ruleset)
        print(format_results(results))
        return EXIT_OK if all(r.passed for r in results) else EXIT_FINDINGS
    ruleset = load_rules(*args.rules, builtin=not args.no_builtin)
    if action == "list":
        rows = [(r.id, r.severity.value, r.category, r.title) for r in ruleset]
        w0 = max((len(r[0]) for r in rows), default=2)
        w2 = max((len(r[2]) for r in rows), default=8)
        print(f"{'id':<{w0}}  {'severity':<8}  {'category':<{w2}}  title")
        for rid, sev, cat, title in rows:
            print(f"{rid:<{w0}}  {sev:<8}  {cat:<{w2}}  {title}")
        print(f"\n{len(rows)} rules. 'curvediag rules explain ID' shows one in full.")
        return EXIT_OK
    if action == "explain":
        from curvediag.ruleset.docs import explain_rule

        try:
            rule = ruleset.get(args.rule_id)
        except KeyError:
            err(f"no rule {args.rule_id!r}; 'curvediag rules list' shows the ids")
            return EXIT_ERROR
        print(explain_rule(rule, ruleset.sources.get(rule.id)))
        return EXIT_OK
    return EXIT_ERROR  # pragma: no cover
