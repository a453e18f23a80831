"""One-line progress on stderr, silent when stderr is not a terminal.

- :class:`Progress`: the batch bar (done / total with an ETA when the total is known, else runs
  done, errors and rate);
- :class:`Stages`: the stages of one long job (``curvediag report``: reading, diagnosing,
  plotting, writing) with the time spent so far.
"""

from __future__ import annotations

import sys
import time
from typing import IO

__all__ = ["Progress", "Stages"]


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
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.interval = interval
        self.start = time.perf_counter()
        self._last = 0.0
        self._width = 0
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
        text = self.line()
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + pad)
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.update(self.runs, self.errors, force=True)
            self.stream.write("\n")
            self.stream.flush()


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
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.start = time.perf_counter()
        self.done = 0
        self._width = 0

    def line(self, name: str) -> str:
        total = len(self.names)
        bar = "#" * self.done + "-" * (total - self.done)
        elapsed = time.perf_counter() - self.start
        return f"{self.label} [{bar}] {self.done}/{total} {name} ({_duration(elapsed)})"

    def stage(self, name: str) -> None:
        """Stage ``name`` starts (the ones before it are done)."""
        if name in self.names:
            self.done = self.names.index(name)
        self._draw(self.line(name + "..."))

    def close(self, *, failed: bool = False) -> None:
        """End the line: all stages done, or (``failed``) just a line break so that the error
        message that follows starts on a line of its own."""
        if not self.enabled:
            return
        if not failed:
            self.done = len(self.names)
            self._draw(self.line("done"))
        self.stream.write("\n")
        self.stream.flush()

    def _draw(self, text: str) -> None:
        if not self.enabled:
            return
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + pad)
        self.stream.flush()


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
