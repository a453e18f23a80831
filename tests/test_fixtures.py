"""The real-Trainer fixtures: each shows its labelled symptom, healthy ones stay quiet, and the
three formats the Trainer wrote for the same run give the same diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import HF_FIXTURES

import curvediag

SCENARIOS = sorted(p for p in HF_FIXTURES.iterdir() if (p / "label.yaml").is_file())
HEALTHY = [p for p in SCENARIOS if p.name.startswith("healthy")]


def label(folder: Path) -> dict:  # type: ignore[type-arg]
    data = yaml.safe_load((folder / "label.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_there_are_fixtures_for_every_required_scenario() -> None:
    names = {p.name for p in SCENARIOS}
    required = {
        "healthy_cosine",
        "healthy_linear",
        "overfit",
        "nan_filter_on",
        "nan_filter_off",
        "lr_too_low",
        "bad_batch_spike",
        "clipping_always",
        "no_warmup_unstable",
        "eval_shifted",
    }
    assert required <= names, sorted(required - names)


@pytest.mark.parametrize("folder", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_labelled_findings(folder: Path) -> None:
    lab = label(folder)
    d = curvediag.diagnose(folder)
    fired = set(d.finding_ids)
    # an expected finding may be folded into the finding that explains it (one problem, one
    # finding): it is then listed under that finding's related evidence
    folded = {r.split(":", 1)[0] for f in d.findings for r in f.related}
    assert set(lab["expected_findings"]) <= fired | folded, (fired, str(d))
    assert not (set(lab.get("must_not_fire") or []) & fired), fired


@pytest.mark.parametrize("folder", HEALTHY, ids=[p.name for p in HEALTHY])
def test_healthy_runs_raise_nothing(folder: Path) -> None:
    d = curvediag.diagnose(folder)
    assert d.verdict == "healthy", [(f.rule_id, f.evidence) for f in d.findings]
    # a healthy run whose eval loss is still falling at the end (constant LR keeps improving)
    # is told so instead of "converged"; either way nothing else is said
    assert d.finding_ids in (["healthy-converged"], ["still-improving-at-end"])


def _formats(folder: Path) -> dict[str, Path]:
    wandb_dirs = sorted((folder / "wandb").glob("offline-run-*"))
    return {
        "trainer_state": folder / "trainer_state.json",
        "tensorboard": folder / "runs",
        "wandb": wandb_dirs[0] if wandb_dirs else folder / "wandb",
    }


#: Runs whose formats legitimately differ: a killed run's event files and W&B log go past its
#: last checkpoint, and on a resume the Trainer restarts log_history from the checkpoint while
#: TensorBoard keeps both segments and W&B starts a second run (tested separately below).
DIFFERENT_BY_NATURE = {"run_killed", "resume_level_shift"}
CROSS = [
    p
    for p in SCENARIOS
    if (p / "trainer_state.json").is_file() and p.name not in DIFFERENT_BY_NATURE
]


@pytest.mark.parametrize("folder", CROSS, ids=[p.name for p in CROSS])
def test_same_diagnosis_from_each_format(folder: Path) -> None:
    """trainer_state.json, the event files and the W&B log of one run agree.

    trainer_state.json does not record max_grad_norm nor the optimizer (they live in the
    Trainer's arguments, which TensorBoard and W&B keep), so it is given the run's values, as a
    user would with --set features.max_grad_norm=... features.optimizer=...
    """
    mgn = label(folder)["settings"].get("max_grad_norm")
    results = {}
    for fmt, path in _formats(folder).items():
        overrides = {}
        if fmt == "trainer_state" and mgn:
            overrides["features.max_grad_norm"] = mgn
        if fmt == "trainer_state":
            # nor the optimizer (--set features.optimizer=...)
            tb = curvediag.load_run(_formats(folder)["tensorboard"])
            if tb.meta.hyperparameters.get("optim"):
                overrides["features.optimizer"] = tb.meta.hyperparameters["optim"]
        d = curvediag.diagnose(path, overrides=overrides)
        results[fmt] = (d.finding_ids, {s.rule_id for s in d.skipped})
    ids = {fmt: r[0] for fmt, r in results.items()}
    assert ids["trainer_state"] == ids["tensorboard"] == ids["wandb"], ids
    skipped = {fmt: r[1] for fmt, r in results.items()}
    assert skipped["tensorboard"] == skipped["wandb"], skipped
    # trainer_state.json keeps no wall time and not the configured learning rate: only the
    # step-time rule and the LR-above-its-configured-peak rule may be skipped in addition
    assert skipped["trainer_state"] - skipped["tensorboard"] <= {
        "training-stall",
        "lr-above-configured",
    }
    assert skipped["tensorboard"] <= skipped["trainer_state"]


@pytest.mark.parametrize("folder", CROSS, ids=[p.name for p in CROSS])
def test_same_numbers_from_each_format(folder: Path) -> None:
    runs = {fmt: curvediag.load_run(p) for fmt, p in _formats(folder).items()}
    ref = runs["trainer_state"].metrics["train/loss"]
    for fmt in ("tensorboard", "wandb"):
        s = runs[fmt].metrics["train/loss"]
        assert s.steps.tolist() == ref.steps.tolist(), fmt
        # event files store float32
        finite = [
            abs(a - b) <= 1e-5 * max(1.0, abs(a))
            for a, b in zip(ref.values, s.values, strict=True)
            if a == a
        ]
        assert all(finite), fmt


def test_folder_merges_the_formats() -> None:
    run = curvediag.load_run(HF_FIXTURES / "clipping_always")
    assert run.format == "hf-trainer+tensorboard+wandb-run"
    assert run.meta.max_grad_norm == 0.1  # from the Trainer's arguments
    assert run.metrics["train/loss"].wall_time is not None
    d = curvediag.diagnose(run)
    assert "grad-clipping-saturated" in d.finding_ids


def test_killed_run_is_seen_from_its_logs_not_from_the_checkpoint_alone() -> None:
    folder = HF_FIXTURES / "run_killed"
    # the checkpoint's trainer_state.json alone cannot tell a crash from a run that went on: it
    # is never called converged, and the finding says to diagnose the output folder if it went on
    alone = curvediag.diagnose(next(folder.glob("checkpoint-*")) / "trainer_state.json")
    assert "healthy-converged" not in alone.finding_ids
    f = next(f for f in alone.findings if f.rule_id == "run-ended-early")
    assert "diagnose the output folder" in f.evidence
    # the event files and W&B log stop early too: together they show the crash, and the W&B
    # log's exit code names it (the early stop is folded into that finding)
    d = curvediag.diagnose(folder)
    crash = next(f for f in d.findings if f.rule_id == "run-crashed")
    assert any(r.startswith("run-ended-early") for r in crash.related)
    assert "40.0% of the planned training" in crash.evidence
    assert "run-ended-early" in curvediag.diagnose(folder / "runs").finding_ids


def test_resume_seen_where_the_format_keeps_both_segments() -> None:
    folder = HF_FIXTURES / "resume_level_shift"
    # TensorBoard keeps both segments: the restart and its level shift are visible
    tb = curvediag.diagnose(folder / "runs")
    assert tb.run.meta.resumed and "loss-level-shift-after-resume" in tb.finding_ids
    # trainer_state.json was rewritten from the checkpoint: only the level shift shows
    ts = curvediag.diagnose(folder / "trainer_state.json")
    assert "loss-level-shift" in ts.finding_ids
    # the whole output folder merges what every format knows
    assert "loss-level-shift-after-resume" in curvediag.diagnose(folder).finding_ids


def test_a_wandb_log_cut_off_without_its_exit_record(tmp_path: Path) -> None:
    """A W&B binary log copied while its run was going (or whose process was killed outright)
    ends without the exit record: the reader says so, and the run is not called finished."""
    log = next((HF_FIXTURES / "healthy_cosine" / "wandb").glob("*/run-*.wandb"))
    whole = curvediag.load_run(log.parent)
    assert whole.meta.exit_recorded is True and whole.meta.exit_code == 0
    cut_dir = tmp_path / "wandb" / log.parent.name
    cut_dir.mkdir(parents=True)
    data = log.read_bytes()
    (cut_dir / log.name).write_bytes(data[: len(data) * 3 // 5])
    cut = curvediag.load_run(cut_dir)
    assert cut.meta.exit_recorded is False and cut.meta.exit_code is None
    assert "train_runtime" not in cut.meta.summary
    ids = curvediag.diagnose(cut_dir).finding_ids
    assert "healthy-converged" not in ids
    assert {"run-ended-early", "run-log-unclosed"} & set(ids)
