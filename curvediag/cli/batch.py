"""``curvediag batch``: diagnose every run under folders into one table.

Imports nothing heavy at module level (``curvediag --help`` builds this parser).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from curvediag.cli.options import add_rule_options, err, parse_map

if TYPE_CHECKING:
    from curvediag.batch.table import TableWriter

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = """\
Diagnose every run under one or more folders (or fsspec URLs) into one table, one row
per run: path, formats, run name, steps, final/min train loss, best eval loss and its
step, verdict, top finding, all finding ids, and the error when a run could not be read.

Runs are found recursively: a Trainer output folder (with its checkpoint-N/, runs/ and
wandb/) is one run, a TensorBoard or W&B run folder is one run, a W&B CSV export can hold
several; any format `curvediag diagnose` reads is read (Trainer state, TensorBoard events and
CSV exports, W&B run folders, CSV exports and history dumps, Lightning metrics.csv, any
CSV/JSONL with a step column: trainer_state.json included). Checkpoints, weights and other
large files are never opened. A run that cannot be read becomes a row with an error; the
batch never stops on one bad run.

Rows are written as runs finish, in discovery order (the same for any --jobs/--engine).
The output format comes from --format or the file's extension (.csv, .parquet, .jsonl,
.md); without -o a markdown summary goes to stdout. -o can be given several times.

exit codes: 0 = no run has a finding at or above --fail-on, 1 = some run does,
2 = bad arguments, a rule file or the output could not be used.

examples:
  curvediag batch runs/ -o runs.csv                      # every run under runs/
  curvediag batch runs/ old_runs/ -o runs.parquet -o summary.md --jobs 8
  curvediag batch runs/ --exclude 'tmp' --min-steps 100 --fail-on warning
  curvediag batch runs/ --reports reports/ -o runs.jsonl # plus one postmortem per run
  curvediag batch s3://bucket/runs --engine dask --scheduler tcp://10.0.0.5:8786 -o runs.csv
"""

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``curvediag batch``."""
    p.add_argument("paths", nargs="+", metavar="PATH", help="folders, log files or URLs")
    p.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="OUT",
        help="write the table here (repeatable; '-' = stdout); format from the extension",
    )
    p.add_argument(
        "--format",
        choices=("csv", "parquet", "jsonl", "markdown"),
        help="table format (default: from the extension; markdown summary on stdout)",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="parallel workers (default: the machine's cores; 1 = no worker processes)",
    )
    p.add_argument(
        "--engine",
        choices=("local", "dask"),
        default="local",
        help="local processes, or a Dask cluster (pip install 'curvediag[dask]')",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (with --engine dask)",
    )
    p.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="keep only runs whose path matches (repeatable; without '/': any path component)",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip runs and folders that match (repeatable)",
    )
    p.add_argument(
        "--min-steps", type=int, default=None, metavar="N", help="leave out runs with fewer steps"
    )
    p.add_argument(
        "--max-file-size",
        type=float,
        default=2048.0,
        metavar="MB",
        help="log files larger than this become error rows (default: 2048)",
    )
    p.add_argument(
        "--reports",
        metavar="DIR",
        help="also write one markdown postmortem per run into DIR (text only; "
        "'curvediag report' adds the plots)",
    )
    p.add_argument(
        "--fail-on",
        choices=("critical", "warning", "never"),
        default="critical",
        help="exit 1 when some run has a finding of this severity or worse (default: critical)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no final line")
    add_rule_options(p, with_map=True)


def run(args: argparse.Namespace) -> int:
    """Run ``curvediag batch``; returns the exit code."""
    from curvediag.batch.progress import Progress
    from curvediag.batch.runner import RuleSpec, ruleset_for, run_batch
    from curvediag.ruleset.loader import parse_overrides

    aliases = parse_map(args.map) or {}
    problem = _engine_problem(args)
    if problem:
        err(problem)
        return EXIT_ERROR
    spec = RuleSpec.make(
        args.rules, builtin=not args.no_builtin, overrides=parse_overrides(args.set)
    )
    ruleset = ruleset_for(spec)  # a bad rule file or override: exit 2 before any work
    outputs: list[str | None] = list(args.output) or [None]
    try:
        writers = _open_writers(outputs, args.format, {r.id: r.severity.value for r in ruleset})
    except (ValueError, OSError) as exc:
        err(str(exc))
        return EXIT_ERROR
    progress = Progress(enabled=False if args.quiet else None)
    try:
        stats = run_batch(
            args.paths,
            writers,
            jobs=args.jobs,
            engine=args.engine,
            scheduler=args.scheduler,
            rules=spec,
            aliases=aliases,
            include=args.include,
            exclude=args.exclude,
            min_steps=args.min_steps,
            max_file_size=int(args.max_file_size * 2**20),
            reports_dir=args.reports,
            progress=progress,
        )
    except (ValueError, OSError) as exc:
        err(str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        err("interrupted: the outputs hold the runs finished before it")
        return 130
    if not args.quiet and any(o is not None and o != "-" for o in outputs):
        where = ", ".join(o for o in outputs if o and o != "-")
        print(
            f"curvediag batch: {stats.rows} run(s), {stats.errors} error(s) "
            f"in {stats.seconds:.1f} s -> {where}",
            file=sys.stderr,
        )
    threshold = {"critical": 2, "warning": 1, "never": 99}[args.fail_on]
    return EXIT_FINDINGS if stats.worst_rank >= threshold else EXIT_OK


def _engine_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with --jobs / --engine / --scheduler, before any output is opened."""
    if args.jobs is not None and args.jobs < 1:
        return "--jobs must be 1 or more"
    if args.scheduler and args.engine != "dask":
        return "--scheduler needs --engine dask"
    if args.scheduler:
        from curvediag.batch.runner import check_scheduler_address

        check_scheduler_address(args.scheduler)  # a typo fails before any output is opened
    return None


def _open_writers(
    outputs: list[str | None], fmt: str | None, severity_of: dict[str, str]
) -> list[TableWriter]:
    """One table writer per -o (None or "-": stdout). --format applies to a single output, or
    to one whose extension does not say its format; the ones opened are closed on an error."""
    from pathlib import Path

    from curvediag.batch.table import format_for, open_writer

    writers: list[TableWriter] = []
    try:
        for out in outputs:
            target = None if out in (None, "-") else out
            known = (
                target is None
                or format_for(target, None) != "csv"
                or (Path(target).suffix.lower() == ".csv")
            )
            use = fmt if len(outputs) == 1 or not known else None
            writers.append(open_writer(target, use, severity_of=severity_of))
    except (ValueError, OSError):
        for w in writers:
            w.close()
        raise
    return writers
