"""The precise engine of ingest's reader (contract §2): the JSON Schemas, and the rules a schema
cannot say; the reference the fast engine (bulk.py) is tested against.

Every problem becomes an :class:`Issue` naming file, line, field, reason and a reason code; all the
problems of a document are reported in one pass. Nothing here touches the store.

Rules beyond ``schemas/*.schema.json``:
- ``NaN``/``Infinity`` tokens and numbers too large for a float are ``not_finite``;
- JSON objects with a repeated key are ``duplicate_key`` (JSON parsers silently keep one of them);
- an unknown ``schema`` kind or version is ``unknown_schema`` (the rest of that document is not
  checked: it may follow another format);
- timestamps are RFC 3339 with a time zone (``bad_timestamp``);
- ids match ``ID_PATTERN`` exactly and equal their directory names (``bad_id``, ``id_mismatch``);
- a breakdown is either flat ``{region: s}`` or nested ``{step: {region: s}}``
  (``mixed_breakdown``); ``(side, repetition)`` is unique (``duplicate_run``);
- ``(target, name)`` of expectations is unique (``duplicate_expectation``); a benchmark campaign
  refuses mechanism declarations (``mechanism_in_benchmark``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, cached_property
from itertools import chain
from json.decoder import scanstring  # type: ignore[attr-defined]  # public since 2.6, not in typeshed
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from pipeline.contract.declare import (
    ID_FIELDS,
    MAX_NAME_LENGTH,
    OK_METRIC,
    OK_STATUS,
    RUN_STATUSES,
    SIDES,
    VALUE_MINIMUM,
    DocumentKind,
    bounds,
    schema_id,
    spec,
    timestamp_fields,
)
from pipeline.contract.files import InputFileError, MiB, read_regular
from pipeline.contract.inert import printable
from pipeline.contract.layout import (
    ATTEMPT_FILE,
    CAMPAIGN_FILE,
    MEASUREMENTS_FILE,
    MECHANISM_FILE,
    id_rule,
    valid_id,
)
from pipeline.contract.schemas import document_schema

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

MAX_DEPTH = 32
"""Deepest nesting of objects and arrays accepted (valid documents need 3)."""
MAX_DOCUMENT_BYTES = 16 * MiB
"""Largest campaign.json, attempt.json or mechanism.json read."""
MAX_MEASUREMENTS_BYTES = 256 * MiB
"""Largest measurements.jsonl read (about a million runs with a small breakdown each)."""
MAX_ISSUES_PER_FILE = 100
"""Errors listed per file: the first ones, then one `too_many_errors` line with how many lines
were left unchecked. A file of a million bad lines would otherwise cost minutes, a gigabyte and
hundreds of megabytes of output, to say what its first lines already say."""

JsonPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Issue:
    """One problem of one input file, at one line and field."""

    path: str
    line: int | None
    field: str
    code: str
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        what = f'field "{self.field}": ' if self.field else ""
        return printable(f"{where}: {what}{self.message} [{self.code}]")


# -- small helpers ----------------------------------------------------------------------------
def field_name(path: JsonPath) -> str:
    """``("breakdown", "decode-0", "mlp")`` -> ``breakdown.decode-0.mlp``; indices as ``[i]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe(value: Any) -> str:
    """A value as the user wrote it, short enough for one line."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, _Token):
        return value.token
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + '..."'


def _local_timestamp(text: str) -> datetime | None:
    """RFC 3339 with a time zone -> aware datetime in its own zone; None when not that."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    date, time, fraction, zone = match.groups()
    fraction = (fraction or "")[:7].ljust(7, "0") if fraction else ""
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        return datetime.fromisoformat(f"{date}T{time}{fraction}{zone}")
    except ValueError:
        return None


def parse_timestamp(text: str) -> datetime | None:
    """RFC 3339 with a time zone -> aware UTC datetime (microseconds); None when not that, or
    when its offset moves it before year 1 or after year 9999 in UTC."""
    local = _local_timestamp(text)
    try:
        return None if local is None else local.astimezone(UTC)
    except OverflowError:
        return None


