"""Batch analysis: discovery, bad inputs, output formats, exit codes, filters, engines."""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import CORPUS, FIXTURES, HF_FIXTURES

import curvediag
from curvediag.batch import runner
from curvediag.batch.discover import discover
from curvediag.batch.progress import Progress
from curvediag.batch.table import COLUMNS, read_table
from curvediag.cli import main
from curvediag.testing.synth_files import synthetic_run, write_tensorboard, write_wandb_history_csv

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _units(*paths: Path, **kw: object) -> list[tuple[str, str, str]]:
    return [(u.path, u.kind, u.error) for u in discover([str(p) for p in paths], **kw)]  # type: ignore[arg-type]


def _local_table(*paths: Path | str, **kw: object) -> pd.DataFrame:
    return curvediag.diagnose_many([str(p) for p in paths], jobs=1, **kw)  # type: ignore[arg-type]


HF_RUNS = sorted(p.name for p in HF_FIXTURES.iterdir() if p.is_dir())
TB_RUNS = sorted(p.name for p in (FIXTURES / "tensorboard").iterdir() if p.is_dir())
#: A few fixtures for the slower engines (a Dask cluster, the progress of a pool).
SOME = [HF_FIXTURES / "overfit", HF_FIXTURES / "nan_filter_on", FIXTURES / "tensorboard"]


@functools.cache
def _fixture_table() -> pd.DataFrame:
    """The table of every fixture, computed once (copy before changing it)."""
    return _local_table(FIXTURES)


# --------------------------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------------------------
def test_each_trainer_folder_is_one_run_not_three() -> None:
    """Each Trainer folder (trainer_state.json + runs/ + wandb/, checkpoints) is ONE run, not
    one per format; each TensorBoard fixture folder is one run too."""
    units = _units(FIXTURES)
    hf = [u for u in units if u[1] == "hf-trainer"]
    tb = [u for u in units if u[1] == "tensorboard"]
    assert [Path(p).name for p, _, _ in hf] == HF_RUNS
    assert [Path(p).name for p, _, _ in tb] == TB_RUNS
    assert len(units) == len(HF_RUNS) + len(TB_RUNS) >= 13
    assert all(not err for _, _, err in units)
    logs = [f for f in HF_FIXTURES.rglob("*") if f.name == "trainer_state.json"]
    logs += [f for f in HF_FIXTURES.rglob("events.out.tfevents*")]
    logs += [f for f in HF_FIXTURES.rglob("*.wandb")]
    assert len(logs) >= 3 * len(HF_RUNS)  # 3+ log files per run, still one row per run
    df = _fixture_table()
    assert len(df) == len(units) and (df.verdict != "error").all(), df[["path", "error"]]
    overfit = df[df.path.str.endswith("overfit")].iloc[0]
    assert overfit.formats == "hf-trainer+tensorboard+wandb-run"  # merged as load_run does
    assert "overfitting" in overfit.findings.split(";")


def test_layouts_latest_run_symlink_keras_and_output_folder(tmp_path: Path) -> None:
    # a Trainer output folder with checkpoints only: one unit, the latest checkpoint
    ck = tmp_path / "ckpt_only"
    for n in (100, 200, 300):
        (ck / f"checkpoint-{n}").mkdir(parents=True)
        shutil.copy(
            HF_FIXTURES / "overfit" / f"checkpoint-{n}" / "trainer_state.json",
            ck / f"checkpoint-{n}",
        )
        (ck / f"checkpoint-{n}" / "model.safetensors").write_bytes(b"\0" * 64)
    # a standalone wandb/ folder with its latest-run symlink: the run once, under its own name
    wb = tmp_path / "wandb_only" / "wandb"
    src = next((HF_FIXTURES / "overfit" / "wandb").iterdir())
    shutil.copytree(src, wb / src.name)
    (wb / "latest-run").symlink_to(src.name)
    # Keras train/ + validation/ writers: one run
    run = synthetic_run("overfit", entries=60, seed=1)
    write_tensorboard(run, tmp_path / "keras" / "train")
    write_tensorboard(run, tmp_path / "keras" / "validation")
    # runs/ + wandb/ without trainer_state.json (before the first save): one unit
    out = tmp_path / "early_output"
    shutil.copytree(HF_FIXTURES / "overfit" / "runs", out / "runs")
    shutil.copytree(HF_FIXTURES / "overfit" / "wandb", out / "wandb")
    units = _units(tmp_path)
    got = {Path(p).relative_to(tmp_path).as_posix(): kind for p, kind, _ in units}
    assert got == {
        "ckpt_only": "hf-trainer",
        "early_output": "output-folder",
        "keras": "tensorboard",
        f"wandb_only/wandb/{src.name}": "wandb-run",
    }
    df = _local_table(tmp_path)
    assert len(df) == 4 and (df.verdict != "error").all(), df[["path", "error"]]
    early = df[df.path.str.endswith("early_output")].iloc[0]
    assert early.formats == "tensorboard+wandb-run"  # merged into one run


