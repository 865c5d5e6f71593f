"""`--format json`: per campaign its status, integrity errors, attempts rejected at ingest and
every attempt with its comparisons and outcomes nested, and its benchmarks (table `benchmarks`)
when its campaign decides regions; infinite ratios as "inf"."""

from __future__ import annotations

import json
import math
from functools import singledispatch
from typing import Any

import polars as pl

from pipeline.assessment.campaigns import AssessResult
from pipeline.assessment.quantities import ATTEMPT
from pipeline.contract.schemas import BOOKKEEPING_COLUMNS, table
from pipeline.output.views import campaign_order, changed, parts, rejections

COMPARISON_FIELDS = [
    "quantity",
    "name",
    "n_pairs",
    "estimate",
    "low",
    "high",
    "direction",
    "status",
    "reason",
    "method",
]
BENCHMARK_FIELDS = [c for c in table("benchmarks").names if c not in ATTEMPT]
"""Every column of table ``benchmarks`` but the attempt's key, in the table's order."""
OUTCOME_FIELDS = [
    "position",
    "target",
    "name",
    "expect",
    "evidence",
    "direction",
    "outcome",
    "reason",
]


@singledispatch
def render(result: object, *, digests: bool = False) -> str:
    raise TypeError(f"no JSON for a {type(result).__name__}")


def jsonable(value: Any) -> Any:
    """Infinite ratios become the strings "inf"/"-inf" (JSON has no infinity); NaN becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value


def readable(frame: pl.DataFrame, digests: bool) -> pl.DataFrame:
    """Without ``digests``, the bookkeeping columns are left out."""
    return frame if digests else frame.drop(BOOKKEEPING_COLUMNS, strict=False)


def _nested(result: AssessResult, digests: bool) -> pl.DataFrame:
    comps = result.comparisons.group_by(ATTEMPT).agg(
        pl.struct(COMPARISON_FIELDS).alias("comparisons")
    )
    outs = result.outcomes.group_by(ATTEMPT).agg(pl.struct(OUTCOME_FIELDS).alias("outcomes"))
    rows = readable(result.assessments, digests)
    if result.frozen is not None:  # what-if: the frozen policy's verdict beside the what-if one
        frozen = result.frozen.select(
            *ATTEMPT,
            pl.col("verdict").alias("frozen_verdict"),
            pl.col("reason").alias("frozen_reason"),
        )
        rows = rows.join(frozen, on=ATTEMPT, how="left")
    nested = (
        rows.join(comps, on=ATTEMPT, how="left")
        .join(outs, on=ATTEMPT, how="left")
        .with_columns(
            pl.col("comparisons").fill_null([]),
            pl.col("outcomes").fill_null([]),
        )
    )
    if result.benchmarks.is_empty():
        return nested
    members = result.benchmarks.group_by(ATTEMPT, maintain_order=True).agg(
        pl.struct(BENCHMARK_FIELDS).alias("benchmarks")
    )
    return nested.join(members, on=ATTEMPT, how="left", maintain_order="left")


def _attempt_entries(rows: pl.DataFrame) -> list[dict[str, Any]]:
    """One dict per attempt; ``benchmarks`` only for attempts that have members (a campaign that
    decides its metric alone keeps the document it always had)."""
    entries = rows.drop("campaign_id").to_dicts()
    for entry in entries:
        if entry.get("benchmarks", ()) is None:
            del entry["benchmarks"]
    return entries


@render.register(AssessResult)
def assess(result: AssessResult, *, digests: bool = False) -> str:
    nested = _nested(result, digests)
    blocked, attempts = parts(result.blocked, "campaign_id"), parts(nested, "campaign_id")
    rejected = parts(rejections(result), "campaign_id")
    campaigns = []
    for cid in campaign_order(result):
        errors = blocked.get((cid,), result.blocked.clear())
        entry: dict[str, Any] = {
            "campaign_id": cid,
            "status": "blocked" if errors.height else "assessed",
        }
        entry["integrity_errors"] = errors.drop("campaign_id").to_dicts()
        refused = rejected.get((cid,))
        entry["rejected_at_ingest"] = (
            [] if refused is None else refused.drop("campaign_id", "position").to_dicts()
        )
        entry["attempts"] = _attempt_entries(attempts.get((cid,), nested.clear()))
        if result.what_if:
            entry["verdicts_changed"] = changed(result, cid)[0]
        campaigns.append(entry)
    document: dict[str, Any] = {"what_if": result.what_if, "campaigns": campaigns}
    if result.what_if:
        document["verdicts_changed"] = changed(result)[0]
    return json.dumps(jsonable(document), indent=2, default=str) + "\n"
