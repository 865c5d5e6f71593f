"""Scale-out benchmark of ingest and assess (not part of the test suite): the numbers of
docs/scale-out.md.

Splits each command's time into the workers' part (the units of work an engine may run
anywhere: `compute_batch` of assess, `prepare_campaigns` of ingest) and the driver's part (the
rest: reading the attempt list, putting results together, writing the store in one
transaction), measures the workers' part on one core and on both cores of this machine, runs the
Ray engine on a local cluster of this machine's cores, and projects the time per 100,000 attempts
to N nodes of C cores:

    T(N) = driver + workers_1core / (N x C) + results_bytes / bandwidth

Each measurement runs in a fresh subprocess on a fresh copy of the store (the one-core run is
pinned to one CPU with sched_setaffinity before anything is imported).

    .venv/bin/python benchmarks/bench_scaleout.py                      # 10,000 attempts
    .venv/bin/python benchmarks/bench_scaleout.py --attempts 100000 --nodes 1,4,16 --cores 32
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

R = TypeVar("R")


class TimedEngine:
    """The local engine, timing every unit of work and measuring what it would send back to a
    driver (its pickled size; pickling is timed apart and counted in neither share)."""

    in_process = True

    def __init__(self) -> None:
        self.seconds = 0.0
        self.tasks = 0
        self.result_bytes = 0
        self.pickle_seconds = 0.0

    def map(self, fn: Callable[..., R], work: Iterable[tuple[Any, ...]]) -> Iterator[R]:
        for args in work:
            t0 = time.perf_counter()
            out = fn(*args)
            t1 = time.perf_counter()
            self.result_bytes += len(pickle.dumps(out, protocol=5))
            self.seconds += t1 - t0
            self.pickle_seconds += time.perf_counter() - t1
            self.tasks += 1
            yield out


# -- phases, each in its own subprocess ------------------------------------------------------------
def _timed(command: str, paths: list[str]) -> dict[str, Any]:
    from pipeline.assessment.campaigns import assess
    from pipeline.ingestion.attempts import ingest
    from pipeline.store.tables import Store

    engine = TimedEngine()
    t0 = time.perf_counter()
    if command == "assess":
        result = assess(Store(paths[0]), engine=engine)
        attempts = result.recomputed
    else:
        report = ingest(Path(paths[0]), Store(paths[1]), engine=engine)
        attempts = report.attempts.height
    total = time.perf_counter() - t0 - engine.pickle_seconds
    return {
        "attempts": attempts,
        "total": total,
        "workers": engine.seconds,
        "driver": total - engine.seconds,
        "tasks": engine.tasks,
        "result_bytes": engine.result_bytes,
    }


def _ray(command: str, paths: list[str], cpus: int) -> dict[str, Any]:
    import logging

    import ray

    from pipeline.assessment.campaigns import assess
    from pipeline.engines import open_engine
    from pipeline.ingestion.attempts import ingest
    from pipeline.store.tables import Store

    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, logging_level=logging.ERROR)
    start = time.perf_counter() - t0
    try:
        with open_engine("ray") as engine:
            t0 = time.perf_counter()
            if command == "assess":
                attempts = assess(Store(paths[0]), engine=engine).recomputed
            else:
                attempts = ingest(Path(paths[0]), Store(paths[1]), engine=engine).attempts.height
            total = time.perf_counter() - t0
    finally:
        ray.shutdown()
    return {"attempts": attempts, "total": total, "cluster_start": start}


def _phase(args: list[str], *, cpu: int | None = None) -> dict[str, Any]:
    def pin() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})

    out = subprocess.run(
        [sys.executable, __file__, "--phase", *args],
        check=True,
        capture_output=True,
        text=True,
        preexec_fn=pin,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- inputs --------------------------------------------------------------------------------------
def _assess_store(work: Path, attempts: int, per_campaign: int, seed: int) -> tuple[Path, int]:
    from bench_assess import generate

    store = work / "assess-store"
    return store, generate(store, attempts, per_campaign, 10, seed)


def _ingest_folder(work: Path, campaigns: int, per_campaign: int, seed: int) -> Path:
    """``campaigns`` copies of bench_assess's stored campaign, each under its own id."""
    from bench_assess import stored_folders

    from pipeline.study.stored import write_campaign

    one, root = work / "one", work / "attempts"
    stored_folders(one, 1, per_campaign, 10, seed)
    for k in range(campaigns):
        shutil.copytree(one / "bench-00000", root / f"c{k:03d}")
        metric = {"name": "e2e_seconds", "better": "lower"}
        write_campaign(
            root, f"c{k:03d}", created_at="2026-11-01T10:00:00Z", metric=metric, policy={}
        )
    return root


