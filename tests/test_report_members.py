"""The report's table of benchmarks (issue 32): one row per member of each attempt's family,
the failing ones first, every name escaped (markup and Unicode format characters), each side's
absolute median per attempt, and a 5,000-member suite whose page stays usable."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from assess_fixtures import Attempt, campaign, run, write_store
from test_report import figures
from test_suite_outputs import suite_store

from pipeline.assessment.campaigns import assess
from pipeline.report import write_report
from pipeline.report.pages import PLOTTED_MEMBERS
from pipeline.store.tables import Store

SCRIPT_NAME = "test_x[<script>alert(1)</script>]"
RLO_NAME = "test_\u202etsaf_"  # shows as "test__fast" if the U+202E reaches the page raw


class Tables(HTMLParser):
    """Every <table class="... sortable"> of a page: its id, headers, and per row the text and
    data-v of each cell and the row's class."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, list]] = {}
        self.current: dict[str, list] | None = None
        self.cell: list[str] | None = None
        self.key: str | None = None
        self.in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and "sortable" in (a.get("class") or "").split():
            self.current = self.tables.setdefault(str(a["id"]), {"head": [], "rows": []})
        elif self.current is None:
            return
        elif tag == "tr" and not self.in_head:
            self.current["rows"].append({"class": a.get("class") or "", "cells": []})
        elif tag == "thead":
            self.in_head = True
        elif tag in ("td", "th"):
            self.cell = []
            self.key = a.get("data-v")

    def handle_endtag(self, tag: str) -> None:
        if self.current is None:
            return
        if tag == "table":
            self.current = None
        elif tag == "thead":
            self.in_head = False
        elif tag in ("td", "th") and self.cell is not None:
            text = "".join(self.cell)
            if tag == "th":
                self.current["head"].append(text)
            else:
                self.current["rows"][-1]["cells"].append((text, self.key))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def member_tables(page: str) -> dict[str, dict[str, list]]:
    parser = Tables()
    parser.feed(page)
    return parser.tables


@pytest.fixture(scope="module")
def suite_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("suite")
    return write_report(suite_store(root / "store"), "suite", root / "r.html").read_text("utf-8")


@pytest.mark.slow
def test_each_attempt_has_a_row_per_member_the_failing_ones_first(suite_page: str) -> None:
    """Fails before issue 32: the benchmarks were only points of a hover plot."""
    tables = member_tables(suite_page)
    assert set(tables) == {"benchmarks-r001", "benchmarks-r002", "benchmarks-r003"}
    table = tables["benchmarks-r001"]
    assert table["head"] == ["member", "pairs", "ratio [low, high]", "verdict", "reason"]
    rows = [[text for text, _ in r["cells"]] for r in table["rows"]]
    names = [r[0] for r in rows]
    assert names[0] == "metric e2e_seconds"
    assert sorted(names[1:]) == sorted(
        ["slower", "@octocat ::error::x|y\\nz", "faster", "gone", "zero", "same"]
    )  # one line each: the newline of a name shown as \n, as the terminal shows it
    verdicts = [r[3] for r in rows[1:]]
    assert verdicts == ["regressed", "regressed", "improved"] + ["inconclusive"] * 2 + ["unchanged"]
    by_name = {r[0]: r for r in rows}
    assert by_name["slower"][1] == "12" and by_name["slower"][2].startswith("0.7")
    assert by_name["gone"][4] == "the candidate value is 0"  # the reason, in words
    assert by_name["zero"][2] == "—"  # no ratio: zero baseline
    classes = {r["cells"][0][0]: r["class"] for r in table["rows"]}
    assert classes["slower"] == "regressed" and classes["gone"] == "nodata"
    assert classes["same"] == ""
    # the sort keys the page's script reads: numbers for pairs, ratio and verdict rank
    keys = {r["cells"][0][0]: [k for _, k in r["cells"]] for r in table["rows"]}
    assert keys["gone"][2] == "Infinity" and keys["zero"][2] == ""
    assert [int(r["cells"][3][1]) for r in table["rows"]] == sorted(
        int(r["cells"][3][1]) for r in table["rows"]
    )
    short = [r["cells"][3][0] for r in tables["benchmarks-r002"]["rows"]]
    assert set(short) == {"inconclusive"}  # too few pairs: each member says why
    assert "too few pairs for an interval" in {
        r["cells"][4][0] for r in tables["benchmarks-r002"]["rows"]
    }


