"""Ascend msprof / torch_npu profiler CSV summaries -> steps, regions and counters.

- ``step_trace_*.csv`` (msprof): one step ``step-<Iteration ID>`` per row; regions from the time
  columns (``data_aug_bound``, ``fp_bp``, ``iteration_refresh`` partition the iteration;
  ``reduce`` overlaps them); the metric is the sum of ``Iteration Time``.
- ``step_trace_time.csv`` (torch_npu): one step ``step-<Step>`` per row, every time column a
  region (snake_case: ``computing``, ``communication_not_overlapped``, ``free``…, µs).
- ``kernel_details.csv`` (torch_npu): ``kernels`` and ``op:<Type>`` counts; with a ``Step Id``
  column, region ``npu_busy`` per step = union of the task intervals.
- ``op_summary_*.csv``: ``kernels`` and ``op:<OP Type>`` counts; ``op_statistic_*.csv`` gives the
  same counts from its ``Count`` column when no per-task file is given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal

import polars as pl

from pipeline.importers.common import (
    CsvTable,
    fail,
    iter_tables,
    normalized,
    parse_number,
    parse_optional,
    quoted,
    read_text,
    split_unit,
    time_factor,
)
from pipeline.importers.kernels import regions_by_step
from pipeline.importers.kineto import seconds, union_ns
from pipeline.importers.naming import C
from pipeline.importers.reader import Imported, ImportOptions, InputFile

FILES = (
    "msprof/torch_npu CSV (op_summary, op_statistic, step_trace, kernel_details or step_trace_time)"
)
STEP_TRACE_REGIONS = {  # column (without unit) -> region
    "fp to bp time": "fp_bp",
    "fp_bp time": "fp_bp",
    "iteration refresh": "iteration_refresh",
    "grad_refresh bound": "iteration_refresh",
    "data aug bound": "data_aug_bound",
    "data_aug bound": "data_aug_bound",
    "reduce duration": "reduce",
}
STEP_TRACE_TIME_KEYS = {"device_id", "step", "rank_id", "type", "index"}


def classify(header: list[str]) -> str | None:
    raw = {" ".join(c.split()).casefold() for c in header}
    cols = normalized(header)
    if {"step", "computing", "free"} <= raw:
        return "step_trace_time"
    if {"iteration id", "iteration time"} <= cols:
        return "step_trace"
    if {"op type", "task duration"} <= cols:
        return "op_summary"
    if {"name", "type", "start time", "duration"} <= cols:
        return "kernel_details"
    if {"op type", "count", "total time"} <= cols:
        return "op_statistic"
    return None


def read(inputs: Sequence[InputFile], options: ImportOptions) -> Imported:
    tables: list[CsvTable] = []
    for item in inputs:
        if item.step is not None:
            raise fail(item.path, None, "msprof steps come from the step trace: expected PATH")
        tables.extend(iter_tables(item.path, read_text(item.path), classify, FILES))
    kinds = {t.kind for t in tables}
    if {"step_trace", "step_trace_time"} <= kinds:
        first = next(t for t in tables if t.kind == "step_trace_time")
        raise fail(first.path, first.header_line, "expected one step trace per run, got two kinds")
    breakdown: dict[str, dict[str, Decimal]] = {}
    metric: Decimal | None = None
    notes: list[str] = []
    for table in tables:
        if table.kind == "step_trace":
            steps, total = _step_trace(table)
            _add_steps(breakdown, steps, table)
            metric = (metric or Decimal(0)) + total
        elif table.kind == "step_trace_time":
            _add_steps(breakdown, _step_trace_time(table), table)
    for step, ns in _npu_busy([t for t in tables if t.kind == "kernel_details"]).iter_rows():
        breakdown.setdefault(step, {})[C.NPU_BUSY] = seconds(ns)
    if options.kernel_regions is not None:
        breakdown = _kernel_breakdown(tables, options, notes)
    breakdown = {
        step: {r: v for r, v in regions.items() if options.keeps_region(r)}
        for step, regions in breakdown.items()
    }
    return Imported(
        format="msprof",
        breakdown=breakdown,
        counters=_counters(tables, notes),
        metric=metric,
        provenance="msprof CSV (" + ", ".join(sorted(kinds)) + ")",
        notes=notes,
    )


def _add_steps(
    breakdown: dict[str, dict[str, Decimal]], steps: dict[str, dict[str, Decimal]], table: CsvTable
) -> None:
    for step, regions in steps.items():
        if step in breakdown:
            raise fail(
                table.path, table.header_line, f"expected each step once, got {quoted(step)} again"
            )
        breakdown[step] = regions


def _step_id(table: CsvTable, line: int, text: str) -> str:
    value = parse_number(text, table.path, line, "step id")
    if value != value.to_integral_value():
        raise fail(table.path, line, f"step id: expected an integer, got {quoted(text)}")
    return f"step-{int(value)}"


def _check_one_device(table: CsvTable) -> None:
    device = table.index("Device_id")
    if device is None:
        return
    devices = sorted({cells[device].strip() for _, cells in table.rows})
    if len(devices) > 1:
        raise fail(
            table.path,
            table.header_line,
            f"expected one device per run, got devices {', '.join(devices)}: "
            "import each device's files as its own run",
        )


def _step_trace(table: CsvTable) -> tuple[dict[str, dict[str, Decimal]], Decimal]:
    _check_one_device(table)
    id_at = table.require("Iteration ID")
    time_at = table.require("Iteration Time")
    columns = [(i, *split_unit(c)) for i, c in enumerate(table.columns)]
    wanted = [
        (i, STEP_TRACE_REGIONS[n.casefold()], u)
        for i, n, u in columns
        if n.casefold() in STEP_TRACE_REGIONS
    ]
    factors = {i: _factor(table, i) for i in [time_at, *(i for i, _, _ in wanted)]}
    steps: dict[str, dict[str, Decimal]] = {}
    total = Decimal(0)
    for line, cells in table.rows:
        step = _step_id(table, line, cells[id_at])
        if step in steps:
            raise fail(table.path, line, f"expected each iteration once, got {quoted(step)} again")
        total += parse_number(cells[time_at], table.path, line, "Iteration Time") * factors[time_at]
        regions: dict[str, Decimal] = {}
        for i, region, _ in wanted:
            value = parse_optional(cells[i], table.path, line, quoted(table.columns[i]))
            if value is not None:  # N/A (first iteration, inference) is unknown, not zero
                regions[region] = regions.get(region, Decimal(0)) + value * factors[i]
        steps[step] = regions
    return steps, total


def _factor(table: CsvTable, position: int) -> Decimal:
    unit = table.unit(position)
    what = f"column {quoted(table.columns[position])}"
    if unit is None:
        raise fail(table.path, table.header_line, f"{what}: expected a unit such as (us), got none")
    return time_factor(unit, table.path, table.header_line, what)


def _snake(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.casefold()).strip("_")


def _step_trace_time(table: CsvTable) -> dict[str, dict[str, Decimal]]:
    """torch_npu writes these columns in µs without a unit in the header."""
    _check_one_device(table)
    step_at = table.require("Step")
    regions = [
        (i, _snake(c)) for i, c in enumerate(table.columns) if _snake(c) not in STEP_TRACE_TIME_KEYS
    ]
    steps: dict[str, dict[str, Decimal]] = {}
    for line, cells in table.rows:
        # Without a profiler schedule torch_npu leaves Step empty: the whole capture.
        step = _step_id(table, line, cells[step_at]) if cells[step_at].strip() else "all"
        if step in steps:
            raise fail(table.path, line, f"expected each step once, got {quoted(step)} again")
        steps[step] = {}
        for i, region in regions:
            value = parse_optional(cells[i], table.path, line, quoted(table.columns[i]))
            if value is not None:
                steps[step][region] = value * Decimal("1e-6")
    return steps


def _ns(value: Decimal) -> int:
    return int(value.to_integral_value(ROUND_HALF_EVEN))


def _npu_busy(tables: list[CsvTable]) -> pl.DataFrame:
    rows: list[tuple[str, int, int]] = []
    for table in tables:
        step_at = table.index("Step Id", "Step ID")
        if step_at is None:
            continue
        start_at, dur_at = table.require("Start Time"), table.require("Duration")
        start_ns = _factor(table, start_at) * Decimal(10**9)
        dur_ns = _factor(table, dur_at) * Decimal(10**9)
        for line, cells in table.rows:
            start = _ns(parse_number(cells[start_at], table.path, line, "Start Time") * start_ns)
            duration = _ns(parse_number(cells[dur_at], table.path, line, "Duration") * dur_ns)
            rows.append((_step_id(table, line, cells[step_at]), start, start + duration))
    frame = pl.DataFrame(
        rows, schema={"step": pl.String, "start": pl.Int64, "end": pl.Int64}, orient="row"
    )
    return union_ns(frame, ["step"]).select("step", "ns")


TASK_COLUMNS = {"kernel_details": ("Name", "Duration"), "op_summary": ("Op Name", "Task Duration")}
"""Per-task files: the columns of each task's kernel (operator) name and its duration."""


