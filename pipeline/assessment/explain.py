"""The mechanical explanation of contract §5: one outcome per declared expectation, read from one
comparison, and the attempt's explanation by first match."""

from __future__ import annotations

from typing import Literal

import polars as pl

from pipeline.assessment.quantities import ATTEMPT, reference_regions
from pipeline.contract.schemas import table

Outcome = Literal[
    "confirmed", "contradicted", "unsupported", "unverifiable", "consistent", "assumed"
]
Explanation = Literal["not_declared", "contradicted", "unsupported", "unverifiable", "explained"]

NOT_OBSERVED = "not_observed"
"""Reason of an `unverifiable` outcome whose region or counter appears in no ok run."""

EXPLANATION_ORDER: tuple[Explanation, ...] = ("contradicted", "unsupported", "unverifiable")


def _evidence() -> pl.Expr:
    """contract §5's evidence column: which comparison quantity an expectation is read from."""
    return (
        pl.when(pl.col("target") == "counter")
        .then(pl.lit("counter"))
        .when(pl.col("expect") == "unchanged")
        .then(pl.lit("region"))
        .when(pl.col("has_refs"))
        .then(pl.lit("region_normalized"))
        .otherwise(pl.lit("region"))
    )


def _outcome() -> pl.Expr:
    opposite = pl.col("expect").replace_strict(
        {"decrease": "increase", "increase": "decrease"}, default=None
    )
    moved = pl.col("direction").is_in(["decrease", "increase"])
    return (
        pl.when(pl.col("status").is_null())
        .then(pl.lit("unverifiable"))
        .when((pl.col("target") == "region") & (pl.col("expect") == "unchanged"))
        .then(pl.lit("assumed"))
        .when(pl.col("status") != "ok")
        .then(pl.lit("unverifiable"))
        .when(pl.col("expect") == "unchanged")
        .then(pl.when(moved).then(pl.lit("contradicted")).otherwise(pl.lit("consistent")))
        .when(pl.col("direction") == pl.col("expect"))
        .then(pl.lit("confirmed"))
        .when(pl.col("direction") == opposite)
        .then(pl.lit("contradicted"))
        .otherwise(pl.lit("unsupported"))
    )


def outcomes(expectations: pl.LazyFrame, comparisons: pl.LazyFrame) -> pl.LazyFrame:
    """Rows of table `outcomes`: every expectation with its evidence, direction and outcome.
    `position` is the expectation's index in mechanism.json."""
    has_refs = reference_regions(expectations).select(ATTEMPT).unique().with_columns(has_refs=True)
    evidence = comparisons.select(
        *ATTEMPT,
        pl.col("quantity").alias("evidence"),
        "name",
        "direction",
        "status",
        pl.col("reason").alias("comparison_reason"),
    )
    return (
        expectations.join(has_refs, on=ATTEMPT, how="left")
        .with_columns(pl.col("has_refs").fill_null(False))
        .with_columns(_evidence().alias("evidence"))
        .join(evidence, on=[*ATTEMPT, "evidence", "name"], how="left")
        .with_columns(_outcome().alias("outcome"))
        .with_columns(
            pl.when(pl.col("status").is_null())
            .then(pl.lit(NOT_OBSERVED))
            .when(pl.col("outcome") == "unverifiable")
            .then(pl.col("comparison_reason"))
            .alias("reason")
        )
        .select(table("outcomes").names)
        .sort([*ATTEMPT, "position"])
    )


def explanations(attempts: pl.LazyFrame, outcome_rows: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt: not_declared (no expectation) -> contradicted -> unsupported -> unverifiable
    -> explained, first match wins (contract §5)."""
    per = outcome_rows.group_by(ATTEMPT).agg(
        [(pl.col("outcome") == o).any().alias(o) for o in EXPLANATION_ORDER]
    )
    first: pl.Expr = pl.lit("explained")
    for name in reversed(EXPLANATION_ORDER):  # built inside out: the first match wins
        first = pl.when(pl.col(name)).then(pl.lit(name)).otherwise(first)
    declared = pl.col(EXPLANATION_ORDER[0]).is_not_null()
    return (
        attempts.select(ATTEMPT)
        .join(per, on=ATTEMPT, how="left")
        .select(
            *ATTEMPT,
            pl.when(declared).then(first).otherwise(pl.lit("not_declared")).alias("explanation"),
        )
    )
