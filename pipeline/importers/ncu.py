"""Nsight Compute ``ncu --csv`` (details page, or ``--page raw``) -> counters summed over kernels.

Only the metrics below are read; a metric of another name is ignored whatever its unit, and a
known metric in a unit we do not know is refused. ``==PROF==`` lines mixed into the output are
skipped. Kernel replay times are counters (``kernel_seconds``), never wall time; ncu has no
end-to-end time of the run, so ``--metric`` is required.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import polars as pl

from pipeline.importers.common import (
    CsvTable,
    byte_factor,
    fail,
    iter_tables,
    normalized,
    parse_optional,
    quoted,
    read_text,
    time_factor,
)
from pipeline.importers.kernels import regions_by_step
from pipeline.importers.naming import C
from pipeline.importers.reader import Imported, ImportOptions, InputFile

METRICS: dict[str, tuple[str, str]] = {
    "dram__bytes_read.sum": (C.DRAM_BYTES_READ, "bytes"),
    "dram__bytes_write.sum": (C.DRAM_BYTES_WRITE, "bytes"),
    "dram__bytes.sum": (C.DRAM_BYTES, "bytes"),
    "lts__t_bytes.sum": (C.L2_BYTES, "bytes"),
    "gpu__time_duration.sum": (C.KERNEL_SECONDS, "time"),
}
PAGES = "ncu --csv output (details page with Metric Name/Metric Unit/Metric Value, or --page raw)"
SCHEMA: dict[str, pl.DataType] = {
    "kernel": pl.String(),
    "metric": pl.String(),
    "value": pl.Decimal(38, 15),
    "line": pl.Int64(),
    "name": pl.String(),  # the kernel's name (Kernel Name): its region with --kernel-regions
}
TIME_METRIC = "gpu__time_duration.sum"


def classify(header: list[str]) -> str | None:
    cols = normalized(header)
    if {"id", "metric name", "metric unit", "metric value"} <= cols:
        return "details"
    if "id" in cols and any("__" in c for c in cols):
        return "raw"
    return None


def read(inputs: Sequence[InputFile], options: ImportOptions) -> Imported:
    rows: list[tuple[str, str, Decimal, int, str]] = []
    kernels: set[str] = set()
    pages = set()
    for item in inputs:
        if item.step is not None:
            raise fail(item.path, None, "ncu counters are per run: expected PATH, not STEP=PATH")
        text = read_text(item.path)
        for table in iter_tables(
            item.path, text, classify, PAGES, units_row=lambda kind: kind == "raw"
        ):
            pages.add(table.kind)
            reader = _details if table.kind == "details" else _raw
            for kernel, metric, value, line, name in reader(table):
                kernels.add(kernel)
                if metric is not None and value is not None:
                    rows.append((kernel, metric, value, line, name))
    frame = _deduplicated(pl.DataFrame(rows, schema=SCHEMA, orient="row"), inputs)
    counters = {
        METRICS[metric][0]: value
        for metric, value in frame.group_by("metric").agg(pl.col("value").sum()).iter_rows()
    }
    if C.DRAM_BYTES not in counters and {C.DRAM_BYTES_READ, C.DRAM_BYTES_WRITE} <= set(counters):
        # dram__bytes.sum is by definition read + write: exact, not a guess.
        counters[C.DRAM_BYTES] = counters[C.DRAM_BYTES_READ] + counters[C.DRAM_BYTES_WRITE]
    counters[C.KERNELS] = Decimal(len(kernels))
    notes: list[str] = []
    return Imported(
        format="ncu",
        breakdown=_kernel_breakdown(frame, inputs, options, notes),
        notes=notes,
        counters=counters,
        metric=None,
        provenance="ncu CSV (" + ", ".join(sorted(pages)) + " page)",
    )


Row = tuple[str, str | None, Decimal | None, int, str]
"""(kernel launch, metric, value, line, kernel name); metric and value None on other rows."""


def _kernel_breakdown(
    frame: pl.DataFrame, inputs: Sequence[InputFile], options: ImportOptions, notes: list[str]
) -> dict[str, dict[str, Decimal]]:
    """--kernel-regions: each kernel name's summed gpu__time_duration.sum, one step ``all``.
    ncu replays every kernel alone with locked clocks: this is the kernels' own time, not the
    time they took inside the run."""
    if options.kernel_regions is None:
        return {}
    times = frame.filter(pl.col("metric") == TIME_METRIC)
    source = str(inputs[0].path)
    if times.is_empty():
        raise fail(
            source,
            None,
            f"--kernel-regions: expected the metric {TIME_METRIC} "
            f"(ncu --metrics {TIME_METRIC}), got none",
        )
    if (times["name"] == "").any():
        raise fail(source, None, "--kernel-regions: expected a Kernel Name column")
    notes.append("kernel regions from ncu: replayed kernel time with locked clocks, not wall time")
    rows = (("all", name, value) for name, value in times.select("name", "value").iter_rows())
    regions = regions_by_step(rows, options.kernel_regions, source).get("all", {})
    return {"all": {r: v for r, v in regions.items() if options.keeps_region(r)}}


def _convert(table: CsvTable, line: int, metric: str, unit: str, text: str) -> Decimal | None:
    what = f"metric {quoted(metric)}"
    value = parse_optional(text, table.path, line, what)
    if value is None:
        raise fail(table.path, line, f"{what}: expected a number, got {quoted(text)}")
    kind = METRICS[metric][1]
    convert = time_factor if kind == "time" else byte_factor
    return value * convert(unit, table.path, line, f"{what} unit")


def _details(table: CsvTable) -> list[Row]:
    at = {key: table.require(key) for key in ("ID", "Metric Name", "Metric Unit", "Metric Value")}
    pid = table.index("Process ID")
    name_at = table.index("Kernel Name", "Function Name")
    out: list[Row] = []
    for line, cells in table.rows:
        kernel = f"{table.path}#{cells[pid] if pid is not None else ''}#{cells[at['ID']]}"
        name = cells[name_at].strip() if name_at is not None else ""
        metric = cells[at["Metric Name"]].strip()
        if metric not in METRICS:  # rule rows have an empty metric; other metrics are not ours
            out.append((kernel, None, None, line, name))
            continue
        value = _convert(table, line, metric, cells[at["Metric Unit"]], cells[at["Metric Value"]])
        out.append((kernel, metric, value, line, name))
    return out


def _raw(table: CsvTable) -> list[Row]:
    id_at = table.require("ID")
    units = table.units or []
    if len(units) != len(table.columns):
        raise fail(
            table.path, table.header_line + 1, "expected the units row under the raw page header"
        )
    wanted = [(i, c) for i, c in enumerate(table.columns) if c in METRICS]
    name_at = table.index("Kernel Name", "Function Name")
    out: list[Row] = []
    for line, cells in table.rows:
        kernel = f"{table.path}#{cells[id_at]}"
        name = cells[name_at].strip() if name_at is not None else ""
        out.append((kernel, None, None, line, name))
        out.extend(
            (kernel, c, _convert(table, line, c, units[i], cells[i]), line, name) for i, c in wanted
        )
    return out


def _deduplicated(frame: pl.DataFrame, inputs: Sequence[InputFile]) -> pl.DataFrame:
    """A metric shown twice for one kernel (in two sections) counts once; two different values
    for it are refused."""
    clash = (
        frame.group_by("kernel", "metric")
        .agg(pl.col("value").n_unique().alias("n"), pl.col("line").max())
        .filter(pl.col("n") > 1)
    )
    if not clash.is_empty():
        kernel, metric, _, line = clash.sort("line").row(0)
        path = kernel.split("#", 1)[0]
        raise fail(path, line, f"expected one value of {quoted(metric)} per kernel, got several")
    return frame.unique(["kernel", "metric"])
