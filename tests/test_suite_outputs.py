"""CI outputs per benchmark (issue 25, item 5) of a campaign that decides every benchmark:
Markdown (one row per benchmark, the decided first and by change within each verdict, its
verdict, a legend, the other quantities folded below, at most MAX_MARKDOWN_CHARS), JUnit (a
case per benchmark: regressed fails, inconclusive is skipped) and GitHub (an annotation per
regressed benchmark), through the real command line, with benchmark names that must stay inert
and every edge a member can have."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from assess_fixtures import Attempt, campaign, run, write_store
from conftest import cli_result as _cli

from pipeline.store.tables import Store

HOSTILE = "@octocat ::error::x|y\nz"
"""A benchmark name that would mention a user, start a workflow command, split a Markdown cell
and a line, if any output let it through as it is."""
MOVES = {
    "slower": 0.8,  # the candidate takes 1.25x as long: regressed
    "faster": 1.25,  # improved
    "same": 1.0,  # unchanged (spread 0.2%)
    HOSTILE: 0.8,  # regressed too
    "gone": 1.0,  # vanishes from one candidate run: zero_candidate
    "zero": 1.0,  # zero in one baseline run: zero_baseline
}


def _suite(n: int = 12, status: str = "completed", rnd: int = 1) -> Attempt:
    rng = np.random.default_rng(5 + rnd)
    runs = []
    for rep in range(n):
        for side in ("baseline", "candidate"):
            regions = {
                name: 0.01
                * float(rng.lognormal(0, 0.002))
                * (1 / move if side == "candidate" else 1.0)
                for name, move in MOVES.items()
            }
            if side == "candidate" and rep == 2:
                regions["gone"] = 0.0
            if side == "baseline" and rep == 1:
                regions["zero"] = 0.0
            counters = {"rusage.cpu_seconds": 1.0 + 0.01 * rep, "launches": 100.0}
            runs.append(run(side, rep, sum(regions.values()), breakdown=regions, counters=counters))
    return Attempt("suite", f"r{rnd:03d}", rnd, runs, status=status, candidate="head")


def suite_store(root: Path) -> Store:
    """Campaign ``suite`` (decides every benchmark): r001 with every kind of member, r002 with
    too few pairs, r003 aborted; assessed."""
    from pipeline.assessment.campaigns import assess

    found = Store(root)
    write_store(
        found,
        [campaign("suite", decide="regions", decision="paired", resamples=200)],
        [_suite(), _suite(4, rnd=2), _suite(12, status="aborted", rnd=3)],
    )
    assess(found, ["suite"])
    return found


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return suite_store(tmp_path / "store")


def test_the_report_plots_each_attempts_benchmarks_with_the_margin_band(tmp_path: Path) -> None:
    from test_report import figures

    from pipeline.report import write_report

    page = write_report(suite_store(tmp_path / "store"), "suite", tmp_path / "report.html")
    html = page.read_text(encoding="utf-8")
    assert "<h4>Benchmarks: 7 decided together</h4>" in html
    figure = figures(html)["plot-benchmarks-r001"]
    labels = figure["layout"]["yaxis"]["categoryarray"]
    assert labels[0] == "metric e2e_seconds" and len(labels) == 7
    assert HOSTILE in labels  # HTML-escaped, as every name in the page (nothing to escape here)
    band = figure["layout"]["shapes"][0]
    assert (band["x0"], band["x1"]) == (pytest.approx(1 / 1.01), pytest.approx(1.01))
    names = {t.get("name") for t in figure["data"]}
    assert {"regressed", "improved", "unchanged", "inconclusive"} <= names


def _member_rows(markdown: str, attempt: str) -> list[list[str]]:
    """The rows of one attempt's benchmark table: cells split on unescaped pipes."""
    block = markdown.split(f"**benchmarks of {attempt}**", 1)[1].split("<details", 1)[0]
    lines = [x for x in block.splitlines() if x.startswith("| ")][1:]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", x)[1:-1]] for x in lines]


