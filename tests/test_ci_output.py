"""CI output of `assess`, `ab` and `campaign final`: the Markdown table, the JUnit XML report and
the GitHub Actions job summary and annotations, through the real entry point and real processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from assess_fixtures import Attempt, expect, run, write_gain_and_blocked
from conftest import cli_result as cli

from pipeline.contract.inert import inert
from pipeline.output.markdown import md

ROOT = Path(__file__).resolve().parent.parent
EXPLAIN = [sys.executable, "-m", "pipeline"]
ODD = "fuse|rms\nnorm <float> *x* _y_ [a](b) `c` \\ #1 & ~z~"
"""A candidate label with every character Markdown or a table reads, and a line break."""
EXPS = [
    expect("region", "attn", "decrease"),
    expect("region", "ref", "unchanged"),
    expect("counter", "launches", "increase"),
    expect("region", "gone", "decrease"),
]


def _attempts(cid: str) -> list[Attempt]:
    """r1 gains (attn halves, launches fall: that expectation is contradicted); r2 no change."""
    gain = [
        run("baseline", r, 2.0, breakdown={"attn": 1.0, "ref": 1.0}, counters={"launches": 10})
        for r in range(6)
    ]
    gain += [
        run("candidate", r, 1.5, breakdown={"attn": 0.5, "ref": 1.0}, counters={"launches": 8})
        for r in range(6)
    ]
    same = [run(side, r, 2.0) for r in range(6) for side in ("baseline", "candidate")]
    return [
        Attempt(cid, "r1", 1, gain, EXPS, candidate=ODD),
        Attempt(cid, "r2", 2, same, candidate="same\x01code"),
    ]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return write_gain_and_blocked(tmp_path / "store", _attempts)


def md_cells(line: str) -> list[str]:
    """The cells of a Markdown table row, unescaped back to the text they show."""
    return [unescape(cell.strip()) for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def unescape(markdown: str) -> str:
    """What a cell shows, without the zero-width joiners that keep names from being mentions
    or links."""
    text = markdown.replace("\u200d", "").replace("<br>", "\n")
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return re.sub(r"\\(.)", r"\1", text)


def table_rows(markdown: str, header_start: str) -> list[list[str]]:
    lines = markdown.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header_start))
    assert set(lines[start + 1]) <= {"|", "-"}
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(md_cells(line))
    return [md_cells(lines[start]), *rows]


# -- Markdown -----------------------------------------------------------------------------------
def test_markdown_table_shows_the_text_tables_rows_and_the_exact_names(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text, _ = cli(["assess", "c", "--store", str(store)], capsys)
    assert code == 0
    code, markdown, err = cli(
        ["assess", "c", "--store", str(store), "--format", "markdown"], capsys
    )
    assert (code, err) == (0, "")
    rows = table_rows(markdown, "| round |")
    headers = re.split(r"\s{2,}", text.splitlines()[1].strip())
    assert rows[0] == headers
    assert len(rows) == 3 and all(len(r) == len(headers) for r in rows)
    assert rows[1][2] == inert(ODD) and rows[2][2] == "same\\x01code"
    # every cell but the candidate's reads as the text table's (whose row the label breaks)
    text_r2 = next(ln for ln in text.splitlines() if ln.startswith("2 "))
    text_cells = re.split(r"\s{2,}", text_r2.strip())
    text_cells += [""] * (len(headers) - len(text_cells))  # the text table drops an empty "best"
    assert [c for i, c in enumerate(rows[2]) if i != 2] == [
        c for i, c in enumerate(text_cells) if i != 2
    ]
    assert rows[1][8] == "PASS" and rows[2][8].startswith("FAIL")


def test_markdown_lists_each_quantity_with_its_declared_outcome(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, markdown, _ = cli(["assess", "c", "--store", str(store), "--format", "markdown"], capsys)
    assert code == 0
    details = markdown.split("<details>")[1]
    rows = table_rows(details, "| quantity |")
    by_name = {(r[0], r[1]): r for r in rows[1:]}
    assert by_name[("metric", "e2e_seconds")][4] == "improved"
    assert by_name[("region_normalized", "attn")][3:] == [
        "2.0000 [2.0000, 2.0000]",
        "decrease",
        "decrease: confirmed",
    ]
    assert by_name[("counter", "launches")][5] == "increase: contradicted"
    assert by_name[("region", "ref")][5] == "unchanged: assumed"
    # a declared region that never appears has no comparison: listed under the table
    assert "- declared region gone decrease: unverifiable" in details


def test_markdown_of_a_blocked_campaign_lists_its_integrity_errors(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, markdown, _ = cli(["assess", "b", "--store", str(store), "--format", "markdown"], capsys)
    assert code == 3
    assert markdown.startswith("### campaign b: BLOCKED by 1 integrity error(s)")
    assert "- attempt r1: \\[mechanism\\_digest\\_mismatch\\]" in markdown
    assert "| round |" not in markdown


# -- JUnit --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_junit_has_a_case_per_attempt_and_expectation(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "out" / "verdicts.xml"
    report.parent.mkdir()
    code, _, _ = cli(["assess", "--all", "--store", str(store), "--junit", str(report)], capsys)
    assert code == 3  # campaign b is blocked; the report is still written
    root = ET.parse(report).getroot()  # well-formed although a label holds \x01
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"b", "c"}
    blocked = suites["b"].findall("testcase")
    assert [(t.get("classname"), t.get("name")) for t in blocked] == [("b", "integrity")]
    error = blocked[0].find("error")
    assert error is not None and "mechanism_digest_mismatch" in (error.text or "")
    assert (suites["b"].get("tests"), suites["b"].get("errors")) == ("1", "1")

    cases = suites["c"].findall("testcase")
    names = [(t.get("classname"), t.get("name")) for t in cases]
    assert names == [
        ("c", f"r1 {inert(ODD)}"),
        ("c.r1", "region attn decrease"),
        ("c.r1", "region ref unchanged"),
        ("c.r1", "counter launches increase"),
        ("c.r1", "region gone decrease"),
        ("c", "r2 same\\x01code"),
    ]
    failures = {t.get("name"): f for t in cases if (f := t.find("failure")) is not None}
    assert set(failures) == {"counter launches increase", "r2 same\\x01code"}
    r2 = failures["r2 same\\x01code"]
    assert r2.get("type") == "FAIL"
    assert r2.get("message", "").startswith("FAIL (not_improved), decision median, paired ratio")
    launches = failures["counter launches increase"]
    assert launches.get("message") == (
        "contradicted: counter launches 1.2500 [1.2500, 1.2500], decrease"
    )
    skipped = [t.get("name") for t in cases if t.find("skipped") is not None]
    assert skipped == ["region gone decrease"]
    assert suites["c"].get("tests") == str(len(cases)) == "6"
    assert (suites["c"].get("failures"), suites["c"].get("skipped")) == ("2", "1")
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("7", "2", "1")


def test_junit_counts_agree_with_the_verdicts(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attempt cases against the json output: failure exactly where the verdict is not PASS."""
    report = tmp_path / "v.xml"
    code, out, _ = cli(
        ["assess", "c", "--store", str(store), "--format", "json", "--junit", str(report)], capsys
    )
    assert code == 0
    attempts = json.loads(out)["campaigns"][0]["attempts"]
    verdicts = {f"{a['attempt_id']} {inert(a['candidate'])}": a["verdict"] for a in attempts}
    cases = {
        t.get("name"): t
        for t in ET.parse(report).getroot().iter("testcase")
        if t.get("classname") == "c"
    }
    assert set(cases) == set(verdicts)
    assert {n: t.find("failure") is None for n, t in cases.items()} == {
        n: v == "PASS" for n, v in verdicts.items()
    }


