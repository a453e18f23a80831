"""Apply a rule set to a run: features in, findings (fired / skipped) out."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from curvediag.errors import OutOfMemoryError
from curvediag.features import FeatureSet, FeatureSettings, Unavailable
from curvediag.model import Diagnosis, Finding, Run, Severity, SkippedRule
from curvediag.normalize import is_rl_loss, is_rl_run, rl_return_series
from curvediag.ruleset.conditions import evaluate
from curvediag.ruleset.loader import SAFE_FORMAT_SPEC, RuleSet
from curvediag.ruleset.schema import Rule

__all__ = [
    "Evaluation",
    "evaluate_rules",
    "names_trainer_api",
    "render_template",
    "run_rules",
    "trainer_arguments",
]

_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_./-]*)(?::([^{}]*))?\}")
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.S)
#: a setting named the way a fix names one: ``name=value``, ``name: value``, ``name -> value``
_SETTING = re.compile(r"`?\b([a-z][a-z0-9_]{2,})\b(?:\s*=(?!=)|:\s(?=[-\d.]|True|False)|\s*->)")
#: Trainer API a fix may name besides its arguments
_TRAINER_API = re.compile(r"\b(?:trainer\.train|TrainingArguments|[A-Z]\w*Callback)\b")


@functools.cache
def trainer_arguments() -> frozenset[str]:
    """Every TrainingArguments field of the transformers versions curvediag knows."""
    from importlib import resources

    import yaml

    text = resources.files("curvediag").joinpath("data/training_arguments.yaml").read_text("utf-8")
    data = yaml.safe_load(text) or {}
    return frozenset(str(n) for names in data.values() for n in names)


def names_trainer_api(fix: str, own: Iterable[str] = ()) -> bool:
    """Whether a fix names a Hugging Face TrainingArguments field or Trainer API (useless, and
    misleading, for a run some other training loop wrote). Names in ``own`` (the run's own
    config keys: nanoGPT has a ``learning_rate`` too) are the run's settings, not Trainer's."""
    if _TRAINER_API.search(fix):
        return True
    fields = trainer_arguments() - set(own)
    return any(m.group(1) in fields for m in _SETTING.finditer(fix))


#: A formatted number that rounds to zero ("-0.0%", "-0", "-0.00").
_ZERO = re.compile(r"[-+]?0*(?:\.0*)?%?")


def render_template(text: str, values: Mapping[str, Any]) -> str:
    """Fill ``{name}`` / ``{name:fmt}`` fields from ``values``; no attribute access, no code.

    Missing or empty values print as ``n/a``; a format that does not fit the value falls back
    to ``str``.
    """

    def has(name: str) -> bool:
        v = values.get(name)
        return v is not None and not isinstance(v, Unavailable)

    def optional(m: re.Match[str]) -> str:
        inner = m.group(1)
        return inner if all(has(f.group(1)) for f in _FIELD.finditer(inner)) else ""

    def sub(m: re.Match[str]) -> str:
        v = values.get(m.group(1))
        if v is None or isinstance(v, Unavailable):
            return "n/a"
        spec = m.group(2) or ""
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if not SAFE_FORMAT_SPEC.match(spec):
            spec = ""  # never reached by a validated rule; a rule built by hand falls back
        try:
            out = format(v, spec)
            if isinstance(v, float) and v < 0 and _ZERO.fullmatch(out):
                out = format(-v, spec)  # "-0.0%": a change too small to show has no sign
            return out
        except (ValueError, TypeError, OverflowError):
            return str(v)

    text = _OPTIONAL.sub(optional, " ".join(text.split()))
    return _FIELD.sub(sub, " ".join(text.split()))


@dataclass
class Evaluation:
    """What one rule did on one run."""

    rule: Rule
    state: str  # "fired" | "silent" | "skipped"
    reason: str = ""
    finding: Finding | None = None


def _values_for(
    rule: Rule, features: FeatureSet, params: Mapping[str, Any], bindings: Mapping[str, Any]
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    names = {m.group(1) for t in [rule.evidence, *rule.fixes] for m in _FIELD.finditer(t)}
    for n in names:
        if n in params:
            values[n] = params[n]
        elif n in bindings:
            values[n] = bindings[n]
        else:
            try:
                values[n] = features.get(n)
            except KeyError:
                values[n] = None
    return values


def _merge_reasons(reasons: list[str]) -> str:
    """One line per distinct reason: ``a, b: the run logged no eval score`` rather than the same
    explanation after every feature that needs it."""
    by_reason: dict[str, list[str]] = {}
    for r in dict.fromkeys(reasons):
        name, sep, why = r.partition(": ")
        if sep and name and " " not in name:
            by_reason.setdefault(why, []).append(name)
        else:
            by_reason.setdefault(r, [])
    return "; ".join(
        f"{', '.join(names)}: {why}" if names else why for why, names in by_reason.items()
    )


def _evaluate_one(
    rule: Rule, run: Run, features: FeatureSet, params: Mapping[str, Any]
) -> Evaluation:
    missing = [m for m in rule.requires if run.get(m) is None or len(run.get(m) or ()) == 0]
    if missing:
        return Evaluation(
            rule, "skipped", f"needs {', '.join(missing)}, which this run did not log"
        )
    for metric, n in rule.min_points.items():
        s = run.get(metric)
        have = 0 if s is None else int(s.finite.sum())
        if have < n:
            return Evaluation(
                rule, "skipped", f"needs {n} finite {metric} points, the run has {have}"
            )
    out = evaluate(rule.when, features, params)
    if out.value is None:
        reasons = _merge_reasons(out.reasons) or "a feature was unavailable"
        return Evaluation(rule, "skipped", reasons)
    if not out.value:
        return Evaluation(rule, "silent")
    values = _values_for(rule, features, params, out.bindings)

    def step_of(name: str | None) -> int | None:
        if name is None:
            return None
        v = features.get(name)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    start, end = rule.steps or [None, None]
    primary = run.get(rule.requires[0]) if rule.requires else None
    n = int(primary.finite.sum()) if primary is not None else 20
    full = max(float(features.settings.confidence_full_points), 1.0)
    confidence = round(min(0.99, max(0.05, rule.confidence * min(1.0, math.sqrt(n / full)))), 2)
    finding = Finding(
        rule_id=rule.id,
        title=rule.title,
        category=rule.category,
        severity=rule.severity,
        confidence=confidence,
        evidence=render_template(rule.evidence, values),
        why=" ".join(rule.why.split()),
        # a fix whose every part needed a value this run lacks (or a target that would be a
        # no-op / contradict the config) renders empty and is left out
        fixes=_fixes(
            rule, values, trainer=features.get("cfg.trainer_run"), own=run.meta.hyperparameters
        ),
        step_range=(step_of(start), step_of(end)),
        onset_step=step_of(rule.onset),
        values={k: v for k, v in sorted(values.items()) if not isinstance(v, Unavailable)},
        report=rule.report.model_dump(exclude_none=True) if rule.report else {},
    )
    return Evaluation(rule, "fired", finding=finding)


def evaluate_rules(
    run: Run, ruleset: RuleSet, features: FeatureSet | None = None
) -> tuple[list[Evaluation], FeatureSet]:
    """Evaluate every rule (before echo suppression); quiet-only rules see the others' results."""
    if features is None:
        settings = FeatureSettings()
        settings.update(ruleset.feature_settings)
        features = FeatureSet(run, settings)
    evals: list[Evaluation] = []
    deferred = []
    for rule in ruleset:
        if rule.only_if_quiet:
            deferred.append(rule)
            continue
        evals.append(_evaluate_one(rule, run, features, ruleset.params[rule.id]))
    _suppress(evals)
    loud = any(
        e.finding is not None and e.state == "fired" and e.rule.severity != Severity.INFO
        for e in evals
    )
    for rule in deferred:
        if loud:
            evals.append(Evaluation(rule, "silent", "a warning or critical finding fired"))
        else:
            evals.append(_evaluate_one(rule, run, features, ruleset.params[rule.id]))
    return evals, features


