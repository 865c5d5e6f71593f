"""Benchmark of a verdict per benchmark (contract §15), part of `make bench`: deciding a suite of
1,000 benchmarks x 40 pairs in one round.

Writes one stored attempt (a campaign frozen as `ab --measure` freezes it: decision paired,
interval student_t, decide regions; 40 repetitions, each run's breakdown 1,000 benchmarks in the
step `all`, the metric their sum, one benchmark of a hundred 10% slower on the candidate),
ingests it with the real command, then measures in one run, each command in a fresh subprocess:

- `explain-pipeline assess ID` (its outputs removed before each run, so every run computes):
  wall and CPU seconds, peak RSS, and its time beyond start-up (the median of `python -c 'import
  click, numpy, polars'` taken off);
- the naive alternative `benchmarks/naive_family.py`: a plain Python loop over the benchmarks of
  the attempt's files (scipy's t quantile and NumPy per benchmark), its loop timed in-process;
- in this process, start-up excluded: the family kernel (`family_intervals`, one matrix pass)
  against the same per-benchmark loop over the same log-ratio matrix.

Results are asserted equal: every member's estimate, low and high within 1e-12 relative of the
loop's, and every verdict the same (else the benchmark fails).

    .venv/bin/python benchmarks/bench_family.py                  # what make bench runs
    .venv/bin/python benchmarks/bench_family.py --benchmarks 5000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy.special import stdtrit

from pipeline.assessment.family import family_intervals
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt, write_campaign

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_assess import measure, median_of  # noqa: E402 - beside this file

HERE = Path(__file__).resolve().parent
EXE = str(Path(sys.executable).with_name("explain-pipeline"))
POLICY = {"decision": "paired", "interval": "student_t", "decide": "regions"}
"""What `ab --measure` freezes (pipeline.record.options.ab_policy)."""


def suite_runs(benchmarks: int, pairs: int, seed: int) -> list[dict[str, object]]:
    """Measurement lines of a round: per repetition a shared load factor, per benchmark its own
    noise (spread 0.05), every hundredth benchmark 10% slower on the candidate."""
    rng = np.random.default_rng(seed)
    base = rng.lognormal(-7, 1, size=benchmarks)  # median per-iteration seconds, ~1 ms
    slower = np.where(np.arange(benchmarks) % 100 == 0, 1.10, 1.0)
    names = [f"test_suite.py::test_{k:04d}" for k in range(benchmarks)]
    runs = []
    for rep in range(pairs):
        load = rng.lognormal(0, 0.03)
        for side, factor in (("baseline", 1.0), ("candidate", slower)):
            values = base * load * factor * rng.lognormal(0, 0.05, size=benchmarks)
            runs.append(
                {
                    "side": side,
                    "repetition": rep,
                    "status": "ok",
                    "metric": float(values.sum()),
                    "breakdown": {"all": dict(zip(names, values.tolist(), strict=True))},
                }
            )
    return runs


def write(root: Path, benchmarks: int, pairs: int, seed: int) -> Path:
    folder = write_campaign(
        root,
        "suite",
        created_at="2026-12-01T10:00:00Z",
        metric={"name": "seconds", "better": "lower"},
        policy=POLICY,
    )
    attempt = {
        "attempt_id": "r001",
        "round": 1,
        "candidate": "head",
        "baseline": "base",
        "status": "completed",
        "started_at": "2026-12-01T10:01:00Z",
    }
    return write_attempt(folder, attempt, suite_runs(benchmarks, pairs, seed))


def drop_outputs(store: Path) -> None:
    for name in ("assessments", "comparisons", "outcomes", "benchmarks"):
        shutil.rmtree(store / name / "campaign_id=suite", ignore_errors=True)


def check_equal(store: Path, naive_json: Path) -> tuple[int, float]:
    """The stored members against the loop's: count and largest relative difference."""
    naive = json.loads(naive_json.read_text())
    naive.pop("__seconds__")
    rows = Store(store).read("benchmarks", ["suite"])
    if sorted(rows["name"]) != sorted(naive):
        raise SystemExit("the pipeline and the loop disagree on the members")
    got = rows.select("estimate", "low", "high").to_numpy()
    ref = np.array([naive[name][:3] for name in rows["name"]])
    worst = float(np.max(np.abs(got - ref) / np.abs(ref)))
    if not worst <= 1e-12:
        raise SystemExit(f"intervals differ from the loop's by {worst:.1e} relative (> 1e-12)")
    verdicts = [naive[name][3] for name in rows["name"]]
    if verdicts != rows["verdict"].to_list():
        raise SystemExit("verdicts differ from the loop's")
    return rows.height, worst


