"""Benchmark of the everyday path (not part of the test suite): `make bench`.

Generates stored-attempt folders (contract §7's model: 10 repetitions x 4 steps x 4 regions + 2
counters, every attempt declaring attention decrease, dram_bytes decrease, sampling unchanged:
11 quantities per attempt, 10 pairs each), ingests them with the real command, and measures
side by side, in one run, each command in a fresh subprocess (its own start-up, its own peak
RSS from wait4):

- `explain-pipeline --help` (median of repeated runs; beside it, `python -c pass`);
- `explain-pipeline assess ID` of one 12-attempt campaign of that store (its outputs removed
  before each run, so every run computes) against the naive script
  `benchmarks/naive_assess.py` on that campaign's folder (interpreter start included);
- `explain-pipeline assess --all` of every attempt against the same naive script over every
  folder (one thread), both results checked equal (max relative difference <= 1e-12, else the
  benchmark fails);
- the bootstrap kernel alone (matrix products and exact order statistics of as many
  quantities, in one process, start-up excluded) against 25x's budget: what remains of
  `assess --all` whatever the store's format;
- ingest, and ingest + assess end to end against the same naive script.

With --with-ingest (what `make bench` runs), also bench_ingest.py's two measurements: ingest of
3,000 attempts in 10 campaigns against the per-line validator, and `import kineto` of a 58 MB
trace against the whole-file reader.

Prints one table: the figure, the comparison, the ratio, the threads used by each side.

    .venv/bin/python benchmarks/bench_assess.py --with-ingest         # what make bench runs
    .venv/bin/python benchmarks/bench_assess.py                       # 3,000 attempts
    .venv/bin/python benchmarks/bench_assess.py --large 100000        # + assess peak RSS at 100,000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.contract.policy import POLICY_DEFAULTS, canonical_policy, policy_sha256
from pipeline.contract.schemas import table
from pipeline.store.tables import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ingest import same_stores  # noqa: E402 - beside this file

STEPS = ("decode-0", "decode-1", "decode-2", "decode-3")
REGIONS = ("attention", "mlp", "sampling", "comm")
SHARES = np.array([0.10, 0.50, 0.25, 0.15])
STEP_SECONDS = 0.010
EXPECTATIONS = [
    ("region", "attention", "decrease"),
    ("counter", "dram_bytes", "decrease"),
    ("region", "sampling", "unchanged"),
]
T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)


# -- synthetic store -------------------------------------------------------------------------------
def _codes(names: tuple[str, ...] | list[str], codes: np.ndarray) -> pl.Series:
    return pl.Series(list(names), dtype=pl.String).gather(codes)


def campaign_tables(cid: str, n_attempts: int, reps: int, rng: np.random.Generator) -> dict:
    """Every input table of one campaign, vectorized over its attempts."""
    a_ids = [f"r{i:06d}" for i in range(n_attempts)]
    gain = rng.choice([1.0, 0.88, 0.95], size=n_attempts)  # candidate attention and DRAM factor
    shape = (n_attempts, reps, 2, len(STEPS), len(REGIONS))
    noise = (
        rng.lognormal(0, 0.03, (n_attempts, reps, 1, 1, 1))
        * rng.lognormal(0, 0.03, (n_attempts, reps, 2, 1, 1))
        * rng.lognormal(0, 0.01, shape)
    )
    effect = np.ones(shape)
    effect[:, :, 1, :, 0] = gain[:, None, None]
    seconds = STEP_SECONDS * SHARES * noise * effect
    idx = np.indices(shape).reshape(len(shape), -1)
    run_idx = np.indices(shape[:3]).reshape(3, -1)
    sides = ("baseline", "candidate")
    key = {"campaign_id": cid}
    breakdown = pl.DataFrame(
        {
            **key,
            "attempt_id": _codes(a_ids, idx[0]),
            "side": _codes(sides, idx[2]),
            "repetition": idx[1],
            "step": _codes(STEPS, idx[3]),
            "region": _codes(REGIONS, idx[4]),
            "seconds": seconds.ravel(),
        }
    )
    runs = {
        **key,
        "attempt_id": _codes(a_ids, run_idx[0]),
        "side": _codes(sides, run_idx[2]),
        "repetition": run_idx[1],
    }
    samples = pl.DataFrame(
        {
            **runs,
            "status": "ok",
            "metric": seconds.sum(axis=(3, 4)).ravel(),
            "line": np.arange(run_idx.shape[1]) % (2 * reps) + 1,
        }
    )
    dram = 1e9 * len(STEPS) * (1 + rng.normal(0, 0.001, shape[:3]))
    dram[:, :, 1] *= gain[:, None]
    counters = pl.concat(
        [
            pl.DataFrame(
                {
                    **runs,
                    "counter": "kernel_launches",
                    "value": np.full(run_idx.shape[1], 1000.0 * len(STEPS)),
                }
            ),
            pl.DataFrame({**runs, "counter": "dram_bytes", "value": dram.ravel()}),
        ]
    )
    e_idx = np.indices((n_attempts, len(EXPECTATIONS))).reshape(2, -1)
    expectations = pl.DataFrame(
        {
            **key,
            "attempt_id": _codes(a_ids, e_idx[0]),
            "position": e_idx[1],
            "target": _codes([e[0] for e in EXPECTATIONS], e_idx[1]),
            "name": _codes([e[1] for e in EXPECTATIONS], e_idx[1]),
            "expect": _codes([e[2] for e in EXPECTATIONS], e_idx[1]),
        }
    )
    digests = [hashlib.sha256(f"{cid}/{a}".encode()).hexdigest() for a in a_ids]
    attempts = pl.DataFrame(
        {
            **key,
            "attempt_id": a_ids,
            "round": np.arange(1, n_attempts + 1),
            "candidate": [f"cand-{g:.2f}" for g in gain],
            "baseline": "main",
            "status": "completed",
            "declared_at": T0,
            "started_at": T0,
            "mechanism_sha256": "m",
            "mechanism_sha256_actual": "m",
            "mechanism_sha256_first_seen": "m",
            "hypothesis": "h",
            "n_lines": 2 * reps,
            "inputs_sha256": digests,
            "source_dir": [f"attempts/{cid}/{a}" for a in a_ids],
        }
    )
    policy = dict(POLICY_DEFAULTS)
    campaigns = pl.DataFrame(
        {
            **key,
            "kind": "project",
            "created_at": T0,
            "metric_name": "e2e_seconds",
            "metric_better": "lower",
            **{k: [v] for k, v in policy.items()},
            "policy_json": canonical_policy(policy).decode(),
            "policy_sha256": policy_sha256(policy),
            "policy_sha256_actual": policy_sha256(policy),
            "source_sha256": digests[0],
        }
    )
    frames = {
        "campaigns": campaigns,
        "attempts": attempts,
        "samples": samples,
        "breakdown": breakdown,
        "counters": counters,
        "expectations": expectations,
    }
    return {
        k: v.cast(
            {c: t for c, t in table(k).polars_schema().items() if c in v.columns}, strict=False
        )  # columns added to the tables later are written as nulls
        for k, v in frames.items()
    }


def generate(path: Path, attempts: int, per_campaign: int, reps: int, seed: int) -> int:
    """Write the synthetic store; returns the number of campaigns."""
    rng = np.random.default_rng(seed)
    store = Store(path)
    sizes = [per_campaign] * (attempts // per_campaign)
    if attempts % per_campaign:
        sizes.append(attempts % per_campaign)
    for start in range(0, len(sizes), 20):  # a few campaigns per transaction: bounded memory
        with store.transaction() as txn:
            for k in range(start, min(start + 20, len(sizes))):
                cid = f"bench-{k:05d}"
                for name, frame in campaign_tables(cid, sizes[k], reps, rng).items():
                    txn.put(name, cid, frame)
    return len(sizes)


def stored_folders(root: Path, campaigns: int, per_campaign: int, reps: int, seed: int) -> None:
    """Stored-attempt folders (contract §2) of the same model: ``campaigns`` x ``per_campaign``."""
    from pipeline.study.stored import write_attempt, write_campaign

    rng = np.random.default_rng(seed)
    metric = {"name": "e2e_seconds", "better": "lower"}
    mechanism = {
        "hypothesis": "h",
        "expectations": [{"target": t, "name": n, "expect": e} for t, n, e in EXPECTATIONS],
    }
    shape = (per_campaign, reps, 2, len(STEPS), len(REGIONS))
    for c in range(campaigns):
        cid = f"bench-{c:05d}"
        folder = write_campaign(
            root, cid, created_at="2026-11-01T10:00:00Z", metric=metric, policy={}
        )
        gain = rng.choice([1.0, 0.88, 0.95], size=per_campaign)
        noise = (
            rng.lognormal(0, 0.03, (per_campaign, reps, 1, 1, 1))
            * rng.lognormal(0, 0.03, (per_campaign, reps, 2, 1, 1))
            * rng.lognormal(0, 0.01, shape)
        )
        effect = np.ones(shape)
        effect[:, :, 1, :, 0] = gain[:, None, None]
        seconds = (STEP_SECONDS * SHARES * noise * effect).tolist()
        dram = 1e9 * len(STEPS) * (1 + rng.normal(0, 0.001, shape[:3]))
        dram[:, :, 1] *= gain[:, None]
        for a in range(per_campaign):
            runs = []
            for rep in range(reps):
                for s, side in enumerate(("baseline", "candidate")):
                    cells = seconds[a][rep][s]
                    breakdown = {
                        step: dict(zip(REGIONS, cells[k], strict=True))
                        for k, step in enumerate(STEPS)
                    }
                    runs.append(
                        {
                            "side": side,
                            "repetition": rep,
                            "status": "ok",
                            "metric": sum(sum(row) for row in cells),
                            "breakdown": breakdown,
                            "counters": {
                                "kernel_launches": 1000 * len(STEPS),
                                "dram_bytes": float(dram[a, rep, s]),
                            },
                        }
                    )
            doc = {
                "attempt_id": f"r{a + 1:03d}",
                "round": a + 1,
                "candidate": f"cand-{gain[a]:.2f}",
                "baseline": "main",
                "status": "completed",
                "declared_at": "2026-11-01T10:00:00Z",
                "started_at": "2026-11-01T10:01:00Z",
            }
            write_attempt(folder, doc, runs, mechanism=mechanism)


# -- measuring commands in subprocesses -------------------------------------------------------
BIN = Path(sys.executable).parent
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


_LAUNCHER = """\
import json, os, subprocess, sys, time
t0 = time.perf_counter()
with open(sys.argv[1], "wb") as err:
    proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=err)
    _, status, usage = os.wait4(proc.pid, 0)
