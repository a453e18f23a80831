"""Every exception and warning curvediag raises, under one base class.

::

    CurvediagError
    ├── IngestError                     reading a run failed (always names the file)
    │   ├── UnrecognizedFormatError     no reader recognises the path
    │   └── MalformedRunError(+ValueError)  the file is recognised but broken
    ├── RuleError
    │   └── RuleSchemaError(+ValueError)    a rule file is invalid (names file and rule id)
    ├── InsufficientDataError           internal: turns into a skipped rule
    ├── MissingDependencyError(+ImportError)  names the extra to install
    └── OutOfMemoryError(+MemoryError)  a run too large for this machine (names the run)
    CurvediagWarning(UserWarning)       recoverable oddities (truncated records, resumes, ...)
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "CurvediagError",
    "CurvediagWarning",
    "IngestError",
    "InsufficientDataError",
    "MalformedRunError",
    "MissingDependencyError",
    "OutOfMemoryError",
    "RuleError",
    "RuleSchemaError",
    "UnrecognizedFormatError",
]


class CurvediagError(Exception):
    """Base class of every error curvediag raises on purpose."""


class IngestError(CurvediagError):
    """A run could not be read. ``path`` is the file or folder at fault."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnrecognizedFormatError(IngestError):
    """No reader recognises the path as a training log."""


class MalformedRunError(IngestError, ValueError):
    """The file is of a known format but its content is broken."""


class RuleError(CurvediagError):
    """Base class for problems with rules."""


class RuleSchemaError(RuleError, ValueError):
    """A rule file is invalid. Names the file and, when known, the rule id."""

    def __init__(self, path: str | Path | None, rule_id: str | None, problem: str) -> None:
        self.path = None if path is None else str(path)
        self.rule_id = rule_id
        self.problem = problem
        where = self.path or "<rules>"
        if rule_id:
            where += f" (rule {rule_id!r})"
        super().__init__(f"{where}: {problem}")


class InsufficientDataError(CurvediagError):
    """A feature cannot be computed from the data at hand (reported as a skip)."""


class MissingDependencyError(CurvediagError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the '{package}' package: pip install 'curvediag[{extra}]'"
        )


class OutOfMemoryError(CurvediagError, MemoryError):
    """The machine ran out of memory on one run: ``where`` names the run, ``stage`` what was
    being done (reading, diagnosing, writing the report)."""

    def __init__(self, where: str | Path, stage: str) -> None:
        self.where = str(where)
        self.stage = stage
        super().__init__(
            f"{self.where}: out of memory while {stage}; free memory or diagnose it on a machine "
            "with more RAM"
        )


class CurvediagWarning(UserWarning):
    """A recoverable oddity in the input (truncated record, resumed run, sampled export)."""
