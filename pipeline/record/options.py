"""The options of a round, parsed once: how its runs are made, traced and measured, and ab's policy.

``ROUND_OPTIONS`` is the one table of the options ``round``, ``ab`` and ``campaign final
--confirm`` share: each entry is a keyword of :func:`build_run_options` (a field of RunOptions,
of its trace or of its measure), its flags, its help and what it accepts. cli/record.py makes
every click option from an entry (types, ranges, defaults and help come from it); Python builds
the same RunOptions by keyword with the same defaults, and RunOptions and MeasureOptions check
their values themselves, so a Python caller is refused what the command line is. A new round
option is one entry here, one field, and the code in the recorder that uses it. Light on
purpose: ``--help`` reads this table without loading the recorder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipeline.contract.declare import SCHEDULE_DEFAULTS, Bounds, bounds
from pipeline.errors import UsageError
from pipeline.importers.reader import ImportOptions
from pipeline.importers.registry import SUITE_FORMATS, SUITE_METRICS
from pipeline.record import DEFAULT_TIMEOUT
from pipeline.record.measure import COUNTER_SETS, METRIC_SOURCES, MeasureOptions

__all__ = [
    "AB_POLICY",
    "ROUND_OPTIONS",
    "MeasureOptions",
    "RoundOption",
    "RunOptions",
    "TraceOptions",
    "ab_policy",
    "build_run_options",
]

DEFAULT_REPETITIONS = 10
"""Repetitions of a fixed round when -n is not given."""
REPETITIONS = Bounds(1, 100_000, False, False, True)
WARMUP = Bounds(0, 1000, False, False, True)
TIMEOUT = Bounds(0, None, False, False, False)
ORDER_SEED = bounds("attempt", "order_seed")
MAX_REPETITIONS = bounds("attempt", "sequential", "max_pairs")


def _check(flag: str, limits: Bounds, value: float | None) -> None:
    problem = None if value is None else limits.problem(value)
    if problem is not None:
        raise UsageError(f"{flag} {problem}, got {value}")


@dataclass(frozen=True, kw_only=True)
class TraceOptions:
    """``--trace kineto``: each run writes a profiler trace, read as ``import kineto`` reads it
    with ``imports`` (its step and region patterns and renames) applied to every run."""

    format: Literal["kineto"] = "kineto"
    imports: ImportOptions = ImportOptions()


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How every run of a round is made and measured: what ``round`` and ``ab`` share. Built by
    keyword; a value outside its option's bounds, or options that ask contradictory things, is
    a usage error here, from Python as from the command line."""

    repetitions: int | None = None
    """None: DEFAULT_REPETITIONS for a fixed round; with until_decided it stays None (the plan
    of looks decides how many)."""
    warmup: int = 1
    mechanism_file: Path | None = None
    order_seed: int | None = None  # None: drawn at random, recorded in attempt.json
    timeout: float | None = DEFAULT_TIMEOUT  # None (or 0): no limit
    trace: TraceOptions | None = None
    measure: MeasureOptions = MeasureOptions()
    until_decided: bool = False
    max_repetitions: int | None = None
    """With until_decided, not repetitions; None: SCHEDULE_DEFAULTS' max_pairs, or the first look
    when the campaign's min_pairs is larger (stopping.plan_for)."""

    def __post_init__(self) -> None:
        if self.timeout == 0:
            object.__setattr__(self, "timeout", None)
        _check("--repetitions", REPETITIONS, self.repetitions)
        _check("--warmup", WARMUP, self.warmup)
        _check("--order-seed", ORDER_SEED, self.order_seed)
        _check("--timeout", TIMEOUT, self.timeout)
        _check("--max-repetitions", MAX_REPETITIONS, self.max_repetitions)
        if self.until_decided and self.repetitions is not None:
            raise UsageError(
                "--repetitions/-n and --until-decided: give one (with --until-decided "
                "the round stops when decided, at most --max-repetitions)"
            )
        if self.max_repetitions is not None and not self.until_decided:
            raise UsageError("--max-repetitions needs --until-decided (else use --repetitions/-n)")

    @property
    def fixed_repetitions(self) -> int:
        """The repetitions of a fixed round: as given, else DEFAULT_REPETITIONS."""
        return DEFAULT_REPETITIONS if self.repetitions is None else self.repetitions


