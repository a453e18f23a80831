"""Diagnose run units in parallel and stream the rows to writers.

Engines:

- ``local`` with ``jobs == 1``: in this process, one unit after the other.
- ``local`` with ``jobs > 1``: a :class:`~concurrent.futures.ProcessPoolExecutor`. On Linux
  workers are forked when the caller runs no other thread (fastest; they inherit the imports)
  and started by a ``forkserver`` otherwise (forking a threaded process is unsafe); elsewhere
  the platform's default (``spawn``: the caller's script needs ``if __name__ == "__main__"``).
  Each worker loads the rules once and keeps them.
- ``dask``: the same tasks on a Dask distributed cluster (``scheduler`` address, or a local
  cluster of ``jobs`` processes when None). Paths must be readable from the workers (a shared
  file system, or fsspec URLs).

Only a bounded window of units is in flight (``8 x jobs``); results are yielded **in discovery
order** (a finished unit waits for the ones before it), so the table is the same whatever the
engine and the number of jobs, and memory is bounded by the window, not the number of runs.
Discovery itself is lazy: the walk advances as results are consumed.

Nothing a unit does stops the batch: read and diagnosis errors become error rows, and a worker
that dies (killed, out of memory, crashed) costs one error row for the unit that killed it (the
units in flight with it are retried one at a time in a fresh pool to find out which).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import multiprocessing
import os
import re
import sys
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curvediag.batch._fs import fetch_unit, local_path_of
from curvediag.batch.discover import DEFAULT_MAX_FILE_SIZE, Unit, discover
from curvediag.batch.progress import Progress
from curvediag.batch.table import (
    BatchStats,
    ReportDir,
    Row,
    TableWriter,
    diagnosis_row,
    error_row,
)
from curvediag.errors import CurvediagError, MissingDependencyError, OutOfMemoryError
from curvediag.ingest import load_runs
from curvediag.model import Run
from curvediag.pipeline import diagnose
from curvediag.ruleset.loader import RuleSet, load_rules

__all__ = [
    "ENGINES",
    "Options",
    "RuleSpec",
    "UnitResult",
    "default_jobs",
    "iter_results",
    "process_unit",
    "ruleset_for",
    "run_batch",
]

ENGINES = ("local", "dask")
_WORKER_DIED = (
    "the worker reading this run died (killed, out of memory or crashed) and it was skipped"
)


def default_jobs() -> int:
    """The CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class RuleSpec:
    """Which rules to load, in a form that pickles and hashes (sent to every worker)."""

    paths: tuple[str, ...] = ()
    builtin: bool = True
    overrides_json: str = "{}"

    @classmethod
    def make(
        cls,
        paths: Iterable[str | os.PathLike[str]] = (),
        *,
        builtin: bool = True,
        overrides: dict[str, Any] | None = None,
    ) -> RuleSpec:
        return cls(
            tuple(os.fspath(p) for p in paths),
            builtin,
            json.dumps(overrides or {}, sort_keys=True, default=str),
        )

    def load(self) -> RuleSet:
        return load_rules(
            *self.paths, builtin=self.builtin, overrides=json.loads(self.overrides_json) or None
        )


@dataclass(frozen=True)
class Options:
    """Everything a worker needs besides the unit."""

    rules: RuleSpec = field(default_factory=RuleSpec)
    aliases: tuple[tuple[str, str], ...] = ()
    min_steps: int | None = None
    reports: bool = False


@dataclass
class UnitResult:
    """What one unit produced: its rows, its per-run markdown postmortems (when asked for), and how
    many runs it held below ``min_steps`` (left out)."""

    rows: list[Row]
    reports: list[tuple[str, str]] = field(default_factory=list)
    below_min_steps: int = 0


_RULESETS: dict[RuleSpec, RuleSet] = {}
_RULES_LOCK = threading.Lock()


def ruleset_for(spec: RuleSpec) -> RuleSet:
    """The rules of ``spec``, loaded once per process and kept."""
    with _RULES_LOCK:
        rs = _RULESETS.get(spec)
        if rs is None:
            rs = _RULESETS[spec] = spec.load()
        return rs


def _join(base: str, rel: str) -> str:
    if not rel or rel == ".":
        return base
    if "://" in base:
        return base.rstrip("/") + "/" + rel.replace(os.sep, "/")
    return str(Path(base) / rel)


