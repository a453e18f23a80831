"""Run-level features: length, progress, warmup and the learning-rate schedule."""

from __future__ import annotations

import numpy as np

from curvediag.errors import InsufficientDataError
from curvediag.features.registry import FeatureContext, Value, feature_group
from curvediag.model import Run


@feature_group(
    "lr",
    requires=["train/learning_rate"],
    features={
        "lr.first": "first logged learning rate",
        "lr.peak": "highest logged learning rate",
        "lr.peak_step": "step of the highest learning rate",
        "lr.last": "last logged learning rate",
        "lr.final_ratio": "last / peak learning rate",
        "lr.has_warmup": "the learning rate rose from below half its peak to the peak",
        "lr.warmup_end_step": "first step at which the learning rate reached ~its peak (~the top "
        "of its first rise when it later climbs well past the configured rate)",
        "lr.constant": "the learning rate never changed by more than 1%",
        "lr.constant_after_peak": "from its peak to the end the learning rate changed by less "
        "than 1% (no decay)",
        "lr.zero_step": "first step from which the learning rate stayed at or below 1% of its peak",
        "lr.zero_progress": "fraction of the logged run at which that happened",
        "lr.plateau_floor": "the learning rate came down in steps (each level held for 2 logs or "
        "more on average) to a positive floor it then held unchanged to the end: a "
        "reduce-on-plateau scheduler reaching its min_lr, not a schedule built for a shorter run",
        "lr.still_rising": "the learning rate was still rising at the last log (warmup never "
        "ended)",
        "lr.warmup_share": "lr.warmup_end_step / the run's last logged step: the share of the "
        "run spent warming up (None without a warmup)",
        "lr.decay_expected": "the configured scheduler decays the learning rate (linear, cosine, "
        "polynomial, ...)",
        "lr.n": "number of logged learning rates",
        "lr.schedule_shape": "linear, cosine or polynomial (power 0.9): the shape of a smooth "
        "decay from the peak that the logged rates follow closely enough to tell where it "
        "reaches zero",
        "lr.schedule_end_step": "the step at which that decay reaches zero (where the schedule "
        "was built to end)",
        "lr.schedule_progress": "last logged step of the run / lr.schedule_end_step",
    },
)
def _lr(ctx: FeatureContext) -> dict[str, Value]:
    steps, values = ctx.finite_series("train/learning_rate")
    if values.size == 0:
        raise InsufficientDataError("no finite learning-rate values")
    peak = float(values.max())
    i_peak = int(np.argmax(values))
    first = float(values[0])
    top = peak
    configured = ctx.run.meta.learning_rate
    if configured and 0 < configured < peak / 1.5:
        # a rate that later climbs well past the configured one (a schedule bug,
        # lr-above-configured) did not "warm up" to that height: warmup is the first rise,
        # up to where the rate first stops climbing
        falls = np.flatnonzero(np.diff(values) < 0)
        top = float(values[int(falls[0])]) if falls.size else peak
    reach = int(np.argmax(values >= ctx.settings.warmup_reach_share * top))
    has_warmup = bool(top > 0 and first < ctx.settings.warmup_start_share * top and reach > 0)
    constant = bool(peak > 0 and (peak - float(values.min())) <= 0.01 * peak)
    after = values[i_peak:]
    constant_after = bool(
        peak > 0 and after.size >= 3 and (peak - float(after.min())) <= 0.01 * peak
    )
    # the first step from which the LR STAYS at ~0 (cyclic schedules touch 0 and come back)
    stays_low = (
        np.logical_and.accumulate((after <= 0.01 * peak)[::-1])[::-1] if peak > 0 else after < 0
    )
    low = np.flatnonzero(stays_low)
    zero_i = int(low[0]) + i_peak if low.size else None
    plateau_floor = False
    if zero_i is not None and values[-1] > 0:
        # the floor: the trailing logs at the last value; the decay: from the peak down to it
        at_floor = np.abs(values - values[-1]) <= 1e-3 * values[-1]
        floor_i = values.size - int(np.argmin(at_floor[::-1])) if not at_floor.all() else 0
        decay = values[i_peak : floor_i + 1]
        levels = 1 + int(np.count_nonzero(np.abs(np.diff(decay)) > 1e-3 * np.abs(decay[1:])))
        plateau_floor = values.size - floor_i >= 3 and decay.size >= 2 * levels
    span = float(steps[-1] - steps[0]) or 1.0
    rising = bool(
        values.size >= 3 and i_peak == values.size - 1 and values[-1] > values[-2] * 1.0001
    )
    sched = (ctx.run.meta.lr_scheduler_type or "").lower()
    decaying = sched.startswith(("linear", "cosine", "polynomial", "inverse_sqrt", "warmup_stable"))
    shape, end = _schedule_end(steps, values, i_peak)
    last = ctx.run.last_step
    return {
        "lr.schedule_shape": shape,
        "lr.schedule_end_step": end,
        "lr.schedule_progress": None if end is None or last is None else float(last / end),
        "lr.constant_after_peak": constant_after,
        "lr.zero_step": None if zero_i is None else int(steps[zero_i]),
        "lr.zero_progress": None if zero_i is None else float((steps[zero_i] - steps[0]) / span),
        "lr.plateau_floor": plateau_floor,
        "lr.still_rising": rising,
        "lr.decay_expected": decaying,
        "lr.n": int(values.size),
        "lr.first": first,
        "lr.peak": peak,
        "lr.peak_step": int(steps[i_peak]),
        "lr.last": float(values[-1]),
        "lr.final_ratio": float(values[-1] / peak) if peak > 0 else None,
        "lr.has_warmup": has_warmup,
        "lr.warmup_end_step": int(steps[reach]) if has_warmup else None,
        "lr.warmup_share": float(steps[reach] / last) if has_warmup and last else None,
        "lr.constant": constant,
    }


