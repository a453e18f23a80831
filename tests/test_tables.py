"""The tabular readers: W&B chart export / runs table / history / summary, Lightning metrics.csv,
TensorBoard CSV export, plain CSV/JSONL. Corpus files (../shared/corpus) when present, small
hand-written edge cases in tests/data/tables/, and a property test on random/truncated input.
"""

from __future__ import annotations

import csv
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curvediag
from curvediag.errors import (
    CurvediagError,
    MalformedRunError,
    MissingDependencyError,
    UnrecognizedFormatError,
)
from curvediag.ingest import csv_logs, load_runs, tables, text_logs, wandb_tables
from curvediag.ingest.trainer_args import apply_trainer_config
from curvediag.ingest.wandb_tables import split_header
from curvediag.model import Run, RunMeta

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
DATA = Path(__file__).resolve().parent / "data" / "tables"
PREFIXES = ("wbx_", "wbh_", "wbs_", "pl_", "tbcsv_")


def _manifest() -> dict[str, dict[str, str]]:
    path = CORPUS / "MANIFEST.tsv"
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as fh:
        return {row["id"]: row for row in csv.DictReader(fh, delimiter="\t")}


MANIFEST = _manifest()


def _corpus_file(entry: str) -> Path:
    folder = CORPUS / entry
    if not folder.is_dir():
        pytest.skip(f"corpus entry {entry} not present")
    files = [p for p in folder.iterdir() if p.is_file()]
    assert len(files) == 1, files
    return files[0]


# --------------------------------------------------------------------------------------------
# Corpus: (format, number of runs, {metric: points of the first run}, key metric for MANIFEST)
# --------------------------------------------------------------------------------------------
EXPECTED: dict[str, tuple[str, int, dict[str, int], str | None]] = {
    "wbx_diffusion_flowers": ("wandb-csv", 2, {"train/loss": 1170}, "train/loss"),
    "wbx_multiview_train_loss": ("wandb-csv", 4, {"train/loss": 10}, "train/loss"),
    "wbx_multiview_val_loss": ("wandb-csv", 4, {"eval/loss": 10}, "eval/loss"),
    "wbx_rl_microgrid": (
        "wandb-csv",
        7,
        {"train/ray/tune/custom_metrics/energy_cost_mean": 100},
        None,
    ),
    "wbx_snet_gap": ("wandb-csv", 14, {"train/dataset_stats.S100_N30_m3_full.gap_mean": 301}, None),
    "wbx_chess_nominmax": (
        "wandb-csv",
        6,
        {
            "train/legal_piece_moves_accuracy": 432,
            "train/hard_position_accuracy": 432,
            "train/average_correct_plies": 432,
        },
        None,
    ),
    "wbx_ea_grouped": ("wandb-csv", 3, {"train/generation": 668}, None),
    "wbh_nanogpt_base": (
        "wandb-history",
        1,
        {"train/loss": 21, "eval/loss": 21, "train/learning_rate": 21, "train/step_loss": 501},
        "train/loss",
    ),
    "wbh_tts_history": ("wandb-history", 1, {"train/loss": 41, "eval/loss": 8}, "train/loss"),
    "wbh_spaceinvaders": (
        "wandb-history",
        1,
        {"train/episodic_reward": 98, "train/cumulative_avg_reward": 98},
        None,
    ),
    "wbs_chaos": ("wandb-summary", 1, {"train/loss": 1, "train/grad_norm": 1}, "train/loss"),
    "wbs_gemma2b": (
        "wandb-summary",
        1,
        {"train/loss": 1, "eval/loss": 1, "train/grad_norm": 1},
        "train/loss",
    ),
    "pl_slm_training": ("lightning-csv", 1, {"train/loss": 2814, "eval/loss": 10}, "train/loss"),
    # 2000 epochs of 32 steps, train_loss_step every 50 steps (1280) and train_loss_epoch every
    # epoch (2000): the denser epoch series is the curve (labelled from it, too); the corpus
    # manifest counted the per-step points
    "pl_pinn_pendulum": ("lightning-csv", 1, {"train/loss": 2000}, "train/loss_step"),
    "pl_probing": ("lightning-csv", 1, {"train/loss": 28}, "train/loss"),
    "tbcsv_unet_train": ("tensorboard-csv", 1, {"train/loss": 100}, "train/loss"),
    "tbcsv_unet_valid": ("tensorboard-csv", 1, {"eval/loss": 100}, "eval/loss"),
}


def test_every_corpus_entry_of_these_kinds_is_covered() -> None:
    if not CORPUS.is_dir():
        pytest.skip("corpus not present")
    present = {p.name for p in CORPUS.iterdir() if p.is_dir() and p.name.startswith(PREFIXES)}
    assert present - set(EXPECTED) - {"wbx_nanogpt_runs_table"} == set()


@pytest.mark.corpus
@pytest.mark.parametrize("entry", sorted(EXPECTED))
def test_corpus_file_loads(entry: str) -> None:
    path = _corpus_file(entry)
    fmt, n_runs, points, key = EXPECTED[entry]
    reader = tables.detect(path)
    assert reader is not None
    assert fmt == reader.FORMAT
    runs = tables.read_all(path)
    assert len(runs) == n_runs
    assert all(r.format == fmt and r.source == str(path) for r in runs)
    first = runs[0]
    for metric, n in points.items():
        assert len(first.metrics[metric]) == n, metric
    for run in runs:
        for name, series in run.metrics.items():
            # bands and W&B's counter never become metrics
            assert not name.lower().endswith(("__min", "__max", "/_step")), name
            assert np.all(np.diff(series.steps) > 0)
    if key is not None and entry in MANIFEST:
        assert len(first.metrics[key]) == int(MANIFEST[entry]["n_points"])
    if entry.startswith("wbx_") and not any(
        k in first.metrics for k in ("train/loss", "eval/loss")
    ):
        assert MANIFEST.get(entry, {}).get("n_points", "0") == "0"


@pytest.mark.corpus
def test_corpus_values() -> None:
    flowers = tables.read_all(_corpus_file("wbx_diffusion_flowers"))
    assert [r.name for r in flowers] == [
        "oxford_flowers102-colu-conv2d",
        "oxford_flowers102-relu-conv2d",
    ]
    assert [len(r.metrics["train/loss"]) for r in flowers] == [1170, 1030]
    loss = flowers[0].metrics["train/loss"]
    assert loss.values[0] == pytest.approx(0.185, abs=1e-3)
    assert loss.values.min() == pytest.approx(0.0126, abs=1e-4)

    (nano,) = tables.read_all(_corpus_file("wbh_nanogpt_base"))
    train, val = nano.metrics["train/loss"], nano.metrics["eval/loss"]
    assert train.values[0] == pytest.approx(4.31, abs=0.01)
    assert train.values[-1] == pytest.approx(0.636, abs=1e-3)
    assert val.values.min() == pytest.approx(1.47, abs=0.01)
    assert val.values[-1] == pytest.approx(1.69, abs=0.01)
    assert train.wall_time is not None and np.all(train.wall_time > 1.7e9)
    assert not any("sampled" in w for w in nano.warnings)  # 523 rows, every _step

    (slm,) = tables.read_all(_corpus_file("pl_slm_training"))
    assert slm.metrics["train/loss"].values[0] == pytest.approx(7.63, abs=0.01)
    assert slm.metrics["eval/loss"].values.min() == pytest.approx(3.57, abs=0.01)
    assert "train/loss_epoch" in slm.metrics

    (pinn,) = tables.read_all(_corpus_file("pl_pinn_pendulum"))
    assert pinn.metrics["train/loss"].values[0] == pytest.approx(139.92, abs=0.01)  # epoch 0
    assert pinn.metrics["train/loss_step"].values[0] == pytest.approx(191.9, abs=0.1)

    (unet,) = tables.read_all(_corpus_file("tbcsv_unet_train"))
    tl = unet.metrics["train/loss"]
    assert tl.values[0] == pytest.approx(524.1, abs=0.1) and tl.values.min() == pytest.approx(
        506.5, abs=0.1
    )
    assert tl.wall_time is not None

    micro = tables.read_all(_corpus_file("wbx_rl_microgrid"))
    assert micro[0].name == "checkpoint: rl_algos/sac_ckpts/dashing-puddle-1030700.ckpt"
    lengths = sorted(len(next(iter(r.metrics.values()))) for r in micro)
    assert lengths[0] < 300 and lengths[-1] == 1000

    grouped = tables.read_all(_corpus_file("wbx_ea_grouped"))
    assert [r.name for r in grouped] == ["algo: UCEA", "algo: MultiEA", "algo: EA"]


@pytest.mark.corpus
def test_corpus_summaries() -> None:
    (gemma,) = tables.read_all(_corpus_file("wbs_gemma2b"))
    assert gemma.metrics["train/loss"].values.tolist() == [1.356]  # not the run-average train_loss
    assert gemma.metrics["train/loss"].steps.tolist() == [68559]
    assert gemma.meta.global_step == 68559
    assert gemma.meta.summary["train_loss"] == pytest.approx(1.3753, abs=1e-4)
    assert "confusion_matrix_table" not in gemma.meta.summary  # a media dict
    assert not {"train/runtime", "train/total_flos", "train/train_loss"} & gemma.metrics.keys()
    assert any("only final values" in w for w in gemma.warnings)
    (chaos,) = tables.read_all(_corpus_file("wbs_chaos"))
    assert chaos.metrics["train/loss"].values[0] == pytest.approx(4.99e-05, rel=1e-3)
    assert chaos.metrics["train/grad_norm"].values[0] == pytest.approx(0.299, abs=1e-3)


@pytest.mark.corpus
def test_corpus_summary_agrees_with_trainer_state() -> None:
    import curvediag

    state = CORPUS / "ts_gemma2b"
    if not state.is_dir():
        pytest.skip("ts_gemma2b not present")
    ts = curvediag.load_run(next(p for p in state.iterdir() if p.is_file()))
    (wb,) = tables.read_all(_corpus_file("wbs_gemma2b"))
    assert ts.metrics["train/loss"].values[-1] == pytest.approx(
        wb.metrics["train/loss"].values[0], rel=1e-3
    )
    assert ts.last_step == wb.meta.global_step


@pytest.mark.corpus
def test_corpus_runs_table_is_refused() -> None:
    path = _corpus_file("wbx_nanogpt_runs_table")
    assert tables.detect(path) is wandb_tables.CHART_EXPORT
    with pytest.raises(MalformedRunError, match=r"runs-table export.*not curves") as info:
        tables.read_all(path)
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------------------------
# Hand-written edge cases
# --------------------------------------------------------------------------------------------
def test_multi_run_export_with_bands_and_staggered_rows() -> None:
    runs = tables.read_all(DATA / "multi_run_minmax.csv")
    assert [r.name for r in runs] == ["sweep - a:1", "dashing-puddle-7"]  # ' - ' in a run name
    a, b = runs
    assert set(a.metrics) == {"train/loss", "eval/acc.top-1"}
    assert a.metrics["train/loss"].steps.tolist() == [0, 10, 20, 30, 40]
    assert a.metrics["eval/acc.top-1"].steps.tolist() == [10, 30]
    # the shorter run's empty cells are missing, its NaN cell is kept
    assert b.metrics["train/loss"].steps.tolist() == [0, 10, 20]
    assert math.isnan(b.metrics["train/loss"].values[1])
    assert not any("group" in w for w in a.warnings)  # MIN == MAX == value: a single run


def test_split_header_rules() -> None:
    cells = [
        "checkpoint: rl_algos/sac_ckpts/dashing-puddle-1030700.ckpt - _step",
        "checkpoint: rl_algos/sac_ckpts/dashing-puddle-1030700.ckpt - a/b.c__MAX",
        "x - y - z",
        "no separator",
    ]
    assert split_header(cells) == [
        ("checkpoint: rl_algos/sac_ckpts/dashing-puddle-1030700.ckpt", "_step", "value"),
        ("checkpoint: rl_algos/sac_ckpts/dashing-puddle-1030700.ckpt", "a/b.c", "max"),
        ("x", "y - z", "value"),
        None,
    ]


def test_unquoted_export_without_bands() -> None:
    runs = tables.read_all(DATA / "unquoted_nominmax.csv")
    assert [r.name for r in runs] == ["run-a", "run-b"]
    assert runs[0].metrics["eval/loss"].steps.tolist() == [150, 200]
    assert runs[1].metrics["eval/loss"].values.tolist() == [0.9, 0.8, 0.75]
    assert "train/legal_piece_moves_accuracy" in runs[1].metrics


def test_grouped_export_warns_that_points_aggregate_runs() -> None:
    (run,) = tables.read_all(DATA / "grouped.csv")
    assert run.name == "algo: EA"
    assert run.metrics["train/generation"].values.tolist() == [1.5, 2.5, 3.5]
    assert any("group of runs" in w for w in run.warnings)


def test_runs_table_is_refused() -> None:
    with pytest.raises(MalformedRunError, match="runs-table export"):
        tables.read_all(DATA / "runs_table.csv")


def test_x_axis_that_is_not_a_step_uses_the_runs_step(tmp_path: Path) -> None:
    p = tmp_path / "export.csv"
    p.write_text(
        "Relative Time (Process),r1 - _step,r1 - loss,r2 - loss\n"
        "0.5,0,2.0,3.0\n1.5,5,1.5,\n2.5,10,1.0,2.0\n",
        encoding="utf-8",
    )
    r1, r2 = tables.read_all(p)
    assert r1.metrics["train/loss"].steps.tolist() == [0, 5, 10]
    assert r2.metrics["train/loss"].steps.tolist() == [0, 1]  # no _step: point numbers
    assert any("point numbers" in w for w in r2.warnings)


def test_sparse_history_csv_with_index_column_and_hf_global_step() -> None:
    (run,) = tables.read_all(DATA / "history_sparse.csv")
    assert run.format == "wandb-history" and run.name == "history_sparse"
    loss = run.metrics["train/loss"]
    assert loss.steps.tolist() == [10, 20, 30, 40]  # train/global_step, not _step
    assert loss.values[2] == math.inf
    assert loss.wall_time is not None and loss.wall_time[0] == 1700000000.5
    assert run.metrics["eval/loss"].steps.tolist() == [20, 40]
    assert not any(k.startswith(("train/_", "train/Unnamed", "train/media")) for k in run.metrics)
    assert "train/global_step" not in run.metrics


def _history(rows: int, steps: list[int]) -> str:
    lines = ["_step,_runtime,loss"]
    lines += [f"{s},{i * 0.5},{3.0 / (1 + i)}" for i, s in enumerate(steps[:rows])]
    return "\n".join(lines) + "\n"


