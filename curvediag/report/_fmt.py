"""Stable number, time and setting formatting for the report (same input, same text)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

__all__ = ["elapsed", "md_cell", "num", "pct", "setting_value", "utc"]


def num(x: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits: ``3.663``, ``2.859e4``, ``NaN``."""
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    v = float(x)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Inf" if v > 0 else "-Inf"
    if v == 0:
        return "0"
    s = f"{v:.{digits}g}"
    if "e" in s:
        mant, exp = s.split("e")
        s = f"{mant}e{int(exp)}"
    return s


def pct(x: float | None, *, signed: bool = True) -> str:
    """A fraction as a percentage: ``+52.2%``."""
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:+.1%}" if signed else f"{x:.1%}"


def setting_value(x: Any) -> str:
    """A hyperparameter value as a user would write it: ``2e-4``, ``0.1``, ``True``, ``unset``."""
    if x is None:
        return "unset"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            return num(x)
        if x != 0 and abs(x) < 1e-3:
            mant, exp = f"{x:.2e}".split("e")
            mant = mant.rstrip("0").rstrip(".")
            return f"{mant}e{int(exp)}"
        if x == int(x) and abs(x) < 1e6:
            return f"{x:.1f}"
        return num(x)
    if isinstance(x, str):
        return x
    return json.dumps(x, sort_keys=True, default=str)


def utc(ts: float) -> str:
    """Seconds since the epoch as ``2026-11-21 22:16:19 UTC``."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def elapsed(seconds: float) -> str:
    """A duration: ``4.2 s``, ``12 min 05 s``, ``3 h 07 min``."""
    if not math.isfinite(seconds):
        return "n/a"
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.1f} s"
    total = round(s)
    h, rem = divmod(total, 3600)
    m, sec = divmod(rem, 60)
    if h == 0:
        return f"{m} min {sec:02d} s"
    if h < 48:
        return f"{h} h {m:02d} min"
    d, h = divmod(h, 24)
    return f"{d} d {h:02d} h"


def md_cell(text: Any, limit: int = 80) -> str:
    """Text safe for one markdown table cell (pipes escaped, newlines folded, shortened)."""
    s = setting_value(text) if not isinstance(text, str) else text
    s = " ".join(s.split())
    if len(s) > limit:
        s = s[: limit - 3] + "..."
    return s.replace("|", "\\|")
