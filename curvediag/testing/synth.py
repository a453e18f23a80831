"""Synthetic training curves: compact series notation and seeded curve generators.

Rule test cases, the accuracy benchmark and users' own tests build runs from here.

Compact notation (space-separated tokens, expanded left to right):

- ``2.5``          one value
- ``2.5x4``        four copies of 2.5
- ``2.0+0.1x5``    five values from 2.0, adding 0.1 each time (2.0 2.1 2.2 2.3 2.4)
- ``2.0-0.1x5``    the same, subtracting
- ``8*0.5x4``      four values from 8, multiplying by 0.5 each time (8 4 2 1)
- ``nan`` / ``inf`` / ``-inf``  non-finite values (``nanx3`` repeats)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from curvediag.model import Run, RunMeta
from curvediag.normalize import MAX_ABS_VALUE, MAX_STEP, build_series, choose_primary_eval

__all__ = ["MAX_POINTS", "curve", "expand", "make_run"]

#: The most points one series may expand to (a typo such as ``2.0x99999999999`` would
#: otherwise try to allocate terabytes).
MAX_POINTS = 1_000_000

_NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf)"
_TOKEN = re.compile(rf"^(?P<a>{_NUM})(?:(?P<op>[-+*])(?P<b>{_NUM}))?(?:x(?P<n>\d+))?$", re.I)


def expand(spec: str) -> np.ndarray:
    """Expand compact notation (see module docstring) into float64 values.

    Raises:
        ValueError: A token is not valid notation.
    """
    out: list[float] = []
    for tok in spec.split():
        m = _TOKEN.match(tok)
        if not m:
            raise ValueError(f"bad series token {tok!r} (examples: 2.5  2.5x4  2.0-0.1x5  8*0.5x4)")
        a = float(m.group("a"))
        count = m.group("n") or "1"
        n = int(count) if len(count) <= 9 else MAX_POINTS + 1
        if len(out) + n > MAX_POINTS:
            raise ValueError(f"series {tok!r}: more than {MAX_POINTS:,} points")
        op, b = m.group("op"), m.group("b")
        if op is None:
            out += [a] * n
            continue
        bv = float(b)
        with np.errstate(all="ignore"):  # 1e300*1e300x5 overflows to inf, as it would in a log
            if op == "+":
                out += list(a + bv * np.arange(n))
            elif op == "-":
                out += list(a - bv * np.arange(n))
            else:
                out += list(a * bv ** np.arange(n))
    return np.asarray(out, dtype=np.float64)


def curve(
    kind: str = "decay",
    *,
    n: int = 100,
    start: float = 3.0,
    end: float = 1.0,
    rate: float = 5.0,
    noise: float = 0.0,
    seed: int = 0,
    spikes: Mapping[int, float] | None = None,
    rise_from: float | None = None,
    rise: float = 0.0,
) -> np.ndarray:
    """A seeded synthetic curve.

    Args:
        kind: ``decay`` (exponential decay from ``start`` to ``end``), ``flat`` (``start``
            throughout) or ``linear`` (``start`` to ``end``).
        n: Number of points.
        rate: Decay speed (higher = faster early drop).
        noise: Multiplicative log-normal noise (0.05 = ~5%).
        seed: RNG seed.
        spikes: Index -> multiplier applied at that point (an isolated spike).
        rise_from: Fraction of the run after which the curve rises (overfitting, divergence).
        rise: Total fractional rise by the end of the run.
    """
    if not 0 < n <= MAX_POINTS:
        raise ValueError(f"n={n}: a curve has 1 to {MAX_POINTS:,} points")
    x = np.linspace(0.0, 1.0, n)
    if kind == "decay":
        y = end + (start - end) * np.exp(-rate * x)
    elif kind == "flat":
        y = np.full(n, start)
    elif kind == "linear":
        y = start + (end - start) * x
    else:
        raise ValueError(f"unknown curve kind {kind!r} (decay, flat, linear)")
    if rise_from is not None and rise:
        after = np.clip((x - rise_from) / max(1e-9, 1 - rise_from), 0, None)
        y = y * (1 + rise * after)
    if noise:
        rng = np.random.default_rng(seed)
        y = y * np.exp(rng.normal(0.0, noise, n))
    for i, mult in (spikes or {}).items():
        y[int(i)] *= mult
    return np.asarray(y, dtype=np.float64)


def _values(spec: Any) -> np.ndarray:
    if isinstance(spec, str):
        return expand(spec)
    if isinstance(spec, (list, tuple, np.ndarray)) or (
        isinstance(spec, (int, float)) and not isinstance(spec, bool)
    ):
        items = spec if isinstance(spec, (list, tuple, np.ndarray)) else [spec]
        if len(items) > MAX_POINTS:
            raise ValueError(f"more than {MAX_POINTS:,} points")
        try:
            return np.asarray([float(v) for v in items], dtype=np.float64)
        except (TypeError, OverflowError) as exc:
            raise ValueError(f"series values must be numbers ({exc})") from None
    raise ValueError(f"series spec must be notation, a list or a mapping, not {spec!r}")


def make_run(
    series: Mapping[str, Any],
    *,
    every: int = 10,
    meta: Mapping[str, Any] | None = None,
    name: str = "synthetic",
    wall_time: Mapping[str, Any] | None = None,
) -> Run:
    """Build a :class:`Run` from series specs.

    Each spec is compact notation, a list of values, or a mapping with ``values`` (notation or
    list) or ``gen`` (a :func:`curve` kind plus its keyword arguments), and optionally ``every``
    (steps between points, default ``every``) and ``first_step`` (default ``every``).
    ``wall_time`` maps a metric to its wall-clock seconds per point (same notation).
    """
    metrics = {}
    for metric, spec in series.items():
        step_every, first = every, None
        if isinstance(spec, Mapping):
            spec = dict(spec)
            step_every = int(spec.pop("every", every))
            first = spec.pop("first_step", None)
            if "gen" in spec:
                kind = spec.pop("gen")
                values = curve(kind, **spec)
            else:
                values = _values(spec.pop("values"))
        else:
            values = _values(spec)
        start = step_every if first is None else int(first)
        if step_every < 1 or abs(start) + step_every * values.size > MAX_STEP:
            raise ValueError(
                f"{metric}: steps from {start} every {step_every} are out of range "
                "(every must be 1 or more and the last step at most 2**53)"
            )
        if values.size > MAX_POINTS:
            raise ValueError(f"{metric}: more than {MAX_POINTS:,} points")
        steps = start + step_every * np.arange(values.size)
        wall = None
        if wall_time and metric in wall_time:
            wall = _values(wall_time[metric])
            if wall.size != values.size:
                raise ValueError(f"{metric}: {wall.size} wall times for {values.size} values")
        metrics[metric], _ = build_series(metric, steps, values, wall)
    for key, value in (meta or {}).items():
        num = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if num is not None and abs(num) > (MAX_STEP if isinstance(num, int) else MAX_ABS_VALUE):
            raise ValueError(f"meta {key}: {num!r} is out of range")
    run = Run(
        source=f"<{name}>",
        format="synthetic",
        name=name,
        meta=RunMeta.model_validate(dict(meta or {})),
        metrics=metrics,
    )
    choose_primary_eval(run)
    return run
