"""Benchmark: ``curvediag batch`` over 1,000 synthetic runs, against a plain ``diagnose`` loop.

Generates (seeded, with :func:`curvediag.testing.synth_files.make_run_tree`) 1,000 runs of ~1,000 log
entries each, a third in each format: Trainer output folders (``trainer_state.json`` plus two
``checkpoint-N/`` folders with a stand-in ``model.safetensors``), TensorBoard run folders, and
W&B ``scan_history()`` CSV dumps; shapes in turn: healthy, overfit, diverge, nan, spike,
plateau. Then times, each as a fresh process (wall time, start-up and imports included):

* ``curvediag batch DATA --jobs 1 -o table.csv``
* ``curvediag batch DATA --jobs 2 -o table.csv``
* a plain loop in one process: ``rules = load_rules()`` then ``diagnose(path, rules=rules)``
  for every run path (the paths known in advance: no discovery, no table),
* ``curvediag --help`` (start-up),

checks that both batch tables are identical and that each shape got its expected top finding,
and writes ``benchmarks/results/batch.md``. Usage::

    PYTHONPATH=. python benchmarks/batch_speed.py [--runs 1000] [--entries 1000] [--data DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _machine import cpu_name, versions  # noqa: E402  (benchmarks/_machine.py)

from curvediag.testing.synth_files import make_run_tree  # noqa: E402

#: The top finding each synthetic shape must get (the diagnosis is checked, not only timed).
EXPECTED_TOP = {
    "healthy": "healthy-converged",
    "overfit": "overfitting",
    "diverge": "loss-diverging",
    "nan": "loss-nonfinite-after-grad-growth",
    "spike": "loss-spike",
    "plateau": "loss-not-decreasing",
}

LOOP = """
import sys, time
t0 = time.perf_counter()
from curvediag import diagnose, load_rules
rules = load_rules()
paths = [line for line in open(sys.argv[1]).read().splitlines() if line]
verdicts = {}
for p in paths:
    d = diagnose(p, rules=rules)
    verdicts[d.verdict] = verdicts.get(d.verdict, 0) + 1
