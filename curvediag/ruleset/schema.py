"""The rule-file schema: pydantic models for rules, their conditions and their test cases.

A rule is data. Its ``when`` tree is made of ``all`` / ``any`` / ``not`` nodes over two kinds of
leaves: a comparison of a registered feature with a value, and a persistence check over a logged
series (``for: N`` consecutive logs). Values may name a rule parameter as ``$name``. Nothing in a
rule file is ever evaluated as code.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from curvediag.model import Severity

__all__ = [
    "CATEGORIES",
    "AllOf",
    "AnyOf",
    "Comparison",
    "Condition",
    "NotOf",
    "Rule",
    "RuleTestCase",
    "RuleTestFile",
    "SeriesCondition",
    "rule_json_schema",
]

CATEGORIES = (
    "convergence",
    "stability",
    "generalization",
    "optimization",
    "gradients",
    "data",
    "system",
    "lifecycle",
)
ID_PATTERN = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
Scalar = float | int | bool | str | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Comparison(_Strict):
    """``{feature: loss.improvement, op: "<", value: $min_improvement}``"""

    feature: str = Field(description="name of a registered feature")
    op: Literal["<", "<=", ">", ">=", "==", "!=", "exists", "missing"] = Field(
        description="comparison; 'exists'/'missing' test whether the feature has a value"
    )
    value: Scalar = Field(default=None, description="a number, true/false, text or $param")
    otherwise: bool | None = Field(
        default=None,
        description="result when the feature is unavailable (its series was not logged or is too "
        "short; default: unknown, which skips the rule unless the rest of the condition "
        "decides). A feature computed as no value (None) is not unavailable: a comparison with "
        "it is false; test it with op: missing",
    )


class SeriesCondition(_Strict):
    """``{series: train/grad_norm, op: ">", value: $limit, for: 3, after: run.warmup_end_step}``

    True when the series satisfies the comparison on ``for`` consecutive logged points (after
    the step given by the feature ``after``). ``as`` names the match so the evidence can quote
    ``{name.step}`` (first step of the first run of points) and ``{name.count}``.
    """

    series: str = Field(description="canonical metric name, e.g. train/grad_norm")
    op: Literal["<", "<=", ">", ">="]
    value: float | str = Field(description="a number or $param")
    for_: int | str = Field(default=1, alias="for", description="consecutive points (or $param)")
    after: str | None = Field(default=None, description="feature holding the first step to look at")
    as_: str | None = Field(default=None, alias="as", pattern=r"^[a-z_][a-z0-9_]*$")


class AllOf(_Strict):
    all: list[Condition] = Field(min_length=1)


class AnyOf(_Strict):
    any: list[Condition] = Field(min_length=1)


class NotOf(_Strict):
    not_: Condition = Field(alias="not")


Condition = Union[AllOf, AnyOf, NotOf, Comparison, SeriesCondition]  # noqa: UP007
AllOf.model_rebuild()
AnyOf.model_rebuild()
NotOf.model_rebuild()


class NextRun(_Strict):
    """``next_run: {kind: lower-lr, factor: 5, why: "the loss climbed back up"}``"""

    kind: str = Field(
        pattern=r"^[a-z][a-z0-9-]*$",
        description="how the report's next-run plan turns this finding into setting changes "
        "(curvediag.report.next_run.KINDS: lower-lr, add-warmup, keep-best-checkpoint, ...)",
    )
    factor: float | None = Field(default=None, gt=1, description="for lower-lr: divide by this")
    why: str | None = Field(default=None, description="for lower-lr: the reason, in words")


class ReportSpec(_Strict):
    """What a finding contributes to the postmortem report beyond its own section."""

    timeline: (
        Literal["best_eval", "spike", "clipping", "nonfinite", "warmup", "changepoint"] | None
    ) = Field(
        default=None,
        description="the timeline event that marks this finding (the best eval, the largest "
        "spike, the clipping onset, the first non-finite value, warmup, a level jump); the "
        "event is attributed to it",
    )
    own_entry: bool = Field(
        default=False,
        description="also list the finding's onset as its own timeline entry (by default the "
        "event above stands for it)",
    )
    next_run: NextRun | None = Field(
        default=None,
        description="the setting changes it proposes for the next run; without it, the "
        "finding contributes its first fix",
    )


class Rule(_Strict):
    """One diagnosis rule, as written in a YAML file under ``rules/``."""

    id: str = Field(pattern=ID_PATTERN, description="stable kebab-case id, equal to the file stem")
    title: str = Field(min_length=3)
    category: Literal[
        "convergence",
        "stability",
        "generalization",
        "optimization",
        "gradients",
        "data",
        "system",
        "lifecycle",
    ]
    severity: Severity
    status: Literal["stable", "preview", "deprecated"] = "stable"
    confidence: float = Field(default=0.8, ge=0.0, le=1.0, description="confidence when it fires")
    requires: list[str] = Field(default_factory=list, description="metrics the rule needs")
    min_points: dict[str, int] = Field(
        default_factory=dict, description="minimum number of logged points per metric"
    )
    params: dict[str, Scalar] = Field(
        default_factory=dict, description="thresholds users may override as rule-id.param"
    )
    when: Condition
    only_if_quiet: bool = Field(
        default=False, description="fire only when no warning or critical finding fired"
    )
    live: bool = Field(
        default=False,
        description="true: the rule makes sense on a prefix of the run and may fire while the "
        "run is still training (CurvediagCallback, curvediag watch); false: it needs the whole "
        "run (e.g. 'still improving at the end') and is evaluated when the run ends",
    )
    suppresses: list[str] = Field(
        default_factory=list, description="ids of weaker echoes this finding folds in"
    )
    onset: str | None = Field(default=None, description="feature giving the onset step")
    steps: list[str | None] | None = Field(
        default=None, description="[start feature, end feature] of the step range"
    )
    evidence: str = Field(
        min_length=3,
        description="template: {feature:fmt} {param} {as.step}; [[...]] is dropped when a "
        "field inside it has no value",
    )
    why: str = Field(
        min_length=3,
        description="plain text, the same for every run (numbers belong in evidence and fixes)",
    )
    fixes: list[str] = Field(min_length=1)
    references: list[str] = Field(default_factory=list)
    report: ReportSpec | None = Field(
        default=None, description="timeline event and next-run plan contributions"
    )

    @field_validator("why")
    @classmethod
    def _plain(cls, v: str) -> str:
        if re.search(r"\{[A-Za-z_$]", v):
            raise ValueError(
                "why is not a template: it is printed as written, so {...} fields would show "
                "raw; quote numbers in evidence or fixes"
            )
        return v

    @field_validator("steps")
    @classmethod
    def _two(cls, v: list[str | None] | None) -> list[str | None] | None:
        if v is not None and len(v) != 2:
            raise ValueError("steps must be [start_feature, end_feature]")
        return v


class RuleTestCase(_Strict):
    """One must-fire / must-stay-quiet / skipped case for a rule."""

    name: str
    expect: Literal["fire", "folded", "silent", "skipped"] = Field(
        description="fire: the rule reports a finding; folded: it matched but a stronger finding "
        "folds it in (shown as also seen); silent: it did not match; skipped: it could not be "
        "evaluated"
    )
    fixture: str | None = Field(
        default=None, description="path of a real run, relative to the file"
    )
    series: dict[str, Any] = Field(default_factory=dict, description="metric -> compact series")
    every: int = Field(default=10, ge=1, description="default steps between logged points")
    wall_time: dict[str, Any] = Field(
        default_factory=dict, description="metric -> wall-clock seconds per point (notation)"
    )
    meta: dict[str, Any] = Field(default_factory=dict, description="RunMeta fields")
    overrides: dict[str, Scalar] = Field(default_factory=dict)
    expect_values: dict[str, Any] = Field(
        default_factory=dict,
        description="feature -> value or [low, high], checked when the rule fires or stays "
        "quiet (a quiet case can state the feature that keeps it quiet)",
    )


class RuleTestFile(_Strict):
    rule: str = Field(pattern=ID_PATTERN)
    cases: list[RuleTestCase] = Field(min_length=1)


def rule_json_schema() -> dict[str, Any]:
    """JSON Schema of a rule file (for editors: ``rules/rule.schema.json``)."""
    schema = Rule.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "curvediag rule"
    return schema
