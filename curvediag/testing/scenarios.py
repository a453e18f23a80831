"""Seeded, labelled synthetic training runs: healthy ones and one per known fault.

Each scenario builds a realistic run (warmup and a schedule, logging and eval intervals, noise,
grad norms, epochs) from a seed, then injects one fault and says which rule must fire, where it
starts, and which rules must stay quiet. The accuracy benchmark, the tests and users' own rule
tests share it::

    from curvediag.testing.scenarios import labelled_corpus, make_scenario
    case = make_scenario("overfitting", seed=3)
    case.run, case.expected, case.onset

Healthy runs expect nothing; the info findings ``healthy-converged``,
``still-improving-at-end`` and ``eval-too-rare`` are allowed everywhere (they are notes, not
alarms).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from curvediag.model import Run, RunMeta
from curvediag.normalize import build_series, choose_primary_eval

__all__ = ["ALLOWED", "FAULTS", "LabelledRun", "labelled_corpus", "make_scenario"]

#: Info findings that are never counted as false alarms.
ALLOWED = frozenset({"healthy-converged", "still-improving-at-end", "eval-too-rare"})


@dataclass
class LabelledRun:
    """A run with its ground truth."""

    name: str
    run: Run
    expected: set[str]
    onset: int | None = None
    healthy: bool = False
    nan_step: int | None = None
    #: Findings that are acceptable besides the expected ones (echoes of the same cause).
    also_ok: set[str] = field(default_factory=set)


@dataclass
class _Base:
    """A healthy run's ingredients, before any fault is injected."""

    rng: np.random.Generator
    n: int  # train-loss logs
    every: int  # steps between logs
    warm: int  # warmup logs
    peak_lr: float
    loss: np.ndarray
    lr: np.ndarray
    grad: np.ndarray
    eval_every: int  # logs between evaluations
    epochs: float
    noise: float
    meta: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    eval_loss: np.ndarray | None = None
    wall: np.ndarray | None = None

    @property
    def steps(self) -> np.ndarray:
        return self.every * (1 + np.arange(self.n))

    def eval_idx(self) -> np.ndarray:
        return np.arange(self.eval_every - 1, self.n, self.eval_every)


