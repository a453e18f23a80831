"""Readers: every supported log format into one :class:`~curvediag.model.Run`."""

from __future__ import annotations

import os
from pathlib import Path

from curvediag.errors import IngestError, MalformedRunError, UnrecognizedFormatError
from curvediag.ingest import hf_trainer
from curvediag.model import Run

__all__ = ["FORMATS", "detect_format", "load_run"]

#: Format name -> reader module (each has ``sniff(path) -> bool`` and ``read(path) -> Run``).
FORMATS = {hf_trainer.FORMAT: hf_trainer}


def detect_format(path: Path) -> str:
    """The format of ``path``, from its name and content.

    Raises:
        UnrecognizedFormatError: No reader recognises it.
    """
    for name, reader in FORMATS.items():
        if reader.sniff(path):
            return name
    if path.is_dir():
        raise UnrecognizedFormatError(
            path,
            "no training log found here (looked for trainer_state.json, also in checkpoint-N/)",
        )
    raise UnrecognizedFormatError(
        path, "not a recognised training log (supported: " + ", ".join(FORMATS) + ")"
    )


def load_run(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    aliases: dict[str, str] | None = None,
) -> Run:
    """Read a training log into a :class:`Run`.

    Args:
        path: A log file or a folder holding one (a Trainer output folder, ...).
        format: Force a format instead of detecting it (see ``FORMATS``).
        aliases: Extra metric-name mappings, raw name -> canonical name
            (e.g. ``{"my/loss": "train/loss"}``).

    Raises:
        IngestError: The path is missing, unreadable, of no known format, or broken. The
            message names the file and the problem.
    """
    p = Path(path)
    if not p.exists():
        raise MalformedRunError(p, "no such file or folder")
    if not os.access(p, os.R_OK):
        raise MalformedRunError(p, "permission denied")
    if format is None:
        try:
            format = detect_format(p)
        except PermissionError:
            raise MalformedRunError(p, "permission denied") from None
    reader = FORMATS.get(format)
    if reader is None:
        raise UnrecognizedFormatError(p, f"unknown format {format!r} (known: {', '.join(FORMATS)})")
    try:
        run: Run = reader.read(p, aliases=aliases)
        return run
    except IngestError:
        raise
    except (OSError, ValueError) as exc:  # a reader bug must still name the file
        raise MalformedRunError(p, f"{type(exc).__name__}: {exc}") from None
