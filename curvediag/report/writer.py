"""Write a postmortem folder: ``postmortem.md`` and its PNG plots, linked relatively."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from curvediag.errors import OutOfMemoryError

if TYPE_CHECKING:
    from curvediag.model import Diagnosis

__all__ = ["PLOT_NAMES", "REPORT_NAME", "render_report"]

REPORT_NAME = "postmortem.md"
#: The plots a report may draw: ``<name>.png`` in the report folder belongs to the report.
PLOT_NAMES = ("loss", "learning_rate", "grad_norm", "throughput", "memory")


def _check_target(out: Path) -> None:
    """Refuse, with one clear line, a target that is not a folder we can write into."""
    from curvediag.errors import CurvediagError

    if out.exists() and not out.is_dir():
        kind = "a file" if out.is_file() else "not a folder (a FIFO, socket or device)"
        raise CurvediagError(f"{out}: the report folder exists and is {kind}; pick a folder")
    for name in (REPORT_NAME, *(f"{p}.png" for p in PLOT_NAMES)):
        f = out / name
        if (f.exists() or f.is_symlink()) and (f.is_symlink() or not f.is_file()):
            raise CurvediagError(
                f"{f}: exists and is not a regular file (a folder, link, FIFO...); the report "
                "will not write through it"
            )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create the report folder ({exc.strerror or exc})"
        raise CurvediagError(f"{out}: {problem}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise CurvediagError(f"{out}: the report folder is not writable")


def render_report(
    diagnosis: Diagnosis,
    out_dir: str | os.PathLike[str],
    *,
    plots: bool = True,
    command: str | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> Path:
    """Write ``out_dir/postmortem.md`` (and ``out_dir/<plot>.png`` unless ``plots=False``).

    Image links are relative, so the folder can be zipped or committed as it is.

    Args:
        diagnosis: What :func:`curvediag.diagnose` returned.
        out_dir: The folder to write (created if needed; existing report files are replaced).
        plots: Draw the PNG plots.
        command: The command line to show under "Reproduce".
        on_stage: Called with ``"plotting"`` and ``"writing"`` as those stages start (the
            CLI's progress line).

    Returns:
        The path of ``postmortem.md``.

    Raises:
        OutOfMemoryError: The plots or the report do not fit in memory (names the run).
    """
    try:
        return _render(diagnosis, Path(out_dir), plots=plots, command=command, on_stage=on_stage)
    except MemoryError as exc:
        if isinstance(exc, OutOfMemoryError):
            raise
        raise OutOfMemoryError(diagnosis.run.source, "writing its report") from None


def _render(
    diagnosis: Diagnosis,
    out: Path,
    *,
    plots: bool,
    command: str | None,
    on_stage: Callable[[str], None] | None = None,
) -> Path:
    from curvediag.errors import CurvediagError
    from curvediag.report.context import ReportContext
    from curvediag.report.markdown import postmortem_markdown
    from curvediag.report.timeline import build_timeline

    _check_target(out)
    ctx = ReportContext.of(diagnosis)
    images: dict[str, str] | None = None
    path = out / REPORT_NAME
    try:
        if plots:
            from curvediag.report.plots import plot_figures, save_figures

            if on_stage is not None:
                on_stage("plotting")
            images = save_figures(plot_figures(ctx, build_timeline(ctx)), out)
        # plots an earlier report left here that this one does not draw would be stale
        for name in PLOT_NAMES:
            if name not in (images or {}):
                (out / f"{name}.png").unlink(missing_ok=True)
        if on_stage is not None:
            on_stage("writing")
        text = postmortem_markdown(ctx, images=images, command=command)
        path.write_text(text, encoding="utf-8", newline="\n")
    except OSError as exc:
        raise CurvediagError(f"{out}: cannot write the report ({exc.strerror or exc})") from None
    return path
