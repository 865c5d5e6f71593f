"""Importers: real profiler output -> one contract §2.4 measurement line per run.

Every format module reads its files into an :class:`Imported` (step -> region -> seconds,
counter -> value, the end-to-end metric when the input has one, all as exact Decimals). This
module holds the format registry and the one place where a line is built, renamed, checked against
``schemas/measurement.schema.json`` and appended to a measurements file.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

from pipeline.allocator import load_polars
from pipeline.atomic import dump_lines
from pipeline.contract.declare import Side
from pipeline.contract.files import ReadMode
from pipeline.errors import UsageError
from pipeline.importers.common import ImportFormatError, fail, quoted, read_input
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


def read_run(fmt: str, inputs: Sequence[InputFile], options: ImportOptions) -> Imported:
    chosen = importer(fmt)
    if options.kernel_regions is not None and not chosen.kernels:
        raise UsageError(
            f"--kernel-regions: {listed(KERNEL_REGION_FORMATS)} have kernels; {fmt} has none"
        )
    if not inputs:
        raise UsageError("expected at least one FILE")
    return chosen.reader()(inputs, options)


# ------------------------------------------------------------------------------ building a line


def _renamed(values: Mapping[str, Decimal], renames: Mapping[str, str]) -> dict[str, Decimal]:
    # Renaming two names to one adds them: that is how a user merges names across formats.
    out: dict[str, Decimal] = {}
    for name, value in values.items():
        new = renames.get(name, name)
        out[new] = out.get(new, Decimal(0)) + value
    return out


def _number(value: Decimal) -> int | float:
    """Integral values (counts, bytes) stay integers; others become the nearest float."""
    if value.is_finite() and not (nearest := float(value)).is_integer():
        return nearest  # (a whole value's nearest float is whole, or infinite: not this one)
    if value == value.to_integral_value() and abs(value) < 2**53:
        return int(value)
    return float(value)


def unused_renames(imported: Imported, renames: Mapping[str, str]) -> list[str]:
    names = set(imported.counters) | set(imported.breakdown)
    names |= {r for regions in imported.breakdown.values() for r in regions}
    return [old for old in renames if old not in names]


def _renamed_steps(
    breakdown: Mapping[str, Mapping[str, Decimal]], renames: Mapping[str, str]
) -> dict[str, dict[str, Decimal]]:
    """Steps renamed like regions; two steps renamed to one are added region by region."""
    out: dict[str, dict[str, Decimal]] = {}
    for step, regions in breakdown.items():
        merged = out.setdefault(renames.get(step, step), {})
        for region, value in _renamed(regions, renames).items():
            merged[region] = merged.get(region, Decimal(0)) + value
    return out


def build_line(
    imported: Imported,
    *,
    side: Side,
    repetition: int,
    metric: float | None = None,
    renames: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The contract §2.4 line of one run. ``metric`` overrides the input's end-to-end time; a format
    without one (nsys, ncu summaries) needs it. The line is validated before it is returned."""
    renames = renames or {}
    if metric is None:
        if imported.metric is None:
            raise UsageError(
                f"{imported.format} input has no end-to-end time for the run: give --metric VALUE"
            )
        metric_value: int | float = float(imported.metric)
    else:
        metric_value = metric
    line: dict[str, Any] = {
        "side": side,
        "repetition": repetition,
        "status": "ok",
        "metric": metric_value,
    }
    steps = _renamed_steps(imported.breakdown, renames) if renames else imported.breakdown
    breakdown = {  # each value rounded to the context (+), as a sum is
        step: {region: _number(+v) for region, v in sorted(regions.items())}
        for step, regions in steps.items()
        if regions
    }
    if breakdown:
        line["breakdown"] = breakdown
    if imported.counters:
        counters = _renamed(imported.counters, renames)
        line["counters"] = {name: _number(v) for name, v in sorted(counters.items())}
    check_line(line)
    return line


def check_line(line: Mapping[str, Any]) -> None:
    """The measurement contract, by ingest's own check (the same rules, the same words): the
    first problem of the line is an ImportFormatError."""
    from pipeline.ingestion.validate import (  # numpy: loaded when a line is checked
        check_document,
        field_name,
        parse_json,
        plainly_valid_line,
    )

    if plainly_valid_line(line):  # certainly valid: no JSON text, no jsonschema
        return
    problems = check_document("measurement", parse_json(json.dumps(line)))
    if problems:
        path, code, message = problems[0]
        raise ImportFormatError(f'field "{field_name(path) or "(line)"}": {message} [{code}]')


# ----------------------------------------------------------------------------------- writing out


def _existing_runs(output: Path) -> set[tuple[str, int]]:
    runs: set[tuple[str, int]] = set()
    text = read_input(output).decode("utf-8", errors="replace")
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise fail(output, number, f"expected a JSON measurement line, got {exc}") from None
        if isinstance(doc, dict):
            runs.add((str(doc.get("side")), doc.get("repetition", -1)))
    return runs


def write_line(line: Mapping[str, Any], output: Path | None) -> None:
    """Append the line to ``output`` (refusing a run already there), or print it."""
    write_lines([line], output)