print(json.dumps([time.perf_counter() - t0, usage.ru_utime + usage.ru_stime,
                  usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)]))
"""
"""Runs a command and prints its wall seconds, CPU seconds, peak RSS (MiB) and exit code."""


def measure(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run ``command``; its wall seconds, CPU seconds (user + system) and own peak RSS in MiB
    (from wait4). CPU seconds say what a command costs even when the machine is busy.

    The command is started by a small launcher process, not by this one: Linux carries a
    process's peak RSS across exec, so a command started directly by this script (which holds
    the generated data, hundreds of MiB) would report at least this script's peak as its own."""
    os.sync()  # the files the previous step wrote reach the disk before, not during, this one
    with tempfile.NamedTemporaryFile() as err:
        done = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, err.name, *command],
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"the launcher of {' '.join(command)} failed: {done.stderr[-2000:]}")
        seconds, cpu, rss, code = json.loads(done.stdout)
        if code != 0:
            stderr = Path(err.name).read_text(errors="replace")
            raise SystemExit(f"{' '.join(command)} failed ({code}): {stderr[-2000:]}")
    return float(seconds), float(cpu), float(rss)  # Linux reports KiB: divided in the launcher


def median_of(runs: int, command: list[str], before: Any = None) -> tuple[float, float]:
    """Median wall and CPU seconds of ``runs`` runs (``before()`` untimed before each)."""
    times, cpus = [], []
    for _ in range(runs):
        if before is not None:
            before()
        seconds, cpu, _ = measure(command)
        times.append(seconds)
        cpus.append(cpu)
    return statistics.median(times), statistics.median(cpus)


