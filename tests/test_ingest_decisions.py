"""Inputs that used to be accepted silently: each is now rejected, warned about, or accepted on
purpose, as docs/ingest.md says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import example_attempt, write_example_campaign

from pipeline.cli import main
from pipeline.ingestion.attempts import IngestReport, ingest
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt


def outcomes(report: IngestReport) -> dict[str, str]:
    return {f"{c}/{a}": o for c, a, o, _ in report.attempts.iter_rows()}


def test_a_file_beside_the_attempt_folders_is_ignored(attempts_dir: Path, tmp_path: Path) -> None:
    (attempts_dir / "c1" / "notes.txt").write_text("r003 is still running\n")
    (attempts_dir / "c1" / "r003").write_text("not a folder\n")
    report = ingest(attempts_dir, Store(tmp_path / "s"))
    assert report.issues == [] and outcomes(report) == {
        "c1/r001": "ingested",
        "c1/r002": "ingested",
    }


def test_symlinked_attempt_folder_outside_the_source_is_not_followed(
    attempts_dir: Path, tmp_path: Path
) -> None:
    elsewhere = write_example_campaign(tmp_path / "elsewhere", attempts=("r009",))
    link = attempts_dir / "c1" / "r009"
    link.symlink_to(elsewhere / "r009")
    report = ingest(attempts_dir, Store(tmp_path / "s"))
    assert outcomes(report)["c1/r009"] == "rejected"
    assert [str(i) for i in report.issues] == [
        f"{link}: is a symbolic link to {elsewhere / 'r009'}, outside {attempts_dir}: "
        "not followed [outside_source]"
    ]


def test_symlinked_campaign_folder_outside_the_source_is_not_followed(
    attempts_dir: Path, tmp_path: Path
) -> None:
    elsewhere = write_example_campaign(tmp_path / "elsewhere", "c2", attempts=("x1",))
    (attempts_dir / "c2").symlink_to(elsewhere)
    report = ingest(attempts_dir, Store(tmp_path / "s"))
    assert [i.code for i in report.issues] == ["outside_source"]
    assert Store(tmp_path / "s").campaign_ids("attempts") == ["c1"]


def test_symlink_inside_the_source_is_followed(attempts_dir: Path, tmp_path: Path) -> None:
    (attempts_dir / "c1" / "r001").rename(attempts_dir / "kept-r001")
    (attempts_dir / "c1" / "r001").symlink_to(attempts_dir / "kept-r001")
    (attempts_dir / "kept-r001" / "campaign.json").write_text("{}")  # not a campaign: skipped
    report = ingest(attempts_dir / "c1", Store(tmp_path / "s"))
    assert outcomes(report)["c1/r001"] == "rejected"  # outside c1, the SOURCE given here
    report = ingest(attempts_dir, Store(tmp_path / "t"))
    assert outcomes(report)["c1/r001"] == "ingested"


def test_empty_measurements_of_a_completed_attempt_is_rejected(
    attempts_dir: Path, tmp_path: Path
) -> None:
    path = attempts_dir / "c1" / "r002" / "measurements.jsonl"
    path.write_text("")
    report = ingest(attempts_dir, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f"{path}: has no run, but attempt.json says the attempt completed [no_runs]"
    ]


def test_empty_measurements_of_an_aborted_attempt_is_accepted(tmp_path: Path) -> None:
    folder = write_example_campaign(tmp_path / "in", attempts=())
    write_attempt(folder, {**example_attempt("r1", 1, mechanism=False), "status": "aborted"}, [])
    report = ingest(tmp_path / "in", Store(tmp_path / "s"))
    assert report.issues == [] and outcomes(report) == {"c1/r1": "ingested"}


@pytest.mark.parametrize(
    ("breakdown", "counters", "field"),
    [
        ({"s0": {"": 0.5}}, {}, "breakdown.s0"),
        ({"": 0.5}, {}, "breakdown"),
        ({"s0": {"a": 0.5}}, {"": 3}, "counters"),
    ],
)
def test_an_empty_step_region_or_counter_name_is_rejected(
    tmp_path: Path, breakdown: dict[str, object], counters: dict[str, object], field: str
) -> None:
    folder = write_example_campaign(tmp_path / "in", attempts=())
    run = {
        "side": "baseline",
        "repetition": 0,
        "status": "ok",
        "metric": 1.0,
        "breakdown": breakdown,
        "counters": counters,
    }
    write_attempt(folder, example_attempt("r1", 1, mechanism=False), [run])
    report = ingest(tmp_path / "in", Store(tmp_path / "s"))
    path = folder / "r1" / "measurements.jsonl"
    assert [str(i) for i in report.issues] == [
        f'{path}:1: field "{field}": has an empty name (steps, regions and counters need one) '
        "[empty]"
    ]


def test_expectation_naming_what_no_run_measured_is_a_warning(
    attempts_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = attempts_dir / "c1" / "r001" / "mechanism.json"
    doc = json.loads(path.read_text())
    doc["expectations"][1]["name"] = "kernel_lanches"
    path.write_text(json.dumps(doc, indent=2))  # digest now differs: integrity evidence, stored
    with pytest.raises(SystemExit) as exit_info:
        main(["ingest", str(attempts_dir), "--store", str(tmp_path / "s")])
    err = capsys.readouterr()
    assert exit_info.value.code == 0
    assert err.err == (
        f'warning: {path}: field "expectations[1]": expects decrease of counter '
        '"kernel_lanches", which no run of this attempt measured [not_measured]\n'
    )
    assert err.out.splitlines()[-1] == "0 errors, 1 warning (ok)"


def test_a_newline_in_a_folder_name_stays_on_one_line(attempts_dir: Path, tmp_path: Path) -> None:
    (attempts_dir / "c1" / "r002").rename(attempts_dir / "c1" / "r\n002")
    report = ingest(attempts_dir, Store(tmp_path / "s"))
    assert [str(i) for i in report.issues] == [
        f'{attempts_dir}/c1/r\\n002: field "attempt_id": directory name must match '
        '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$, got "r\\n002" [bad_id]'
    ]
