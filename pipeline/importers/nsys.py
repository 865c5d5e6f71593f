"""Nsight Systems ``nsys stats --format csv`` reports -> regions (NVTX ranges) and counters.

Reports are recognized by their header, wherever it starts in the file (banner lines such as
``Generating SQLite file…`` are skipped) and several reports may follow one another in one file,
separated by blank lines (``nsys stats`` printing to stdout). Summaries cover a whole capture, so a
run is one step ``all`` unless the files are given per step as ``STEP=PATH``. Summaries hold no
end-to-end time of the run: ``--metric`` is required.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

import polars as pl

from pipeline.importers.common import (
    CsvTable,
    byte_factor,
    fail,
    iter_tables,
    normalized,
    parse_number,
    quoted,
    read_text,
    time_factor,
)
from pipeline.importers.kernels import regions_by_step
from pipeline.importers.naming import (
    API_SUFFIX,
    GRAPH_LAUNCH_APIS,
    KERNEL_LAUNCH_APIS,
    SYNC_SUFFIX,
    C,
)
from pipeline.importers.reader import Imported, ImportOptions, InputFile

REPORTS = (
    "nsys stats CSV reports (cuda_gpu_kern_sum, cuda_api_sum, cuda_gpu_mem_time_sum, "
    "cuda_gpu_mem_size_sum, nvtx_sum or nvtx_pushpop_sum)"
)
MEMCPY = re.compile(r"^\[CUDA memcpy\b", re.IGNORECASE)
MEMSET = re.compile(r"^\[CUDA memset\b", re.IGNORECASE)
VALUE_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.String(),
    "kind": pl.String(),
    "name": pl.String(),
    "value": pl.Decimal(38, 15),
}


def classify(header: list[str]) -> str | None:
    cols = normalized(header)
    if {"total time", "instances", "range"} <= cols:
        return "nvtx"
    if {"total time", "instances", "name"} <= cols:
        return "kern"
    if {"total time", "name"} <= cols and cols & {"num calls", "calls"}:
        return "api"
    if {"total time", "count", "operation"} <= cols:
        return "mem_time"
    if {"total", "count", "operation"} <= cols:
        return "mem_size"
    return None


NO_RANGES = (
    "no breakdown: the files hold no NVTX range (nvtx_sum), so the run has counters only; "
    "--kernel-regions makes the kernels' GPU time its regions"
)


def read(inputs: Sequence[InputFile], options: ImportOptions) -> Imported:
    named = {item.step is not None for item in inputs}
    if len(named) > 1:
        raise fail(
            inputs[0].path,
            None,
            "expected every FILE as STEP=PATH or none of them, got a mix",
        )
    seen: dict[tuple[str, str], str] = {}
    values: list[tuple[str, str, str, Decimal]] = []
    kernel_time: list[tuple[str, str, Decimal]] = []  # (step, kernel, seconds): --kernel-regions
    for item in inputs:
        step = item.step or "all"
        for table in iter_tables(item.path, read_text(item.path), classify, REPORTS):
            where = f"{table.path}:{table.header_line}"
            if (step, table.kind) in seen:
                raise fail(
                    table.path,
                    table.header_line,
                    f"expected one {table.kind} report per step, got a second one for step "
                    f"{quoted(step)} (first at {seen[(step, table.kind)]})",
                )
            seen[(step, table.kind)] = where
            values.extend((step, kind, name, v) for kind, name, v in _values(table))
            if table.kind == "kern" and options.kernel_regions is not None:
                times = _column(table, "Name", ("Total Time",), "time", "kernel_time")
                kernel_time += [(step, name, seconds) for _, name, seconds in times]
    frame = pl.DataFrame(values, schema=VALUE_SCHEMA, orient="row")
    steps = sorted({item.step or "all" for item in inputs})
    notes: list[str] = []
    if options.kernel_regions is None:
        breakdown = _breakdown(frame, steps, options)
        kinds = {kind for _, kind in seen}
        if "kern" in kinds and "nvtx" not in kinds:
            notes.append(NO_RANGES)
    else:
        breakdown = _kernel_breakdown(kernel_time, steps, seen, inputs, options, notes)
    return Imported(
        format="nsys",
        breakdown=breakdown,
        counters=_counters(frame, {kind for _, kind in seen}),
        metric=None,
        provenance="nsys stats CSV (" + ", ".join(sorted({k for _, k in seen})) + ")",
        notes=notes,
    )


def _values(table: CsvTable) -> list[tuple[str, str, Decimal]]:
    """(kind, name, value) per row: seconds for NVTX ranges, counts and bytes for the rest."""
    if table.kind == "nvtx":
        return _column(table, "Range", ("Total Time",), "time", "region", strip_domain=True)
    if table.kind == "kern":
        return _column(table, "Name", ("Instances",), None, "kernels")
    if table.kind == "api":
        return _column(table, "Name", ("Num Calls", "Calls"), None, "api_calls")
    if table.kind == "mem_time":
        return _column(table, "Operation", ("Count",), None, "mem_count")
    rows = _column(table, "Operation", ("Count",), None, "mem_count_from_size")
    return rows + _column(table, "Operation", ("Total",), "bytes", "mem_bytes")


def _column(
    table: CsvTable,
    name_column: str,
    value_column: tuple[str, ...],
    unit_kind: str | None,
    kind: str,
    *,
    strip_domain: bool = False,
) -> list[tuple[str, str, Decimal]]:
    name_at = table.require(name_column)
    value_at = table.require(*value_column)
    factor = Decimal(1)
    if unit_kind is not None:
        unit = table.unit(value_at)
        header = table.columns[value_at]
        what = f"column {quoted(header)}"
        if unit is None:
            raise fail(table.path, table.header_line, f"{what}: expected a unit, got none")
        convert = time_factor if unit_kind == "time" else byte_factor
        factor = convert(unit, table.path, table.header_line, what)
    out = []
    for line, cells in table.rows:
        name = cells[name_at].strip()
        if strip_domain and name.startswith(":"):
            name = name[1:]  # the default NVTX domain is written as an empty prefix
        what = f"column {quoted(table.columns[value_at])}"
        value = parse_number(cells[value_at], table.path, line, what)
        out.append((kind, name, value * factor))
    return out


def _breakdown(
    frame: pl.DataFrame, steps: list[str], options: ImportOptions
) -> dict[str, dict[str, Decimal]]:
    regions = frame.filter(pl.col("kind") == "region")
    kept = [n for n in regions["name"].unique().to_list() if options.keeps_region(n)]
    summed = (
        regions.filter(pl.col("name").is_in(kept))
        .group_by("step", "name")
        .agg(pl.col("value").sum())
    )
    breakdown: dict[str, dict[str, Decimal]] = {step: {} for step in steps}
    for step, name, value in summed.iter_rows():
        breakdown[step][name] = value
    return breakdown


def _kernel_breakdown(
    rows: list[tuple[str, str, Decimal]],
    steps: list[str],
    seen: dict[tuple[str, str], str],
    inputs: Sequence[InputFile],
    options: ImportOptions,
    notes: list[str],
) -> dict[str, dict[str, Decimal]]:
    """--kernel-regions: each step's breakdown is the GPU time of its kernels (the Total Time of
    cuda_gpu_kern_sum), by kernel or by group; NVTX ranges, on another clock, are left out."""
    assert options.kernel_regions is not None
    for step in steps:
        if (step, "kern") not in seen:
            where = next((i.path for i in inputs if (i.step or "all") == step), inputs[0].path)
            for_step = f" for step {quoted(step)}" if step != "all" else ""
            raise fail(
                where,
                None,
                f"--kernel-regions: expected a cuda_gpu_kern_sum report{for_step}, got none",
            )
    if any(kind == "nvtx" for _, kind in seen):
        notes.append("NVTX ranges not used: with --kernel-regions the breakdown is kernel time")
    source = seen[(steps[0], "kern")]
    regions = regions_by_step(rows, options.kernel_regions, source)
    return {
        step: {r: v for r, v in regions.get(step, {}).items() if options.keeps_region(r)}
        for step in steps
    }


def _counters(frame: pl.DataFrame, kinds: set[str]) -> dict[str, Decimal]:
    base = pl.col("name").str.strip_chars().str.replace(API_SUFFIX, "")
    memcpy = pl.col("name").str.contains(MEMCPY.pattern)
    memset = pl.col("name").str.contains(MEMSET.pattern)
    api = pl.col("kind") == "api_calls"
    count_kind = "mem_count" if "mem_time" in kinds else "mem_count_from_size"
    sums = frame.select(
        **{C.KERNELS: pl.col("value").filter(pl.col("kind") == "kernels").sum()},
        **{C.KERNEL_LAUNCHES: pl.col("value").filter(api & base.is_in(KERNEL_LAUNCH_APIS)).sum()},
        **{C.GRAPH_LAUNCHES: pl.col("value").filter(api & base.is_in(GRAPH_LAUNCH_APIS)).sum()},
        **{C.SYNCS: pl.col("value").filter(api & base.str.ends_with(SYNC_SUFFIX)).sum()},
        **{C.MEMCPY_COUNT: pl.col("value").filter((pl.col("kind") == count_kind) & memcpy).sum()},
        **{C.MEMSET_COUNT: pl.col("value").filter((pl.col("kind") == count_kind) & memset).sum()},
        **{C.MEMCPY_BYTES: pl.col("value").filter((pl.col("kind") == "mem_bytes") & memcpy).sum()},
        **{C.MEMSET_BYTES: pl.col("value").filter((pl.col("kind") == "mem_bytes") & memset).sum()},
    ).row(0, named=True)
    present = {
        C.KERNELS: "kern" in kinds,
        C.KERNEL_LAUNCHES: "api" in kinds,
        C.GRAPH_LAUNCHES: "api" in kinds,
        C.SYNCS: "api" in kinds,
        C.MEMCPY_COUNT: bool(kinds & {"mem_time", "mem_size"}),
        C.MEMSET_COUNT: bool(kinds & {"mem_time", "mem_size"}),
        C.MEMCPY_BYTES: "mem_size" in kinds,
        C.MEMSET_BYTES: "mem_size" in kinds,
    }
    return {name: Decimal(sums[name] or 0) for name, keep in present.items() if keep}
