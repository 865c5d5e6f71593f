"""The JSON Schemas of the input documents and the table column types agree field by field."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.contract.schemas import PARTITION, document_schema, table, tables

# document, path into the document -> (table, column). Every field that is stored is listed here.
STORED_FIELDS: list[tuple[str, tuple[str, ...], str, str]] = [
    ("campaign", ("campaign_id",), "campaigns", "campaign_id"),
    ("campaign", ("kind",), "campaigns", "kind"),
    ("campaign", ("created_at",), "campaigns", "created_at"),
    ("campaign", ("metric", "name"), "campaigns", "metric_name"),
    ("campaign", ("metric", "better"), "campaigns", "metric_better"),
    ("campaign", ("policy", "decision"), "campaigns", "decision"),
    ("campaign", ("policy", "require_explanation"), "campaigns", "require_explanation"),
    ("campaign", ("policy", "min_improvement_pct"), "campaigns", "min_improvement_pct"),
    ("campaign", ("policy", "confidence"), "campaigns", "confidence"),
    ("campaign", ("policy", "resamples"), "campaigns", "resamples"),
    ("campaign", ("policy", "seed"), "campaigns", "seed"),
    ("campaign", ("policy", "min_pairs"), "campaigns", "min_pairs"),
    ("campaign", ("policy_sha256",), "campaigns", "policy_sha256"),
    ("attempt", ("attempt_id",), "attempts", "attempt_id"),
    ("attempt", ("round",), "attempts", "round"),
    ("attempt", ("candidate",), "attempts", "candidate"),
    ("attempt", ("baseline",), "attempts", "baseline"),
    ("attempt", ("status",), "attempts", "status"),
    ("attempt", ("declared_at",), "attempts", "declared_at"),
    ("attempt", ("started_at",), "attempts", "started_at"),
    ("attempt", ("mechanism_sha256",), "attempts", "mechanism_sha256"),
    ("attempt", ("sequential_sha256",), "attempts", "sequential_sha256"),
    ("attempt", ("order_seed",), "attempts", "order_seed"),
    ("attempt", ("recorder",), "attempts", "recorder"),
    ("attempt", ("suite_metric",), "attempts", "suite_metric"),
    ("attempt", ("environment",), "attempts", "environment"),
    ("attempt", ("sequential", "first_look"), "attempts", "sequential_first_look"),
    ("attempt", ("sequential", "look_every"), "attempts", "sequential_look_every"),
    ("attempt", ("sequential", "max_pairs"), "attempts", "sequential_max_pairs"),
    ("attempt", ("sequential", "looks"), "attempts", "sequential_looks"),
    ("attempt", ("sequential", "stopped"), "attempts", "sequential_stopped"),
    ("attempt", ("kind",), "attempts", "kind"),
    ("attempt", ("confirms",), "attempts", "confirms"),
    ("attempt", ("chosen",), "attempts", "chosen"),
    ("attempt", ("measured",), "attempts", "measured"),
    ("attempt", ("commands", "baseline", "command"), "attempts", "baseline_command"),
    ("attempt", ("commands", "baseline", "cwd"), "attempts", "baseline_cwd"),
    ("attempt", ("commands", "candidate", "command"), "attempts", "candidate_command"),
    ("attempt", ("commands", "candidate", "cwd"), "attempts", "candidate_cwd"),
    ("mechanism", ("hypothesis",), "attempts", "hypothesis"),
    ("mechanism", ("expectations", "*", "target"), "expectations", "target"),
    ("mechanism", ("expectations", "*", "name"), "expectations", "name"),
    ("mechanism", ("expectations", "*", "expect"), "expectations", "expect"),
    ("measurement", ("side",), "samples", "side"),
    ("measurement", ("repetition",), "samples", "repetition"),
    ("measurement", ("status",), "samples", "status"),
    ("measurement", ("metric",), "samples", "metric"),
    ("measurement", ("order",), "samples", "order"),
    ("measurement", ("started_at",), "samples", "started_at"),
    ("measurement", ("finished_at",), "samples", "finished_at"),
    ("measurement", ("breakdown", "*"), "breakdown", "seconds"),
    ("measurement", ("counters", "*"), "counters", "value"),
]

JSON_TO_COLUMN = {"integer": "int64", "number": "float64", "boolean": "bool", "string": "string"}


def _resolve(schema: dict[str, Any], path: tuple[str, ...]) -> tuple[dict[str, Any], bool]:
    """The sub-schema at ``path`` and whether every step on the way is required."""
    required = True
    node = schema
    for key in path:
        if key == "*":
            node = node.get("items") or node["additionalProperties"]
            if "oneOf" in node:  # breakdown: a step object or a flat region value
                node = next(o for o in node["oneOf"] if o.get("type") == "object")
                node = node["additionalProperties"]
            continue
        required = required and key in node.get("required", [])
        node = node["properties"][key]
    return node, required


def _column_type(node: dict[str, Any]) -> str:
    if "enum" in node:
        assert all(isinstance(v, str) for v in node["enum"])
        return "string"
    if node.get("format") == "date-time":
        return "timestamp"
    if node.get("type") in ("object", "array"):  # stored as JSON text (environment, looks)
        return "string"
    return JSON_TO_COLUMN[node["type"]]


@pytest.mark.parametrize(("document", "path", "table_name", "column"), STORED_FIELDS)
def test_document_field_matches_its_column(
    document: str, path: tuple[str, ...], table_name: str, column: str
) -> None:
    node, required = _resolve(document_schema(document), path)
    declared = {c.name: c for c in table(table_name).columns}[column]
    assert declared.type == _column_type(node), f"{document}:{'.'.join(path)} vs {column}"
    has_default = "default" in node
    if not required and not has_default and document != "measurement":
        assert declared.nullable, f"{table_name}.{column} must be nullable: optional in {document}"


def test_every_input_document_field_is_stored_or_deliberately_not() -> None:
    not_stored = {
        ("campaign", "schema"),
        ("campaign", "metric"),
        ("campaign", "policy"),
        ("attempt", "schema"),
        ("mechanism", "schema"),
        ("mechanism", "expectations"),
        ("measurement", "breakdown"),
        ("measurement", "counters"),
    }
    listed = {(doc, path[0]) for doc, path, _, _ in STORED_FIELDS}
    for document in ("campaign", "attempt", "mechanism", "measurement"):
        for field in document_schema(document)["properties"]:
            assert (document, field) in listed | not_stored, f"{document}.{field} is not stored"


def test_every_table_is_partitioned_by_campaign_and_keys_are_columns() -> None:
    for spec in tables().values():
        assert spec.columns[0].name == PARTITION
        assert set(spec.key) <= set(spec.names), spec.name
        assert len(set(spec.names)) == len(spec.names), spec.name


def test_spec_columns_of_the_output_tables_are_declared() -> None:
    spec_comparisons = (
        "campaign_id attempt_id quantity name n_pairs estimate low high direction status reason"
    ).split()
    spec_assessments = (
        "campaign_id attempt_id round candidate status n_pairs n_baseline_ok n_candidate_ok "
        "n_unpaired_baseline n_unpaired_candidate n_failed improvement_pct median_verdict "
        "median_reason paired_estimate paired_low paired_high paired_verdict paired_reason "
        "share_speedup explanation decision require_explanation verdict reason "
        "statistical_significance eligible best policy_sha256"
    ).split()
    assert table("comparisons").names[: len(spec_comparisons)] == spec_comparisons
    assert table("assessments").names[: len(spec_assessments)] == spec_assessments
