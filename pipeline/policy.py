"""The frozen campaign policy: defaults, canonical form and digest (SPEC 2.1)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

POLICY_DEFAULTS: dict[str, Any] = {
    "decision": "median",
    "require_explanation": False,
    "min_improvement_pct": 1.0,
    "confidence": 0.95,
    "resamples": 10000,
    "seed": 0,
    "min_pairs": 5,
}
POLICY_FIELDS: tuple[str, ...] = tuple(POLICY_DEFAULTS)
"""The policy's fields, in SPEC 2.1's order; each is a column of table `campaigns`."""


def with_defaults(policy: dict[str, Any]) -> dict[str, Any]:
    """The policy with every missing field set to its default; given values are kept as given."""
    return {**POLICY_DEFAULTS, **policy}


def canonical_policy(policy: dict[str, Any]) -> bytes:
    """SPEC 2.1: the defaults-filled policy, sorted keys, compact separators, UTF-8."""
    return json.dumps(
        with_defaults(policy), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def policy_sha256(policy: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_policy(policy)).hexdigest()
