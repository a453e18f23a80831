"""Fuzz the readers and the rule loader (issue 12): whatever bytes a user's folder holds, the
only exceptions are curvediag's own (the CurvediagError tree), and the input is never modified.

Kept fast: a modest ``max_examples`` per test and no deadline (CI budget).
"""

from __future__ import annotations

import contextlib
import json
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curvediag
from curvediag.errors import CurvediagError
from curvediag.ingest import load_runs

FUZZ = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# numbers users' logs really hold, and the absurd ones
_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
    st.integers(min_value=10**100, max_value=10**400),
    st.sampled_from([1e308, -1e308, 1e300, 2**53 + 1, 2**63, -(2**63) - 1, 0, -1]),
)
_SCALARS = st.one_of(_NUMBERS, st.booleans(), st.none(), st.text(max_size=12))
_KEYS = st.one_of(
    st.sampled_from(["step", "loss", "eval_loss", "grad_norm", "learning_rate", "epoch", "_step"]),
    st.text(max_size=10),
)
_JSON: Any = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def _json_text(obj: Any) -> str:
    try:
        return json.dumps(obj)  # NaN/Infinity as the bare tokens the Trainer writes
    except ValueError:  # an integer over Python's 4300-digit limit
        return "{}"


def _read_after_write(name: str, data: bytes) -> None:
    """Write ``data`` as ``name`` in a fresh folder, read it, and check the two promises."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        f = folder / name
        f.write_bytes(data)
        for target in (f, folder):
            try:
                runs = load_runs(target)
            except CurvediagError:
                continue
            for run in runs:
                run.to_dict(with_series=True)
        assert f.read_bytes() == data  # never modified
        assert sorted(p.name for p in folder.iterdir()) == [name]  # nothing written beside it


@FUZZ
@given(
    st.lists(st.dictionaries(_KEYS, _NUMBERS | _SCALARS, max_size=5), max_size=12),
    st.dictionaries(
        st.sampled_from(["global_step", "max_steps", "best_metric", "epoch", "logging_steps"]),
        _NUMBERS | _SCALARS,
        max_size=3,
    ),
)
def test_fuzz_trainer_state(history: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    text = _json_text({"log_history": history, **extra})
    _read_after_write("trainer_state.json", text.encode())


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_trainer_state_bytes(data: bytes) -> None:
    _read_after_write("trainer_state.json", b'{"log_history": [' + data)


_CELL = st.one_of(
    st.sampled_from(["", "nan", "inf", "-inf", "1e300", "1e308", "9" * 400, "abc", '"x,y"']),
    st.integers(min_value=-10, max_value=10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@FUZZ
@given(
    st.sampled_from(
        [
            "step,loss",
            "step,train/loss,eval/loss",
            "Wall time,Step,Value",
            "step,epoch,train_loss_step,val_loss_epoch",
            "_step,train/loss,_timestamp",
            "Step,run-a - train/loss,run-a - train/loss__MIN",
        ]
    ),
    st.lists(st.lists(_CELL, min_size=0, max_size=6), max_size=10),
    st.sampled_from(["log.csv", "metrics.csv", "train_loss.csv", "history.csv", "x.tsv"]),
)
def test_fuzz_csv_logs(header: str, rows: list[list[str]], name: str) -> None:
    sep = "\t" if name.endswith(".tsv") else ","
    text = "\n".join([header.replace(",", sep)] + [sep.join(r) for r in rows]) + "\n"
    _read_after_write(name, text.encode())


@FUZZ
@given(st.lists(st.dictionaries(_KEYS, _JSON, max_size=5), max_size=10), st.binary(max_size=40))
def test_fuzz_jsonl_logs(rows: list[dict[str, Any]], tail: bytes) -> None:
    text = "\n".join(_json_text(r) for r in rows) + "\n"
    _read_after_write("history.jsonl", text.encode() + tail)
    _read_after_write("wandb-summary.json", (_json_text(rows[0]) if rows else "{}").encode())


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_binary_logs(data: bytes) -> None:
    _read_after_write("events.out.tfevents.1.host", data)
    _read_after_write("run-abc.wandb", b":W&B\xe1\xbe\x00" + data)


# ------------------------------------------------------------------------------------------
# The rule loader
# ------------------------------------------------------------------------------------------
_RULE_BASE: dict[str, Any] = {
    "id": "fuzzed",
    "title": "A fuzzed rule",
    "category": "convergence",
    "severity": "warning",
    "requires": ["train/loss"],
    "params": {"level": 2.0},
    "when": {"all": [{"feature": "loss.tail", "op": ">", "value": "$level"}]},
    "evidence": "The tail sits at {loss.tail:.3g}, above {level}.",
    "why": "Checkpoints above this loss fail our eval gate.",
    "fixes": ["Train longer."],
}
_TEMPLATE = st.text(alphabet=string.printable, max_size=40).map(lambda t: "x {loss.tail" + t)


@FUZZ
@given(
    st.dictionaries(st.sampled_from(sorted(_RULE_BASE)), _JSON | _TEMPLATE, max_size=3),
    st.sampled_from(["dict", "yaml-bytes"]),
    st.binary(max_size=60),
)
def test_fuzz_rule_loader(changes: dict[str, Any], mode: str, junk: bytes) -> None:
    import yaml

    from curvediag.ruleset.loader import load_rule_file

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "fuzzed.yaml"
        if mode == "dict":
            try:
                text = yaml.safe_dump({**_RULE_BASE, **changes}).encode()
            except (ValueError, yaml.YAMLError):  # an integer yaml cannot print
                text = b"{}"
        else:
            text = yaml.safe_dump(_RULE_BASE).encode()[:200] + junk
        f.write_bytes(text)
        try:
            rules = load_rule_file(f)
        except CurvediagError:
            rules = []
        if rules:  # a rule that loads must also evaluate and render without surprises
            from curvediag.ruleset.loader import load_rules
            from curvediag.testing.synth import make_run

            ruleset = load_rules(str(f), builtin=False)
            d = curvediag.diagnose(make_run({"train/loss": "3.0-0.01x60"}), rules=ruleset)
            d.to_text()
        assert f.read_bytes() == text


@FUZZ
@given(st.lists(st.text(alphabet=string.printable, max_size=30), max_size=3))
def test_fuzz_overrides(items: list[str]) -> None:
    from curvediag.ruleset.loader import load_rules, parse_overrides

    with contextlib.suppress(CurvediagError):
        load_rules(overrides=parse_overrides(["overfitting.min_rise=" + i for i in items]))


@pytest.mark.parametrize("spec", ["1e400x3", "2.0x99999999999999999999", "1e300*1e300x20"])
def test_synthetic_notation_absurd_numbers(spec: str) -> None:
    from curvediag.testing.synth import expand

    try:
        values = expand(spec)
    except ValueError:
        return
    assert values.size <= 1_000_000
