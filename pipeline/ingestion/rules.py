"""Every problem of one parsed document (:func:`check_document`) or of some fields of one
(:func:`check_fields`) as (path, code, message): the JSON Schemas (jsonschema's errors in words a
person can act on), and the rules a schema cannot say:

- an unknown ``schema`` kind or version is ``unknown_schema`` (the rest of that document is not
  checked: it may follow another format);
- timestamps are RFC 3339 with a time zone (``bad_timestamp``);
- ids match ``ID_PATTERN`` exactly (``bad_id``);
- a breakdown is either flat ``{region: s}`` or nested ``{step: {region: s}}``
  (``mixed_breakdown``);
- ``(target, name)`` of expectations is unique (``duplicate_expectation``).

The JSON text's own problems (``not_finite``, ``duplicate_key``, ``bad_encoding``) come from
jsontext.py; one issue per field and code is kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from pipeline.contract.declare import ID_FIELDS, DocumentKind, schema_id, spec, timestamp_fields
from pipeline.contract.layout import id_rule, valid_id
from pipeline.contract.schemas import document_schema
from pipeline.ingestion.jsontext import JsonPath, _number_issues, describe, offset
from pipeline.ingestion.plain import plainly_valid_run
from pipeline.ingestion.timestamps import timestamp_problem

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError


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
