"""``curvediag report PATH -o DIR``: the markdown postmortem with its plots.

Imports nothing heavy at module level: ``curvediag --help`` builds this command's parser.
"""

from __future__ import annotations

import argparse
import shlex

from curvediag.cli.options import RUN_FORMATS, add_rule_options, parse_map

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = f"""\
Write a postmortem of one training run: DIR/postmortem.md with a TL;DR, a timeline of the key
events, annotated PNG plots (loss, learning rate, gradient norm, throughput and memory when
logged), the findings, an ordered "next run" list of setting changes to try one at a time,
the hyperparameters and the skipped rules. Image links are relative: zip or commit the folder.
The same logs and options give the same markdown, byte for byte.

{RUN_FORMATS}

exit codes: 0 = report written, 2 = the input or a rule file could not be read.

examples:
  curvediag report output_dir/ -o postmortem/
  curvediag report runs/ -o report/ --no-plots        # text only
  curvediag report out/ -o report/ --set overfitting.min_rise=0.1
  curvediag report wandb/run-20250101_120000-abc123 -o report/   # a W&B run folder
  curvediag report lightning_logs/version_0/metrics.csv -o report/
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``curvediag report``."""
    parser.add_argument("path", metavar="PATH", help="trainer_state.json or a run folder")
    parser.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="folder to write the report into"
    )
    parser.add_argument("--no-plots", action="store_true", help="markdown only, no PNG plots")
    add_rule_options(parser, with_map=True)


def _command(args: argparse.Namespace) -> str:
    parts = ["curvediag", "report", args.path, "-o", args.output]
    for r in args.rules:
        parts += ["--rules", r]
    if args.no_builtin:
        parts.append("--no-builtin")
    for s in args.set:
        parts += ["--set", s]
    for m in args.map:
        parts += ["--map", m]
    if args.no_plots:
        parts.append("--no-plots")
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    """Write the report; 0 on success, 2 on bad input (one line on stderr)."""
    from curvediag.ingest import load_run, reading_progress
    from curvediag.pipeline import diagnose
    from curvediag.progress import ReadBar, Stages
    from curvediag.report.writer import render_report
    from curvediag.ruleset.loader import load_rules, parse_overrides

    aliases = parse_map(args.map)
    ruleset = load_rules(
        *args.rules, builtin=not args.no_builtin, overrides=parse_overrides(args.set)
    )
    names = ["reading", "diagnosing", *([] if args.no_plots else ["plotting"]), "writing"]
    stages = Stages("curvediag report", names)
    try:
        stages.stage("reading")
        with reading_progress(ReadBar(stages.detail)):
            the_run = load_run(args.path, aliases=aliases)
        stages.stage("diagnosing")
        d = diagnose(the_run, rules=ruleset)
        path = render_report(
            d, args.output, plots=not args.no_plots, command=_command(args), on_stage=stages.stage
        )
    except BaseException:
        stages.close(failed=True)
        raise
    stages.close()
    print(f"{path}  ({d.verdict}, {len(d.findings)} finding(s))")
    return 0
