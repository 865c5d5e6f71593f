"""assess: comparisons, outcomes and verdicts for the campaigns of a store (contract §4-§6).

Stages: blocked campaigns (any row in table `integrity`) are set aside; attempts whose inputs,
policy and campaign document are as when they were last assessed keep their stored comparisons
and outcomes; every other attempt is computed in batches of at most `batch_size` attempts (a batch
may span small campaigns or slice a large one) so that memory stays bounded; verdicts, eligibility
and the best attempt are then derived for every attempt of every campaign at once.

A blocked campaign's output partitions are deleted in the same transaction: a verdict of a
campaign whose evidence no longer checks out is not shown as current anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import polars as pl

from pipeline.assessment import (
    accounting,
    chance,
    explain,
    family,
    fraction,
    order_effect,
    quantities,
    verdicts,
)
from pipeline.assessment.gate import Gate, decide_gate, metric_member
from pipeline.assessment.quantities import ATTEMPT
from pipeline.assessment.staleness import boundary_recipe, staleness
from pipeline.contract.declare import spec
from pipeline.contract.policy import (
    ADDED_AFTER_V1,
    POLICY_DEFAULTS,
    PolicyValue,
    policy_sha256,
    policy_text,
)
from pipeline.contract.schemas import OUTPUT_TABLES, table, tables
from pipeline.engines import Engine, LocalEngine
from pipeline.errors import ExitCode, PolicyError, StoreError, UsageError
from pipeline.store.tables import Store, Transaction, known_campaigns

DEFAULT_BATCH = 2000
"""Attempts computed together: ~640k breakdown rows at 10 repetitions x 4 steps x 4 regions;
larger batches gain little speed and raise the peak memory."""

VERDICT_KEYS = ("decision", "require_explanation", "min_improvement_pct", "margin_pct")
"""Policy fields read by the verdicts alone: a what-if of these re-reads stored intervals."""
INTERVAL_KEYS = ("confidence", "resamples", "seed", "min_pairs", "interval", "decide")
"""Policy fields the intervals depend on (``decide``: which members a family has, so its size):
a what-if of any of these recomputes them."""
COUNT_COLUMNS = (
    "n_pairs",
    "n_baseline_ok",
    "n_candidate_ok",
    "n_unpaired_baseline",
    "n_unpaired_candidate",
    "n_failed",
)
FACT_SCHEMA = {
    "campaign_id": pl.String,
    "attempt_id": pl.String,
    **{c: pl.Int64 for c in COUNT_COLUMNS},
    "improvement_pct": pl.Float64,
    "median_problem": pl.String,
    **fraction.COLUMNS,
    **order_effect.COLUMNS,
    "metric_spread": pl.Float64,
    "side_spread": pl.Float64,
}
FACT_COLUMNS = list(FACT_SCHEMA)


@dataclass(frozen=True)
class AssessResult:
    """What assess found; `frozen` holds the frozen policy's verdicts when this is a what-if."""

    assessments: pl.DataFrame
    comparisons: pl.DataFrame
    outcomes: pl.DataFrame
    blocked: pl.DataFrame
    what_if: dict[str, str] | None = None
    """The what-if's overrides as written (``policy_text``), e.g. ``{"decision": "paired"}``."""
    frozen: pl.DataFrame | None = None
    recomputed: int = 0
    """Attempts whose comparisons were computed in this run (the rest were reused)."""
    campaign_ids: tuple[str, ...] = ()
    """Every campaign asked for, assessed or blocked (one with no attempt has no rows)."""
    rejected: pl.DataFrame | None = None
    """Rows of table ``rejections`` of these campaigns: what their latest ingest rejected, so
    not assessed (or assessed as an earlier valid version)."""
    benchmarks: pl.DataFrame = field(default_factory=lambda: table("benchmarks").empty())
    """Rows of table ``benchmarks``: every member of the family of each attempt whose campaign
    decides regions, with its simultaneous interval and verdict (contract §15)."""
    policies: pl.DataFrame | None = None
    """The assessed campaigns' rows of table ``campaigns``, under the effective policy."""
    attempts: pl.DataFrame | None = None
    """The assessed campaigns' rows of table ``attempts``."""
    gate: Gate | None = None
    """``assess --gate``: the CI gate (``gate()``) the command set, so that every format and
    annotation shows the outcome that decides the exit code; None without a gate."""

    @cached_property
    def accounts(self) -> dict[str, accounting.Account]:
        """Each assessed campaign's accounting (pipeline.assessment.accounting), computed when a
        format asks for it: JSON and CSV never pay for it."""
        if self.policies is None or self.attempts is None:
            return {}
        return accounting.accounts(self.policies, self.attempts, self.assessments)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.INTEGRITY if self.blocked.height else ExitCode.OK

    def changed_verdicts(self) -> pl.DataFrame:
        """What-if only: attempts whose verdict differs from the frozen policy's."""
        if self.frozen is None:
            return self.assessments.clear().select(*ATTEMPT, "verdict")
        return (
            self.assessments.select(*ATTEMPT, "verdict")
            .join(
                self.frozen.select(*ATTEMPT, pl.col("verdict").alias("frozen_verdict")), on=ATTEMPT
            )
            .filter(pl.col("verdict") != pl.col("frozen_verdict"))
        )


