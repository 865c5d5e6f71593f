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
from pipeline.assessment.quantities import NOT_FINITE, SCHEDULE, out_of_range
from pipeline.assessment.sequential import Schedule
from pipeline.contract.schemas import table

QUANTITY = ["campaign_id", "attempt_id", "quantity", "name"]
MEMBERS = ("metric", "region")
"""The quantities of a family (contract §4.3's names): the metric and every raw region."""
DECIDES_REGIONS = "regions"
"""The policy value ``decide: regions`` (campaign.schema.json)."""

Method = Literal["bonferroni_t", "sequential_bonferroni_t"]
BONFERRONI_T: Method = "bonferroni_t"
SEQUENTIAL_BONFERRONI_T: Method = "sequential_bonferroni_t"
Verdict = Literal["improved", "regressed", "unchanged", "inconclusive", "added", "removed"]
VERDICTS: tuple[Verdict, ...] = (
    "improved",
    "regressed",
    "unchanged",
    "inconclusive",
    "added",
    "removed",
)
ONE_SIDED: tuple[Verdict, ...] = ("added", "removed")
"""A benchmark in no baseline run (``added``) or in no candidate run (``removed``) of an attempt
with pairs: a fact of what ran, not of a ratio, so it has no interval, no place in ``m`` and its
own outcome (a removed benchmark is a lost guard: the gate fails on it, contract §15)."""
Reason = Literal["too_few_pairs", "zero_baseline", "zero_candidate", "not_finite"]
DATA_REASONS: tuple[Reason, ...] = (
    "zero_baseline",
    "zero_candidate",
    "not_finite",
    "too_few_pairs",
)
"""Why a member has no interval, from its pairs; checked in this order (contract §4.3's order).
A member without such a reason of an attempt that did not complete is ``attempt_<status>``.
A member with one cannot be decided for want of data, and fails a ``regression`` or ``change``
gate (pipeline.assessment.gate)."""


@dataclass(frozen=True)
class FamilyIntervals:
    """Per member (column of x): exp(mean x), the simultaneous interval, and its constant c."""

    estimate: FloatArray
    low: FloatArray
    high: FloatArray
    critical: float


def critical_value(
    n: int, family_size: int, confidence: float, plan: Schedule | None = None
) -> float:
    """``c`` for members with ``n`` pairs in a family of ``family_size``: with α = 1 −
    confidence, ``scipy.stats.t.ppf(1 − α / (2 m), n − 1)``; under a round's planned looks,
    §10's ``c_n`` at confidence ``1 − α / m``: ``max(boundary(first_look, look_every,
    max_pairs, 1 − α / m), t.ppf(1 − α / (2 m), n − 1))`` (contract §15)."""
    if n < 2 or family_size < 1:
        raise ValueError(f"a simultaneous interval needs n >= 2 and m >= 1, got {n}, {family_size}")
    alpha = 1.0 - confidence
    if plan is not None:  # contract §10's c_n at the member level: never below t's at n
        return plan.critical(1.0 - alpha / family_size, n)
    from scipy.special import stdtrit  # = scipy.stats.t.ppf, without scipy.stats' import

    return float(stdtrit(n - 1, 1.0 - alpha / (2 * family_size)))


