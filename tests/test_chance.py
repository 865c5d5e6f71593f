"""The per-round false-PASS rate of identical code (pipeline.assessment.chance): against theory
(gate 0: alpha/2), against plain simulations of the rules written in the test, and against
calibrate's measured A/A rates (docs/calibration.md)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats

from pipeline.assessment import chance
from pipeline.study.simulate import Model, draw_runs


def test_gate_zero_gives_alpha_over_two_for_the_t_interval() -> None:
    rates = chance.paired_rates([5, 10, 40], 0.03, gate_pct=0.0, method="student_t", confidence=0.9)
    assert rates == pytest.approx([0.05, 0.05, 0.05], abs=1e-12)


def test_no_rate_without_two_pairs_or_without_a_spread() -> None:
    spreads = [0.04, 0.04, 0.0, math.nan]
    rates = chance.paired_rates(
        [0, 1, 10, 10], spreads, gate_pct=1.0, method="student_t", confidence=0.95
    )
    assert rates.tolist() == [0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("n", [5, 10, 20])
def test_paired_rate_equals_a_plain_simulation_of_the_rule(n: int) -> None:
    """Identical code, normal log-ratios of spread 0.03: PASS when exp(m - t s/sqrt(n)) >= 1.01."""
    rng = np.random.default_rng(n)
    x = rng.normal(0.0, 0.03, size=(200_000, n))
    m, s = x.mean(axis=1), x.std(axis=1, ddof=1)
    low = np.exp(m - stats.t.ppf(0.975, n - 1) * s / math.sqrt(n))
    simulated = float(np.mean((low > 1) & (low >= 1.01)))
    (rate,) = chance.paired_rates([n], 0.03, gate_pct=1.0, method="student_t", confidence=0.95)
    assert rate == pytest.approx(simulated, abs=4 * math.sqrt(simulated / 200_000) + 1e-4)


def test_paired_rates_equal_scipy_stats_noncentral_t_without_importing_it() -> None:
    """The rate is the noncentral t's survival function at the interval's constant; computed from
    scipy.special (scipy.stats costs every assess half a second of start-up), it equals
    scipy.stats.nct.sf to rounding on a grid of pairs, spreads and gates, and the normal tail where
    the noncentrality is too large for either."""
    n = np.repeat([2, 3, 5, 10, 40, 400], 6).astype(float)
    spread = np.tile([1e-9, 1e-4, 0.01, 0.04, 0.3, 2.0], 6)
    for gate in (0.0, 1.0, 5.0):
        got = chance.paired_rates(n, spread, gate_pct=gate, method="student_t", confidence=0.95)
        ncp = -math.log1p(gate / 100) * np.sqrt(n) / spread
        k = stats.t.ppf(0.975, n - 1)
        want = stats.nct.sf(k, n - 1, ncp)
        want = np.where(np.isnan(want), stats.norm.sf(k - ncp), want)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-30)
        assert ((got > 0) | (want == 0)).all()  # a tiny rate is not rounded to none


def _median_reference(n: int, spread: float, side: float, gate: float) -> float:
    """The median rule on the same draws, one simulated round at a time."""
    rng = np.random.Generator(np.random.PCG64(chance.SEED))
    z = rng.standard_normal((3, chance.SIMULATIONS, n))
    run = math.sqrt(spread**2 / 2)
    shared = math.sqrt(max(side**2 - spread**2 / 2, 0.0))
    passes = 0
    for i in range(chance.SIMULATIONS):
        b = [math.exp(shared * z[0, i, r] + run * z[1, i, r]) for r in range(n)]
        c = [math.exp(shared * z[0, i, r] + run * z[2, i, r]) for r in range(n)]
        med_b, med_c = statistics.median(b), statistics.median(c)
        pct = (med_b - med_c) / med_b * 100
        passes += pct > 0 and pct >= gate
    return passes / chance.SIMULATIONS


@pytest.mark.parametrize("n", [4, 7])
def test_median_rate_equals_the_rule_applied_round_by_round(n: int) -> None:
    expected = _median_reference(n, 0.04, 0.05, 1.0)
    assert chance.median_rate(n, 0.04, 0.05, gate_pct=1.0) == pytest.approx(expected, abs=1e-12)


def _model_spreads(reps: int) -> tuple[float, float]:
    """The default model's paired and per-side spreads, measured on its own draws."""
    metric = draw_runs(Model(), "aa", reps, 4000, np.random.default_rng(0)).metric
    logs = np.log(metric)
    paired = np.log(metric[:, :, 0] / metric[:, :, 1]).std(axis=1, ddof=1)
    side = logs.std(axis=1, ddof=1)  # per attempt and side
    return float(np.sqrt(np.mean(paired**2))), float(np.sqrt(np.mean(side**2)))


@pytest.mark.parametrize(
    ("reps", "median_aa", "paired_aa"),
    [(5, 0.365, 0.010), (10, 0.264, 0.005), (20, 0.221, 0.002)],
)
def test_rates_at_the_default_model_match_calibrates_measured_aa_pass(
    reps: int, median_aa: float, paired_aa: float
) -> None:
    """docs/calibration.md, log-normal noise: the median rule's A/A PASS and student_t's."""
    spread, side = _model_spreads(reps)
    median = chance.median_rate(reps, spread, side, gate_pct=1.0)
    assert median == pytest.approx(median_aa, abs=0.025)  # two runs of 2,000 and 4,000 draws
    (paired,) = chance.paired_rates(
        [reps], spread, gate_pct=1.0, method="student_t", confidence=0.95
    )
    assert paired == pytest.approx(paired_aa, abs=0.004)


def test_pooled_spread_weights_by_degrees_of_freedom() -> None:
    assert chance.pooled([0.1, 0.2, math.nan], [1, 3, 5]) == pytest.approx(
        math.sqrt((0.01 + 3 * 0.04) / 4)
    )
    assert chance.pooled([math.nan], [4]) is None
