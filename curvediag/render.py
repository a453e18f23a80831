"""Plain-text and markdown renderings of a :class:`~curvediag.model.Diagnosis`."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from curvediag.escape import cell, terminal

if TYPE_CHECKING:
    from curvediag.model import Diagnosis, Finding, Run

__all__ = ["diagnosis_markdown", "diagnosis_text"]

_WIDTH = 100


def step_span(f: Finding) -> str:
    """Where a finding applies, in words: ``steps 50-300``, ``step 10``."""
    a, b = f.step_range
    if a is None and b is None:
        return f"step {f.onset_step}" if f.onset_step is not None else ""
    if a == b or b is None:
        return f"step {a}"
    if a is None:
        return f"until step {b}"
    return f"steps {a}-{b}"


def counted(n: int, word: str) -> str:
    """``1 step``, ``3 steps``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def steps_done(run: Run) -> str | None:
    """``412 of 1000 steps``, ``1 step``; None when the run logged no step."""
    last = run.last_step
    if last is None:
        return None
    if run.meta.max_steps:
        return f"{last} of {run.meta.max_steps} steps"
    return counted(last, "step")


def _run_line(d: Diagnosis) -> str:
    run = d.run
    parts = []
    if (done := steps_done(run)) is not None:
        parts.append(done)
    loss = run.get("train/loss")
    if loss is not None:
        parts.append(counted(len(loss), "train-loss log"))
    ev = run.get("eval/loss")
    if ev is not None:
        parts.append(counted(len(ev), "evaluation"))
    if run.meta.finished is True:
        parts.append("finished")
    elif run.meta.finished is False:
        parts.append("did not finish")
    return ", ".join(parts) or "no metrics"


def _wrap(text: str, indent: str) -> str:
    lead = len(indent) - len(indent.lstrip())
    return textwrap.fill(
        text, width=_WIDTH, initial_indent=indent, subsequent_indent=" " * (lead + 4)
    )


def diagnosis_text(d: Diagnosis) -> str:
    """A terminal-friendly report: verdict, findings with evidence and fixes, skipped rules."""
    run = d.run
    counts = {
        s: sum(1 for f in d.findings if f.severity.value == s)
        for s in ("critical", "warning", "info")
    }
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no findings"
    lines = [
        f"{cell(run.name)}  [{cell(run.format)}]  {cell(run.source)}",
        f"  {_run_line(d)}",
        f"  verdict: {d.verdict.upper()} ({summary})",
    ]
    if d.verdict == "inconclusive":
        lines.append(_wrap(f"inconclusive: {d.inconclusive_reason}", "  "))
    lines.append("")
    for f in d.findings:
        span = step_span(f)
        head = f"{f.severity.value.upper()}  {f.rule_id}: {f.title}"
        lines.append(head)
        lines.append(f"  confidence {f.confidence:.2f}" + (f", {span}" if span else ""))
        lines.append(_wrap(f.evidence, "  evidence: "))
        lines.append(_wrap(f.why, "  why: "))
        lines.append("  next, one at a time:")
        for i, fix in enumerate(f.fixes, 1):
            lines.append(_wrap(fix, f"    {i}. "))
        for rel in f.related:
            lines.append(_wrap(rel, "  also seen: "))
        lines.append("")
    if not d.findings and d.verdict != "inconclusive":
        lines += ["No rule fired.", ""]
    if d.skipped:
        lines.append(f"skipped {len(d.skipped)} of {d.rules_evaluated} rules:")
        for s in d.skipped:
            lines.append(_wrap(f"{s.rule_id}: {s.reason}", "  - "))
    for w in run.warnings:
        lines.append(_wrap(w, "note: "))
    # run names, paths and metric names may hold ANSI escapes or bytes that are not UTF-8
    return terminal("\n".join(lines).rstrip() + "\n")


def diagnosis_markdown(d: Diagnosis) -> str:
    """The markdown postmortem, text only (see :mod:`curvediag.report`)."""
    from curvediag.report.markdown import postmortem_markdown

    return postmortem_markdown(d)
