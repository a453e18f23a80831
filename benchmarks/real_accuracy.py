"""How right curvediag is on real public training runs that nobody on the team made.

Each folder of ``benchmarks/real_runs/`` holds a real log and a ``label.yaml`` written from the
plots before curvediag was run on it (protocol: ``benchmarks/real_runs/LABELLING.md``); the
``tune`` runs keep only their label there and are read from the shared corpus beside the project
(``../shared/corpus``, or ``$CURVEDIAG_CORPUS``), which holds the same files byte for byte. This
script diagnoses every labelled run and scores the findings against the labels, side by side
with two baselines run on the same series:

- **hand-written alerts**: loss > 2x the mean of the last 10 logs, grad norm > 10 for three
  logs in a row, eval loss up > 5% on the previous evaluation, any non-finite loss;
- **SageMaker Debugger's default rules**: LossNotDecreasing (every 10 logs the loss must fall by
  at least 0.1%), Overfit ((mean eval - mean train) / mean train > 0.1) and ExplodingTensor
  (any NaN/Inf in a logged value).

Scores, per label category and overall, for each split (``tune`` to ``tune58``: runs the rules
may be tuned on; ``holdout59``: runs collected later and never tuned on), the tunable and held-out
halves, and all of them:
recall (expected problems found), precision (claimed problems that the label supports) and the
share of healthy runs given a warning or worse. Writes ``benchmarks/results/real_accuracy.md``.

Usage::

    python benchmarks/real_accuracy.py [-o FILE] [--details] [--show-holdout | --tuning]

The list of disagreements shows tunable runs only unless ``--show-holdout`` is given: whoever
tunes the rules must not read how the held-out runs went, and tunes with ``--tuning``, which
leaves the held-out runs out of the run entirely (not even their totals are printed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import curvediag
from curvediag.ingest import load_runs
from curvediag.model import Diagnosis, Run

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "real_runs"
#: The shared corpus beside the project: the ``tune`` runs are read from there, not committed twice
#: (a label.yaml with ``data: corpus`` names a corpus folder of the same id).
CORPUS = Path(os.environ.get("CURVEDIAG_CORPUS", ROOT.parent / "shared" / "corpus"))


def data_dir(folder: Path, meta: dict[str, Any]) -> Path:
    """Where a labelled run's log files are: its own folder, or the corpus folder of its id."""
    if meta.get("data") == "corpus":
        return CORPUS / folder.name
    return folder


