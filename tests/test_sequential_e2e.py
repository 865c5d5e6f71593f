"""Attempts with and without attempt.json's ``sequential`` object, in a campaign frozen with
``interval: sequential_t``, through the real entry point: ingest -> assess -> query -> report;
the edges of the rules (a +inf pair, too few pairs, a zero baseline) included."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import write_example_campaign
from edge_campaign import CAMPAIGN, POLICY, write_edge_campaign
from scipy import stats
from test_edges_e2e import assessed, cli, comparison, ingest_and_assess, runs

from pipeline.assessment import sequential
from pipeline.study.stored import write_campaign

PLAN = {"first_look": 6, "look_every": 2, "max_pairs": 20}
STOPS = {
    "r001": {**PLAN, "looks": [6], "stopped": "pass"},
    "r002": {**PLAN, "looks": [3], "stopped": "interrupted"},
}


def _add_sequential(attempts: Path) -> None:
    """The edge campaign frozen with sequential_t; r001 and r002 recorded as sequential rounds,
    r003 and r004 as fixed-n rounds."""
    created = json.loads((attempts / CAMPAIGN / "campaign.json").read_text())["created_at"]
    write_campaign(
        attempts,
        CAMPAIGN,
        created_at=created,
        metric={"name": "tokens_per_second", "better": "higher"},
        policy={**POLICY, "interval": "sequential_t"},
    )
    for attempt_id, stop in STOPS.items():
        path = attempts / CAMPAIGN / attempt_id / "attempt.json"
        document = json.loads(path.read_text())
        path.write_text(json.dumps({**document, "sequential": stop}, indent=2))


@pytest.fixture(scope="module")
def seq_edges(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("seq-edges")
    attempts = write_edge_campaign(root / "attempts")
    _add_sequential(attempts)
    ingest_and_assess(attempts, root / "store")
    return attempts, root / "store"


def _metric_x(attempts: Path, attempt_id: str) -> np.ndarray:
    """ln(candidate / baseline) of the metric (better: higher), pairs by repetition."""
    ok = [r for r in runs(attempts, attempt_id) if r["status"] == "ok"]
    by = {(r["side"], r["repetition"]): r["metric"] for r in ok}
    reps = sorted(r for s, r in by if s == "baseline" and ("candidate", r) in by)
    return np.array([math.log(by["candidate", r] / by["baseline", r]) for r in reps])


def _closed_form(x: np.ndarray, c: float) -> tuple[float, float]:
    m, s = float(np.mean(x)), float(np.std(x, ddof=1))
    return math.exp(m - c * s / math.sqrt(len(x))), math.exp(m + c * s / math.sqrt(len(x)))


def test_the_schedule_sets_the_metric_interval(
    seq_edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    attempts, store = seq_edges
    got = assessed(store, capsys)
    metric = comparison(got["r001"], "metric", "tokens_per_second")
    x = _metric_x(attempts, "r001")
    low, high = _closed_form(x, sequential.boundary(6, 2, 20, 0.95))
    assert metric["method"] == "sequential_t" and metric["n_pairs"] == 6
    assert (metric["low"], metric["high"]) == (
        pytest.approx(low, rel=1e-12),
        pytest.approx(high, rel=1e-12),
    )
    # no `sequential` object: one look at n, i.e. student_t's numbers exactly
    fixed = comparison(got["r003"], "metric", "tokens_per_second")
    x3 = _metric_x(attempts, "r003")
    low3, high3 = _closed_form(x3, float(stats.t.ppf(0.975, len(x3) - 1)))
    assert fixed["method"] == "sequential_t"
    assert (fixed["low"], fixed["high"]) == (
        pytest.approx(low3, rel=1e-12),
        pytest.approx(high3, rel=1e-12),
    )


def test_the_edges_keep_their_rules(
    seq_edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, store = seq_edges
    got = assessed(store, capsys)
    vanish = got["r001"]
    for quantity, name in (("region", "launch"), ("counter", "graph_breaks")):
        c = comparison(vanish, quantity, name)  # a +inf pair: the expanded percentile interval
        assert (c["method"], c["high"], c["direction"]) == (
            "expanded_percentile",
            "inf",
            "decrease",
        )
    assert comparison(vanish, "region", "prologue")["reason"] == "zero_baseline"
    few = got["r002"]
    assert (few["verdict"], few["reason"]) == ("INCONCLUSIVE", "too_few_pairs")
    metric = comparison(few, "metric", "tokens_per_second")
    assert (metric["low"], metric["method"]) == (None, None)


def test_the_attempts_table_holds_the_sequential_object(
    seq_edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, store = seq_edges
    sql = (
        "SELECT attempt_id, sequential_first_look, sequential_look_every, sequential_max_pairs,"
        " sequential_looks, sequential_stopped FROM attempts ORDER BY attempt_id"
    )
    code, out, _ = cli(["query", sql, "--format", "csv", "--store", str(store)], capsys)
    assert code == 0
    assert out.splitlines() == [
        "attempt_id,sequential_first_look,sequential_look_every,sequential_max_pairs,"
        "sequential_looks,sequential_stopped",
        "r001,6,2,20,[6],pass",
        "r002,6,2,20,[3],interrupted",
        "r003,,,,,",
        "r004,,,,,",
    ]
    sql = "SELECT DISTINCT method FROM comparisons WHERE method IS NOT NULL ORDER BY method"
    code, out, _ = cli(["query", sql, "--format", "csv", "--store", str(store)], capsys)
    methods = [r["method"] for r in csv.DictReader(io.StringIO(out))]
    assert methods == ["expanded_percentile", "sequential_t"]


def test_report_draws_a_sequential_campaign(
    seq_edges: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, store = seq_edges
    code, page, err = cli(["report", CAMPAIGN, "-o", "-", "--store", str(store)], capsys)
    assert (code, err) == (0, "")
    assert "sequential_t" in page and "plot-attempt-r001" in page


@pytest.mark.slow
def test_what_if_sequential_t_on_a_fixed_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts = write_edge_campaign(tmp_path / "attempts")
    store = ingest_and_assess(attempts, tmp_path / "store")
    capsys.readouterr()
    code, out, _ = cli(
        [
            "assess",
            CAMPAIGN,
            "--store",
            str(store.root),
            "--format",
            "json",
            "--what-if",
            "interval=sequential_t",
        ],
        capsys,
    )
    assert code == 0
    found: dict[str, Any] = json.loads(out)["campaigns"][0]
    by_id = {a["attempt_id"]: a for a in found["attempts"]}
    metric = comparison(by_id["r003"], "metric", "tokens_per_second")
    x3 = _metric_x(attempts, "r003")
    low3, _ = _closed_form(x3, float(stats.t.ppf(0.975, len(x3) - 1)))
    assert metric["method"] == "sequential_t" and metric["low"] == pytest.approx(low3, rel=1e-12)


def test_a_bad_sequential_object_is_rejected_with_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts = write_edge_campaign(tmp_path / "attempts")
    path = attempts / CAMPAIGN / "r001" / "attempt.json"
    document = json.loads(path.read_text())
    bad = {**PLAN, "first_look": 1, "looks": [6], "stopped": "done"}
    path.write_text(json.dumps({**document, "sequential": bad}, indent=2))
    code, _, err = cli(["ingest", str(attempts), "--store", str(tmp_path / "store")], capsys)
    assert code == 1
    assert err.splitlines() == [
        f'{path}:12: field "sequential.first_look": must be >= 2, got 1 [out_of_range]',
        f'{path}:18: field "sequential.stopped": must be one of pass, decided, futility, max, '
        'interrupted, got "done" [not_allowed]',
    ]


@pytest.mark.slow
def test_rows_of_another_constant_recipe_are_recomputed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed recipe of the sequential_t constant (as when it went from 100,000 sequences to
    a million) makes the stored rows of sequential_t campaigns stale: the next assess computes
    them again with today's constant; a percentile campaign beside them keeps its rows."""
    from pipeline.assessment import boundary
    from pipeline.assessment.campaigns import assess
    from pipeline.assessment.staleness import staleness
    from pipeline.ingestion.attempts import ingest
    from pipeline.store.tables import Store

    attempts = write_edge_campaign(tmp_path / "attempts")
    _add_sequential(attempts)
    write_example_campaign(tmp_path / "attempts", "plain", attempts=["r001"])
    store = Store(tmp_path / "store")
    assert ingest(tmp_path / "attempts", store).exit_code in (0, 1)
    first = assess(store)
    assert first.recomputed == first.assessments.height
    assert assess(store).recomputed == 0
    stored = store.read("assessments")
    recipes = dict(zip(stored["campaign_id"], stored["boundary_recipe"], strict=True))
    assert recipes == {CAMPAIGN: boundary.RECIPE, "plain": None}
    monkeypatch.setattr(boundary, "RECIPE", "pcg64-0-100000-linear-6")
    state = staleness(store.read("attempts"), stored, store.read("campaigns"))
    problems = dict(zip(state["campaign_id"], state["problem"], strict=False))
    assert problems == {
        CAMPAIGN: "assessed with another sequential_t constant recipe",
        "plain": None,
    }
    again = assess(store)
    assert (
        again.recomputed
        == again.assessments.filter(again.assessments["campaign_id"] == CAMPAIGN).height
    )