#: A decay is read only when it fell this share of the peak within the logs (less says too
#: little of its shape: a slow exponential decay looks straight over a few percent).
_MIN_DECLINE = 0.1
#: ... and when no logged rate strays from the fitted shape by more than this share of the fall.
_SHAPE_TOLERANCE = 0.005
#: A shorter fall, down to this share of the peak, is read when an exponential decay fits at
#: least _EXP_MARGIN times worse than the shape (mmseg's poly schedule, stopped at 9% of its fall).
_MIN_SHORT_DECLINE = 0.05
_EXP_MARGIN = 4.0
#: The power of mmseg's default ``poly`` schedule.
_POLY_POWER = 0.9


def _schedule_end(
    steps: np.ndarray, values: np.ndarray, i_peak: int
) -> tuple[str | None, int | None]:
    """Where a linear or cosine decay from the peak reaches zero, when the logged rates after
    the peak follow one exactly (a scheduler computes them; they are not measured).

    Linear: the rates themselves lie on a line, which crosses zero at the end. Cosine: the
    fraction of its path the schedule had gone, ``arccos(2 lr/peak - 1) / pi``, grows linearly
    with the step and reaches 1 at the end. A fit within a small share of the fall is
    required, so exponential, inverse-square-root, step and reduce-on-plateau decays are left
    alone, as is a schedule already within 10% of zero (it had done its work). Polynomial
    (mmseg's default ``poly``, power 0.9): ``(lr/peak) ** (1/0.9)`` lies on a line. When
    several shapes fit, the later end is taken. A fall of less than 10% of the peak is read only
    when an exponential decay fits several times worse: over a few percent of its fall an
    exponential is hard to tell from a straight line.
    """
    peak = float(values[i_peak])
    post_s = steps[i_peak + 1 :].astype(float)
    post_v = values[i_peak + 1 :]
    if peak <= 0 or post_v.size < 5 or float(post_v[-1]) <= 0.1 * peak:
        return None, None
    diffs = np.diff(post_v)
    if bool(np.any(diffs > 0)) or float(np.mean(diffs < 0)) < 0.8:
        return None, None
    decline = float(post_v[0] - post_v[-1]) / peak
    if decline < _MIN_SHORT_DECLINE:
        return None, None
    t = post_s - post_s[0]
    fits: list[tuple[str, float, float]] = []
    for shape, y in (
        ("linear", post_v / peak),
        ("cosine", np.arccos(np.clip(2.0 * post_v / peak - 1.0, -1.0, 1.0)) / np.pi),
        ("polynomial", (post_v / peak) ** (1.0 / _POLY_POWER)),
    ):
        resid, line = _line_fit(t, y)
        if line is None or resid > _SHAPE_TOLERANCE:
            continue
        slope, icpt = line
        # the step at which the line reaches zero (linear, polynomial) or the path reaches 1
        # (cosine)
        target = 1.0 if shape == "cosine" else 0.0
        fits.append((shape, float(post_s[0] + (target - icpt) / slope), resid))
    if not fits:
        return None, None
    if decline < _MIN_DECLINE:
        exp_resid, _ = _line_fit(t, np.log(post_v / peak))
        if exp_resid < _EXP_MARGIN * min(f[2] for f in fits):
            return None, None
    shape, end, _ = max(fits, key=lambda f: f[1])
    return shape, round(end)


