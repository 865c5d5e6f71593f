"""Regenerate the example stored attempts in data/attempts/ (deterministic: fixed seed).

Run ``.venv/bin/python data/make_examples.py [OUT_DIR]``. Nobody edits the numbers by hand: change
the scenarios below and rerun. Every campaign folder this script writes is replaced whole.

Campaign ``llama-decode-2026-11`` (project, time: lower is better, median decision): 4 decode
steps x 4 regions per run, two counters, 10 repetitions per side, rounds with a clear explained
gain, a gain whose mechanism the counters contradict, a gain within the noise, a regression, a
round without a mechanism, a failed round, and a gain smaller than the noise that the DRAM
counter shows. Round r001 has a failed candidate run; r002 an unpaired baseline repetition.

Campaign ``bert-serving-throughput`` (throughput: higher is better, paired decision): a flat
breakdown (one step ``all``), 8 repetitions, four rounds.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.study.stored import write_attempt, write_campaign

SEED = 20261101
OUT = Path(__file__).resolve().parent / "attempts"


@dataclass(frozen=True)
class Model:
    """Baseline seconds per step and region, work counters per run, and the noise (log sigma)."""

    steps: tuple[str, ...]
    regions: dict[str, float]
    counters: dict[str, float]
    sigma_repetition: float = 0.03
    sigma_run: float = 0.03
    sigma_cell: float = 0.01


@dataclass(frozen=True)
class Round:
    attempt_id: str
    candidate: str
    effect: dict[str, float] = field(default_factory=dict)  # region or counter -> factor
    mechanism: dict[str, Any] | None = None
    status: str = "completed"
    failed_candidate_reps: tuple[int, ...] = ()
    extra_baseline_reps: int = 0
    candidate_ran: bool = True


def _expect(hypothesis: str, **expectations: str) -> dict[str, Any]:
    """region:name / counter:name keywords -> a mechanism declaration."""
    items = []
    for key, expect in expectations.items():
        target, name = key.split("__")
        items.append({"target": target, "name": name, "expect": expect})
    return {"hypothesis": hypothesis, "expectations": items}


def simulate_side(
    rng: np.random.Generator, model: Model, rep_factor: np.ndarray, effect: dict[str, float]
) -> tuple[np.ndarray, np.ndarray]:
    """(reps, steps, regions) seconds and (reps, counters) counts for one side, vectorized."""
    reps, n_steps, n_regions = rep_factor.size, len(model.steps), len(model.regions)
    base = np.array([model.regions[r] * effect.get(r, 1.0) for r in model.regions])
    run = np.exp(rng.normal(0.0, model.sigma_run, size=(reps, 1, 1)))
    cell = np.exp(rng.normal(0.0, model.sigma_cell, size=(reps, n_steps, n_regions)))
    seconds = base[None, None, :] * rep_factor[:, None, None] * run * cell
    work = np.array([model.counters[c] * effect.get(c, 1.0) for c in model.counters])
    wiggle = 1.0 + rng.normal(0.0, 0.002, size=(reps, len(model.counters)))
    wiggle[:, list(model.counters).index("kernel_launches")] = 1.0  # launches are exact
    return seconds, np.round(work[None, :] * wiggle)


def runs_of_round(
    rng: np.random.Generator, model: Model, plan: Round, reps: int, metric: str
) -> list[dict[str, Any]]:
    """Baseline then candidate per repetition, as the measurement script prints them."""
    rep_factor = np.exp(
        rng.normal(0.0, model.sigma_repetition, size=reps + plan.extra_baseline_reps)
    )
    sides = {"baseline": simulate_side(rng, model, rep_factor, {})}
    sides["candidate"] = simulate_side(rng, model, rep_factor[:reps], plan.effect)
    runs = []
    for rep in range(reps + plan.extra_baseline_reps):
        for side, (seconds, counts) in sides.items():
            status = "ok" if side == "baseline" else _candidate_status(plan, rep, reps)
            if status == "ok":
                runs.append(_run(model, side, rep, seconds[rep], counts[rep], metric))
            elif status == "failed":
                runs.append({"side": side, "repetition": rep, "status": "failed"})
    return runs


def _candidate_status(plan: Round, rep: int, reps: int) -> str | None:
    """None: no candidate run (an unpaired baseline repetition)."""
    if rep >= reps:
        return None
    failed = not plan.candidate_ran or rep in plan.failed_candidate_reps
    return "failed" if failed else "ok"


def _run(
    model: Model, side: str, rep: int, seconds: np.ndarray, counts: np.ndarray, metric: str
) -> dict[str, Any]:
    total = float(seconds.sum())
    cells = {
        step: {region: round(float(seconds[i, j]), 7) for j, region in enumerate(model.regions)}
        for i, step in enumerate(model.steps)
    }
    breakdown = cells["all"] if model.steps == ("all",) else cells
    value = round(total, 6) if metric.endswith("seconds") else round(TOKENS / total, 1)
    return {
        "side": side,
        "repetition": rep,
        "status": "ok",
        "metric": value,
        "breakdown": breakdown,
        "counters": {c: int(v) for c, v in zip(model.counters, counts, strict=True)},
    }


TOKENS = 16 * 512  # tokens served per run of the throughput campaign

LLAMA = Model(
    steps=("decode-0", "decode-1", "decode-2", "decode-3"),
    regions={"attention": 0.0010, "mlp": 0.0050, "sampling": 0.0025, "comm": 0.0015},
    counters={"kernel_launches": 4000, "dram_bytes": 4.0e9},
)
LLAMA_ROUNDS = (
    Round(
        "r001",
        "fused-mlp-gemm",
        {"mlp": 0.86, "kernel_launches": 0.9, "dram_bytes": 0.93},
        _expect(
            "Fusing the two MLP GEMMs with the activation removes a launch and a "
            "round trip of the intermediate through DRAM",
            region__mlp="decrease",
            counter__kernel_launches="decrease",
            counter__dram_bytes="decrease",
            region__sampling="unchanged",
        ),
        failed_candidate_reps=(4,),
    ),
    Round(
        "r002",
        "flash-decode-attention",
        {"attention": 0.7, "kernel_launches": 1.25},
        _expect(
            "Split-K flash decoding needs fewer kernel launches per layer",
            region__attention="decrease",
            counter__kernel_launches="decrease",
            region__sampling="unchanged",
        ),
        extra_baseline_reps=1,
    ),
    Round(
        "r003",
        "rmsnorm-prologue",
        {"attention": 0.97},
        _expect(
            "Folding RMSNorm into the attention prologue saves a little attention time",
            region__attention="decrease",
            region__sampling="unchanged",
        ),
    ),
    Round(
        "r004",
        "async-allreduce",
        {"comm": 1.35, "kernel_launches": 1.05},
        _expect(
            "Overlapping the all-reduce with the MLP hides communication",
            region__comm="decrease",
            counter__kernel_launches="unchanged",
            region__sampling="unchanged",
        ),
    ),
    Round("r005", "top-k-sampling-kernel", {"sampling": 0.9}),
    Round(
        "r006",
        "cuda-graphs",
        {},
        _expect(
            "Capturing the decode step in a CUDA graph removes launch overhead",
            counter__kernel_launches="decrease",
            region__sampling="unchanged",
        ),
        status="failed",
        candidate_ran=False,
    ),
    Round(
        "r007",
        "kv-cache-int8",
        {"attention": 0.95, "dram_bytes": 0.88},
        _expect(
            "An int8 KV cache halves the bytes read by attention",
            counter__dram_bytes="decrease",
            region__attention="decrease",
            region__sampling="unchanged",
        ),
    ),
)

BERT = Model(
    steps=("all",),
    regions={"tokenize": 0.030, "encoder": 0.120, "pooling": 0.015, "postprocess": 0.010},
    counters={"kernel_launches": 2400, "h2d_bytes": 6.0e7},
    sigma_repetition=0.02,
    sigma_run=0.02,
)
BERT_ROUNDS = (
    Round(
        "b001",
        "dynamic-batching",
        {"encoder": 0.9, "kernel_launches": 0.8},
        _expect(
            "Batching requests dynamically runs fewer, larger encoder kernels",
            region__encoder="decrease",
            counter__kernel_launches="decrease",
            region__tokenize="unchanged",
        ),
    ),
    Round(
        "b002",
        "fp16-pooling",
        {"pooling": 0.8},
        _expect(
            "Pooling in fp16 halves its memory traffic",
            region__pooling="decrease",
            region__tokenize="unchanged",
        ),
    ),
    Round(
        "b003",
        "pinned-host-buffers",
        {"tokenize": 0.97, "h2d_bytes": 1.0},
        _expect(
            "Pinned buffers speed the host-to-device copy without moving more bytes",
            region__postprocess="decrease",
            counter__h2d_bytes="unchanged",
            region__tokenize="unchanged",
        ),
    ),
    Round("b004", "sequence-packing", {"encoder": 1.08, "h2d_bytes": 0.85}),
)


def write_rounds(
    rng: np.random.Generator,
    folder: Path,
    model: Model,
    rounds: tuple[Round, ...],
    reps: int,
    metric: str,
    start: datetime,
) -> None:
    for number, plan in enumerate(rounds, start=1):
        started = start + timedelta(minutes=30 * number)
        attempt: dict[str, Any] = {
            "attempt_id": plan.attempt_id,
            "round": number,
            "candidate": plan.candidate,
            "baseline": "main@3f2a9c1",
            "status": plan.status,
            "started_at": _rfc3339(started),
        }
        if plan.mechanism is not None:
            attempt["declared_at"] = _rfc3339(started - timedelta(minutes=2))
        write_attempt(
            folder, attempt, runs_of_round(rng, model, plan, reps, metric), mechanism=plan.mechanism
        )


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def main(out: Path = OUT) -> None:
    rng = np.random.Generator(np.random.PCG64(SEED))
    campaigns = (
        (
            "llama-decode-2026-11",
            {"name": "e2e_seconds", "better": "lower"},
            {"seed": 11},
            LLAMA,
            LLAMA_ROUNDS,
            10,
            datetime(2026, 11, 1, 10, 0, tzinfo=UTC),
        ),
        (
            "bert-serving-throughput",
            {"name": "tokens_per_second", "better": "higher"},
            {"decision": "paired", "seed": 3},
            BERT,
            BERT_ROUNDS,
            8,
            datetime(2026, 11, 3, 9, 0, tzinfo=UTC),
        ),
    )
    for cid, metric, policy, model, rounds, reps, start in campaigns:
        shutil.rmtree(out / cid, ignore_errors=True)
        folder = write_campaign(out, cid, created_at=_rfc3339(start), metric=metric, policy=policy)
        write_rounds(rng, folder, model, rounds, reps, metric["name"], start)
    print(f"wrote {len(campaigns)} campaigns to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
