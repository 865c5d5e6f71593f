"""One command line: -o/--output with `-` for stdout, the CI gate of assess, one meaning of seed,
integrity messages that say the attempt once, and the report's shared plotly.js."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import plotly
import polars as pl
import pytest
from conftest import cli_result as cli
from conftest import write_example_campaign
from plotly.offline import get_plotlyjs

from pipeline.cli import main

TRACE = str(Path(__file__).parent / "fixtures" / "import" / "kineto" / "cpu_steps.json")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two assessed example campaigns, c1 and c2."""
    root = tmp_path_factory.mktemp("consistent")
    for cid in ("c1", "c2"):
        write_example_campaign(root / "attempts", cid, repetitions=5)
    for args in (["ingest", str(root / "attempts")], ["assess", "--all"]):
        with pytest.raises(SystemExit) as exc:
            main([*args, "--store", str(root / "store")])
        assert exc.value.code == 0
    return root / "store"


# -- `-o -` is stdout, never a file named "-" --------------------------------------------------
def test_query_output_dash_is_stdout(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["query", "--name", "runs_per_side", "--format", "csv", "--store", str(store)]
    plain = cli(args, capsys)
    assert cli([*args, "-o", "-"], capsys) == plain == (0, plain[1], "")
    assert cli([*args, "--output", "-"], capsys) == plain
    assert plain[1].startswith("campaign_id,attempt_id,side,") and list(tmp_path.iterdir()) == []
    code, out, err = cli([*args, "-o", "runs.csv"], capsys)
    assert (code, out) == (0, "") and err == "wrote 8 rows to runs.csv\n"
    assert (tmp_path / "runs.csv").read_text() == plain[1]


def test_query_parquet_to_stdout_is_readable(store: Path, tmp_path: Path) -> None:
    sql = "SELECT campaign_id, attempt_id, verdict FROM assessments ORDER BY 1, 2"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "query",
            sql,
            "--format",
            "parquet",
            "-o",
            "-",
            "--store",
            str(store),
        ],
        capture_output=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    frame = pl.read_parquet(io.BytesIO(done.stdout))
    assert frame.select("campaign_id", "attempt_id").rows() == [
        (c, a) for c in ("c1", "c2") for a in ("r001", "r002")
    ]
    assert list(tmp_path.iterdir()) == []


