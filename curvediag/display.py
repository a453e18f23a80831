"""Notebook and pandas views of runs, findings and diagnoses.

Short ``repr`` strings, ``_repr_html_`` / ``_repr_markdown_`` for Jupyter (a verdict badge,
findings with their evidence and fixes, a small inline SVG of the loss) and the
``to_frame`` tables. Every string that comes from a run (names, paths, metric names, evidence
that quotes them) is escaped with :func:`html.escape` before it reaches HTML. pandas is
imported only by the ``*_frame`` functions.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Literal

import numpy as np

from curvediag.render import counted, steps_done
from curvediag.render import step_span as _span

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from curvediag.model import Diagnosis, Finding, Run, Series

__all__ = [
    "FINDING_COLUMNS",
    "diagnosis_frame",
    "diagnosis_html",
    "diagnosis_markdown_short",
    "diagnosis_repr",
    "finding_html",
    "finding_markdown",
    "finding_repr",
    "run_frame",
    "run_html",
    "run_markdown",
    "run_repr",
    "series_repr",
    "sparkline_svg",
]

#: Columns of :meth:`Diagnosis.to_frame`, in order.
FINDING_COLUMNS = (
    "run",
    "rule_id",
    "severity",
    "category",
    "title",
    "confidence",
    "onset_step",
    "start_step",
    "end_step",
    "evidence",
    "why",
    "fixes",
    "related",
)

_BADGE = {
    "critical": "#c62828",
    "warning": "#ef6c00",
    "inconclusive": "#616161",
    "healthy": "#2e7d32",
    "info": "#1565c0",
}
_REPR_MAX = 60


def _short(text: str, n: int = _REPR_MAX) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


# -- repr -------------------------------------------------------------------------------------


def series_repr(s: Series) -> str:
    n = len(s)
    if not n:
        return f"Series({s.name!r}, empty)"
    finite = s.values[np.isfinite(s.values)]
    bad = n - finite.size
    extra = f", {bad} non-finite" if bad else ""
    return (
        f"Series({s.name!r}, {n} points, steps {s.steps[0]}-{s.steps[-1]}, "
        f"last={s.values[-1]:.4g}{extra})"
    )


def run_repr(run: Run) -> str:
    names = list(run.metrics)
    shown = ", ".join(names[:6]) + (f", ... (+{len(names) - 6})" if len(names) > 6 else "")
    return (
        f"Run({_short(run.name)!r}, format={run.format!r}, last_step={run.last_step}, "
        f"metrics=[{shown}])"
    )


def finding_repr(f: Finding) -> str:
    onset = f", onset_step={f.onset_step}" if f.onset_step is not None else ""
    return f"Finding({f.rule_id!r}, {f.severity.value}, confidence={f.confidence:.2f}{onset})"


def diagnosis_repr(d: Diagnosis) -> str:
    ids = ", ".join(d.finding_ids[:5]) + (" ..." if len(d.findings) > 5 else "")
    return (
        f"Diagnosis({_short(d.run.name)!r}, verdict={d.verdict!r}, findings=[{ids}], "
        f"skipped={len(d.skipped)})"
    )


# -- pandas -----------------------------------------------------------------------------------


def run_frame(run: Run, *, kind: Literal["wide", "long"] = "wide") -> pd.DataFrame:
    """The run's metrics as a DataFrame.

    ``wide``: one row per step (sorted), a ``step`` column, one column per metric (NaN where
    a metric was not logged at that step) and ``wall_time`` (seconds since the epoch, the
    earliest logged at that step; NaN when the run recorded none). ``long``: one row per
    logged point with ``step``, ``metric``, ``value``, ``wall_time``.
    """
    import pandas as pd

    if kind not in ("wide", "long"):
        raise ValueError(f"kind must be 'wide' or 'long', not {kind!r}")
    parts = []
    for name, s in run.metrics.items():
        n = len(s)
        wall = s.wall_time if s.wall_time is not None else np.full(n, np.nan)
        parts.append(
            pd.DataFrame(
                {
                    "step": s.steps,
                    "metric": np.full(n, name, dtype=object),
                    "value": s.values,
                    "wall_time": wall,
                }
            )
        )
    if parts:
        long = pd.concat(parts, ignore_index=True)
    else:
        long = pd.DataFrame(
            {
                "step": np.empty(0, np.int64),
                "metric": np.empty(0, object),
                "value": np.empty(0, np.float64),
                "wall_time": np.empty(0, np.float64),
            }
        )
    if kind == "long":
        return long
    wide = long.pivot(index="step", columns="metric", values="value")
    wide = wide.reindex(columns=list(run.metrics))
    wide["wall_time"] = long.groupby("step")["wall_time"].min()
    wide.columns.name = None
    wide = wide.reset_index()
    wide["step"] = wide["step"].astype(np.int64)
    return wide


def diagnosis_frame(d: Diagnosis) -> pd.DataFrame:
    """One row per finding (most severe first), columns :data:`FINDING_COLUMNS`."""
    import pandas as pd

    rows = [
        {
            "run": d.run.name,
            "rule_id": f.rule_id,
            "severity": f.severity.value,
            "category": f.category,
            "title": f.title,
            "confidence": f.confidence,
            "onset_step": f.onset_step,
            "start_step": f.step_range[0],
            "end_step": f.step_range[1],
            "evidence": f.evidence,
            "why": f.why,
            "fixes": list(f.fixes),
            "related": list(f.related),
        }
        for f in d.findings
    ]
    frame = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    for col in ("onset_step", "start_step", "end_step"):
        frame[col] = frame[col].astype("Int64")
    frame["confidence"] = frame["confidence"].astype(float)
    return frame


# -- inline plot ------------------------------------------------------------------------------


def _finite_series(
    run: Run, names: tuple[str, ...]
) -> list[tuple[str, npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    """(name, steps, values) of the finite points of each of ``names`` with two or more."""
    series = []
    for name in names:
        s = run.get(name)
        if s is None:
            continue
        ok = np.isfinite(s.values)
        if int(ok.sum()) >= 2:
            series.append((name, s.steps[ok].astype(float), s.values[ok]))
    return series


def sparkline_svg(
    run: Run,
    names: tuple[str, ...] = ("train/loss", "eval/loss"),
    *,
    marks: tuple[int, ...] = (),
    width: int = 320,
    height: int = 80,
) -> str:
    """A small inline SVG of up to two series (no matplotlib), with vertical marks at
    ``marks`` steps. Empty string when none of ``names`` has two finite points."""
    colours = ("#1f77b4", "#d62728")
    series = _finite_series(run, names)
    if not series:
        return ""
    x0 = min(float(x[0]) for _, x, _ in series)
    x1 = max(float(x[-1]) for _, x, _ in series)
    y0 = min(float(np.min(y)) for _, _, y in series)
    y1 = max(float(np.max(y)) for _, _, y in series)
    dx = (x1 - x0) or 1.0
    dy = (y1 - y0) or 1.0
    pad = 4.0

    def px(x: float) -> float:
        return pad + (x - x0) / dx * (width - 2 * pad)

    def py(y: float) -> float:
        return height - pad - (y - y0) / dy * (height - 2 * pad)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(", ".join(names))}">'
    ]
    for m in marks:
        if x0 <= m <= x1:
            x = px(float(m))
            out.append(
                f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height}" '
                'stroke="#888" stroke-dasharray="3,3"/>'
            )
    for (name, xs, ys), colour in zip(series, colours, strict=False):
        step = max(1, xs.size // 400)
        pts = " ".join(
            f"{px(float(a)):.1f},{py(float(b)):.1f}"
            for a, b in zip(xs[::step], ys[::step], strict=True)
        )
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{pts}">'
            f"<title>{_e(name)}</title></polyline>"
        )
    out.append("</svg>")
    legend = " ".join(
        f'<span style="color:{c}">&#9644; {_e(n)}</span>'
        for (n, _, _), c in zip(series, colours, strict=False)
    )
    return "".join(out) + f'<div style="font-size:85%">{legend}</div>'


# -- HTML -------------------------------------------------------------------------------------


def _badge(label: str) -> str:
    colour = _BADGE.get(label, "#616161")
    return (
        f'<span style="background:{colour};color:#fff;border-radius:3px;padding:1px 6px;'
        f'font-weight:bold;font-size:85%">{_e(label.upper())}</span>'
    )


def finding_html(f: Finding) -> str:
    span = _span(f)
    where = f", {_e(span)}" if span else ""
    fixes = "".join(f"<li>{_e(x)}</li>" for x in f.fixes)
    related = "".join(f"<li>{_e(x)}</li>" for x in f.related)
    return (
        '<div class="curvediag-finding" style="margin:0.4em 0">'
        f"<div>{_badge(f.severity.value)} <b>{_e(f.rule_id)}</b>: {_e(f.title)} "
        f'<span style="color:#666">(confidence {f.confidence:.2f}{where})</span></div>'
        f"<div><i>evidence:</i> {_e(f.evidence)}</div>"
        f"<div><i>why:</i> {_e(f.why)}</div>"
        + (f"<div><i>next, one at a time:</i><ol>{fixes}</ol></div>" if fixes else "")
        + (f"<div><i>also seen:</i><ul>{related}</ul></div>" if related else "")
        + "</div>"
    )


def _run_facts(run: Run) -> str:
    parts = []
    if (done := steps_done(run)) is not None:
        parts.append(done)
    parts.append(counted(len(run.metrics), "metric"))
    if run.meta.finished is True:
        parts.append("finished")
    elif run.meta.finished is False:
        parts.append("did not finish")
    return ", ".join(parts)


def run_html(run: Run) -> str:
    rows = []
    for name, s in run.metrics.items():
        vals = s.values[np.isfinite(s.values)]
        first = f"{vals[0]:.4g}" if vals.size else "-"
        last = f"{vals[-1]:.4g}" if vals.size else "-"
        lo = f"{vals.min():.4g}" if vals.size else "-"
        hi = f"{vals.max():.4g}" if vals.size else "-"
        steps = f"{s.steps[0]}-{s.steps[-1]}" if len(s) else "-"
        rows.append(
            f"<tr><td>{_e(name)}</td><td>{len(s)}</td><td>{steps}</td><td>{first}</td>"
            f"<td>{last}</td><td>{lo}</td><td>{hi}</td></tr>"
        )
    table = (
        "<table><thead><tr><th>metric</th><th>points</th><th>steps</th><th>first</th>"
        "<th>last</th><th>min</th><th>max</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )
    return (
        '<div class="curvediag-run">'
        f"<div><b>{_e(run.name)}</b> [{_e(run.format)}] "
        f'<code style="font-size:85%">{_e(run.source)}</code></div>'
        f"<div>{_e(_run_facts(run))}</div>"
        f"{sparkline_svg(run)}{table}</div>"
    )


def diagnosis_html(d: Diagnosis) -> str:
    run = d.run
    marks = tuple(
        f.onset_step for f in d.findings if f.onset_step is not None and f.severity.rank > 0
    )
    head = (
        f"<div>{_badge(d.verdict)} <b>{_e(run.name)}</b> [{_e(run.format)}] "
        f'<code style="font-size:85%">{_e(run.source)}</code></div>'
        f"<div>{_e(_run_facts(run))}</div>"
    )
    body = [head]
    if d.verdict == "inconclusive" and d.inconclusive_reason:
        body.append(f"<div><i>inconclusive:</i> {_e(d.inconclusive_reason)}</div>")
    body.append(sparkline_svg(run, marks=marks[:3]))
    body.extend(finding_html(f) for f in d.findings)
    if not d.findings and d.verdict != "inconclusive":
        body.append("<div>No rule fired.</div>")
    if d.skipped:
        items = "".join(f"<li><b>{_e(s.rule_id)}</b>: {_e(s.reason)}</li>" for s in d.skipped)
        body.append(
            f"<details><summary>skipped {len(d.skipped)} of {d.rules_evaluated} rules"
            f"</summary><ul>{items}</ul></details>"
        )
    if run.warnings:
        items = "".join(f"<li>{_e(w)}</li>" for w in run.warnings)
        body.append(f"<details><summary>{len(run.warnings)} notes</summary><ul>{items}</ul>")
        body.append("</details>")
    return '<div class="curvediag-diagnosis">' + "".join(body) + "</div>"


# -- markdown ---------------------------------------------------------------------------------


def _md(text: object) -> str:
    """Inline markdown: raw HTML becomes entities, markup characters are backslash-escaped."""
    out = html.escape(str(text), quote=False)
    for ch in ("\\", "`", "*", "_", "[", "]", "#", "|"):
        out = out.replace(ch, "\\" + ch)
    return out.replace("\n", " ")


def finding_markdown(f: Finding) -> str:
    span = _span(f)
    lines = [
        f"**{f.severity.value.upper()}** `{f.rule_id}`: {_md(f.title)} "
        f"(confidence {f.confidence:.2f}{', ' + span if span else ''})",
        "",
        f"- evidence: {_md(f.evidence)}",
        f"- why: {_md(f.why)}",
    ]
    if f.fixes:
        lines.append("- next, one at a time:")
        lines.extend(f"  {i}. {_md(x)}" for i, x in enumerate(f.fixes, 1))
    return "\n".join(lines)


def diagnosis_markdown_short(d: Diagnosis) -> str:
    """A compact markdown summary for notebooks (``to_markdown`` is the full postmortem)."""
    run = d.run
    lines = [
        f"**{d.verdict.upper()}** {_md(run.name)} \\[{_md(run.format)}\\]: {_md(_run_facts(run))}",
        "",
    ]
    if d.verdict == "inconclusive" and d.inconclusive_reason:
        lines += [f"inconclusive: {_md(d.inconclusive_reason)}", ""]
    for f in d.findings:
        lines += [finding_markdown(f), ""]
    if not d.findings and d.verdict != "inconclusive":
        lines += ["No rule fired.", ""]
    if d.skipped:
        lines.append(f"skipped {len(d.skipped)} of {d.rules_evaluated} rules")
    return "\n".join(lines).rstrip() + "\n"


def run_markdown(run: Run) -> str:
    lines = [
        f"**{_md(run.name)}** \\[{_md(run.format)}\\]: {_md(_run_facts(run))}",
        "",
        "| metric | points | last |",
        "|---|---:|---:|",
    ]
    for name, s in run.metrics.items():
        last = float(s.values[-1]) if len(s) else math.nan
        lines.append(f"| {_md(name)} | {len(s)} | {last:.4g} |")
    return "\n".join(lines) + "\n"
