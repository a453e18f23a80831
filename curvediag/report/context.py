"""What every part of the report reads: the diagnosis, all features, and step -> epoch / time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from curvediag.features import FeatureContext, FeatureSet, FeatureSettings, Unavailable, Value

if TYPE_CHECKING:
    from curvediag.model import Diagnosis, Run

__all__ = ["ReportContext"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass
class ReportContext:
    """A diagnosis with everything the report needs computed once.

    ``features`` holds the diagnosis' own feature values (computed with the settings the
    rules ran with) completed by every other registered feature of the run.
    """

    diagnosis: Diagnosis
    features: dict[str, Value] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    #: what parts of one report share once built (the timeline)
    cache: dict[str, Any] = field(default_factory=dict)
    _epoch: tuple[FloatArray, FloatArray] | None = None
    _wall: tuple[FloatArray, FloatArray] | None = None
    _feature_set: FeatureSet | None = None

    @classmethod
    def of(cls, diagnosis: Diagnosis) -> ReportContext:
        """Build the context: complete the diagnosis' own feature cache with the features its
        rules did not need (each feature group is computed once per diagnosis)."""
        cache = diagnosis._feature_cache
        fs = (
            cache if isinstance(cache, FeatureSet) else FeatureSet(diagnosis.run, FeatureSettings())
        )
        merged: dict[str, Value] = {}
        unavailable: dict[str, str] = {}
        for name, value in fs.compute_all().items():
            if isinstance(value, Unavailable):
                unavailable[name] = value.reason
            else:
                merged[name] = value
        for name, value in diagnosis.features.items():
            merged[name] = value
            unavailable.pop(name, None)
        ctx = cls(diagnosis, dict(sorted(merged.items())), unavailable)
        ctx._feature_set = fs
        ctx._epoch = _epoch_map(diagnosis.run)
        ctx._wall = _wall_map(diagnosis.run)
        return ctx

    @property
    def run(self) -> Run:
        return self.diagnosis.run

    # -- features ---------------------------------------------------------------------------
    def feature(self, name: str) -> Value:
        """A feature's value, ``None`` when unknown or unavailable."""
        return self.features.get(name)

    def number(self, name: str) -> float | None:
        v = self.features.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        return float(v)

    def step(self, name: str) -> int | None:
        v = self.features.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        return int(v)

    # -- configuration -------------------------------------------------------------------------
    def setting(self, name: str) -> Any:
        """A training setting: the normalized run metadata first, else the raw hyperparameters."""
        meta = self.run.meta
        if name in type(meta).model_fields:
            v = getattr(meta, name)
            if v is not None:
                return v
        return meta.hyperparameters.get(name)

    def clip_threshold(self) -> tuple[float | None, str]:
        """(clipping threshold or None when clipping was off, how it is known)."""
        meta = self.run.meta
        if meta.max_grad_norm is not None:
            return (meta.max_grad_norm, "configured") if meta.max_grad_norm > 0 else (None, "off")
        raw = meta.hyperparameters.get("max_grad_norm")
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return (float(raw), "configured") if raw > 0 else (None, "off")
        thr = self.number("grad.threshold") or self.number("run.max_grad_norm")
        return (thr, "assumed (Trainer default)") if thr else (None, "unknown")

    def warmup_ratio_arg(self) -> str:
        """The argument that takes a warmup ratio in the transformers version that wrote the
        run: ``warmup_ratio`` in 4.x; 5.x removed it and reads a ``warmup_steps`` below 1 as a
        ratio."""
        major = self.number("cfg.transformers_major")
        return "warmup_ratio" if major is not None and major < 5 else "warmup_steps"

    def planned_steps(self) -> int | None:
        ms = self.run.meta.max_steps
        if ms and ms > 0:
            return int(ms)
        return None

    # -- series ------------------------------------------------------------------------------
    def train_loss(self) -> tuple[IntArray, FloatArray, npt.NDArray[np.bool_]] | None:
        """Train loss with hidden NaNs (0.0 beside a non-finite grad norm) turned back to NaN."""
        if self.run.get("train/loss") is None:
            return None
        from curvediag.features.loss import train_loss

        fs = self._feature_set or FeatureSet(self.run, FeatureSettings())
        return train_loss(FeatureContext(self.run, fs.settings, fs))

    def epoch_at(self, step: float) -> float | None:
        """The epoch at a step, interpolated from the logged epochs (None when not logged)."""
        if self._epoch is None:
            return None
        s, e = self._epoch
        if step < s[0] or step > s[-1] * 1.001 + 1:
            return None
        return float(np.interp(step, s, e))

    def step_at_epoch(self, epoch: float) -> float | None:
        if self._epoch is None:
            return None
        s, e = self._epoch
        return float(np.interp(epoch, e, s))

    @property
    def epoch_map(self) -> tuple[FloatArray, FloatArray] | None:
        """(steps, epochs), strictly increasing in both, for plotting a secondary axis."""
        return self._epoch

    def wall_at(self, step: float) -> float | None:
        """Wall-clock time (seconds since the epoch) at a step, when the logs carry it."""
        if self._wall is None:
            return None
        s, w = self._wall
        if step < s[0] or step > s[-1]:
            return None
        return float(np.interp(step, s, w))

    @property
    def wall_start(self) -> float | None:
        return None if self._wall is None else float(self._wall[1][0])

    @property
    def wall_end(self) -> float | None:
        return None if self._wall is None else float(self._wall[1][-1])


def _epoch_map(run: Run) -> tuple[FloatArray, FloatArray] | None:
    ep = run.get("train/epoch")
    if ep is None or len(ep) < 2:
        return None
    ok = np.isfinite(ep.values)
    s = ep.steps[ok].astype(np.float64)
    e = ep.values[ok]
    if s.size < 2:
        return None
    if s[0] > 0 and e[0] > 0:  # epochs grow with steps: anchor the origin
        s = np.concatenate([[0.0], s])
        e = np.concatenate([[0.0], e])
    keep = np.concatenate([[True], np.diff(e) > 0])  # strictly increasing for the inverse map
    s, e = s[keep], e[keep]
    if s.size < 2:
        return None
    return np.asarray(s, dtype=np.float64), np.asarray(e, dtype=np.float64)


def _wall_map(run: Run) -> tuple[FloatArray, FloatArray] | None:
    steps: list[IntArray] = []
    walls: list[FloatArray] = []
    for name in sorted(run.metrics):
        series = run.metrics[name]
        if series.wall_time is None:
            continue
        ok = np.isfinite(series.wall_time) & (series.wall_time > 0)
        steps.append(series.steps[ok])
        walls.append(series.wall_time[ok])
    if not steps:
        return None
    s = np.concatenate(steps)
    w = np.concatenate(walls)
    if s.size < 1:
        return None
    uniq, inv = np.unique(s, return_inverse=True)
    first = np.full(uniq.size, np.inf)
    np.minimum.at(first, inv, w)
    first = np.maximum.accumulate(first)  # time never runs backwards
    return uniq.astype(np.float64), first
