"""contract §5: every row of the evidence table and every step of the explanation order."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from pipeline.assessment.explain import explanations, outcomes
from pipeline.contract.schemas import table

A = {"campaign_id": "c", "attempt_id": "a"}


def _exps(*rows: tuple[str, str, str]) -> pl.LazyFrame:
    data = [
        {**A, "position": i, "target": t, "name": n, "expect": e}
        for i, (t, n, e) in enumerate(rows)
    ]
    return pl.DataFrame(data, schema=table("expectations").polars_schema()).lazy()


def _comps(*rows: tuple[str, str, str | None, str | None]) -> pl.LazyFrame:
    """(quantity, name, direction, reason); a reason makes the comparison unverifiable."""
    data = [
        {
            **A,
            "quantity": q,
            "name": n,
            "n_pairs": 6,
            "estimate": 1.0,
            "low": 1.0,
            "high": 1.0,
            "direction": None if r else d,
            "status": "unverifiable" if r else "ok",
            "reason": r,
        }
        for q, n, d, r in rows
    ]
    return pl.DataFrame(data, schema=table("comparisons").polars_schema()).lazy()


def _outcome(exps: pl.LazyFrame, comps: pl.LazyFrame) -> list[dict[str, Any]]:
    return outcomes(exps, comps).collect().to_dicts()


# Evidence with reference regions: region_normalized. The reference region `ref` is declared too.
REGION_CASES = [
    ("decrease", "decrease", None, "confirmed", None),
    ("decrease", "increase", None, "contradicted", None),
    ("decrease", "none", None, "unsupported", None),
    ("decrease", None, "zero_baseline", "unverifiable", "zero_baseline"),
    ("increase", "increase", None, "confirmed", None),
    ("increase", "decrease", None, "contradicted", None),
    ("increase", "none", None, "unsupported", None),
    ("increase", None, "too_few_pairs", "unverifiable", "too_few_pairs"),
]


@pytest.mark.parametrize(("expect", "direction", "reason", "outcome", "why"), REGION_CASES)
def test_region_with_reference_reads_normalized(
    expect: str, direction: str | None, reason: str | None, outcome: str, why: str | None
) -> None:
    exps = _exps(("region", "attn", expect), ("region", "ref", "unchanged"))
    # the raw comparison says the opposite on purpose: it must not be read
    raw = {"decrease": "increase", "increase": "decrease", "none": "decrease", None: "none"}
    comps = _comps(
        ("region_normalized", "attn", direction, reason),
        ("region", "attn", raw[direction], None),
        ("region", "ref", "none", None),
    )
    row = _outcome(exps, comps)[0]
    assert (row["evidence"], row["outcome"], row["reason"]) == ("region_normalized", outcome, why)
    assert row["direction"] == direction


@pytest.mark.parametrize(("expect", "direction", "reason", "outcome", "why"), REGION_CASES)
def test_region_without_reference_reads_raw(
    expect: str, direction: str | None, reason: str | None, outcome: str, why: str | None
) -> None:
    row = _outcome(
        _exps(("region", "attn", expect)), _comps(("region", "attn", direction, reason))
    )[0]
    assert (row["evidence"], row["outcome"], row["reason"]) == ("region", outcome, why)


@pytest.mark.parametrize(("expect", "direction", "reason", "outcome", "why"), REGION_CASES)
def test_counter_increase_decrease(
    expect: str, direction: str | None, reason: str | None, outcome: str, why: str | None
) -> None:
    exps = _exps(("counter", "k", expect), ("region", "ref", "unchanged"))
    comps = _comps(("counter", "k", direction, reason), ("region", "ref", "none", None))
    row = _outcome(exps, comps)[0]
    assert (row["evidence"], row["outcome"], row["reason"]) == ("counter", outcome, why)


@pytest.mark.parametrize(
    ("direction", "reason", "outcome"),
    [
        ("decrease", None, "contradicted"),
        ("increase", None, "contradicted"),
        ("none", None, "consistent"),
        (None, "zero_baseline", "unverifiable"),
    ],
)
def test_counter_unchanged(direction: str | None, reason: str | None, outcome: str) -> None:
    row = _outcome(
        _exps(("counter", "k", "unchanged")), _comps(("counter", "k", direction, reason))
    )[0]
    assert row["outcome"] == outcome and row["evidence"] == "counter"


@pytest.mark.parametrize(
    ("direction", "reason"),
    [
        ("decrease", None),
        ("increase", None),
        ("none", None),
        (None, "zero_baseline"),
    ],
)
def test_reference_region_is_assumed_never_judged(
    direction: str | None, reason: str | None
) -> None:
    rows = _outcome(
        _exps(("region", "ref", "unchanged")), _comps(("region", "ref", direction, reason))
    )
    assert rows[0]["outcome"] == "assumed" and rows[0]["evidence"] == "region"
    assert rows[0]["direction"] == direction


@pytest.mark.parametrize(
    ("target", "expect"),
    [
        ("region", "decrease"),
        ("region", "unchanged"),
        ("counter", "increase"),
        ("counter", "unchanged"),
    ],
)
def test_never_appearing_is_unverifiable(target: str, expect: str) -> None:
    rows = _outcome(_exps((target, "ghost", expect)), _comps(("region", "other", "none", None)))
    assert (rows[0]["outcome"], rows[0]["reason"]) == ("unverifiable", "not_observed")


def _explain(rows: list[tuple[str, str, str]], comps: list[tuple]) -> tuple[str, list[str]]:
    attempts = pl.LazyFrame({"campaign_id": ["c"], "attempt_id": ["a"]})
    outs = outcomes(_exps(*rows), _comps(*comps)).collect()
    got = explanations(attempts, outs.lazy()).collect()["explanation"][0]
    return got, outs["outcome"].to_list()


def test_not_declared_without_mechanism() -> None:
    assert _explain([], [("metric", "m", "improved", None)]) == ("not_declared", [])


def test_partly_contradicted_partly_confirmed() -> None:
    got, each = _explain(
        [("region", "attn", "decrease"), ("counter", "k", "decrease")],
        [("region", "attn", "decrease", None), ("counter", "k", "increase", None)],
    )
    assert got == "contradicted" and each == ["confirmed", "contradicted"]


@pytest.mark.parametrize(
    ("outcome_dirs", "expected"),
    [
        # (direction of attn, k, j); expected: attn decrease, k decrease, j unchanged (counter)
        (("increase", "none", "none"), "contradicted"),  # beats unsupported
        (("decrease", "none", "decrease"), "contradicted"),  # counter unchanged moved
        (("decrease", "none", None), "unsupported"),  # beats unverifiable
        (("decrease", "decrease", None), "unverifiable"),  # beats explained
        (("decrease", "decrease", "none"), "explained"),
    ],
)
def test_first_match_order(outcome_dirs: tuple, expected: str) -> None:
    attn, k, j = outcome_dirs
    got, _ = _explain(
        [
            ("region", "attn", "decrease"),
            ("counter", "k", "decrease"),
            ("counter", "j", "unchanged"),
            ("region", "ref", "unchanged"),
        ],
        [
            ("region_normalized", "attn", attn, None),
            ("counter", "k", k, None),
            ("counter", "j", j, None if j else "zero_baseline"),
            ("region", "ref", "increase", None),
        ],
    )
    assert got == expected


def test_outcomes_keep_mechanism_positions() -> None:
    exps = _exps(
        ("counter", "k", "decrease"), ("region", "attn", "increase"), ("region", "r", "unchanged")
    )
    comps = _comps(("counter", "k", "decrease", None), ("region", "attn", "none", None))
    rows = _outcome(exps, comps)
    assert [(r["position"], r["name"]) for r in rows] == [(0, "k"), (1, "attn"), (2, "r")]
