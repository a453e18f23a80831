#!/usr/bin/env bash
# A user's install: build the wheel, pip-install it (core dependencies only, from the package
# registry) into a clean venv outside the source tree, and use it as a user would.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$root/.venv/bin/python" -m build --wheel --no-isolation --outdir "$work/dist" "$root" >/dev/null
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "$work"/dist/curvediag-*.whl
cd "$work"  # not the source tree: the installed package, its built-in rules and its extras
"$work/venv/bin/curvediag" --help >/dev/null
"$work/venv/bin/curvediag" rules list >/dev/null
"$work/venv/bin/python" - "$root/fixtures/hf/overfit" <<'PY'
import sys

import curvediag

d = curvediag.diagnose(sys.argv[1])
assert d.verdict == "warning" and "overfitting" in d.finding_ids, d.finding_ids
assert len(repr(d)) < 300, "a short repr"
assert "<" in d._repr_html_()
frame = d.run.to_frame()
assert len(frame) > 0 and "train/loss" in frame.columns
try:  # matplotlib is the [plot] extra: a clear hint, not an ImportError
    d.plot()
except curvediag.MissingDependencyError as e:
    assert "curvediag[plot]" in str(e), e
else:
    raise AssertionError("plots drew without matplotlib installed")
print("wheel check: installed wheel diagnoses, displays and names its plot extra")
PY
"$work/venv/bin/curvediag" report "$root/fixtures/hf/overfit" -o "$work/pm" --no-plots >/dev/null
test -s "$work/pm/postmortem.md"
# the other things a user does with the installed tool (issue: every item from a fresh install)
"$work/venv/bin/python" - "$root/fixtures/hf" <<'PY'
import sys
from pathlib import Path

import curvediag

hf = Path(sys.argv[1])
table = curvediag.diagnose_many([hf / "overfit", hf / "healthy_cosine"], jobs=1)
assert len(table) == 2 and set(table["verdict"]) <= {"warning", "healthy"}, table
assert "overfitting" in table.loc[table["run_name"] == "overfit", "findings"].iloc[0]
assert len(curvediag.diagnose(hf / "overfit").to_frame()) >= 1
print("wheel check: diagnose_many and Diagnosis.to_frame work")
PY
# a multi-run W&B export: pick one run by name
"$work/venv/bin/curvediag" diagnose "$root/tests/data/tables/multi_run_minmax.csv" \
    --run dashing-puddle-7 --format json --fail-on never >/dev/null
# a user's own rule on an eval metric, tested the way the README says
mkdir -p "$work/my_rules"
cat >"$work/my_rules/accuracy-too-low.yaml" <<'YAML'
id: accuracy-too-low
title: Eval accuracy below what we ship
category: generalization
severity: warning
live: false
requires: [eval/accuracy]
params: {floor: 0.9}
when:
  all:
    - {feature: score.best, op: "<", value: $floor}
steps: [run.last_step, run.last_step]
evidence: "The best eval accuracy was {score.best:.3f}, below {floor}."
why: "Below the floor the model is not shipped."
fixes:
  - "Train longer or on more data."
YAML
cat >"$work/my_rules/accuracy-too-low.test.yaml" <<'YAML'
rule: accuracy-too-low
cases:
  - name: low
    expect: fire
    expect_values: {score.best: [0.7, 0.7]}
    series:
      train/loss: {gen: decay, n: 40}
      eval/accuracy: "0.5 0.6 0.7 0.7"
  - name: high
    expect: silent
    series:
      train/loss: {gen: decay, n: 40}
      eval/accuracy: "0.8 0.9 0.95 0.96"
YAML
"$work/venv/bin/curvediag" rules test "$work/my_rules" >/dev/null
echo "wheel check: --run, a user's rule on eval accuracy and its tests work from the wheel"
