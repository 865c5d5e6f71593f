"""Measurement lines valid beyond doubt, without jsonschema: the check that lets nearly every line
of real data skip the full one (:func:`plainly_valid_run` for a parsed line,
:func:`plainly_valid_line` for a line an importer built in memory). False says nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from itertools import chain
from typing import Any

from pipeline.contract.declare import (
    MAX_NAME_LENGTH,
    OK_METRIC,
    OK_STATUS,
    RUN_STATUSES,
    SIDES,
    VALUE_MINIMUM,
    bounds,
    spec,
    timestamp_fields,
)
from pipeline.ingestion.jsontext import _Object
from pipeline.ingestion.timestamps import parse_timestamp

# jsonschema costs about a millisecond per run line; nearly every line of real data is valid. This
# check accepts only lines that certainly satisfy measurement.schema.json and every rule below
# (a property test holds it to that); anything else takes the full path, which explains the error.
_RUN_FIELDS = frozenset(spec("measurement")["properties"])


_REPETITION = bounds("measurement", "repetition")


_ORDER = bounds("measurement", "order")


def _plain_number(value: Any) -> bool:
    """A finite number of at least the schema's least run value (VALUE_MINIMUM)."""
    kind = type(value)
    return (kind is float or kind is int) and VALUE_MINIMUM <= value <= sys.float_info.max


def _plain_names(names: Any) -> bool:
    """No name empty or longer than MAX_NAME_LENGTH."""
    return "" not in names and max(map(len, names), default=0) <= MAX_NAME_LENGTH


def _plain_numbers(values: Any) -> bool:
    return (
        type(values) is _Object
        and not values.repeated
        and _plain_names(values)
        and all(map(_plain_number, values.values()))
    )


def _plain_breakdown(breakdown: Any) -> bool:
    if type(breakdown) is not _Object or breakdown.repeated or not _plain_names(breakdown):
        return False
    values = list(breakdown.values())
    return all(map(_plain_number, values)) or all(map(_plain_numbers, values))


def _plain_recording(doc: _Object) -> bool:
    """The recorder's optional fields: order 0 or 1, timestamps RFC 3339."""
    order = doc.get("order", 0)
    stamps = [doc[k] for k in timestamp_fields("measurement") if k in doc]
    return (
        type(order) is int
        and _ORDER.problem(order) is None
        and all(type(s) is str and parse_timestamp(s) is not None for s in stamps)
    )


_LINE_FIELDS = _RUN_FIELDS - {"order", *timestamp_fields("measurement")}
"""What an importer's line holds: a run's fields without the recorder's (order, timestamps)."""


def _ok_metric(metric: Any) -> bool:
    """The metric of an ok run (the schema's if/then: > 0)."""
    return _plain_number(metric) and OK_METRIC.problem(metric) is None


def _named(objects: list[Any]) -> bool:
    """Dicts whose names are all non-empty strings of at most MAX_NAME_LENGTH characters (a
    longer one passed here, so `import` wrote names ingest then rejected as too_long)."""
    return (
        all(type(values) is dict for values in objects)
        and set(map(type, chain.from_iterable(objects))) <= {str}
        and _plain_names(set(chain.from_iterable(objects)))
    )


def _plain_values(objects: list[Any]) -> bool:
    """Dicts of non-empty names to finite numbers >= 0."""
    return _named(objects) and all(
        map(_plain_number, chain.from_iterable(map(dict.values, objects)))
    )


def plainly_valid_line(line: Mapping[str, Any]) -> bool:
    """True only for a run line in memory (plain dicts, as an importer builds it: an ok run,
    steps of regions, counters) that is valid beyond doubt; no JSON text is made. False says
    nothing: the line then takes the full check."""
    repetition: Any = line.get("repetition")
    metric: Any = line.get("metric")
    breakdown: Any = line.get("breakdown", {})
    return (
        line.keys() <= _LINE_FIELDS
        and line.get("side") in SIDES
        and type(repetition) is int
        and _REPETITION.problem(repetition) is None
        and line.get("status") == OK_STATUS
        and _ok_metric(metric)
        and _named([breakdown])
        and _plain_values(list(breakdown.values()))
        and _plain_values([line.get("counters", {})])
    )


def plainly_valid_run(doc: Any) -> bool:
    """True only for a run line that is valid beyond doubt (False says nothing)."""
    if type(doc) is not _Object or doc.repeated or not doc.keys() <= _RUN_FIELDS:
        return False
    repetition, status, metric = doc.get("repetition"), doc.get("status"), doc.get("metric", None)
    return (
        doc.get("side") in SIDES
        and type(repetition) is int
        and _REPETITION.problem(repetition) is None
        and status in RUN_STATUSES
        and (
            _ok_metric(metric)
            if status == OK_STATUS
            else "metric" not in doc or _plain_number(metric)
        )
        and ("breakdown" not in doc or _plain_breakdown(doc["breakdown"]))
        and ("counters" not in doc or _plain_numbers(doc["counters"]))
        and _plain_recording(doc)
    )