def _healthy_base(seed: int, **over: Any) -> _Base:
    rng = np.random.default_rng(seed)
    n = int(over.get("n", rng.integers(80, 500)))
    every = int(over.get("every", rng.choice([1, 5, 10, 20])))
    warm = int(over.get("warm", max(2, int(n * rng.uniform(0.03, 0.1)))))
    start = float(rng.uniform(2.0, 10.5))
    floor = start * float(rng.uniform(0.15, 0.6))
    rate = float(over.get("rate", rng.uniform(4.0, 9.0)))
    noise = float(over.get("noise", rng.uniform(0.01, 0.04)))
    x = np.linspace(0.0, 1.0, n)
    clean = floor + (start - floor) * np.exp(-rate * x)
    loss = clean * np.exp(rng.normal(0.0, noise, n))
    peak = float(10 ** rng.uniform(-4.5, -2.7))
    sched = over.get("schedule", rng.choice(["cosine", "linear", "constant"]))
    lr = np.empty(n)
    lr[:warm] = peak * (1 + np.arange(warm)) / warm
    rest = np.linspace(0.0, 1.0, n - warm)
    if sched == "cosine":
        lr[warm:] = peak * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * rest)))
    elif sched == "linear":
        lr[warm:] = peak * (1 - 0.9 * rest)
    else:
        lr[warm:] = peak
    gmed = float(rng.uniform(0.3, 2.5))
    grad = gmed * np.exp(rng.normal(0.0, 0.2, n))
    grad[:warm] *= np.linspace(4.0, 1.0, warm)
    eval_every = int(max(2, n // int(rng.integers(6, 16))))
    epochs = float(over.get("epochs", rng.choice([1.0, 1.0, 2.0, 3.0])))
    meta = {
        "max_steps": int(n * every),
        "global_step": int(n * every),
        "warmup_steps": int(warm * every),
        "learning_rate": peak,
        "lr_scheduler_type": str(sched),
        "max_grad_norm": 1.0,
        "train_batch_size": int(rng.choice([8, 16, 32])),
        "finished": True,
        "summary": {"train_runtime": float(n * every * 0.2)},
    }
    # What healthy runs really look like, and what trips hand-written alerts:
    if over.get("realistic", True):
        if rng.uniform() < 0.35:  # a transient spike while the learning rate warms up
            j = int(rng.integers(1, max(2, warm)))
            loss[j] *= float(rng.uniform(2.0, 3.0))
        if rng.uniform() < 0.4:  # huge gradient norms in the first steps (LLM fine-tuning)
            k = max(2, warm // 2)
            grad[:k] *= float(rng.uniform(10.0, 40.0))
        if rng.uniform() < 0.25:  # a small-batch run: noisier, but converging
            loss *= np.exp(rng.normal(0.0, 0.04, n))
    b = _Base(rng, n, every, warm, peak, loss, lr, grad, eval_every, epochs, noise, meta)
    ev_noise = float(rng.uniform(0.002, 0.012))
    b.eval_loss = (
        clean[b.eval_idx()]
        * float(rng.uniform(1.02, 1.12))
        * np.exp(rng.normal(0.0, ev_noise, b.eval_idx().size))
    )
    if over.get("realistic", True) and rng.uniform() < 0.3 and b.eval_loss.size > 4:
        j = int(rng.integers(2, b.eval_loss.size - 1))
        b.eval_loss[j] *= float(rng.uniform(1.05, 1.09))  # one noisy evaluation
    b.wall = 1.7e9 + np.cumsum(np.full(n, every * 0.2) * np.exp(rng.normal(0, 0.05, n)))
    return b


def _build(b: _Base, name: str) -> Run:
    steps = b.steps
    metrics = {}

    def add(key: str, s: np.ndarray, v: np.ndarray, w: np.ndarray | None = None) -> None:
        metrics[key], _ = build_series(key, s, v, w)

    add("train/loss", steps, b.loss, b.wall)
    add("train/learning_rate", steps, b.lr)
    add("train/grad_norm", steps, b.grad)
    add("train/epoch", steps, b.epochs * steps / steps[-1])
    if b.eval_loss is not None and b.eval_loss.size:
        idx = b.eval_idx()[: b.eval_loss.size]
        add("eval/loss", steps[idx], b.eval_loss)
    for key, v in b.extra.items():
        add(key, steps[: v.size], v)
    run = Run(
        source=f"<scenario {name}>",
        format="synthetic",
        name=name,
        meta=RunMeta.model_validate(b.meta),
        metrics=metrics,
    )
    choose_primary_eval(run)
    return run


def _eval_follows_train(b: _Base) -> None:
    """Re-derive the eval curve from the (changed) train curve: a little above its trend."""
    from curvediag.features._stats import rolling_median

    trend = np.exp(rolling_median(np.log(b.loss), max(5, (b.n // 10) | 1)))
    b.eval_loss = trend[b.eval_idx()] * float(b.rng.uniform(1.02, 1.1))


def _at(b: _Base, lo: float, hi: float) -> int:
    """A log index in the given fraction of the post-warmup run."""
    first = b.warm + 2
    return int(first + (b.n - first) * b.rng.uniform(lo, hi))


# -------------------------------------------------------------------------------------------
# Faults: each takes a healthy base, mutates it, and returns the label
# -------------------------------------------------------------------------------------------
Fault = Callable[[_Base], tuple[set[str], int | None, set[str]]]
FAULTS: dict[str, Fault] = {}


def _fault(name: str) -> Callable[[Fault], Fault]:
    def deco(fn: Fault) -> Fault:
        FAULTS[name] = fn
        return fn

    return deco


def _step(b: _Base, i: int) -> int:
    return int(b.steps[min(max(i, 0), b.n - 1)])


@_fault("overfitting")
def _overfit(b: _Base) -> tuple[set[str], int | None, set[str]]:
    idx = b.eval_idx()
    k = int(idx.size * b.rng.uniform(0.3, 0.55))
    assert b.eval_loss is not None
    ev = b.eval_loss.copy()
    ev[k + 1 :] = ev[k] * (1 + b.rng.uniform(0.04, 0.09) * np.arange(1, idx.size - k))
    b.eval_loss = ev
    b.loss = b.loss * np.exp(-(np.linspace(0, b.rng.uniform(0.8, 1.6), b.n) ** 2))
    return (
        {"overfitting"},
        _step(b, int(idx[k])),
        {"loss-collapsed-to-zero", "loss-drops-at-epoch-boundaries"},
    )


@_fault("eval-loss-rising")
def _eval_rising(b: _Base) -> tuple[set[str], int | None, set[str]]:
    idx = b.eval_idx()
    k = int(idx.size * b.rng.uniform(0.2, 0.4))
    assert b.eval_loss is not None
    ev = b.eval_loss.copy()
    ev[k + 1 :] = ev[k] * (1 + b.rng.uniform(0.05, 0.1) * np.arange(1, idx.size - k))
    b.eval_loss = ev
    i = int(idx[k])
    b.loss[i:] = (
        b.loss[i]
        * np.linspace(1.0, b.rng.uniform(1.15, 1.4), b.n - i)
        * np.exp(b.rng.normal(0, b.noise, b.n - i))
    )
    return {"eval-loss-rising"}, _step(b, i), set()


@_fault("eval-flat-while-train-falls")
def _eval_flat(b: _Base) -> tuple[set[str], int | None, set[str]]:
    assert b.eval_loss is not None
    level = float(b.loss[0]) * b.rng.uniform(1.0, 1.3)
    b.eval_loss = level * np.exp(b.rng.normal(0, 0.003, b.eval_loss.size))
    return {"eval-flat-while-train-falls"}, None, set()


@_fault("eval-below-train")
def _eval_below(b: _Base) -> tuple[set[str], int | None, set[str]]:
    _eval_follows_train(b)
    assert b.eval_loss is not None
    b.eval_loss = b.eval_loss * b.rng.uniform(0.55, 0.75)
    return {"eval-below-train"}, None, set()


@_fault("loss-diverging")
def _diverge(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.3, 0.6)
    m = b.n - i
    growth = np.exp(np.linspace(0, np.log(b.rng.uniform(3.0, 8.0)), m))
    b.loss[i:] = b.loss[i] * growth * np.exp(b.rng.normal(0, b.noise, m))
    b.grad[i:] *= growth**1.5
    b.eval_loss = None
    return (
        {"loss-diverging"},
        _step(b, i),
        {"exploding-gradients", "grad-clipping-saturated", "eval-too-rare"},
    )


@_fault("loss-nonfinite-after-grad-growth")
def _nan_growth(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.3, 0.7)
    k = int(b.rng.integers(4, 9))
    b.grad[i - k : i] = b.grad[i - k - 1] * (2.0 ** np.arange(1, k + 1))
    b.loss[i - k : i] *= 1.15 ** np.arange(1, k + 1)
    hidden = bool(b.rng.integers(0, 2))
    b.loss[i:] = 0.0 if hidden else np.nan
    b.grad[i:] = np.nan
    b.meta["finished"] = True
    return {"loss-nonfinite-after-grad-growth"}, _step(b, i), set()


@_fault("loss-nonfinite-sudden")
def _nan_sudden(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.3, 0.8)
    b.loss[i:] = np.nan
    b.grad[i:] = np.nan
    return {"loss-nonfinite-sudden"}, _step(b, i), set()


@_fault("loss-nonfinite-at-start")
def _nan_start(b: _Base) -> tuple[set[str], int | None, set[str]]:
    b.loss[:] = np.nan
    b.grad[:] = np.nan
    if b.eval_loss is not None:
        b.eval_loss = b.eval_loss * np.nan
    return {"loss-nonfinite-at-start"}, _step(b, 0), set()


@_fault("loss-spike")
def _spike(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.2, 0.8)
    b.loss[i] = float(b.loss[i - 1]) * b.rng.uniform(3.0, 6.0)
    return {"loss-spike"}, _step(b, i), set()


@_fault("loss-spike-slow-recovery")
def _slow_spike(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.2, 0.5)
    m = int(max(8, 0.2 * b.n))
    bump = b.rng.uniform(2.0, 4.0)
    decay = 1 + (bump - 1) * np.exp(-np.arange(m) / (m / 4))
    b.loss[i : i + m] *= decay[: b.n - i]
    return {"loss-spike-slow-recovery"}, _step(b, i), {"loss-spike"}


@_fault("loss-level-shift")
def _level_shift(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.3, 0.6)
    level = float(b.loss[i - 1]) * b.rng.uniform(1.5, 2.2)
    b.loss[i:] = level * np.exp(b.rng.normal(0, b.noise, b.n - i))
    b.eval_loss = None
    return {"loss-level-shift"}, _step(b, i), {"eval-too-rare", "loss-spike-slow-recovery"}


@_fault("loss-not-decreasing")
def _flat(b: _Base) -> tuple[set[str], int | None, set[str]]:
    b.loss = float(b.loss[0]) * np.exp(b.rng.normal(0, b.noise, b.n))
    b.lr *= 1e-4
    if b.eval_loss is not None:
        b.eval_loss = float(b.loss[0]) * 1.05 * np.exp(b.rng.normal(0, 0.003, b.eval_loss.size))
    return {"loss-not-decreasing"}, None, set()


@_fault("loss-plateau-after-drop")
def _plateau(b: _Base) -> tuple[set[str], int | None, set[str]]:
    start = float(b.rng.uniform(6.0, 11.0))
    level = float(b.rng.uniform(2.5, 4.0))
    k = int(b.n * b.rng.uniform(0.05, 0.12))
    clean = np.concatenate([np.linspace(start, level, k), np.full(b.n - k, level)])
    b.loss = clean * np.exp(b.rng.normal(0, min(b.noise, 0.02), b.n))
    b.eval_loss = None
    return {"loss-plateau-after-drop"}, _step(b, k), {"eval-too-rare"}


@_fault("grad-clipping-saturated")
def _clipping(b: _Base) -> tuple[set[str], int | None, set[str]]:
    # the harmful case: an optimizer whose step scales with the (clipped) gradient
    b.meta.setdefault("hyperparameters", {})["optim"] = "sgd"
    b.grad = b.rng.uniform(12.0, 40.0) * np.exp(b.rng.normal(0, 0.3, b.n))
    b.loss = b.loss * np.exp(b.rng.normal(0, 0.15, b.n))
    return {"grad-clipping-saturated"}, None, {"loss-noisy"}


@_fault("exploding-gradients")
def _exploding(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.4, 0.6)
    b.grad[i:] *= np.exp(np.linspace(0, np.log(b.rng.uniform(20.0, 80.0)), b.n - i))
    return (
        {"exploding-gradients"},
        _step(b, i),
        {"grad-clipping-saturated", "grad-clipping-saturated-adam"},
    )


@_fault("grad-norm-vanishing")
def _vanishing(b: _Base) -> tuple[set[str], int | None, set[str]]:
    b.grad[:] = 0.0
    b.loss = float(b.loss[0]) * np.exp(b.rng.normal(0, b.noise, b.n))
    b.eval_loss = None
    return {"grad-norm-vanishing"}, None, {"eval-too-rare", "loss-not-decreasing"}


@_fault("early-instability-no-warmup")
def _no_warmup(b: _Base) -> tuple[set[str], int | None, set[str]]:
    b.lr = np.concatenate([b.lr[b.warm :], np.full(b.warm, b.lr[-1])])  # same decay, no warmup
    b.meta["warmup_steps"] = 0
    k = max(3, b.n // 30)
    b.loss[1 : 1 + k] = (
        float(b.loss[0]) * b.rng.uniform(1.4, 2.0) * np.exp(b.rng.normal(0, 0.02, k))
    )
    return {"early-instability-no-warmup"}, _step(b, 1), set()


@_fault("spike-at-warmup-end")
def _warmup_spike(b: _Base) -> tuple[set[str], int | None, set[str]]:
    w = b.warm
    m = max(4, b.n // 20)
    b.loss[w : w + m] *= 1 + b.rng.uniform(0.6, 1.2) * np.exp(-np.arange(m) / (m / 3))
    return {"spike-at-warmup-end"}, _step(b, w), {"loss-spike", "loss-spike-slow-recovery"}


@_fault("lr-zero-early")
def _lr_zero(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.2, 0.5)
    b.lr[b.warm : i] = np.linspace(b.peak_lr, 0.0, i - b.warm)
    b.lr[i:] = 0.0
    b.loss[i:] = float(b.loss[i]) * np.exp(b.rng.normal(0, b.noise, b.n - i))
    return {"lr-zero-early"}, _step(b, i), {"lr-schedule-not-applied"}


@_fault("warmup-longer-than-run")
def _long_warmup(b: _Base) -> tuple[set[str], int | None, set[str]]:
    b.lr = b.peak_lr * (1 + np.arange(b.n)) / (3 * b.n)
    b.meta["warmup_steps"] = int(3 * b.n * b.every)
    return {"warmup-longer-than-run"}, None, set()


@_fault("lr-schedule-not-applied")
def _no_decay(b: _Base) -> tuple[set[str], int | None, set[str]]:
    b.meta["lr_scheduler_type"] = str(b.rng.choice(["cosine", "linear"]))
    b.lr[b.warm :] = b.peak_lr
    return {"lr-schedule-not-applied"}, None, set()


@_fault("loss-oscillating")
def _oscillate(b: _Base) -> tuple[set[str], int | None, set[str]]:
    period = int(b.rng.integers(8, 20))
    amp = float(b.rng.uniform(0.25, 0.5))
    phase = (np.arange(b.n) % period) / period
    saw = np.where(np.arange(b.n) > b.warm, amp * (phase - 0.5), 0.0)
    b.loss = b.loss * np.exp(saw)
    return {"loss-oscillating"}, _step(b, b.warm), set()


@_fault("loss-noisy")
def _noisy(b: _Base) -> tuple[set[str], int | None, set[str]]:
    x = np.linspace(0, 1, b.n)
    clean = float(b.loss[0]) * (0.45 + 0.55 * np.exp(-5 * x))
    b.loss = clean * np.exp(b.rng.normal(0, b.rng.uniform(0.35, 0.5), b.n))
    b.meta["train_batch_size"] = 1
    b.eval_loss = clean[b.eval_idx()] * float(b.rng.uniform(1.02, 1.1))
    return {"loss-noisy"}, None, {"loss-spike", "loss-oscillating"}


@_fault("loss-drops-at-epoch-boundaries")
def _epoch_drops(b: _Base) -> tuple[set[str], int | None, set[str]]:
    e = int(b.rng.integers(3, 6))
    b.epochs = float(e)
    per = b.n / e
    epoch_at = e * (1 + np.arange(b.n)) / b.n  # what _build logs as train/epoch
    which = np.ceil(epoch_at - 1e-9) - 1
    drop = b.rng.uniform(0.2, 0.4)
    x = np.linspace(0, 1, b.n)
    b.loss = (
        float(b.loss[0])
        * (1 - drop) ** which
        * np.exp(-0.3 * x)
        * np.exp(b.rng.normal(0, 0.01, b.n))
    )
    _eval_follows_train(b)
    return (
        {"loss-drops-at-epoch-boundaries"},
        _step(b, int(per)),
        {"overfitting", "loss-collapsed-to-zero"},
    )


@_fault("loss-collapsed-to-zero")
def _collapse(b: _Base) -> tuple[set[str], int | None, set[str]]:
    x = np.linspace(0, 1, b.n)
    b.loss = float(b.loss[0]) * np.exp(-np.log(b.rng.uniform(2e3, 2e4)) * np.minimum(1, 1.5 * x))
    b.eval_loss = None
    return {"loss-collapsed-to-zero"}, None, {"eval-too-rare", "loss-drops-at-epoch-boundaries"}


@_fault("throughput-drop")
def _throughput(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.3, 0.7)
    tp = b.rng.uniform(50, 5000) * np.exp(b.rng.normal(0, 0.03, b.n))
    tp[i:] *= b.rng.uniform(0.2, 0.45)
    b.extra["system/samples_per_second"] = tp
    return {"throughput-drop"}, _step(b, i), set()


@_fault("training-stall")
def _stall(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.2, 0.8)
    assert b.wall is not None
    b.wall[i:] += b.rng.uniform(900, 3600)
    return {"training-stall"}, _step(b, i), set()


@_fault("memory-growing")
def _memory(b: _Base) -> tuple[set[str], int | None, set[str]]:
    base = b.rng.uniform(4e9, 4e10)
    b.extra["system/memory_allocated"] = base * np.linspace(1.0, b.rng.uniform(1.5, 3.0), b.n)
    return {"memory-growing"}, None, set()


@_fault("run-ended-early")
def _ended(b: _Base) -> tuple[set[str], int | None, set[str]]:
    b.meta["max_steps"] = int(b.n * b.every / b.rng.uniform(0.3, 0.7))
    b.meta["finished"] = False
    b.meta["summary"] = {}
    return {"run-ended-early"}, _step(b, b.n - 1), {"still-improving-at-end"}


@_fault("loss-level-shift-after-resume")
def _resume(b: _Base) -> tuple[set[str], int | None, set[str]]:
    i = _at(b, 0.3, 0.7)
    b.loss[i:] *= b.rng.uniform(1.4, 2.0)
    b.meta["resumed"] = True
    b.meta["resumed_at_steps"] = [_step(b, i)]
    b.eval_loss = None
    return (
        {"loss-level-shift-after-resume"},
        _step(b, i),
        {"eval-too-rare", "loss-spike-slow-recovery"},
    )


def make_scenario(fault: str, seed: int) -> LabelledRun:
    """One labelled run: ``fault`` is a key of :data:`FAULTS`, or ``"healthy"``."""
    b = _healthy_base(seed)
    name = f"{fault}-{seed}"
    if fault == "healthy":
        return LabelledRun(name, _build(b, name), set(), None, healthy=True)
    expected, onset, also = FAULTS[fault](b)
    nan_step = None
    finite = np.isfinite(b.loss) & (b.loss != 0)
    if not bool(finite.all()):
        nan_step = _step(b, int(np.argmin(finite)))
    return LabelledRun(name, _build(b, name), expected, onset, False, nan_step, also)


def labelled_corpus(
    *, seed: int = 0, per_fault: int = 3, healthy: int = 40
) -> Iterator[LabelledRun]:
    """``healthy`` healthy runs and ``per_fault`` runs of every fault, all seeded."""
    for i in range(healthy):
        yield make_scenario("healthy", seed * 100_000 + i)
    for j, fault in enumerate(sorted(FAULTS)):
        for i in range(per_fault):
            yield make_scenario(fault, seed * 100_000 + 1000 * (j + 1) + i)
