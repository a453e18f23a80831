"""The normalized run model and the diagnosis it produces.

A :class:`Run` is what every reader returns, whatever the source format: run metadata plus a
mapping of canonical metric name (``train/loss``, ``eval/loss``, ``train/grad_norm``, ...) to a
:class:`Series` of int64 steps, float64 values and optional wall times. A :class:`Diagnosis` is
what :func:`curvediag.diagnose` returns: the verdict, the findings and the rules it skipped.
"""

from __future__ import annotations

import json
import math
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from curvediag import _hooks

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Diagnosis",
    "Finding",
    "Run",
    "RunMeta",
    "Series",
    "Severity",
    "SkippedRule",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Severity(str, Enum):
    """How bad a finding is. Ordered: ``critical`` > ``warning`` > ``info``."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "critical": 2}[self.value]


class Series(BaseModel):
    """One metric over training steps. Steps are sorted and unique; NaN/Inf are kept."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    steps: IntArray
    values: FloatArray
    wall_time: FloatArray | None = None

    @field_validator("steps", mode="before")
    @classmethod
    def _steps(cls, v: Any) -> IntArray:
        return np.ascontiguousarray(np.asarray(v, dtype=np.int64).reshape(-1))

    @field_validator("values", mode="before")
    @classmethod
    def _values(cls, v: Any) -> FloatArray:
        return np.ascontiguousarray(np.asarray(v, dtype=np.float64).reshape(-1))

    @field_validator("wall_time", mode="before")
    @classmethod
    def _wall(cls, v: Any) -> FloatArray | None:
        if v is None:
            return None
        return np.ascontiguousarray(np.asarray(v, dtype=np.float64).reshape(-1))

    @model_validator(mode="after")
    def _check(self) -> Series:
        if self.steps.shape != self.values.shape:
            raise ValueError(
                f"series {self.name!r}: {self.steps.size} steps but {self.values.size} values"
            )
        if self.wall_time is not None and self.wall_time.shape != self.steps.shape:
            raise ValueError(f"series {self.name!r}: wall_time length differs from steps")
        if self.steps.size > 1 and not bool(np.all(np.diff(self.steps) > 0)):
            raise ValueError(f"series {self.name!r}: steps must be strictly increasing")
        return self

    def __len__(self) -> int:
        return int(self.steps.size)

    @property
    def finite(self) -> npt.NDArray[np.bool_]:
        """Boolean mask of the finite values."""
        return np.isfinite(self.values)

    def head(self, n: int) -> Series:
        """The first ``n`` points (used to replay a run as it was logged)."""
        return self.model_copy(
            update={
                "steps": self.steps[:n],
                "values": self.values[:n],
                "wall_time": None if self.wall_time is None else self.wall_time[:n],
            }
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "steps": self.steps.tolist(),
            "values": [_json_float(v) for v in self.values.tolist()],
            "wall_time": None if self.wall_time is None else self.wall_time.tolist(),
        }

    def __repr__(self) -> str:
        return _hooks.present_text("series_repr", self)

    def __str__(self) -> str:
        return repr(self)


class RunMeta(BaseModel):
    """What is known about how the run was configured and how far it got."""

    global_step: int | None = None
    max_steps: int | None = None
    num_train_epochs: float | None = None
    epoch: float | None = None
    train_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    world_size: int | None = None
    logging_steps: float | None = None
    eval_steps: float | None = None
    save_steps: float | None = None
    best_metric: float | None = None
    best_model_checkpoint: str | None = None
    best_global_step: int | None = None
    max_grad_norm: float | None = None
    warmup_steps: int | None = None
    warmup_ratio: float | None = None
    learning_rate: float | None = None
    lr_scheduler_type: str | None = None
    logging_nan_inf_filter: bool | None = None
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    summary: dict[str, Any] = Field(default_factory=dict)
    finished: bool | None = None
    #: the training process's exit code when the log records it (a W&B run's exit record)
    exit_code: int | None = None
    #: whether a W&B binary log holds its exit record; False when the log stops without one (the
    #: process was killed, or the file was copied while the run was still going), None for a
    #: format that records no exit
    exit_recorded: bool | None = None
    #: the exception an uncaught error ended the process with (its class name only, such as
    #: ``torch.OutOfMemoryError``), when the console output ends with its traceback
    error: str | None = None
    #: the Trainer's EarlyStoppingCallback stopped training (its patience ran out), with the
    #: patience it had; from ``stateful_callbacks`` in trainer_state.json
    early_stopped: bool | None = None
    early_stopping_patience: int | None = None
    resumed: bool = False
    resumed_at_steps: list[int] = Field(default_factory=list)
    checkpoint_used: str | None = None


