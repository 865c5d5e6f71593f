"""The order effect against scipy's Welch interval and a plain loop, and at its edges (every
reason, no spread, failed and unpaired runs)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from assess_fixtures import Attempt, campaign, inputs, run
from scipy import stats

from pipeline.assessment import quantities
from pipeline.assessment.order_effect import order_effects


def attempt(aid: str, xs: list[float], baseline_first: list[bool], **extra: Any) -> Attempt:
    """Pairs with metric log-ratio x (baseline e^x, candidate 1) and the recorded order."""
    runs = []
    for rep, (x, first) in enumerate(zip(xs, baseline_first, strict=True)):
        runs.append({**run("baseline", rep, math.exp(x)), "order": 0 if first else 1})
        runs.append({**run("candidate", rep, 1.0), "order": 1 if first else 0})
    return Attempt("c", aid, int(aid[1:]), runs, **extra)


def computed(attempts: list[Attempt], **policy: Any) -> dict[str, dict[str, Any]]:
    data = inputs([campaign("c", resamples=50, **policy)], attempts)
    frame = order_effects(data.attempts, data.samples, quantities.pair_frames(data), data.campaigns)
    assert frame.columns == [
        "campaign_id",
        "attempt_id",
        "order_effect",
        "order_effect_low",
        "order_effect_high",
        "order_bias",
        "order_effect_reason",
    ]
    return {r["attempt_id"]: r for r in frame.iter_rows(named=True)}


def welch_loop(xb: list[float], xc: list[float], confidence: float) -> tuple[float, float, float]:
    def mean(v: list[float]) -> float:
        return sum(v) / len(v)

    def var(v: list[float]) -> float:
        m = mean(v)
        return sum((a - m) ** 2 for a in v) / (len(v) - 1)

    vb, vc = var(xb) / len(xb), var(xc) / len(xc)
    se = math.sqrt(vb + vc)
    df = se**4 / (vb**2 / (len(xb) - 1) + vc**2 / (len(xc) - 1))
    h = stats.t.ppf(1 - (1 - confidence) / 2, df) * se
    d = mean(xb) - mean(xc)
    return math.exp(d), math.exp(d - h), math.exp(d + h)


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_matches_scipy_welch_and_the_loop(confidence: float) -> None:
    rng = np.random.default_rng(3)
    xs = list(rng.normal(0.0, 0.03, 11))
    first = [True, False, True, True, False, False, True, False, True, False, True]
    got = computed([attempt("r1", xs, first)], confidence=confidence)["r1"]
    xb = [x for x, f in zip(xs, first, strict=True) if f]
    xc = [x for x, f in zip(xs, first, strict=True) if not f]
    est, low, high = welch_loop(xb, xc, confidence)
    ci = stats.ttest_ind(xb, xc, equal_var=False).confidence_interval(confidence)
    assert got["order_effect"] == pytest.approx(est, rel=1e-12)
    assert got["order_effect_low"] == pytest.approx(low, rel=1e-10)
    assert got["order_effect_low"] == pytest.approx(math.exp(ci.low), rel=1e-10)
    assert got["order_effect_high"] == pytest.approx(math.exp(ci.high), rel=1e-10)
    assert got["order_bias"] == (low > 1 or high < 1)
    assert got["order_effect_reason"] is None


def test_a_position_effect_is_flagged() -> None:
    # the second run 3% slower: x = -ln 1.03 when the baseline ran first, +ln 1.03 otherwise
    rng = np.random.default_rng(1)
    first = [bool(i % 2) for i in range(20)]
    xs = [
        (-1 if f else 1) * math.log(1.03) + e
        for f, e in zip(first, rng.normal(0, 0.01, 20), strict=True)
    ]
    got = computed([attempt("r1", xs, first)])["r1"]
    assert got["order_bias"] is True
    assert got["order_effect"] == pytest.approx(1 / 1.03**2, rel=0.01)


def test_no_spread_gives_a_point_interval() -> None:
    got = computed([attempt("r1", [0.1, 0.1, 0.0, 0.0], [True, True, False, False])])["r1"]
    assert got["order_effect"] == got["order_effect_low"] == got["order_effect_high"]
    assert got["order_effect"] == pytest.approx(math.exp(0.1))
    assert got["order_bias"] is True


def test_reasons() -> None:
    unordered = attempt("r3", [0.1, 0.0, 0.2, 0.1], [True, False, True, False])
    del unordered.runs[5]["order"]
    zero = attempt("r5", [0.1, 0.0, 0.2, 0.1], [True, False, True, False])
    zero.runs[0]["metric"] = 0.0  # a zero baseline: the metric has no log-ratio
    got = computed(
        [
            Attempt("c", "r1", 1, []),  # no run at all
            attempt("r2", [], []),
            unordered,
            attempt("r4", [0.1, 0.0, 0.2, 0.1], [True, True, True, False]),
            zero,
            attempt("r6", [0.1, 0.0, 0.2], [True, False, True]),
        ]
    )
    reasons = {k: v["order_effect_reason"] for k, v in got.items()}
    assert reasons == {
        "r1": "not_applicable",
        "r2": "not_applicable",
        "r3": "no_order",
        "r4": "too_few_per_order",
        "r5": "not_applicable",
        "r6": "too_few_per_order",
    }
    for row in got.values():
        assert row["order_effect"] is None and row["order_bias"] is None


def test_failed_and_unpaired_runs_are_left_out() -> None:
    a = attempt("r1", [0.1, 0.0, 0.2, 0.1, 0.05], [True, False, True, False, True])
    a.runs[8] = {**run("baseline", 4, None, status="failed"), "order": 0}
    a.runs.append({**run("baseline", 7, 2.0)})  # unpaired, no order: does not matter
    got = computed([a])["r1"]
    est, low, high = welch_loop([0.1, 0.2], [0.0, 0.1], 0.95)
    assert got["order_effect_low"] == pytest.approx(low, rel=1e-10)
    assert got["order_effect_high"] == pytest.approx(high, rel=1e-10)
