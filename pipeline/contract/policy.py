"""The frozen campaign policy: canonical form and digest (contract §2.1); its fields, defaults
and bounds are declared in campaign.schema.json (pipeline.contract.declare)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pipeline.contract.declare import INTERVAL_METHODS, POLICY_DEFAULTS, bounds

__all__ = [
    "ADDED_AFTER_V1",
    "INTERVAL_METHODS",
    "POLICY_DEFAULTS",
    "POLICY_FIELDS",
    "bound_problem",
]

POLICY_FIELDS: tuple[str, ...] = tuple(POLICY_DEFAULTS)
"""The policy's fields, in the documented order; each is a column of table `campaigns`."""

ADDED_AFTER_V1: tuple[str, ...] = ("interval", "decide", "margin_pct")
"""Fields added after v1: left out of the canonical form when they hold their default, so a
campaign written before they existed keeps its digest; a store written before them has nulls in
their columns of table `campaigns`, read as the default."""
_OMITTED_WHEN_DEFAULT = ADDED_AFTER_V1


def with_defaults(policy: dict[str, Any]) -> dict[str, Any]:
    """The policy with every missing field set to its default; given values are kept as given."""
    return {**POLICY_DEFAULTS, **policy}


def canonical_policy(policy: dict[str, Any]) -> bytes:
    """The defaults-filled policy, sorted keys, compact separators, UTF-8; the fields added
    after v1 (`interval`, `decide`, `margin_pct`) are left out when they hold their default
    (campaigns written before the fields existed keep their digest)."""
    filled = {
        k: v
        for k, v in with_defaults(policy).items()
        if not (k in _OMITTED_WHEN_DEFAULT and v == POLICY_DEFAULTS[k])
    }
    return json.dumps(filled, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


PolicyValue = str | bool | int | float
"""A policy field's value as Python holds it (``decision``: "paired", ``confidence``: 0.9)."""


def policy_text(value: PolicyValue) -> str:
    """A policy value as the command line and the outputs write it: ``true``, ``0.9``, ``50``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


def policy_sha256(policy: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_policy(policy)).hexdigest()


def bound_problem(key: str, value: float) -> str | None:
    """Why a number is outside the bounds campaign.schema.json gives policy field ``key`` (so
    ingest and ``--what-if`` agree); None when inside."""
    return bounds("campaign", "policy", key).problem(value)


SEQUENTIAL_PLAN = ("first_look", "look_every", "max_pairs")
"""The fields of attempt.json's ``sequential`` object that plan the looks: the `sequential_t`
interval's constant depends on them, so they are digested when the round starts
(``sequential_sha256``); ``looks`` and ``stopped`` are written as the round goes."""


def commands_sha256(commands: dict[str, Any]) -> str:
    """sha256 of attempt.json's ``commands`` in canonical form (sorted keys, compact
    separators, UTF-8): what ``campaign final --confirm`` would run, as the store first saw it."""
    text = json.dumps(commands, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sequential_sha256(sequential: dict[str, Any]) -> str:
    """sha256 of the plan's canonical form: the SEQUENTIAL_PLAN fields, sorted keys, compact
    separators (``{"first_look":6,"look_every":2,"max_pairs":40}``)."""
    plan = {key: sequential[key] for key in SEQUENTIAL_PLAN}
    return hashlib.sha256(
        json.dumps(plan, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