# -- the table of round options ---------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RoundOption:
    """One option of ``round``, ``ab`` and ``campaign final --confirm``: its keyword (``name``,
    of build_run_options), how the command line spells it, and what it accepts. ``kind``: a number
    within ``bounds`` (an integer when they are), a ``flag``, one of ``choices``, a ``file`` or
    ``text``."""

    name: str
    flags: tuple[str, ...]
    help: str
    kind: Literal["number", "flag", "choice", "file", "text"]
    default: Any = None
    show_default: bool = False
    bounds: Bounds | None = None
    choices: tuple[str, ...] = ()
    multiple: bool = False
    metavar: str | None = None
    confirm: bool = True
    """campaign final --confirm takes it too (not the declaration: the confirmed attempt's)."""


ROUND_OPTIONS: tuple[RoundOption, ...] = (
    RoundOption(
        name="repetitions",
        flags=("--repetitions", "-n"),
        kind="number",
        bounds=REPETITIONS,
        default=DEFAULT_REPETITIONS,
        show_default=True,
        help="Repetitions: one run of each side per repetition.",
    ),
    RoundOption(
        name="warmup",
        flags=("--warmup",),
        kind="number",
        bounds=WARMUP,
        default=RunOptions.warmup,
        show_default=True,
        help="Warm-up runs per side before repetition 0 (not recorded).",
    ),
    RoundOption(
        name="mechanism_file",
        flags=("--mechanism-file",),
        kind="file",
        confirm=False,
        help="The declaration, saved before any candidate run.",
    ),
    RoundOption(
        name="order_seed",
        flags=("--order-seed",),
        kind="number",
        bounds=ORDER_SEED,
        help="Seed of the balanced run order (default: random, recorded).",
    ),
    RoundOption(
        name="timeout",
        flags=("--timeout",),
        kind="number",
        bounds=TIMEOUT,
        default=DEFAULT_TIMEOUT,
        show_default=True,
        help="Seconds after which a run is killed and counted failed; 0: no limit.",
    ),
    RoundOption(
        name="trace",
        flags=("--trace",),
        kind="choice",
        choices=("kineto",),
        help="Each run writes a PyTorch profiler trace into $EXPLAIN_TRACE_DIR; "
        "its breakdown and counters are imported.",
    ),
    RoundOption(
        name="step_pattern",
        flags=("--step-pattern",),
        kind="text",
        help="--trace: annotations whose whole name matches are the steps.",
    ),
    RoundOption(
        name="region_pattern",
        flags=("--region-pattern",),
        kind="text",
        help="--trace: keep only regions whose whole name matches.",
    ),
    RoundOption(
        name="renames",
        flags=("--rename",),
        kind="text",
        multiple=True,
        metavar="OLD=NEW",
        help="--trace: rename a region or counter (repeatable).",
    ),
    RoundOption(
        name="until_decided",
        flags=("--until-decided",),
        kind="flag",
        default=False,
        help="Run blocks of 2 repetitions, assess after each from the 6th, stop "
        "at PASS, at futility or at --max-repetitions (round: the campaign must be frozen "
        "with --decision paired --interval sequential_t; ab freezes its own so).",
    ),
    RoundOption(
        name="max_repetitions",
        flags=("--max-repetitions",),
        kind="number",
        bounds=MAX_REPETITIONS,
        default=RunOptions.max_repetitions,
        help="--until-decided: the most repetitions (even; default "
        f"{SCHEDULE_DEFAULTS['max_pairs']}, or the first look when the campaign's min_pairs is "
        "larger).",
    ),
    RoundOption(
        name="suite",
        flags=("--measure",),
        kind="choice",
        choices=SUITE_FORMATS,
        help="The command runs a benchmark suite writing its results to {results} "
        "($EXPLAIN_RESULTS): each benchmark becomes a region.",
    ),
    RoundOption(
        name="suite_metric",
        flags=("--suite-metric",),
        kind="choice",
        choices=SUITE_METRICS,
        default=MeasureOptions.suite_metric,
        show_default=True,
        help="--measure: the run's metric is the sum of the "
        "benchmarks' median per-iteration times, or their geometric mean.",
    ),
    RoundOption(
        name="metric_source",
        flags=("--metric-source",),
        kind="choice",
        choices=METRIC_SOURCES,
        default=MeasureOptions.metric_source,
        show_default=True,
        help="Without a metric from the command: its wall-clock "
        "time, or its CPU time (user + system).",
    ),
    RoundOption(
        name="counters",
        flags=("--counters",),
        kind="choice",
        choices=COUNTER_SETS,
        multiple=True,
        help="instructions: run each run under valgrind (cachegrind) "
        "and record the instructions executed (~70x slower).",
    ),
)
"""The options of a round, in the order ``--help`` lists them."""

