"""Every trainer_state.json of the shared corpus loads and gets a sensible diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS, corpus_files

import curvediag

TS = corpus_files("ts_")
pytestmark = pytest.mark.skipif(not TS, reason="../shared/corpus not present")


@pytest.mark.parametrize("folder", TS, ids=[p.name for p in TS])
def test_trainer_state_loads_and_diagnoses(folder: Path) -> None:
    d = curvediag.diagnose(folder)
    assert d.run.format == "hf-trainer"
    assert d.rules_evaluated == len(curvediag.load_rules())
    str(d)  # renders
    d.to_json()


# What an ML engineer reading these curves would say (see the corpus MANIFEST.tsv).
EXPECTED = {
    # train -> 1e-4 while eval rises 31% from its very first evaluation: eval never improved
    "ts_whisper_ja": {"eval-never-improves"},
    "ts_dnabert2": {"overfitting"},  # eval rises 24% after its minimum
    "ts_mcfed": {"overfitting"},  # eval drifts up after step 500
    "ts_viz_sample": {"overfitting"},  # eval_g0 rises 147%
    # grad norm median 17.9, clipped every step; its optimizer is not recorded: said as info
    "ts_bashkir": {"grad-clipping-saturated-adam"},
    # test loss ends 14% above its minimum, but zig-zags back below it in between; its real-run
    # label (from plots) is healthy with mild overfitting acceptable: the info rule, not the warning
    "tb_unet_lr1e3": {"overfitting-mild"},
    "wbh_nanogpt_base": {"overfitting"},  # val/loss 1.47 -> 1.69 while train falls
    "pl_probing": {"loss-not-decreasing"},  # train loss oscillates 2.35-3.99, no trend
    "ts_textsimp": {"loss-diverging"},  # 0.002 at step 800 climbing to 0.016
    # GRPO: reward 0 on 84 of 100 steps, frac_reward_zero_std ~1 (labelled not-learning from
    # its plots in benchmarks/real_runs; it was on the quiet list while only its loss was read)
    "ts_redteam_rl": {"rl-reward-no-signal"},
}
# ts_llamatest left this list: labelled from its plots (benchmarks/real_runs), its loss drops at
# each epoch boundary (memorisation), which the windowed epoch feature now sees
# ts_gemma2b left it too: 1.42 -> 1.36 over 68.5k steps (-4.6%) was read as "not decreasing";
# labelled from its plots it is healthy (a pretrained LM learning slowly and steadily, eval
# 1.372 -> 1.361), and loss-not-decreasing now needs less than 3.5% over the run
QUIET = ["ts_distilbert_lora", "ts_chaos", "ts_taubench", "ts_gemma2b"]
#: what may be said of them: a checkpoint that stops before its plan, one log too few to judge
LIFECYCLE = {"run-ended-early"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_known_problems_are_found(name: str) -> None:
    d = curvediag.diagnose(CORPUS / name)
    assert EXPECTED[name] <= set(d.finding_ids), d.finding_ids


@pytest.mark.parametrize("name", QUIET)
def test_healthy_or_rl_runs_get_no_warning(name: str) -> None:
    """RL objectives (negative or exactly-zero losses) and healthy runs stay quiet."""
    d = curvediag.diagnose(CORPUS / name)
    alarms = [
        (f.rule_id, f.evidence)
        for f in d.findings
        if f.severity.value != "info" and f.rule_id not in LIFECYCLE
    ]
    assert not alarms
    assert d.verdict in ("healthy", "inconclusive", "warning")


ALL = corpus_files("")
NOT_A_CURVE = {"wbx_nanogpt_runs_table"}  # a W&B runs-table export: one row per run


@pytest.mark.parametrize("folder", ALL, ids=[p.name for p in ALL])
def test_every_corpus_file_loads_and_gets_a_diagnosis(folder: Path) -> None:
    from curvediag.ingest import load_runs

    if folder.name in NOT_A_CURVE:
        with pytest.raises(curvediag.MalformedRunError, match="runs-table export"):
            load_runs(folder)
        return
    runs = load_runs(folder)
    assert runs
    for run in runs:
        d = curvediag.diagnose(run)
        assert d.rules_evaluated == len(curvediag.load_rules())
        str(d)


SAME_RUN = [("ts_lain", "tb_hf_lain"), ("ts_gemma2b", "wbs_gemma2b")]


@pytest.mark.parametrize(("a", "b"), SAME_RUN)
def test_same_run_in_two_formats_agrees(a: str, b: str) -> None:
    ra, rb = curvediag.load_run(CORPUS / a), curvediag.load_run(CORPUS / b)
    la, lb = ra.metrics["train/loss"], rb.metrics["train/loss"]
    if rb.format == "wandb-summary":  # final values only: the last logged loss
        assert abs(la.values[-1] - lb.values[-1]) < 1e-4 * max(1, abs(lb.values[-1]))
        assert rb.metrics["train/loss"].steps[-1] == ra.meta.global_step
        return
    shared = 0
    for step, value in zip(lb.steps, lb.values, strict=True):
        if step in la.steps:
            shared += 1
            assert abs(la.values[list(la.steps).index(step)] - value) < 1e-4 * max(1, abs(value))
    assert shared >= 1
