"""Benchmark-suite result files -> one run: each benchmark a region, the suite's total the metric.

Three harnesses are read (docs/suites.md): pytest-benchmark (``--benchmark-json``), Google
Benchmark (``--benchmark_out_format=json``) and pyperf (``-o``, plain or ``.json.gz``). Each
benchmark becomes the region of that name in the one step ``all``, valued at its **median
per-iteration time in seconds** as the harness measured it (pytest-benchmark's ``stats.median``;
the median of Google Benchmark's ``real_time`` over its repetitions, its ``_median`` aggregate;
the median of pyperf's values, which are per loop already). The median, not the mean: one
descheduled round must not move a benchmark's number. The run's metric is the sum of those times,
or their geometric mean (``--suite-metric geomean``: every benchmark weighs the same whatever its
scale). The harness's own numbers become counters named ``BENCHMARK:NAME``: Google Benchmark user
counters (median over repetitions), numeric pytest-benchmark ``extra_info`` values, and pyperf
benchmarks whose unit is not seconds (``--track-memory``: ``BENCHMARK:byte``).

Names are kept as the harness writes them (pytest-benchmark's ``fullname``: the test's node id,
its path relative to pytest's rootdir, so the same test has the same name in two checkouts of
one repository whatever else either holds), except that control characters (which no terminal or
report shows) are written as ``\\xNN`` escapes, deterministically, so both sides get the same
names. A benchmark the harness reports as failed fails the whole run: a missing region would count
0 on that side, an "infinite speedup".
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from pipeline.errors import UsageError
from pipeline.importers.common import MAX_SUITE_BYTES, TIME_UNITS, fail, quoted, read_json
from pipeline.importers.reader import Imported, ImportOptions, InputFile
from pipeline.importers.registry import SUITE_FORMATS

STEP = "all"  # a flat breakdown is the one step "all" (contract §2.4)
COUNTER_SEPARATOR = ":"  # counter "BENCHMARK:NAME"
WHAT = dict(
    zip(
        SUITE_FORMATS,
        (  # what each format's file is, for error messages
            'pytest-benchmark JSON (--benchmark-json): an object with a "benchmarks" list of '
            'objects with "fullname" and "stats"',
            'Google Benchmark JSON (--benchmark_out_format=json): an object with "context" and a '
            '"benchmarks" list of objects with "name", "real_time" and "time_unit"',
            'pyperf JSON (-o FILE): an object with "version" and a "benchmarks" list of objects '
            'with "runs"',
        ),
        strict=True,
    )
)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


@dataclass
class Benchmark:
    """One benchmark of a suite file: its median per-iteration seconds (None: not a time) and its
    counters."""

    name: str
    seconds: Decimal | None
    counters: dict[str, Decimal] = field(default_factory=dict)
    unit: str = "second"  # pyperf: another unit (byte: --track-memory, --tracemalloc)


# ----------------------------------------------------------------------------------- loading


def _constant(token: str) -> Decimal:
    return Decimal(token.replace("Infinity", "Inf"))  # Google Benchmark writes NaN and Infinity


def load(path: Path) -> Any:
    """The JSON document of ``path`` (gzip-compressed or not, at most MAX_SUITE_BYTES either
    way), numbers as exact Decimals."""
    return read_json(
        path,
        "utf-8-sig",
        limit=MAX_SUITE_BYTES,
        unzipped=MAX_SUITE_BYTES,
        what="a results file",
        parse_float=Decimal,
        parse_int=Decimal,
        parse_constant=_constant,
    )


def _escaped(match: re.Match[str]) -> str:
    char = ord(match.group())
    return f"\\x{char:02x}" if char < 0x100 else f"\\u{char:04x}"


def clean_name(text: str) -> str:
    """The name as written, control characters escaped as ``\\xNN`` and lone surrogates (a
    ``"\\udcff"`` escape in the file: no Unicode text, so no line could hold it) as
    ``\\uDCFF``."""
    return _CONTROL.sub(_escaped, text)


def _number(value: Any) -> Decimal | None:
    return value if isinstance(value, Decimal) else None


def _list(path: Path, fmt: str, doc: Any, key: str = "benchmarks") -> list[Any]:
    items = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(items, list):
        got = type(doc).__name__ if not isinstance(doc, dict) else f"keys {sorted(doc)[:6]}"
        raise fail(path, None, f"expected {WHAT[fmt]}, got {got}")
    return items


def _name(path: Path, where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise fail(path, None, f"{where}: expected a non-empty name, got {value!r}")
    return clean_name(value)


def _seconds(path: Path, name: str, value: Decimal | None, factor: Decimal = Decimal(1)) -> Decimal:
    if value is None or not value.is_finite() or value < 0:
        shown = "nothing" if value is None else str(value)
        raise fail(path, None, f"benchmark {quoted(name)}: expected a time >= 0, got {shown}")
    return value * factor


def _counters(benchmark: str, values: Mapping[str, Iterable[Decimal]]) -> dict[str, Decimal]:
    """Counters named ``BENCHMARK:NAME``, the median of each; negative or non-finite values
    cannot be counters (contract §2.4) and are left out."""
    out: dict[str, Decimal] = {}
    for name, series in values.items():
        kept = [v for v in series if v.is_finite() and v >= 0]
        if kept:
            out[f"{benchmark}{COUNTER_SEPARATOR}{clean_name(name)}"] = statistics.median(kept)
    return out


# -------------------------------------------------------------------------- pytest-benchmark


def _pytest_benchmark(path: Path, doc: Any) -> list[Benchmark]:
    items = _list(path, "pytest-benchmark", doc)
    out = []
    for index, item in enumerate(items):
        given = item.get("fullname", item.get("name")) if isinstance(item, dict) else None
        name = _name(path, f"benchmarks[{index}].fullname", given)
        stats = item.get("stats")
        if not isinstance(stats, dict):
            raise fail(path, None, f'benchmarks[{index}]: expected an object with "stats"')
        extra = item.get("extra_info") or {}
        numbers = (
            {k: [v] for k, v in extra.items() if isinstance(v, Decimal)}
            if isinstance(extra, dict)
            else {}
        )
        seconds = _seconds(path, name, _number(stats.get("median")))
        out.append(Benchmark(name, seconds, _counters(name, numbers)))
    return out


# ----------------------------------------------------------------------------------- gbench

GBENCH_FIELDS = frozenset(
    "name family_index per_family_instance_index run_name run_type repetitions repetition_index "
    "threads aggregate_name aggregate_unit iterations real_time cpu_time time_unit label "
    "error_occurred error_message skipped skip_message cpu_coefficient real_coefficient big_o "
    "rms".split()
)
"""Google Benchmark's own fields of a result (src/json_reporter.cc); every other number of a
result is a user counter (``state.counters``, ``SetBytesProcessed``, memory-manager fields)."""


def _gbench_rows(path: Path, doc: Any) -> dict[str, list[dict[str, Any]]]:
    """The rows of each benchmark (``run_name``, or ``name`` in files before it existed): its
    repetitions, or its median (else mean) aggregate when only aggregates were reported."""
    if not isinstance(doc, dict) or not isinstance(doc.get("context"), dict):
        raise fail(path, None, f'expected {WHAT["gbench"]}, got no "context" object')
    grouped: dict[str, list[dict[str, Any]]] = {}
    aggregates: dict[str, dict[str, dict[str, Any]]] = {}
    for index, item in enumerate(_list(path, "gbench", doc)):
        if not isinstance(item, dict):
            raise fail(path, None, f"benchmarks[{index}]: expected an object")
        name = _name(path, f"benchmarks[{index}].name", item.get("run_name", item.get("name")))
        if item.get("error_occurred") is True:
            message = item.get("error_message", "")
            raise fail(path, None, f"benchmark {quoted(name)} failed: {message}")
        if item.get("skipped") is True:
            continue
        if item.get("run_type") == "aggregate":
            aggregates.setdefault(name, {})[str(item.get("aggregate_name"))] = item
        else:
            grouped.setdefault(name, []).append(item)
    for name, by_kind in aggregates.items():
        if name not in grouped and ("median" in by_kind or "mean" in by_kind):
            grouped[name] = [by_kind.get("median") or by_kind["mean"]]
    return grouped


def _gbench(path: Path, doc: Any) -> list[Benchmark]:
    out = []
    for name, rows in _gbench_rows(path, doc).items():
        times = []
        for row in rows:
            unit = row.get("time_unit")
            factor = TIME_UNITS.get(unit) if isinstance(unit, str) else None
            if factor is None:
                raise fail(
                    path,
                    None,
                    f"benchmark {quoted(name)}: expected a time_unit (ns, us, "
                    f"ms or s), got {unit!r}",
                )
            times.append(_seconds(path, name, _number(row.get("real_time")), factor))
        counters: dict[str, list[Decimal]] = {}
        for row in rows:
            for key, value in row.items():
                if key not in GBENCH_FIELDS and isinstance(value, Decimal):
                    counters.setdefault(key, []).append(value)
        out.append(Benchmark(name, statistics.median(times), _counters(name, counters)))
    return out


# ----------------------------------------------------------------------------------- pyperf


def _metadata(path: Path, where: str, value: Any) -> dict[str, Any]:
    """A pyperf metadata object ({} when absent); anything else is refused by name
    (``"metadata": []`` was an internal error, exit 4)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(
            path, None, f"{where}: expected an object, got {type(value).__name__}", "wrong_type"
        )
    return value


