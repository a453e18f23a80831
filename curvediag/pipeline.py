"""The one way through curvediag: load -> features -> rules -> :class:`Diagnosis`.

Everything that diagnoses (the Python API, ``curvediag diagnose`` and ``report``, the batch
runner, the live callback) comes through here and reuses what it returns: the diagnosis keeps
the feature cache its rules ran on, so the report completes it instead of computing features
again. Parsed rule files are cached per process by :func:`curvediag.ruleset.loader.load_rules`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from curvediag.features import FeatureSet, FeatureSettings
from curvediag.ingest import load_run
from curvediag.model import Diagnosis, Run
from curvediag.normalize import sanitize_run
from curvediag.ruleset.engine import run_rules
from curvediag.ruleset.loader import RuleSet, load_rules

__all__ = ["diagnose", "extract_features"]


def diagnose(
    run_or_path: Run | str | os.PathLike[str],
    *,
    rules: RuleSet | Iterable[str | os.PathLike[str]] | None = None,
    overrides: Mapping[str, Any] | None = None,
    builtin: bool = True,
) -> Diagnosis:
    """Diagnose a training run.

    Args:
        run_or_path: A :class:`Run`, or a path :func:`curvediag.load_run` can read
            (``trainer_state.json``, a Trainer output folder, ...).
        rules: A loaded :class:`RuleSet`, or extra rule files/folders to load beside the
            built-in catalog.
        overrides: Parameter overrides, ``{"overfitting.min_rise": 0.1}``; feature settings as
            ``{"features.max_grad_norm": 0.5}``.
        builtin: Include the built-in rules (when ``rules`` is not a RuleSet).

    Returns:
        The :class:`Diagnosis`: verdict, findings (most severe first), skipped rules, features.
    """
    run = run_or_path if isinstance(run_or_path, Run) else load_run(run_or_path)
    run = sanitize_run(run)  # a Run built by hand may hold 1e308: it would overflow the features
    if isinstance(rules, RuleSet):
        ruleset = rules.with_overrides(overrides) if overrides else rules
    else:
        ruleset = load_rules(*(str(r) for r in rules or ()), builtin=builtin, overrides=overrides)
    return run_rules(run, ruleset)


def extract_features(run_or_path: Run | str | os.PathLike[str], **settings: float) -> FeatureSet:
    """Every registered feature of a run, computed.

    Args:
        run_or_path: A :class:`Run`, or a path :func:`curvediag.load_run` reads.
        **settings: Feature settings to override (see :class:`FeatureSettings`).
    """
    run = run_or_path if isinstance(run_or_path, Run) else load_run(run_or_path)
    fs = FeatureSet(sanitize_run(run), FeatureSettings())
    fs.settings.update(settings)
    fs.compute_all()
    return fs
