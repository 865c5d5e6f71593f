"""Pairing and the per-pair log-ratios of every quantity (contract §4.1, §4.3), then one paired
interval per quantity (contract §4.2): Polars expressions over many attempts at once, one bootstrap
call per group of quantities that share (n, seed, resamples, confidence)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import polars as pl

from pipeline.assessment import sequential
from pipeline.assessment.intervals import method_intervals
from pipeline.contract.schemas import table

ATTEMPT = ["campaign_id", "attempt_id"]
RUN = [*ATTEMPT, "side", "repetition"]
QUANTITY = [*ATTEMPT, "quantity", "name"]
INTERVAL_POLICY = ["seed", "resamples", "confidence", "interval"]
SCHEDULE = ["sequential_first_look", "sequential_look_every", "sequential_max_pairs"]
"""The attempt's planned looks (table `attempts`): the `sequential_t` interval depends on them."""

Quantity = Literal["metric", "region", "region_normalized", "share_speedup", "counter"]
Reason = Literal[  # in the order of precedence (REASON_ORDER)
    "no_reference_time",
    "zero_share",
    "zero_baseline",
    "zero_candidate",
    "not_finite",
    "too_few_pairs",
]

_ENGINE: Literal["in-memory"] = "in-memory"
"""Engine of pair_frames' stages. A batch's rows are already in memory, and on these many joins
and group-bys of a few hundred thousand rows the in-memory engine is ~20% faster than the
default streaming engine."""

SHARE_NAME = "reference_share"
"""The `name` of the share_speedup comparison (one per attempt with reference regions)."""

# When one quantity has several reasons, the first in Reason's order is reported. Reasons that
# make the ratio undefined come before too_few_pairs, which still reports an estimate.
REASON_ORDER: tuple[Reason, ...] = get_args(Reason)
NOT_FINITE: Reason = "not_finite"
"""A value, a ratio, the estimate or a bound out of the floating-point range: a run's sum that
overflowed (values near 1e308), a ratio of two such values (NaN), an interval bound past e^709.
Such a quantity has no estimate, no interval and no direction (``NaN > 1`` is true in Polars)."""
_PAIR_SCHEMA = {
    "campaign_id": pl.String,
    "attempt_id": pl.String,
    "quantity": pl.String,
    "name": pl.String,
    "repetition": pl.Int64,
    "b": pl.Float64,
    "c": pl.Float64,
    "flag": pl.String,
}


@dataclass(frozen=True)
class Inputs:
    """The input tables of a batch of attempts; `campaigns` carries the effective policy."""

    campaigns: pl.LazyFrame
    attempts: pl.LazyFrame
    samples: pl.LazyFrame
    breakdown: pl.LazyFrame
    counters: pl.LazyFrame
    expectations: pl.LazyFrame


def _group_sum(frame: pl.LazyFrame, keys: list[str], **sums: pl.Expr) -> pl.LazyFrame:
    """Per group of `keys`, the sum of each expression, independent of row order.

    Joins and parallel group-bys do not keep row order, and float addition is not associative:
    a plain group sum can differ in the last bit from run to run or between batches. Here each
    group's values are gathered (cheap), then sorted and added one by one in that order
    (`_ordered_sums`), so results are the same to the last bit wherever an attempt is computed."""
    return (
        frame.with_columns(**sums)
        .group_by(keys)
        .agg(pl.col(list(sums)))
        .with_columns(
            pl.col(name).map_batches(_ordered_sums, return_dtype=pl.Float64) for name in sums
        )
    )


def _ordered_sums(lists: pl.Series) -> pl.Series:
    """Each list's values sorted ascending (NaN last) and added left to right: the same bits as
    `lists.list.sort().list.sum()`, several times faster for many short lists. The lists are
    laid out as the columns of a (longest, n) matrix, sorted down the columns and added row by
    row (a loop over list positions: numpy's own sums may add pairwise). Lists with nulls, or
    too ragged to pad cheaply, take the Polars path."""
    values = lists.list.explode()
    if lists.is_empty() or lists.null_count() or values.null_count():
        return lists.list.sort().list.sum()
    lengths = lists.list.len().to_numpy()
    n, longest = len(lengths), int(lengths.max())
    if lengths.min() == 0 or longest * n > 4 * len(values):
        return lists.list.sort().list.sum()
    present = np.arange(longest)[:, None] < lengths[None, :]
    padded = np.full((longest, n), np.nan)  # NaN pads sort last
    padded.T[present.T] = values.to_numpy()
    padded.sort(axis=0)
    padded[~present] = -0.0  # x + -0.0 == x for every x, -0.0 included
    total = padded[0].copy()
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is flagged not_finite
        for row in padded[1:]:
            total += row
    return pl.Series(lists.name, total)


