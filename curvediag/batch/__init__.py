"""Batch analysis: find every run under folders (local or fsspec URLs) and diagnose them all.

Modules: :mod:`~curvediag.batch.discover` (walk trees into run units, cheaply),
:mod:`~curvediag.batch.runner` (diagnose units in a process pool or on a Dask cluster, results
streamed in discovery order), :mod:`~curvediag.batch.table` (the row schema and the CSV, Parquet,
JSON Lines and markdown writers), :mod:`~curvediag.cli.batch` (``curvediag batch``).

Nothing heavy is imported here: ``curvediag batch --help`` must start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["diagnose_many"]

if TYPE_CHECKING:
    from curvediag.batch.api import diagnose_many


def __getattr__(name: str) -> Any:
    if name == "diagnose_many":
        value = importlib.import_module("curvediag.batch.api").diagnose_many
        globals()[name] = value
        return value
    raise AttributeError(f"module 'curvediag.batch' has no attribute {name!r}")
