"""curvediag: reads the logs of a training run and says what went wrong, where, why, and what
to change next."""

from curvediag.diagnosis import diagnose
from curvediag.errors import (
    CurvediagError,
    CurvediagWarning,
    IngestError,
    InsufficientDataError,
    MalformedRunError,
    MissingDependencyError,
    RuleError,
    RuleEvaluationError,
    RuleSchemaError,
    UnrecognizedFormatError,
)
from curvediag.features import FeatureSet, extract_features
from curvediag.ingest import load_run
from curvediag.model import Diagnosis, Finding, Run, RunMeta, Series, Severity, SkippedRule
from curvediag.ruleset.loader import RuleSet, load_rules

__version__ = "0.1.0"

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
    "RuleError",
    "RuleEvaluationError",
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
    "extract_features",
    "load_rules",
    "load_run",
]
