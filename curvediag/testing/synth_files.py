"""Write seeded synthetic runs to disk in the formats curvediag reads.

Tests and benchmarks use it to build trees of runs: Trainer output folders
(``trainer_state.json``, optional ``checkpoint-N/``), TensorBoard run folders (event files
written the way the Trainer's TensorBoard callback writes them) and W&B ``run.history()`` CSV
dumps. Curves come from :func:`curvediag.testing.synth.curve`, in healthy and faulty shapes.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from curvediag.testing.synth import curve

__all__ = [
    "FILE_FORMATS",
    "SHAPES",
    "SynthRun",
    "make_run_tree",
    "synthetic_run",
    "write_run",
    "write_tensorboard",
    "write_trainer_state",
    "write_wandb_history_csv",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Curve shapes: one healthy, the others each a classic failure.
SHAPES = ("healthy", "overfit", "diverge", "nan", "spike", "plateau")
#: Formats :func:`write_run` writes.
FILE_FORMATS = ("hf-trainer", "tensorboard", "wandb-history")
_LOG_EVERY = 10


@dataclass
class SynthRun:
    """A synthetic run: train points (loss, grad norm, learning rate) and eval points."""

    name: str
    shape: str
    train_steps: IntArray
    train_loss: FloatArray
    grad_norm: FloatArray
    learning_rate: FloatArray
    eval_steps: IntArray
    eval_loss: FloatArray

    @property
    def max_steps(self) -> int:
        return int(self.train_steps[-1]) if self.train_steps.size else 0

    def epoch(self, step: int | float) -> float:
        return round(3.0 * float(step) / max(1, self.max_steps), 4)


def synthetic_run(
    shape: str = "healthy", *, entries: int = 1000, seed: int = 0, name: str | None = None
) -> SynthRun:
    """A seeded run of about ``entries`` log entries (train logs every 10 steps, plus evals).

    Args:
        shape: One of :data:`SHAPES`.
        entries: Total log entries (about 10 train logs per evaluation).
        seed: RNG seed (noise, and the details of each shape).
        name: The run's name (default ``<shape>-<seed>``).

    Raises:
        ValueError: Unknown shape.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r} (known: {', '.join(SHAPES)})")
    rng = np.random.default_rng(seed)
    n_eval = max(2, entries // 11)
    n = max(10, entries - n_eval)
    start = float(rng.uniform(2.5, 4.0))
    end = float(rng.uniform(0.6, 1.2))
    noise = float(rng.uniform(0.01, 0.03))
    s = int(rng.integers(0, 2**31))
    x = np.linspace(0.0, 1.0, n)
    grad = curve("flat", n=n, start=float(rng.uniform(0.5, 2.0)), noise=0.05, seed=s + 1)
    ev_end = end * float(rng.uniform(1.05, 1.2))
    ev_kw: dict[str, object] = {}
    if shape == "healthy":
        train = curve("decay", n=n, start=start, end=end, noise=noise, seed=s)
    elif shape == "overfit":
        train = curve("decay", n=n, start=start, end=end * 0.3, noise=noise, seed=s)
        ev_kw = {"rise_from": float(rng.uniform(0.3, 0.5)), "rise": float(rng.uniform(0.4, 0.8))}
    elif shape == "diverge":
        train = curve(
            "decay", n=n, start=start, end=end, noise=noise, seed=s, rise_from=0.6, rise=4.0
        )
        grad = grad * np.where(x > 0.6, 1.0 + 20.0 * (x - 0.6), 1.0)
        ev_kw = {"rise_from": 0.6, "rise": 3.0}
    elif shape == "nan":
        train = curve("decay", n=n, start=start, end=end, noise=noise, seed=s)
        at = int(n * float(rng.uniform(0.5, 0.8)))
        grad[at - 20 : at] *= np.geomspace(2.0, 200.0, 20)
        train[at:] = np.nan
        grad[at:] = np.nan
    elif shape == "spike":
        train = curve("decay", n=n, start=start, end=end, noise=noise, seed=s)
        at = int(n * float(rng.uniform(0.4, 0.7)))
        train[at : at + 3] *= float(rng.uniform(4.0, 8.0))
    else:  # plateau: the loss never moves
        train = curve("flat", n=n, start=start, noise=noise, seed=s)
        ev_end = start * 1.02
    train_steps = _LOG_EVERY * np.arange(1, n + 1, dtype=np.int64)
    eval_every = max(1, n // n_eval)
    eval_steps = train_steps[eval_every - 1 :: eval_every][:n_eval]
    ev_start = start * 1.02 if shape != "plateau" else ev_end
    ev_full = curve(
        "decay" if shape != "plateau" else "flat",
        n=n,
        start=ev_start,
        end=ev_end,
        noise=0.005,
        seed=s + 2,
        **ev_kw,  # type: ignore[arg-type]
    )
    eval_loss = ev_full[eval_every - 1 :: eval_every][:n_eval]
    if shape == "nan":
        eval_loss[eval_steps > train_steps[at]] = np.nan
    warm = max(1, n // 20)
    peak = float(rng.choice([1e-4, 3e-4, 5e-4]))
    lr = np.where(
        np.arange(n) < warm,
        peak * (np.arange(n) + 1) / warm,
        peak * 0.5 * (1 + np.cos(np.pi * (np.arange(n) - warm) / max(1, n - warm))),
    )
    return SynthRun(
        name=name or f"{shape}-{seed}",
        shape=shape,
        train_steps=train_steps,
        train_loss=np.asarray(train, dtype=np.float64),
        grad_norm=np.asarray(grad, dtype=np.float64),
        learning_rate=np.asarray(lr, dtype=np.float64),
        eval_steps=np.asarray(eval_steps, dtype=np.int64),
        eval_loss=np.asarray(eval_loss, dtype=np.float64),
    )


def _merged_rows(run: SynthRun) -> list[tuple[int, str, int]]:
    """(step, 'train'|'eval', index) in logging order: a step's train log before its eval."""
    rows = [(int(s), "train", i) for i, s in enumerate(run.train_steps)]
    rows += [(int(s), "eval", i) for i, s in enumerate(run.eval_steps)]
    rows.sort(key=lambda r: (r[0], r[1] == "eval"))
    return rows


def _num(v: float) -> float:
    return float(v)


def _state(run: SynthRun, upto: int | None = None) -> dict[str, object]:
    history: list[dict[str, object]] = []
    for step, kind, i in _merged_rows(run):
        if upto is not None and step > upto:
            break
        if kind == "train":
            history.append(
                {
                    "epoch": run.epoch(step),
                    "grad_norm": _num(run.grad_norm[i]),
                    "learning_rate": _num(run.learning_rate[i]),
                    "loss": round(_num(run.train_loss[i]), 4)
                    if math.isfinite(run.train_loss[i])
                    else _num(run.train_loss[i]),
                    "step": step,
                }
            )
        else:
            history.append(
                {
                    "epoch": run.epoch(step),
                    "eval_loss": _num(run.eval_loss[i]),
                    "eval_runtime": 1.5,
                    "eval_samples_per_second": 400.0,
                    "eval_steps_per_second": 50.0,
                    "step": step,
                }
            )
    last = run.max_steps if upto is None else upto
    finished = upto is None
    if finished:
        history.append(
            {
                "epoch": run.epoch(last),
                "step": last,
                "total_flos": 1.0e15,
                "train_loss": float(np.nanmean(run.train_loss)),
                "train_runtime": 600.0,
                "train_samples_per_second": 100.0,
                "train_steps_per_second": 12.5,
            }
        )
    finite = run.eval_loss[np.isfinite(run.eval_loss) & (run.eval_steps <= last)]
    return {
        "best_global_step": None,
        "best_metric": float(finite.min()) if finite.size else None,
        "best_model_checkpoint": None,
        "epoch": run.epoch(last),
        "eval_steps": int(run.eval_steps[1] - run.eval_steps[0]) if run.eval_steps.size > 1 else 0,
        "global_step": last,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": history,
        "logging_steps": _LOG_EVERY,
        "max_steps": run.max_steps,
        "num_input_tokens_seen": 0,
        "num_train_epochs": 3,
        "save_steps": 500,
        "total_flos": 1.0e15,
        "train_batch_size": 8,
        "trial_name": None,
        "trial_params": None,
    }


def write_trainer_state(
    run: SynthRun, folder: str | os.PathLike[str], *, checkpoints: int = 0
) -> Path:
    """A Trainer output folder: ``trainer_state.json`` (indent 2, sorted keys, bare ``NaN``
    as the Trainer writes it) and ``checkpoints`` ``checkpoint-N/`` folders, each with its own
    state and a small stand-in ``model.safetensors``.

    Returns:
        The folder.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "trainer_state.json").write_text(
        json.dumps(_state(run), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    for k in range(1, checkpoints + 1):
        step = run.max_steps * k // (checkpoints + 1)
        ck = out / f"checkpoint-{step}"
        ck.mkdir(exist_ok=True)
        (ck / "trainer_state.json").write_text(
            json.dumps(_state(run, upto=step), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        (ck / "model.safetensors").write_bytes(b"\x00" * 1024)
    return out


def write_tensorboard(
    run: SynthRun, folder: str | os.PathLike[str], *, wall_start: float = 1.7e9
) -> Path:
    """A TensorBoard run folder with one event file, tags as the Trainer's callback writes them
    (``train/loss``, ``train/grad_norm``, ``train/learning_rate``, ``train/epoch``,
    ``eval/loss``), one scalar per event.

    Returns:
        The event file.
    """
    from tensorboard.compat.proto.event_pb2 import Event

    from curvediag.ingest._tfevents import scalar_event, write_event_file

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    events: list[Event | bytes] = [Event(wall_time=wall_start, file_version="brain.Event:2")]
    for step, kind, i in _merged_rows(run):
        wall = wall_start + step * 0.05
        if kind == "train":
            for tag, value in (
                ("train/loss", run.train_loss[i]),
                ("train/grad_norm", run.grad_norm[i]),
                ("train/learning_rate", run.learning_rate[i]),
                ("train/epoch", run.epoch(step)),
            ):
                events.append(scalar_event(tag, float(value), step, wall).SerializeToString())
        else:
            events.append(
                scalar_event("eval/loss", float(run.eval_loss[i]), step, wall).SerializeToString()
            )
    name = f"events.out.tfevents.{int(wall_start)}.synthhost.{os.getpid()}.0"
    return write_event_file(out / name, events)


def write_wandb_history_csv(
    run: SynthRun, path: str | os.PathLike[str], *, wall_start: float = 1.7e9
) -> Path:
    """A ``run.scan_history()`` dump as CSV, as the Trainer's W&B integration logs it: one row
    per ``wandb.log`` call (train and eval rows apart), ``_step`` counting the calls and
    ``train/global_step`` holding the training step.

    Returns:
        The CSV file.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = [
        "_step",
        "_runtime",
        "_timestamp",
        "train/global_step",
        "train/epoch",
        "train/loss",
        "train/grad_norm",
        "train/learning_rate",
        "eval/loss",
    ]
    with out.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for n, (step, kind, i) in enumerate(_merged_rows(run)):
            runtime = step * 0.05
            row: list[object] = [n, runtime, wall_start + runtime, step, run.epoch(step)]
            if kind == "train":
                row += [
                    repr(float(run.train_loss[i])),
                    repr(float(run.grad_norm[i])),
                    repr(float(run.learning_rate[i])),
                    "",
                ]
            else:
                row += ["", "", "", repr(float(run.eval_loss[i]))]
            w.writerow(row)
    return out


def write_run(run: SynthRun, dest: str | os.PathLike[str], fmt: str) -> Path:
    """Write ``run`` in format ``fmt`` (one of :data:`FILE_FORMATS`) at ``dest`` (a folder for
    ``hf-trainer`` and ``tensorboard``, a ``.csv`` file for ``wandb-history``).

    Returns:
        The path that ``curvediag.load_run`` should be given.

    Raises:
        ValueError: Unknown format.
    """
    if fmt == "hf-trainer":
        return write_trainer_state(run, dest, checkpoints=2)
    if fmt == "tensorboard":
        return write_tensorboard(run, dest).parent
    if fmt == "wandb-history":
        return write_wandb_history_csv(run, dest)
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FILE_FORMATS)})")


