"""Byte-for-byte outputs on the committed fixtures: the postmortem markdown, the text diagnosis
and the JSON diagnosis of every Trainer and TensorBoard fixture.

A change that alters any of them fails here with a unified diff. When a change is meant to alter
the output (a new rule, a better figure), regenerate with

    CURVEDIAG_UPDATE_GOLDEN=1 pytest tests/test_golden.py

and review ``git diff tests/data/golden`` before committing: the diff is the behaviour change.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest

import curvediag
from curvediag.report.markdown import postmortem_markdown

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden"
FIXTURES = sorted(
    p
    for p in [*(ROOT / "fixtures" / "hf").iterdir(), *(ROOT / "fixtures" / "tensorboard").iterdir()]
    if p.is_dir()
)
UPDATE = os.environ.get("CURVEDIAG_UPDATE_GOLDEN") == "1"


def _rounded(value: object) -> object:
    """Floats to 12 significant digits: the last bits of a sum differ between numpy and BLAS
    builds, which is not a change of behaviour."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _outputs(path: Path) -> dict[str, str]:
    rel = path.relative_to(ROOT).as_posix()
    diag = curvediag.diagnose(rel)
    data = json.loads(diag.to_json())
    data.pop("features", None)  # thousands of numbers; the findings quote what matters
    return {
        "md": postmortem_markdown(diag, images={"loss": "loss.png"}),
        "txt": diag.to_text(),
        "json": json.dumps(_rounded(data), indent=1, sort_keys=True) + "\n",
    }


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_outputs_unchanged(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    got = _outputs(path)
    for ext, text in got.items():
        golden = GOLDEN / f"{path.parent.name}__{path.name}.{ext}"
        if UPDATE:
            golden.write_text(text, encoding="utf-8", newline="\n")
            continue
        want = golden.read_text(encoding="utf-8")
        if text != want:
            diff = "".join(
                difflib.unified_diff(
                    want.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=str(golden.relative_to(ROOT)),
                    tofile="now",
                )
            )
            pytest.fail(f"{golden.name} changed:\n{diff[:6000]}")


def test_a_share_given_back_is_never_above_the_whole() -> None:
    """'giving back 23932% of the decrease' was quoted for a loss that barely fell before it
    blew up: a share of a decrease is at most all of it."""
    import re

    shares = [
        int(m)
        for golden in GOLDEN.glob("*.md")
        for m in re.findall(r"giving back (\d+)% of the decrease", golden.read_text("utf-8"))
    ]
    assert shares, "no golden output quotes the share (the check would test nothing)"
    assert max(shares) <= 100, shares
