"""The interval methods (policy field `interval`) against scipy and a plain loop reference, the
policy digest of campaigns written before the field existed, and what-if equality."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from assess_fixtures import campaign, write_store
from scipy import stats
from test_assess import campaigns_and_attempts
from test_bootstrap import reference_quantile

from pipeline.assessment.campaigns import assess
from pipeline.assessment.intervals import expanded_probability, method_intervals, student_t_bounds
from pipeline.contract.policy import canonical_policy, policy_sha256
from pipeline.errors import UsageError
from pipeline.store.tables import Store

REPO = Path(__file__).resolve().parent.parent


def loop_interval(x: list[float], resamples: int, seed: int, p: float) -> tuple[float, float]:
    """One quantity, one resample at a time, read at probabilities p and 1 - p."""
    n = len(x)
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))
    stats_b = []
    for row in idx:
        picked = [x[i] for i in row]
        stats_b.append(math.inf if math.inf in picked else sum(picked) / n)
    return math.exp(reference_quantile(stats_b, p)), math.exp(reference_quantile(stats_b, 1 - p))


# -- expanded percentile ------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "confidence"), [(5, 0.95), (10, 0.95), (20, 0.9), (7, 0.99)])
def test_expanded_probability_is_the_hesterberg_formula(n: int, confidence: float) -> None:
    alpha = 1 - confidence
    t = stats.t.ppf(alpha / 2, n - 1)
    assert expanded_probability(n, confidence) == stats.norm.cdf(math.sqrt(n / (n - 1)) * t)
    # wider than the percentile interval's alpha / 2, approaching it as n grows
    assert expanded_probability(n, confidence) < alpha / 2
    assert expanded_probability(n, confidence) < expanded_probability(4 * n, confidence)


def test_expanded_probability_at_five_pairs() -> None:
    # sqrt(5/4) * t_4(0.025) = 1.1180 * -2.7764 = -3.1041; Phi(-3.1041) = 0.000954
    assert expanded_probability(5, 0.95) == pytest.approx(0.000954, abs=2e-6)


@pytest.mark.parametrize("n", [5, 6, 12])
def test_expanded_percentile_matches_the_loop_reference(n: int) -> None:
    x = np.random.default_rng(n).normal(0.01, 0.04, size=(n, 3))
    x[2, 2] = np.inf
    got = method_intervals(x, "expanded_percentile", resamples=3000, seed=4, confidence=0.95)
    p = expanded_probability(n, 0.95)
    for j in range(3):
        low, high = loop_interval(list(x[:, j]), 3000, 4, p)
        assert got.low[j] == pytest.approx(low, rel=1e-12)
        assert got.high[j] == (math.inf if math.isinf(high) else pytest.approx(high, rel=1e-12))
    assert list(got.method) == ["expanded_percentile"] * 3


def test_expanded_needs_two_pairs() -> None:
    with pytest.raises(ValueError, match="n >= 2"):
        expanded_probability(1, 0.95)


# -- Student t ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("n", "confidence"), [(5, 0.95), (10, 0.9), (20, 0.95)])
def test_student_t_equals_scipys_one_sample_t_interval(n: int, confidence: float) -> None:
    x = np.random.default_rng(30 + n).normal(0.02, 0.05, size=(n, 4))
    low, high = student_t_bounds(x, confidence)
    for j in range(4):
        ref = stats.ttest_1samp(x[:, j], 0.0).confidence_interval(confidence)
        assert low[j] == pytest.approx(math.exp(ref.low), rel=1e-12)
        assert high[j] == pytest.approx(math.exp(ref.high), rel=1e-12)


def test_student_t_written_out() -> None:
    x = [0.03, -0.01, 0.02, 0.05, 0.00, 0.01]
    n, m = len(x), sum(x) / len(x)
    s = math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1))
    h = stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    got = method_intervals(np.array([x]).T, "student_t", resamples=10, seed=0, confidence=0.95)
    assert got.estimate[0] == pytest.approx(math.exp(m), rel=1e-14)
    assert got.low[0] == pytest.approx(math.exp(m - h), rel=1e-13)
    assert got.high[0] == pytest.approx(math.exp(m + h), rel=1e-13)
    assert got.method[0] == "student_t"


def test_student_t_with_no_spread_is_the_point() -> None:
    got = method_intervals(np.full((5, 1), 0.1), "student_t", resamples=10, seed=0, confidence=0.95)
    assert got.low[0] == got.high[0] == got.estimate[0] == pytest.approx(math.exp(0.1))


def test_student_t_falls_back_to_expanded_for_an_infinite_pair() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(0, 0.05, size=(6, 3))
    x[4, 1] = np.inf
    got = method_intervals(x, "student_t", resamples=2000, seed=1, confidence=0.95)
    assert list(got.method) == ["student_t", "expanded_percentile", "student_t"]
    low, high = loop_interval(list(x[:, 1]), 2000, 1, expanded_probability(6, 0.95))
    assert got.low[1] == pytest.approx(low, rel=1e-12) and got.high[1] == high == math.inf
    assert got.estimate[1] == math.inf
    finite = student_t_bounds(x[:, [0, 2]], 0.95)
    np.testing.assert_array_equal(got.low[[0, 2]], finite[0])


def test_percentile_is_the_bootstrap_unchanged() -> None:
    x = np.random.default_rng(2).normal(0, 0.05, size=(7, 2))
    got = method_intervals(x, "percentile", resamples=1000, seed=2, confidence=0.95)
    for j in range(2):
        low, high = loop_interval(list(x[:, j]), 1000, 2, 0.025)
        assert got.low[j] == pytest.approx(low, rel=1e-12)
        assert got.high[j] == pytest.approx(high, rel=1e-12)


# -- the policy field ---------------------------------------------------------------------------
PRE_V11 = (
    b'{"confidence":0.95,"decision":"median","min_improvement_pct":1.0,"min_pairs":5,'
    b'"require_explanation":false,"resamples":10000,"seed":0}'
)


def test_percentile_is_left_out_of_the_canonical_policy() -> None:
    assert canonical_policy({}) == PRE_V11
    assert canonical_policy({"interval": "percentile"}) == PRE_V11
    assert policy_sha256({"interval": "percentile"}) == hashlib.sha256(PRE_V11).hexdigest()
    other = canonical_policy({"interval": "student_t"})
    assert b'"interval":"student_t"' in other
    assert json.loads(other) == {**json.loads(PRE_V11), "interval": "student_t"}
    assert policy_sha256({"interval": "student_t"}) != policy_sha256({})


def test_the_example_campaigns_written_before_the_field_keep_their_digest() -> None:
    documents = sorted((REPO / "data").rglob("campaign.json"))
    assert documents
    for path in documents:
        doc = json.loads(path.read_text())
        assert "interval" not in doc["policy"]
        assert policy_sha256(doc["policy"]) == doc["policy_sha256"], path


# -- through assess -----------------------------------------------------------------------------
def _store(tmp_path: Path, name: str, interval: str | None) -> Store:
    camps, attempts = campaigns_and_attempts(4)
    if interval is not None:
        camps = [
            {
                **c,
                **campaign(
                    c["campaign_id"],
                    better=c["metric_better"],
                    resamples=c["resamples"],
                    min_improvement_pct=c["min_improvement_pct"],
                    interval=interval,
                ),
            }
            for c in camps
        ]
    s = Store(tmp_path / name)
    write_store(s, camps, attempts)
    return s


@pytest.mark.parametrize("method", ["student_t", "expanded_percentile"])
@pytest.mark.slow
def test_what_if_interval_equals_a_campaign_frozen_with_it(tmp_path: Path, method: str) -> None:
    frozen = assess(_store(tmp_path, "frozen", method), write=False)
    what = assess(_store(tmp_path, "default", None), write=False, what_if={"interval": method})
    assert what.comparisons.equals(frozen.comparisons)
    keep = [c for c in frozen.assessments.columns if c not in ("campaign_sha256",)]
    assert what.assessments.select(keep).equals(frozen.assessments.select(keep))
    due = frozen.comparisons.filter(pl.col("low").is_not_null())
    assert due.height > 0
    assert set(due["method"]) <= {method, "expanded_percentile"}
    assert frozen.comparisons.filter(pl.col("low").is_null())["method"].null_count() == (
        frozen.comparisons.filter(pl.col("low").is_null()).height
    )


def test_default_campaigns_record_the_percentile_method(tmp_path: Path) -> None:
    result = assess(_store(tmp_path, "s", None), write=False)
    due = result.comparisons.filter(pl.col("status") == "ok")
    assert set(due["method"]) == {"percentile"}


def test_bad_interval_what_if(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match="must be one of percentile, expanded_percentile, student_t"
    ):
        assess(_store(tmp_path, "s", None), what_if={"interval": "bca"})


# -- the registry -------------------------------------------------------------------------------
def test_the_registry_is_the_schema_enum() -> None:
    """Adding a method to campaign.schema.json without its registry entry (or the reverse)
    fails here, not later as a Student-t interval under another name."""
    from pipeline.assessment.intervals import METHODS
    from pipeline.contract.declare import choices

    assert tuple(METHODS) == choices("campaign", "policy", "interval")


def test_an_unknown_method_is_refused() -> None:
    from pipeline.assessment.power import critical

    x = np.log(np.array([[1.01], [1.02], [1.03], [0.99], [1.0]]))
    with pytest.raises(ValueError, match=r"unknown interval method 'bca': expected one of"):
        method_intervals(x, "bca", resamples=10, seed=0, confidence=0.95)
    with pytest.raises(ValueError, match=r"unknown interval method 'bca'"):
        critical(np.array([5.0]), "bca", 0.95)


def test_only_sequential_t_is_valid_under_early_stopping() -> None:
    from pipeline.assessment import sequential
    from pipeline.assessment.intervals import METHODS

    assert [m.name for m in METHODS.values() if m.sequential] == ["sequential_t"]
    assert sequential.METHOD == "sequential_t"
    assert set(sequential.FIXED_N) == set(METHODS) - {"sequential_t"}
    assert set(sequential.PEEKING_FALSE_PASS) == set(sequential.FIXED_N)


@pytest.mark.parametrize("n", [5, 12, 40])
def test_the_critical_values_a_fixed_round_must_reach(n: int) -> None:
    """study.plan's k(n) per method: the percentile bootstrap's divisor-n z interval, the t
    quantile for the others (at one look sequential_t is student_t)."""
    from pipeline.assessment.intervals import METHODS

    z = stats.norm.ppf(0.975) * math.sqrt((n - 1) / n)
    t = stats.t.ppf(0.975, n - 1)
    expected = {"percentile": z, "expanded_percentile": t, "student_t": t, "sequential_t": t}
    got = {name: float(m.critical(np.array([float(n)]), 0.95)[0]) for name, m in METHODS.items()}
    assert got == pytest.approx(expected, rel=1e-12)


def test_finite_only_methods_fall_back_to_expanded_percentile() -> None:
    """A quantity with a +inf pair under student_t or sequential_t is labelled with the method
    it got; percentile and expanded_percentile bootstrap it themselves."""
    from pipeline.assessment.intervals import FALLBACK, METHODS

    x = np.log(np.array([[1.01, 1.0], [1.02, 1.1], [1.03, 1.2], [0.99, 1.1], [1.0, 1.05]]))
    x[2, 1] = math.inf
    for name, entry in METHODS.items():
        got = method_intervals(x, name, resamples=200, seed=0, confidence=0.95, critical=3.0)
        assert list(got.method) == [name, FALLBACK if entry.finite_only else name]
