"""The sequential study: rounds that stop when they are decided, against fixed-n rounds, on the
metric log-ratios of calibrate's simulation model.

A stopping rule needs nothing but the per-pair log-ratio of the metric, so each cell simulates
``attempts`` sequences of ``max_pairs`` pairs at once (``draw_runs``, scenario ``aa``, with the
candidate's whole run faster by the true gain: ``x + ln(ratio)`` exactly) and applies every
design to the whole batch, look by look: the interval of every attempt at a look is one
``method_intervals`` call (the assess code), the verdict is assess's paired rule
(``verdicts.paired_rule``) over a frame of every (look, attempt), and futility is
``sequential.futile_mask``. No attempt goes through ingest and assess one by one.

Designs:
- ``sequential_t``: looks at ``first_look``, every ``look_every`` pairs, up to ``max_pairs``;
  stop at the first PASS, at futility, or at the maximum (what ``--until-decided`` does);
- ``sequential_t, no futility``: the same without the futility rule (what the rule costs);
- ``peek <method>``: the same looks with a fixed-n method, stopping at the first PASS (the
  mistake the sequential method exists for), for gains of 0 and the gate only;
- ``fixed <n> student_t``: one look at ``n`` pairs (the calibrated fixed-n design).

True gains are multiples of the gate: ratio ``1 + k * min_improvement_pct / 100``; ``k = 1`` is
the worst case for a false PASS (a smaller true gain passes less often). Randomness: one
generator per noise family, ``campaign_generator(seed, "aa", max_pairs, noise)``; every gain and
design reads the same sequences (common random numbers), so differences between designs are
not noise between draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from pipeline.assessment import sequential, verdicts
from pipeline.assessment.intervals import Method, method_intervals
from pipeline.assessment.sequential import Schedule
from pipeline.errors import UsageError
from pipeline.study.output import noise_sections, pct, render_study
from pipeline.study.simulate import NOISES, Model, Noise, campaign_generator, draw_runs

FloatArray = npt.NDArray[np.float64]
DEFAULT_GAINS: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0)
DEFAULT_PLAN = Schedule()
"""The recorder's default plan of looks (SCHEDULE_DEFAULTS)."""
DEFAULT_FIXED: tuple[int, ...] = (10, 20)
PEEKED: tuple[Method, ...] = sequential.FIXED_N
"""The methods peeked at (``sequential.PEEKING_FALSE_PASS`` holds their rates)."""
PEEK_GAINS: tuple[float, ...] = (0.0, 1.0)
COLUMNS = [
    "noise",
    "gain",
    "ratio",
    "design",
    "attempts",
    "pass_rate",
    "coverage",
    "pairs_mean",
    "pairs_median",
    "pairs_p90",
    "futility_rate",
    "max_rate",
]


@dataclass(frozen=True)
class Design:
    """A way to run a round: its looks, its interval method (and ``critical`` for
    ``sequential_t``), and whether the futility rule may stop it."""

    name: str
    looks: tuple[int, ...]
    method: Method
    critical: float | None = None
    futility: Schedule | None = None
    """The plan the futility rule reads; None: no futility."""


@dataclass(frozen=True)
class SequentialStudy:
    seed: int
    attempts: int
    plan: Schedule
    fixed: tuple[int, ...]
    gains: tuple[float, ...]
    noises: tuple[Noise, ...]
    model: Model
    rows: pl.DataFrame


def designs(plan: Schedule, fixed: Sequence[int], confidence: float) -> list[Design]:
    looks, c = plan.looks, plan.boundary(confidence)
    found = [
        Design("sequential_t", looks, "sequential_t", c, futility=plan),
        Design("sequential_t, no futility", looks, "sequential_t", c),
    ]
    found += [Design(f"peek {m}", looks, m) for m in PEEKED]
    return found + [Design(f"fixed {n} student_t", (n,), "student_t") for n in fixed]


def metric_log_ratios(
    model: Model, noise: Noise, pairs: int, attempts: int, seed: int
) -> FloatArray:
    """(pairs, attempts): ln(baseline / candidate) of the metric of A/A attempts."""
    rng = campaign_generator(seed, "aa", pairs, noise)
    metric = draw_runs(model, "aa", pairs, attempts, rng, noise=noise).metric
    return np.log(metric[:, :, 0] / metric[:, :, 1]).T


def _decisions(x: FloatArray, design: Design, model: Model) -> pl.DataFrame:
    """Per (look, attempt): the interval at that look and whether it PASSes or is futile."""
    frames = []
    gate = 1 + model.min_improvement_pct / 100
    for look in design.looks:  # over the planned looks (tens), not attempts
        part = x[:look]
        got = method_intervals(
            part,
            design.method,
            resamples=model.resamples,
            seed=model.policy_seed,
            confidence=model.confidence,
            critical=design.critical,
        )
        futile = np.zeros(x.shape[1], dtype=bool)
        if design.futility is not None:
            futile = sequential.futile_mask(
                look,
                part.mean(axis=0),
                part.std(axis=0, ddof=1),
                gate=gate,
                plan=design.futility,
                confidence=model.confidence,
            )
        frames.append(
            pl.DataFrame(
                {
                    "look": look,
                    "attempt": np.arange(x.shape[1]),
                    "paired_low": got.low,
                    "paired_high": got.high,
                    "futile": futile,
                }
            )
        )
    verdict, _ = verdicts.paired_rule()
    return (
        pl.concat(frames)
        .with_columns(
            status=pl.lit("completed"),
            metric_status=pl.lit("ok"),
            metric_reason=pl.lit(None, pl.String),
            min_improvement_pct=pl.lit(model.min_improvement_pct),
        )
        .with_columns(passed=verdict == "PASS")
    )


