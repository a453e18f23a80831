"""All tabular readers in one place, in sniffing order.

The readers live in :mod:`curvediag.ingest.wandb_tables` (W&B chart export / runs table,
history dumps, ``wandb-summary.json``) and :mod:`curvediag.ingest.csv_logs` (Lightning
``metrics.csv``, TensorBoard CSV export, plain CSV/JSONL). Each is a
:class:`~curvediag.ingest._tabular.TableReader` with ``FORMAT``, ``sniff(path)``,
``read_all(path, aliases=)`` (a file can hold several runs) and ``read(path, aliases=)``.
"""

from __future__ import annotations

from pathlib import Path

from curvediag.errors import MalformedRunError, UnrecognizedFormatError
from curvediag.ingest import csv_logs, text_logs, wandb_tables
from curvediag.ingest._tabular import TableReader
from curvediag.ingest.trainer_args import apply_trainer_config
from curvediag.ingest.wandb_tables import read_wandb_config
from curvediag.model import Run

__all__ = [
    "FORMATS",
    "READERS",
    "TableReader",
    "apply_trainer_config",
    "detect",
    "read_all",
    "read_wandb_config",
    "sniff",
]

#: Every tabular reader, in the order their ``sniff`` must be tried. The plain ``csv`` and
#: ``jsonl`` readers accept any file with their extension, so they come last.
READERS: tuple[TableReader, ...] = (
    wandb_tables.CHART_EXPORT,
    wandb_tables.HISTORY,
    csv_logs.LIGHTNING,
    csv_logs.TENSORBOARD_CSV,
    wandb_tables.SUMMARY,
    text_logs.READER,
    csv_logs.PLAIN_CSV,
    csv_logs.PLAIN_JSONL,
)
FORMATS: dict[str, TableReader] = {r.FORMAT: r for r in READERS}


def detect(path: Path) -> TableReader | None:
    """The first reader whose ``sniff`` accepts ``path``, or None."""
    for reader in READERS:
        if reader.sniff(path):
            return reader
    return None


def sniff(path: Path) -> bool:
    """True when some tabular reader recognises ``path``."""
    return detect(path) is not None


def read_all(path: Path, *, aliases: dict[str, str] | None = None) -> list[Run]:
    """Every run in a tabular log file (detecting its format)."""
    p = Path(path)
    reader = detect(p)
    if reader is None:
        if not p.exists():
            raise MalformedRunError(p, "file not found")
        raise UnrecognizedFormatError(
            p, "not a tabular training log (supported: " + ", ".join(FORMATS) + ")"
        )
    return reader.read_all(p, aliases=aliases)
