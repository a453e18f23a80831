"""The fast forms of the features give the answers of the direct ones; limits become clean
errors; rule files are parsed once per process."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import curvediag
from curvediag.errors import OutOfMemoryError
from curvediag.features import FeatureContext, FeatureSet, FeatureSettings, shape
from curvediag.features import _stats as stats
from curvediag.features.evalgap import _smoothed_train_at
from curvediag.model import Run
from curvediag.normalize import build_series
from curvediag.ruleset import loader
from curvediag.ruleset.conditions import _first_run
from curvediag.testing.synth import make_run


def _rolling_reference(y: np.ndarray, window: int) -> np.ndarray:
    """The definition: a centred window, shrunken at the edges, NaN ignored."""
    n = y.size
    w = max(1, min(window, n))
    w -= 1 - w % 2
    half = w // 2
    out = np.empty(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for i in range(n):
            out[i] = np.nanmedian(y[max(0, i - half) : i + half + 1])
    return out


@pytest.mark.parametrize("direct_limit", [stats.DIRECT_LIMIT, 0])
@pytest.mark.parametrize("n", [5, 40, 777, 3001])
@pytest.mark.parametrize("window", [2, 3, 9, 51, 600, 100_000])
def test_rolling_median_matches_its_definition(
    monkeypatch: pytest.MonkeyPatch, direct_limit: int, n: int, window: int
) -> None:
    monkeypatch.setattr(stats, "DIRECT_LIMIT", direct_limit)  # 0: scipy's running filter
    rng = np.random.default_rng(n + window)
    y = rng.normal(size=n).round(1)  # ties, and even edge windows
    assert np.array_equal(stats.rolling_median(y, window), _rolling_reference(y, window))
    y[::5] = np.nan
    got = stats.rolling_median(y, window)
    assert np.array_equal(got, _rolling_reference(y, window), equal_nan=True)


@pytest.mark.parametrize("direct_limit", [stats.DIRECT_LIMIT, 0])
@pytest.mark.parametrize("w", [1, 2, 6, 25, 400, 401])
def test_sliding_and_prefix_medians(
    monkeypatch: pytest.MonkeyPatch, direct_limit: int, w: int
) -> None:
    monkeypatch.setattr(stats, "DIRECT_LIMIT", direct_limit)
    y = np.random.default_rng(w).normal(size=1500)
    want = np.array([np.median(y[i : i + w]) for i in range(y.size - w + 1)])
    assert np.array_equal(stats.sliding_medians(y, w), want)
    want_prefix = np.array([np.median(y[:k]) for k in range(w, 3 * w + 1)])
    assert np.array_equal(stats.prefix_medians(y, w, 3 * w), want_prefix)


def test_fft_autocorrelation_matches_the_direct_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    r = np.sin(np.arange(5000) / 7.0) + np.random.default_rng(0).normal(0, 0.3, 5000)
    r -= r.mean()
    direct = shape._autocorrelation(r, 1500)
    monkeypatch.setattr(shape, "ACF_DIRECT_LIMIT", 0)
    fft = shape._autocorrelation(r, 1500)
    assert np.allclose(fft, direct, rtol=0, atol=1e-9 * float(np.dot(r, r)))
    assert shape._acf_peak(r, 1500)[1] == int(np.argmax(direct[20:80])) + 21  # ~2*pi*7 logs


def _train_at_reference(s: np.ndarray, v: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The former per-evaluation loop."""
    interval = float(np.median(np.diff(s)))
    half = max(0.5 * interval, 0.02 * float(s[-1] - s[0]))
    out = np.full(at.size, np.nan)
    for i, st in enumerate(at):
        lo = int(np.searchsorted(s, st - half, side="left"))
        hi = int(np.searchsorted(s, st + half, side="right"))
        if hi > lo:
            out[i] = float(np.median(v[lo:hi]))
        else:
            j = int(np.argmin(np.abs(s - st)))
            if abs(float(s[j]) - float(st)) <= interval:
                out[i] = float(v[j])
    return out


@pytest.mark.parametrize("direct_limit", [stats.DIRECT_LIMIT, 0])
@pytest.mark.parametrize("layout", ["dense", "irregular", "sparse"])
def test_train_around_each_eval_matches_the_loop(
    monkeypatch: pytest.MonkeyPatch, direct_limit: int, layout: str
) -> None:
    import curvediag.features.evalgap as evalgap

    monkeypatch.setattr(evalgap, "DIRECT_LIMIT", direct_limit)
    monkeypatch.setattr(evalgap, "MAX_RUNNING_MEDIANS", 10_000)  # exact for any layout
    rng = np.random.default_rng(len(layout))
    if layout == "dense":
        steps = np.arange(1, 5001)
    elif layout == "irregular":
        steps = np.cumsum(rng.integers(1, 30, 3000))
    else:  # train logged every 500 steps, evals in between and beyond the end
        steps = np.arange(500, 20001, 500)
    values = 3.0 * np.exp(-steps / steps[-1]) * np.exp(rng.normal(0, 0.05, steps.size))
    at = np.unique(np.concatenate([rng.integers(-300, int(steps[-1]) + 900, 300), steps[::7]]))
    series, _ = build_series("train/loss", steps, values, None)
    run = Run(source="<t>", format="synthetic", name="t", metrics={"train/loss": series})
    ctx = FeatureContext(run, FeatureSettings(), FeatureSet(run))
    got = _smoothed_train_at(ctx, at)
    want = _train_at_reference(steps, values, at)
    assert np.array_equal(got, want, equal_nan=True)
    if layout == "irregular" and direct_limit == 0:
        # windows of too many distinct large sizes: a documented sample of each window
        monkeypatch.setattr(evalgap, "MAX_RUNNING_MEDIANS", 1)
        monkeypatch.setattr(evalgap, "SAMPLE", 101)
        approx = _smoothed_train_at(ctx, at)
        assert np.array_equal(np.isnan(approx), np.isnan(want))
        assert not np.array_equal(approx, want, equal_nan=True)
        assert np.nanmax(np.abs(approx / want - 1)) < 0.03


