"""The package version (a module of its own, so that every layer can quote it)."""

__version__ = "0.1.0"
