"""What every format's reader is given and gives back: the run's files (:class:`InputFile`), the
options that read and name them (:class:`ImportOptions`, parsed once) and what the files say
(:class:`Imported`: step -> region -> seconds, counter -> value, the end-to-end metric when the
input has one, all as exact Decimals).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from pipeline.contract.files import ReadMode
from pipeline.errors import UsageError
from pipeline.importers.common import quoted
from pipeline.importers.kernels import KernelRegions, parse_kernel_regions


@dataclass(frozen=True)
class InputFile:
    """One input file; ``step`` is set when the user wrote ``STEP=PATH`` (per-step captures)."""

    path: Path
    step: str | None = None


@dataclass(frozen=True)
class ImportOptions:
    """How an import reads and names a run's files, parsed once (``ImportOptions.parse`` from
    the option values, by the command line and Python alike) and passed whole through
    ``import_line``, ``import_run``, ``import_folder`` and every format's reader. A new import
    option is one field here, one click option in cli/imports.py, and the reader that uses it."""

    step_pattern: re.Pattern[str] | None = None
    region_pattern: re.Pattern[str] | None = None
    renames: Mapping[str, str] = field(default_factory=dict)  # old name -> new name
    suite_metric: str = "sum"  # suite formats: the run's metric from its benchmarks (suites.py)
    mode: ReadMode = "fast"  # kineto: "precise" reads the file whole, never streamed
    kernel_regions: KernelRegions | None = None  # nsys, ncu, msprof: kernel time as regions

    @classmethod
    def parse(
        cls,
        *,
        step_pattern: str | None = None,
        region_pattern: str | None = None,
        renames: Sequence[str] = (),
        suite_metric: str = "sum",
        mode: ReadMode = "fast",
        kernel_regions: Sequence[str] = (),
    ) -> ImportOptions:
        """From the options' values as written (``OLD=NEW`` renames, ``NAME=REGEX`` kernel
        groups, ``*`` alone: one region per kernel); a bad one is a usage error."""
        return cls(
            step_pattern=compile_pattern("--step-pattern", step_pattern),
            region_pattern=compile_pattern("--region-pattern", region_pattern),
            renames=parse_renames(renames),
            suite_metric=suite_metric,
            mode=mode,
            kernel_regions=parse_kernel_regions(kernel_regions),
        )

    def keeps_region(self, name: str) -> bool:
        return self.region_pattern is None or self.region_pattern.fullmatch(name) is not None


@dataclass
class Imported:
    """What one run's files say, before naming options and validation."""

    format: str
    breakdown: dict[str, dict[str, Decimal]]  # step -> region -> seconds
    counters: dict[str, Decimal]
    metric: Decimal | None  # seconds of the run, when the input has an end-to-end time
    provenance: str  # source format and tool version, reported on stderr
    notes: list[str] = field(default_factory=list)


Reader = Callable[[Sequence[InputFile], ImportOptions], Imported]


def parse_inputs(arguments: Sequence[str]) -> list[InputFile]:
    """``PATH`` or ``STEP=PATH``. An argument naming an existing file is always a path, so a
    file whose name contains ``=`` still works."""
    inputs = []
    for argument in arguments:
        step, sep, rest = argument.partition("=")
        if sep and step and rest and not Path(argument).exists():
            inputs.append(InputFile(Path(rest), step))
        else:
            inputs.append(InputFile(Path(argument)))
    return inputs


def parse_renames(pairs: Sequence[str]) -> dict[str, str]:
    renames: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise UsageError(f"--rename {quoted(pair)}: expected OLD=NEW")
        if old in renames and renames[old] != new:
            raise UsageError(f"--rename: {quoted(old)} is renamed twice")
        renames[old] = new
    return renames


def compile_pattern(option: str, pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"{option} {quoted(pattern)}: not a regular expression ({exc})") from None
