"""Integrity errors of contract §6, derived from the evidence columns ingest stores.

A pure function of the ``campaigns`` and ``attempts`` rows: ingest writes its result to the
``integrity`` table, and ``assess`` blocks a campaign that has any row there.
"""

from __future__ import annotations

import re

import polars as pl

from pipeline.contract.declare import choices
from pipeline.contract.schemas import table

_RFC3339 = "%Y-%m-%dT%H:%M:%S%.fZ"
_NONE = pl.lit(None, dtype=pl.String)


def _short(column: str) -> pl.Expr:
    """A digest as a person compares it: the first 12 hex digits."""
    return pl.col(column).str.slice(0, 12) + pl.lit("…")


def _text(template: str, **digests: str) -> pl.Expr:
    """``template``, each ``{name}`` in it the short form of the digest in ``digests[name]``."""
    pieces = re.split(r"\{(\w+)\}", template)
    return pl.concat_str(
        *(_short(digests[p]) if i % 2 else pl.lit(p) for i, p in enumerate(pieces) if p)
    )


def _errors(
    rows: pl.LazyFrame,
    where: pl.Expr,
    code: str,
    message: pl.Expr,
    *,
    expected: pl.Expr,
    actual: pl.Expr,
) -> pl.LazyFrame:
    """The rows where ``where`` holds, as integrity errors ``code`` (the ``integrity`` table's
    columns). The message says what is wrong, not where: the row's attempt_id (null: the
    campaign) says that, and every display puts it in front once."""
    return rows.filter(where).select(
        "campaign_id",
        "attempt_id",
        code=pl.lit(code),
        message=message,
        expected=expected,
        actual=actual,
    )


# -- a digest recorded in a file (column D) against the digest of what is there now (D_actual) --
_POLICY_DIFFERS = (
    "policy_sha256 {recorded} does not match the sha256 of the canonical policy {actual}"
)
_MECHANISM_DIFFERS = (
    "mechanism.json sha256 {actual} differs from attempt.json mechanism_sha256 {recorded}"
)
_MECHANISM_GONE = "attempt.json records mechanism_sha256 {recorded} but there is no mechanism.json"
_MECHANISM_UNRECORDED = (
    "mechanism.json (sha256 {actual}) exists but attempt.json records no mechanism_sha256"
)
_PLAN_DIFFERS = (
    "the plan in attempt.json (sequential: first_look, look_every, max_pairs) has sha256 "
    "{actual}, not the sequential_sha256 recorded when the round started {recorded}"
)
_PLAN_GONE = (
    "attempt.json records sequential_sha256 {recorded} but has no sequential object (the "
    "round's stopping plan is gone)"
)


def _mismatch(rows: pl.LazyFrame, code: str, digest: str, template: str) -> pl.LazyFrame:
    """Both digests are there and differ."""
    recorded, actual = pl.col(digest), pl.col(f"{digest}_actual")
    message = _text(template, recorded=digest, actual=f"{digest}_actual")
    return _errors(rows, recorded != actual, code, message, expected=recorded, actual=actual)


def _gone(rows: pl.LazyFrame, code: str, digest: str, template: str) -> pl.LazyFrame:
    """A digest is recorded, but what it was taken of is not there."""
    recorded, actual = pl.col(digest), pl.col(f"{digest}_actual")
    where = recorded.is_not_null() & actual.is_null()
    message = _text(template, recorded=digest)
    return _errors(rows, where, code, message, expected=recorded, actual=_NONE)


def _unrecorded(rows: pl.LazyFrame, code: str, digest: str, template: str) -> pl.LazyFrame:
    """What a digest would be taken of is there, but no digest is recorded."""
    recorded, actual = pl.col(digest), pl.col(f"{digest}_actual")
    where = recorded.is_null() & actual.is_not_null()
    message = _text(template, actual=f"{digest}_actual")
    return _errors(rows, where, code, message, expected=_NONE, actual=actual)


def _changed(attempts: pl.LazyFrame) -> pl.LazyFrame:
    first, now = pl.col("mechanism_sha256_first_seen"), pl.col("mechanism_sha256_actual")
    digests = {"first": "mechanism_sha256_first_seen", "now": "mechanism_sha256_actual"}
    text = (
        pl.when(first.is_null())
        .then(
            _text(
                "mechanism.json (sha256 {now}) appeared after the attempt was first ingested",
                **digests,
            )
        )
        .when(now.is_null())
        .then(_text("mechanism.json (first seen with sha256 {first}) is gone", **digests))
        .otherwise(
            _text(
                "mechanism.json sha256 {now} differs from the sha256 the store saw first {first}",
                **digests,
            )
        )
    )
    return _errors(
        attempts, first.ne_missing(now), "mechanism_changed", text, expected=first, actual=now
    )