def family_intervals(
    x: npt.ArrayLike, family_size: int, confidence: float, plan: Schedule | None = None
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
    of quantities (``quantities.summarize``): QUANTITY, n_pairs, ``one_sided`` (``added``,
    ``removed``: ONE_SIDED; else null), family_size (the members measured on both sides), the
    data reason (a ``+inf`` pair is ``zero_candidate``), the summary's estimate (null when one
    sided), the policy's confidence and interval, the planned looks and the pairs' x
    (``xs``)."""
    decide = campaigns.select("campaign_id", pl.col("decide").fill_null("metric"))
    sequential_t = pl.col("interval") == sequential.METHOD
    vanished = pl.col("xs").list.eval(pl.element() == math.inf).list.any().fill_null(False)
    paired, on_b, on_c = pl.col("n_pairs") > 0, pl.col("on_baseline"), pl.col("on_candidate")
    one_sided = (
        pl.when(paired & on_b & ~on_c)
        .then(pl.lit("removed"))
        .when(paired & on_c & ~on_b)
        .then(pl.lit("added"))
    )
    reason = (
        pl.when(pl.col("one_sided").is_not_null())
        .then(None)
        .when(pl.col("reason").is_in(["zero_baseline", "zero_candidate"]))
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
        .with_columns(one_sided.alias("one_sided"))
        .with_columns(
            pl.col("one_sided")
            .is_null()
            .sum()
            .over("campaign_id", "attempt_id")
            .cast(pl.Int64)
            .alias("family_size"),
            reason.alias("reason"),
            pl.when(pl.col("one_sided").is_null()).then(pl.col("estimate")).alias("estimate"),
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


def _plan(
    interval: str, first_look: int | None, look_every: int, max_pairs: int
) -> Schedule | None:
    """The planned looks the constant is taken over: only under ``sequential_t`` with a plan."""
    if interval != sequential.METHOD or first_look is None:
        return None
    return Schedule(int(first_look), int(look_every), int(max_pairs))


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
    """Rows of table ``benchmarks`` (verdicts not yet read: ``verdict`` null, except ``added``
    and ``removed``, facts of the runs) for every attempt of ``summary`` whose campaign decides
    regions."""
    found = members(summary, campaigns)
    due = found.filter(pl.col("reason").is_null() & pl.col("one_sided").is_null()).sort("qid")
    numbers = _intervals(due)
    # an interval bound past e^709 (log-ratios spread over hundreds) is no interval
    overflow = out_of_range(pl.col("xs"), "estimate", "low", "high")
    kept = ~pl.col("reason").eq_missing(NOT_FINITE)
    return (
        table("benchmarks")
        .conform(
            found.lazy()
            .join(numbers.lazy(), on="qid", how="left", suffix="_t")
            .with_columns(
                pl.coalesce("estimate_t", "estimate").alias("estimate"),
                pl.col("one_sided").cast(pl.String).alias("verdict"),
            )
            .with_columns(
                pl.when(overflow).then(pl.lit(NOT_FINITE)).otherwise("reason").alias("reason")
            )
            .with_columns(
                pl.when(kept).then(pl.col(c)).alias(c)
                for c in ("estimate", "low", "high", "critical", "method")
            )
        )
        .collect()
    )


# -- verdicts -------------------------------------------------------------------------------------
def verdict_rule(gate_pct: pl.Expr, margin_pct: pl.Expr) -> pl.Expr:
    """contract §15, from the columns ``low`` and ``high``: directional claims first.
    ``regressed`` if high < 1 and high ≤ 1/M; ``improved`` if low > 1 and low ≥ g; else
    ``unchanged`` if 1/M ≤ low and high ≤ M; else ``inconclusive`` (also without an interval
    and with a NaN bound: ``NaN > 1`` is true in Polars), with g = 1 + gate_pct/100,
    M = 1 + margin_pct/100."""
    low, high = pl.col("low"), pl.col("high")
    gate, margin = 1 + gate_pct / 100, 1 + margin_pct / 100
    return (
        pl.when(low.is_null() | high.is_null() | low.is_nan() | high.is_nan())
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
    ``inconclusive`` (``attempt_<status>``); else the rule decides (reason null). ``added`` and
    ``removed`` (ONE_SIDED) stay as they are, whatever the policy or the status."""
    one_sided = pl.col("verdict").is_in(ONE_SIDED)
    data_reason = pl.when(pl.col("reason").is_in(DATA_REASONS)).then(pl.col("reason"))
    not_completed = pl.col("status") != "completed"
    return (
        rows.with_columns(pl.when(one_sided).then(pl.col("verdict")).alias("one_sided"))
        .drop("verdict")
        .join(context, on=["campaign_id", "attempt_id"], how="left")
        .with_columns(data_reason.alias("reason"))
        .with_columns(
            pl.when(pl.col("one_sided").is_not_null())
            .then(pl.col("one_sided"))
            .when(pl.col("reason").is_not_null() | not_completed)
            .then(pl.lit("inconclusive"))
            .otherwise(verdict_rule(pl.col("min_improvement_pct"), pl.col("margin_pct")))
            .alias("verdict"),
            pl.when(pl.col("reason").is_null() & not_completed & pl.col("one_sided").is_null())
            .then(pl.lit("attempt_") + pl.col("status"))
            .otherwise(pl.col("reason"))
            .alias("reason"),
        )
        .select(table("benchmarks").names)
    )


