"""contract §6 verdict rules on hand-made per-attempt facts."""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl
import pytest

from pipeline.assessment.verdicts import median_facts, verdicts

SCHEMA = {
    "campaign_id": pl.String,
    "attempt_id": pl.String,
    "round": pl.Int64,
    "status": pl.String,
    "kind": pl.String,
    "improvement_pct": pl.Float64,
    "median_problem": pl.String,
    "paired_estimate": pl.Float64,
    "paired_low": pl.Float64,
    "paired_high": pl.Float64,
    "metric_status": pl.String,
    "metric_reason": pl.String,
    "explanation": pl.String,
    "decision": pl.String,
    "require_explanation": pl.Boolean,
    "min_improvement_pct": pl.Float64,
}


def fact(**kw: Any) -> dict[str, Any]:
    row = {
        "campaign_id": "c",
        "attempt_id": "a",
        "round": 1,
        "status": "completed",
        "kind": "round",
        "improvement_pct": 5.0,
        "median_problem": None,
        "paired_estimate": 1.05,
        "paired_low": 1.03,
        "paired_high": 1.07,
        "metric_status": "ok",
        "metric_reason": None,
        "explanation": "explained",
        "decision": "median",
        "require_explanation": False,
        "min_improvement_pct": 1.0,
    }
    row.update(kw)
    return row


def judge(*rows: dict[str, Any]) -> list[dict[str, Any]]:
    frame = pl.DataFrame(list(rows), schema=SCHEMA).lazy()
    return verdicts(frame).sort("round", "attempt_id").collect().to_dicts()


@pytest.mark.parametrize(
    ("pct", "gate", "verdict", "reason"),
    [
        (2.0, 1.0, "PASS", None),
        (1.0, 1.0, "PASS", None),
        (0.5, 1.0, "FAIL", "below_gate"),
        (0.0, 0.0, "FAIL", "not_improved"),
        (-3.0, 1.0, "FAIL", "not_improved"),
        (0.01, 0.0, "PASS", None),
        (0.5, -1.0, "PASS", None),
        (-0.5, -1.0, "FAIL", "not_improved"),
    ],
)
def test_median_rule(pct: float, gate: float, verdict: str, reason: str | None) -> None:
    row = judge(fact(improvement_pct=pct, min_improvement_pct=gate))[0]
    assert (row["median_verdict"], row["median_reason"]) == (verdict, reason)
    assert (row["verdict"], row["reason"]) == (verdict, reason)
    assert row["statistical_significance"] == "not_established"


@pytest.mark.parametrize("problem", ["no_samples", "zero_baseline"])
def test_median_rule_inconclusive(problem: str) -> None:
    row = judge(fact(improvement_pct=None, median_problem=problem))[0]
    assert (row["median_verdict"], row["median_reason"]) == ("INCONCLUSIVE", problem)


@pytest.mark.parametrize(
    ("better", "b", "c", "pct"),
    [
        ("lower", 2.0, 1.5, 25.0),
        ("higher", 2.0, 2.5, 25.0),
        ("lower", 2.0, 2.5, -25.0),
    ],
)
def test_improvement_pct(better: str, b: float, c: float, pct: float) -> None:
    frame = pl.LazyFrame({"med_b": [b, None, 0.0], "med_c": [c, 1.0, 1.0], "better": better})
    rows = median_facts(frame, pl.col("better")).collect().to_dicts()
    assert rows[0]["improvement_pct"] == pytest.approx(pct, rel=1e-15)
    assert rows[0]["median_problem"] is None
    assert [(r["median_problem"], r["improvement_pct"]) for r in rows[1:]] == [
        ("no_samples", None),
        ("zero_baseline", None),
    ]


@pytest.mark.parametrize(
    ("est", "low", "high", "gate", "verdict", "reason"),
    [
        (1.05, 1.02, 1.08, 1.0, "PASS", None),
        (1.02, 1.01, 1.03, 1.0, "PASS", None),  # low == gate
        (1.00, 1.02, 1.03, 1.0, "PASS", None),  # estimate below gate: the interval decides
        (1.01, 1.005, 1.02, 1.0, "FAIL", "within_noise"),  # low > 1 but below the gate
        (1.005, 1.002, 1.008, 1.0, "FAIL", "below_gate"),
        (1.00, 0.99, 1.005, 1.0, "FAIL", "below_gate"),
        (1.00, 0.99, 1.02, 1.0, "FAIL", "within_noise"),
        (0.97, 0.95, 0.99, 1.0, "FAIL", "regressed"),
        (1.01, 1.0, 1.02, 0.0, "FAIL", "within_noise"),  # low must be > 1, not >= 1
        (1.01, 1.0000001, 1.02, 0.0, "PASS", None),
        (0.99, 0.98, 0.999, 0.0, "FAIL", "regressed"),
    ],
)
def test_paired_rule(
    est: float, low: float, high: float, gate: float, verdict: str, reason: str | None
) -> None:
    row = judge(
        fact(
            decision="paired",
            paired_estimate=est,
            paired_low=low,
            paired_high=high,
            min_improvement_pct=gate,
        )
    )[0]
    assert (row["paired_verdict"], row["paired_reason"]) == (verdict, reason)
    assert (row["verdict"], row["reason"]) == (verdict, reason)
    assert row["statistical_significance"] == "paired_interval"