# -- runs and pairs ------------------------------------------------------------------------------
def ok_runs(samples: pl.LazyFrame) -> pl.LazyFrame:
    return samples.filter(pl.col("status") == "ok").select([*RUN, "metric"])


def pairs(samples: pl.LazyFrame) -> pl.LazyFrame:
    """The pairs table: one row per pair, a repetition with an ok run on both sides (contract
    §4.1): ATTEMPT, repetition, each side's metric (``baseline``, ``candidate``) and
    ``baseline_first`` (the baseline ran first in the repetition; null when a run's order was
    not recorded). Assess pairs every quantity on it, the order effect groups its pairs by who
    ran first, the report draws its ratios (:func:`metric_ratio`)."""
    side = pl.col("side")
    order_of = lambda name: pl.col("order").filter(side == name).first()  # noqa: E731
    recorded = order_of("baseline").is_not_null() & order_of("candidate").is_not_null()
    return (
        samples.filter(pl.col("status") == "ok")
        .group_by([*ATTEMPT, "repetition"])
        .agg(
            pl.len().alias("sides"),
            pl.col("metric").filter(side == "baseline").first().alias("baseline"),
            pl.col("metric").filter(side == "candidate").first().alias("candidate"),
            pl.when(recorded).then(order_of("baseline") == 0).alias("baseline_first"),
        )
        .filter(pl.col("sides") == 2)
        .select([*ATTEMPT, "repetition", "baseline", "candidate", "baseline_first"])
    )


def pair_keys(samples: pl.LazyFrame) -> pl.LazyFrame:
    """The pairs (ATTEMPT, repetition) of the pairs table."""
    return pairs(samples).select([*ATTEMPT, "repetition"])


def metric_ratio(better: pl.Expr) -> pl.Expr:
    """A pair's metric ratio in the speedup direction (> 1: the candidate is better), from the
    pairs table's ``baseline`` and ``candidate``; ``better`` is the campaign's metric_better."""
    baseline, candidate = pl.col("baseline"), pl.col("candidate")
    return speedup(baseline, candidate, better == "higher").alias("ratio")


def speedup(b: pl.Expr, c: pl.Expr, c_over_b: pl.Expr) -> pl.Expr:
    """The ratio of a pair in the speedup direction: b / c (a time or a count), c / b where
    ``c_over_b`` (a higher-is-better metric, a share)."""
    return pl.when(c_over_b).then(c / b).otherwise(b / c)