def timestamp_problem(value: str) -> str | None:
    """Why ``value`` is not a timestamp ingest can store (None when it is one)."""
    if parse_timestamp(value) is not None:
        return None
    if _local_timestamp(value) is not None:
        return (
            "must be an RFC 3339 timestamp with a time zone between years 1 and 9999 in UTC, "
            f"got {describe(value)}"
        )
    return f"must be an RFC 3339 timestamp with a time zone, got {describe(value)}"


_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


# -- JSON parsing: positions, non-finite numbers, repeated keys --------------------------------
class _Token(float):
    """A float parsed from a ``NaN``/``Infinity`` token, remembering how it was written."""

    token: str

    def __new__(cls, token: str) -> _Token:
        value = super().__new__(cls, float(token.replace("Infinity", "inf")))
        value.token = token
        return value


class _Object(dict[str, Any]):
    """A JSON object that remembers keys written more than once."""

    repeated: tuple[str, ...] = ()


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        obj.repeated = tuple(k for i, k in enumerate(keys) if k in keys[:i])
    return obj


class TooDeep(ValueError):
    """A JSON text nested deeper than MAX_DEPTH: refused before it is parsed."""


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_LONG_INTEGER = re.compile(r"-?\d+")


def nesting_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """Deepest nesting of arrays and objects in a JSON text (brackets inside strings do not
    count), computed without recursion so any input can be measured; 0 when the text has too
    few brackets to be nested deeper than ``limit``."""
    if text.count("[") + text.count("{") <= limit:
        return 0  # cannot be deeper than the limit
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii")
    steps = np.where(np.isin(np.frombuffer(brackets, np.uint8), (ord("["), ord("{"))), 1, -1)
    return int(np.cumsum(steps).max(initial=0))


def parse_json(text: str) -> Any:
    """json.loads that keeps NaN/Infinity visible and records repeated keys (raises ValueError:
    :class:`TooDeep` past MAX_DEPTH, ``json.JSONDecodeError`` for the rest)."""
    if nesting_depth(text) > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_Token, object_pairs_hook=_object)
    except RecursionError:
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # Python's limit on the digits of an integer
        limit = sys.get_int_max_str_digits()
        long = next((m for m in _LONG_INTEGER.finditer(text) if len(m.group()) > limit), None)
        if long is None:
            raise
        message = f"a number with more than {limit} digits"
        raise json.JSONDecodeError(message, text, long.start()) from exc


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_MESSAGE = "must be valid Unicode text, got a lone surrogate escape"


