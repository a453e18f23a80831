"""The postmortem as markdown: header, TL;DR, timeline, plots, findings, next run,
hyperparameters, skipped rules, reproduction. Same diagnosis in, same bytes out."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from curvediag import escape
from curvediag.escape import md_code, md_text
from curvediag.report._fmt import elapsed, md_cell, num, setting_value, utc

if TYPE_CHECKING:
    from curvediag.model import Diagnosis, Finding
    from curvediag.report.context import ReportContext
    from curvediag.report.next_run import Change
    from curvediag.report.timeline import Event

__all__ = ["KEY_SETTINGS", "SECTIONS", "postmortem_markdown"]

#: Section headings, in order (``Plots`` only when images are given).
SECTIONS = (
    "## TL;DR",
    "## Timeline",
    "## Plots",
    "## Findings",
    "## Next run",
    "## Hyperparameters",
    "## Skipped rules",
    "## Reproduce",
)

#: Settings shown in the hyperparameters table when the run recorded them.
#: Settings shown only as the run's config wrote them (never derived from another setting).
_CONFIG_ONLY = frozenset({"warmup_ratio"})

KEY_SETTINGS = (
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "warmup_ratio",
    "max_steps",
    "num_train_epochs",
    "per_device_train_batch_size",
    "train_batch_size",
    "gradient_accumulation_steps",
    "world_size",
    "max_grad_norm",
    "weight_decay",
    "optim",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "fp16",
    "bf16",
    "seed",
    "logging_steps",
    "eval_strategy",
    "eval_steps",
    "save_strategy",
    "save_steps",
    "load_best_model_at_end",
    "metric_for_best_model",
    "logging_nan_inf_filter",
)

_FORMATS = {
    "hf-trainer": "Hugging Face Trainer state",
    "tensorboard": "TensorBoard events",
    "wandb-run": "W&B run folder",
    "wandb-csv": "W&B CSV export",
    "wandb-history": "W&B history dump",
    "lightning": "Lightning CSVLogger",
    "csv": "CSV",
    "jsonl": "JSON Lines",
}

_LOG_FILES = (
    "trainer_state.json",
    "events.out.tfevents.*",
    "*.wandb",
    "wandb-history.jsonl",
    "metrics.csv",
    "*.csv",
    "*.jsonl",
    "*.parquet",
)


def postmortem_markdown(
    diagnosis: Diagnosis | ReportContext,
    *,
    images: Mapping[str, str] | None = None,
    command: str | None = None,
) -> str:
    """The postmortem report.

    Args:
        diagnosis: A diagnosis (or its :class:`ReportContext`).
        images: Plot name -> relative image path; ``None`` for text only (no Plots section).
        command: The command line that reproduces the report (default: the plain
            ``curvediag report SOURCE -o DIR`` form).
    """
    from curvediag.report.context import ReportContext
    from curvediag.report.next_run import next_run_changes
    from curvediag.report.timeline import build_timeline

    ctx = diagnosis if isinstance(diagnosis, ReportContext) else ReportContext.of(diagnosis)
    events = build_timeline(ctx)
    changes = next_run_changes(ctx)
    out: list[str] = []
    out += _header(ctx)
    out += _tldr(ctx, changes)
    out += _timeline(ctx, events)
    if images:
        out += _plots(ctx, images)
    out += _findings(ctx)
    out += _next_run(ctx, changes)
    out += _hyperparameters(ctx)
    out += _skipped(ctx)
    out += _reproduce(ctx, command, with_images=bool(images))
    return "\n".join(out).rstrip() + "\n"


# -- sections -----------------------------------------------------------------------------------


def _counts(d: Diagnosis) -> str:
    counts = {
        s: sum(1 for f in d.findings if f.severity.value == s)
        for s in ("critical", "warning", "info")
    }
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no findings"


def _onset(f: Finding) -> int | None:
    return f.onset_step if f.onset_step is not None else f.step_range[0]


def _verdict_line(ctx: ReportContext) -> str:
    d = ctx.diagnosis
    line = f"**Verdict: {d.verdict.upper()}** ({_counts(d)})"
    top = [f for f in d.findings if f.severity.value != "info"]
    if top:
        f = top[0]
        at = _onset(f)
        line += f": {f.title}" + (f", from step {at}" if at is not None else "") + "."
    elif d.verdict == "inconclusive":
        line += f": {d.inconclusive_reason}."
    elif d.findings:
        line += f": {d.findings[0].title}."
    else:
        line += "."
    return line


def _progress(ctx: ReportContext) -> str:
    run = ctx.run
    last = run.last_step
    planned = ctx.planned_steps()
    parts = []
    if last is not None:
        parts.append(
            f"{last} of {planned} steps ({last / planned:.0%})" if planned else f"{last} steps"
        )
    ep = run.meta.epoch
    ep_series = run.get("train/epoch")
    if ep_series is not None and len(ep_series):
        ep = float(ep_series.values[-1])
    planned_ep = run.meta.num_train_epochs
    if ep is not None:
        parts.append(
            f"epoch {num(ep, 3)} of {num(planned_ep, 3)}" if planned_ep else f"epoch {num(ep, 3)}"
        )
    if run.meta.finished is True:
        parts.append("finished")
    elif run.meta.finished is False:
        parts.append("did not finish")
    if run.meta.resumed:
        parts.append("resumed at step " + ", ".join(str(s) for s in run.meta.resumed_at_steps))
    return ", ".join(parts) or "unknown"


def _wall(ctx: ReportContext) -> str | None:
    runtime = ctx.run.meta.summary.get("train_runtime")
    start, end = ctx.wall_start, ctx.wall_end
    parts = []
    if isinstance(runtime, (int, float)) and not isinstance(runtime, bool):
        parts.append(f"{elapsed(float(runtime))} (train_runtime)")
    if start is not None and end is not None:
        parts.append(f"logs from {utc(start)} to {utc(end)} ({elapsed(end - start)})")
    return "; ".join(parts) or None


def _source_files(source: str) -> list[str]:
    p = Path(source)
    if p.is_file():
        return [p.name]
    if not p.is_dir():
        return []
    found: set[str] = set()
    for pattern in _LOG_FILES:
        for f in p.rglob(pattern):
            rel = f.relative_to(p)
            if f.is_file() and not any(part.startswith("checkpoint-") for part in rel.parts):
                found.add(rel.as_posix())
    return sorted(found)


def _header(ctx: ReportContext) -> list[str]:
    run = ctx.run
    d = ctx.diagnosis
    formats = " + ".join(_FORMATS.get(f, f) for f in run.format.split("+"))
    files = _source_files(run.source)
    shown = ", ".join(md_code(f) for f in files[:6])
    if len(files) > 6:
        shown += f" and {len(files) - 6} more"
    logged = [
        f"{len(s)} {label}"
        for name, label in (
            ("train/loss", "train-loss logs"),
            ("eval/loss", "evaluations"),
            ("train/grad_norm", "grad norms"),
            ("train/learning_rate", "learning rates"),
        )
        if (s := run.get(name)) is not None
    ]
    rows = [
        ("Run", md_code(run.name)),
        ("Source", md_code(run.source)),
        ("Read as", formats),
    ]
    if files:
        rows.append(("Files", shown))
    rows += [
        ("Progress", _progress(ctx)),
        ("Logged", ", ".join(logged) + f"; {len(run.metrics)} metrics in all"),
    ]
    wall = _wall(ctx)
    if wall:
        rows.append(("Wall time", wall))
    rows.append(("Rules", f"{d.rules_evaluated} evaluated, {len(d.skipped)} skipped"))
    title = f"# curvediag postmortem: {md_text(run.name)}"
    out = [title, "", _verdict_line(ctx), "", "| | |", "|---|---|"]
    out += [f"| {k} | {md_cell(v, 300)} |" for k, v in rows]
    out.append("")
    return out


def _first_sentence(text: str) -> str:
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z])", text)
    return text[: m.start()] if m else text


def _tldr(ctx: ReportContext, changes: Sequence[Change]) -> list[str]:
    d = ctx.diagnosis
    run = ctx.run
    last = run.last_step
    sentences = []
    problems = [f for f in d.findings if f.severity.value != "info"]
    steps = f"{last} steps" if last is not None else "its logs"
    if not problems and d.verdict == "inconclusive":
        sentences.append(f"{md_code(run.name)} cannot be judged: {d.inconclusive_reason}.")
        sentences.append("Log the loss more often (logging_steps) and diagnose again.")
    elif not problems:
        head, tail = ctx.number("loss.first"), ctx.number("loss.tail")
        n = ctx.number("loss.n")
        s = f"{md_code(run.name)} trained cleanly over {steps}"
        if head is not None and tail is not None and head > 0 and n is not None:
            change = (tail - head) / head
            k = max(min(3, int(n)), int(n) // 10)  # loss.tail: the median of the last logs
            s += (
                f": the train loss went from {num(head)} (first log) to {num(tail)} "
                f"(median of the last {k} logs) ({change:+.0%})"
            )
        best = ctx.number("eval.min")
        if best is not None:
            s += f", and the best eval loss was {num(best)} at step {ctx.step('eval.min_step')}"
        sentences.append(s + ".")
        if changes:  # an info finding (still improving ...) proposes something all the same
            sentences.append(f"No rule found a problem; to do better, try: {changes[0].change}.")
        else:
            sentences.append("No rule found a problem; nothing needs to change.")
    else:
        top = problems[0]
        at = _onset(top)
        problem = top.title[0].lower() + top.title[1:]
        s = f"{md_code(run.name)} ran {steps}; the main problem is: {problem}"
        s += f" (from step {at})." if at is not None else "."
        if len(problems) > 1:
            others = ", ".join(f"`{f.rule_id}`" for f in problems[1:])
            s = s[:-1] + f"; also {others}."
        sentences.append(s)
        sentences.append(_first_sentence(top.evidence).rstrip(".") + ".")
        if changes:
            sentences.append(f"First change to try: {changes[0].change}.")
    return ["## TL;DR", "", " ".join(sentences), ""]


def _timeline(ctx: ReportContext, events: Sequence[Event]) -> list[str]:
    has_epoch = any(e.epoch is not None for e in events)
    has_wall = any(e.wall_time is not None for e in events)
    head = (
        ["step"]
        + (["epoch"] if has_epoch else [])
        + (["time (UTC)", "elapsed"] if has_wall else [])
    )
    head += ["event", "details"]
    out = ["## Timeline", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    start = ctx.wall_start
    for e in events:
        row = [str(e.step)]
        if has_epoch:
            row.append(num(e.epoch, 3) if e.epoch is not None else "")
        if has_wall:
            if e.wall_time is not None and start is not None:
                row += [utc(e.wall_time)[11:19], elapsed(e.wall_time - start)]
            else:
                row += ["", ""]
        title = f"**{e.title}**"
        row += [title, md_cell(e.detail, 400)]
        out.append("| " + " | ".join(row) + " |")
    if not events:
        out.append("| " + " | ".join([""] * len(head)) + " |")
    out.append("")
    if has_wall and start is not None:
        out += [f"Times are UTC on {utc(start)[:10]}; elapsed is since the first log.", ""]
    return out


def _plots(ctx: ReportContext, images: Mapping[str, str]) -> list[str]:
    from curvediag.report.plots import plot_captions

    captions = plot_captions(ctx)
    out = ["## Plots", ""]
    titles = {
        "return": "Episode return",
        "loss": "Loss",
        "learning_rate": "Learning rate",
        "grad_norm": "Gradient norm",
        "throughput": "Throughput",
        "memory": "Memory",
    }
    for name, path in images.items():
        title = titles.get(name, name)
        out += [f"![{title}]({path})", "", f"*{captions.get(name, title)}*", ""]
    return out


def _findings(ctx: ReportContext) -> list[str]:
    d = ctx.diagnosis
    out = ["## Findings", ""]
    if not d.findings:
        out += ["No rule fired.", ""]
    for f in d.findings:
        a, b = f.step_range
        span = ""
        if a is not None and b is not None:
            span = f", step {a}" if a == b else f", steps {a}-{b}"
        elif f.onset_step is not None:
            span = f", step {f.onset_step}"
        out += [
            f"### {f.severity.value.upper()}: {f.title} (`{f.rule_id}`)",
            "",
            f"*Severity {f.severity.value}, confidence {f.confidence:.2f}{span}, {f.category}.*",
            "",
            f"**Evidence.** {f.evidence}",
            "",
            f"**Why it matters.** {f.why}",
            "",
            "**Fixes, one at a time:**",
            "",
        ]
        out += [f"{i}. {fix}" for i, fix in enumerate(f.fixes, 1)]
        if f.related:
            out += ["", "**Also seen (same cause):**", ""]
            out += [f"- {r}" for r in f.related]
        if f.values:
            out += ["", "<details><summary>Numbers behind this finding</summary>", ""]
            out += ["| value | |", "|---|---|"]
            for k in sorted(f.values):
                v = f.values[k]
                shown = num(v) if isinstance(v, float) else setting_value(v)
                out.append(f"| `{k}` | {escape.md_cell(shown)} |")
            out += ["", "</details>"]
        out.append("")
    return out


def _next_run(ctx: ReportContext, changes: Sequence[Change]) -> list[str]:
    out = ["## Next run", ""]
    if not changes:
        lr = ctx.number("lr.peak")
        tip = ""
        if lr is not None:
            tip = (
                " To improve further, change one thing at a time, e.g. a learning-rate sweep "
                f"around the current peak ({setting_value(lr)})."
            )
        out += ["Nothing to change: no finding calls for it." + tip, ""]
        return out
    out += [
        "Change ONE thing per run, in this order (most likely cause first), and compare with "
        "this run before trying the next:",
        "",
    ]
    for i, c in enumerate(changes, 1):
        out.append(f"{i}. {c.change}: {c.why} (`{c.rule_id}`).")
    out.append("")
    return out


def _hyperparameters(ctx: ReportContext) -> list[str]:
    meta = ctx.run.meta
    hp = meta.hyperparameters
    out = ["## Hyperparameters", ""]
    rows = []
    for key in KEY_SETTINGS:
        # warmup_ratio is shown only when the run's own config wrote it (transformers 4.x): a
        # 5.x run's ratio is its warmup_steps below 1, and 5.x has no warmup_ratio argument
        v = (
            hp.get(key)
            if key in _CONFIG_ONLY
            else (hp.get(key) if hp.get(key) is not None else ctx.setting(key))
        )
        if v is None:
            continue
        rows.append(f"| `{key}` | {escape.md_cell(setting_value(v))} |")
    if rows:
        out += ["| setting | value |", "|---|---|", *rows, ""]
    else:
        out += ["The logs recorded no training settings.", ""]
    if hp:
        out += [
            f"<details><summary>All {len(hp)} recorded hyperparameters</summary>",
            "",
            "| name | value |",
            "|---|---|",
        ]
        out += [
            f"| {md_cell(md_code(k))} | {escape.md_cell(setting_value(hp[k]))} |"
            for k in sorted(hp)
        ]
        out += ["", "</details>", ""]
    return out


def _skipped(ctx: ReportContext) -> list[str]:
    d = ctx.diagnosis
    out = ["## Skipped rules", ""]
    if not d.skipped:
        out += [f"None: all {d.rules_evaluated} rules could be evaluated.", ""]
    else:
        out += ["| rule | why it was skipped |", "|---|---|"]
        out += [f"| `{s.rule_id}` | {escape.md_cell(s.reason, 300)} |" for s in d.skipped]
        out.append("")
    if ctx.run.warnings:
        out += ["Notes from reading the logs:", ""]
        out += [f"- {md_text(w)}" for w in ctx.run.warnings]
        out.append("")
    return out


def _reproduce(ctx: ReportContext, command: str | None, *, with_images: bool) -> list[str]:
    from curvediag._version import __version__

    cmd = command or f"curvediag report {shlex.quote(ctx.run.source)} -o postmortem"
    if command is None and not with_images:
        cmd += " --no-plots"
    cmd = escape.cell(cmd)  # one line: a newline in a path cannot end the code block
    fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", cmd)), default=0))
    return [
        "## Reproduce",
        "",
        f"{fence}bash",
        cmd,
        fence,
        "",
        f"Written by curvediag {__version__} from the logs alone; the same logs and options give "
        "the same report.",
        "",
    ]
