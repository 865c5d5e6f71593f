"""The report's per-pair strip plot, explained fraction, order effect and environment."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import polars as pl
import pytest
from assess_fixtures import Attempt, campaign, expect, run, write_store

from pipeline.assessment.campaigns import assess
from pipeline.report import load_campaign_data, render_campaign
from pipeline.store.tables import Store

FIGURE = re.compile(r'<script type="application/json" data-plot="([^"]+)">(.*?)</script>', re.S)


def _page(tmp_path: Path, environment: str | None, mlp: tuple[float, float] | None = None) -> str:
    """``mlp``: the baseline's and the candidate's value of an undeclared region."""
    runs = []
    for rep in range(8):  # attn 1.0 -> 0.5 and the second run of each repetition 3% slower
        first = rep % 2 == 0
        slow_b, slow_c = (1.0, 1.03) if first else (1.03, 1.0)
        drift = math.exp(0.002 * rep)
        for side, attn, slow, order in (
            ("baseline", 1.0, slow_b, 0 if first else 1),
            ("candidate", 0.5, slow_c, 1 if first else 0),
        ):
            bd = {"attn": attn * drift * slow, "ref": 1.0 * drift * slow}
            if mlp is not None:
                bd["mlp"] = mlp[side == "candidate"] * drift * slow
            runs.append({**run(side, rep, sum(bd.values()), breakdown=bd), "order": order})
    exps = [expect("region", "attn", "decrease"), expect("region", "ref", "unchanged")]
    store = Store(tmp_path / "s")
    write_store(store, [campaign("c", resamples=300)], [Attempt("c", "r1", 1, runs, exps)])
    if environment is not None:
        attempts = store.read("attempts").with_columns(pl.lit(environment).alias("environment"))
        with store.transaction() as txn:
            txn.put("attempts", "c", attempts)
    assess(store)
    return render_campaign(load_campaign_data(store, "c"))


def test_strip_plot_has_one_dot_per_pair_coloured_by_order(tmp_path: Path) -> None:
    page = _page(tmp_path, None)
    figures = {k: json.loads(v) for k, v in FIGURE.findall(page)}
    strip = figures["plot-pairs-r1"]
    pairs = [t for t in strip["data"] if t["mode"] == "markers"]
    dots = [x for trace in pairs for x in trace["x"]]
    assert len(dots) == 8
    assert {t["name"] for t in pairs} == {"baseline ran first", "candidate ran first"}
    by_order = {t["name"]: t["x"] for t in pairs}
    # 2.0 / 1.5 s, and the candidate, when second, 3% slower (or the baseline)
    assert all(abs(x - 4 / 3 / 1.03) < 1e-9 for x in by_order["baseline ran first"])
    assert all(abs(x - 4 / 3 * 1.03) < 1e-9 for x in by_order["candidate ran first"])


def test_strip_plot_lines_are_named_in_its_legend(tmp_path: Path) -> None:
    """1, the gate and the paired estimate are vertical lines, each a legend entry with its value
    (they were unlabelled shapes)."""
    page = _page(tmp_path, None)
    strip = {k: json.loads(v) for k, v in FIGURE.findall(page)}["plot-pairs-r1"]
    lines = {t["name"]: t["x"] for t in strip["data"] if t["mode"] == "lines"}
    estimate = re.search(r"paired estimate (\d\.\d{4})", " ".join(lines))
    assert estimate is not None
    assert lines == {
        "1: no change": [1.0, 1.0],
        "gate ×1.01": [1.01, 1.01],
        estimate.group(0): [pytest.approx(float(estimate.group(1)), abs=5e-5)] * 2,
    }
    assert strip["layout"]["showlegend"] is True and "shapes" not in strip["layout"]


def test_fraction_order_bias_and_environment_are_shown(tmp_path: Path) -> None:
    page = _page(tmp_path, '{"cpu":"Xeon","host":"box-1"}')
    section = page[page.index('<article id="attempt-r1">') :]
    # attn and the reference are the only regions: 1 [1, 1] by construction is not shown (before
    # the fix: "explains 1.0000 of the saving [1.0000, 1.0000]")
    assert "of the saving" not in section
    assert (
        'explained fraction: <span class="reason" title="reason code: all_regions_declared">'
        "every measured region is declared to change" in section
    )
    assert "ORDER BIAS · order effect 0.94" in section
    assert "environment: cpu <b>Xeon</b> · host <b>box-1</b>" in section


def test_a_fraction_is_shown_with_its_interval(tmp_path: Path) -> None:
    """attn saves 0.5 of the reference, the undeclared mlp 0.25: attn explains 2/3 of the saving."""
    page = _page(tmp_path, None, mlp=(1.0, 0.75))
    section = page[page.index('<article id="attempt-r1">') :]
    shown = re.search(r"explains (\d\.\d{4}) of the saving \[(\d\.\d{4}), (\d\.\d{4})\]", section)
    assert shown is not None
    estimate, low, high = (float(x) for x in shown.groups())
    assert estimate == pytest.approx(2 / 3, abs=1e-3)
    assert low <= estimate <= high