def _line_fit(t: np.ndarray, y: np.ndarray) -> tuple[float, tuple[float, float] | None]:
    """The largest residual of a least-squares line through ``y``, as a share of its fall, and
    the line (slope, intercept); None for a flat series."""
    slope, icpt = np.polyfit(t, y, 1)
    fall = abs(float(y[-1] - y[0]))
    if slope == 0 or fall == 0:
        return float("inf"), None
    resid = float(np.max(np.abs(y - (icpt + slope * t)))) / fall
    return resid, (float(slope), float(icpt))


def _last_epoch(run: Run) -> float | None:
    """The highest finite epoch the run logged (1-based), or None.

    Without an epoch metric, a plain loop that logs its train and eval loss together once per
    row, on consecutive steps (train an epoch, evaluate, log), has completed as many epochs as
    it logged rows.
    """
    epoch = run.get("train/epoch")
    if epoch is None or len(epoch) == 0:
        return _epochs_by_row(run)
    finite = epoch.values[np.isfinite(epoch.values)]
    if not finite.size:
        return None
    if float(finite.min()) == 0.0 and bool(np.all(finite == np.round(finite))):
        # whole epochs counted from 0 (Lightning, Keras): the index of the epoch in progress,
        # so the run reached one more epoch than the highest index ("epoch 10" is the 11th)
        return float(finite.max()) + 1.0
    return float(finite.max())


#: Below this many seconds left, an ETA at the last log says the run reached its end.
_ETA_DONE_SECONDS = 1.0


def _eta_end_step(run: Run) -> int | None:
    """The step a logged countdown (Detectron2's ``eta_seconds``) puts the run's end at.

    The seconds left at the last log, divided by the seconds per step the countdown lost over
    the logs before it (their median, robust to a slow evaluation step), added to the last
    step. An ETA of zero is the run's end itself. None without a usable countdown.
    """
    eta = run.get("train/eta_seconds")
    if eta is None or len(eta) < 3:
        return None
    ok = np.isfinite(eta.values) & (eta.values >= 0)
    steps, left = eta.steps[ok].astype(float), eta.values[ok]
    if steps.size < 3:
        return None
    if float(left[-1]) < _ETA_DONE_SECONDS:
        return int(steps[-1])
    gaps = np.diff(steps)
    drops = -np.diff(left)
    rate = drops[gaps > 0] / gaps[gaps > 0]
    rate = rate[rate > 0]
    if rate.size < 2:
        return None
    per_step = float(np.median(rate))
    return round(float(steps[-1]) + float(left[-1]) / per_step)