#: The label category each rule's finding claims (None: says nothing is wrong).
RULE_CATEGORY: dict[str, str | None] = {
    "healthy-converged": None,
    "eval-loss-spike": "spike",
    "eval-too-rare": None,
    "loss-not-decreasing": "not-learning",
    "loss-barely-fell": "not-learning",
    "loss-flat-over-four-logs": "plateau",
    "loss-no-trend-around-zero": "not-learning",
    "loss-at-chance-level": "not-learning",
    "loss-rose-to-chance-level": "not-learning",
    "eval-far-below-train": "eval-mismatch",
    "eval-loss-exactly-zero": "eval-mismatch",
    "eval-loss-frozen": "not-learning",
    "eval-loss-not-decreasing": "not-learning",
    "loss-plateau-after-drop": "plateau",
    "loss-flat-most-of-run": "plateau",
    "still-improving-at-end": "still-improving",
    "eval-still-improving-at-end": "still-improving",
    "run-ended-early": "ended-early",
    "run-stopped-where-planned-stops-would": "ended-early",
    "run-crashed": "ended-early",
    "run-log-unclosed": "ended-early",
    "run-stopped-in-warmup": "ended-early",
    "warmup-most-of-run": "lr-problem",
    "eval-loss-noisy": "noisy",
    "loss-near-zero-from-start": "collapse",
    "eval-score-perfect-throughout": "collapse",
    "stopped-by-early-stopping": "ended-early",
    "loss-collapsed-to-zero": "collapse",
    # exact zeros for most of the run (a masked NaN, a task made trivial): the vocabulary's
    # collapse ("or exactly 0"); it was missing here, so its claims scored as an unknown "data"
    "loss-mostly-zero": "collapse",
    "detector-box-loss-zero": "collapse",
    "loss-drops-at-epoch-boundaries": "epoch-staircase",
    "loss-nonfinite-at-start": "nonfinite",
    "loss-nonfinite-after-grad-growth": "nonfinite",
    "loss-nonfinite-sudden": "nonfinite",
    "eval-below-train": "eval-below-train",
    "eval-flat-while-train-falls": "eval-mismatch",
    "eval-never-improves": "eval-mismatch",
    "train-eval-gap-huge": "eval-mismatch",
    "eval-gap-from-first-eval": "eval-mismatch",
    # eval and train both got worse after an early best: the rule itself says "not
    # memorisation" but an optimisation problem (LR too high, schedule never decays)
    "eval-loss-rising": "divergence",
    "eval-loss-rising-no-train": "overfitting",
    "overfitting": "overfitting",
    # rules over the run's own eval score (accuracy, F1, BLEU, WER ...), not only the loss
    "eval-score-falls-after-best": "overfitting",
    "eval-score-at-chance": "not-learning",
    "eval-loss-at-chance-level": "not-learning",
    "rl-reward-no-signal": "not-learning",
    # reinforcement-learning runs, judged by their episode return
    "rl-return-not-improving": "not-learning",
    "rl-return-still-rising": "still-improving",
    "rl-return-falling": "divergence",
    "overfitting-mild": "overfitting",
    "eval-score-never-improves": "not-learning",
    "exploding-gradients": "grad-explosion",
    "grad-norm-bursts": "grad-explosion",
    "grad-norm-nonfinite": "nonfinite",
    "grad-clipping-saturated": "clipping-saturated",
    "grad-clipping-saturated-adam": "clipping-saturated",
    "grad-norm-vanishing": "not-learning",
    "grad-norm-zero-from": "not-learning",
    "loss-level-shift-after-resume": "level-shift",
    "loss-level-shift": "level-shift",
    "loss-jump-after-clean-descent": "level-shift",
    # an objective with no lower bound, driven toward minus infinity: a divergence downwards
    "loss-runs-away-below-zero": "divergence",
    "loss-alternates-every-log": "oscillation",
    # the diagnosis is the learning-rate schedule (no warmup; its fix is warmup), not a spike
    "early-instability-no-warmup": "lr-problem",
    "loss-noisy": "noisy",
    "lr-schedule-not-applied": "lr-problem",
    "lr-zero-early": "lr-problem",
    "lr-out-of-range": "lr-problem",
    "lr-far-below-range": "lr-problem",
    "lr-above-configured": "lr-problem",
    "warmup-longer-than-run": "lr-problem",
    "spike-at-warmup-end": "spike",
    "loss-diverging": "divergence",
    "loss-oscillating": "oscillation",
    "loss-spike": "spike",
    "loss-spike-slow-recovery": "spike",
    "loss-spikes-recurring": "spike",
    "memory-growing": "system",
    "throughput-drop": "system",
    "training-stall": "system",
}

#: Which claimed categories count as finding a labelled one (the label's synonyms).
SYNONYMS: dict[str, set[str]] = {
    "overfitting": {"overfitting", "eval-mismatch"},
    "eval-mismatch": {"eval-mismatch", "overfitting"},
    # an eval loss labelled "below train" by several x is the vocabulary's "implausibly far from
    # train" too: a mismatch claim on it is supported
    "eval-below-train": {"eval-below-train", "eval-mismatch"},
    "not-learning": {"not-learning", "plateau"},
    "plateau": {"plateau", "not-learning"},
    "still-improving": {"still-improving", "ended-early"},
    "ended-early": {"ended-early"},
    "divergence": {"divergence", "nonfinite", "grad-explosion"},
    "nonfinite": {"nonfinite", "collapse"},
    "collapse": {"collapse", "nonfinite"},
    "spike": {"spike", "level-shift"},
    "noisy": {"noisy", "oscillation"},
    "oscillation": {"oscillation", "noisy", "epoch-staircase"},
    "epoch-staircase": {"epoch-staircase", "oscillation"},
    "grad-explosion": {"grad-explosion", "clipping-saturated", "divergence"},
    "clipping-saturated": {"clipping-saturated", "grad-explosion"},
    "lr-problem": {"lr-problem"},
    "level-shift": {"level-shift", "spike"},
    "system": {"system"},
}
CATEGORIES = sorted(SYNONYMS)


# ------------------------------------------------------------------------------------------
# Labels
# ------------------------------------------------------------------------------------------
@dataclass
class Label:
    status: str  # labelled | ambiguous | inconclusive
    healthy: bool
    expected: set[str]
    acceptable: set[str]


