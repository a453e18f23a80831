"""PNG plots of a diagnosed run, annotated with its timeline (matplotlib, headless).

Long series are thinned for drawing only (:func:`thin`): above :data:`MAX_DRAWN` points a curve
is cut into equal-count buckets, about two per pixel column, and each bucket keeps its first,
lowest, highest and last point, so a 1000-pixel-wide plot of a million logs shows the same
envelope, spikes and NaN markers as the full series. Features and findings always use every
point.

matplotlib is imported on first use. Figures are built with :class:`matplotlib.figure.Figure`
directly (no pyplot state, nothing to close); when pyplot has not been imported yet the Agg
backend is selected so nothing needs a display.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from curvediag.normalize import is_rl_run, rl_return_series
from curvediag.report._fmt import num, pct, setting_value

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from curvediag.model import Diagnosis, Series
    from curvediag.report.context import ReportContext
    from curvediag.report.timeline import Event

__all__ = [
    "DPI",
    "MEMORY",
    "THROUGHPUT",
    "available_plots",
    "plot_captions",
    "plot_figures",
    "save_figures",
    "thin",
]

#: Resolution of the saved PNGs: 10 x 4.4 inches -> 1000 x 440 pixels.
DPI = 100
_SIZE = (10.0, 4.4)
#: Curves with more points than this are thinned for drawing (see the module docstring).
MAX_DRAWN = 8000
#: Above this many separate clipped stretches the grad-norm plot shades them as one polygon.
_MAX_FILL_REGIONS = 200


def thin(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points of a finite curve to draw: all of them up to :data:`MAX_DRAWN`, else the first,
    lowest, highest and last point of each of ``MAX_DRAWN // 4`` equal-count buckets, in order.
    """
    n = values.size
    if n <= MAX_DRAWN:
        return steps, values
    buckets = MAX_DRAWN // 4
    size = -(-n // buckets)
    rows = -(-n // size)
    pad = rows * size - n
    lo = np.concatenate([values, np.full(pad, np.inf)]).reshape(rows, size)
    base = np.arange(rows) * size
    i_min = base + np.argmin(lo, axis=1)
    del lo
    hi = np.concatenate([values, np.full(pad, -np.inf)]).reshape(rows, size)
    i_max = base + np.argmax(hi, axis=1)
    del hi
    last = np.minimum(base + size - 1, n - 1)
    keep = np.unique(np.concatenate([base, i_min, i_max, last]))
    return steps[keep], values[keep]


THROUGHPUT = (
    ("system/tokens_per_second", "tokens / s"),
    ("system/samples_per_second", "samples / s"),
    ("system/steps_per_second", "steps / s"),
)
MEMORY = (
    ("system/memory_allocated", "memory allocated"),
    ("system/memory_reserved", "memory reserved"),
    ("system/gpu_memory", "GPU memory"),
)

#: How each timeline event kind is drawn: (colour, line style, legend name). Start and end
#: are not drawn: the axis limits show them.
_EVENT_STYLE: dict[str, tuple[str, str, str]] = {
    "warmup": ("#7f7f7f", ":", "warmup end"),
    "resume": ("#000000", "-.", "resumed"),
    "changepoint": ("#9467bd", "-.", "change point"),
    "clipping": ("#8c564b", ":", "clipping saturated"),
    "grad_growth": ("#d62728", ":", "grad norm climbs"),
    "spike": ("#ff7f0e", "--", "loss spike"),
    "best_eval": ("#2ca02c", "--", "best eval"),
    "nonfinite": ("#d62728", "-", "first non-finite"),
    "finding": ("#555555", "--", "onset"),
}

_RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "lines.linewidth": 1.6,
    "svg.hashsalt": "curvediag",
}


def _mpl() -> Any:
    try:
        import matplotlib
    except ImportError:
        from curvediag.errors import MissingDependencyError

        raise MissingDependencyError(
            "matplotlib", "plot", "Plotting (use --no-plots for text only)"
        ) from None

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    return matplotlib


def _ctx(d: Diagnosis | ReportContext) -> ReportContext:
    from curvediag.report.context import ReportContext

    return d if isinstance(d, ReportContext) else ReportContext.of(d)


def _first(ctx: ReportContext, names: tuple[tuple[str, str], ...]) -> tuple[Series, str] | None:
    for name, label in names:
        s = ctx.run.get(name)
        if s is not None and int(np.isfinite(s.values).sum()) >= 2:
            return s, label
    return None


def available_plots(d: Diagnosis | ReportContext) -> list[str]:
    """Names of the plots this run has data for, in report order (no matplotlib needed)."""
    ctx = _ctx(d)
    out = []
    if _rl_return(ctx) is not None:
        out.append("return")
    if ctx.run.get("train/loss") is not None or ctx.run.get("eval/loss") is not None:
        out.append("loss")
    if ctx.run.get("train/learning_rate") is not None:
        out.append("learning_rate")
    if ctx.run.get("train/grad_norm") is not None:
        out.append("grad_norm")
    if _first(ctx, THROUGHPUT) is not None:
        out.append("throughput")
    if _first(ctx, MEMORY) is not None:
        out.append("memory")
    return out


def _clip_summary(ctx: ReportContext) -> str:
    thr, how = ctx.clip_threshold()
    g = ctx.run.get("train/grad_norm")
    if how == "off":
        return "clipping was off (max_grad_norm=0)"
    if thr is None or g is None:
        return "clipping threshold unknown"
    vals = g.values[np.isfinite(g.values)]
    share = float(np.mean(vals > thr)) if vals.size else 0.0
    extra = "" if how == "configured" else f", {how}"
    return (
        f"clipped on {pct(share, signed=False)} of the logged steps "
        f"(max_grad_norm={setting_value(thr)}{extra})"
    )


def plot_captions(d: Diagnosis | ReportContext) -> dict[str, str]:
    """One sentence per available plot, saying what it shows."""
    ctx = _ctx(d)
    caps: dict[str, str] = {}
    for name in available_plots(ctx):
        if name == "return":
            ret = _rl_return(ctx)
            caps[name] = (
                f"Mean episode return ({ret.name if ret else ''}): what a reinforcement-"
                "learning run is judged by (its loss is not expected to fall)."
            )
        elif name == "loss":
            cap = "Train loss (points: logged values; line: rolling median) and eval loss"
            best = ctx.number("eval.min")
            if best is not None:
                cap += f"; star: best eval loss {num(best)} at step {ctx.step('eval.min_step')}"
            caps[name] = cap + ". Vertical lines mark the timeline events."
        elif name == "learning_rate":
            caps[name] = (
                f"Learning rate schedule ({ctx.setting('lr_scheduler_type') or 'scheduler unknown'}"
                f", peak {setting_value(ctx.number('lr.peak'))})."
            )
        elif name == "grad_norm":
            caps[name] = f"Gradient norm before clipping; {_clip_summary(ctx)}."
        elif name == "throughput":
            found = _first(ctx, THROUGHPUT)
            caps[name] = f"Training throughput ({found[1] if found else ''})."
        elif name == "memory":
            found = _first(ctx, MEMORY)
            caps[name] = f"Memory ({found[0].name if found else ''}, as logged)."
    return caps


def plot_figures(
    d: Diagnosis | ReportContext, events: list[Event] | None = None
) -> dict[str, Figure]:
    """The report's figures by name (``return`` for an RL run, ``loss``, ``learning_rate``,
    ``grad_norm``, ``throughput``, ``memory``), each annotated with the timeline events."""
    from curvediag.report.timeline import build_timeline

    ctx = _ctx(d)
    evs = build_timeline(ctx) if events is None else events
    mpl = _mpl()
    builders: dict[str, Callable[[Axes, ReportContext], str]] = {
        "return": _return,
        "loss": _loss,
        "learning_rate": _lr,
        "grad_norm": _grad,
        "throughput": _throughput,
        "memory": _memory,
    }
    out: dict[str, Figure] = {}
    with mpl.rc_context(_RC):
        from matplotlib.figure import Figure

        for name in available_plots(ctx):
            fig = Figure(figsize=_SIZE, dpi=DPI, layout="constrained")
            ax = fig.add_subplot()
            title = builders[name](ax, ctx)
            _mark_events(ax, ctx, evs, shade=name == "loss")
            _finish(ax, ctx, title)
            out[name] = fig
    return out


def save_figures(figures: Mapping[str, Figure], out_dir: str | Path) -> dict[str, str]:
    """Write ``<name>.png`` for each figure; returns name -> file name (relative)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mpl = _mpl()
    files: dict[str, str] = {}
    with mpl.rc_context(_RC):
        for name, fig in figures.items():
            fname = f"{name}.png"
            fig.savefig(out / fname, dpi=DPI, format="png", metadata={"Software": None})
            files[name] = fname
    return files


# -- the plots ------------------------------------------------------------------------------


def _log_worthy(values: np.ndarray, span: float) -> bool:
    """Whether the positive values span ``span``x or more (values of exactly 0, such as the
    grad norms of steps the fp16 loss scaler skipped, do not count against a log axis as long
    as they are a small minority)."""
    v = values[np.isfinite(values)]
    pos = v[v > 0]
    if pos.size < 2 or pos.size < 0.9 * v.size:
        return False
    return bool(float(pos.max()) / float(pos.min()) >= span)


def _log_axis(ax: Axes) -> None:
    """Log y axis with plain-number labels at 1, 2 and 5 x 10^k."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-300) < 1e4 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: num(float(y), 3)))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _loss(ax: Axes, ctx: ReportContext) -> str:
    all_vals = [v for v in (_plot_train_loss(ax, ctx), _plot_eval_loss(ax, ctx)) if v is not None]
    _mark_loss_events(ax, ctx)
    if all_vals and _log_worthy(np.concatenate(all_vals), 20):
        _log_axis(ax)
        ax.set_ylabel("loss (log scale)")
    else:
        ax.set_ylabel("loss")
    return f"{ctx.run.name}: train and eval loss"


def _plot_train_loss(ax: Axes, ctx: ReportContext) -> np.ndarray | None:
    """The logged train loss as dots and its rolling median as a line; its finite values."""
    from curvediag.features._stats import rolling_median, smoothing_window

    tl = ctx.train_loss()
    if tl is None:
        return None
    steps, values, _ = tl
    ok = np.isfinite(values)
    s, v = steps[ok], values[ok]
    if not v.size:
        return None
    ds, dv = thin(s, v)
    ax.plot(
        ds,
        dv,
        "o",
        ms=2.5 if v.size < 300 else 1.5,
        color="C0",
        alpha=0.35,
        label="train loss (logged)",
        zorder=2,
    )
    if v.size >= 5:
        smooth = rolling_median(v, smoothing_window(v.size))
        ax.plot(*thin(s, smooth), "-", color="C0", label="train loss (smoothed)", zorder=3)
    return v


def _plot_eval_loss(ax: Axes, ctx: ReportContext) -> np.ndarray | None:
    """The eval loss as a line; its finite values."""
    ev = ctx.run.get("eval/loss")
    if ev is None:
        return None
    ok = np.isfinite(ev.values)
    if not ok.any():
        return None
    es, evs = thin(ev.steps[ok], ev.values[ok])
    ax.plot(
        es,
        evs,
        "-o" if evs.size < 300 else "-",
        ms=3.5,
        color="C1",
        label="eval loss",
        zorder=4,
    )
    values: np.ndarray = ev.values[ok]
    return values


def _mark_loss_events(ax: Axes, ctx: ReportContext) -> None:
    """The best eval loss, the largest spike and the change points."""
    best, best_step = ctx.number("eval.min"), ctx.step("eval.min_step")
    if best is not None and best_step is not None:
        ax.plot(
            [best_step],
            [best],
            "*",
            ms=15,
            color="#2ca02c",
            markeredgecolor="white",
            markeredgewidth=0.8,
            zorder=6,
            label=f"best eval {num(best)} (step {best_step})",
        )
    sp, sv = ctx.step("spike.step"), ctx.number("spike.value")
    if sp is not None and sv is not None:
        ax.plot(
            [sp],
            [sv],
            "v",
            ms=9,
            color="#ff7f0e",
            zorder=6,
            label=f"largest spike {num(sv)} (step {sp})",
        )
    from curvediag.report.timeline import changepoint_steps

    for i, c in enumerate(changepoint_steps(ctx)):
        ax.axvline(
            c,
            color="#9467bd",
            lw=0.8,
            alpha=0.3,
            ls="-",
            zorder=1,
            label="change points" if i == 0 else None,
        )


def _lr(ax: Axes, ctx: ReportContext) -> str:
    from matplotlib.ticker import FuncFormatter

    s = ctx.run.get("train/learning_rate")
    assert s is not None
    ok = np.isfinite(s.values)
    ax.plot(*thin(s.steps[ok], s.values[ok]), "-", color="C2", label="learning rate")
    peak = float(np.max(s.values[ok])) if ok.any() else 0.0
    exp = int(np.floor(np.log10(peak))) if peak > 0 else 0
    if exp <= -2 or exp >= 4:
        scale = 10.0**exp
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y / scale:g}"))
        ax.set_ylabel(f"learning rate (×1e{exp})")
    else:
        ax.set_ylabel("learning rate")
    ax.set_ylim(bottom=0)
    return f"{ctx.run.name}: learning rate ({ctx.setting('lr_scheduler_type') or 'schedule'})"


