"""Benchmark of assess (not part of the test suite).

Generates a large synthetic store directly as tables (contract §7's model: 4 steps x 4 regions, two
counters, every attempt declaring attention decrease, dram_bytes decrease, sampling unchanged),
then, each in a fresh subprocess so that its peak resident memory is its own:

1. ingest of a smaller stored-attempt folder (pipeline.stored -> pipeline.ingest);
2. assess of the whole store (everything computed), then assess again (everything reused);

and in this process a plain per-quantity loop (NumPy fancy indexing ``x[idx].mean(axis=1)`` and
``np.quantile`` per quantity, the index matrix drawn once per n in its favour) over a sample of
the same quantities, checked against the pipeline's intervals. Prints quantities per second for
both, their ratio and peak RSS.

    .venv/bin/python benchmarks/bench_assess.py                 # 2,000 attempts
    .venv/bin/python benchmarks/bench_assess.py --attempts 100000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.contracts import table
from pipeline.policy import POLICY_DEFAULTS, canonical_policy, policy_sha256
from pipeline.store import Store

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
    breakdown = pl.DataFrame({
        **key,
        "attempt_id": _codes(a_ids, idx[0]), "side": _codes(sides, idx[2]),
        "repetition": idx[1], "step": _codes(STEPS, idx[3]), "region": _codes(REGIONS, idx[4]),
        "seconds": seconds.ravel(),
    })  # fmt: skip
    runs = {
        **key,
        "attempt_id": _codes(a_ids, run_idx[0]), "side": _codes(sides, run_idx[2]),
        "repetition": run_idx[1],
    }  # fmt: skip
    samples = pl.DataFrame({
        **runs, "status": "ok", "metric": seconds.sum(axis=(3, 4)).ravel(),
        "line": np.arange(run_idx.shape[1]) % (2 * reps) + 1,
    })  # fmt: skip
    dram = 1e9 * len(STEPS) * (1 + rng.normal(0, 0.001, shape[:3]))
    dram[:, :, 1] *= gain[:, None]
    counters = pl.concat([
        pl.DataFrame({**runs, "counter": "kernel_launches",
                      "value": np.full(run_idx.shape[1], 1000.0 * len(STEPS))}),
        pl.DataFrame({**runs, "counter": "dram_bytes", "value": dram.ravel()}),
    ])  # fmt: skip
    e_idx = np.indices((n_attempts, len(EXPECTATIONS))).reshape(2, -1)
    expectations = pl.DataFrame({
        **key, "attempt_id": _codes(a_ids, e_idx[0]), "position": e_idx[1],
        "target": _codes([e[0] for e in EXPECTATIONS], e_idx[1]),
        "name": _codes([e[1] for e in EXPECTATIONS], e_idx[1]),
        "expect": _codes([e[2] for e in EXPECTATIONS], e_idx[1]),
    })  # fmt: skip
    digests = [hashlib.sha256(f"{cid}/{a}".encode()).hexdigest() for a in a_ids]
    attempts = pl.DataFrame({
        **key, "attempt_id": a_ids, "round": np.arange(1, n_attempts + 1),
        "candidate": [f"cand-{g:.2f}" for g in gain], "baseline": "main", "status": "completed",
        "declared_at": T0, "started_at": T0, "mechanism_sha256": "m",
        "mechanism_sha256_actual": "m", "mechanism_sha256_first_seen": "m", "hypothesis": "h",
        "n_lines": 2 * reps,
        "inputs_sha256": digests, "source_dir": [f"attempts/{cid}/{a}" for a in a_ids],
    })  # fmt: skip
    policy = dict(POLICY_DEFAULTS)
    campaigns = pl.DataFrame({
        **key, "kind": "project", "created_at": T0, "metric_name": "e2e_seconds",
        "metric_better": "lower", **{k: [v] for k, v in policy.items()},
        "policy_json": canonical_policy(policy).decode(), "policy_sha256": policy_sha256(policy),
        "policy_sha256_actual": policy_sha256(policy), "source_sha256": digests[0],
    })  # fmt: skip
    frames = {
        "campaigns": campaigns, "attempts": attempts, "samples": samples,
        "breakdown": breakdown, "counters": counters, "expectations": expectations,
    }  # fmt: skip
    return {k: v.cast(dict(table(k).polars_schema()), strict=False) for k, v in frames.items()}  # type: ignore[arg-type]


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


def stored_folder(root: Path, attempts: int, reps: int, seed: int) -> None:
    """A stored-attempt folder (contract §2) for the ingest timing, same model."""
    from pipeline.stored import write_attempt, write_campaign

    rng = np.random.default_rng(seed)
    metric = {"name": "e2e_seconds", "better": "lower"}
    folder = write_campaign(
        root, "ingest-bench", created_at="2026-11-01T10:00:00Z", metric=metric, policy={}
    )
    t = campaign_tables("ingest-bench", attempts, reps, rng)
    cells = t["breakdown"].sort("attempt_id", "repetition", "side", "step", "region")
    per_run = cells.partition_by(["attempt_id", "repetition", "side"], as_dict=True)
    counters = {
        k: dict(zip(v["counter"], v["value"], strict=True))
        for k, v in t["counters"]
        .partition_by(["attempt_id", "repetition", "side"], as_dict=True)
        .items()
    }
    for i, a in enumerate(t["attempts"].iter_rows(named=True)):
        runs = []
        for rep in range(reps):
            for side in ("baseline", "candidate"):
                part = per_run[(a["attempt_id"], rep, side)]
                breakdown: dict[str, dict[str, float]] = {}
                for step, region, s in part.select("step", "region", "seconds").iter_rows():
                    breakdown.setdefault(step, {})[region] = s
                runs.append({"side": side, "repetition": rep, "status": "ok",
                             "metric": float(part["seconds"].sum()), "breakdown": breakdown,
                             "counters": counters[(a["attempt_id"], rep, side)]})  # fmt: skip
        doc = {"attempt_id": a["attempt_id"], "round": i + 1, "candidate": a["candidate"],
               "baseline": "main", "status": "completed", "declared_at": "2026-11-01T10:00:00Z",
               "started_at": "2026-11-01T10:01:00Z"}  # fmt: skip
        mechanism = {
            "hypothesis": "h",
            "expectations": [{"target": t_, "name": n, "expect": e} for t_, n, e in EXPECTATIONS],
        }
        write_attempt(folder, doc, runs, mechanism=mechanism)


# -- phases run in subprocesses ---------------------------------------------------------------
def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def phase_assess(store_path: str) -> dict[str, Any]:
    from pipeline.assess import assess

    t0 = time.perf_counter()
    result = assess(Store(store_path))
    seconds = time.perf_counter() - t0
    return {
        "attempts": result.assessments.height,
        "quantities": result.comparisons.height,
        "bootstrapped": result.comparisons.filter(pl.col("status") == "ok").height,
        "recomputed": result.recomputed,
        "seconds": seconds,
        "peak_rss_mib": _rss_mib(),
    }


def phase_ingest(folder: str, store_path: str) -> dict[str, Any]:
    from pipeline.ingest import ingest

    t0 = time.perf_counter()
    report = ingest(Path(folder), Store(store_path))
    seconds = time.perf_counter() - t0
    outcomes = dict(report.attempts.group_by("outcome").len().iter_rows())
    return {
        "attempts": report.attempts.height,
        "outcomes": outcomes,
        "seconds": seconds,
        "peak_rss_mib": _rss_mib(),
    }


def _subprocess(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the plain loop -----------------------------------------------------------------------------
def plain_loop(store_path: Path, sample: int) -> dict[str, Any]:
    """Per-quantity NumPy loop over a sample of the store's quantities, checked against assess."""
    from pipeline import quantities

    store = Store(store_path)
    cid = store.campaign_ids()[0]
    inputs = quantities.Inputs(
        **{
            n: store.scan(n, [cid])
            for n in ("campaigns", "attempts", "samples", "breakdown", "counters", "expectations")
        }  # fmt: skip
    )
    xs = (
        quantities.pair_frames(inputs).pairs.lazy().filter(pl.col("flag").is_null())
        .group_by(quantities.QUANTITY).agg(pl.col("x").sort_by("repetition"))
        .sort(quantities.QUANTITY).head(sample).collect()
    )  # fmt: skip
    policy = store.read("campaigns", [cid]).row(0, named=True)
    resamples, seed, conf = policy["resamples"], policy["seed"], policy["confidence"]
    probs = [(1 - conf) / 2, 1 - (1 - conf) / 2]
    vectors = [np.asarray(v) for v in xs["x"].to_list()]

    def draw(n: int) -> np.ndarray:
        return np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))

    t0 = time.perf_counter()
    for x in vectors:  # as one writes it: contract §4.2's generator for each quantity
        stat = x[draw(len(x))].mean(axis=1)
        np.exp(np.quantile(stat, probs))
    naive = time.perf_counter() - t0
    idx = {n: draw(n) for n in {len(v) for v in vectors}}
    t0 = time.perf_counter()
    lows = []
    for x in vectors:  # in the loop's favour: the index matrix drawn once per n
        stat = x[idx[len(x)]].mean(axis=1)
        low, high = np.exp(np.quantile(stat, probs))
        lows.append(low)
        _ = np.exp(x.mean())
    seconds = time.perf_counter() - t0
    got = (
        xs.select(quantities.QUANTITY)
        .with_columns(pl.Series("loop_low", lows))
        .join(store.read("comparisons", [cid]), on=quantities.QUANTITY)
    )
    diff = ((got["loop_low"] - got["low"]).abs() / got["low"]).max()
    return {
        "quantities": len(vectors),
        "seconds": seconds,
        "naive_seconds": naive,
        "max_rel_diff_low": diff,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--per-campaign", type=int, default=100, help="attempts per campaign")
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--ingest-attempts", type=int, default=200)
    parser.add_argument("--loop-sample", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep the stores in this folder")
    parser.add_argument("--phase", choices=["assess", "ingest"], help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "assess":
        print(json.dumps(phase_assess(*args.paths)))
        return
    if args.phase == "ingest":
        print(json.dumps(phase_ingest(*args.paths)))
        return

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-assess-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(args, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> None:
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)
    t0 = time.perf_counter()
    n_campaigns = generate(store, args.attempts, args.per_campaign, args.repetitions, args.seed)
    print(f"generated {args.attempts} attempts in {n_campaigns} campaigns "
          f"({args.repetitions} repetitions x {len(STEPS)} steps x {len(REGIONS)} regions "
          f"+ 2 counters) in {time.perf_counter() - t0:.1f} s")  # fmt: skip

    folder = work / "attempts"
    shutil.rmtree(folder, ignore_errors=True)
    stored_folder(folder, args.ingest_attempts, args.repetitions, args.seed)
    shutil.rmtree(work / "ingest-store", ignore_errors=True)
    ing = _subprocess("--phase", "ingest", str(folder), str(work / "ingest-store"))
    print(f"ingest: {ing['attempts']} stored attempts in {ing['seconds']:.2f} s "
          f"({ing['attempts'] / ing['seconds']:.0f} attempts/s, {ing['outcomes']}), "
          f"peak RSS {ing['peak_rss_mib']:.0f} MiB")  # fmt: skip

    res = _subprocess("--phase", "assess", str(store))
    again = _subprocess("--phase", "assess", str(store))
    rate = res["bootstrapped"] / res["seconds"]
    print(f"assess: {res['attempts']} attempts, {res['quantities']} comparisons "
          f"({res['bootstrapped']} with an interval, {POLICY_DEFAULTS['resamples']} resamples) "
          f"in {res['seconds']:.1f} s = {rate:,.0f} quantities/s "
          f"(whole pipeline: read, pair, bootstrap, explain, verdicts, write)")  # fmt: skip
    print(f"assess peak RSS: {res['peak_rss_mib']:.0f} MiB")
    print(f"assess again (nothing changed): {again['seconds']:.1f} s, {again['recomputed']} "
          f"attempts recomputed, peak RSS {again['peak_rss_mib']:.0f} MiB")  # fmt: skip

    loop = plain_loop(store, args.loop_sample)
    naive_rate = loop["quantities"] / loop["naive_seconds"]
    loop_rate = loop["quantities"] / loop["seconds"]
    print(f"plain per-quantity loop ({loop['quantities']} quantities, bootstrap only; low equals "
          f"assess's to {loop['max_rel_diff_low']:.1e} relative):")  # fmt: skip
    print(f"  generator per quantity:     {naive_rate:,.0f} quantities/s")
    print(f"  index matrix cached per n:  {loop_rate:,.0f} quantities/s")
    print(f"ratio pipeline / loop: {rate / naive_rate:.1f}x (generator per quantity), "
          f"{rate / loop_rate:.1f}x (cached index matrix)")  # fmt: skip


if __name__ == "__main__":
    main()