def stops(x: FloatArray, design: Design, model: Model, ratio: float) -> pl.DataFrame:
    """Per attempt (column of ``x``): where ``design`` stops it — the first look that PASSes or
    is futile, else the last — with the interval there (``paired_low``, ``paired_high``),
    ``passed``, ``futility``, ``at_max`` and ``covered`` (the interval contains ``ratio``)."""
    stop = pl.col("passed") | pl.col("futile") | (pl.col("look") == design.looks[-1])
    return (
        _decisions(x, design, model)
        .filter(stop)
        .sort("attempt", "look")
        .group_by("attempt", maintain_order=True)
        .first()
        .with_columns(
            covered=(pl.col("paired_low") <= ratio) & (pl.col("paired_high") >= ratio),
            futility=pl.col("futile") & ~pl.col("passed"),
            at_max=~pl.col("passed") & ~pl.col("futile"),
        )
    )


def _row(stops: pl.DataFrame) -> dict[str, float]:
    looks = stops["look"].to_numpy().astype(np.float64)
    return {
        "attempts": stops.height,
        "pass_rate": float(stops["passed"].mean()),  # type: ignore[arg-type]
        "coverage": float(stops["covered"].mean()),  # type: ignore[arg-type]
        "pairs_mean": float(looks.mean()),
        "pairs_median": float(np.median(looks)),
        "pairs_p90": float(np.quantile(looks, 0.9, method="linear")),
        "futility_rate": float(stops["futility"].mean()),  # type: ignore[arg-type]
        "max_rate": float(stops["at_max"].mean()),  # type: ignore[arg-type]
    }


def check(plan: Schedule, fixed: Sequence[int], gains: Sequence[float], attempts: int) -> None:
    if not fixed or any(n < 2 or n > plan.max_pairs for n in fixed):
        raise UsageError(f"--fixed-pairs: each must be between 2 and --max-pairs, got {fixed}")
    if not gains or any(not math.isfinite(g) or g < 0 for g in gains):
        raise UsageError(f"--gains: multiples of the gate, each >= 0, got {list(gains)}")
    if attempts < 1:
        raise UsageError(f"--attempts: must be >= 1, got {attempts}")


def sequential_study(
    *,
    attempts: int = 2000,
    seed: int = 0,
    noises: Sequence[Noise] = NOISES,
    plan: Schedule = DEFAULT_PLAN,
    fixed: Sequence[int] = DEFAULT_FIXED,
    gains: Sequence[float] = DEFAULT_GAINS,
    model: Model | None = None,
) -> SequentialStudy:
    """Every design under every noise family and true gain; one row per (noise, gain, design)."""
    model = model or Model()
    model.check()
    check(plan, fixed, gains, attempts)
    rows = []
    for noise in noises:
        base = metric_log_ratios(model, noise, plan.max_pairs, attempts, seed)
        for gain in gains:
            ratio = 1 + gain * model.min_improvement_pct / 100
            x = base + math.log(ratio)
            for design in designs(plan, fixed, model.confidence):
                if design.name.startswith("peek") and gain not in PEEK_GAINS:
                    continue
                rows.append(
                    {
                        "noise": noise,
                        "gain": gain,
                        "ratio": ratio,
                        "design": design.name,
                        **_row(stops(x, design, model, ratio)),
                    }
                )
    frame = pl.DataFrame(rows).select(COLUMNS)
    return SequentialStudy(
        seed, attempts, plan, tuple(fixed), tuple(gains), tuple(noises), model, frame
    )


# -- output -------------------------------------------------------------------------------------
_HEAD = (
    f"{'gain':>5}  {'design':<26}  {'PASS':>6}  {'coverage':>8}  {'pairs mean':>10}  "
    f"{'median':>6}  {'p90':>5}  {'futility':>8}  {'at max':>6}"
)


def render(study: SequentialStudy, fmt: str) -> str:
    """The study as a table (or csv, json); fixed digits, nothing that varies between runs."""
    rounded = study.rows.with_columns(pl.col(COLUMNS[5:]).round(4))
    parameters = {
        "seed": study.seed,
        "attempts": study.attempts,
        "plan": [study.plan.first_look, study.plan.look_every, study.plan.max_pairs],
        "fixed": list(study.fixed),
    }
    return render_study(rounded, fmt, parameters, lambda: _table(study))


def _table(study: SequentialStudy) -> str:
    m = study.model
    plan = study.plan
    lines = [
        f"calibrate --sequential: seed {study.seed}, {study.attempts} attempts per noise, gain "
        "and design",
        f"looks every {plan.look_every} pairs from {plan.first_look} to {plan.max_pairs} "
        f"(sequential_t c = {plan.boundary(m.confidence):.6f}); gate {m.min_improvement_pct:g}%,"
        f" confidence {m.confidence:g}, resamples {m.resamples}, seed {m.policy_seed}",
        *noise_sections(study.rows, study.noises, _HEAD, _line),
        "",
        "gain: the true gain as a multiple of the gate (0: A/A; 1: exactly the gate, where a",
        "  PASS is a false PASS); PASS: share of attempts that stopped with PASS; coverage: the",
        "  interval at the stop contains the true ratio; pairs: pairs at the stop; futility, at",
        "  max: shares that stopped for futility, or at the last look without PASS.",
    ]
    return "\n".join(lines) + "\n"


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['gain']:>4g}x  {row['design']:<26}  {pct(row['pass_rate']):>6}  "
        f"{pct(row['coverage']):>8}  {row['pairs_mean']:>10.1f}  "
        f"{row['pairs_median']:>6g}  {row['pairs_p90']:>5g}  "
        f"{pct(row['futility_rate']):>8}  {pct(row['max_rate']):>6}"
    )
