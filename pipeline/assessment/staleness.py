"""Whether a stored verdict is up to date: one test, used by `assess` (which attempts it may
reuse) and by the report (which attempts it flags as out of date).

A stored assessments row is up to date when the attempt's inputs, the campaign's policy and the
campaign document are as they were when it was computed (``inputs_sha256``, ``policy_sha256`` and
``campaign_sha256`` of the row against the stored attempt and campaign), and, in a campaign whose
interval is ``sequential_t``, when its constant came from today's recipe (``boundary_recipe``):
the recipe's change to a million sequences moved every such constant, so rows made before it
(or by another recipe) are recomputed by the next ``assess`` and flagged by the report until
then.
"""

from __future__ import annotations

import polars as pl

from pipeline.assessment import boundary
from pipeline.contract.policy import POLICY_DEFAULTS

ATTEMPT = ["campaign_id", "attempt_id"]


def boundary_recipe() -> pl.Expr:
    """Over a campaigns frame: the sequential_t recipe its rows are computed with (null unless
    its interval is sequential_t)."""
    sequential_t = pl.col("interval").fill_null(POLICY_DEFAULTS["interval"]) == "sequential_t"
    return pl.when(sequential_t).then(pl.lit(boundary.RECIPE)).alias("boundary_recipe")


def staleness(
    attempts: pl.DataFrame, assessments: pl.DataFrame, campaigns: pl.DataFrame
) -> pl.DataFrame:
    """campaign_id, attempt_id, problem for every attempt stored or assessed; ``problem`` is null
    when the stored verdict is up to date, else says what changed."""
    now = attempts.select(*ATTEMPT, "inputs_sha256").join(
        campaigns.select(
            "campaign_id",
            "policy_sha256",
            pl.col("source_sha256").alias("campaign_sha256"),
            boundary_recipe(),
        ),
        on="campaign_id",
        how="left",
    )
    then = assessments.select(
        *ATTEMPT,
        pl.col("inputs_sha256").alias("assessed_sha256"),
        pl.col("policy_sha256").alias("assessed_policy"),
        pl.col("campaign_sha256").alias("assessed_campaign"),
        pl.col("boundary_recipe").alias("assessed_recipe"),
    )
    problem = (
        pl.when(pl.col("assessed_sha256").is_null())
        .then(pl.lit("ingested but not assessed"))
        .when(pl.col("inputs_sha256").is_null())
        .then(pl.lit("assessed but no longer in the store"))
        .when(pl.col("inputs_sha256") != pl.col("assessed_sha256"))
        .then(pl.lit("inputs changed since it was assessed"))
        .when(pl.col("assessed_policy") != pl.col("policy_sha256"))
        .then(pl.lit("assessed under another policy digest"))
        .when(pl.col("assessed_campaign") != pl.col("campaign_sha256"))
        .then(pl.lit("campaign.json changed since it was assessed"))
        .when(pl.col("boundary_recipe").is_not_null() & pl.col("assessed_recipe").is_null())
        .then(pl.lit("assessed with the sequential_t constant of 100,000 sequences"))
        .when(pl.col("boundary_recipe") != pl.col("assessed_recipe"))
        .then(pl.lit("assessed with another sequential_t constant recipe"))
    )
    return now.join(then, on=ATTEMPT, how="full", coalesce=True).select(
        *ATTEMPT, problem.alias("problem")
    )