# -- what-if ---------------------------------------------------------------------------------------
def overrides(what_if: Mapping[str, PolicyValue]) -> dict[str, PolicyValue]:
    """Typed policy overrides, checked against campaign.schema.json's policy by the validator
    ingest checks campaign.json with (the same bounds, choices and types, finite numbers); a
    number field's integer becomes a float, as campaign.json's parser reads it, so the what-if
    digest is the same however it was written. A PolicyError otherwise."""
    known = (*VERDICT_KEYS, *INTERVAL_KEYS)
    for key, value in what_if.items():
        if key not in known:
            raise PolicyError(key, value, f"unknown policy field (known: {', '.join(known)})")
    from pipeline.ingestion.rules import check_fields

    problems = check_fields("campaign", ("policy",), what_if)
    if problems:
        path, _, message = problems[0]
        raise PolicyError(str(path[0]), what_if[str(path[0])], message)
    props = spec("campaign", "policy")["properties"]
    return {
        k: float(v) if props[k].get("type") == "number" and isinstance(v, int) else v
        for k, v in what_if.items()
    }


def with_policy_defaults(campaigns: pl.DataFrame) -> pl.DataFrame:
    """Campaign rows with the policy fields added after v1 filled where a store written before
    they existed has nulls (they read as their defaults: contract §2.1)."""
    return campaigns.with_columns(pl.col(f).fill_null(POLICY_DEFAULTS[f]) for f in ADDED_AFTER_V1)


def _apply_policy(campaigns: pl.DataFrame, changes: Mapping[str, Any]) -> pl.DataFrame:
    """Campaign rows under the overridden policy; policy_sha256 becomes the what-if's digest."""
    digests = [policy_sha256({**json.loads(text), **changes}) for text in campaigns["policy_json"]]
    return campaigns.with_columns(
        *[pl.lit(v, dtype=campaigns.schema[k]).alias(k) for k, v in changes.items()],
        pl.Series("policy_sha256", digests, dtype=pl.String),
    )


def gated_attempt(
    assessments: pl.DataFrame, campaign_id: str, attempt_id: str | None = None
) -> dict[str, Any]:
    """The assessments row a CI gate decides on: ``attempt_id``, else the campaign's latest round
    (the highest attempt id among attempts of that round; a confirmation round is not a round
    of the search, so only ``attempt_id`` gates on one)."""
    rows = assessments.filter(pl.col("campaign_id") == campaign_id).sort("round", "attempt_id")
    if rows.is_empty():
        raise UsageError(f"campaign {campaign_id!r} has no attempts")
    if attempt_id is None:
        searched = rows.filter(pl.col("kind") != "confirmation")
        return (searched if searched.height else rows).row(-1, named=True)
    found = rows.filter(pl.col("attempt_id") == attempt_id)
    if found.is_empty():
        have = ", ".join(rows["attempt_id"].to_list()[-10:])
        raise UsageError(
            f"no attempt {attempt_id!r} in campaign {campaign_id!r} (latest attempts: {have})"
        )
    return found.row(0, named=True)


