"""Benchmark: diagnosing one run of 1k to 10M logged points, stage by stage.

For each size, a seeded synthetic run (:func:`curvediag.testing.synth_files.synthetic_run`, shape
``healthy``: a noisy decaying train loss, grad norm, warmup + cosine learning rate, epoch, and
an evaluation every ~10 train logs) of that many log entries is written as a TensorBoard run
folder, the way the Trainer's TensorBoard callback writes it (one scalar per event:
``train/loss``, ``train/grad_norm``, ``train/learning_rate``, ``train/epoch``, ``eval/loss``;
encoded in bulk with numpy so that 10M entries take seconds to write), and for sizes up to 1M
also as a ``trainer_state.json`` (indent 2, sorted keys, as the Trainer writes it). Then, each
in a fresh process:

* the stages, timed one after the other with the peak resident memory of each (Linux
  ``VmHWM``, reset before each stage through ``/proc/self/clear_refs``): **load**
  (``load_run``), **features** (every registered feature), **rules** (the built-in catalog,
  parsed once beforehand), **report** (``render_report``: markdown and PNG plots);
* ``curvediag diagnose PATH --format json`` end to end (wall time and peak memory of the whole
  process: start-up, imports, reading, features, rules and output).

The growth exponent of each stage is the slope of log(time) against log(points) over the
three largest sizes (where the per-point work dominates fixed costs such as imports). Writes
``benchmarks/results/diagnose_scale.md``. Usage::

    PYTHONPATH=. python benchmarks/diagnose_scale.py [--sizes 1000,...,10000000] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _machine import cpu_name, versions  # noqa: E402  (benchmarks/_machine.py)

from curvediag.testing.synth_files import SynthRun, synthetic_run, write_trainer_state  # noqa: E402

SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
#: trainer_state.json is written and measured up to this size (10M entries would be a 1.6 GB
#: JSON file; TensorBoard is the format long runs are read from).
MAX_JSON = 1_000_000
STAGES = ("load", "features", "rules", "report")
TARGET_SECONDS, TARGET_MB, TARGET_EXPONENT = 20.0, 1536.0, 1.2

# -- writing TensorBoard event files in bulk ---------------------------------------------------


def _varint_len(x: np.ndarray) -> np.ndarray:
    n = np.ones(x.shape, dtype=np.int64)
    for k in range(1, 10):
        n += x >= (1 << (7 * k))
    return n


def _encode(
    tag_ids: np.ndarray, tags: list[bytes], steps: np.ndarray, values: np.ndarray, walls: np.ndarray
) -> bytes:
    """Framed ``Event{wall_time, step, summary{value{tag, simple_value}}}`` records, in order,
    byte for byte what protobuf serializes (checked against ``scalar_event`` in ``main``)."""
    from curvediag.ingest._tfevents import _VCRC, _header_crc_table, _mask_np

    tag_len = np.array([len(t) for t in tags], dtype=np.int64)[tag_ids]
    vlen = _varint_len(steps)
    len_v = 2 + tag_len + 5  # Value: 0a len tag, 15 float32
    len_s = 2 + len_v  # Summary: 0a len Value
    data_len = 9 + 1 + vlen + 2 + len_s  # 09 double, 10 varint, 2a len Summary
    rec_len = 8 + 4 + data_len + 4
    starts = np.concatenate([[0], np.cumsum(rec_len)[:-1]])
    buf = np.zeros(int(rec_len.sum()), dtype=np.uint8)
    buf[starts[:, None] + np.arange(8)] = data_len.astype("<u8").view(np.uint8).reshape(-1, 8)
    buf[starts[:, None] + 8 + np.arange(4)] = (
        _header_crc_table()[data_len].astype("<u4").view(np.uint8).reshape(-1, 4)
    )
    d = starts + 12
    buf[d] = 0x09
    buf[d[:, None] + 1 + np.arange(8)] = walls.astype("<f8").view(np.uint8).reshape(-1, 8)
    buf[d + 9] = 0x10
    rest = steps.astype(np.int64)
    for k in range(int(vlen.max())):
        has = vlen > k
        more = vlen > k + 1
        byte = (rest & 0x7F) | np.where(more, 0x80, 0)
        buf[(d + 10 + k)[has]] = byte[has].astype(np.uint8)
        rest = rest >> 7
    s = d + 10 + vlen
    buf[s] = 0x2A
    buf[s + 1] = len_s.astype(np.uint8)
    buf[s + 2] = 0x0A
    buf[s + 3] = len_v.astype(np.uint8)
    buf[s + 4] = 0x0A
    buf[s + 5] = tag_len.astype(np.uint8)
    for k, tag in enumerate(tags):
        rows = np.flatnonzero(tag_ids == k)
        buf[(s[rows] + 6)[:, None] + np.arange(len(tag))] = np.frombuffer(tag, dtype=np.uint8)
    f = s + 6 + tag_len
    buf[f] = 0x15
    buf[(f + 1)[:, None] + np.arange(4)] = values.astype("<f4").view(np.uint8).reshape(-1, 4)
    crcs = _mask_np(_VCRC.many(buf, d, data_len))
    buf[(d + data_len)[:, None] + np.arange(4)] = crcs.astype("<u4").view(np.uint8).reshape(-1, 4)
    return buf.tobytes()


def write_events(run: SynthRun, folder: Path, chunk: int = 1_000_000) -> Path:
    """The run as one TensorBoard event file, events in logging order."""
    from curvediag.ingest._tfevents import write_event_file

    tags = [b"train/loss", b"train/grad_norm", b"train/learning_rate", b"train/epoch", b"eval/loss"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "events.out.tfevents.1700000000.synthhost.1.0"
    from tensorboard.compat.proto.event_pb2 import Event

    write_event_file(path, [Event(wall_time=1.7e9, file_version="brain.Event:2")])
    n, m = run.train_steps.size, run.eval_steps.size
    epoch = np.round(3.0 * run.train_steps / max(1, run.max_steps), 4)
    # logging order: a step's four train scalars, then its evaluation (if any)
    key = np.concatenate([np.repeat(run.train_steps * 2, 4), run.eval_steps * 2 + 1])
    tag_ids = np.concatenate([np.tile(np.arange(4), n), np.full(m, 4)])
    values = np.concatenate(
        [
            np.stack([run.train_loss, run.grad_norm, run.learning_rate, epoch], 1).ravel(),
            run.eval_loss,
        ]
    )
    order = np.argsort(key, kind="stable")
    steps = key[order] // 2
    with path.open("ab") as fh:
        for a in range(0, order.size, chunk):
            idx = order[a : a + chunk]
            st = steps[a : a + chunk]
            fh.write(_encode(tag_ids[idx], tags, st, values[idx], 1.7e9 + st * 0.05))
    return path


# -- measuring (child processes) -------------------------------------------------------------

CHILD = r"""
import json, sys, tempfile, time, warnings
from pathlib import Path