def _run_path(unit_path: str, local: Path, run: Run) -> str:
    """The path to show for one of several runs of a unit: a sub-folder for a tree of runs,
    the unit itself for a file holding several runs (the run name tells them apart)."""
    if local.is_file():
        return unit_path
    try:
        rel = os.path.relpath(run.source, local)
    except ValueError:  # pragma: no cover - another drive on Windows
        return unit_path
    if rel == "." or rel.startswith(".."):
        return unit_path
    return _join(unit_path, rel)


def _diagnose_unit(unit: Unit, local: Path, opts: Options) -> UnitResult:
    ruleset = ruleset_for(opts.rules)
    try:
        runs = load_runs(local, aliases=dict(opts.aliases) or None)
    except CurvediagError as exc:
        message = str(exc).replace(str(local), unit.path)
        return UnitResult([error_row(unit.path, message, formats=_guess(unit))])
    except MemoryError:
        return UnitResult(
            [error_row(unit.path, "out of memory while reading", formats=_guess(unit))]
        )
    except Exception as exc:  # a reader bug must not stop the batch; the row says what it was
        message = f"unexpected {type(exc).__name__} while reading: {exc}".replace(
            str(local), unit.path
        )
        return UnitResult([error_row(unit.path, message, formats=_guess(unit))])
    result = UnitResult([])
    names: dict[str, int] = {}
    for run in runs:
        path = _run_path(unit.path, local, run) if len(runs) > 1 else unit.path
        if opts.min_steps is not None and (run.last_step or 0) < opts.min_steps:
            result.below_min_steps += 1
            continue
        try:
            d = diagnose(run, rules=ruleset)
        except OutOfMemoryError:
            result.rows.append(
                error_row(
                    path,
                    "out of memory while diagnosing",
                    formats=run.format,
                    run_name=run.name,
                )
            )
            continue
        except Exception as exc:  # a rule or feature bug: one error row, the batch goes on
            result.rows.append(
                error_row(
                    path,
                    f"diagnosis failed: {type(exc).__name__}: {exc}",
                    formats=run.format,
                    run_name=run.name,
                )
            )
            continue
        result.rows.append(diagnosis_row(path, d))
        if opts.reports:
            key = f"{path}\0{run.name}"
            index = names.get(key, 0)
            names[key] = index + 1
            label = run.name if len(runs) > 1 else ""
            result.reports.append((ReportDir.file_name(path, label, index), d.to_markdown()))
    return result


def _guess(unit: Unit) -> str:
    return "" if unit.kind in ("file", "error") else unit.kind


def process_unit(unit: Unit, opts: Options) -> UnitResult:
    """Read and diagnose one unit; never raises (problems become error rows).

    Remote units (fsspec URLs) are copied to a temporary folder first.
    """
    if unit.error:
        return UnitResult([error_row(unit.path, unit.error, formats=_guess(unit))])
    quiet = threading.current_thread() is threading.main_thread()
    with warnings.catch_warnings() if quiet else contextlib.nullcontext():
        if quiet:  # the run's own warnings are on Run.warnings; do not litter stderr
            warnings.simplefilter("ignore")
        local = local_path_of(unit.path)
        if local is not None:
            return _diagnose_unit(unit, Path(local), opts)
        with tempfile.TemporaryDirectory(prefix="curvediag-batch-") as tmp:
            try:
                fetched = fetch_unit(unit.path, Path(tmp))
            except Exception as exc:  # network, permissions, missing extra...
                return UnitResult(
                    [error_row(unit.path, f"cannot fetch: {type(exc).__name__}: {exc}")]
                )
            return _diagnose_unit(unit, fetched, opts)


# --------------------------------------------------------------------------------------------
# Engines
# --------------------------------------------------------------------------------------------
def _done(value: UnitResult) -> Future[UnitResult]:
    f: Future[UnitResult] = Future()
    f.set_result(value)
    return f


def _start_method() -> str:
    """``fork`` on Linux when this process runs no other thread (fast start, workers inherit
    the loaded rules, and scripts need no ``if __name__ == "__main__"`` guard); ``forkserver``
    when threads run (forking them is unsafe); the platform's default elsewhere (``spawn``
    on macOS and Windows, where the caller's script needs the guard)."""
    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux") and "fork" in methods:
        if threading.active_count() == 1:
            return "fork"
        if "forkserver" in methods:
            return "forkserver"
    return multiprocessing.get_start_method(allow_none=False)