def test_sampled_history_dump_is_flagged(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    steps = np.sort(rng.choice(np.arange(1, 20000), size=499, replace=False)).tolist()
    p = tmp_path / "history.csv"
    p.write_text(_history(500, [0, *steps]), encoding="utf-8")
    (run,) = tables.read_all(p)
    assert len(run.metrics["train/loss"]) == 500
    assert any("looks sampled" in w for w in run.warnings)
    full = tmp_path / "full.csv"
    full.write_text(_history(500, list(range(0, 5000, 10))), encoding="utf-8")
    (run,) = tables.read_all(full)
    assert not any("sampled" in w for w in run.warnings)


def test_history_jsonl_with_media_nan_and_truncated_line() -> None:
    (run,) = tables.read_all(DATA / "history_media.jsonl")
    assert run.format == "wandb-history"
    assert set(run.metrics) == {
        "train/episodic_reward",
        "train/cumulative_avg_reward",
        "train/loss",
        "train/nested/grad_norm",
    }
    assert math.isnan(run.metrics["train/loss"].values[1])
    assert run.metrics["train/nested/grad_norm"].values.tolist() == [1.5, math.inf]
    assert any("looks truncated" in w for w in run.warnings)


def test_history_in_run_folder_reads_config_and_summary(tmp_path: Path) -> None:
    files = tmp_path / "run-20200218_000000-abcd1234" / "files"
    files.mkdir(parents=True)
    (files / "wandb-history.jsonl").write_text(
        '{"loss": 2.0, "_step": 0}\n{"loss": 1.0, "_step": 1}\n', encoding="utf-8"
    )
    (files / "config.yaml").write_text(
        "learning_rate:\n  desc: null\n  value: 0.001\n", encoding="utf-8"
    )
    (files / "wandb-summary.json").write_text('{"loss": 1.0, "_step": 1}', encoding="utf-8")
    assert tables.detect(files.parent) is wandb_tables.HISTORY
    assert not wandb_tables.SUMMARY.sniff(files.parent)  # the history wins
    (run,) = tables.read_all(files.parent)
    assert run.name == "run-20200218_000000-abcd1234"
    assert run.meta.learning_rate == 0.001 and run.meta.summary == {"loss": 1.0, "_step": 1}
    # a value under a !!python tag (an object the run's config held) reads as None: the rest of
    # the file still counts, and nothing is constructed
    (files / "config.yaml").write_text(
        "learning_rate:\n  value: 0.002\nloss_fn:\n  value: !!python/object:os.system {}\n"
        "max_steps:\n  value: 40\n",
        encoding="utf-8",
    )
    (run,) = tables.read_all(files.parent)
    assert run.meta.learning_rate == 0.002 and run.meta.max_steps == 40
    assert not any("config.yaml" in w for w in run.warnings)


def test_summary_folder_with_config() -> None:
    folder = DATA / "wandb_run"
    assert tables.detect(folder) is wandb_tables.SUMMARY
    (run,) = tables.read_all(folder)
    assert run.format == "wandb-summary" and run.name == "wandb_run"
    assert all(len(s) == 1 and s.steps[0] == 600 for s in run.metrics.values())
    assert run.metrics["train/loss"].values[0] == 1.356
    assert math.isnan(run.metrics["train/grad_norm"].values[0])
    assert "train/accuracy/top1" in run.metrics
    assert run.meta.summary["train_loss"] == 1.375 and "confusion" not in run.meta.summary
    assert run.meta.global_step == 600 and run.meta.epoch == 3.0
    m = run.meta
    assert (m.learning_rate, m.max_grad_norm, m.warmup_ratio, m.warmup_steps) == (
        0.0002,
        1.0,
        0.03,
        0,
    )
    assert (m.train_batch_size, m.gradient_accumulation_steps, m.lr_scheduler_type) == (
        4,
        8,
        "cosine",
    )
    assert m.max_steps is None and m.eval_steps is None  # -1 and null mean unset
    assert (m.logging_steps, m.save_steps, m.num_train_epochs) == (10.0, 500.0, 3.0)
    assert m.logging_nan_inf_filter is True
    assert m.hyperparameters["model_type"] == "gemma" and "_wandb" not in m.hyperparameters
    assert any("only final values" in w for w in run.warnings)


def test_summary_folder_with_binary_log_is_left_to_that_reader(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "wandb-summary.json").write_text("{}", encoding="utf-8")
    (tmp_path / "run-abc.wandb").write_bytes(b":W&B\xe1\xbe\x00")
    assert not wandb_tables.SUMMARY.sniff(tmp_path)


def test_apply_trainer_config() -> None:
    meta = RunMeta(max_steps=1000, learning_rate=0.1)
    apply_trainer_config(
        meta,
        {
            "max_steps": 50,
            "learning_rate": 0.001,
            "lr_scheduler_type": "SchedulerType.LINEAR",
            "per_device_train_batch_size": "8",  # not a number: ignored
            "train_batch_size": 16,
            "gradient_accumulation_steps": 0,  # invalid: ignored
            "warmup_ratio": 1.5,  # invalid: ignored
            "max_grad_norm": {"value": 0.5, "desc": None},
            "logging_nan_inf_filter": "yes",  # not a bool: ignored
            "_wandb": {"value": {}},
        },
    )
    assert meta.max_steps == 1000 and meta.learning_rate == 0.1  # already set: kept
    assert meta.lr_scheduler_type == "linear" and meta.train_batch_size == 16
    assert meta.gradient_accumulation_steps is None and meta.warmup_ratio is None
    assert meta.max_grad_norm == 0.5 and meta.logging_nan_inf_filter is None
    assert meta.hyperparameters["max_steps"] == 50 and "_wandb" not in meta.hyperparameters
    apply_trainer_config(meta, {"max_steps": 50}, overwrite=True)
    assert meta.max_steps == 50


def test_lightning_step_epoch_pairs() -> None:
    (run,) = tables.read_all(DATA / "metrics.csv")
    assert run.format == "lightning-csv"
    assert run.metrics["train/loss"].values.tolist() == [2.0, 1.8, 1.6, 1.5]  # *_step
    assert run.metrics["train/loss_epoch"].steps.tolist() == [19, 39]
    assert run.metrics["eval/loss"].values.tolist() == [1.92, 1.7]  # val_loss_epoch
    assert "eval/loss_step" in run.metrics
    assert "train/learning_rate" in run.metrics and run.meta.epoch == 1.0
    assert not run.meta.resumed


def test_tensorboard_csv_names_come_from_the_file_name(tmp_path: Path) -> None:
    (val,) = tables.read_all(DATA / "run-validation-tag-epoch_loss.csv")
    assert set(val.metrics) == {"eval/loss"} and val.format == "tensorboard-csv"
    (tr,) = tables.read_all(DATA / "run-.-tag-Loss_train.csv")
    assert set(tr.metrics) == {"train/loss"}
    p = tmp_path / "accuracy.csv"
    p.write_text("Wall time,Step,Value\n1.0,1,0.5\n", encoding="utf-8")
    (acc,) = tables.read_all(p)
    assert set(acc.metrics) == {"train/accuracy"}
    (custom,) = tables.read_all(p, aliases={"accuracy": "eval/accuracy"})
    assert set(custom.metrics) == {"eval/accuracy"}


def test_plain_jsonl_and_csv() -> None:
    (j,) = tables.read_all(DATA / "plain.jsonl")
    assert j.format == "jsonl"
    assert j.metrics["train/loss"].steps.tolist() == [0, 100, 200]
    assert j.metrics["eval/loss"].values.tolist() == [2.2]
    assert j.metrics["train/learning_rate"].wall_time is not None
    (c,) = tables.read_all(DATA / "plain_epoch.csv")
    assert c.format == "csv"
    assert set(c.metrics) == {"train/loss", "eval/loss", "train/accuracy", "train/epoch"}
    assert any("'epoch' column" in w for w in c.warnings)
    # the steps are the epochs, and the epoch is kept beside them
    assert c.metrics["train/epoch"].values.tolist() == c.metrics["train/loss"].steps.tolist()


def test_keras_csvlogger_default_training_log_is_read(tmp_path: Path) -> None:
    # Keras' CSVLogger writes a CSV named training.log by default (as in real repositories)
    log = tmp_path / "training.log"
    log.write_text(
        "epoch,acc,loss,val_acc,val_loss\n0,0.92,0.291,0.95,0.20\n1,0.97,0.125,0.96,0.15\n"
        "2,0.98,0.090,0.97,0.13\n",
        encoding="utf-8",
    )
    (run,) = load_runs(log)
    assert run.format == "csv"
    assert run.name == tmp_path.name  # "training" says nothing: the run is named by its folder
    assert run.metrics["train/loss"].values.tolist() == [0.291, 0.125, 0.09]
    assert run.metrics["eval/loss"].values.tolist() == [0.2, 0.15, 0.13]
    # a .log that is not a CSV log (a console log) is not taken for one
    text = tmp_path / "train.log"
    text.write_text("Epoch 1/3\nloss: 0.29 - acc: 0.92\n", encoding="utf-8")
    assert not csv_logs.sniff_plain_csv(text)


def test_read_of_a_multi_run_file_returns_the_first_with_a_warning() -> None:
    run = wandb_tables.CHART_EXPORT.read(DATA / "multi_run_minmax.csv")
    assert isinstance(run, Run) and run.name == "sweep - a:1"
    assert any("holds 2 runs" in w for w in run.warnings)


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("empty.csv", "file is empty"),
        ("garbage.csv", "binary data"),
        ("header_only.csv", "no data rows"),
        ("no_step.csv", "no step column"),
        ("text_only.csv", "no numeric metric"),
        ("json_named.csv", "looks like JSON"),
        ("csv_named.jsonl", "not JSON"),
        ("runs_table.csv", "runs-table"),
    ],
)
def test_bad_files_raise_clear_errors(name: str, pattern: str) -> None:
    path = DATA / name
    with pytest.raises(MalformedRunError, match=pattern) as info:
        tables.read_all(path)
    assert str(path) in str(info.value)


def test_unknown_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(MalformedRunError, match="not found"):
        tables.read_all(tmp_path / "nope.csv")
    odd = tmp_path / "log.bin"
    odd.write_bytes(b"\x00\x01")
    with pytest.raises(UnrecognizedFormatError):
        tables.read_all(odd)
    for reader in tables.READERS:
        with pytest.raises(CurvediagError):
            reader.read_all(tmp_path / "nope.csv")


def test_non_utf8_text(tmp_path: Path) -> None:
    p = tmp_path / "latin1.csv"
    p.write_bytes("step,loss\n1,2\n# caf\xe9\n".encode("latin-1"))
    with pytest.raises(MalformedRunError, match="not UTF-8"):
        tables.read_all(p)


def test_permission_denied(monkeypatch: pytest.MonkeyPatch) -> None:
    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)
    with pytest.raises(MalformedRunError, match="permission denied"):
        tables.read_all(DATA / "plain_epoch.csv")


def test_parquet_without_pyarrow_names_the_extra(tmp_path: Path) -> None:
    p = tmp_path / "history.parquet"
    p.write_bytes(b"PAR1 not really")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match="pyarrow"):
            tables.read_all(p)
    else:
        with pytest.raises(MalformedRunError):
            tables.read_all(p)


def test_parquet_roundtrip_when_pyarrow_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pandas as pd

    p = tmp_path / "history.parquet"
    pd.DataFrame(
        {"_step": [0, 1, 2], "loss": [2.0, None, float("nan")], "_timestamp": [1.0, 2.0, 3.0]}
    ).to_parquet(p)
    (run,) = tables.read_all(p)
    assert run.metrics["train/loss"].steps.tolist()[0] == 0


# --------------------------------------------------------------------------------------------
# Property test: nothing but curvediag errors escapes
# --------------------------------------------------------------------------------------------
#: (reader, file names to try it under)
TARGETS = [
    (wandb_tables.CHART_EXPORT, ["wandb_export.csv"]),
    (wandb_tables.HISTORY, ["history.csv", "wandb-history.jsonl", "history.parquet"]),
    (wandb_tables.SUMMARY, ["wandb-summary.json"]),
    (csv_logs.LIGHTNING, ["metrics.csv"]),
    (csv_logs.TENSORBOARD_CSV, ["train_loss.csv"]),
    (csv_logs.PLAIN_CSV, ["log.csv", "log.tsv"]),
    (csv_logs.PLAIN_JSONL, ["log.jsonl"]),
]
CASES = [(reader, name) for reader, names in TARGETS for name in names]


def _sources() -> list[Path]:
    out = sorted(p for p in DATA.rglob("*") if p.is_file() and p.stat().st_size > 0)
    if CORPUS.is_dir():
        for folder in sorted(CORPUS.iterdir()):
            if folder.is_dir() and folder.name.startswith(PREFIXES):
                out += [p for p in folder.iterdir() if p.is_file() and p.stat().st_size < 40_000]
    return out


SOURCES = _sources()


def _check(data: bytes, name: str, reader: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        assert isinstance(tables.sniff(path), bool)
        for r in [reader, *tables.READERS]:
            assert isinstance(r, tables.TableReader)
            try:
                runs = r.read_all(path)
            except CurvediagError:
                continue
            assert isinstance(runs, list) and runs
            assert all(isinstance(run, Run) for run in runs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=600), case=st.sampled_from(CASES))
def test_random_bytes_raise_only_curvediag_errors(
    data: bytes, case: tuple[tables.TableReader, str]
) -> None:
    reader, name = case
    _check(data, name, reader)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(SOURCES),
    cut=st.floats(min_value=0.0, max_value=1.0),
    flip=st.one_of(st.none(), st.tuples(st.floats(0.0, 1.0), st.integers(0, 255))),
)
def test_truncated_and_damaged_files_raise_only_curvediag_errors(
    source: Path, cut: float, flip: tuple[float, int] | None
) -> None:
    raw = bytearray(source.read_bytes())
    raw = raw[: int(len(raw) * cut)]
    if flip is not None and raw:
        raw[min(int(len(raw) * flip[0]), len(raw) - 1)] = flip[1]
    for reader, names in TARGETS:
        _check(bytes(raw), source.name if source.name else names[0], reader)


def test_a_loss_log_without_a_step_column_is_numbered_by_row(tmp_path: Path) -> None:
    # a loop writing one row per epoch and no counter (a real one: holdout6 csv_minivit_cifar10,
    # columns train_loss, train_acc, val_loss, val_acc), which read as "no step column" before
    p = tmp_path / "train_log.csv"
    p.write_text("train_loss,val_loss\n2.0,1.9\n1.5,1.6\n1.2,1.4\n", encoding="utf-8")
    (run,) = tables.read_all(p)
    assert run.metrics["train/loss"].steps.tolist() == [1, 2, 3]
    assert run.metrics["eval/loss"].values.tolist() == [1.9, 1.6, 1.4]
    assert any("numbered 1, 2" in w for w in run.warnings)
    (real,) = load_runs(
        Path(__file__).resolve().parents[1] / "benchmarks/real_runs/csv_minivit_cifar10"
    )
    assert real.metrics["train/loss"].values.size == 50


REAL = Path(__file__).resolve().parents[1] / "benchmarks" / "real_runs"


def _wandb_files(run_id: str) -> Path:
    """The one W&B ``files/`` folder of a benchmark run, wherever its repository put it."""
    (files,) = (REAL / run_id).glob("**/wandb/*/files")
    return files


@pytest.mark.parametrize(
    ("run_id", "train", "evals"),
    [
        # a plain loop's CamelCase and spaced columns (Epoch, TrainLoss, ValLoss, mIoU, ...)
        ("csv_kary_mtl_seg_pose_stuck", "train/TrainLoss", "train/ValLoss"),
        ("csv_hevisum_spatial_expr", "train/Train_Loss", "train/Val_Loss"),
        # the one loss column of an autoencoder (epoch, mse_loss, step)
        ("csv_autoencoder", "train/mse_loss", None),
        # a regression trained on its MSE, logged as train_mse_step / val_mse_epoch, no "loss"
        ("pl_dctaxi_fare_mlp", "train/mse", "eval/mse"),
        # a Lightning module's namespaced loss (s2/loss)
        ("pl_penn_action_stage2", "train/s2/loss", None),
        # the total of a physics-informed loss beside its parts (loss_data, loss_pde, ...)
        ("wbb_pinn_ns_inverse_blowup", "train/total_loss", None),
        # train_loss beside data_loss and f_loss: "train" is looked for after the namespace
        ("wbb_pino_darcy_pretrain", "train/train_loss", None),
        # a SummaryWriter's task1_roberta/loss/train and .../loss/eval: the split after the loss
        (
            "tb_roberta_sentiment_aug_overfit",
            "train/task1_roberta/loss/train",
            "train/task1_roberta/loss/eval",
        ),
        # a detector's Train_Loss beside Train_obj_Loss, Train_bbox_Loss, Train_class_Loss (and
        # Val_ the same): the one naming only its split and "loss" is the total
        (
            "wbb_yolo_resnet18_bottle_val_rises_stopped",
            "train/Train_Loss",
            "train/Val_Loss",
        ),
        # a VAE's Training/Pixel, Perceptual, Style, KL Divergence and their Overall, nothing
        # named a loss (holdout21, "nothing" found at its blind measurement)
        ("tb21c_coronagraph_vae_htuning_stuck", "train/Training/Overall", "eval/Overall"),
    ],
)
def test_a_loss_under_a_free_form_name_is_found(run_id: str, train: str, evals: str | None) -> None:
    (run,) = load_runs(REAL / run_id)
    assert f"train/loss is taken from {train!r}" in run.warnings
    assert np.array_equal(run.metrics["train/loss"].values, run.metrics[train].values)
    if evals is None:
        assert not any(w.startswith("eval/loss is taken") for w in run.warnings)
    else:
        assert f"eval/loss is taken from {evals!r}" in run.warnings


@pytest.mark.parametrize(
    ("run_id", "source"),
    [
        # Lightning's LearningRateMonitor names the rate after its optimizer
        ("tb_ifood_foodcnn", "train/lr-SGD"),
        ("tb_crypto_tft_optuna", "train/lr-Ranger"),
        # Ultralytics logs one rate per parameter group: the first group's is taken
        ("csv_gallstone_yolo11n_seg", "train/lr/pg0"),
        # Keras' TensorBoard callback and hand-written loops
        ("tb_keras_mnist_mlp_5ep", "train/epoch_learning_rate"),
        ("tb_catdog_lenet_39of100", "train/LearnRate"),
        ("csv_hevisum_spatial_expr", "train/Learning_Rate"),
        # a Lightning module logging under its own namespace (tune58: a warmup 45x longer than
        # the run went unseen without it)
        ("pl58c_selfies_mdlm_10_molecules_warmup_longer_than_run/metrics.csv", "train/trainer/lr"),
    ],
)
def test_a_learning_rate_under_a_free_form_name_is_found(run_id: str, source: str) -> None:
    (run,) = load_runs(REAL / run_id)
    assert f"train/learning_rate is taken from {source!r}" in run.warnings
    lr = run.metrics["train/learning_rate"]
    assert np.array_equal(lr.values, run.metrics[source].values)


def test_two_differently_named_learning_rates_stay_unnamed() -> None:
    # a backbone's rate and a projection head's: which one drives "the" schedule is a guess
    (run,) = load_runs(REAL / "wbh_qwen_sapiens_lr_wrap")
    assert {"train/backbone_lr", "train/proj_lr"} <= set(run.metrics)
    assert "train/learning_rate" not in run.metrics


def test_parts_of_a_loss_without_a_total_stay_unnamed(tmp_path: Path) -> None:
    # a GAN's generator and discriminator losses: neither is the run's loss
    p = tmp_path / "log.csv"
    p.write_text("epoch,g_loss,d_loss\n1,2.0,0.7\n2,1.8,0.69\n3,1.7,0.7\n", encoding="utf-8")
    (run,) = tables.read_all(p)
    assert "train/loss" not in run.metrics


def test_a_keras_history_saved_as_json_is_read_by_epoch(tmp_path: Path) -> None:
    # json.dump(model.fit(...).history): one list per metric, one entry per epoch
    p = tmp_path / "history.json"
    p.write_text(
        '{"loss": [0.9, 0.5, 0.4], "accuracy": [0.6, 0.8, 0.85], "val_loss": [0.7, 0.6, NaN]}',
        encoding="utf-8",
    )
    (run,) = load_runs(p)
    assert run.metrics["train/loss"].steps.tolist() == [1, 2, 3]
    assert run.metrics["train/loss"].values.tolist() == [0.9, 0.5, 0.4]
    assert run.metrics["eval/loss"].values[:2].tolist() == [0.7, 0.6]
    assert math.isnan(run.metrics["eval/loss"].values[2])
    assert any("Keras History.history" in w for w in run.warnings)
    # the real one-epoch history (holdout11 csv_toxicity_bilstm_one_epoch) loads, too short
    (real,) = load_runs(REAL / "csv_toxicity_bilstm_one_epoch" / "history.json")
    assert real.metrics["eval/loss"].values.tolist() == pytest.approx([0.04527220502495766])


def test_a_json_object_that_is_not_a_history_is_refused_by_name(tmp_path: Path) -> None:
    p = tmp_path / "history.json"
    p.write_text('{"loss": ["low", "lower"], "model": "bilstm"}', encoding="utf-8")
    with pytest.raises(MalformedRunError, match="no key holding a list of numbers") as info:
        load_runs(p)
    assert str(p) in str(info.value)


def test_metadata_beside_the_loss_lists_is_left_out() -> None:
    # a real one (tune14 csv_fer_effnetb0_phases): timestamp, backbone, class names and phase
    # labels before the train_loss / val_loss lists of 90 epochs
    (run,) = load_runs(REAL / "csv_fer_effnetb0_phases" / "training_history.json")
    assert run.metrics["train/loss"].values.size == 90
    assert run.metrics["eval/loss"].values.size == 90
    assert not any("timestamp" in k or "classes" in k for k in run.metrics)


def test_a_pre_2020_wandb_dryrun_folder_is_a_run() -> None:
    # WANDB_MODE=dryrun wrote wandb/dryrun-<date>-<id>/ (tune14
    # wbh_distilbert_treccar_stopped_warmup read as "no training log found here")
    (run,) = load_runs(REAL / "wbh_distilbert_treccar_stopped_warmup")
    assert "dryrun-20191202_084400-8fzemqx7" in run.source
    assert run.metrics["train/loss"].values.size == 20


