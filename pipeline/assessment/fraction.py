"""The explained fraction of contract §11 (report only): how much of the measured saving the
declared regions account for, per attempt, with a bootstrap interval.

The interval resamples pairs with the paired intervals' index matrix, so the resample means of
every attempt with ``n`` pairs are two matrix products, ``counts @ D / n`` and ``counts @ T / n``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from pipeline.assessment.bootstrap import (
    COUNTS_BYTES,
    fits_whole,
    in_workers,
    linear_quantiles,
    order_positions,
    resample_count_blocks,
    resample_counts,
)
from pipeline.assessment.quantities import (
    ATTEMPT,
    INTERVAL_POLICY,
    Inputs,
    PairFrames,
    _group_sum,
    pair_keys,
)

FractionReason = Literal[
    "not_applicable",
    "too_few_pairs",
    "no_reference_time",
    "all_regions_declared",
    "total_unchanged",
]
COLUMNS = {
    "explained_fraction": pl.Float64,
    "explained_fraction_low": pl.Float64,
    "explained_fraction_high": pl.Float64,
    "explained_fraction_reason": pl.String,
}
_CHUNK_VALUES = 1 << 21
"""Resample means held at once per matrix (16 MiB of float64): bounds memory at any batch size."""
_PIECE_VALUES = 1 << 18
"""Resample means whose quantiles are read at once (2 MiB: they stay in cache meanwhile)."""


def _declared(expectations: pl.LazyFrame) -> pl.LazyFrame:
    """(ATTEMPT, name) of every region declared decrease or increase."""
    return expectations.filter(
        (pl.col("target") == "region") & pl.col("expect").is_in(["decrease", "increase"])
    ).select(*ATTEMPT, "name")


def _with_references(expectations: pl.LazyFrame) -> pl.LazyFrame:
    """Attempts whose mechanism declares at least one reference region."""
    refs = (pl.col("target") == "region") & (pl.col("expect") == "unchanged")
    return expectations.filter(refs).select(ATTEMPT).unique()


def _pairs_without_breakdown(samples: pl.LazyFrame, breakdown: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt: the pairs where at least one of the two runs has no breakdown row."""
    runs = breakdown.select(*ATTEMPT, "side", "repetition").unique()
    both = (
        runs.group_by(*ATTEMPT, "repetition")
        .agg(pl.col("side").n_unique().alias("sides"))
        .filter(pl.col("sides") == 2)
    )
    return (
        pair_keys(samples)
        .join(both, on=[*ATTEMPT, "repetition"], how="anti")
        .group_by(ATTEMPT)
        .agg(pl.len().alias("missing"))
    )


def per_pair(frames: PairFrames, expectations: pl.LazyFrame, samples: pl.LazyFrame) -> pl.LazyFrame:
    """Per pair of every attempt: D and T (0 when no region value exists), the flag
    no_reference_time and whether every region of the pair is declared (then D = T);
    ATTEMPT, repetition, D, T, no_ref, all_declared."""
    refs = _with_references(expectations).with_columns(pl.lit(True).alias("has_refs"))
    evidence = (
        frames.regions.lazy()
        .join(refs, on=ATTEMPT, how="left")
        .filter(
            pl.when(pl.col("has_refs").fill_null(False))
            .then(pl.col("quantity") == "region_normalized")
            .otherwise(pl.col("quantity") == "region")
        )
        .join(
            _declared(expectations).with_columns(pl.lit(True).alias("declared")),
            on=[*ATTEMPT, "name"],
            how="left",
        )
        .with_columns((pl.col("b") - pl.col("c")).alias("d"))
    )
    sums = _group_sum(
        evidence,
        [*ATTEMPT, "repetition"],
        D=pl.when(pl.col("declared").fill_null(False)).then(pl.col("d")).otherwise(0.0),
        T=pl.col("d"),
    )
    flags = evidence.group_by(*ATTEMPT, "repetition").agg(
        (pl.col("flag") == "no_reference_time").any().alias("no_ref"),
        pl.col("declared").fill_null(False).all().alias("all_declared"),
    )
    return (
        pair_keys(samples)
        .join(sums, on=[*ATTEMPT, "repetition"], how="left")
        .join(flags, on=[*ATTEMPT, "repetition"], how="left")
        .with_columns(
            pl.col("D", "T").fill_null(0.0), pl.col("no_ref", "all_declared").fill_null(False)
        )
    )


