"""Reason codes and interval methods in words, for people reading the report.

The codes (contract §13) stay what the tables store and what scripts match on; the report shows
these words instead and keeps the code in a tooltip (and in the "every column" table of the
verdicts). A code without words here is shown as it is, so a new code is never hidden.
"""

from __future__ import annotations

from pipeline.report.style import esc

REASON_WORDS: dict[str, str] = {
    # comparisons.reason, outcomes.reason
    "too_few_pairs": "too few pairs for an interval",
    "zero_baseline": "the baseline value is 0 (no ratio)",
    "zero_candidate": "the candidate value is 0",
    "not_finite": "a value or the ratio is out of the floating-point range",
    "no_reference_time": "no step with reference time",
    "zero_share": "the reference share is 0",
    "not_observed": "never measured in this attempt",
    "never_appears": "never measured in this attempt",
    # the verdict rules
    "not_improved": "the median did not improve",
    "below_gate": "the improvement is below the gate",
    "no_samples": "a side has no ok run",
    "attempt_failed": "the round failed",
    "attempt_aborted": "the round was interrupted",
    "attempt_completed": "the round completed",
    "regressed": "the candidate is measurably worse",
    "within_noise": "the interval does not clear the gate",
    "explanation_unsupported": "the declared mechanism is not shown by the data",
    "explanation_contradicted": "the data contradict the declared mechanism",
    "explanation_unverifiable": "the declared mechanism cannot be checked",
    "explanation_not_declared": "no mechanism was declared",
    # report-only diagnostics
    "not_applicable": "not applicable",
    "all_regions_declared": "every measured region is declared to change: the fraction would be 1 "
    "by construction",
    "total_unchanged": "the total saving is within the noise",
    "no_order": "the run order was not recorded",
    "too_few_per_order": "too few pairs for each run order",
}


def reason_words(code: str) -> str:
    return REASON_WORDS.get(code, code)


def reason_html(code: str | None) -> str:
    """The words, with the code in a tooltip; an em dash for no reason."""
    if not code:
        return '<span class="null">—</span>'
    return f'<span class="reason" title="reason code: {esc(code)}">{esc(reason_words(code))}</span>'


INTERVAL_WORDS: dict[str, str] = {
    # what each interval method is and how it covered in calibrate's study (docs/calibration.md:
    # 2,000 A/A attempts per cell, log-normal, Student-t(3) and outlier noise, nominal 95%)
    "percentile": "paired percentile bootstrap intervals, which cover less than their nominal "
    "confidence at few pairs (82–92% at 5–20 pairs for a nominal 95% in simulation)",
    "expanded_percentile": "paired expanded-percentile bootstrap intervals, which covered "
    "91.5–95% at 5–20 pairs for a nominal 95% in simulation",
    "student_t": "paired Student-t intervals of the log-ratios, which covered 94.5–97% at 5–20 "
    "pairs for a nominal 95% in every noise model simulated (a quantity with a +∞ pair uses "
    "the expanded percentile)",
    "sequential_t": "paired group-sequential Student-t intervals, valid at the look where a "
    "round --until-decided stopped, which covered 96.5–99.5% there for a nominal 95% in "
    "simulation (a quantity with a +∞ pair uses the expanded percentile)",
}
"""The report's footer names the campaign's frozen interval method with these words; a method
without words is named as it is."""


def interval_words(method: str | None) -> str:
    """The footer's sentence on the intervals: the campaign's method (None: the index page,
    whose campaigns may differ)."""
    if method is None:
        return (
            "Intervals are paired intervals of each campaign's frozen method, named on its page; "
            "their coverage depends on the method (docs/calibration.md)"
        )
    return f"Intervals are {INTERVAL_WORDS.get(method, esc(method) + ' intervals')}"