def loop_intervals(x: np.ndarray, confidence: float) -> np.ndarray:
    """The plain loop: one benchmark (column of x) at a time, mean, sd and t quantile."""
    n, m = x.shape
    out = np.empty((m, 3))
    for j in range(m):
        column = x[:, j]
        mean, sd = column.mean(), column.std(ddof=1)
        half = stdtrit(n - 1, 1 - (1 - confidence) / (2 * m)) * sd / np.sqrt(n)
        out[j] = np.exp(mean), np.exp(mean - half), np.exp(mean + half)
    return out


def kernels(benchmarks: int, pairs: int, runs: int) -> tuple[float, float, float]:
    """Median seconds of family_intervals and of the loop on one (pairs, benchmarks + 1)
    matrix, and their largest relative difference."""
    x = np.random.default_rng(1).normal(0, 0.05, size=(pairs, benchmarks + 1))
    fast, slow = [], []
    for _ in range(runs):
        clock = time.perf_counter()
        got = family_intervals(x, x.shape[1], 0.95)
        fast.append(time.perf_counter() - clock)
        clock = time.perf_counter()
        ref = loop_intervals(x, 0.95)
        slow.append(time.perf_counter() - clock)
    mine = np.column_stack([got.estimate, got.low, got.high])
    worst = float(np.max(np.abs(mine - ref) / ref))
    if not worst <= 1e-12:
        raise SystemExit(f"the kernel differs from the loop by {worst:.1e} relative")
    return statistics.median(fast), statistics.median(slow), worst


def run(args: argparse.Namespace, work: Path) -> None:
    attempt = write(work / "attempts", args.benchmarks, args.pairs, args.seed)
    store = work / "store"
    measure([EXE, "ingest", str(work / "attempts"), "--store", str(store)])
    command = [EXE, "assess", "suite", "--store", str(store)]
    assess_s, assess_cpu = median_of(args.runs, command, lambda: drop_outputs(store))
    drop_outputs(store)
    _, _, assess_rss = measure(command)
    floor = [sys.executable, "-c", "import click, numpy, polars, os; os._exit(0)"]
    floor_s, floor_cpu = median_of(args.runs, floor)
    out = work / "naive.json"
    naive = [sys.executable, str(HERE / "naive_family.py"), str(out), str(attempt)]
    loops, walls, rss = [], [], 0.0
    for _ in range(args.runs):
        wall, _, rss = measure(naive)
        walls.append(wall)
        loops.append(json.loads(out.read_text())["__seconds__"])
    members, worst = check_equal(store, out)
    kernel_s, kernel_loop_s, kernel_worst = kernels(args.benchmarks, args.pairs, args.runs)
    regressed = Store(store).read("benchmarks", ["suite"]).filter(pl.col("verdict") == "regressed")
    beyond = assess_s - floor_s
    loop_s = statistics.median(loops)
    print("| path | explain-pipeline | alternative, same run | ratio | target |")
    print("|---|---|---|---|---|")
    ratio = f"{loop_s / beyond:.1f}x the loop's speed" if beyond > 0 else "—"
    print(
        f"| `assess ID`: one round of {args.benchmarks:,} benchmarks x {args.pairs} pairs "
        f"({members:,} members with the metric; median of {args.runs}) "
        f"| {assess_s:.2f} s [{assess_cpu:.2f}], of which {beyond:.2f} s "
        f"[{assess_cpu - floor_cpu:.2f}] beyond start-up (start-up floor {floor_s:.2f} s "
        f"[{floor_cpu:.2f}]); peak RSS {assess_rss:.0f} MiB "
        f"| per-benchmark Python loop (`naive_family.py`): {loop_s:.2f} s in its loop, "
        f"{statistics.median(walls):.2f} s with start-up, peak RSS {rss:.0f} MiB "
        f"| {ratio} | < 1 s beyond start-up |"
    )
    print(
        f"| of which the family kernel alone: `family_intervals` of a {args.pairs} x "
        f"{args.benchmarks + 1:,} matrix, in-process | {kernel_s * 1000:.1f} ms "
        f"| the same loop over the same matrix: {kernel_loop_s * 1000:.1f} ms "
        f"| {kernel_loop_s / kernel_s:.0f}x faster | — |"
    )
    print()
    print(
        f"Results equal the loop's: {members:,} members, max relative difference "
        f"{max(worst, kernel_worst):.1e} "
        f"(asserted <= 1e-12), every verdict the same ({regressed.height} regressed of the "
        f"{args.benchmarks // 100} benchmarks made 10% slower)."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--benchmarks", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5, help="runs of each median")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the files in this folder")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-family-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(args, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
