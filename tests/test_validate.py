"""One test per validation rule: the exact error line (file:line: field "x": reason [code])."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import BASE_RUN, RUN_FIELDS, some_of
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingestion.files import Issue, validate_document, validate_measurements
from pipeline.ingestion.folders import (
    AttemptFiles,
    check_directory_id,
    read_attempt_files,
    validate_attempt,
    validate_campaign,
)
from pipeline.ingestion.jsontext import parse_json
from pipeline.ingestion.plain import plainly_valid_run
from pipeline.ingestion.rules import check_document
from pipeline.ingestion.timestamps import parse_timestamp

M = Path("a/c1/r1/measurements.jsonl")
OK_RUN = {"side": "baseline", "repetition": 0, "status": "ok", "metric": 0.04}


def lines_of(*runs: str | dict[str, Any]) -> list[str]:
    """Issues of a measurements.jsonl made of these lines (dicts are dumped as JSON)."""
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in runs) + "\n"
    return [str(i) for i in validate_measurements(M, text.encode())[1]]


def run(**changes: Any) -> dict[str, Any]:
    return {**OK_RUN, **changes}


# -- measurements.jsonl -------------------------------------------------------------------
def test_valid_lines_have_no_issue() -> None:
    nested = run(breakdown={"s0": {"mlp": 0.01}}, counters={"launches": 3})
    flat = run(side="candidate", breakdown={"mlp": 0.01})
    assert (
        lines_of(nested, flat, "", {"side": "baseline", "repetition": 1, "status": "failed"}) == []
    )


def test_malformed_json_line() -> None:
    assert lines_of(run(), '{"side": "baseline", "repetition": 1') == [
        f"{M}:2: invalid JSON: Expecting ',' delimiter (column 37) [bad_json]"
    ]


def test_wrong_type() -> None:
    assert lines_of(run(repetition="3")) == [
        f'{M}:1: field "repetition": must be an integer, got "3" [wrong_type]'
    ]


def test_integer_written_as_float_is_a_wrong_type() -> None:
    assert lines_of(run(repetition=1.0)) == [
        f'{M}:1: field "repetition": must be an integer, got 1.0 [wrong_type]'
    ]


def test_line_that_is_not_an_object() -> None:
    assert lines_of("[1, 2]") == [f"{M}:1: must be an object, got an array [wrong_type]"]


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_tokens(token: str) -> None:
    line = '{"side": "baseline", "repetition": 0, "status": "ok", "metric": ' + token + "}"
    assert lines_of(line) == [
        f'{M}:1: field "metric": must be a finite number, got {token} [not_finite]'
    ]


def test_number_too_large_for_a_float() -> None:
    line = (
        '{"side": "baseline", "repetition": 0, "status": "ok", "metric": 1, '
        '"counters": {"dram_bytes": 1e400}}'
    )
    assert lines_of(line) == [
        f'{M}:1: field "counters.dram_bytes": must be a finite number, got a number too large '
        "for a float [not_finite]"
    ]


def test_negative_number_names_the_nested_field() -> None:
    assert lines_of(run(breakdown={"decode-0": {"mlp": -0.5}})) == [
        f'{M}:1: field "breakdown.decode-0.mlp": must be >= 0, got -0.5 [negative]'
    ]


@pytest.mark.parametrize("metric", [-0.4, 0])
def test_metric_of_an_ok_run_must_be_positive(metric: float) -> None:
    assert lines_of(run(metric=metric)) == [
        f'{M}:1: field "metric": must be > 0 for an ok run, got {metric} [not_positive]'
    ]


def test_ok_run_needs_a_metric() -> None:
    assert lines_of({"side": "baseline", "repetition": 0, "status": "ok"}) == [
        f'{M}:1: field "metric": is required for an ok run [missing]'
    ]


def test_failed_run_may_have_a_zero_metric() -> None:
    assert lines_of(run(status="failed", metric=0)) == []


def test_recorded_run_fields_are_valid() -> None:
    recorded = run(order=1, started_at="2026-11-01T12:00:00.5Z", finished_at="2026-11-01T12:00:01Z")
    assert lines_of(recorded) == []
    assert plainly_valid_run(parse_json(json.dumps(recorded)))


def test_recorded_run_fields_are_checked() -> None:
    assert lines_of(run(order=2, finished_at="2026-11-01T12:00:01")) == [
        f'{M}:1: field "order": must be <= 1, got 2 [out_of_range]',
        f'{M}:1: field "finished_at": must be an RFC 3339 timestamp with a time zone, '
        'got "2026-11-01T12:00:01" [bad_timestamp]',
    ]


def test_duplicate_run() -> None:
    assert lines_of(run(), run(side="candidate"), run(metric=0.05)) == [
        f'{M}:3: field "repetition": repeats the baseline run of repetition 0 (line 1) '
        "[duplicate_run]"
    ]


def test_value_not_in_the_enumeration() -> None:
    assert lines_of(run(side="base")) == [
        f'{M}:1: field "side": must be one of baseline, candidate, got "base" [not_allowed]'
    ]


def test_unknown_field() -> None:
    assert lines_of(run(metrics=1)) == [
        f'{M}:1: field "metrics": is not a known field (known fields: breakdown, counters, '
        "finished_at, metric, order, repetition, side, started_at, status) [unknown_field]"
    ]


def test_breakdown_value_of_a_wrong_type() -> None:
    assert lines_of(run(breakdown={"s0": "fast", "s1": {"mlp": "slow"}})) == [
        f'{M}:1: field "breakdown.s0": must be a number or an object, got "fast" [wrong_type]',
        f'{M}:1: field "breakdown.s1.mlp": must be a number, got "slow" [wrong_type]',
    ]


def test_run_without_status_needs_only_its_status() -> None:
    assert lines_of({"side": "baseline", "repetition": 0}) == [
        f'{M}:1: field "status": is required [missing]'
    ]


def test_flat_and_nested_breakdown_mixed() -> None:
    assert lines_of(run(breakdown={"mlp": 0.01, "s0": {"mlp": 0.01}})) == [
        f'{M}:1: field "breakdown": mixes flat {{region: seconds}} and nested '
        "{step: {region: seconds}} entries [mixed_breakdown]"
    ]


def test_repeated_key() -> None:
    line = '{"side": "baseline", "repetition": 0, "status": "ok", "metric": 1, "metric": 2}'
    assert lines_of(line) == [
        f'{M}:1: field "metric": is written more than once in this object [duplicate_key]'
    ]


def test_duplicate_of_an_invalid_line_is_reported_too() -> None:
    assert lines_of(run(), run(metric=-1)) == [
        f'{M}:2: field "metric": must be > 0 for an ok run, got -1 [not_positive]',
        f'{M}:2: field "repetition": repeats the baseline run of repetition 0 (line 1) '
        "[duplicate_run]",
    ]


def test_line_separator_inside_a_string_is_not_a_new_line() -> None:
    text = (
        '{"side": "baseline", "repetition": 0, "status": "ok", "metric": 1, '
        '"counters": {"a\u2028b": 1}}\n{"side": "candidate"}\n'
    )
    issues = validate_measurements(M, text.encode())[1]
    assert [str(i) for i in issues] == [
        f'{M}:2: field "repetition": is required [missing]',
        f'{M}:2: field "status": is required [missing]',
    ]


def test_every_error_of_a_file_in_one_pass() -> None:
    found = lines_of(run(side="x"), "{", run(repetition=-1))
    assert [f.split(": ", 1)[0] for f in found] == [f"{M}:1", f"{M}:2", f"{M}:3"]


def test_bad_encoding() -> None:
    issues = validate_measurements(M, b'{"side": "baseline"}\n{"x": "\xff"}\n')[1]
    assert [str(i) for i in issues] == [f"{M}:2: is not valid UTF-8 [bad_encoding]"]


# -- JSON documents -----------------------------------------------------------------------
A = Path("a/c1/r1/attempt.json")
ATTEMPT = {
    "schema": "explain-pipeline/attempt/v1",
    "attempt_id": "r1",
    "round": 1,
    "candidate": "fuse",
    "baseline": "main",
    "status": "completed",
    "started_at": "2026-11-01T12:00:00Z",
}


def attempt_issues(**changes: Any) -> list[str]:
    doc = {k: v for k, v in {**ATTEMPT, **changes}.items() if v is not None}
    body = json.dumps(doc, indent=2).encode()
    return [str(i) for i in validate_document(A, body, "attempt")[1]]


def test_valid_attempt() -> None:
    assert attempt_issues() == []


@pytest.mark.parametrize(
    "schema", ["explain-pipeline/attempt/v2", "explain-pipeline/campaign/v1", "other/attempt/v1"]
)
def test_unknown_schema_kind_or_version(schema: str) -> None:
    assert attempt_issues(schema=schema, round="not even checked") == [
        f'{A}:2: field "schema": must be "explain-pipeline/attempt/v1", got "{schema}" '
        "[unknown_schema]"
    ]


def test_missing_field_reports_the_line_of_its_object() -> None:
    assert attempt_issues(candidate=None) == [f'{A}:1: field "candidate": is required [missing]']


@pytest.mark.parametrize("bad", ["../etc", "a/b", "..", "r1\n", "", "-r1"])
def test_bad_id_in_a_document(bad: str) -> None:
    found = attempt_issues(attempt_id=bad)
    assert found == [
        f'{A}:3: field "attempt_id": must match ^[A-Za-z0-9][A-Za-z0-9._-]{{0,127}}$, '
        f"got {json.dumps(bad)} [bad_id]"
    ]


def test_id_longer_than_128_characters() -> None:
    found = attempt_issues(attempt_id="x" * 129)
    assert len(found) == 1 and found[0].endswith('..." [bad_id]')


def test_timestamp_without_time_zone() -> None:
    assert attempt_issues(started_at="2026-11-01T12:00:00") == [
        f'{A}:8: field "started_at": must be an RFC 3339 timestamp with a time zone, '
        'got "2026-11-01T12:00:00" [bad_timestamp]'
    ]


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2026-11-01T12:00:00Z", "2026-11-01T12:00:00+00:00"),
        ("2026-11-01t14:00:00.1234567+02:00", "2026-11-01T12:00:00.123456+00:00"),
        ("2026-11-01 07:30:00-04:30", "2026-11-01T12:00:00+00:00"),
    ],
)
def test_rfc3339_timestamps_become_utc(text: str, iso: str) -> None:
    parsed = parse_timestamp(text)
    assert parsed is not None and parsed.isoformat() == iso


@pytest.mark.parametrize("text", ["2026-11-01", "2026-13-01T00:00:00Z", "2026-11-01T25:00:00Z"])
def test_not_rfc3339(text: str) -> None:
    assert parse_timestamp(text) is None


def test_recorded_attempt_fields() -> None:
    recorded = {"order_seed": 7, "recorder": "explain-pipeline 0.1.0", "environment": {"cpu": "x"}}
    assert attempt_issues(**recorded) == []
    assert attempt_issues(order_seed=-1, environment={"cores": 2}) == [
        f'{A}:9: field "order_seed": must be >= 0, got -1 [negative]',
        f'{A}:11: field "environment.cores": must be a string, got 2 [wrong_type]',
    ]


def test_declared_at_needs_a_mechanism_digest() -> None:
    assert attempt_issues(declared_at="2026-11-01T11:00:00Z") == [
        f'{A}:1: field "mechanism_sha256": is required when "declared_at" is present [missing]'
    ]


def test_out_of_range_policy_value() -> None:
    path = Path("a/c1/campaign.json")
    doc = {
        "schema": "explain-pipeline/campaign/v1",
        "campaign_id": "c1",
        "kind": "project",
        "created_at": "2026-11-01T10:00:00Z",
        "metric": {"name": "t", "better": "lower"},
        "policy": {"seed": 1, "min_pairs": 3},
        "policy_sha256": "0" * 64,
    }
    issues = validate_document(path, json.dumps(doc, indent=2).encode(), "campaign")[1]
    assert [str(i) for i in issues] == [
        f'{path}:12: field "policy.min_pairs": must be >= 5, got 3 [out_of_range]'
    ]


MECH = Path("a/c1/r1/mechanism.json")


def mechanism_issues(expectations: list[dict[str, str]]) -> list[str]:
    doc = {
        "schema": "explain-pipeline/mechanism/v1",
        "hypothesis": "h",
        "expectations": expectations,
    }
    return [
        str(i) for i in validate_document(MECH, json.dumps(doc, indent=2).encode(), "mechanism")[1]
    ]


def test_duplicate_expectation() -> None:
    same = {"target": "region", "name": "mlp", "expect": "decrease"}
    assert mechanism_issues([same, {**same, "expect": "increase"}]) == [
        f'{MECH}:10: field "expectations[1]": repeats (region, mlp) of expectations[0] '
        "[duplicate_expectation]"
    ]


def test_no_directional_expectation() -> None:
    assert mechanism_issues([{"target": "region", "name": "mlp", "expect": "unchanged"}]) == [
        f'{MECH}:4: field "expectations": must contain at least one expectation with expect '
        "decrease or increase [no_directional_expectation]"
    ]


def test_empty_expectations() -> None:
    assert mechanism_issues([]) == [f'{MECH}:4: field "expectations": must not be empty [empty]']


# -- folders --------------------------------------------------------------------------------
def test_directory_name_is_checked_first() -> None:
    assert [str(i) for i in check_directory_id(Path("a/c1/bad name"), "attempt")] == [
        'a/c1/bad name: field "attempt_id": directory name must match '
        '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$, got "bad name" [bad_id]'
    ]


def test_dot_dot_directory_is_rejected() -> None:
    assert [i.code for i in check_directory_id(Path("a/c1/.."), "attempt")] == ["bad_id"]


def test_id_must_equal_its_directory_name(attempts_dir: Path) -> None:
    folder = attempts_dir / "c1"
    text = (folder / "campaign.json").read_text().replace('"c1"', '"c2"')
    (folder / "campaign.json").write_text(text)
    document, issues = validate_campaign(folder)
    assert document is None
    assert [str(i) for i in issues] == [
        f'{folder}/campaign.json:3: field "campaign_id": must equal its directory name "c1", '
        'got "c2" [id_mismatch]'
    ]


def test_missing_measurements_file(attempts_dir: Path) -> None:
    folder = attempts_dir / "c1" / "r001"
    (folder / "measurements.jsonl").unlink()
    files, issues = read_attempt_files(folder)
    assert files is None
    assert [str(i) for i in issues] == [
        f"{folder}/measurements.jsonl: file not found [missing_file]"
    ]


def test_benchmark_campaign_refuses_a_mechanism(attempts_dir: Path) -> None:
    folder = attempts_dir / "c1" / "r001"
    files, _ = read_attempt_files(folder)
    assert isinstance(files, AttemptFiles)
    valid, issues = validate_attempt(files, benchmark=True)
    assert valid is None
    assert issues == [
        Issue(
            str(folder / "mechanism.json"),
            None,
            "",
            "mechanism_in_benchmark",
            "a benchmark campaign refuses mechanism declarations (remove mechanism.json)",
        )
    ]
    assert validate_attempt(files, benchmark=False)[0] is not None


def test_issue_text_format() -> None:
    issue = Issue("x/m.jsonl", 12, "metric", "not_positive", "must be > 0 for an ok run, got -0.4")
    assert (
        str(issue)
        == 'x/m.jsonl:12: field "metric": must be > 0 for an ok run, got -0.4 [not_positive]'
    )


# -- the fast path for run lines never accepts what the full check rejects ---------------------
@settings(max_examples=300, deadline=None)
@given(
    overrides=some_of(RUN_FIELDS, 2),
    dropped=st.sets(st.sampled_from(sorted(BASE_RUN))),
)
@pytest.mark.slow
def test_fast_path_accepts_only_lines_the_full_check_accepts(
    overrides: dict[str, Any], dropped: set[str]
) -> None:
    """A valid run with one or two fields replaced by anything, some fields dropped."""
    doc = {k: v for k, v in {**BASE_RUN, **overrides}.items() if k not in dropped}
    parsed = parse_json(json.dumps(doc))
    if plainly_valid_run(parsed):
        assert check_document("measurement", parsed, fast=False) == []


def test_fast_path_accepts_the_example_data() -> None:
    folder = Path(__file__).resolve().parent.parent / "data" / "attempts"
    lines = [
        line
        for path in folder.glob("*/*/measurements.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert len(lines) > 100 and all(plainly_valid_run(parse_json(line)) for line in lines)