@pytest.mark.parametrize("why", ["too_few_pairs", "zero_baseline"])
def test_paired_rule_inconclusive(why: str) -> None:
    row = judge(
        fact(
            decision="paired",
            paired_low=None,
            paired_high=None,
            metric_status="unverifiable",
            metric_reason=why,
        )
    )[0]
    assert (row["verdict"], row["reason"]) == ("INCONCLUSIVE", why)


# decided verdict -> facts that produce it under each decision
DECIDED: dict[str, dict[str, Any]] = {
    "PASS": {"improvement_pct": 5.0, "paired_low": 1.03, "paired_high": 1.07},
    "FAIL": {"improvement_pct": -5.0, "paired_low": 0.9, "paired_high": 0.95},
    "INCONCLUSIVE": {
        "improvement_pct": None,
        "median_problem": "no_samples",
        "metric_status": "unverifiable",
        "metric_reason": "too_few_pairs",
        "paired_low": None,
        "paired_high": None,
    },
}
GATE = {
    "explained": ("PASS", None),
    "unsupported": ("FAIL", "explanation_unsupported"),
    "contradicted": ("FAIL", "explanation_contradicted"),
    "unverifiable": ("INCONCLUSIVE", "explanation_unverifiable"),
    "not_declared": ("INCONCLUSIVE", "explanation_not_declared"),
}


@pytest.mark.parametrize(
    ("decision", "decided", "explanation"),
    list(itertools.product(["median", "paired"], DECIDED, GATE)),
)
def test_explanation_gate_only_rewrites_pass(decision: str, decided: str, explanation: str) -> None:
    base = fact(decision=decision, explanation=explanation, **DECIDED[decided])
    off = judge({**base, "require_explanation": False})[0]
    on = judge({**base, "require_explanation": True})[0]
    assert off["verdict"] == decided  # the decision comes first, whatever the explanation
    if decided == "PASS":
        assert (on["verdict"], on["reason"]) == GATE[explanation]
    else:
        assert (on["verdict"], on["reason"]) == (off["verdict"], off["reason"])
    assert on["eligible"] == (on["verdict"] == "PASS")


@pytest.mark.parametrize("status", ["failed", "aborted"])
@pytest.mark.parametrize("decision", ["median", "paired"])
def test_attempt_not_completed_is_inconclusive(status: str, decision: str) -> None:
    row = judge(fact(status=status, decision=decision, require_explanation=True))[0]
    reason = f"attempt_{status}"
    assert (row["verdict"], row["reason"]) == ("INCONCLUSIVE", reason)
    assert row["median_reason"] == row["paired_reason"] == reason
    assert not row["eligible"] and not row["best"]


def test_best_is_largest_improvement_ties_to_lowest_round() -> None:
    rows = judge(
        fact(attempt_id="r3", round=3, improvement_pct=4.0),
        fact(attempt_id="r2", round=2, improvement_pct=4.0),
        fact(attempt_id="r1", round=1, improvement_pct=2.0),
        fact(attempt_id="r9", round=9, improvement_pct=9.0, status="failed"),  # not eligible
    )
    assert [(r["attempt_id"], r["eligible"], r["best"]) for r in rows] == [
        ("r1", True, False),
        ("r2", True, True),
        ("r3", True, False),
        ("r9", False, False),
    ]


def test_best_under_paired_uses_the_estimate() -> None:
    rows = judge(
        fact(
            attempt_id="r1", round=1, decision="paired", improvement_pct=9.0, paired_estimate=1.04
        ),
        fact(
            attempt_id="r2", round=2, decision="paired", improvement_pct=1.0, paired_estimate=1.06
        ),
    )
    assert [r["best"] for r in rows] == [False, True]


def test_best_per_campaign_and_none_without_eligible() -> None:
    rows = judge(
        fact(campaign_id="x", attempt_id="r1", improvement_pct=3.0),
        fact(campaign_id="y", attempt_id="r1", improvement_pct=-3.0),
    )
    assert {(r["campaign_id"], r["best"]) for r in rows} == {("x", True), ("y", False)}


def test_a_confirmation_round_is_never_eligible_nor_best() -> None:
    """Its own verdict stands (PASS here), but it is not a candidate of the search: the round
    it confirms stays best although the confirmation's estimate is larger."""
    rows = judge(
        fact(attempt_id="r1", round=1, improvement_pct=5.0),
        fact(attempt_id="r2", round=2, improvement_pct=9.0, kind="confirmation"),
    )
    assert [(r["verdict"], r["eligible"], r["best"]) for r in rows] == [
        ("PASS", True, True),
        ("PASS", False, False),
    ]
