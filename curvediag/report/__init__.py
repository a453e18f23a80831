"""The postmortem report: timeline, "next run" changes, markdown and plots of a diagnosis.

``curvediag report PATH -o DIR`` and :func:`render_report` write ``DIR/postmortem.md`` and
its PNG plots; :meth:`Diagnosis.to_markdown` and :meth:`Diagnosis.plot` give the same from
Python. Names are imported on first use, so the command line stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Change": "curvediag.report.next_run",
    "Event": "curvediag.report.timeline",
    "ReportContext": "curvediag.report.context",
    "build_timeline": "curvediag.report.timeline",
    "next_run_changes": "curvediag.report.next_run",
    "plot_figures": "curvediag.report.plots",
    "postmortem_markdown": "curvediag.report.markdown",
    "render_report": "curvediag.report.writer",
}

__all__ = [
    "Change",
    "Event",
    "ReportContext",
    "build_timeline",
    "next_run_changes",
    "plot_figures",
    "postmortem_markdown",
    "render_report",
]

if TYPE_CHECKING:
    from curvediag.report.context import ReportContext
    from curvediag.report.markdown import postmortem_markdown
    from curvediag.report.next_run import Change, next_run_changes
    from curvediag.report.plots import plot_figures
    from curvediag.report.timeline import Event, build_timeline
    from curvediag.report.writer import render_report


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'curvediag.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
