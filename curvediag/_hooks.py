"""Presentation hooks: how the data model shows itself without knowing who draws it.

:mod:`curvediag.model` holds data only. Its conveniences (``Diagnosis.to_text()``, the short
``repr``, Jupyter's ``_repr_html_``, ``to_frame()``, ``plot()``) call :func:`present` with a
name; the top of the package (``curvediag/__init__.py``) registers, for each name, the function
in the presentation layer (:mod:`curvediag.render`, :mod:`curvediag.display`,
:mod:`curvediag.report`) that does the work. Lower layers never import higher ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["present", "present_text", "register"]

_PRESENTERS: dict[str, Callable[..., Any]] = {}


def register(**presenters: Callable[..., Any]) -> None:
    """Register (or replace) presenters by name."""
    _PRESENTERS.update(presenters)


def present(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call the presenter registered under ``name``."""
    fn = _PRESENTERS.get(name)
    if fn is None:  # only when curvediag/__init__.py was bypassed
        raise RuntimeError(f"no curvediag presenter {name!r} is registered")
    return fn(*args, **kwargs)


def present_text(name: str, *args: Any, **kwargs: Any) -> str:
    """:func:`present` for the presenters that return text (reprs, HTML, markdown)."""
    text = present(name, *args, **kwargs)
    if not isinstance(text, str):
        raise TypeError(f"curvediag presenter {name!r} returned {type(text).__name__}, not text")
    return text