# -- stopping when every member is decided (round --until-decided) -----------------------------
Stop = Literal["decided", "futility"]


def decision_chances(
    n: npt.ArrayLike,
    mean: npt.ArrayLike,
    sd: npt.ArrayLike,
    critical: npt.ArrayLike,
    *,
    max_pairs: int,
    gate_pct: float,
    margin_pct: float,
) -> FloatArray:
    """The predictive probability that a member is decided (regressed, improved or unchanged)
    at ``max_pairs``, given its ``n`` pairs so far (mean log-ratio ``mean``, spread ``sd`` with
    ddof 1), in the spirit of contract §10's futility: ``sd`` taken as known, the final
    half-width is ``h = c · sd / √N`` (``c`` the member's ``critical``, one constant for every
    look) and the final mean is ``Normal(mean, sd² (N − n) / (N n))``. With
    ``ln M = ln(1 + margin_pct / 100)`` and ``ln g = ln(max(1 + gate_pct / 100, 1))``, the final
    mean decides at most ``−ln M − h`` (regressed), at least ``ln g + h`` (improved), or within
    ``[−ln M + h, ln M − h]`` (unchanged); the chance is the normal mass of that union. Where
    the final mean is certain (``sd = 0`` or ``n ≥ N``): 1 if ``mean`` is in it, else 0, with
    the strict halves of ``verdict_rule`` (improved needs ``low > 1``: ``mean > h``; regressed
    ``high < 1``: ``mean < −h``), so a mean exactly on a gate of 0 % is not improved."""
    from scipy.special import ndtr

    n_, mean_, sd_, c_ = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (n, mean, sd, critical))
    )
    final = float(max_pairs)
    half = c_ * sd_ / math.sqrt(final)
    log_margin = math.log1p(margin_pct / 100)
    regressed = -log_margin - half
    improved = math.log(max(1 + gate_pct / 100, 1.0)) + half
    same_low, same_high = -log_margin + half, np.minimum(log_margin - half, improved)
    spread = sd_ * np.sqrt(np.maximum(final - n_, 0.0) / (final * n_))
    with np.errstate(divide="ignore", invalid="ignore"):
        chance = (
            ndtr((regressed - mean_) / spread)
            + (1.0 - ndtr((improved - mean_) / spread))
            + np.maximum(ndtr((same_high - mean_) / spread) - ndtr((same_low - mean_) / spread), 0)
        )
    inside = (
        ((mean_ <= regressed) & (mean_ < -half))
        | ((mean_ >= improved) & (mean_ > half))
        | ((same_low <= mean_) & (mean_ <= same_high))
    )
    return np.where(spread == 0, inside.astype(np.float64), np.minimum(chance, 1.0))


def stop_reason(
    members: pl.DataFrame, *, max_pairs: int, gate_pct: float, margin_pct: float
) -> Stop | None:
    """Whether a round whose attempt has these ``members`` (its rows of table ``benchmarks`` at
    a look) stops: ``decided`` when every member is improved, regressed or unchanged;
    ``futility`` when every undecided member's decision chance (``decision_chances``) is below
    ``sequential.FUTILITY_POWER``, a member without an interval (a vanished benchmark, a zero
    baseline) counting as futile since it is never decided; else None (go on). The chance
    never stops a member that is decided, so it cannot add a false claim: the family's
    intervals cover at every look together (contract §15)."""
    undecided = members.filter(pl.col("verdict") == "inconclusive")
    if undecided.is_empty():
        return "decided"
    with_interval = undecided.filter(pl.col("low").is_not_null() & pl.col("critical").is_not_null())
    n = with_interval["n_pairs"].to_numpy().astype(np.float64)
    low, high = (np.log(with_interval[c].to_numpy()) for c in ("low", "high"))
    critical = with_interval["critical"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = (high - low) / 2 * np.sqrt(n) / critical
    chances = decision_chances(
        n,
        np.log(with_interval["estimate"].to_numpy()),
        sd,
        critical,
        max_pairs=max_pairs,
        gate_pct=gate_pct,
        margin_pct=margin_pct,
    )
    return "futility" if bool(np.all(chances < sequential.FUTILITY_POWER)) else None