def _values(path: Path, name: str, run: dict[str, Any]) -> list[Any]:
    values = run.get("values") or []
    if not isinstance(values, list):
        raise fail(path, None, f"benchmark {quoted(name)}: a run's values are not a list")
    return values


def _pyperf(path: Path, doc: Any) -> list[Benchmark]:
    if not isinstance(doc, dict) or "version" not in doc:
        raise fail(path, None, f"expected {WHAT['pyperf']}")
    common = _metadata(path, "metadata", doc.get("metadata"))
    out = []
    for index, item in enumerate(_list(path, "pyperf", doc)):
        runs = item.get("runs") if isinstance(item, dict) else None
        if not isinstance(runs, list):
            raise fail(path, None, f'benchmarks[{index}]: expected an object with "runs"')
        own = _metadata(path, f"benchmarks[{index}].metadata", item.get("metadata"))
        meta = {**common, **own}
        name = _name(path, f"benchmarks[{index}].metadata.name", meta.get("name"))
        values = [v for run in runs if isinstance(run, dict) for v in _values(path, name, run)]
        if not values or not all(isinstance(v, Decimal) for v in values):
            raise fail(
                path,
                None,
                f"benchmark {quoted(name)}: expected numeric values "
                "(a file of calibration runs only has none)",
            )
        if not all(v.is_finite() for v in values):  # NaN made the median an internal error
            bad = next(v for v in values if not v.is_finite())
            raise fail(
                path, None, f"benchmark {quoted(name)}: a value is {bad}, not a time", "not_finite"
            )
        unit = meta.get("unit", "second")
        median = statistics.median(values)
        if unit == "second":
            out.append(Benchmark(name, _seconds(path, name, median)))
        else:
            out.append(Benchmark(name, None, _counters(name, {str(unit): [median]}), str(unit)))
    return out