@dataclass
class Case:
    id: str
    run_name: str | None  # for files that hold several runs
    split: str
    format: str
    project: str
    label: Label
    run: Run | None = None
    load_error: str | None = None


def _label(raw: dict[str, Any], where: str) -> Label:
    status = str(raw.get("status", "labelled"))
    expected = {str(x) for x in raw.get("expected") or []}
    acceptable = {str(x) for x in raw.get("acceptable") or []}
    for c in expected | acceptable:
        if c not in SYNONYMS:
            raise SystemExit(f"{where}: unknown label category {c!r}")
    return Label(status, bool(raw.get("healthy", False)), expected, acceptable)


def load_cases(root: Path = RUNS, held_out: bool = True) -> tuple[list[Case], list[str]]:
    """Every labelled run under ``root``, loaded; plus the folders that failed to load.
    ``held_out=False`` leaves the held-out folders unread (tuning)."""
    cases: list[Case] = []
    notes: list[str] = []
    missing = 0
    for lf in sorted(root.glob("*/label.yaml")):
        meta = yaml.safe_load(lf.read_text(encoding="utf-8"))
        if not held_out and str(meta.get("split", "")).startswith("holdout"):
            continue
        folder = lf.parent
        home = data_dir(folder, meta)
        if not home.is_dir():
            missing += 1
            continue
        target = home / str(meta.get("load") or ".")
        project = str((meta.get("source") or {}).get("project") or folder.name)
        base = {
            "split": str(meta.get("split", "tune")),
            "format": str(meta.get("format", "?")),
            "project": project,
        }
        try:
            runs = load_runs(target)
            err = None
        except curvediag.CurvediagError as e:
            runs, err = [], str(e)
        if meta.get("expect_load_error"):
            ok = "as expected" if err else "but it loaded"
            notes.append(f"{folder.name}: a load error is expected ({ok})")
            continue
        if err is not None:
            notes.append(f"{folder.name}: LOAD ERROR {err}")
        per_run = meta.get("per_run") or {}
        if per_run:
            by_name = {r.name: r for r in runs}
            for name, raw in per_run.items():
                run = by_name.get(str(name))
                if run is None and runs:
                    notes.append(f"{folder.name}: no run named {name!r} was read")
                cases.append(
                    Case(folder.name, str(name), **base, label=_label(raw, str(lf)), run=run)
                )
        else:
            run = runs[0] if runs else None
            cases.append(
                Case(
                    folder.name,
                    None,
                    **base,
                    label=_label(meta.get("label") or {}, str(lf)),
                    run=run,
                    load_error=err,
                )
            )
    if missing:
        notes.append(
            f"{missing} runs of the shared corpus were skipped: {CORPUS} not found "
            "(set CURVEDIAG_CORPUS to its path)"
        )
    return cases, notes


# ------------------------------------------------------------------------------------------
# Baselines
# ------------------------------------------------------------------------------------------
def _finite(run: Run, name: str) -> np.ndarray | None:
    s = run.get(name)
    return None if s is None else s.values


def hand_alerts(run: Run) -> dict[str, str]:
    """The alerts people write by hand: {category: severity}."""
    out: dict[str, str] = {}
    v = _finite(run, "train/loss")
    if v is not None:
        if not bool(np.all(np.isfinite(v))):
            out["nonfinite"] = "critical"
        for i in range(10, v.size):
            prev = v[i - 10 : i]
            prev = prev[np.isfinite(prev)]
            if prev.size and np.isfinite(v[i]) and v[i] > 2 * float(np.mean(prev)):
                out["spike"] = "warning"
                break
    g = _finite(run, "train/grad_norm")
    if g is not None:
        high = np.nan_to_num(g, nan=0.0) > 10
        streak = 0
        for h in high:
            streak = streak + 1 if h else 0
            if streak >= 3:
                out["grad-explosion"] = "warning"
                break
    e = _finite(run, "eval/loss")
    if e is not None:
        if bool(np.any((e[1:] > 1.05 * e[:-1]) & np.isfinite(e[1:]))):
            out["overfitting"] = "warning"
        if not bool(np.all(np.isfinite(e))):
            out["nonfinite"] = "critical"
    return out


