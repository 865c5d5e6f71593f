"""Integrity errors of contract §6, derived from the evidence columns ingest stores.

A pure function of the ``campaigns`` and ``attempts`` rows: ingest writes its result to the
``integrity`` table, and ``assess`` blocks a campaign that has any row there.
"""

from __future__ import annotations

import polars as pl

from pipeline.contract.declare import choices
from pipeline.contract.schemas import table

_RFC3339 = "%Y-%m-%dT%H:%M:%S%.fZ"


def _short(column: str) -> pl.Expr:
    """A digest as a person compares it: the first 12 hex digits."""
    return pl.col(column).str.slice(0, 12) + pl.lit("…")


def _attempt(text: pl.Expr) -> pl.Expr:
    """The message says what is wrong, not where: the row's attempt_id (null: the campaign) says
    that, and every display puts it in front once."""
    return text


def _policy(campaigns: pl.LazyFrame) -> pl.LazyFrame:
    return campaigns.filter(pl.col("policy_sha256") != pl.col("policy_sha256_actual")).select(
        "campaign_id",
        attempt_id=pl.lit(None, dtype=pl.String),
        code=pl.lit("policy_digest_mismatch"),
        message=pl.concat_str(
            pl.lit("policy_sha256 "),
            _short("policy_sha256"),
            pl.lit(" does not match the sha256 of the canonical policy "),
            _short("policy_sha256_actual"),
        ),
        expected=pl.col("policy_sha256"),
        actual=pl.col("policy_sha256_actual"),
    )


def _digest_mismatch(attempts: pl.LazyFrame) -> pl.LazyFrame:
    recorded, actual = pl.col("mechanism_sha256"), pl.col("mechanism_sha256_actual")
    return attempts.filter(recorded != actual).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit("mechanism_digest_mismatch"),
        message=_attempt(
            pl.concat_str(
                pl.lit("mechanism.json sha256 "),
                _short("mechanism_sha256_actual"),
                pl.lit(" differs from attempt.json mechanism_sha256 "),
                _short("mechanism_sha256"),
            )
        ),
        expected=recorded,
        actual=actual,
    )


def _changed(attempts: pl.LazyFrame) -> pl.LazyFrame:
    first, now = pl.col("mechanism_sha256_first_seen"), pl.col("mechanism_sha256_actual")
    text = (
        pl.when(first.is_null())
        .then(
            pl.concat_str(
                pl.lit("mechanism.json (sha256 "),
                _short("mechanism_sha256_actual"),
                pl.lit(") appeared after the attempt was first ingested"),
            )
        )
        .when(now.is_null())
        .then(
            pl.concat_str(
                pl.lit("mechanism.json (first seen with sha256 "),
                _short("mechanism_sha256_first_seen"),
                pl.lit(") is gone"),
            )
        )
        .otherwise(
            pl.concat_str(
                pl.lit("mechanism.json sha256 "),
                _short("mechanism_sha256_actual"),
                pl.lit(" differs from the sha256 the store saw first "),
                _short("mechanism_sha256_first_seen"),
            )
        )
    )
    return attempts.filter(first.ne_missing(now)).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit("mechanism_changed"),
        message=_attempt(text),
        expected=first,
        actual=now,
    )


def _declared_after_start(attempts: pl.LazyFrame) -> pl.LazyFrame:
    declared = pl.col("declared_at").dt.to_string(_RFC3339)
    started = pl.col("started_at").dt.to_string(_RFC3339)
    return attempts.filter(pl.col("declared_at") > pl.col("started_at")).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit("declared_after_start"),
        message=_attempt(
            pl.concat_str(
                pl.lit("mechanism declared at "),
                declared,
                pl.lit(", after the candidate started at "),
                started,
            )
        ),
        expected=started,
        actual=declared,
    )


