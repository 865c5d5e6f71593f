"""The one place where a measurement line is built from what a reader read, renamed and checked
against ``schemas/measurement.schema.json``: :func:`import_line` reads one run's files and builds
its validated line (nothing is written).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from pipeline.contract.declare import Side
from pipeline.errors import UsageError
from pipeline.importers.common import ImportFormatError, quoted
from pipeline.importers.reader import Imported, ImportOptions, parse_inputs
from pipeline.importers.registry import read_run


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
    # numpy: loaded when a line is checked
    from pipeline.ingestion.jsontext import field_name, parse_json
    from pipeline.ingestion.plain import plainly_valid_line
    from pipeline.ingestion.rules import check_document

    if plainly_valid_line(line):  # certainly valid: no JSON text, no jsonschema
        return
    problems = check_document("measurement", parse_json(json.dumps(line)))
    if problems:
        path, code, message = problems[0]
        raise ImportFormatError(f'field "{field_name(path) or "(line)"}": {message} [{code}]')


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