def sagemaker_rules(run: Run) -> dict[str, str]:
    """SageMaker Debugger's LossNotDecreasing, Overfit and ExplodingTensor with their defaults,
    applied to the logged series (each log is one of the rule's steps)."""
    out: dict[str, str] = {}
    v = _finite(run, "train/loss")
    if v is not None:
        f = v[np.isfinite(v)]
        # LossNotDecreasing(num_steps=10, diff_percent=0.1): every 10 steps the loss must have
        # fallen by at least 0.1% since the last check.
        for i in range(10, f.size, 10):
            if f[i] > f[i - 10] * (1 - 0.001):
                out["not-learning"] = "warning"
                break
    e = _finite(run, "eval/loss")
    tl = run.get("train/loss")
    if e is not None and tl is not None and e.size and tl.values.size:
        ev = run.get("eval/loss")
        assert ev is not None
        # Overfit(ratio_threshold=0.1, patience=1): (eval - train) / train over the train logs
        # up to each evaluation.
        for step, val in zip(ev.steps, ev.values, strict=False):
            tr = tl.values[(tl.steps <= step) & np.isfinite(tl.values)]
            if tr.size and np.isfinite(val):
                m = float(np.mean(tr[-10:]))
                if m > 0 and (val - m) / m > 0.1:
                    out["overfitting"] = "warning"
                    break
    for name in ("train/loss", "eval/loss", "train/grad_norm"):
        x = _finite(run, name)
        if x is not None and not bool(np.all(np.isfinite(x))):
            out["nonfinite"] = "critical"  # ExplodingTensor(only_nan=False)
    return out


def curvediag_claims(d: Diagnosis) -> dict[str, str]:
    out: dict[str, str] = {}
    rank = {"info": 0, "warning": 1, "critical": 2}
    for f in d.findings:
        # a weaker echo folded into this finding is still shown to the user ("also seen")
        folded = [r.split(":", 1)[0] for r in f.related]
        for rule_id, sev in [(f.rule_id, f.severity.value), *((r, "info") for r in folded)]:
            cat = RULE_CATEGORY.get(rule_id, f.category)
            if cat is None:
                continue
            if cat not in out or rank[sev] > rank[out[cat]]:
                out[cat] = sev
    return out


# ------------------------------------------------------------------------------------------
# Scoring
# ------------------------------------------------------------------------------------------
@dataclass
class Score:
    expected: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    claimed: Counter[str] = field(default_factory=Counter)
    supported: Counter[str] = field(default_factory=Counter)
    healthy_runs: int = 0
    healthy_alarms: int = 0
    healthy_any_warning: int = 0
    inconclusive_runs: int = 0
    inconclusive_said: int = 0
    runs: int = 0

    def add(self, label: Label, claims: dict[str, str], verdict: str | None) -> None:
        self.runs += 1
        if label.status == "inconclusive":
            self.inconclusive_runs += 1
            self.inconclusive_said += verdict == "inconclusive"
            return
        claimed = set(claims)
        for c in label.expected:
            self.expected[c] += 1
            if SYNONYMS[c] & claimed:
                self.found[c] += 1
        ok_labels = label.expected | label.acceptable
        for c in claimed:
            self.claimed[c] += 1
            if any(c in SYNONYMS[lab] for lab in ok_labels):
                self.supported[c] += 1
        if label.healthy:
            self.healthy_runs += 1
            loud = {c for c, s in claims.items() if s in ("warning", "critical")}
            if loud:
                self.healthy_any_warning += 1
            # an alarm the label does not support (not even as an acceptable minor trait)
            if any(not any(c in SYNONYMS[lab] for lab in ok_labels) for c in loud):
                self.healthy_alarms += 1

    @staticmethod
    def ratio(a: int, b: int) -> str:
        return f"{a / b:.2f} ({a}/{b})" if b else "n/a"

    def recall(self) -> str:
        return self.ratio(sum(self.found.values()), sum(self.expected.values()))

    def precision(self) -> str:
        return self.ratio(sum(self.supported.values()), sum(self.claimed.values()))

    def alarms(self, any_warning: bool = False) -> str:
        if not self.healthy_runs:
            return "n/a"
        n = self.healthy_any_warning if any_warning else self.healthy_alarms
        return f"{n / self.healthy_runs:.0%} ({n}/{self.healthy_runs})"


Claimer = Callable[[Case], tuple[dict[str, str], str | None]]


def score(cases: Iterable[Case], claim: Claimer) -> Score:
    s = Score()
    for c in cases:
        if c.label.status == "ambiguous":
            continue
        claims, verdict = claim(c)
        s.add(c.label, claims, verdict)
    return s


