"""The ``import`` command: profiler files of one run -> one measurement line (contract §2.4); or,
with --batch, a folder of runs -> one line per run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from pipeline.cli.common import (
    command,
    declared_choice,
    declared_range,
    option_group,
    output_option,
)
from pipeline.contract.inert import inert
from pipeline.errors import ExitCode, UsageError
from pipeline.importers.folders import DEFAULT_NAME_PATTERN, import_folder
from pipeline.importers.kernels import EVERY_KERNEL, gather_kernel_regions
from pipeline.importers.measurements import import_run
from pipeline.importers.reader import ImportOptions
from pipeline.importers.registry import (
    FORMATS,
    KERNEL_REGION_FORMATS,
    NO_RUN_TIME_FORMATS,
    SUITE_FORMATS,
    SUITE_METRICS,
    listed,
)
from pipeline.output.sinks import is_stdout

IMPORT_OPTIONS = [
    click.option(
        "--step-pattern",
        default=None,
        help="kineto: user annotations whose whole name matches this regex are the steps "
        "(default: ProfilerStep#N, named step-N; without them, annotations named like step-N).",
    ),
    click.option(
        "--region-pattern",
        default=None,
        help="Keep only regions whose whole name (before any gpu: prefix) matches this regex.",
    ),
    click.option(
        "--rename",
        "renames",
        multiple=True,
        metavar="OLD=NEW",
        help="Rename a step, region or counter (repeatable; two names renamed to one are added).",
    ),
    click.option(
        "--suite-metric",
        type=click.Choice(SUITE_METRICS),
        default=ImportOptions.suite_metric,
        show_default=True,
        help=f"{listed(SUITE_FORMATS)}: the run's metric is the sum of the benchmarks' "
        "median per-iteration times, or their geometric mean (docs/suites.md).",
    ),
    click.option(
        "--precise",
        is_flag=True,
        default=False,
        help="kineto: read each trace whole instead of streamed (the same line, slower).",
    ),
    click.option(
        "--kernel-regions",
        "kernel_regions",
        multiple=True,
        is_flag=False,
        flag_value=EVERY_KERNEL,
        metavar="[NAME=REGEX]",
        help=f"{listed(KERNEL_REGION_FORMATS)}: kernel GPU time as regions instead of NVTX "
        "ranges or step-trace columns. Alone: one region per kernel; NAME=REGEX (repeatable, or "
        "several after one --kernel-regions): a region per group, the first group whose regex "
        "is found in the kernel name wins, the rest is 'other' (docs/import.md).",
    ),
]
"""How the files of a run are read and named: each option is a keyword of ImportOptions.parse
(--precise is its mode)."""


def _import_options(*, precise: bool, **given: Any) -> ImportOptions:
    return ImportOptions.parse(mode="precise" if precise else "fast", **given)


import_options = option_group("options", IMPORT_OPTIONS, _import_options)
"""The import options, handed to the command as one ``options`` (an ImportOptions)."""


@command("import")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(FORMATS))
@click.argument("files", metavar="FILE...", nargs=-1)
@click.option(
    "--side", type=declared_choice("measurement", "side"), default=None, help="Side of the run."
)
@click.option(
    "--repetition",
    type=declared_range("measurement", "repetition"),
    default=None,
    help="Repetition index (>= 0).",
)
@click.option(
    "--batch",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="FOLDER",
    help="Import every run of FOLDER in one process: side and repetition come from each file "
    "name (--name-pattern); files of one run are its captures. Instead of FILE, --side and "
    "--repetition.",
)
@click.option(
    "--name-pattern",
    default=None,
    metavar="REGEX",
    help="With --batch: searched in each file name, with named groups side (baseline, candidate, "
    f"or b, base, c, cand) and repetition. Default: {DEFAULT_NAME_PATTERN}",
)
@click.option(
    "--metric",
    type=float,
    default=None,
    help="End-to-end metric of the run (default: sum of step durations, in seconds; "
    f"required for {listed(NO_RUN_TIME_FORMATS)}, which have no run time).",
)
@import_options
@output_option(
    "Append the line(s) to this measurements.jsonl (refused if a run is already in it); "
    "default: print them."
)
def import_command(
    fmt: str,
    files: tuple[str, ...],
    side: str | None,
    repetition: int | None,
    folder: Path | None,
    name_pattern: str | None,
    metric: float | None,
    options: ImportOptions,
    output: str | None,
) -> int:
    """Turn the profiler files of one run into one measurement line (docs/contract.md §2.4).

    FORMAT is kineto (PyTorch profiler Chrome trace, .json or .json.gz), nsys (nsys stats
    --format csv reports), ncu (ncu --csv details or raw page) or msprof (msprof / torch_npu
    CSV summaries); pytest-benchmark, gbench (Google Benchmark) or pyperf JSON results, each
    benchmark a region (docs/suites.md). Several FILEs of one run are combined; nsys takes
    per-step files as STEP=PATH. With --batch, a whole folder of runs becomes one line per
    run. Source and notes go to stderr. See docs/import.md.

    \b
    Example:
      explain-pipeline import kineto trace-b0.json.gz --side baseline --repetition 0 \\
          -o attempts/c1/r1/measurements.jsonl
      explain-pipeline import kineto --batch traces/ -o attempts/c1/r1/measurements.jsonl
      explain-pipeline import nsys report_nvtx_sum.csv report_cuda_api_sum.csv \\
          --side candidate --repetition 3 --metric 0.0421 --rename decode=attention
      explain-pipeline import pytest-benchmark bench.json --side baseline --repetition 0
      explain-pipeline import nsys report_cuda_gpu_kern_sum.csv --side baseline \\
          --repetition 0 --metric 0.0412 --kernel-regions gemm=gemm --kernel-regions attn=flash
    """
    target = None if output is None or is_stdout(output) else Path(output)
    files, kernel_regions = gather_kernel_regions(files, options.kernel_regions)
    options = replace(options, kernel_regions=kernel_regions)
    if folder is not None:
        if files or side is not None or repetition is not None or metric is not None:
            raise UsageError(
                "--batch reads side and repetition from the file names and the metric from the "
                "files: give no FILE, --side, --repetition or --metric"
            )
        lines, notes = import_folder(
            fmt,
            folder,
            name_pattern=name_pattern,
            output=target,
            options=options,
        )
        said(f"imported {len(lines)} runs from {folder} -> {target or 'stdout'}")
        for note in notes:
            said(f"note: {note}")
        return ExitCode.OK
    if name_pattern is not None:
        raise UsageError("--name-pattern goes with --batch FOLDER")
    if not files or side is None or repetition is None:
        raise UsageError("give FILE..., --side and --repetition (or --batch FOLDER)")
    line, imported = import_run(
        fmt,
        files,
        side=side,  # type: ignore[arg-type]
        repetition=repetition,
        metric=metric,
        output=target,
        options=options,
    )
    steps = len(line.get("breakdown", {}))
    said(
        f"imported {imported.provenance}: {steps} steps, "
        f"{len(line.get('counters', {}))} counters -> {target or 'stdout'}"
    )
    for note in imported.notes:
        said(f"note: {note}")
    return ExitCode.OK


def said(line: str) -> None:
    """One line on stderr; it names files (a name may hold a line break and a workflow
    command), so it is inert."""
    click.echo(inert(line), err=True)


COMMANDS: list[click.Command] = [import_command]
