"""Measure how right the rule catalog is, and what it adds over hand-written threshold alerts.

Corpus: the real-Trainer fixtures in ``fixtures/hf/`` (each with a ``label.yaml``) plus seeded
synthetic scenarios from :mod:`curvediag.testing.scenarios` (a seed the rules were NOT tuned on).
Writes ``benchmarks/results/accuracy.md``:

- per rule and overall: precision, recall, false alarms on healthy runs, onset-step error;
- the same numbers for the crude alerts practitioners write by hand;
- early warning: on runs that end in NaN or divergence, how many steps before the blow-up
  curvediag first flags a precursor when it only sees the log up to each point in time.

Usage::

    python benchmarks/accuracy.py [--seed 2026] [--per-fault 4] [--healthy 60] [-o FILE]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

import curvediag
from curvediag.model import Diagnosis, Run
from curvediag.testing.scenarios import ALLOWED, FAULTS, LabelledRun, labelled_corpus

ROOT = Path(__file__).resolve().parents[1]
#: Findings that count as a warning sign of a coming blow-up: gradients climbing, clipping
#: saturating, the loss trend turning, spikes, oscillation.
PRECURSORS = {
    "exploding-gradients",
    "grad-clipping-saturated",
    "loss-diverging",
    "loss-spike",
    "loss-spike-slow-recovery",
    "loss-level-shift",
    "loss-oscillating",
    "spike-at-warmup-end",
    "early-instability-no-warmup",
}


@dataclass
class Result:
    case: LabelledRun
    source: str  # "fixture" | "synthetic"
    fired: set[str]
    severities: dict[str, str]
    onsets: dict[str, int | None]
    baseline: set[str] = field(default_factory=set)
    folded: set[str] = field(default_factory=set)  # echoes folded into another finding


# ------------------------------------------------------------------------------------------
# Corpus
# ------------------------------------------------------------------------------------------
def fixture_cases() -> list[LabelledRun]:
    all_ids = set(curvediag.load_rules().ids)
    cases = []
    for folder in sorted((ROOT / "fixtures" / "hf").iterdir()):
        label_file = folder / "label.yaml"
        if not label_file.is_file():
            continue
        label = yaml.safe_load(label_file.read_text())
        run = curvediag.load_run(folder)
        expected = set(label.get("expected_findings") or []) - ALLOWED
        healthy = folder.name.startswith("healthy")
        measured = label.get("measured") or {}
        nan_step = measured.get("first_nonfinite_grad_norm_step") or measured.get(
            "first_nonfinite_loss_step"
        )
        onset = _fixture_onset(folder.name, measured)
        # a fixture label says what must fire and what must not; other findings are not judged
        must_not = set(label.get("must_not_fire") or [])
        others = all_ids - must_not - expected
        if healthy:
            others = set()
        cases.append(
            LabelledRun(
                name=folder.name,
                run=run,
                expected=expected,
                onset=onset,
                healthy=healthy,
                nan_step=int(nan_step) if nan_step else None,
                also_ok=others,
            )
        )
    return cases


def _fixture_onset(name: str, m: dict[str, object]) -> int | None:
    keys = {
        "overfit": "eval_loss_min_step",
        "bad_batch_spike": "spike_step",
        "nan_filter_on": "first_nonfinite_grad_norm_step",
        "nan_filter_off": "first_nonfinite_grad_norm_step",
    }
    v = m.get(keys.get(name, ""))
    return int(v) if isinstance(v, (int, float)) else None


# ------------------------------------------------------------------------------------------
# The hand-written alerts a practitioner would use (the baseline)
# ------------------------------------------------------------------------------------------
BASELINE_RULES = {
    "spike": {"loss-spike", "loss-spike-slow-recovery", "spike-at-warmup-end", "loss-level-shift"},
    "grad>10": {"exploding-gradients", "grad-clipping-saturated"},
    "eval+5%": {"overfitting", "eval-loss-rising"},
    "non-finite": {
        "loss-nonfinite-at-start",
        "loss-nonfinite-after-grad-growth",
        "loss-nonfinite-sudden",
    },
}


def baseline_alerts(run: Run) -> set[str]:
    """spike = loss > 2x the mean of the last 10 logs; grad norm > 10 for 3 logs; eval loss up
    5% on its previous value; any non-finite loss."""
    fired: set[str] = set()
    loss = run.get("train/loss")
    if loss is not None:
        v = loss.values
        if not bool(np.all(np.isfinite(v))):
            fired.add("non-finite")
        for i in range(10, v.size):
            prev = v[i - 10 : i]
            prev = prev[np.isfinite(prev)]
            if prev.size and np.isfinite(v[i]) and v[i] > 2 * float(np.mean(prev)):
                fired.add("spike")
                break
    grad = run.get("train/grad_norm")
    if grad is not None:
        high = np.nan_to_num(grad.values, nan=0.0) > 10
        run_len = 0
        for h in high:
            run_len = run_len + 1 if h else 0
            if run_len >= 3:
                fired.add("grad>10")
                break
    ev = run.get("eval/loss")
    if ev is not None:
        e = ev.values
        if bool(np.any((e[1:] > 1.05 * e[:-1]) & np.isfinite(e[1:]))):
            fired.add("eval+5%")
        if not bool(np.all(np.isfinite(e))):
            fired.add("non-finite")
    return fired


# ------------------------------------------------------------------------------------------
# Scoring
# ------------------------------------------------------------------------------------------
def diagnose_case(case: LabelledRun, rules: curvediag.RuleSet, source: str) -> Result:
    d: Diagnosis = curvediag.diagnose(case.run, rules=rules)
    return Result(
        case,
        source,
        {f.rule_id for f in d.findings},
        {f.rule_id: f.severity.value for f in d.findings},
        {f.rule_id: f.onset_step for f in d.findings},
        baseline_alerts(case.run),
        {rel.split(":", 1)[0] for f in d.findings for rel in f.related},
    )


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def score(results: list[Result], rule_ids: list[str]) -> dict[str, object]:
    per: dict[str, Counter[str]] = defaultdict(Counter)
    onset_err: dict[str, list[float]] = defaultdict(list)
    for r in results:
        c = r.case
        for rid in rule_ids:
            fired = rid in r.fired
            if rid in c.expected:
                fired = fired or rid in r.folded  # detected, reported inside its cause
                per[rid]["tp" if fired else "fn"] += 1
                o = r.onsets.get(rid)
                if fired and c.onset is not None and o is not None:
                    span = max(1, c.run.last_step or 1)
                    onset_err[rid].append(abs(o - c.onset) / span)
            elif fired and rid not in c.also_ok and rid not in ALLOWED:
                per[rid]["fp"] += 1
                if c.healthy:
                    per[rid]["healthy_fp"] += 1
    return {"per": per, "onset": onset_err}


def healthy_stats(results: list[Result]) -> dict[str, float]:
    healthy = [r for r in results if r.case.healthy]
    crit = sum(any(s == "critical" for s in r.severities.values()) for r in healthy)
    warn = sum(
        any(s in ("warning", "critical") and rid not in ALLOWED for rid, s in r.severities.items())
        for r in healthy
    )
    base = sum(bool(r.baseline) for r in healthy)
    n = len(healthy)
    return {
        "n": n,
        "critical": crit / n if n else 0.0,
        "warning": warn / n if n else 0.0,
        "baseline": base / n if n else 0.0,
    }


def baseline_score(results: list[Result]) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        for alert, family in BASELINE_RULES.items():
            relevant = bool(family & r.case.expected)
            fired = alert in r.baseline
            if relevant:
                out[alert]["tp" if fired else "fn"] += 1
            elif fired:
                out[alert]["fp"] += 1
    return out


def curvediag_family_score(results: list[Result]) -> dict[str, Counter[str]]:
    """curvediag scored on the same four families as the baseline, for a like-for-like row."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        for alert, family in BASELINE_RULES.items():
            relevant = bool(family & r.case.expected)
            fired = bool(family & r.fired)
            ok_extra = bool(family & (r.case.also_ok | ALLOWED))
            if relevant:
                out[alert]["tp" if fired else "fn"] += 1
            elif fired and not ok_extra:
                out[alert]["fp"] += 1
    return out


