"""Numbers are written by one function for the CLI and the report, each with its own marks."""

from __future__ import annotations

import math

import pytest

from pipeline.output.numbers import HTML, TEXT, fmt_number, fmt_paired


@pytest.mark.parametrize(
    ("value", "text", "page"),
    [
        (None, "-", "—"),
        (math.nan, "-", "—"),
        (math.inf, "inf", "∞"),
        (-math.inf, "-inf", "−∞"),
        (1.23456, "1.2346", "1.2346"),
    ],
)
def test_marks_per_medium(value: float | None, text: str, page: str) -> None:
    assert (fmt_number(value), fmt_number(value, marks=HTML)) == (text, page)


def test_paired_estimate_with_and_without_interval() -> None:
    assert fmt_paired(1.5, 1.25, math.inf) == "1.5000 [1.2500, inf]"
    assert fmt_paired(1.5, 1.25, math.inf, HTML) == "1.5000 [1.2500, ∞]"
    assert fmt_paired(1.5, None, None) == "1.5000"  # too few pairs: no interval
    assert fmt_paired(None, None, None) is None
    assert TEXT.none != HTML.none
