"""The one declaration of every input rule: ``schemas/*.schema.json``, and what derives from it.

The JSON Schemas are the declaration and everything else is read from them: the precise error
path (jsonschema over the files, :mod:`pipeline.ingestion.rules`), the fast decoder (msgspec
structs built here from the same properties), the column checks of the bulk reader, the policy's
defaults and bounds, and the CLI's choices and ranges (tests hold the docs' policy table to
it). JSON Schema rather than msgspec structs is
the source because it can say every rule (``if``/``then``, ``dependentRequired``, ``contains``)
while msgspec's ``Meta`` says only types, enumerations, patterns and bounds, and because it is
the published contract other tools read. So a new bound or allowed value is written once, in
the schema file, and every path follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, cast

from pipeline.contract.schemas import document_schema

if TYPE_CHECKING:
    import polars as pl

DocumentKind = Literal["campaign", "attempt", "mechanism", "measurement"]


def spec(kind: DocumentKind, *path: str) -> dict[str, Any]:
    """The schema of the field at ``path`` of document ``kind`` (nested objects by name)."""
    node: dict[str, Any] = document_schema(kind)
    for name in path:
        node = node["properties"][name]
    return node


def choices(kind: DocumentKind, *path: str) -> tuple[str, ...]:
    """The allowed values of an enumerated field."""
    return tuple(spec(kind, *path)["enum"])


@dataclass(frozen=True)
class Bounds:
    """The numeric bounds of a field; ``*_open`` when the bound itself is excluded."""

    low: float | None
    high: float | None
    low_open: bool
    high_open: bool
    integer: bool

    def problem(self, value: float) -> str | None:
        """Why ``value`` is outside, in the precise path's words; None when inside."""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return f"must be {'>' if self.low_open else '>='} {self.low}"
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return f"must be {'<' if self.high_open else '<='} {self.high}"
        return None


def bounds(kind: DocumentKind, *path: str) -> Bounds:
    node = spec(kind, *path)
    return bounds_of(node)


def bounds_of(node: dict[str, Any]) -> Bounds:
    low_open = "exclusiveMinimum" in node
    high_open = "exclusiveMaximum" in node
    return Bounds(
        node.get("exclusiveMinimum", node.get("minimum")),
        node.get("exclusiveMaximum", node.get("maximum")),
        low_open,
        high_open,
        node.get("type") == "integer",
    )


def _unanchored(pattern: str) -> str:
    return pattern.removeprefix("^").removesuffix("$")


ID_FIELDS = ("campaign_id", "attempt_id")
"""The identifier fields; each must match the one id pattern and equal its folder's name."""
ID_PATTERN = re.compile(_unanchored(spec("campaign", "campaign_id")["pattern"]))
"""Identifiers (contract §2); also the only names recorded folders may take."""
MAX_NAME_LENGTH: int = spec("measurement", "counters")["propertyNames"]["maxLength"]
"""Longest step, region or counter name, in characters (``maxLength`` in the schemas: every name
of a step, region or counter there carries it, tests/test_contracts.py holds them equal). Longer
than any demangled kernel name profilers print (templated CUDA kernels reach one to two
thousand), short enough that a name cannot carry megabytes into every table and message."""
Side = Literal["baseline", "candidate"]
"""The sides of a run, written out for type checkers (a test holds them equal to the schema's)."""
SIDES: tuple[Side, Side] = cast("tuple[Side, Side]", choices("measurement", "side"))
RUN_STATUSES: tuple[str, ...] = choices("measurement", "status")
OK_STATUS: str = document_schema("measurement")["if"]["properties"]["status"]["const"]
"""The run status that needs a metric (the schema's ``if``/``then``)."""
VALUE_MINIMUM: float = spec("measurement", "counters")["additionalProperties"]["minimum"]
"""The least value of a counter or a breakdown region (every run value is at least this)."""
POLICY_DEFAULTS: dict[str, Any] = {
    name: field["default"] for name, field in spec("campaign", "policy")["properties"].items()
}
"""Every policy field and its default, in the documented order."""
SCHEDULE_DEFAULTS: dict[str, int] = {
    name: field["default"]
    for name, field in spec("attempt", "sequential")["properties"].items()
    if "default" in field
}
"""The recorder's plan of looks (first_look, look_every, max_pairs): the schedule sequential_t's
targets were calibrated on; `round --until-decided`, `plan` and `calibrate --sequential` start
from it."""
OK_METRIC: Bounds = bounds_of(document_schema("measurement")["then"]["properties"]["metric"])
"""The metric's bounds for an ok run (the schema's ``then``: > 0)."""
INTERVAL_METHODS: tuple[str, ...] = choices("campaign", "policy", "interval")
"""Values of the policy field ``interval`` (docs/assess.md: interval methods)."""