def write_lines(lines: Sequence[Mapping[str, Any]], output: Path | None) -> None:
    """Append the lines to ``output`` in one write (refusing any run already there, so nothing
    is written then), or print them."""
    text = dump_lines(lines).decode("utf-8")
    if output is None:
        sys.stdout.write(text)
        return
    if output.exists():
        existing = _existing_runs(output)
        for line in lines:
            key = (str(line["side"]), int(line["repetition"]))
            if key in existing:
                raise fail(
                    output,
                    None,
                    f"expected a new run, got side {key[0]} repetition {key[1]} already in the "
                    "file",
                )
        body = read_input(output)
        prefix = "" if not body or body.endswith(b"\n") else "\n"
    else:
        prefix = ""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)  # a new attempt's folder, as documented
        with output.open("a", encoding="utf-8") as handle:
            handle.write(prefix + text)
    except OSError as exc:
        raise fail(output, None, f"cannot write the file: {exc.strerror or exc}") from None


def import_line(
    fmt: str,
    arguments: Sequence[str],
    *,
    side: Side,
    repetition: int,
    metric: float | None = None,
    options: ImportOptions = ImportOptions(),
) -> tuple[dict[str, Any], Imported]:
    """Read the files of one run and build its validated line (nothing is written)."""
    if repetition < 0:
        raise UsageError(f"--repetition {repetition}: expected an integer >= 0")
    if metric is not None and not (math.isfinite(metric) and metric > 0):
        raise UsageError(f"--metric {metric}: expected a finite number > 0")
    mapping = options.renames
    inputs = parse_inputs(arguments)
    imported = read_run(fmt, inputs, options)
    try:
        line = build_line(
            imported, side=side, repetition=repetition, metric=metric, renames=mapping
        )
    except ImportFormatError as exc:  # the line's field and code, after the files it came from
        raise ImportFormatError(f"{', '.join(str(i.path) for i in inputs)}: {exc}") from None
    for old in unused_renames(imported, mapping):
        imported.notes.append(
            f"--rename {old}=…: no step, region or counter is named {quoted(old)}"
        )
    return line, imported


def import_run(
    fmt: str,
    arguments: Sequence[str],
    *,
    side: Side,
    repetition: int,
    metric: float | None = None,
    output: Path | None = None,
    options: ImportOptions = ImportOptions(),
) -> tuple[dict[str, Any], Imported]:
    """The library call behind ``explain-pipeline import``: read, build, validate, then append
    the line to ``output`` or print it."""
    line, imported = import_line(
        fmt, arguments, side=side, repetition=repetition, metric=metric, options=options
    )
    write_line(line, output)
    return line, imported


# ------------------------------------------------------------------------------- a whole folder

DEFAULT_NAME_PATTERN = r"(?P<side>baseline|candidate)[-_.]?r?(?P<repetition>\d+)"
"""File names like ``baseline-r3-a.json.gz`` or ``candidate_7.json``: searched in the file name."""
_SIDES: dict[str, Side] = {
    **dict.fromkeys(("b", "base", "baseline"), "baseline"),
    **dict.fromkeys(("c", "cand", "candidate"), "candidate"),
}


@dataclass(frozen=True)
class FolderRun:
    side: Side
    repetition: int
    files: tuple[Path, ...]


def runs_in_folder(
    folder: Path, name_pattern: str | None = None
) -> tuple[list[FolderRun], list[Path]]:
    """Group the files of ``folder`` into runs by side and repetition, read from each file name
    with ``name_pattern`` (named groups ``side`` and ``repetition``; several files of one run are
    its captures). Returns the runs, by repetition then side, and the files that did not match."""
    pattern = compile_pattern("--name-pattern", name_pattern or DEFAULT_NAME_PATTERN)
    assert pattern is not None
    if not {"side", "repetition"} <= set(pattern.groupindex):
        raise UsageError(
            f"--name-pattern {quoted(pattern.pattern)}: expected the named groups "
            "(?P<side>...) and (?P<repetition>...)"
        )
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder")
    grouped: dict[tuple[Side, int], list[Path]] = {}
    skipped: list[Path] = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        match = pattern.search(path.name)
        if match is None:
            skipped.append(path)
            continue
        side = _SIDES.get(match.group("side").casefold())
        if side is None:
            raise UsageError(
                f"{path}: side {quoted(match.group('side'))} from --name-pattern: expected "
                "baseline or candidate (or b, base, c, cand)"
            )
        try:
            repetition = int(match.group("repetition"))
        except ValueError:
            raise UsageError(
                f"{path}: repetition {quoted(match.group('repetition'))} from --name-pattern: "
                "expected an integer"
            ) from None
        grouped.setdefault((side, repetition), []).append(path)
    if not grouped:
        raise UsageError(f"{folder}: no file name matches --name-pattern {quoted(pattern.pattern)}")
    order = sorted(grouped, key=lambda key: (key[1], key[0]))
    return [FolderRun(s, r, tuple(grouped[s, r])) for s, r in order], skipped


def import_folder(
    fmt: str,
    folder: Path,
    *,
    name_pattern: str | None = None,
    output: Path | None = None,
    options: ImportOptions = ImportOptions(),
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every run of a folder of profiler files, in one process: one line per run, all checked
    before any is written (a bad file writes nothing), then appended to ``output`` or printed.
    Returns the lines and the notes."""
    runs, skipped = runs_in_folder(folder, name_pattern)
    lines: list[dict[str, Any]] = []
    notes = [f"{path}: file name does not match --name-pattern; skipped" for path in skipped]
    for run in runs:
        files = [str(p) for p in run.files]
        line, imported = import_line(
            fmt, files, side=run.side, repetition=run.repetition, options=options
        )
        lines.append(line)
        notes += imported.notes
    write_lines(lines, output)
    return lines, list(dict.fromkeys(notes))
