"""Peak memory of ingest and assess for one attempt with many pairs (issue 19: 50,000 pairs
assess within 1 GiB). Each command runs once as its own process under ``/usr/bin/time -v``,
whose "Maximum resident set size" is the figure; a peak above ``--limit-mib`` exits 1.

    .venv/bin/python benchmarks/bench_memory.py --pairs 50000
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pipeline.study.stored import write_attempt, write_campaign

MECHANISM = {
    "hypothesis": "less attention work",
    "expectations": [
        {"target": "region", "name": "attention", "expect": "decrease"},
        {"target": "region", "name": "sampling", "expect": "unchanged"},
    ],
}


def runs(pairs: int) -> list[dict[str, Any]]:
    """Both sides of every repetition, a deterministic wobble, the candidate 5 % faster."""
    lines = []
    for rep in range(pairs):
        wobble = 1.0 + 0.01 * math.sin(rep)
        for side, factor in (("baseline", 1.0), ("candidate", 0.95)):
            regions = {
                "attention": 0.001 * factor * wobble,
                "mlp": 0.005 * wobble,
                "sampling": 0.0025 * wobble,
            }
            lines.append(
                {
                    "side": side,
                    "repetition": rep,
                    "status": "ok",
                    "metric": sum(regions.values()),
                    "breakdown": regions,
                    "counters": {"launches": round(1000 * factor)},
                }
            )
    return lines


def peak_mib(args: list[str]) -> float:
    """Run ``args`` under /usr/bin/time -v; its maximum resident set size in MiB."""
    done = subprocess.run(
        ["/usr/bin/time", "-v", *args], capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 5):
        sys.exit(f"{' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if found is None:
        sys.exit("no 'Maximum resident set size' in /usr/bin/time -v's output")
    return int(found.group(1)) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=50_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--limit-mib", type=float, default=1024.0)
    args = parser.parse_args()
    cli = str(Path(sys.executable).with_name("explain-pipeline"))
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    try:
        policy = {"decision": "paired", "resamples": args.resamples}
        metric = {"name": "seconds", "better": "lower"}
        folder = write_campaign(
            work / "attempts",
            "big",
            created_at="2026-11-01T09:00:00Z",
            metric=metric,
            policy=policy,
        )
        attempt = {
            "attempt_id": "r001",
            "round": 1,
            "candidate": "c",
            "baseline": "b",
            "status": "completed",
            "declared_at": "2026-11-01T09:58:00Z",
            "started_at": "2026-11-01T10:00:00Z",
        }
        write_attempt(folder, attempt, runs(args.pairs), mechanism=MECHANISM)
        store = str(work / "store")
        figures = {
            "ingest": peak_mib([cli, "ingest", str(work / "attempts"), "--store", store]),
            "assess": peak_mib([cli, "assess", "big", "--store", store]),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.pairs} pairs, {args.resamples} resamples: peak resident memory")
    for name, mib in figures.items():
        print(f"  {name:<7} {mib:8.1f} MiB")
    if max(figures.values()) > args.limit_mib:
        sys.exit(f"over the limit of {args.limit_mib:g} MiB")


if __name__ == "__main__":
    main()
