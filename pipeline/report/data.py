"""Loading one campaign's report data from the store: the stored verdicts, their staleness and
the what-if verdicts (computed, never stored)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from pipeline.assessment.accounting import Account, account
from pipeline.assessment.quantities import metric_ratio, pairs
from pipeline.assessment.staleness import staleness
from pipeline.contract.policy import POLICY_DEFAULTS, PolicyValue, policy_text
from pipeline.contract.schemas import BOOKKEEPING_COLUMNS, OUTPUT_TABLES, table
from pipeline.errors import UsageError
from pipeline.store.tables import Store, known_campaigns

# Columns of the verdict table: the `assessments` columns (bookkeeping digests left out).
VERDICT_COLUMNS = tuple(
    c for c in table("assessments").names if c not in ("campaign_id", *BOOKKEEPING_COLUMNS)
)


PAIR_RATIOS = pl.DataFrame(
    schema={
        "attempt_id": pl.String,
        "repetition": pl.Int64,
        "ratio": pl.Float64,
        "baseline_first": pl.Boolean,
    }
)


SIDE_MEDIANS = pl.DataFrame(
    schema={"attempt_id": pl.String, "side": pl.String, "median": pl.Float64, "n_ok": pl.UInt32}
)


class NotAssessedError(UsageError):
    """The campaign has attempts but no stored assessment: ``assess`` must run first."""


@dataclass(frozen=True)
class CampaignData:
    """Everything the report of one campaign shows, read from the store."""

    campaign_id: str
    campaign: dict[str, Any]  # the `campaigns` row
    attempts: pl.DataFrame
    expectations: pl.DataFrame
    integrity: pl.DataFrame
    assessments: pl.DataFrame
    comparisons: pl.DataFrame
    outcomes: pl.DataFrame
    stale: pl.DataFrame  # attempt_id, problem: attempts whose stored assessment is out of date
    what_if: pl.DataFrame | None = None  # assessments under the what-if policy
    what_if_overrides: Mapping[str, str] | None = None  # as written: policy_text
    pair_ratios: pl.DataFrame = field(default_factory=lambda: PAIR_RATIOS.clear())
    """Per pair of every attempt: attempt_id, repetition, ratio (the metric speedup ratio of
    the pair, > 1 = candidate better) and baseline_first (null: order not recorded)."""
    rejected: pl.DataFrame = field(default_factory=lambda: table("rejections").empty())
    """What the latest ingest of the campaign rejected (table ``rejections``): not assessed."""
    benchmarks: pl.DataFrame = field(default_factory=lambda: table("benchmarks").empty())
    """Table ``benchmarks``: every member of each attempt's family, when the campaign decides
    every benchmark (contract §15); empty otherwise."""
    medians: pl.DataFrame = field(default_factory=lambda: SIDE_MEDIANS.clear())
    """Per attempt and side: the median of the metric over its ok runs (in the metric's unit)
    and how many ok runs there were: the absolute values behind the ratios."""
    account: Account | None = None
    """The campaign's accounting (pipeline.assessment.accounting); None when blocked or empty."""

    @property
    def blocked(self) -> bool:
        return self.integrity.height > 0


def known_campaign(store: Store, campaign_id: str) -> None:
    """Raise UsageError naming the campaigns the store has when ``campaign_id`` is not one."""
    known_campaigns(store, [campaign_id])


def stale_attempts(
    attempts: pl.DataFrame, assessments: pl.DataFrame, campaign: Mapping[str, Any]
) -> pl.DataFrame:
    """Attempts whose stored verdicts do not match the stored inputs (ingested after assess)."""
    keys = ("campaign_id", "policy_sha256", "source_sha256", "interval")
    campaigns = pl.DataFrame(
        [{k: campaign.get(k) for k in keys}], schema=dict.fromkeys(keys, pl.String)
    )
    return (
        staleness(attempts, assessments, campaigns)
        .filter(pl.col("problem").is_not_null())
        .select("attempt_id", "problem")
        .sort("attempt_id")
    )


def pair_ratios(samples: pl.DataFrame, better: str) -> pl.DataFrame:
    """The metric ratio of every pair of the pairs table, as a speedup ratio, and who ran
    first."""
    return (
        pairs(samples.lazy())
        .select("attempt_id", "repetition", metric_ratio(pl.lit(better)), "baseline_first")
        .sort("attempt_id", "repetition")
        .collect()
        .cast(PAIR_RATIOS.schema)
    )


def side_medians(samples: pl.DataFrame) -> pl.DataFrame:
    """The median metric of each side's ok runs, per attempt."""
    return (
        samples.filter(pl.col("status") == "ok")
        .group_by("attempt_id", "side")
        .agg(pl.col("metric").median().alias("median"), pl.len().alias("n_ok"))
        .sort("attempt_id", "side")
        .cast(SIDE_MEDIANS.schema)
    )


def load_campaign_data(
    store: Store, campaign_id: str, *, what_if: Mapping[str, PolicyValue] | None = None
) -> CampaignData:
    """Read one campaign's report data; what-if verdicts are computed, never stored.

    A blocked campaign's outputs are not read at all (assess deletes them; any left over from
    before the block would be stale verdicts). A campaign with attempts and no stored assessment
    raises NotAssessedError."""
    known_campaign(store, campaign_id)
    campaign = store.read("campaigns", [campaign_id]).row(0, named=True)
    attempts, integrity = (
        store.read("attempts", [campaign_id]),
        store.read("integrity", [campaign_id]),
    )
    blocked = integrity.height > 0
    out = {
        name: table(name).empty() if blocked else store.read(name, [campaign_id])
        for name in OUTPUT_TABLES
    }
    samples = table("samples").empty() if blocked else store.read("samples", [campaign_id])
    if not blocked and out["assessments"].is_empty() and attempts.height:
        raise NotAssessedError(
            f"campaign {campaign_id!r} has not been assessed: "
            f"run `explain-pipeline assess {campaign_id}` first"
        )
    return CampaignData(
        campaign_id=campaign_id,
        campaign=campaign,
        attempts=attempts.sort("round", "attempt_id"),
        expectations=store.read("expectations", [campaign_id]),
        integrity=integrity.sort(pl.col("attempt_id").fill_null(""), "code"),
        assessments=out["assessments"].sort("round", "attempt_id"),
        comparisons=out["comparisons"],
        outcomes=out["outcomes"],
        stale=stale_attempts(
            attempts.clear() if blocked else attempts, out["assessments"], campaign
        ),
        what_if=None
        if blocked or not what_if
        else what_if_assessments(store, campaign_id, what_if),
        what_if_overrides={k: policy_text(v) for k, v in what_if.items()} if what_if else None,
        pair_ratios=PAIR_RATIOS.clear()
        if blocked
        else pair_ratios(samples, campaign["metric_better"]),
        medians=side_medians(samples),
        rejected=store.read("rejections", [campaign_id]).sort("position"),
        benchmarks=out["benchmarks"],
        account=None
        if blocked or out["assessments"].is_empty()
        else campaign_account(campaign, attempts, out["assessments"]),
    )


def campaign_account(
    campaign: Mapping[str, Any], attempts: pl.DataFrame, assessments: pl.DataFrame
) -> Account:
    """The stored verdicts' accounting (a campaign ingested before ``interval`` existed uses
    the policy's default interval, as assess does)."""
    policy = {**campaign, "interval": campaign.get("interval") or POLICY_DEFAULTS["interval"]}
    return account(policy, attempts, assessments)


def what_if_assessments(
    store: Store, campaign_id: str, what_if: Mapping[str, PolicyValue]
) -> pl.DataFrame:
    """Verdicts under the overridden policy, computed by the assess engine and never stored."""
    from pipeline.assessment.campaigns import (
        assess,  # imported here: a plain report needs no engine
    )

    return assess(store, [campaign_id], what_if=what_if, write=False).assessments
