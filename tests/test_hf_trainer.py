"""The trainer_state.json reader on hand-written edge cases and bad input."""

from __future__ import annotations

import json
import math
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, HF_FIXTURES

import curvediag
from curvediag.errors import MalformedRunError, UnrecognizedFormatError

STATES = DATA / "trainer_state"


def test_nan_and_infinity_literals_are_kept() -> None:
    run = curvediag.load_run(STATES / "nan_literals.json")
    loss = run.metrics["train/loss"]
    assert loss.steps.tolist() == [10, 20, 30, 40]
    assert math.isnan(loss.values[2]) and loss.values[3] == -math.inf
    grad = run.metrics["train/grad_norm"]
    assert grad.values[2] == math.inf and math.isnan(grad.values[3])
    assert run.meta.max_steps == 80 and run.meta.train_batch_size == 8
    assert run.meta.finished is False  # 40 of 80 steps, no summary entry


def test_old_file_without_grad_norm_with_eval_and_summary() -> None:
    run = curvediag.load_run(STATES / "old_no_grad_norm.json")
    assert "train/grad_norm" not in run
    assert run.metrics["eval/loss"].values.tolist() == [0.61, 0.52]
    assert run.metrics["eval/accuracy"].steps.tolist() == [100, 200]
    assert run.metrics["eval/runtime"].values.tolist() == [3.2, 3.1]
    # the final summary is metadata, not a point of the train-loss curve
    assert run.metrics["train/loss"].values.tolist() == [0.91, 0.70, 0.55, 0.47]
    assert run.meta.summary["train_loss"] == 0.66
    assert run.meta.finished is True
    assert run.meta.best_metric == 0.52
    assert run.meta.best_model_checkpoint == "out/checkpoint-200"


def test_eval_only_log() -> None:
    run = curvediag.load_run(STATES / "eval_only.json")
    assert set(run.metrics) == {"eval/loss", "eval/runtime", "train/epoch"}
    d = curvediag.diagnose(run)
    skipped = {s.rule_id for s in d.skipped}
    assert "loss-not-decreasing" in skipped and "overfitting" in skipped
    # an eval-only log of a few points is too little to judge: never "healthy"
    assert d.verdict == "inconclusive" and d.inconclusive_reason


def test_custom_keys_and_several_eval_sets() -> None:
    run = curvediag.load_run(STATES / "custom_metrics.json")
    assert run.metrics["train/learning_rate"].values.tolist() == [0.0002] * 3  # 'lr'
    assert "train/ploss_0" in run and "train/reward" in run and "train/rewards/accuracy" in run
    assert not any("remaining_time" in k for k in run.metrics)  # a string, skipped
    assert run.metrics["eval/loss"].values.tolist() == [1.9, 1.8]  # from eval/g0_loss
    assert any("eval/loss is taken from eval/g0_loss" in w for w in run.warnings)


def test_empty_log_history_is_a_run_with_no_metrics() -> None:
    run = curvediag.load_run(STATES / "empty_history.json")
    assert run.metrics == {}
    assert any("log_history is empty" in w for w in run.warnings)
    d = curvediag.diagnose(run)
    assert d.findings == [] and len(d.skipped) == d.rules_evaluated


def test_resumed_run_keeps_latest_segment() -> None:
    run = curvediag.load_run(STATES / "resumed.json")
    loss = run.metrics["train/loss"]
    assert loss.steps.tolist() == [10, 20, 30, 40, 50, 60]
    assert loss.values.tolist() == [3.0, 2.8, 2.55, 2.45, 2.4, 2.3]
    assert run.meta.resumed and run.meta.resumed_at_steps == [30]
    assert any("resumed" in w for w in run.warnings)


def test_output_folder_and_latest_checkpoint(tmp_path: Path) -> None:
    for n, loss in [(100, 2.0), (300, 1.0), (20, 3.0)]:
        ck = tmp_path / f"checkpoint-{n}"
        ck.mkdir()
        (ck / "trainer_state.json").write_text(
            f'{{"global_step": {n}, "log_history": [{{"loss": {loss}, "step": {n}}}]}}'
        )
    run = curvediag.load_run(tmp_path)
    assert run.meta.checkpoint_used == "checkpoint-300"  # numeric, not alphabetical order
    assert run.metrics["train/loss"].values.tolist() == [1.0]
    assert run.name == tmp_path.name
    assert any("checkpoint-300" in w for w in run.warnings)
    # a trainer_state.json directly in the folder (trainer.save_state()) wins
    shutil.copy(STATES / "resumed.json", tmp_path / "trainer_state.json")
    assert curvediag.load_run(tmp_path).meta.checkpoint_used is None


@pytest.mark.skipif(not (HF_FIXTURES / "overfit").is_dir(), reason="fixtures not generated")
def test_real_trainer_checkpoints_folder() -> None:
    run = curvediag.load_run(HF_FIXTURES / "overfit")
    assert run.format.startswith("hf-trainer")  # merged with the event files and W&B log
    assert run.meta.checkpoint_used is None  # trainer.save_state() wrote one at the top
    assert len(run.metrics["train/loss"]) > 10 and len(run.metrics["eval/loss"]) >= 3