def _epochs_by_row(run: Run) -> float | None:
    train, ev = run.get("train/loss"), run.get("eval/loss")
    if train is None or ev is None or len(train) < 2 or len(train) != len(ev):
        return None
    steps = train.steps
    if not np.array_equal(steps, ev.steps) or int(steps[0]) not in (0, 1):
        return None
    if not bool(np.all(np.diff(steps) == 1)):
        return None
    return float(len(train))


#: How run-ended-early words a stop (run.stop_note) and what to look at (run.stop_hint).
_NO_SUMMARY = (
    "without the final training summary",
    "If this is a checkpoint of a run that went on, diagnose the output folder or the last "
    "checkpoint instead; otherwise suspect the process itself (out of memory on a long batch, a "
    "kill, a preemption).",
)
_TOLD_TO_STOP = (
    "with the Trainer's end-of-training summary at that step: something told it to stop",
    "It was not early stopping (none is configured, and the eval loss was still at its best): "
    "look for a callback that sets should_training_stop, a time limit, or an interrupt the "
    "script caught.",
)


def _last_is_best(values: np.ndarray) -> bool:
    """Whether the last finite value is the lowest (an eval loss still at its best)."""
    finite = values[np.isfinite(values)]
    return len(finite) > 0 and bool(finite[-1] <= finite.min())


def _evals_after_best(values: np.ndarray) -> int:
    """Evaluations logged after the eval loss's lowest finite value (0 when there is none)."""
    finite = values[np.isfinite(values)]
    if not len(finite):
        return 0
    return int(len(finite) - 1 - int(np.argmin(finite)))


def _steps_done(run: Run, last: int) -> int:
    """The steps a run had done at its last log: a loop that counts from 0 (Lightning's
    global step) logs its last of ``max_steps`` steps at ``max_steps - every``."""
    loss = run.get("train/loss")
    if loss is None or len(loss) < 2 or int(loss.steps[0]) != 0:
        return last
    every = int(np.median(np.diff(loss.steps)))
    return last + every if int(loss.steps[-1]) == last else last


