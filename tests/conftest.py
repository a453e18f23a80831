"""Shared paths for the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
HF_FIXTURES = FIXTURES / "hf"
DATA = Path(__file__).resolve().parent / "data"
CORPUS = ROOT.parent / "shared" / "corpus"


def corpus_files(prefix: str) -> list[Path]:
    """Corpus entries (folders) with this prefix; empty when the corpus is absent."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.iterdir() if p.is_dir() and p.name.startswith(prefix))


@pytest.fixture
def write_state(tmp_path: Path):
    """Write a trainer_state.json text into a temporary folder and return its path."""

    def _write(text: str, name: str = "trainer_state.json") -> Path:
        p = tmp_path / name
        p.write_text(text, encoding="utf-8")
        return p

    return _write
