"""curvediag: reads the logs of a training run and says what went wrong, where, why, and what
to change next.

The public names below are imported on first use, so that ``curvediag --help`` starts fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from curvediag import _hooks
from curvediag._version import __version__

_LAZY = {
    "diagnose": "curvediag.pipeline",
    "diagnose_many": "curvediag.batch.api",
    "load_run": "curvediag.ingest",
    "extract_features": "curvediag.pipeline",
    "FeatureSet": "curvediag.features",
    "load_rules": "curvediag.ruleset.loader",
    "RuleSet": "curvediag.ruleset.loader",
    "Diagnosis": "curvediag.model",
    "Finding": "curvediag.model",
    "Run": "curvediag.model",
    "RunMeta": "curvediag.model",
    "Series": "curvediag.model",
    "Severity": "curvediag.model",
    "SkippedRule": "curvediag.model",
    "CurvediagError": "curvediag.errors",
    "CurvediagWarning": "curvediag.errors",
    "IngestError": "curvediag.errors",
    "InsufficientDataError": "curvediag.errors",
    "MalformedRunError": "curvediag.errors",
    "MissingDependencyError": "curvediag.errors",
    "OutOfMemoryError": "curvediag.errors",
    "RuleError": "curvediag.errors",
    "RuleSchemaError": "curvediag.errors",
    "UnrecognizedFormatError": "curvediag.errors",
}

__all__ = [
    "CurvediagError",
    "CurvediagWarning",
    "Diagnosis",
    "FeatureSet",
    "Finding",
    "IngestError",
    "InsufficientDataError",
    "MalformedRunError",
    "MissingDependencyError",
    "OutOfMemoryError",
    "RuleError",
    "RuleSchemaError",
    "RuleSet",
    "Run",
    "RunMeta",
    "Series",
    "Severity",
    "SkippedRule",
    "UnrecognizedFormatError",
    "__version__",
    "diagnose",
    "diagnose_many",
    "extract_features",
    "load_rules",
    "load_run",
]

if TYPE_CHECKING:
    from curvediag.batch.api import diagnose_many
    from curvediag.errors import (
        CurvediagError,
        CurvediagWarning,
        IngestError,
        InsufficientDataError,
        MalformedRunError,
        MissingDependencyError,
        OutOfMemoryError,
        RuleError,
        RuleSchemaError,
        UnrecognizedFormatError,
    )
    from curvediag.features import FeatureSet
    from curvediag.ingest import load_run
    from curvediag.model import Diagnosis, Finding, Run, RunMeta, Series, Severity, SkippedRule
    from curvediag.pipeline import diagnose, extract_features
    from curvediag.ruleset.loader import RuleSet, load_rules


def _deferred(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, imported on the first call (keeps ``import curvediag`` fast)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    return call


# The data model shows itself through these (see curvediag._hooks): the top of the package is
# the one place that knows both the model and the presentation layer.
_hooks.register(
    **{
        name: _deferred("curvediag.display", name)
        for name in (
            "series_repr",
            "run_frame",
            "run_repr",
            "run_html",
            "run_markdown",
            "finding_repr",
            "finding_html",
            "finding_markdown",
            "diagnosis_frame",
            "diagnosis_repr",
            "diagnosis_html",
            "diagnosis_markdown_short",
        )
    },
    diagnosis_text=_deferred("curvediag.render", "diagnosis_text"),
    diagnosis_markdown=_deferred("curvediag.render", "diagnosis_markdown"),
    plot_figures=_deferred("curvediag.report.plots", "plot_figures"),
)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'curvediag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
