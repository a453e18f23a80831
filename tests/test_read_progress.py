"""Progress of reading one big file: the readers tell how far they got, the CLI draws a bar
with the total and an ETA on a terminal only, and nothing changes in what is read."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from curvediag import progress
from curvediag.cli import main
from curvediag.ingest import _progress, _tfevents, load_run, reading_progress
from curvediag.ingest._tfevents import scalar_event, write_event_file

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "overfit"

Call = tuple[str, str, int, int]


def _record(calls: list[Call]) -> _progress.Listener:
    return lambda path, phase, done, total: calls.append((path, phase, done, total))


def _check_calls(calls: list[Call], path: Path, phase: str) -> None:
    mine = [c for c in calls if c[0] == str(path) and c[1] == phase]
    assert len(mine) >= 3, calls
    dones = [c[2] for c in mine]
    assert dones == sorted(dones)
    assert all(0 <= d <= t for _, _, d, t in mine)
    assert {t for *_, t in mine} == {path.stat().st_size}


@pytest.fixture
def event_file(tmp_path: Path) -> Path:
    out = tmp_path / "events.out.tfevents.1700000000.host"
    events = [scalar_event("train/loss", 2.0 - i * 1e-4, i, 1.7e9 + i) for i in range(5000)]
    return write_event_file(out, events)


def test_tensorboard_decoding_is_told_in_chunks(
    event_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tfevents, "_CHUNK_RECORDS", 1000)
    calls: list[Call] = []
    with reading_progress(_record(calls)):
        run = load_run(event_file)
    _check_calls(calls, event_file, "decoding")
    assert len(run.metrics["train/loss"].values) == 5000
    # nobody listening: nothing told, same run
    assert len(load_run(event_file).metrics["train/loss"].values) == 5000


def test_wandb_binary_log_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    (log,) = FIXTURE.glob("wandb/*/run-*.wandb")
    monkeypatch.setattr(_progress, "MIN_STEP", 1)
    calls: list[Call] = []
    with reading_progress(_record(calls)):
        load_run(log.parent)
    _check_calls(calls, log, "decoding")


def test_json_lines_and_chunked_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "wandb-history.jsonl"
    rows = [{"_step": i, "train/loss": 2.0 - i * 1e-4, "_runtime": i * 0.5} for i in range(5000)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(_progress, "CHUNK", 4096)
    calls: list[Call] = []
    with reading_progress(_record(calls)):
        run = load_run(path)
    _check_calls(calls, path, "reading")
    decoding = [c for c in calls if c[1] == "decoding"]
    assert len(decoding) >= 4
    assert len(run.metrics["train/loss"].values) == 5000


def test_trainer_state_tells_its_parse() -> None:
    calls: list[Call] = []
    with reading_progress(_record(calls)):
        load_run(FIXTURE / "trainer_state.json")
    assert "parsing" in {c[1] for c in calls}, calls


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_read_bar_shows_total_share_and_eta_after_its_delay() -> None:
    drawn: list[str] = []
    clock = _Clock()
    bar = progress.ReadBar(drawn.append, delay=0.5, clock=clock)
    mb = 1 << 20
    bar("/runs/a/events.out.tfevents.1", "decoding", 0, 980 * mb)
    clock.now = 0.2
    bar("/runs/a/events.out.tfevents.1", "decoding", 100 * mb, 980 * mb)
    assert drawn == []  # a quick file shows nothing
    clock.now = 4.0
    bar("/runs/a/events.out.tfevents.1", "decoding", 400 * mb, 980 * mb)
    assert drawn[-1] == (
        "decoding events.out.tfevents.1 [########------------] 400 MB/980 MB (41%), ETA 6 s"
    )
    clock.now = 9.0
    bar("/runs/a/trainer_state.json", "parsing", 3 * mb // 2, 3 * mb // 2)
    clock.now = 10.0
    bar("/runs/a/trainer_state.json", "parsing", 3 * mb // 2, 3 * mb // 2)
    assert drawn[-1] == "parsing trainer_state.json (2 MB), 1 s"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_diagnose_draws_the_bar_on_a_terminal_then_clears_it(
    event_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_tfevents, "_CHUNK_RECORDS", 1000)
    monkeypatch.setattr(progress, "READ_BAR_DELAY", 0.0)
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    main(["diagnose", str(event_file)])
    drawn = tty.getvalue()
    assert "curvediag diagnose: decoding events.out.tfevents.1700000000.host [" in drawn
    assert "ETA" in drawn
    assert drawn.endswith("\r")  # the line is blanked before the diagnosis is printed
    assert "\r" not in capsys.readouterr().out
    # not a terminal: nothing on stderr
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    main(["diagnose", str(event_file)])
    assert plain.getvalue() == ""


def test_report_shows_the_bar_inside_its_reading_stage(
    event_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_tfevents, "_CHUNK_RECORDS", 1000)
    monkeypatch.setattr(progress, "READ_BAR_DELAY", 0.0)
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["report", str(event_file), "-o", str(tmp_path / "r"), "--no-plots"]) == 0
    assert "0/3 reading: decoding events.out.tfevents.1700000000.host [" in tty.getvalue()


def test_read_bar_escapes_the_file_name() -> None:
    drawn: list[str] = []
    bar = progress.ReadBar(drawn.append, delay=0.0, clock=_Clock())
    bar("/runs/evil\x1b[31mred/events.out.tfevents.1", "decoding", 1, 2)
    bar("/runs/\x1b]0;title\x07.tfevents", "decoding", 2, 2)
    assert drawn and all("\x1b" not in text and "\x07" not in text for text in drawn)
