"""The key events of a run in step order: warmup, spikes, change points, best eval, clipping,
non-finite values, findings, end of logs.

Events are computed from the diagnosis, its run and the registered features. Change points
come from ``cp.*`` features when the registry has them; clipping saturation onset is computed
here from the grad-norm series (no feature holds it yet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

import numpy as np

from curvediag.escape import md_code
from curvediag.report._fmt import num, pct, setting_value

if TYPE_CHECKING:
    from curvediag.model import Diagnosis, Finding
    from curvediag.report.context import ReportContext

__all__ = ["EVENT_KINDS", "Event", "build_timeline", "changepoint_steps", "clipping_onset"]

#: Event kinds, in the order they are listed when they share a step.
EVENT_KINDS = (
    "start",
    "warmup",
    "resume",
    "changepoint",
    "clipping",
    "grad_growth",
    "spike",
    "best_eval",
    "nonfinite",
    "finding",
    "end",
)

#: Where the timeline places the onset of clipping a finding reported: the first log from
#: which at least this share of the logs is above the threshold.
CLIP_SATURATION = 0.8
#: A change-point level jump is a timeline event from this fractional rise on.
MIN_JUMP = 0.1


@dataclass(frozen=True)
class Event:
    """One timeline entry.

    Attributes:
        step: Optimizer step of the event.
        kind: One of :data:`EVENT_KINDS`.
        title: Short name (``Best eval loss``).
        detail: One sentence with this run's numbers.
        epoch: Epoch at that step, when the run logged epochs.
        wall_time: Seconds since the epoch at that step, when the logs carry wall times.
        rule_id: The finding this event belongs to, if any.
    """

    step: int
    kind: str
    title: str
    detail: str
    epoch: float | None = None
    wall_time: float | None = None
    rule_id: str | None = None

    @property
    def order(self) -> tuple[int, int, str]:
        return (self.step, EVENT_KINDS.index(self.kind), self.title)


def build_timeline(diagnosis: Diagnosis | ReportContext) -> list[Event]:
    """The key events of the diagnosed run, in step order."""
    from curvediag.report.context import ReportContext

    ctx = diagnosis if isinstance(diagnosis, ReportContext) else ReportContext.of(diagnosis)
    cached = ctx.cache.get("timeline")
    if cached is not None:  # the plots and the markdown of one report share it
        return list(cached)
    events = _build(ctx)
    ctx.cache["timeline"] = events
    return list(events)


def _build(ctx: ReportContext) -> list[Event]:
    raw: list[tuple[int, str, str, str, str | None]] = []
    raw += _start(ctx)
    raw += _warmup(ctx)
    raw += [
        (s, "resume", "Resumed", f"training resumed from a checkpoint at step {s}", None)
        for s in ctx.run.meta.resumed_at_steps
    ]
    raw += _changepoints(ctx)
    raw += _clipping(ctx)
    raw += _nonfinite(ctx)
    raw += _spikes(ctx)
    raw += _best_eval(ctx)
    raw += _findings(ctx)
    raw += _end(ctx)
    # nothing happens before the first log or after the last one: a step outside the logged
    # range (a finding's default step 0, a configured warmup past the end) is moved to the
    # nearest logged step rather than printed as a claim the data does not hold
    firsts = [int(s.steps[0]) for s in ctx.run.metrics.values() if len(s)]
    lo = min(firsts, default=None)
    hi = ctx.run.last_step
    if lo is not None and hi is not None:
        raw = [(min(max(int(e[0]), lo), hi), e[1], e[2], e[3], e[4]) for e in raw]
    events = [
        Event(
            step=int(step),
            kind=kind,
            title=title,
            detail=detail,
            epoch=ctx.epoch_at(step),
            wall_time=ctx.wall_at(step),
            rule_id=rule,
        )
        for step, kind, title, detail, rule in raw
    ]
    return sorted(events, key=lambda e: e.order)


def _marked_by(ctx: ReportContext, event: str) -> str | None:
    """The first finding whose rule declares that this timeline event marks it
    (``report: {timeline: ...}`` in the rule's YAML)."""
    for f in ctx.diagnosis.findings:
        if f.report.get("timeline") == event:
            return f.rule_id
    return None


def _covered(f: Finding) -> bool:
    """Whether a data-derived event already stands for the finding's onset."""
    return bool(f.report.get("timeline")) and not f.report.get("own_entry")


def _start(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    firsts = [int(s.steps[0]) for s in ctx.run.metrics.values() if len(s)]
    if not firsts:
        return []
    step = min(firsts)

    def where(name: str) -> str:
        # a value first logged later than the run's first log says where it was logged
        series = ctx.run.get(name)
        first = int(series.steps[0]) if series is not None and len(series) else step
        return "" if first == step else f" (first logged at step {first})"

    loss = ctx.number("loss.first")
    detail = "first log"
    if loss is not None:
        detail += f"; train loss {num(loss)}{where('train/loss')}"
    lr = ctx.number("lr.first")
    if lr is not None:
        detail += f", learning rate {setting_value(lr)}{where('train/learning_rate')}"
    return [(step, "start", "Logging starts", detail, None)]


def _warmup(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    has = ctx.feature("lr.has_warmup")
    end = ctx.step("lr.warmup_end_step")
    peak = ctx.number("lr.peak")
    last_lr = ctx.number("lr.last")
    configured = ctx.setting("learning_rate")
    lr_series = ctx.run.get("train/learning_rate")
    warm_steps = ctx.run.meta.warmup_steps
    warm_ratio = ctx.run.meta.warmup_ratio
    cfg = ""
    if warm_steps:
        cfg = f" (warmup_steps={warm_steps})"
    elif warm_ratio:
        cfg = f" ({ctx.warmup_ratio_arg()}={setting_value(warm_ratio)})"
    planned = ctx.planned_steps() or ctx.run.last_step
    rule = _marked_by(ctx, "warmup")
    if has is False and lr_series is not None:
        first = int(lr_series.steps[0])
        return [
            (
                first,
                "warmup",
                "No warmup",
                f"the learning rate starts at its peak {setting_value(peak)}",
                rule,
            )
        ]
    if has is True and end is not None and lr_series is not None:
        lr_end = int(lr_series.steps[-1])
        peak_step = ctx.step("lr.peak_step")
        if (
            end >= lr_end
            and peak_step == lr_end
            and warm_steps
            and planned
            and warm_steps > planned
        ):
            target = f" of {setting_value(configured)}" if isinstance(configured, float) else ""
            return [
                (
                    int(lr_series.steps[0]),
                    "warmup",
                    "Warmup longer than the run",
                    f"warmup_steps={warm_steps} but the run has {planned} steps: the learning "
                    f"rate was still rising at the end ({setting_value(last_lr)}{target})",
                    rule,
                )
            ]
        return [
            (
                end,
                "warmup",
                "Warmup ends",
                f"learning rate reaches its peak {setting_value(peak)}{cfg}",
                rule,
            )
        ]
    warm = ctx.step("run.warmup_end_step")
    if warm and ctx.feature("run.warmup_known") is True:
        return [(warm, "warmup", "Warmup ends", f"configured end of warmup{cfg}", rule)]
    return []


def _changepoints(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    """The change points that matter, from the ``cp.*`` features when the registry has them:
    the largest level jump of the train loss and the start of its final flat stretch."""
    out: list[tuple[int, str, str, str, str | None]] = []
    last = ctx.run.last_step
    first_step = min((int(s.steps[0]) for s in ctx.run.metrics.values() if len(s)), default=0)
    all_steps = changepoint_steps(ctx)
    where = f" ({len(all_steps)} change points in all)" if len(all_steps) > 1 else ""
    jump_step = ctx.step("cp.largest_jump_step")
    jump = ctx.number("cp.largest_jump")
    if (
        jump_step is not None
        and jump is not None
        and jump >= MIN_JUMP
        and _rises_at(ctx, jump_step, MIN_JUMP)
    ):
        kept = ctx.feature("cp.jump_kept")
        tail = "; it never came back down" if kept is True else ""
        out.append(
            (
                jump_step,
                "changepoint",
                "Loss level jumps",
                f"the train-loss level rises {pct(jump)} between segments{tail}{where}",
                _marked_by(ctx, "changepoint"),
            )
        )
    flat = ctx.step("cp.flat_from_step")
    if (
        flat is not None
        and flat > first_step
        and (last is None or flat < last)
        and _flat_after(ctx, flat)
    ):
        out.append(
            (
                flat,
                "changepoint",
                "Loss flattens",
                f"the train loss stays flat from here to the end{where}",
                None,
            )
        )
    return out


def _rises_at(ctx: ReportContext, step: int, min_rise: float) -> bool:
    """Whether the train loss really sits higher after ``step`` than before it: the median of
    the logs after it (up to a tenth of the run) exceeds the median of as many logs before it by
    ``min_rise`` (relative). A single noisy log does not make a level jump."""
    s = ctx.run.get("train/loss")
    if s is None:
        return False
    ok = np.isfinite(s.values)
    st, v = s.steps[ok], s.values[ok]
    i = int(np.searchsorted(st, step))
    k = max(3, v.size // 10)
    before, after = v[max(0, i - k) : i], v[i : i + k]
    if before.size < 2 or after.size < 2:
        return False
    a, b = float(np.median(before)), float(np.median(after))
    return b - a >= min_rise * max(abs(a), 1e-12)


def _flat_after(ctx: ReportContext, step: int, tolerance: float = 0.1) -> bool:
    """Whether the train loss really stays flat from ``step`` to the end: the median of the
    logs just after it and of the last logs differ by at most ``tolerance`` (relative)."""
    s = ctx.run.get("train/loss")
    if s is None:
        return False
    ok = np.isfinite(s.values) & (s.steps >= step)
    v = s.values[ok]
    if v.size < 4:
        return False
    k = max(2, v.size // 10)
    a, b = float(np.median(v[:k])), float(np.median(v[-k:]))
    return abs(a - b) <= tolerance * max(abs(a), 1e-12)


def changepoint_steps(ctx: ReportContext) -> list[int]:
    """Every change point of the train loss (``cp.steps``), empty when not computed."""
    value = ctx.feature("cp.steps")
    if not isinstance(value, str):
        return []
    return sorted({int(x) for x in re.findall(r"\d+", value)})


def clipping_onset(ctx: ReportContext) -> tuple[int, float] | None:
    """(first step from which clipping stayed engaged, share of logs clipped from there).

    ``None`` when clipping was off or engaged on less than :data:`CLIP_SATURATION` of the logs
    after warmup.
    """
    thr, _ = ctx.clip_threshold()
    g = ctx.run.get("train/grad_norm")
    if thr is None or g is None:
        return None
    ok = np.isfinite(g.values)
    steps, values = g.steps[ok], g.values[ok]
    if values.size < 3:
        return None
    warm = ctx.step("run.warmup_end_step") or 0
    after = steps > warm
    if int(after.sum()) >= 3 and float(np.mean(values[after] > thr)) < CLIP_SATURATION:
        return None
    above = (values > thr).astype(np.float64)
    # share of clipped logs from each index to the end
    tail_share = np.cumsum(above[::-1])[::-1] / np.arange(above.size, 0, -1)
    cand = np.flatnonzero((above > 0) & (tail_share >= CLIP_SATURATION))
    cand = cand[cand <= above.size - 3]
    if cand.size == 0:
        return None
    i = int(cand[0])
    return int(steps[i]), float(tail_share[i])


def _clipping(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    thr, how = ctx.clip_threshold()
    rule = _marked_by(ctx, "clipping")
    # only a finding says clipping hurts: grad norms above a threshold of 1.0 on every step
    # are ordinary in LLM fine-tuning, and the timeline must not contradict the diagnosis
    onset = clipping_onset(ctx) if rule is not None else None
    if onset is None:
        return []
    step, share = onset
    for f in ctx.diagnosis.findings:
        if f.report.get("timeline") == "clipping":
            fs = f.onset_step if f.onset_step is not None else f.step_range[0]
            if fs is not None:
                step = int(fs)
    med = ctx.number("grad.median_after_warmup")
    detail = (
        f"grad norm above max_grad_norm={setting_value(thr)} on {pct(share, signed=False)} of "
        "the logs from here to the end"
    )
    if med is not None and thr:
        detail += f" (median {num(med)}, {num(med / thr, 3)}x the threshold)"
    if how != "configured":
        detail += f"; threshold {how}"
    return [(step, "clipping", "Clipping saturated", detail, rule)]


def _nonfinite(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    out: list[tuple[int, str, str, str, str | None]] = []
    rule = _marked_by(ctx, "nonfinite")
    first = ctx.step("nan.first_step")
    gfirst = ctx.step("grad.first_nonfinite_step")
    growth = ctx.number("nan.grad_growth")
    gstep = ctx.step("nan.grad_growth_step")
    if first is not None and growth is not None and growth >= 3 and gstep is not None:
        out.append(
            (
                gstep,
                "grad_growth",
                "Gradient norm climbs",
                f"the grad norm starts rising: {num(growth, 3)}x its earlier median in the "
                f"last logs before the first non-finite value",
                rule,
            )
        )
    if gfirst is not None and (first is None or gfirst < first):
        out.append(
            (
                gfirst,
                "nonfinite",
                "First non-finite grad norm",
                f"{ctx.step('grad.nonfinite_count') or 0} grad-norm logs are NaN/Inf",
                rule,
            )
        )
    if first is not None:
        source = ctx.feature("nan.source")
        what = {
            "hidden": "the logged loss is exactly 0.0 beside a non-finite grad norm: a NaN hidden "
            "by logging_nan_inf_filter",
            "train/loss": "the logged train loss is NaN/Inf",
            "eval/loss": "the eval loss is NaN/Inf",
        }.get(str(source), f"non-finite value in {source}")
        detail = what
        before = ctx.step("nan.finite_before")
        if before is not None:
            detail += f", after {before} finite train-loss logs"
        if ctx.feature("nan.persisted") is True:
            detail += "; it never recovered"
        out.append((first, "nonfinite", "First non-finite loss", detail, rule))
    return out


def _spikes(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    step = ctx.step("spike.step")
    if step is None:
        return []
    rule = _marked_by(ctx, "spike")
    count = ctx.step("spike.count") or 1
    first = ctx.step("spike.first_step")
    out: list[tuple[int, str, str, str, str | None]] = []
    if first is not None and first != step:
        out.append(
            (first, "spike", "First loss spike", f"first of {count} loss spikes after warmup", rule)
        )
    detail = (
        f"train loss {num(ctx.number('spike.value'))}, {num(ctx.number('spike.ratio'), 3)}x its "
        f"local baseline {num(ctx.number('spike.baseline'))}"
    )
    rec = ctx.feature("spike.recovered")
    if rec is True:
        detail += f"; recovered within {ctx.step('spike.recovery_steps')} steps"
    elif rec is False:
        detail += "; never came back to its baseline"
    lo, hi = ctx.step("spike.example_lo"), ctx.step("spike.example_hi")
    if lo is not None and hi is not None:
        detail += f"; training examples {lo}-{hi - 1} of that epoch's order"
    title = "Loss spike" if count == 1 else f"Largest loss spike (of {count})"
    out.append((step, "spike", title, detail, rule))
    return out


def _best_eval(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    step = ctx.step("eval.min_step")
    best = ctx.number("eval.min")
    if step is None or best is None:
        return []
    rule = _marked_by(ctx, "best_eval")
    ev = ctx.run.get("eval/loss")
    later = ev.values[ev.steps > step] if ev is not None else np.zeros(0)
    bad = int((~np.isfinite(later)).sum())
    if later.size == 0:
        detail = f"eval loss {num(best)} at the last evaluation (still the best)"
    elif bad:
        detail = f"eval loss {num(best)}; {bad} of the {later.size} later evaluations are NaN/Inf"
    else:
        rise = ctx.number("eval.rise_after_min")
        detail = (
            f"eval loss {num(best)}; {later.size} evaluations follow, the last at "
            f"{num(ctx.number('eval.last'))} ({pct(rise)})"
        )
    detail += "; " + checkpoint_note(ctx, step)
    return [(step, "best_eval", "Best eval loss", detail, rule)]


def checkpoint_note(ctx: ReportContext, step: int) -> str:
    """Which saved checkpoint holds the weights of ``step`` (or the nearest one)."""
    meta = ctx.run.meta
    if meta.best_model_checkpoint:
        return f"best checkpoint: {md_code(PurePath(meta.best_model_checkpoint).name)}"
    strategy = str(ctx.setting("save_strategy") or "").lower()
    if strategy in ("no", "intervalstrategy.no", "savestrategy.no"):
        return "no checkpoints were saved (save_strategy=no)"
    save = meta.save_steps
    last = ctx.run.last_step
    if strategy in ("", "steps", "intervalstrategy.steps", "savestrategy.steps") and save and last:
        every = int(save) if save >= 1 else max(1, round(save * (ctx.planned_steps() or last)))
        saved = list(range(every, last + 1, every))
        if step in saved:
            return f"saved as `checkpoint-{step}`"
        if saved:
            near = min(saved, key=lambda s: (abs(s - step), s))
            ev = ctx.run.get("eval/loss")
            at = ""
            if ev is not None:
                idx = np.flatnonzero(ev.steps == near)
                if idx.size:
                    at = f", eval loss {num(float(ev.values[idx[0]]))}"
            return f"not saved (save_steps={every}): nearest is `checkpoint-{near}`{at}"
        return f"not saved: save_steps={every} is longer than the run"
    return "checkpoint unknown"


def _findings(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    out: list[tuple[int, str, str, str, str | None]] = []
    last = ctx.run.last_step
    for f in ctx.diagnosis.findings:
        if _covered(f) or f.severity.value == "info":
            continue
        step = f.onset_step if f.onset_step is not None else f.step_range[0]
        if step is None or (last is not None and step >= last):
            continue
        out.append((int(step), "finding", f.title, f"{f.severity.value} `{f.rule_id}`", f.rule_id))
    return out


def _end(ctx: ReportContext) -> list[tuple[int, str, str, str, str | None]]:
    last = ctx.run.last_step
    if last is None:
        return []
    planned = ctx.planned_steps()
    of = f" of {planned} planned" if planned else ""
    parts = []
    loss = ctx.number("loss.last")
    if loss is not None:
        parts.append(f"last train loss {num(loss)}")
    ev = ctx.number("eval.last")
    if ev is not None:
        parts.append(f"last eval loss {num(ev)}")
    nums = ("; " + ", ".join(parts)) if parts else ""
    if ctx.run.meta.finished is True:
        return [
            (last, "end", "Training finished", f"step {last}{of}, final summary logged{nums}", None)
        ]
    if ctx.run.meta.finished is False:
        return [
            (
                last,
                "end",
                "Logs end (no final summary)",
                f"step {last}{of}: the run crashed, was killed or is still running{nums}",
                None,
            )
        ]
    return [(last, "end", "Logs end", f"step {last}{of}{nums}", None)]
