"""``curvediag watch``: follow a run still training (the loop: :func:`curvediag.watch.watch`)."""

from __future__ import annotations

import argparse
import sys

from curvediag.cli.options import RUN_FORMATS, add_rule_options, err, parse_map
from curvediag.watch import watch

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = f"""\
Follow a training run that is still writing its logs and report each finding as it appears,
with its step. PATH is what `curvediag diagnose` reads: a Trainer output folder (its
checkpoint-N/trainer_state.json, runs/ and wandb/ are followed together), a TensorBoard run
folder, a W&B run folder, a metrics.csv... Only rules that make sense on part of a run fire
while it trains; the rest run once the logs stop growing for --idle seconds (or on Ctrl-C).

exit codes: 0 = nothing at or above --fail-on, 1 = findings at or above --fail-on, 2 = nothing
readable appeared at PATH, or a rule file could not be read.

examples:
  curvediag watch output_dir/                          # follow a Trainer run
  curvediag watch runs/exp1 --idle 600 --fail-on warning
  curvediag watch wandb/latest-run/ --rules my_rules/  # a W&B run folder, your own rules
  curvediag watch lightning_logs/version_3/metrics.csv

{RUN_FORMATS}
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``curvediag watch``."""
    parser.add_argument("path", metavar="PATH", help="a run folder or log file being written")
    parser.add_argument(
        "--idle",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="stop when the logs have not grown for this long (default: 300)",
    )
    parser.add_argument(
        "--poll",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how often to look at the files (default: 2)",
    )
    parser.add_argument(
        "--fail-on",
        choices=("critical", "warning", "never"),
        default="critical",
        help="exit 1 when a finding of this severity or worse fired (default: critical)",
    )
    add_rule_options(parser, with_map=True)


def run(args: argparse.Namespace) -> int:
    """The ``curvediag watch`` command."""
    from curvediag.ruleset.loader import load_rules, parse_overrides

    aliases = parse_map(args.map)
    ruleset = load_rules(
        *args.rules, builtin=not args.no_builtin, overrides=parse_overrides(args.set)
    )
    print(
        f"watching {args.path} (Ctrl-C to stop; ends after {args.idle:g} s without new logs)",
        file=sys.stderr,
    )
    result = watch(
        args.path,
        rules=ruleset,
        aliases=aliases,
        idle=args.idle,
        poll=args.poll,
        out=lambda line: print(line, flush=True),
    )
    live = result.live
    if live is None or live.entries == 0:
        why = f": {result.error}" if result.error else ""
        err(f"{args.path}: no readable training log appeared{why}")
        return 2
    d = result.diagnosis
    verdict = d.verdict if d is not None else "unknown"
    print(
        f"{result.reason}: {live.entries} log entries up to step {live.last_step}; "
        f"verdict {verdict}, {len(live.events)} finding(s)",
        file=sys.stderr,
    )
    return result.exit_code(args.fail_on)
