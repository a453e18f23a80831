"""``diagnose_many``: the batch table as a pandas DataFrame."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from curvediag.batch.table import Row

__all__ = ["diagnose_many"]

PathArg = str | os.PathLike[str]


def diagnose_many(
    paths: PathArg | Iterable[PathArg],
    *,
    jobs: int | None = None,
    rules: Iterable[PathArg] | None = None,
    overrides: Mapping[str, Any] | None = None,
    builtin: bool = True,
    aliases: Mapping[str, str] | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    min_steps: int | None = None,
    max_file_size: int | None = None,
    engine: str = "local",
    scheduler: str | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Diagnose every run under ``paths``: one row per run, in discovery order.

    Discovery, errors and columns are those of ``curvediag batch`` (see
    :mod:`curvediag.batch.table` for the columns): a run that cannot be read or diagnosed is a
    row with ``verdict == "error"`` and the reason in ``error``; nothing raises for one bad run.

    Args:
        paths: Folders, files or URLs (``file://``, ``memory://``, ``s3://`` with fsspec).
        jobs: Worker processes (default: the machine's cores; 1 = in this process).
        rules: Extra rule files or folders.
        overrides: Parameter overrides, ``{"overfitting.min_rise": 0.1}``.
        builtin: Include the built-in rules.
        aliases: Extra metric-name mappings, raw name -> canonical name.
        include: Keep only runs whose path matches one of these globs.
        exclude: Skip runs and folders matching one of these globs.
        min_steps: Leave out runs that logged fewer steps.
        max_file_size: Log files above this many bytes become error rows (default 2 GiB).
        engine: ``local`` (processes on this machine) or ``dask``.
        scheduler: The Dask scheduler address for ``engine="dask"``.
        progress: Draw a progress bar on stderr (when it is a terminal).

    Returns:
        A DataFrame with the batch table's columns.

    Raises:
        RuleSchemaError: A rule file or an override is invalid.
        MissingDependencyError: ``engine="dask"`` or a URL without the optional extra.
    """
    from curvediag.batch.discover import DEFAULT_MAX_FILE_SIZE
    from curvediag.batch.progress import Progress
    from curvediag.batch.runner import RuleSpec, run_batch
    from curvediag.batch.table import TableWriter, rows_frame

    roots = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    rows: list[Row] = []

    class _Collect(TableWriter):
        def write(self, row: Row) -> None:
            rows.append(row)

    run_batch(
        roots,
        [_Collect()],
        jobs=jobs,
        engine=engine,
        scheduler=scheduler,
        rules=RuleSpec.make(rules or (), builtin=builtin, overrides=dict(overrides or {})),
        aliases=dict(aliases or {}),
        include=include,
        exclude=exclude,
        min_steps=min_steps,
        max_file_size=DEFAULT_MAX_FILE_SIZE if max_file_size is None else max_file_size,
        progress=Progress(enabled=None if progress else False),
    )
    return rows_frame(rows)
