"""The frozen campaign policy: defaults, canonical form and digest (contract §2.1)."""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable
from typing import Any

from pipeline.contracts import document_schema

POLICY_DEFAULTS: dict[str, Any] = {
    "decision": "median",
    "require_explanation": False,
    "min_improvement_pct": 1.0,
    "confidence": 0.95,
    "resamples": 10000,
    "seed": 0,
    "min_pairs": 5,
    "interval": "percentile",
}
POLICY_FIELDS: tuple[str, ...] = tuple(POLICY_DEFAULTS)
"""The policy's fields, in the documented order; each is a column of table `campaigns`."""

INTERVAL_METHODS: tuple[str, ...] = ("percentile", "expanded_percentile", "student_t")
"""Values of the policy field `interval` (docs/assess.md: interval methods)."""

_OMITTED_WHEN_DEFAULT = ("interval",)
"""Fields added after v1: left out of the canonical form when they hold their default, so a
campaign written before they existed keeps its digest."""


def with_defaults(policy: dict[str, Any]) -> dict[str, Any]:
    """The policy with every missing field set to its default; given values are kept as given."""
    return {**POLICY_DEFAULTS, **policy}


def canonical_policy(policy: dict[str, Any]) -> bytes:
    """The defaults-filled policy, sorted keys, compact separators, UTF-8; `interval` is left
    out when it is `percentile` (campaigns written before the field existed keep their digest)."""
    filled = {
        k: v
        for k, v in with_defaults(policy).items()
        if not (k in _OMITTED_WHEN_DEFAULT and v == POLICY_DEFAULTS[k])
    }
    return json.dumps(filled, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


def policy_sha256(policy: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_policy(policy)).hexdigest()


_BOUNDS: tuple[tuple[str, str, Callable[[Any, Any], bool]], ...] = (
    ("minimum", ">=", operator.ge),
    ("exclusiveMinimum", ">", operator.gt),
    ("maximum", "<=", operator.le),
    ("exclusiveMaximum", "<", operator.lt),
)


def bound_problem(key: str, value: float) -> str | None:
    """Why a number is outside the bounds campaign.schema.json gives policy field ``key`` (the
    one place they are written, so ingest and ``--what-if`` agree); None when inside."""
    spec = document_schema("campaign")["properties"]["policy"]["properties"][key]
    for keyword, sign, holds in _BOUNDS:
        if keyword in spec and not holds(value, spec[keyword]):
            return f"must be {sign} {spec[keyword]}"
    return None
