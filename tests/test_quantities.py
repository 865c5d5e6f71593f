"""Pairing, per-run values and paired intervals (contract §4) against plain reference code."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pytest
from assess_fixtures import Attempt, campaign, expect, inputs, run

from pipeline.assessment import intervals, quantities
from pipeline.assessment.quantities import comparisons

RESAMPLES = 2000


# -- plain reference implementation (loops on purpose) ---------------------------------------
def ref_quantile(stat: list[float], p: float) -> float:
    """numpy 'linear' quantile with contract §4.2's rule for +inf."""
    s = sorted(stat)
    h = (len(s) - 1) * p
    lo = math.floor(h)
    w = h - lo
    a = s[lo]
    b = s[min(lo + 1, len(s) - 1)]
    if w == 0 or a == b:
        return a
    if math.isinf(b):
        return math.inf
    return a + (b - a) * w


def ref_interval(x: list[float], seed: int, resamples: int, confidence: float) -> tuple:
    n = len(x)
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))
    stat = []
    for row in idx:
        picked = [x[i] for i in row]
        stat.append(math.inf if any(math.isinf(v) for v in picked) else sum(picked) / n)
    alpha = (1 - confidence) / 2
    mean = math.inf if any(math.isinf(v) for v in x) else sum(x) / n
    return (
        math.exp(mean),
        math.exp(ref_quantile(stat, alpha)),
        math.exp(ref_quantile(stat, 1 - alpha)),
    )


def n_pairs(a: Attempt) -> int:
    """Repetitions with an ok run on both sides."""
    ok = {(r["side"], r["repetition"]) for r in a.runs if r["status"] == "ok"}
    return sum(("candidate", rep) in ok for side, rep in ok if side == "baseline")


def ref_values(a: Attempt, better: str) -> dict[tuple[str, str], tuple[str | None, list[float]]]:
    """(quantity, name) -> (reason or None, x by repetition) for one attempt."""
    ok = {(r["side"], r["repetition"]): r for r in a.runs if r["status"] == "ok"}
    reps = sorted({rep for (_, rep) in ok if ("baseline", rep) in ok and ("candidate", rep) in ok})
    refs = {
        e["name"] for e in a.expectations if e["target"] == "region" and e["expect"] == "unchanged"
    }
    regions = {g for r in ok.values() for step in r["breakdown"].values() for g in step}
    counters = {c for r in ok.values() for c in r["counters"]}

    def total(r: dict[str, Any], g: str) -> float:
        return sum(step.get(g, 0.0) for step in r["breakdown"].values())

    def normalized(r: dict[str, Any], g: str) -> float | None:
        vals = []
        for step in r["breakdown"].values():
            ref_s = sum(step.get(x, 0.0) for x in refs)
            if ref_s > 0:
                vals.append(step.get(g, 0.0) / ref_s)
        return sum(vals) / len(vals) if vals else None

    def share(r: dict[str, Any]) -> float | None:
        every = sum(sum(step.values()) for step in r["breakdown"].values())
        ref = sum(total(r, g) for g in refs)
        return ref / every if every > 0 and ref > 0 else None

    getters: dict[tuple[str, str], Any] = {("metric", "e2e_seconds"): lambda r: r["metric"]}
    for g in regions:
        getters[("region", g)] = lambda r, g=g: total(r, g)
        if refs and g not in refs:
            getters[("region_normalized", g)] = lambda r, g=g: normalized(r, g)
    for c in counters:
        getters[("counter", c)] = lambda r, c=c: r["counters"].get(c, 0.0)
    out: dict[tuple[str, str], tuple[str | None, list[float]]] = {}
    for key, get in getters.items():
        reason, xs = None, []
        for rep in reps:
            b, c = get(ok[("baseline", rep)]), get(ok[("candidate", rep)])
            if b is None or c is None:
                reason = "no_reference_time"
                continue
            if b == 0:
                reason = reason or "zero_baseline"
                continue
            higher = key[0] == "metric" and better == "higher"
            xs.append(math.log(c / b) if higher else (math.log(b / c) if c > 0 else math.inf))
        out[key] = (reason, xs)
    if refs:
        reason, xs = None, []
        for rep in reps:
            sb, sc = share(ok[("baseline", rep)]), share(ok[("candidate", rep)])
            if sb is None or sc is None:
                reason = "zero_share"
            else:
                xs.append(math.log(sc / sb))
        out[("share_speedup", quantities.SHARE_NAME)] = (reason, xs)
    return out