def _file_missing(attempts: pl.LazyFrame) -> pl.LazyFrame:
    return attempts.filter(
        pl.col("mechanism_sha256").is_not_null() & pl.col("mechanism_sha256_actual").is_null()
    ).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit("mechanism_file_missing"),
        message=_attempt(
            pl.concat_str(
                pl.lit("attempt.json records mechanism_sha256 "),
                _short("mechanism_sha256"),
                pl.lit(" but there is no mechanism.json"),
            )
        ),
        expected=pl.col("mechanism_sha256"),
        actual=pl.lit(None, dtype=pl.String),
    )


def _digest_missing(attempts: pl.LazyFrame) -> pl.LazyFrame:
    return attempts.filter(
        pl.col("mechanism_sha256").is_null() & pl.col("mechanism_sha256_actual").is_not_null()
    ).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit("mechanism_digest_missing"),
        message=_attempt(
            pl.concat_str(
                pl.lit("mechanism.json (sha256 "),
                _short("mechanism_sha256_actual"),
                pl.lit(") exists but attempt.json records no mechanism_sha256"),
            )
        ),
        expected=pl.lit(None, dtype=pl.String),
        actual=pl.col("mechanism_sha256_actual"),
    )


# -- the stopping plan (attempt.json's sequential object) ----------------------------------------
NO_PLAN = "none"
"""sequential_sha256_first_seen of an attempt first seen without a plan (null is kept for
attempts stored before plans were digested: their first plan is not known)."""
STOPPED_AT_A_LOOK = [s for s in choices("attempt", "sequential", "stopped") if s != "interrupted"]
"""Why a round stops right after a look (all but `interrupted`): its last look is its pairs."""


def _plan_digest_mismatch(attempts: pl.LazyFrame) -> pl.LazyFrame:
    recorded, actual = pl.col("sequential_sha256"), pl.col("sequential_sha256_actual")
    return attempts.filter(recorded != actual).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit("sequential_digest_mismatch"),
        message=pl.concat_str(
            pl.lit(
                "the plan in attempt.json (sequential: first_look, look_every, max_pairs) "
                "has sha256 "
            ),
            _short("sequential_sha256_actual"),
            pl.lit(", not the sequential_sha256 recorded when the round started "),
            _short("sequential_sha256"),
        ),
        expected=recorded,
        actual=actual,
    )


def _plan_missing(attempts: pl.LazyFrame) -> pl.LazyFrame:
    return attempts.filter(
        pl.col("sequential_sha256").is_not_null() & pl.col("sequential_sha256_actual").is_null()
    ).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit("sequential_missing"),
        message=pl.concat_str(
            pl.lit("attempt.json records sequential_sha256 "),
            _short("sequential_sha256"),
            pl.lit(" but has no sequential object (the round's stopping plan is gone)"),
        ),
        expected=pl.col("sequential_sha256"),
        actual=pl.lit(None, dtype=pl.String),
    )


def _plan_changed(attempts: pl.LazyFrame) -> pl.LazyFrame:
    first = pl.col("sequential_sha256_first_seen")
    now = pl.col("sequential_sha256_actual").fill_null(NO_PLAN)
    text = (
        pl.when(first == NO_PLAN)
        .then(pl.lit("a stopping plan (sequential) appeared after the attempt was first ingested"))
        .when(now == NO_PLAN)
        .then(
            pl.concat_str(
                pl.lit("the stopping plan (sequential, first seen with sha256 "),
                _short("sequential_sha256_first_seen"),
                pl.lit(") is gone"),
            )
        )
        .otherwise(
            pl.concat_str(
                pl.lit("the stopping plan's sha256 "),
                _short("sequential_sha256_actual"),
                pl.lit(" differs from the one the store saw first "),
                _short("sequential_sha256_first_seen"),
            )
        )
    )
    return attempts.filter(first.is_not_null() & (first != now)).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit("sequential_changed"),
        message=text,
        expected=first,
        actual=now,
    )