def test_lightning_hparams_beside_the_log_give_the_planned_length(tmp_path: Path) -> None:
    # a real run (tune6 pl_vit_rope_tinyimagenet): hparams.yaml says max_epochs: 100 and the
    # metrics.csv stops in epoch 3; without the file its early stop went unseen
    (real,) = load_runs(REAL / "pl_vit_rope_tinyimagenet")
    assert real.meta.num_train_epochs == 100
    # a nested trainer mapping counts; Python object tags are never constructed
    log = tmp_path / "version_0"
    log.mkdir()
    (log / "metrics.csv").write_text("epoch,step,train_loss\n0,9,2.0\n0,19,1.8\n", "utf-8")
    (log / "hparams.yaml").write_text("lr: 0.01\ntrainer:\n  max_steps: 500\n", "utf-8")
    (run,) = load_runs(log)
    assert run.meta.max_steps == 500 and run.meta.hyperparameters["lr"] == 0.01
    # a value under a Python object tag reads as None (never constructed, never called) and the
    # rest of the file still counts (a real one: holdout15 tb_timesnet_bbca_74of1000, whose
    # NeuralForecast hparams.yaml holds the loss module as !!python/object and max_steps 1000)
    marker = tmp_path / "PWNED"
    (log / "hparams.yaml").write_text(
        f"lr: 0.01\nmodel: !!python/object/apply:os.system ['touch {marker}']\n"
        "trainer:\n  max_steps: 700\n",
        "utf-8",
    )
    (run,) = load_runs(log)
    assert run.meta.max_steps == 700 and run.meta.hyperparameters["model"] is None
    assert not marker.exists()
    (real,) = load_runs(REAL / "tb_timesnet_bbca_74of1000" / "version_0")
    assert real.meta.max_steps == 1000
    # a file that is not YAML at all is still skipped with a warning naming it
    (log / "hparams.yaml").write_text("lr: [0.01\n", "utf-8")
    (run,) = load_runs(log)
    assert run.meta.max_steps is None
    assert any("hparams.yaml: not read" in w for w in run.warnings)


def test_a_pandas_series_of_losses_takes_its_name_from_the_file(tmp_path: Path) -> None:
    # pd.Series(losses).to_csv("loss.csv"): an index column and one column headed "0" (a real
    # one: holdout12 csv_mblstm_detached_logits_flat, which read as "no loss column")
    (real,) = load_runs(REAL / "csv_mblstm_detached_logits_flat" / "loss.csv")
    assert real.metrics["train/loss"].values.size == 121
    assert any("a pandas Series" in w for w in real.warnings)
    # the same layout under a name that is not a loss stays an error naming the columns
    p = tmp_path / "scores.csv"
    p.write_text(",0\n0,0.5\n1,0.6\n", encoding="utf-8")
    with pytest.raises(MalformedRunError, match="no loss column"):
        load_runs(p)


def test_a_json_list_of_epoch_records_is_read(tmp_path: Path) -> None:
    # json.dump(history) of a loop appending one dict per epoch (a real one: holdout13
    # csv_smiles_vae, which read as "not a recognised training log")
    (real,) = load_runs(REAL / "csv_smiles_vae" / "history.json")
    assert real.metrics["train/loss"].values.size == 30
    assert real.metrics["eval/loss"].steps[:2].tolist() == [1, 2]
    p = tmp_path / "log.json"
    p.write_text('[{"loss": 0.9, "val": {"loss": 1.0}}, {"loss": 0.7, "val": {"loss": 0.8}}]')
    (run,) = load_runs(p)
    assert run.metrics["train/loss"].steps.tolist() == [1, 2]
    assert run.metrics["eval/loss"].values.tolist() == [1.0, 0.8]


def test_a_wandb_run_folder_under_another_name_is_found(tmp_path: Path) -> None:
    # a binary run-*.wandb in wandb/latest-run.431162/ (a real one: holdout13
    # wbb_distilbert_span_nz_eval_rises_5ep): the log file names the folder a run
    (run,) = load_runs(REAL / "wbb_distilbert_span_nz_eval_rises_5ep")
    assert "latest-run.431162" in run.source and run.metrics["eval/loss"].values.size == 5


def test_lightning_configs_nested_or_from_lightningcli_give_the_planned_epochs() -> None:
    import curvediag

    # LightningCLI's config.yaml (trainer: max_epochs: 300) beside the event file (holdout13
    # tb_comer_hmer_11of300ep), and a train: section of hparams.yaml (epochs: 30; holdout13
    # tb_deepsc_europarl_lr_stuck); both stops went unseen
    for run_id, planned, reached in (
        ("tb_comer_hmer_11of300ep", 300, 11),
        ("tb_deepsc_europarl_lr_stuck", 30, 12),
    ):
        d = curvediag.diagnose(REAL / run_id)
        assert d.run.meta.num_train_epochs == planned
        # Lightning counts epochs from 0: the highest index logged is one less than the epochs
        assert d.features["run.last_epoch"] == reached
        # (tb_comer_hmer stopped two evaluations after its eval loss's best: the information
        # finding of a stop where early stopping would stop a run)
        stops = ("run-ended-early", "run-stopped-where-planned-stops-would")
        f = next(f for f in d.findings if f.rule_id in stops)
        assert f"epoch {reached} of {planned} planned" in f.evidence


def test_a_detectors_loss_parts_sum_to_its_loss(tmp_path: Path) -> None:
    # Ultralytics YOLO's results.csv logs train/box_loss, cls_loss, dfl_loss and their val/
    # twins, never the total it trains on (a real one: tune14 csv_cucumber_yolo11n; its
    # box_loss alone was taken as "one of several evaluation sets" and no train loss was read)
    (run,) = load_runs(REAL / "csv_cucumber_yolo11n" / "results.csv")
    parts = [run.metrics[f"train/{p}_loss"].values for p in ("box", "cls", "dfl")]
    assert np.allclose(run.metrics["train/loss"].values, np.sum(parts, axis=0))
    assert run.metrics["eval/loss"].values[0] == pytest.approx(1.51782 + 2.43862 + 2.38075)
    assert not any("several evaluation sets" in w for w in run.warnings)
    # YOLOv10 logs its one-to-many (_om) and one-to-one (_oo) heads' parts apart and trains on
    # both (a real one: holdout18 mx18f_csv_rps_yolov10s_15ep, "no train or eval loss" at its
    # blind measurement)
    (v10,) = load_runs(REAL / "mx18f_csv_rps_yolov10s_15ep" / "results.csv")
    names = [f"{p}_{h}" for h in ("om", "oo") for p in ("box", "cls", "dfl")]
    total = np.sum([v10.metrics[f"train/{n}"].values for n in names], axis=0)
    assert np.allclose(v10.metrics["train/loss"].values, total)
    assert v10.metrics["train/loss"].values[0] == pytest.approx(
        1.4151 + 2.4813 + 1.5898 + 1.3941 + 5.207 + 1.5542
    )
    assert v10.metrics["eval/loss"].values[-1] == pytest.approx(4.89117, abs=1e-4)
    # a GAN's two losses are not parts of one objective: no sum
    p = tmp_path / "log.csv"
    p.write_text("epoch,g_loss,d_loss\n1,2.0,0.7\n2,1.8,0.69\n3,1.7,0.7\n", encoding="utf-8")
    (gan,) = tables.read_all(p)
    assert "train/loss" not in gan.metrics


def test_ultralytics_args_give_the_plan_and_its_early_stopping(tmp_path: Path) -> None:
    import shutil

    import curvediag

    # Ultralytics writes args.yaml beside results.csv; tune14 csv_cucumber_yolo11n's upstream
    # args.yaml says epochs: 20 and its log holds 10 (the file was not copied: written here)
    shutil.copy(REAL / "csv_cucumber_yolo11n" / "results.csv", tmp_path / "results.csv")
    (tmp_path / "args.yaml").write_text("task: detect\nepochs: 20\npatience: 100\n", "utf-8")
    d = curvediag.diagnose(tmp_path / "results.csv")
    assert d.run.meta.num_train_epochs == 20
    assert "run-ended-early" in d.finding_ids
    assert "epoch 10 of 20 planned" in next(
        f.evidence for f in d.findings if f.rule_id == "run-ended-early"
    )
    # with patience 1 the stop is still early: fitness is best at the last epoch, so early
    # stopping cannot have fired
    (tmp_path / "args.yaml").write_text("epochs: 20\npatience: 1\n", "utf-8")
    d = curvediag.diagnose(tmp_path / "results.csv")
    assert "run-ended-early" in d.finding_ids
    # a run whose best fitness lies patience epochs before its end stopped by itself
    rows = (tmp_path / "results.csv").read_text("utf-8").splitlines()
    head = rows[0].split(",")
    i50, i95 = head.index("metrics/mAP50(B)"), head.index("metrics/mAP50-95(B)")
    cut = []
    for k, row in enumerate(rows[1:], start=1):
        cells = row.split(",")
        if k > 4:  # fitness falls after epoch 4
            cells[i50], cells[i95] = "0.01", "0.01"
        cut.append(",".join(cells))
    (tmp_path / "results.csv").write_text("\n".join([rows[0], *cut]) + "\n", "utf-8")
    (tmp_path / "args.yaml").write_text("epochs: 20\npatience: 5\n", "utf-8")
    d = curvediag.diagnose(tmp_path / "results.csv")
    assert d.run.meta.finished is True and "run-ended-early" not in d.finding_ids
    assert any("stopped by early stopping" in w for w in d.run.warnings)


@pytest.mark.parametrize(
    "run_id", ["pl_surrey_seld_valplateau", "pl_tft_crypto_earlystop", "pl_lida_bilstm_sbert_5ep"]
)
def test_a_project_folder_holding_lightning_logs_loads(run_id: str) -> None:
    # holdout15: projects committed with lightning_logs/version_3/metrics.csv inside were
    # refused with "no training log found here"
    (run,) = load_runs(REAL / run_id)
    assert run.format == "lightning-csv"
    assert run.name == "lightning_logs/version_3"
    assert "train/loss" in run.metrics


