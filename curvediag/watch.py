"""``curvediag watch PATH``: follow a run that is still writing its logs.

The files under PATH (trainer_state.json rewritten at each checkpoint, TensorBoard event files,
a W&B run folder, a Lightning metrics.csv, ...) are polled; when one of them changed, the run is
read again and only the points past what was already seen are fed into a
:class:`~curvediag.live.LiveDiagnosis`, which re-diagnoses incrementally and reports each new
finding once, with its step. A file caught half written is never an error: the next poll reads
the rest. When the logs stop growing for ``--idle`` seconds (or on Ctrl-C) the whole catalog
runs once more on every point and the command exits with the ``--fail-on`` code.

Imports nothing heavy at module level: ``curvediag --help`` builds this command's parser.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from curvediag.live import LiveDiagnosis
    from curvediag.model import Diagnosis, Run
    from curvediag.ruleset.loader import RuleSet

__all__ = ["WatchResult", "watch"]

#: Names of the files whose changes are followed (everything else, e.g. weights, is ignored).
_LOG_SUFFIXES = (".json", ".csv", ".jsonl", ".wandb", ".yaml", ".tsv")
_LINE_FORMATS = (".csv", ".jsonl", ".tsv")


class WatchResult:
    """What :func:`watch` saw: the live diagnosis (events, final diagnosis) and why it ended."""

    def __init__(self, live: LiveDiagnosis | None, reason: str, error: str | None = None) -> None:
        self.live = live
        self.reason = reason
        self.error = error
        self.diagnosis: Diagnosis | None = None

    def exit_code(self, fail_on: str) -> int:
        if self.live is None or self.live.entries == 0:
            return 2
        from curvediag.live import severity_at_least

        worst = self.live.worst()
        return 1 if worst is not None and severity_at_least(worst, fail_on) else 0


def _is_log_file(p: Path) -> bool:
    return p.name.startswith("events.out.tfevents") or p.suffix.lower() in _LOG_SUFFIXES


def _signature(path: Path) -> tuple[tuple[str, int, int], ...]:
    """(file, size, mtime) of every log file under ``path``: changes when a log grows."""
    files: list[Path] = []
    try:
        if path.is_file():
            files = [path]
        elif path.is_dir():
            for root, dirs, names in os.walk(path):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                files += [Path(root) / n for n in names if _is_log_file(Path(n))]
    except OSError:
        return ()
    out = []
    for f in sorted(files):
        try:
            st = f.stat()
        except OSError:
            continue
        out.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(out)


def _partial_line_file(sig: tuple[tuple[str, int, int], ...]) -> bool:
    """A CSV/JSON-lines log whose last line is not finished yet."""
    for name, size, _ in sig:
        if size and name.lower().endswith(_LINE_FORMATS):
            try:
                with Path(name).open("rb") as fh:
                    fh.seek(size - 1)
                    if fh.read(1) != b"\n":
                        return True
            except OSError:
                return True
    return False


def _load_sources(path: Path, aliases: Mapping[str, str] | None) -> list[Run]:
    """The run at ``path``; for a folder with several formats of one run (a Trainer output
    folder), each format separately, so that the one that is furthest ahead is followed."""
    from curvediag.ingest import _FOLDER_FORMATS, _modules, load_run, load_runs

    al = dict(aliases) if aliases else None
    if path.is_dir():
        mods = _modules()
        found = [f for f in _FOLDER_FORMATS if mods[f].sniff(path)]
        if len(found) > 1:
            runs = []
            for fmt in found:
                try:
                    runs += load_runs(path, format=fmt, aliases=al)
                except Exception:  # one format half written: the others still count
                    continue
            if runs:
                return runs
    return [load_run(path, aliases=al)]


def _feed(live: LiveDiagnosis, runs: list[Run]) -> int:
    """Feed the points past what ``live`` has seen; returns the number of new log entries."""
    import math

    from curvediag.model import RunMeta

    by_step: dict[int, dict[str, float]] = {}
    wall: dict[int, float] = {}
    for r in runs:
        for name, s in r.metrics.items():
            last = live.last_step_of(name)
            start = 0 if last is None else int((s.steps <= last).sum())
            steps = s.steps[start:].tolist()
            values = s.values[start:].tolist()
            walls = s.wall_time[start:].tolist() if s.wall_time is not None else None
            for i, (st, v) in enumerate(zip(steps, values, strict=True)):
                by_step.setdefault(st, {}).setdefault(name, v)
                if walls is not None and math.isfinite(walls[i]):
                    wall.setdefault(st, walls[i])
        for field in RunMeta.model_fields:
            mine, theirs = getattr(live.meta, field), getattr(r.meta, field)
            if field == "summary":
                live.meta.summary.update(theirs)
            elif field == "hyperparameters":
                for k, v in theirs.items():
                    live.meta.hyperparameters.setdefault(k, v)
            elif mine in (None, [], False) and theirs not in (None, [], False):
                setattr(live.meta, field, theirs)
    for st in sorted(by_step):
        live.add(st, by_step[st], wall.get(st))
    return len(by_step)


def watch(
    path: str | os.PathLike[str],
    *,
    rules: RuleSet | None = None,
    aliases: Mapping[str, str] | None = None,
    idle: float = 300.0,
    poll: float = 2.0,
    out: Callable[[str], None] = print,
    should_stop: Callable[[], bool] | None = None,
) -> WatchResult:
    """Follow ``path`` until its logs stop growing for ``idle`` seconds; report as it goes.

    Args:
        path: What :func:`curvediag.load_run` reads.
        rules: The rule set (default: the built-in catalog).
        aliases: Extra metric-name mappings.
        idle: Seconds without any change to the log files after which watching ends.
        poll: Seconds between looks at the files.
        out: Where each new finding's line goes.
        should_stop: Called every poll; True ends watching (tests, embedding).

    Returns:
        A :class:`WatchResult` (``exit_code(fail_on)`` gives the command's exit code).
    """
    from curvediag.errors import CurvediagError
    from curvediag.live import LiveDiagnosis

    p = Path(path)
    live: LiveDiagnosis | None = None
    last_sig: tuple[tuple[str, int, int], ...] | None = None
    pending = False
    last_change = time.monotonic()
    last_error: str | None = None
    reason = "idle"
    try:
        while True:
            if should_stop is not None and should_stop():
                reason = "stopped"
                break
            sig = _signature(p)
            if sig != last_sig:
                last_sig, last_change, pending = sig, time.monotonic(), True
            elif not pending and time.monotonic() - last_change >= idle:
                break  # nothing changed for `idle` seconds (measured on a fresh look)
            if pending and sig and not _partial_line_file(sig):
                try:
                    runs = _load_sources(p, aliases)
                except (CurvediagError, OSError, ValueError) as exc:
                    last_error = str(exc)  # half written: wait for the rest
                else:
                    pending, last_error = False, None
                    if live is None:
                        live = LiveDiagnosis(
                            rules=rules, name=runs[0].name, source=str(p), aliases=aliases
                        )
                    _take_in(live, runs, out)
            if pending and time.monotonic() - last_change >= idle:
                break  # a file stayed unreadable for `idle` seconds
            time.sleep(poll)
    except KeyboardInterrupt:
        reason = "interrupted"
    result = WatchResult(live, reason, last_error)
    if live is not None and live.entries:
        result.diagnosis = _last_look(live, out)
    return result


def _take_in(live: LiveDiagnosis, runs: list[Run], out: Callable[[str], None]) -> None:
    """Feed the runs just read to the live diagnosis; print the findings that are new."""
    if _feed(live, runs):
        for ev in live.check():
            out(ev.line())


def _last_look(live: LiveDiagnosis, out: Callable[[str], None]) -> Diagnosis:
    """The live rules on every point, then the whole catalog through the pipeline; print what
    neither reported before and return the final diagnosis."""
    for ev in live.check(force=True):
        out(ev.line())
    finished = bool(live.meta.summary) or None
    diagnosis, late = live.finish(finished=finished)
    for ev in late:
        out(ev.line())
    return diagnosis
