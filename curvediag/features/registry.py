"""The feature registry: every feature a rule may reference, by name.

Features are computed in groups (one function computes all the ``loss.*`` features, for
example) and lazily: a group runs the first time one of its features is asked for. A group
that cannot be computed raises :class:`~curvediag.errors.InsufficientDataError`; its features
are then *unavailable* (with the reason), which makes a rule that needs them *skipped*.

A feature value of ``None`` means "does not exist in this run" (no NaN, no spike), which is
different from unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.model import Run

__all__ = [
    "FAMILIES",
    "FEATURES",
    "GROUPS",
    "FeatureContext",
    "FeatureSet",
    "FeatureSettings",
    "FeatureSpec",
    "Unavailable",
    "Value",
    "feature_family",
    "feature_group",
    "is_feature",
]

Value = float | int | bool | str | None


@dataclass(frozen=True)
class FeatureSpec:
    """A named feature: what it means and which metrics it needs."""

    name: str
    description: str
    group: str
    requires: tuple[str, ...]


@dataclass(frozen=True)
class _Group:
    name: str
    requires: tuple[str, ...]
    compute: Callable[[FeatureContext], dict[str, Value]]
    features: tuple[str, ...]


#: Every registered feature, by name.
FEATURES: dict[str, FeatureSpec] = {}
#: Every registered feature group, by name.
GROUPS: dict[str, _Group] = {}


@dataclass(frozen=True)
class _Family:
    """Features over any logged series: ``<prefix>.<series>.<stat>``."""

    prefix: str
    stats: Mapping[str, str]
    compute: Callable[[Run, str], dict[str, Value]]

    def parse(self, name: str) -> tuple[str, str] | None:
        """(series, stat) when ``name`` belongs to this family."""
        if not name.startswith(self.prefix + "."):
            return None
        series, _, stat = name[len(self.prefix) + 1 :].rpartition(".")
        return (series, stat) if series and stat in self.stats else None


#: Feature families over any series, by prefix (``metric.eval/accuracy.best``).
FAMILIES: dict[str, _Family] = {}


def feature_family(
    prefix: str, *, stats: Mapping[str, str]
) -> Callable[[Callable[[Run, str], dict[str, Value]]], Callable[[Run, str], dict[str, Value]]]:
    """Register a family of features computed for any series the rule names.

    Args:
        prefix: First part of the names (``metric`` gives ``metric.<series>.<stat>``).
        stats: Statistic name -> one-line description. The function, called with the run and
            the series name, returns exactly these keys (or raises InsufficientDataError).
    """

    def deco(
        fn: Callable[[Run, str], dict[str, Value]],
    ) -> Callable[[Run, str], dict[str, Value]]:
        if prefix in FAMILIES or prefix in GROUPS:
            raise ValueError(f"feature family {prefix!r} registered twice")
        FAMILIES[prefix] = _Family(prefix, dict(stats), fn)
        return fn

    return deco


def is_feature(name: str) -> bool:
    """``name`` is a registered feature or a member of a feature family."""
    return name in FEATURES or any(f.parse(name) for f in FAMILIES.values())


def feature_group(
    name: str, *, requires: Iterable[str], features: Mapping[str, str]
) -> Callable[[Callable[[FeatureContext], dict[str, Value]]], Callable[..., dict[str, Value]]]:
    """Register a function that computes a group of features.

    Args:
        name: Group name (also the prefix of its features by convention).
        requires: Metric names the group needs (``train/loss`` ...).
        features: Feature name -> one-line description. The function must return exactly
            these keys.
    """
    req = tuple(requires)

    def deco(
        fn: Callable[[FeatureContext], dict[str, Value]],
    ) -> Callable[[FeatureContext], dict[str, Value]]:
        if name in GROUPS:
            raise ValueError(f"feature group {name!r} registered twice")
        for fname, desc in features.items():
            if fname in FEATURES:
                raise ValueError(f"feature {fname!r} registered twice")
            FEATURES[fname] = FeatureSpec(fname, desc, name, req)
        GROUPS[name] = _Group(name, req, fn, tuple(features))
        return fn

    return deco


#: Settings given as text, not numbers.
TEXT_SETTINGS = frozenset({"optimizer"})


@dataclass
class FeatureSettings:
    """Settings that change how features are computed (overridable as ``features.<name>``).

    Attributes:
        max_grad_norm: Clipping threshold; ``None`` means "what the run says, else 1.0".
        spike_z: A spike is a point this many robust standard deviations above its baseline.
        spike_min_ratio: ...and at least this many times its baseline (scale-free).
        flat_tolerance: Relative change under which a smoothed loss counts as flat.
        min_points_to_judge: A run whose loss has fewer finite points than this is
            ``inconclusive``: too little to judge a trend, so it is never called healthy.
        ended_early_progress: A run without its end-of-training summary that logged less
            than this share of its planned steps ended early (``run.ended_early``).
        ended_early_schedule_progress: The same share when the plan is only known from where
            the learning-rate schedule's decay reaches zero (a scheduler is sometimes built a
            little longer than the run it drives).
        late_checkpoint_progress: A Trainer checkpoint (no end-of-training summary) at or past
            this share of its plan stopped where a run that went on leaves a snapshot: its
            stop is reported as information (``run.stopped_short_quietly``), not a warning.
        planned_stop_evals: A log that stops at least this many evaluations after its eval
            loss's best stopped where an early-stopping rule would: reported as information.
        warmup_start_share: The learning rate starts below this share of its peak when the
            run has a warmup (``lr.has_warmup``).
        warmup_reach_share: Warmup ends at the first log at or above this share of the peak.
        changepoint_penalty: Penalty per change-point segment, in units of
            noise variance x log(points): higher finds fewer, larger level changes.
        confidence_full_points: A finding's confidence is its rule's confidence scaled by
            sqrt(points / this), capped at 1: fewer logged points, less confidence.
        optimizer: The run's optimizer (``adamw_torch``, ``sgd`` ...); ``None`` means "what the
            run's config says" (a lone trainer_state.json does not say).
    """

    max_grad_norm: float | None = None
    spike_z: float = 6.0
    spike_min_ratio: float = 1.3
    flat_tolerance: float = 0.02
    min_points_to_judge: float = 4
    ended_early_progress: float = 0.9
    ended_early_schedule_progress: float = 0.75
    late_checkpoint_progress: float = 0.75
    planned_stop_evals: float = 2
    warmup_start_share: float = 0.5
    warmup_reach_share: float = 0.98
    changepoint_penalty: float = 12.0
    confidence_full_points: float = 10.0
    optimizer: str | None = None

    def update(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            if not hasattr(self, key):
                known = ", ".join(sorted(self.__dataclass_fields__))
                raise KeyError(f"unknown feature setting {key!r} (known: {known})")
            if value is None:
                setattr(self, key, None)
            elif key in TEXT_SETTINGS:
                setattr(self, key, str(value))
            else:
                setattr(self, key, float(value))


class Unavailable:
    """Marker for a feature that could not be computed, with the reason."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"Unavailable({self.reason!r})"


