"""The batch progress bar (kept here for imports; it lives in :mod:`curvediag.progress`)."""

from curvediag.progress import Progress

__all__ = ["Progress"]