def schema_id(kind: DocumentKind) -> str:
    """The value of a document's ``schema`` field, ``explain-pipeline/<kind>/v1``."""
    return str(spec(kind, "schema")["const"])


@cache
def timestamp_fields(kind: DocumentKind) -> tuple[str, ...]:
    """The top-level fields of ``kind`` holding an RFC 3339 timestamp."""
    props = spec(kind)["properties"]
    return tuple(name for name, field in props.items() if field.get("format") == "date-time")


# -- the fast decoder: msgspec structs ----------------------------------------------------------
@cache
def struct(kind: DocumentKind) -> Any:
    """The msgspec type of document ``kind``: its fields, types, enumerations, patterns and
    bounds as the schema gives them (rules across fields are the callers')."""
    return _msgspec_type(document_schema(kind), kind.capitalize())


def _meta(node: dict[str, Any]) -> dict[str, Any]:
    found = {
        "pattern": node.get("pattern"),
        "min_length": node.get("minLength", node.get("minItems")),
        "max_length": node.get("maxLength"),
        "ge": node.get("minimum"),
        "le": node.get("maximum"),
        "gt": node.get("exclusiveMinimum"),
        "lt": node.get("exclusiveMaximum"),
    }
    return {k: v for k, v in found.items() if v is not None}


def _msgspec_type(node: dict[str, Any], name: str) -> Any:
    from typing import Annotated, Union

    import msgspec

    if "const" in node:
        return Literal[node["const"]]
    if "enum" in node:
        return Literal[tuple(node["enum"])]
    if "oneOf" in node:
        members = tuple(_msgspec_type(b, f"{name}{i}") for i, b in enumerate(node["oneOf"]))
        return Union[members]  # noqa: UP007  (built at run time from a tuple)
    kind = node["type"]
    base: Any
    if kind == "object" and "properties" in node:
        return _struct(node, name)
    if kind == "object":
        key: Any = str
        names = node.get("propertyNames", {})
        if names:
            key = Annotated[
                str,
                msgspec.Meta(min_length=names.get("minLength"), max_length=names.get("maxLength")),
            ]
        base = dict.__class_getitem__((key, _msgspec_type(node["additionalProperties"], name)))
    elif kind == "array":
        base = list.__class_getitem__(_msgspec_type(node["items"], name))
    else:
        base = {"string": str, "integer": int, "number": float, "boolean": bool}[kind]
    meta = _meta(node)
    return Annotated[base, msgspec.Meta(**meta)] if meta else base


def _struct(node: dict[str, Any], name: str) -> Any:
    """A Struct with the required fields first, then the optional ones (unset when absent)."""
    import msgspec

    required = node.get("required", [])
    props = node["properties"]
    types = {f: _msgspec_type(props[f], f"{name}_{f}") for f in props}
    fields: list[Any] = [(f, types[f]) for f in props if f in required]
    fields += [(f, types[f] | msgspec.UnsetType, msgspec.UNSET) for f in props if f not in required]
    forbid = node.get("additionalProperties") is False
    return msgspec.defstruct(name, fields, forbid_unknown_fields=forbid)


# -- the bulk reader's checks: column expressions -----------------------------------------------
def column_rules(kind: DocumentKind, present: set[str]) -> pl.Expr:
    """Per row of a frame holding the ``present`` top-level fields of ``kind`` as columns:
    whether their enumerations and bounds hold (a number must also be finite), and the rules
    of the schema's ``if``/``then``. A null in a present column is not valid."""
    import polars as pl

    props = spec(kind)["properties"]
    expr = pl.lit(True)
    for name in sorted(present & props.keys()):
        field = props[name]
        if "enum" in field:
            expr &= pl.col(name).is_in(list(field["enum"]))
        if field.get("type") in ("integer", "number"):
            expr &= _within(pl.col(name), bounds_of(field))
    return expr & conditional_rules(kind, present)


def conditional_rules(kind: DocumentKind, present: set[str]) -> pl.Expr:
    """The schema's ``if``/``then`` (e.g. an ok run needs a metric > 0) as a column expression."""
    import polars as pl

    schema = document_schema(kind)
    if "if" not in schema:
        return pl.lit(True)
    ((field, condition),) = schema["if"]["properties"].items()
    holds = pl.lit(True)
    for name in schema["then"].get("required", []):
        holds &= pl.col(name).is_not_null() if name in present else pl.lit(False)
    for name, rule in schema["then"].get("properties", {}).items():
        if name in present:
            holds &= _within(pl.col(name), bounds_of(rule))
    return (pl.col(field) != condition["const"]) | holds


def _within(column: pl.Expr, limits: Bounds) -> pl.Expr:
    expr = column.is_finite() if not limits.integer else column.is_not_null()
    if limits.low is not None:
        expr &= column > limits.low if limits.low_open else column >= limits.low
    if limits.high is not None:
        expr &= column < limits.high if limits.high_open else column <= limits.high
    return expr
