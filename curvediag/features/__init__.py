"""Features computed from a run, registered by name so rules can reference them safely."""

from curvediag.features import changepoints as _changepoints  # noqa: F401  (registers)
from curvediag.features import checks as _checks  # noqa: F401
from curvediag.features import evalgap as _evalgap  # noqa: F401
from curvediag.features import loss as _loss  # noqa: F401
from curvediag.features import lr_config as _lr_config  # noqa: F401
from curvediag.features import metrics as _metrics  # noqa: F401
from curvediag.features import rl as _rl  # noqa: F401
from curvediag.features import run as _run  # noqa: F401
from curvediag.features import shape as _shape  # noqa: F401
from curvediag.features import system as _system  # noqa: F401
from curvediag.features.registry import (
    FAMILIES,
    FEATURES,
    GROUPS,
    FeatureContext,
    FeatureSet,
    FeatureSettings,
    FeatureSpec,
    Unavailable,
    Value,
    feature_family,
    feature_group,
    is_feature,
)
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
    "extract_features",
    "feature_family",
    "feature_group",
    "is_feature",
]


def extract_features(run: Run, **settings: float) -> FeatureSet:
    """Every registered feature of a :class:`~curvediag.model.Run`, computed (to read a path
    first, use :func:`curvediag.extract_features`).

    Args:
        run: The run.
        **settings: Feature settings to override (see :class:`FeatureSettings`).
    """
    fs = FeatureSet(run, FeatureSettings())
    fs.settings.update(settings)
    fs.compute_all()
    return fs
