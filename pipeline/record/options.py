"""The options of a round, parsed once: how its runs are made, traced and measured, and ab's policy.

``round`` and ``ab`` build one :class:`RunOptions` (cli/record.py's ``run_options``: one click
option per field, of the same name) and Python builds the same object with the same defaults;
both hand it whole to ``record_round`` / ``ab``. A new round option is one field here, one click
option there, and the code in the recorder that uses it. Light on purpose: ``--help`` reads the
defaults from here without loading the recorder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipeline.importers import ImportOptions
from pipeline.record import DEFAULT_TIMEOUT
from pipeline.record.measure import MeasureOptions

__all__ = ["AB_POLICY", "MeasureOptions", "RunOptions", "TraceOptions", "ab_policy"]


@dataclass(frozen=True)
class TraceOptions:
    """``--trace kineto``: each run writes a profiler trace, read as ``import kineto`` reads it
    with ``imports`` (its step and region patterns and renames) applied to every run."""

    format: Literal["kineto"] = "kineto"
    imports: ImportOptions = ImportOptions()


@dataclass(frozen=True)
class RunOptions:
    """How every run of a round is made and measured: what ``round`` and ``ab`` share."""

    repetitions: int = 10
    warmup: int = 1
    mechanism_file: Path | None = None
    order_seed: int | None = None  # None: drawn at random, recorded in attempt.json
    timeout: float | None = DEFAULT_TIMEOUT  # None: no limit
    trace: TraceOptions | None = None
    measure: MeasureOptions = MeasureOptions()
    until_decided: bool = False
    max_repetitions: int | None = None
    """With until_decided, not repetitions; None: SCHEDULE_DEFAULTS' max_pairs, or the first look
    when the campaign's min_pairs is larger (stopping.plan_for)."""


AB_POLICY: dict[str, Any] = {"decision": "paired", "interval": "student_t"}
"""ab's policy where it differs from the contract's defaults, for Python and the command line
alike: the median rule passes identical code too often to gate anything, and student_t is the
interval whose error rate calibration found nearest its nominal 2.5% (docs/calibration.md). Only
ab's throw-away campaign uses it: ``campaign start`` keeps the contract's defaults, so digests
stay as they were."""


def ab_policy(
    given: dict[str, Any] | None, *, until_decided: bool, suite: bool = False
) -> dict[str, Any]:
    """ab's campaign policy: ``given`` over AB_POLICY; with ``until_decided`` and no interval
    given, the interval valid under early stopping; with a ``suite`` (``--measure``) and no
    ``decide`` given, ``decide: regions``, a verdict per benchmark (contract §15): a suite is
    run to learn which benchmark moved, and its sum or geometric mean alone can hide that."""
    from pipeline.assessment.family import DECIDES_REGIONS
    from pipeline.assessment.sequential import METHOD

    defaults = {**AB_POLICY, "interval": METHOD if until_decided else AB_POLICY["interval"]}
    if suite:
        defaults["decide"] = DECIDES_REGIONS
    return {**defaults, **(given or {})}
