"""``round --until-decided``: run pairs in blocks, assess after each block, stop when decided.

A round runs blocks of two repetitions, one baseline-first and one candidate-first (which of the
two is drawn from the order seed: ``order.block_schedule``). From the first planned look on,
after every block the round so far is assessed in memory with the campaign's frozen policy,
exactly as ``assess`` would assess it (``ingestion.attempts.attempt_tables`` then
``assessment.campaigns.assess_tables``), and the round stops:

- ``pass``: the verdict is PASS (with ``require_explanation`` that already needs ``explained``);
- ``max``: the maximum number of repetitions is reached (also when failed runs left fewer pairs
  than repetitions: the round has run all it may);
- ``futility``: PASS is out of reach: ``assessment.sequential.futile`` on the metric's log-ratios
  (none while the metric has no ``sequential_t`` interval: too few pairs, or a vanished candidate
  whose +inf pairs take another method), or, with ``require_explanation``, an explanation that
  cannot become ``explained`` (``unexplainable``). Either only ever stops without PASS, so it
  cannot raise the false-PASS rate.

A campaign that decides regions (contract §15) stops instead on its benchmarks
(``assessment.family.stop_reason``): ``decided`` when every benchmark and the metric is improved,
regressed or unchanged, ``futility`` when none of the undecided ones can be decided by the
maximum; its looks are FAMILY_FIRST_LOOK, then every FAMILY_LOOK_EVERY pairs
(``assessment.stopping``: the plan of looks and which policies may stop early).

Only a campaign that freezes ``decision: paired`` and ``interval: sequential_t`` may do this:
looking after every block at a fixed-n interval and stopping at its first PASS passes far more
often than its nominal rate (``sequential.PEEKING_FALSE_PASS``), and the median rule has no
interval at all. attempt.json carries the plan and the looks (``sequential``), so assess reads
the same schedule and an interrupted round says ``interrupted``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipeline.assessment import sequential
from pipeline.assessment.sequential import Schedule
from pipeline.atomic import dump_json, dump_lines
from pipeline.contract.layout import ATTEMPT_FILE, MEASUREMENTS_FILE, MECHANISM_FILE
from pipeline.contract.policy import with_defaults
from pipeline.errors import ExplainError
from pipeline.ingestion.files import Document

Stopped = Literal["pass", "decided", "futility", "max", "interrupted"]


def sequential_object(plan: Schedule, looks: list[int], stopped: Stopped) -> dict[str, Any]:
    """attempt.json's ``sequential`` object: the plan, the looks taken, why the round stopped."""
    return {
        "first_look": plan.first_look,
        "look_every": plan.look_every,
        "max_pairs": plan.max_pairs,
        "looks": looks,
        "stopped": stopped,
    }


@dataclass(frozen=True)
class Look:
    """What one look found: the pairs, the verdict row, and the reason to stop (None: go on)."""

    pairs: int
    row: dict[str, Any]
    stop: Stopped | None
    why: str | None = None  # a futility stop for the explanation: which one
    members: dict[str, int] | None = None
    """Deciding regions: how many members got each verdict at this look."""


