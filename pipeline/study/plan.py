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
rules (``assess.sequential``'s boundary for PASS, its ``futile`` for futility, else the maximum),
gives the power at that maximum and the pairs used: mean and 90th percentile.

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

from pipeline.assessment.sequential import Schedule
from pipeline.contract.declare import POLICY_DEFAULTS
from pipeline.errors import UsageError

EFFECTS_PCT = (2.0, 5.0, 10.0)
POWERS = (0.8, 0.9)
SIMULATIONS = 2000
"""Simulated rounds per cell of the sequential columns (power to about +-1 point)."""
SEED = 0
LIMIT = 100_000
"""Pairs beyond which plan says ``never``: no round of that size will be run."""


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
    """Pairs between looks of a round --until-decided (until.plan_for: 4 deciding regions)."""


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


# -- fixed rounds -----------------------------------------------------------------------------
def critical(
    n: np.ndarray, method: str, confidence: float, family_size: int | None = None
) -> np.ndarray:
    """``k(n)``: the statistic a fixed round with ``n`` pairs must reach (module docstring),
    as the interval method's registry entry gives it; with a ``family_size``, the Bonferroni
    Student-t constant of a member of that family (contract §15)."""
    if family_size is not None:
        from scipy.special import stdtrit  # = scipy.stats.t.ppf, without scipy.stats' import

        level = (1.0 - confidence) / (2 * family_size)
        return np.asarray(stdtrit(np.asarray(n) - 1, 1 - level), dtype=np.float64)
    from pipeline.assessment.intervals import interval_method

    return interval_method(method).critical(np.asarray(n, dtype=np.float64), confidence)


def fixed_power(
    n: np.ndarray,
    shift: float,
    sd: float,
    method: str,
    confidence: float,
    family_size: int | None = None,
) -> np.ndarray:
    """Power of a fixed round of ``n`` pairs when the true mean log-ratio exceeds the gate by
    ``shift`` (noncentral t); ``family_size``: of a member of that family (decide regions)."""
    from scipy import stats

    n = np.asarray(n, dtype=np.float64)
    if sd == 0:
        return np.where(shift > 0, 1.0, 0.0) * np.ones_like(n)
    ncp = shift * np.sqrt(n) / sd
    k = critical(n, method, confidence, family_size)
    power = np.asarray(stats.nct.sf(k, n - 1, ncp), dtype=np.float64)
    # scipy's noncentral t gives NaN for a huge ncp (a spread of rounding noise, ~1e-17): there
    # the normal approximation is exact to the printed digits
    return np.where(np.isnan(power), stats.norm.sf(k - ncp), power)


def fixed_pairs(
    shift: float,
    sd: float,
    power: float,
    method: str,
    confidence: float,
    min_pairs: int,
    family_size: int | None = None,
) -> int | None:
    """Smallest n >= min_pairs whose power reaches ``power``; None when the gain does not
    exceed the gate (no n will do) or more than LIMIT pairs would be needed. ``family_size``:
    a member of a family of that size (its level is alpha / m, so it needs more pairs)."""
    from scipy import stats

    if shift <= 0:
        return None
    if sd == 0:
        return min_pairs
    level = (1 - confidence) / (family_size or 1)
    z = stats.norm.ppf(1 - level / 2) + stats.norm.ppf(power)
    guess = (z * sd / shift) ** 2  # the normal approximation: the t needs a few pairs more
    low = max(min_pairs, int(guess * 0.8) - 2)
    if low > LIMIT:
        return None
    grid = np.arange(low, int(guess * 1.5) + 20)
    hit = np.flatnonzero(fixed_power(grid, shift, sd, method, confidence, family_size) >= power)
    return int(grid[hit[0]]) if hit.size else None


# -- sequential rounds ------------------------------------------------------------------------
def sequential_pairs(
    shift_gain: float,
    gate: float,
    sd: float,
    *,
    plan: Schedule,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, float, float]:
    """Power, mean pairs and 90th percentile of pairs of ``round --until-decided`` when the
    true mean log-ratio is ``shift_gain`` and the gate (a ratio) ``gate``: SIMULATIONS rounds of
    normal log-ratios stopped by the round's rules."""
    from pipeline.assessment import sequential

    looks, c = np.array(plan.looks), plan.boundary(confidence)
    x = rng.normal(shift_gain, sd, size=(SIMULATIONS, plan.max_pairs))
    sums, squares = np.cumsum(x, axis=1)[:, looks - 1], np.cumsum(x * x, axis=1)[:, looks - 1]
    mean = sums / looks
    s = np.sqrt(np.maximum(squares - sums * mean, 0.0) / (looks - 1))
    passed = mean - c * s / np.sqrt(looks) >= math.log(max(gate, 1.0))
    if gate <= 1.0:  # a region or counter: its direction needs low > 1, strictly
        passed &= mean - c * s / np.sqrt(looks) > 0
    stop = passed.copy()
    stop[:, -1] = True
    running = np.ones(SIMULATIONS, dtype=bool)
    for k, n in enumerate(looks[:-1]):  # a loop over the looks only: each asks every round
        ask = running & ~passed[:, k]
        stop[ask, k] = sequential.futile_mask(
            n, mean[ask, k], s[ask, k], gate=gate, plan=plan, confidence=confidence
        )  # the round's own rule, asked only of the rounds still running at each look
        running &= ~stop[:, k]
    first = stop.argmax(axis=1)
    used = looks[first]
    won = passed[np.arange(SIMULATIONS), first]
    return float(won.mean()), float(used.mean()), float(np.quantile(used, 0.9))


# -- the plan ---------------------------------------------------------------------------------
def plan(
    folder: Path,
    effects_pct: Sequence[float] = EFFECTS_PCT,
    *,
    max_pairs: int | None = None,
    sequential_columns: bool = True,
) -> Plan:
    """The plan of the campaign in ``folder`` (see the module docstring). ``max_pairs`` is the
    --until-decided maximum to simulate (None: as ``until.plan_for`` chooses it)."""
    from pipeline.record import until

    policy, spreads = measured_spreads(folder)
    if not spreads:
        raise UsageError(
            f"{folder}: no attempt has two pairs of the metric yet: record a round first "
            "(plan prices the next rounds from the spread of those)"
        )
    method, confidence = str(policy["interval"]), float(policy["confidence"])
    gate_pct, min_pairs = float(policy["min_improvement_pct"]), int(policy["min_pairs"])
    rounds = until.plan_for(policy, max_pairs)  # deciding regions: the family's looks
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
    from pipeline.record import until

    try:
        until.check_campaign(policy, "this campaign freezes")
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