def make_run_tree(
    root: str | os.PathLike[str],
    n_runs: int,
    *,
    entries: int = 1000,
    seed: int = 0,
    formats: Sequence[str] = FILE_FORMATS,
    shapes: Sequence[str] = SHAPES,
    per_folder: int = 100,
) -> list[tuple[Path, str, str]]:
    """A tree of ``n_runs`` runs, formats and shapes taken in turn (run ``i`` gets
    ``formats[i % len(formats)]`` and ``shapes[(i // len(formats)) % len(shapes)]``), grouped
    ``per_folder`` to a folder: ``root/<format>/g<k>/run-<i>-<shape>[.csv]``.

    Returns:
        (path, format, shape) for each run, in order.
    """
    base = Path(root)
    out: list[tuple[Path, str, str]] = []
    for i in range(n_runs):
        fmt = formats[i % len(formats)]
        shape = shapes[(i // len(formats)) % len(shapes)]
        run = synthetic_run(shape, entries=entries, seed=seed * 1_000_003 + i, name=f"run-{i:05d}")
        group = base / fmt / f"g{i // per_folder:03d}"
        dest = group / (f"run-{i:05d}-{shape}" + (".csv" if fmt == "wandb-history" else ""))
        out.append((write_run(run, dest, fmt), fmt, shape))
    return out