def _executor(jobs: int, start_method: str | None) -> ProcessPoolExecutor:
    method = start_method or _start_method()
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["curvediag.batch.runner"])
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)


def _local_pool(
    units: Iterable[Unit], opts: Options, jobs: int, start_method: str | None
) -> Iterator[tuple[Unit, UnitResult]]:
    window = 8 * jobs
    it = iter(units)
    inflight: deque[tuple[Unit, Future[UnitResult]]] = deque()
    ex = _executor(jobs, start_method)
    try:
        while True:
            while len(inflight) < window:
                u = next(it, None)
                if u is None:
                    break
                if u.error:  # nothing to read: no need to send it anywhere
                    inflight.append((u, _done(process_unit(u, opts))))
                else:
                    inflight.append((u, ex.submit(process_unit, u, opts)))
            if not inflight:
                break
            u, fut = inflight.popleft()
            try:
                res = fut.result()
            except BrokenProcessPool:
                ex.shutdown(wait=False, cancel_futures=True)
                suspects = [u] + [v for v, f in inflight]
                inflight.clear()
                ex = _executor(jobs, start_method)
                for v in suspects:  # one at a time, to tell which one kills its worker
                    try:
                        r = (
                            process_unit(v, opts)
                            if v.error
                            else ex.submit(process_unit, v, opts).result()
                        )
                    except BrokenProcessPool:
                        r = UnitResult([error_row(v.path, _WORKER_DIED, formats=_guess(v))])
                        ex.shutdown(wait=False, cancel_futures=True)
                        ex = _executor(jobs, start_method)
                    yield v, r
                continue
            yield u, res
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)


#: How long ``--scheduler ADDRESS`` may take to answer before the batch gives up.
SCHEDULER_TIMEOUT = 10.0
_SCHEDULER_ADDRESS = re.compile(
    r"^(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}/?$"
)


def check_scheduler_address(scheduler: str) -> None:
    """Raise a clear error at once when ``scheduler`` is not a Dask scheduler address.

    Raises:
        CurvediagError: Not ``[tcp://]HOST:PORT`` (or tls://, ucx://, ws://, wss://).
    """
    if not _SCHEDULER_ADDRESS.match(scheduler):
        raise CurvediagError(
            f"--scheduler {scheduler!r}: not a Dask scheduler address "
            "(expected tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786)"
        )