def reset():
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False

def peak_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")

warnings.simplefilter("ignore")
out = {"stages": {}}
t = time.perf_counter()
import curvediag
from curvediag.features import FeatureSet, FeatureSettings
from curvediag.ruleset.engine import run_rules
from curvediag.report import render_report
rules = curvediag.load_rules()
out["setup_s"] = time.perf_counter() - t
out["resettable"] = reset()

def stage(name, fn):
    reset()
    t = time.perf_counter()
    value = fn()
    out["stages"][name] = {"s": time.perf_counter() - t, "peak_mb": peak_mb()}
    return value

run = stage("load", lambda: curvediag.load_run(sys.argv[1]))
out["points"] = {k: len(s) for k, s in run.metrics.items()}
settings = FeatureSettings()
settings.update(rules.feature_settings)
fs = FeatureSet(run, settings)
stage("features", fs.compute_all)
d = stage("rules", lambda: run_rules(run, rules, fs))
out["verdict"] = d.verdict
out["findings"] = d.finding_ids
out["cp.count"] = d.features.get("cp.count")
with tempfile.TemporaryDirectory() as tmp:
    stage("report", lambda: render_report(d, tmp))
print(json.dumps(out))
"""


def measure_stages(path: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


CLI = r"""
import atexit, sys
from pathlib import Path

def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            sys.stderr.write(f"\nVMHWM_KB {line.split()[1]}\n")