def look(
    plan: Schedule,
    campaign: Document,
    folder: Path,
    attempt: dict[str, Any],
    lines: list[dict[str, Any]],
    mechanism: bytes | None,
    looks: list[int],
    pairs: int,
    repetitions: int,
) -> Look:
    """Assess the round so far (``repetitions`` run, ``pairs`` of them paired; as completed,
    with this look added) and decide."""
    from pipeline.assessment.campaigns import assess_tables
    from pipeline.ingestion.attempts import attempt_tables
    from pipeline.ingestion.folders import AttemptFiles

    document = {
        **attempt,
        "status": "completed",
        "sequential": sequential_object(plan, [*looks, pairs], "max"),
    }
    bodies = {ATTEMPT_FILE: dump_json(document), MEASUREMENTS_FILE: dump_lines(lines)}
    if mechanism is not None:
        bodies[MECHANISM_FILE] = mechanism
    tables, issues = attempt_tables(campaign, AttemptFiles(folder, bodies))
    if issues:  # the recorder wrote these files itself: a bug, not the user's input
        raise ExplainError("\n".join(str(i) for i in issues))
    assessed = assess_tables(tables)
    row = assessed.assessments.row(0, named=True)
    policy = with_defaults(campaign.data["policy"])
    if not assessed.benchmarks.is_empty():  # the campaign decides regions: stop on them all
        return _family_look(plan, policy, pairs, repetitions, row, assessed.benchmarks)
    if row["verdict"] == "PASS":
        return Look(pairs, row, "pass")
    if repetitions >= plan.max_pairs:
        return Look(pairs, row, "max")
    if unexplainable(campaign, row):
        why = f"explanation {row['explanation']}, where require_explanation needs explained"
        return Look(pairs, row, "futility", why)
    if _futile(plan, campaign, row, assessed.comparisons):
        return Look(pairs, row, "futility")
    return Look(pairs, row, None)


UNEXPLAINABLE = ("not_declared", "contradicted")
"""Explanations that more pairs cannot turn into ``explained``: no mechanism was declared (it is
saved before the round starts), or a declared expectation is contradicted. A contradicted
``decrease``/``increase`` would need a later interval of the same quantity on the other side of
1, and two such sequential_t intervals cannot both hold the true ratio: the chance that more
pairs confirm what one look contradicted is at most the interval's error rate. A contradicted
``unchanged`` counter has already moved beyond its interval's noise."""


def unexplainable(campaign: Document, row: dict[str, Any]) -> bool:
    """With ``require_explanation``, whether the round can no longer PASS because of its
    explanation (``UNEXPLAINABLE``)."""
    policy = with_defaults(campaign.data["policy"])
    return bool(policy["require_explanation"]) and row["explanation"] in UNEXPLAINABLE


def _family_look(
    plan: Schedule,
    policy: dict[str, Any],
    pairs: int,
    repetitions: int,
    row: dict[str, Any],
    members: Any,
) -> Look:
    """A look of a round deciding regions: every member decided, or the rest futile, stops."""
    from pipeline.assessment.family import VERDICTS, stop_reason

    counts: dict[str, int] = {v: int((members["verdict"] == v).sum()) for v in VERDICTS}
    stop: Stopped | None = stop_reason(
        members,
        max_pairs=plan.max_pairs,
        gate_pct=float(policy["min_improvement_pct"]),
        margin_pct=float(policy["margin_pct"]),
    )
    if stop is None and repetitions >= plan.max_pairs:
        stop = "max"
    return Look(pairs, row, stop, members=counts)


def _futile(plan: Schedule, campaign: Document, row: dict[str, Any], comparisons: Any) -> bool:
    """``sequential.futile`` on the metric: its mean log-ratio and spread are read back from
    the sequential_t interval assess computed (``ln low = m - c s / sqrt(n)``), so the pairs
    are formed once, by assess."""
    metric = comparisons.filter(comparisons["quantity"] == "metric")
    if metric.is_empty() or metric["method"][0] != sequential.METHOD:
        return False  # no interval yet, or a vanished candidate (not a t interval): go on
    n, estimate = int(metric["n_pairs"][0]), metric["estimate"][0]
    low, high = metric["low"][0], metric["high"][0]
    if not all(math.isfinite(v) and v > 0 for v in (estimate, low, high)):
        return False
    policy = with_defaults(campaign.data["policy"])
    confidence = float(policy["confidence"])
    sd = (math.log(high) - math.log(low)) / 2 * math.sqrt(n) / plan.critical(confidence, n)
    gate = 1 + float(policy["min_improvement_pct"]) / 100
    return sequential.futile(n, math.log(estimate), sd, gate=gate, plan=plan, confidence=confidence)
