"""Integrity errors of contract §6, derived from the evidence columns ingest stores.

A pure function of the ``campaigns`` and ``attempts`` rows: ingest writes its result to the
``integrity`` table, and ``assess`` blocks a campaign that has any row there.
"""

from __future__ import annotations

import polars as pl

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


def integrity_errors(campaigns: pl.DataFrame, attempts: pl.DataFrame) -> pl.DataFrame:
    """Every integrity error of these campaigns (columns of table ``integrity``), by attempt."""
    spec = table("integrity")
    c, a = campaigns.lazy(), attempts.lazy()
    parts = [
        _policy(c),
        _digest_mismatch(a),
        _changed(a),
        _declared_after_start(a),
        _file_missing(a),
        _digest_missing(a),
    ]
    found = pl.concat([spec.conform(part) for part in parts], how="vertical")
    return found.sort("campaign_id", "attempt_id", "code", nulls_last=False).collect()