def drop_outputs(store: Path, cid: str) -> None:
    for name in ("assessments", "comparisons", "outcomes"):
        shutil.rmtree(store / name / f"campaign_id={cid}", ignore_errors=True)


def check_equal(store: Path, naive_json: Path, campaigns: list[str] | None) -> tuple[int, float]:
    """Every quantity with an interval in the store against the naive script's numbers: the
    count and the largest relative difference of estimate, low and high (fails above 1e-12)."""
    naive = json.loads(naive_json.read_text())
    comps = Store(store).read("comparisons", campaigns).filter(pl.col("status") == "ok")
    keys = (
        comps["campaign_id"]
        + "/"
        + comps["attempt_id"]
        + "/"
        + comps["quantity"]
        + "/"
        + comps["name"]
    ).to_list()
    if set(keys) != set(naive):
        missing = sorted(set(naive) ^ set(keys))[:5]
        raise SystemExit(f"the pipeline and the naive script disagree on the quantities: {missing}")
    got = comps.select("estimate", "low", "high").to_numpy()
    ref = np.array([naive[k][:3] for k in keys])
    worst = float(np.max(np.abs(got - ref) / np.abs(ref)))
    if not worst <= 1e-12:
        raise SystemExit(f"results differ from the naive script by {worst:.1e} relative (> 1e-12)")
    return len(keys), worst


