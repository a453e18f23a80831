"""Machine and package facts the benchmark reports print beside their numbers."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path


def cpu_name() -> str:
    """The CPU model, from /proc/cpuinfo when there is one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions(packages: tuple[str, ...]) -> dict[str, str]:
    """Installed versions of ``packages`` ("not installed" when absent)."""
    out = {}
    for pkg in packages:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out
