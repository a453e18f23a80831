"""Plot every numeric series of a training log for labelling, without curvediag's rules.

The labelling protocol (``benchmarks/real_runs/LABELLING.md``) asks for a label written from the
plots BEFORE curvediag diagnoses the run. This script reads the log with plain readers (``json``
for a ``trainer_state.json`` or a W&B ``wandb-history.jsonl``, ``pandas`` for a CSV,
tensorboard's ``EventAccumulator`` for event files), prints a numeric summary of every series (points, first / last / min with its step,
non-finite count, quarter means) and writes one grid of plots. It never calls a rule.

Usage::

    python benchmarks/label_plots.py LOG [-o plots.png]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

Series = dict[str, list[tuple[float, float]]]


def read_trainer_state(path: Path) -> tuple[dict[str, object], Series]:
    """Top-level scalars and every numeric key of ``log_history`` by step."""
    text = re.sub(r"\b(-?Infinity|NaN)\b", r'"\1"', path.read_text(encoding="utf-8"))
    state = json.loads(text)
    top = {k: v for k, v in state.items() if not isinstance(v, (list, dict))}
    out: Series = {}
    for entry in state.get("log_history") or []:
        step = entry.get("step")
        if not isinstance(step, (int, float)):
            continue
        for key, value in entry.items():
            if key == "step" or isinstance(value, bool):
                continue
            if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
                value = float(value.replace("Infinity", "inf"))
            if isinstance(value, (int, float)):
                out.setdefault(key, []).append((float(step), float(value)))
    return top, out


def read_csv(path: Path) -> tuple[dict[str, object], Series]:
    """Every numeric column against the first step-like column (else the row number)."""
    df = pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",")
    xcol = next((c for c in ("step", "Step", "_step", "global_step", "epoch") if c in df), None)
    x = pd.to_numeric(df[xcol], errors="coerce") if xcol else pd.Series(range(len(df)))
    out: Series = {}
    for col in df.columns:
        if col == xcol:
            continue
        y = pd.to_numeric(df[col], errors="coerce")
        ok = y.notna() & x.notna()
        if ok.any():
            out[str(col)] = list(zip(x[ok].astype(float), y[ok].astype(float), strict=True))
    return {"x axis": xcol or "row", "rows": len(df)}, out


def read_tensorboard(path: Path) -> tuple[dict[str, object], Series]:
    """Every scalar tag of an event file or of the event files of a folder."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(path.rglob("events.out.tfevents.*")) if path.is_dir() else [path]
    out: Series = {}
    for i, f in enumerate(files):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        # several files: name each series by its file's sub-folder (train/, validation/ ...),
        # or by the file's number when they sit side by side
        sub = f.parent.relative_to(path) if path.is_dir() else Path()
        prefix = "" if len(files) == 1 else f"{sub}/" if str(sub) != "." else f"file{i}/"
        for tag in acc.Tags().get("scalars", []):
            out.setdefault(prefix + tag, []).extend(
                (float(e.step), float(e.value)) for e in acc.Scalars(tag)
            )
    return {"event files": len(files)}, out


def read_jsonl(path: Path) -> tuple[dict[str, object], Series]:
    """Every numeric key of a JSON Lines log (W&B's ``wandb-history.jsonl``) against ``_step``
    (else ``step``, else the line number)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out: Series = {}
    for i, row in enumerate(rows):
        x = row.get("_step", row.get("step", i))
        for key, v in row.items():
            if key in ("_step", "step") or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            out.setdefault(key, []).append((float(x), float(v)))
    return {"rows": len(rows)}, out


def read_any(path: Path) -> tuple[dict[str, object], Series]:
    name = path.name
    if path.is_dir() and not any(path.rglob("*tfevents*")):
        history = sorted(path.rglob("*.jsonl"))
        if history:  # a W&B run folder (files/wandb-history.jsonl)
            return read_jsonl(history[0])
    if name.endswith(".jsonl"):
        return read_jsonl(path)
    if name.endswith(".json"):
        return read_trainer_state(path)
    if path.is_dir() or "tfevents" in name:
        return read_tensorboard(path)
    return read_csv(path)  # .csv, .tsv, and Keras' CSVLogger training.log


def summary(series: Series) -> list[str]:
    lines = []
    for key, points in series.items():
        steps = [s for s, _ in points]
        values = np.array([v for _, v in points])
        finite = values[np.isfinite(values)]
        line = f"{key:36s} n={values.size:5d} steps {steps[0]:g}..{steps[-1]:g}"
        if finite.size:
            i = int(np.nanargmin(np.where(np.isfinite(values), values, np.inf)))
            quarters = [float(np.mean(q)) for q in np.array_split(finite, 4) if q.size]
            line += (
                f" first={values[0]:.4g} last={values[-1]:.4g} min={values[i]:.4g}@{steps[i]:g}"
                f" quarter means={[f'{q:.4g}' for q in quarters]}"
            )
        line += f" non-finite={values.size - finite.size}"
        lines.append(line)
    return lines


def plot(series: Series, out: Path) -> None:
    keys = [k for k, pts in series.items() if len(pts) >= 2][:24]
    if not keys:
        return
    cols = 3
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(15, 3.2 * rows), squeeze=False)
    for ax, key in zip(axes.flat, keys, strict=False):
        xs = [s for s, _ in series[key]]
        ys = np.array([v for _, v in series[key]])
        ax.plot(xs, ys, ".-", ms=3, lw=0.8)
        ax.set_title(key, fontsize=9)
        pos = ys[np.isfinite(ys) & (ys > 0)]
        if pos.size and ("loss" in key or "grad" in key) and pos.max() / pos.min() > 100:
            ax.set_yscale("log")  # a range over decades reads better on a log scale
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(out, dpi=60)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path, help="trainer_state.json, a CSV log, or event file(s)")
    ap.add_argument("-o", "--output", type=Path, default=Path("plots.png"))
    args = ap.parse_args(argv)
    top, series = read_any(args.log)
    print("top level:", {k: top[k] for k in list(top)[:30]})
    print("\n".join(summary(series)))
    if not any(len(points) >= 2 for points in series.values()):
        print(
            f"label_plots: no series of 2 or more points in {args.log} (it reads "
            "trainer_state.json, CSV logs, JSON Lines histories and TensorBoard event files; "
            "read other logs with curvediag.load_run and plot them yourself): no plot written",
            file=sys.stderr,
        )
        return 1
    plot(series, args.output)
    print(f"plots written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