def _per_rule(
    cases: list[Case], diag: dict[int, Diagnosis], index: dict[int, int], rule_ids: list[str]
) -> list[str]:
    """Per rule: on how many scored runs it fired (or was folded into another finding), at
    which severities, and how many of those runs' labels support its category."""
    fired: Counter[str] = Counter()
    supported: Counter[str] = Counter()
    severities: dict[str, Counter[str]] = {}
    for c in cases:
        d = diag.get(index[id(c)])
        if d is None or c.label.status != "labelled":
            continue
        ok = c.label.expected | c.label.acceptable
        seen: dict[str, str] = {}
        for f in d.findings:
            seen.setdefault(f.rule_id, f.severity.value)
            for r in f.related:
                seen.setdefault(r.split(":", 1)[0], "folded")
        for rule_id, sev in seen.items():
            fired[rule_id] += 1
            severities.setdefault(rule_id, Counter())[sev] += 1
            cat = RULE_CATEGORY.get(rule_id)
            if cat is None or any(cat in SYNONYMS[lab] for lab in ok):
                supported[rule_id] += 1
    out = [
        "",
        "## Per rule (tunable runs)",
        "",
        "Over the scored runs that may be tuned on (held-out runs are left out unless "
        "`--show-holdout` is given). Runs on which each rule fired (or was folded into another finding), and how many of "
        "those runs' labels support the rule's category (rules without a category, such as "
        "`healthy-converged`, count as supported).",
        "",
        "| rule | category | runs | severities | supported by the label |",
        "|---|---|---:|---|---:|",
    ]
    for rule_id in sorted(fired, key=lambda r: (-fired[r], r)):
        sev = ", ".join(f"{k} {v}" for k, v in sorted(severities[rule_id].items()))
        cat = RULE_CATEGORY.get(rule_id) or "-"
        out.append(
            f"| `{rule_id}` | {cat} | {fired[rule_id]} | {sev} | "
            f"{Score.ratio(supported[rule_id], fired[rule_id])} |"
        )
    silent = sorted(set(rule_ids) - set(fired))
    if silent:
        out += ["", "Never fired on these runs: " + ", ".join(f"`{r}`" for r in silent) + "."]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=str(ROOT / "benchmarks/results/real_accuracy.md"))
    ap.add_argument("--details", action="store_true", help="print every run's claims")
    ap.add_argument(
        "--show-holdout",
        action="store_true",
        help="also list the held-out runs where curvediag disagrees (never while tuning)",
    )
    ap.add_argument(
        "--tuning",
        action="store_true",
        help="leave the held-out runs out entirely (no rows, no totals): use this while tuning",
    )
    args = ap.parse_args(argv)
    if args.tuning and args.show_holdout:
        ap.error("--tuning and --show-holdout contradict each other")

    t0 = time.perf_counter()
    # while tuning, the held-out runs are not even read: not their totals, not their load notes
    cases, notes = load_cases(held_out=not args.tuning)
    held_back = sum(
        str(yaml.safe_load(p.read_text(encoding="utf-8")).get("split", "")).startswith("holdout")
        for p in RUNS.glob("*/label.yaml")
    )
    rules = curvediag.load_rules()
    diag: dict[int, Diagnosis] = {}
    for i, c in enumerate(cases):
        if c.run is not None:
            diag[i] = curvediag.diagnose(c.run, rules=rules)
    elapsed = time.perf_counter() - t0
    index = {id(c): i for i, c in enumerate(cases)}

    def ours(c: Case) -> tuple[dict[str, str], str | None]:
        d = diag.get(index[id(c)])
        if d is None:
            return {}, "inconclusive" if c.load_error is None else None
        return curvediag_claims(d), d.verdict

    def hand(c: Case) -> tuple[dict[str, str], str | None]:
        return (hand_alerts(c.run) if c.run is not None else {}), None

    def smd(c: Case) -> tuple[dict[str, str], str | None]:
        return (sagemaker_rules(c.run) if c.run is not None else {}), None

    tools: list[tuple[str, Claimer]] = [
        ("curvediag", ours),
        ("hand-written alerts", hand),
        ("SageMaker Debugger defaults", smd),
    ]
    splits = sorted({c.split for c in cases}, key=lambda s: (s.startswith("holdout"), s))
    halves = {s: [c for c in cases if c.split == s] for s in splits}
    tunable_cases = [c for c in cases if not c.split.startswith("holdout")]
    held_out = [c for c in cases if c.split.startswith("holdout")]
    if held_out:
        halves["all tunable"] = tunable_cases
        halves["all held out"] = held_out
    halves["all"] = cases
    halves = {k: v for k, v in halves.items() if v}
    scored = [c for c in cases if c.label.status != "ambiguous"]
    unread = (
        f"The {held_back} held-out runs were left unread (`--tuning`; LABELLING.md has every "
        "blind measurement). "
        if args.tuning
        else ""
    )
    lines = [
        "# Accuracy on real public training runs",
        "",
        f"Generated by `python benchmarks/real_accuracy.py{' --tuning' if args.tuning else ''}` "
        f"in {elapsed:.0f} s. {unread}"
        f"{len(cases)} runs from {len({c.project for c in cases})} projects in "
        f"`benchmarks/real_runs/` ({len(scored)} scored, "
        f"{sum(c.label.status == 'ambiguous' for c in cases)} ambiguous and only loaded), "
        "labelled from their plots before curvediag was run on them "
        "([protocol](../real_runs/LABELLING.md)). "
        "`tune`: the shared corpus, which the rules may be tuned on; `tune2`: the first "
        "held-out half, measured blind at commit 02bddd5 and tunable since; `tune3`: the "
        "second and third held-out sets (`holdout2`, `holdout3`), measured blind in the third "
        "and fourth sessions and tunable since; `tune4`: `holdout4`, collected in the fifth "
        "session, measured blind at 11c3d8f and tunable since; `tune5`: `holdout5`, small runs "
        "collected later in the fifth session, measured blind at 1507222 and 1cbe22d and "
        "tunable since; `tune6`: the first 36 runs of `holdout6`, collected in the sixth "
        "session by helpers who never ran curvediag, measured blind at dea2e7c and tunable "
        "since, like the other 34 (measured blind at 5ba56f4); `tune7` and `tune8`: `holdout7` "
        "and `holdout8`, 48 runs each collected the same way, measured blind at 87037d8 and "
        "8fc3788 and tunable since; `tune9`: `holdout9`, 32 runs collected the same way at "
        "the end of the sixth session, measured blind at eba56a9 and tunable since; "
        "`tune10`: `holdout10`, 48 runs collected the same way in the seventh session, "
        "measured blind at 4eb4902 and tunable since; `tune11`: `holdout11`, 40 runs collected "
        "the same way, measured blind at 2771d79 and tunable since; `tune12`: `holdout12`, 48 "
        "runs collected the same way, measured blind at 16226b8 and tunable since; `tune13`: "
        "`holdout13`, 40 runs collected the same way, measured blind at ff7fec2 and tunable "
        "since; `tune14`: `holdout14`, 31 runs collected the same way, measured blind at "
        "35485a7 and tunable since; `tune15`: `holdout15`, 64 runs collected the same way in "
        "the eighth session, measured blind at 8e3a88d and tunable since; `tune16`: "
        "`holdout16`, 60 runs collected the same way in the ninth session, measured blind at "
        "05e8ef3 and tunable since; `tune17`: `holdout17`, 48 runs collected the same way "
        "later in the ninth session, measured blind at 3040356 and tunable since; `tune18`: "
        "`holdout18`, 47 runs collected the same way in the tenth session, measured blind at "
        "80415f2 and tunable since; `tune19`: `holdout19`, 48 runs collected the same way "
        "later in the tenth session, measured blind at b2f3573 and tunable since; `tune20`: "
        "`holdout20`, 48 runs collected the same way at the end of the tenth session, "
        "measured blind at ed69ff3 and tunable since; `tune21`: `holdout21`, 48 runs "
        "collected the same way in the eleventh session, measured blind at 0b3c99a and "
        "tunable since; `tune22`: `holdout22`, 36 runs collected the same way later in the "
        "eleventh session, measured blind at 57aaa7e and tunable since; `tune23`: `holdout23`, "
        "24 runs collected the same way at the end of the eleventh session, measured blind at "
        "a5fb9ba and tunable since; `tune24`: `holdout24`, 24 runs collected the same way in "
        "the twelfth session, measured blind at ff06da3 and tunable since; `tune25`: `holdout25`, "
        "24 runs collected the same way later in the twelfth session, measured blind at "
        "bdd8112 and tunable since; `tune26`: `holdout26`, 24 runs collected the same way later "
        "still in the twelfth session, measured blind at 19d4ea4 and tunable since; "
        "`tune27`: `holdout27`, 24 runs collected the same way, measured blind at 1692ccc and "
        "tunable since; `tune28`: `holdout28`, 24 runs collected the same way at the end of the "
        "twelfth session, measured blind at 2343771 and tunable since; `tune29`: `holdout29`, 22 "
        "runs collected the same way in the thirteenth session, measured blind at 39638b1 and "
        "tunable since; `tune30`: `holdout30`, 24 runs collected the same way later in the "
        "thirteenth session, measured blind at b72bc63 and tunable since; `tune31`: `holdout31`, "
        "24 runs collected the same way later still, measured blind at 5966047 and tunable "
        "since; `tune32`: `holdout32`, 24 runs collected the same way, measured blind at "
        "c5c5eaf and tunable since; `tune33`: `holdout33`, 24 runs collected the same way, "
        "measured blind at 36a6f2c and tunable since; `tune34`: `holdout34`, 24 runs collected "
        "the same way, measured blind at eaf58ac and tunable since; `tune35`: `holdout35`, 21 "
        "runs collected the same way at the end of the thirteenth session, measured blind at "
        "a62d4ff and tunable since; `tune36`: `holdout36`, 26 runs collected the same way in the "
        "fourteenth session, measured blind at 87175b5 and tunable since; `tune37`: `holdout37`, 24 runs "
        "collected the same way later in the fourteenth session, measured blind at 68506be and "
        "tunable since; `tune38`: `holdout38`, 24 runs "
        "collected the same way later still, measured blind at dd54b44 and tunable since; "
        "`tune39`: `holdout39`, 24 runs collected the same way later in the fourteenth session, "
        "measured blind at 4b7f1f2 and tunable since; `tune40`: `holdout40`, 22 runs collected "
        "the same way at the end of the fourteenth session, measured blind at 7d9d32a and "
        "tunable since; `tune41`: `holdout41`, 24 runs collected the same way in the fifteenth "
        "session, measured blind at c50b08e and tunable since; `tune42`: `holdout42`, 24 runs "
        "collected the same way later in the fifteenth session, measured blind at c333d94 and "
        "tunable since; `tune43`: `holdout43`, 24 runs collected the same way later in the "
        "fifteenth session, measured blind at 9a9e837 and tunable since; `tune44`: `holdout44`, "
        "20 runs collected the same way at the end of the fifteenth session, measured blind at "
        "f1bda64 and tunable since; `tune45`: `holdout45`, 24 runs collected the same way in the "
        "sixteenth session, measured blind at 379c7ad and tunable since; `tune46`: `holdout46`, "
        "24 runs collected the same way later in the sixteenth session, measured blind at "
        "d364841 and tunable since; `tune47`: `holdout47`, 14 runs collected the same way at "
        "the end of the sixteenth session, measured blind at 35ec1a7 and tunable since; "
        "`tune48`: `holdout48`, 24 runs collected the same way in the seventeenth session, "
        "measured blind at 4b8aaf9 and tunable since; `tune49`: `holdout49`, 24 runs collected "
        "the same way later in the seventeenth session, measured blind at 9adceda and tunable "
        "since; `tune50`: `holdout50`, 24 runs collected the same way in the eighteenth "
        "session, measured blind at 9806447 and tunable since; `tune51`: `holdout51`, 24 runs "
        "collected the same way later in the eighteenth session, measured blind at 6cb18f6 and "
        "tunable since; `tune52`: `holdout52`, 24 runs collected the same way in the nineteenth "
        "session, measured blind at 8983f42 and tunable since; `tune53`: `holdout53`, 24 runs "
        "collected the same way later in the nineteenth session, measured blind at 62129e5 and "
        "tunable since; `tune54`: `holdout54`, 24 runs collected the same way in the twentieth "
        "session, measured blind at 995e61f and tunable since; `tune55`: `holdout55`, 24 runs "
        "collected the same way in the twenty-first session, measured blind at 43bb667 and "
        "tunable since; `tune56`: `holdout56`, 21 runs collected the same way in the "
        "twenty-second session, measured blind at 55aea53 and tunable since; `tune57`: "
        "`holdout57`, 21 runs collected the same way later in the twenty-second session, "
        "measured blind at 3257623 and tunable since; `tune58`: `holdout58`, 24 runs collected "
        "the same way in the twenty-third session, measured blind at 6595978 and tunable since; "
        "`holdout59`: 24 runs collected the same way in the twenty-fourth session, never tuned "
        "on (see LABELLING.md for every blind measurement).",
        "",
        "Recall: labelled problems found (a finding of the label's category or a synonym). "
        "Precision: findings whose category the label supports (`expected` or `acceptable`; "
        "info findings count too). False alarms on healthy runs: runs labelled healthy that got a "
        "warning or worse the label does not support; the next column also counts warnings of a "
        "minor trait the labeller listed as acceptable (e.g. mild overfitting on a run judged "
        "healthy). Inconclusive: runs with too little data that the tool called `inconclusive`.",
        "",
        "| split | tool | runs | recall | precision | false alarms on healthy runs | "
        "healthy runs with any warning | inconclusive |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    results: dict[tuple[str, str], Score] = {}
    for half, cs in halves.items():
        for name, fn in tools:
            s = score(cs, fn)
            results[(half, name)] = s
            inc = (
                Score.ratio(s.inconclusive_said, s.inconclusive_runs)
                if name == "curvediag"
                else "-"
            )
            lines.append(
                f"| {half} | {name} | {s.runs} | {s.recall()} | {s.precision()} | "
                f"{s.alarms()} | {s.alarms(any_warning=True)} | {inc} |"
            )
    lines += [
        "",
        "## Per category (all runs)",
        "",
        "| category | labelled | curvediag recall | curvediag precision | hand-written recall "
        "| hand-written precision | SageMaker recall | SageMaker precision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ours_all = results[("all", "curvediag")]
    hand_all = results[("all", "hand-written alerts")]
    smd_all = results[("all", "SageMaker Debugger defaults")]
    for cat in CATEGORIES:
        n = ours_all.expected[cat]
        if not n and not any(s.claimed[cat] for s in (ours_all, hand_all, smd_all)):
            continue
        cells = [str(n)]
        for s in (ours_all, hand_all, smd_all):
            cells.append(Score.ratio(s.found[cat], n) if n else "-")
            cells.append(Score.ratio(s.supported[cat], s.claimed[cat]) if s.claimed[cat] else "-")
        lines.append(f"| {cat} | " + " | ".join(cells) + " |")

    tunable = [c for c in cases if args.show_holdout or not c.split.startswith("holdout")]
    lines += _per_rule(tunable, diag, index, [r.id for r in rules.rules])

    # what went wrong, run by run (curvediag)
    misses: list[str] = []
    hidden = 0
    for c in cases:
        if c.label.status == "ambiguous":
            continue
        if c.split.startswith("holdout") and not args.show_holdout:
            hidden += 1
            continue
        claims, verdict = ours(c)
        name = c.id + (f" / {c.run_name}" if c.run_name else "")
        if c.label.status == "inconclusive":
            if verdict != "inconclusive":
                misses.append(f"| {name} | {c.split} | inconclusive | {verdict} | - | - |")
            continue
        missed = sorted(x for x in c.label.expected if not SYNONYMS[x] & set(claims))
        ok = c.label.expected | c.label.acceptable
        extra = sorted(x for x in claims if not any(x in SYNONYMS[lab] for lab in ok))
        alarm = c.label.healthy and any(v != "info" for v in claims.values())
        if missed or extra or alarm:
            want = ", ".join(sorted(c.label.expected)) or "healthy"
            got = ", ".join(f"{k} ({v})" for k, v in sorted(claims.items())) or "nothing"
            misses.append(
                f"| {name} | {c.split} | {want} | {got} | {', '.join(missed) or '-'} | "
                f"{', '.join(extra) or '-'} |"
            )
    lines += [
        "",
        "## Where curvediag disagrees with the label",
        "",
        *(
            [
                f"Tunable runs only: the {hidden} held-out runs are not listed, so that nobody "
                "tuning the rules reads them (`--show-holdout` lists them).",
                "",
            ]
            if hidden
            else []
        ),
        "| run | split | label | curvediag said | missed | not supported by the label |",
        "|---|---|---|---|---|---|",
        *misses,
    ]
    if notes:
        lines += ["", "## Loading notes", "", *[f"- {n}" for n in notes]]
    text = "\n".join(lines) + "\n"
    Path(args.output).write_text(text, encoding="utf-8")
    print(text)
    if args.details:
        for c in cases:
            print(c.id, c.run_name, c.label.expected, ours(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