@dataclass
class FeatureContext:
    """What a feature group sees: the run, the settings and the other features."""

    run: Run
    settings: FeatureSettings
    features: FeatureSet

    def get(self, name: str) -> Value:
        """Another feature's value; raises InsufficientDataError when it is unavailable."""
        v = self.features.get(name)
        if isinstance(v, Unavailable):
            raise InsufficientDataError(v.reason)
        return v

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of a metric; raises InsufficientDataError when it is missing."""
        s = self.run.get(name)
        if s is None or len(s) == 0:
            raise InsufficientDataError(f"the run has no {name} series")
        return s.steps, s.values

    def finite_series(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of a metric's finite points only; raises InsufficientDataError when
        the metric is missing (it may come back empty when every point is NaN/Inf)."""
        steps, values = self.series(name)
        ok = np.isfinite(values)
        return steps[ok], values[ok]


@dataclass
class FeatureSet:
    """Lazily computed features of one run."""

    run: Run
    settings: FeatureSettings = field(default_factory=FeatureSettings)
    _values: dict[str, Value | Unavailable] = field(default_factory=dict)
    _busy: set[str] = field(default_factory=set)

    def get(self, name: str) -> Value | Unavailable:
        """The value of feature ``name`` (computing its group if needed)."""
        if name in self._values:
            return self._values[name]
        spec = FEATURES.get(name)
        if spec is None:
            if self._compute_family(name):
                return self._values[name]
            raise KeyError(f"unknown feature {name!r}")
        self._compute(GROUPS[spec.group])
        return self._values[name]

    def _compute(self, group: _Group) -> None:
        if group.name in self._busy:
            raise RuntimeError(f"feature group {group.name!r} depends on itself")
        missing = [
            m for m in group.requires if self.run.get(m) is None or not len(self.run.get(m) or ())
        ]
        if missing:
            reason = f"the run did not log {', '.join(missing)}"
            self._values.update({f: Unavailable(reason) for f in group.features})
            return
        self._busy.add(group.name)
        try:
            values = group.compute(FeatureContext(self.run, self.settings, self))
        except InsufficientDataError as exc:
            self._values.update({f: Unavailable(str(exc)) for f in group.features})
            return
        finally:
            self._busy.discard(group.name)
        extra = set(values) - set(group.features)
        absent = set(group.features) - set(values)
        if extra or absent:
            raise RuntimeError(
                f"feature group {group.name!r} returned {sorted(extra)} / lacks {sorted(absent)}"
            )
        for k, v in values.items():
            self._values[k] = _clean(v)

    def _compute_family(self, name: str) -> bool:
        for fam in FAMILIES.values():
            parsed = fam.parse(name)
            if parsed is None:
                continue
            series, _ = parsed
            names = [f"{fam.prefix}.{series}.{stat}" for stat in fam.stats]
            try:
                values = fam.compute(self.run, series)
            except InsufficientDataError as exc:
                self._values.update({n: Unavailable(str(exc)) for n in names})
                return True
            for stat, v in values.items():
                self._values[f"{fam.prefix}.{series}.{stat}"] = _clean(v)
            return True
        return False

    def computed(self) -> dict[str, Value]:
        """Every feature computed so far that is available (for reports and JSON)."""
        return {k: v for k, v in sorted(self._values.items()) if not isinstance(v, Unavailable)}

    def compute_all(self) -> dict[str, Value | Unavailable]:
        for name in FEATURES:
            self.get(name)
        return dict(sorted(self._values.items()))


def _clean(v: Value) -> Value:
    """numpy scalars -> Python scalars, so templates, JSON and comparisons behave."""
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v