def test_lightning_logs_deeper_than_four_folders_are_not_searched(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c" / "d" / "version_0"
    deep.mkdir(parents=True)
    (deep / "metrics.csv").write_text("epoch,step,train_loss\n0,1,0.9\n0,2,0.8\n", "utf-8")
    with pytest.raises(UnrecognizedFormatError, match="lightning_logs"):
        load_runs(tmp_path)


@pytest.mark.parametrize(
    ("run_id", "first_steps"),
    [
        # {"train": [...], "val": [...]}: one entry per epoch
        ("json_archon_slm", [1, 2, 3]),
        # {"steps": [...], "train": [...], "val": [...]}: numbered by its steps
        ("json_tinystories_bigram", [0, 100, 200]),
        # [[step, train, val], ...]
        ("json_tinygpt_arxiv_overfit", [200, 400, 600]),
    ],
)
def test_a_loss_history_of_split_named_lists_loads(run_id: str, first_steps: list[int]) -> None:
    (run,) = load_runs(REAL / run_id / "loss_history.json")
    train, ev = run.metrics["train/loss"], run.metrics["eval/loss"]
    assert train.steps[:3].tolist() == first_steps
    assert len(train) == len(ev) > 20
    assert "train/epoch" not in run.metrics or first_steps[0] == 1


def test_split_named_lists_are_a_loss_where_the_file_or_its_curve_says_so(tmp_path: Path) -> None:
    # {"train": [...]} in history.json is read as the loss only when its train curve falls (a
    # real one: holdout17 js17e_char_transformer_shakespeare_undertrained, refused at its blind
    # measurement), with a warning saying so; a rising one (an accuracy) is not guessed at
    (real,) = load_runs(REAL / "js17e_char_transformer_shakespeare_undertrained" / "history.json")
    assert real.metrics["train/loss"].values.size == 10 and "eval/loss" in real.metrics
    assert any("names no metric" in w for w in real.warnings)
    p = tmp_path / "history.json"
    p.write_text('{"train": [0.5, 0.6, 0.7], "val": [0.45, 0.5, 0.55]}', encoding="utf-8")
    with pytest.raises(CurvediagError):
        load_runs(p)
    p.write_text('{"train": [0.9, 0.8, 0.7], "val": [0.95, 0.9, 0.85]}', encoding="utf-8")
    assert load_runs(p)[0].metrics["train/loss"].values.tolist() == [0.9, 0.8, 0.7]
    # a file named for another metric stays refused
    acc = tmp_path / "accuracy.json"
    acc.write_text('{"train": [0.9, 0.8, 0.7], "val": [0.95, 0.9, 0.85]}', encoding="utf-8")
    with pytest.raises(CurvediagError):
        load_runs(acc)
    rows = tmp_path / "accuracy_history.json"
    rows.write_text("[[1, 0.5, 0.4], [2, 0.6, 0.5], [3, 0.7, 0.55]]", encoding="utf-8")
    with pytest.raises(CurvediagError):
        load_runs(rows)


def test_a_headerless_losses_csv_is_a_row_counter_and_the_loss(tmp_path: Path) -> None:
    # holdout15 csv_graphweather_rollout_losses: train.py appends "row,loss" lines, no header
    (run,) = load_runs(REAL / "csv_graphweather_rollout_losses" / "losses.csv")
    loss = run.metrics["train/loss"]
    assert loss.steps[:3].tolist() == [0, 1, 2]
    assert loss.values[0] == pytest.approx(0.40690839290618896)
    assert any("has no header" in w for w in run.warnings)
    # the same lines in a file that does not name a loss are not guessed at
    other = tmp_path / "values.csv"
    other.write_text("0,0.5\n1,0.4\n2,0.3\n", encoding="utf-8")
    with pytest.raises(CurvediagError):
        load_runs(other)


def test_a_json_history_list_wrapped_in_an_object_with_its_config_is_read(tmp_path: Path) -> None:
    # {"model_config": {...}, "training_config": {"max_steps": 3000, ...}, "final_...": ...,
    # "history": [{"step": 0, "train_loss": ..., "validation_loss": ...}, ...]} (a real one:
    # holdout16 js16e_sci_abstract_gpt_cosine_3k, read as "not a recognised training log" at
    # its blind measurement)
    (real,) = load_runs(REAL / "js16e_sci_abstract_gpt_cosine_3k" / "outputs")
    assert real.meta.max_steps == 3000 and real.meta.warmup_steps == 200
    assert real.metrics["train/loss"].steps[-1] == 3000
    assert "eval/loss" in real.metrics
    # a config file holding a list of objects that log no loss is not a history
    cfg = tmp_path / "config.json"
    cfg.write_text('{"optim": {"lr": 0.1}, "layers": [{"loss": "mse", "units": 4}]}', "utf-8")
    with pytest.raises(UnrecognizedFormatError):
        load_runs(cfg)
    # two lists of records with a loss: which one is the run's is not guessed
    two = tmp_path / "runs.json"
    two.write_text(
        '{"a": [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}],'
        ' "b": [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.5}]}',
        "utf-8",
    )
    with pytest.raises(MalformedRunError):
        load_runs(two)


def test_a_mapping_of_lists_wrapped_beside_its_config_with_eval_steps_in_its_step_list(
    tmp_path: Path,
) -> None:
    # {"config": {...}, "metrics_history": {"step": [25, 50, 75, 100, 100, ...], "loss": [...],
    # "lr": [...], "epoch": [...]}}: the logger records the step of every log, the evaluations
    # (which repeat the step they follow) included, but the loss only at train logs (a real one:
    # holdout19 js19e_marian_en_hausa_gradnorm_explosion_early_stall, 102 steps and 82 losses,
    # "not a training history" at its blind measurement)
    (real,) = load_runs(REAL / "js19e_marian_en_hausa_gradnorm_explosion_early_stall")
    loss = real.metrics["train/loss"]
    assert len(loss) == 82
    assert list(loss.steps[:6]) == [25, 50, 75, 100, 125, 150]
    assert list(loss.values[:5]) == pytest.approx([4.6259, 4.6317, 4.6207, 4.38, 4.5299])
    assert loss.steps[-1] == 2050 and np.all(np.diff(loss.steps) > 0)
    assert real.metrics["train/learning_rate"].values[1] == pytest.approx(4.9e-06)
    assert any("left out so that each loss keeps its step" in w for w in real.warnings)
    # a step list whose extra entries are not repeats is not re-paired by guesswork
    odd = tmp_path / "metrics.json"
    odd.write_text('{"run": {"step": [1, 2, 3, 4], "loss": [2.0, 1.5, 1.2]}}', "utf-8")
    (run,) = load_runs(odd)
    assert not any("left out" in w for w in run.warnings)


def test_llama_factory_trainer_log_numbers_by_its_steps_and_plan(tmp_path: Path) -> None:
    # LLaMA-Factory's trainer_log.jsonl: current_steps is the step, total_steps the plan (a
    # real one: tune18 js18e_qwen_lora_llamafactory_loss_zero_after_step10, read by row 1-37)
    (real,) = load_runs(REAL / "js18e_qwen_lora_llamafactory_loss_zero_after_step10")
    assert real.meta.max_steps == 375
    assert real.metrics["train/loss"].steps[0] == 10
    assert real.metrics["train/loss"].steps[-1] == 370
    assert not any(k.endswith(("total_steps", "percentage")) for k in real.metrics)
    # a prediction run's log of progress alone loads and is inconclusive (a real one: holdout19
    # hf19b_csv_gemma2_9b_lora_predict_log_no_loss, refused with "no step column" at its blind
    # measurement)
    import curvediag

    d = curvediag.diagnose(REAL / "hf19b_csv_gemma2_9b_lora_predict_log_no_loss")
    assert d.verdict == "inconclusive"
    assert any("progress only" in w for w in d.run.warnings)
    # a CSV with a step column and nothing else is still refused by name
    bare = tmp_path / "log.csv"
    bare.write_text("step,note\n1,a\n2,b\n", "utf-8")
    with pytest.raises(MalformedRunError, match="no numeric metric column"):
        load_runs(bare)


def test_a_log_written_in_another_language_names_its_loss_and_epoch(tmp_path: Path) -> None:
    # a Catalan thesis' CSV (Epoca, Perdua, Accuracy, Items; a real one: holdout17
    # mx17f_csv_urbansound_cnn_tfg_catalan, "no step column" at its blind measurement)
    (real,) = load_runs(
        REAL / "mx17f_csv_urbansound_cnn_tfg_catalan" / "training_log_32m_512w_Adam.csv"
    )
    assert real.metrics["train/loss"].values.size == 51
    assert real.metrics["train/loss"].steps[:2].tolist() == [1, 2]
    # Spanish and German the same way; a column that is not a loss word is not a loss
    p = tmp_path / "log.csv"
    p.write_text("Época,Pérdida\n1,2.0\n2,1.5\n3,1.2\n", encoding="utf-8")
    assert load_runs(p)[0].metrics["train/loss"].values.tolist() == [2.0, 1.5, 1.2]
    p.write_text("Epoche,Verlust\n1,2.0\n2,1.5\n3,1.2\n", encoding="utf-8")
    assert load_runs(p)[0].metrics["train/loss"].steps.tolist() == [1, 2, 3]
    p.write_text("Epoca,Precisio\n1,0.2\n2,0.5\n", encoding="utf-8")
    assert "train/loss" not in load_runs(p)[0].metrics


def test_gpt_training_scripts_text_logs_are_read(tmp_path: Path) -> None:
    # nanoGPT's train.py output (a real one: holdout20 hf20b_csv_nanogpt_shakespeare_char_val_rises,
    # "no training log found here" at its blind measurement): iter lines are the train loss,
    # step lines the evaluation
    (nano,) = load_runs(REAL / "hf20b_csv_nanogpt_shakespeare_char_val_rises")
    assert nano.format == "text-log"
    assert nano.metrics["train/loss"].steps[:3].tolist() == [0, 10, 20]
    assert nano.metrics["train/loss"].values[:2].tolist() == pytest.approx([4.3206, 3.1820])
    ev = nano.metrics["eval/loss"]
    assert ev.steps[:3].tolist() == [0, 250, 500]
    assert ev.values[:3].tolist() == pytest.approx([4.3422, 2.0707, 1.7501])
    # build-nanogpt's log/log.txt: "<step> train|val|hella <value>"
    (build,) = load_runs(REAL / "hf20b_csv_build_nanogpt_gpt2_124m_fineweb_stub95")
    assert build.metrics["eval/loss"].values.tolist() == pytest.approx([10.9310])
    assert build.metrics["train/loss"].values[:2].tolist() == pytest.approx([10.934416, 10.883945])
    assert "eval/hellaswag_acc" in build.metrics
    # llm.c's stdout under a job's banner: "step N/M | loss X (+nanz)| norm ... | lr ...", the
    # total is the plan; NaN losses stay (as NaN), and the job killed at step 100 of 19560
    (llmc,) = load_runs(REAL / "hf20b_csv_llmc_gpt2_124m_nan_from_step1")
    assert llmc.meta.max_steps == 19560
    loss = llmc.metrics["train/loss"]
    assert loss.steps[0] == 1 and loss.steps[-1] == 100 and np.isnan(loss.values).all()
    assert llmc.metrics["train/learning_rate"].values[0] == pytest.approx(8.57e-07)
    # a text file that merely mentions losses is not read as a log
    notes = tmp_path / "notes.txt"
    notes.write_text("the loss went down\nstep 1 was slow\nval loss looked fine\n", "utf-8")
    with pytest.raises(UnrecognizedFormatError):
        load_runs(notes)


def test_a_wandb_files_folder_reads_its_curves_from_the_console_output() -> None:
    # W&B's files/ folder with wandb-summary.json (final values only) and output.log, the
    # console capture of nanoGPT's train.py (holdout22
    # js22e_nanogpt_shakespeare_char_wandb_interrupted_iter1330: one point per metric at its
    # blind measurement)
    (run,) = load_runs(REAL / "js22e_nanogpt_shakespeare_char_wandb_interrupted_iter1330")
    assert run.format == "text-log+wandb-summary"
    assert len(run.metrics["train/loss"]) == 134
    assert run.metrics["eval/loss"].steps.tolist()[:2] == [0, 250]
    assert run.meta.summary["iter"] == 1250
    # the summary's final values at W&B's own row counter are not mixed into the curves
    assert "train/learning_rate" not in run.metrics
    assert any("console output output.log" in w for w in run.warnings)


def test_per_epoch_print_logs_are_read(tmp_path: Path) -> None:
    # a loop's stdout, one line per epoch (a real one: holdout22
    # mx22f_txt_dash_detector_delay_net_val_rises_30ep, "not a recognised training log" at its
    # blind measurement): "epoch N  train_loss X  val_loss Y  F1 Z | grad L1 ..."
    (run,) = load_runs(REAL / "mx22f_txt_dash_detector_delay_net_val_rises_30ep")
    assert run.format == "text-log"
    assert run.metrics["train/loss"].steps[:3].tolist() == [1, 2, 3]
    assert run.metrics["train/loss"].values[:2].tolist() == pytest.approx([0.1810, 0.1440])
    assert run.metrics["eval/loss"].values[-1] == pytest.approx(
        float(
            (REAL / "mx22f_txt_dash_detector_delay_net_val_rises_30ep" / "train_log.txt")
            .read_text("utf-8")
            .split("epoch  30")[1]
            .split("val_loss")[1]
            .split()[0]
        )
    )
    assert len(run.metrics["eval/loss"]) == 30
    # "Epoch [N/M], Loss: X, Val Loss: Y" and "Epoch N/M: loss=X": the total is the plan
    bracket = tmp_path / "train.log"
    bracket.write_text(
        "Using device cpu\n"
        + "".join(
            f"Epoch [{i}/20], Loss: {1 / i:.4f}, Val Loss: {1.1 / i:.4f}, Val Acc: 0.{i:02d}\n"
            for i in range(1, 6)
        ),
        "utf-8",
    )
    (br,) = load_runs(bracket)
    assert br.meta.num_train_epochs == 20
    want = [round(1.1 / i, 4) for i in range(1, 6)]
    assert br.metrics["eval/loss"].values.tolist() == pytest.approx(want)
    # Keras fit's stdout: "Epoch N/M", then the progress line, its last update after a \r
    keras = tmp_path / "fit_output.txt"
    keras.write_text(
        "".join(
            f"Epoch {i}/30\n"
            f"10/50 [====>....] - ETA: 3s - loss: 9.9999\r"
            f"50/50 [==========] - 4s 80ms/step - loss: {0.9 / i:.4f} - accuracy: 0.{i}0"
            f" - val_loss: {1.0 / i:.4f} - val_accuracy: 0.{i}5\n"
            for i in range(1, 5)
        ),
        "utf-8",
    )
    (kr,) = load_runs(keras)
    assert kr.meta.num_train_epochs == 30
    want = [round(0.9 / i, 4) for i in range(1, 5)]
    assert kr.metrics["train/loss"].values.tolist() == pytest.approx(want)
    assert kr.metrics["eval/loss"].steps.tolist() == [1, 2, 3, 4]
    # "Epoch: N <TAB> Training Loss: X <TAB> Validation Loss: Y" (a real one: holdout24
    # wbs24e_gender_cnn_resnet18_lr_cut_to_1e-8_frozen_80ep, a W&B folder whose summary
    # holds one point per metric and whose console output holds 100 epochs)
    (gender,) = load_runs(REAL / "wbs24e_gender_cnn_resnet18_lr_cut_to_1e-8_frozen_80ep")
    assert gender.format == "text-log+wandb-summary"
    assert len(gender.metrics["train/loss"]) == 100
    assert gender.metrics["train/loss"].values[0] == pytest.approx(0.0000011422)
    assert gender.metrics["eval/loss"].values[0] == pytest.approx(0.0000030775)
    # epoch lines without a loss are not a training log
    plain = tmp_path / "epochs.txt"
    plain.write_text("".join(f"epoch {i} took 3 s\n" for i in range(5)), "utf-8")
    with pytest.raises(UnrecognizedFormatError):
        load_runs(plain)


def test_mmengine_scalars_json_is_json_lines_with_validation_by_epoch() -> None:
    # mmengine's vis_data/scalars.json (a real one: holdout20
    # js20e_balloon_rtmdet_tiny_mmdet_stops_epoch131_of_300, "not a recognised training log" at
    # its blind measurement): train records carry epoch and iter and are numbered by iteration;
    # an epoch-based loop numbers each validation by its epoch
    (run,) = load_runs(REAL / "js20e_balloon_rtmdet_tiny_mmdet_stops_epoch131_of_300")
    loss = run.metrics["train/loss"]
    assert loss.steps[:2].tolist() == [2, 4]
    assert loss.values[0] == pytest.approx(1.0967919826507568)
    m_ap = run.metrics["eval/coco/bbox_mAP"]
    assert m_ap.values[:2].tolist() == pytest.approx([0.009, 0.012])
    # validation after epoch 10 sits at epoch 10's last iteration (2 iterations per epoch)
    assert m_ap.steps[0] == 20
    assert any("numbered by epoch" in w for w in run.warnings)


def test_hugging_face_trainer_console_prints_are_read(tmp_path: Path) -> None:
    # a real stdout (holdout24 csv24f_bert_clm_wikitext_leak_collapse, "not a recognised
    # training log" at its blind measurement): two Trainer runs printed as Python dicts, the
    # second after the first's closing summary, its epochs starting again
    path = REAL / "csv24f_bert_clm_wikitext_leak_collapse" / "train_log.txt"
    first, second = load_runs(path)
    assert first.format == "text-log" and first.name == "train_log (run 1 of 2)"
    loss = first.metrics["train/loss"]
    assert len(loss) == 13 and loss.values[0] == pytest.approx(1.6282)
    # no progress bar start before it: steps are hundredths of an epoch
    assert loss.steps[:2].tolist() == [22, 43]
    assert first.metrics["eval/loss"].steps.tolist() == [100, 200, 300]
    assert first.meta.summary["train_loss"] == pytest.approx(0.1268128219462339)
    assert first.meta.finished is True and first.meta.max_steps is None
    assert any("hundredths of an epoch" in w for w in first.warnings)
    # the second run's bar starts at "0/2260" and its summary closes at epoch 10: real steps
    assert second.meta.max_steps == 2260
    assert second.metrics["eval/loss"].steps[:2].tolist() == [226, 452]
    assert second.metrics["train/loss"].steps[0] == round(2.21 * 226)
    assert len(second.metrics["eval/f1"]) == 10
    # a newer Trainer's prints, values as strings; a final evaluate() after the summary joins
    # the run it evaluates; a killed run (no summary) keeps hundredths of an epoch
    log = tmp_path / "stdout.txt"
    log.write_text(
        "  0%|          | 0/40 [00:00<?, ?it/s]\n"
        + "".join(
            f" {i * 10}%|#   | {i * 4}/40 [00:0{i}<00:05]"
            f"{{'loss': '{2.0 / i:.4g}', 'grad_norm': '1.5', 'learning_rate': '1e-05', "
            f"'epoch': '{i * 0.2:.1f}'}}\n"
            for i in range(1, 11)
        )
        + "{'eval_loss': '0.41', 'eval_runtime': '1.2', 'epoch': '2.0'}\n"
        + "{'train_runtime': '10.5', 'train_loss': '0.6', 'epoch': '2.0'}\n"
        + "{'eval_loss': '0.41', 'epoch': '2.0'}\n"
        + "".join(f"{{'loss': {1.0 / i:.4f}, 'epoch': {i * 0.5:.1f}}}\n" for i in range(1, 5)),
        "utf-8",
    )
    run, killed = load_runs(log)
    assert run.meta.max_steps == 40
    assert run.metrics["train/loss"].steps.tolist() == [4 * i for i in range(1, 11)]
    assert run.metrics["train/grad_norm"].values[0] == pytest.approx(1.5)
    assert run.metrics["eval/loss"].steps.tolist() == [40]  # one step: the same evaluation
    assert killed.metrics["train/loss"].steps.tolist() == [50, 100, 150, 200]
    assert killed.meta.finished is None


def test_opennmt_logs_are_read(tmp_path: Path) -> None:
    # OpenNMT-py's logger output (a real one: holdout24
    # csv24f_opennmt_morph_inflection_spike_early_stop, "not a recognised training log" at its
    # blind measurement): xent is the train loss, the eval loss the log of the validation
    # perplexity, "Step N/M" gives the plan and "Early Stop!" ends it
    (run,) = load_runs(REAL / "csv24f_opennmt_morph_inflection_spike_early_stop" / "train.log")
    loss = run.metrics["train/loss"]
    assert loss.steps[:2].tolist() == [50, 100] and loss.values[:2].tolist() == [3.29, 2.58]
    assert run.meta.max_steps == 100000
    ev = run.metrics["eval/loss"]
    assert ev.steps[0] == 200 and ev.values[0] == pytest.approx(math.log(5.45281))
    assert run.metrics["eval/accuracy"].values[0] == pytest.approx(44.6274)
    assert run.meta.early_stopped is True and run.meta.finished is True
    assert run.meta.early_stopping_patience == 2
    # without the early stop the run is not called finished
    log = tmp_path / "train.log"
    log.write_text(
        "".join(
            f"[2024-05-08 04:06:{i:02d},722 INFO] Step {i * 50}/1000; acc:  {50 + i}.00; "
            f"ppl: {3.0 / i:.2f}; xent: {1.1 / i:.2f}; lr: 1.00000; 11270/8704 tok/s; {i} sec\n"
            for i in range(1, 6)
        ),
        "utf-8",
    )
    (cut,) = load_runs(log)
    assert cut.meta.max_steps == 1000 and cut.meta.finished is None
    assert cut.metrics["train/learning_rate"].values[0] == 1.0
    # the same log ending in a traceback: the run crashed
    log.write_text(
        log.read_text("utf-8")
        + 'Traceback (most recent call last):\n  File "train.py", line 6\n'
        + "RuntimeError: CUDA error: device-side assert triggered\n",
        "utf-8",
    )
    (crashed,) = load_runs(log)
    assert crashed.meta.error == "RuntimeError" and crashed.meta.finished is False


def test_a_tab_separated_loss_table_saved_as_a_log_is_read(tmp_path: Path) -> None:
    # "step<TAB>loss" rows in train.log (a real one: holdout24
    # csv24f_shakespeare_gpt2_124m_memorise_to_target, "not a recognised training log" at its
    # blind measurement)
    (run,) = load_runs(REAL / "csv24f_shakespeare_gpt2_124m_memorise_to_target" / "train.log")
    loss = run.metrics["train/loss"]
    assert loss.steps[:2].tolist() == [10, 20] and loss.values[0] == pytest.approx(8.460716)
    assert len(loss) == 457
    # a console log that only mentions a step and a loss on its first line is not a table
    text = tmp_path / "console.log"
    text.write_text("step loss printed below\nsomething else\n", "utf-8")
    with pytest.raises(UnrecognizedFormatError):
        load_runs(text)


def test_python_logging_prefixes_and_record_lines_are_read(tmp_path: Path) -> None:
    # "2025-06-04 17:39:02,341 - INFO - Epoch 1/35, Train Loss: 1.6279, Test Acc: 59.86%" (a
    # real one: holdout25 csv25f_cifar10_mish_cnn_cosine_35ep, taken for a W&B chart export at
    # its blind measurement): the logger's prefix is set aside, a percent sign ends a value
    (run,) = load_runs(REAL / "csv25f_cifar10_mish_cnn_cosine_35ep" / "training.log")
    assert run.format == "text-log" and run.meta.num_train_epochs == 35
    assert run.metrics["train/loss"].values[:2].tolist() == pytest.approx([1.6279, 1.2434])
    assert len(run.metrics["train/loss"]) == 35
    # "Train Loss: X Validate Loss Y" on every line, no counter (a real one: holdout25
    # wbs25e_fem_gnn_val_loss_explodes_train_flat_crash, a W&B folder read from its summary's
    # single point at its blind measurement): each line is one logging step
    (gnn,) = load_runs(REAL / "wbs25e_fem_gnn_val_loss_explodes_train_flat_crash")
    assert gnn.format == "text-log+wandb-summary"
    assert gnn.metrics["train/loss"].steps[:2].tolist() == [1, 2]
    assert gnn.metrics["eval/loss"].values[0] == pytest.approx(277412.7477428254)
    # W&B's row counter in the summary is not a step of the printed curves
    assert gnn.meta.global_step is None and gnn.last_step == 41
    # other prefixes: "[2024-05-08 04:06:17,722 INFO] " and "INFO:root:"
    log = tmp_path / "train.txt"
    log.write_text(
        "".join(
            f"INFO:root:epoch {i} train_loss {1.0 / i:.3f} val_loss {1.2 / i:.3f}\n"
            for i in range(1, 5)
        ),
        "utf-8",
    )
    (root,) = load_runs(log)
    assert root.metrics["eval/loss"].values.tolist() == pytest.approx([1.2, 0.6, 0.4, 0.3])
    # three lines of prose with a number in them are not records
    prose = tmp_path / "notes.log"
    prose.write_text("the loss was 3 today\nthe loss is 2 now\nloss went to 1 later\n", "utf-8")
    with pytest.raises(UnrecognizedFormatError):
        load_runs(prose)


def test_a_console_log_that_ends_in_a_traceback_records_the_error(tmp_path: Path) -> None:
    # a real one: holdout25 wbs25e_qwen3_4b_medquad_lora_oom_at_first_eval_step100_of_1232,
    # the Trainer's prints stop at step 100 of 1,232 on CUDA out of memory; the bar reached
    # step 100 at epoch 0.12 (no summary), which numbers the prints
    (run,) = load_runs(REAL / "wbs25e_qwen3_4b_medquad_lora_oom_at_first_eval_step100_of_1232")
    assert run.meta.error == "torch.OutOfMemoryError" and run.meta.finished is False
    assert run.meta.max_steps == 1232
    assert run.metrics["train/loss"].steps[-1] == 100
    assert any("CUDA out of memory" in w for w in run.warnings)
    # a finished run's console with a traceback before its summary is finished
    log = tmp_path / "stdout.txt"
    log.write_text(
        "Traceback (most recent call last):\nValueError: a retried download\n"
        + "".join(f"{{'loss': {1.0 / i:.3f}, 'epoch': {i * 0.25}}}\n" for i in range(1, 5))
        + "{'train_runtime': 10.0, 'train_loss': 0.5, 'epoch': 1.0}\n",
        "utf-8",
    )
    (done,) = load_runs(log)
    assert done.meta.error is None and done.meta.finished is True


def test_a_semicolon_separated_keras_log_and_valid_prefixed_columns(tmp_path: Path) -> None:
    # Keras' CSVLogger(separator=";") (a real one: holdout25
    # csv_deepfake_xception_semicolon_overfit, read as one column at its blind measurement)
    (run,) = load_runs(REAL / "csv_deepfake_xception_semicolon_overfit" / "train_log.csv")
    assert run.metrics["eval/loss"].values[:2].tolist() == pytest.approx(
        [0.264871472963543, 0.07648626754585172]
    )
    # valid_acc / valid_loss are the validation's
    path = tmp_path / "log.csv"
    path.write_text(
        "epoch,train_loss,valid_loss,valid_acc\n1,0.9,0.8,0.7\n2,0.5,0.6,0.8\n", "utf-8"
    )
    (v,) = load_runs(path)
    assert {"eval/loss", "eval/acc"} <= set(v.metrics)


def test_train_and_test_epoch_lines_behind_a_logging_prefix_are_read() -> None:
    # "2022-10-17 20:16:36,492 - train.py[line:123] - INFO: Train Epoch 1 --- train loss : X"
    # beside "... Test Epoch 1 --- test loss : Y" (a real one: holdout26
    # csv26f_numpy_mlp_mnist_50ep_converging, "not a recognised training log" at its blind
    # measurement)
    (run,) = load_runs(REAL / "csv26f_numpy_mlp_mnist_50ep_converging" / "train.log")
    assert len(run.metrics["train/loss"]) == 50
    assert run.metrics["train/loss"].values[0] == pytest.approx(0.6283828736781677)
    assert run.metrics["eval/loss"].values[0] == pytest.approx(0.3568989852164526)


def test_any_text_log_that_ends_in_a_traceback_is_a_crashed_run() -> None:
    # per-batch prints, then KeyboardInterrupt's traceback (a real one: holdout26
    # wbs26e_x3d_video_binary_ended_8of15_train_loss_div500, a W&B folder's console output)
    (run,) = load_runs(REAL / "wbs26e_x3d_video_binary_ended_8of15_train_loss_div500")
    assert run.meta.error == "KeyboardInterrupt" and run.meta.finished is False


def test_the_learning_rate_of_the_parameter_groups_that_agree_is_taken() -> None:
    # Ultralytics' bias group pg0 warms up from 0.1 down while pg1 and pg2 rise to lr0 (a real
    # one: holdout26 csv26d_microalgae_yolov8n_seg_patience_stop, read as an LR that "reached
    # zero early" at its blind measurement); YOLOv5 names them x/lr0..2
    (ultra,) = load_runs(REAL / "csv26d_microalgae_yolov8n_seg_patience_stop")
    assert "train/learning_rate is taken from 'train/lr/pg1'" in ultra.warnings
    (v5,) = load_runs(REAL / "csv26d_cells_yolov5s_warmup_whole_run")
    assert "train/learning_rate is taken from 'train/x/lr1'" in v5.warnings
    assert v5.metrics["train/learning_rate"].values.max() == pytest.approx(0.0025755)


def test_split_metric_lines_after_an_epoch_line_are_read(tmp_path: Path) -> None:
    # "Epoch 1/10" then "- Train metrics: accuracy: 0.404 ; loss: 1.633" and "- Eval metrics:
    # ..." behind "2018-07-30 14:23:37,508:INFO: " (a real one: holdout27
    # csv27f_tf_cnn_currency_128px_unstable_eval_10ep, "not a recognised training log" at its
    # blind measurement)
    (run,) = load_runs(REAL / "csv27f_tf_cnn_currency_128px_unstable_eval_10ep" / "train.log")
    assert run.meta.num_train_epochs == 10
    assert run.metrics["train/loss"].values[:2].tolist() == pytest.approx([1.633, 1.142])
    assert run.metrics["eval/loss"].values[:2].tolist() == pytest.approx([1.255, 1.761])
    assert run.metrics["eval/loss"].steps[:2].tolist() == [1, 2]
    # without epoch lines, a held-out split's line shares the step of the train line before it
    log = tmp_path / "train.log"
    log.write_text(
        "".join(
            f"- Train metrics: loss: {1.0 / i:.3f}\n- Val metrics: loss: {1.1 / i:.3f}\n"
            for i in range(1, 5)
        ),
        "utf-8",
    )
    (plain,) = load_runs(log)
    assert plain.metrics["eval/loss"].steps.tolist() == [1, 2, 3, 4]
    assert plain.metrics["eval/loss"].values[1] == pytest.approx(0.55)


def test_epoch_lines_with_each_value_before_its_name_are_read() -> None:
    # "Epoch 0 @ 10:27 PM : 0.9816 C.E. Loss, 94.28% Accuracy" (a real one: holdout27
    # csv27f_ddp_cnn_fashion4_softmax_ce_val_only_47of256ep, a SLURM stdout, "not a recognised
    # training log" at its blind measurement); the clock time is not a value
    (run,) = load_runs(REAL / "csv27f_ddp_cnn_fashion4_softmax_ce_val_only_47of256ep" / "train.out")
    assert len(run.metrics["train/loss"]) == 47
    assert run.metrics["train/loss"].values[0] == pytest.approx(0.9816)
    assert run.metrics["train/Accuracy"].values[0] == pytest.approx(94.28)
    assert "train/PM" not in run.metrics


def test_a_project_folder_holding_wandb_files_folders_only_is_read() -> None:
    # wandb/run-*/files/ with config.yaml, output.log and wandb-summary.json, no binary log or
    # history (three real ones: holdout29 wb29d_*, "no training log found here" at their blind
    # measurement); each run is read once, with its console's curves
    (rcnn,) = load_runs(REAL / "wb29d_fasterrcnn_r101_voc_interrupted_ep5of20")
    assert rcnn.format == "text-log+wandb-summary"
    assert len(rcnn.metrics["train/loss"]) == 4
    (summary_only,) = load_runs(REAL / "wb29d_wav2vec2_asr_trainer_summary_only")
    assert summary_only.format == "wandb-summary"
    # the run folder itself: the console beside its summary, under files/
    (folder,) = load_runs(next((REAL / "wb29d_mbert_translation_loss_rises_bleu0").glob("wandb/*")))
    assert folder.format == "text-log+wandb-summary"
    # a CSV two folders down (tmp/wandb2csv/) when nothing else is there
    (csv,) = load_runs(REAL / "wb29d_llama8l_slimpajama_cosine_val_healthy")
    assert len(csv.metrics["eval/loss"]) == 76


def test_finished_tqdm_bars_with_their_values_are_one_row_per_epoch(tmp_path: Path) -> None:
    # a loop's bar with set_postfix(total_loss=...), then "Mean Average Precision = 28.06%"
    # after the evaluation (a real one: holdout29 wb29d_fasterrcnn_r101_voc_interrupted_ep5of20,
    # a Faster R-CNN stopped by hand in its fifth epoch)
    (run,) = load_runs(REAL / "wb29d_fasterrcnn_r101_voc_interrupted_ep5of20")
    assert run.metrics["train/loss"].values.tolist() == pytest.approx([1.06, 0.87, 0.76, 0.67])
    assert run.metrics["eval/Mean_Average_Precision"].values[-1] == pytest.approx(57.32)
    assert run.meta.error == "KeyboardInterrupt"
    # a bar that stopped short of its total is not an epoch's row
    log = tmp_path / "train.log"
    bars = [f"100%|#####| 50/50 [00:09<00:00,  5.1it/s, loss={1.0 / i:.3f}]" for i in range(1, 4)]
    log.write_text("\n".join([*bars, " 40%|##   | 20/50 [00:04<00:06,  5.0it/s, loss=0.2]"]))
    (plain,) = load_runs(log)
    assert plain.metrics["train/loss"].steps.tolist() == [1, 2, 3]


def test_json_object_lines_in_a_console_log_are_read() -> None:
    # {"epoch": 0, "step": 5, "loss": 156.04, "time": 6} lines among warnings (a real one:
    # holdout29 wb29d_mbert_translation_loss_rises_bleu0, unread at its blind measurement)
    (run,) = load_runs(REAL / "wb29d_mbert_translation_loss_rises_bleu0")
    loss = run.metrics["train/loss"]
    assert loss.steps[:3].tolist() == [0, 5, 10]
    assert loss.values[:2].tolist() == pytest.approx([7.128603458404541, 156.04449462890625])


def test_epoch_lines_behind_a_bracketed_split_tag_are_read() -> None:
    # "[Train] Epoch 001: loss = 0.019304" / "[Diff-Val(Test-Normal)] Epoch 001
    # (Deterministic): loss = 0.007187" behind Python logging's prefix (a real one: holdout28
    # csv28f_cond_diffusion_unet1d_30ep_cosine_converging, unread at its blind measurement)
    (run,) = load_runs(REAL / "csv28f_cond_diffusion_unet1d_30ep_cosine_converging" / "train.log")
    assert run.metrics["train/loss"].values[:2].tolist() == pytest.approx([0.019304, 0.007488])
    assert run.metrics["eval/loss"].values[:2].tolist() == pytest.approx([0.007187, 0.006093])
    assert len(run.metrics["eval/loss"]) == 30


def test_split_lines_after_an_epoch_line_share_its_epoch() -> None:
    # "09-02 20:39:12 - INFO - __main__ - Epoch: 0, Loss: 1.60" then "Train. Total Loss: ...,
    # AUC: 50.42%" and "Val. Total Loss: 1.79, ..." (a real one: holdout28
    # csv28f_vgae_gat_goodreads_nan_from_epoch4, unread at its blind measurement): a logger
    # prefix without the year, with the logger's name, is set aside too
    (run,) = load_runs(REAL / "csv28f_vgae_gat_goodreads_nan_from_epoch4" / "train.log")
    assert run.metrics["train/loss"].steps[:2].tolist() == [0, 1]
    assert run.metrics["eval/loss"].values[:2].tolist() == pytest.approx([1.79, 1.77])
    assert run.metrics["eval/AUC"].values[0] == pytest.approx(49.90)
    assert math.isnan(run.metrics["train/loss"].values[4])


def test_a_keras_csvlogger_file_with_bare_carriage_returns_is_a_table(tmp_path: Path) -> None:
    # lines ended by "\r\r" (a real one: holdout28
    # csv28f_keras_mobilenetv2_sp500_charts_overfit_es22of100, unread at its blind measurement)
    real = REAL / "csv28f_keras_mobilenetv2_sp500_charts_overfit_es22of100" / "train.log"
    (run,) = load_runs(real)
    assert len(run.metrics["eval/loss"]) == 22
    assert run.metrics["train/loss"].values[0] == pytest.approx(0.7518624199761285)
    # and batch discovery finds it in a folder of runs
    from curvediag.batch.discover import discover

    folder = tmp_path / "runs" / "keras"
    folder.mkdir(parents=True)
    (folder / "training.log").write_bytes(real.read_bytes())
    units = list(discover([tmp_path / "runs"]))
    assert [(Path(u.path).name, u.kind) for u in units] == [("training.log", "file")]


def test_per_step_lines_with_a_planned_total_are_read(tmp_path: Path) -> None:
    # "Iteration 100/10000, Loss: 10.2377, Grad Norm: 0.0000" (a real one: holdout30
    # txt30f_numpy_seq2seq_en_fr_sgd_stopped_3k_of_10k, unread at its blind measurement)
    (run,) = load_runs(
        REAL / "txt30f_numpy_seq2seq_en_fr_sgd_stopped_3k_of_10k" / "training_log.txt"
    )
    assert run.meta.max_steps == 10000
    assert run.metrics["train/loss"].steps[:3].tolist() == [0, 100, 200]
    assert run.metrics["train/loss"].values[1] == pytest.approx(10.2377)
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"Step {i * 10} | loss {2.0 / (i + 1):.3f} | lr 3e-4\n" for i in range(5))
    )
    (plain,) = load_runs(log)
    assert plain.metrics["train/loss"].steps.tolist() == [0, 10, 20, 30, 40]