def random_attempt(rng: np.random.Generator, aid: str, rnd: int) -> Attempt:
    """Unequal repetition counts, failed runs, one-sided repetitions, absent regions/counters."""
    runs = []
    for side, reps in (("baseline", rng.integers(4, 11)), ("candidate", rng.integers(4, 11))):
        for rep in range(int(reps)):
            if rng.random() < 0.1:
                runs.append(run(side, rep, None, status="failed"))
                continue
            steps = {}
            for k in range(int(rng.integers(1, 4))):
                regions = {g: float(rng.uniform(0.5, 2.0)) for g in ("attn", "mlp", "ref", "comm")}
                if rng.random() < 0.2:
                    regions.pop("comm")
                steps[f"s{k}"] = regions
            counters = {"launches": float(rng.integers(90, 110))}
            if rng.random() < 0.8:
                counters["bytes"] = float(rng.uniform(1, 2))
            runs.append(
                run(side, rep, float(rng.uniform(1, 2)), breakdown=steps, counters=counters)
            )
    exps = [expect("region", "attn", "decrease"), expect("region", "ref", "unchanged")]
    return Attempt("c", aid, rnd, runs, exps if rng.random() < 0.7 else [])


def _rows(frame: pl.DataFrame) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["attempt_id"], r["quantity"], r["name"]): r for r in frame.iter_rows(named=True)}


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-12 * abs(b)


@pytest.mark.parametrize("better", ["lower", "higher"])
@pytest.mark.slow
def test_comparisons_match_reference(better: str) -> None:
    rng = np.random.default_rng(7)
    attempts = [random_attempt(rng, f"r{i}", i) for i in range(12)]
    camp = campaign("c", better=better, resamples=RESAMPLES, seed=3, min_pairs=5)
    got = _rows(comparisons(inputs([camp], attempts)))
    expected_keys = set()
    for a in attempts:
        for (q, name), (reason, xs) in ref_values(a, better).items():
            expected_keys.add((a.attempt_id, q, name))
            row = got[(a.attempt_id, q, name)]
            n = len(xs)
            assert row["n_pairs"] == n_pairs(a)  # every pair counts, also for an unverifiable
            if reason is None and n < 5:
                reason = "too_few_pairs"
            assert row["reason"] == reason, (a.attempt_id, q, name)
            if reason is None:
                est, low, high = ref_interval(xs, 3, RESAMPLES, 0.95)
                assert row["status"] == "ok"
                assert _close(row["estimate"], est) and _close(row["low"], low)
                assert _close(row["high"], high)
            elif reason == "too_few_pairs":
                assert _close(row["estimate"], math.exp(sum(xs) / len(xs)) if xs else None)
                assert row["low"] is None and row["direction"] is None
    assert set(got) == expected_keys


def _pairs(b: list[float], c: list[float], **kw: Any) -> list[dict[str, Any]]:
    return [run("baseline", i, v, **kw) for i, v in enumerate(b)] + [
        run("candidate", i, v, **kw) for i, v in enumerate(c)
    ]


def test_pairing_counts_unequal_failed_and_one_sided() -> None:
    runs = [run("baseline", r, 1.0) for r in range(7)]  # reps 0..6
    runs += [run("candidate", r, 0.9) for r in (0, 1, 2, 4, 8, 9)]  # 8, 9 one-sided
    runs += [run("candidate", 3, None, status="failed")]  # partner of baseline 3 failed
    runs += [run("baseline", 8, None, status="failed")]  # both sides of 8 unusable for pairing
    frame = quantities.run_counts(inputs([campaign("c")], [Attempt("c", "a", 1, runs)]).samples)
    row = frame.collect().row(0, named=True)
    assert row["n_pairs"] == 4  # 0, 1, 2, 4
    assert (row["n_baseline_ok"], row["n_candidate_ok"]) == (7, 6)
    assert (row["n_unpaired_baseline"], row["n_unpaired_candidate"]) == (3, 2)
    assert row["n_failed"] == 2


