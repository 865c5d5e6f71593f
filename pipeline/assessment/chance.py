"""How often one round would PASS if the candidate were the baseline itself: the per-round
false-PASS rate a campaign's PASSes are read against (docs/contract.md §14).

The rate depends on the design (the decision rule, the interval method, the confidence, the gate,
the pairs of the round) and on the machine's noise, measured on the campaign's own rounds:

- ``spread``: the standard deviation of the metric's per-pair log-ratio within a round, pooled
  over rounds (``sqrt(sum((n_i - 1) s_i^2) / sum(n_i - 1))``, as ``plan`` pools it): rounds compare
  different candidates, so their means differ, but the noise of a pair is the machine's;
- ``side_spread``: the standard deviation of ``ln(metric)`` of one side within a round, pooled
  over both sides and the rounds (the median rule compares the sides' medians, unpaired).

Paired rule, a fixed round of ``n`` pairs: identical code has a true mean log-ratio of 0, so the
statistic ``(m - ln g) / (s / sqrt(n))`` is noncentral t with ``n - 1`` degrees of freedom and
noncentrality ``-ln(g) sqrt(n) / spread`` (normal log-ratios), and the round PASSes when it
reaches ``k(n)`` (``pipeline.assessment.power.critical``: ``t_{n-1}(1 - a/2)``, or the percentile
interval's ``z sqrt((n-1)/n)``). Gate 0 gives ``a/2`` exactly for the t methods; a gate lowers
it. A round stopped when decided (``--until-decided``) is the plan's simulation of that rule at a
true gain of 0 (``power.sequential_pairs``).

Median rule: no closed form. Runs are modelled as ``ln y = a_r + e``: a per-repetition term
shared by both sides (variance ``side_spread^2 - spread^2 / 2``, at least 0) and a per-run term
(variance ``spread^2 / 2``); ``SIMULATIONS`` rounds of identical sides are drawn with a fixed seed
and the median rule (``improvement_pct > 0`` and ``>= gate``) applied to each.

The explanation gate (``require_explanation``) only ever turns a PASS into something else, and
identical code seldom confirms a declared mechanism (calibrate: at most 0.1%), so with it these
rates are upper bounds.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import polars as pl

from pipeline.assessment.power import critical, sequential_pairs
from pipeline.assessment.quantities import _group_sum
from pipeline.assessment.sequential import Schedule

ATTEMPT = ["campaign_id", "attempt_id"]

FloatArray = npt.NDArray[np.float64]
SIMULATIONS = 4000
"""Simulated identical rounds per design of the median rule (a rate of 25% to about +-0.7
points)."""
SEED = 0


# -- the noise of each attempt (report-only columns of assessments) ----------------------------
def _variances(frame: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """Per group of ``keys``: ``n`` and the variance (ddof 1) of column ``y``, from sums added
    in sorted order (``quantities._group_sum``), so the bits do not depend on the batch."""
    counts = frame.group_by(keys).agg(pl.len().alias("n"))
    means = _group_sum(frame, keys, total=pl.col("y")).join(counts, on=keys)
    means = means.select(*keys, "n", (pl.col("total") / pl.col("n")).alias("mean"))
    squares = _group_sum(
        frame.join(means, on=keys), keys, ss=(pl.col("y") - pl.col("mean")) ** 2
    ).select(*keys, "ss")
    return means.join(squares, on=keys).select(
        *keys, "n", pl.when(pl.col("n") >= 2).then(pl.col("ss") / (pl.col("n") - 1)).alias("v")
    )


def metric_spreads(pairs: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt: ``metric_spread``, the standard deviation (ddof 1) of the metric's finite
    per-pair log-ratios (the pairs frame of ``quantities.pair_frames``); null under 2."""
    x = pairs.filter((pl.col("quantity") == "metric") & pl.col("x").is_finite())
    return _variances(x.select(*ATTEMPT, pl.col("x").alias("y")), ATTEMPT).select(
        *ATTEMPT, pl.col("v").sqrt().alias("metric_spread")
    )


