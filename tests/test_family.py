"""A verdict per benchmark (contract §15): the Bonferroni Student-t simultaneous intervals and
their verdicts against a plain reference written here (a loop per member, scipy), against theory
(A/A family-wise rate), and at the contract's edges through a store (+inf, zero baseline, too
few pairs, failed and aborted attempts)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from assess_fixtures import Attempt, campaign, run, write_store
from conftest import cli_result as _cli
from scipy import stats

from pipeline.assessment import family, sequential
from pipeline.assessment.campaigns import assess
from pipeline.assessment.sequential import Schedule
from pipeline.contract.policy import canonical_policy, policy_sha256
from pipeline.contract.schemas import table
from pipeline.store.tables import Store


# -- the reference: one member at a time -----------------------------------------------------
def reference_member(
    x: list[float], m: int, *, confidence: float = 0.95, min_pairs: int = 5
) -> dict[str, Any]:
    """contract §15, steps 1-4, for one member: reason, estimate, low, high, c."""
    arr = np.asarray(x, dtype=np.float64)
    n = len(arr)
    reason = None
    if np.isnan(arr).any():  # how the test encodes a zero baseline (the ratio is undefined)
        reason = "zero_baseline"
    elif np.isposinf(arr).any():
        reason = "zero_candidate"
    elif n < min_pairs:
        reason = "too_few_pairs"
    if reason is not None:
        estimate = None if reason == "zero_baseline" else math.exp(arr.mean()) if n else None
        return {"reason": reason, "estimate": estimate, "low": None, "high": None, "c": None}
    alpha = 1 - confidence
    c = stats.t.ppf(1 - alpha / (2 * m), n - 1)
    mean, s = arr.mean(), arr.std(ddof=1)
    half = c * s / math.sqrt(n)
    return {
        "reason": None,
        "estimate": math.exp(mean),
        "low": math.exp(mean - half),
        "high": math.exp(mean + half),
        "c": c,
    }


def reference_verdict(
    low: float | None, high: float | None, gate_pct: float, margin_pct: float
) -> str:
    """contract §15's verdict, steps 3-6."""
    if low is None or high is None:
        return "inconclusive"
    g, margin = 1 + gate_pct / 100, 1 + margin_pct / 100
    if high < 1 and high <= 1 / margin:
        return "regressed"
    if low > 1 and low >= g:
        return "improved"
    if 1 / margin <= low and high <= margin:
        return "unchanged"
    return "inconclusive"


# -- the pure function -------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "m", "confidence"), [(2, 1, 0.95), (5, 3, 0.95), (40, 1000, 0.9)])
def test_family_intervals_equal_the_reference(n: int, m: int, confidence: float) -> None:
    rng = np.random.default_rng(n * m)
    x = rng.normal(0.01, 0.05, size=(n, 7))
    x[:, 3] = 0.02  # s = 0: both ends exp(mean)
    got = family.family_intervals(x, m, confidence)
    for j in range(x.shape[1]):
        want = reference_member(list(x[:, j]), m, confidence=confidence, min_pairs=2)
        assert got.estimate[j] == pytest.approx(want["estimate"], rel=1e-13)
        assert got.low[j] == pytest.approx(want["low"], rel=1e-12)
        assert got.high[j] == pytest.approx(want["high"], rel=1e-12)
        assert got.critical == pytest.approx(want["c"], rel=1e-14)
    assert got.low[3] == got.high[3] == pytest.approx(math.exp(0.02), rel=1e-14)


def test_a_family_of_one_is_the_student_t_interval() -> None:
    from pipeline.assessment.intervals import student_t_bounds

    x = np.random.default_rng(1).normal(0, 0.1, size=(9, 4))
    got = family.family_intervals(x, 1, 0.95)
    low, high = student_t_bounds(x, 0.95)
    assert np.array_equal(got.low, low) and np.array_equal(got.high, high)


