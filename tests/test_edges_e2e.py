"""Every edge of the rules in one campaign, through the real entry point: ingest -> assess ->
query -> report (the browser test draws the same page: test_report_browser.py)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import cli_result as cli
from edge_campaign import CAMPAIGN, write_edge_campaign
from test_report import figures

from pipeline.cli import main
from pipeline.store.tables import Store

SIDES = ("baseline", "candidate")


def ingest_and_assess(attempts: Path, store: Path) -> Store:
    """`ingest` then `assess` through the entry point; both must succeed."""
    for args in (["ingest", str(attempts)], ["assess", CAMPAIGN]):
        with pytest.raises(SystemExit) as exc:
            main([*args, "--store", str(store)])
        assert exc.value.code == 0, args
    return Store(store)


@pytest.fixture(scope="module")
def edges(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(attempts folder, store) with the campaign ingested and assessed."""
    root = tmp_path_factory.mktemp("edges")
    attempts = write_edge_campaign(root / "attempts")
    ingest_and_assess(attempts, root / "store")
    return attempts, root / "store"


def runs(attempts: Path, attempt_id: str) -> list[dict[str, Any]]:
    text = (attempts / CAMPAIGN / attempt_id / "measurements.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def assessed(store: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    code, out, _ = cli(["assess", CAMPAIGN, "--store", str(store), "--format", "json"], capsys)
    assert code == 0
    attempts = json.loads(out)["campaigns"][0]["attempts"]
    return {a["attempt_id"]: a for a in attempts}


def comparison(attempt: dict[str, Any], quantity: str, name: str) -> dict[str, Any]:
    (found,) = [c for c in attempt["comparisons"] if (c["quantity"], c["name"]) == (quantity, name)]
    return found


def test_assess_reports_every_edge(
    edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    attempts, store = edges
    got = assessed(store, capsys)
    vanish = got["r001"]
    # vanished region and counter: +inf, written "inf" (JSON has no infinity), and decreased
    for quantity, name in (("region", "launch"), ("counter", "graph_breaks")):
        c = comparison(vanish, quantity, name)
        assert (c["estimate"], c["high"], c["direction"]) == ("inf", "inf", "decrease")
    assert comparison(vanish, "region", "prologue")["reason"] == "zero_baseline"
    counts = {k: vanish[k] for k in ("n_pairs", "n_unpaired_baseline", "n_failed")}
    assert counts == {"n_pairs": 6, "n_unpaired_baseline": 1, "n_failed": 1}
    # better: higher -> improvement = (median candidate - median baseline) / median baseline
    ok = [r for r in runs(attempts, "r001") if r["status"] == "ok"]
    med = {s: np.median([r["metric"] for r in ok if r["side"] == s]) for s in SIDES}
    expected = (med["candidate"] - med["baseline"]) / med["baseline"] * 100
    assert vanish["improvement_pct"] == pytest.approx(expected, rel=1e-12) and expected > 0
    few = got["r002"]
    assert (few["verdict"], few["reason"]) == ("INCONCLUSIVE", "too_few_pairs")
    assert comparison(few, "metric", "tokens_per_second")["low"] is None
    noref = got["r003"]
    assert comparison(noref, "region_normalized", "attention")["reason"] == "no_reference_time"
    assert comparison(noref, "share_speedup", "reference_share")["reason"] == "zero_share"
    aborted = got["r004"]
    assert (aborted["verdict"], aborted["reason"]) == ("INCONCLUSIVE", "attempt_aborted")


def test_query_named_and_ad_hoc(
    edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    attempts, store = edges
    code, out, _ = cli(
        ["query", "--name", "runs_per_side", "--format", "csv", "--store", str(store)], capsys
    )
    assert code == 0
    rows = {(r["attempt_id"], r["side"]): r for r in csv.DictReader(io.StringIO(out))}
    vanish = runs(attempts, "r001")
    for side in SIDES:
        mine = [r for r in vanish if r["side"] == side]
        ok = sum(r["status"] == "ok" for r in mine)
        assert (int(rows["r001", side]["ok_runs"]), int(rows["r001", side]["failed_runs"])) == (
            ok,
            len(mine) - ok,
        )
    sql = (
        "SELECT attempt_id, quantity, name FROM comparisons WHERE estimate > 1e308 "
        "ORDER BY attempt_id, quantity, name"
    )
    code, out, _ = cli(["query", sql, "--format", "csv", "--store", str(store)], capsys)
    assert code == 0
    assert out.splitlines() == [
        "attempt_id,quantity,name",
        "r001,counter,graph_breaks",
        "r001,region,launch",
        "r001,region_normalized,launch",
    ]


def test_report_draws_the_vanished_quantities_at_infinity(
    edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, store = edges
    code, out, err = cli(["report", "--all", "--store", str(store), "-o", str(tmp_path)], capsys)
    assert (code, err) == (0, "")
    assert out == f"{tmp_path / 'index.html'}\n"
    page = (tmp_path / f"campaign-{CAMPAIGN}.html").read_text(encoding="utf-8")
    fig = figures(page)["plot-attempt-r001"]
    edge = 10 ** fig["layout"]["xaxis"]["range"][1]
    xs = [x for trace in fig["data"] for x in trace.get("x", []) if x is not None]
    assert all(math.isfinite(x) for x in xs) and max(xs) == pytest.approx(edge)
    marks = [t for trace in fig["data"] for t in (trace.get("text") or [])]
    assert marks.count("∞") == 3  # region launch, its normalized row, counter graph_breaks


def test_report_names_each_ratio_by_its_direction(
    edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """better: higher -> the metric's ratio is candidate / baseline; regions stay baseline /
    candidate; the share speedup is the candidate's reference share over the baseline's."""
    _, store = edges
    code, page, _ = cli(["report", CAMPAIGN, "-o", "-", "--store", str(store)], capsys)
    assert code == 0
    figs = figures(page)
    forest = figs["plot-attempt-r001"]
    assert "baseline / candidate" not in forest["layout"]["xaxis"]["title"]["text"]
    hovers = [h for trace in forest["data"] for h in (trace.get("hovertext") or [])]

    def hover(label: str) -> str:
        (found,) = [h for h in hovers if h.startswith(f"<b>{label}</b>")]
        return found

    assert "ratio (candidate / baseline) " in hover("metric tokens_per_second")
    assert "ratio (baseline / candidate) " in hover("region attention")
    assert "ratio (candidate's reference share / baseline's) " in hover("share speedup")
    timeline = figs["plot-timeline"]["layout"]
    assert timeline["yaxis"]["title"]["text"] == "candidate / baseline (> 1: better)"
    assert "the metric (higher is better) candidate / baseline;" in page


def test_ci_formats_and_plan_take_every_edge(
    edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The CI outputs and `plan` read the same campaign: +inf, zero baselines, too few pairs,
    unpaired and failed runs, an aborted attempt."""
    attempts, store = edges
    got = assessed(store, capsys)
    markdown = ["assess", CAMPAIGN, "--store", str(store), "--format", "markdown"]
    code, out, err = cli(markdown, capsys)
    assert (code, err) == (0, "")
    verdicts = {a: v["verdict"] for a, v in got.items()}
    for attempt_id, verdict in verdicts.items():  # the verdict table: | round | attempt | ...
        (row,) = [r for r in out.splitlines() if re.match(rf"\| \d+ \| {attempt_id} \|", r)]
        assert verdict in row
    junit = tmp_path / "edges.xml"
    code, _, _ = cli(["assess", CAMPAIGN, "--store", str(store), "--junit", str(junit)], capsys)
    assert code == 0
    cases = ET.parse(junit).getroot().iter("testcase")
    failed = {c.get("name", "").split()[0] for c in cases if c.find("failure") is not None}
    assert {a for a, v in verdicts.items() if v == "FAIL"} <= failed
    code, out, err = cli(["plan", str(attempts / CAMPAIGN)], capsys)
    assert (code, err) == (0, "")
    priced = [line.split() for line in out.splitlines() if line.startswith(("metric", "region"))]
    # every gain asked (2, 5, 10%) clears the 1% gate and the edge campaign's spreads are tiny
    assert priced and all("never" not in line and "nan" not in line for line in priced)
