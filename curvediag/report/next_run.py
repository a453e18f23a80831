"""The "next run" list: concrete setting changes to try one at a time, most likely cause first.

A rule declares in its YAML which kind of change its finding calls for
(``report: {next_run: {kind: lower-lr, factor: 5}}``); each kind's handler proposes changes
from the finding and the run's own configuration (``run.meta`` and ``meta.hyperparameters``),
most useful first. The report itself knows no rule id. The list takes
the first change of every finding (most severe, most confident finding first), then the
others, never the same setting twice. Rules without a handler contribute their first fix.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from curvediag.escape import md_code
from curvediag.features.checks import nice
from curvediag.report._fmt import num, pct, setting_value
from curvediag.ruleset.engine import names_trainer_api, trainer_arguments

if TYPE_CHECKING:
    from curvediag.model import Diagnosis, Finding
    from curvediag.report.context import ReportContext

__all__ = ["KINDS", "MAX_CHANGES", "Change", "handler_for", "next_run_changes", "nice"]

#: At most this many changes are listed: a plan, not a shotgun.
MAX_CHANGES = 5


@dataclass(frozen=True)
class Change:
    """One change to try in the next run.

    Attributes:
        key: What it changes (a setting name, or an action id); no two changes share a key.
        change: The change as written in the report: ``learning_rate: 30 -> 3``, or an action.
        why: Why, with this run's numbers.
        rule_id: The finding it comes from.
        setting: The setting name, when it is a setting change.
        current: Its value in this run (``None`` when unknown).
        proposed: The value to try.
        decisive: It takes the place of an earlier change to the same setting (bringing a
            learning rate into its usual range beats lowering it a few times).
    """

    key: str
    change: str
    why: str
    rule_id: str
    setting: str | None = None
    current: Any = None
    proposed: Any = None
    decisive: bool = False

    @property
    def is_setting(self) -> bool:
        return self.setting is not None


def _setting(
    key: str, current: Any, proposed: Any, why: str, rule_id: str, extra: str = ""
) -> Change:
    text = md_code(f"{key}: {setting_value(current)} -> {setting_value(proposed)}") + extra
    return Change(key, text, why, rule_id, key, current, proposed)


def _action(key: str, text: str, why: str, rule_id: str) -> Change:
    return Change(key, text, why, rule_id)


# -- building blocks ------------------------------------------------------------------------


def _lr(ctx: ReportContext) -> float | None:
    v = ctx.setting("learning_rate")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return float(v)
    return ctx.number("lr.peak")


def _lower_lr(ctx: ReportContext, f: Finding, factor: float, why: str) -> Change | None:
    lr = _lr(ctx)
    if lr is None:
        return None
    return _setting("learning_rate", lr, nice(lr / factor, below=lr), why, f.rule_id)


def _clipping_on(ctx: ReportContext, f: Finding, why: str) -> Change | None:
    _, how = ctx.clip_threshold()
    if how != "off":
        return None
    return _setting("max_grad_norm", 0.0, 1.0, why, f.rule_id)


def _warmup_share(ctx: ReportContext) -> tuple[float | None, str | None, Any]:
    """(warmup as a share of the planned steps, how it was configured, configured value)."""
    meta = ctx.run.meta
    planned = ctx.planned_steps() or ctx.run.last_step
    if meta.warmup_steps and meta.warmup_steps >= 1:
        share = meta.warmup_steps / planned if planned else None
        return share, "warmup_steps", meta.warmup_steps
    if meta.warmup_ratio:
        return meta.warmup_ratio, ctx.warmup_ratio_arg(), meta.warmup_ratio
    if ctx.feature("lr.has_warmup") is False or meta.warmup_steps == 0:
        return 0.0, None, 0
    return None, None, None


def _more_warmup(ctx: ReportContext, f: Finding, why: str, target: float = 0.1) -> Change | None:
    share, how, value = _warmup_share(ctx)
    if share is None or share >= target * 0.99:
        return None
    planned = ctx.planned_steps() or ctx.run.last_step
    if how == "warmup_steps" and planned:
        new = max(int(value) * 2, round(target * planned))
        return _setting("warmup_steps", int(value), new, why, f.rule_id)
    return _setting(ctx.warmup_ratio_arg(), float(value or 0.0), target, why, f.rule_id)


def _duration(ctx: ReportContext, f: Finding, to_step: int | None, why: str) -> Change | None:
    """Shorten (``to_step`` < last) or lengthen the run in the unit the user configured."""
    raw_max = ctx.run.meta.hyperparameters.get("max_steps")
    last = ctx.run.last_step
    if to_step is None or last is None or to_step <= 0:
        return None
    if isinstance(raw_max, int) and raw_max > 0:
        return _setting("max_steps", raw_max, int(to_step), why, f.rule_id)
    epochs = ctx.setting("num_train_epochs")
    at = ctx.epoch_at(to_step) if to_step <= last else None
    if at is None and to_step > last and isinstance(epochs, (int, float)):
        at = float(epochs) * to_step / last
    if isinstance(epochs, (int, float)) and at is not None:
        new = max(1, math.ceil(at - 1e-9))
        if new != epochs:
            return _setting("num_train_epochs", epochs, new, why, f.rule_id)
    return _setting(
        "max_steps", raw_max if raw_max is not None else None, int(to_step), why, f.rule_id
    )


# -- one handler per rule ----------------------------------------------------------------------


def _overfitting(ctx: ReportContext, f: Finding) -> list[Change | None]:
    from curvediag.report.timeline import checkpoint_note

    best = ctx.step("eval.min_step") or f.onset_step
    out: list[Change | None] = []
    if best is not None and ctx.setting("load_best_model_at_end") is not True:
        extra = ', with `metric_for_best_model="eval_loss"`'
        save = ctx.run.meta.save_steps
        eval_steps = ctx.run.meta.eval_steps
        strategy = str(ctx.setting("save_strategy") or "").lower()
        if (
            eval_steps
            and eval_steps >= 1
            and (strategy.endswith("no") or (save and save >= 1 and best % int(save) != 0))
        ):
            extra += (
                f" and `save_steps: {setting_value(int(save or 0)) if save else 'unset'} -> "
                f"{int(eval_steps)}` (= eval_steps, so the step-{best} weights are saved)"
            )
            if strategy.endswith("no"):
                extra += ' and `save_strategy: "no" -> "steps"`'
        why = (
            f"the best eval loss {num(ctx.number('eval.min'))} was at step {best}; "
            f"{checkpoint_note(ctx, best)}. Keep the best weights whatever else changes"
        )
        out.append(
            _setting(
                "load_best_model_at_end",
                ctx.setting("load_best_model_at_end") or False,
                True,
                why,
                f.rule_id,
                extra,
            )
        )
    last = ctx.run.last_step
    if best is not None and last is not None and best < last:
        at = ctx.epoch_at(best)
        when = f"step {best}" + (f", epoch {num(at, 3)}" if at is not None else "")
        out.append(
            _duration(
                ctx,
                f,
                best,
                f"eval loss bottomed out at {when} and rose "
                f"{pct(ctx.number('eval.rise_after_min'))}"
                " after it while the train loss kept falling; or add "
                "`EarlyStoppingCallback(early_stopping_patience=3)`",
            )
        )
    wd = ctx.setting("weight_decay")
    if not isinstance(wd, (int, float)) or wd < 0.01:
        out.append(
            _setting(
                "weight_decay", wd, 0.05, "regularise the memorisation (or add data)", f.rule_id
            )
        )
    return out


def _lr_too_high(
    factor: float, what: str
) -> Callable[[ReportContext, Finding], list[Change | None]]:
    def handler(ctx: ReportContext, f: Finding) -> list[Change | None]:
        lr = _lr(ctx)
        # the factor actually proposed: the target is rounded down to a 1-2-5 value
        shown = lr / nice(lr / factor, below=lr) if lr else factor
        why = f"{what}; a {shown:.2g}x lower peak learning rate keeps the updates bounded"
        if lr is not None and ctx.number("lr.peak") and ctx.number("lr.peak") != lr:
            why += f" (the run reached {setting_value(ctx.number('lr.peak'))})"
        return [
            _lower_lr(ctx, f, factor, why),
            _clipping_on(ctx, f, "clipping was off: one large gradient can blow up the weights"),
            _more_warmup(ctx, f, "the first large updates should come at a small learning rate"),
        ]

    return handler


def _lr_into_range(ctx: ReportContext, f: Finding) -> list[Change | None]:
    lr, target = _lr(ctx), ctx.number("cfg.lr_into_range")
    if lr is None or target is None or target == lr:
        return []
    if target > lr:
        why = f"{setting_value(lr)} is far below what any common recipe uses"
    else:
        usual, kind = ctx.number("cfg.lr_usual_max"), ctx.feature("cfg.run_kind")
        why = f"{setting_value(lr)} is far above the usual range"
        if usual is not None and kind:
            why += f" (up to {setting_value(usual)} for {kind})"
    c = _setting("learning_rate", lr, target, why, f.rule_id)
    return [Change(c.key, c.change, c.why, c.rule_id, c.setting, c.current, c.proposed, True)]


def _nan_after_growth(ctx: ReportContext, f: Finding) -> list[Change | None]:
    growth = ctx.number("nan.grad_growth")
    what = f"the loss turned non-finite at step {ctx.step('nan.first_step')}"
    if growth:
        what += f" after the grad norm grew {num(growth, 3)}x"
    return _lr_too_high(10, what)(ctx, f)


def _nan_sudden(ctx: ReportContext, f: Finding) -> list[Change | None]:
    out: list[Change | None] = []
    step = ctx.step("nan.first_step")
    if ctx.setting("fp16") is True:
        out.append(
            _setting(
                "fp16",
                True,
                False,
                "fp16 loss scaling overflows without warning; bf16 has the range of fp32",
                f.rule_id,
                ", with `bf16: False -> True` (Ampere or newer GPUs)",
            )
        )
    out.append(
        _action(
            "inspect-batch",
            f"Inspect the batch of step {step}: very long, empty or fully masked examples",
            "a NaN out of a calm run often comes from one bad batch",
            f.rule_id,
        )
    )
    out.append(_clipping_on(ctx, f, "clipping was off"))
    return out


def _nan_at_start(ctx: ReportContext, f: Finding) -> list[Change | None]:
    return [
        _action(
            "inspect-first-batches",
            "Inspect the first batches: NaN/Inf inputs, empty sequences, labels all -100",
            "the very first logged loss was already "
            "non-finite, before the optimizer could do any harm",
            f.rule_id,
        ),
    ]


def _spike(ctx: ReportContext, f: Finding) -> list[Change | None]:
    step = ctx.step("spike.step") or f.onset_step
    lo, hi = ctx.step("spike.example_lo"), ctx.step("spike.example_hi")
    where = (
        f" (training examples {lo}-{hi - 1} of that epoch's order)" if lo is not None and hi else ""
    )
    out: list[Change | None] = [
        _action(
            "inspect-batch",
            f"Inspect the batch of step {step}{where} for corrupt, empty or very long examples",
            f"the loss jumped {num(ctx.number('spike.ratio'), 3)}x its "
            "baseline at that step"
            + ("and recovered at once" if ctx.feature("spike.recovered") is True else ""),
            f.rule_id,
        ),
        _clipping_on(ctx, f, "clipping was off, so one bad batch could move the weights far"),
    ]
    count = ctx.step("spike.count") or 1
    if count > 1:
        out.append(
            _lower_lr(
                ctx,
                f,
                2,
                f"{count} spikes after warmup: the learning rate is close to the edge of stability",
            )
        )
    return out


def _clipping(ctx: ReportContext, f: Finding) -> list[Change | None]:
    thr, _ = ctx.clip_threshold()
    med = ctx.number("grad.median_after_warmup")
    share = ctx.number("grad.clip_fraction_after_warmup")
    what = f"the grad norm was clipped on {pct(share, signed=False)} of the steps after warmup"
    if med is not None and thr:
        what += f" (median {num(med)} against max_grad_norm={setting_value(thr)})"
    out: list[Change | None] = [_lower_lr(ctx, f, 3, what)]
    if thr is not None and thr < 1.0:
        out.append(
            _setting(
                "max_grad_norm",
                thr,
                1.0,
                f"a threshold of {setting_value(thr)} is "
                "far below the grad norms this model produces: every update is "
                "rescaled",
                f.rule_id,
            )
        )
    out.append(_more_warmup(ctx, f, "early large gradients should meet a small learning rate"))
    return out


def _no_warmup(ctx: ReportContext, f: Finding) -> list[Change | None]:
    rise = ctx.number("loss.early_rise")
    why = "the loss rose in the first steps"
    if rise is not None:
        why += f" ({pct(rise)} by step {ctx.step('loss.early_peak_step')})"
    why += " with the full learning rate from step 0"
    return [
        _more_warmup(ctx, f, why),
        _lower_lr(ctx, f, 2, "if it persists with warmup, the peak learning rate is too high"),
    ]


def _not_decreasing(ctx: ReportContext, f: Finding) -> list[Change | None]:
    lr, raised = _lr(ctx), ctx.number("cfg.lr_raise")
    imp = ctx.number("loss.improvement")
    out: list[Change | None] = []
    # the same target as the rule's fix (cfg.lr_raise: 10x, capped at the usual range); none
    # when the learning rate is already at the top of it, so the checks below come first
    if lr is not None and raised is not None and raised > lr:
        out.append(
            _setting(
                "learning_rate",
                lr,
                raised,
                f"the train loss fell only {pct(imp, signed=False)} over the run",
                f.rule_id,
            )
        )
    out.append(
        _action(
            "check-trainable",
            "Check the trainable-parameter count (and the LoRA target modules)",
            "a frozen model does not learn at any learning rate",
            f.rule_id,
        )
    )
    out.append(
        _action(
            "inspect-batch",
            "Inspect one collated batch: inputs, attention mask and "
            "labels line up, most labels not -100",
            "bad labels look like a learning rate that is too low",
            f.rule_id,
        )
    )
    return out


def _plateau(ctx: ReportContext, f: Finding) -> list[Change | None]:
    return [
        _action(
            "check-labels",
            "Count the non-masked label tokens per example "
            "(labels != -100) and check the label alignment",
            f"the loss fell "
            f"{pct(ctx.number('loss.drop_before_stop'), signed=False)} and then stayed flat "
            f"at {num(ctx.number('loss.tail'))}: the classic label-masking signature",
            f.rule_id,
        ),
    ]


def _still_improving(ctx: ReportContext, f: Finding) -> list[Change | None]:
    last = ctx.run.last_step
    if last is None:
        return []
    gain, late = ctx.number("eval.projected_gain"), ctx.number("eval.late_drop")
    if gain is not None and gain >= 0.01 and late is not None and late > 0:
        # the held-out loss decided (still-improving-at-end's eval branch, or a sparse train log)
        why = (
            f"the eval loss was still falling at the end ({pct(-late)} over its last "
            f"evaluations, about {pct(gain, signed=False)} lower still at that pace)"
        )
    else:
        why = (
            f"the loss was still falling at the end "
            f"({pct(ctx.number('loss.change_late'))} over the last quarter)"
        )
    return [_duration(ctx, f, last * 2, why)]


def _eval_flat(ctx: ReportContext, f: Finding) -> list[Change | None]:
    return [
        _action(
            "check-eval-preprocessing",
            "Check that the eval set goes through the same "
            "preprocessing, template and label masking as the train set",
            f"the train loss "
            f"moved {pct(ctx.number('eval.train_change'))} while the eval loss stayed at "
            f"about {num(ctx.number('eval.last'))}",
            f.rule_id,
        ),
    ]


def _warmup_too_long(ctx: ReportContext, f: Finding) -> list[Change | None]:
    _, how, value = _warmup_share(ctx)
    planned = ctx.planned_steps() or ctx.run.last_step
    if not planned:
        return []
    why = (
        "warmup never ended: the learning rate was still rising when the run stopped at step "
        f"{planned}"
    )
    if how is not None and value is not None and float(value) < 1:
        return [_setting(how, value, 0.05, why, f.rule_id)]
    return [_setting("warmup_steps", value, max(1, round(0.05 * planned)), why, f.rule_id)]


def _spike_at_warmup_end(ctx: ReportContext, f: Finding) -> list[Change | None]:
    why = "the loss spiked where warmup handed over the full learning rate"
    return [_lower_lr(ctx, f, 2, why), _more_warmup(ctx, f, why, target=0.1)]


def _batch_noise(ctx: ReportContext, f: Finding) -> list[Change | None]:
    accum = ctx.setting("gradient_accumulation_steps")
    cur = int(accum) if isinstance(accum, (int, float)) and accum >= 1 else 1
    noise = num(ctx.number("loss.noise"), 3)
    why = f"the loss is noisy (relative noise {noise}): average more examples per update"
    return [_setting("gradient_accumulation_steps", cur, cur * 4, why, f.rule_id)]


Handler = Callable[["ReportContext", "Finding"], list["Change | None"]]

#: Next-run kinds a rule can declare (``report: {next_run: {kind: ...}}`` in its YAML) -> the
#: handler proposing changes from the finding and the run's configuration, most useful first.
KINDS: dict[str, Handler] = {
    "keep-best-checkpoint": _overfitting,
    "nan-after-growth": _nan_after_growth,
    "nan-sudden": _nan_sudden,
    "nan-at-start": _nan_at_start,
    "clipping": _clipping,
    "inspect-spike": _spike,
    "add-warmup": _no_warmup,
    "not-decreasing": _not_decreasing,
    "plateau": _plateau,
    "train-longer": _still_improving,
    "eval-flat": _eval_flat,
    "shorten-warmup": _warmup_too_long,
    "warmup-end-spike": _spike_at_warmup_end,
    "batch-noise": _batch_noise,
    "lr-into-range": _lr_into_range,
}


def handler_for(f: Finding) -> Handler | None:
    """The handler a finding's rule declared, or None (the finding then contributes its first
    fix). ``lower-lr`` takes the factor and the reason from the declaration."""
    spec = f.report.get("next_run") or {}
    kind = spec.get("kind")
    if kind == "lower-lr":
        return _lr_too_high(float(spec.get("factor") or 3), str(spec.get("why") or f.title))
    return KINDS.get(str(kind)) if kind else None


def _trainer_only(c: Change, own: dict[str, Any]) -> bool:
    """A change that names a Trainer argument the run's own config does not have."""
    if c.setting is not None:
        return c.setting in trainer_arguments() and c.setting not in own
    return names_trainer_api(c.change, own)