PARSERS: dict[str, Callable[[Path, Any], list[Benchmark]]] = dict(
    zip(SUITE_FORMATS, (_pytest_benchmark, _gbench, _pyperf), strict=True)
)


# ------------------------------------------------------------------------------- the run


def suite_metric(times: Sequence[Decimal], how: str) -> Decimal:
    """The run's metric from its benchmarks' times: their sum or their geometric mean."""
    if how == "sum":  # SUITE_METRICS in pipeline/importers: sum, geomean
        return sum(times, Decimal(0))
    if any(t == 0 for t in times):
        return Decimal(0)
    return (sum((t.ln() for t in times), Decimal(0)) / len(times)).exp()


def read_suite(fmt: str, inputs: Sequence[InputFile], options: ImportOptions) -> Imported:
    """The run of one or more suite files of ``fmt`` (benchmark names must not repeat)."""
    if options.step_pattern is not None:
        raise UsageError(f"--step-pattern: a {fmt} file has no steps (every benchmark is a region)")
    regions: dict[str, Decimal] = {}
    counters: dict[str, Decimal] = {}
    seen: set[str] = set()
    untimed: set[str] = set()  # units of the benchmarks kept that are not times
    for item in inputs:
        if item.step is not None:
            raise fail(item.path, None, f"a {fmt} file is one run: expected PATH, not STEP=PATH")
        for bench in PARSERS[fmt](item.path, load(item.path)):
            if bench.name in seen:
                raise fail(item.path, None, f"benchmark {quoted(bench.name)} appears twice")
            seen.add(bench.name)
            if not options.keeps_region(bench.name):
                continue
            if bench.seconds is not None:
                regions[bench.name] = bench.seconds
            else:
                untimed.add(bench.unit)
            counters |= bench.counters
    if not regions:
        where = ", ".join(str(i.path) for i in inputs)
        raise fail(where, None, _no_time(fmt, sorted(untimed)))
    return Imported(
        format=fmt,
        breakdown={STEP: regions},
        counters=counters,
        metric=suite_metric(list(regions.values()), options.suite_metric),
        provenance=f"{fmt} JSON ({len(regions)} benchmarks, median per iteration, metric "
        f"{options.suite_metric})",
    )


def _no_time(fmt: str, untimed: Sequence[str]) -> str:
    """Why a suite file gives no run: no benchmark at all, or only benchmarks that measure
    something else than time (a pyperf --track-memory file: every value in bytes)."""
    if not untimed:
        return f"expected at least one timed benchmark in {WHAT[fmt]}"
    units = " and ".join(quoted(u) for u in untimed)
    memory = "byte" in untimed
    memory_text = " (pyperf --track-memory and --tracemalloc measure memory)" if memory else ""
    return (
        f"expected at least one benchmark timed in seconds, got only benchmarks in {units}"
        f"{memory_text}: import the file of a run without that option"
    )


def reader(fmt: str) -> Callable[[Sequence[InputFile], ImportOptions], Imported]:
    return lambda inputs, options: read_suite(fmt, inputs, options)
