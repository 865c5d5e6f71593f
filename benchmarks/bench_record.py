"""Benchmark of the recorder's own cost per run (not part of the test suite; `make bench` runs it).

`explain-pipeline round` runs `true` on both sides, once with a few repetitions and once with
many; the difference of their wall times divided by the difference of their run counts is the
recorder's cost per run with its start-up (imports, campaign.json, the attempt folder) taken
out. Beside it, in the same process and the same minutes, a bare spawn of `true` the way any
harness must start it (`subprocess.Popen(...).wait()` with stdin closed and output to a file).
The difference is what the recorder adds per run: spawning in its own process group, the equal
environments, the scratch folder, the measurement line appended, runs.log and the progress bar.
Each size runs `--trials` times, alternating, and the medians are compared. The measured
folders are checked (every run recorded `ok`, every line present), so the figure is of rounds
that did their work.

    .venv/bin/python benchmarks/bench_record.py                 # what make bench runs
    .venv/bin/python benchmarks/bench_record.py --runs 400 --trials 7
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = Path(sys.executable).with_name("explain-pipeline")
TARGET_MS = 5.0
"""Issue 18's target: the recorder adds at most 5 ms per run above a bare spawn."""


def _round(campaign: Path, repetitions: int) -> float:
    """Wall seconds of one `round` of `true` against `true` (start-up included)."""
    args = [
        str(CLI),
        "round",
        str(campaign),
        "--baseline",
        "a",
        "--candidate",
        "b",
        "--baseline-cmd",
        "true",
        "--candidate-cmd",
        "true",
        "-n",
        str(repetitions),
        "--warmup",
        "0",
    ]
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start


def _bare(runs: int, scratch: Path) -> float:
    """Wall seconds of ``runs`` bare spawns of `true`."""
    start = time.perf_counter()
    for _ in range(runs):
        with (scratch / "out").open("wb") as out:
            subprocess.Popen(["true"], stdin=subprocess.DEVNULL, stdout=out, stderr=out).wait()
    return time.perf_counter() - start


def _check(campaign: Path, expected_lines: list[int]) -> None:
    """Every round recorded every run, each ok: a broken round must not look fast."""
    folders = sorted(p for p in campaign.iterdir() if p.is_dir() and not p.name.startswith("."))
    got = []
    for folder in folders:
        lines = (folder / "measurements.jsonl").read_text().splitlines()
        assert all(json.loads(x)["status"] == "ok" for x in lines), folder
        got.append(len(lines))
    assert sorted(got) == sorted(expected_lines), (got, expected_lines)


def measure(runs: int, trials: int) -> dict[str, float]:
    small = 5  # repetitions of the short round: its runs are 2 x 5
    scratch = Path(tempfile.mkdtemp(prefix="bench-record-"))
    try:
        campaign = scratch / "overhead"
        subprocess.run(
            [str(CLI), "campaign", "start", str(campaign), "--metric", "seconds"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        short, long, bare = [], [], []
        for _ in range(trials):
            short.append(_round(campaign, small))
            long.append(_round(campaign, runs // 2))
            bare.append(_bare(runs - 2 * small, scratch))
        _check(campaign, [2 * small] * trials + [2 * (runs // 2)] * trials)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    extra = 2 * (runs // 2) - 2 * small
    per_run = (statistics.median(long) - statistics.median(short)) / extra
    per_spawn = statistics.median(bare) / (runs - 2 * small)
    startup = statistics.median(short) - 2 * small * per_run
    return {
        "per_run_ms": per_run * 1e3,
        "bare_ms": per_spawn * 1e3,
        "overhead_ms": (per_run - per_spawn) * 1e3,
        "startup_s": startup,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs of the long round")
    parser.add_argument("--trials", type=int, default=5, help="rounds of each size")
    args = parser.parse_args(argv)
    got = measure(args.runs, args.trials)
    # sane: a run cannot cost less than most of a bare spawn, nor a spawn take nothing
    assert got["bare_ms"] > 0.05, got
    assert got["per_run_ms"] > 0.5 * got["bare_ms"], got
    assert 0 < got["startup_s"] < 30, got
    met = "met" if got["overhead_ms"] <= TARGET_MS else "not met"
    load = os.getloadavg()[0]
    print(
        f"recorder, per run of `true` (median of {args.trials} rounds of 10 and {args.runs} "
        f"runs; {os.cpu_count()} cores, {platform.machine()}, load average {load:.1f})"
    )
    print(
        f"  explain-pipeline round:  {got['per_run_ms']:.2f} ms per run "
        f"(start-up {got['startup_s']:.2f} s per round, not counted)"
    )
    print(f"  bare spawn of `true`:    {got['bare_ms']:.2f} ms per run")
    print(
        f"  recorder's own cost:     {got['overhead_ms']:+.2f} ms per run "
        f"(target <= {TARGET_MS:g} ms: {met})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
