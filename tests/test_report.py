"""The HTML report: content, escaping, blocked campaigns, offline-ness and the CLI."""

from __future__ import annotations

import html
import json
import re
import shutil
import sys
import types
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.offline
import polars as pl
import pytest
from conftest import cli_result as run_cli

from pipeline.assessment.campaigns import assess
from pipeline.contract.policy import PolicyValue
from pipeline.contract.schemas import table
from pipeline.errors import ExitCode
from pipeline.ingestion.attempts import ingest
from pipeline.report import (
    IndexResult,
    load_campaign_data,
    render_campaign,
    script_json,
    write_all,
    write_report,
)
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt

XSS_HYPOTHESIS = 'Fusing saves launches <script>alert(1)</script> & "quotes" <b>bold</b>'
XSS_REGION = "<img src=x onerror=alert(2)>"
T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)


# -- a small store with output tables written by hand (independent of the assess engine) ----------
def frame(table_name: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Rows with every column of the table (missing ones null), typed as tables.json says."""
    spec = table(table_name)
    schema = spec.polars_schema(with_partition=False)
    return pl.DataFrame(
        [{c: row.get(c) for c in schema.names()} for row in rows], schema=schema, orient="row"
    )


def campaign_row(cid: str, **policy: Any) -> dict[str, Any]:
    return {
        "kind": "project",
        "created_at": T0,
        "metric_name": "e2e_seconds",
        "metric_better": "lower",
        "decision": "median",
        "require_explanation": False,
        "min_improvement_pct": 1.0,
        "confidence": 0.95,
        "resamples": 2000,
        "seed": 0,
        "min_pairs": 5,
        "policy_json": "{}",
        "policy_sha256": f"{cid}-policy",
        "policy_sha256_actual": f"{cid}-policy",
        "source_sha256": f"{cid}-source",
        **policy,
    }


def attempt_row(aid: str, rnd: int, candidate: str, **extra: Any) -> dict[str, Any]:
    return {
        "attempt_id": aid,
        "round": rnd,
        "candidate": candidate,
        "baseline": "main@3f2a9c1",
        "status": "completed",
        "started_at": T0,
        "n_lines": 20,
        "inputs_sha256": f"{aid}-inputs",
        "source_dir": f"attempts/c/{aid}",
        **extra,
    }


def assessment_row(cid: str, aid: str, rnd: int, candidate: str, **extra: Any) -> dict[str, Any]:
    return {
        "attempt_id": aid,
        "round": rnd,
        "candidate": candidate,
        "status": "completed",
        "n_pairs": 10,
        "n_baseline_ok": 10,
        "n_candidate_ok": 10,
        "n_unpaired_baseline": 0,
        "n_unpaired_candidate": 0,
        "n_failed": 0,
        "median_verdict": "FAIL",
        "paired_verdict": "FAIL",
        "explanation": "not_declared",
        "decision": "median",
        "require_explanation": False,
        "verdict": "FAIL",
        "statistical_significance": "not_established",
        "eligible": False,
        "best": False,
        "policy_sha256": f"{cid}-policy",
        "inputs_sha256": f"{aid}-inputs",
        "campaign_sha256": f"{cid}-source",
        **extra,
    }


def comparison(
    aid: str,
    quantity: str,
    name: str,
    est: float | None,
    low: float | None,
    high: float | None,
    direction: str | None,
    status: str = "ok",
    reason: str | None = None,
    n_pairs: int = 10,
) -> dict[str, Any]:
    return {
        "attempt_id": aid,
        "quantity": quantity,
        "name": name,
        "n_pairs": n_pairs,
        "estimate": est,
        "low": low,
        "high": high,
        "direction": direction,
        "status": status,
        "reason": reason,
    }


def outcome(
    aid: str,
    position: int,
    target: str,
    name: str,
    expect: str,
    evidence: str | None,
    direction: str | None,
    result: str,
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "attempt_id": aid,
        "position": position,
        "target": target,
        "name": name,
        "expect": expect,
        "evidence": evidence,
        "direction": direction,
        "outcome": result,
        "reason": reason,
    }


GOOD = "c-good"
BLOCKED = "c-blocked"
FRESH = "c-fresh"

COMPARISONS = [
    # r001: explained, with an interval that runs to +inf (a counter that vanished)
    comparison("r001", "metric", "e2e_seconds", 1.031, 1.018, 1.044, "improved"),
    comparison("r001", "region", "attention", 1.130, 1.100, 1.161, "decrease"),
    comparison("r001", "region", "sampling", 1.001, 0.990, 1.012, "none"),
    comparison("r001", "region_normalized", "attention", 1.128, 1.101, 1.150, "decrease"),
    comparison("r001", "share_speedup", "share", 1.029, 1.015, 1.043, "improved"),
    comparison("r001", "counter", "dram_bytes", 1.136, 1.135, 1.137, "decrease"),
    comparison("r001", "counter", "graph_breaks", float("inf"), 3.0, float("inf"), "decrease"),
    # r002: contradicted; a counter with a zero baseline and a region with too few pairs
    comparison("r002", "metric", "e2e_seconds", 0.995, 0.980, 1.010, "none"),
    comparison("r002", "region", "attention", 0.950, 0.930, 0.970, "increase"),
    comparison(
        "r002", "region", XSS_REGION, 1.2, None, None, None, "unverifiable", "too_few_pairs", 3
    ),
    comparison(
        "r002",
        "counter",
        "kernel_launches",
        None,
        None,
        None,
        None,
        "unverifiable",
        "zero_baseline",
    ),
]
OUTCOMES = [
    outcome(
        "r001", 0, "region", "attention", "decrease", "region_normalized", "decrease", "confirmed"
    ),
    outcome("r001", 1, "counter", "dram_bytes", "decrease", "counter", "decrease", "confirmed"),
    outcome("r001", 2, "region", "sampling", "unchanged", "region", "none", "assumed"),
    outcome("r002", 0, "region", "attention", "decrease", "region", "increase", "contradicted"),
    outcome(
        "r002",
        1,
        "counter",
        "kernel_launches",
        "decrease",
        "counter",
        None,
        "unverifiable",
        "zero_baseline",
    ),
    outcome(
        "r002", 2, "region", "kv_cache", "decrease", None, None, "unverifiable", "never_appears"
    ),
]
INTEGRITY: list[dict[str, Any]] = [
    {
        "attempt_id": None,
        "code": "policy_digest_mismatch",
        "expected": "aaa",
        "actual": "bbb",
        "message": "campaign policy_sha256 aaa differs from the canonical policy's bbb",
    },
    {
        "attempt_id": "r001",
        "code": "declared_after_start",
        "expected": "2026-11-01T12:00:00Z",
        "actual": "2026-11-01T12:05:00Z",
        "message": "declared_at <after> started_at",
    },
]


def build_store(root: Path) -> Store:
    """Three campaigns: one assessed (PASS / FAIL / a failed attempt), one blocked with stale
    verdicts still stored, one ingested but never assessed."""
    store = Store(root)
    good_attempts = [
        attempt_row("r001", 1, "fuse-rmsnorm", hypothesis=XSS_HYPOTHESIS),
        attempt_row("r002", 2, "tile-64", hypothesis="Bigger tiles cut DRAM traffic"),
        attempt_row("r003", 3, "broken", status="failed"),
    ]
    assessments = [
        assessment_row(
            GOOD,
            "r001",
            1,
            "fuse-rmsnorm",
            improvement_pct=2.9,
            paired_estimate=1.031,
            paired_low=1.018,
            paired_high=1.044,
            median_verdict="PASS",
            paired_verdict="PASS",
            share_speedup=1.029,
            explanation="explained",
            verdict="PASS",
            eligible=True,
            best=True,
        ),
        assessment_row(
            GOOD,
            "r002",
            2,
            "tile-64",
            improvement_pct=-0.4,
            median_reason="not_improved",
            paired_estimate=0.995,
            paired_low=0.98,
            paired_high=1.01,
            paired_reason="within_noise",
            explanation="contradicted",
            reason="not_improved",
        ),
        assessment_row(
            GOOD,
            "r003",
            3,
            "broken",
            status="failed",
            n_pairs=0,
            n_baseline_ok=0,
            n_candidate_ok=0,
            median_verdict="INCONCLUSIVE",
            median_reason="no_samples",
            paired_verdict="INCONCLUSIVE",
            paired_reason="too_few_pairs",
            verdict="INCONCLUSIVE",
            reason="attempt_failed",
        ),
    ]
    with store.transaction() as txn:
        txn.put("campaigns", GOOD, frame("campaigns", [campaign_row(GOOD)]))
        txn.put("attempts", GOOD, frame("attempts", good_attempts))
        txn.put("integrity", GOOD, frame("integrity", []))
        txn.put("assessments", GOOD, frame("assessments", assessments))
        txn.put("comparisons", GOOD, frame("comparisons", COMPARISONS))
        txn.put("outcomes", GOOD, frame("outcomes", OUTCOMES))
        txn.put("expectations", GOOD, frame("expectations", OUTCOMES))

        txn.put("campaigns", BLOCKED, frame("campaigns", [campaign_row(BLOCKED)]))
        txn.put("attempts", BLOCKED, frame("attempts", good_attempts[:1]))
        txn.put("integrity", BLOCKED, frame("integrity", INTEGRITY))
        txn.put("expectations", BLOCKED, frame("expectations", OUTCOMES[:3]))
        # verdicts left over from before the block: the report must not show them
        txn.put("assessments", BLOCKED, frame("assessments", assessments[:1]))
        txn.put("comparisons", BLOCKED, frame("comparisons", COMPARISONS[:7]))
        txn.put("outcomes", BLOCKED, frame("outcomes", OUTCOMES[:3]))

        txn.put("campaigns", FRESH, frame("campaigns", [campaign_row(FRESH)]))
        txn.put("attempts", FRESH, frame("attempts", good_attempts[:1]))
    return store


@pytest.fixture()
def store(tmp_path: Path) -> Store:
    return build_store(tmp_path / "store")


@pytest.fixture()
def good_html(store: Store) -> str:
    return render_campaign(load_campaign_data(store, GOOD))


# -- helpers reading the page back -------------------------------------------------------------
PLOTLY_BLOCK = re.compile(r'<script id="plotlyjs">(.*?)</script>', re.S)
FIGURE_BLOCK = re.compile(
    r'<script type="application/json" data-plot="([^"]+)">(.*?)</script>', re.S
)


def without_plotly_bundle(page: str) -> str:
    return PLOTLY_BLOCK.sub('<script id="plotlyjs"></script>', page)


def figures(page: str) -> dict[str, dict[str, Any]]:
    def no_constants(name: str) -> None:
        raise AssertionError(f"figure JSON holds {name}")

    return {
        pid: json.loads(body, parse_constant=no_constants)
        for pid, body in FIGURE_BLOCK.findall(page)
    }


def article(page: str, attempt_id: str) -> str:
    start = page.index(f'<article id="attempt-{attempt_id}">')
    return page[start : page.index("</article>", start)]


# -- content -----------------------------------------------------------------------------------
def test_every_attempt_has_its_section_and_plot(good_html: str) -> None:
    plots = figures(good_html)
    for aid in ("r001", "r002", "r003"):
        assert f'<article id="attempt-{aid}">' in good_html
    assert {"plot-timeline", "plot-attempt-r001", "plot-attempt-r002"} <= set(plots)
    assert "No comparison" in article(good_html, "r003")  # failed attempt: no plot, said so


def test_every_expectation_outcome_is_shown_in_its_attempt(good_html: str) -> None:
    for o in OUTCOMES:
        section = article(good_html, o["attempt_id"])
        assert re.search(
            rf"<td>{o['target']} {o['name']}: {o['expect']}</td><td><span [^>]*>"
            rf"{o['outcome']}</span>",
            section,
        ), o


def test_outcome_marks_sit_on_the_row_of_their_evidence(good_html: str) -> None:
    fig = figures(good_html)["plot-attempt-r001"]
    rows = fig["layout"]["yaxis"]["categoryarray"]
    marks = {a["y"]: a["text"] for a in fig["layout"]["annotations"] if a.get("xref") == "paper"}
    # attention's evidence is the normalized region (the mechanism has a reference region)
    assert "confirmed" in marks["region attention / ref"]
    assert "confirmed" in marks["counter dram_bytes"]
    assert "assumed" in marks["region sampling"]
    assert "region attention" not in marks  # the raw row carries no mark
    assert len(marks) == 3 and set(marks) <= set(rows)


def test_every_comparison_is_a_row_of_the_forest_plot(good_html: str) -> None:
    for aid in ("r001", "r002"):
        fig = figures(good_html)[f"plot-attempt-{aid}"]
        rows = fig["layout"]["yaxis"]["categoryarray"]
        plotted = {y for trace in fig["data"] for y in (trace.get("y") or []) if y is not None}
        names = [c["name"] for c in COMPARISONS if c["attempt_id"] == aid]
        missing = [o["name"] for o in OUTCOMES if o["attempt_id"] == aid and o["evidence"] is None]
        assert len(rows) == len(names) + len(missing)
        assert set(rows) == plotted  # every row has a mark or a text on the plot
        for name in names + missing:
            escaped = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            assert any(escaped in r for r in rows), name


def test_every_figure_is_valid_for_plotly(good_html: str) -> None:
    """The forest plots are plain dicts (fast); plotly's own validation accepts each of them."""
    for pid, fig in figures(good_html).items():
        go.Figure(fig)  # raises ValueError on any unknown property or bad value
        assert fig["data"], pid


def test_forest_plot_has_a_line_at_one_on_a_log_axis(good_html: str) -> None:
    fig = figures(good_html)["plot-attempt-r001"]
    assert fig["layout"]["xaxis"]["type"] == "log"
    lines = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert any(s["x0"] == 1 and s["x1"] == 1 for s in lines)


def test_unverifiable_quantities_are_listed_with_their_reason(good_html: str) -> None:
    section = article(good_html, "r002")
    side = section[section.index("Unverifiable quantities") :]
    assert (
        'counter kernel_launches</b> — <span class="reason" title="reason code: '
        'zero_baseline">the baseline value is 0 (no ratio)</span>'
    ) in side
    assert "too_few_pairs" in side and "estimate 1.2000" in side
    assert (
        'region kv_cache</b> — <span class="reason" title="reason code: never_appears">'
        "never measured in this attempt</span>"
    ) in side
    fig = figures(good_html)["plot-attempt-r002"]
    texts = [t for trace in fig["data"] for t in (trace.get("text") or [])]
    assert "unverifiable: zero_baseline" in texts  # also written on the plot, at ratio 1


def test_infinite_estimates_are_drawn_at_the_edge_not_dropped(good_html: str) -> None:
    fig = figures(good_html)["plot-attempt-r001"]
    edge = 10 ** fig["layout"]["xaxis"]["range"][1]
    points = [
        (x, y)
        for trace in fig["data"]
        if trace.get("mode") == "markers"
        for x, y in zip(trace["x"], trace["y"], strict=True)
    ]
    assert (pytest.approx(edge), "counter graph_breaks") in points
    texts = [t for trace in fig["data"] for t in (trace.get("text") or [])]
    assert "∞" in texts


def test_timeline_has_gate_band_best_and_every_round(good_html: str) -> None:
    fig = figures(good_html)["plot-timeline"]
    band = [s for s in fig["layout"]["shapes"] if s["type"] == "rect"]
    assert any(s["y0"] == 1 and s["y1"] == pytest.approx(1.01) for s in band)
    xs = {x for trace in fig["data"] for x in (trace.get("x") or []) if x is not None}
    assert xs == {"r1 · r001", "r2 · r002", "r3 · r003"}
    best = [t for t in fig["data"] if t.get("name") == "best attempt"]
    assert best and best[0]["x"] == ["r1 · r001"]


def test_verdict_table_has_the_columns_of_assess_and_every_column_on_demand(
    good_html: str,
) -> None:
    section = good_html[good_html.index('<section id="verdicts">') :]
    section = section[: section.index("</section>")]
    compact, full = section.split('<details id="all-columns">')
    assert re.findall(r"<th>([^<]+)</th>", compact) == [
        "round",
        "attempt",
        "candidate",
        "pairs",
        "median %",
        "paired [low, high]",
        "share",
        "explanation",
        "verdict",
        "reason",
        "eligible",
        "best",
    ]
    assert '<td class="nowrap">1.0310 [1.0180, 1.0440]</td>' in compact and "+2.90%" in compact
    assert re.findall(r"<th>([^<]+)</th>", full) == [
        c
        for c in table("assessments").names
        if c not in ("campaign_id", "inputs_sha256", "campaign_sha256", "boundary_recipe")
    ]
    for part in (compact, full):
        assert part.count("<tr") == 1 + 3
        assert part.count('<tr class="best">') == 1


def test_header_shows_metric_policy_and_digest(good_html: str) -> None:
    summary = good_html[good_html.index('<section id="summary">') :]
    summary = summary[: summary.index("</section>")]
    for text in ("e2e_seconds", "lower", "median", "2000", "min_pairs", f"{GOOD}-policy"):
        assert text in summary
    assert "blocked" not in summary


# -- escaping ------------------------------------------------------------------------------------
def test_hypothesis_and_names_stay_text(good_html: str) -> None:
    escaped = (
        "Fusing saves launches &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot; "
        "&lt;b&gt;bold&lt;/b&gt;"
    )
    assert f'<blockquote class="hypothesis">{escaped}</blockquote>' in good_html
    assert "alert(1)</script>" not in good_html and "<script>alert" not in good_html
    page = without_plotly_bundle(good_html)
    assert "<img" not in page and "<b>bold" not in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page


def test_plot_text_uses_only_the_entities_plotly_decodes() -> None:
    """Plotly draws labels and hovers with its own small HTML, whose entity table (read here
    from the bundled plotly.js) has no `quot`: a label with a quote showed "&quot;" before the
    fix. Plot text escapes only &, < and >; numeric references are decoded too."""
    from plotly.offline import get_plotlyjs

    from pipeline.report.style import plot_esc

    bundle = get_plotlyjs()
    table = re.search(r"\{mu:[^}]*amp:[^}]*\}", bundle)
    assert table is not None
    decoded = set(re.findall(r"(\w+):", table.group(0)))
    text = plot_esc('kernel "fused" <b> & it\'s')
    assert text == 'kernel "fused" &lt;b&gt; &amp; it\'s'
    assert set(re.findall(r"&(\w+);", text)) <= decoded and "quot" not in decoded


def test_json_in_script_cannot_close_the_element() -> None:
    text = script_json({"label": "</script><!-- <b> & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"label": "</script><!-- <b> & \u2028"}


def test_figure_blocks_contain_no_raw_angle_brackets(good_html: str) -> None:
    blocks = FIGURE_BLOCK.findall(good_html)
    assert len(blocks) == 3
    for _, body in blocks:
        assert "<" not in body and ">" not in body


# -- offline -------------------------------------------------------------------------------------
def test_page_loads_nothing_from_the_network(good_html: str) -> None:
    bundles = PLOTLY_BLOCK.findall(good_html)
    assert bundles == [plotly.offline.get_plotlyjs()]  # inlined once, verbatim
    page = without_plotly_bundle(good_html)
    for needle in ("http://", "https://", "//cdn", "<link", "@import", "url(", "<iframe"):
        assert needle not in page, needle
    assert "MathJax" not in page
    loads = LinkCollector.of(page)
    assert all(value.startswith("#") for tag, attr, value in loads if attr == "href"), loads
    assert [x for x in loads if x[1] != "href"] == []  # no src, srcset, data, poster, ...


class LinkCollector(HTMLParser):
    """Every attribute of the page through which a browser could load something."""

    ATTRS = {"src", "href", "srcset", "data", "poster", "action", "background", "xlink:href"}

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [(tag, a, v or "") for a, v in attrs if a in self.ATTRS]

    @classmethod
    def of(cls, page: str) -> list[tuple[str, str, str]]:
        parser = cls()
        parser.feed(page)
        return parser.found


# -- blocked -------------------------------------------------------------------------------------
def test_blocked_campaign_shows_integrity_errors_and_no_verdicts(store: Store) -> None:
    page = render_campaign(load_campaign_data(store, BLOCKED))
    assert "This campaign is blocked" in page
    for error in INTEGRITY:
        assert f"<td>{error['code']}</td>" in page
        assert html.escape(error["message"]) in page
    assert '<td><a href="#attempt-(campaign)">' not in page
    assert "<td>(campaign)</td>" in page  # the campaign-level error names no attempt
    for verdict_word in ("PASS", "FAIL", "INCONCLUSIVE", "explained", "confirmed"):
        assert verdict_word not in page, verdict_word
    assert 'id="verdicts"' not in page and FIGURE_BLOCK.findall(page) == []
    assert "out of date" not in page  # no verdicts, so none is stale either
    assert '<article id="attempt-r001">' in page  # the attempt and its declaration stay visible
    assert "&lt;script&gt;alert(1)" in page


# -- stale and what-if -------------------------------------------------------------------------
def test_attempts_changed_since_assess_are_flagged(store: Store) -> None:
    attempts = store.read("attempts", [GOOD]).with_columns(
        pl.when(pl.col("attempt_id") == "r002")
        .then(pl.lit("changed"))
        .otherwise("inputs_sha256")
        .alias("inputs_sha256")
    )
    with store.transaction() as txn:
        txn.put("attempts", GOOD, attempts)
    page = render_campaign(load_campaign_data(store, GOOD))
    assert "The stored verdicts are out of date" in page
    assert "<li><b>r002</b>: inputs changed since it was assessed</li>" in page
    assert "<li><b>r001</b>" not in page


def test_what_if_verdicts_are_labelled_and_do_not_replace_the_frozen_ones(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    def fake_assess(st: Store, ids: list[str], *, what_if: dict[str, str], write: bool) -> Any:
        calls.append({"ids": ids, "what_if": what_if, "write": write})
        frozen = st.read("assessments", ids)
        changed = frozen.with_columns(
            pl.lit("paired").alias("decision"),
            pl.when(pl.col("attempt_id") == "r001")
            .then(pl.lit("FAIL"))
            .otherwise("verdict")
            .alias("verdict"),
        )
        return types.SimpleNamespace(assessments=changed)

    fake = types.SimpleNamespace(assess=fake_assess)
    monkeypatch.setitem(sys.modules, "pipeline.assessment.campaigns", fake)
    page = render_campaign(load_campaign_data(store, GOOD, what_if={"decision": "paired"}))
    assert calls == [{"ids": [GOOD], "what_if": {"decision": "paired"}, "write": False}]
    section = page[page.index('<section id="what-if">') :]
    section = section[: section.index("</section>")]
    assert "What-if: decision=paired." in section
    assert section.count('<tr class="changed">') == 1
    verdicts = page[page.index('<section id="verdicts">') :]
    assert (
        '<tr class="best"><td><a href="#attempt-r001">r001</a>' in verdicts
    )  # the frozen PASS is still the frozen verdict


# -- writing and the CLI -----------------------------------------------------------------------
def test_write_report_and_all(store: Store, tmp_path: Path) -> None:
    out = write_report(store, GOOD, tmp_path / "one.html")
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    result = write_all(store, tmp_path / "all")
    assert result.index == tmp_path / "all" / "index.html"
    assert sorted(p.name for p in result.pages) == [
        f"campaign-{BLOCKED}.html",
        f"campaign-{GOOD}.html",
    ]
    assert result.not_assessed == [FRESH]
    index = result.index.read_text(encoding="utf-8")
    for page in result.pages:
        assert f'href="{page.name}"' in index
    assert f"explain-pipeline assess {FRESH}" in index
    good = (tmp_path / "all" / f"campaign-{GOOD}.html").read_text(encoding="utf-8")
    assert 'href="index.html"' in good
    assert not list((tmp_path / "all").glob(".*.tmp"))


def test_cli_prints_the_path_written(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    code, stdout, _ = run_cli(["report", GOOD, "--store", str(store.root), "-o", str(out)], capsys)
    assert (code, stdout) == (0, f"{out}\n")
    assert "fuse-rmsnorm" in out.read_text(encoding="utf-8")


def test_cli_all_writes_index_and_warns_about_unassessed(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "site"
    code, stdout, err = run_cli(
        ["report", "--all", "--store", str(store.root), "-o", str(out)], capsys
    )
    assert (code, stdout) == (0, f"{out / 'index.html'}\n")
    assert f"warning: {FRESH}: not assessed" in err


def test_cli_unknown_campaign_is_a_usage_error(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["report", "nope", "--store", str(store.root)], capsys)
    assert code == 2
    have = ", ".join(sorted((BLOCKED, FRESH, GOOD)))
    assert err == f"error: unknown campaign 'nope' (the store {store.root} has: {have})\n"


def test_cli_campaign_never_assessed_says_to_run_assess(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.html"
    code, _, err = run_cli(["report", FRESH, "--store", str(store.root), "-o", str(out)], capsys)
    assert code == 2
    assert err == (
        f"error: campaign '{FRESH}' has not been assessed: "
        f"run `explain-pipeline assess {FRESH}` first\n"
    )
    assert not out.exists()


@pytest.mark.parametrize("args", [[], [GOOD, "--all"]])
def test_cli_needs_exactly_one_of_id_or_all(
    store: Store, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(["report", *args, "--store", str(store.root)], capsys)
    assert (code, err) == (2, "error: give either a CAMPAIGN_ID or --all\n")


# -- the example data, through the real ingest and assess --------------------------------------
EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "attempts"
MARKUP_CAMPAIGN = "llama-decode-2026-11"


def build_example_site(root: Path) -> tuple[Store, IndexResult]:
    """The example attempts plus one whose hypothesis is markup, ingested, assessed, reported."""
    shutil.copytree(EXAMPLES, root / "attempts")
    campaign_dir = root / "attempts" / MARKUP_CAMPAIGN
    source = campaign_dir / "r001"
    attempt = json.loads((source / "attempt.json").read_text(encoding="utf-8"))
    for key in ("schema", "mechanism_sha256"):
        attempt.pop(key)
    attempt.update(attempt_id="r099", round=99, candidate="<b>markup</b>")
    runs = [json.loads(line) for line in (source / "measurements.jsonl").read_text().splitlines()]
    mechanism = json.loads((source / "mechanism.json").read_text(encoding="utf-8"))
    mechanism.pop("schema")
    write_attempt(
        campaign_dir, attempt, runs, mechanism={**mechanism, "hypothesis": XSS_HYPOTHESIS}
    )
    store = Store(root / "store")
    ingested = ingest(root / "attempts", store)
    assert ingested.exit_code == ExitCode.OK, [str(i) for i in ingested.issues]
    assert assess(store).exit_code == ExitCode.OK
    return store, write_all(store, root / "site")


@pytest.fixture(scope="module")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, IndexResult]:
    return build_example_site(tmp_path_factory.mktemp("examples"))


@pytest.mark.slow
def test_example_report_shows_every_attempt_outcome_and_hypothesis(
    example_site: tuple[Store, IndexResult],
) -> None:
    store, site = example_site
    assert [p.name for p in site.pages] == [
        f"campaign-{c}.html" for c in store.campaign_ids("campaigns")
    ]
    for cid in store.campaign_ids("campaigns"):
        page = (site.index.parent / f"campaign-{cid}.html").read_text(encoding="utf-8")
        attempts = store.read("attempts", [cid])
        expectations = store.read("expectations", [cid])
        outcomes = store.read("outcomes", [cid])
        assert outcomes.height == expectations.height > 0  # every declared expectation judged
        for row in attempts.iter_rows(named=True):
            section = article(page, row["attempt_id"])
            hypothesis = row["hypothesis"]
            if hypothesis is not None:
                assert (
                    f'<blockquote class="hypothesis">{html.escape(hypothesis)}</blockquote>'
                    in section
                )
            marks = outcomes.filter(pl.col("attempt_id") == row["attempt_id"])
            for o in marks.iter_rows(named=True):
                assert re.search(
                    rf"<td>{o['target']} {o['name']}: {o['expect']}</td><td><span [^>]*>"
                    rf"{o['outcome']}</span>",
                    section,
                ), o
        with_pairs = int((store.read("assessments", [cid])["n_pairs"] > 0).sum())
        # the timeline, one forest plot each, and a strip plot of the pairs where there are some
        assert len(figures(page)) == 1 + attempts.height + with_pairs
    markup = (site.index.parent / f"campaign-{MARKUP_CAMPAIGN}.html").read_text(encoding="utf-8")
    assert "<script>alert(1)" not in markup and "<b>markup</b>" not in markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup


def test_example_unverifiable_quantities_are_listed(
    example_site: tuple[Store, IndexResult],
) -> None:
    store, site = example_site
    unverifiable = store.read("comparisons").filter(pl.col("status") == "unverifiable")
    assert unverifiable.height > 0  # the example has some (a failed attempt: too few pairs)
    for row in unverifiable.iter_rows(named=True):
        page = (site.index.parent / f"campaign-{row['campaign_id']}.html").read_text()
        side = article(page, row["attempt_id"]).split("Unverifiable quantities")[1]
        name = html.escape(row["name"])
        label = {
            "metric": f"metric {name}",
            "share_speedup": "share speedup",
            "region": f"region {name}",
            "region_normalized": f"region {name} / ref",
            "counter": f"counter {name}",
        }[row["quantity"]]
        assert f"<b>{label}</b>" in side, row
    # each reason once per attempt and pair count: the failed attempt's too_few_pairs is said
    # once for all its quantities (before the fix: once per quantity, 11 lines alike)
    groups = unverifiable.group_by("campaign_id", "attempt_id", "reason", "n_pairs").len()
    assert int(groups["len"].max() or 0) > 1  # type: ignore[arg-type]  # the example has one
    for cid, aid, reason, _, count in groups.iter_rows():
        page = (site.index.parent / f"campaign-{cid}.html").read_text()
        side = article(page, aid).split("Unverifiable quantities")[1]
        words = f'<span class="reason" title="reason code: {reason}">'
        same = (pl.col("campaign_id") == cid) & (pl.col("attempt_id") == aid)
        n_groups = groups.filter(same & (pl.col("reason") == reason))
        assert side.count(words) == n_groups.height
        if count > 1:
            assert f"<li>{count} quantities — {words}" in side


def test_example_what_if_matches_assess(
    example_site: tuple[Store, IndexResult], tmp_path: Path
) -> None:
    store, _ = example_site
    what_if: dict[str, PolicyValue] = {"decision": "paired", "require_explanation": True}
    page = write_report(store, MARKUP_CAMPAIGN, tmp_path / "w.html", what_if=what_if)
    text = page.read_text(encoding="utf-8")
    section = text[text.index('<section id="what-if">') :]
    section = section[: section.index("</section>")]
    expected = assess(store, [MARKUP_CAMPAIGN], what_if=what_if, write=False).assessments
    for aid, verdict in expected.select("attempt_id", "verdict").iter_rows():
        row = re.search(rf"<tr[^>]*><td><a [^>]*>{aid}</a></td>.*?</tr>", section)
        assert row and re.findall(r">(PASS|FAIL|INCONCLUSIVE)</span>", row.group(0))[-1] == verdict
    assert "What-if: decision=paired, require_explanation=true." in section


def test_cli_bad_what_if_is_a_usage_error_even_for_a_blocked_campaign(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["report", BLOCKED, "--store", str(store.root), "--what-if", "decision=sometimes"]
    code, _, err = run_cli(args, capsys)
    expected = (
        'error: --what-if decision=sometimes: must be one of median, paired, got "sometimes"\n'
    )
    assert (code, err) == (2, expected)


def test_example_campaign_blocked_by_an_edited_mechanism(tmp_path: Path) -> None:
    """Through the real ingest and assess: a mechanism.json edited after its digest was recorded
    blocks the campaign; its report lists the error and issues no verdict."""
    shutil.copytree(EXAMPLES / "bert-serving-throughput", tmp_path / "attempts" / "bert")
    campaign = json.loads((tmp_path / "attempts/bert/campaign.json").read_text(encoding="utf-8"))
    campaign["campaign_id"] = "bert"
    (tmp_path / "attempts/bert/campaign.json").write_text(json.dumps(campaign), encoding="utf-8")
    mechanism = tmp_path / "attempts/bert/b001/mechanism.json"
    mechanism.write_bytes(mechanism.read_bytes().replace(b'"hypothesis": "', b'"hypothesis": "X'))
    store = Store(tmp_path / "store")
    ingest(tmp_path / "attempts", store)
    assert assess(store).exit_code == ExitCode.INTEGRITY
    errors = store.read("integrity", ["bert"])
    assert errors["code"].to_list() == ["mechanism_digest_mismatch"]
    page = write_report(store, "bert", tmp_path / "bert.html").read_text(encoding="utf-8")
    assert "This campaign is blocked" in page
    assert "<td>mechanism_digest_mismatch</td>" in page
    assert html.escape(errors["message"][0]) in page
    assert not re.search(r"PASS|FAIL|INCONCLUSIVE", page) and FIGURE_BLOCK.findall(page) == []
    index = write_all(store, tmp_path / "site").index.read_text(encoding="utf-8")
    assert "blocked (1)" in index


def test_many_attempts_are_linked_from_the_tables_not_the_sticky_bar(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    ids = [f"a{i:03d}" for i in range(30)]
    with store.transaction() as txn:
        txn.put("campaigns", "big", frame("campaigns", [campaign_row("big")]))
        txn.put(
            "attempts",
            "big",
            frame("attempts", [attempt_row(a, i, "c") for i, a in enumerate(ids)]),
        )
        rows = [assessment_row("big", a, i, "c") for i, a in enumerate(ids)]
        txn.put("assessments", "big", frame("assessments", rows))
    page = render_campaign(load_campaign_data(store, "big"))
    nav = page[page.index('<nav class="toc">') : page.index("</nav>")]
    assert '<a href="#attempts">Attempts (30)</a>' in nav and "#attempt-a" not in nav
    verdicts = page[page.index('<section id="verdicts">') :]
    for a in ids:
        assert f'<td><a href="#attempt-{a}">{a}</a></td>' in verdicts
        assert f'<article id="attempt-{a}">' in page


def test_cli_output_that_is_a_folder_is_a_usage_error(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(
        ["report", GOOD, "--store", str(store.root), "-o", str(tmp_path)], capsys
    )
    assert (code, err) == (
        2,
        f"error: -o {tmp_path}: is a folder; with a CAMPAIGN_ID, -o is the page's file "
        f"(e.g. -o {tmp_path / 'report.html'}); a folder only with --all\n",
    )


def test_the_footer_names_the_campaigns_interval_method(good_html: str) -> None:
    """Before the fix every footer said "paired bootstrap intervals ... not calibrated", also
    on a student_t campaign. A store without the interval column reads as percentile."""
    from pipeline.contract.declare import INTERVAL_METHODS
    from pipeline.report.pages import footer_html
    from pipeline.report.words import INTERVAL_WORDS

    assert set(INTERVAL_WORDS) == set(INTERVAL_METHODS)
    footer = good_html[good_html.index("<footer>") :]
    assert "Intervals are paired percentile bootstrap intervals, which cover less" in footer
    student = footer_html("lower", "student_t")
    assert "Intervals are paired Student-t intervals of the log-ratios, which covered" in student
    assert "bootstrap" not in student.replace("the expanded percentile", "")
    assert "each campaign's frozen method" in footer_html()