def run_counts(samples: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt: ok runs per side, pairs, runs left without a partner, failed runs."""
    ok = pl.col("status") == "ok"
    per_side = samples.group_by(ATTEMPT).agg(
        ((pl.col("side") == "baseline") & ok).sum().cast(pl.Int64).alias("n_baseline_ok"),
        ((pl.col("side") == "candidate") & ok).sum().cast(pl.Int64).alias("n_candidate_ok"),
        (~ok).sum().cast(pl.Int64).alias("n_failed"),
    )
    n_pairs = pair_keys(samples).group_by(ATTEMPT).agg(pl.len().cast(pl.Int64).alias("n_pairs"))
    return (
        per_side.join(n_pairs, on=ATTEMPT, how="left")
        .with_columns(pl.col("n_pairs").fill_null(0))
        .with_columns(
            (pl.col("n_baseline_ok") - pl.col("n_pairs")).alias("n_unpaired_baseline"),
            (pl.col("n_candidate_ok") - pl.col("n_pairs")).alias("n_unpaired_candidate"),
        )
    )


def _numpy_median(column: str) -> pl.Expr:
    """numpy.median exactly: the middle value, or (a + b) / 2 of the two middle values."""
    ordered = pl.col(column).sort()
    return (ordered.get((pl.len() - 1) // 2) + ordered.get(pl.len() // 2)) / 2


def side_medians(samples: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt: median metric of every ok run of each side (paired or not), null if none."""
    medians = ok_runs(samples).group_by([*ATTEMPT, "side"]).agg(_numpy_median("metric").alias("m"))
    b = medians.filter(pl.col("side") == "baseline").select([*ATTEMPT, pl.col("m").alias("med_b")])
    c = medians.filter(pl.col("side") == "candidate").select([*ATTEMPT, pl.col("m").alias("med_c")])
    return b.join(c, on=ATTEMPT, how="full", coalesce=True)


# -- per-run values ------------------------------------------------------------------------------
# The breakdown and counters are the large tables. Their rows are keyed by an integer run id
# (`run`) and categorical step/region/counter names: grouping and joining on these is several
# times faster than on RUN's strings. Names are cast back to strings when the pairs are built.
def reference_regions(expectations: pl.LazyFrame) -> pl.LazyFrame:
    """Regions declared `unchanged`: the reference of normalization and shares (contract §2.3)."""
    return expectations.filter(
        (pl.col("target") == "region") & (pl.col("expect") == "unchanged")
    ).select([*ATTEMPT, pl.col("name").alias("region")])


def _run_ids(samples: pl.LazyFrame) -> pl.LazyFrame:
    """The ok runs (RUN + metric), each with an integer id `run`."""
    return ok_runs(samples).with_row_index("run")


def _ok_breakdown(inputs: Inputs, runs: pl.LazyFrame) -> pl.LazyFrame:
    """Breakdown rows of ok runs: run, step, region (categorical), seconds, is_ref. `step` is one
    integer per (run, step), which groups and joins faster than two columns."""
    refs = reference_regions(inputs.expectations).with_columns(pl.lit(True).alias("is_ref"))
    return (
        inputs.breakdown.join(runs.select([*RUN, "run"]), on=RUN)  # also drops runs not ok
        .join(refs, on=[*ATTEMPT, "region"], how="left")
        .select(
            "run",
            (
                pl.col("run").cast(pl.UInt64) * (1 << 32)
                + pl.col("step").cast(pl.Categorical).to_physical()
            ).alias("step"),
            pl.col("region").cast(pl.Categorical),
            "seconds",
            pl.col("is_ref").fill_null(False),
        )
    )


def _ok_counters(counters: pl.LazyFrame, runs: pl.LazyFrame) -> pl.LazyFrame:
    """Counter rows of ok runs: run, counter (categorical), value."""
    return counters.join(runs.select([*RUN, "run"]), on=RUN).select(
        "run", pl.col("counter").cast(pl.Categorical), "value"
    )


def _pair_runs(samples: pl.LazyFrame, runs: pl.LazyFrame) -> pl.LazyFrame:
    """Every pair (ATTEMPT + repetition) with the ids of its baseline and candidate runs."""
    on = [*ATTEMPT, "repetition"]
    b, c = (
        runs.filter(pl.col("side") == side).select([*on, pl.col("run").alias(column)])
        for side, column in (("baseline", "run_b"), ("candidate", "run_c"))
    )
    return pair_keys(samples).join(b, on=on).join(c, on=on)


def _paired(
    pair_keys: pl.LazyFrame, names: pl.LazyFrame, per_run: pl.LazyFrame, quantity: Quantity
) -> pl.LazyFrame:
    """Every (pair, name) of the attempt with both sides' values; a name absent from a run is 0.
    `per_run`: run, name, value."""
    return (
        pair_keys.join(names, on=ATTEMPT)
        .join(_side(per_run, "b", ["name"]), on=["run_b", "name"], how="left")
        .join(_side(per_run, "c", ["name"]), on=["run_c", "name"], how="left")
        .with_columns(
            pl.col("b").fill_null(0.0),
            pl.col("c").fill_null(0.0),
            pl.lit(quantity).alias("quantity"),
            pl.lit(None, dtype=pl.String).alias("flag"),
        )
    )


def _side(per_run: pl.LazyFrame, side: Literal["b", "c"], keys: list[str]) -> pl.LazyFrame:
    """Per-run values (run + keys + value) as the `side` column of a pair (joined on run_b/c)."""
    return per_run.select([pl.col("run").alias(f"run_{side}"), *keys, pl.col("value").alias(side)])


def _totals(frame: pl.LazyFrame, name: str, value: str) -> pl.LazyFrame:
    """Per run and name: the sum over steps (run, name, value)."""
    return _group_sum(frame, ["run", name], value=pl.col(value)).select(
        ["run", pl.col(name).alias("name"), "value"]
    )


def _names(per_run: pl.LazyFrame, runs: pl.LazyFrame) -> pl.LazyFrame:
    """The names that appear in any ok run of each attempt (ATTEMPT + name)."""
    return (
        per_run.select("run", "name")
        .join(runs.select(["run", *ATTEMPT]), on="run")
        .select([*ATTEMPT, "name"])
        .unique()
    )


def _step_reference(bd: pl.LazyFrame) -> pl.LazyFrame:
    """Per run and step: reference seconds and all seconds (step, ref_s, all_s, run)."""
    # adding the exact zeros of the non-reference regions leaves the reference sum unchanged
    ref = pl.when(pl.col("is_ref")).then(pl.col("seconds")).otherwise(0.0)
    return _group_sum(bd, ["step"], ref_s=ref, all_s=pl.col("seconds")).with_columns(
        (pl.col("step") // (1 << 32)).cast(pl.UInt32).alias("run")
    )


def _normalized(
    bd: pl.LazyFrame, steps: pl.LazyFrame, pair_keys: pl.LazyFrame, names: pl.LazyFrame
) -> pl.LazyFrame:
    """region_normalized (contract §4.3): per run, mean over steps with reference time > 0 of
    region_s / reference_s (a region absent from such a step adds 0 to the sum and still counts in
    the mean)."""
    ref_steps = steps.filter(pl.col("ref_s") > 0)
    den = ref_steps.group_by("run").agg(pl.len().alias("value"))
    num = (
        bd.filter(~pl.col("is_ref"))
        .join(ref_steps.drop("run"), on="step", how="inner")
        .pipe(_group_sum, ["run", "region"], value=pl.col("seconds") / pl.col("ref_s"))
        .select(["run", pl.col("region").alias("name"), "value"])
    )
    return (
        pair_keys.join(names, on=ATTEMPT)
        .join(_side(num, "b", ["name"]), on=["run_b", "name"], how="left")
        .join(_side(num, "c", ["name"]), on=["run_c", "name"], how="left")
        .join(_side(den, "b", []).rename({"b": "db"}), on="run_b", how="left")
        .join(_side(den, "c", []).rename({"c": "dc"}), on="run_c", how="left")
        .with_columns(
            (pl.col("b").fill_null(0.0) / pl.col("db")).alias("b"),
            (pl.col("c").fill_null(0.0) / pl.col("dc")).alias("c"),
            pl.when(pl.col("db").is_null() | pl.col("dc").is_null())
            .then(pl.lit("no_reference_time"))
            .alias("flag"),
            pl.lit("region_normalized").alias("quantity"),
        )
    )


def _share(steps: pl.LazyFrame, pair_keys: pl.LazyFrame) -> pl.LazyFrame:
    """contract §4.3, share_speedup: share = sum of reference / sum of all regions, per run."""
    share = _group_sum(steps, ["run"], ref=pl.col("ref_s"), every=pl.col("all_s")).select(
        ["run", (pl.col("ref") / pl.col("every")).alias("value")]
    )
    # a NaN share is an overflowed sum (inf / inf): log_ratios flags it not_finite
    bad = lambda s: pl.col(s).is_null() | (pl.col(s) == 0)  # noqa: E731
    return (
        pair_keys.join(_side(share, "b", []), on="run_b", how="left")
        .join(_side(share, "c", []), on="run_c", how="left")
        .with_columns(
            pl.lit(SHARE_NAME).alias("name"),
            pl.lit("share_speedup").alias("quantity"),
            pl.when(bad("b") | bad("c")).then(pl.lit("zero_share")).alias("flag"),
        )
    )


def _sides_of(bd: pl.LazyFrame, runs: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt and region: whether any ok baseline run and any ok candidate run measured
    it (ATTEMPT, name, on_baseline, on_candidate): a benchmark on one side only is ``added`` or
    ``removed`` (contract §15)."""
    side = pl.col("side")
    return (
        bd.select("run", "region")
        .unique()
        .join(runs.select("run", *ATTEMPT, "side"), on="run")
        .group_by([*ATTEMPT, "region"])
        .agg(
            (side == "baseline").any().alias("on_baseline"),
            (side == "candidate").any().alias("on_candidate"),
        )
        .select(*ATTEMPT, pl.col("region").alias("name"), "on_baseline", "on_candidate")
    )


def common_metric(inputs: Inputs) -> Inputs:
    """``inputs`` with each suite attempt's metric (attempt.json's ``suite_metric``: ``sum`` or
    ``geomean``) formed again, per ok run, over the benchmarks **every** ok run of the attempt
    measured, on both sides (contract §15): a benchmark one side skipped, added, or lost in one
    run counts in no run's metric, so every pair compares the same set. A run that measured
    exactly that set keeps its recorded metric; with no benchmark in common nothing changes."""
    if "suite_metric" not in inputs.attempts.collect_schema().names():
        return inputs  # tables written before the column existed: no attempt has a rule
    rules = inputs.attempts.filter(pl.col("suite_metric").is_not_null()).select(
        *ATTEMPT, "suite_metric"
    )
    ok = inputs.samples.filter(pl.col("status") == "ok").join(rules, on=ATTEMPT, how="semi")
    per_region = (
        inputs.breakdown.join(ok.select(RUN), on=RUN)
        .group_by([*RUN, "region"])
        .agg(pl.col("seconds").sort().sum())
    )
    n_runs = ok.group_by(ATTEMPT).agg(pl.len().alias("n_runs"))
    common = (
        per_region.group_by([*ATTEMPT, "region"])
        .agg(pl.len().alias("n_with"))
        .join(n_runs, on=ATTEMPT)
        .select(*ATTEMPT, "region", (pl.col("n_with") == pl.col("n_runs")).alias("common"))
    )
    kept = pl.col("seconds").filter(pl.col("common")).sort()
    per_run = (
        per_region.join(common, on=[*ATTEMPT, "region"])
        .group_by(RUN)
        .agg(
            (~pl.col("common")).any().alias("differs"),
            pl.col("common").sum().alias("n_common"),
            kept.sum().alias("total"),
            kept.log().mean().exp().alias("geomean"),  # a 0 s benchmark: ln 0 = -inf, exp 0
        )
        .join(rules, on=ATTEMPT)
    )
    formed = pl.when(pl.col("suite_metric") == "sum").then("total").otherwise("geomean")
    redo = pl.col("differs").fill_null(False) & (pl.col("n_common").fill_null(0) > 0)
    names = inputs.samples.collect_schema().names()
    samples = (
        inputs.samples.join(per_run, on=RUN, how="left")
        .with_columns(pl.when(redo).then(formed).otherwise(pl.col("metric")).alias("metric"))
        .select(names)
    )
    return dataclasses.replace(inputs, samples=samples)


def _on_side(quantity: str) -> list[pl.Expr]:
    """on_baseline, on_candidate of a region (``_sides_of``); null for other quantities."""
    return [
        (pl.col(c) if quantity == "region" else pl.lit(None)).cast(pl.Boolean).alias(c)
        for c in ("on_baseline", "on_candidate")
    ]


@dataclass(frozen=True)
class PairFrames:
    """`quantities`: one row per (attempt, quantity, name) that exists, even with no pair (a
    region with whether each side measured it: on_baseline, on_candidate).
    `pairs`: one row per pair of each quantity with its log-ratio `x` and an optional `flag`.
    `regions`: the region and region_normalized pairs with both sides' values `b`, `c` and the
    flag (the explained fraction reads them)."""

    quantities: pl.DataFrame
    pairs: pl.DataFrame
    regions: pl.DataFrame


def pair_frames(inputs: Inputs) -> PairFrames:
    """Every quantity (contract §4.3) of every attempt of `inputs`, and its per-pair log-ratios."""
    runs = _run_ids(inputs.samples).collect(engine=_ENGINE).lazy()
    # stages used several times are computed once
    pk, refs, bd, ok_counters = (
        f.lazy()
        for f in pl.collect_all(
            [
                _pair_runs(inputs.samples, runs),
                reference_regions(inputs.expectations),
                _ok_breakdown(inputs, runs),
                _ok_counters(inputs.counters, runs),
            ],
            engine=_ENGINE,
        )
    )
    with_refs = refs.select(ATTEMPT).unique()
    steps, region_run, counter_run = (
        f.lazy()
        for f in pl.collect_all(
            [
                _step_reference(bd),
                _totals(bd, "region", "seconds"),
                _totals(ok_counters, "counter", "value"),
            ],
            engine=_ENGINE,
        )
    )
    metric_name = inputs.campaigns.select("campaign_id", pl.col("metric_name").alias("name"))
    metric_run = runs.join(metric_name, on="campaign_id").select(
        "run", "name", pl.col("metric").alias("value")
    )
    metric_names = inputs.attempts.select(ATTEMPT).join(metric_name, on="campaign_id")
    region_names = _names(region_run, runs).join(
        _sides_of(bd, runs).with_columns(pl.col("name").cast(pl.Categorical)),
        on=[*ATTEMPT, "name"],
        how="left",
    )
    normalized_names = region_names.join(
        refs.select([*ATTEMPT, pl.col("region").cast(pl.Categorical).alias("name")]),
        on=[*ATTEMPT, "name"],
        how="anti",
    ).join(with_refs, on=ATTEMPT, how="semi")
    counter_names = _names(counter_run, runs)
    share_names = with_refs.with_columns(pl.lit(SHARE_NAME).alias("name"))

    columns = [pl.col(c).cast(t) for c, t in _PAIR_SCHEMA.items()]
    # collected once here: both the log-ratios and the explained fraction read them (a plan
    # that used them twice computed them twice)
    regions = pl.concat(
        [
            _paired(pk, region_names, region_run, "region").select(columns),
            _normalized(bd, steps, pk, normalized_names).select(columns),
        ]
    ).collect(engine=_ENGINE)
    raw = pl.concat(
        [
            _paired(pk, metric_names, metric_run, "metric").select(columns),
            regions.lazy(),
            _share(steps, pk.join(with_refs, on=ATTEMPT, how="semi")).select(columns),
            _paired(pk, counter_names, counter_run, "counter").select(columns),
        ]
    )
    quantities = pl.concat(
        [
            names.select(
                *ATTEMPT,
                pl.lit(q).alias("quantity"),
                pl.col("name").cast(pl.String),
                *_on_side(q),
            )
            for q, names in (
                ("metric", metric_names),
                ("region", region_names),
                ("region_normalized", normalized_names),
                ("share_speedup", share_names),
                ("counter", counter_names),
            )
        ]
    )
    q_frame, p_frame = pl.collect_all(
        [quantities, log_ratios(raw, inputs.campaigns)], engine=_ENGINE
    )
    return PairFrames(quantities=q_frame, pairs=p_frame, regions=regions)


def log_ratios(raw: pl.LazyFrame, campaigns: pl.LazyFrame) -> pl.LazyFrame:
    """x = ln(b / c); ln(c / b) for the metric of a `better: higher` campaign and for shares.
    A value that is not finite (a sum that overflowed, NaN) flags not_finite; then baseline 0
    (incl. 0/0) flags zero_baseline; candidate 0 with baseline > 0 gives x = +inf (b / c) or
    flags zero_candidate (c / b); a ratio of two nonzero values out of range (0 or inf) flags
    not_finite."""
    q = pl.col("quantity")
    c_over_b = (q == "share_speedup") | ((q == "metric") & (pl.col("metric_better") == "higher"))
    ratio = speedup(pl.col("b"), pl.col("c"), c_over_b)
    b, c, r = pl.col("b"), pl.col("c"), pl.col("ratio")
    flag = (
        pl.when(pl.col("flag").is_not_null())
        .then(pl.col("flag"))
        .when(~b.is_finite() | ~c.is_finite())
        .then(pl.lit(NOT_FINITE))
        .when(b == 0)
        .then(pl.lit("zero_baseline"))
        .when(c == 0)  # b / c: +inf, the thing vanished (no flag); c / b: 0
        .then(pl.when(r == 0).then(pl.lit("zero_candidate")))
        .when(~r.is_finite() | (r == 0))  # b / c or c / b overflowed, or underflowed to 0
        .then(pl.lit(NOT_FINITE))
    )
    return (
        raw.join(campaigns.select("campaign_id", "metric_better"), on="campaign_id")
        .with_columns(ratio.alias("ratio"))
        .with_columns(flag.alias("flag"))
        .with_columns(pl.when(pl.col("flag").is_null()).then(pl.col("ratio").log()).alias("x"))
        .select([*QUANTITY, "repetition", "x", "flag"])
    )


# -- intervals -----------------------------------------------------------------------------------
def _reason_rank() -> pl.Expr:
    """Position of the flag in REASON_ORDER (null: no flag)."""
    return pl.col("flag").replace_strict(
        list(REASON_ORDER), list(range(len(REASON_ORDER))), default=None, return_dtype=pl.Int64
    )


def _reason_of_rank() -> pl.Expr:
    return pl.col("rank").replace_strict(
        list(range(len(REASON_ORDER))), list(REASON_ORDER), default=None, return_dtype=pl.String
    )


def _schedules(attempts: pl.LazyFrame) -> pl.LazyFrame:
    """Per attempt, its planned looks (SCHEDULE; null: a fixed-n round). Stores written before
    the columns existed have none."""
    present = set(attempts.collect_schema().names())
    return attempts.select(
        *ATTEMPT,
        *[(pl.col(c) if c in present else pl.lit(None)).cast(pl.Int64).alias(c) for c in SCHEDULE],
    )


def summarize(frames: PairFrames, campaigns: pl.LazyFrame, attempts: pl.LazyFrame) -> pl.DataFrame:
    """One row per quantity: n_pairs, reason (null when an interval is due), exp(mean x) when the
    ratio is defined, the interval policy of its campaign, its attempt's planned looks, and its
    pairs' x by repetition (``xs``, what the interval is computed from)."""
    per = (
        frames.pairs.lazy()
        .with_columns(_reason_rank().alias("rank"))
        .group_by(QUANTITY)
        .agg(
            pl.len().cast(pl.Int64).alias("n_pairs"),
            pl.col("rank").min(),
            pl.col("x"),
            pl.col("x").sort_by("repetition").alias("xs"),
        )
        .with_columns(
            _reason_of_rank().alias("reason"),
            # sorted first: the same mean to the last bit whatever the row order
            pl.col("x").list.sort().list.mean().alias("mean_x"),
        )
        .drop("rank", "x")
    )
    policy = campaigns.select("campaign_id", "min_pairs", *INTERVAL_POLICY)
    return (
        frames.quantities.lazy()
        .join(per, on=QUANTITY, how="left")
        .join(policy, on="campaign_id")
        .join(_schedules(attempts), on=ATTEMPT, how="left")
        .with_columns(pl.col("n_pairs").fill_null(0))
        .with_columns(
            pl.when(pl.col("reason").is_null() & (pl.col("n_pairs") < pl.col("min_pairs")))
            .then(pl.lit("too_few_pairs"))
            .otherwise(pl.col("reason"))
            .alias("reason")
        )
        .with_columns(
            pl.when(pl.col("reason").is_null() | (pl.col("reason") == "too_few_pairs"))
            .then(pl.col("mean_x").exp())
            .alias("estimate")
        )
        .drop("mean_x", "min_pairs")
        .sort(QUANTITY)
        .with_row_index("qid")
        .collect()
    )


def intervals(summary: pl.DataFrame) -> pl.DataFrame:
    """The interval of every quantity due one: one `method_intervals` call per group of equal
    (n, seed, resamples, confidence, interval, and for `sequential_t` the planned looks), its
    x matrix (n, Q) from the summary's lists (one row per repetition). Returns qid, estimate,
    low, high, method."""
    group = ["n_pairs", *INTERVAL_POLICY, *SCHEDULE]
    sequential_t = pl.col("interval") == sequential.METHOD
    due = (
        summary.filter(pl.col("reason").is_null())
        .with_columns(pl.when(sequential_t).then(pl.col(c)).alias(c) for c in SCHEDULE)
        .select("qid", *group, "xs")
        .sort([*group, "qid"], nulls_last=True)
    )
    schema = {
        "qid": pl.UInt32,
        "estimate": pl.Float64,
        "low": pl.Float64,
        "high": pl.Float64,
        "method": pl.String,
    }
    if due.is_empty():
        return pl.DataFrame(schema=schema)
    out = []
    for key, part in due.partition_by(group, as_dict=True, maintain_order=True).items():
        n, seed, resamples, confidence, method, first_look, look_every, max_pairs = key
        qids = part["qid"].to_numpy()
        x = part["xs"].explode().to_numpy().reshape(len(qids), int(n)).T
        critical = None
        if method == sequential.METHOD and n >= 2:
            plan = (
                sequential.Schedule(int(first_look), int(look_every), int(max_pairs))
                if first_look is not None
                else sequential.Schedule.single(int(n))
            )
            critical = plan.critical(float(confidence), int(n))
        result = method_intervals(
            x,
            method,
            resamples=int(resamples),
            seed=int(seed),
            confidence=float(confidence),
            critical=critical,
        )
        out.append(
            pl.DataFrame(
                {
                    "qid": qids,
                    "estimate": result.estimate,
                    "low": result.low,
                    "high": result.high,
                    "method": result.method,
                },
                schema=schema,
            )
        )
    return pl.concat(out)


def out_of_range(xs: pl.Expr, *numbers: str) -> pl.Expr:
    """Whether any of the columns ``numbers`` (an estimate, a bound) is NaN, or infinite while
    no pair of ``xs`` is ``+inf`` (the +inf rules of contract §4.2 give a vanished quantity an
    infinite estimate or bound; any other infinity is an overflow). Null counts as in range."""
    vanished = xs.list.eval(pl.element() == math.inf).list.any().fill_null(False)
    bad = [pl.col(n).is_nan() | (pl.col(n).is_infinite() & ~vanished) for n in numbers]
    return pl.any_horizontal(bad).fill_null(False)


def _direction() -> pl.Expr:
    speedup = pl.col("quantity").is_in(["metric", "share_speedup"])
    up = pl.when(speedup).then(pl.lit("improved")).otherwise(pl.lit("decrease"))
    down = pl.when(speedup).then(pl.lit("regressed")).otherwise(pl.lit("increase"))
    return (
        pl.when((pl.col("status") != "ok") | pl.col("low").is_nan() | pl.col("high").is_nan())
        .then(None)
        .when(pl.col("low") > 1)
        .then(up)
        .when(pl.col("high") < 1)
        .then(down)
        .otherwise(pl.lit("none"))
    )


def comparisons(inputs: Inputs, frames: PairFrames | None = None) -> pl.DataFrame:
    """Rows of table `comparisons` for every attempt of `inputs` (contract §4); `frames`: their
    pair_frames when already computed."""
    frames = frames or pair_frames(inputs)
    return comparisons_of(summarize(frames, inputs.campaigns, inputs.attempts))


def comparisons_of(summary: pl.DataFrame) -> pl.DataFrame:
    """Rows of table `comparisons` from the summary of quantities (`summarize`)."""
    bounds = intervals(summary)
    numbers = ("estimate", "low", "high")
    return (
        summary.join(bounds, on="qid", how="left", suffix="_boot")
        .with_columns(pl.coalesce("estimate_boot", "estimate").alias("estimate"))
        .with_columns(
            pl.when(out_of_range(pl.col("xs"), *numbers))
            .then(pl.lit(NOT_FINITE))
            .otherwise(pl.col("reason"))
            .alias("reason")
        )
        .with_columns(
            *(
                pl.when(~pl.col("reason").eq_missing(NOT_FINITE)).then(pl.col(n)).alias(n)
                for n in (*numbers, "method")
            ),
            pl.when(pl.col("reason").is_null())
            .then(pl.lit("ok"))
            .otherwise(pl.lit("unverifiable"))
            .alias("status"),
        )
        .with_columns(_direction().alias("direction"))
        .select(table("comparisons").names)
    )