def _declared_after_start(attempts: pl.LazyFrame) -> pl.LazyFrame:
    declared = pl.col("declared_at").dt.to_string(_RFC3339)
    started = pl.col("started_at").dt.to_string(_RFC3339)
    message = pl.concat_str(
        pl.lit("mechanism declared at "),
        declared,
        pl.lit(", after the candidate started at "),
        started,
    )
    where = pl.col("declared_at") > pl.col("started_at")
    return _errors(
        attempts, where, "declared_after_start", message, expected=started, actual=declared
    )


# -- the stopping plan (attempt.json's sequential object) ----------------------------------------
NO_PLAN = "none"
"""sequential_sha256_first_seen of an attempt first seen without a plan (null is kept for
attempts stored before plans were digested: their first plan is not known)."""
STOPPED_AT_A_LOOK = [s for s in choices("attempt", "sequential", "stopped") if s != "interrupted"]
"""Why a round stops right after a look (all but `interrupted`): its last look is its pairs."""


def _plan_changed(attempts: pl.LazyFrame) -> pl.LazyFrame:
    first = pl.col("sequential_sha256_first_seen")
    now = pl.col("sequential_sha256_actual").fill_null(NO_PLAN)
    digests = {"first": "sequential_sha256_first_seen", "now": "sequential_sha256_actual"}
    text = (
        pl.when(first == NO_PLAN)
        .then(pl.lit("a stopping plan (sequential) appeared after the attempt was first ingested"))
        .when(now == NO_PLAN)
        .then(
            _text(
                "the stopping plan (sequential, first seen with sha256 {first}) is gone", **digests
            )
        )
        .otherwise(
            _text(
                "the stopping plan's sha256 {now} differs from the one the store saw first {first}",
                **digests,
            )
        )
    )
    where = first.is_not_null() & (first != now)
    return _errors(attempts, where, "sequential_changed", text, expected=first, actual=now)


# -- the recorded commands (attempt.json's commands: what campaign final --confirm runs) ---------
def _commands_changed(attempts: pl.LazyFrame) -> pl.LazyFrame:
    """The commands differ from those the store first saw: a confirmation would run something
    the round never ran (NO_PLAN, ``none``, stands for "first seen without commands")."""
    first = pl.col("commands_sha256_first_seen")
    now = pl.col("commands_sha256_actual").fill_null(NO_PLAN)
    digests = {"first": "commands_sha256_first_seen", "now": "commands_sha256_actual"}
    text = (
        pl.when(first == NO_PLAN)
        .then(pl.lit("commands appeared in attempt.json after the attempt was first ingested"))
        .when(now == NO_PLAN)
        .then(_text("attempt.json's commands (first seen with sha256 {first}) are gone", **digests))
        .otherwise(
            _text(
                "attempt.json's commands have sha256 {now}, not the {first} the store saw first",
                **digests,
            )
        )
    )
    where = first.is_not_null() & (first != now)
    return _errors(attempts, where, "commands_changed", text, expected=first, actual=now)


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
            _errors(
                planned,
                problem.is_not_null(),
                code,
                problem,
                expected=_NONE,
                actual=pl.col("sequential_looks"),
            )
            for code, problem in checks
        ]
    )


def _with_plan_columns(attempts: pl.LazyFrame) -> pl.LazyFrame:
    """The plan's and the commands' evidence columns as nulls where the rows lack them (rows
    built before they were digested, or by hand with the mechanism's columns only): nothing to
    check."""
    declared = table("attempts").polars_schema()
    found = set(attempts.collect_schema().names())
    wanted = [n for n in declared if n.startswith(("sequential_", "commands_")) or n == "n_pairs"]
    return attempts.with_columns(
        pl.lit(None, dtype=declared[n]).alias(n) for n in wanted if n not in found
    )


def integrity_errors(campaigns: pl.DataFrame, attempts: pl.DataFrame) -> pl.DataFrame:
    """Every integrity error of these campaigns (columns of table ``integrity``), by attempt."""
    spec = table("integrity")
    # a campaign's own errors have no attempt_id
    c = campaigns.lazy().with_columns(attempt_id=_NONE)
    a = _with_plan_columns(attempts.lazy())
    mechanism, plan = "mechanism_sha256", "sequential_sha256"
    parts = [
        _mismatch(c, "policy_digest_mismatch", "policy_sha256", _POLICY_DIFFERS),
        _mismatch(a, "mechanism_digest_mismatch", mechanism, _MECHANISM_DIFFERS),
        _changed(a),
        _declared_after_start(a),
        _gone(a, "mechanism_file_missing", mechanism, _MECHANISM_GONE),
        _unrecorded(a, "mechanism_digest_missing", mechanism, _MECHANISM_UNRECORDED),
        _mismatch(a, "sequential_digest_mismatch", plan, _PLAN_DIFFERS),
        _gone(a, "sequential_missing", plan, _PLAN_GONE),
        _plan_changed(a),
        _plan_inconsistent(a),
        _commands_changed(a),
    ]
    found = pl.concat([spec.conform(part) for part in parts], how="vertical")
    return found.sort("campaign_id", "attempt_id", "code", nulls_last=False).collect()