def test_median_is_numpy_median_of_every_ok_run() -> None:
    rng = np.random.default_rng(1)
    b, c = list(rng.uniform(1, 2, 6)), list(rng.uniform(1, 2, 9))
    runs = _pairs(b, c) + [run("candidate", 20, None, status="failed")]
    med = quantities.side_medians(inputs([campaign("c")], [Attempt("c", "a", 1, runs)]).samples)
    row = med.collect().row(0, named=True)
    assert row["med_b"] == np.median(b) and row["med_c"] == np.median(c)


def _one(runs: list[dict[str, Any]], exps: Sequence[dict[str, str]] = (), **policy: Any) -> dict:
    camp = campaign("c", resamples=RESAMPLES, **policy)
    return _rows(comparisons(inputs([camp], [Attempt("c", "a", 1, runs, list(exps))])))


def test_zero_baseline_and_zero_over_zero_are_unverifiable() -> None:
    b = [{"all": {"x": 1.0, "gone": 0.0}}] * 6
    c = [{"all": {"x": 1.0, "new": 1.0, "gone": 0.0}}] * 6
    runs = [run("baseline", i, 1.0, breakdown=bd) for i, bd in enumerate(b)]
    runs += [run("candidate", i, 1.0, breakdown=bd) for i, bd in enumerate(c)]
    got = _one(runs)
    assert got[("a", "region", "new")]["reason"] == "zero_baseline"  # 0 -> 1
    assert got[("a", "region", "gone")]["reason"] == "zero_baseline"  # 0 / 0
    for key in [("a", "region", "new"), ("a", "region", "gone")]:
        assert got[key]["status"] == "unverifiable" and got[key]["estimate"] is None
    assert got[("a", "region", "x")]["status"] == "ok"


def test_candidate_zero_is_plus_infinity() -> None:
    bx = [1.0, 1.1, 0.9, 1.0, 1.2, 0.95]
    cx = [0.5, 0.6, 0.0, 0.5, 0.55, 0.45]  # one pair vanished
    runs = [run("baseline", i, 1.0, counters={"k": v}) for i, v in enumerate(bx)]
    runs += [run("candidate", i, 1.0, counters={"k": v}) for i, v in enumerate(cx)]
    row = _one(runs, seed=5)[("a", "counter", "k")]
    xs = [math.log(b / c) if c else math.inf for b, c in zip(bx, cx, strict=True)]
    est, low, high = ref_interval(xs, 5, RESAMPLES, 0.95)
    assert row["estimate"] == math.inf == est
    assert _close(row["low"], low) and row["high"] == high == math.inf
    assert row["direction"] == "decrease" and row["status"] == "ok"


def test_too_few_pairs_reports_estimate_without_interval() -> None:
    b, c = [1.0, 1.2, 1.1, 0.9], [0.9, 1.0, 1.0, 0.8]
    row = _one(_pairs(b, c))[("a", "metric", "e2e_seconds")]
    xs = [math.log(x / y) for x, y in zip(b, c, strict=True)]
    assert row["reason"] == "too_few_pairs" and row["n_pairs"] == 4
    assert _close(row["estimate"], math.exp(sum(xs) / 4))
    assert row["low"] is None and row["high"] is None and row["direction"] is None


def _camp_rows(
    runs: list[dict[str, Any]], better: str, exps: Sequence[dict[str, str]] = ()
) -> dict:
    camp = campaign("c", better=better, resamples=RESAMPLES)
    return _rows(comparisons(inputs([camp], [Attempt("c", "a", 1, runs, list(exps))])))