def _grad(ax: Axes, ctx: ReportContext) -> str:
    from matplotlib.transforms import blended_transform_factory

    g = ctx.run.get("train/grad_norm")
    assert g is not None
    ok = np.isfinite(g.values)
    s, v = thin(g.steps[ok], g.values[ok])
    ax.plot(s, v, "-", color="C4", lw=1.2, label="grad norm", zorder=3)
    if v.size < 300:
        ax.plot(s, v, "o", ms=2.5, color="C4", zorder=3)
    thr, how = ctx.clip_threshold()
    if thr is not None:
        ax.axhline(
            thr,
            color="#d62728",
            ls="--",
            lw=1.4,
            zorder=4,
            label=f"max_grad_norm = {setting_value(thr)}"
            + ("" if how == "configured" else " (assumed)"),
        )
        above = v > thr
        if above.any():
            # one polygon per stretch above the threshold; many stretches: a single polygon
            # (the same shaded area, give or take the crossing points)
            stretches = int(np.count_nonzero(np.diff(above.astype(np.int8)) == 1)) + 1
            many = stretches > _MAX_FILL_REGIONS
            ax.fill_between(
                s,
                thr,
                np.maximum(v, thr) if many else v,
                where=None if many else above,
                color="#d62728",
                alpha=0.12,
                lw=0,
                interpolate=not many,
                label="clipped",
                zorder=2,
            )
    bad = g.steps[~ok]
    n_bad = bad.size
    if bad.size > MAX_DRAWN:  # one marker per pixel column is enough
        bad = bad[:: -(-bad.size // MAX_DRAWN)]
    if bad.size:
        trans = blended_transform_factory(ax.transData, ax.transAxes)
        ax.plot(
            bad,
            np.full(bad.size, 0.97),
            "x",
            color="#d62728",
            ms=6,
            transform=trans,
            clip_on=False,
            label=f"non-finite grad norm ({n_bad})",
            zorder=5,
        )
    if _log_worthy(v, 100):
        _log_axis(ax)
        ax.set_ylabel("gradient norm (log scale)")
    else:
        ax.set_ylabel("gradient norm")
        ax.set_ylim(bottom=0)
    return f"{ctx.run.name}: gradient norm, {_clip_summary(ctx)}"


def _throughput(ax: Axes, ctx: ReportContext) -> str:
    found = _first(ctx, THROUGHPUT)
    assert found is not None
    s, unit = found
    ok = np.isfinite(s.values)
    ax.plot(*thin(s.steps[ok], s.values[ok]), "-", color="C5", label=unit)
    base = float(np.median(s.values[ok]))
    ax.axhline(base, color="#7f7f7f", ls=":", lw=1, label=f"median {num(base)} {unit}")
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    return f"{ctx.run.name}: throughput"


def _rl_return(ctx: ReportContext) -> Series | None:
    """A reinforcement-learning run's episode return (None for other runs)."""
    if not is_rl_run(ctx.run):
        return None
    s = ctx.run.get(rl_return_series(ctx.run) or "")
    return s if s is not None and int(np.isfinite(s.values).sum()) >= 2 else None


def _return(ax: Axes, ctx: ReportContext) -> str:
    s = _rl_return(ctx)
    assert s is not None
    ok = np.isfinite(s.values)
    ax.plot(*thin(s.steps[ok], s.values[ok]), ".-", color="C2", label=s.name)
    ax.set_ylabel("mean episode return")
    return f"{ctx.run.name}: episode return"


def _memory(ax: Axes, ctx: ReportContext) -> str:
    found = _first(ctx, MEMORY)
    assert found is not None
    s, label = found
    ok = np.isfinite(s.values)
    ax.plot(*thin(s.steps[ok], s.values[ok]), "-", color="C9", label=f"{label} ({s.name})")
    ax.set_ylabel(f"{label} (as logged)")
    ax.set_ylim(bottom=0)
    return f"{ctx.run.name}: memory"


# -- shared decoration ------------------------------------------------------------------------


def _mark_events(ax: Axes, ctx: ReportContext, events: list[Event], *, shade: bool) -> None:
    labelled: set[str] = set()
    warm = [e for e in events if e.kind == "warmup" and e.title == "Warmup ends"]
    first = min((int(s.steps[0]) for s in ctx.run.metrics.values() if len(s)), default=0)
    if warm:
        ax.axvspan(
            min(first, 0), warm[0].step, color="#7f7f7f", alpha=0.08, lw=0, label="warmup", zorder=0
        )
    last = ctx.run.last_step
    for e in events:
        style = _EVENT_STYLE.get(e.kind)
        if style is None or (e.kind == "warmup" and e.title != "Warmup ends"):
            continue
        color, ls, _ = style
        name = e.rule_id if e.kind == "finding" and e.rule_id else e.title.lower()
        label = f"{name} (step {e.step})" if name not in labelled else None
        if shade and e.kind == "best_eval":
            label = None  # the star carries it
        labelled.add(name)
        if e.kind == "nonfinite" and "grad" in e.title:
            ls = "--"
        ax.axvline(e.step, color=color, ls=ls, lw=1.3, alpha=0.9, label=label, zorder=1)
        if e.kind == "nonfinite" and shade and last is not None and e.title.endswith("loss"):
            ax.axvspan(
                e.step, last, color="#d62728", alpha=0.07, lw=0, zorder=0, label="non-finite loss"
            )


def _finish(ax: Axes, ctx: ReportContext, title: str) -> None:
    last = ctx.run.last_step or 1
    ax.set_xlim(0, last * 1.01)
    ax.set_xlabel("optimizer step")
    em = ctx.epoch_map
    if em is not None and float(em[1][-1]) > 0:
        s_arr, e_arr = em

        def to_epoch(x: Any) -> Any:
            return np.interp(x, s_arr, e_arr)

        def to_step(x: Any) -> Any:
            return np.interp(x, e_arr, s_arr)

        sec = ax.secondary_xaxis("top", functions=(to_epoch, to_step))
        sec.set_xlabel("epoch")
    ax.set_title(title, loc="left")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        widest = max(len(label) for label in labels)
        ncol = min(4 if widest <= 26 else 3, len(handles))
        ax.legend(
            handles,
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=ncol,
            frameon=False,
        )
