"""Bounded costs (issue 19, item 5): names have a length bound declared once, the bulk reader's
key probes are found in time linear in the keys' length, and a file's error list is capped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import write_example_campaign
from helpers import cli_process as cli
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.contract.declare import MAX_NAME_LENGTH
from pipeline.contract.schemas import document_schema
from pipeline.ingestion import columnar
from pipeline.ingestion.files import MAX_ISSUES_PER_FILE


# -- the name bound: one declaration ------------------------------------------------------------
def _name_bounds(node: Any) -> list[int | None]:
    """maxLength of every step, region, counter or expectation name in a schema."""
    found: list[int | None] = []
    if isinstance(node, dict):
        if "propertyNames" in node:
            found.append(node["propertyNames"].get("maxLength"))
        if "name" in node.get("properties", {}):
            found.append(node["properties"]["name"].get("maxLength"))
        for value in node.values():
            found += _name_bounds(value)
    elif isinstance(node, list):
        for value in node:
            found += _name_bounds(value)
    return found


def test_every_name_in_the_schemas_has_the_one_bound() -> None:
    bounds = _name_bounds(document_schema("measurement")) + _name_bounds(
        document_schema("mechanism")
    )
    assert len(bounds) == 4  # breakdown steps, their regions, counters, expectation names
    assert set(bounds) == {MAX_NAME_LENGTH}


def _with_region(attempts: Path, name: str) -> Path:
    """Campaign c1 whose r001 has one more region, named ``name``, in its first line."""
    folder = write_example_campaign(attempts, attempts=("r001", "r002"), repetitions=5)
    path = folder / "r001" / "measurements.jsonl"
    lines = [json.loads(text) for text in path.read_text().splitlines()]
    lines[0]["breakdown"]["s0"][name] = 0.001
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("mode", [[], ["--precise"]])
@pytest.mark.parametrize("length", [MAX_NAME_LENGTH + 1, 4 * 2**20])
@pytest.mark.slow
def test_a_name_over_the_bound_is_rejected_with_a_short_message(
    tmp_path: Path, length: int, mode: list[str]
) -> None:
    # before the fix: the 4 MB name is accepted (after 26-35 s of key checks)
    path = _with_region(tmp_path / "attempts", "x" * length)
    done = cli("ingest", str(tmp_path / "attempts"), "--store", str(tmp_path / "s"), *mode)
    assert done.returncode == 1
    expected = (
        f'{path}:1: field "breakdown.s0": has a name of {length} characters, more '
        f"than the limit of {MAX_NAME_LENGTH} ("
    )
    assert done.stderr.startswith(expected), done.stderr[:300]
    assert done.stderr.endswith(") [too_long]\n") and len(done.stderr) < 400
    assert "c1        ingested              1         0          0         1" in done.stdout


def test_a_name_at_the_bound_is_accepted(tmp_path: Path) -> None:
    _with_region(tmp_path / "attempts", "x" * MAX_NAME_LENGTH)
    done = cli("ingest", str(tmp_path / "attempts"), "--store", str(tmp_path / "s"))
    assert (done.returncode, done.stderr) == (0, "")


# -- the bulk reader's key probes -----------------------------------------------------------------
def _told_apart(keys: list[bytes], offsets: list[int]) -> bool:
    seen = {(len(k), *(k[min(o, len(k) - 1)] for o in offsets)) for k in set(keys)}
    return len(seen) == len(set(keys))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=40))
def test_the_probes_tell_apart_every_key(keys: list[bytes]) -> None:
    assert _told_apart(keys, columnar._probes(keys))


def test_the_probes_look_at_fewer_offsets_than_keys_however_long_the_keys() -> None:
    # before the fix: every offset of the longest key is tried (4 MB: 26-35 s); now only the offsets
    # where sorted neighbours of a length first differ (at most one per key)
    long_keys = [b"r" * 2_000_000 + bytes([i]) + b"z" * 1_000 for i in range(60)]
    keys = [*long_keys, b"attention", b"mlp", b"x" * 4_000_000]
    candidates = columnar._split_offsets(sorted(set(keys)))
    assert candidates == [2_000_000]
    assert columnar._probes(keys) == [2_000_000] and _told_apart(keys, [2_000_000])


# -- the error list of a file is capped ---------------------------------------------------------
def test_the_errors_of_a_file_are_capped_and_the_other_attempts_kept(tmp_path: Path) -> None:
    # before the fix: one error line per problem of every line
    # (1 M lines: 135 s, 1 GB, 269 MB of stderr)
    folder = write_example_campaign(tmp_path / "attempts", attempts=("r001", "r002"))
    path = folder / "r001" / "measurements.jsonl"
    path.write_text("{}\n" * 20_000)
    done = cli("ingest", str(tmp_path / "attempts"), "--store", str(tmp_path / "s"))
    assert done.returncode == 1
    errors = done.stderr.splitlines()
    assert len(errors) == MAX_ISSUES_PER_FILE + 1  # the first errors, then what was left out
    per_line = 3  # side, repetition and status are missing on each line
    checked = -(-MAX_ISSUES_PER_FILE // per_line)
    assert errors[-1] == (
        f"{path}: stopped after {MAX_ISSUES_PER_FILE} errors: "
        f"{checked * per_line - MAX_ISSUES_PER_FILE} more error(s) not listed; "
        f"{20_000 - checked} line(s) from line {checked + 1} on not checked (the attempt is "
        "rejected; fix these and ingest again) [too_many_errors]"
    )
    assert "c1        ingested              1         0          0         1" in done.stdout