@pytest.mark.parametrize(
    ("better", "factor", "direction"),
    [
        ("higher", 1.2, "improved"),
        ("higher", 0.8, "regressed"),
        ("lower", 0.8, "improved"),
        ("lower", 1.2, "regressed"),
    ],
)
def test_metric_direction_follows_better(better: str, factor: float, direction: str) -> None:
    b = [100.0, 101, 99, 100, 102, 98]
    row = _camp_rows(_pairs(b, [v * factor for v in b]), better)[("a", "metric", "e2e_seconds")]
    ratio = factor if better == "higher" else 1 / factor
    assert row["direction"] == direction
    assert row["estimate"] == pytest.approx(ratio, rel=1e-12)


def test_region_directions_are_decrease_and_increase() -> None:
    runs = [run("baseline", i, 1.0, breakdown={"up": 1.0, "down": 1.0}) for i in range(6)]
    runs += [run("candidate", i, 1.0, breakdown={"up": 1.5, "down": 0.5}) for i in range(6)]
    got = _camp_rows(runs, "lower")
    assert got[("a", "region", "down")]["direction"] == "decrease"
    assert got[("a", "region", "up")]["direction"] == "increase"


def _drift_runs(drift: list[float]) -> list[dict[str, Any]]:
    """Candidate halves `attn`; every region of candidate step k is also multiplied by drift[k]."""
    rng = np.random.default_rng(11)
    runs = []
    for rep in range(6):
        base = {f"s{k}": {g: rng.uniform(1, 2) for g in ("attn", "mlp", "ref")} for k in range(3)}
        runs.append(run("baseline", rep, 1.0, breakdown=base))
        cand = {
            s: {g: v * (0.5 if g == "attn" else 1.0) * drift[k] for g, v in regions.items()}
            for k, (s, regions) in enumerate(base.items())
        }
        runs.append(run("candidate", rep, 1.0, breakdown=cand))
    return runs


def test_uniform_step_drift_leaves_normalized_unchanged() -> None:
    exps = [expect("region", "attn", "decrease"), expect("region", "ref", "unchanged")]
    plain = _camp_rows(_drift_runs([1.0, 1.0, 1.0]), "lower", exps)
    drifted = _camp_rows(_drift_runs([1.3, 0.7, 1.1]), "lower", exps)
    for name in ("attn", "mlp"):
        p, d = plain[("a", "region_normalized", name)], drifted[("a", "region_normalized", name)]
        for col in ("estimate", "low", "high"):
            assert d[col] == pytest.approx(p[col], rel=1e-12)
    assert plain[("a", "region_normalized", "attn")]["estimate"] == pytest.approx(2.0, rel=1e-12)
    # the raw regions do move with the drift, and the reference is never normalized
    assert drifted[("a", "region", "mlp")]["estimate"] != pytest.approx(1.0, rel=1e-3)
    assert ("a", "region_normalized", "ref") not in drifted
    assert ("a", "region", "ref") in drifted


def test_non_uniform_change_is_not_cancelled() -> None:
    exps = [expect("region", "ref", "unchanged")]
    runs = _drift_runs([1.0, 1.0, 1.0])
    for r in runs:
        if r["side"] == "candidate":
            for regions in r["breakdown"].values():
                regions["mlp"] *= 1.2  # only mlp moves: normalization must show it
    got = _camp_rows(runs, "lower", exps)
    assert got[("a", "region_normalized", "mlp")]["estimate"] == pytest.approx(1 / 1.2, rel=1e-12)


def test_no_reference_time_and_zero_share() -> None:
    exps = [expect("region", "attn", "decrease"), expect("region", "ref", "unchanged")]
    runs = [run("baseline", i, 1.0, breakdown={"attn": 1.0, "ref": 1.0}) for i in range(6)]
    runs += [run("candidate", i, 1.0, breakdown={"attn": 0.5, "ref": 1.0}) for i in range(5)]
    runs += [run("candidate", 5, 1.0, breakdown={"attn": 0.5})]  # no reference time at all
    got = _camp_rows(runs, "lower", exps)
    assert got[("a", "region_normalized", "attn")]["reason"] == "no_reference_time"
    assert got[("a", "share_speedup", quantities.SHARE_NAME)]["reason"] == "zero_share"
    assert got[("a", "region", "attn")]["status"] == "ok"