def _reasons(
    attempts: pl.LazyFrame,
    expectations: pl.LazyFrame,
    samples: pl.LazyFrame,
    breakdown: pl.LazyFrame,
    values: pl.LazyFrame,
    campaigns: pl.LazyFrame,
) -> pl.LazyFrame:
    """Per attempt: n pairs, its interval policy and the reason there is no fraction (or null)."""
    declared = (
        _declared(expectations)
        .select(ATTEMPT)
        .unique()
        .with_columns(pl.lit(True).alias("declares"))
    )
    counts = values.group_by(ATTEMPT).agg(
        pl.len().alias("n"),
        pl.col("no_ref").any().alias("no_ref"),
        pl.col("all_declared").all().alias("all_declared"),
    )
    policy = campaigns.select("campaign_id", "min_pairs", *INTERVAL_POLICY)
    reason = (
        pl.when(~pl.col("declares").fill_null(False) | (pl.col("missing").fill_null(0) > 0))
        .then(pl.lit("not_applicable"))
        .when(pl.col("n") < pl.col("min_pairs"))
        .then(pl.lit("too_few_pairs"))
        .when(pl.col("no_ref"))
        .then(pl.lit("no_reference_time"))
        # every region declared: D = T in every pair, a fraction of 1 by construction
        .when(pl.col("all_declared"))
        .then(pl.lit("all_regions_declared"))
    )
    return (
        attempts.select(ATTEMPT)
        .join(declared, on=ATTEMPT, how="left")
        .join(_pairs_without_breakdown(samples, breakdown), on=ATTEMPT, how="left")
        .join(counts, on=ATTEMPT, how="left")
        .join(policy, on="campaign_id")
        .with_columns(pl.col("n").fill_null(0), pl.col("no_ref", "all_declared").fill_null(False))
        .with_columns(reason.alias("reason"))
    )