def test_pytorch_example_progress_lines_are_counted_over_the_epochs(tmp_path: Path) -> None:
    # "Train Epoch: 0 [65/65 (98%)] Loss: 14.744200: : 65it [00:15,  4.23it/s]" in a W&B
    # console capture ending in a KeyboardInterrupt (a real one: holdout30
    # wb30d_cub_proxy_anchor_bninception_killed_ep29_of_40, read from its one-point summary at
    # its blind measurement)
    files = _wandb_files("wb30d_cub_proxy_anchor_bninception_killed_ep29_of_40")
    (run,) = load_runs(files)
    loss = run.metrics["train/loss"]
    assert loss.steps[:3].tolist() == [2, 65, 130]
    assert loss.values[1] == pytest.approx(14.7442)
    assert run.meta.error == "KeyboardInterrupt"
    # pytorch/examples' mnist/main.py: several lines per epoch, one row each
    log = tmp_path / "mnist.log"
    log.write_text(
        "".join(
            f"Train Epoch: {e} [{b}/60000 ({b * 100 // 60000}%)]\tLoss: {1.0 / (e + b / 6e4):.6f}\n"
            for e in (1, 2)
            for b in (0, 30000)
        )
    )
    (mnist,) = load_runs(log)
    assert mnist.metrics["train/loss"].steps.tolist() == [60000, 90000, 120000, 150000]


def test_lines_that_repeat_an_epoch_are_steps_in_order() -> None:
    # "Epoch 0, Loss: 0.0054, Positive Score: ..." at every step of epoch 0 (a real one:
    # holdout30 wb30d_rwkv_reward_model_deepspeed_every_step_skipped_flat, read as 2 points at
    # its blind measurement)
    files = _wandb_files("wb30d_rwkv_reward_model_deepspeed_every_step_skipped_flat")
    (run,) = load_runs(files)
    assert len(run.metrics["train/loss"]) == 56
    assert run.metrics["train/loss"].values[:2].tolist() == pytest.approx(
        [0.00537109375, 0.04541015625]
    )
    # an epoch's summary line adds its val loss at the step before it and leaves the step
    # lines' train loss alone (a real one: tune25
    # csv25f_concatbert_mmimdb_three_epochs_undertrained)
    (bert,) = load_runs(REAL / "csv25f_concatbert_mmimdb_three_epochs_undertrained")
    assert bert.metrics["train/loss"].values[8] == pytest.approx(0.6556)
    assert bert.metrics["eval/loss"].steps[0] == 9
    assert bert.metrics["eval/loss"].values[0] == pytest.approx(0.6181)
    # three model.fit calls on one model, each numbering its epochs from 1: 25 epochs in order
    (kanji,) = load_runs(REAL / "csv24f_kanji_cnn_keras_three_lr_stages")
    assert len(kanji.metrics["train/loss"]) == 25
    assert kanji.metrics["train/loss"].values[10] == pytest.approx(0.1369)


def test_epoch_lines_behind_a_pipe_separated_logger_prefix() -> None:
    # "2026-03-03 15:36:27,151 | INFO | Epoch 01 | train_loss=0.5906 ... | val_loss=0.4896"
    # among HTTP request lines (a real one: holdout31 txt31f_imdb_bilstm_10ep_healthy, "not a
    # recognised training log" at its blind measurement)
    (run,) = load_runs(REAL / "txt31f_imdb_bilstm_10ep_healthy" / "train.log")
    assert len(run.metrics["train/loss"]) == 10
    assert run.metrics["eval/loss"].values[0] == pytest.approx(0.4896)


def test_bracketed_epochs_and_a_validation_line_of_its_own() -> None:
    # "2018-01-28 21:46:54,057 INFO    : Epoch [0]/[4] \t Training Phase Loss: 0.0226 \t
    # Accuracy: 0.9048", then "... Validation Phase Loss: 0.0048 \t Accuracy: 0.9825" (a real
    # one: holdout31 txt31f_catsdogs_resnet18_pretrained_5ep, unread at its blind measurement):
    # the validation line's accuracy is the validation's
    (run,) = load_runs(REAL / "txt31f_catsdogs_resnet18_pretrained_5ep" / "resnet_pretrained.log")
    assert run.meta.num_train_epochs == 4
    assert run.metrics["eval/loss"].values[0] == pytest.approx(0.00484619816126)
    assert run.metrics["eval/Accuracy"].values[0] == pytest.approx(0.9825)
    assert run.metrics["train/Accuracy"].values[0] == pytest.approx(0.9039)


def test_a_validation_line_with_values_in_parentheses() -> None:
    # "Training loss: 0.145" then "[0] Validation: Top1 (0.327), ..., Mean Loss (0.1284)" (a
    # real one: holdout31 wb31d_timesformer_gdino_action_overfit_killed_ep11_of_20, its val
    # loss unread at its blind measurement)
    files = _wandb_files("wb31d_timesformer_gdino_action_overfit_killed_ep11_of_20")
    (run,) = load_runs(files)
    assert run.metrics["eval/loss"].steps[:2].tolist() == [1, 2]
    assert run.metrics["eval/loss"].values[0] == pytest.approx(0.1284134172580459)
    assert run.metrics["eval/Top1"].values[1] == pytest.approx(0.41818181818181815)


def test_record_lines_that_carry_their_own_step() -> None:
    # "epoch=1 step=200 train_loss=0.3574 val_loss=0.3097", then "epoch_end=1 train_loss=...
    # val_loss=..." summaries (a real one: holdout32
    # txt32f_roberta_safety_classifier_3ep_epoch_staircase, read as restarts at its blind
    # measurement): the lines' own steps, the summaries adding only what the steps lack
    (run,) = load_runs(REAL / "txt32f_roberta_safety_classifier_3ep_epoch_staircase")
    loss = run.metrics["train/loss"]
    assert loss.steps[:3].tolist() == [200, 400, 600]
    assert len(loss) == 22
    assert not any("resumed" in w for w in run.warnings)


def test_a_lightning_ctrl_c_and_a_nan_final_value_in_the_summary() -> None:
    # a W&B files folder whose console has Lightning's "Detected KeyboardInterrupt, attempting
    # graceful shutdown..." and whose summary's final validation loss is NaN (a real one:
    # holdout32 wb32d_tfformer_synthetic_mse_flat_val_nan_killed_ep4_of_20)
    files = _wandb_files("wb32d_tfformer_synthetic_mse_flat_val_nan_killed_ep4_of_20")
    (run,) = load_runs(files)
    assert run.meta.error == "KeyboardInterrupt"
    ev = run.metrics["eval/loss"]
    assert ev.steps.tolist() == [run.metrics["train/loss"].steps[-1]]
    assert math.isnan(ev.values[0])


def test_a_clock_time_logger_prefix_with_pipes_and_a_logger_name() -> None:
    # "19:14:11 | INFO     | src.training.trainer | Epoch 1/100 | train_loss=0.2968 | ..." in
    # a W&B folder's console, ending in a KeyboardInterrupt (a real one: holdout33
    # wb33d_face_triplet_resnet100_interrupted, read from its one-point summary at its blind
    # measurement)
    folder = REAL / "wb33d_face_triplet_resnet100_interrupted" / "wandb/ROUND_2/TripletLoss"
    (run,) = load_runs(folder)
    assert run.format == "text-log+wandb-summary"
    assert run.meta.num_train_epochs == 100
    assert len(run.metrics["eval/loss"]) == 16
    assert run.metrics["train/loss"].values[0] == pytest.approx(0.2968)
    assert run.meta.error == "KeyboardInterrupt"


def test_a_split_named_at_the_head_of_a_segment_names_the_values_after_it() -> None:
    # "Epoch 2/10 | Train Loss: 0.4233 Acc: 0.8603 | Val Loss: 0.4147 Acc: 0.8488" (a real
    # one: holdout33 wb33d_mesonet_deepfake_majority_class, whose val accuracy was dropped as a
    # second "Acc" at its blind measurement)
    files = _wandb_files("wb33d_mesonet_deepfake_majority_class")
    (run,) = load_runs(files)
    assert run.metrics["eval/Acc"].values.tolist() == pytest.approx([0.8488] * 7)
    assert run.metrics["train/Acc"].values[1] == pytest.approx(0.8603)


def test_bracketed_epoch_lines_whose_split_holds_across_segments() -> None:
    # "17:46:38 [Epoch: 01] Train acc: 0.0821 | loss: 2.6612" and "[Epoch: 05] Valid acc: 0.2988
    # | loss: 2.0462" (a real one: holdout34 txt34f_shrec2017_gesture_cnn_50ep_still_improving,
    # "not a recognised training log" at its blind measurement): the loss after "Valid acc" is
    # the validation's
    (run,) = load_runs(REAL / "txt34f_shrec2017_gesture_cnn_50ep_still_improving" / "train_log.txt")
    assert len(run.metrics["train/loss"]) == 50
    assert run.metrics["train/loss"].values[4] == pytest.approx(2.2274)
    assert run.metrics["eval/loss"].values[0] == pytest.approx(2.0462)