def test_markdown_shows_one_row_per_benchmark_decided_first_then_by_change(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(
        ["assess", "suite", "--store", str(store.root), "--format", "markdown"], capsys
    )
    assert code == 0, err
    rows = _member_rows(out, "r001")
    names = [r[0] for r in rows]
    assert names[0] == "metric e2e\\_seconds"  # the metric first
    groups = [r[3].split()[0] for r in rows[1:]]  # then regressed, improved, inconclusive (a
    order = ["regressed", "improved", "inconclusive", "unchanged"]  # data reason), unchanged
    assert groups == sorted(groups, key=order.index)
    for verdict in order:  # by change within each: the largest slowdown first
        cells = [r[2].split()[0] for r in rows[1:] if r[3].startswith(verdict)]
        ratios = [float(x) for x in cells if x not in ("-", "inf")]
        assert ratios == sorted(ratios)
    verdicts = {r[0]: r[3] for r in rows}
    assert verdicts["slower"] == "regressed" and verdicts["faster"] == "improved"
    assert verdicts["same"] == "unchanged"
    assert verdicts["gone"] == "inconclusive (zero\\_candidate)"
    assert verdicts["zero"] == "inconclusive (zero\\_baseline)"
    hostile = next(r for r in rows if r[0].startswith("@"))
    assert hostile[3] == "regressed"
    assert "\n" not in hostile[0] and "@\u200docto" in hostile[0] and "x\\|y" in hostile[0]
    assert "ratio &gt; 1: B (the candidate) is faster; 7 members decided together" in out
    # the other quantities folded below, the benchmarks not repeated there
    details = out.split("**benchmarks of r001**", 1)[1].split("</details>", 1)[0]
    assert (
        "<details><summary>r001 (round 1, head): other quantities (counters, rusage.*) 2,"
        in details
    )
    folded = details.split("<summary>", 1)[1]
    assert "rusage.cpu\\_seconds" in folded and "| region |" not in folded
    # too few pairs and an aborted attempt: every member inconclusive, with its reason
    assert {r[3] for r in _member_rows(out, "r002")[1:]} <= {
        "inconclusive (too\\_few\\_pairs)",
        "inconclusive (zero\\_baseline)",
        "inconclusive (zero\\_candidate)",
    }
    assert {r[3] for r in _member_rows(out, "r003")} >= {"inconclusive (attempt\\_aborted)"}


def test_junit_has_a_case_per_benchmark_regressed_and_undecidable_fail_wide_skips(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.xml"
    code, _, err = _cli(
        ["assess", "suite", "--store", str(store.root), "--junit", str(report)], capsys
    )
    assert code == 0, err
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    cases = {
        (c.get("classname"), c.get("name")): c
        for c in suite.iter("testcase")
        if "benchmark" in (c.get("name") or "")
    }
    first = {name: c for (cls, name), c in cases.items() if cls == "suite.r001"}
    assert len(first) == 7
    slower = first["benchmark slower"].find("failure")
    assert slower is not None and slower.get("type") == "regressed"
    assert (slower.get("message") or "").startswith("regressed: 0.79")
    assert "one of 7 members decided together (bonferroni_t)" in (slower.get("message") or "")
    hostile = next(c for name, c in first.items() if "octocat" in (name or ""))
    assert hostile.find("failure") is not None
    assert "\n" not in (hostile.get("name") or "")
    assert first["benchmark faster"].find("failure") is None
    assert first["benchmark faster"].find("skipped") is None
    # undecidable for want of data fails (it fails the regression gate too); wide skips
    gone = first["benchmark gone"].find("failure")
    assert gone is not None and gone.get("type") == "inconclusive"
    assert "inconclusive (zero_candidate)" in (gone.get("message") or "")
    assert first["benchmark metric e2e_seconds"].find("failure") is None
    few = {n: c for (cls, n), c in cases.items() if cls == "suite.r002"}
    assert all(c.find("failure") is not None for c in few.values())
    assert any(c.find("skipped") is not None for c in cases.values())
    failures = sum(1 for c in suite.iter("testcase") if c.find("failure") is not None)
    assert suite.get("failures") == str(failures)


def test_github_annotates_each_regressed_benchmark_of_the_gated_attempt(
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = _cli(
        ["assess", "suite", "--store", str(store.root), "--attempt", "r001", "--gate"], capsys
    )
    assert code in (0, 5), err
    lines = [x for x in err.splitlines() if x.startswith("::")]
    regressed = [x for x in lines if " regressed::" in x]
    assert len(regressed) == 2, lines  # slower and the hostile name, no other member
    assert any("slower regressed::regressed: 0.79" in x for x in regressed)
    hostile = next(x for x in regressed if "octocat" in x)
    assert "x|y\\nz" in hostile and "\n" not in hostile  # the name's line feed escaped
    assert "::error::x" not in hostile.split("::", 2)[2]  # no workflow command inside
    assert "**benchmarks of r001**" in summary.read_text()


def test_a_campaign_that_decides_its_metric_shows_no_benchmark_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store(tmp_path / "plain")
    attempt = _suite()
    attempt.campaign_id = "plain"
    write_store(store, [campaign("plain", decision="paired", resamples=200)], [attempt])
    report = tmp_path / "plain.xml"
    code, out, _ = _cli(
        [
            "assess",
            "plain",
            "--store",
            str(store.root),
            "--format",
            "markdown",
            "--junit",
            str(report),
        ],
        capsys,
    )
    assert code == 0
    assert "**benchmarks of" not in out and "other quantities" not in out
    assert "benchmark " not in report.read_text()
    assert math.isfinite(len(out))


@pytest.mark.slow
def test_markdown_of_a_5000_benchmark_suite_keeps_under_the_cap_with_every_regression(
    store: Store,
) -> None:
    """A PR comment holds 65,536 characters; the full tables of 5,000 benchmarks are ~380 KB.
    The document stays under MAX_MARKDOWN_CHARS, lists the metric and every regressed member
    first, and counts the members it left out by verdict."""
    import polars as pl

    from pipeline.assessment.campaigns import assess
    from pipeline.output.markdown import MAX_MARKDOWN_CHARS, render

    result = assess(store, ["suite"])
    members = result.benchmarks.filter(pl.col("attempt_id") == "r001")
    one = members.filter(pl.col("name") == "same")
    n = 5000
    verdicts = [  # 20 regressed, 2,500 inconclusive, 2,480 unchanged
        "regressed" if k % 250 == 0 else "inconclusive" if k % 2 else "unchanged" for k in range(n)
    ]
    big = pl.concat(
        [
            members.filter(pl.col("quantity") == "metric"),
            pl.concat([one] * n).with_columns(
                pl.Series("name", [f"bench_{k:04d}" for k in range(n)]),
                pl.Series("verdict", verdicts),
                pl.Series("estimate", [1.0 - k * 1e-6 for k in range(n)]),
                pl.lit(n + 1, pl.Int64).alias("family_size"),
            ),
            result.benchmarks.filter(pl.col("attempt_id") != "r001"),
        ]
    )
    assert len(render(result)) < MAX_MARKDOWN_CHARS  # small: nothing left out
    assert "more members" not in render(result)
    markdown = render(replace(result, benchmarks=big))
    assert len(markdown) <= MAX_MARKDOWN_CHARS
    rows = _member_rows(markdown, "r001")
    listed = [r[0] for r in rows]
    assert listed[0] == "metric e2e\\_seconds"
    regressed = [f"bench\\_{k:04d}" for k in range(0, n, 250)]
    assert listed[1:21] == sorted(regressed, reverse=True)  # by change: the slowest first
    assert {r[3] for r in rows[21:]} == {"inconclusive"}  # then inconclusive, by change
    left = n - (len(rows) - 1)
    assert 2480 < left < n - 20
    note = f"… and {left:,} more members ({left - 2480:,} inconclusive, 2,480 unchanged) not"
    assert note in markdown and "the full table is in the HTML report" in markdown


def test_a_document_too_long_without_any_member_row_is_cut_at_a_line_saying_so() -> None:
    from pipeline.output.markdown import MAX_MARKDOWN_CHARS, _cut

    cut = _cut("| a row of a long summary table |\n" * 5000)
    assert len(cut) <= MAX_MARKDOWN_CHARS
    assert cut.splitlines()[-3:-1] == ["| a row of a long summary table |", ""]  # whole rows
    assert cut.splitlines()[-1].startswith("**… cut here: the document has 170,000 characters")