def _kernel_breakdown(
    tables: list[CsvTable], options: ImportOptions, notes: list[str]
) -> dict[str, dict[str, Decimal]]:
    """--kernel-regions: each task's duration summed by kernel name (or group), per step when
    kernel_details has a Step Id, else one step ``all``. Step-trace regions are left out (the
    metric still comes from the step trace)."""
    assert options.kernel_regions is not None
    kinds = {t.kind for t in tables}
    kind = "kernel_details" if "kernel_details" in kinds else "op_summary"
    tasks = [t for t in tables if t.kind == kind]
    if not tasks:
        first = tables[0] if tables else None
        where = first.path if first else "msprof"
        raise fail(
            where, None, "--kernel-regions: expected an op_summary or kernel_details file, got none"
        )
    if kind == "kernel_details" and "op_summary" in kinds:
        notes.append("op_summary not used for kernel regions: kernel_details has the same tasks")
    if kinds & {"step_trace", "step_trace_time"}:
        notes.append(
            "step trace regions not used: with --kernel-regions the breakdown is kernel "
            "time (the metric still comes from the step trace)"
        )
    rows: list[tuple[str, str, Decimal]] = []
    for table in tasks:
        name_at, dur_at = (table.require(c) for c in TASK_COLUMNS[kind])
        factor = _factor(table, dur_at)
        step_at = table.index("Step Id", "Step ID")
        for line, cells in table.rows:
            step = _step_id(table, line, cells[step_at]) if step_at is not None else "all"
            value = parse_number(cells[dur_at], table.path, line, quoted(table.columns[dur_at]))
            rows.append((step, cells[name_at].strip(), value * factor))
    return regions_by_step(rows, options.kernel_regions, f"{tasks[0].path}:{tasks[0].header_line}")


def _counters(tables: list[CsvTable], notes: list[str]) -> dict[str, Decimal]:
    per_task = [t for t in tables if t.kind in {"op_summary", "kernel_details"}]
    statistic = [t for t in tables if t.kind == "op_statistic"]
    rows: list[tuple[str, Decimal]] = []
    for table in per_task:
        type_at = table.require("OP Type", "Type")
        rows.extend((cells[type_at].strip(), Decimal(1)) for _, cells in table.rows)
    if per_task and statistic:
        notes.append("op_statistic ignored: the per-task files give the same counts")
    elif statistic:
        for table in statistic:
            type_at, count_at = table.require("OP Type"), table.require("Count")
            rows.extend(
                (cells[type_at].strip(), parse_number(cells[count_at], table.path, line, "Count"))
                for line, cells in table.rows
            )
    if not per_task and not statistic:
        return {}
    frame = pl.DataFrame(rows, schema={"type": pl.String, "n": pl.Decimal(38, 15)}, orient="row")
    per_type = frame.group_by("type").agg(pl.col("n").sum())
    counters = {C.OP_PREFIX + t: n for t, n in per_type.iter_rows()}
    counters[C.KERNELS] = sum(counters.values(), Decimal(0))
    return counters
