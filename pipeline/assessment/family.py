"""A verdict per benchmark with the suite's error held: Bonferroni Student-t simultaneous
intervals over an attempt's family (contract §15).

Under the policy ``decide: regions`` an attempt's **family** is its metric and every raw region
(each benchmark of a suite, reference regions included). Each member gets the interval
``exp(mean ∓ c · s / √n)`` of its paired log-ratios with ``c`` taken at the per-member level
``α / m`` (``m`` the family's size), so by Bonferroni's inequality the chance that *any* member of
an identical-code comparison is called improved or regressed is at most ``α``, whatever the
correlation shared load puts between benchmarks of one run. Why this method and not a resampled
max-|t| is in docs/assess.md: it is exact per member under normal log-ratios at every n ≥ 2,
valid under any correlation, closed form (reproducible, no resamples) and combines directly with
the sequential boundary (``pipeline.assessment.sequential``) of a round that stops when decided.

Two stages, so that a verdict can be re-read under another gate or margin without recomputing:
``family_intervals`` (the numbers, stored in table ``benchmarks``) and ``with_verdicts`` (the
rule of contract §15 as Polars expressions, applied to stored and fresh rows alike).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from pipeline.assessment import sequential
from pipeline.assessment.bootstrap import FloatArray, mean_in_order
from pipeline.assessment.intervals import student_t_bounds
from pipeline.assessment.quantities import SCHEDULE
from pipeline.contract.schemas import table

QUANTITY = ["campaign_id", "attempt_id", "quantity", "name"]
MEMBERS = ("metric", "region")
"""The quantities of a family (contract §4.3's names): the metric and every raw region."""
DECIDES_REGIONS = "regions"
"""The policy value ``decide: regions`` (campaign.schema.json)."""

Method = Literal["bonferroni_t", "sequential_bonferroni_t"]
BONFERRONI_T: Method = "bonferroni_t"
SEQUENTIAL_BONFERRONI_T: Method = "sequential_bonferroni_t"
Verdict = Literal["improved", "regressed", "unchanged", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = ("improved", "regressed", "unchanged", "inconclusive")
Reason = Literal["too_few_pairs", "zero_baseline", "zero_candidate"]
DATA_REASONS: tuple[Reason, ...] = ("zero_baseline", "zero_candidate", "too_few_pairs")
"""Why a member has no interval, from its pairs; checked in this order (contract §4.3's order).
A member without such a reason of an attempt that did not complete is ``attempt_<status>``."""

Plan = tuple[int, int, int]
"""A round's planned looks: (first_look, look_every, max_pairs)."""


@dataclass(frozen=True)
class FamilyIntervals:
    """Per member (column of x): exp(mean x), the simultaneous interval, and its constant c."""

    estimate: FloatArray
    low: FloatArray
    high: FloatArray
    critical: float


def critical_value(n: int, family_size: int, confidence: float, plan: Plan | None = None) -> float:
    """``c`` for members with ``n`` pairs in a family of ``family_size``: with α = 1 −
    confidence, ``scipy.stats.t.ppf(1 − α / (2 m), n − 1)``; under a round's planned looks,
    ``sequential.boundary(first_look, look_every, max_pairs, 1 − α / m)`` (contract §15)."""
    if n < 2 or family_size < 1:
        raise ValueError(f"a simultaneous interval needs n >= 2 and m >= 1, got {n}, {family_size}")
    alpha = 1.0 - confidence
    if plan is not None:
        return sequential.boundary(*plan, 1.0 - alpha / family_size)
    from scipy import stats

    return float(stats.t.ppf(1.0 - alpha / (2 * family_size), n - 1))


def family_intervals(
    x: npt.ArrayLike, family_size: int, confidence: float, plan: Plan | None = None
) -> FamilyIntervals:
    """The simultaneous intervals of every column of finite ``x`` (n pairs in repetition order,
    Q members of families of ``family_size``): ``exp(mean ∓ c · s / √n)``, ``s`` the standard
    deviation with ddof 1 (``s = 0``: both ends are ``exp(mean)``)."""
    values = np.asarray(x, dtype=np.float64)
    c = critical_value(values.shape[0], family_size, confidence, plan)
    low, high = student_t_bounds(values, confidence, c)
    with np.errstate(over="ignore"):
        estimate = np.exp(mean_in_order(values))
    return FamilyIntervals(estimate, low, high, c)


# -- frames ---------------------------------------------------------------------------------------
def members(summary: pl.DataFrame, campaigns: pl.LazyFrame) -> pl.DataFrame:
    """The family members of the attempts whose campaign decides regions, from assess's summary
    of quantities (``quantities.summarize``): QUANTITY, n_pairs, family_size, the data reason
    (a ``+inf`` pair is ``zero_candidate``), the summary's estimate, the policy's confidence and
    interval, the planned looks and the pairs' x (``xs``)."""
    decide = campaigns.select("campaign_id", pl.col("decide").fill_null("metric"))
    sequential_t = pl.col("interval") == sequential.METHOD
    vanished = pl.col("xs").list.eval(pl.element() == math.inf).list.any().fill_null(False)
    reason = (
        pl.when(pl.col("reason").is_in(["zero_baseline", "zero_candidate"]))
        .then(pl.col("reason"))
        .when(vanished)
        .then(pl.lit("zero_candidate"))
        .otherwise(pl.col("reason"))
    )
    return (
        summary.lazy()
        .filter(pl.col("quantity").is_in(MEMBERS))
        .join(decide, on="campaign_id")
        .filter(pl.col("decide") == DECIDES_REGIONS)
        .with_columns(
            pl.len().over("campaign_id", "attempt_id").cast(pl.Int64).alias("family_size"),
            reason.alias("reason"),
            # the planned looks matter to sequential_t alone (fewer groups for the others)
            *(pl.when(sequential_t).then(pl.col(c)).alias(c) for c in SCHEDULE),
        )
        .collect()
    )


_NUMBERS = {
    "qid": pl.UInt32,
    "estimate": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "critical": pl.Float64,
    "method": pl.String,
}


def _plan(interval: str, first_look: int | None, look_every: int, max_pairs: int) -> Plan | None:
    """The planned looks the constant is taken over: only under ``sequential_t`` with a plan."""
    if interval != sequential.METHOD or first_look is None:
        return None
    return int(first_look), int(look_every), int(max_pairs)


def _intervals(due: pl.DataFrame) -> pl.DataFrame:
    """One ``family_intervals`` call per group of members sharing (n, m, confidence, planned
    looks): its x matrix (n, Q) from the members' lists. Returns _NUMBERS' columns."""
    group = ["n_pairs", "family_size", "confidence", "interval", *SCHEDULE]
    out = [pl.DataFrame(schema=_NUMBERS)]
    for key, part in due.partition_by(group, as_dict=True, maintain_order=True).items():
        n, m, confidence, interval, first_look, look_every, max_pairs = key
        plan = _plan(str(interval), first_look, look_every, max_pairs)
        x = part["xs"].explode().to_numpy().reshape(part.height, int(n)).T
        got = family_intervals(x, int(m), float(confidence), plan)
        method = SEQUENTIAL_BONFERRONI_T if plan is not None else BONFERRONI_T
        out.append(
            pl.DataFrame(
                {
                    "qid": part["qid"],
                    "estimate": got.estimate,
                    "low": got.low,
                    "high": got.high,
                    "critical": np.full(part.height, got.critical),
                    "method": np.full(part.height, method),
                },
                schema=_NUMBERS,
            )
        )
    return pl.concat(out)


def family_table(summary: pl.DataFrame, campaigns: pl.LazyFrame) -> pl.DataFrame:
    """Rows of table ``benchmarks`` (verdicts not yet read: ``verdict`` null) for every attempt
    of ``summary`` whose campaign decides regions."""
    found = members(summary, campaigns)
    due = found.filter(pl.col("reason").is_null()).sort("qid")
    numbers = _intervals(due)
    return (
        table("benchmarks")
        .conform(
            found.lazy()
            .join(numbers.lazy(), on="qid", how="left", suffix="_t")
            .with_columns(
                pl.coalesce("estimate_t", "estimate").alias("estimate"),
                pl.lit(None, dtype=pl.String).alias("verdict"),
            )
        )
        .collect()
    )


# -- verdicts -------------------------------------------------------------------------------------
def verdict_rule(gate_pct: pl.Expr, margin_pct: pl.Expr) -> pl.Expr:
    """contract §15, from the columns ``low`` and ``high``: directional claims first.
    ``regressed`` if high < 1 and high ≤ 1/M; ``improved`` if low > 1 and low ≥ g; else
    ``unchanged`` if 1/M ≤ low and high ≤ M; else ``inconclusive`` (also without an interval),
    with g = 1 + gate_pct/100, M = 1 + margin_pct/100."""
    low, high = pl.col("low"), pl.col("high")
    gate, margin = 1 + gate_pct / 100, 1 + margin_pct / 100
    return (
        pl.when(low.is_null() | high.is_null())
        .then(pl.lit("inconclusive"))
        .when((high < 1) & (high <= 1 / margin))
        .then(pl.lit("regressed"))
        .when((low > 1) & (low >= gate))
        .then(pl.lit("improved"))
        .when((low >= 1 / margin) & (high <= margin))
        .then(pl.lit("unchanged"))
        .otherwise(pl.lit("inconclusive"))
    )


def with_verdicts(rows: pl.LazyFrame, context: pl.LazyFrame) -> pl.LazyFrame:
    """``verdict`` and ``reason`` of table ``benchmarks`` rows under ``context``: one row per
    attempt with ``status``, ``min_improvement_pct`` and ``margin_pct``. A member with a data
    reason is ``inconclusive`` with it; else an attempt that did not complete makes it
    ``inconclusive`` (``attempt_<status>``); else the rule decides (reason null)."""
    data_reason = pl.when(pl.col("reason").is_in(DATA_REASONS)).then(pl.col("reason"))
    not_completed = pl.col("status") != "completed"
    return (
        rows.drop("verdict")
        .join(context, on=["campaign_id", "attempt_id"], how="left")
        .with_columns(data_reason.alias("reason"))
        .with_columns(
            pl.when(pl.col("reason").is_not_null() | not_completed)
            .then(pl.lit("inconclusive"))
            .otherwise(verdict_rule(pl.col("min_improvement_pct"), pl.col("margin_pct")))
            .alias("verdict"),
            pl.when(pl.col("reason").is_null() & not_completed)
            .then(pl.lit("attempt_") + pl.col("status"))
            .otherwise(pl.col("reason"))
            .alias("reason"),
        )
        .select(table("benchmarks").names)
    )
