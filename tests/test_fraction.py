"""The explained fraction against a plain loop reference written here, against theory (a gain in
the declared region gives about 1, a gain elsewhere about 0) and at its edges (every reason)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
import pytest
from assess_fixtures import Attempt, campaign, expect, inputs, run

from pipeline.assessment import quantities
from pipeline.assessment.fraction import explained_fractions

RESAMPLES = 400
DECLARED = [expect("region", "attn", "decrease"), expect("counter", "launches", "decrease")]
WITH_REF = [*DECLARED, expect("region", "ref", "unchanged")]


def reference_fraction(
    a: Attempt,
    *,
    min_pairs: int = 5,
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float | None, float | None, float | None, str | None]:
    """One attempt, one resample at a time, as the rule is written."""
    declared = {
        e["name"]
        for e in a.expectations
        if e["target"] == "region" and e["expect"] in ("decrease", "increase")
    }
    refs = {
        e["name"] for e in a.expectations if e["target"] == "region" and e["expect"] == "unchanged"
    }
    ok = {(r["side"], r["repetition"]): r for r in a.runs if r["status"] == "ok"}
    reps = sorted(rep for side, rep in ok if side == "baseline" and ("candidate", rep) in ok)
    paired = [ok[(side, rep)] for rep in reps for side in ("baseline", "candidate")]
    if not declared or any(not r["breakdown"] for r in paired):
        return None, None, None, "not_applicable"
    n = len(reps)
    if n < min_pairs:
        return None, None, None, "too_few_pairs"
    regions = {g for r in ok.values() for step in r["breakdown"].values() for g in step} - refs

    def value(r: dict[str, Any], g: str) -> float | None:
        steps = r["breakdown"].values()
        if not refs:
            return sum(step.get(g, 0.0) for step in steps)
        usable = [s for s in steps if sum(s.get(x, 0.0) for x in refs) > 0]
        if not usable:
            return None
        return sum(s.get(g, 0.0) / sum(s.get(x, 0.0) for x in refs) for s in usable) / len(usable)

    d_pairs, t_pairs = [], []
    for rep in reps:
        b, c = ok[("baseline", rep)], ok[("candidate", rep)]
        diffs = {}
        for g in regions:
            vb, vc = value(b, g), value(c, g)
            if vb is None or vc is None:
                return None, None, None, "no_reference_time"
            diffs[g] = vb - vc
        d_pairs.append(sum(v for g, v in diffs.items() if g in declared))
        t_pairs.append(sum(diffs.values()))
    if regions and regions <= declared:
        return None, None, None, "all_regions_declared"
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))
    d_star = [sum(d_pairs[i] for i in row) / n for row in idx]
    t_star = [sum(t_pairs[i] for i in row) / n for row in idx]
    alpha = 1 - confidence
    t_low, t_high = np.quantile(t_star, [alpha / 2, 1 - alpha / 2])
    if t_low <= 0 <= t_high:
        return None, None, None, "total_unchanged"
    ratio = [d / t for d, t in zip(d_star, t_star, strict=True)]
    low, high = np.quantile(ratio, [alpha / 2, 1 - alpha / 2])
    return (sum(d_pairs) / n) / (sum(t_pairs) / n), float(low), float(high), None


def noisy(
    aid: str,
    *,
    gain: dict[str, float],
    exps: list[dict[str, str]],
    n: int = 8,
    seed: int = 0,
    steps: int = 2,
) -> Attempt:
    """Runs with a drift shared by every region of a run and a little independent noise."""
    rng = np.random.default_rng(seed)
    runs = []
    for side in ("baseline", "candidate"):
        for rep in range(n):
            drift = rng.lognormal(0, 0.03)
            breakdown = {
                f"s{k}": {
                    g: base
                    * drift
                    * rng.lognormal(0, 0.003)
                    * (gain.get(g, 1.0) if side == "candidate" else 1.0)
                    for g, base in (("attn", 1.0), ("mlp", 4.0), ("ref", 2.0))
                }
                for k in range(steps)
            }
            metric = sum(sum(s.values()) for s in breakdown.values())
            runs.append(run(side, rep, metric, breakdown=breakdown))
    return Attempt("c", aid, int(aid[1:]), runs, exps)


def computed(attempts: list[Attempt], **policy: Any) -> dict[str, dict[str, Any]]:
    data = inputs([campaign("c", resamples=RESAMPLES, **policy)], attempts)
    frame = explained_fractions(data, quantities.pair_frames(data))
    assert frame.columns == [
        "campaign_id",
        "attempt_id",
        "explained_fraction",
        "explained_fraction_low",
        "explained_fraction_high",
        "explained_fraction_reason",
    ]
    assert frame.height == len(attempts)
    return {r["attempt_id"]: r for r in frame.iter_rows(named=True)}


def assert_matches(row: dict[str, Any], ref: tuple) -> None:
    estimate, low, high, reason = ref
    assert row["explained_fraction_reason"] == reason
    for key, want in (
        ("explained_fraction", estimate),
        ("explained_fraction_low", low),
        ("explained_fraction_high", high),
    ):
        if want is None:
            assert row[key] is None
        else:
            assert row[key] == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_gain_in_the_declared_region_is_explained_in_full() -> None:
    attempts = [
        noisy("r1", gain={"attn": 0.7}, exps=WITH_REF, seed=1),
        noisy("r2", gain={"attn": 0.7}, exps=DECLARED, seed=2),  # raw region sums
        noisy("r3", gain={"attn": 0.8, "mlp": 0.95}, exps=WITH_REF, seed=3),
    ]
    got = computed(attempts)
    for a in attempts:
        assert_matches(got[a.attempt_id], reference_fraction(a))
    assert got["r1"]["explained_fraction"] == pytest.approx(1.0, abs=0.05)
    # attn saves 0.2 of 1, mlp 0.05 of 4: half the saving each
    assert got["r3"]["explained_fraction"] == pytest.approx(0.5, abs=0.1)
    low, high = got["r1"]["explained_fraction_low"], got["r1"]["explained_fraction_high"]
    assert low < got["r1"]["explained_fraction"] < high


def test_gain_elsewhere_is_not_explained_even_so() -> None:
    a = noisy("r1", gain={"mlp": 0.9}, exps=WITH_REF, seed=4)
    got = computed([a])["r1"]
    assert_matches(got, reference_fraction(a))
    assert abs(got["explained_fraction"]) < 0.1
    assert got["explained_fraction_low"] < 0.1


def test_other_confidence_and_seed_follow_the_policy() -> None:
    a = noisy("r1", gain={"attn": 0.8}, exps=WITH_REF, seed=5, n=6)
    got = computed([a], confidence=0.8, seed=7)["r1"]
    assert_matches(got, reference_fraction(a, confidence=0.8, seed=7))


def test_identical_sides_leave_the_total_unchanged() -> None:
    a = noisy("r1", gain={}, exps=WITH_REF, seed=6)
    baseline = [r for r in a.runs if r["side"] == "baseline"]
    a.runs = baseline + [{**r, "side": "candidate"} for r in baseline]  # T = 0 in every pair
    assert computed([a])["r1"]["explained_fraction_reason"] == "total_unchanged"
    assert reference_fraction(a)[3] == "total_unchanged"


@pytest.mark.parametrize(
    ("name", "exps", "n", "reason"),
    [
        ("no declaration", [], 8, "not_applicable"),
        (
            "only a counter declared",
            [expect("counter", "launches", "decrease")],
            8,
            "not_applicable",
        ),
        ("four pairs", WITH_REF, 4, "too_few_pairs"),
        ("no pair", WITH_REF, 0, "too_few_pairs"),
    ],
)
def test_reasons(name: str, exps: list[dict[str, str]], n: int, reason: str) -> None:
    a = noisy("r1", gain={"attn": 0.7}, exps=exps, n=n)
    assert computed([a])["r1"]["explained_fraction_reason"] == reason
    assert reference_fraction(a)[3] == reason


def test_every_region_declared_gives_no_fraction() -> None:
    """D = T in every pair when every region is declared: 1 [1, 1] by construction, which said
    nothing (before the fix: explained_fraction 1.0 with the interval [1.0, 1.0])."""
    one_ref = [expect("region", "attn", "decrease"), expect("region", "ref", "unchanged")]
    a = noisy("r1", gain={"attn": 0.7}, exps=one_ref, seed=9)
    for r in a.runs:  # a suite of two benchmarks, the other one the reference
        for step in r["breakdown"].values():
            del step["mlp"]
    every = [expect("region", g, e) for g, e in (("attn", "decrease"), ("mlp", "increase"))]
    every.append(expect("region", "ref", "decrease"))  # no reference: raw sums, ref a region
    b = noisy("r2", gain={"attn": 0.7}, exps=every, seed=10)
    c = noisy("r3", gain={"attn": 0.7}, exps=[*one_ref, expect("region", "gone", "decrease")])
    got = computed([a, b, c])
    for x in (a, b):
        row = got[x.attempt_id]
        assert row["explained_fraction_reason"] == "all_regions_declared"
        assert row["explained_fraction"] is None and row["explained_fraction_low"] is None
        assert reference_fraction(x)[3] == "all_regions_declared"
    # mlp is left undeclared: a fraction, whatever else is declared
    assert_matches(got["r3"], reference_fraction(c))
    assert got["r3"]["explained_fraction"] is not None


def test_a_paired_run_without_breakdown_is_not_applicable() -> None:
    a = noisy("r1", gain={"attn": 0.7}, exps=WITH_REF)
    a.runs[3] = run(a.runs[3]["side"], a.runs[3]["repetition"], 1.0)
    assert computed([a])["r1"]["explained_fraction_reason"] == "not_applicable"
    assert reference_fraction(a)[3] == "not_applicable"


def test_an_unpaired_run_without_breakdown_does_not_matter() -> None:
    a = noisy("r1", gain={"attn": 0.7}, exps=WITH_REF)
    a.runs.append(run("baseline", 99, 1.0))  # no candidate run at repetition 99
    assert_matches(computed([a])["r1"], reference_fraction(a))


def test_a_run_without_reference_time() -> None:
    a = noisy("r1", gain={"attn": 0.7}, exps=WITH_REF)
    for step in a.runs[2]["breakdown"].values():
        step["ref"] = 0.0
    assert computed([a])["r1"]["explained_fraction_reason"] == "no_reference_time"
    assert reference_fraction(a)[3] == "no_reference_time"


def test_failed_runs_and_a_region_absent_from_some_runs() -> None:
    a = noisy("r1", gain={"attn": 0.7}, exps=WITH_REF, n=9, seed=8)
    a.runs[1] = run("baseline", 1, None, status="failed")
    del a.runs[12]["breakdown"]["s0"]["mlp"]  # absent from one step of one run: counts 0
    got = computed([a])["r1"]
    assert_matches(got, reference_fraction(a))
    assert got["explained_fraction"] is not None


def test_attempts_with_different_pair_counts_in_one_batch() -> None:
    attempts = [
        noisy(f"r{i}", gain={"attn": 0.75}, exps=WITH_REF, n=n, seed=i)
        for i, n in enumerate([5, 7, 5, 12], start=1)
    ]
    got = computed(attempts)
    for a in attempts:
        assert_matches(got[a.attempt_id], reference_fraction(a))
    alone = computed([attempts[2]])["r3"]
    assert alone["explained_fraction_low"] == pytest.approx(
        got["r3"]["explained_fraction_low"], rel=1e-13
    )


def test_the_fraction_is_stored_in_assessments(tmp_path: Any) -> None:
    from assess_fixtures import write_store

    from pipeline.assessment.campaigns import assess
    from pipeline.store.tables import Store

    a = noisy("r1", gain={"attn": 0.7}, exps=WITH_REF, seed=1)
    store = Store(tmp_path / "s")
    write_store(store, [campaign("c", resamples=RESAMPLES)], [a])
    assess(store)
    row = store.read("assessments").row(0, named=True)
    assert row["explained_fraction"] == pytest.approx(reference_fraction(a)[0], rel=1e-9)
    assert math.isfinite(row["explained_fraction_low"])
    assert assess(store).recomputed == 0
    assert pl.read_parquet(next((tmp_path / "s" / "assessments").rglob("*.parquet"))).height == 1


# -- the selection behind the interval: against numpy.quantile -----------------------------------
@pytest.mark.parametrize("size", [5, 400, 10000])
@pytest.mark.parametrize("confidence", [0.95, 0.8, 0.5])
def test_total_interval_contains_zero_as_numpy_says(size: int, confidence: float) -> None:
    from pipeline.assessment.bootstrap import order_positions
    from pipeline.assessment.fraction import interval_contains_zero

    rng = np.random.default_rng(size)
    alpha = 1 - confidence
    probs = np.array([alpha / 2, 1 - alpha / 2])
    _, above = order_positions(size, probs)
    rows = [rng.normal(loc, 1.0, size) for loc in np.linspace(-4, 4, 40)]
    rows += [np.zeros(size), rng.integers(-1, 2, size).astype(float)]  # zeros, many ties
    for k in (0, 1):  # 0 right between the two order statistics the interpolation reads
        for sign in (1.0, -1.0):
            row = np.sort(rng.uniform(0.5, 1.5, size)) * sign
            if sign < 0:
                row = row[::-1]
            split = int(above[k])
            row[:split] -= 2.0 if sign > 0 else 0.0
            row[split:] += 0.0 if sign > 0 else 2.0
            rows.append(rng.permutation(row))
    stat = np.array(rows)
    low, high = np.quantile(stat, probs, axis=1, method="linear")
    np.testing.assert_array_equal(interval_contains_zero(stat, probs), (low <= 0) & (high >= 0))


def test_fraction_bounds_in_pieces_and_workers_equal_numpy() -> None:
    # 10,000 resamples: 26 attempts a piece, 250 attempts: the workers share ten pieces
    from pipeline.assessment.bootstrap import resample_counts
    from pipeline.assessment.fraction import fraction_bounds

    rng = np.random.default_rng(9)
    n, width, resamples = 10, 250, 10000
    t = rng.normal(1.0, 0.3, (n, width)) * rng.choice([1.0, -1.0], width)
    t[:, ::5] = rng.normal(0.0, 1.0, (n, width // 5))  # totals that did not measurably change
    d = t * rng.uniform(-0.5, 1.5, width)
    low, high, unchanged = fraction_bounds(d, t, resamples=resamples, seed=4, confidence=0.9)
    counts = resample_counts(n, resamples=resamples, seed=4)
    d_star, t_star = (counts @ d).T / n, (counts @ t).T / n
    t_low, t_high = np.quantile(t_star, [0.05, 0.95], axis=1, method="linear")
    np.testing.assert_array_equal(unchanged, (t_low <= 0) & (t_high >= 0))
    assert 0 < unchanged.sum() < width
    r_low, r_high = np.quantile(d_star / t_star, [0.05, 0.95], axis=1, method="linear")
    due = ~unchanged
    np.testing.assert_allclose(low[due], r_low[due], rtol=1e-12, atol=0)
    np.testing.assert_allclose(high[due], r_high[due], rtol=1e-12, atol=0)
    assert np.isnan(low[unchanged]).all() and np.isnan(high[unchanged]).all()