def test_a_bracketed_timestamp_then_a_dash_before_an_epoch_line() -> None:
    # "[2022-10-28 07:02:01] - Epoch 1 - avg_train_loss: 2.6038  avg_val_loss: 2.5394  time:
    # 272s" in a W&B console (a real one: holdout34
    # wb34d_deberta_ellipse_amp_nan_grads_frozen_loss_killed_ep14_of_20, read from its summary at
    # its blind measurement)
    files = _wandb_files("wb34d_deberta_ellipse_amp_nan_grads_frozen_loss_killed_ep14_of_20")
    (run,) = load_runs(files)
    assert len(run.metrics["train/loss"]) == 13
    assert run.metrics["eval/loss"].values[0] == pytest.approx(2.5394)


def test_bracketed_name_value_fields_after_an_epoch_count_are_read(tmp_path: Path) -> None:
    # "[epoch:1/1200] [loss:0.2329...] [lr:0.009304] [Time:[...]]": a BYOL console log (a real
    # one: holdout37 txt37f_byol_resnet50_cifar10_loss_near_zero_killed_10of1200, unread at its
    # blind measurement). The leading bracket was taken for a logger's prefix and the values,
    # closed by "]", were not read
    (run,) = load_runs(REAL / "txt37f_byol_resnet50_cifar10_loss_near_zero_killed_10of1200")
    loss = run.metrics["train/loss"]
    assert len(loss) == 10
    assert loss.values[0] == pytest.approx(0.23298378779053688)
    assert run.metrics["train/learning_rate"].values[0] == pytest.approx(0.009304)
    assert run.meta.num_train_epochs == 1200
    # a logger's bracketed prefix is still set aside
    log = tmp_path / "train.log"
    log.write_text(
        "".join(
            f"[2024-05-08 04:0{i}:17,722 INFO] Epoch {i}: loss: {1.0 / i:.3f}\n"
            for i in (1, 2, 3, 4)
        )
    )
    (plain,) = load_runs(log)
    assert plain.metrics["train/loss"].values.tolist() == pytest.approx([1.0, 0.5, 0.333, 0.25])


def test_epoch_and_batch_counters_make_the_steps_and_the_plan() -> None:
    # MiniMind's "Epoch:[1/1](100/9924), loss: 7.2804, ..., lr: 0.00049989" (a real one:
    # holdout36 wb35d_minimind_64m_pretrain_killed_step4700_of_9924, read as one summary point
    # at its blind measurement): the batch counter within the epoch is the step and E epochs of
    # N batches the plan, so a run killed at batch 4700 of 9924 is seen to have stopped early
    files = next((REAL / "wb35d_minimind_64m_pretrain_killed_step4700_of_9924").rglob("files"))
    (run,) = load_runs(files)
    loss = run.metrics["train/loss"]
    assert len(loss) == 47
    assert loss.steps[:2].tolist() == [100, 200]
    assert loss.values[0] == pytest.approx(7.2804)
    assert run.meta.max_steps == 9924
    assert run.meta.error == "KeyboardInterrupt"


def test_trainer_console_prints_at_one_rounded_epoch_keep_their_own_steps() -> None:
    # the Trainer prints the epoch to two decimals: 24 loss prints early in a 51,966-step epoch
    # all say 'epoch': 0.0 (a real W&B console: holdout36
    # wb36d_tevatron_dense_retriever_killed_step83_of_51966_in_warmup). They were read as one
    # point; each is a step of its own
    files = next(
        (REAL / "wb36d_tevatron_dense_retriever_killed_step83_of_51966_in_warmup").rglob("files")
    )
    (run,) = load_runs(files)
    loss = run.metrics["train/loss"]
    assert len(loss) == 24
    assert loss.values[:2].tolist() == pytest.approx([16.6672, 16.4908])
    assert run.metrics["train/grad_norm"].values[0] == pytest.approx(69.33356475830078)


def test_later_lines_of_an_epoch_add_the_names_its_first_line_lacked() -> None:
    # "Epoch 1/10", "Train Loss: 0.7528, Train Acc: 0.5875", "Val Loss: 0.4782, Val Acc: ..."
    # (a real one: holdout39 txt39f_sst2_small_transformer_val_loss_rises_after_ep2, whose val
    # lines were not read at its blind measurement, so its overfitting went unseen)
    (run,) = load_runs(REAL / "txt39f_sst2_small_transformer_val_loss_rises_after_ep2")
    assert run.metrics["train/loss"].values[:2].tolist() == pytest.approx([0.7528, 0.3529])
    assert run.metrics["eval/loss"].values[:2].tolist() == pytest.approx([0.4782, 0.4746])
    assert len(run.metrics["eval/loss"]) == 10


def test_a_loss_that_names_its_split_wins_the_canonical_name() -> None:
    # "Epoch 0 Epoch Loss : 0.0023" then "Training loss: 0.4409 ... Validation loss: 0.4484"
    # (a real W&B console: wb35d_numpy_ffnn_fashion_mnist_20ep_healthy): the per-sample sum
    # printed first is not the train loss the validation loss compares with
    files = next((REAL / "wb35d_numpy_ffnn_fashion_mnist_20ep_healthy").rglob("files"))
    (run,) = load_runs(files)
    assert run.metrics["train/loss"].values[0] == pytest.approx(0.44094244855536074)
    assert run.metrics["eval/loss"].values[0] == pytest.approx(0.44836086457504887)


def test_cells_holding_a_tensor_repr_are_read_as_its_number(tmp_path: Path) -> None:
    # "2\ttensor(3.4634, device='cuda:0')\ttensor(0.1380, device='cuda:0')" rows (a real one:
    # holdout39 txt39f_action_3d_resnet_val_loss_flat_while_train_falls, unread at its blind
    # measurement): a loop that wrote the loss tensor itself, not loss.item()
    (run, *_) = load_runs(REAL / "txt39f_action_3d_resnet_val_loss_flat_while_train_falls")
    assert run.metrics["train/loss"].values[0] == pytest.approx(3.3929)
    log = tmp_path / "log.csv"
    log.write_text(
        "epoch,loss\n"
        + "".join(f"{e},tensor({2.0 / e:.4f})\n" for e in range(1, 4))
        + "4,\"tensor([0.4000], device='cuda:0', grad_fn=<MeanBackward0>)\"\n"
    )
    (plain,) = load_runs(log)
    assert plain.metrics["train/loss"].values.tolist() == pytest.approx([2.0, 1.0, 0.6667, 0.4])


def test_named_losses_without_a_total_pair_the_train_side_with_the_eval_loss() -> None:
    # a multi-task Lightning CSV with train/val classification_loss and regression_loss and no
    # total (a real one: holdout36 pl36c_cub200_cnn_cls_stuck_at_ln200_stopped_ep7): the eval
    # loss is taken from eval/classification_loss, and the train loss is now its train side
    (run,) = load_runs(REAL / "pl36c_cub200_cnn_cls_stuck_at_ln200_stopped_ep7")
    assert run.metrics["train/loss"].values[0] == pytest.approx(5.309454917907715)
    assert any("train/loss is taken from train/classification_loss" in w for w in run.warnings)


def test_a_prefixed_lightning_step_curve_wins_over_its_epoch_means() -> None:
    # Lightning under a module prefix, finetuning/train_loss beside finetuning/train_loss_epoch
    # (a real one: mx17f_pl_zoobot_ring_finetune_avance5): the per-step curve is the train loss
    (run,) = load_runs(REAL / "mx17f_pl_zoobot_ring_finetune_avance5")
    assert len(run.metrics["train/loss"]) == 150
    assert any("'train/finetuning/train_loss'" in w for w in run.warnings)


def test_a_utf16_console_log_is_read(tmp_path: Path) -> None:
    # Windows PowerShell's tee writes UTF-16 LE with a BOM and CRLF: "Epoch 1/50... Train loss:
    # 488807.03 Val loss: 460859.86" (a real one: holdout40
    # txt40f_sp500_transformer_unscaled_mse_barely_falls_8of50, "not a recognised training log"
    # at its blind measurement)
    real = REAL / "txt40f_sp500_transformer_unscaled_mse_barely_falls_8of50" / "training_output.txt"
    assert real.read_bytes().startswith(b"\xff\xfe")
    (run,) = load_runs(real)
    assert run.meta.num_train_epochs == 50
    assert len(run.metrics["train/loss"]) == 8
    assert run.metrics["train/loss"].values[0] == pytest.approx(488807.033275)
    assert run.metrics["eval/loss"].values[-1] == pytest.approx(452899.776978)
    # a big-endian one reads the same; its text stays as it was
    log = tmp_path / "train.log"
    epochs = (1, 2, 3)
    lines = [f"Epoch {e}/5... Train loss: {1 / e:.3f} Val loss: {1.2 / e:.3f}\r\n" for e in epochs]
    log.write_bytes(b"\xfe\xff" + "".join(lines).encode("utf-16-be"))
    (be,) = load_runs(log)
    assert be.metrics["eval/loss"].values.tolist() == pytest.approx([1.2, 0.6, 0.4])


def test_a_gbk_console_log_is_read(tmp_path: Path) -> None:
    # a console captured on a Chinese Windows machine is GBK: "开始PPO训练..." then "Epoch
    # 10/100: reward=-1409.2241, baseline=-752.7352, loss=-926.6737" (a real one: holdout44
    # txt44f_mao_coloring_transformer_ppo_reward_flat_loss_spike_ep50, "not UTF-8 text" at its
    # blind measurement)
    folder = REAL / "txt44f_mao_coloring_transformer_ppo_reward_flat_loss_spike_ep50"
    real = folder / "train_log.txt"
    raw = real.read_bytes()
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    (run,) = load_runs(real)
    assert run.meta.num_train_epochs == 100
    loss = run.metrics["train/loss"]
    assert len(loss) == 10 and loss.values[4] == pytest.approx(96264.2578)
    assert any("read as GBK" in w for w in run.warnings)
    # bytes that no legacy code page explains become U+FFFD; the ASCII around them is kept
    log = tmp_path / "train.log"
    lines = [f"Epoch {e}/5: loss={1 / e:.3f} \xff\x80\n".encode("latin-1") for e in (1, 2, 3)]
    log.write_bytes(b"".join(lines))
    (odd,) = load_runs(log)
    assert odd.metrics["train/loss"].values.tolist() == pytest.approx([1.0, 0.5, 0.333])
    assert any("U+FFFD" in w for w in odd.warnings)
    # binary data is still refused
    binary = tmp_path / "model.log"
    binary.write_bytes(b"Epoch 1/5: loss=1.0\n" * 3 + b"\x00\x01\xff")
    with pytest.raises(CurvediagError):
        load_runs(binary)


def test_a_title_line_above_a_csv_header_is_skipped() -> None:
    # "model_history_log" above "epoch;accuracy;loss;val_accuracy;val_loss" (a Keras CSVLogger
    # file, CRLF; a real one: holdout45 csv45e_speech_digit_cnn_keras_semicolon, "no step
    # column ... columns: 'model_history_log'" at its blind measurement)
    folder = REAL / "csv45e_speech_digit_cnn_keras_semicolon"
    (run,) = load_runs(folder / "model_history_log.csv")
    assert len(run.metrics["train/loss"]) == 17
    assert run.metrics["eval/loss"].values[6] == pytest.approx(0.1439, abs=5e-5)
    assert any("'model_history_log') is a title" in w for w in run.warnings)


def test_ultralytics_metrics_are_the_evaluation_s() -> None:
    # Ultralytics computes results.csv's metrics/* columns on the validation set after each
    # epoch (a real one: holdout45 csv45e_coal_yolov8_cls_val_stalls, whose top-1 accuracy was
    # read as a train metric at its blind measurement): they are eval scores
    (run,) = load_runs(REAL / "csv45e_coal_yolov8_cls_val_stalls" / "results.csv")
    assert "eval/accuracy_top1" in run.metrics and "train/metrics/accuracy_top1" not in run.metrics
    assert run.metrics["eval/accuracy_top1"].values[0] == pytest.approx(0.32979)
    (det,) = load_runs(REAL / "csv17d_kitti_yolov8m_detect" / "results.csv")
    assert {"eval/mAP50(B)", "eval/mAP50-95(B)", "eval/precision(B)"} <= set(det.metrics)


def test_ultralytics_epochs_without_validation_hold_no_eval() -> None:
    # trained with val=False, Ultralytics writes 0 in every val/* and metrics/* cell until the
    # final validation (a real one: holdout46 csv46e_yolo11n_drone_val_off_still_falling, whose
    # eval loss "never improved on its first value, 0" at its blind measurement)
    (run,) = load_runs(REAL / "csv46e_yolo11n_drone_val_off_still_falling" / "results.csv")
    assert run.metrics["eval/loss"].steps.tolist() == [20]
    assert run.metrics["eval/mAP50(B)"].values.tolist() == pytest.approx([0.94799])
    assert len(run.metrics["train/loss"]) == 20
    assert any("no validation ran" in w for w in run.warnings)


def test_the_eval_loss_of_the_same_name_as_the_train_loss() -> None:
    # uni2ts logs train/PackedNLLLoss beside val/PackedNLLLoss, val/PackedMSELoss and
    # val/PackedNRMSELoss (a real one: holdout46
    # tb46b_moirai_etth1_finetune_val_nll_far_above_train, whose eval loss was left unread at its
    # blind measurement): the eval loss is the one the train loss was taken from
    (run,) = load_runs(REAL / "tb46b_moirai_etth1_finetune_val_nll_far_above_train")
    assert "eval/loss is taken from 'eval/PackedNLLLoss'" in run.warnings
    assert run.metrics["eval/loss"].values[0] == pytest.approx(12.38, abs=0.01)


def test_a_total_beside_its_terms_behind_an_emoji_is_the_loss() -> None:
    # "📈 Epoch [1/50] - Total: 0.0581 | Recon: 0.0338 | VQ: 0.0243" in a W&B output.log (a real
    # one: tune44 wb44d_hep_jet_vqvae_normformer_50ep_loss_still_falling, read from its
    # one-point summary at its blind measurement): the total of the named terms is the train loss
    folder = REAL / "wb44d_hep_jet_vqvae_normformer_50ep_loss_still_falling"
    (run,) = load_runs(folder / "wandb" / "run-20250527_105841-qeql4sbv" / "files")
    loss = run.metrics["train/loss"]
    assert len(loss) == 50 and loss.values[0] == pytest.approx(0.0581)
    assert "eval/loss" not in run.metrics
    assert run.meta.num_train_epochs == 50


def test_a_log_whose_only_loss_is_its_final_line_is_one_point() -> None:
    # Python logging with a bracketed logger name, "... - INFO - [__main__] - 📊 Final training
    # loss: 1.1465" after three days of resource lines (a real one: tune44
    # txt44f_phi2_persian_qlora_single_final_loss, "not a recognised training log" before): one
    # point, too little to judge
    (run,) = load_runs(REAL / "txt44f_phi2_persian_qlora_single_final_loss" / "training.log")
    assert run.metrics["train/loss"].values.tolist() == pytest.approx([1.1465217211914063])
    assert curvediag.diagnose(run).verdict == "inconclusive"


def test_two_tensorboard_curves_for_one_name_stay_apart() -> None:
    # a plain "loss" every ~70 steps (25 points from step 0) beside Lightning's train_loss_step
    # every 50 (14 points): merged, they read as a run resumed at step 49 (a real one: tune26
    # tb_spoof_vit_casia_collapse). The curve with more points is the loss, the other keeps its
    # own name
    (run,) = load_runs(REAL / "tb_spoof_vit_casia_collapse")
    loss = run.metrics["train/loss"]
    assert len(loss) == 25 and loss.values[0] == pytest.approx(0.8431, abs=1e-4)
    assert len(run.metrics["train/train_loss_step"]) == 14
    assert not any("resumed" in w for w in run.warnings)
    # a test split beside the validation split is not more evaluations of the same loss
    # (tune7 tb_phenoformer_lime)
    (pheno,) = load_runs(REAL / "tb_phenoformer_lime")
    assert "eval/test/loss" in pheno.metrics
    steps = pheno.metrics["eval/loss"].steps
    assert len(steps) == len(set(steps.tolist()))


def test_a_drawn_progress_bar_with_its_values_in_fields() -> None:
    # "Training [===  ] 8.5% 5000/58874 | 4.62 it/s | ETA: 11664.8 s | loss=3.910492 |
    # validation_loss=3.908841" (a real one: holdout40 txt40f_cgpt_104m_fineweb_edu_1epoch_healthy,
    # "not a recognised training log" at its blind measurement): the count is the step, the
    # total the plan; the tokenizer's bars before it carry no loss and are skipped
    real = REAL / "txt40f_cgpt_104m_fineweb_edu_1epoch_healthy" / "training_output.txt"
    (run,) = load_runs(real)
    assert run.meta.max_steps == 58874
    loss = run.metrics["train/loss"]
    assert loss.steps[:2].tolist() == [5000, 10000]
    assert loss.values[0] == pytest.approx(3.910492)
    assert run.metrics["eval/loss"].values[-1] == pytest.approx(3.282, abs=5e-4)
    assert run.metrics["eval/loss"].steps[-1] == 58874


def test_a_log_probability_is_the_negated_loss() -> None:
    # sbi's SNPE writes training_log_probs and validation_log_probs and no loss (a real one:
    # holdout40 tb40b_ceers_snpe_val_logprob_falls, judged inconclusive at its blind
    # measurement): minus each is the loss it minimises
    (run,) = load_runs(REAL / "tb40b_ceers_snpe_val_logprob_falls")
    train, val = run.metrics["train/loss"], run.metrics["eval/loss"]
    assert train.values[-1] == pytest.approx(-5.74, abs=0.01)
    assert val.values[1] == pytest.approx(-1.375, abs=1e-3)
    assert any("is minus" in w and "log_prob" in w for w in run.warnings)
    # the running best is not a curve
    assert "best" not in " ".join(w for w in run.warnings if "is minus" in w)


def test_printed_tensors_in_a_text_log_are_read_as_their_numbers() -> None:
    # "Epoch:  0 | Train Loss:  tensor(2055.4036, device='cuda:0') | Val Loss:  tensor(7501.8154,
    # device='cuda:0')" (a real W&B console: holdout41
    # wb41d_lstm_scratch_ramp_mse_broadcast_plateau_at_target_variance, "no training log found" at
    # its blind measurement)
    files = _wandb_files("wb41d_lstm_scratch_ramp_mse_broadcast_plateau_at_target_variance")
    (run,) = load_runs(files)
    assert run.metrics["train/loss"].values[0] == pytest.approx(2055.4036)
    assert run.metrics["eval/loss"].values[0] == pytest.approx(7501.8154)
    assert len(run.metrics["eval/loss"]) == 34