def _number_issues(doc: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, str, str]]:
    """(path, code, message) for non-finite numbers, overflowing integers, repeated keys and
    strings holding a lone surrogate (``"\\ud800"``: valid JSON, but no Unicode text)."""
    if isinstance(doc, dict):
        for key in getattr(doc, "repeated", ()):
            yield (*path, key), "duplicate_key", "is written more than once in this object"
        for key, value in doc.items():
            if _SURROGATE.search(key):
                yield (*path, key), "bad_encoding", _SURROGATE_MESSAGE
            yield from _number_issues(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _number_issues(value, (*path, i))
    elif isinstance(doc, str):
        if _SURROGATE.search(doc):
            yield path, "bad_encoding", _SURROGATE_MESSAGE
    elif isinstance(doc, _Token):
        yield path, "not_finite", f"must be a finite number, got {doc.token}"
    elif isinstance(doc, float) and math.isnan(doc):  # a value from Python, not from JSON text
        yield path, "not_finite", "must be a finite number, got nan"
    elif _overflows(doc):
        yield path, "not_finite", "must be a finite number, got a number too large for a float"


def _overflows(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return is_int and abs(value) > sys.float_info.max


_WS = " \t\n\r"


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def locate(text: str, path: JsonPath) -> int:
    """1-based line of the key (or array item) at ``path`` in a JSON text; the deepest one found."""
    return text.count("\n", 0, offset(text, path)) + 1


def offset(text: str, path: JsonPath) -> int:
    """Character offset of the key (or array item) at ``path``; the deepest one found."""
    decoder = json.JSONDecoder(parse_constant=float)
    pos, found = _skip(text, 0), 0
    for part in path:
        pos, hit = _child(text, pos, part, decoder)
        if hit < 0:
            break
        found = hit
    return found


def _child(text: str, pos: int, part: str | int, decoder: json.JSONDecoder) -> tuple[int, int]:
    """Position of the value of ``part`` inside the container at ``pos``, and of its key."""
    opener = text[pos : pos + 1]
    if opener not in ("{", "["):
        return pos, -1
    pos, index = _skip(text, pos + 1), 0
    while pos < len(text) and text[pos] not in "}]":
        start = pos
        if opener == "{":
            key, pos = scanstring(text, pos + 1)
            pos = _skip(text, _skip(text, pos) + 1)  # past ':'
            hit = key == part
        else:
            hit = index == part
        if hit:
            return pos, start
        _, pos = decoder.raw_decode(text, pos)
        pos = _skip(text, pos)
        pos, index = _skip(text, pos + 1) if text[pos : pos + 1] == "," else pos, index + 1
    return pos, -1


# -- JSON Schema errors -> issues --------------------------------------------------------------
def _strict_integer(_checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


@cache
def _validator_class() -> Any:
    """jsonschema's Draft 2020-12 validator with strict integers (true is no integer), loaded
    on first use: the bulk checks vouch for nearly every document of real data, and importing
    jsonschema costs about 0.1 s of start-up."""
    from jsonschema import Draft202012Validator, validators

    strict = Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer)
    return validators.extend(Draft202012Validator, type_checker=strict)


@cache
def _validator(kind: DocumentKind) -> Any:
    return _validator_class()(document_schema(kind))


def _schema_issues(kind: DocumentKind, doc: Any) -> Iterator[tuple[JsonPath, str, str]]:
    for error in _validator(kind).iter_errors(doc):
        yield from _translate(error)


def _translate(error: ValidationError) -> Iterator[tuple[JsonPath, str, str]]:
    """One jsonschema error -> (path, code, message) items a person can act on."""
    path: JsonPath = tuple(error.absolute_path)
    keyword, expected, got = error.validator, error.validator_value, error.instance
    in_then = "then" in error.absolute_schema_path
    if keyword == "required":
        for name in expected:
            if isinstance(got, dict) and name not in got:
                suffix = " for an ok run" if in_then else ""
                yield (*path, name), "missing", f"is required{suffix}"
    elif keyword == "dependentRequired":
        for trigger, needed in expected.items():
            for name in needed:
                if trigger in got and name not in got:
                    yield (*path, name), "missing", f'is required when "{trigger}" is present'
    elif keyword == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        hint = f" (known fields: {', '.join(known)})" if known else ""
        for name in got:
            if name not in error.schema.get("properties", {}):
                yield (*path, name), "unknown_field", f"is not a known field{hint}"
    elif keyword == "oneOf":
        yield from _one_of(error)
    elif keyword == "type":
        wanted = [expected] if isinstance(expected, str) else expected
        names = " or ".join(_TYPE_NAMES[t] for t in wanted)
        yield path, "wrong_type", f"must be {names}, got {describe(got)}"
    elif keyword == "enum":
        yield path, "not_allowed", f"must be one of {', '.join(expected)}, got {describe(got)}"
    elif keyword == "minimum" and expected == 0:
        yield path, "negative", f"must be >= 0, got {describe(got)}"
    elif keyword == "exclusiveMinimum" and in_then:
        yield path, "not_positive", f"must be > 0 for an ok run, got {describe(got)}"
    elif keyword in _BOUNDS:
        yield path, "out_of_range", f"must be {_BOUNDS[keyword]} {expected}, got {describe(got)}"
    elif keyword == "pattern":
        code = "bad_id" if path and path[-1] in ID_FIELDS else "bad_format"
        yield path, code, f"must match {expected}, got {describe(got)}"
    elif keyword == "maxLength":
        where = "has a name" if "propertyNames" in error.absolute_schema_path else "is a name"
        yield (
            path,
            "too_long",
            (
                f"{where} of {len(got)} characters, more than the limit of "
                f"{expected} ({describe(got)})"
            ),
        )
    elif "propertyNames" in error.absolute_schema_path:
        yield path, "empty", "has an empty name (steps, regions and counters need one)"
    elif keyword in ("minLength", "minItems"):
        yield path, "empty", "must not be empty"
    elif keyword == "contains":
        yield (
            path,
            "no_directional_expectation",
            ("must contain at least one expectation with expect decrease or increase"),
        )
    elif keyword == "const":
        yield path, "not_allowed", f"must be {describe(expected)}, got {describe(got)}"
    else:  # a keyword added to a schema later: jsonschema's own words
        yield path, "invalid", error.message


def _one_of(error: ValidationError) -> Iterator[tuple[JsonPath, str, str]]:
    """The branch of the instance's own type speaks (a breakdown value: number or object)."""
    branches = error.validator_value
    check = _validator_class()
    fitting = [i for i, b in enumerate(branches) if check(b).is_type(error.instance, b.get("type"))]
    if not fitting:
        names = " or ".join(_TYPE_NAMES[b["type"]] for b in branches)
        yield (
            tuple(error.absolute_path),
            "wrong_type",
            f"must be {names}, got {describe(error.instance)}",
        )
        return
    for sub in error.context or ():
        if sub.schema_path and sub.schema_path[0] == fitting[0]:
            yield from _translate(sub)


_BOUNDS = {
    "minimum": ">=",
    "maximum": "<=",
    "exclusiveMinimum": ">",
    "exclusiveMaximum": "<",
}

# A value that is no number or no text hides every other rule of its field.
_DOMINANT = ("not_finite", "bad_encoding")
# When one field breaks several rules, the more specific one is enough.
_SHADOWED_BY = {"negative": "not_positive", "no_directional_expectation": "empty"}


def _dedupe(items: Sequence[tuple[JsonPath, str, str]]) -> list[tuple[JsonPath, str, str]]:
    """One issue per (field, code); a non-finite number hides every other rule of its field."""
    codes: dict[JsonPath, set[str]] = {}
    for path, code, _ in items:
        codes.setdefault(path, set()).add(code)
    out: list[tuple[JsonPath, str, str]] = []
    seen: set[tuple[JsonPath, str]] = set()
    for path, code, message in items:
        here = codes[path]
        dominant = next((c for c in _DOMINANT if c in here), code)
        hidden = _SHADOWED_BY.get(code) in here or code != dominant
        if hidden or (path, code) in seen:
            continue
        seen.add((path, code))
        out.append((path, code, message))
    return out


def in_text_order(
    text: str, items: Sequence[tuple[JsonPath, str, str]]
) -> list[tuple[JsonPath, str, str]]:
    """Problems in the order their fields appear in the text (stable for one field)."""
    return sorted(items, key=lambda item: offset(text, item[0]))


# -- documents --------------------------------------------------------------------------------
def check_document(
    kind: DocumentKind, doc: Any, *, fast: bool = True
) -> list[tuple[JsonPath, str, str]]:
    """Every problem of one parsed document as (path, code, message)."""
    if fast and kind == "measurement" and plainly_valid_run(doc):
        return []
    if kind != "measurement":
        schema_problem = _schema_field(kind, doc)
        if schema_problem is not None:
            return [schema_problem]
    items = list(_number_issues(doc))
    items += _schema_issues(kind, doc)
    items += _semantic_issues(kind, doc)
    return _dedupe(items)


def check_fields(
    kind: DocumentKind, path: JsonPath, values: Mapping[str, Any]
) -> list[tuple[JsonPath, str, str]]:
    """Every problem of some fields of the object at ``path`` of document ``kind`` (the others
    may be absent), by the rules documents are checked with: (field path, code, message)."""
    node = dict(spec(kind, *(str(p) for p in path)), required=[])
    items = list(_number_issues(values))
    items += (
        item for error in _validator_class()(node).iter_errors(values) for item in _translate(error)
    )
    return _dedupe(items)


# -- fast path for measurement lines ------------------------------------------------------------
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


def _schema_field(kind: DocumentKind, doc: Any) -> tuple[JsonPath, str, str] | None:
    """The ``schema`` field first: with an unknown kind or version nothing else can be judged."""
    if not isinstance(doc, dict) or "schema" not in doc:
        return None  # the schema check reports the missing field with everything else
    wanted = schema_id(kind)
    if doc["schema"] == wanted:
        return None
    return (
        ("schema",),
        "unknown_schema",
        f"must be {describe(wanted)}, got {describe(doc['schema'])}",
    )


def _semantic_issues(kind: DocumentKind, doc: Any) -> Iterator[tuple[JsonPath, str, str]]:
    if not isinstance(doc, dict):
        return
    for key in ID_FIELDS:
        value = doc.get(key)
        if isinstance(value, str) and not valid_id(value):
            yield (key,), "bad_id", f"{id_rule()}, got {describe(value)}"
    for key in timestamp_fields(kind):
        value = doc.get(key)
        problem = timestamp_problem(value) if isinstance(value, str) else None
        if problem is not None:
            yield (key,), "bad_timestamp", problem
    if kind == "measurement":
        yield from _breakdown_shape(doc.get("breakdown"))
    if kind == "mechanism":
        yield from _repeated_expectations(doc.get("expectations"))


def _breakdown_shape(breakdown: Any) -> Iterator[tuple[JsonPath, str, str]]:
    if not isinstance(breakdown, dict):
        return
    nested = {isinstance(v, dict) for v in breakdown.values() if isinstance(v, dict | int | float)}
    if len(nested) > 1:
        yield (
            ("breakdown",),
            "mixed_breakdown",
            ("mixes flat {region: seconds} and nested {step: {region: seconds}} entries"),
        )


def _repeated_expectations(expectations: Any) -> Iterator[tuple[JsonPath, str, str]]:
    if not isinstance(expectations, list):
        return
    first: dict[tuple[Any, Any], int] = {}
    for i, item in enumerate(expectations):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        key = (item.get("target"), item["name"])
        if key in first:
            yield (
                ("expectations", i),
                "duplicate_expectation",
                f"repeats ({key[0]}, {key[1]}) of expectations[{first[key]}]",
            )
        else:
            first[key] = i


# -- files ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Document:
    """A parsed, valid JSON document and the digest of its bytes."""

    data: dict[str, Any]
    sha256: str
    text: str

    def line_of(self, *path: str | int) -> int:
        return locate(self.text, path)


def read_bytes(path: Path | str) -> tuple[bytes | None, list[Issue]]:
    """The bytes of one input file: a regular file within its size limit, else an issue."""
    name = os.path.basename(path)
    limit = MAX_MEASUREMENTS_BYTES if name == MEASUREMENTS_FILE else MAX_DOCUMENT_BYTES
    try:
        return read_regular(path, limit), []
    except FileNotFoundError:
        return None, [Issue(str(path), None, "", "missing_file", "file not found")]
    except InputFileError as exc:
        return None, [Issue(str(path), None, "", exc.code, exc.reason)]
    except OSError as exc:
        return None, [Issue(str(path), None, "", "unreadable", f"cannot read: {exc.strerror}")]


def _decode(path: Path, body: bytes) -> tuple[str | None, list[Issue]]:
    try:
        return body.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        return None, [Issue(str(path), line, "", "bad_encoding", "is not valid UTF-8")]


def _json_error(path: Path, exc: ValueError, line_offset: int = 0) -> Issue:
    if isinstance(exc, json.JSONDecodeError):
        where = f" (column {exc.colno})"
        return Issue(
            str(path), line_offset + exc.lineno, "", "bad_json", f"invalid JSON: {exc.msg}{where}"
        )
    return Issue(str(path), line_offset + 1, "", "bad_json", f"invalid JSON: {exc}")


def validate_document(
    path: Path, body: bytes, kind: DocumentKind
) -> tuple[Document | None, list[Issue]]:
    """Parse and check one JSON document (campaign.json, attempt.json, mechanism.json)."""
    text, issues = _decode(path, body)
    if text is None:
        return None, issues
    try:
        doc = parse_json(text)
    except TooDeep as exc:
        return None, [Issue(str(path), None, "", "too_deep", str(exc))]
    except ValueError as exc:
        return None, [_json_error(path, exc)]
    found = [
        Issue(str(path), locate(text, p), field_name(p), code, message)
        for p, code, message in in_text_order(text, check_document(kind, doc))
    ]
    if found:
        return None, found
    return Document(doc, hashlib.sha256(body).hexdigest(), text), []


@dataclass(frozen=True)
class Run:
    """One valid line of measurements.jsonl."""

    line: int
    data: dict[str, Any]


def validate_measurements(path: Path, body: bytes) -> tuple[list[Run] | None, list[Issue]]:
    """Every line of measurements.jsonl (blank lines are skipped), then (side, repetition)."""
    text, issues = _decode(path, body)
    if text is None:
        return None, issues
    parsed: list[Run] = []
    # split on "\n" only: str.splitlines would also split at U+2028 inside a JSON string
    lines = text.split("\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if len(issues) >= MAX_ISSUES_PER_FILE:
            return None, _capped(path, issues, number, lines)
        try:
            doc = parse_json(raw)
        except TooDeep as exc:
            issues.append(Issue(str(path), number, "", "too_deep", str(exc)))
            continue
        except ValueError as exc:
            issues.append(_json_error(path, exc, number - 1))
            continue
        # a \u escape may hide a lone surrogate, which only the full check looks for
        fast = "\\u" not in raw
        problems = in_text_order(raw, check_document("measurement", doc, fast=fast))
        issues += [Issue(str(path), number, field_name(p), c, m) for p, c, m in problems]
        parsed.append(Run(number, doc))
    issues += _duplicate_runs(path, parsed)
    if issues:
        issues = sorted(issues, key=lambda issue: issue.line or 0)
        return None, _capped(path, issues, None, lines)
    return parsed, []


def _capped(path: Path, issues: list[Issue], stopped: int | None, lines: list[str]) -> list[Issue]:
    """The first MAX_ISSUES_PER_FILE issues, then (when more were found, or checking stopped at
    line ``stopped``) one line saying so and how many non-blank lines were not checked."""
    if len(issues) <= MAX_ISSUES_PER_FILE and stopped is None:
        return issues
    unchecked = 0 if stopped is None else sum(1 for raw in lines[stopped - 1 :] if raw.strip())
    more = len(issues) - MAX_ISSUES_PER_FILE
    said = [f"{more} more error(s) not listed"] if more > 0 else []
    if unchecked:
        said.append(f"{unchecked} line(s) from line {stopped} on not checked")
    message = (
        f"stopped after {MAX_ISSUES_PER_FILE} errors: "
        + "; ".join(said)
        + " (the attempt is rejected; fix these and ingest again)"
    )
    return [*issues[:MAX_ISSUES_PER_FILE], Issue(str(path), None, "", "too_many_errors", message)]


def _run_key(doc: Any) -> tuple[str, int] | None:
    """(side, repetition) of a line whose two key fields are well formed, even if others are not."""
    if not isinstance(doc, dict):
        return None
    side, repetition = doc.get("side"), doc.get("repetition")
    if side not in SIDES or not isinstance(repetition, int):
        return None
    if not _strict_integer(None, repetition):
        return None
    return str(side), repetition


def _duplicate_runs(path: Path, runs: Sequence[Run]) -> Iterator[Issue]:
    first: dict[tuple[str, int], int] = {}
    for run in runs:
        key = _run_key(run.data)
        if key is None:
            continue
        if key in first:
            message = f"repeats the {key[0]} run of repetition {key[1]} (line {first[key]})"
            yield Issue(str(path), run.line, "repetition", "duplicate_run", message)
        else:
            first[key] = run.line


def check_directory_id(folder: Path, what: Literal["campaign", "attempt"]) -> list[Issue]:
    """A directory name is checked before it is used for anything else."""
    if valid_id(folder.name):
        return []
    return [
        Issue(
            str(folder),
            None,
            f"{what}_id",
            "bad_id",
            f"directory name {id_rule()}, got {describe(folder.name)}",
        )
    ]


def check_id_matches(path: Path, document: Document, key: str, folder_name: str) -> list[Issue]:
    value = document.data[key]
    if value == folder_name:
        return []
    return [
        Issue(
            str(path),
            document.line_of(key),
            key,
            "id_mismatch",
            f"must equal its directory name {describe(folder_name)}, got {describe(value)}",
        )
    ]


# -- campaigns and attempts -------------------------------------------------------------------


def validate_campaign(
    folder: Path, fast: Callable[[bytes, str], Document | None] | None = None
) -> tuple[Document | None, list[Issue]]:
    """campaign.json of a campaign folder whose name was checked first; ``fast(body, folder
    name)`` may vouch for a valid file first (ingest's bulk check), else every rule is checked
    here."""
    issues = check_directory_id(folder, "campaign")
    if issues:
        return None, issues
    path = folder / CAMPAIGN_FILE
    body, issues = read_bytes(path)
    if body is None:
        return None, issues
    vouched = fast(body, folder.name) if fast is not None else None
    if vouched is not None:
        return vouched, []
    document, issues = validate_document(path, body, "campaign")
    if document is None:
        return None, issues
    issues = check_id_matches(path, document, "campaign_id", folder.name)
    return (None, issues) if issues else (document, [])


@dataclass(frozen=True)
class AttemptFiles:
    """The bytes of one attempt folder's input files and their digest."""

    folder: Path
    bodies: dict[str, bytes]

    @cached_property  # ingest asks twice: is the attempt unchanged, and for its row
    def inputs_sha256(self) -> str:
        """sha256 over (name, size, bytes) of each input file, in name order."""
        digest = hashlib.sha256()
        for name in sorted(self.bodies):
            body = self.bodies[name]
            digest.update(name.encode() + b"\0" + len(body).to_bytes(8, "big"))
            digest.update(body)
        return digest.hexdigest()


def read_attempt_files(folder: Path) -> tuple[AttemptFiles | None, list[Issue]]:
    """attempt.json and measurements.jsonl must exist; mechanism.json is optional."""
    issues = check_directory_id(folder, "attempt")
    if issues:
        return None, issues
    bodies: dict[str, bytes] = {}
    base = str(folder)  # plain strings: a Path per file cost more than reading it
    for name in (ATTEMPT_FILE, MEASUREMENTS_FILE, MECHANISM_FILE):
        body, problems = read_bytes(os.path.join(base, name))
        if body is not None:
            bodies[name] = body
        elif name != MECHANISM_FILE or problems[0].code != "missing_file":
            issues += problems
    return (None, issues) if issues else (AttemptFiles(folder, bodies), [])


@dataclass(frozen=True)
class ValidAttempt:
    """One attempt whose every document passed validation."""

    files: AttemptFiles
    attempt: Document
    mechanism: Document | None
    runs: list[Run]

    @property
    def attempt_id(self) -> str:
        return str(self.attempt.data["attempt_id"])


def validate_attempt(
    files: AttemptFiles, *, benchmark: bool
) -> tuple[ValidAttempt | None, list[Issue]]:
    """Every document of one attempt; any issue rejects the attempt whole."""
    folder = files.folder
    attempt, issues = validate_document(
        folder / ATTEMPT_FILE, files.bodies[ATTEMPT_FILE], "attempt"
    )
    if attempt is not None:
        issues += check_id_matches(folder / ATTEMPT_FILE, attempt, "attempt_id", folder.name)
    mechanism = None
    if MECHANISM_FILE in files.bodies:
        mechanism, problems = _validate_mechanism(files, benchmark=benchmark)
        issues += problems
    runs, problems = validate_measurements(
        folder / MEASUREMENTS_FILE, files.bodies[MEASUREMENTS_FILE]
    )
    issues += problems
    if issues or attempt is None or runs is None:
        return None, issues
    return ValidAttempt(files, attempt, mechanism, runs), []


def _validate_mechanism(
    files: AttemptFiles, *, benchmark: bool
) -> tuple[Document | None, list[Issue]]:
    path = files.folder / MECHANISM_FILE
    if benchmark:
        message = "a benchmark campaign refuses mechanism declarations (remove mechanism.json)"
        return None, [Issue(str(path), None, "", "mechanism_in_benchmark", message)]
    return validate_document(path, files.bodies[MECHANISM_FILE], "mechanism")
