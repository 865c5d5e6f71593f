"""The benchmark's naive alternative: paired intervals straight from stored-attempt folders.

What a user could write instead of explain-pipeline, in its favour: plain Python and NumPy, one
thread, reading the attempt files itself (campaign.json, attempt.json, mechanism.json,
measurements.jsonl), and one quantity at a time: ``x[idx].mean(axis=1)`` and
``numpy.quantile``, with the index matrix drawn once per pair count and reused (common random
numbers, as the pinned interval prescribes). It handles what the benchmark's data holds: ok runs
with positive values, regions declared ``unchanged`` as the reference. No store, no checks, no
explanation, no verdicts.

    python benchmarks/naive_assess.py OUT.json CAMPAIGN_FOLDER...

writes ``{"campaign/attempt/quantity/name": [estimate, low, high, n_pairs], ...}`` for every
quantity with at least ``min_pairs`` pairs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

Runs = dict[tuple[str, int], dict[str, Any]]


def per_run_values(run: dict[str, Any], references: set[str]) -> dict[tuple[str, str], float]:
    """Every quantity's value in one run (the share speedup's share under its own key)."""
    values: dict[tuple[str, str], float] = {("metric", "metric"): run["metric"]}
    totals: dict[str, float] = {}
    ratio_sums: dict[str, float] = {}
    ref_steps = 0
    ref_total = every_total = 0.0
    for regions in run.get("breakdown", {}).values():
        for region, seconds in regions.items():
            totals[region] = totals.get(region, 0.0) + seconds
        if references:
            ref = sum(s for r, s in regions.items() if r in references)
            ref_total += ref
            every_total += sum(regions.values())
            if ref > 0:
                ref_steps += 1
                for region, seconds in regions.items():
                    if region not in references:
                        ratio_sums[region] = ratio_sums.get(region, 0.0) + seconds / ref
    values.update({("region", r): s for r, s in totals.items()})
    if references and ref_steps:
        values.update({("region_normalized", r): s / ref_steps for r, s in ratio_sums.items()})
        values[("share_speedup", "reference_share")] = ref_total / every_total
    values.update({("counter", c): float(v) for c, v in run.get("counters", {}).items()})
    return values


def attempt_xs(folder: Path, better: str) -> dict[tuple[str, str], np.ndarray]:
    """The per-pair log-ratios of every quantity of one attempt, pairs by repetition."""
    references: set[str] = set()
    mechanism = folder / "mechanism.json"
    if mechanism.exists():
        expectations = json.loads(mechanism.read_text())["expectations"]
        references = {
            e["name"]
            for e in expectations
            if e["target"] == "region" and e["expect"] == "unchanged"
        }
    runs: Runs = {}
    with open(folder / "measurements.jsonl") as lines:
        for line in lines:
            run = json.loads(line)
            if run["status"] == "ok":
                runs[(run["side"], run["repetition"])] = run
    reps = sorted(r for side, r in runs if side == "baseline" and ("candidate", r) in runs)
    base = [per_run_values(runs[("baseline", r)], references) for r in reps]
    cand = [per_run_values(runs[("candidate", r)], references) for r in reps]
    keys = sorted({k for v in base + cand for k in v})
    xs = {}
    for key in keys:
        b = np.array([v.get(key, 0.0) for v in base])
        c = np.array([v.get(key, 0.0) for v in cand])
        flip = key[0] == "share_speedup" or (key[0] == "metric" and better == "higher")
        xs[key] = np.log(c / b) if flip else np.log(b / c)
    return xs


def main() -> None:
    out, folders = Path(sys.argv[1]), [Path(f) for f in sys.argv[2:]]
    results: dict[str, list[float]] = {}
    matrices: dict[tuple[int, int, int], np.ndarray] = {}
    for campaign in folders:
        document = json.loads((campaign / "campaign.json").read_text())
        policy = {
            "confidence": 0.95,
            "resamples": 10000,
            "seed": 0,
            "min_pairs": 5,
            **document["policy"],
        }
        alpha = (1 - policy["confidence"]) / 2
        metric_name = document["metric"]["name"]
        for folder in sorted(p for p in campaign.iterdir() if p.is_dir()):
            for (quantity, name), x in attempt_xs(folder, document["metric"]["better"]).items():
                n = len(x)
                if n < policy["min_pairs"]:
                    continue
                key = (n, policy["seed"], policy["resamples"])
                if key not in matrices:  # in the loop's favour: drawn once per n
                    rng = np.random.Generator(np.random.PCG64(policy["seed"]))
                    matrices[key] = rng.integers(0, n, size=(policy["resamples"], n))
                stat = x[matrices[key]].mean(axis=1)
                low, high = np.exp(np.quantile(stat, [alpha, 1 - alpha]))
                label = metric_name if quantity == "metric" else name
                results[f"{campaign.name}/{folder.name}/{quantity}/{label}"] = [
                    float(np.exp(x.mean())),
                    float(low),
                    float(high),
                    n,
                ]
    out.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