# -- the table -------------------------------------------------------------------------------
def row(path: str, figure: str, comparison: str, ratio: str, target: str, threads: str) -> str:
    return f"| {path} | {figure} | {comparison} | {ratio} | {target} | {threads} |"


def run(args: argparse.Namespace, work: Path) -> None:
    folder, store, clean = work / "attempts", work / "store", work / "clean-store"
    for path in (folder, store, clean):
        shutil.rmtree(path, ignore_errors=True)
    campaigns = args.attempts // args.per_campaign
    attempts = campaigns * args.per_campaign
    t0 = time.perf_counter()
    stored_folders(folder, campaigns, args.per_campaign, args.repetitions, args.seed)
    print(
        f"generated {attempts} stored attempts in {campaigns} campaigns of {args.per_campaign} "
        f"({args.repetitions} repetitions x {len(STEPS)} steps x {len(REGIONS)} regions "
        f"+ 2 counters) in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    cli = str(BIN / "explain-pipeline")
    naive = [sys.executable, str(Path(__file__).parent / "naive_assess.py")]
    folders = sorted(str(p) for p in folder.iterdir())
    one = "bench-00000"
    out = work / "naive.json"

    ingest_s, ingest_cpu, ingest_rss = measure([cli, "ingest", str(folder), "--store", str(clean)])
    # the same folder through the per-line validator: the comparison, and the same tables
    precise = work / "precise-store"
    shutil.rmtree(precise, ignore_errors=True)
    precise_s, precise_cpu, _ = measure(
        [cli, "ingest", str(folder), "--store", str(precise), "--precise"]
    )
    same_stores(clean, precise)
    shutil.rmtree(precise)
    n_lines = attempts * args.repetitions * 2
    shutil.copytree(clean, store)
    help_s, help_cpu = median_of(args.runs, [cli, "--help"])
    python_s, python_cpu = median_of(args.runs, [sys.executable, "-c", "pass"])

    one_s, one_cpu = median_of(
        args.runs, [cli, "assess", one, "--store", str(store)], lambda: drop_outputs(store, one)
    )
    one_naive_s, one_naive_cpu = median_of(args.runs, [*naive, str(out), str(folder / one)])
    # What any Polars-based command pays before its first line of work: the floor under `assess ID`
    # (the imports only: the command itself leaves with os._exit, without tearing them down).
    floor_s, floor_cpu = median_of(
        args.runs, [sys.executable, "-c", "import click, numpy, polars, os; os._exit(0)"]
    )
    n_one, diff_one = check_equal(store, out, [one])

    shutil.rmtree(store)
    shutil.copytree(clean, store)
    all_s, all_cpu, all_rss = measure([cli, "assess", "--all", "--store", str(store)])
    naive_s, naive_cpu, naive_rss = measure([*naive, str(out), *folders], env=ONE_THREAD)
    n_all, diff_all = check_equal(store, out, None)
    kernel_s, kernel_cpu = kernel(n_all, args.repetitions)
    extra = ingest_rows(work) if args.with_ingest else []  # they print as they go: before the table

    both = "explain-pipeline: 2 cores (Polars pool, 2 bootstrap workers); naive: 1 thread"
    print()
    print(
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end. Every command in its own process, "
        f"start-up included; medians of {args.runs} runs where marked; wall seconds, CPU "
        "seconds (user + system) in brackets."
    )
    print()
    print(row("path", "explain-pipeline", "comparison (same run)", "ratio", "target", "threads"))
    print(row("---", "---", "---", "---", "---", "---"))
    print(
        row(
            "`explain-pipeline --help`",
            f"{help_s:.2f} s [{help_cpu:.2f}] (median)",
            f"`python -c pass`: {python_s:.2f} s [{python_cpu:.2f}]",
            "—",
            "≤ 0.25 s",
            "1",
        )
    )
    print(
        row(
            f"`assess ID`: one {args.per_campaign}-attempt campaign of the store ({n_one} "
            f"quantities, {args.repetitions} pairs)",
            f"{one_s:.2f} s [{one_cpu:.2f}] (median)",
            f"naive script on its folder: {one_naive_s:.2f} s [{one_naive_cpu:.2f}] (median)",
            f"{one_s / one_naive_s:.2f}x the naive time [{one_cpu / one_naive_cpu:.2f}x]",
            "≤ 1.3x",
            both,
        )
    )
    print(
        row(
            "start-up floor under `assess ID`: `python -c 'import click, numpy, polars'` "
            "(then os._exit, as the command leaves)",
            f"{floor_s:.2f} s [{floor_cpu:.2f}] (median)",
            f"naive script on its folder: {one_naive_s:.2f} s [{one_naive_cpu:.2f}]",
            f"{floor_s / one_naive_s:.2f}x the naive time, before any work",
            "—",
            "1",
        )
    )
    print(
        row(
            f"`ingest` of {attempts:,} attempts ({n_lines:,} measurement lines, {campaigns} "
            "campaigns)",
            f"{ingest_s:.1f} s [{ingest_cpu:.1f}] = {n_lines / ingest_s:,.0f} "
            f"lines/s [{n_lines / ingest_cpu:,.0f} per CPU second], peak RSS {ingest_rss:.0f} "
            "MiB",
            f"per-line validator (ingest --precise): {precise_s:.1f} s "
            f"[{precise_cpu:.1f}] = {n_lines / precise_s:,.0f} lines/s; same stored tables",
            f"{precise_s / ingest_s:.1f}x faster",
            "≥ 40,000 lines/s",
            "2 cores",
        )
    )
    print(
        row(
            f"`assess --all` of {attempts:,} attempts ({n_all:,} quantities with an interval)",
            f"{all_s:.1f} s [{all_cpu:.1f}] = {n_all / all_s:,.0f} quantities/s, "
            f"peak RSS {all_rss:.0f} MiB",
            f"naive script over every folder: {naive_s:.1f} s "
            f"[{naive_cpu:.1f}] = {n_all / naive_s:,.0f} quantities/s, peak RSS "
            f"{naive_rss:.0f} MiB",
            f"**{naive_s / all_s:.1f}x** faster [{naive_cpu / all_cpu:.1f}x less CPU]",
            "≥ 25x",
            both,
        )
    )
    print(
        row(
            "of which the bootstrap kernel alone: `paired_intervals` of as many quantities "
            f"({args.repetitions} pairs, 10,000 resamples) in one process, start-up excluded",
            f"{kernel_s:.1f} s [{kernel_cpu:.1f}]",
            f"25x the naive script: {naive_s / 25:.1f} s",
            f"{kernel_s / (naive_s / 25):.1f}x that budget",
            "—",
            "2 workers",
        )
    )
    print(
        row(
            "ingest + `assess --all` (end to end)",
            f"{ingest_s + all_s:.1f} s [{ingest_cpu + all_cpu:.1f}]",
            f"naive script: {naive_s:.1f} s [{naive_cpu:.1f}]",
            f"{naive_s / (ingest_s + all_s):.1f}x faster",
            "—",
            both,
        )
    )
    for line in extra:
        print(line)
    print()
    print(
        f"Results equal the naive script's: {n_one} and {n_all:,} quantities, max relative "
        f"difference {max(diff_one, diff_all):.1e} (asserted <= 1e-12)."
    )
    if args.large:
        large(args, work)


def ingest_rows(work: Path, options: tuple[str, ...] = ()) -> list[str]:
    """bench_ingest.py's measurements (its defaults: 3,000 attempts in 10 campaigns against the
    per-line validator, stored tables asserted equal; a 58 MB Kineto trace against the
    whole-file reader, lines asserted equal) as rows of this table."""
    import bench_ingest

    parsed = bench_ingest.parser().parse_args(["--compare-import", *options])
    (work / "ingest").mkdir(parents=True, exist_ok=True)
    ingest = bench_ingest.bench_ingest(parsed, work / "ingest")
    kineto = bench_ingest.bench_import(parsed, work / "ingest")
    bulk, precise, lines = ingest["bulk"], ingest["per-line"], ingest["lines"]
    stream, whole, mb = kineto["streaming"], kineto["whole-file"], kineto["mb"]

    def above(result: dict[str, Any]) -> float:  # the import's peak over the loaded program
        return (result["peak_rss_mib"] - result["before_mib"]) * 2**20 / (mb * 1e6)

    return [
        row(
            f"`ingest` of {ingest['attempts']:,} attempts ({lines:,} lines) in "
            f"{ingest['campaigns']} campaigns",
            f"{bulk['seconds']:.2f} s [{bulk['cpu']:.2f}] = "
            f"{lines / bulk['seconds']:,.0f} lines/s, peak RSS {bulk['peak_rss_mib']:.0f} MiB",
            f"per-line validator: {precise['seconds']:.2f} s = "
            f"{lines / precise['seconds']:,.0f} lines/s; same stored tables",
            f"{precise['seconds'] / bulk['seconds']:.1f}x faster",
            "≥ 40,000 lines/s",
            "2 cores",
        ),
        row(
            f"`import kineto` of a {mb:.0f} MB trace (process warmed by one small import)",
            f"{stream['seconds']:.2f} s [{stream['cpu_seconds']:.2f}] = "
            f"{mb / stream['seconds']:.1f} MB/s, peak {above(stream):.2f}x the file",
            f"whole-file reader: {whole['seconds']:.2f} s = {mb / whole['seconds']:.1f} MB/s, "
            f"{above(whole):.2f}x the file; same measurement line",
            f"{whole['seconds'] / stream['seconds']:.1f}x faster",
            "≥ 50 MB/s, peak ≤ 2x the file",
            "2 cores",
        ),
    ]


def kernel(quantities: int, pairs: int) -> tuple[float, float]:
    """Wall and CPU seconds of the bootstrap's matrix products and exact order statistics alone
    for ``quantities`` columns of ``pairs`` pairs (values drawn at random: the work does not
    depend on them), in a fresh process: the part of `assess --all` no store format changes."""
    script = (
        "import sys, time, numpy as np\n"
        "from pipeline.assessment.bootstrap import paired_intervals\n"
        f"x = np.random.default_rng(0).normal(0, 0.05, size=({pairs}, {quantities}))\n"
        "paired_intervals(x[:, :64], resamples=10_000, seed=1, confidence=0.95)\n"
        "t, c = time.perf_counter(), time.process_time()\n"
        "paired_intervals(x, resamples=10_000, seed=1, confidence=0.95)\n"
        "print(time.perf_counter() - t, time.process_time() - c)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[0]), float(out[1])


def large(args: argparse.Namespace, work: Path) -> None:
    """assess --all of a large store written directly as tables (ingesting 100,000 attempt
    folders would take most of an hour): the time and the peak RSS."""
    store = work / "large-store"
    shutil.rmtree(store, ignore_errors=True)
    n_campaigns = generate(store, args.large, 100, args.repetitions, args.seed)
    seconds, cpu, peak = measure(
        [str(BIN / "explain-pipeline"), "assess", "--all", "--store", str(store)]
    )
    quantities = Store(store).read("comparisons").filter(pl.col("status") == "ok").height
    print(
        f"\nassess --all of {args.large:,} attempts ({n_campaigns} campaigns, {quantities:,} "
        f"quantities with an interval): {seconds:.1f} s [{cpu:.1f} CPU] = "
        f"{quantities / seconds:,.0f} "
        f"quantities/s, peak RSS {peak:.0f} MiB (target ≤ 1 GiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--attempts", type=int, default=3000)
    parser.add_argument("--per-campaign", type=int, default=12, help="attempts per campaign")
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--runs", type=int, default=7, help="runs of each median")
    parser.add_argument("--large", type=int, default=0, help="also assess this many attempts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the files in this folder")
    parser.add_argument(
        "--with-ingest",
        action="store_true",
        help="also bench_ingest.py's rows (3,000 attempts in 10 campaigns, and "
        "import kineto against the whole-file reader) in the same table",
    )
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-assess-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(args, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