def test_share_speedup_estimates_breakdown_speedup() -> None:
    exps = [expect("region", "ref", "unchanged")]
    runs = [run("baseline", i, 1.0, breakdown={"attn": 3.0, "ref": 1.0}) for i in range(6)]
    runs += [run("candidate", i, 1.0, breakdown={"attn": 1.0, "ref": 1.0}) for i in range(6)]
    row = _camp_rows(runs, "lower", exps)[("a", "share_speedup", quantities.SHARE_NAME)]
    assert row["estimate"] == pytest.approx(2.0, rel=1e-12)  # share 0.25 -> 0.5: 4 s -> 2 s
    assert row["direction"] == "improved"


def test_one_bootstrap_call_per_group(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[tuple[int, int], int]] = []
    real = intervals.paired_intervals

    def spy(x: np.ndarray, **kw: Any) -> Any:
        calls.append((x.shape, kw["seed"]))
        return real(x, **kw)

    monkeypatch.setattr(intervals, "paired_intervals", spy)
    rng = np.random.default_rng(2)
    attempts = []
    for i, (cid, n) in enumerate([("c1", 6), ("c1", 6), ("c1", 7), ("c2", 6)]):
        b = list(rng.uniform(1, 2, n))
        runs = [run("baseline", r, v, breakdown={"a": v, "b": v}) for r, v in enumerate(b)]
        runs += [run("candidate", r, v * 0.9, breakdown={"a": v, "b": v}) for r, v in enumerate(b)]
        attempts.append(Attempt(cid, f"r{i}", i, runs))
    camps = [campaign("c1", resamples=500, seed=1), campaign("c2", resamples=500, seed=2)]
    comparisons(inputs(camps, attempts))
    # (n=6, seed 1): 2 attempts x 3 quantities; (n=7, seed 1): 3; (n=6, seed 2): 3
    assert sorted(calls) == sorted([((6, 6), 1), ((7, 3), 1), ((6, 3), 2)])


def test_values_out_of_range_are_not_finite_and_never_a_direction() -> None:
    """A region summed over steps near 1e308 overflows to inf in every run (inf / inf: NaN);
    a counter ratio of 1e308 to 1e-10 overflows, one of 1e-100 to 1e308 underflows to 0.
    Before: the NaN region read as a decrease (NaN > 1 is true in Polars); the others raised
    or were +inf."""
    big = {"s0": {"big": 1e308, "x": 1.0}, "s1": {"big": 1e308, "x": 1.0}}
    runs = []
    for i in range(6):
        for side, over in (("baseline", 1e308), ("candidate", 1e-10)):
            counters = {"over": over, "under": 1e-100 if side == "baseline" else 1e308}
            runs.append(run(side, i, 1.0 + 0.01 * i, breakdown=big, counters=counters))
    got = _one(runs)
    for name in ("big", "over", "under"):
        row = next(v for k, v in got.items() if k[2] == name)
        assert (row["status"], row["reason"], row["direction"]) == (
            "unverifiable",
            "not_finite",
            None,
        ), name
        assert row["estimate"] is None and row["low"] is None and row["high"] is None
    assert got[("a", "region", "x")]["reason"] is None  # the finite region beside it is kept


def test_an_interval_bound_past_the_float_range_is_not_finite() -> None:
    """Finite log-ratios of about ±700 (values 1e300 against 1e-4): under student_t a bound is
    exp(1000) = inf, an overflow (no pair is +inf), so the row has no interval."""
    b = [1e300, 1e-4] * 3
    c = [1e-4, 1e300] * 3
    row = _one(_pairs(b, c), interval="student_t")[("a", "metric", "e2e_seconds")]
    assert (row["reason"], row["direction"], row["high"]) == ("not_finite", None, None)
