"""The ``curvediag`` command line. Heavy modules are imported only by the command that runs."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from curvediag.cli_options import RUN_FORMATS, add_rule_options, err, parse_map

if TYPE_CHECKING:
    from curvediag.model import Diagnosis

__all__ = ["main"]

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3

_MAIN_HELP = """\
curvediag reads the logs of a training run and says what went wrong, where, why,
and what to change next.

examples:
  curvediag diagnose output_dir/                 # a Trainer output folder
  curvediag diagnose trainer_state.json --format json
  curvediag diagnose run/ --set overfitting.min_rise=0.1 --fail-on critical
  curvediag rules list
  curvediag rules explain overfitting
"""

_DIAGNOSE_HELP = f"""\
Diagnose one training run.

{RUN_FORMATS}

exit codes: 0 = nothing at or above --fail-on, 1 = findings at or above --fail-on,
2 = the input or a rule file could not be read (the message says which and why),
3 = inconclusive: the run logged too little to judge (no loss, or fewer than 4 points),
    unless --fail-on never.

examples:
  curvediag diagnose out/                                  # readable report
  curvediag diagnose out/ --format json > diagnosis.json   # for scripts
  curvediag diagnose out/ --fail-on warning                # gate a CI pipeline
  curvediag diagnose out/ --set loss-spike.min_ratio=2 --set features.max_grad_norm=0.5
  curvediag diagnose out/ --rules my_rules/                # add your own rules
  curvediag diagnose wandb_export.csv --run bright-sun-3   # one run of a W&B export
  curvediag diagnose wandb_export.csv --all-runs           # every run in it
"""

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

_FEATURES_HELP = """\
Every feature a rule condition can use, with what it measures: loss.*, eval.*, grad.*,
lr.*, run.*, cfg.*, ... plus metric.<series>.<stat> for any logged series and score.* for
the run's main eval score.

examples:
  curvediag features
  curvediag features | grep '^eval\\.'"""


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="curvediag",
        description=_MAIN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser(
        "diagnose",
        help="diagnose one run",
        description=_DIAGNOSE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("path", metavar="PATH", help="trainer_state.json or a run folder")
    add_rule_options(d, with_map=True)
    d.add_argument(
        "--run",
        metavar="NAME",
        help="the run to diagnose when PATH holds several (a W&B CSV export of several runs)",
    )
    d.add_argument(
        "--all-runs",
        action="store_true",
        help="diagnose every run PATH holds, one after the other (exit code: the worst)",
    )
    d.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="output format (default: text)",
    )
    d.add_argument(
        "--fail-on",
        choices=("critical", "warning", "never"),
        default="critical",
        help="exit 1 when a finding of this severity or worse fired (default: critical)",
    )

    r = sub.add_parser(
        "rules",
        help="list, explain, validate and test rules",
        description="Work with the rule catalog and your own rule files.\n\nexamples:\n"
        "  curvediag rules list\n"
        "  curvediag rules explain overfitting\n"
        "  curvediag rules validate my_rules/\n"
        "  curvediag rules test my_rules/\n"
        "  curvediag rules schema -o rule.schema.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    sub.add_parser(
        "features",
        help="list the features rules can use",
        description=_FEATURES_HELP,
        formatter_class=raw,
    )
    for name, module, help_text in _PLUGGED:
        mod = importlib.import_module(module)
        p = sub.add_parser(
            name,
            help=help_text,
            description=mod.DESCRIPTION,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
    return parser


#: Commands implemented in their own modules: (name, module, one-line help). Each module
#: exposes DESCRIPTION, add_arguments(parser) and run(args) -> exit code, and imports nothing
#: heavy at module level (``curvediag --help`` must stay fast).
_PLUGGED: list[tuple[str, str, str]] = [
    ("report", "curvediag.report.cli", "write a markdown postmortem with plots"),
    ("batch", "curvediag.batch.cli", "diagnose every run under one or more folders into one table"),
    ("watch", "curvediag.watch", "follow a run that is still training, report findings live"),
]


def _cmd_diagnose(args: argparse.Namespace) -> int:
    from curvediag.ingest import load_run
    from curvediag.pipeline import diagnose
    from curvediag.ruleset.loader import load_rules, parse_overrides

    aliases = parse_map(args.map)
    ruleset = load_rules(
        *args.rules, builtin=not args.no_builtin, overrides=parse_overrides(args.set)
    )
    if args.run is not None or args.all_runs:
        from curvediag.errors import IngestError
        from curvediag.ingest import load_runs

        runs = load_runs(args.path, aliases=aliases)
        if args.run is not None:
            picked = [r for r in runs if r.name == args.run]
            if not picked:
                names = ", ".join(repr(r.name) for r in runs[:10])
                raise IngestError(args.path, f"no run named {args.run!r} (it holds {names})")
            runs = picked[:1]
        diagnoses = [diagnose(r, rules=ruleset) for r in runs]
        if args.format == "json" and len(diagnoses) > 1:
            print(json.dumps([d.to_dict() for d in diagnoses], indent=2, allow_nan=False))
            args = argparse.Namespace(**{**vars(args), "format": "none"})
        codes = [_report_one(d, args) for d in diagnoses]
        return max(codes, key=lambda c: {EXIT_OK: 0, EXIT_INCONCLUSIVE: 1, EXIT_FINDINGS: 2}[c])
    from curvediag.errors import IngestError

    try:
        run = load_run(args.path, aliases=aliases)
    except IngestError as exc:
        if exc.problem.startswith("holds "):
            held = exc.problem.split("; point at")[0]
            exc.args = (
                f"{exc.path}: {held}; pick one with --run NAME, or diagnose each with --all-runs",
            )
        raise
    return _report_one(diagnose(run, rules=ruleset), args)


def _report_one(d: Diagnosis, args: argparse.Namespace) -> int:
    if args.format == "json":
        print(d.to_json())
    elif args.format == "markdown":
        print(d.to_markdown())
    elif args.format == "text":
        print(d.to_text(), end="")
    threshold = {"critical": 2, "warning": 1, "never": 99}[args.fail_on]
    worst = max((f.severity.rank for f in d.findings), default=-1)
    if worst >= threshold:
        return EXIT_FINDINGS
    if d.verdict == "inconclusive" and args.fail_on != "never":
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def _cmd_rules(args: argparse.Namespace) -> int:
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


def _cmd_features() -> int:
    from curvediag.features import FAMILIES, FEATURES

    width = max(len(n) for n in FEATURES)
    for name, spec in sorted(FEATURES.items()):
        print(f"{name:<{width}}  {spec.description}")
    for prefix, fam in sorted(FAMILIES.items()):
        print(f"\nfor any logged series, e.g. {prefix}.eval/accuracy.best:")
        for stat, desc in fam.stats.items():
            name = f"{prefix}.<series>.{stat}"
            print(f"{name:<{width}}  {desc}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``curvediag`` console script."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from curvediag._version import __version__

        print(f"curvediag {__version__}")
        return EXIT_OK
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    from curvediag.errors import CurvediagError

    try:
        if args.command == "diagnose":
            return _cmd_diagnose(args)
        if args.command == "rules":
            return _cmd_rules(args)
        if args.command == "features":
            return _cmd_features()
        for name, module, _ in _PLUGGED:
            if args.command == name:
                code: int = importlib.import_module(module).run(args)
                return code
    except CurvediagError as exc:
        err(str(exc))
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `curvediag ... | head`
        return EXIT_OK
    return EXIT_ERROR  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
