"""``curvediag diagnose``: one run, read and judged."""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import TYPE_CHECKING

from curvediag.cli.options import (
    EXIT_FINDINGS,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    RUN_FORMATS,
    add_rule_options,
    parse_map,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from curvediag.model import Diagnosis

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = f"""\
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


def add_arguments(d: argparse.ArgumentParser) -> None:
    """The options of ``curvediag diagnose``."""
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


def run(args: argparse.Namespace) -> int:
    """Diagnose; the exit code follows --fail-on (see DESCRIPTION)."""
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

        with _read_bar():
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
        with _read_bar():
            run = load_run(args.path, aliases=aliases)
    except IngestError as exc:
        if exc.problem.startswith("holds "):
            held = exc.problem.split("; point at")[0]
            exc.args = (
                f"{exc.path}: {held}; pick one with --run NAME, or diagnose each with --all-runs",
            )
        raise
    return _report_one(diagnose(run, rules=ruleset), args)


@contextlib.contextmanager
def _read_bar() -> Iterator[None]:
    """A progress bar on stderr while a big file is read (terminals only), then a clean line."""
    from curvediag.ingest import reading_progress
    from curvediag.progress import Line, ReadBar

    line = Line()
    if not line.enabled:
        yield
        return
    try:
        with reading_progress(ReadBar(lambda text: line.draw(f"curvediag diagnose: {text}"))):
            yield
    finally:
        line.clear()


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