# ------------------------------------------------------------------------------------------
# Early warning
# ------------------------------------------------------------------------------------------
def blow_up_step(case: LabelledRun) -> int | None:
    """First non-finite value, else (divergence) the first log at 2x the best loss so far."""
    if case.nan_step is not None:
        return case.nan_step
    if "loss-diverging" not in case.expected:
        return None
    s = case.run.metrics["train/loss"]
    best = np.minimum.accumulate(np.where(np.isfinite(s.values), s.values, np.inf))
    hit = np.flatnonzero(s.values >= 2 * best)
    return int(s.steps[hit[0]]) if hit.size else None


def first_flag(case: LabelledRun, rules: curvediag.RuleSet, until: int | None) -> int | None:
    """The first log step at which a precursor finding fires on the log cut at that step."""
    steps = case.run.metrics["train/loss"].steps
    if until is not None:
        steps = steps[steps < until]
    for st in steps[5:]:
        d = curvediag.diagnose(case.run.head(int(st)), rules=rules)
        if any(f.rule_id in PRECURSORS for f in d.findings):
            return int(st)
    return None


# ------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--per-fault", type=int, default=4)
    ap.add_argument("--healthy", type=int, default=60)
    ap.add_argument("-o", "--output", default=str(ROOT / "benchmarks" / "results" / "accuracy.md"))
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    rules = curvediag.load_rules()
    rule_ids = [r.id for r in rules if r.severity.value != "info"]
    results = [diagnose_case(c, rules, "fixture") for c in fixture_cases()]
    for c in labelled_corpus(seed=args.seed, per_fault=args.per_fault, healthy=args.healthy):
        results.append(diagnose_case(c, rules, "synthetic"))
    scored = score(results, rule_ids)
    per = scored["per"]
    onset = scored["onset"]
    assert isinstance(per, dict) and isinstance(onset, dict)
    hs = healthy_stats(results)

    tp = sum(c["tp"] for c in per.values())
    fp = sum(c["fp"] for c in per.values())
    fn = sum(c["fn"] for c in per.values())
    prec, rec = _ratio(tp, tp + fp), _ratio(tp, tp + fn)

    # early warning
    leads: list[tuple[str, int, int, int | None]] = []
    for r in results:
        blow = blow_up_step(r.case)
        if blow is None:
            continue
        flag = first_flag(r.case, rules, blow)
        leads.append((r.case.name, blow, r.case.run.last_step or blow, flag))
    healthy_cases = [r.case for r in results if r.case.healthy][:20]
    false_flags = sum(first_flag(c, rules, None) is not None for c in healthy_cases)
    # a NaN at the first log or a sudden NaN has no precursor by definition
    possible = [
        x
        for x, r in zip(
            leads, [r for r in results if blow_up_step(r.case) is not None], strict=True
        )
        if not ({"loss-nonfinite-at-start", "loss-nonfinite-sudden"} & r.case.expected)
    ]
    lead_steps = [b - f for _, b, _, f in possible if f is not None]
    lead_frac = [(b - f) / max(1, last) for _, b, last, f in possible if f is not None]
    elapsed = time.perf_counter() - t0

    n_fix = sum(r.source == "fixture" for r in results)
    n_syn = len(results) - n_fix
    faults = [r for r in results if r.case.expected]
    lines = [
        "# curvediag rule accuracy",
        "",
        f"Generated by `benchmarks/accuracy.py --seed {args.seed} --per-fault {args.per_fault} "
        f"--healthy {args.healthy}` in {elapsed:.0f} s (Python {platform.python_version()}, "
        f"curvediag {curvediag.__version__}, {len(rules)} rules).",
        "",
        f"Corpus: {len(results)} labelled runs: {n_fix} real-Trainer fixtures (`fixtures/hf/*/label.yaml`) "
        f"and {n_syn} seeded synthetic runs (`curvediag.testing.scenarios`, {len(FAULTS)} fault types, seed "
        f"{args.seed}, which the thresholds were not tuned on); {hs['n']} are healthy and "
        f"{len(faults)} carry a labelled fault.",
        "",
        "Counting: a finding is a true positive when its rule is in the run's label; a false "
        "positive when it is not, unless it is an info note (`healthy-converged`, "
        "`still-improving-at-end`, `eval-too-rare`) or an accepted echo of the same fault listed "
        "in the label. Onset error is |found - labelled onset| as a fraction of the run.",
        "",
        "## Overall",
        "",
        "| | curvediag | hand-written alerts |",
        "|---|---:|---:|",
    ]
    fam = curvediag_family_score(results)
    base = baseline_score(results)

    def pr(c: dict[str, Counter[str]]) -> tuple[float | None, float | None]:
        t = sum(x["tp"] for x in c.values())
        f = sum(x["fp"] for x in c.values())
        n_ = sum(x["fn"] for x in c.values())
        return _ratio(t, t + f), _ratio(t, t + n_)

    fam_p, fam_r = pr(fam)
    base_p, base_r = pr(base)
    lines += [
        f"| precision, all {len(rule_ids)} warning/critical rules | {_fmt(prec)} ({tp}/{tp + fp}) | - |",
        f"| recall, all labelled faults | {_fmt(rec)} ({tp}/{tp + fn}) | - |",
        f"| precision on the 4 fault families the alerts cover | {_fmt(fam_p)} | {_fmt(base_p)} |",
        f"| recall on those 4 families | {_fmt(fam_r)} | {_fmt(base_r)} |",
        f"| healthy runs with any critical finding | {hs['critical']:.1%} | - |",
        f"| healthy runs with any warning or critical finding (alert for the baseline) | {hs['warning']:.1%} | {hs['baseline']:.1%} |",
    ]
    if lead_steps:
        lines += [
            f"| early warning: median lead before NaN / blow-up, over runs with a precursor by design ({len(lead_steps)}/{len(possible)} flagged in advance) | "
            f"{statistics.median(lead_steps):.0f} steps ({statistics.median(lead_frac):.1%} of the run) | - |",
            f"| the same replay on {len(healthy_cases)} healthy runs: runs flagged at some point | "
            f"{false_flags}/{len(healthy_cases)} | - |",
        ]
    lines += [
        "",
        "## Per rule",
        "",
        "| rule | severity | TP | FP | FN | precision | recall | false alarms on healthy | median onset error |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sev = {r.id: r.severity.value for r in rules}
    for rid in rule_ids:
        c = per.get(rid, Counter())
        p_ = _ratio(c["tp"], c["tp"] + c["fp"])
        r_ = _ratio(c["tp"], c["tp"] + c["fn"])
        oe = onset.get(rid) or []
        lines.append(
            f"| `{rid}` | {sev[rid]} | {c['tp']} | {c['fp']} | {c['fn']} | {_fmt(p_)} | {_fmt(r_)} | "
            f"{c['healthy_fp']}/{hs['n']} | {('%.1f%%' % (100 * statistics.median(oe))) if oe else '-'} |"
        )
    lines += [
        "",
        "## Hand-written alerts, per family",
        "",
        "| alert | TP | FP | FN | precision | recall | curvediag precision | curvediag recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for alert in BASELINE_RULES:
        b = base.get(alert, Counter())
        f_ = fam.get(alert, Counter())
        lines.append(
            f"| {alert} | {b['tp']} | {b['fp']} | {b['fn']} | {_fmt(_ratio(b['tp'], b['tp'] + b['fp']))} | "
            f"{_fmt(_ratio(b['tp'], b['tp'] + b['fn']))} | {_fmt(_ratio(f_['tp'], f_['tp'] + f_['fp']))} | "
            f"{_fmt(_ratio(f_['tp'], f_['tp'] + f_['fn']))} |"
        )
    lines += [
        "",
        "## Early warning",
        "",
        "Each run below ends in NaN or divergence. curvediag is given the log cut at every logged "
        "step, and the first step at which a precursor finding fires is recorded. Precursors: "
        + ", ".join(f"`{p}`" for p in sorted(PRECURSORS))
        + ". A sudden NaN (fp16 overflow, one bad batch) has no precursor by definition; a NaN "
        "from the first log cannot be anticipated.",
        "",
        "| run | blow-up step | first flagged at | lead (steps) |",
        "|---|---:|---:|---:|",
    ]
    for name, blow, _, flag in leads:
        lead = "-" if flag is None else str(blow - flag)
        lines.append(f"| {name} | {blow} | {flag if flag is not None else 'not before'} | {lead} |")
    misses = [
        (
            r.case.name,
            sorted(r.case.expected - r.fired - r.folded),
            sorted(r.fired - r.case.expected - r.case.also_ok - ALLOWED),
        )
        for r in results
        if (r.case.expected - r.fired - r.folded)
        or (r.fired - r.case.expected - r.case.also_ok - ALLOWED)
    ]
    lines += ["", "## Misses and false alarms", ""]
    if not misses:
        lines.append("None.")
    for name, fn_, fp_ in misses:
        lines.append(f"- `{name}`: missed {fn_ or '-'}, extra {fp_ or '-'}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines[:22]))
    print(f"... written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