def test_under_a_plan_c_is_the_sequential_boundary_at_the_member_level() -> None:
    plan = Schedule(6, 2, 20)
    c = family.critical_value(10, 12, 0.95, plan)
    assert c == plan.critical(1 - 0.05 / 12, 10)  # contract §10 c_n at the member level
    # wider than the fixed-n Bonferroni constant at the same n, narrower than no correction
    assert stats.t.ppf(1 - 0.05 / 24, 9) < c
    # the same recipe at one member is the campaign's own sequential_t constant
    assert family.critical_value(10, 1, 0.95, plan) == sequential.boundary(6, 2, 20, 0.95)


@pytest.mark.parametrize(
    ("n", "m"),
    [(1, 3), (5, 0)],
)
def test_critical_value_refuses_what_has_no_interval(n: int, m: int) -> None:
    with pytest.raises(ValueError, match="needs n >= 2 and m >= 1"):
        family.critical_value(n, m, 0.95)


@pytest.mark.parametrize(("rho", "m", "n"), [(0.0, 20, 5), (0.0, 5, 20), (0.9, 20, 10)])
def test_identical_code_flags_some_member_at_most_alpha_of_the_time(
    rho: float, m: int, n: int
) -> None:
    """A/A suites: members share a run-level factor (correlation rho) plus their own noise. At
    rho = 0 the members are independent and the t interval exact, so the family-wise rate is
    1 - (1 - alpha/m)^m exactly; under correlation it can only be lower (Bonferroni)."""
    suites, spread = 4000, 0.042
    rng = np.random.default_rng(2026)
    shared = rng.normal(0, spread * math.sqrt(rho), size=(n, suites, 1))
    own = rng.normal(0, spread * math.sqrt(1 - rho), size=(n, suites, m))
    x = (shared + own).reshape(n, suites * m)
    got = family.family_intervals(x, m, 0.95)
    flagged = ((got.low > 1) | (got.high < 1)).reshape(suites, m).any(axis=1).mean()
    exact = 1 - (1 - 0.05 / m) ** m
    sigma = math.sqrt(exact * (1 - exact) / suites)
    if rho == 0:
        assert abs(flagged - exact) < 4 * sigma, flagged
    else:
        assert flagged < exact + 4 * sigma, flagged
    # the per-benchmark 95% directions of before: far above alpha
    t95 = stats.t.ppf(0.975, n - 1)
    mean, s = x.mean(axis=0), x.std(axis=0, ddof=1)
    one_each = (np.abs(mean) > t95 * s / math.sqrt(n)).reshape(suites, m).any(axis=1).mean()
    assert one_each > 0.1


def test_a_benchmark_that_truly_moved_is_found_and_the_others_stay_quiet() -> None:
    """Known gain: one benchmark of 20 10% slower at spread 0.042 and 20 pairs is regressed in
    nearly every suite; the other 19 are called something wrong at most alpha of the time."""
    suites, m, n = 1000, 20, 20
    rng = np.random.default_rng(7)
    x = rng.normal(0, 0.042, size=(n, suites, m))
    x[:, :, 0] += math.log(1 / 1.10)
    got = family.family_intervals(x.reshape(n, suites * m), m, 0.95)
    low, high = got.low.reshape(suites, m), got.high.reshape(suites, m)
    assert (high[:, 0] < 1 / 1.01).mean() > 0.95
    assert ((low[:, 1:] > 1) | (high[:, 1:] < 1)).any(axis=1).mean() < 0.05 + 3 * 0.0069


# -- through a store ---------------------------------------------------------------------------
def suite_attempt(
    rng: np.random.Generator,
    cid: str,
    rnd: int,
    n: int,
    moves: dict[str, float],
    *,
    status: str = "completed",
    spread: float = 0.03,
    edit: Any = None,
) -> Attempt:
    """A suite round: benchmarks b0..b5 (one step `all`), the metric their sum; the candidate's
    benchmark k times moves[k]. ``edit(side, rep, regions)`` may change a run's regions."""
    runs = []
    for rep in range(n):
        load = rng.lognormal(0, spread)
        for side in ("baseline", "candidate"):
            regions = {
                f"b{k}": (k + 1)
                * 0.001
                * load
                * rng.lognormal(0, spread)
                * (moves.get(f"b{k}", 1.0) if side == "candidate" else 1.0)
                for k in range(6)
            }
            if edit is not None:
                edit(side, rep, regions)
            total = sum(regions.values()) or 1e-9
            runs.append(run(side, rep, total, breakdown=regions))
    return Attempt(cid, f"r{rnd:03d}", rnd, runs, status=status)