def _connect(client_class: Any, scheduler: str) -> Any:
    """A Dask client of the scheduler at ``scheduler``, or a clear error within seconds."""
    check_scheduler_address(scheduler)
    try:
        return client_class(scheduler, set_as_default=False, timeout=SCHEDULER_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CurvediagError(
            f"--scheduler {scheduler}: cannot reach the Dask scheduler within "
            f"{SCHEDULER_TIMEOUT:g} s ({type(exc).__name__}: {exc})"
        ) from None


def _dask(
    units: Iterable[Unit], opts: Options, jobs: int, scheduler: str | None
) -> Iterator[tuple[Unit, UnitResult]]:
    try:
        client_class: Any = importlib.import_module("distributed").Client
    except ImportError:
        raise MissingDependencyError(
            "distributed", "dask", "--engine dask (sending runs to a Dask cluster)"
        ) from None
    if scheduler:
        client = _connect(client_class, scheduler)
    else:
        client = client_class(
            n_workers=jobs,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            set_as_default=False,
        )
    try:
        threads = sum(client.nthreads().values()) or 1
        window = max(8, 4 * threads)
        it = iter(units)
        inflight: deque[tuple[Unit, Any]] = deque()
        while True:
            while len(inflight) < window:
                u = next(it, None)
                if u is None:
                    break
                if u.error:
                    inflight.append((u, None))
                else:
                    inflight.append((u, client.submit(process_unit, u, opts, pure=False)))
            if not inflight:
                break
            u, fut = inflight.popleft()
            if fut is None:
                yield u, process_unit(u, opts)
                continue
            try:
                res = fut.result()
            except Exception as exc:  # KilledWorker, lost connection to a worker...
                res = UnitResult(
                    [error_row(u.path, f"{_WORKER_DIED} ({type(exc).__name__})", formats=_guess(u))]
                )
            finally:
                fut.release()
            yield u, res
    finally:
        client.close()


def iter_results(
    units: Iterable[Unit],
    opts: Options,
    *,
    jobs: int = 1,
    engine: str = "local",
    scheduler: str | None = None,
    start_method: str | None = None,
) -> Iterator[tuple[Unit, UnitResult]]:
    """(unit, result) pairs in the order of ``units``, computed by ``engine``.

    Raises:
        ValueError: Unknown engine.
        MissingDependencyError: ``dask`` without ``curvediag[dask]``.
    """
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    if engine == "dask":
        return _dask(units, opts, jobs, scheduler)
    if jobs <= 1:
        return ((u, process_unit(u, opts)) for u in units)
    return _local_pool(units, opts, jobs, start_method)


def _tally(stats: BatchStats, res: UnitResult) -> None:
    """Count one unit's rows into the running statistics (errors, the worst severity)."""
    stats.units += 1
    stats.below_min_steps += res.below_min_steps
    for row in res.rows:
        stats.rows += 1
        if row["verdict"] == "error":
            stats.errors += 1
        else:
            stats.worst_rank = max(stats.worst_rank, _severity_rank(row))


def _severity_rank(row: Row) -> int:
    """2 critical, 1 warning, 0 info, -1 no finding: the worst finding of a diagnosed row."""
    if row["n_critical"]:
        return 2
    if row["n_warning"]:
        return 1
    return 0 if row["n_info"] else -1


def _emit(res: UnitResult, writers: Sequence[TableWriter], reports: ReportDir | None) -> None:
    """Hand one unit's rows to every writer and write its reports."""
    for row in res.rows:
        for w in writers:
            w.write(row)
    if reports is not None:
        for name, text in res.reports:
            reports.write(name, text)


def run_batch(
    paths: Sequence[str | os.PathLike[str]],
    writers: Sequence[TableWriter],
    *,
    jobs: int | None = None,
    engine: str = "local",
    scheduler: str | None = None,
    rules: RuleSpec | None = None,
    aliases: dict[str, str] | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    min_steps: int | None = None,
    max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    reports_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    start_method: str | None = None,
) -> BatchStats:
    """Discover the runs under ``paths``, diagnose them, and write one row per run to every
    writer as results arrive (writers are closed with the final statistics).

    Raises:
        RuleSchemaError: A rule file or an override is invalid (checked before any work).
        ValueError: Unknown engine.
        MissingDependencyError: A missing optional extra (dask).
    """
    spec = rules or RuleSpec()
    ruleset_for(spec)  # fail fast, in this process, on a bad rule file or override
    n_jobs = jobs if jobs and jobs > 0 else default_jobs()
    opts = Options(
        rules=spec,
        aliases=tuple(sorted((aliases or {}).items())),
        min_steps=min_steps,
        reports=reports_dir is not None,
    )
    own = [w.path for w in writers if w.path] + ([os.fspath(reports_dir)] if reports_dir else [])
    find = functools.partial(
        discover, paths, include=include, exclude=exclude, max_file_size=max_file_size, skip=own
    )
    found = find()
    if progress is not None and progress.enabled:
        # a counting pass (names and first bytes only, nothing kept) gives the bar its total
        progress.total = sum(1 for _ in find())
    reports = ReportDir(reports_dir) if reports_dir is not None else None
    stats = BatchStats(jobs=n_jobs, engine=engine, roots=[os.fspath(p) for p in paths])
    start = time.perf_counter()
    try:
        for _unit, res in iter_results(
            found, opts, jobs=n_jobs, engine=engine, scheduler=scheduler, start_method=start_method
        ):
            _tally(stats, res)
            _emit(res, writers, reports)
            if progress is not None:
                progress.update(stats.rows, stats.errors, units=stats.units)
    finally:  # also on Ctrl-C: the outputs stay valid and hold the runs done so far
        stats.seconds = time.perf_counter() - start
        stats.not_logs, stats.filtered = found.stats.not_logs, found.stats.filtered
        stats.duplicates = found.stats.duplicates
        if progress is not None:
            progress.close()
        for w in writers:
            w.close(stats)
    return stats
