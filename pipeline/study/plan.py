"""``explain-pipeline plan``: the pairs a comparison needs, priced from the spread already measured.

The spread comes from the stored attempts of the campaign folder (not the store: the folder is
what the next round adds to, and it needs no ingest first). Every attempt is read as ingest reads
it and paired by assess's own code (``quantities.pair_frames``); the spread of a quantity is the
standard deviation of its per-pair log-ratios *within* each attempt, pooled over the attempts
(``sqrt(sum((n_i - 1) s_i^2) / sum(n_i - 1))``): attempts compare different candidates, so their
means differ, but the noise of a pair is the machine's. Quantities: the metric, and every region
or counter a mechanism declares ``decrease`` or ``increase`` (as its evidence is compared:
``region_normalized`` where the attempt has reference regions).

For a true gain ``e`` (``d = ln(1 + e)``), spread ``s``, gate ``g = ln(1 + gate%)`` for the metric
(0 for a region or counter: its direction only needs ``low > 1``) and ``n`` pairs, a fixed round
says PASS when ``(m - g) / (s_hat / sqrt(n)) >= k(n)``, and that statistic is noncentral-t with
``n - 1`` degrees of freedom and noncentrality ``(d - g) sqrt(n) / s`` (normal log-ratios), so
``power(n) = 1 - nct.cdf(k(n), n - 1, (d - g) sqrt(n) / s)``, with ``k(n) = t_{n-1}(1 - a/2)``
for student_t, expanded_percentile and sequential_t at a fixed n, and ``z(1 - a/2) sqrt((n-1)/n)``
for percentile (the bootstrap percentile interval of a mean is about ``m -/+ z s_n / sqrt(n)``
with the divisor-n spread). The pairs needed are the smallest ``n >= min_pairs`` reaching the
power.

Sequential (``round --until-decided``, its plan: looks every 2 pairs from 6 up to a maximum):
a small simulation of normal log-ratios with that spread and gain, stopped by the round's own
rules (``assessment.sequential``'s boundary for PASS, its ``futile`` for futility, else the
maximum), gives the power at that maximum and the pairs used: mean and 90th percentile
(``assessment.power``, which the campaign's accounting shares).

A campaign that decides every benchmark (``decide: regions``) prices every member of the
family instead: the metric and every raw region (each benchmark), ``m`` of them. A member is
decided when its simultaneous interval (``pipeline.assessment.family``: Bonferroni Student-t at
``alpha / m``) clears the gate (improved) or the margin (regressed): a change of ``e`` percent is
priced by the harder of the two claims, ``shift = ln(1 + e) - ln(max(gate, margin))``, with
``k(n) = t_{n-1}(1 - alpha / (2 m))``; the sequential columns use the boundary at ``1 - alpha /
m`` (``family.critical_value``) with the same futility rule. The round stops when every member is
decided, so a member's pairs are the least the round needs.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.assessment import stopping
from pipeline.assessment.power import fixed_pairs, sequential_pairs
from pipeline.contract.declare import POLICY_DEFAULTS
from pipeline.errors import UsageError

EFFECTS_PCT = (2.0, 5.0, 10.0)
POWERS = (0.8, 0.9)
SEED = 0


@dataclass(frozen=True)
class Spread:
    quantity: str
    name: str
    sd: float
    n_pairs: int
    n_attempts: int


@dataclass(frozen=True)
class PlanRow:
    spread: Spread
    effect_pct: float
    fixed: dict[float, int | None]  # power -> pairs (None: not reachable)
    sequential_power: float
    sequential_mean: float
    sequential_p90: float


@dataclass(frozen=True)
class Plan:
    campaign_id: str
    interval: str
    gate_pct: float
    confidence: float
    min_pairs: int
    first_look: int
    max_pairs: int
    rows: list[PlanRow]
    refusal: str | None = None  # why this campaign's rounds refuse --until-decided, if they do
    family_size: int | None = None
    """decide regions: the members priced together (metric and benchmarks); None: the metric
    and the declared quantities, each at its own confidence."""
    margin_pct: float | None = None
    look_every: int = 2
    """Pairs between looks of a round --until-decided (stopping.plan_for: 4 deciding regions)."""


# -- the spread measured so far ---------------------------------------------------------------
def measured_spreads(folder: Path) -> tuple[dict, list[Spread]]:
    """The campaign's frozen policy and the pooled within-attempt spread of each quantity."""
    from pipeline.assessment import quantities
    from pipeline.ingestion.attempts import prepare_campaigns
    from pipeline.store.tables import Store

    with tempfile.TemporaryDirectory(prefix="explain-plan-") as scratch:
        prepared = prepare_campaigns([folder], Store(Path(scratch) / "store"), mode="precise")
    if not prepared.campaigns:
        raise UsageError(f"{folder}: " + "; ".join(str(i) for i in prepared.run.issues[:3]))
    campaign = prepared.campaigns[0]
    from pipeline.ingestion.attempts import campaign_frame

    campaigns = campaign_frame(campaign.cid, campaign.document).with_columns(
        pl.col("interval").fill_null(POLICY_DEFAULTS["interval"])
    )
    tables = prepared.new
    names = ("attempts", "samples", "breakdown", "counters", "expectations")
    inputs = quantities.Inputs(campaigns=campaigns.lazy(), **{n: tables[n].lazy() for n in names})
    pairs = quantities.pair_frames(inputs).pairs
    policy = campaigns.row(0, named=True)
    if decides_regions(policy):
        return policy, _pooled_family(pairs)
    return policy, _pooled(pairs, tables["expectations"])