def test_query_parquet_needs_an_output(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(
        ["query", "SELECT 1", "--format", "parquet", "--store", str(store)], capsys
    )
    assert (code, out) == (2, "")
    assert err == "error: --format parquet needs -o FILE (or -o - for stdout: Parquet is binary)\n"


def test_report_output_dash_is_the_page_on_stdout(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(["report", "c1", "-o", "-", "--store", str(store)], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("<!DOCTYPE html>") and "<h1>c1</h1>" in out
    assert list(tmp_path.iterdir()) == []
    code, out, err = cli(["report", "--all", "-o", "-", "--store", str(store)], capsys)
    assert (code, out) == (2, "")
    assert err == "error: -o -: only one campaign's page goes to stdout; give a folder with --all\n"


def test_import_output_dash_prints_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["import", "kineto", TRACE, "--side", "baseline", "--repetition", "0"]
    code, plain, _ = cli(args, capsys)
    code_dash, dashed, err = cli([*args, "-o", "-"], capsys)
    assert (code, code_dash) == (0, 0) and dashed == plain and json.loads(dashed)["side"]
    assert "-> stdout" in err and list(tmp_path.iterdir()) == []


# -- the CI gate -------------------------------------------------------------------------------
def test_gate_passes_and_fails_on_the_gated_attempts_final_verdict(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["assess", "c1", "--store", str(store), "--format", "json"]
    code, out, _ = cli(base, capsys)
    verdicts = {a["attempt_id"]: a["verdict"] for a in json.loads(out)["campaigns"][0]["attempts"]}
    for attempt, verdict in verdicts.items():  # the example attempts: the gate follows each one
        code, _, err = cli([*base, "--gate", "--attempt", attempt], capsys)
        round_ = int(attempt[1:])
        if verdict == "PASS":
            assert (code, err) == (0, f"gate: attempt {attempt} (round {round_}): PASS\n")
        else:
            assert code == 5 and err.startswith(f"gate: attempt {attempt} (round {round_}): ")
            assert err.endswith(", not PASS\n")
    code, _, err = cli([*base, "--gate"], capsys)  # default: the latest round, r002
    assert err.startswith("gate: attempt r002 (round 2): ")
    assert code == (0 if verdicts["r002"] == "PASS" else 5)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--gate", "--attempt", "r009"],
            "--attempt: no attempt 'r009' in campaign 'c1' (latest attempts: r001, r002)",
        ),
        (["--attempt", "r001"], "--attempt is the attempt --gate decides on: give --gate too"),
        (
            ["--gate", "--what-if", "decision=paired"],
            "--gate needs one CAMPAIGN_ID and the frozen policy (no --all, --what-if)",
        ),
    ],
)
def test_gate_usage_errors(
    store: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    """Refused before any output: no verdict table printed above the usage error."""
    code, out, err = cli(["assess", "c1", "--store", str(store), *extra], capsys)
    assert (code, out, err) == (2, "", f"error: {message}\n")


def test_gate_on_a_blocked_campaign_is_the_integrity_exit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Also: the integrity message names the attempt once."""
    folder = write_example_campaign(tmp_path / "attempts", "c1", attempts=("r001",), repetitions=5)
    mechanism = folder / "r001" / "mechanism.json"
    mechanism.write_text(mechanism.read_text().replace("fewer launches", "edited"))
    store = str(tmp_path / "store")
    assert cli(["ingest", str(tmp_path / "attempts"), "--store", store], capsys)[0] == 0
    code, out, err = cli(["assess", "c1", "--gate", "--store", store], capsys)
    assert (code, err) == (3, "error: blocked by integrity errors: c1\n")
    (line,) = [x for x in out.splitlines() if "[mechanism_digest_mismatch]" in x]
    assert line.startswith("  attempt r001: [mechanism_digest_mismatch] mechanism.json sha256 ")
    assert line.count("r001") == 1


# -- seed --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["simulate", "calibrate"])
def test_seed_is_never_the_data_seed(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`seed` alone is the policy's bootstrap seed everywhere; the data seed is --data-seed."""
    args = [name, str(tmp_path / "sim")] if name == "simulate" else [name]
    code, out, err = cli([*args, "--seed", "3"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        "error: --seed is now --data-seed (the seed of the simulated data); the simulated "
        "campaigns' bootstrap seed is --policy-seed\n"
    )
    assert not (tmp_path / "sim").exists()
    code, out, _ = cli([name, "--help"], capsys)
    text = " ".join(out.split())
    assert "--data-seed" in text and "--policy-seed" in text
    assert "`assess --what-if seed=N` overrides" in text


def test_what_if_seed_is_the_bootstrap_seed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["assess", "--help"], capsys)
    assert code == 0 and "seed (the bootstrap seed)" in " ".join(out.split())


# -- report --all with one shared plotly.js ----------------------------------------------------
@pytest.mark.slow
def test_report_all_shared_plotly(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(
        [
            "report",
            "--all",
            "--shared-plotly",
            "-o",
            str(tmp_path / "shared"),
            "--store",
            str(store),
        ],
        capsys,
    )
    assert (code, err) == (0, "")
    code, _, _ = cli(
        ["report", "--all", "-o", str(tmp_path / "inline"), "--store", str(store)], capsys
    )
    script = f"plotly-{plotly.__version__}.min.js"
    assert (tmp_path / "shared" / script).read_text(encoding="utf-8") == get_plotlyjs()
    bundle = len(get_plotlyjs())
    for cid in ("c1", "c2"):
        shared = (tmp_path / "shared" / f"campaign-{cid}.html").read_text(encoding="utf-8")
        inline = (tmp_path / "inline" / f"campaign-{cid}.html").read_text(encoding="utf-8")
        assert f'<script id="plotlyjs" src="{script}"></script>' in shared
        assert len(shared) < bundle < len(inline)
    assert not list((tmp_path / "inline").glob("plotly-*.js"))
    code, _, err = cli(["report", "c1", "--shared-plotly", "--store", str(store)], capsys)
    assert (code, err) == (
        2,
        "error: --shared-plotly needs --all (a single page carries plotly.js itself)\n",
    )


# -- report -o: a file with a campaign id, a folder with --all ---------------------------------
def test_report_output_with_one_campaign_is_that_file(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "report.html"
    code, out, err = cli(["report", "c1", "--store", str(store), "-o", str(target)], capsys)
    assert (code, out, err) == (0, f"{target}\n", "")
    assert target.is_file() and target.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("name", ["report.html", "Report.HTM"])
def test_report_all_refuses_an_html_name_and_suggests_the_folder(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    target = tmp_path / name
    code, out, err = cli(["report", "--all", "--store", str(store), "-o", str(target)], capsys)
    stem = target.with_suffix("")
    assert (code, out) == (2, "")
    assert err == (
        f"error: -o {target}: with --all, -o is a folder (index.html and one page per "
        f"campaign go into it); give a folder, e.g. -o {stem}/, or one campaign: "
        f"report CAMPAIGN_ID -o {target}\n"
    )
    assert list(tmp_path.iterdir()) == []  # no folder called report.html/


def test_report_of_one_campaign_refuses_a_folder(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for target in (str(tmp_path), str(tmp_path / "new") + "/"):
        code, out, err = cli(["report", "c1", "--store", str(store), "-o", target], capsys)
        assert (code, out) == (2, "") and err.startswith(f"error: -o {target}: is a folder; ")
    assert list(tmp_path.iterdir()) == []


def test_report_help_names_the_output_path_not_a_folder(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = cli(["report", "--help"], capsys)
    assert "-o, --output PATH" in out and "--output DIR" not in out


# -- import --output creates the attempt's folder ------------------------------------------------
def test_import_output_creates_missing_parent_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "attempts" / "c1" / "r01" / "measurements.jsonl"
    args = ["import", "kineto", TRACE, "--side", "baseline", "--repetition", "0", "-o", str(target)]
    code, out, _ = cli(args, capsys)
    assert (code, out) == (0, "")
    assert json.loads(target.read_text())["side"] == "baseline"


# -- one error style -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["assess", "--bogus"],  # click: unknown option
        ["assess", "c1", "--format", "xml"],  # click: bad choice
        ["round"],  # click: missing argument
        ["report"],  # the tool: neither CAMPAIGN_ID nor --all
        ["assess", "c1", "--attempt", "r1"],  # the tool: --attempt without --gate
    ],
)
def test_click_and_the_tool_write_errors_alike(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(args, capsys)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].startswith("error: ") and "Error:" not in err
