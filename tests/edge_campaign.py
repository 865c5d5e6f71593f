"""One small campaign that holds every edge of the rules at once, as stored attempt folders.

Campaign ``edges`` (metric ``tokens_per_second``, ``better: higher``, paired decision):

- ``r001`` vanish: 6 pairs; the candidate has no ``launch`` region and ``graph_breaks`` counts 0
  (both vanished: ratio +inf); region ``prologue`` exists only in the candidate (zero baseline);
  repetition 6 has a baseline run only (unpaired) and repetition 7 a failed candidate run.
- ``r002`` few: 3 pairs, fewer than ``min_pairs`` (no interval anywhere).
- ``r003`` noref: the reference region ``sampling`` is 0 in every step (no reference time, zero
  share).
- ``r004`` aborted: status ``aborted`` (never PASS whatever its runs say).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.study.stored import write_attempt, write_campaign

CAMPAIGN = "edges"
POLICY = {"decision": "paired", "min_improvement_pct": 1.0, "resamples": 200, "min_pairs": 5}
MECHANISM: dict[str, Any] = {
    "hypothesis": "CUDA graphs remove the launch overhead & the graph breaks",
    "expectations": [
        {"target": "region", "name": "launch", "expect": "decrease"},
        {"target": "counter", "name": "graph_breaks", "expect": "decrease"},
        {"target": "region", "name": "attention", "expect": "decrease"},
        {"target": "region", "name": "sampling", "expect": "unchanged"},
    ],
}


def _run(
    side: str, repetition: int, *, vanish: bool, sampling: float = 0.002, status: str = "ok"
) -> dict[str, Any]:
    """One run: two steps; the candidate is ~10% faster in attention (throughput up)."""
    if status != "ok":
        return {"side": side, "repetition": repetition, "status": status}
    wobble = 1.0 + 0.004 * ((repetition * 3) % 5 - 2)
    candidate = side == "candidate"
    regions = {"attention": 0.010 * wobble * (0.9 if candidate else 1.0), "sampling": sampling}
    if not (candidate and vanish):
        regions["launch"] = 0.001 * wobble
    if candidate and vanish:
        regions["prologue"] = 0.0005
    step_seconds = sum(regions.values())
    return {
        "side": side,
        "repetition": repetition,
        "status": "ok",
        "metric": round(64 / (2 * step_seconds), 6),  # tokens per second: higher is better
        "breakdown": {"s0": dict(regions), "s1": dict(regions)},
        "counters": {"graph_breaks": 0 if candidate and vanish else 4, "kernel_launches": 900},
    }


def _runs(pairs: int, **kwargs: Any) -> list[dict[str, Any]]:
    return [_run(s, r, **kwargs) for r in range(pairs) for s in ("baseline", "candidate")]


def _attempt(attempt_id: str, round_: int, status: str = "completed") -> dict[str, Any]:
    return {
        "attempt_id": attempt_id,
        "round": round_,
        "candidate": f"cand-{attempt_id}",
        "baseline": "main@0000000",
        "status": status,
        "declared_at": f"2026-11-01T{9 + round_:02d}:58:00Z",
        "started_at": f"2026-11-01T{10 + round_:02d}:00:00Z",
    }


def write_edge_campaign(root: Path) -> Path:
    """Write the campaign under ``root/edges``; returns ``root`` (the attempts folder)."""
    folder = write_campaign(
        root,
        CAMPAIGN,
        created_at="2026-11-01T09:00:00Z",
        metric={"name": "tokens_per_second", "better": "higher"},
        policy=POLICY,
    )
    vanish = _runs(6, vanish=True) + [
        _run("baseline", 6, vanish=True),
        _run("candidate", 7, vanish=True, status="failed"),
    ]
    write_attempt(folder, _attempt("r001", 1), vanish, mechanism=MECHANISM)
    write_attempt(folder, _attempt("r002", 2), _runs(3, vanish=False), mechanism=MECHANISM)
    write_attempt(
        folder, _attempt("r003", 3), _runs(6, vanish=False, sampling=0.0), mechanism=MECHANISM
    )
    write_attempt(
        folder, _attempt("r004", 4, "aborted"), _runs(6, vanish=False), mechanism=MECHANISM
    )
    return root
