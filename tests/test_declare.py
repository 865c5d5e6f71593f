"""Each input rule is declared once, in schemas/*.schema.json, and every path reads it from there:
the fast decoder, the CLI's choices and ranges, the policy defaults and the docs' policy table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import click
import msgspec
import pytest

from pipeline.cli import cli
from pipeline.contract.declare import (
    ID_PATTERN,
    INTERVAL_METHODS,
    POLICY_DEFAULTS,
    SIDES,
    Side,
    spec,
    struct,
)
from pipeline.contract.schemas import document_schema

ROOT = Path(__file__).resolve().parent.parent
POLICY = document_schema("campaign")["properties"]["policy"]["properties"]


def _option(command: list[str], name: str) -> click.Parameter:
    found: click.Command | None = cli
    context = click.Context(cli)
    for word in command:
        assert isinstance(found, click.Group)
        found = found.get_command(context, word)
    assert found is not None
    return next(p for p in found.params if p.name == name)


def test_the_cli_offers_what_the_schema_allows() -> None:
    start = ["campaign", "start"]
    interval = _option(start, "interval").type
    assert isinstance(interval, click.Choice) and tuple(interval.choices) == INTERVAL_METHODS
    for name in ("min_pairs", "resamples", "min_improvement_pct", "confidence"):
        given = _option(start, name).type
        assert isinstance(given, click.IntRange | click.FloatRange)
        field = POLICY[name]
        assert given.min == field.get("minimum", field.get("exclusiveMinimum"))
        assert given.max == field.get("maximum", field.get("exclusiveMaximum"))
        assert given.min_open == ("exclusiveMinimum" in field)
    side = _option(["import"], "side").type
    assert isinstance(side, click.Choice) and tuple(side.choices) == ("baseline", "candidate")


@pytest.mark.parametrize(
    ("kind", "line", "valid"),
    [
        ("campaign", {"policy": {"min_pairs": 4}}, False),
        ("campaign", {"policy": {"min_pairs": 5}}, True),
        ("campaign", {"policy": {"interval": "bca"}}, False),
        ("campaign", {"campaign_id": "-x"}, False),
        ("measurement", {"repetition": -1}, False),
        ("measurement", {"order": 2}, False),
        ("measurement", {"breakdown": {"": 1.0}}, False),
    ],
)
def test_the_fast_decoder_keeps_the_schemas_bounds(
    kind: str, line: dict[str, object], valid: bool
) -> None:
    base: dict[str, object] = {
        "measurement": {"side": "baseline", "repetition": 0, "status": "ok", "metric": 1.0},
        "campaign": {
            "schema": "explain-pipeline/campaign/v1",
            "campaign_id": "c1",
            "kind": "project",
            "created_at": "2026-11-01T10:00:00Z",
            "metric": {"name": "s", "better": "lower"},
            "policy": {},
            "policy_sha256": "0" * 64,
        },
    }[kind]  # type: ignore[assignment]
    body = msgspec.json.encode({**base, **line})
    decoder = msgspec.json.Decoder(struct(kind))
    if valid:
        decoder.decode(body)
    else:
        with pytest.raises(msgspec.ValidationError):
            decoder.decode(body)


def test_policy_defaults_are_the_schemas() -> None:
    assert {name: field["default"] for name, field in POLICY.items()} == POLICY_DEFAULTS
    assert ID_PATTERN.pattern == spec("attempt", "attempt_id")["pattern"].strip("^$")


@pytest.mark.parametrize("page", ["docs/contract.md", "docs/zh/contract.md"])
def test_the_docs_policy_table_says_the_declared_defaults_and_bounds(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    cells = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(r"^\| `(\w+)` \| `([^`]+)` \| (.+) \|$", text, re.MULTILINE)
    }
    assert set(cells) == set(POLICY), page
    for name, field in POLICY.items():
        default, allowed = cells[name]
        assert default == str(field["default"]).lower().replace("none", "null"), name
        allowed = allowed.replace(",", "").replace("2^63−1", str(2**63 - 1))
        for value in field.get("enum", []):
            assert f"`{value}`" in allowed, (name, value)
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in field:
                assert re.search(rf"(?<![\d.]){field[key]}(?![\d.])", allowed), (name, key)


def test_no_rule_is_retyped_in_the_code() -> None:
    """The id pattern, the interval methods and the policy bounds appear in pipeline/ only as
    reads of the schema."""
    retyped = [
        re.escape("[A-Za-z0-9][A-Za-z0-9._-]"),
        r'"percentile",\s*"expanded_percentile"',
        r"1_000_000|1000000",
        r'"baseline",\s*"candidate"\]',
        r'"median",\s*"paired"',
    ]
    assert get_args(Side) == SIDES == tuple(spec("measurement", "side")["enum"])
    found = [
        f"{path.relative_to(ROOT)}: {pattern}"
        for path in sorted((ROOT / "pipeline").rglob("*.py"))
        if path.name != "declare.py"  # where the sides are written out for type checkers
        for pattern in retyped
        if re.search(pattern, path.read_text(encoding="utf-8"))
    ]
    assert not found, found