def gate(
    result: AssessResult,
    campaign_id: str,
    attempt_id: str | None,
    fail_on: str,
    *,
    allow_removed: bool = False,
) -> Gate:
    """The CI gate (``--fail-on``, pipeline.assessment.gate) of ``attempt_id``, else the campaign's
    latest round: its benchmarks under ``decide: regions``, else its metric (``allow_removed``:
    ``--allow-removed``)."""
    row = gated_attempt(result.assessments, campaign_id, attempt_id)
    policies = result.policies if result.policies is not None else table("campaigns").empty()
    policy = policies.filter(pl.col("campaign_id") == campaign_id).row(0, named=True)
    if policy["decide"] == family.DECIDES_REGIONS:
        mine = pl.col("campaign_id") == campaign_id
        members = result.benchmarks.filter(mine & (pl.col("attempt_id") == row["attempt_id"]))
    else:
        gate_pct, margin_pct = policy["min_improvement_pct"], policy["margin_pct"]
        members = metric_member(row, policy["metric_name"], gate_pct, margin_pct)
    return decide_gate(row, members, fail_on, allow_removed=allow_removed)


# -- reading -------------------------------------------------------------------------------------
def _scan(store: Store, name: str, todo: pl.DataFrame, sizes: Mapping[str, int]) -> pl.LazyFrame:
    """Rows of `todo`'s attempts: one scan over the campaigns computed whole, one over those
    computed in part, whose attempts are picked by a semi join (an `is_in` predicate on the
    Parquet scan is far slower; a scan per campaign costs milliseconds each)."""
    counts = todo.group_by("campaign_id", maintain_order=True).len()
    whole = [cid for cid, n in counts.iter_rows() if n >= sizes.get(cid, 0)]
    partial = [cid for cid, n in counts.iter_rows() if n < sizes.get(cid, 0)]
    parts = [store.scan(name, whole)] if whole else []
    if partial:
        wanted = todo.filter(pl.col("campaign_id").is_in(partial)).lazy()
        parts.append(store.scan(name, partial).join(wanted, on=ATTEMPT, how="semi"))
    return pl.concat(parts) if parts else table(name).empty().lazy()


def _fresh(previous: pl.DataFrame, attempts: pl.DataFrame, campaigns: pl.DataFrame) -> pl.DataFrame:
    """Attempts assessed before with the same inputs, policy and campaign document."""
    # rows stored before the report-only columns existed have neither a value nor a reason;
    # rows stored before `kind` (and the spreads, added with it) have no kind
    complete = pl.all_horizontal(
        *(
            pl.col(value).is_not_null() | pl.col(f"{value}_reason").is_not_null()
            for value in ("explained_fraction", "order_effect")
        ),
        pl.col("kind").is_not_null(),
    )
    state = staleness(attempts, previous.filter(complete), campaigns)
    return state.filter(pl.col("problem").is_null()).select(ATTEMPT)


# -- computing -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Facts:
    facts: pl.DataFrame  # FACT_COLUMNS
    comparisons: pl.DataFrame
    outcomes: pl.DataFrame
    benchmarks: pl.DataFrame  # verdicts not yet read (family.with_verdicts reads them)
    computed: pl.DataFrame  # ATTEMPT keys computed in this run (not reused)


