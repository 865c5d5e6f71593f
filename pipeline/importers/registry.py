"""The formats of ``import`` (and of ``round --measure`` for the suites): one :class:`Importer`
entry per format, the choices and help texts derived from them, and reading a run's files with
the chosen format's reader.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from pipeline.allocator import load_polars
from pipeline.errors import UsageError
from pipeline.importers.common import quoted
from pipeline.importers.reader import Imported, ImportOptions, InputFile, Reader

_RETURN_AT_ONCE = "dirty_decay_ms:0,muzzy_decay_ms:0"
"""An import frees and allocates columns piece after piece: with Polars' default allocator
setting a 58 MB trace peaked at 2.2x its size, 1.45x with freed memory returned at once."""


@dataclass(frozen=True)
class Importer:
    """One input format: the module whose reader reads it and what its files can say, from
    which the command's help texts and option checks are derived."""

    name: str
    module: str  # pipeline.importers.<module>: read(inputs, options), or reader(name) for suites
    run_time: bool  # its files can give the run's end-to-end time (else --metric is needed)
    kernels: bool = False  # kernel GPU time can become regions (--kernel-regions)
    suite: bool = False  # a harness's results: whole runs, each benchmark a region (--measure)

    def reader(self) -> Reader:
        load_polars(_RETURN_AT_ONCE)
        module = importlib.import_module(f"pipeline.importers.{self.module}")
        return cast(Reader, module.reader(self.name) if self.suite else module.read)


IMPORTERS: dict[str, Importer] = {
    i.name: i
    for i in (
        Importer("kineto", "kineto", run_time=True),
        Importer("nsys", "nsys", run_time=False, kernels=True),
        Importer("ncu", "ncu", run_time=False, kernels=True),
        Importer("msprof", "msprof", run_time=True, kernels=True),
        Importer("pytest-benchmark", "suites", run_time=True, suite=True),
        Importer("gbench", "suites", run_time=True, suite=True),
        Importer("pyperf", "suites", run_time=True, suite=True),
    )
}
"""The formats of ``import`` (and of ``round --measure`` for the suites). Adding one is an
entry here and its module's ``read``; tests/test_import_registry.py holds the facts to what the
readers do."""


FORMATS: tuple[str, ...] = tuple(IMPORTERS)


SUITE_FORMATS: tuple[str, ...] = tuple(n for n, i in IMPORTERS.items() if i.suite)
"""Benchmark harnesses whose result files are whole runs (pipeline/importers/suites.py)."""


KERNEL_REGION_FORMATS: tuple[str, ...] = tuple(n for n, i in IMPORTERS.items() if i.kernels)
"""Formats whose kernels can become regions (--kernel-regions, pipeline/importers/kernels.py)."""


NO_RUN_TIME_FORMATS: tuple[str, ...] = tuple(n for n, i in IMPORTERS.items() if not i.run_time)
"""Formats whose files never give the run's time: their import needs --metric."""


def listed(names: Sequence[str]) -> str:
    """``a, b and c``: formats named in a help text or message."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def importer(fmt: str) -> Importer:
    """The format called ``fmt``; a usage error naming the known ones otherwise."""
    found = IMPORTERS.get(fmt)
    if found is None:
        raise UsageError(f"unknown format {quoted(fmt)}: expected one of {', '.join(FORMATS)}")
    return found


SUITE_METRICS: tuple[str, ...] = ("sum", "geomean")
"""How a suite file's benchmarks make the run's metric (pipeline/importers/suites.py)."""


def read_run(fmt: str, inputs: Sequence[InputFile], options: ImportOptions) -> Imported:
    chosen = importer(fmt)
    if options.kernel_regions is not None and not chosen.kernels:
        raise UsageError(
            f"--kernel-regions: {listed(KERNEL_REGION_FORMATS)} have kernels; {fmt} has none"
        )
    if not inputs:
        raise UsageError("expected at least one FILE")
    return chosen.reader()(inputs, options)