def _no_op(c: Change) -> bool:
    """A setting change to the value the run already has (``save_steps: 500 -> 500``)."""
    if not c.is_setting or c.current is None:
        return False
    try:
        return bool(float(c.current) == float(c.proposed))
    except (TypeError, ValueError):
        return bool(c.current == c.proposed)


def next_run_changes(diagnosis: Diagnosis | ReportContext) -> list[Change]:
    """The ordered changes to try, one at a time, at most :data:`MAX_CHANGES`."""
    from curvediag.report.context import ReportContext

    ctx = diagnosis if isinstance(diagnosis, ReportContext) else ReportContext.of(diagnosis)
    pool = [f for f in ctx.diagnosis.findings if f.severity.value != "info"]
    if not pool:
        # no problem, but an info finding that declares a change still calls for it (a run
        # still improving at the end: train longer) - the plan must not say "nothing to change"
        # beside a finding that says the checkpoint is undertrained
        pool = [f for f in ctx.diagnosis.findings if handler_for(f) is not None]
    findings = sorted(pool, key=lambda f: (-f.severity.rank, -f.confidence))
    per_finding: list[list[Change]] = []
    other_loop = ctx.feature("cfg.trainer_run") is False
    for f in findings:
        handler = handler_for(f)
        if handler is not None:
            changes = [c for c in handler(ctx, f) if c is not None and not _no_op(c)]
        elif f.fixes:
            changes = [_first_fix(f)]
        else:
            changes = []
        if other_loop:  # a run another training loop wrote: no TrainingArguments advice
            changes = [c for c in changes if not _trainer_only(c, ctx.run.meta.hyperparameters)]
            if not changes and f.fixes:
                changes = [_first_fix(f)]
        per_finding.append(changes)
    ordered = [c[0] for c in per_finding if c] + [x for c in per_finding for x in c[1:]]
    out: list[Change] = []
    where: dict[str, int] = {}
    for c in ordered:
        if c.key in where:
            i = where[c.key]
            if c.decisive and not out[i].decisive:
                # the same setting, a better-founded value: in the earlier place, with the
                # earlier finding's observation (not its own proposal) and the new reason
                first = out[i]
                seen_why = first.why.split(";")[0]
                out[i] = Change(
                    c.key,
                    c.change,
                    f"{seen_why}; {c.why}",
                    first.rule_id,
                    c.setting,
                    c.current,
                    c.proposed,
                    True,
                )
            continue
        where[c.key] = len(out)
        out.append(c)
    return out[:MAX_CHANGES]


def _first_fix(f: Finding) -> Change:
    """A finding without a handler: its first fix, as an action (the report adds ": why")."""
    return _action(f"fix:{f.rule_id}", f.fixes[0].rstrip(". "), f.title, f.rule_id)
