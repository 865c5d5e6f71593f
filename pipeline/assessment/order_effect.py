"""The order effect of contract §12 (report only): does the side that runs first in a repetition
change the metric's paired log-ratio? Welch's interval on the two groups of pairs.

A constant position effect moves ``x`` one way in one group and the other way in the other; a
balanced order cancels it in the paired estimate, and ``order_bias`` says it was there.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import polars as pl

from pipeline.assessment.quantities import ATTEMPT, PairFrames, pairs

OrderReason = Literal["not_applicable", "no_order", "too_few_per_order"]
COLUMNS = {
    "order_effect": pl.Float64,
    "order_effect_low": pl.Float64,
    "order_effect_high": pl.Float64,
    "order_bias": pl.Boolean,
    "order_effect_reason": pl.String,
}


def _groups(frames: PairFrames, samples: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt with metric pairs: the log-ratios of each group (sorted, so sums do not
    depend on row order) and whether a log-ratio or an order is missing."""
    on = [*ATTEMPT, "repetition"]
    baseline_first = pl.col("baseline_first")
    return (
        frames.pairs.lazy()
        .filter(pl.col("quantity") == "metric")
        .join(pairs(samples).select(*on, "baseline_first"), on=on, how="left")
        .group_by(ATTEMPT)
        .agg(
            pl.col("x").is_null().any().alias("undefined"),
            baseline_first.is_null().any().alias("unordered"),
            pl.col("x").filter(baseline_first).sort().alias("xb"),
            pl.col("x").filter(~baseline_first).sort().alias("xc"),
        )
    )


def _welch(frame: pl.DataFrame) -> pl.DataFrame:
    """exp(diff) and Welch's interval for rows with xb, xc (>= 2 each) and confidence."""
    from scipy.special import stdtrit  # scipy.stats.t.ppf's own function, lighter to import

    def side(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        values = frame[name]
        n = values.list.len().cast(pl.Float64).to_numpy()
        return n, values.list.mean().to_numpy(), values.list.var(ddof=1).to_numpy() / n

    n_b, mean_b, v_b = side("xb")
    n_c, mean_c, v_c = side("xc")
    diff = mean_b - mean_c
    se = np.sqrt(v_b + v_c)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = se**4 / (v_b**2 / (n_b - 1) + v_c**2 / (n_c - 1))
        alpha = 1.0 - frame["confidence"].to_numpy()
        half = np.where(se > 0, stdtrit(df, 1 - alpha / 2) * se, 0.0)
    with np.errstate(over="ignore"):
        low, high = np.exp(diff - half), np.exp(diff + half)
        return frame.select(ATTEMPT).with_columns(
            pl.Series("order_effect", np.exp(diff)),
            pl.Series("order_effect_low", low),
            pl.Series("order_effect_high", high),
            pl.Series("order_bias", (low > 1) | (high < 1)),
        )


def order_effects(
    attempts: pl.LazyFrame, samples: pl.LazyFrame, frames: PairFrames, campaigns: pl.LazyFrame
) -> pl.DataFrame:
    """One row per attempt: ATTEMPT + the five order-effect columns."""
    reason = (
        pl.when(pl.col("undefined").is_null() | pl.col("undefined"))
        .then(pl.lit("not_applicable"))
        .when(pl.col("unordered"))
        .then(pl.lit("no_order"))
        .when((pl.col("xb").list.len() < 2) | (pl.col("xc").list.len() < 2))
        .then(pl.lit("too_few_per_order"))
    )
    rows = (
        attempts.select(ATTEMPT)
        .join(_groups(frames, samples), on=ATTEMPT, how="left")
        .join(campaigns.select("campaign_id", "confidence"), on="campaign_id")
        .with_columns(reason.alias("order_effect_reason"))
        .collect()
    )
    due = rows.filter(pl.col("order_effect_reason").is_null())
    schema = {"campaign_id": pl.String, "attempt_id": pl.String, **COLUMNS}
    computed = _welch(due) if due.height else pl.DataFrame(schema=schema)
    return (
        rows.select(*ATTEMPT, "order_effect_reason")
        .join(computed.drop("order_effect_reason", strict=False), on=ATTEMPT, how="left")
        .select([pl.col(k).cast(v) for k, v in schema.items()])
    )
