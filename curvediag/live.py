"""Incremental diagnosis of a run that is still training.

:class:`LiveDiagnosis` is fed log entries as they are written (by
:class:`curvediag.integrations.transformers.CurvediagCallback` or ``curvediag watch``) and
reports each new finding once, with the step at which it was first seen. Only rules marked
``live: true`` (rules that make sense on a prefix of the run) are evaluated while the run
trains; :meth:`LiveDiagnosis.finish` runs the whole catalog at the end.

Cost per call does not grow with the length of the run:

* every metric is kept in growable arrays (amortised O(1) per point) and, once it holds more
  than ``max_points`` points, also in at most ``max_points`` equal-width bins that are updated
  as points arrive (a bin's value is the mean of its finite points, NaN if it holds a non-finite
  one; two neighbouring bins merge when the bins are full). The rules see a *view* of at most
  ``max_points`` bins plus the last ``tail`` raw points, so the newest points keep their full
  resolution;
* a sentinel keeps O(1) running statistics of the train loss and gradient norm (an
  exponentially weighted level and spread in log space) and marks the run *hot* when a point
  leaves that band or is not finite;
* the rule engine runs on the view at most once every ``stride`` new log entries, where the
  stride grows with the run (``ceil(entries / evaluations_per_run)``), and at once on every
  entry while the run is hot. Each evaluation costs a bounded amount (the view is bounded), and
  the number of evaluations over a run grows only logarithmically with its length.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from curvediag.ingest.aliases import canonical_name
from curvediag.model import Diagnosis, Finding, Run, RunMeta, Series, Severity
from curvediag.ruleset.loader import RuleSet, load_rules

__all__ = ["LiveDiagnosis", "LiveEvent", "severity_at_least"]

#: Keys of the Trainer's end-of-training summary entry (not a metric log).
_SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second"})
#: Series the sentinel watches.
_SENTINEL_METRICS = ("train/loss", "train/grad_norm")


def severity_at_least(severity: Severity, threshold: str | Severity | None) -> bool:
    """Whether ``severity`` is at or above ``threshold`` (``"never"``/None: never)."""
    if threshold is None or threshold == "never":
        return False
    t = threshold if isinstance(threshold, Severity) else Severity(str(threshold))
    return severity.rank >= t.rank


@dataclass(frozen=True)
class LiveEvent:
    """A finding the first time it was seen while the run trained."""

    finding: Finding
    step: int  # the last logged step when the finding first fired
    live: bool = True  # False for findings that appeared only in the final diagnosis

    def line(self) -> str:
        """One line for a log or a terminal."""
        f = self.finding
        onset = "" if f.onset_step is None else f", onset step {f.onset_step}"
        when = f"step {self.step}" if self.live else "at the end of the run"
        return (
            f"curvediag [{when}] {f.severity.value.upper()} {f.rule_id}: {f.title}{onset}. "
            f"{f.evidence}"
        )


class _Bins:
    """At most ``cap`` equal-width bins over a series, updated one point at a time."""

    __slots__ = (
        "bad",
        "cap",
        "count",
        "m",
        "o_bad",
        "o_cnt",
        "o_n",
        "o_sum",
        "step",
        "total",
        "wall",
        "width",
    )

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.width = 1
        self.m = 0  # closed bins
        self.step = np.zeros(cap, dtype=np.int64)
        self.total = np.zeros(cap, dtype=np.float64)
        self.count = np.zeros(cap, dtype=np.int64)
        self.bad = np.zeros(cap, dtype=bool)
        self.wall = np.full(cap, np.nan)
        self.o_n = 0
        self.o_sum = 0.0
        self.o_cnt = 0
        self.o_bad = False

    def add(self, step: int, value: float, wall: float) -> None:
        if math.isfinite(value):
            self.o_sum += value
            self.o_cnt += 1
        else:
            self.o_bad = True
        self.o_n += 1
        if self.o_n < self.width:
            return
        i = self.m
        self.step[i], self.total[i], self.count[i] = step, self.o_sum, self.o_cnt
        self.bad[i], self.wall[i] = self.o_bad, wall
        self.m += 1
        self.o_n, self.o_sum, self.o_cnt, self.o_bad = 0, 0.0, 0, False
        if self.m == self.cap:  # merge neighbours: half as many bins, twice as wide
            h = self.cap // 2
            self.step[:h] = self.step[1::2]
            self.wall[:h] = self.wall[1::2]
            self.total[:h] = self.total[0::2] + self.total[1::2]
            self.count[:h] = self.count[0::2] + self.count[1::2]
            self.bad[:h] = self.bad[0::2] | self.bad[1::2]
            self.m = h
            self.width *= 2

    def replace_last(self, old: float, new: float, wall: float) -> None:
        """The last point added changed its value (the same step logged again)."""
        if self.o_n > 0:
            if math.isfinite(old):
                self.o_sum -= old
                self.o_cnt -= 1
            if math.isfinite(new):
                self.o_sum += new
                self.o_cnt += 1
            else:
                self.o_bad = True
            return
        if self.m == 0:
            return
        i = self.m - 1
        if math.isfinite(old):
            self.total[i] -= old
            self.count[i] -= 1
        if math.isfinite(new):
            self.total[i] += new
            self.count[i] += 1
        else:
            self.bad[i] = True
        self.wall[i] = wall

    def values(self, k: int) -> npt.NDArray[np.float64]:
        with np.errstate(invalid="ignore", divide="ignore"):
            v = self.total[:k] / self.count[:k]
        v[self.bad[:k] | (self.count[:k] == 0)] = np.nan
        return v


class _Column:
    """One metric: growable raw arrays plus its bins."""

    __slots__ = ("bins", "n", "steps", "values", "wall")

    def __init__(self, bins: int) -> None:
        self.n = 0
        self.steps = np.zeros(64, dtype=np.int64)
        self.values = np.zeros(64, dtype=np.float64)
        self.wall = np.full(64, np.nan)
        self.bins = _Bins(bins)

    def last_step(self) -> int | None:
        return int(self.steps[self.n - 1]) if self.n else None

    def append(self, step: int, value: float, wall: float) -> None:
        if self.n == self.steps.size:
            cap = 2 * self.steps.size
            self.steps = np.resize(self.steps, cap)
            self.values = np.resize(self.values, cap)
            self.wall = np.resize(self.wall, cap)
        self.steps[self.n], self.values[self.n], self.wall[self.n] = step, value, wall
        self.n += 1
        self.bins.add(step, value, wall)

    def replace_last(self, value: float, wall: float) -> None:
        """The same step logged again (the latest write wins)."""
        old = float(self.values[self.n - 1])
        self.values[self.n - 1] = value
        self.wall[self.n - 1] = wall
        self.bins.replace_last(old, value, wall)

    def truncate_from(self, step: int) -> None:
        """Drop the points at or after ``step`` (a resume from an earlier checkpoint)."""
        self.n = int(np.searchsorted(self.steps[: self.n], step, side="left"))
        self.rebin()

    def rebin(self) -> None:
        bins = _Bins(self.bins.cap)
        # rare (a resume from an earlier checkpoint): rebuilt once
        for s, v, w in zip(
            self.steps[: self.n].tolist(),
            self.values[: self.n].tolist(),
            self.wall[: self.n].tolist(),
            strict=True,
        ):
            bins.add(s, v, w)
        self.bins = bins

    def series(self, name: str, max_points: int, tail: int) -> Series:
        """The bounded view (see the module docstring), or every point when ``max_points=0``."""
        n = self.n
        wall = self.wall[:n]
        if max_points <= 0 or n <= max_points:
            return _series(name, self.steps[:n], self.values[:n], wall)
        b = self.bins
        k = min(b.m, max(0, n - tail) // b.width)
        lo = k * b.width
        return _series(
            name,
            np.concatenate([b.step[:k], self.steps[lo:n]]),
            np.concatenate([b.values(k), self.values[lo:n]]),
            np.concatenate([b.wall[:k], wall[lo:]]),
        )


def _series(name: str, steps: np.ndarray, values: np.ndarray, wall: np.ndarray) -> Series:
    w = wall if bool(np.isfinite(wall).any()) else None
    return Series.model_construct(
        name=name,
        steps=steps.copy(),
        values=values.copy(),
        wall_time=None if w is None else w.copy(),
    )


@dataclass
class _Band:
    """O(1) running level and spread of a positive series in log space."""

    alpha: float = 0.1
    k: float = 5.0
    level: float | None = None
    spread: float = 0.0
    n: int = 0

    def update(self, value: float) -> bool:
        """Add a point; True when it is non-finite or above the band."""
        if not math.isfinite(value):
            return True
        if value <= 0:
            return False
        x = math.log(value)
        self.n += 1
        if self.level is None:
            self.level = x
            return False
        d = x - self.level
        out = self.n > 10 and d > self.k * max(self.spread, 0.02)
        # winsorised updates: one wild point does not drag the band along
        clip = 3.0 * max(self.spread, 0.02) if self.n > 10 else abs(d)
        dc = max(-clip, min(clip, d))
        self.level += self.alpha * dc
        self.spread += self.alpha * (abs(dc) - self.spread)
        return out


@dataclass
class LiveDiagnosis:
    """Diagnose a run while it trains. See the module docstring for how it stays cheap.

    Args:
        rules: A loaded :class:`RuleSet`, or extra rule files/folders beside the built-in ones.
        overrides: Parameter overrides, as for :func:`curvediag.diagnose`.
        meta: What is known about the run's configuration (max_steps, warmup, ...).
        name: Run name used in reports.
        every_n_logs: Evaluate the rules at most once every this many log entries while the
            run is calm (the stride also grows with the run's length).
        max_points: Bins per metric in the view the rules see.
        tail: Raw (unbinned) points at the end of that view.
        evaluations_per_run: The calm stride is ``ceil(entries / evaluations_per_run)``.
        hot_logs: Entries after a sentinel alarm during which the rules run on every entry.
        hot_budget: Evaluations triggered by the sentinel are capped at 10 plus this share of
            the entries (so a run whose noise keeps tripping the band stays cheap).
    """

    rules: RuleSet | Iterable[str | os.PathLike[str]] | None = None
    overrides: Mapping[str, Any] | None = None
    meta: RunMeta = field(default_factory=RunMeta)
    name: str = "live"
    source: str = "live"
    every_n_logs: int = 1
    max_points: int = 2048
    tail: int = 256
    evaluations_per_run: int = 25
    hot_logs: int = 3
    hot_budget: float = 0.01
    aliases: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.rules, RuleSet):
            rs = self.rules.with_overrides(self.overrides) if self.overrides else self.rules
        else:
            rs = load_rules(*(str(r) for r in self.rules or ()), overrides=self.overrides)
        self.ruleset = rs
        self.live_ruleset = RuleSet(
            [r for r in rs if r.live], rs.params, rs.feature_settings, rs.sources
        )
        self._columns: dict[str, _Column] = {}
        self._bands = {m: _Band() for m in _SENTINEL_METRICS}
        self._entries = 0
        self._last_eval = 0
        self._hot_until = -1
        self._hot_evals = 0
        self._nonfinite: set[str] = set()
        self._urgent = False
        self._last_step: int | None = None
        self.events: list[LiveEvent] = []
        self._seen: set[str] = set()
        self.evaluations = 0
        self.band_exit_step: int | None = None

    # ------------------------------------------------------------------ feeding
    @property
    def entries(self) -> int:
        """Log entries fed so far."""
        return self._entries

    @property
    def last_step(self) -> int | None:
        return self._last_step

    def last_step_of(self, metric: str) -> int | None:
        col = self._columns.get(metric)
        return None if col is None else col.last_step()

    def add_point(
        self, metric: str, step: int, value: float, wall_time: float | None = None
    ) -> None:
        """One canonical metric value. A step at or before the metric's last one is a re-log:
        the same step replaces the value, an earlier one drops the later points (a resume)."""
        col = self._columns.get(metric)
        if col is None:
            col = self._columns[metric] = _Column(self.max_points)
        wall = math.nan if wall_time is None else float(wall_time)
        last = col.last_step()
        if last is not None and step <= last:
            if step == last:
                col.replace_last(value, wall)
                return
            col.truncate_from(step)
            if step not in self.meta.resumed_at_steps:
                self.meta.resumed = True
                self.meta.resumed_at_steps.append(step)
        col.append(step, value, wall)
        if not math.isfinite(value) and metric not in self._nonfinite:
            # the first NaN/Inf of a metric is always looked at at once, whatever the budget
            self._nonfinite.add(metric)
            self._urgent = True
        band = self._bands.get(metric)
        if band is not None and band.update(value):
            self._hot_until = self._entries + self.hot_logs
            if self.band_exit_step is None and metric == "train/loss":
                self.band_exit_step = step
        if self._last_step is None or step > self._last_step:
            self._last_step = step

    def add(self, step: int, metrics: Mapping[str, float], wall_time: float | None = None) -> None:
        """One log entry of canonical metric names (``train/loss``, ``eval/loss``...)."""
        for name, value in metrics.items():
            self.add_point(name, int(step), float(value), wall_time)
        self._entries += 1

    def add_log(self, logs: Mapping[str, Any], step: int, wall_time: float | None = None) -> None:
        """One Trainer log entry (``{"loss": 2.1, "grad_norm": 0.8, "learning_rate": ...}``),
        mapped onto canonical names the way the trainer_state.json reader does."""
        if _SUMMARY_KEYS & logs.keys():
            for k, v in logs.items():
                if _number(v) is not None:
                    self.meta.summary[k] = v
            return
        is_eval = any(k.startswith("eval_") for k in logs)
        out: dict[str, float] = {}
        for key, value in logs.items():
            num = _number(value)
            if num is None or key == "step":
                continue
            if key == "epoch":
                name = "train/epoch"
            else:
                name = canonical_name(
                    key, namespace="eval" if is_eval else "train", extra=self.aliases
                )
            out[name] = num
        if out:
            self.add(step, out, time.time() if wall_time is None else wall_time)

    # --------------------------------------------------------------- diagnosing
    def view(self, *, full: bool = False) -> Run:
        """The run as the rules see it now (bounded), or with every point (``full=True``)."""
        metrics = {
            name: col.series(name, 0 if full else self.max_points, self.tail)
            for name, col in self._columns.items()
            if col.n
        }
        meta = self.meta.model_copy(deep=True)
        if meta.global_step is None or (
            self._last_step is not None and self._last_step > meta.global_step
        ):
            meta.global_step = self._last_step
        run = Run(source=self.source, format="live", name=self.name, meta=meta, metrics=metrics)
        from curvediag.normalize import choose_primary_eval, set_rl_loss_aside

        choose_primary_eval(run)
        set_rl_loss_aside(run)  # an RL learner is judged by its return, as from its files
        return run

    def due(self) -> bool:
        """Whether :meth:`check` would evaluate the rules now."""
        new = self._entries - self._last_eval
        if new <= 0:
            return False
        if self._urgent:
            return True
        stride = max(self.every_n_logs, math.ceil(self._entries / self.evaluations_per_run))
        if new >= stride:
            return True
        return self._entries <= self._hot_until and self._hot_evals < 10 + int(
            self.hot_budget * self._entries
        )

    def check(self, *, force: bool = False) -> list[LiveEvent]:
        """Evaluate the live rules when due (or ``force``); the findings not reported before."""
        if not (force or self.due()) or "train/loss" not in self._columns:
            return []
        from curvediag.normalize import sanitize_run
        from curvediag.ruleset.engine import evaluate_rules

        stride = max(self.every_n_logs, math.ceil(self._entries / self.evaluations_per_run))
        if not force and not self._urgent and self._entries - self._last_eval < stride:
            self._hot_evals += 1
        self._urgent = False
        self._last_eval = self._entries
        self.evaluations += 1
        # the run as diagnose() sees it: out-of-range numbers (an overflowed 1e308) dropped
        evals, _ = evaluate_rules(sanitize_run(self.view()), self.live_ruleset)
        new = []
        step = self._last_step if self._last_step is not None else 0
        seen_before = set(self._seen)
        for e in evals:
            if e.finding is None or e.rule.id in self._seen:
                continue
            if e.state == "suppressed":
                # folded into a finding reported earlier: for a live reader it is news
                if e.reason.removeprefix("folded into ") not in seen_before:
                    continue
            elif e.state != "fired":
                continue
            self._seen.add(e.rule.id)
            ev = LiveEvent(e.finding, step)
            new.append(ev)
        new.sort(key=lambda ev: -ev.finding.severity.rank)
        self.events += new
        return new

    def finish(self, *, finished: bool | None = None) -> tuple[Diagnosis, list[LiveEvent]]:
        """The whole catalog on every point, and the findings not reported while training."""
        from curvediag.pipeline import diagnose

        if finished is not None:
            self.meta.finished = finished
        d = diagnose(self.view(full=True), rules=self.ruleset)
        step = self._last_step if self._last_step is not None else 0
        late = [LiveEvent(f, step, live=False) for f in d.findings if f.rule_id not in self._seen]
        self._seen.update(f.rule_id for f in d.findings)
        self.events += late
        return d, late

    def worst(self) -> Severity | None:
        """The most severe finding reported so far."""
        ranks = [e.finding.severity for e in self.events]
        return max(ranks, key=lambda s: s.rank) if ranks else None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)