def test_bad_inputs_become_error_rows_and_good_runs_are_diagnosed(tmp_path: Path) -> None:
    """Corrupt files, a symlink loop, unreadable entries and a huge irrelevant file: every
    problem is one error row naming it, the good runs are diagnosed, nothing stops the batch."""
    good = tmp_path / "good"
    shutil.copytree(HF_FIXTURES / "overfit", good / "overfit")
    write_tensorboard(synthetic_run("spike", entries=200, seed=2), good / "tb_run")
    write_wandb_history_csv(synthetic_run("plateau", entries=200, seed=3), good / "hist.csv")
    bad = tmp_path / "bad"
    (bad / "truncated_state").mkdir(parents=True)
    (bad / "truncated_state" / "trainer_state.json").write_text('{"log_history": [{"loss": 1')
    (bad / "garbage_tb").mkdir()
    (bad / "garbage_tb" / "events.out.tfevents.1.host").write_bytes(bytes(range(256)) * 3)
    wandb_run = bad / "wandb" / "run-20240101_000000-abc"
    wandb_run.mkdir(parents=True)
    (wandb_run / "run-abc.wandb").write_bytes(b"not a wandb log")
    (bad / "csv").mkdir()
    (bad / "csv" / "metrics.csv").write_text("step,loss\n")  # a header and nothing else
    (bad / "csv" / "export.csv").write_text('step,loss\n1,2.0\n2,"1.5\n')  # unterminated quote
    (bad / "csv" / "huge.csv").write_text("step,loss\n" + "1,2.0\n" * 200_000)  # over the cap
    # a symlink loop (a link to its own ancestor) and a link that resolves to itself
    (bad / "loops").mkdir()
    (bad / "loops" / "up").symlink_to("..", target_is_directory=True)
    (bad / "loops" / "self.csv").symlink_to("self.csv")
    # unreadable even for root: a FIFO with a log's name, a broken trainer_state.json link
    (bad / "fifo").mkdir()
    os.mkfifo(bad / "fifo" / "metrics.csv")
    (bad / "broken").mkdir()
    (bad / "broken" / "trainer_state.json").symlink_to(tmp_path / "nowhere.json")
    # skipped without a row: weights (a sparse 3 GiB file), a config .json, a dataset CSV
    (bad / "weights").mkdir()
    with (bad / "weights" / "model.safetensors").open("wb") as fh:
        fh.truncate(3 << 30)
    (bad / "weights" / "config.json").write_text('{"hidden_size": 8}')
    (bad / "weights" / "predictions.csv").write_text("text,label\nhello,1\n")
    expected = {
        "bad/truncated_state": "not valid JSON",
        "bad/garbage_tb": "not a TensorBoard event file",
        "bad/wandb/run-20240101_000000-abc": "not a W&B transaction log",
        "bad/csv/metrics.csv": "no data rows",
        "bad/csv/export.csv": "not a readable CSV log",
        "bad/csv/huge.csv": "size cap",
        "bad/loops/up": "symlink loop",
        "bad/loops/self.csv": "symlink loop",
        "bad/fifo/metrics.csv": "not a regular file",
        "bad/broken": "broken symbolic link",
    }
    if not IS_ROOT:  # root reads anything: permission errors only exist for other users
        locked = bad / "locked"
        locked.mkdir()
        (locked / "trainer_state.json").write_text("{}")
        locked.chmod(0)
        expected["bad/locked"] = "permission denied"
    try:
        tables = [_local_table(tmp_path, max_file_size=1 << 20)]
        tables.append(curvediag.diagnose_many([str(tmp_path)], jobs=2, max_file_size=1 << 20))
    finally:
        if not IS_ROOT:
            (bad / "locked").chmod(0o755)
    for df in tables:
        rel = df.path.map(lambda p: Path(p).relative_to(tmp_path).as_posix())
        errors = dict(zip(rel[df.verdict == "error"], df.error[df.verdict == "error"], strict=True))
        assert set(errors) == set(expected), errors
        for path, needle in expected.items():
            assert needle in errors[path], (path, errors[path])
        ok = df[df.verdict != "error"]
        assert sorted(rel[ok.index]) == ["good/hist.csv", "good/overfit", "good/tb_run"]
        assert ok.error.eq("").all() and ok.steps.notna().all()
    pd.testing.assert_frame_equal(tables[0], tables[1])  # same table, same order, any jobs