_TRACE_KEYS = ("step_pattern", "region_pattern", "renames")
_MEASURE_KEYS = tuple(f.name for f in dataclasses.fields(MeasureOptions))


def build_run_options(values: Mapping[str, Any]) -> RunOptions:
    """The RunOptions of the table's keywords (``values`` by entry name, e.g. the command
    line's): the trace's and the measure's grouped into their objects, then checked."""
    flat = dict(values)
    trace = flat.pop("trace", None)
    patterns = {k: flat.pop(k) for k in _TRACE_KEYS if k in flat}
    measure = MeasureOptions(**{k: flat.pop(k) for k in _MEASURE_KEYS if k in flat})
    if trace is None and any(patterns.values()):
        raise UsageError("--step-pattern, --region-pattern and --rename need --trace kineto")
    traced = None if trace is None else TraceOptions(imports=ImportOptions.parse(**patterns))
    return RunOptions(trace=traced, measure=measure, **flat)


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


# -- how a round measured (attempt.json's measured) -------------------------------------------
MEASURED_KEYS = (
    "warmup",
    "metric_source",
    "suite",
    "suite_metric",
    "counters",
    "trace",
    "step_pattern",
    "region_pattern",
    "renames",
)
"""The keywords of ROUND_OPTIONS that say how a round's runs are measured: attempt.json's
``measured`` keeps them, and ``campaign final --confirm`` measures as the confirmed round did."""
_UNSET_MEASURED: dict[str, Any] = {
    "suite": None,
    "suite_metric": MeasureOptions.suite_metric,
    "counters": (),
    "trace": None,
    "step_pattern": None,
    "region_pattern": None,
    "renames": (),
}


def measured_values(run: RunOptions) -> dict[str, Any]:
    """How ``run`` measures, by keyword of MEASURED_KEYS, as the command line writes them."""
    imports = run.trace.imports if run.trace is not None else None
    renames = imports.renames if imports is not None else {}
    return {
        "warmup": run.warmup,
        "metric_source": run.measure.metric_source,
        "suite": run.measure.suite,
        "suite_metric": run.measure.suite_metric,
        "counters": tuple(run.measure.counters),
        "trace": run.trace.format if run.trace is not None else None,
        "step_pattern": _source(imports.step_pattern if imports else None),
        "region_pattern": _source(imports.region_pattern if imports else None),
        "renames": tuple(f"{old}={new}" for old, new in renames.items()),
    }


def _source(pattern: Any) -> str | None:
    return None if pattern is None else str(pattern.pattern)


def measured_object(run: RunOptions) -> dict[str, Any]:
    """attempt.json's ``measured``: the values of MEASURED_KEYS, those unset left out (the
    suite's metric only with a suite); ``warmup``, ``metric_source`` and ``counters`` always."""
    values = measured_values(run)
    if values["suite"] is None:
        values["suite_metric"] = None
    kept = {k: v for k, v in values.items() if v is not None and (v != () or k == "counters")}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in kept.items()}


def recorded_values(measured: Mapping[str, Any]) -> dict[str, Any]:
    """The MEASURED_KEYS values of an attempt.json ``measured`` object (what it leaves out at
    its unset value)."""
    found = {**_UNSET_MEASURED, **measured}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in found.items()}


def measure_as(run: RunOptions, measured: Mapping[str, Any]) -> RunOptions:
    """``run`` measuring as ``measured`` (an attempt.json ``measured`` object) says; the rest
    (repetitions, order seed, timeout, the stopping plan) is ``run``'s."""
    kept = {
        f.name: getattr(run, f.name)
        for f in dataclasses.fields(RunOptions)
        if f.name not in ("trace", "measure", "warmup")
    }
    return build_run_options({**kept, **recorded_values(measured)})


def flag_of(name: str) -> str:
    """The command line's flag of a ROUND_OPTIONS keyword: ``--metric-source``."""
    return next(entry.flags[0] for entry in ROUND_OPTIONS if entry.name == name)
