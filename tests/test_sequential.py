"""The sequential_t interval: its boundary against a plain reference and against theory (error
rates under simulated peeking), its futility rule, and its reduction to student_t."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from pipeline.assessment import boundary, sequential
from pipeline.assessment.intervals import method_intervals, student_t_bounds


def reference_boundary(
    first_look: int, look_every: int, max_pairs: int, confidence: float, simulations: int
) -> float:
    """docs/contract.md's recipe written out plainly: the sequences drawn in blocks of 100,000
    rows (the same numbers as one draw), straight sums per look, a loop over looks."""
    looks = list(range(first_look, max_pairs, look_every)) + [max_pairs]
    rng = np.random.Generator(np.random.PCG64(boundary.BOUNDARY_SEED))
    largest = []
    for first in range(0, simulations, 100_000):
        z = rng.standard_normal((min(100_000, simulations - first), max_pairs))
        block = np.zeros(len(z))
        for n in looks:
            part = z[:, :n]
            t = part.mean(axis=1) / (part.std(axis=1, ddof=1) / math.sqrt(n))
            block = np.maximum(block, np.abs(t))
        largest.append(block)
    quantile = np.quantile(np.concatenate(largest), confidence, method="linear")
    return round(float(quantile), boundary.DECIMALS)


@pytest.mark.parametrize(("plan", "confidence"), [((5, 5, 20), 0.95), ((6, 2, 12), 0.9)])
def test_boundary_follows_the_documented_recipe(
    plan: tuple[int, int, int], confidence: float
) -> None:
    """At 250,000 sequences (the recipe's steps; the full million is held below)."""
    looks = sequential.schedule(*plan)
    assert boundary.simulate(looks, confidence, 250_000) == reference_boundary(
        *plan, confidence, 250_000
    )


@pytest.mark.parametrize(("plan", "confidence"), [((6, 2, 10), 0.95), ((6, 2, 40), 0.95)])
@pytest.mark.slow
def test_the_shipped_table_holds_the_pinned_computation(
    plan: tuple[int, int, int], confidence: float
) -> None:
    """Two entries recomputed with the whole recipe (a million sequences), one of them the
    default plan's; every entry is recomputed by ``python -m pipeline.assessment.boundary``."""
    table = boundary.shipped()
    assert len(table) == len(boundary.TABLE_PLANS) * len(boundary.TABLE_CONFIDENCES)
    key = ",".join(str(v) for v in (*plan, confidence))
    assert table[key] == boundary.simulate(sequential.schedule(*plan), confidence)
    assert sequential.boundary(*plan, confidence) == table[key]


def test_every_shipped_constant_lies_where_a_constant_must() -> None:
    for key, c in boundary.shipped().items():
        first, every, most, confidence = (float(v) for v in key.split(","))
        looks = sequential.schedule(int(first), int(every), int(most))
        assert boundary.plausible(looks, confidence, c), key


@pytest.mark.slow
def test_the_constant_errs_at_its_nominal_rate_on_fresh_sequences() -> None:
    """Against theory: 2,000,000 sequences drawn apart from the recipe's (another seed); the
    share whose largest |t| exceeds the default plan's c estimates its error rate, 5% up to the
    Monte Carlo error of c (0.022 point) and of this estimate (0.015 point): 3 sigma is 0.08.
    The constant of the former recipe (100,000 sequences), 3.180995, errs 5.14% here."""
    looks = np.array(sequential.schedule(6, 2, 40))
    rng = np.random.Generator(np.random.PCG64(20261202))
    largest = []
    for _ in range(20):
        z = rng.standard_normal((100_000, 40))
        s, q = np.cumsum(z, axis=1)[:, looks - 1], np.cumsum(z * z, axis=1)[:, looks - 1]
        t = (s / looks) / np.sqrt((q - s * s / looks) / (looks - 1) / looks)
        largest.append(np.abs(t).max(axis=1))
    m = np.concatenate(largest)
    assert abs(float((m > sequential.boundary(6, 2, 40, 0.95)).mean()) - 0.05) < 0.0008
    assert float((m > 3.180995).mean()) > 0.0508  # the former constant: more than 3 sigma off


def test_computed_constants_are_kept_on_this_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unshipped plan is computed once, then read from the cache (also by another process:
    the cache is a file); a cache file with a value no constant can have is not believed."""
    monkeypatch.setenv("EXPLAIN_CACHE_DIR", str(tmp_path))
    plan, looks = (6, 3, 12), sequential.schedule(6, 3, 12)
    computed = boundary.constant((*plan, 0.93), looks)
    assert computed == boundary.simulate(looks, 0.93)
    path = boundary.cache_file()
    assert path is not None and json.loads(path.read_text()) == {"6,3,12,0.93": computed}

    def no_simulation(*args: object) -> float:
        raise AssertionError("simulated again")

    monkeypatch.setattr(boundary, "simulate", no_simulation)
    assert boundary.constant((*plan, 0.93), looks) == computed
    path.write_text(json.dumps({"6,3,12,0.93": 99.0}))
    with pytest.raises(AssertionError, match="simulated again"):
        boundary.constant((*plan, 0.93), looks)
    path.write_text("not json")
    with pytest.raises(AssertionError, match="simulated again"):
        boundary.constant((*plan, 0.93), looks)
    monkeypatch.setenv("EXPLAIN_CACHE_DIR", "")
    assert boundary.cache_file() is None


def test_a_look_with_fewer_pairs_than_planned_is_never_narrower_than_student_t() -> None:
    t = sequential.student_t_quantile
    # one look planned at 6, 5 pairs there (a failed run): t(4), not t(5)
    assert sequential.critical(6, 2, 6, 0.95, 5) == t(5, 0.95) == stats.t.ppf(0.975, 4)
    assert sequential.critical(6, 2, 6, 0.95, 6) == stats.t.ppf(0.975, 5)
    # several looks: the plan's c wherever it is wider, t where a look has very few pairs
    c = sequential.boundary(6, 2, 40, 0.95)
    assert sequential.critical(6, 2, 40, 0.95, 7) == c
    plan = (20, 10, 40)  # c of 3 looks from 20 pairs: below t(4) = 2.78
    assert sequential.critical(*plan, 0.95, 5) == t(5, 0.95) > sequential.boundary(*plan, 0.95)


def test_schedule_ends_at_the_maximum_also_off_the_grid() -> None:
    assert sequential.schedule(6, 2, 12) == (6, 8, 10, 12)
    assert sequential.schedule(6, 4, 12) == (6, 10, 12)
    assert sequential.schedule(10, 2, 8) == (8,)
    with pytest.raises(ValueError, match=r"sequential.first_look must be >= 2, got 1"):
        sequential.schedule(1, 2, 12)
    with pytest.raises(ValueError, match=r"sequential.max_pairs must be <= 1000, got 1001"):
        sequential.schedule(6, 2, 1001)


@pytest.mark.parametrize(("n", "confidence"), [(5, 0.95), (12, 0.9), (40, 0.99)])
def test_a_single_look_is_the_student_t_quantile(n: int, confidence: float) -> None:
    c = sequential.boundary(n, 1, n, confidence)
    assert c == stats.t.ppf(1 - (1 - confidence) / 2, n - 1)  # exactly, not rounded
    x = np.random.default_rng(n).normal(0.05, 0.1, size=(n, 4))
    x[:, 3] = 0.07  # no spread: both ends are exp(m)
    as_t = method_intervals(x, "student_t", resamples=10, seed=0, confidence=confidence)
    for critical in (None, c):
        got = method_intervals(
            x, "sequential_t", resamples=10, seed=0, confidence=confidence, critical=critical
        )
        assert np.array_equal(got.low, as_t.low) and np.array_equal(got.high, as_t.high)
        assert np.array_equal(got.estimate, as_t.estimate)
        assert list(got.method) == ["sequential_t"] * 4
    assert got.low[3] == got.high[3] == pytest.approx(math.exp(0.07), rel=1e-15)


def test_several_looks_widen_the_interval_to_c() -> None:
    c = sequential.boundary(6, 2, 40, 0.95)
    assert stats.t.ppf(0.975, 5) < c < 4  # wider than any single look's quantile
    x = np.random.default_rng(3).normal(0.02, 0.05, size=(10, 3))
    got = method_intervals(x, "sequential_t", resamples=10, seed=0, confidence=0.95, critical=c)
    m, s = x.mean(axis=0), x.std(axis=0, ddof=1)
    np.testing.assert_allclose(got.low, np.exp(m - c * s / math.sqrt(10)), rtol=1e-13)
    np.testing.assert_allclose(got.high, np.exp(m + c * s / math.sqrt(10)), rtol=1e-13)
    low, high = student_t_bounds(x, 0.95, c)
    assert np.array_equal(got.low, low) and np.array_equal(got.high, high)


def test_an_infinite_pair_takes_expanded_percentile_as_for_student_t() -> None:
    x = np.array([[0.1, 0.2, np.inf, 0.15, 0.12, 0.18]]).T.repeat(2, axis=1)
    x[2, 1] = 0.11
    got = method_intervals(x, "sequential_t", resamples=500, seed=1, confidence=0.95, critical=3.0)
    assert list(got.method) == ["expanded_percentile", "sequential_t"]
    assert got.high[0] == math.inf


def _peek(x: np.ndarray, plan: tuple[int, int, int], gate: float) -> tuple[float, float]:
    """(share of sequences whose interval misses the true mean at some look, share that PASS
    at some look), for sequences of log-ratios x (pairs, sequences) with true mean log(gate)."""
    c = sequential.boundary(*plan, 0.95)
    missed = np.zeros(x.shape[1], dtype=bool)
    passed = np.zeros(x.shape[1], dtype=bool)
    for n in sequential.schedule(*plan):
        low, high = student_t_bounds(x[:n], 0.95, c)
        missed |= (low > gate) | (high < gate)
        passed |= (low >= gate) & (low > 1)
    return float(missed.mean()), float(passed.mean())


@pytest.mark.parametrize("spread", [0.04, 0.2])
def test_peeking_at_sequential_t_keeps_its_error_rates(spread: float) -> None:
    """2,000 simulated normal sequences (other draws than the boundary's), looks every 2 pairs
    from 6 to 40, true gain exactly at the gate (the worst case for a false PASS)."""
    gate = 1.01
    rng = np.random.Generator(np.random.PCG64(20261201))
    x = rng.normal(math.log(gate), spread, size=(40, 2000))
    missed, passed = _peek(x, (6, 2, 40), gate)
    se = lambda p: math.sqrt(p * (1 - p) / 2000)  # noqa: E731
    assert missed <= 0.05 + 3 * se(0.05)
    assert passed <= 0.025 + 3 * se(0.025)
    assert missed > 0.02  # not trivially wide: the boundary spends most of its alpha
    # the same peeking at student_t's fixed-n quantile errs far more often
    fixed = np.zeros(2000, dtype=bool)
    for n in sequential.schedule(6, 2, 40):
        low, _ = student_t_bounds(x[:n], 0.95)
        fixed |= low >= gate
    assert fixed.mean() > 0.07


def reference_power(
    n: int, mean: float, sd: float, gate: float, plan: tuple[int, int, int]
) -> float:
    """Predictive power written out: the unknown mean ~ Normal(mean, sd^2/n) after n pairs, the
    mean of the N - n pairs to come ~ Normal(that, sd^2/(N - n)), the final mean their blend."""
    c = sequential.boundary(*plan, 0.95)
    big_n = plan[2]
    target = math.log(gate) + c * sd / math.sqrt(big_n)
    w = (big_n - n) / big_n  # weight of the pairs to come in the final mean
    spread = math.sqrt(w**2 * (sd**2 / (big_n - n) + sd**2 / n))
    return float(stats.norm.sf(target, loc=mean, scale=spread))


@pytest.mark.parametrize(("n", "mean", "sd"), [(6, 0.0, 0.04), (10, 0.03, 0.04), (20, 0.012, 0.05)])
def test_predictive_power_against_the_normal_formula(n: int, mean: float, sd: float) -> None:
    plan = (6, 2, 40)
    got = sequential.predictive_power(
        n, mean, sd, gate=1.01, plan=sequential.Schedule(*plan), confidence=0.95
    )
    assert got == pytest.approx(reference_power(n, mean, sd, 1.01, plan), rel=1e-9, abs=1e-15)
    many = sequential.predictive_powers(
        [n, n],
        [mean, mean],
        [sd, sd],
        gate=1.01,
        plan=sequential.Schedule(*plan),
        confidence=0.95,
    )
    assert list(many) == [got, got]


def test_futility_stops_hopeless_rounds_only() -> None:
    kw: dict[str, Any] = {
        "gate": 1.01,
        "plan": sequential.Schedule(6, 2, 40),
        "confidence": 0.95,
    }
    assert sequential.futile(6, -0.01, 0.04, **kw)  # measured a slowdown
    assert not sequential.futile(6, 0.05, 0.04, **kw)  # five times the gate
    assert not sequential.futile(40, -0.5, 0.04, **kw)  # at the maximum: stopped as "max"
    assert sequential.futile(10, 0.0, 0.0, **kw)  # no spread, below the gate: certain
    assert not sequential.futile(10, 0.02, 0.0, **kw)
    # a gate below 1 is no easier than 1: PASS also needs low > 1
    low_gate = {**kw, "gate": 0.5}
    assert sequential.predictive_power(6, 0.0, 0.04, **low_gate) < 0.5


def test_at_a_gate_of_0_pct_a_spread_free_mean_of_0_cannot_pass() -> None:
    """PASS needs low > 1, so identical deterministic commands (every log-ratio 0) under
    --min-improvement-pct 0 are futile at the first look; before, mean >= target counted 0 as
    reaching the gate and the round ran all 40 pairs. The same at the last look (n = N), where
    the final low is mean - c sd / sqrt(N)."""
    kw: dict[str, Any] = {"gate": 1.0, "plan": sequential.Schedule(6, 2, 40), "confidence": 0.95}
    assert sequential.predictive_power(6, 0.0, 0.0, **kw) == 0.0
    assert sequential.futile(6, 0.0, 0.0, **kw)
    assert sequential.predictive_power(6, 1e-12, 0.0, **kw) == 1.0  # any gain passes
    assert not sequential.futile(6, 1e-12, 0.0, **kw)
    half = sequential.boundary(6, 2, 40, 0.95) * 0.04 / math.sqrt(40)
    assert sequential.predictive_power(40, half, 0.04, **kw) == 0.0  # low exactly 1
    assert sequential.predictive_power(40, half * 1.001, 0.04, **kw) == 1.0


@pytest.mark.slow
def test_the_tests_pinned_constants_are_the_recipes() -> None:
    """tests/fixtures/sequential_constants.json (the constants a test session starts its cache
    with, tests/conftest.py): of the recipe in force, each where a constant must lie, and the
    cheapest recomputed with the whole recipe."""
    from conftest import TEST_CONSTANTS

    pinned = json.loads(TEST_CONSTANTS.read_text(encoding="utf-8"))
    assert pinned["recipe"] == boundary.RECIPE
    keys = {}
    for text, value in pinned["constants"].items():
        first, every, most, confidence = text.split(",")
        looks = sequential.schedule(int(first), int(every), int(most))
        assert boundary.plausible(looks, float(confidence), value), text
        keys[text] = looks
    cheapest = min(keys, key=lambda text: keys[text][-1])
    confidence = float(cheapest.split(",")[3])
    assert boundary.simulate(keys[cheapest], confidence) == pinned["constants"][cheapest]
