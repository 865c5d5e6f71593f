"""The verdicts (contract §6): the median rule, the paired rule, the explanation gate, eligibility
and the campaign's best attempt, as Polars expressions over one row per attempt.

Input columns (one row per attempt, its campaign's effective policy joined in):
``round, attempt_id, status, kind, improvement_pct, median_problem, paired_estimate,
paired_low, paired_high, metric_status, metric_reason, explanation, decision,
require_explanation, min_improvement_pct``.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

Verdict = Literal["PASS", "FAIL", "INCONCLUSIVE"]

PASS, FAIL, INCONCLUSIVE = pl.lit("PASS"), pl.lit("FAIL"), pl.lit("INCONCLUSIVE")
GATE_REWRITE: dict[str, tuple[str, str | None]] = {
    "explained": ("PASS", None),
    "unsupported": ("FAIL", "explanation_unsupported"),
    "contradicted": ("FAIL", "explanation_contradicted"),
    "unverifiable": ("INCONCLUSIVE", "explanation_unverifiable"),
    "not_declared": ("INCONCLUSIVE", "explanation_not_declared"),
}
SIGNIFICANCE = {"median": "not_established", "paired": "paired_interval"}


def median_facts(medians: pl.LazyFrame, better: pl.Expr) -> pl.LazyFrame:
    """improvement_pct from the side medians, and why the median rule cannot decide (or null).
    ``medians`` has med_b and med_c (null when a side has no ok run)."""
    b, c = pl.col("med_b"), pl.col("med_c")
    pct = pl.when(better == "higher").then((c - b) / b * 100).otherwise((b - c) / b * 100)
    problem = (
        pl.when(b.is_null() | c.is_null())
        .then(pl.lit("no_samples"))
        .when(b == 0)
        .then(pl.lit("zero_baseline"))
    )
    return medians.with_columns(problem.alias("median_problem")).with_columns(
        pl.when(pl.col("median_problem").is_null()).then(pct).alias("improvement_pct")
    )


def _not_completed() -> pl.Expr:
    return pl.col("status") != "completed"


def _attempt_reason() -> pl.Expr:
    return pl.lit("attempt_") + pl.col("status")


def median_rule() -> tuple[pl.Expr, pl.Expr]:
    """contract §6 median decision -> (verdict, reason)."""
    pct = pl.col("improvement_pct")
    passed = (pct > 0) & (pct >= pl.col("min_improvement_pct"))
    verdict = (
        pl.when(_not_completed() | pl.col("median_problem").is_not_null())
        .then(INCONCLUSIVE)
        .when(passed)
        .then(PASS)
        .otherwise(FAIL)
    )
    reason = (
        pl.when(_not_completed())
        .then(_attempt_reason())
        .when(pl.col("median_problem").is_not_null())
        .then(pl.col("median_problem"))
        .when(passed)
        .then(None)
        .when(pct > 0)
        .then(pl.lit("below_gate"))
        .otherwise(pl.lit("not_improved"))
    )
    return verdict, reason


def paired_rule() -> tuple[pl.Expr, pl.Expr]:
    """contract §6 paired decision on the metric interval; the interval alone decides."""
    low, high = pl.col("paired_low"), pl.col("paired_high")
    gate = 1 + pl.col("min_improvement_pct") / 100
    undecided = _not_completed() | (pl.col("metric_status") != "ok")
    passed = (low > 1) & (low >= gate)
    verdict = pl.when(undecided).then(INCONCLUSIVE).when(passed).then(PASS).otherwise(FAIL)
    reason = (
        pl.when(_not_completed())
        .then(_attempt_reason())
        .when(undecided)
        .then(pl.col("metric_reason"))
        .when(passed)
        .then(None)
        .when(high < 1)
        .then(pl.lit("regressed"))
        .when(high < gate)
        .then(pl.lit("below_gate"))
        .otherwise(pl.lit("within_noise"))
    )
    return verdict, reason


def _gate(column: str, index: int) -> pl.Expr:
    """The explanation gate's rewrite of a PASS: verdict (index 0) or reason (index 1)."""
    rewrite = {k: v[index] for k, v in GATE_REWRITE.items()}
    rewritten = pl.col("explanation").replace_strict(rewrite, return_dtype=pl.String)
    applies = pl.col("require_explanation") & (pl.col("decided_verdict") == "PASS")
    return pl.when(applies).then(rewritten).otherwise(pl.col(column))


def verdicts(facts: pl.LazyFrame) -> pl.LazyFrame:
    """Adds median_verdict/_reason, paired_verdict/_reason, verdict, reason,
    statistical_significance and eligible (best: see `best`)."""
    mv, mr = median_rule()
    pv, pr = paired_rule()
    paired = pl.col("decision") == "paired"
    return (
        facts.with_columns(
            mv.alias("median_verdict"),
            mr.alias("median_reason"),
            pv.alias("paired_verdict"),
            pr.alias("paired_reason"),
        )
        .with_columns(
            pl.when(paired)
            .then(pl.col("paired_verdict"))
            .otherwise(pl.col("median_verdict"))
            .alias("decided_verdict"),
            pl.when(paired)
            .then(pl.col("paired_reason"))
            .otherwise(pl.col("median_reason"))
            .alias("decided_reason"),
            pl.col("decision").replace_strict(SIGNIFICANCE).alias("statistical_significance"),
        )
        .with_columns(
            _gate("decided_verdict", 0).alias("verdict"),
            _gate("decided_reason", 1).alias("reason"),
        )
        # a confirmation round measures the pick again: it is never a candidate for best
        .with_columns(
            ((pl.col("verdict") == "PASS") & (pl.col("kind") != "confirmation")).alias("eligible")
        )
        .drop("decided_verdict", "decided_reason")
        .pipe(best)
    )


def best(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The campaign's pick: the eligible attempt with the largest improvement_pct (median
    decision) or paired estimate (paired decision); ties -> lowest round, then attempt_id."""
    score = (
        pl.when(pl.col("decision") == "paired")
        .then(pl.col("paired_estimate"))
        .otherwise(pl.col("improvement_pct"))
    )
    picks = (
        frame.filter(pl.col("eligible"))
        .with_columns(score.alias("_score"))
        .sort(
            ["campaign_id", "_score", "round", "attempt_id"],
            descending=[False, True, False, False],
            nulls_last=True,
        )
        .group_by("campaign_id", maintain_order=True)
        .first()
        .select("campaign_id", "attempt_id", pl.lit(True).alias("best"))
    )
    return frame.join(picks, on=["campaign_id", "attempt_id"], how="left").with_columns(
        pl.col("best").fill_null(False)
    )
