"""How a number is written for people, in one place for the CLI tables and the HTML report.

Each medium has its own marks for "no value" and infinity: the terminal tables stay ASCII (`-`,
`inf`, easy to grep and to paste into a spreadsheet), the report uses typographic ones (`—`,
`∞`). The rule is the same for both: null and NaN are "no value", ±infinity is written as such
(a quantity that vanished has ratio +∞), anything else with the given format spec.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Marks:
    none: str
    inf: str
    neg_inf: str


TEXT = Marks("-", "inf", "-inf")
HTML = Marks("—", "∞", "−∞")


def fmt_number(value: float | None, spec: str = ".4f", marks: Marks = TEXT) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return marks.none
    if math.isinf(value):
        return marks.inf if value > 0 else marks.neg_inf
    return format(value, spec)


SUMMARY: tuple[tuple[str, str], ...] = (
    ("round", "round"),
    ("attempt_id", "attempt"),
    ("candidate", "candidate"),
    ("n_pairs", "pairs"),
    ("improvement_pct", "median %"),
    ("paired", "paired [low, high]"),
    ("share_speedup", "share"),
    ("explanation", "explanation"),
    ("verdict", "verdict"),
    ("eligible", "eligible"),
    ("best", "best"),
)
"""The per-attempt summary, as (column, header): what `assess` prints and the report's verdict
table shows (`paired` is the paired estimate with its interval; the verdict carries its reason)."""


def fmt_paired(
    estimate: float | None, low: float | None, high: float | None, marks: Marks = TEXT
) -> str | None:
    """The paired estimate with its interval, ``1.0867 [1.0699, 1.1013]``; None without one."""
    if estimate is None:
        return None
    interval = f" [{fmt_number(low, marks=marks)}, {fmt_number(high, marks=marks)}]"
    return fmt_number(estimate, marks=marks) + (interval if low is not None else "")
