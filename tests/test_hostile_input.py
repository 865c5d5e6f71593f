"""Hostile input: one bad file rejects its attempt (or its campaign, for campaign.json) with
file, reason code and exit 1; everything else is still ingested, and nothing crashes or hangs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import cli_result, example_attempt, write_example_campaign
from helpers import cli_process

from pipeline.contract.policy import policy_sha256
from pipeline.errors import UsageError
from pipeline.ingestion.attempts import IngestReport, ingest
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt

FIFO = "{}: is not a regular file (a FIFO) [not_a_file]"


@pytest.fixture
def two_campaigns(attempts_dir: Path) -> Path:
    """c1 (r001, r002) as in conftest, and c2 (x1): the untouched bystanders of every test."""
    write_example_campaign(attempts_dir, "c2", attempts=("x1",))
    return attempts_dir


def run_cli(source: Path, store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, _, err = cli_result(["ingest", str(source), "--store", str(store)], capsys)
    return code, err


def stored(store: Path) -> list[tuple[str, str]]:
    frame = Store(store).read("attempts")
    return sorted(frame.select("campaign_id", "attempt_id").iter_rows())


def outcomes(report: IngestReport) -> dict[str, str]:
    return {f"{c}/{a}": o for c, a, o, _ in report.attempts.iter_rows()}


# -- lone surrogate escapes -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "text", "field"),
    [
        (
            "attempt.json",
            '{"schema": "explain-pipeline/attempt/v1", "attempt_id": "r002", "round": 2,\n'
            '"candidate": "x\\ud800", "baseline": "main", "status": "completed",\n'
            '"started_at": "2026-11-01T12:00:00Z"}\n',
            '2: field "candidate"',
        ),
        (
            "measurements.jsonl",
            '{"side": "baseline", "repetition": 0, "status": "ok", "metric": 1}\n'
            '{"side": "candidate", "repetition": 0, "status": "ok", "metric": 1,'
            ' "counters": {"k\\udfff": 1}}\n',
            '2: field "counters.k\\udfff"',
        ),
    ],
)
def test_lone_surrogate_rejects_only_its_attempt(
    two_campaigns: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
    field: str,
) -> None:
    folder = two_campaigns / "c1" / "r002"
    (folder / name).write_text(text)
    code, err = run_cli(two_campaigns, tmp_path / "s", capsys)
    assert code == 1
    assert err.splitlines() == [
        f"{folder / name}:{field}: must be valid Unicode text, got a lone surrogate escape "
        "[bad_encoding]"
    ]
    assert stored(tmp_path / "s") == [("c1", "r001"), ("c2", "x1")]


def test_lone_surrogate_in_campaign_json_rejects_that_campaign(
    two_campaigns: Path, tmp_path: Path
) -> None:
    path = two_campaigns / "c1" / "campaign.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(doc, indent=2).replace('"e2e_seconds"', '"t\\ud83d"'))
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f'{path}:7: field "metric.name": must be valid Unicode text, got a lone surrogate escape '
        "[bad_encoding]"
    ]
    assert outcomes(report) == {"c1/r001": "rejected", "c1/r002": "rejected", "c2/x1": "ingested"}


def test_a_surrogate_pair_is_one_character_not_an_error(tmp_path: Path) -> None:
    folder = write_example_campaign(tmp_path / "in", attempts=())
    runs = [
        {
            "side": "baseline",
            "repetition": 0,
            "status": "ok",
            "metric": 1.0,
            "counters": {"\U0001f600": 1},
        }
    ]
    write_attempt(folder, example_attempt("r1", 1, mechanism=False), runs)
    path = folder / "r1" / "measurements.jsonl"
    path.write_text(path.read_text().replace("\U0001f600", "\\ud83d\\ude00"))
    store = Store(tmp_path / "s")
    assert ingest(tmp_path / "in", store).issues == []
    assert store.read("counters")["counter"].to_list() == ["\U0001f600"]


# -- deep nesting -----------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [40, 200_000])
def test_deep_nesting_in_a_measurement_line(
    two_campaigns: Path, tmp_path: Path, depth: int
) -> None:
    path = two_campaigns / "c1" / "r002" / "measurements.jsonl"
    deep = '{"side": "baseline", "repetition": 99, "status": ' + "[" * depth + "]" * depth + "}"
    path.write_text(path.read_text() + deep + "\n")
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f"{path}:13: nested deeper than 32 levels [too_deep]"
    ]
    assert outcomes(report)["c1/r002"] == "rejected"
    assert stored(tmp_path / "s") == [("c1", "r001"), ("c2", "x1")]


@pytest.mark.parametrize("name", ["attempt.json", "mechanism.json", "campaign.json"])
def test_deep_nesting_in_a_document(two_campaigns: Path, tmp_path: Path, name: str) -> None:
    folder = two_campaigns / "c1" if name == "campaign.json" else two_campaigns / "c1" / "r002"
    (folder / name).write_text('{"schema": ' + "[" * 100_000 + "]" * 100_000 + "}")
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f"{folder / name}: nested deeper than 32 levels [too_deep]"
    ]
    kept = [("c2", "x1")] if name == "campaign.json" else [("c1", "r001"), ("c2", "x1")]
    assert stored(tmp_path / "s") == kept


# -- timestamps out of range ----------------------------------------------------------------
@pytest.mark.parametrize("stamp", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:30:00+01:00"])
def test_timestamp_outside_the_representable_years(
    two_campaigns: Path, tmp_path: Path, stamp: str
) -> None:
    path = two_campaigns / "c1" / "r002" / "attempt.json"
    doc = json.loads(path.read_text())
    doc["started_at"] = stamp
    path.write_text(json.dumps(doc, indent=2))
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f'{path}:8: field "started_at": must be an RFC 3339 timestamp with a time zone between '
        f'years 1 and 9999 in UTC, got "{stamp}" [bad_timestamp]'
    ]
    assert stored(tmp_path / "s") == [("c1", "r001"), ("c2", "x1")]


# -- files that are not regular files, or too large -------------------------------------------
@pytest.mark.slow
def test_fifo_as_measurements_is_rejected_not_waited_on(
    two_campaigns: Path, tmp_path: Path
) -> None:
    path = two_campaigns / "c1" / "r002" / "measurements.jsonl"
    path.unlink()
    os.mkfifo(path)
    done = cli_process("ingest", str(two_campaigns), "--store", str(tmp_path / "s"), timeout=60)
    assert (done.returncode, done.stderr) == (
        1,
        f"{path}: is not a regular file (a FIFO) [not_a_file]\n",
    )
    assert stored(tmp_path / "s") == [("c1", "r001"), ("c2", "x1")]


@pytest.mark.parametrize("name", ["attempt.json", "mechanism.json"])
def test_fifo_as_a_document(two_campaigns: Path, tmp_path: Path, name: str) -> None:
    path = two_campaigns / "c1" / "r002" / name
    path.unlink()
    os.mkfifo(path)
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f"{path}: is not a regular file (a FIFO) [not_a_file]"
    ]
    assert stored(tmp_path / "s") == [("c1", "r001"), ("c2", "x1")]


def test_fifo_as_campaign_json_rejects_that_campaign(two_campaigns: Path, tmp_path: Path) -> None:
    path = two_campaigns / "c1" / "campaign.json"
    path.unlink()
    os.mkfifo(path)
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f"{path}: is not a regular file (a FIFO) [not_a_file]"
    ]
    assert stored(tmp_path / "s") == [("c2", "x1")]


def test_dev_zero_as_measurements(two_campaigns: Path, tmp_path: Path) -> None:
    path = two_campaigns / "c1" / "r002" / "measurements.jsonl"
    path.unlink()
    path.symlink_to("/dev/zero")
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f"{path}: is not a regular file (a character device) [not_a_file]"
    ]
    assert stored(tmp_path / "s") == [("c1", "r001"), ("c2", "x1")]


def test_huge_measurements_file_is_refused_before_it_is_read(
    two_campaigns: Path, tmp_path: Path
) -> None:
    path = two_campaigns / "c1" / "r002" / "measurements.jsonl"
    with path.open("r+b") as handle:
        handle.truncate(3 * 2**30)  # sparse: no disk space used
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f"{path}: is 3.0 GiB, more than the limit of 256 MiB for measurements.jsonl [too_large]"
    ]
    assert stored(tmp_path / "s") == [("c1", "r001"), ("c2", "x1")]


def test_fifo_given_to_import_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    os.mkfifo(path)
    done = cli_process(
        "import", "kineto", str(path), "--side", "baseline", "--repetition", "0", timeout=60
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip() == f"error: {path}: cannot read the file: not a regular file (a FIFO)"
    )


# -- policies that assess could not run ---------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value", "bound"),
    [
        ("resamples", 2**63 - 1, "<= 1000000"),
        ("min_pairs", 10**7, "<= 1000000"),
        ("min_improvement_pct", 1e6, "<= 1000"),
        ("min_improvement_pct", -1, ">= 0"),
    ],
)
def test_absurd_policy_value_rejects_the_campaign(
    two_campaigns: Path, tmp_path: Path, field: str, value: float, bound: str
) -> None:
    path = two_campaigns / "c1" / "campaign.json"
    doc = json.loads(path.read_text())
    doc["policy"] = {field: value}
    doc["policy_sha256"] = policy_sha256(doc["policy"])  # a matching digest changes nothing
    path.write_text(json.dumps(doc, indent=2))
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    code = "negative" if bound == ">= 0" else "out_of_range"
    assert [str(i) for i in report.issues] == [
        f'{path}:11: field "policy.{field}": must be {bound}, got {value} [{code}]'
    ]
    assert stored(tmp_path / "s") == [("c2", "x1")]


@pytest.mark.parametrize(
    ("what_if", "message"),
    [
        ("resamples=1000001", "--what-if resamples=1000001: must be <= 1000000, got 1000001"),
        ("min_improvement_pct=-0.5", "--what-if min_improvement_pct=-0.5: must be >= 0, got -0.5"),
        (
            "min_pairs=99999999999",
            "--what-if min_pairs=99999999999: must be <= 1000000, got 99999999999",
        ),
        ("seed=-1", "--what-if seed=-1: must be >= 0, got -1"),
    ],
)
def test_what_if_has_the_same_bounds_as_the_schema(what_if: str, message: str) -> None:
    """The what-if values are checked by the validator campaign.json is checked by: the same
    bounds in the same words (test above); the command line names its option in front."""
    from pipeline.assessment.campaigns import overrides
    from pipeline.cli.common import parse_what_if, what_if_named

    with pytest.raises(UsageError) as info, what_if_named():
        overrides(parse_what_if(None, None, [what_if]))
    assert str(info.value) == message


def test_many_digit_integer_is_named_not_explained_with_python(
    two_campaigns: Path, tmp_path: Path
) -> None:
    path = two_campaigns / "c1" / "r002" / "measurements.jsonl"
    line = '{"side": "baseline", "repetition": ' + "9" * 5000 + ', "status": "failed"}'
    path.write_text(path.read_text() + line + "\n")
    report = ingest(two_campaigns, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f"{path}:13: invalid JSON: a number with more than 4300 digits (column 36) [bad_json]"
    ]
