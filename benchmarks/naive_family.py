"""The per-benchmark verdicts' naive alternative: a plain Python loop over the benchmarks of one
stored attempt, what a user could write instead of explain-pipeline (contract §15, in its favour:
no store, no checks, ok runs with positive values only).

For each benchmark, one at a time: its paired log-ratios from the measurement lines, their mean
and standard deviation (NumPy), ``scipy.stats.t.ppf(1 - alpha / (2 m), n - 1)`` and the verdict.

    python benchmarks/naive_family.py OUT.json ATTEMPT_FOLDER [--confidence C] [--gate-pct G]
        [--margin-pct M]

writes ``{"name": [estimate, low, high, verdict], ...}`` (the metric under its campaign's metric
name) and ``"__seconds__"``: the loop's own time, reading the files included, start-up excluded.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from scipy import stats


def verdict(low: float, high: float, gate_pct: float, margin_pct: float) -> str:
    gate, margin = 1 + gate_pct / 100, 1 + margin_pct / 100
    if high < 1 and high <= 1 / margin:
        return "regressed"
    if low > 1 and low >= gate:
        return "improved"
    if 1 / margin <= low and high <= margin:
        return "unchanged"
    return "inconclusive"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("attempt", type=Path)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--gate-pct", type=float, default=1.0)
    parser.add_argument("--margin-pct", type=float, default=1.0)
    args = parser.parse_args()
    started = time.perf_counter()
    campaign = json.loads((args.attempt.parent / "campaign.json").read_text())
    runs = {}
    with (args.attempt / "measurements.jsonl").open() as lines:
        for line in lines:
            run = json.loads(line)
            if run["status"] == "ok":
                runs[run["side"], run["repetition"]] = run
    reps = sorted(r for s, r in runs if s == "baseline" and ("candidate", r) in runs)
    names = sorted({name for run in runs.values() for name in run["breakdown"]["all"]})
    members = [campaign["metric"]["name"], *names]
    alpha, m, n = 1 - args.confidence, len(members), len(reps)
    out: dict[str, object] = {}
    for k, name in enumerate(members):
        if k == 0:
            x = [
                math.log(runs["baseline", r]["metric"] / runs["candidate", r]["metric"])
                for r in reps
            ]
        else:
            x = [
                math.log(
                    runs["baseline", r]["breakdown"]["all"][name]
                    / runs["candidate", r]["breakdown"]["all"][name]
                )
                for r in reps
            ]
        values = np.array(x)
        mean, sd = values.mean(), values.std(ddof=1)
        half = stats.t.ppf(1 - alpha / (2 * m), n - 1) * sd / math.sqrt(n)
        low, high = math.exp(mean - half), math.exp(mean + half)
        out[name] = [math.exp(mean), low, high, verdict(low, high, args.gate_pct, args.margin_pct)]
    out["__seconds__"] = time.perf_counter() - started
    args.out.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