def decides_regions(policy: dict) -> bool:
    """The campaign decides every benchmark (policy ``decide: regions``)."""
    from pipeline.assessment.family import DECIDES_REGIONS

    return policy.get("decide") == DECIDES_REGIONS


def _pool(x: pl.DataFrame) -> pl.DataFrame:
    """Per (quantity, name): the within-attempt spread pooled over attempts, pairs, attempts."""
    return (
        x.group_by("quantity", "name", "attempt_id")
        .agg(pl.len().alias("n"), pl.col("x").var(ddof=1).alias("v"))
        .filter(pl.col("n") >= 2)
        .group_by("quantity", "name")
        .agg(
            ((pl.col("v") * (pl.col("n") - 1)).sum() / (pl.col("n") - 1).sum()).sqrt().alias("sd"),
            pl.col("n").sum().alias("n_pairs"),
            pl.len().alias("n_attempts"),
        )
    )


def _spreads(per: pl.DataFrame) -> list[Spread]:
    rows = per.iter_rows(named=True)
    return [
        Spread(r["quantity"], r["name"], float(r["sd"]), int(r["n_pairs"]), int(r["n_attempts"]))
        for r in rows
    ]


def _pooled_family(pairs: pl.DataFrame) -> list[Spread]:
    """decide regions: the metric, then every raw region (benchmark), noisiest first."""
    from pipeline.assessment.family import MEMBERS

    per = _pool(pairs.filter(pl.col("x").is_finite() & pl.col("quantity").is_in(MEMBERS)))
    return _spreads(per.sort(pl.col("quantity") != "metric", -pl.col("sd"), "name"))