def _x_of(attempt: Attempt, name: str) -> list[float]:
    """A member's log-ratios in repetition order, as contract §4.1 pairs them (NaN: a zero
    baseline, the ratio undefined)."""
    by = {(r["side"], r["repetition"]): r for r in attempt.runs if r["status"] == "ok"}
    reps = sorted({rep for side, rep in by if side == "baseline" and ("candidate", rep) in by})
    out = []
    for rep in reps:
        b, c = by["baseline", rep], by["candidate", rep]
        if name == "metric":
            vb, vc = b["metric"], c["metric"]
        else:
            vb = b["breakdown"].get("all", {}).get(name, 0.0)
            vc = c["breakdown"].get("all", {}).get(name, 0.0)
        out.append(math.nan if vb == 0 else math.inf if vc == 0 else math.log(vb / vc))
    return out


def _close(got: float | None, want: float | None, rel: float) -> bool:
    if got is None or want is None or math.isinf(want):
        return got == want
    return bool(got == pytest.approx(want, rel=rel))


def _members(attempt: Attempt) -> list[str]:
    names = {
        region
        for r in attempt.runs
        if r["status"] == "ok"
        for region in r["breakdown"].get("all", {})
    }
    return ["metric", *sorted(names)]


def test_assess_stores_every_members_interval_and_verdict_as_the_reference_says(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(11)
    camps = [
        campaign("suite", decide="regions", margin_pct=2.0, min_improvement_pct=1.0),
        campaign("plain"),  # decide metric: no rows
    ]

    def vanish(side: str, rep: int, regions: dict[str, float]) -> None:
        if side == "candidate" and rep == 3:
            regions["b4"] = 0.0  # +inf: zero_candidate
        if side == "baseline" and rep == 1:
            regions["b5"] = 0.0  # zero_baseline

    attempts = [
        suite_attempt(rng, "suite", 1, 12, {"b0": 0.8, "b1": 1.25}),
        suite_attempt(rng, "suite", 2, 12, {}, edit=vanish),
        suite_attempt(rng, "suite", 3, 4, {"b2": 0.5}),  # too few pairs everywhere
        suite_attempt(rng, "suite", 4, 10, {"b0": 0.5}, status="aborted"),
        suite_attempt(rng, "plain", 1, 10, {"b0": 0.8}),
    ]
    store = Store(tmp_path / "store")
    write_store(store, camps, attempts)
    result = assess(store)
    rows = result.benchmarks
    assert set(rows["campaign_id"]) == {"suite"}
    assert rows.columns == table("benchmarks").names
    for attempt in attempts[:4]:
        got = rows.filter(pl.col("attempt_id") == attempt.attempt_id)
        names = _members(attempt)
        assert got["name"].to_list() == ["e2e_seconds", *names[1:]]
        assert set(got["family_size"]) == {len(names)}
        for row, name in zip(got.iter_rows(named=True), names, strict=True):
            want = reference_member(_x_of(attempt, name), len(names))
            assert row["quantity"] == ("metric" if name == "metric" else "region")
            assert row["reason"] == (
                want["reason"]
                if want["reason"] or attempt.status == "completed"
                else "attempt_aborted"
            ), (attempt.attempt_id, name)
            for key in ("estimate", "low", "high"):
                assert _close(row[key], want[key], 1e-12), (name, key, row[key], want[key])
            assert _close(row["critical"], want["c"], 1e-14)
            assert row["method"] == (None if want["c"] is None else "bonferroni_t")
            verdict = reference_verdict(want["low"], want["high"], 1.0, 2.0)
            if attempt.status != "completed":
                verdict = "inconclusive"
            assert row["verdict"] == verdict, (attempt.attempt_id, name)
    first = rows.filter(pl.col("attempt_id") == "r001")
    verdicts = dict(zip(first["name"], first["verdict"], strict=True))
    assert verdicts["b0"] == "improved" and verdicts["b1"] == "regressed"  # x0.8: faster
    edges = rows.filter(pl.col("attempt_id") == "r002")
    reasons = dict(zip(edges["name"], edges["reason"], strict=True))
    assert reasons["b4"] == "zero_candidate" and reasons["b5"] == "zero_baseline"
    assert edges.filter(pl.col("name") == "b4")["estimate"][0] == math.inf
    # stored, queryable, and the same when reused
    stored = store.read("benchmarks")
    assert stored.sort(rows.columns[:4]).equals(rows.sort(rows.columns[:4]))
    again = assess(store)
    assert again.recomputed == 0 and again.benchmarks.equals(rows)


def test_what_if_re_reads_verdicts_and_recomputes_the_family(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    store = Store(tmp_path / "store")
    attempt = suite_attempt(rng, "c", 1, 12, {"b0": 0.97, "b1": 1.2})
    write_store(store, [campaign("c", decide="regions")], [attempt])
    frozen = assess(store).benchmarks
    wide = assess(store, what_if={"margin_pct": 50.0}).benchmarks
    assert wide.drop("verdict").equals(frozen.drop("verdict"))
    for row in wide.iter_rows(named=True):
        assert row["verdict"] == reference_verdict(row["low"], row["high"], 1.0, 50.0)
    metric_only = assess(store, what_if={"decide": "metric"})
    assert metric_only.benchmarks.is_empty()
    assert store.read("benchmarks").equals(frozen)  # a what-if is never stored


def test_old_digests_do_not_change() -> None:
    given = {"decision": "paired", "seed": 3}
    defaults = {**given, "decide": "metric", "margin_pct": 1.0, "interval": "percentile"}
    assert canonical_policy(defaults) == canonical_policy(given)
    assert policy_sha256(defaults) == policy_sha256(given)
    assert b'"decide":"regions"' in canonical_policy({**given, "decide": "regions"})
    assert b'"margin_pct":5' in canonical_policy({**given, "margin_pct": 5})


def test_a_campaign_that_stops_deciding_regions_loses_its_rows(tmp_path: Path) -> None:
    """The partition exists only while the campaign decides regions (a campaign.json replaced
    under the same id)."""
    rng = np.random.default_rng(5)
    store = Store(tmp_path / "store")
    attempt = suite_attempt(rng, "c", 1, 8, {})
    write_store(store, [campaign("c", decide="regions")], [attempt])
    assess(store)
    assert store.has_partition("benchmarks", "c")
    write_store(store, [campaign("c")], [attempt])
    assess(store)
    assert not store.has_partition("benchmarks", "c")
    assert store.read("benchmarks").is_empty()


def test_a_round_that_stopped_when_decided_takes_the_boundary_at_alpha_over_m(
    tmp_path: Path,
) -> None:
    """attempt.json's planned looks under interval sequential_t: c is the sequential boundary at
    confidence 1 - alpha/m (sequential_bonferroni_t); a failed attempt's members are
    inconclusive (attempt_failed) with their intervals still stored."""
    from assess_fixtures import tables

    rng = np.random.default_rng(9)
    camp = campaign("seq", decide="regions", decision="paired", interval="sequential_t")
    attempts = [
        suite_attempt(rng, "seq", 1, 10, {"b0": 0.7}),
        suite_attempt(rng, "seq", 2, 10, {}, status="failed"),
    ]
    frames = tables([camp], attempts)
    plan = {"sequential_first_look": 6, "sequential_look_every": 2, "sequential_max_pairs": 20}
    frames["attempts"] = frames["attempts"].with_columns(
        pl.when(pl.col("attempt_id") == "r001").then(pl.lit(v)).alias(k) for k, v in plan.items()
    )
    store = Store(tmp_path / "store")
    with store.transaction() as txn:
        for name, frame in frames.items():
            txn.put(name, "seq", frame)
    rows = assess(store).benchmarks
    m = len(_members(attempts[0]))
    first = rows.filter(pl.col("attempt_id") == "r001")
    assert set(first["method"]) == {"sequential_bonferroni_t"}
    assert set(first["critical"]) == {Schedule(6, 2, 20).critical(1 - 0.05 / m, 10)}
    second = rows.filter(pl.col("attempt_id") == "r002")
    assert set(second["method"]) == {"bonferroni_t"}  # no plan: one look at n
    assert set(second["verdict"]) == {"inconclusive"}
    assert set(second["reason"]) == {"attempt_failed"}
    assert second["low"].null_count() == 0


def test_ingested_suite_rounds_are_decided_queryable_and_nested_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stored attempts on disk -> ingest -> assess --format json -> query: the members are
    nested under each attempt of a regions campaign only, and the table answers SQL."""
    import json

    from pipeline.study.stored import write_attempt, write_campaign

    rng = np.random.default_rng(21)
    root = tmp_path / "attempts"
    for cid, policy in (("suite", {"decide": "regions"}), ("plain", {})):
        folder = write_campaign(
            root,
            cid,
            created_at="2026-11-01T10:00:00Z",
            metric={"name": "seconds", "better": "lower"},
            policy=policy,
        )
        attempt = suite_attempt(rng, cid, 1, 8, {"b3": 1.5})
        write_attempt(
            folder,
            {
                "attempt_id": "r001",
                "round": 1,
                "candidate": "slow-b3",
                "baseline": "main",
                "status": "completed",
                "started_at": "2026-11-01T11:00:00Z",
            },
            attempt.runs,
        )
    store = str(tmp_path / "store")
    assert _cli(["ingest", str(root), "--store", store], capsys)[0] == 0
    code, out, _ = _cli(["assess", "--all", "--store", store, "--format", "json"], capsys)
    assert code == 0
    campaigns = {c["campaign_id"]: c for c in json.loads(out)["campaigns"]}
    assert "benchmarks" not in campaigns["plain"]["attempts"][0]
    members = campaigns["suite"]["attempts"][0]["benchmarks"]
    assert [m["name"] for m in members] == ["seconds", "b0", "b1", "b2", "b3", "b4", "b5"]
    assert {m["family_size"] for m in members} == {7}
    assert {m["name"]: m["verdict"] for m in members}["b3"] == "regressed"
    sql = "SELECT name, verdict FROM benchmarks WHERE verdict = 'regressed' ORDER BY name"
    code, out, _ = _cli(["query", sql, "--store", store, "--format", "csv"], capsys)
    # b3 is 4/21 of the sum: 50% slower makes the metric about 10% slower, regressed too
    assert (code, out.splitlines()) == (0, ["name,verdict", "b3,regressed", "seconds,regressed"])


def test_a_member_whose_bound_overflows_is_inconclusive_not_finite_and_fails_the_gate(
    tmp_path: Path,
) -> None:
    """A benchmark at 1e300 against 1e-4, alternating: finite log-ratios of ±700, a
    simultaneous bound of exp(±1000) out of range. It has no interval and fails the gate."""
    from pipeline.assessment.campaigns import gate

    runs = []
    for rep in range(6):
        for side in ("baseline", "candidate"):
            value = 1e300 if (rep + (side == "candidate")) % 2 else 1e-4
            regions = {"steady": 0.001 * (1 + 0.001 * rep), "wild": value}
            runs.append(run(side, rep, 1.0 + 0.001 * rep, breakdown=regions))
    store = Store(tmp_path / "store")
    write_store(store, [campaign("s", decide="regions")], [Attempt("s", "r001", 1, runs)])
    result = assess(store)
    wild = result.benchmarks.filter(pl.col("name") == "wild").row(0, named=True)
    assert (wild["verdict"], wild["reason"], wild["low"], wild["high"]) == (
        "inconclusive",
        "not_finite",
        None,
        None,
    )
    got = gate(result, "s", None, "regression")
    assert got.failed and got.deciders["name"].to_list() == ["wild"]