def test_training_args_bin_is_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "UNPICKLED"

    class Boom:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (Path.touch, (marker,))

    (tmp_path / "training_args.bin").write_bytes(pickle.dumps(Boom()))
    shutil.copy(STATES / "old_no_grad_norm.json", tmp_path / "trainer_state.json")
    curvediag.diagnose(tmp_path)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"global_step": 10, "log_history": [{"loss": 1.0, "st', "truncated"),
        ("this is not json", "not valid JSON"),
        ('[{"loss": 1.0, "step": 1}]', "expected a JSON object"),
        ('{"global_step": 3}', "no 'log_history'"),
        ('{"log_history": {"loss": 1}}', "'log_history' should be a list"),
        ("", "empty"),
    ],
)
def test_bad_input_names_file_and_problem(write_state, text: str, problem: str) -> None:  # type: ignore[no-untyped-def]
    path = write_state(text)
    with pytest.raises(MalformedRunError) as info:
        curvediag.load_run(path)
    assert str(path) in str(info.value) and problem in str(info.value)


def test_binary_garbage(tmp_path: Path) -> None:
    p = tmp_path / "trainer_state.json"
    p.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(MalformedRunError, match=r"binary data|not UTF-8"):
        curvediag.load_run(p)


def test_missing_path_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(MalformedRunError, match="no such file"):
        curvediag.load_run(tmp_path / "nope.json")
    with pytest.raises(UnrecognizedFormatError, match="no training log found"):
        curvediag.load_run(tmp_path)


def test_entries_without_step_are_skipped_with_a_warning(write_state) -> None:  # type: ignore[no-untyped-def]
    path = write_state('{"log_history": [{"loss": 1.0}, 7, {"loss": 0.9, "step": 2}]}')
    run = curvediag.load_run(path)
    assert run.metrics["train/loss"].steps.tolist() == [2]
    assert any("skipped 2" in w for w in run.warnings)


def test_series_are_int64_and_float64() -> None:
    run = curvediag.load_run(STATES / "old_no_grad_norm.json")
    s = run.metrics["train/loss"]
    assert s.steps.dtype == np.int64 and s.values.dtype == np.float64


def test_a_state_under_another_name_is_read_by_its_content(tmp_path: Path) -> None:
    # a real one (holdout16 hf16b_quality_lrqa_chance, after its blind measurement): a
    # trainer_state.json committed as baselines/lrqa/__init__.py, refused as unrecognised
    real = Path(__file__).resolve().parents[1] / "benchmarks/real_runs/hf16b_quality_lrqa_chance"
    run = curvediag.load_run(real / "__init__.py")
    assert run.format == "hf-trainer" and len(run.metrics["train/loss"]) > 10
    # Python source that only mentions log_history is not taken for one
    src = tmp_path / "callbacks.py"
    src.write_text('import json\nKEY = "log_history"\n', encoding="utf-8")
    with pytest.raises(UnrecognizedFormatError):
        curvediag.load_run(src)


def test_log_entries_carrying_their_throughput_are_not_the_summary() -> None:
    # LLaMA-Factory (include_num_input_tokens_seen) puts train_runtime and
    # train_tokens_per_second in every log entry; only the last entry, with train_loss and no
    # loss, is the end-of-training summary (a real one: holdout16
    # hf16b_qwen05b_agentqa_lora_abort, read as "no train loss" at its blind measurement)
    real = Path(__file__).resolve().parents[1] / "benchmarks/real_runs"
    run = curvediag.load_run(real / "hf16b_qwen05b_agentqa_lora_abort" / "trainer_state.json")
    assert len(run.metrics["train/loss"]) == 102
    assert run.meta.summary["train_loss"] == pytest.approx(1.48709, abs=1e-4)
    # the summary came at step 512 of the 2826 planned: the run did not finish its plan
    assert run.meta.finished is False


REAL = Path(__file__).resolve().parents[1] / "benchmarks" / "real_runs"


def test_a_trainer_told_to_stop_before_its_plan_ended_early(tmp_path: Path) -> None:
    # LLaMA-Factory closed this Trainer run at step 512 of 2826 with a normal end-of-training
    # summary (train_runtime), no early stopping configured and its eval loss at its best at
    # the last evaluation (a real one: tune16 hf16b_qwen05b_agentqa_lora_abort, labelled
    # ended-early, which the summary hid): something told it to stop
    folder = REAL / "hf16b_qwen05b_agentqa_lora_abort"
    d = curvediag.diagnose(folder)
    f = next(f for f in d.findings if f.rule_id == "run-ended-early")
    assert "step 512 of 2826 planned (18.1%) with the Trainer's end-of-training summary" in (
        f.evidence
    )
    assert "should_training_stop" in f.evidence and "checkpoint of a run" not in f.evidence
    # the same log whose eval loss had turned up before the stop: early stopping may have
    # ended it (a Trainer before 4.39 records no callback state), so no finding
    state = json.loads((folder / "trainer_state.json").read_text())
    evals = [e for e in state["log_history"] if "eval_loss" in e]
    evals[-1]["eval_loss"] = evals[0]["eval_loss"] + 0.1
    (tmp_path / "trainer_state.json").write_text(json.dumps(state))
    assert "run-ended-early" not in curvediag.diagnose(tmp_path).finding_ids