print(len(paths), verdicts, file=sys.stderr)
"""


BURN = "x = 0\nfor i in range(20_000_000):\n    x += i\n"


def effective_cores() -> float:
    """How many cores two CPU-bound processes actually get side by side (2.0 on an idle
    2-core machine; less when the host or neighbours take CPU time)."""
    cmd = [sys.executable, "-c", BURN]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    single = time.perf_counter() - t
    t = time.perf_counter()
    procs = [subprocess.Popen(cmd) for _ in range(2)]
    for p in procs:
        p.wait()
    pair = time.perf_counter() - t
    return 2 * single / pair


def curvediag_cmd() -> list[str]:
    script = Path(sys.executable).parent / "curvediag"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "curvediag.cli"]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="generate into (or reuse) this folder instead of a temp one")
    ap.add_argument("--repeat", type=int, default=3, help="time each variant this many times")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "batch.md"))
    args = ap.parse_args()

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    tmp = None
    if args.data:
        data = Path(args.data)
    else:
        tmp = tempfile.mkdtemp(prefix="curvediag-batchbench-")
        data = Path(tmp) / "runs"
    marker = data / ".generated"
    spec = f"{args.runs} {args.entries} {args.seed}"
    t = time.perf_counter()
    if marker.exists() and marker.read_text() == spec:
        from curvediag.testing.synth_files import FILE_FORMATS, SHAPES

        made = []
        for i in range(args.runs):
            fmt = FILE_FORMATS[i % 3]
            shape = SHAPES[(i // 3) % len(SHAPES)]
            name = f"run-{i:05d}-{shape}" + (".csv" if fmt == "wandb-history" else "")
            made.append((data / fmt / f"g{i // 100:03d}" / name, fmt, shape))
        gen_s = 0.0
    else:
        if data.exists():
            shutil.rmtree(data)
        made = make_run_tree(data, args.runs, entries=args.entries, seed=args.seed)
        marker.write_text(spec)
        gen_s = time.perf_counter() - t
    size_mb = sum(f.stat().st_size for f in data.rglob("*") if f.is_file()) / 2**20
    shape_of = {str(p): shape for p, _, shape in made}
    listing = data.parent / "paths.txt"
    listing.write_text("\n".join(str(p) for p, _, _ in made) + "\n")
    print(f"{len(made)} runs, {size_mb:.0f} MB in {data} (generated in {gen_s:.1f} s)")

    load_before = os.getloadavg()
    cores_before = effective_cores()
    cmd = curvediag_cmd()
    results: dict[str, list[float]] = {}
    tables: dict[str, Path] = {}
    for _ in range(args.repeat):
        for jobs in (1, 2):
            out = data.parent / f"table-j{jobs}.csv"
            label = f"`curvediag batch --jobs {jobs}`"
            results.setdefault(label, []).append(
                timed([*cmd, "batch", str(data), "--jobs", str(jobs), "-q", "-o", str(out)], env)
            )
            tables[label] = out
            print(label, f"{results[label][-1]:.1f} s")
        label = "plain loop: `diagnose(path, rules=rules)`"
        results.setdefault(label, []).append(timed([sys.executable, "-c", LOOP, str(listing)], env))
        print(label, f"{results[label][-1]:.1f} s")
    help_times = [timed([*cmd, "--help"], env) for _ in range(7)]
    load_after = os.getloadavg()
    cores_after = effective_cores()

    texts = {k: v.read_text() for k, v in tables.items()}
    identical = len(set(texts.values())) == 1
    rows = list(csv.DictReader(next(iter(texts.values())).splitlines()))
    errors = sum(r["verdict"] == "error" for r in rows)
    verdicts = Counter(r["verdict"] for r in rows)
    hits = Counter()
    totals = Counter()
    for r in rows:
        shape = shape_of.get(r["path"])
        if shape:
            totals[shape] += 1
            hits[shape] += r["top_finding"] == EXPECTED_TOP[shape]

    loop_s = min(results["plain loop: `diagnose(path, rules=rules)`"])
    lines = [
        "# Batch analysis speed",
        "",
        f"Generated by `benchmarks/batch_speed.py`: {len(made):,} synthetic runs of "
        f"~{args.entries:,} log entries each (seed {args.seed}, {size_mb:.0f} MB), a third each "
        "as Trainer output folders (`trainer_state.json` + two `checkpoint-N/` with a stand-in "
        "`model.safetensors`), TensorBoard run folders (one scalar per event) and W&B "
        "`scan_history()` CSV dumps; shapes in turn: healthy, overfit, diverge, nan, spike, "
        "plateau. Each variant runs as a fresh process; times are wall clock including "
        "start-up, imports, discovery (batch) and writing the CSV table (batch). The plain loop "
        "is given the list of run paths (no discovery, no table) and loads the rules once.",
        "",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores, Linux {platform.release()}; load average "
        f"{load_before[0]:.2f} at start and {load_after[0]:.2f} at the end; two CPU-bound "
        f"processes side by side got {cores_before:.2f} cores' worth of CPU at start and "
        f"{cores_after:.2f} at the end (the machine is shared: absolute times are noisy, and "
        "`--jobs 2` can only beat one job by that factor).",
        "Versions: "
        + ", ".join(
            f"{k} {v}" for k, v in versions(("numpy", "pandas", "pydantic", "tensorboard")).items()
        )
        + f", python {platform.python_version()}.",
        "",
        f"Best and median wall time of {args.repeat} runs of each variant, interleaved; runs/s "
        "and the ratio use the best (the run least disturbed by other processes).",
        "",
        "| variant | runs | best s | median s | runs/s | vs plain loop |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, times in results.items():
        best, med = min(times), statistics.median(times)
        lines.append(
            f"| {label} | {len(made):,} | {best:.1f} | {med:.1f} | {len(made) / best:.1f} "
            f"| {loop_s / best:.2f}x |"
        )
    lines += [
        "",
        f"`curvediag --help` start-up: median {statistics.median(help_times) * 1000:.0f} ms "
        f"over {len(help_times)} runs (target: under 500 ms).",
        "",
        f"Tables of `--jobs 1` and `--jobs 2` identical: {'yes' if identical else 'NO'}; "
        f"{len(rows):,} rows, {errors} error rows; verdicts: "
        + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
        + ".",
        "Expected top finding per shape: "
        + ", ".join(
            f"{shape} {hits[shape]}/{totals[shape]} ({EXPECTED_TOP[shape]})" for shape in totals
        )
        + ".",
        "",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
