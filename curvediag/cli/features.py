"""``curvediag features``: every feature a rule condition can use."""

from __future__ import annotations

import argparse

from curvediag.cli.options import EXIT_OK

__all__ = ["DESCRIPTION", "add_arguments", "run"]

DESCRIPTION = """\
Every feature a rule condition can use, with what it measures: loss.*, eval.*, grad.*,
lr.*, run.*, cfg.*, ... plus metric.<series>.<stat> for any logged series and score.* for
the run's main eval score.

examples:
  curvediag features
  curvediag features | grep '^eval\\.'"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``curvediag features`` takes no options."""


def run(args: argparse.Namespace) -> int:
    """Print the features and the per-series families."""
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