atexit.register(hwm)
from curvediag.cli import main
sys.exit(main(sys.argv[1:]))
"""


def measure_cli(path: Path, env: dict[str, str]) -> dict[str, Any]:
    """``curvediag diagnose PATH --format json`` as a fresh process: wall s and peak RSS MB.

    The peak is the process's own ``VmHWM`` read at exit (``ru_maxrss`` of a child would also
    count the memory of this process at fork time).
    """
    cmd = [sys.executable, "-c", CLI, "diagnose", str(path), "--format", "json"]
    t = time.perf_counter()
    proc = subprocess.run(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wall = time.perf_counter() - t
    lines = proc.stderr.strip().splitlines()
    peak = next((int(x.split()[1]) / 1024 for x in lines if x.startswith("VMHWM_KB")), math.nan)
    out: dict[str, Any] = {"s": wall, "peak_mb": peak, "exit": proc.returncode}
    if proc.returncode not in (0, 1):
        errs = [x for x in lines if x and not x.startswith("VMHWM_KB")]
        out["error"] = (errs or [f"exit {proc.returncode}"])[-1]
    return out


def exponent(sizes: list[int], times: list[float]) -> float | None:
    pts = [(math.log(n), math.log(t)) for n, t in zip(sizes, times, strict=True) if t > 0]
    if len(pts) < 2:
        return None
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


# -- main ------------------------------------------------------------------------------------


def _check_encoder() -> None:
    """The bulk encoder writes what protobuf writes."""
    from curvediag.ingest._tfevents import _frame, scalar_event

    steps = np.array([1, 127, 128, 16_384, 9_999_999])
    vals = np.array([2.5, 0.1, 3.0, 1e-4, 7.0])
    walls = 1.7e9 + steps * 0.05
    got = _encode(np.array([0, 1, 0, 1, 0]), [b"train/loss", b"eval/loss"], steps, vals, walls)
    want = b"".join(
        _frame(scalar_event(t, float(v), int(s), float(w)).SerializeToString())
        for t, v, s, w in zip(
            ["train/loss", "eval/loss", "train/loss", "eval/loss", "train/loss"],
            vals,
            steps,
            walls,
            strict=True,
        )
    )
    if got != want:
        raise SystemExit("the bulk event encoder does not match protobuf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    ap.add_argument("--data", help="keep the generated runs here (default: a temp folder)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "diagnose_scale.md"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    _check_encoder()
    tmp = None if args.data else tempfile.mkdtemp(prefix="curvediag-scale-")
    data = Path(args.data or tmp or ".")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    for n in sizes:
        run = synthetic_run("healthy", entries=n, seed=args.seed, name=f"scale-{n}")
        t = time.perf_counter()
        tb = write_events(run, data / f"tb-{n}" / "runs" / "scale")
        tb_write = time.perf_counter() - t
        targets = [("tensorboard", tb.parent, tb.stat().st_size)]
        if n <= MAX_JSON:
            js = write_trainer_state(run, data / f"hf-{n}") / "trainer_state.json"
            targets.append(("trainer_state.json", js, js.stat().st_size))
        del run
        for fmt, path, size in targets:
            print(f"{n:>10,} {fmt:<18} {size / 1e6:8.1f} MB", end=" ", flush=True)
            st = measure_stages(path, env)
            cli = measure_cli(path, env)
            row = {"n": n, "format": fmt, "mb": size / 1e6, "stages": st, "cli": cli}
            row["write_s"] = tb_write if fmt == "tensorboard" else None
            rows.append(row)
            print(
                " ".join(
                    f"{k} {v['s']:.2f}s/{v['peak_mb']:.0f}MB"
                    for k, v in st.get("stages", {}).items()
                ),
                f"| cli {cli['s']:.2f}s {cli['peak_mb']:.0f}MB",
                st.get("error", ""),
                cli.get("error", ""),
                flush=True,
            )
    load_after = os.getloadavg()
    write_results(rows, Path(args.out), load_before, load_after, args.seed)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


def write_results(
    rows: list[dict[str, Any]],
    out: Path,
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
    seed: int,
) -> None:
    lines = [
        "# Diagnosing one long run: time and memory by number of logged points",
        "",
        "Generated by `benchmarks/diagnose_scale.py`: one seeded synthetic run per size "
        f"(`synthetic_run('healthy', entries=N, seed={seed})`: noisy decaying train loss, grad "
        "norm, warmup + cosine learning rate and epoch every 10 steps, an evaluation every ~10 "
        "train logs), written as a TensorBoard run folder (one scalar per event, as the "
        "Trainer's callback writes it) and, up to 1M entries, as a `trainer_state.json`. "
        "*Points* are log entries (train logs + evaluations), as in `log_history`. Each "
        "format and size runs in a fresh process: the stages one after the other (rules parsed "
        "once before), then `curvediag diagnose PATH --format json` end to end as another "
        "process (start-up and imports included). Peak memory is the resident set's high-water "
        "mark (Linux `VmHWM`, reset before each stage), so a stage's peak includes the run "
        "already in memory.",
        "",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores, Linux {platform.release()}; load average "
        f"{load_before[0]:.2f} at start and {load_after[0]:.2f} at the end (a shared machine: "
        "seconds are noisy, about +-15%).",
        "Versions: "
        + ", ".join(
            f"{k} {v}"
            for k, v in versions(
                ("numpy", "scipy", "ruptures", "matplotlib", "pydantic", "tensorboard")
            ).items()
        )
        + f", python {platform.python_version()}.",
        "",
        "| points | format | file MB | load s | features s | rules s | report s | stages peak MB "
        "| `diagnose` end to end s | end to end peak MB | verdict | change points |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        st, cli = r["stages"], r["cli"]
        if "error" in st:
            cells = ["error: " + st["error"]] + [""] * 4
        else:
            s = st["stages"]
            cells = [f"{s[k]['s']:.2f}" for k in STAGES]
            cells.append(f"{max(s[k]['peak_mb'] for k in STAGES):,.0f}")
        e2e = (
            [f"error: {cli['error']}", ""]
            if "error" in cli
            else [f"{cli['s']:.2f}", f"{cli['peak_mb']:,.0f}"]
        )
        lines.append(
            f"| {r['n']:,} | {r['format']} | {r['mb']:,.1f} | "
            + " | ".join(cells)
            + " | "
            + " | ".join(e2e)
            + f" | {st.get('verdict', '')} | {st.get('cp.count', '')} |"
        )
    lines += [
        "",
        "Growth exponent (slope of log time against log points over the three largest "
        "sizes; 1.0 = linear):",
        "",
        "| format | " + " | ".join(STAGES) + " | `diagnose` end to end |",
        "|---|" + "---:|" * (len(STAGES) + 1),
    ]
    verdicts: list[str] = []
    for fmt in dict.fromkeys(r["format"] for r in rows):
        mine = [r for r in rows if r["format"] == fmt and "error" not in r["stages"]][-3:]
        ns = [r["n"] for r in mine]
        cells = []
        for k in STAGES:
            e = exponent(ns, [r["stages"]["stages"][k]["s"] for r in mine])
            cells.append("n/a" if e is None else f"{e:.2f}")
        ok = [r for r in mine if "error" not in r["cli"]]
        e = exponent([r["n"] for r in ok], [r["cli"]["s"] for r in ok])
        cells.append("n/a" if e is None else f"{e:.2f}")
        lines.append(f"| {fmt} | " + " | ".join(cells) + " |")
        exps = [float(c) for c in cells if c != "n/a"]
        if exps:
            verdicts.append(
                f"{fmt}: largest exponent {max(exps):.2f} "
                f"({'meets' if max(exps) <= TARGET_EXPONENT else 'MISSES'} <= {TARGET_EXPONENT})"
            )
    one_m = [r for r in rows if r["n"] == 1_000_000 and "error" not in r["cli"]]
    for r in one_m:
        ok = r["cli"]["s"] < TARGET_SECONDS and r["cli"]["peak_mb"] < TARGET_MB
        verdicts.append(
            f"1M points from {r['format']}: {r['cli']['s']:.1f} s and "
            f"{r['cli']['peak_mb']:,.0f} MB end to end "
            f"({'meets' if ok else 'MISSES'} < {TARGET_SECONDS:.0f} s and < 1.5 GB)"
        )
    for r in rows:
        if r["n"] >= 10_000_000:
            done = "error" not in r["stages"] and "error" not in r["cli"]
            verdicts.append(
                f"10M points from {r['format']}: "
                + (
                    "completes"
                    if done
                    else "FAILS: " + str(r["stages"].get("error") or r["cli"].get("error"))
                )
            )
    lines += ["", "Targets: " + "; ".join(verdicts) + ".", ""]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