@feature_group(
    "run",
    requires=[],
    features={
        "run.last_step": "last step logged by any metric",
        "run.first_step": "first step logged by any metric",
        "run.max_steps": "planned number of steps, when known",
        "run.progress": "last logged step / planned steps, when known; else the last logged "
        "epoch / planned epochs (a loop that plans in epochs: its config's epochs); else the "
        "last logged step / the end a logged countdown (eta_seconds) gives; else the last "
        "logged step / the step at which the learning-rate schedule's decay reaches zero",
        "run.schedule_end_step": "the step the learning-rate schedule was built to end at, when "
        "no planned length is configured and run.progress is measured against it",
        "run.eta_end_step": "the step a logged countdown (eta_seconds) puts the end of the run "
        "at, when no planned length is configured: run.progress is measured against it",
        "run.last_epoch": "the last logged epoch, when progress is counted in epochs",
        "run.planned_epochs": "the planned epochs, when progress is counted in epochs",
        "run.finished": "the log ends with the Trainer's final summary",
        "run.warmup_end_step": "end of warmup: from the LR curve, else the configured warmup, "
        "else 0",
        "run.warmup_known": "whether warmup was observed in the LR curve or configured",
        "run.max_grad_norm": "clipping threshold used (settings, run config, else 1.0)",
        "run.batch_size": "examples per optimizer step per device x devices, when known",
        "run.grad_accum": "gradient accumulation steps (1 when unknown)",
        "run.eval_count": "number of evaluations logged: eval-loss points, else the points of "
        "the most-logged eval metric (0 when none)",
        "run.train_logs": "number of train-loss logs",
        "run.ended_early": "the log stops well before the planned steps and has no final "
        "summary, or has the Trainer's summary while nothing planned the stop (no early "
        "stopping configured, the eval loss best at its last evaluation)",
        "run.stopped_short_quietly": "the log stops well before the plan, as for run.ended_early, "
        "but where a planned end would stop it too: the latest Trainer checkpoint in the plan's "
        "last quarter (settings late_checkpoint_progress), or settings planned_stop_evals or "
        "more evaluations after the eval loss's best (an early-stopping rule's stop); never "
        "when the process is known to have failed",
        "run.late_snapshot_share": "run.progress, when run.stopped_short_quietly holds because "
        "the log is a Trainer checkpoint in the plan's last quarter",
        "run.evals_after_best": "evaluations logged after the eval loss's best, when that is why "
        "run.stopped_short_quietly holds",
        "run.stop_note": "how the log stops: without the final training summary, or with the "
        "Trainer's summary that something other than the plan called for",
        "run.stop_hint": "where to look for what stopped it, for either kind of stop",
        "run.exit_code": "the training process's exit code, when the log records it (W&B)",
        "run.error": "the exception (class name) an uncaught error ended the process with, "
        "when the console output ends with its traceback",
        "run.exit_recorded": "whether a W&B binary log holds its exit record (unavailable for "
        "formats that record no exit)",
        "run.early_stopped": "EarlyStoppingCallback stopped the run (its patience ran out)",
        "run.early_stopping_patience": "the patience it had, in evaluations",
        "run.best_step": "step of the best checkpoint the Trainer recorded (best_global_step)",
        "run.snapshot_only": "the only source is a trainer_state.json without a final summary: a "
        "checkpoint snapshot, which cannot tell whether the run went on",
        "run.warmup_configured": "warmup steps from the configuration, when known",
        "run.warmup_share_of_plan": "the configured warmup steps / the planned steps, when both "
        "are known",
    },
)
def _run(ctx: FeatureContext) -> dict[str, Value]:
    run = ctx.run
    meta = run.meta
    last = run.last_step
    warm: int | None = None
    known = False
    lr = run.get("train/learning_rate")
    if lr is not None and len(lr) >= 3:
        has = ctx.features.get("lr.has_warmup")
        if has is True:
            v = ctx.features.get("lr.warmup_end_step")
            warm = v if isinstance(v, int) else None
            known = True
        elif has is False:
            warm, known = 0, True
    if warm is None and meta.warmup_steps:
        warm, known = meta.warmup_steps, True
    if warm is None and meta.warmup_ratio and (meta.max_steps or last):
        warm, known = int(meta.warmup_ratio * (meta.max_steps or last or 0)), True
    mgn = ctx.settings.max_grad_norm
    if mgn is None:
        mgn = meta.max_grad_norm if meta.max_grad_norm and meta.max_grad_norm > 0 else 1.0
    progress = None
    last_epoch, planned_epochs = None, None
    if meta.max_steps and last is not None:
        progress = _steps_done(run, last) / meta.max_steps
    elif meta.num_train_epochs and (last_epoch := _last_epoch(run)) is not None:
        planned_epochs = float(meta.num_train_epochs)
        progress = last_epoch / planned_epochs
    threshold = ctx.settings.ended_early_progress
    ev = run.get("eval/loss")
    tl = run.get("train/loss")
    schedule_end: int | None = None
    eta_end = _eta_end_step(run) if progress is None else None
    if eta_end and last is not None:
        # the trainer's own countdown to its planned last step
        progress = min(1.0, last / eta_end)
    if progress is None and isinstance(end := ctx.features.get("lr.schedule_end_step"), int):
        # no plan in the config: the LR schedule's own end, where its decay reaches zero. A
        # scheduler can be built a little longer than the run it drives, so a stricter bar
        schedule_end = end
        lr_progress = ctx.features.get("lr.schedule_progress")
        progress = lr_progress if isinstance(lr_progress, float) else None
        threshold = ctx.settings.ended_early_schedule_progress
    configured: int | None = None
    if meta.warmup_steps is not None:
        configured = meta.warmup_steps
    elif meta.warmup_ratio and meta.max_steps:
        configured = int(meta.warmup_ratio * meta.max_steps)
    summary = "train_runtime" in meta.summary  # the Trainer's end-of-training summary
    # the Trainer closed the run before its plan: something told it to stop (a callback's
    # should_training_stop, an interrupt the script caught). Early stopping is a planned end,
    # and it cannot have fired on an eval loss whose last evaluation was its best
    told_to_stop = (
        summary
        and meta.finished is False
        and meta.max_steps is not None
        and meta.early_stopped is not True
        and meta.early_stopping_patience is None
        and (ev is None or len(ev) == 0 or _last_is_best(ev.values))
    )
    ended_early = bool(
        progress is not None
        and progress < threshold
        and meta.finished is not True
        and (not summary or told_to_stop)
    )
    # two kinds of early stop a planned end explains as well as a kill does: the latest of a
    # Trainer's checkpoints in the plan's last quarter (a snapshot of a run that may well have
    # gone on), and a log that stops some evaluations after its eval loss was at its best, where
    # an early-stopping rule stops a run. Never when the process is known to have failed.
    after_best = _evals_after_best(ev.values) if ev is not None and len(ev) else 0
    failed = meta.error is not None or meta.exit_code not in (None, 0)
    snapshot_only = run.format == "hf-trainer" and not summary
    late_snapshot = bool(
        snapshot_only and progress is not None and progress >= ctx.settings.late_checkpoint_progress
    )
    # (a Trainer told to stop had its eval loss at its best: never after a plateau)
    after_plateau = after_best >= ctx.settings.planned_stop_evals
    looks_planned = ended_early and not failed and (late_snapshot or after_plateau)
    return {
        # evaluations that logged no loss (a test accuracy per epoch) are evaluations too
        "run.eval_count": len(ev)
        if ev is not None and len(ev)
        else max((len(x) for k, x in run.metrics.items() if k.startswith("eval/")), default=0),
        "run.train_logs": 0 if tl is None else len(tl),
        "run.ended_early": ended_early,
        "run.stopped_short_quietly": looks_planned,
        "run.late_snapshot_share": progress if looks_planned and late_snapshot else None,
        "run.evals_after_best": after_best if looks_planned and after_plateau else None,
        "run.stop_note": _TOLD_TO_STOP[0] if told_to_stop else _NO_SUMMARY[0],
        "run.stop_hint": _TOLD_TO_STOP[1] if told_to_stop else _NO_SUMMARY[1],
        "run.snapshot_only": snapshot_only,
        "run.warmup_configured": configured,
        "run.warmup_share_of_plan": configured / meta.max_steps
        if configured is not None and meta.max_steps
        else None,
        "run.last_step": last,
        "run.first_step": min(
            (int(x.steps[0]) for x in run.metrics.values() if len(x)), default=None
        ),
        "run.max_steps": meta.max_steps,
        "run.schedule_end_step": schedule_end,
        "run.eta_end_step": eta_end,
        "run.progress": progress,
        "run.last_epoch": last_epoch if planned_epochs else None,
        "run.planned_epochs": planned_epochs,
        "run.finished": meta.finished,
        "run.exit_code": meta.exit_code,
        "run.exit_recorded": meta.exit_recorded,
        "run.error": meta.error,
        "run.early_stopped": meta.early_stopped,
        "run.early_stopping_patience": meta.early_stopping_patience,
        "run.best_step": meta.best_global_step,
        "run.warmup_end_step": warm if warm is not None else 0,
        "run.warmup_known": known,
        "run.max_grad_norm": float(mgn),
        "run.batch_size": meta.train_batch_size,
        "run.grad_accum": meta.gradient_accumulation_steps or 1,
    }
