"""Command-line options shared by ``diagnose``, ``report`` and ``batch`` (argparse only, so
``curvediag --help`` stays fast)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from curvediag.errors import CurvediagError

#: Exit codes shared by the subcommands.
EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_INCONCLUSIVE = 0, 1, 2, 3

__all__ = [
    "EXIT_ERROR",
    "EXIT_FINDINGS",
    "EXIT_INCONCLUSIVE",
    "EXIT_OK",
    "RUN_FORMATS",
    "add_rule_options",
    "err",
    "map_target_problem",
    "parse_map",
    "warn",
]


def add_rule_options(
    p: argparse.ArgumentParser, *, with_set: bool = True, with_map: bool = False
) -> None:
    """``--rules``, ``--no-builtin`` and, optionally, ``--set`` and ``--map``."""
    p.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="FILE",
        help="extra rule file or folder (repeatable)",
    )
    p.add_argument("--no-builtin", action="store_true", help="do not load the built-in rules")
    if with_set:
        p.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="ID.PARAM=VALUE",
            help="override a rule parameter (repeatable); features.NAME=VALUE for feature "
            "settings such as features.max_grad_norm",
        )
    if with_map:
        p.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="RAW=CANONICAL",
            help="map a metric name the run uses onto a canonical one, e.g. my/loss=train/loss",
        )


def parse_map(items: Iterable[str]) -> dict[str, str] | None:
    """``--map RAW=CANONICAL`` values as a mapping (None when there are none).

    Raises:
        CurvediagError: An item without ``=``.
    """
    aliases = {}
    for item in items:
        if "=" not in item:
            raise CurvediagError(f"--map {item!r}: expected RAW=CANONICAL")
        k, v = item.split("=", 1)
        aliases[k.strip()] = v.strip()
        problem = map_target_problem(v.strip())
        if problem:
            warn(f"--map {item!r}: {problem}")
    return aliases or None


def map_target_problem(target: str) -> str | None:
    """Why ``target`` is an unlikely ``--map`` target (a typo of a canonical name, or outside
    the train/, eval/, system/ namespaces), or None when it looks right."""
    import difflib

    from curvediag.ingest.aliases import ALIASES

    known = sorted(set(ALIASES.values()))
    if target in known:
        return None
    close = difflib.get_close_matches(target, known, n=1, cutoff=0.8)
    if close:
        return f"{target!r} is not a canonical metric name; did you mean {close[0]!r}?"
    head, sep, rest = target.partition("/")
    if not sep or not rest or head not in ("train", "eval", "system"):
        return (
            f"{target!r} is not a canonical metric name (train/..., eval/... or system/..., "
            f"e.g. train/loss, eval/loss, eval/accuracy); no rule will read it"
        )
    return None


def warn(msg: str) -> None:
    """One warning line on stderr; the command goes on."""
    print(f"curvediag: warning: {msg}", file=sys.stderr)


def err(msg: str) -> None:
    """One line on stderr, the way every curvediag command reports an error."""
    from curvediag.escape import terminal

    print(f"curvediag: error: {terminal(msg)}", file=sys.stderr)


#: What a run PATH may be, for every subcommand that reads one (one text, so it stays true).
RUN_FORMATS = """\
PATH is a trainer_state.json, a Trainer output folder, or a folder of checkpoint-N/
folders (the latest checkpoint is used), TensorBoard event files or run folders, a W&B run
folder (wandb/run-*/), a W&B UI CSV export or run.history()/scan_history() dump (CSV, JSON
Lines, Parquet), a Lightning metrics.csv, TensorBoard's CSV export, or any CSV/JSONL with a
step column."""
