"""The ingest and query commands through the real entry point: output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli_result as run_main
from helpers import cli_process

from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store


def test_ingest_prints_the_summary_and_exits_0(
    attempts_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "store")
    code, out, err = run_main(["ingest", str(attempts_dir), "--store", store], capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == [
        "campaign",
        "campaign.json",
        "ingested",
        "replaced",
        "unchanged",
        "rejected",
    ]
    assert lines[2].split() == ["c1", "ingested", "2", "0", "0", "0"]
    assert lines[-1] == "0 errors (ok)"
    code, out, _ = run_main(["ingest", str(attempts_dir), "--store", store], capsys)
    assert code == 0 and out.splitlines()[2].split() == ["c1", "unchanged", "0", "0", "2", "0"]


def test_rejected_input_exits_1_with_one_line_per_error(
    attempts_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = attempts_dir / "c1" / "r002" / "measurements.jsonl"
    path.write_text(
        path.read_text() + '{"side": "baseline", "repetition": 99, "status": "ok", "metric": NaN}\n'
    )
    code, out, err = run_main(["ingest", str(attempts_dir), "--store", str(tmp_path / "s")], capsys)
    assert code == 1
    assert err == f'{path}:13: field "metric": must be a finite number, got NaN [not_finite]\n'
    assert out.splitlines()[2].split() == ["c1", "ingested", "1", "0", "0", "1"]
    assert out.splitlines()[-1] == "1 error (some input rejected)"


def test_missing_folder_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["ingest", str(tmp_path / "none"), "--store", str(tmp_path)], capsys)
    assert (code, err) == (2, f"error: {tmp_path / 'none'}: no such folder\n")


@pytest.mark.parametrize("command", ["ingest", "query"])
def test_help_has_an_example_and_the_exit_codes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main([command, "--help"], capsys)
    assert code == 0
    assert "Example:" in out and f"explain-pipeline {command} " in out
    assert "1 some input rejected" in " ".join(out.split())


def test_progress_bar_only_when_asked(
    attempts_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ingest(attempts_dir, Store(tmp_path / "a"), progress=True)
    assert "ingest" in capsys.readouterr().err  # tqdm's bar, on stderr
    ingest(attempts_dir, Store(tmp_path / "b"), progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_console_script_without_a_terminal_prints_no_progress_bar(
    attempts_dir: Path, tmp_path: Path
) -> None:
    done = cli_process("ingest", str(attempts_dir), "--store", str(tmp_path / "s"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and "\r" not in done.stdout and "attempt/s" not in done.stdout


# -- query --------------------------------------------------------------------------------------
@pytest.fixture
def store_path(attempts_dir: Path, tmp_path: Path) -> str:
    ingest(attempts_dir, Store(tmp_path / "store"))
    return str(tmp_path / "store")


def test_query_answers(store_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    sql = "SELECT campaign_id, count(*) AS n FROM samples GROUP BY 1"
    code, out, _ = run_main(["query", sql, "--store", store_path, "--format", "json"], capsys)
    assert code == 0 and json.loads(out) == [{"campaign_id": "c1", "n": 24}]


def test_query_console_script(store_path: str) -> None:
    done = cli_process(
        "query",
        "SELECT campaign_id, count(*) FROM samples GROUP BY 1",
        "--store",
        store_path,
        "--format",
        "csv",
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "campaign_id,len\nc1,24\n", "")


def test_named_query_to_a_file(
    store_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "runs.csv"
    code, out, err = run_main(
        [
            "query",
            "--name",
            "runs_per_side",
            "--store",
            store_path,
            "--format",
            "csv",
            "--output",
            str(out_file),
        ],
        capsys,
    )
    assert (code, out, err) == (0, "", f"wrote 4 rows to {out_file}\n")
    assert out_file.read_text().splitlines()[1].startswith("c1,r001,baseline,6,0,")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["SELEC 1"],
            "error: bad query: sql parser error: Expected: an SQL statement, found: "
            "SELEC at Line: 1, Column: 1\n",
        ),
        (
            ["SELECT 1", "--format", "parquet"],
            "error: --format parquet needs -o FILE (or -o - for stdout: Parquet is binary)\n",
        ),
        ([], "error: give either SQL or --name NAME (or --list)\n"),
        (["SELECT 1", "--name", "x"], "error: give either SQL or --name NAME (or --list)\n"),
    ],
)
def test_query_usage_errors_exit_2(
    store_path: str, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(["query", *args, "--store", store_path], capsys)
    assert (code, err) == (2, message)


def test_unknown_named_query_exits_2(store_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["query", "--name", "nope", "--store", store_path], capsys)
    assert code == 2 and err.startswith('error: no named query "nope" (known: ')


def test_query_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["query", "--list"], capsys)
    names = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and {"runs_per_side", "region_share", "counters_per_attempt"} <= set(names)
