"""The import command through the real entry point: output, append, exit codes and messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli_result

FIXTURES = Path(__file__).parent / "fixtures" / "import"
TRACE = str(FIXTURES / "kineto" / "cpu_steps.json")


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return cli_result(["import", *args], capsys)


def test_prints_one_line_and_reports_the_source(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["kineto", TRACE, "--side", "baseline", "--repetition", "0"], capsys)
    assert code == 0
    line = json.loads(out)
    assert (line["side"], line["repetition"], line["status"]) == ("baseline", 0, "ok")
    assert sorted(line["breakdown"]) == ["step-2", "step-3", "step-4"]
    assert "imported kineto trace" in err and "schemaVersion 1" in err and "3 steps" in err


def test_appends_and_refuses_a_run_already_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "measurements.jsonl"
    base = ["kineto", TRACE, "--output", str(out_file)]
    assert _run([*base, "--side", "baseline", "--repetition", "0"], capsys)[0] == 0
    candidate = [*base, "--side", "candidate", "--repetition", "0", "--metric", "0.5"]
    assert _run(candidate, capsys)[0] == 0
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert [(x["side"], x["metric"]) for x in lines][1] == ("candidate", 0.5)
    code, _, err = _run([*base, "--side", "baseline", "--repetition", "0"], capsys)
    assert code == 1
    assert err == (
        f"error: {out_file}: expected a new run, got side baseline repetition 0 already in the "
        "file\n"
    )
    assert len(out_file.read_text().splitlines()) == 2


def test_a_file_it_cannot_read_is_one_line_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    bad = str(FIXTURES / "nsys" / "bad_unit_nvtx_sum.csv")
    code, out, err = _run(
        ["nsys", bad, "--side", "baseline", "--repetition", "1", "--metric", "1"], capsys
    )
    assert (code, out) == (1, "")
    assert err.startswith(f'error: {bad}:1: column "Total Time (fortnights)": expected a time unit')
    assert "Traceback" not in err and err.count("\n") == 1


def test_summaries_without_metric_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    nvtx = str(FIXTURES / "nsys" / "report_nvtx_sum.csv")
    code, _, err = _run(["nsys", nvtx, "--side", "baseline", "--repetition", "0"], capsys)
    assert code == 2
    assert err == "error: nsys input has no end-to-end time for the run: give --metric VALUE\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--step-pattern", "("], 'error: --step-pattern "(": not a regular expression'),
        (["--rename", "attention"], 'error: --rename "attention": expected OLD=NEW'),
        (["--metric", "-1"], "error: --metric -1.0: expected a finite number > 0"),
    ],
)
def test_bad_options_are_usage_errors(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["kineto", TRACE, "--side", "baseline", "--repetition", "0", *extra]
    code, _, err = _run(args, capsys)
    assert code == 2
    assert err.startswith(message)


def test_rename_of_a_name_that_is_absent_is_noted(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["kineto", TRACE, "--side", "baseline", "--repetition", "0", "--rename", "nope=x"]
    code, _, err = _run(args, capsys)
    assert code == 0
    assert 'note: --rename nope=…: no step, region or counter is named "nope"' in err