def _points(run: Run) -> int:
    return sum(len(s) for s in run.metrics.values())


def _suppress(evals: list[Evaluation]) -> None:
    """Fold weaker echoes into the finding that explains them."""
    fired = {e.rule.id: e for e in evals if e.state == "fired"}
    order = sorted(fired.values(), key=lambda e: -e.rule.severity.rank)
    for e in order:
        if e.finding is None:
            continue
        for sid in e.rule.suppresses:
            echo = fired.get(sid)
            if echo is not None and echo.state == "fired" and echo.finding is not None:
                e.finding.related.append(f"{sid}: {echo.finding.evidence}")
                echo.state = "suppressed"
                echo.reason = f"folded into {e.rule.id}"


def _fixes(
    rule: Rule, values: Mapping[str, Any], *, trainer: object, own: Iterable[str] = ()
) -> list[str]:
    """The rule's fixes for this run.

    A fix whose every part needed a value this run lacks (or a target that would be a no-op /
    contradict the config) renders empty and is left out; so is one that names Trainer
    arguments when another training loop wrote the run.
    """
    texts = [t for t in (render_template(f, values) for f in rule.fixes) if t.strip()]
    if trainer is False:
        texts = [t for t in texts if not names_trainer_api(t, own)]
        return texts or ["See the evidence above."]
    return texts or [render_template(rule.fixes[-1], values) or "See the evidence above."]


