"""load_run / load_runs on real folder layouts: Trainer restarts, Keras writers, several runs,
formats merged into one run, bad input anywhere."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curvediag
from curvediag.errors import CurvediagError, IngestError, MalformedRunError
from curvediag.ingest import load_runs
from curvediag.ingest._tfevents import scalar_event, write_event_file


def events(tag: str, pairs: list[tuple[int, float]], t0: float = 1.7e9) -> list[object]:
    return [scalar_event(tag, v, s, t0 + s) for s, v in pairs]


def test_trainer_restart_later_write_wins(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "Nov21_10-00-00_host"
    run_dir.mkdir(parents=True)
    first = events("train/loss", [(10, 3.0), (20, 2.8), (30, 2.6), (40, 2.5)])
    second = events("train/loss", [(30, 2.55), (40, 2.45), (50, 2.4)], t0=1.8e9)
    write_event_file(run_dir / "events.out.tfevents.1700000000.host.1.0", first)
    write_event_file(run_dir / "events.out.tfevents.1700009999.host.2.0", second)
    run = curvediag.load_run(tmp_path)
    loss = run.metrics["train/loss"]
    assert loss.steps.tolist() == [10, 20, 30, 40, 50]
    assert loss.values.tolist() == pytest.approx([3.0, 2.8, 2.55, 2.45, 2.4])
    assert loss.wall_time is not None and loss.wall_time[2] == pytest.approx(1.8e9 + 30)
    assert run.meta.resumed and run.meta.resumed_at_steps == [30]


def test_keras_train_and_validation_writers_are_one_run(tmp_path: Path) -> None:
    for sub, values in (("train", [1.0, 0.7, 0.5]), ("validation", [1.1, 0.9, 0.95])):
        (tmp_path / sub).mkdir()
        write_event_file(
            tmp_path / sub / "events.out.tfevents.1.host.v2",
            [
                scalar_event(
                    "epoch_loss", v, i, 1.7e9 + i, encoding="tensor_content", metadata=True
                )
                for i, v in enumerate(values)
            ],
        )
    run = curvediag.load_run(tmp_path)
    assert run.metrics["train/loss"].values.tolist() == pytest.approx([1.0, 0.7, 0.5])
    assert run.metrics["eval/loss"].values.tolist() == pytest.approx([1.1, 0.9, 0.95])


def test_add_scalars_sub_writers_are_one_run_with_their_run(tmp_path: Path) -> None:
    # SummaryWriter.add_scalars("Loss", {"train": ..., "val": ...}) writes Loss_train/ and
    # Loss_val/ beside the run's own event file, each holding the tag "Loss" (a real one:
    # holdout30 tb30b_saint_himalaya_overfit, read as 7 runs at its blind measurement)
    real = curvediag.load_run(
        Path(__file__).resolve().parents[1] / "benchmarks/real_runs/tb30b_saint_himalaya_overfit"
    )
    assert len(real.metrics["eval/loss"]) == 50
    assert real.metrics["eval/loss"].values.min() == pytest.approx(0.2076, abs=5e-5)
    write_event_file(tmp_path / "events.out.tfevents.1.host.0", events("lr", [(0, 0.1)]))
    for split, values in (("train", [1.0, 0.7, 0.5]), ("val", [1.1, 0.9, 0.95])):
        (tmp_path / f"Loss_{split}").mkdir()
        write_event_file(
            tmp_path / f"Loss_{split}" / "events.out.tfevents.1.host.1",
            events("Loss", list(enumerate(values))),
        )
    run = curvediag.load_run(tmp_path)
    assert run.metrics["train/loss"].values.tolist() == pytest.approx([1.0, 0.7, 0.5])
    assert run.metrics["eval/loss"].values.tolist() == pytest.approx([1.1, 0.9, 0.95])
    # a folder of runs named like that, with no run file above them, stays several runs
    (tmp_path / "events.out.tfevents.1.host.0").unlink()
    assert len(load_runs(tmp_path)) == 2


def test_several_runs_side_by_side(tmp_path: Path) -> None:
    for name in ("lr1e-3", "lr1e-4"):
        (tmp_path / name).mkdir()
        write_event_file(
            tmp_path / name / "events.out.tfevents.1.h", events("loss", [(1, 2.0), (2, 1.5)])
        )
    runs = load_runs(tmp_path)
    assert sorted(r.name for r in runs) == ["lr1e-3", "lr1e-4"]
    with pytest.raises(IngestError, match="holds 2 runs"):
        curvediag.load_run(tmp_path)


def test_text_only_event_file_is_a_run_without_metrics() -> None:
    run = curvediag.load_run(FIXTURES / "hf" / "healthy_cosine" / "runs")
    assert run.meta.max_grad_norm == 1.0 and run.meta.warmup_ratio == pytest.approx(0.1)
    assert run.meta.lr_scheduler_type == "cosine"
    assert run.meta.summary["train_runtime"] > 0


def test_truncated_event_file_keeps_intact_records() -> None:
    run = curvediag.load_run(FIXTURES / "tensorboard" / "truncated")
    good = curvediag.load_run(FIXTURES / "tensorboard" / "tensorboardx")
    assert len(run.metrics["train/loss"]) >= len(good.metrics["train/loss"]) - 1
    assert any("truncated" in w and "offset" in w for w in run.warnings)


def test_nan_and_inf_survive_both_writers() -> None:
    run = curvediag.load_run(FIXTURES / "tensorboard" / "tensorboardx")
    values = [v for s in run.metrics.values() for v in s.values.tolist()]
    assert any(math.isnan(v) for v in values) and any(math.isinf(v) for v in values)
    tf2 = curvediag.load_run(FIXTURES / "tensorboard" / "tf2_tensor")
    assert len(tf2.metrics["train/loss"]) > 10


def test_user_metric_mapping(tmp_path: Path) -> None:
    write_event_file(
        tmp_path / "events.out.tfevents.1.h",
        events("objective/total", [(i, 3.0 - 0.1 * i) for i in range(1, 20)]),
    )
    run = curvediag.load_run(tmp_path, aliases={"objective/total": "train/loss"})
    assert len(run.metrics["train/loss"]) == 19


def test_wandb_folder_step_is_the_trainer_global_step() -> None:
    folder = next((FIXTURES / "hf" / "healthy_linear" / "wandb").glob("offline-run-*"))
    run = curvediag.load_run(folder)
    ref = curvediag.load_run(FIXTURES / "hf" / "healthy_linear" / "trainer_state.json")
    assert run.metrics["train/loss"].steps.tolist() == ref.metrics["train/loss"].steps.tolist()
    assert run.meta.max_grad_norm == 1.0 and run.meta.train_batch_size


def test_unreadable_file(tmp_path: Path) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root can read anything")
    p = tmp_path / "trainer_state.json"
    p.write_text("{}")
    p.chmod(0)
    with pytest.raises(MalformedRunError, match="permission denied"):
        curvediag.load_run(p)


@pytest.mark.parametrize(
    "name",
    [
        "trainer_state.json",
        "events.out.tfevents.1.host",
        "run-abc.wandb",
        "metrics.csv",
        "export.csv",
        "history.jsonl",
        "wandb-summary.json",
    ],
)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=400))
def test_garbage_bytes_never_escape_as_tracebacks(tmp_path: Path, name: str, data: bytes) -> None:
    p = tmp_path / name
    p.write_bytes(data)
    try:
        runs = load_runs(p)
    except CurvediagError as exc:
        assert str(p) in str(exc)
        return
    for run in runs:
        curvediag.diagnose(run)


def test_wandb_run_folder_files(tmp_path: Path) -> None:
    import shutil

    src = next((FIXTURES / "hf" / "healthy_linear" / "wandb").glob("offline-run-*"))
    folder = tmp_path / "wandb" / src.name
    shutil.copytree(src, folder)
    (folder / "files").mkdir(exist_ok=True)
    (folder / "files" / "wandb-metadata.json").write_text(
        '{"program": "train.py", "gpu": "NVIDIA A100", "gpu_count": 8, "host": "h"}'
    )
    (folder / "files" / "config.yaml").write_text("my_setting:\n  desc: null\n  value: 7\n")
    (tmp_path / "wandb" / "latest-run").symlink_to(folder)
    runs = load_runs(tmp_path)  # latest-run is not a second run
    assert len(runs) == 1
    meta = runs[0].meta
    assert meta.hyperparameters["my_setting"] == 7  # W&B's value-nesting removed
    assert meta.hyperparameters["wandb_metadata"]["gpu_count"] == 8
    assert "host" not in meta.hyperparameters["wandb_metadata"]


def test_every_reader_follows_the_protocol() -> None:
    from curvediag.ingest import FORMATS
    from curvediag.ingest.base import Reader, readers

    regs = readers()
    assert tuple(regs) == FORMATS  # detection order is the registry's order
    for name, reader in regs.items():
        assert isinstance(reader, Reader), name
        assert name == reader.FORMAT