def test_junit_refuses_a_what_if(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(
        [
            "assess",
            "c",
            "--store",
            str(store),
            "--what-if",
            "decision=paired",
            "--junit",
            str(tmp_path / "x.xml"),
        ],
        capsys,
    )
    assert code == 2
    assert err == "error: --junit reports the frozen policy's verdicts: drop --what-if\n"
    assert not (tmp_path / "x.xml").exists()


# -- GitHub Actions -----------------------------------------------------------------------------
def _github(args: list[str], summary: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), **extra}
    return subprocess.run([*EXPLAIN, *args], capture_output=True, text=True, env=env, cwd=ROOT)


@pytest.mark.slow
def test_github_actions_summary_and_annotations(store: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    done = _github(["assess", "c", "--store", str(store)], summary)
    assert done.returncode == 0, done.stderr
    outside = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    plain = subprocess.run(
        [*EXPLAIN, "assess", "c", "--store", str(store), "--format", "markdown"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=outside,
    )
    assert plain.stdout.startswith("### campaign c")
    assert "::" not in plain.stdout  # outside GitHub Actions: no workflow command
    assert summary.read_text() == "earlier step\n" + plain.stdout  # appended, not replaced
    assert "::" not in done.stdout  # workflow commands go to stderr, stdout keeps the table
    commands = [ln for ln in done.stderr.splitlines() if ln.startswith("::")]
    # one per campaign: its latest round, r2, is FAIL; `same\x01code` and `%` are escaped
    assert commands == [
        "::error title=explain-pipeline%3A c r2 (round 2)::FAIL (not_improved), decision median, "
        "paired ratio 1.0000 [1.0000, 1.0000], median improvement +0.00 %25, explanation "
        "not_declared"
    ]


def test_github_annotations_leave_json_on_stdout_alone(store: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    done = _github(["assess", "--all", "--store", str(store), "--format", "json"], summary)
    assert done.returncode == 3
    json.loads(done.stdout)  # no workflow command mixed into the data
    commands = [ln for ln in done.stderr.splitlines() if ln.startswith("::")]
    assert commands[0].startswith(
        "::error title=explain-pipeline%3A campaign b blocked::1 integrity error(s), first: "
        "[mechanism_digest_mismatch]"
    )
    assert commands[1].startswith("::error title=explain-pipeline%3A c r2 (round 2)::FAIL")
    assert summary.read_text().startswith("### campaign b: BLOCKED")


@pytest.mark.slow
def test_github_gate_annotates_the_gated_attempt(store: Path, tmp_path: Path) -> None:
    done = _github(
        ["assess", "c", "--store", str(store), "--gate", "--attempt", "r1"], tmp_path / "s.md"
    )
    assert done.returncode == 0
    notices = [ln for ln in done.stderr.splitlines() if ln.startswith("::")]
    assert len(notices) == 1
    assert notices[0].startswith("::notice title=explain-pipeline%3A c r1 (round 1)::PASS, ")


# -- ab and campaign final ----------------------------------------------------------------------
@pytest.mark.slow
def test_ab_in_github_actions_writes_junit_summary_and_annotation(tmp_path: Path) -> None:
    """A real `ab` of two real commands (the measurement file written by each run)."""
    script = tmp_path / "measure.py"
    script.write_text(
        "import json, os, sys\n"
        "t = float(sys.argv[1])\n"
        "json.dump({'metric': t, 'breakdown': {'work|x': t * 0.9, 'setup': t * 0.1}},\n"
        "          open(os.environ['EXPLAIN_MEASUREMENT'], 'w'))\n"
    )
    summary, report = tmp_path / "summary.md", tmp_path / "ab.xml"
    python = sys.executable
    done = _github(
        [
            "ab",
            f"{python} {script} 0.2",
            f"{python} {script} 0.1",
            "-n",
            "5",
            "--warmup",
            "0",
            "--junit",
            str(report),
            "--format",
            "markdown",
        ],
        summary,
    )
    assert done.returncode == 0, done.stderr
    markdown = done.stdout
    assert unescape(markdown).startswith(f"**A (baseline):** {python} {script} 0.2\n")
    verdict = "**verdict: PASS** (decision paired, paired ratio 2.0000 [2.0000, 2.0000]"
    assert verdict in unescape(markdown)
    assert summary.read_text() == markdown
    rows = table_rows(markdown.split("<details open>")[1], "| quantity |")
    assert ["region", "work|x", "5", "2.0000 [2.0000, 2.0000]", "decrease", ""] in rows
    assert done.stderr.splitlines()[-1].startswith("::notice title=explain-pipeline%3A ab r001")
    cases = list(ET.parse(report).getroot().iter("testcase"))
    assert [(c.get("classname"), c.find("failure")) for c in cases] == [("ab", None)]


def test_campaign_final_markdown_and_junit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "llama-decode-2026-11"
    shutil.copytree(ROOT / "data" / "attempts" / "llama-decode-2026-11", folder)
    report = tmp_path / "final.xml"
    code, out, _ = cli(
        [
            "campaign",
            "final",
            str(folder),
            "--store",
            str(tmp_path / "s"),
            "--format",
            "markdown",
            "--junit",
            str(report),
        ],
        capsys,
    )
    assert code == 0
    rows = table_rows(out, "| round |")
    assert [r[1] for r in rows[1:]] == [f"r00{i}" for i in range(1, 8)]
    assert "**best attempt:** r001 (round 1, candidate fused-mlp-gemm): PASS\n" in out
    assert (
        "**campaign's gain:** not measured again: no confirmation round of r001 against "
        + md("main@3f2a9c1")
        + " yet (explain-pipeline campaign final "
    ) in out
    assert out.endswith(" --confirm)\n")
    attempts = [
        c
        for c in ET.parse(report).getroot().iter("testcase")
        if c.get("classname") == "llama-decode-2026-11"
    ]
    failed = [c.get("name") for c in attempts if c.find("failure") is not None]
    assert failed == [r[1] + " " + r[2] for r in rows[1:] if r[8] != "PASS"]


# -- attempts rejected at ingest ----------------------------------------------------------------
@pytest.mark.slow
def test_attempts_rejected_at_ingest_are_named_in_every_ci_format(tmp_path: Path) -> None:
    """campaign final on a campaign whose r002 has a negative metric on line 3: the Markdown
    names it with ingest's error, JUnit has a case in error for it, GitHub an error annotation."""
    from conftest import write_example_campaign

    folder = write_example_campaign(tmp_path / "attempts", "c1")
    measurements = folder / "r002" / "measurements.jsonl"
    lines = measurements.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "metric": -1})
    measurements.write_text("\n".join(lines) + "\n")
    report, summary = tmp_path / "final.xml", tmp_path / "summary.md"
    done = _github(
        [
            "campaign",
            "final",
            str(folder),
            "--store",
            str(tmp_path / "store"),
            "--format",
            "markdown",
            "--junit",
            str(report),
        ],
        summary,
    )
    assert done.returncode == 1, done.stderr
    issue = f'{measurements}:3: field "metric": must be > 0 for an ok run, got -1 [not_positive]'
    assert "**Rejected at ingest, not assessed:** r002 (fix the files and ingest again)" in (
        done.stdout
    )
    assert f"- r002: {issue}" in unescape(done.stdout)
    assert summary.read_text() == done.stdout
    cases = {c.get("name"): c for c in ET.parse(report).getroot().iter("testcase")}
    error = cases["r002 (rejected at ingest)"].find("error")
    assert error is not None and error.get("type") == "rejected"
    assert error.get("message") == f"rejected at ingest, not assessed: {issue}"
    root = ET.parse(report).getroot()
    assert root.get("errors") == "1"
    assert any(str(name).startswith("r001 ") for name in cases)  # the valid round: a case
    annotations = [ln for ln in done.stderr.splitlines() if ln.startswith("::error")]
    assert annotations[0].startswith(
        "::error title=explain-pipeline%3A campaign c1 rejected at ingest::not assessed: r002; "
        f"first: {issue}"
    )