def _batches(todo: pl.DataFrame, size: int) -> Iterator[pl.DataFrame]:
    """Whole campaigns packed together up to `size` attempts; a campaign larger than `size` is
    cut into slices of `size`. A batch is the engine's unit of work, so it reads whole
    partitions wherever it can, and every engine cuts the same batches."""
    todo = todo.sort("campaign_id", maintain_order=True)
    pieces: list[int] = []
    for n in todo.group_by("campaign_id", maintain_order=True).len()["len"]:
        pieces += [size] * (n // size) + ([n % size] if n % size else [])
    start = end = 0
    for length in pieces:
        if end + length - start > size:
            yield todo.slice(start, end - start)
            start = end
        end += length
    if end > start:
        yield todo.slice(start, end - start)


def _work(
    store: Store, campaigns: pl.DataFrame, todo: pl.DataFrame, sizes: Mapping[str, int], size: int
) -> Iterator[tuple[Store, pl.DataFrame, pl.DataFrame, dict[str, int]]]:
    """The arguments of `compute_batch` per batch, with only the batch's campaigns."""
    for batch in _batches(todo, size):
        ids = batch["campaign_id"].unique().to_list()
        mine = campaigns.filter(pl.col("campaign_id").is_in(ids))
        yield store, mine, batch, {c: sizes[c] for c in ids if c in sizes}


def _inputs(
    store: Store, campaigns: pl.DataFrame, batch: pl.DataFrame, sizes: Mapping[str, int]
) -> quantities.Inputs:
    """The batch's input rows, read once (each is used by several stages). The streaming engine
    keeps memory to the batch's rows when only part of a large partition is wanted."""
    names = ("attempts", "samples", "breakdown", "counters", "expectations")
    scans = [_scan(store, name, batch, sizes) for name in names]
    frames = pl.collect_all(scans, engine="streaming")
    return quantities.Inputs(
        campaigns=campaigns.lazy(), **{n: f.lazy() for n, f in zip(names, frames, strict=True)}
    )


def compute_batch(
    store: Store, campaigns: pl.DataFrame, batch: pl.DataFrame, sizes: Mapping[str, int]
) -> _Facts:
    """Facts, comparisons and outcomes of one batch: a pure function of the store's input
    files, which an engine may run on another process or machine (pipeline.engines).

    A file whose footer is sound but whose data pages are damaged is only noticed here, when its
    pages are decoded: that is a store error (exit 1) naming the batch's campaigns, not a bug."""
    try:
        return _compute(_inputs(store, campaigns, batch, sizes))
    except (OSError, pl.exceptions.ComputeError) as exc:
        if not isinstance(exc, OSError) and "parquet" not in str(exc).lower():
            raise  # a computation error of ours, not a damaged file
        ids = ", ".join(sorted(batch["campaign_id"].unique().to_list()))
        reason = str(exc).strip().splitlines()[0]
        raise StoreError(
            f"{store.root}: cannot read the input files of campaign {ids}: {reason} "
            "(a damaged file: ingest the campaign again into a new store)"
        ) from exc


def _compute(inputs: quantities.Inputs) -> _Facts:
    """Facts, comparisons and outcomes of one batch of attempts."""
    inputs = quantities.common_metric(inputs)  # a suite's metric over the common benchmarks
    better = inputs.campaigns.select("campaign_id", "metric_better")
    medians = (
        inputs.attempts.select(ATTEMPT)
        .join(quantities.run_counts(inputs.samples), on=ATTEMPT, how="left")
        .join(quantities.side_medians(inputs.samples), on=ATTEMPT, how="left")
        .join(better, on="campaign_id")
        .with_columns([pl.col(c).fill_null(0) for c in COUNT_COLUMNS])
        .pipe(verdicts.median_facts, pl.col("metric_better"))
    )
    frames = quantities.pair_frames(inputs)
    fractions = fraction.explained_fractions(inputs, frames)
    orders = order_effect.order_effects(inputs.attempts, inputs.samples, frames, inputs.campaigns)
    facts = (
        medians.join(fractions.lazy(), on=ATTEMPT, how="left")
        .join(orders.lazy(), on=ATTEMPT, how="left")
        .join(chance.metric_spreads(frames.pairs.lazy()), on=ATTEMPT, how="left")
        .join(chance.side_spreads(inputs.samples), on=ATTEMPT, how="left")
        .select(FACT_COLUMNS)
        .collect()
    )
    summary = quantities.summarize(frames, inputs.campaigns, inputs.attempts)
    comps = quantities.comparisons_of(summary)
    outs = explain.outcomes(inputs.expectations, comps.lazy()).collect()
    members = family.family_table(summary, inputs.campaigns)
    return _Facts(facts, comps, outs, members, facts.select(ATTEMPT))


def _reused(store: Store, previous: pl.DataFrame, fresh: pl.DataFrame, ids: list[str]) -> _Facts:
    """Stored facts, comparisons and outcomes of the fresh attempts."""
    median_problem = (
        pl.when(pl.col("median_reason").is_in(["no_samples", "zero_baseline"]))
        .then(pl.col("median_reason"))
        .alias("median_problem")
    )
    facts = previous.join(fresh, on=ATTEMPT, how="semi").with_columns(median_problem)
    stored = {
        name: store.scan(name, ids).join(fresh.lazy(), on=ATTEMPT, how="semi").collect()
        for name in ("comparisons", "outcomes", "benchmarks")
    }
    # comparisons stored before `method` existed were all percentile intervals
    stored["comparisons"] = stored["comparisons"].with_columns(
        pl.when(pl.col("low").is_not_null())
        .then(pl.col("method").fill_null(POLICY_DEFAULTS["interval"]))
        .alias("method")
    )
    return _Facts(
        facts.select(FACT_COLUMNS),
        stored["comparisons"],
        stored["outcomes"],
        stored["benchmarks"],
        fresh.clear(),
    )


def _gather(
    store: Store,
    campaigns: pl.DataFrame,
    attempts: pl.DataFrame,
    previous: pl.DataFrame | None,
    batch_size: int,
    engine: Engine,
) -> _Facts:
    """Reuse what is fresh, compute the rest batch by batch, and put the pieces together."""
    ids = campaigns["campaign_id"].to_list()
    fresh = _fresh(previous, attempts, campaigns) if previous is not None else None
    parts: list[_Facts] = []
    todo = attempts.select(ATTEMPT)
    if fresh is not None and fresh.height:
        parts.append(_reused(store, previous, fresh, ids))  # type: ignore[arg-type]
        todo = todo.join(fresh, on=ATTEMPT, how="anti")
    sizes = dict(attempts.group_by("campaign_id").len().iter_rows())
    parts += engine.map(compute_batch, _work(store, campaigns, todo, sizes, batch_size))
    if not parts:
        return _Facts(
            pl.DataFrame(schema=FACT_SCHEMA),
            table("comparisons").empty(),
            table("outcomes").empty(),
            table("benchmarks").empty(),
            pl.DataFrame(schema={"campaign_id": pl.String, "attempt_id": pl.String}),
        )
    # Each table is put together, then its pieces are let go before the next one: holding every
    # batch's pieces beside every whole table set the peak memory of a large --all.
    facts = pl.concat([p.facts.cast(FACT_SCHEMA) for p in parts])  # type: ignore[arg-type]
    computed = pl.concat([p.computed for p in parts])
    comparisons = [p.comparisons for p in parts]
    outcomes = [p.outcomes.lazy() for p in parts]
    members = pl.concat([p.benchmarks for p in parts], how="vertical_relaxed")
    parts.clear()
    sorted_comparisons = _sorted(pl.concat(comparisons, how="vertical_relaxed", rechunk=False))
    comparisons.clear()
    sorted_outcomes = (
        table("outcomes")
        .conform(pl.concat(outcomes, how="vertical_relaxed"))
        .sort(*ATTEMPT, "position")
        .collect()
    )
    outcomes.clear()
    return _Facts(facts, sorted_comparisons, sorted_outcomes, members, computed)


def _assessments(attempts: pl.DataFrame, got: _Facts, campaigns: pl.DataFrame) -> pl.DataFrame:
    """One assessments row per attempt: facts + metric and share comparisons + explanation,
    then the verdicts under each campaign's (effective) policy."""
    comps = got.comparisons.lazy()
    metric = comps.filter(pl.col("quantity") == "metric").select(
        *ATTEMPT,
        pl.col("estimate").alias("paired_estimate"),
        pl.col("low").alias("paired_low"),
        pl.col("high").alias("paired_high"),
        pl.col("status").alias("metric_status"),
        pl.col("reason").alias("metric_reason"),
    )
    share = comps.filter(pl.col("quantity") == "share_speedup").select(
        *ATTEMPT, pl.col("estimate").alias("share_speedup")
    )
    policy = campaigns.lazy().select(
        "campaign_id",
        *VERDICT_KEYS,
        "policy_sha256",
        pl.col("source_sha256").alias("campaign_sha256"),
        boundary_recipe(),
    )
    lazy_attempts = attempts.lazy()
    kind = pl.col("kind").fill_null("round")  # an attempt without kind is a round
    frame = (
        lazy_attempts.select(*ATTEMPT, "round", "candidate", "status", "inputs_sha256", kind)
        .join(got.facts.lazy(), on=ATTEMPT, how="left")
        .join(metric, on=ATTEMPT, how="left")
        .join(share, on=ATTEMPT, how="left")
        .join(explain.explanations(lazy_attempts, got.outcomes.lazy()), on=ATTEMPT, how="left")
        .join(policy, on="campaign_id")
        .pipe(verdicts.verdicts)
    )
    spec = table("assessments")
    return spec.conform(frame).sort("campaign_id", "round", "attempt_id").collect()


def _benchmarks(attempts: pl.DataFrame, got: _Facts, campaigns: pl.DataFrame) -> pl.DataFrame:
    """Table ``benchmarks``: the members' verdicts read under each campaign's (effective)
    policy and its attempt's status, rows by attempt, metric first, then by name."""
    context = (
        attempts.lazy()
        .select(*ATTEMPT, "status")
        .join(
            campaigns.lazy().select("campaign_id", "min_improvement_pct", "margin_pct"),
            on="campaign_id",
        )
    )
    return (
        family.with_verdicts(got.benchmarks.lazy(), context)
        .sort(*ATTEMPT, pl.col("quantity") != "metric", "name")
        .collect()
    )


@dataclass(frozen=True)
class Assessed:
    """What ``assess_tables`` finds: rows of the tables assessments, comparisons, benchmarks."""

    assessments: pl.DataFrame
    comparisons: pl.DataFrame
    benchmarks: pl.DataFrame


def assess_tables(tables: Mapping[str, pl.DataFrame]) -> Assessed:
    """Assessments, comparisons and benchmarks of input tables held in memory (no store,
    nothing reused or written; integrity is not checked): the same stages as ``assess``, for
    ``round --until-decided``, which decides after each block whether to go on."""
    campaigns = with_policy_defaults(tables["campaigns"])
    names = ("attempts", "samples", "breakdown", "counters", "expectations")
    inputs = quantities.Inputs(campaigns=campaigns.lazy(), **{n: tables[n].lazy() for n in names})
    got = _compute(inputs)
    return Assessed(
        _assessments(tables["attempts"], got, campaigns),
        got.comparisons,
        _benchmarks(tables["attempts"], got, campaigns),
    )


# -- writing -------------------------------------------------------------------------------------
def _deciding_regions(campaigns: pl.DataFrame) -> set[str]:
    """The campaigns that decide regions: the only ones with a ``benchmarks`` partition."""
    chosen = campaigns.filter(pl.col("decide") == family.DECIDES_REGIONS)
    return set(chosen["campaign_id"].to_list())


def _tables_of(cid: str, regions: set[str]) -> tuple[str, ...]:
    """The output tables a campaign has a partition in."""
    return tuple(n for n in OUTPUT_TABLES if n != "benchmarks" or cid in regions)


def _changed_campaigns(
    new: pl.DataFrame,
    previous: pl.DataFrame,
    recomputed: set[str],
    store: Store,
    regions: set[str],
) -> set[str]:
    """Campaigns whose output partitions must be written: something was computed, an assessments
    row differs either way (e.g. best moved, an attempt left the store), or a file is missing."""
    cols = new.columns
    differ = pl.concat(
        [
            new.join(previous, on=cols, how="anti", nulls_equal=True).select("campaign_id"),
            previous.join(new, on=cols, how="anti", nulls_equal=True).select("campaign_id"),
        ]
    )
    changed = recomputed | set(differ["campaign_id"].to_list())
    for cid in set(new["campaign_id"].to_list()) | set(previous["campaign_id"].to_list()):
        if not all(store.partition_file(n, cid).is_file() for n in _tables_of(cid, regions)):
            changed.add(cid)
    return changed


def _write(
    txn: Transaction,
    ids: list[str],
    blocked: set[str],
    result: dict[str, pl.DataFrame],
    changed: set[str],
    regions: set[str],
) -> None:
    """Blocked campaigns lose their output partitions; changed ones are rewritten whole (a
    campaign that decides its metric alone has no ``benchmarks`` partition: one left from an
    earlier campaign.json of that id goes); the files of the others are left as they are."""
    for cid in blocked:
        for name in OUTPUT_TABLES:
            txn.delete(name, cid)
    wanted = [c for c in ids if c in changed and c not in blocked]
    for name in OUTPUT_TABLES:  # one pass over each table's rows, one file per campaign
        mine = [c for c in wanted if name in _tables_of(c, regions)]
        txn.put_partitions(name, result[name], mine)
    for cid in wanted:
        if cid not in regions:
            txn.delete("benchmarks", cid)


def assess(
    store: Store,
    campaign_ids: Sequence[str] | None = None,
    *,
    what_if: Mapping[str, PolicyValue] | None = None,
    write: bool = True,
    batch_size: int = DEFAULT_BATCH,
    engine: Engine | None = None,
    compare: bool = True,
) -> AssessResult:
    """Assess campaigns (None: all). Stores results unless `write` is false or this is a what-if.
    `engine` runs the batches (default: in this process); this process alone writes.
    `compare=False` with a what-if that recomputes intervals skips the frozen policy's pass
    (`frozen` is then None: nothing to count changed verdicts against); calibrate uses it."""
    engine = engine or LocalEngine()
    ids = known_campaigns(store, campaign_ids)
    changes = overrides(what_if or {})
    integrity = store.read("integrity", ids)
    blocked = set(integrity["campaign_id"].to_list())
    live = [c for c in ids if c not in blocked]
    # campaigns ingested before a policy field existed read it as its default
    campaigns = with_policy_defaults(store.read("campaigns", live))
    attempts = store.read("attempts", live)
    previous = store.read("assessments", live)
    for name in tables():  # inputs and stored results
        # columns, types and required values, also of files whose rows are reused unread
        store.check(name, live, values=True)
    recompute = any(k in changes for k in INTERVAL_KEYS)
    frozen: pl.DataFrame | None = None
    if not (changes and recompute and not compare):
        got = _gather(store, campaigns, attempts, previous, batch_size, engine)
        frozen = _assessments(attempts, got, campaigns)
        result = {
            "assessments": frozen,
            "comparisons": got.comparisons,
            "outcomes": got.outcomes,
            "benchmarks": _benchmarks(attempts, got, campaigns),
        }
    effective = campaigns
    if changes:
        effective = _apply_policy(campaigns, changes)
        if recompute:
            got = _gather(store, effective, attempts, None, batch_size, engine)
        result = {
            "assessments": _assessments(attempts, got, effective),
            "comparisons": got.comparisons,
            "outcomes": got.outcomes,
            "benchmarks": _benchmarks(attempts, got, effective),
        }
    elif write:
        recomputed = set(got.computed["campaign_id"].to_list())
        regions = _deciding_regions(campaigns)
        changed = _changed_campaigns(result["assessments"], previous, recomputed, store, regions)
        with store.transaction() as txn:
            _write(txn, ids, blocked, result, changed, regions)
    return AssessResult(
        assessments=result["assessments"],
        comparisons=result["comparisons"],
        outcomes=result["outcomes"],
        blocked=integrity.sort("campaign_id", "attempt_id", "code", nulls_last=False),
        what_if={k: policy_text(v) for k, v in changes.items()} if changes else None,
        frozen=frozen if changes else None,
        recomputed=got.computed.height,
        campaign_ids=tuple(ids),
        rejected=store.read("rejections", ids).sort("campaign_id", "position"),
        benchmarks=result["benchmarks"],
        policies=effective,
        attempts=attempts,
    )


def _sorted(comparisons: pl.DataFrame) -> pl.DataFrame:
    """Columns of table `comparisons`, rows by attempt, then metric, region, region_normalized,
    share_speedup, counter, then name."""
    order = {"metric": 0, "region": 1, "region_normalized": 2, "share_speedup": 3, "counter": 4}
    return (
        table("comparisons")
        .conform(comparisons.lazy())
        .sort(
            pl.col("campaign_id"),
            pl.col("attempt_id"),
            pl.col("quantity").replace_strict(order, return_dtype=pl.Int64),
            pl.col("name"),
        )
        .collect()
    )
