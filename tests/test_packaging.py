"""A wheel install (not only an editable one) ships and finds the built-in rules."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import ROOT


def test_wheel_ships_rules_and_finds_them(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "-o",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("curvediag-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    rule_files = [n for n in names if n.startswith("curvediag/_builtin_rules/")]
    assert "curvediag/_builtin_rules/rule.schema.json" in rule_files
    assert sum(n.endswith(".test.yaml") for n in rule_files) >= 14
    # unpack it (an install without dependencies) ahead of the source tree on sys.path
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import curvediag, curvediag.ruleset.loader as L;"
        "d = L.builtin_rules_dir(); assert '_builtin_rules' in str(d), d;"
        "print(len(curvediag.load_rules()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert int(out.stdout.strip()) >= 14
