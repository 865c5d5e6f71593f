"""The report speaks to people: reason codes in words (the code kept in a tooltip and in the table
of every column), times to the second."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from pipeline.report.pages import cell, timestamp_html
from pipeline.report.words import REASON_WORDS, reason_html

CONTRACT = Path(__file__).resolve().parent.parent / "docs" / "contract.md"


def contract_reason_codes() -> set[str]:
    """Every code of the contract's "Every reason code" table, except the integrity codes (the
    report shows their messages) and the input-validation codes (ingest's)."""
    text = CONTRACT.read_text(encoding="utf-8")
    section = text[text.index("## 13. Every reason code") :]
    codes = set()
    for line in section.splitlines()[3:]:
        if not line.startswith("|"):
            break
        where, listed = line.split("|")[1:3]
        if "integrity" in where or "input validation" in where:
            continue
        codes |= set(re.findall(r"`([a-z_]+)`", listed))
    return codes


def test_every_reason_code_of_the_contract_has_words() -> None:
    codes = contract_reason_codes()
    assert {"not_improved", "within_noise", "total_unchanged", "no_order"} <= codes  # parsed
    assert sorted(codes - set(REASON_WORDS)) == []


def test_words_keep_the_code_in_a_tooltip() -> None:
    assert reason_html("not_improved") == (
        '<span class="reason" title="reason code: not_improved">the median did not improve</span>'
    )
    assert reason_html(None) == '<span class="null">—</span>'
    # a code without words (a newer assess) is shown as it is, never hidden
    assert ">some_new_code</span>" in reason_html("some_new_code")
    assert cell("below_gate", "reason") == f"<td>{reason_html('below_gate')}</td>"
    assert cell("below_gate", "median_reason") == "<td>below_gate</td>"  # the table of codes


@pytest.mark.parametrize(
    ("moment", "shown"),
    [
        (datetime(2026, 11, 30, 12, 35, 33, 93130, tzinfo=UTC), "2026-11-30 12:35:33 UTC"),
        (
            datetime(2026, 11, 30, 13, 35, 33, 999999, tzinfo=timezone(timedelta(hours=1))),
            "2026-11-30 12:35:33 UTC",
        ),
    ],
)
def test_times_are_shown_to_the_second_in_utc_on_one_line(moment: datetime, shown: str) -> None:
    day, time = shown.split(" ", 1)
    assert timestamp_html(moment) == (
        f'<span class="nowrap">{day}</span> <span class="nowrap">{time}</span>'
    )