def _pooled(pairs: pl.DataFrame, expectations: pl.DataFrame) -> list[Spread]:
    declared = (
        expectations.filter(pl.col("expect").is_in(["decrease", "increase"]))
        .select(pl.col("target"), pl.col("name"))
        .unique()
    )
    kinds = pl.DataFrame(
        {
            "quantity": ["region", "region_normalized", "counter"],
            "target": ["region", "region", "counter"],
        }
    )
    wanted = kinds.join(declared, on="target").select("quantity", "name")
    finite = pairs.filter(pl.col("x").is_finite())
    chosen = finite.join(wanted, on=["quantity", "name"], how="semi")
    per = _pool(pl.concat([finite.filter(pl.col("quantity") == "metric"), chosen]))
    # a region compared normalized where there are reference regions: keep the evidence row
    normalized = per.filter(pl.col("quantity") == "region_normalized").select("name")
    per = per.filter(
        (pl.col("quantity") != "region") | ~pl.col("name").is_in(normalized["name"].implode())
    )
    order = {"metric": 0, "region": 1, "region_normalized": 1, "counter": 2}
    rank = pl.col("quantity").replace_strict(order, return_dtype=pl.Int64)
    return _spreads(per.sort(rank, "name"))


# -- the plan ---------------------------------------------------------------------------------
def plan(
    folder: Path,
    effects_pct: Sequence[float] = EFFECTS_PCT,
    *,
    max_pairs: int | None = None,
    sequential_columns: bool = True,
) -> Plan:
    """The plan of the campaign in ``folder`` (see the module docstring). ``max_pairs`` is the
    --until-decided maximum to simulate (None: as ``stopping.plan_for`` chooses it)."""
    policy, spreads = measured_spreads(folder)
    if not spreads:
        raise UsageError(
            f"{folder}: no attempt has two pairs of the metric yet: record a round first "
            "(plan prices the next rounds from the spread of those)"
        )
    method, confidence = str(policy["interval"]), float(policy["confidence"])
    gate_pct, min_pairs = float(policy["min_improvement_pct"]), int(policy["min_pairs"])
    rounds = stopping.plan_for(policy, max_pairs)  # deciding regions: the family's looks
    rng = np.random.Generator(np.random.PCG64(SEED))
    family_size = len(spreads) if decides_regions(policy) else None
    margin_pct = float(policy.get("margin_pct") or 1.0) if family_size else None
    # a member claims a change beyond the gate (improved) or the margin (regressed): the harder
    bar_pct = max(gate_pct, margin_pct or 0.0)
    # a member's sequential boundary is the family's: the round's at level alpha / m
    level = 1 - (1 - confidence) / (family_size or 1)
    rows = []
    for spread in spreads:
        gate = 1 + (bar_pct if family_size or spread.quantity == "metric" else 0.0) / 100
        for effect in effects_pct:
            d = math.log(1 + effect / 100)
            shift = d - math.log(gate)
            fixed = {
                p: fixed_pairs(shift, spread.sd, p, method, confidence, min_pairs, family_size)
                for p in POWERS
            }
            seq = (math.nan, math.nan, math.nan)
            if sequential_columns:
                seq = sequential_pairs(d, gate, spread.sd, plan=rounds, confidence=level, rng=rng)
            rows.append(PlanRow(spread, effect, fixed, *seq))
    return Plan(
        str(policy["campaign_id"]),
        method,
        gate_pct,
        confidence,
        min_pairs,
        rounds.first_look,
        rounds.max_pairs,
        rows,
        refusal=_refusal(policy),
        family_size=family_size,
        margin_pct=margin_pct,
        look_every=rounds.look_every,
    )


def _refusal(policy: dict) -> str | None:
    """The usage error `round --until-decided` would give this campaign (None: it allows it).
    The sequential columns are then what such a round would cost in a campaign frozen for it
    (or `ab --until-decided`), and the plan says so rather than suggest this campaign's rounds
    can stop early."""
    try:
        stopping.check_campaign(policy, "this campaign freezes")
    except UsageError as refused:
        return str(refused)
    return None


def parse_effects(text: str) -> tuple[float, ...]:
    """``--effect-pct 2,5,10`` -> (2.0, 5.0, 10.0); each > 0."""
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--effect-pct {text!r}: expected numbers separated by commas") from None
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise UsageError(f"--effect-pct {text!r}: every gain must be a number > 0 (percent)")
    return values