def test_each_attempt_shows_each_sides_median_in_the_metrics_unit(tmp_path: Path) -> None:
    """Fails before issue 32: the report showed ratios only, never the absolute times."""
    baseline, candidate = [0.5, 0.1, 0.3, 0.2, 0.4], [0.6, 0.9, 0.7, 0.8, 1.0]
    runs = [run("baseline", i, v) for i, v in enumerate(baseline)]
    runs += [run("candidate", i, v) for i, v in enumerate(candidate)]
    runs.append(run("candidate", 5, None, status="failed"))
    store = Store(tmp_path / "store")
    write_store(store, [campaign("abs", decision="paired")], [Attempt("abs", "r001", 1, runs)])
    assess(store, ["abs"])
    page = write_report(store, "abs", tmp_path / "r.html").read_text("utf-8")
    assert (
        "median e2e_seconds per side: baseline <b>0.3</b> <span class='null'>(5 ok runs)</span>"
        " · candidate <b>0.8</b> <span class='null'>(5 ok runs)</span>"
    ) in page


def hostile_store(root: Path) -> Store:
    rng = np.random.default_rng(3)
    runs = []
    for rep in range(8):
        for side in ("baseline", "candidate"):
            slow = 1.3 if side == "candidate" else 1.0
            regions = {
                SCRIPT_NAME: 0.01 * float(rng.lognormal(0, 0.002)) * slow,
                RLO_NAME: 0.01 * float(rng.lognormal(0, 0.002)),
            }
            runs.append(run(side, rep, sum(regions.values()), breakdown=regions))
    store = Store(root)
    write_store(
        store,
        [campaign("hostile", decide="regions", decision="paired", resamples=200)],
        [Attempt("hostile", "r001", 1, runs, candidate="head")],
    )
    assess(store, ["hostile"])
    return store


def test_names_are_escaped_markup_and_format_characters(tmp_path: Path) -> None:
    page = write_report(hostile_store(tmp_path / "s"), "hostile", tmp_path / "r.html")
    text = page.read_text("utf-8")
    assert "<script>alert(1)" not in text
    assert "\u202e" not in text  # nowhere in the page, the plot data included
    rows = member_tables(text)["benchmarks-r001"]["rows"]
    names = [r["cells"][0][0] for r in rows]
    assert names == ["metric e2e_seconds", SCRIPT_NAME, "test_\\u202etsaf_"]
    assert rows[1]["cells"][3][0] == "regressed"
    assert rows[1]["cells"][0][1] == SCRIPT_NAME  # the sort key, decoded, is the name


@pytest.mark.slow
def test_a_5000_member_suite_lists_every_member_and_plots_the_first(tmp_path: Path) -> None:
    """A page the browser can hold: every member in the table, the plot capped at the first
    PLOTTED_MEMBERS in the table's order (a 5,000-row plot was 140,000 px tall)."""
    n = 5000
    rng = np.random.default_rng(1)
    runs = []
    for rep in range(6):
        for side in ("baseline", "candidate"):
            regions = {
                f"tests/test_{i:04d}.py::test_b": 0.01
                * float(rng.lognormal(0, 0.002))
                * (1.25 if side == "candidate" and i % 500 == 7 else 1.0)
                for i in range(n)
            }
            runs.append(run(side, rep, sum(regions.values()), breakdown=regions))
    store = Store(tmp_path / "store")
    write_store(
        store,
        [campaign("big", decide="regions", decision="paired", resamples=200)],
        [Attempt("big", "r001", 1, runs, candidate="head")],
    )
    assess(store, ["big"])
    text = write_report(store, "big", tmp_path / "r.html").read_text("utf-8")
    rows = member_tables(text)["benchmarks-r001"]["rows"]
    assert len(rows) == n + 1
    regressed = [r["cells"][0][0] for r in rows if r["cells"][3][0] == "regressed"]
    assert regressed == [r["cells"][0][0] for r in rows[1:11]]  # the 10 slowed first
    assert len(regressed) == 10
    figure = figures(text)["plot-benchmarks-r001"]
    assert len(figure["layout"]["yaxis"]["categoryarray"]) == PLOTTED_MEMBERS
    assert f"The plot shows the first {PLOTTED_MEMBERS} of the {n + 1} members" in text
    table = text[text.index('<table class="fit sortable"') :]
    assert len(table[: table.index("</table>")]) < 400 * (n + 1)  # bytes per row stay small
