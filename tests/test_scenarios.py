"""The labelled scenario generator, and the catalog's accuracy on a small held-out sample."""

from __future__ import annotations

import numpy as np

import curvediag
from curvediag.testing.scenarios import ALLOWED, FAULTS, labelled_corpus, make_scenario


def test_scenarios_are_seeded() -> None:
    a, b = make_scenario("overfitting", 11), make_scenario("overfitting", 11)
    assert np.array_equal(a.run.metrics["eval/loss"].values, b.run.metrics["eval/loss"].values)
    c = make_scenario("overfitting", 12)
    assert not np.array_equal(
        a.run.metrics["train/loss"].values, c.run.metrics["train/loss"].values
    )


def test_every_fault_names_a_rule() -> None:
    ids = set(curvediag.load_rules().ids)
    for fault in FAULTS:
        case = make_scenario(fault, 1)
        assert case.expected <= ids, fault
        assert case.also_ok <= ids | ALLOWED, fault


def test_catalog_accuracy_on_a_held_out_sample() -> None:
    """A regression guard: the full measurement is benchmarks/accuracy.py."""
    rules = curvediag.load_rules()
    tp = fp = fn = healthy_alarms = healthy = 0
    for case in labelled_corpus(seed=77, per_fault=1, healthy=15):
        d = curvediag.diagnose(case.run, rules=rules)
        fired = {f.rule_id for f in d.findings}
        loud = {f.rule_id for f in d.findings if f.severity.value != "info"}
        tp += len(case.expected & fired)
        fn += len(case.expected - fired)
        fp += len(loud - case.expected - case.also_ok - ALLOWED)
        if case.healthy:
            healthy += 1
            healthy_alarms += bool(loud)
    assert healthy_alarms == 0
    assert tp / (tp + fn) >= 0.9
    assert tp / (tp + fp) >= 0.9