def test_missing_path_and_empty_folder_are_rows(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    df = _local_table(tmp_path / "nope", tmp_path / "empty")
    assert list(df.verdict) == ["error", "error"]
    assert "no such file" in df.error[0] and "no training logs found" in df.error[1]


# --------------------------------------------------------------------------------------------
# Table, formats, CLI
# --------------------------------------------------------------------------------------------
def test_diagnose_many_columns_and_dtypes() -> None:
    df = curvediag.diagnose_many(HF_FIXTURES / "overfit", jobs=1)
    assert tuple(df.columns) == COLUMNS
    assert str(df.steps.dtype) == "Int64" and df.train_loss_min.dtype == "float64"
    row = df.iloc[0]
    assert row.run_name == "overfit" and row.verdict == "warning" and row.error == ""
    assert row.top_finding == "overfitting" and row.top_severity == "warning"
    d = curvediag.diagnose(HF_FIXTURES / "overfit")
    assert row.findings == ";".join(d.finding_ids) and row.steps == d.run.last_step
    ev = d.run.metrics["eval/loss"]
    assert row.eval_loss_best == pytest.approx(float(ev.values.min()))
    assert row.eval_loss_best_step == int(ev.steps[ev.values.argmin()])
    assert "diagnose_many" in curvediag.__all__


def test_output_formats_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = [tmp_path / n for n in ("t.csv", "t.jsonl", "t.parquet", "summary.md")]
    if not _has("pyarrow"):
        outs.remove(tmp_path / "t.parquet")
    base = ["batch", str(FIXTURES), "--jobs", "1", "-q"]
    args = list(base)
    for o in outs:
        args += ["-o", str(o)]
    assert main([*args, "--fail-on", "never"]) == 0
    expected = _fixture_table()
    for o in outs[:-1]:
        pd.testing.assert_frame_equal(read_table(o), expected, obj=o.name)
    md = (tmp_path / "summary.md").read_text()
    assert md.startswith("# curvediag batch summary")
    for section in ("## Verdicts", "## Findings by severity", "## Findings", "## Worst runs"):
        assert section in md
    worst = md.split("## Worst runs", 1)[1]
    assert worst.index("critical") < worst.index("warning")  # worst runs first
    n_overfit = int(expected.findings.str.split(";").map(lambda ids: "overfitting" in ids).sum())
    assert n_overfit >= 1 and f"| overfitting | warning | {n_overfit} |" in md
    assert f"{len(expected)} run(s)" in md
    # --format to stdout; rows are JSON objects with every column
    assert main([*base, "--format", "jsonl", "--fail-on", "never"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(expected) and set(json.loads(lines[0])) == set(COLUMNS)
    # Parquet to stdout makes no sense: a one-line error, exit 2
    assert main([*base, "--format", "parquet"]) == 2
    assert "needs a file" in capsys.readouterr().err


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_fail_on_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warn = str(HF_FIXTURES / "overfit")
    crit = str(HF_FIXTURES / "nan_filter_on")
    q = ["--jobs", "1", "-q", "-o", str(tmp_path / "t.csv")]
    assert main(["batch", warn, *q]) == 0  # default --fail-on critical
    assert main(["batch", warn, *q, "--fail-on", "warning"]) == 1
    assert main(["batch", warn, crit, *q]) == 1
    assert main(["batch", warn, crit, *q, "--fail-on", "never"]) == 0
    # error rows alone do not fail the run: the exit code reflects --fail-on
    assert main(["batch", str(tmp_path / "nope"), *q, "--fail-on", "warning"]) == 0
    assert "no such file" in read_table(tmp_path / "t.csv").error[0]
    # bad rule override or options: 2 with a one-line message
    assert main(["batch", warn, *q, "--set", "nosuch.param=1"]) == 2
    assert main(["batch", warn, *q, "--jobs", "0"]) == 2
    err = capsys.readouterr().err
    assert "nosuch" in err and "--jobs" in err and "Traceback" not in err


def test_filters_and_reports(tmp_path: Path) -> None:
    assert list(_local_table(FIXTURES, include=["overfit"]).run_name) == ["overfit"]
    assert list(_local_table(FIXTURES, exclude=["hf"]).run_name) == TB_RUNS
    assert len(_local_table(FIXTURES, include=["hf/nan_filter_*"])) == 2
    df = _local_table(*SOME, min_steps=250)
    assert len(df) > 0 and (df.steps >= 250).all()
    full = _local_table(*SOME)
    assert 0 < len(df) < len(full)
    assert set(df.path) == set(full.path[full.steps >= 250])
    reports = tmp_path / "reports"
    out = tmp_path / "t.csv"
    assert (
        main(
            [
                "batch",
                str(HF_FIXTURES),
                "-j",
                "1",
                "-q",
                "-o",
                str(out),
                "--reports",
                str(reports),
                "--fail-on",
                "never",
            ]
        )
        == 0
    )
    files = sorted(reports.glob("*.md"))
    assert len(files) == len(HF_RUNS) and any("overfit" in f.name for f in files)
    assert all(f.read_text().strip() for f in files)


def test_help_is_light_and_lists_batch() -> None:
    code = (
        "import sys, curvediag.cli.batch as c, argparse;"
        "p = argparse.ArgumentParser(); c.add_arguments(p);"
        "heavy = [m for m in ('numpy', 'pandas', 'pydantic', 'yaml') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    with pytest.raises(SystemExit):
        main(["batch", "--help"])


def test_progress_bar_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    quiet = io.StringIO()
    p = Progress(quiet)
    p.update(5, 1, force=True)
    p.close()
    assert quiet.getvalue() == ""
    tty = Tty()
    p = Progress(tty, interval=0)
    p.update(5, 1)
    p.update(9, 2)
    p.close()
    text = tty.getvalue()
    assert "9 runs done" in text and "2 errors" in text and "runs/s" in text
    assert text.endswith("\n")


# --------------------------------------------------------------------------------------------
# Engines: worker crash, fsspec URLs, Dask
# --------------------------------------------------------------------------------------------
def test_a_worker_that_dies_costs_one_error_row(monkeypatch: pytest.MonkeyPatch) -> None:
    if "fork" not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip("needs the fork start method to plant the crash in the workers")
    real = runner._diagnose_unit

    def crashing(unit, local, opts):  # type: ignore[no-untyped-def]
        if unit.path.endswith("lr_too_low"):
            os._exit(3)
        return real(unit, local, opts)

    monkeypatch.setattr(runner, "_diagnose_unit", crashing)
    names = ("overfit", "lr_too_low", "nan_filter_on", "healthy_cosine")
    units = list(discover([str(HF_FIXTURES / n) for n in names]))
    got = list(runner.iter_results(units, runner.Options(), jobs=2, start_method="fork"))
    assert [u.path for u, _ in got] == [u.path for u in units]
    rows = {u.path: r.rows[0] for u, r in got}
    dead = [p for p, r in rows.items() if r["verdict"] == "error"]
    assert [Path(p).name for p in dead] == ["lr_too_low"]
    assert "worker" in rows[dead[0]]["error"] and "died" in rows[dead[0]]["error"]


def test_results_stream_with_a_bounded_window() -> None:
    """Discovery is consumed lazily and at most a window of units is in flight: memory is
    bounded by the window, not by the number of runs."""
    units = list(discover([str(p) for p in SOME])) * 8
    pulled = 0

    def source():  # type: ignore[no-untyped-def]
        nonlocal pulled
        for u in units:
            pulled += 1
            yield u

    for engine_jobs in (1, 2):
        pulled = 0
        it = runner.iter_results(source(), runner.Options(), jobs=engine_jobs)
        first, _ = next(it)
        assert first.path == units[0].path
        assert pulled <= 8 * engine_jobs + 1, pulled  # not the whole tree
        rest = [u.path for u, _ in it]
        assert [first.path, *rest] == [u.path for u in units]  # discovery order


def test_fsspec_memory_and_file_urls() -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = "/curvediag-batch-test"
    try:
        src = HF_FIXTURES / "overfit"
        for f in sorted(src.rglob("*")):
            if f.is_file():
                fs.pipe(f"{root}/overfit/{f.relative_to(src).as_posix()}", f.read_bytes())
        fs.pipe(f"{root}/overfit/checkpoint-300/model.safetensors", b"\0" * 2048)
        fs.pipe(
            f"{root}/history_sparse.csv",
            (FIXTURES.parent / "tests/data/tables/history_sparse.csv").read_bytes(),
        )
        remote = curvediag.diagnose_many(f"memory://{root}", jobs=1)
    finally:
        fs.rm(root, recursive=True)
    local = curvediag.diagnose_many(
        [
            str(HF_FIXTURES / "overfit"),
            str(FIXTURES.parent / "tests/data/tables/history_sparse.csv"),
        ],
        jobs=1,
    )
    assert list(remote.path) == [f"memory://{root}/{n}" for n in ("history_sparse.csv", "overfit")]
    cols = [c for c in COLUMNS if c != "path"]
    pd.testing.assert_frame_equal(
        remote[cols].sort_values("run_name").reset_index(drop=True),
        local[cols].sort_values("run_name").reset_index(drop=True),
    )
    url = (HF_FIXTURES / "overfit").as_uri()
    by_url = curvediag.diagnose_many(url, jobs=1)
    assert by_url.path[0] == url
    pd.testing.assert_frame_equal(
        by_url[cols], local[local.run_name == "overfit"][cols].reset_index(drop=True)
    )


def test_dask_local_cluster_gives_the_local_table() -> None:
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    local = _local_table(*SOME)
    with LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        remote = curvediag.diagnose_many(
            [str(p) for p in SOME], engine="dask", scheduler=cluster.scheduler_address
        )
    key = ["path", "run_name"]
    pd.testing.assert_frame_equal(
        remote.sort_values(key).reset_index(drop=True),
        local.sort_values(key).reset_index(drop=True),
    )


# --------------------------------------------------------------------------------------------
# The shared corpus
# --------------------------------------------------------------------------------------------
@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")
def test_batch_over_the_corpus(tmp_path: Path) -> None:
    out = tmp_path / "corpus.csv"
    code = main(["batch", str(CORPUS), "--jobs", "2", "-q", "-o", str(out), "--fail-on", "never"])
    assert code == 0
    df = read_table(out)
    assert len(df) >= 70  # 70 entries; W&B CSV exports hold several runs each
    errors = df[df.verdict == "error"]
    # the only corpus entry that is not a curve: a W&B runs-table export
    assert [Path(p).parent.name for p in errors.path] == ["wbx_nanogpt_runs_table"]
    assert "runs-table" in errors.error.iloc[0]
    assert set(df.verdict) <= {"healthy", "inconclusive", "warning", "critical", "error"}


def test_progress_bar_shows_total_and_eta_on_a_terminal() -> None:
    import io

    from curvediag.batch.progress import Progress

    out = io.StringIO()
    p = Progress(out, enabled=True, interval=0.0)
    p.total = 4
    p.start -= 10.0  # 10 s in, 1 of 4 units done: 30 s left
    p.update(1, 0, units=1, force=True)
    line = out.getvalue().rsplit("\r", 1)[-1]
    assert "[#####---------------] 1/4 (25%)" in line and "ETA 30 s" in line
    quiet = io.StringIO()
    q = Progress(quiet)  # not a terminal: nothing drawn
    q.update(1, 0, units=1, force=True)
    q.close()
    assert quiet.getvalue() == ""


def test_a_keras_csvlogger_training_log_is_found_and_a_console_log_is_not(tmp_path: Path) -> None:
    run = tmp_path / "keras_run"
    run.mkdir()
    (run / "training.log").write_text(
        "epoch,accuracy,loss,val_accuracy,val_loss\n0,0.9,0.3,0.91,0.25\n1,0.95,0.2,0.93,0.2\n"
        "2,0.97,0.12,0.94,0.18\n3,0.98,0.08,0.94,0.17\n",
        encoding="utf-8",
    )
    (run / "console.log").write_text("Epoch 1/4\n12/12 - loss: 0.3000\n", encoding="utf-8")
    # a loop's tab-separated step/loss table saved as train.log is a log too
    (run / "train.log").write_text("step\tloss\n10\t8.46\n20\t7.69\n", encoding="utf-8")
    units = _units(tmp_path)
    assert sorted(Path(p).name for p, kind, _ in units if kind == "file") == [
        "train.log",
        "training.log",
    ]
