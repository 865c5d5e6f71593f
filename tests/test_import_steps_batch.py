"""kineto steps without ProfilerStep#N, renamed steps, and --batch: a folder of traces -> one
measurements.jsonl in one process (through the real entry point)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_result as cli
from test_import_kineto import FIXTURES, _approx, _events, _reference

from pipeline.importers.kineto import read
from pipeline.importers.lines import build_line, import_line
from pipeline.importers.reader import ImportOptions, InputFile

CAMPAIGN = FIXTURES / "campaign"


def renamed_trace(tmp_path: Path, old: str, new: str) -> Path:
    """The real no-ProfilerStep trace with its decode-<i> annotations renamed."""
    raw = gzip.decompress((FIXTURES / "cpu_nosteps.json.gz").read_bytes()).decode()
    path = tmp_path / "trace.json"
    path.write_text(raw.replace(f'"{old}', f'"{new}'))
    return path


def test_annotations_named_like_steps_are_the_steps_and_a_note_says_so(tmp_path: Path) -> None:
    path = renamed_trace(tmp_path, "decode-", "step-")
    expected, metric, _ = _reference(path, re.compile(r"step-\d+").fullmatch, lambda n: n)
    imported = read([InputFile(path)], ImportOptions())
    line = build_line(imported, side="baseline", repetition=0)
    assert sorted(line["breakdown"]) == ["step-0", "step-1", "step-2"]
    assert line["breakdown"] == _approx(expected)
    assert line["metric"] == pytest.approx(metric, rel=1e-12)
    assert imported.notes == [
        f"{path}: no ProfilerStep#N annotations; the 3 annotation names that look like steps "
        '("step-0", "step-1", "step-2") are the steps (--step-pattern chooses others)'
    ]


def test_other_numbered_annotations_stay_regions_and_a_note_names_the_option() -> None:
    path = FIXTURES / "cpu_nosteps.json.gz"
    imported = read([InputFile(path)], ImportOptions())
    assert list(imported.breakdown) == ["all"] and "decode-0" in imported.breakdown["all"]
    assert imported.notes == [
        f"{path}: no ProfilerStep#N annotations, so the capture is one step `all` and "
        '"decode-0", "decode-1", "decode-2" are regions; if they are steps, give --step-pattern '
        '"decode-\\d+"'
    ]
    names = {e["name"] for e in _events(path) if e.get("cat") == "user_annotation"}
    assert {"decode-0", "decode-1", "decode-2"} <= names  # the note names real annotations


def test_rename_renames_steps_and_adds_steps_renamed_to_one() -> None:
    path = [str(FIXTURES / "cpu_steps.json")]
    plain, _ = import_line("kineto", path, side="baseline", repetition=0)
    renamed, imported = import_line(
        "kineto",
        path,
        side="baseline",
        repetition=0,
        options=ImportOptions.parse(renames=["step-2=warmup", "step-3=decode", "step-4=decode"]),
    )
    assert sorted(renamed["breakdown"]) == ["decode", "warmup"]
    assert renamed["breakdown"]["warmup"] == plain["breakdown"]["step-2"]
    three, four = plain["breakdown"]["step-3"], plain["breakdown"]["step-4"]
    assert renamed["breakdown"]["decode"] == pytest.approx(
        {r: three.get(r, 0) + four.get(r, 0) for r in {*three, *four}}, rel=1e-12
    )
    assert imported.notes == []  # every rename was used


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.slow
def test_batch_imports_a_folder_as_one_file_in_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "measurements.jsonl"
    code, stdout, err = cli(["import", "kineto", "--batch", str(CAMPAIGN), "-o", str(out)], capsys)
    assert (code, stdout) == (0, "")
    assert err == f"imported 10 runs from {CAMPAIGN} -> {out}\n"
    got = lines_of(out)
    keys = [(x["repetition"], x["side"]) for x in got]
    assert keys == [(r, s) for r in range(5) for s in ("baseline", "candidate")]
    for line in got:  # each run: both captures of that side and repetition, as one import
        files = sorted(CAMPAIGN.glob(f"{line['side']}-r{line['repetition']}-*.json.gz"))
        assert len(files) == 2
        alone, _ = import_line(
            "kineto", [str(f) for f in files], side=line["side"], repetition=line["repetition"]
        )
        assert line == alone
    before = out.read_bytes()
    code, _, err = cli(["import", "kineto", "--batch", str(CAMPAIGN), "-o", str(out)], capsys)
    assert code == 1 and "already in the file" in err
    assert out.read_bytes() == before  # nothing of the second batch was written


def test_batch_name_pattern_and_skipped_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    for name, target in (("b_0.json.gz", "baseline-r0-a"), ("c_0.json.gz", "candidate-r0-a")):
        (folder / name).write_bytes((CAMPAIGN / f"{target}.json.gz").read_bytes())
    (folder / "README.txt").write_text("notes")
    pattern = r"^(?P<side>[bc])_(?P<repetition>\d+)\.json\.gz$"
    code, out, err = cli(
        ["import", "kineto", "--batch", str(folder), "--name-pattern", pattern], capsys
    )
    assert code == 0
    assert [(x["side"], x["repetition"]) for x in map(json.loads, out.splitlines())] == [
        ("baseline", 0),
        ("candidate", 0),
    ]
    assert f"note: {folder / 'README.txt'}: file name does not match --name-pattern; skipped" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--side", "baseline"],
            "--batch reads side and repetition from the file names and the "
            "metric from the files: give no FILE, --side, --repetition or --metric",
        ),
        (
            ["--name-pattern", "x"],
            '--name-pattern "x": expected the named groups (?P<side>...) and (?P<repetition>...)',
        ),
    ],
)
def test_batch_usage_errors(
    capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, out, err = cli(["import", "kineto", "--batch", str(CAMPAIGN), *extra], capsys)
    assert (code, out, err) == (2, "", f"error: {message}\n")