def _looks_problem() -> pl.Expr:
    """Why the looks taken cannot be those of the plan and the pairs recorded (null: they can):
    none at a decided stop, not increasing, past the maximum, or the last one not the pairs at
    a decided stop (the round stops right after that look)."""
    looks = pl.col("sequential_looks").str.json_decode(pl.List(pl.Int64))
    decided = pl.col("sequential_stopped").is_in(STOPPED_AT_A_LOOK)
    n, last = pl.col("n_pairs"), looks.list.last()
    return (
        pl.when(decided & (looks.list.len() == 0))
        .then(pl.concat_str(pl.lit("no look taken, yet stopped "), pl.col("sequential_stopped")))
        .when(looks.list.diff(null_behavior="drop").list.min() <= 0)
        .then(
            pl.concat_str(pl.lit("looks "), pl.col("sequential_looks"), pl.lit(" do not increase"))
        )
        .when(looks.list.max() > pl.col("sequential_max_pairs"))
        .then(
            pl.concat_str(
                pl.lit("looks "),
                pl.col("sequential_looks"),
                pl.lit(" go past max_pairs "),
                pl.col("sequential_max_pairs").cast(pl.String),
            )
        )
        .when(decided & n.is_not_null() & (last != n))
        .then(
            pl.concat_str(
                pl.lit("the last look "),
                last.cast(pl.String),
                pl.lit(" is not the "),
                n.cast(pl.String),
                pl.lit(" pairs recorded, yet the round stopped there ("),
                pl.col("sequential_stopped"),
                pl.lit(")"),
            )
        )
    )


def _plan_inconsistent(attempts: pl.LazyFrame) -> pl.LazyFrame:
    """A plan the recorder cannot have written, or looks and pairs it cannot have led to."""
    first, most, n = (
        pl.col("sequential_first_look"),
        pl.col("sequential_max_pairs"),
        pl.col("n_pairs"),
    )
    checks = [
        (
            "sequential_plan_invalid",
            pl.when(first > most).then(
                pl.concat_str(
                    pl.lit("first_look "),
                    first.cast(pl.String),
                    pl.lit(" is past max_pairs "),
                    most.cast(pl.String),
                )
            ),
        ),
        (
            "sequential_pairs_over_plan",
            pl.when(n > most).then(
                pl.concat_str(
                    n.cast(pl.String),
                    pl.lit(" pairs recorded under a plan of at most "),
                    most.cast(pl.String),
                )
            ),
        ),
        ("sequential_looks_invalid", _looks_problem()),
    ]
    planned = attempts.filter(pl.col("sequential_max_pairs").is_not_null())
    return pl.concat(
        [
            planned.with_columns(message=problem)
            .filter(pl.col("message").is_not_null())
            .select(
                "campaign_id",
                "attempt_id",
                code=pl.lit(code),
                message="message",
                expected=pl.lit(None, dtype=pl.String),
                actual=pl.col("sequential_looks"),
            )
            for code, problem in checks
        ]
    )


def _with_plan_columns(attempts: pl.LazyFrame) -> pl.LazyFrame:
    """The plan's evidence columns as nulls where the rows lack them (rows built before plans
    were digested, or by hand with the mechanism's columns only): no plan, nothing to check."""
    declared = table("attempts").polars_schema()
    found = set(attempts.collect_schema().names())
    wanted = [n for n in declared if n.startswith("sequential_") or n == "n_pairs"]
    return attempts.with_columns(
        pl.lit(None, dtype=declared[n]).alias(n) for n in wanted if n not in found
    )


def integrity_errors(campaigns: pl.DataFrame, attempts: pl.DataFrame) -> pl.DataFrame:
    """Every integrity error of these campaigns (columns of table ``integrity``), by attempt."""
    spec = table("integrity")
    c, a = campaigns.lazy(), _with_plan_columns(attempts.lazy())
    parts = [
        _policy(c),
        _digest_mismatch(a),
        _changed(a),
        _declared_after_start(a),
        _file_missing(a),
        _digest_missing(a),
        _plan_digest_mismatch(a),
        _plan_missing(a),
        _plan_changed(a),
        _plan_inconsistent(a),
    ]
    found = pl.concat([spec.conform(part) for part in parts], how="vertical")
    return found.sort("campaign_id", "attempt_id", "code", nulls_last=False).collect()