# -- measuring and projecting ---------------------------------------------------------------
def _measure(command: str, inputs: list[Path], work: Path, ray_cpus: int) -> dict[str, Any]:
    """One-core and all-core timed runs, then the Ray engine, each on a fresh copy of the store."""

    def fresh(tag: str) -> list[str]:
        if command == "assess":
            copy = work / f"{command}-{tag}"
            shutil.copytree(inputs[0], copy)
            return [str(copy)]
        return [str(inputs[0]), str(work / f"{command}-{tag}")]

    got = {
        "one_core": _phase([command, "timed", *fresh("one")], cpu=min(os.sched_getaffinity(0))),
        "all_cores": _phase([command, "timed", *fresh("all")]),
    }
    if ray_cpus:
        got["ray"] = _phase([command, f"ray{ray_cpus}", *fresh("ray")])
    return got


def _per_100k(value: float, attempts: int) -> float:
    return value * 100_000 / attempts


def _report(
    command: str, got: dict[str, Any], per_task: int, nodes: list[int], cores: int, gbps: float
) -> None:
    """The measurements, then the projection per 100,000 attempts: units of work of `per_task`
    attempts run in waves of N x C at a time, the driver's part and the transfer added."""
    one, every = got["one_core"], got["all_cores"]
    n = one["attempts"]
    cpus = len(os.sched_getaffinity(0))
    print(f"\n{command}: {n:,} attempts, {one['tasks']} units of work")
    print(f"  {'':34}{'total s':>9}{'driver s':>10}{'workers s':>11}")
    for label, r in (("local engine, 1 core", one), (f"local engine, {cpus} cores", every)):
        print(f"  {label:34}{r['total']:9.2f}{r['driver']:10.2f}{r['workers']:11.2f}")
    if "ray" in got:
        r = got["ray"]
        label = "ray engine, local cluster"
        print(f"  {label:34}{r['total']:9.2f}   (cluster start {r['cluster_start']:.1f} s)")
    w1 = _per_100k(one["workers"], n)
    driver = _per_100k(one["driver"], n)
    mb = _per_100k(one["result_bytes"], n) / 1e6
    transfer = mb * 8 / 1000 / gbps
    tasks = math.ceil(100_000 / per_task)
    task = w1 / tasks
    print(
        f"  per 100,000 attempts: workers {w1:.1f} core-s, driver {driver:.1f} s (one core "
        f"each), {tasks} units of work of {task:.1f} s, results to the driver {mb:.0f} MB "
        f"({transfer:.1f} s at {gbps:g} Gbit/s)"
    )
    print(
        f"  projection per 100,000 attempts on N nodes of {cores} cores "
        f"(driver + waves x unit + transfer):"
    )
    for k in nodes:
        t = driver + math.ceil(tasks / (k * cores)) * task + transfer
        share = (driver + transfer) / t * 100
        print(
            f"    N={k:<4} {t:8.1f} s   speed-up {(w1 + driver) / t:5.1f}x   "
            f"driver share {share:3.0f}%"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=10_000, help="assess: attempts")
    parser.add_argument("--per-campaign", type=int, default=100, help="assess: per campaign")
    parser.add_argument("--ingest-campaigns", type=int, default=8)
    parser.add_argument("--ingest-per-campaign", type=int, default=100)
    parser.add_argument("--nodes", default="1,2,4,8,16", help="N for the projection")
    parser.add_argument("--cores", type=int, default=16, help="cores per node (projection)")
    parser.add_argument("--gbps", type=float, default=10.0, help="network to the driver")
    parser.add_argument(
        "--ray-cpus",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="CPUs of the local Ray cluster (0: skip the Ray runs)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        command, mode, *paths = args.phase
        got = _timed(command, paths) if mode == "timed" else _ray(command, paths, int(mode[3:]))
        print(json.dumps(got))
        return
    from pipeline.assessment.campaigns import DEFAULT_BATCH
    from pipeline.ingestion.attempts import GROUP_ATTEMPTS

    work = Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    try:
        nodes = [int(k) for k in args.nodes.split(",")]
        t0 = time.perf_counter()
        store, n_campaigns = _assess_store(work, args.attempts, args.per_campaign, args.seed)
        folder = _ingest_folder(work, args.ingest_campaigns, args.ingest_per_campaign, args.seed)
        print(f"load average (1, 5, 15 min) at the start: {os.getloadavg()}")
        print(
            f"inputs: {args.attempts:,} attempts in {n_campaigns} campaigns for assess, "
            f"{args.ingest_campaigns} x {args.ingest_per_campaign} stored attempts for ingest "
            f"(10 repetitions x 4 steps x 4 regions + 2 counters), "
            f"made in {time.perf_counter() - t0:.0f} s"
        )
        # ingest packs consecutive campaigns into units of at most GROUP_ATTEMPTS attempts
        per_unit = max(1, GROUP_ATTEMPTS // args.ingest_per_campaign) * args.ingest_per_campaign
        units = (("ingest", [folder], per_unit), ("assess", [store], DEFAULT_BATCH))
        for command, inputs, per_task in units:
            got = _measure(command, inputs, work, args.ray_cpus)
            _report(command, got, per_task, nodes, args.cores, args.gbps)
        print(f"\nload average (1, 5, 15 min) at the end: {os.getloadavg()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