def side_spreads(samples: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt: ``side_spread``, the standard deviation of ``ln(metric)`` over one side's ok
    runs, pooled over both sides (weights n - 1); null when no side has 2 ok runs with a metric
    > 0 (a metric of 0 has no logarithm: such runs are left out)."""
    ok = samples.filter((pl.col("status") == "ok") & (pl.col("metric") > 0))
    y = ok.select(*ATTEMPT, "side", pl.col("metric").log().alias("y"))
    per_side = _variances(y, [*ATTEMPT, "side"]).filter(pl.col("n") >= 2)
    df = pl.col("n") - 1
    # two sides: their sum is the same in either order (addition of two terms commutes)
    return per_side.group_by(ATTEMPT).agg(
        ((pl.col("v") * df).sum() / df.sum()).sqrt().alias("side_spread")
    )


def pooled(sd: npt.ArrayLike, df: npt.ArrayLike) -> float | None:
    """``sqrt(sum(df s^2) / sum(df))`` over the entries with ``df > 0`` and a finite ``s``;
    None when there is none."""
    s, d = np.asarray(sd, dtype=np.float64), np.asarray(df, dtype=np.float64)
    keep = np.isfinite(s) & (d > 0)
    if not keep.any():
        return None
    return float(math.sqrt(np.sum(d[keep] * s[keep] ** 2) / np.sum(d[keep])))


def paired_rates(
    n: npt.ArrayLike, spread: npt.ArrayLike, *, gate_pct: float, method: str, confidence: float
) -> FloatArray:
    """P(PASS) of fixed rounds of ``n`` pairs by the paired rule when the code is identical
    (module docstring); 0 where ``n < 2``."""
    from scipy.special import nctdtr, ndtr  # not scipy.stats: 0.5 s of every assess's start-up

    pairs = np.asarray(n, dtype=np.float64)
    sd = np.broadcast_to(np.asarray(spread, dtype=np.float64), pairs.shape)
    usable = (pairs >= 2) & (sd > 0) & np.isfinite(sd)
    safe_n, safe_sd = np.where(usable, pairs, 2.0), np.where(usable, sd, 1.0)
    ncp = -math.log1p(gate_pct / 100) * np.sqrt(safe_n) / safe_sd
    k = critical(safe_n, method, confidence)
    # P(T > k) for T ~ t(n - 1, ncp) is P(-T < -k), -T ~ t(n - 1, -ncp): the lower tail, with no
    # 1 - cdf cancellation (a false-PASS rate of 1e-20 stays 1e-20, not 0, which reads "none")
    rate = np.asarray(nctdtr(safe_n - 1, -ncp, -k), dtype=np.float64)
    # the noncentral t is NaN for a huge noncentrality (a spread of rounding noise): the normal
    # approximation is exact there to the digits shown
    rate = np.where(np.isnan(rate), ndtr(ncp - k), rate)
    return np.where(usable, rate, 0.0)


def sequential_rate(spread: float, *, gate_pct: float, plan: Schedule, confidence: float) -> float:
    """P(PASS) of a round stopped when decided (``round --until-decided``) when the code is
    identical: the plan's simulation of that round's rules at a true gain of 0."""
    if not (spread > 0 and math.isfinite(spread)):
        return 0.0
    rng = np.random.Generator(np.random.PCG64(SEED))
    gate = 1 + gate_pct / 100
    won, _, _ = sequential_pairs(0.0, gate, spread, plan=plan, confidence=confidence, rng=rng)
    return won


def median_rate(n: int, spread: float, side_spread: float, *, gate_pct: float) -> float:
    """P(PASS) of the median rule with ``n`` runs a side when the code is identical (module
    docstring: a simulation with a fixed seed); 0 when ``n < 1``."""
    if n < 1 or not (math.isfinite(spread) and math.isfinite(side_spread)):
        return 0.0
    run_var = spread**2 / 2
    shared = math.sqrt(max(side_spread**2 - run_var, 0.0))
    rng = np.random.Generator(np.random.PCG64(SEED))
    z = rng.standard_normal((3, SIMULATIONS, n))
    log_b = shared * z[0] + math.sqrt(run_var) * z[1]
    log_c = shared * z[0] + math.sqrt(run_var) * z[2]
    med_b, med_c = np.median(np.exp(log_b), axis=1), np.median(np.exp(log_c), axis=1)
    pct = (med_b - med_c) / med_b * 100
    return float(np.mean((pct > 0) & (pct >= gate_pct)))