def fraction_bounds(
    d: npt.NDArray[np.float64],
    t: npt.NDArray[np.float64],
    *,
    resamples: int,
    seed: int,
    confidence: float,
    counts_bytes: int = COUNTS_BYTES,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """For D and T of shape (n, A), pairs by repetition: low, high of D*/T* and whether the T*
    interval contains 0 (then low and high are NaN). Quantiles are numpy's linear ones, read
    by the bootstrap's exact order-statistic selection (one row per attempt).

    The resample means are the matrix products of blocks of ``_CHUNK_VALUES`` as they always
    were: a product's last bit may depend on the block's shape and on BLAS's threads, so
    these stay as they are. Their quantiles are read in cache-sized pieces by the bootstrap's
    workers (exact order statistics: the same values in any piece). When the count matrix is
    too large to hold (bootstrap.COUNTS_BYTES), each block of attempts draws it again in blocks
    of resamples: memory stays bounded whatever n is."""
    n, width = d.shape
    whole = fits_whole(n, resamples, counts_bytes)
    counts_t = (
        np.ascontiguousarray(resample_counts(n, resamples=resamples, seed=seed).T)
        if whole
        else None
    )
    alpha = 1.0 - confidence
    probs = np.array([alpha / 2, 1 - alpha / 2])
    low, high = np.full(width, np.nan), np.full(width, np.nan)
    unchanged = np.zeros(width, dtype=bool)
    step = max(1, _CHUNK_VALUES // resamples)
    # buffers reused by every block: fresh 16 MiB arrays cost more in page faults than in work
    rows = min(step, width)
    d_buffer, t_buffer = np.empty((rows, resamples)), np.empty((rows, resamples))
    for start in range(0, width, step):
        cols = slice(start, min(start + step, width))
        d_star, t_star = d_buffer[: cols.stop - start], t_buffer[: cols.stop - start]
        if counts_t is not None:
            np.divide(np.matmul(d[:, cols].T, counts_t, out=d_star), n, out=d_star)
            np.divide(np.matmul(t[:, cols].T, counts_t, out=t_star), n, out=t_star)
        else:
            blocks = resample_count_blocks(
                n, resamples=resamples, seed=seed, max_bytes=counts_bytes
            )
            for block, counts in blocks:
                d_star[:, block] = (d[:, cols].T @ counts.T) / n
                t_star[:, block] = (t[:, cols].T @ counts.T) / n
        flat = interval_contains_zero(t_star, probs)
        unchanged[cols] = flat
        due = np.flatnonzero(~flat)
        if due.size:
            low[start + due], high[start + due] = _quantiles(d_star, t_star, due, probs)
    return low, high, unchanged


def interval_contains_zero(
    stat: npt.NDArray[np.float64], probs: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_]:
    """Per row of finite ``stat`` (rows, B): whether ``low <= 0 <= high``, where ``low, high``
    are its linear quantiles at ``probs``. Counting suffices for nearly every row: numpy's
    interpolation between two order statistics never leaves the interval they bound, so
    ``low <= 0`` when the upper of its two order statistics is <= 0 (more than ``above``
    values are), and ``low > 0`` when the lower one is > 0 (at most ``below`` values are <= 0);
    likewise for ``high`` with the values >= 0. Rows where the interpolation decides (0 lies
    between the two order statistics) get their quantiles computed."""
    size = stat.shape[1]
    below, above = order_positions(size, probs)
    nonpositive = np.count_nonzero(stat <= 0, axis=1)
    nonnegative = np.count_nonzero(stat >= 0, axis=1)
    # low <= 0: certainly when > above[0] values are <= 0; undecided when > below[0] are
    low_le = nonpositive > above[0]
    low_open = (nonpositive > below[0]) & ~low_le
    # high >= 0: certainly when s[below[1]] >= 0, i.e. >= size - below[1] values are >= 0
    high_ge = nonnegative >= size - below[1]
    high_open = (nonnegative >= size - above[1]) & ~high_ge
    contains = low_le & high_ge
    open_rows = np.flatnonzero(low_open | high_open)
    if open_rows.size:
        low, high = _quantiles(stat, None, open_rows, probs)
        contains[open_rows] = (low <= 0) & (high >= 0)
    return contains


def _quantiles(
    top: npt.NDArray[np.float64],
    bottom: npt.NDArray[np.float64] | None,
    rows: npt.NDArray[np.intp],
    probs: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """The quantiles (2, len(rows)) of ``top / bottom`` (of ``top`` when ``bottom`` is None) at
    ``rows``, each piece of rows divided and read in cache-sized buffers of one worker."""
    resamples = top.shape[1]
    piece = max(1, _PIECE_VALUES // resamples)
    found = np.empty((2, rows.size))

    def run(share: range) -> None:
        block = np.empty((piece, resamples))
        band = np.empty((piece, resamples), dtype=bool)
        for k in share:
            which = rows[k : k + piece]
            values = block[: which.size]
            if bottom is None:
                np.take(top, which, axis=0, out=values)
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    np.divide(top[which], bottom[which], out=values)
            found[:, k : k + which.size] = linear_quantiles(values, probs, band)

    in_workers(range(0, rows.size, piece), run)
    return found


def _group(part: pl.DataFrame, values: pl.DataFrame) -> pl.DataFrame:
    """The fraction of every attempt of ``part`` (same n, seed, resamples, confidence)."""
    n, seed, resamples, confidence = part.row(0)[-4:]
    long = values.join(part.select(ATTEMPT), on=ATTEMPT, how="semi").sort(*ATTEMPT, "repetition")
    d = long["D"].to_numpy().reshape(part.height, n).T
    t = long["T"].to_numpy().reshape(part.height, n).T
    low, high, unchanged = fraction_bounds(
        d, t, resamples=int(resamples), seed=int(seed), confidence=float(confidence)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = d.mean(axis=0) / t.mean(axis=0)
    keys = long.select(ATTEMPT).gather_every(n)
    return keys.with_columns(
        pl.Series("explained_fraction", np.where(unchanged, np.nan, estimate)).fill_nan(None),
        pl.Series("explained_fraction_low", low).fill_nan(None),
        pl.Series("explained_fraction_high", high).fill_nan(None),
        pl.when(pl.Series(unchanged))
        .then(pl.lit("total_unchanged"))
        .alias("explained_fraction_reason"),
    )


def explained_fractions(inputs: Inputs, frames: PairFrames) -> pl.DataFrame:
    """One row per attempt of ``inputs``: ATTEMPT + the four explained_fraction columns."""
    values = per_pair(frames, inputs.expectations, inputs.samples).collect()
    reasons = _reasons(
        inputs.attempts,
        inputs.expectations,
        inputs.samples,
        inputs.breakdown,
        values.lazy(),
        inputs.campaigns,
    ).collect()
    group = ["n", "seed", "resamples", "confidence"]
    due = reasons.filter(pl.col("reason").is_null()).select(*ATTEMPT, *group).sort(*group, *ATTEMPT)
    computed = [_group(part, values) for part in due.partition_by(group, maintain_order=True)]
    skipped = reasons.filter(pl.col("reason").is_not_null()).select(
        *ATTEMPT, pl.col("reason").alias("explained_fraction_reason")
    )
    schema = {"campaign_id": pl.String, "attempt_id": pl.String, **COLUMNS}
    empty = pl.DataFrame(schema=schema)
    return pl.concat([empty, *computed, skipped], how="diagonal_relaxed").select(
        [pl.col(k).cast(v) for k, v in schema.items()]
    )