class Run(BaseModel):
    """A training run in curvediag's normalized shape, whatever format it was read from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: str
    format: str
    name: str
    meta: RunMeta = Field(default_factory=RunMeta)
    metrics: dict[str, Series] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)

    def get(self, name: str) -> Series | None:
        """The series called ``name``, or ``None`` if the run did not log it."""
        return self.metrics.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.metrics

    @property
    def last_step(self) -> int | None:
        """The largest step any metric was logged at (or the recorded global step)."""
        steps = [int(s.steps[-1]) for s in self.metrics.values() if len(s)]
        if self.meta.global_step is not None:
            steps.append(self.meta.global_step)
        return max(steps) if steps else None

    def head(self, step: int) -> Run:
        """The run as it looked when logging had reached ``step`` (for early-warning replay)."""
        metrics = {}
        for k, s in self.metrics.items():
            n = int(np.searchsorted(s.steps, step, side="right"))
            if n:
                metrics[k] = s.head(n)
        meta = self.meta.model_copy(update={"finished": False, "global_step": step, "summary": {}})
        return self.model_copy(update={"metrics": metrics, "meta": meta})

    def to_dict(self, *, with_series: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "format": self.format,
            "name": self.name,
            "meta": json.loads(self.meta.model_dump_json()),
            "metrics": {k: len(v) for k, v in self.metrics.items()},
            "warnings": list(self.warnings),
        }
        if with_series:
            out["series"] = {k: v.to_dict() for k, v in self.metrics.items()}
        return out

    def to_frame(self, kind: Literal["wide", "long"] = "wide") -> pd.DataFrame:
        """The metrics as a pandas DataFrame.

        ``wide`` (default): one row per step, a ``step`` column, one column per metric (NaN
        where it was not logged at that step) and ``wall_time``. ``long``: one row per logged
        point, columns ``step``, ``metric``, ``value``, ``wall_time``.
        """
        return _hooks.present("run_frame", self, kind=kind)

    def __repr__(self) -> str:
        return _hooks.present_text("run_repr", self)

    def __str__(self) -> str:
        return repr(self)

    def _repr_html_(self) -> str:
        return _hooks.present_text("run_html", self)

    def _repr_markdown_(self) -> str:
        return _hooks.present_text("run_markdown", self)


def _json_float(v: Any) -> Any:
    """JSON has no NaN/Infinity: write them as strings so the output stays strict JSON."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


class Finding(BaseModel):
    """One diagnosis: a rule that fired on this run, with this run's evidence."""

    rule_id: str
    title: str
    category: str
    severity: Severity
    confidence: float
    evidence: str
    why: str
    fixes: list[str]
    step_range: tuple[int | None, int | None] = (None, None)
    onset_step: int | None = None
    values: dict[str, Any] = Field(default_factory=dict)
    related: list[str] = Field(default_factory=list)
    #: what the rule declared for the report (timeline event, next-run kind); not serialised
    report: dict[str, Any] = Field(default_factory=dict, exclude=True)

    def to_dict(self) -> dict[str, Any]:
        d = self.model_dump(mode="json")
        d["values"] = {k: _json_float(v) for k, v in self.values.items()}
        return d

    def __repr__(self) -> str:
        return _hooks.present_text("finding_repr", self)

    def __str__(self) -> str:
        return repr(self)

    def _repr_html_(self) -> str:
        return _hooks.present_text("finding_html", self)

    def _repr_markdown_(self) -> str:
        return _hooks.present_text("finding_markdown", self)


class SkippedRule(BaseModel):
    """A rule that could not be evaluated on this run, and why."""

    rule_id: str
    reason: str


class Diagnosis(BaseModel):
    """The result of :func:`curvediag.diagnose`: verdict, findings, skipped rules, features."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run: Run
    findings: list[Finding]
    skipped: list[SkippedRule] = Field(default_factory=list)
    features: dict[str, Any] = Field(default_factory=dict)
    rules_evaluated: int = 0
    inconclusive_reason: str | None = None
    #: the feature cache the rules ran on (a ``FeatureSet``): the report completes it instead
    #: of computing the features again; not serialised
    _feature_cache: object = PrivateAttr(default=None)

    @property
    def verdict(self) -> str:
        """``critical``, ``warning``, ``inconclusive`` or ``healthy``.

        Info findings do not change the verdict. ``inconclusive`` (see
        :attr:`inconclusive_reason`) means the run logged too little to judge and nothing went
        wrong in what it did log: such a run is never called healthy.
        """
        worst = max((f.severity.rank for f in self.findings), default=0)
        if worst == 0 and self.inconclusive_reason:
            return "inconclusive"
        return {2: "critical", 1: "warning", 0: "healthy"}[worst]

    @property
    def finding_ids(self) -> list[str]:
        return [f.rule_id for f in self.findings]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run.to_dict(),
            "verdict": self.verdict,
            "inconclusive_reason": self.inconclusive_reason,
            "findings": [f.to_dict() for f in self.findings],
            "skipped": [s.model_dump() for s in self.skipped],
            "features": {k: _json_float(v) for k, v in self.features.items()},
            "rules_evaluated": self.rules_evaluated,
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, sort_keys=False)

    def to_text(self) -> str:
        return _hooks.present_text("diagnosis_text", self)

    def to_markdown(self) -> str:
        """The postmortem report as markdown (text only; ``curvediag report`` adds plots)."""
        return _hooks.present_text("diagnosis_markdown", self)

    def plot(self) -> dict[str, Any]:
        """The report's matplotlib Figures by name (``loss``, ``learning_rate``,
        ``grad_norm``, and ``throughput`` / ``memory`` when logged), for notebooks."""
        return dict(_hooks.present("plot_figures", self))

    def __str__(self) -> str:
        return self.to_text()

    def to_frame(self) -> pd.DataFrame:
        """One row per finding, most severe first: ``run``, ``rule_id``, ``severity``,
        ``category``, ``title``, ``confidence``, ``onset_step``, ``start_step``, ``end_step``,
        ``evidence``, ``why``, ``fixes`` (a list), ``related`` (a list)."""
        return _hooks.present("diagnosis_frame", self)

    def __repr__(self) -> str:
        return _hooks.present_text("diagnosis_repr", self)

    def _repr_html_(self) -> str:
        return _hooks.present_text("diagnosis_html", self)

    def _repr_markdown_(self) -> str:
        return _hooks.present_text("diagnosis_markdown_short", self)