def test_first_run_of_consecutive_hits() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(0, 40))
        hit = rng.random(n) < rng.random()
        need = int(rng.integers(1, 6))
        steps = 10 * np.arange(n) + 5
        want, run_len = None, 0
        for i, h in enumerate(hit):
            run_len = run_len + 1 if h else 0
            if run_len >= need:
                want = int(steps[i - need + 1])
                break
        assert _first_run(steps, hit, need) == want


def test_memory_error_while_reading_names_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import curvediag.ingest as ingest

    def boom(path: Path, aliases: object) -> list[object]:
        raise MemoryError

    monkeypatch.setattr(ingest, "_reader", lambda fmt: boom)
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n1,2.0\n", encoding="utf-8")
    with pytest.raises(OutOfMemoryError, match=r"metrics\.csv: out of memory while reading"):
        curvediag.load_run(p)


def test_memory_error_while_diagnosing_names_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import curvediag.ruleset.engine as engine

    def boom(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(engine, "evaluate_rules", boom)
    run = make_run({"train/loss": "3.0-0.01x50"}, name="big-run")
    with pytest.raises(OutOfMemoryError, match=r"<big-run>: out of memory while diagnosing"):
        curvediag.diagnose(run)


def test_cli_prints_one_line_on_memory_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import curvediag.ruleset.engine as engine
    from curvediag.cli import main

    def boom(*args: object, **kwargs: object) -> None:
        raise MemoryError

    monkeypatch.setattr(engine, "evaluate_rules", boom)
    p = tmp_path / "metrics.csv"
    p.write_text("step,loss\n" + "".join(f"{i},{3 - i / 100}\n" for i in range(1, 60)))
    assert main(["diagnose", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert "out of memory while diagnosing" in err and "metrics.csv" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1


def test_rule_files_are_parsed_once_per_process(tmp_path: Path) -> None:
    first = curvediag.load_rules()
    again = curvediag.load_rules(overrides={"overfitting.min_rise": 0.2})
    assert all(a is b for a, b in zip(first.rules, again.rules, strict=True))
    assert again.params["overfitting"]["min_rise"] == 0.2
    assert first.params["overfitting"]["min_rise"] != 0.2
    # a changed file is parsed again
    src = Path(first.sources["loss-level-shift"]).read_text(encoding="utf-8")
    mine = tmp_path / "loss-level-shift.yaml"
    mine.write_text(src.replace("id: loss-level-shift", "id: loss-level-shift"), encoding="utf-8")
    one = loader.load_rule_file(mine)[0]
    assert loader.load_rule_file(mine)[0] is one
    mine.write_text(src.replace("confidence: 0.75", "confidence: 0.5"), encoding="utf-8")
    assert loader.load_rule_file(mine)[0].confidence == 0.5


def test_long_curves_are_thinned_for_drawing_only() -> None:
    from curvediag.report.plots import MAX_DRAWN, plot_figures, thin

    n = 50_001
    steps = np.arange(1, n + 1)
    values = np.random.default_rng(0).normal(3.0, 0.1, n)
    values[31_337] = 40.0  # a one-log spike
    values[7] = -5.0
    s, v = thin(steps, values)
    assert v.size <= MAX_DRAWN and np.all(np.diff(s) > 0)
    assert s[0] == 1 and s[-1] == n and 31_338 in s and 8 in s
    assert np.array_equal(v, values[s - 1])
    small = np.arange(100.0)
    assert thin(small, small)[0] is small  # short curves are drawn as they are

    run = make_run(
        {
            "train/loss": {"gen": "decay", "n": n, "noise": 0.05, "seed": 1},
            "train/grad_norm": {"gen": "flat", "n": n, "start": 1.0, "noise": 0.3, "seed": 2},
        },
        every=1,
    )
    d = curvediag.diagnose(run)
    figs = plot_figures(d)
    drawn = [len(line.get_xdata()) for fig in figs.values() for line in fig.axes[0].lines]
    assert max(drawn) <= MAX_DRAWN
    assert d.features["loss.n"] == n  # the diagnosis saw every point
