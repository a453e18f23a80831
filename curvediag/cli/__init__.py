"""The ``curvediag`` command line: one module per subcommand.

Each subcommand module exposes ``DESCRIPTION`` (its ``--help``: formats, exit codes,
examples), ``add_arguments(parser)`` and ``run(args) -> exit code``, and imports nothing heavy
at module level: ``curvediag --help`` must stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from curvediag.cli.options import EXIT_ERROR, EXIT_OK, err

__all__ = ["COMMANDS", "main"]

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


#: (name, module, one-line help), in the order ``--help`` lists them.
COMMANDS: list[tuple[str, str, str]] = [
    ("diagnose", "curvediag.cli.diagnose", "diagnose one run"),
    ("rules", "curvediag.cli.rules", "list, explain, validate and test rules"),
    ("features", "curvediag.cli.features", "list the features rules can use"),
    ("report", "curvediag.cli.report", "write a markdown postmortem with plots"),
    ("batch", "curvediag.cli.batch", "diagnose every run under one or more folders into one table"),
    ("watch", "curvediag.cli.watch", "follow a run that is still training, report findings live"),
]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="curvediag",
        description=_MAIN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module, help_text in COMMANDS:
        mod = importlib.import_module(module)
        p = sub.add_parser(
            name,
            help=help_text,
            description=mod.DESCRIPTION,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
    return parser


def _complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request with argcomplete, when it is installed
    (``pip install 'curvediag[completion]'``; activation in the README). argcomplete exits
    the process after printing the completions."""
    try:
        import argcomplete  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return
    argcomplete.autocomplete(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``curvediag`` console script."""
    parser = _build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (curvediag[completion])
        _complete(parser)
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
        for name, module, _ in COMMANDS:
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
