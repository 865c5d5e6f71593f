"""The CI gate of ``ab`` and ``assess --gate``: whether an attempt fails ``--fail-on``, and which
benchmarks decided it (contract §15).

- ``not-improved`` (the default, the gate of before): fail unless the attempt's verdict is PASS.
- ``regression``: fail when any decided member regressed — a benchmark, or the metric — or when
  the attempt did not complete (a round that stopped decides nothing, and a crash must not pass
  CI). It **fails closed**: a member that could not be decided for want of data (a reason of
  ``family.DATA_REASONS``: too few pairs, a zero baseline or candidate value, a value out of
  range) fails it too, since a gate that cannot decide must not pass. A member ``inconclusive``
  only because its interval is too wide (reason null) does not: the gate fails on a regression
  shown, not on one that was not ruled out.
- ``change``: as ``regression``, for any member improved or regressed.

Under ``regression`` and ``change`` a ``removed`` benchmark (in the baseline's runs, in no
candidate run) fails the gate too: a guard that stopped running is a lost guard, and skipping a
slow benchmark must not pass as a speedup. ``allow_removed`` (``--allow-removed``) says the
removal is meant; an ``added`` benchmark never fails it.

Under ``decide: regions`` the members are the attempt's rows of table ``benchmarks``; under
``decide: metric`` the one member is the metric, read from its own comparison interval
(``paired_low``, ``paired_high``) with the same rule (``family.verdict_rule``), so the gate works
for a single command's metric too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:  # light at import: the command line builds --fail-on's choices from here
    import polars as pl

FailOn = Literal["not-improved", "regression", "change"]
FAIL_ON: tuple[FailOn, ...] = ("not-improved", "regression", "change")
DEFAULT_FAIL_ON: FailOn = "not-improved"
FAILING: dict[FailOn, tuple[str, ...]] = {
    "not-improved": ("regressed",),  # named for information; the verdict decides
    "regression": ("regressed", "removed"),
    "change": ("regressed", "improved", "removed"),
}
"""The member verdicts a gate names; under regression and change, any of them fails it
(``removed`` only without ``allow_removed``), and so does an ``inconclusive`` member with a
data reason (``failing``)."""
REMOVED = "removed"
ONE_SIDED_TEXT = {
    "added": "in the candidate's runs, in no baseline run",
    "removed": "in the baseline's runs, in no candidate run",
}
"""What the members ``added`` and ``removed`` (contract §15) mean, wherever one is written out."""
MEMBER_COLUMNS = [
    "quantity",
    "name",
    "estimate",
    "low",
    "high",
    "method",
    "critical",
    "verdict",
    "reason",
]
"""What the gate keeps of a member: table ``benchmarks``' columns a verdict line shows."""


@dataclass(frozen=True)
class Gate:
    """One attempt's gate: ``failed`` means exit 5; ``deciders`` are the members whose verdict
    the gate names (MEMBER_COLUMNS), worst change first."""

    fail_on: FailOn
    failed: bool
    attempt: dict[str, Any]
    deciders: pl.DataFrame
    members: int
    """How many members the gate read (1 under decide metric)."""
    allow_removed: bool = False
    """``--allow-removed``: a removed benchmark is named, not failed."""


def metric_member(
    row: Mapping[str, Any], metric_name: str, gate_pct: float, margin_pct: float
) -> pl.DataFrame:
    """The metric as the one member of a ``decide: metric`` attempt: its comparison interval
    read with the family's rule (an attempt that did not complete is inconclusive)."""
    import polars as pl

    from pipeline.assessment import family

    frame = pl.DataFrame(
        {
            "quantity": ["metric"],
            "name": [metric_name],
            "estimate": [row["paired_estimate"]],
            "low": [row["paired_low"]],
            "high": [row["paired_high"]],
            "method": [None],
            "critical": [None],
        },
        schema={
            "quantity": pl.String,
            "name": pl.String,
            "estimate": pl.Float64,
            "low": pl.Float64,
            "high": pl.Float64,
            "method": pl.String,
            "critical": pl.Float64,
        },
    )
    rule = family.verdict_rule(pl.lit(gate_pct), pl.lit(margin_pct))
    reason = row.get("paired_reason")
    data_reason = reason if reason in family.DATA_REASONS else None
    if row["status"] != "completed" or data_reason is not None:
        rule = pl.lit("inconclusive")
    return frame.with_columns(rule.alias("verdict"), pl.lit(data_reason, pl.String).alias("reason"))


def failing(fail_on: FailOn) -> pl.Expr:
    """Whether a member (a row with ``verdict`` and ``reason``) fails the gate ``fail_on``: its
    verdict is one of FAILING's, or, under ``regression`` and ``change``, it is ``inconclusive``
    for want of data (a reason of ``family.DATA_REASONS``: fail closed). Under ``not-improved``
    the members are named for information only."""
    import polars as pl

    from pipeline.assessment import family

    named = pl.col("verdict").is_in(FAILING[fail_on])
    if fail_on == DEFAULT_FAIL_ON:
        return named
    undecidable = (pl.col("verdict") == "inconclusive") & pl.col("reason").is_in(
        family.DATA_REASONS
    )
    return named | undecidable.fill_null(False)


def decide_gate(
    row: Mapping[str, Any], members: pl.DataFrame, fail_on: str, *, allow_removed: bool = False
) -> Gate:
    """The gate of the attempt ``row`` (an assessments row) over its ``members`` (rows with
    MEMBER_COLUMNS: its benchmarks, or ``metric_member``). The members named: those that fail
    it (``failing``), the decided ones first, the largest slowdown first; with
    ``allow_removed`` a removed benchmark is still named but fails nothing."""
    import polars as pl

    if fail_on not in FAIL_ON:
        raise ValueError(f"--fail-on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    chosen = cast(FailOn, fail_on)
    named = (
        members.filter(failing(chosen))
        .sort(
            pl.col("verdict") == "inconclusive", pl.col("estimate").fill_nan(None), nulls_last=True
        )
        .select(MEMBER_COLUMNS)
    )
    counted = named.filter(pl.col("verdict") != REMOVED) if allow_removed else named
    if chosen == "not-improved":
        failed = row["verdict"] != "PASS"
    else:
        failed = row["status"] != "completed" or counted.height > 0
    return Gate(chosen, failed, dict(row), named, members.height, allow_removed)