def test_a_metric_logger_console_with_its_validation_stats() -> None:
    # DeiT/MAE's MetricLogger: "Epoch: [0]  [0/2]  eta: 0:00:01  loss_vol: 0.6943 (0.6943) ...",
    # "Validation stats: loss_vol: 0.6931 (0.6932) ... acc: 0.4958 (0.5002)" and "Start
    # training for [5] epochs" (a real W&B console: tune40
    # wb40d_pads_part_ae_occupancy_stuck_at_ln2, read only through its summary before)
    (run,) = load_runs(_wandb_files("wb40d_pads_part_ae_occupancy_stuck_at_ln2"))
    assert run.meta.num_train_epochs == 5
    assert run.meta.max_steps == 10
    vol = run.metrics["train/loss_vol"]
    assert vol.steps[:3].tolist() == [0, 1, 2]
    assert vol.values[0] == pytest.approx(0.6943)
    acc = run.metrics["eval/acc"]
    assert acc.steps[:2].tolist() == [1, 3]  # after each epoch's last batch
    assert acc.values[0] == pytest.approx(0.4958)


def test_an_epoch_line_whose_values_follow_its_bracket_without_a_space() -> None:
    # "EPOCH[0]:loss 0.353" (a real W&B console: tune40
    # wb40d_lightgcn_bpr_yelp2018_stopped_ep6_of_1000, read only through its summary before); a
    # fractional epoch "Epoch 1.5 loss ..." is not an epoch line
    (run,) = load_runs(_wandb_files("wb40d_lightgcn_bpr_yelp2018_stopped_ep6_of_1000"))
    assert run.metrics["train/loss"].values.tolist() == pytest.approx(
        [0.353, 0.167, 0.155, 0.147, 0.138, 0.131]
    )
    from curvediag.ingest.text_logs import _epoch_pairs

    assert _epoch_pairs("Epoch 1.5 loss 0.3") is None
    assert _epoch_pairs("Epoch 3 - loss 0.5") == (3, None, {"loss": 0.5})


def test_epoch_lines_that_start_over_are_appended_runs_not_lines_within_epochs() -> None:
    # "Epoch 1: Training Loss = 0.2301" .. "Epoch 10: ...", then "Epoch 1" .. "Epoch 10" twice
    # more (a real log: holdout42 txt42f_chest_ct_resnet18_3x10ep_appended_healthy, read at its
    # blind measurement as 30 steps with a false 200x spike where the second run began): the
    # latest run is kept, as for a resumed one
    (run,) = load_runs(REAL / "txt42f_chest_ct_resnet18_3x10ep_appended_healthy" / "training.log")
    loss = run.metrics["train/loss"]
    assert loss.steps.tolist() == list(range(1, 11))
    assert loss.values[0] == pytest.approx(0.2411)
    assert run.meta.resumed
    # three model.fit calls on one model, each at a tenth of the learning rate before (a real
    # log: tune24 csv24f_kanji_cnn_keras_three_lr_stages): each stage restarts its epochs below
    # the level of the one before, so the 10 + 9 + 6 epochs are one run, in order
    stages = REAL / "csv24f_kanji_cnn_keras_three_lr_stages"
    (keras,) = load_runs(stages / "model_for_augmented_dataset_training_log.txt")
    assert len(keras.metrics["train/loss"]) == 25
    assert not keras.meta.resumed
    # ... and a later stage that switches the loss back and restarts above the stage before
    # (a real log: holdout53 txt53f_keras_yolov3_vgg_rabbits, 71.2 -> 3.58, then 8.29) is still
    # far below where the log began: the same model trained on, 3 + 5 + 5 epochs in order
    yolo = REAL / "txt53f_keras_yolov3_vgg_rabbits_3stage_loss_switch_jump" / "train_logs.txt"
    (staged,) = load_runs(yolo)
    expected = [71.2315, 33.1445, 15.9855, 10.3208, 7.0828, 4.725, 3.8145, 3.5751, 8.2945]
    expected += [8.7327, 6.2626, 5.6767, 5.2884]
    assert staged.metrics["train/loss"].values.tolist() == pytest.approx(expected, abs=1e-3)
    assert not staged.meta.resumed


def test_epoch_numbered_rows_keep_their_epoch_for_the_plan() -> None:
    # "Epoch 1/300 - Train Loss: 2.9594" .. "Epoch 191/300 - ..." (a real log committed while
    # its run went on: holdout43 txt43f_char_rnn_timemachine_191of300_flat_at_1p71, judged
    # healthy at its blind measurement): the steps are the epochs, and the epoch is kept, so the
    # run is seen to stop at 191 of its 300 planned epochs
    import curvediag

    path = REAL / "txt43f_char_rnn_timemachine_191of300_flat_at_1p71" / "training_results.txt"
    (run,) = load_runs(path)
    assert run.meta.num_train_epochs == 300
    assert run.metrics["train/epoch"].values[-1] == 191
    d = curvediag.diagnose(path)
    assert d.features["run.ended_early"] is True
    assert d.features["run.progress"] == pytest.approx(191 / 300)


def test_a_console_that_says_early_stopping_ended_the_run(tmp_path: Path) -> None:
    # "Epoch 28/50" ... then "Early stopping triggered." (a real W&B console: tune42
    # wb42d_rsna_mil_attention_val_plateau_early_stop_28of50): a finished run, not an early end
    (run,) = load_runs(_wandb_files("wb42d_rsna_mil_attention_val_plateau_early_stop_28of50"))
    assert run.meta.early_stopped and run.meta.finished
    # a patience counter or a setting printed after the last epoch says nothing of the kind
    for line in ("EarlyStopping counter: 3 out of 10", "early_stopping_patience: 5"):
        log = tmp_path / "train.log"
        log.write_text(
            "".join(
                f"Epoch {e}/50 - loss: {1 / e:.3f} - val_loss: {1.1 / e:.3f}\n" for e in (1, 2, 3)
            )
            + line
            + "\n"
        )
        (plain,) = load_runs(log)
        assert not plain.meta.early_stopped, line


def test_an_imagenet_example_console_with_its_starred_validation_lines() -> None:
    # PyTorch's ImageNet example as copied by a distillation repo: "Epoch: [1][200/378]\tTime
    # 50.045\tLoss 2.7974\tAcc@1 67.491 ...", " * Epoch 1, GPU 0, Acc@1 68.359, ..." (the
    # training's summary) and " ** Acc@1 68.508, Acc@5 100.000, precision 0.000, ..." (the
    # validation's); a real W&B console: holdout43
    # wb43d_simkd_rsna_student_majority_class_val_acc_flat_killed_ep6of60
    files = _wandb_files("wb43d_simkd_rsna_student_majority_class_val_acc_flat_killed_ep6of60")
    (run,) = load_runs(files)
    assert run.metrics["train/loss"].steps[:3].tolist() == [0, 200, 378]
    acc = run.metrics["eval/Acc@1"]
    assert acc.values.tolist() == [68.508] * 5
    assert acc.steps[0] == 200  # after epoch 1's last printed batch
    assert "eval/Epoch" not in run.metrics  # the training's " * Epoch 1, ..." summary


def test_an_ngcf_style_recommender_console() -> None:
    # "Epoch 19 [0.3s + 0.2s]: train==[0.02482=0.00444 + 0.02039], recall=[0.03130, 0.06594],
    # ndcg=[0.01713, 0.02647]" (a real W&B console: tune43
    # wb43d_eprhse_hypergraph_rec_recall_best_first_eval_earlystop, "no train or eval loss" at
    # its blind measurement): the total loss before its parts, each metric at its first
    # cut-off; the pre-training phase's epochs before it are set aside as an earlier run
    files = _wandb_files("wb43d_eprhse_hypergraph_rec_recall_best_first_eval_earlystop")
    (run,) = load_runs(files)
    recall = run.metrics["eval/recall"]
    assert recall.steps.tolist() == [19, 39, 59, 79, 99, 119]
    assert recall.values[0] == pytest.approx(0.03130)
    assert run.metrics["eval/ndcg"].values[-1] == pytest.approx(0.01389)
    train = run.metrics["train/loss"]
    assert train.values[train.steps.tolist().index(19)] == pytest.approx(0.02482)
    assert run.meta.early_stopped


def test_a_cyclegan_pix2pix_loss_log_is_read(tmp_path: Path) -> None:
    # pytorch-CycleGAN-and-pix2pix prints "(epoch: 1, iters: 20, time: 14.412, data: 0.080)
    # G_GAN: 2.436 G_L1: 54.115 D_real: 0.167 D_fake: 0.138" (a real Windows console: holdout47
    # txt47f_pix2pix_xray_4pts_stopped_ep2_lr_zero, "not a recognised training log" at its
    # blind measurement): the generator's terms add up to the train loss, iters count images
    folder = REAL / "txt47f_pix2pix_xray_4pts_stopped_ep2_lr_zero"
    (run,) = load_runs(folder / "train_log.txt")
    loss = run.metrics["train/loss"]
    assert loss.steps.tolist() == [20, 40, 60, 80]  # epoch 2's 3rd image is 77 + 3
    assert loss.values.tolist() == pytest.approx([56.551, 36.807, 26.215, 20.005])
    assert run.metrics["train/D_real"].values[2] == pytest.approx(1.649)
    # "learning rate 0.0001000 -> 0.0000000" before epoch 2
    assert run.metrics["train/learning_rate"].values.tolist() == pytest.approx([1e-4] * 3 + [0])
    assert run.meta.num_train_epochs == 2  # "End of epoch 1 / 2"
    assert any("sum of G_GAN, G_L1" in w for w in run.warnings)
    # CycleGAN's loss_log.txt: no dataset size, so an epoch is the most images one reached
    log = tmp_path / "loss_log.txt"
    log.write_text(
        "================ Training Loss (Mon Jan  1 00:00:00 2024) ================\n"
        + "".join(
            f"(epoch: {e}, iters: {i}, time: 0.210, data: 0.004) D_A: 0.25 G_A: {0.9 / e:.3f} "
            f"cycle_A: {2 / e:.3f} idt_A: 0.5 D_B: 0.24 G_B: 0.8 cycle_B: 1.5 idt_B: 0.6 \n"
            for e in (1, 2, 3)
            for i in (100, 200)
        )
    )
    (cyc,) = load_runs(log)
    assert cyc.metrics["train/loss"].steps.tolist() == [100, 200, 300, 400, 500, 600]
    assert cyc.metrics["train/loss"].values[0] == pytest.approx(0.9 + 2 + 0.5 + 0.8 + 1.5 + 0.6)
    assert "train/D_A" in cyc.metrics


def test_an_epoch_head_line_with_its_values_on_the_next_line(tmp_path: Path) -> None:
    # face-recognition loops print "Train Epoch: 1/70 ..." then "    total_loss: 24.7161 time:
    # 15m 1s", and every 5 epochs "Test Epoch: 5 ..." then "    ave: 87.3500" (a real `script`
    # capture: holdout48 txt48f_shufflefacenet_casia_cosface_70ep_healthy, "not a recognised
    # training log" at its blind measurement)
    folder = REAL / "txt48f_shufflefacenet_casia_cosface_70ep_healthy"
    (run,) = load_runs(folder / "log_train.txt")
    loss = run.metrics["train/loss"]
    assert len(loss) == 70 and loss.values[0] == pytest.approx(24.7161)
    assert loss.values[-1] == pytest.approx(8.999, abs=5e-4)
    ave = run.metrics["eval/ave"]
    assert ave.steps[:2].tolist() == [5, 10] and ave.values[0] == pytest.approx(87.35)
    assert run.meta.num_train_epochs == 70
    # a held-out head whose next line holds anything but pairs gives nothing
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"Train Epoch: {e}/3 ...\n  loss: {1 / e:.3f}\n" for e in (1, 2, 3))
        + "Val Epoch: 3 ...\n  saving the model to ./ckpt\n"
    )
    (plain,) = load_runs(log)
    assert plain.metrics["train/loss"].values.tolist() == pytest.approx([1.0, 0.5, 0.333])
    assert not any(k.startswith("eval/") for k in plain.metrics)


def test_a_batch_counter_that_restarts_every_epoch_becomes_a_global_step(tmp_path: Path) -> None:
    # a real per-batch log (holdout50 csv50e_idrid_multitask_5ep_batch_loss_still_falling):
    # epoch,batch,loss with the batch restarting at 0 every epoch, 5 epochs x 14 batches. Read
    # as steps, the epoch column kept only one loss per epoch (5 points); the batch axis keeps 70
    (run,) = load_runs(REAL / "csv50e_idrid_multitask_5ep_batch_loss_still_falling")
    loss = run.get("train/loss")
    assert loss is not None and len(loss.steps) == 70
    assert list(loss.steps[:3]) == [0, 1, 2] and loss.steps[14] == 14 and loss.steps[-1] == 69
    assert loss.values[14] == pytest.approx(1.0602) and loss.values[-1] == pytest.approx(0.6404)
    epoch = run.get("train/epoch")
    assert epoch is not None and epoch.values[13] == 0 and epoch.values[14] == 1
    assert any("restarts at every epoch" in w for w in run.warnings)
    # an iteration counter that restarts each epoch (1-based epochs, steps of 50) likewise
    p = tmp_path / "train_log.csv"
    p.write_text("epoch,step,train_loss\n1,0,0.30\n1,50,0.28\n2,0,0.26\n2,50,0.25\n3,0,0.24\n")
    (run,) = load_runs(p)
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == [0, 50, 51, 101, 102]
    # a global step that keeps rising, or a constant batch-size column, is left as it is
    p.write_text("epoch,step,loss\n0,10,0.9\n0,20,0.8\n1,30,0.7\n1,40,0.6\n")
    (run,) = load_runs(p)
    assert list(run.get("train/loss").steps) == [10, 20, 30, 40]  # type: ignore[union-attr]
    p.write_text("epoch,batch,loss\n0,32,0.9\n1,32,0.8\n2,32,0.7\n3,32,0.6\n")
    (run,) = load_runs(p)
    assert list(run.get("train/loss").steps) == [0, 1, 2, 3]  # type: ignore[union-attr]


def test_a_printed_keras_history_dict_is_read_as_epochs(tmp_path: Path) -> None:
    # a real console (holdout50 txt50f_vgg16_scratch_crowd_density_50ep): the script printed
    # "train history: {'acc': [...], 'loss': [...], 'val_acc': [...], 'val_loss': [...]}" on one
    # line, then the test accuracy; no per-epoch lines at all
    (run,) = load_runs(REAL / "txt50f_vgg16_scratch_crowd_density_50ep" / "train_history.txt")
    loss, val = run.get("train/loss"), run.get("eval/loss")
    assert loss is not None and val is not None
    assert list(loss.steps[:2]) == [1, 2] and loss.steps[-1] == 50 and len(val.steps) == 50
    assert loss.values[0] == pytest.approx(1.0985155) and val.values[-1] == pytest.approx(0.5632990)
    assert any("History.history dict printed" in w for w in run.warnings)
    # numpy 2 prints its scalars inside the lists; nan is kept as a non-finite value
    p = tmp_path / "log.txt"
    p.write_text(
        "history: {'loss': [np.float64(0.9), np.float64(0.7), nan], "
        "'val_loss': [np.float64(1.0), np.float64(0.8), np.float64(0.85)]}\n"
    )
    (run,) = load_runs(p)
    val = run.get("eval/loss")
    assert val is not None and list(val.values) == pytest.approx([1.0, 0.8, 0.85])
    # lists of unequal length, or no loss among them, are not a history
    p.write_text("{'loss': [0.9, 0.7, 0.6], 'val_loss': [1.0, 0.8]}\n")
    with pytest.raises(CurvediagError):
        load_runs(p)
    p.write_text("config: {'layers': [64, 32, 16], 'dropout': [0.1, 0.2, 0.3]}\n")
    with pytest.raises(CurvediagError):
        load_runs(p)


def test_printed_lines_saved_as_csv_are_read_as_a_console_log(tmp_path: Path) -> None:
    # a real one (holdout51 csv51e_lane_deeplabv3p): a loop wrote "Epoch:0, mask loss is
    # 0.1411" lines into train_log.csv, no header; read as a table its first line was the header
    # and nothing was left to read
    (run,) = load_runs(REAL / "csv51e_lane_deeplabv3p_loss_switch_level_shift_ep3")
    assert run.format == "text-log"
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == list(range(10))
    assert loss.values[0] == pytest.approx(0.1411) and loss.values[3] == pytest.approx(0.5052)
    # a table whose header names its columns, or whose rows are bare numbers, stays a table
    p = tmp_path / "log.csv"
    p.write_text("epoch,loss\n0,0.9\n1,0.8\n2,0.7\n")
    (run,) = load_runs(p)
    assert run.format == "csv"
    assert not text_logs.sniff(p)
    p.write_text("epoch 1 loss,0.9\nepoch 2 loss,0.8\nepoch 3 loss,0.7\n")  # a number alone
    assert not text_logs.sniff(p)
    p.write_text(
        "Epoch:0, mask loss is 0.9\nEpoch:1, mask loss is 0.8\nEpoch:2, mask loss is 0.7\n"
    )
    assert text_logs.sniff(p)


def test_record_lines_with_a_rising_batch_counter_and_a_fraction(tmp_path: Path) -> None:
    # a real Python-logging file (holdout51 txt51f_rope_llm_openwebtext): "ep: 0, batch: 20,
    # time: 9.17, ntokens: 485.20/513, loss: 10.984375" every 20 micro-batches. The "/513" after
    # a value made the line unreadable; the batch counter numbers the steps
    (run,) = load_runs(REAL / "txt51f_rope_llm_openwebtext_first_260_batches" / "train.log")
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == list(range(20, 261, 20))
    assert loss.values[0] == pytest.approx(10.984375) and loss.values[-1] == pytest.approx(8.390625)
    # a batch column that does not rise is a batch size, not a counter: lines numbered in order
    p = tmp_path / "train.log"
    p.write_text("loss: 0.9, batch: 32\nloss: 0.8, batch: 32\nloss: 0.7, batch: 32\n")
    (run,) = load_runs(p)
    assert list(run.get("train/loss").steps) == [1, 2, 3]  # type: ignore[union-attr]


