"""The reader protocol: what every log-format reader provides, and the registry of readers.

A reader is anything with

- ``FORMAT``: its format name (``hf-trainer``, ``tensorboard``, ``wandb-csv`` ...);
- ``sniff(path) -> bool``: whether it recognises the file or folder (cheap: names and the first
  bytes, never the whole file);
- ``read_all(path, *, aliases=None) -> list[Run]``: every run the path holds, as
  :class:`~curvediag.model.Run` objects (a W&B CSV export can hold several).

The folder readers are modules (:mod:`~curvediag.ingest.hf_trainer`,
:mod:`~curvediag.ingest.tensorboard`, :mod:`~curvediag.ingest.wandb_run`); the tabular ones are
:class:`~curvediag.ingest._tabular.TableReader` objects (:mod:`~curvediag.ingest.tables`).
Adding a format is one reader and one line in :func:`readers`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from curvediag.model import Run

__all__ = ["Aliases", "Reader", "readers"]

Aliases = dict[str, str] | None


@runtime_checkable
class Reader(Protocol):
    """One log format (see the module docstring)."""

    @property
    def FORMAT(self) -> str: ...  # the readers' module constant

    def sniff(self, path: Path, /) -> bool: ...

    def read_all(self, path: Path, /, *, aliases: Aliases = None) -> list[Run]: ...


def readers() -> dict[str, Reader]:
    """Format name -> reader, in the order detection tries them (the plain CSV/JSONL readers
    accept any file with their extension, so they come last)."""
    from curvediag.ingest import hf_trainer, tables, tensorboard, wandb_run

    out: dict[str, Reader] = {
        hf_trainer.FORMAT: hf_trainer,
        tensorboard.FORMAT: tensorboard,
        wandb_run.FORMAT: wandb_run,
    }
    out.update(tables.FORMATS)
    return out
