"""Attempts rejected at ingest are named afterwards: ingest keeps its errors in table
`rejections`, and assess, campaign final and report, which read the store, name each one
(file:line, field, code) instead of leaving the round silently out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import cli_result as cli
from conftest import write_example_campaign

from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store

LINE_3 = 'field "metric": must be > 0 for an ok run, got -1 [not_positive]'


def break_line_3(folder: Path) -> Path:
    """Line 3 of the attempt's measurements gets a negative metric: the attempt is rejected."""
    path = folder / "measurements.jsonl"
    lines = path.read_text().splitlines()
    run = json.loads(lines[2])
    lines[2] = json.dumps({**run, "metric": -1})
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    """c1 with r001 valid and r002 rejected at line 3 of its measurements."""
    folder = write_example_campaign(tmp_path / "attempts", "c1")
    break_line_3(folder / "r002")
    return folder


def test_ingest_keeps_the_errors_until_the_attempt_is_fixed(campaign: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    assert ingest(campaign.parent, store).exit_code == 1
    path = str(campaign / "r002" / "measurements.jsonl")
    rows = store.read("rejections").to_dicts()
    assert rows == [
        {
            "campaign_id": "c1",
            "position": 0,
            "attempt_id": "r002",
            "path": path,
            "line": 3,
            "field": "metric",
            "code": "not_positive",
            "message": "must be > 0 for an ok run, got -1",
        }
    ]
    partition = store.partition_file("rejections", "c1")
    before = (partition.read_bytes(), partition.stat().st_mtime_ns)
    ingest(campaign.parent, store)  # unchanged inputs: nothing written
    assert (partition.read_bytes(), partition.stat().st_mtime_ns) == before
    write_example_campaign(tmp_path / "attempts", "c1")  # r002 valid again
    report = ingest(campaign.parent, store)
    assert report.exit_code == 0 and store.read("rejections").is_empty()
    assert not partition.exists()  # a clean campaign has no partition
    assert sorted(store.read("attempts")["attempt_id"]) == ["r001", "r002"]


def test_a_rejected_campaign_json_is_kept_without_an_attempt(tmp_path: Path) -> None:
    folder = write_example_campaign(tmp_path / "attempts", "c1")
    store = Store(tmp_path / "store")
    ingest(folder.parent, store)
    document = json.loads((folder / "campaign.json").read_text())
    (folder / "campaign.json").write_text(json.dumps({**document, "kind": "toy"}))
    assert ingest(folder.parent, store).exit_code == 1
    [row] = store.read("rejections").to_dicts()
    assert (row["attempt_id"], row["path"], row["field"]) == (
        None,
        str(folder / "campaign.json"),
        "kind",
    )


def test_assess_names_the_rejected_attempt(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(campaign.parent.parent / "store")
    assert cli(["ingest", str(campaign.parent), "--store", store], capsys)[0] == 1
    code, out, err = cli(["assess", "c1", "--store", store], capsys)
    assert code == 0  # assess judged what it has; ingest's exit 1 reported the rejection
    assert err == "warning: c1: rejected at ingest, not assessed: r002\n"
    path = campaign / "r002" / "measurements.jsonl"
    assert (
        "REJECTED at ingest, not assessed: r002 (fix the files and ingest again)\n"
        f"  r002: {path}:3: {LINE_3}\n"
    ) in out
    code, out, _ = cli(["assess", "c1", "--store", store, "--format", "json"], capsys)
    [entry] = json.loads(out)["campaigns"]
    assert [(r["attempt_id"], r["line"], r["code"]) for r in entry["rejected_at_ingest"]] == [
        ("r002", 3, "not_positive")
    ]


def test_campaign_final_names_the_rejected_round_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only r002 was to be assessed: the old message was "best attempt: none (no attempt is
    PASS)" with the round silently missing."""
    folder = write_example_campaign(tmp_path / "attempts", "c1", attempts=("r002",))
    break_line_3(folder / "r002")
    code, out, err = cli(["campaign", "final", str(folder), "--store", str(tmp_path / "s")], capsys)
    assert code == 1
    path = folder / "r002" / "measurements.jsonl"
    assert f"  r002: {path}:3: {LINE_3}\n" in out
    assert out.endswith(
        "best attempt: none (no assessed attempt is PASS; some were rejected at ingest, above)\n"
    )
    assert f"{path}:3: {LINE_3}" in err


def test_report_names_the_rejected_attempt(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "store")
    cli(["ingest", str(campaign.parent), "--store", store], capsys)
    cli(["assess", "c1", "--store", store], capsys)
    page = tmp_path / "c1.html"
    assert cli(["report", "c1", "--store", store, "-o", str(page)], capsys)[0] == 0
    html = page.read_text()
    section = html[html.index('<section id="rejected">') :]
    assert '<a href="#rejected">Rejected at ingest</a>' in html
    path = campaign / "r002" / "measurements.jsonl"
    assert (
        f"<td>r002</td><td>{path}:3</td><td>metric</td><td>not_positive</td>"
        '<td class="text">must be &gt; 0 for an ok run, got -1</td>'
    ) in section


def test_a_folder_name_that_is_not_text_is_stored_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An attempt folder whose name holds an undecodable byte and an escape character is
    rejected (bad_id) and named, escaped, by ingest and assess: never an internal error."""
    folder = write_example_campaign(tmp_path / "attempts", "c1")
    os.rename(os.fsencode(folder / "r002"), os.fsencode(folder) + b"/r\xff\x1b02")
    store = str(tmp_path / "store")
    code, _, err = cli(["ingest", str(folder.parent), "--store", store], capsys)
    assert code == 1 and "[bad_id]" in err
    code, out, _ = cli(["assess", "c1", "--store", store], capsys)
    assert code == 0
    assert "REJECTED at ingest, not assessed: r\\udcff\\x1b02 (fix the files" in out