def test_headerless_loss_lines_and_a_session_that_carried_on(tmp_path: Path) -> None:
    # a real loss_log.txt (holdout52 txt52f_charlstm_chinese_poems): "epoch,loss" lines with no
    # header, written by two sessions; the second reloaded the saved model and numbered its
    # epochs from 1 again (3.9771 at the end of the first, 3.9765 at the start of the second)
    (run,) = load_runs(REAL / "txt52f_charlstm_chinese_poems_converged_resumed" / "loss_log.txt")
    loss = run.get("train/loss")
    assert loss is not None and len(loss.steps) == 229
    assert list(loss.steps[:2]) == [1, 2] and loss.steps[-1] == 229
    assert loss.values[22] == pytest.approx(3.9771) and loss.values[23] == pytest.approx(3.9765)
    assert any("later sessions of one training" in w for w in run.warnings)
    # a fresh model after the restart (back near its first loss) is not joined on: the later
    # session is kept as a resume, as before
    p = tmp_path / "loss_log.txt"
    p.write_text("1,2.0\n2,1.5\n3,1.2\n1,1.9\n2,1.4\n")
    (run,) = load_runs(p)
    assert list(run.get("train/loss").steps) == [1, 2]  # type: ignore[union-attr]
    # ... nor is a resume that rewinds only part of the way (a checkpoint's step)
    p.write_text("1,2.0\n2,1.5\n3,1.2\n4,1.1\n3,1.2\n4,1.1\n5,1.0\n")
    (run,) = load_runs(p)
    assert list(run.get("train/loss").steps) == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
    # a held-out split in the name makes it the eval loss
    v = tmp_path / "val_loss.csv"
    v.write_text("1,2.0\n2,1.5\n3,1.2\n")
    (run,) = load_runs(v)
    assert run.get("eval/loss") is not None and run.get("train/loss") is None
    # a file whose name does not name a loss is not read as header-less pairs
    q = tmp_path / "notes.txt"
    q.write_text("1,2.0\n2,1.5\n3,1.2\n")
    with pytest.raises(CurvediagError):
        load_runs(q)


def test_bare_epoch_lines_then_train_set_and_val_set_lines(tmp_path: Path) -> None:
    # a real W&B console (holdout52 wb52d_mlp_car_price_kolesa): "Epoch: N", a tqdm bar, then
    # "Train set: Average loss: X" and "Val set: Average loss: Y, MAE: ..., R2: ..." per epoch,
    # and a "Test set: ..." line after the last epoch, which is not part of the curve
    folder = REAL / "wb52d_mlp_car_price_kolesa_15ep_val_gap_still_improving"
    (run,) = load_runs(next(folder.glob("run-*/files")))
    loss, val = run.get("train/loss"), run.get("eval/loss")
    assert loss is not None and val is not None
    assert list(loss.steps) == list(range(1, 16)) and list(val.steps) == list(range(1, 16))
    assert loss.values[0] == pytest.approx(177.3284) and val.values[-1] == pytest.approx(0.3623)
    assert any("test-set line" in w for w in run.warnings)
    # a test set evaluated every epoch in place of a validation set is the eval curve
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"Epoch: {e}\nTrain set: Average loss: {1 / e:.3f}\nTest set: Average loss: "
            f"{1.2 / e:.3f}\n"
            for e in range(1, 5)
        )
    )
    (run,) = load_runs(p)
    val = run.get("eval/loss")
    assert val is not None and len(val.steps) == 4 and val.values[0] == pytest.approx(1.2)


def test_finished_tqdm_bar_after_a_description_with_the_epoch_loss(tmp_path: Path) -> None:
    # a real console log (holdout53 txt53f_clip_gpt2_captioning): each epoch's finished tqdm bar
    # carries the description the loop set, "Epoch: 1 | Loss: 10.804: 100%|███| 2086/2086 [...]"
    folder = REAL / "txt53f_clip_gpt2_captioning_loss_stuck_near_ln_vocab"
    (run,) = load_runs(folder / "training_logs.txt")
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == list(range(1, 16))
    assert loss.values[0] == pytest.approx(10.804) and loss.values[1] == pytest.approx(10.149)
    # a bar short of its total holds a partial epoch's values: only the finished bar is read
    bar = "|" + "\u2588" * 10 + "|"
    p = tmp_path / "train.log"
    p.write_text(
        "".join(
            f"Epoch: {e} | Loss: {9 / e:.3f}:  50%{bar} 5/10 [00:01<00:01,  5.00it/s]\n"
            f"Epoch: {e} | Loss: {1 / e:.3f}: 100%{bar} 10/10 [00:02<00:00,  5.00it/s]\n"
            for e in range(1, 5)
        )
    )
    (run,) = load_runs(p)
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == [1, 2, 3, 4]
    assert list(loss.values) == pytest.approx([1.0, 0.5, 0.333, 0.25])


def test_hand_written_table_numbered_by_an_epochs_column(tmp_path: Path) -> None:
    # a real per-epoch pandas CSV (holdout53 csv53e_resnet50_brain_mri): "Epochs,Train Loss,
    # Test Loss,Accuracy,Precision,Recall"; the plural "Epochs" numbers the rows
    folder = REAL / "csv53e_resnet50_brain_mri_test_loss_drifts"
    (run,) = load_runs(folder / "training_metrics.csv")
    loss, val = run.get("train/loss"), run.get("eval/loss")
    assert loss is not None and val is not None
    assert list(loss.steps) == list(range(1, 21)) and list(val.steps) == list(range(1, 21))
    assert loss.values[0] == pytest.approx(0.09158812103851233)
    assert val.values[2] == pytest.approx(0.06630380700027252)
    assert run.get("train/epoch") is not None  # the epoch is kept: how far the run got is known
    p = tmp_path / "metrics.csv"
    p.write_text("Epochs,loss\n1,0.9\n2,0.7\n3,0.6\n")
    (run,) = load_runs(p)
    assert list(run.get("train/loss").steps) == [1, 2, 3]  # type: ignore[union-attr]


def test_spacy_training_table(tmp_path: Path) -> None:
    # a real W&B run folder of `spacy train` (holdout53 wb53d_spacy_ner): output.log holds
    # spaCy's table, one row per 200 steps; the NER loss is the train loss, tok2vec's is kept
    folder = REAL / "wb53d_spacy_ner_song_artist_1600steps_f1_still_rising"
    (run,) = load_runs(next(folder.glob("run-*/files")))
    loss, f1 = run.get("train/loss"), run.get("eval/ents_f1")
    assert loss is not None and f1 is not None
    assert list(loss.steps) == list(range(200, 1601, 200))  # step 0's one-batch sums left out
    assert loss.values[0] == pytest.approx(6818.43) and loss.values[-1] == pytest.approx(2432.72)
    assert f1.steps[0] == 0 and f1.values[-1] == pytest.approx(90.36)
    assert run.get("train/loss_tok2vec") is not None and run.get("eval/score") is not None
    assert any("spaCy training table" in w for w in run.warnings)
    # several components: the train loss is the sum of theirs, tok2vec's left out of it
    p = tmp_path / "train.log"
    p.write_text(
        "\u2139 Pipeline: ['tok2vec', 'tagger', 'parser']\n"
        "E    #       LOSS TOK2VEC  LOSS TAGGER  LOSS PARSER  TAG_ACC  DEP_UAS  SCORE \n"
        "---  ------  ------------  -----------  -----------  -------  -------  ------\n"
        "  0       0          0.00        50.00        60.00    10.00    12.00    0.11\n"
        "  0     200         30.00        20.00        40.00    80.00    70.00    0.75\n"
        "  1     400         35.00        10.00        30.00    85.00    75.00    0.80\n"
        "  2     600         36.00         8.00        25.00    86.00    77.00    0.81\n"
        "\u2714 Saved pipeline to output directory\n"
    )
    (run,) = load_runs(p)
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == [200, 400, 600]
    assert list(loss.values) == pytest.approx([60.0, 40.0, 33.0])
    assert run.get("eval/tag_acc") is not None and run.get("eval/dep_uas") is not None


def test_table_printed_with_columns_aligned_by_blanks(tmp_path: Path) -> None:
    # a real console log (holdout54 txt54f_gcn_enzymes): "Epoch    Train Loss   Train Acc
    # Test Loss    Test Acc     Time", a rule of dashes, then a row every 10 epochs whose time
    # carries its unit ("0.55    s"); "  Epochs: 200" in the printed configuration is the plan
    folder = REAL / "txt54f_gcn_enzymes_200ep_slow_still_improving_test_overlaps_train"
    (run,) = load_runs(folder / "training_output.log")
    loss, val = run.get("train/loss"), run.get("eval/loss")
    assert loss is not None and val is not None
    assert list(loss.steps) == [1, *range(10, 201, 10)] and list(val.steps) == list(loss.steps)
    assert loss.values[0] == pytest.approx(2.4288) and val.values[0] == pytest.approx(1.7552)
    assert run.meta.num_train_epochs == 200
    assert any("aligned by blanks" in w for w in run.warnings)
    # the header printed again above later rows, one rule per column, a unit stuck to a number
    p = tmp_path / "train.log"
    head = "Step    Loss      Val Loss   Time\n----    ----      --------   ----\n"
    p.write_text(
        head + "100     2.00      2.10       12s\n200     1.50      1.70       12s\n"
        "saving checkpoint\n" + head + "300     1.20      1.50       11s\n"
    )
    (run,) = load_runs(p)
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == [100, 200, 300]
    assert list(loss.values) == pytest.approx([2.0, 1.5, 1.2])
    # a header with no loss column is not a training table
    p.write_text("Epoch    Acc\n1        0.5\n2        0.6\n3        0.7\n")
    with pytest.raises(CurvediagError):
        load_runs(p)


def test_logging_level_in_brackets_and_batch_lines_counted_over_the_plan(tmp_path: Path) -> None:
    # a real Python-logging console (holdout54 txt54f_glaucoma): "2026-06-09 19:10:49,052
    # [INFO]     Batch [10/788] Loss: 0.1446", cp1252 logging-error tracebacks between the lines;
    # "Total epochs: 20" is the plan, 788 the batches of one epoch: 140 of 15,760 ran
    folder = REAL / "txt54f_glaucoma_resnet_focal_aborted_batch140_of_epoch1_of_20"
    (run,) = load_runs(folder / "training_output.log")
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == list(range(10, 141, 10))
    assert loss.values[0] == pytest.approx(0.1446) and loss.values[-1] == pytest.approx(0.1599)
    assert run.meta.num_train_epochs == 20 and run.meta.max_steps == 788 * 20
    # the batch count starts again with each epoch: the step counts on over the epochs
    p = tmp_path / "train.log"
    p.write_text(
        "Total epochs: 2\n"
        + "".join(
            f"2025-01-01 10:00:0{i} [INFO] Batch [{b}/20] Loss: {1 / (i + 1):.3f}\n"
            for i, b in enumerate((10, 20, 10, 20))
        )
    )
    (run,) = load_runs(p)
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == [10, 20, 30, 40]
    assert run.meta.max_steps == 40


def test_a_held_out_split_scored_without_an_eval_prefix_is_the_evaluation(tmp_path: Path) -> None:
    # a real per-epoch log (holdout54 txt54f_resnet18_catdog): "Epoch: N, Train ACC: a, Test
    # ACC: b, Train Loss: x" and no other held-out series; the test accuracy is its evaluation
    folder = REAL / "txt54f_resnet18_catdog_converged_stopped_ep51_of_60"
    (run,) = load_runs(folder / "train_results.txt")
    acc = run.get("eval/acc")
    assert acc is not None and len(acc) == 51 and acc.values[0] == pytest.approx(61.3, abs=0.05)
    assert any("eval/acc is taken from 'train/Test_ACC'" in w for w in run.warnings)
    d = curvediag.diagnose(run)
    assert d.features["run.eval_count"] == 51
    assert "eval-too-rare" not in {f.rule_id for f in d.findings}
    # beside a validation set's own series the test split stays what it was
    p = tmp_path / "metrics.csv"
    p.write_text(
        "epoch,loss,val_loss,val_acc,test_acc\n"
        + "".join(f"{e},{1 / e:.3f},{1.1 / e:.3f},0.{e},0.{e}\n" for e in range(1, 6))
    )
    (run,) = load_runs(p)
    assert run.get("eval/acc") is not None and run.get("train/test_acc") is not None
    assert not any("held-out split's" in w for w in run.warnings)
    # a test set scored once or twice is a result, not an evaluation curve
    p.write_text(
        "epoch,loss,test_acc\n"
        + "".join(f"{e},{1 / e:.3f},\n" for e in range(1, 6))
        + "6,0.1,0.9\n"
    )
    (run,) = load_runs(p)
    assert run.get("eval/acc") is None


def test_a_loss_printed_as_cost(tmp_path: Path) -> None:
    # a real TensorFlow LSTM's console (holdout55 txt55f_bachnet): "step 51, training cost
    # 4359.25", the only value of each line; "cost" is its loss
    folder = REAL / "txt55f_bachnet_lstm_chorales_cost_converges_with_recurring_spikes"
    (run,) = load_runs(folder / "training_results.txt")
    loss = run.get("train/loss")
    assert loss is not None and len(loss) == 100
    assert list(loss.steps[:3]) == [1, 51, 101] and int(loss.steps[-1]) == 4951
    assert loss.values[0] == pytest.approx(12687.1)
    assert loss.values[-1] == pytest.approx(7.24, abs=0.01)
    # a CSV column named cost is the loss too, when nothing is called a loss
    p = tmp_path / "history.csv"
    p.write_text("epoch,cost,accuracy\n" + "".join(f"{e},{1 / e:.3f},0.{e}\n" for e in range(1, 6)))
    (run,) = load_runs(p)
    loss = run.get("train/loss")
    assert loss is not None and list(loss.values) == pytest.approx([1.0, 0.5, 0.333, 0.25, 0.2])
    # a time cost is not a loss: "Epoch 3, time_cost 12.1" lines give no loss, and a CSV's
    # time_cost column beside an unnamed metric is not taken as one
    p = tmp_path / "timing.log"
    p.write_text("".join(f"Epoch {e}, time_cost {e * 3.1:.1f}\n" for e in range(1, 6)))
    with pytest.raises(CurvediagError):
        load_runs(p)
    p = tmp_path / "timing.csv"
    p.write_text("epoch,mse,time_cost\n" + "".join(f"{e},{1 / e:.3f},{e}\n" for e in range(1, 6)))
    (run,) = load_runs(p)
    loss = run.get("train/loss")
    assert loss is not None and loss.values[0] == pytest.approx(1.0)
    p = tmp_path / "timing_only.csv"
    p.write_text("epoch,acc,time_cost\n" + "".join(f"{e},0.{e},{e}\n" for e in range(1, 6)))
    (run,) = load_runs(p)
    assert run.get("train/loss") is None
    # a cost beside a named loss stays what it was: "step 5, loss 0.4, cost 12"
    p = tmp_path / "train.log"
    p.write_text("".join(f"step {s}, loss {1 / s:.3f}, cost {s * 3}\n" for s in range(1, 6)))
    (run,) = load_runs(p)
    loss = run.get("train/loss")
    assert loss is not None and loss.values[0] == pytest.approx(1.0)


def test_a_w_and_b_run_whose_curve_is_only_in_its_console(tmp_path: Path) -> None:
    # real W&B run folders whose curve is only in files/output.log (holdout55, read after its
    # blind measurement). wb55d_diffusion_policy: "Training Iteration 256: loss = 0.3176" under
    # the one bar the loop drew, "0/50000 [00:00<?, ?it/s]", then a KeyboardInterrupt traceback
    folder = REAL / "wb55d_diffusion_policy_hw_killed_iter4578_of_50000"
    (run,) = load_runs(next(folder.glob("run-*")))
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == list(range(0, 4353, 256))
    assert loss.values[0] == pytest.approx(2.90455, abs=1e-5)
    assert loss.values[-1] == pytest.approx(0.09022, abs=1e-5)
    assert run.meta.max_steps == 50000 and not run.meta.finished
    d = curvediag.diagnose(run)
    assert {"run-crashed", "run-ended-early"} & {f.rule_id for f in d.findings}
    # wb55d_ffm: "tr @ epoch 3/10 | Loss 0.139161 | 41.56 (s)", a short tag before "@"
    folder = REAL / "wb55d_ffm_fno_navier_stokes_10ep_converging"
    (run,) = load_runs(next(folder.glob("run-*")))
    loss = run.get("train/loss")
    assert loss is not None and len(loss) == 10
    assert loss.values[2] == pytest.approx(0.139161) and run.meta.num_train_epochs == 10
    # step lines that print their own total keep it; a bar's total is not taken over them
    p = tmp_path / "train.log"
    p.write_text(
        "  0%|     | 0/900 [00:00<?, ?it/s]\n"
        + "".join(f"Training Iteration {s}/300: loss = {1 / s:.3f}\n" for s in range(10, 60, 10))
    )
    (run,) = load_runs(p)
    assert run.meta.max_steps == 300
    # two bars (one per epoch) do not give the plan
    p.write_text(
        "".join(
            f"  0%|     | 0/30 [00:00<?, ?it/s]\nTraining Iteration {s}: loss = {1 / s:.3f}\n"
            for s in range(10, 60, 10)
        )
    )
    (run,) = load_runs(p)
    assert run.meta.max_steps is None
    # a console that cannot draw the bar prints "  0% 0/2000 [00:00<?, ?it/s]" (tune57
    # wb57d_nerf_lego, read after its blind measurement: "[TRAIN] Iter: 10 Loss: 0.50" lines,
    # stopped at iteration 49 of 2000)
    folder = REAL / "wb57d_nerf_lego_killed_iter49_of_2000_4_loss_points"
    (run,) = load_runs(next(folder.glob("run-*")))
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == [10, 20, 30, 40]
    assert run.meta.max_steps == 2000
    d = curvediag.diagnose(run)
    assert "run-ended-early" in {f.rule_id for f in d.findings}


def test_a_tab_separated_table_named_csv_and_angle_bracketed_iteration_lines() -> None:
    # real logs of holdout56 (read after its blind measurement). csv56e_sleep_accel: a Keras
    # History written with sep="\t" to history.csv, CRLF, no epoch column
    folder = REAL / "csv56e_sleep_accel_cnn_keras_tsv_val_loss_rises"
    (run,) = load_runs(folder / "history.csv")
    loss, ev = run.get("train/loss"), run.get("eval/loss")
    assert loss is not None and ev is not None and len(loss) == len(ev) == 10
    assert loss.values[0] == pytest.approx(0.364577) and ev.values[3] == pytest.approx(0.397347)
    # wb56d_resnet34: a W&B folder whose curve is only in output.log, "<<<iteration:[20/2930] -
    # total_loss: 0.9383"; the total after the slash is the plan
    folder = REAL / "wb56d_resnet34_bert_lstm_cosine_loss_plateau_0p81_killed_iter1240_ep1_of_100"
    (run,) = load_runs(next(folder.glob("run-*")))
    loss = run.get("train/loss")
    assert loss is not None and list(loss.steps) == list(range(20, 1241, 20))
    assert loss.values[0] == pytest.approx(0.9383) and run.meta.max_steps == 2930


def test_early_stopping_noted_after_the_word_triggered() -> None:
    # a real console (holdout56 txt56f_building_load, read after its blind measurement): the
    # last epoch line, then "触发 Early Stopping，提前结束训练。" ("early stopping triggered,
    # training ended early"): a finished run, stopped by its own early stopping
    folder = REAL / "txt56f_building_load_mlp_early_stopping_val_flat_then_up"
    (run,) = load_runs(folder / "train.log")
    assert run.meta.early_stopped and run.meta.finished
    d = curvediag.diagnose(run)
    assert "run-ended-early" not in d.finding_ids
    assert "stopped-by-early-stopping" in d.finding_ids