def inconclusive_reason(run: Run, min_points: int) -> str | None:
    """Why ``run`` holds too little to judge, or ``None`` when it can be judged.

    The loss that is judged is the train loss; a run that logged only an eval loss cannot be
    called healthy either. Non-finite points count as logged (a NaN is a finding, not missing
    data).
    """
    series = run.get("train/loss")
    if (series is None or len(series) == 0) and is_rl_run(run):
        # a reinforcement-learning run is judged by its episode return, not its loss; the
        # learner's own logs (its loss, or its loss terms) must be long enough too
        learner = [run.metrics[k] for k in run.metrics if is_rl_loss(k)]
        series = min(
            [s for s in (run.get(rl_return_series(run) or ""), *learner) if s is not None],
            key=len,
        )
    if series is None or len(series) == 0:
        evals = run.get("eval/loss")
        if evals is None or len(evals) == 0:
            return "no train or eval loss was logged" + _unnamed_losses(run) + _stop_facts(run)
        # the rules judge the train loss (and eval against it): an eval curve alone is not
        # enough to call the run healthy
        return (
            f"no train loss was logged, only {len(evals)} eval loss point"
            f"{'s' if len(evals) != 1 else ''}: the rules judge the train loss" + _stop_facts(run)
        )
    n = len(series)
    if n < min_points:
        return (
            f"{n} {series.name} point{'s' if n != 1 else ''}: too few to judge trends "
            f"(curvediag needs {min_points})" + _stop_facts(run)
        )
    return None


def _unnamed_losses(run: Run) -> str:
    """The loss-like series the run did log, none of them taken for its loss (a GAN's
    generator and discriminator losses), and how many of their values are not finite."""
    names = sorted(
        k for k in run.metrics if "loss" in k.rsplit("/", 1)[-1].lower() and len(run.metrics[k])
    )
    if not names:
        return ": nothing to judge"
    parts = []
    for k in names[:4]:
        v = run.metrics[k].values
        bad = int((~np.isfinite(v)).sum())
        parts.append(f"{k}" + (f" ({bad} of {v.size} values NaN/Inf)" if bad else ""))
    more = f" and {len(names) - 4} more" if len(names) > 4 else ""
    return (
        f"; none of its loss-like series is the run's loss: {', '.join(parts)}{more} "
        "(map one onto the loss with --map NAME=train/loss)"
    )


def _stop_facts(run: Run) -> str:
    """What the log says of how the run ended, for a run too short to judge: its curves say
    nothing, but a crash or an early stop is still worth knowing."""
    meta, last = run.meta, run.last_step
    facts = []
    if meta.exit_code not in (None, 0) and meta.finished is not True:
        facts.append(f"the training process exited with code {meta.exit_code}")
    elif meta.exit_recorded is False and meta.finished is not True:
        facts.append("the W&B log stops without its exit record")
    if meta.max_steps and last is not None and last < meta.max_steps and meta.finished is not True:
        facts.append(f"the logs stop at step {last} of {meta.max_steps} planned")
    return "; " + " and ".join(facts) if facts else ""


def run_rules(run: Run, ruleset: RuleSet, features: FeatureSet | None = None) -> Diagnosis:
    """Diagnose ``run`` with ``ruleset`` (reusing ``features`` when already computed).

    Raises:
        OutOfMemoryError: The run's features do not fit in memory (names the run).
    """
    try:
        evals, features = evaluate_rules(run, ruleset, features)
    except MemoryError as exc:
        if isinstance(exc, OutOfMemoryError):
            raise
        raise OutOfMemoryError(run.source, f"diagnosing its {_points(run)} logged points") from None
    order = {r.id: i for i, r in enumerate(ruleset)}
    findings = [e.finding for e in evals if e.state == "fired" and e.finding is not None]
    findings.sort(key=lambda f: (-f.severity.rank, -f.confidence, order[f.rule_id]))
    skipped = [
        SkippedRule(rule_id=e.rule.id, reason=e.reason) for e in evals if e.state == "skipped"
    ]
    skipped.sort(key=lambda s: order[s.rule_id])
    diagnosis = Diagnosis(
        run=run,
        findings=findings,
        skipped=skipped,
        features=features.computed(),
        rules_evaluated=len(evals),
        inconclusive_reason=inconclusive_reason(run, int(features.settings.min_points_to_judge)),
    )
    diagnosis._feature_cache = features
    return diagnosis
