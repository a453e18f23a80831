"""One-line progress on stderr, silent when stderr is not a terminal.

- :class:`Progress`: the batch bar (done / total with an ETA when the total is known, else runs
  done, errors and rate);
- :class:`Stages`: the stages of one long job (``curvediag report``: reading, diagnosing,
  plotting, writing) with the time spent so far;
- :class:`ReadBar`: the reading of one big file (bytes read or decoded of the total, with an
  ETA), fed by the readers through :func:`curvediag.ingest.reading_progress`; it draws into the
  stage line of ``report`` or a line of its own (:class:`Line`) for ``diagnose``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from curvediag.escape import terminal

__all__ = ["Line", "Progress", "ReadBar", "Stages"]


def _is_terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Line:
    """One redrawn line on ``stream`` (default stderr), on a terminal only.

    ``draw(text)`` replaces the line; ``clear()`` blanks it so that the output that follows
    starts clean; ``end()`` keeps it and moves to a new line.
    """

    def __init__(self, stream: IO[str] | None = None, *, enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self._width = 0

    def draw(self, text: str) -> None:
        if not self.enabled:
            return
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + pad)
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def end(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0


class Progress:
    """``update(runs, errors)`` as results arrive; ``close()`` ends the line.

    Args:
        stream: Where to draw (default stderr).
        enabled: Force on or off; by default on only when ``stream`` is a terminal.
        interval: Seconds between redraws.
    """

    def __init__(
        self, stream: IO[str] | None = None, *, enabled: bool | None = None, interval: float = 0.2
    ) -> None:
        self._line = Line(stream, enabled=enabled)
        self.stream = self._line.stream
        self.enabled = self._line.enabled
        self.interval = interval
        self.start = time.perf_counter()
        self._last = 0.0
        self.runs = 0
        self.errors = 0
        #: Run units to process, when known (counted before the batch starts); ``None``: unknown.
        self.total: int | None = None
        self.units = 0

    def line(self) -> str:
        elapsed = time.perf_counter() - self.start
        rate = self.runs / elapsed if elapsed > 0 else 0.0
        if self.total:
            done = min(self.units, self.total)
            share = done / self.total
            bar = "#" * round(20 * share) + "-" * (20 - round(20 * share))
            unit_rate = done / elapsed if elapsed > 0 else 0.0
            left = (self.total - done) / unit_rate if unit_rate > 0 else None
            eta = "ETA --" if left is None else f"ETA {_duration(left)}"
            return (
                f"curvediag batch [{bar}] {done:,}/{self.total:,} ({share:.0%}), "
                f"{self.runs:,} runs, {self.errors:,} errors, {eta}"
            )
        return (
            f"curvediag batch: {self.runs:,} runs done, {self.errors:,} errors, "
            f"{rate:.1f} runs/s, {elapsed:.0f} s"
        )

    def update(
        self, runs: int, errors: int, *, units: int | None = None, force: bool = False
    ) -> None:
        self.runs, self.errors = runs, errors
        if units is not None:
            self.units = units
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        self._line.draw(self.line())

    def close(self) -> None:
        if self.enabled:
            self.update(self.runs, self.errors, force=True)
            self._line.end()


class Stages:
    """``stage(name)`` as each stage of a job starts; ``close()`` ends the line.

    Args:
        label: What runs (``curvediag report``).
        names: The stages, in order (their count is the bar's total).
        stream: Where to draw (default stderr).
        enabled: Force on or off; by default on only when ``stream`` is a terminal.
    """

    def __init__(
        self,
        label: str,
        names: list[str],
        stream: IO[str] | None = None,
        *,
        enabled: bool | None = None,
    ) -> None:
        self.label = label
        self.names = list(names)
        self._line = Line(stream, enabled=enabled)
        self.stream = self._line.stream
        self.enabled = self._line.enabled
        self.start = time.perf_counter()
        self.done = 0
        self._current = ""

    def line(self, name: str) -> str:
        total = len(self.names)
        bar = "#" * self.done + "-" * (total - self.done)
        elapsed = time.perf_counter() - self.start
        return f"{self.label} [{bar}] {self.done}/{total} {name} ({_duration(elapsed)})"

    def stage(self, name: str) -> None:
        """Stage ``name`` starts (the ones before it are done)."""
        if name in self.names:
            self.done = self.names.index(name)
        self._current = name
        self._line.draw(self.line(name + "..."))

    def detail(self, text: str) -> None:
        """Show ``text`` after the current stage's name (e.g. a :class:`ReadBar`'s bar)."""
        self._line.draw(self.line(f"{self._current}: {text}"))

    def close(self, *, failed: bool = False) -> None:
        """End the line: all stages done, or (``failed``) just a line break so that the error
        message that follows starts on a line of its own."""
        if not self.enabled:
            return
        if not failed:
            self.done = len(self.names)
            self._line.draw(self.line("done"))
        self._line.end()


#: Seconds a file must take before its :class:`ReadBar` appears.
READ_BAR_DELAY = 0.5


class ReadBar:
    """A listener for :func:`curvediag.ingest.reading_progress` that draws how far the reading
    of a file has got::

        decoding events.out.tfevents.17000.host [########------------] 412 MB/980 MB (42%), ETA 5 s

    Nothing is drawn during the first ``delay`` seconds of a file, so small files (most runs)
    show no bar at all.

    Args:
        draw: Where the text goes (``Line.draw``, or ``Stages.detail`` inside a staged job).
        delay: Seconds before the first drawing (default ``READ_BAR_DELAY``).
        interval: Seconds between redraws.
        clock: The time source (tests pass a fake one).
    """

    def __init__(
        self,
        draw: Callable[[str], None],
        *,
        delay: float | None = None,
        interval: float = 0.1,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.draw = draw
        self.delay = READ_BAR_DELAY if delay is None else delay
        self.interval = interval
        self.clock = clock
        self._path = ""
        self._first = 0.0
        self._phase = ""
        self._phase_start = (0.0, 0)
        self._last = -1.0
        self.drawn = 0

    def __call__(self, path: str, phase: str, done: int, total: int) -> None:
        now = self.clock()
        if path != self._path:
            self._path, self._first, self._phase = path, now, ""
        if phase != self._phase:
            self._phase, self._phase_start = phase, (now, done)
        if now - self._first < self.delay:
            return
        if now - self._last < self.interval and done < total:
            return
        self._last = now
        self.drawn += 1
        self.draw(self.text(path, phase, done, total, now))

    def text(self, path: str, phase: str, done: int, total: int, now: float) -> str:
        # a file name is the user's text: control characters never reach the terminal raw
        name = terminal(Path(path).name or path)
        if phase == "parsing":
            took = _duration(now - self._phase_start[0])
            return f"parsing {name} ({_size(total)}), {took}"
        share = done / total if total > 0 else 0.0
        filled = round(20 * share)
        bar = "#" * filled + "-" * (20 - filled)
        t0, d0 = self._phase_start
        rate = (done - d0) / (now - t0) if now > t0 and done > d0 else 0.0
        eta = f"ETA {_duration((total - done) / rate)}" if rate > 0 else "ETA --"
        return f"{phase} {name} [{bar}] {_size(done)}/{_size(total)} ({share:.0%}), {eta}"


def _size(n: int) -> str:
    """Bytes for people: 512 B, 48 KB, 980 MB, 1.2 GB (powers of 1024)."""
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
