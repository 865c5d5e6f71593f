"""The HTML report: one self-contained, offline file per campaign, and an index linking them.

Everything comes from the store: the output tables written by ``assess`` (``assessments``,
``comparisons``, ``outcomes``) and the input tables ``campaigns``, ``attempts``, ``expectations``
and ``integrity``. Plots are drawn by plotly; plotly.js is inlined once per file, figures are
embedded as JSON data blocks, so the file makes no network request and opens from disk.

Every user-provided string (hypothesis, candidate, region and counter names) is HTML-escaped, in
the page and inside the plot labels (plotly renders a subset of HTML in labels); JSON inside
``<script>`` has ``<``, ``>`` and ``&`` escaped so no string can close the script block.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

import plotly.graph_objects as go
import polars as pl
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from pipeline import __version__
from pipeline.contracts import table
from pipeline.errors import UsageError
from pipeline.policy import POLICY_FIELDS
from pipeline.store import Store

TEMPLATE = Path(__file__).with_name("template_report.html")  # not report*.html: gitignored

VERDICT_COLOURS = {"PASS": "#1a7f37", "FAIL": "#cf222e", "INCONCLUSIVE": "#9a6700"}
EXPLANATION_COLOURS = {
    "explained": "#1a7f37",
    "contradicted": "#cf222e",
    "unsupported": "#bc4c00",
    "unverifiable": "#8250df",
    "not_declared": "#6e7781",
}
OUTCOME_COLOURS = {
    "confirmed": "#1a7f37",
    "consistent": "#0a7d6c",
    "contradicted": "#cf222e",
    "unsupported": "#bc4c00",
    "unverifiable": "#8250df",
    "assumed": "#57606a",
}
# Direction of a comparison: ratio > 1 (the candidate is smaller / better) or < 1.
DIRECTION_COLOURS = {
    "down": "#0969da",
    "up": "#bf3989",
    "none": "#6e7781",
    "unverifiable": "#8250df",
}
_DIRECTION_CLASS = {
    "decrease": "down",
    "improved": "down",
    "increase": "up",
    "regressed": "up",
    "none": "none",
}
# Marker symbol of an attempt on the timeline, by its explanation.
EXPLANATION_SYMBOLS = {
    "explained": "circle",
    "unsupported": "triangle-down",
    "contradicted": "x",
    "unverifiable": "diamond",
    "not_declared": "square",
}
# Columns of the verdict table: the `assessments` columns (bookkeeping digests left out).
VERDICT_COLUMNS = tuple(
    c
    for c in table("assessments").names
    if c not in ("campaign_id", "inputs_sha256", "campaign_sha256")
)
PLOT_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "showLink": False,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
    "toImageButtonOptions": {"format": "svg"},
}
NAV_ATTEMPTS = 24  # attempts linked from the sticky navigation bar; more would bury the page
_FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'


Figure = dict[str, Any]
"""A plotly figure as plain data (`data`, `layout`). The per-attempt forest plots are built this
way rather than through plotly.graph_objects, whose validation costs ~45 ms a figure (minutes for
a simulated campaign of thousands of attempts); a test validates them with plotly's schema."""


class NotAssessedError(UsageError):
    """The campaign has attempts but no stored assessment: ``assess`` must run first."""


# -- loading -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CampaignData:
    """Everything the report of one campaign shows, read from the store."""

    campaign_id: str
    campaign: dict[str, Any]  # the `campaigns` row
    attempts: pl.DataFrame
    expectations: pl.DataFrame
    integrity: pl.DataFrame
    assessments: pl.DataFrame
    comparisons: pl.DataFrame
    outcomes: pl.DataFrame
    stale: pl.DataFrame  # attempt_id, problem: attempts whose stored assessment is out of date
    what_if: pl.DataFrame | None = None  # assessments under the what-if policy
    what_if_overrides: Mapping[str, str] | None = None

    @property
    def blocked(self) -> bool:
        return self.integrity.height > 0


def known_campaign(store: Store, campaign_id: str) -> None:
    """Raise UsageError naming the campaigns the store has when ``campaign_id`` is not one."""
    known = store.campaign_ids("campaigns")
    if campaign_id not in known:
        have = ", ".join(known[:10]) + (" …" if len(known) > 10 else "") if known else "none"
        raise UsageError(
            f"unknown campaign {campaign_id!r} in store {store.root} (campaigns: {have})"
        )


def stale_attempts(
    attempts: pl.DataFrame, assessments: pl.DataFrame, campaign: Mapping[str, Any]
) -> pl.DataFrame:
    """Attempts whose stored verdicts do not match the stored inputs (ingested after assess)."""
    joined = attempts.select("attempt_id", "inputs_sha256").join(
        assessments.select(
            "attempt_id",
            pl.col("inputs_sha256").alias("assessed_sha256"),
            pl.col("policy_sha256").alias("assessed_policy"),
            pl.col("campaign_sha256").alias("assessed_campaign"),
        ),
        on="attempt_id",
        how="full",
        coalesce=True,
    )
    problem = (
        pl.when(pl.col("assessed_sha256").is_null())
        .then(pl.lit("ingested but not assessed"))
        .when(pl.col("inputs_sha256").is_null())
        .then(pl.lit("assessed but no longer in the store"))
        .when(pl.col("inputs_sha256") != pl.col("assessed_sha256"))
        .then(pl.lit("inputs changed since it was assessed"))
        .when(pl.col("assessed_policy") != campaign["policy_sha256"])
        .then(pl.lit("assessed under another policy digest"))
        .when(pl.col("assessed_campaign") != campaign["source_sha256"])
        .then(pl.lit("campaign.json changed since it was assessed"))
    )
    return (
        joined.select("attempt_id", problem.alias("problem"))
        .filter(pl.col("problem").is_not_null())
        .sort("attempt_id")
    )


OUTPUT_TABLES = ("assessments", "comparisons", "outcomes")


def load_campaign(
    store: Store, campaign_id: str, *, what_if: Mapping[str, str] | None = None
) -> CampaignData:
    """Read one campaign's report data; what-if verdicts are computed, never stored.

    A blocked campaign's outputs are not read at all (assess deletes them; any left over from
    before the block would be stale verdicts). A campaign with attempts and no stored assessment
    raises NotAssessedError."""
    known_campaign(store, campaign_id)
    campaign = store.read("campaigns", [campaign_id]).row(0, named=True)
    attempts, integrity = (
        store.read("attempts", [campaign_id]),
        store.read("integrity", [campaign_id]),
    )
    blocked = integrity.height > 0
    out = {
        name: table(name).empty() if blocked else store.read(name, [campaign_id])
        for name in OUTPUT_TABLES
    }
    if not blocked and out["assessments"].is_empty() and attempts.height:
        raise NotAssessedError(
            f"campaign {campaign_id!r} has not been assessed: "
            f"run `explain-pipeline assess {campaign_id}` first"
        )
    return CampaignData(
        campaign_id=campaign_id,
        campaign=campaign,
        attempts=attempts.sort("round", "attempt_id"),
        expectations=store.read("expectations", [campaign_id]),
        integrity=integrity.sort(pl.col("attempt_id").fill_null(""), "code"),
        assessments=out["assessments"].sort("round", "attempt_id"),
        comparisons=out["comparisons"],
        outcomes=out["outcomes"],
        stale=stale_attempts(
            attempts.clear() if blocked else attempts, out["assessments"], campaign
        ),
        what_if=None
        if blocked or not what_if
        else what_if_assessments(store, campaign_id, what_if),
        what_if_overrides=dict(what_if) if what_if else None,
    )


def what_if_assessments(store: Store, campaign_id: str, what_if: Mapping[str, str]) -> pl.DataFrame:
    """Verdicts under the overridden policy, computed by the assess engine and never stored."""
    from pipeline.assess import assess  # imported here: a plain report needs no engine

    return assess(store, [campaign_id], what_if=what_if, write=False).assessments


# -- small formatting helpers ----------------------------------------------------------------------
def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def fmt_number(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{value:.{digits}f}"


def fmt_pct(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:+.2f}%"


def badge(text: object, colour: str | None, *, outline: bool = False) -> str:
    if text is None:
        return '<span class="null">—</span>'
    cls = "badge outline" if outline else "badge"
    style = f"color:{colour}" if outline else f"background:{colour or '#6e7781'}"
    return f'<span class="{cls}" style="{style}">{esc(text)}</span>'


def verdict_badge(verdict: str | None) -> str:
    return badge(verdict, VERDICT_COLOURS.get(verdict or ""))


def explanation_badge(explanation: str | None) -> str:
    return badge(explanation, EXPLANATION_COLOURS.get(explanation or ""), outline=True)


def outcome_badge(outcome: str | None) -> str:
    return badge(outcome, OUTCOME_COLOURS.get(outcome or ""))


def cell(value: object, column: str) -> str:
    """One table cell: badges for closed vocabularies, fixed decimals for numbers."""
    if value is None:
        return '<td class="null">—</td>'
    if column == "attempt_id":
        return f'<td><a href="#attempt-{esc(value)}">{esc(value)}</a></td>'
    if column in ("verdict", "median_verdict", "paired_verdict", "frozen_verdict"):
        return f"<td>{verdict_badge(str(value))}</td>"
    if column == "explanation":
        return f"<td>{explanation_badge(str(value))}</td>"
    if column == "outcome":
        return f"<td>{outcome_badge(str(value))}</td>"
    if column == "improvement_pct":
        return f'<td class="num">{fmt_pct(float(value))}</td>'  # type: ignore[arg-type]
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, float):
        return f'<td class="num">{fmt_number(value)}</td>'
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    if column == "message":
        return f'<td class="text">{esc(value)}</td>'
    mono = ' class="mono"' if column.endswith("sha256") or column in ("expected", "actual") else ""
    return f"<td{mono}>{esc(value)}</td>"


def html_table(
    frame: pl.DataFrame,
    columns: Sequence[str],
    *,
    row_class: Callable[[dict[str, Any]], str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> str:
    head = "".join(f"<th>{esc((headers or {}).get(c, c))}</th>" for c in columns)
    rows = []
    for row in frame.iter_rows(named=True):
        cls = row_class(row) if row_class else ""
        attr = f' class="{cls}"' if cls else ""
        rows.append(f"<tr{attr}>" + "".join(cell(row.get(c), c) for c in columns) + "</tr>")
    return (
        f'<div class="tablewrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def script_json(value: object) -> str:
    """JSON safe inside a <script> element: nothing in it can end the element or open a comment."""
    text = value if isinstance(value, str) else json.dumps(value, allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def figure_block(figure: go.Figure | Figure, element_id: str, height: int, label: str) -> str:
    """A plot placeholder and its figure as an inert JSON data block (rendered by the page)."""
    text = (
        figure.to_json() if isinstance(figure, go.Figure) else json.dumps(figure, allow_nan=False)
    )
    return (
        f'<div class="plot-box" id="{esc(element_id)}" role="img" aria-label="{esc(label)}" '
        f'style="height:{height}px"></div>'
        f'<script type="application/json" data-plot="{esc(element_id)}">'
        f"{script_json(text)}</script>"
    )


def finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def clamp(value: float | None, top: float) -> float | None:
    """+inf (the candidate's quantity vanished) drawn at the top of the axis."""
    return None if value is None else min(value, top)


def log_range(values: Iterable[float | None], *, include: Sequence[float] = (1.0,)) -> list[float]:
    """A log10 axis range around every finite positive value, padded, never narrower than ±2%."""
    logs = [
        math.log10(v) for v in [*values, *include] if v is not None and math.isfinite(v) and v > 0
    ]
    lo, hi = min(logs), max(logs)
    lo, hi = min(lo, -0.0086), max(hi, 0.0086)  # log10(0.98), log10(1.02)
    pad = (hi - lo) * 0.08
    return [lo - pad, hi + pad]


def _base_layout(**extra: Any) -> dict[str, Any]:
    return {
        "font": {"family": _FONT, "size": 12, "color": "#1f2328"},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hoverlabel": {"font": {"family": _FONT}},
        **extra,
    }


# -- the campaign timeline -------------------------------------------------------------------------
def timeline_frame(assessments: pl.DataFrame) -> pl.DataFrame:
    """One row per attempt, ordered by round, with its x label and the values to plot."""
    return assessments.sort("round", "attempt_id").with_columns(
        pl.format("r{} · {}", pl.col("round"), pl.col("attempt_id")).alias("x"),
        pl.col("explanation")
        .replace_strict(EXPLANATION_SYMBOLS, default="circle-open")
        .alias("symbol"),
    )


def _timeline_hover(row: Mapping[str, Any]) -> str:
    interval = (
        f"[{fmt_number(row['paired_low'])}, {fmt_number(row['paired_high'])}]"
        if row["paired_low"] is not None
        else f"no interval ({esc(row['paired_reason'] or 'n/a')})"
    )
    return (
        f"<b>{esc(row['attempt_id'])}</b> · {esc(row['candidate'])}<br>"
        f"verdict <b>{esc(row['verdict'])}</b> {esc(row['reason'] or '')}<br>"
        f"paired ratio {fmt_number(row['paired_estimate'])} {interval}<br>"
        f"median improvement {fmt_pct(row['improvement_pct'])}<br>"
        f"explanation {esc(row['explanation'])}"
        + ("<br><b>best attempt</b>" if row["best"] else "")
    )


def timeline_figure(data: CampaignData) -> go.Figure:
    frame = timeline_frame(data.assessments)
    gate = 1.0 + float(data.campaign["min_improvement_pct"]) / 100.0
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.09,
        row_heights=[0.64, 0.36],
        subplot_titles=(
            "Paired metric ratio (> 1: candidate better) with its interval",
            "Median-rule improvement %",
        ),
    )
    yrange = log_range(
        [*frame["paired_estimate"], *frame["paired_low"], *frame["paired_high"]],
        include=(1.0, gate),
    )
    top = 10 ** yrange[1]
    _timeline_gate(fig, gate, float(data.campaign["min_improvement_pct"]))
    for verdict, colour in VERDICT_COLOURS.items():
        part = frame.filter(pl.col("verdict") == verdict)
        if part.is_empty():
            continue
        est = [clamp(v, top) for v in part["paired_estimate"]]
        high = [clamp(h, top) for h in part["paired_high"]]
        fig.add_trace(
            go.Scatter(
                x=part["x"].to_list(),
                y=est,
                mode="markers",
                name=verdict,
                legendgroup="verdict",
                legendgrouptitle={"text": "final verdict"},
                marker={
                    "color": colour,
                    "size": 12 if frame.height <= 40 else 7,
                    "symbol": part["symbol"].to_list(),
                    "line": {"color": "#ffffff", "width": 1},
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "color": colour,
                    "thickness": 1.6,
                    "width": 6,
                    "array": [
                        None if h is None or e is None else h - e
                        for h, e in zip(high, est, strict=True)
                    ],
                    "arrayminus": [
                        None if lo is None or e is None else e - lo
                        for lo, e in zip(part["paired_low"], est, strict=True)
                    ],
                },
                hovertext=[_timeline_hover(r) for r in part.iter_rows(named=True)],
                hoverinfo="text",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(
                x=part["x"].to_list(),
                y=[finite(v) for v in part["improvement_pct"]],
                name=verdict,
                legendgroup="verdict",
                showlegend=False,
                marker={
                    "color": [VERDICT_COLOURS.get(v, "#6e7781") for v in part["median_verdict"]],
                    "opacity": 0.75,
                },
                hovertext=[
                    f"{esc(r['attempt_id'])}: median rule {esc(r['median_verdict'])} "
                    f"{fmt_pct(r['improvement_pct'])} {esc(r['median_reason'] or '')}"
                    for r in part.iter_rows(named=True)
                ],
                hoverinfo="text",
            ),
            row=2,
            col=1,
        )
    _timeline_missing(fig, frame)
    _timeline_best(fig, frame, top)
    _explanation_legend(fig, frame)
    fig.update_layout(
        template="none",
        **_base_layout(
            margin={"l": 64, "r": 24, "t": 36, "b": 40},
            hovermode="closest",
            bargap=0.45,
            legend={"orientation": "h", "y": -0.1, "x": 0, "groupclick": "toggleitem"},
        ),
    )
    fig.update_yaxes(
        type="log",
        range=yrange,
        row=1,
        col=1,
        gridcolor="#eaeef2",
        title_text="metric ratio (> 1: better)",
        zeroline=False,
    )
    fig.update_yaxes(row=2, col=1, gridcolor="#eaeef2", ticksuffix="%", zerolinecolor="#818b98")
    fig.update_xaxes(
        type="category",
        categoryorder="array",
        categoryarray=frame["x"].to_list(),
        tickfont={"size": 11},
    )
    fig.update_annotations(font={"size": 13, "color": "#59636e"})
    return fig


def _timeline_gate(fig: go.Figure, gate: float, gate_pct: float) -> None:
    """The gate as a band from 1 to 1 + min_improvement_pct/100 (and as a line for the median)."""
    common = {"row": 1, "col": 1, "exclude_empty_subplots": False}
    fig.add_hrect(y0=1.0, y1=gate, fillcolor="#d4a72c", opacity=0.18, line_width=0, **common)
    fig.add_hline(y=1.0, line={"color": "#818b98", "width": 1, "dash": "dash"}, **common)
    for row, y, label in ((1, gate, f"gate ×{gate:.4g}"), (2, gate_pct, f"gate {gate_pct:g}%")):
        fig.add_hline(
            y=y,
            row=row,
            col=1,
            exclude_empty_subplots=False,
            line={"color": "#9a6700", "width": 1.5},
            annotation_text=label,
            annotation_position="top left",
            annotation_font={"color": "#9a6700", "size": 11},
        )


def _timeline_missing(fig: go.Figure, frame: pl.DataFrame) -> None:
    """Attempts without a paired estimate still get a mark, at 1, so none is silently absent."""
    part = frame.filter(pl.col("paired_estimate").is_null())
    if part.is_empty():
        return
    fig.add_trace(
        go.Scatter(
            x=part["x"].to_list(),
            y=[1.0] * part.height,
            mode="markers+text",
            name="no paired estimate",
            text=["n/a"] * part.height,
            textposition="top center",
            textfont={"color": "#818b98", "size": 10},
            marker={"symbol": "line-ew-open", "size": 14, "color": "#818b98"},
            hovertext=[_timeline_hover(r) for r in part.iter_rows(named=True)],
            hoverinfo="text",
        ),
        row=1,
        col=1,
    )


def _timeline_best(fig: go.Figure, frame: pl.DataFrame, top: float) -> None:
    best = frame.filter(pl.col("best"))
    if best.is_empty():
        return
    y = [1.0 if v is None else min(v, top) for v in best["paired_estimate"]]
    fig.add_trace(
        go.Scatter(
            x=best["x"].to_list(),
            y=y,
            mode="markers+text",
            name="best attempt",
            text=["best"] * best.height,
            textposition="middle right",
            textfont={"color": "#9a6700", "size": 12},
            marker={"symbol": "circle-open", "size": 26, "color": "#d4a72c", "line": {"width": 3}},
            hoverinfo="skip",
        ),
        row=1,
        col=1,
    )


def _explanation_legend(fig: go.Figure, frame: pl.DataFrame) -> None:
    """Legend entries for the marker symbols (explanations present in this campaign)."""
    for explanation in frame["explanation"].unique().sort():
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=explanation,
                legendgroup="explanation",
                legendgrouptitle={"text": "explanation (symbol)"},
                marker={
                    "symbol": EXPLANATION_SYMBOLS.get(explanation, "circle-open"),
                    "color": "#57606a",
                    "size": 10,
                },
            ),
            row=1,
            col=1,
        )


# -- the forest plot of one attempt ----------------------------------------------------------------
_FAMILY = {"metric": 0, "share_speedup": 1, "region": 2, "region_normalized": 2, "counter": 3}


def forest_rows(comparisons: pl.DataFrame, outcomes: pl.DataFrame) -> pl.DataFrame:
    """One row per comparison of an attempt, plus a row for every expectation without one.

    An expectation's row is its evidence comparison (SPEC 5); a region or counter that never
    appears has no comparison, so it gets an empty row of its own, marked unverifiable.
    """
    marks = outcomes.select(
        pl.coalesce("evidence", "target").alias("quantity"),
        "name",
        "expect",
        "outcome",
        pl.col("reason").alias("outcome_reason"),
    )
    rows = comparisons.drop("campaign_id", "attempt_id").join(
        marks, on=["quantity", "name"], how="full", coalesce=True
    )
    label = (
        pl.when(pl.col("quantity") == "metric")
        .then(pl.format("metric {}", pl.col("name")))
        .when(pl.col("quantity") == "share_speedup")
        .then(pl.lit("share speedup"))
        .when(pl.col("quantity") == "region_normalized")
        .then(pl.format("region {} / ref", pl.col("name")))
        .otherwise(pl.format("{} {}", pl.col("quantity"), pl.col("name")))
    )
    missing = pl.col("status").is_null()  # an expectation with no comparison
    return rows.with_columns(
        label.alias("label"),
        pl.col("estimate", "low", "high").fill_nan(None),  # never in SPEC data; JSON has no NaN
        pl.col("quantity").replace_strict(_FAMILY, default=4).alias("family"),
        pl.when(missing).then(pl.lit("unverifiable")).otherwise("status").alias("status"),
        pl.when(missing)
        .then(pl.coalesce("outcome_reason", pl.lit("never appears")))
        .otherwise("reason")
        .alias("reason"),
        pl.col("direction").replace_strict(_DIRECTION_CLASS, default="none").alias("dclass"),
    ).sort("family", "name", "quantity")


def _reading(quantity: str, estimate: float, higher_is_better: bool) -> str:
    """The ratio in words: what the candidate's value is relative to the baseline's."""
    if math.isinf(estimate):
        return "the candidate's value is 0 (vanished)"
    if estimate <= 0:  # exp() underflow: nothing sensible to say
        return ""
    if quantity == "share_speedup":
        return f"speedup of the whole breakdown estimated ×{estimate:.4f} (if the reference held)"
    if quantity == "metric" and higher_is_better:
        return f"candidate {(estimate - 1) * 100:+.2f}% vs baseline (higher is better)"
    return f"candidate {(1 / estimate - 1) * 100:+.2f}% vs baseline"


def _forest_hover(row: Mapping[str, Any], higher_is_better: bool) -> str:
    est, low, high = row["estimate"], row["low"], row["high"]
    lines = [f"<b>{esc(row['label'])}</b>"]
    if est is None:
        lines.append(f"unverifiable: {esc(row['reason'])}")
    else:
        interval = f"[{fmt_number(low)}, {fmt_number(high)}]" if low is not None else "no interval"
        lines.append(f"ratio {fmt_number(est)} {interval}")
        lines.append(_reading(row["quantity"], est, higher_is_better))
    lines.append(
        f"n = {row['n_pairs'] if row['n_pairs'] is not None else 0} pairs · "
        f"direction {esc(row['direction'] or 'n/a')} · {esc(row['status'])}"
    )
    if row["status"] == "unverifiable" and est is not None:
        lines.append(f"reason: {esc(row['reason'])}")
    if row["outcome"] is not None:
        lines.append(f"expected {esc(row['expect'])}: <b>{esc(row['outcome'])}</b>")
    return "<br>".join(lines)


_DIRECTION_NAMES = {
    "down": "ratio > 1 (candidate smaller / better)",
    "up": "ratio < 1",
    "none": "interval spans 1",
    "unverifiable": "unverifiable (no interval)",
}


def forest_figure(rows: pl.DataFrame, *, gate: float, higher_is_better: bool) -> Figure:
    """Every comparison of one attempt on a log ratio axis, with its expectation outcomes."""
    labels = [esc(v) for v in rows["label"]]
    xrange = log_range([*rows["estimate"], *rows["low"], *rows["high"]], include=(1.0, gate))
    edge = 10 ** xrange[1]
    hover = [_forest_hover(r, higher_is_better) for r in rows.iter_rows(named=True)]
    shown = rows.with_columns(pl.Series("y", labels), pl.Series("hover", hover, dtype=pl.String))
    height = _forest_height(rows.height)
    one = {"type": "line", "xref": "x", "yref": "paper", "x0": 1.0, "x1": 1.0, "y0": 0, "y1": 1,
           "line": {"color": "#57606a", "width": 1.2}}  # fmt: skip
    gates = [  # the gate, where it applies: the metric's row
        {"type": "rect", "xref": "x", "yref": "y", "x0": 1.0, "x1": gate, "y0": i - 0.42,
         "y1": i + 0.42, "fillcolor": "#d4a72c", "opacity": 0.25, "line": {"width": 0},
         "layer": "below"}
        for i, q in enumerate(rows["quantity"]) if q == "metric"
    ]  # fmt: skip
    layout = _base_layout(
        height=height,
        margin={"l": 10, "r": 215, "t": 10, "b": 70},
        showlegend=True,
        hovermode="closest",
        legend={"orientation": "h", "y": -70 / height, "x": 0, "yanchor": "top",
                "font": {"size": 11}},
        shapes=[one, *gates],
        annotations=_outcome_annotations(shown),
        xaxis={"type": "log", "range": xrange, "gridcolor": "#eaeef2", "zeroline": False,
               "title": {"text": "ratio baseline / candidate (metric: > 1 = better), log scale",
                         "font": {"size": 11, "color": "#59636e"}}},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": labels,
               "autorange": "reversed", "automargin": True, "gridcolor": "#f3f5f7"},
    )  # fmt: skip
    traces = [
        *_forest_points(shown, edge),
        *_forest_no_estimate(shown),
        *_forest_infinite(shown, edge),
    ]
    return {"data": traces, "layout": layout}


def _forest_points(shown: pl.DataFrame, edge: float) -> list[dict[str, Any]]:
    """Estimates and interval segments, one pair of traces per direction class."""
    traces: list[dict[str, Any]] = []
    unverifiable = pl.col("status") == "unverifiable"
    for dclass, colour in DIRECTION_COLOURS.items():
        cond = (
            unverifiable
            if dclass == "unverifiable"
            else ~unverifiable & (pl.col("dclass") == dclass)
        )
        part = shown.filter(cond & pl.col("estimate").is_not_null())
        if part.is_empty():
            continue
        spans = part.filter(pl.col("low").is_not_null() & pl.col("high").is_not_null())
        if spans.height:  # segments low..high, separated by gaps (None)
            xs = [
                v
                for lo, hi in zip(spans["low"], spans["high"], strict=True)
                for v in (lo, min(hi, edge), None)
            ]
            ys = [v for y in spans["y"] for v in (y, y, None)]
            traces.append({"type": "scatter", "x": xs, "y": ys, "mode": "lines",
                           "showlegend": False, "legendgroup": dclass, "hoverinfo": "skip",
                           "line": {"color": colour, "width": 2.5}})  # fmt: skip
        hollow = dclass == "unverifiable"
        traces.append({
            "type": "scatter", "x": [min(v, edge) for v in part["estimate"]],
            "y": part["y"].to_list(), "mode": "markers", "name": _DIRECTION_NAMES[dclass],
            "legendgroup": dclass, "hovertext": part["hover"].to_list(), "hoverinfo": "text",
            "marker": {"color": "#ffffff" if hollow else colour, "size": 9,
                       "symbol": "diamond" if hollow else "circle",
                       "line": {"color": colour, "width": 2}},
        })  # fmt: skip
    return traces


def _forest_height(n_rows: int) -> int:
    return 110 + 28 * max(n_rows, 2)


def _forest_no_estimate(shown: pl.DataFrame) -> list[dict[str, Any]]:
    """Rows with no estimate at all: their reason written on the plot at ratio 1."""
    part = shown.filter(pl.col("estimate").is_null())
    if part.is_empty():
        return []
    return [{
        "type": "scatter", "x": [1.0] * part.height, "y": part["y"].to_list(), "mode": "text",
        "showlegend": False, "text": [f"unverifiable: {esc(r)}" for r in part["reason"]],
        "textposition": "middle right", "hovertext": part["hover"].to_list(), "hoverinfo": "text",
        "textfont": {"color": DIRECTION_COLOURS["unverifiable"], "size": 11},
    }]  # fmt: skip


def _forest_infinite(shown: pl.DataFrame, edge: float) -> list[dict[str, Any]]:
    """An interval or estimate at +inf (the quantity vanished) runs to the edge, marked ∞."""
    part = shown.filter(pl.col("high").is_infinite() | pl.col("estimate").is_infinite())
    if part.is_empty():
        return []
    return [{
        "type": "scatter", "x": [edge] * part.height, "y": part["y"].to_list(), "mode": "text",
        "text": ["∞"] * part.height, "textposition": "top left", "showlegend": False,
        "hoverinfo": "skip", "textfont": {"size": 14, "color": "#1f2328"},
    }]  # fmt: skip


def _outcome_annotations(shown: pl.DataFrame) -> list[dict[str, Any]]:
    """Each expectation's outcome written at the right of its quantity's row."""
    marked = shown.filter(pl.col("outcome").is_not_null())
    return [
        {
            "xref": "paper",
            "yref": "y",
            "x": 1.01,
            "y": y,
            "xanchor": "left",
            "showarrow": False,
            "align": "left",
            "text": f"<b>{esc(outcome)}</b> · expect {esc(expect)}",
            "font": {"color": OUTCOME_COLOURS.get(outcome, "#57606a"), "size": 11},
        }
        for y, outcome, expect in zip(marked["y"], marked["outcome"], marked["expect"], strict=True)
    ]


# -- HTML sections ---------------------------------------------------------------------------------
def header_html(data: CampaignData, index_href: str | None) -> str:
    back = f' · <a href="{esc(index_href)}">all campaigns</a>' if index_href else ""
    return (
        '<header class="top"><div class="brand">explain-pipeline report'
        f"{back}</div><h1>{esc(data.campaign_id)}</h1></header>"
    )


def nav_html(data: CampaignData) -> str:
    links = [("summary", "Summary")]
    if data.blocked:
        links.append(("integrity", "Integrity errors"))
    else:
        links += [("timeline", "Timeline"), ("verdicts", "Verdicts")]
        if data.what_if is not None:
            links.append(("what-if", "What-if"))
    items = [f'<a href="#{a}">{esc(t)}</a>' for a, t in links]
    ids = (data.attempts if data.blocked else data.assessments)["attempt_id"]
    if 0 < ids.len() <= NAV_ATTEMPTS:
        items.append('<span class="sep">|</span>')
        items += [f'<a href="#attempt-{esc(a)}">{esc(a)}</a>' for a in ids]
    elif ids.len():  # too many for a sticky bar: the tables link every attempt instead
        items.append(f'<a href="#attempts">Attempts ({ids.len()})</a>')
    return f'<nav class="toc">{"".join(items)}</nav>'


def _kv(key: str, value_html: str) -> str:
    return f'<div class="kv"><div class="k">{esc(key)}</div><div class="v">{value_html}</div></div>'


def summary_html(data: CampaignData) -> str:
    c = data.campaign
    if data.blocked:
        status = badge(f"blocked · {data.integrity.height} integrity error(s)", "#82071e")
    elif data.assessments.is_empty():
        status = badge("no attempts", "#6e7781")
    else:
        status = " ".join(
            f"{verdict_badge(v)}&nbsp;×&nbsp;{n}"
            for v in VERDICT_COLOURS
            if (n := int((data.assessments["verdict"] == v).sum()))
        )
    cards = [
        _kv(
            "metric",
            f"{esc(c['metric_name'])} <span class='null'>({esc(c['metric_better'])} "
            "is better)</span>",
        ),
        _kv("kind", esc(c["kind"])),
        _kv("created", esc(c["created_at"])),
        _kv("status", status),
    ]
    best = data.assessments.filter(pl.col("best"))
    if best.height:
        b = best.row(0, named=True)
        cards.append(
            _kv(
                "best attempt",
                f'<a href="#attempt-{esc(b["attempt_id"])}">'
                f"{esc(b['attempt_id'])}</a> · {esc(b['candidate'])}",
            )
        )
    elif not data.blocked and data.assessments.height:
        cards.append(_kv("best attempt", '<span class="null">none eligible</span>'))
    policy = {f: c[f] for f in POLICY_FIELDS}
    policy_row = pl.DataFrame([policy], schema={f: pl.String for f in POLICY_FIELDS}, strict=False)
    return (
        '<section id="summary"><h2>Campaign</h2>'
        + _stale_banner(data)
        + f'<div class="grid">{"".join(cards)}</div>'
        + "<h4>Frozen policy</h4>"
        + html_table(policy_row.cast(pl.String), POLICY_FIELDS)
        + f'<p class="note">policy_sha256 <code>{esc(c["policy_sha256"])}</code>'
        + (
            " (recorded; matches the canonical policy)"
            if c["policy_sha256"] == c["policy_sha256_actual"]
            else f" (recorded) ≠ <code>{esc(c['policy_sha256_actual'])}</code> (canonical policy)"
        )
        + "</p></section>"
    )


def _stale_banner(data: CampaignData) -> str:
    if data.stale.is_empty():
        return ""
    items = "".join(f"<li><b>{esc(a)}</b>: {esc(p)}</li>" for a, p in data.stale.iter_rows())
    return (
        '<div class="banner warn"><b>The stored verdicts are out of date</b> for these attempts; '
        f"run <code>explain-pipeline assess {esc(data.campaign_id)}</code> and report again."
        f"<ul>{items}</ul></div>"
    )


def integrity_html(data: CampaignData) -> str:
    frame = data.integrity.with_columns(pl.col("attempt_id").fill_null("(campaign)").alias("where"))
    return (
        '<section id="integrity"><h2>Integrity errors</h2>'
        '<div class="banner blocked"><b>This campaign is blocked.</b> Its inputs changed or were '
        "declared out of order (SPEC §6), so no verdict is issued for any of its attempts. Fix "
        "the inputs, ingest again and assess.</div>"
        + html_table(frame, ("where", "code", "message", "expected", "actual"))
        + "</section>"
    )


def timeline_html(data: CampaignData) -> str:
    if data.assessments.is_empty():
        return ""
    height = 520
    return (
        '<section id="timeline"><h2>Timeline</h2>'
        '<p class="note">Per round: the paired estimate of the metric ratio with its '
        f"{data.campaign['confidence']:.0%} interval (log scale), the gate "
        f"×{1 + data.campaign['min_improvement_pct'] / 100:.4g} as a band from 1, and below it "
        "the median-rule improvement. Colour: final verdict; symbol: explanation; the best "
        "attempt is circled.</p>"
        + figure_block(timeline_figure(data), "plot-timeline", height, "campaign timeline")
        + "</section>"
    )


# The verdict table shows the columns of `assess`'s table output; every column is one click away.
SUMMARY_COLUMNS = (
    "round",
    "attempt_id",
    "candidate",
    "n_pairs",
    "improvement_pct",
    "paired",
    "share_speedup",
    "explanation",
    "verdict",
    "reason",
    "eligible",
    "best",
)
SUMMARY_HEADERS = {
    "attempt_id": "attempt",
    "n_pairs": "pairs",
    "improvement_pct": "median %",
    "paired": "paired [low, high]",
    "share_speedup": "share",
}


def paired_text(estimate: float | None, low: float | None, high: float | None) -> str | None:
    if estimate is None:
        return None
    interval = f" [{fmt_number(low)}, {fmt_number(high)}]" if low is not None else ""
    return fmt_number(estimate) + interval


def verdicts_html(data: CampaignData) -> str:
    a = data.assessments
    paired = [
        paired_text(*r)
        for r in a.select("paired_estimate", "paired_low", "paired_high").iter_rows()
    ]
    summary = a.with_columns(pl.Series("paired", paired, dtype=pl.String))

    def best(row: Mapping[str, Any]) -> str:
        return "best" if row["best"] else ""

    return (
        '<section id="verdicts"><h2>Verdicts</h2>'
        f'<p class="note">Decision <b>{esc(data.campaign["decision"])}</b>, require_explanation '
        f"<b>{esc(str(data.campaign['require_explanation']).lower())}</b>: the campaign's frozen "
        "policy. The best attempt's row is highlighted.</p>"
        + html_table(summary, SUMMARY_COLUMNS, headers=SUMMARY_HEADERS, row_class=best)
        + '<details id="all-columns"><summary>every column of the assessments table</summary>'
        + html_table(a, VERDICT_COLUMNS, row_class=best)
        + "</details></section>"
    )


def what_if_html(data: CampaignData) -> str:
    if data.what_if is None or data.what_if_overrides is None:
        return ""
    overrides = ", ".join(f"{k}={v}" for k, v in data.what_if_overrides.items())
    frozen = data.assessments.select(
        "attempt_id",
        pl.col("verdict").alias("frozen_verdict"),
        pl.col("reason").alias("frozen_reason"),
    )
    joined = data.what_if.join(frozen, on="attempt_id", how="left").sort("round", "attempt_id")
    columns = (
        "attempt_id",
        "round",
        "candidate",
        "frozen_verdict",
        "frozen_reason",
        "decision",
        "require_explanation",
        "verdict",
        "reason",
        "eligible",
        "best",
    )
    return (
        '<section id="what-if"><h2>What-if verdicts</h2>'
        f'<div class="banner whatif"><b>What-if: {esc(overrides)}.</b> Computed for comparison '
        "under another policy; never stored, and it does not replace the campaign's frozen "
        "verdicts above. Rows whose verdict differs are highlighted.</div>"
        + html_table(
            joined,
            columns,
            headers={
                "verdict": "what-if verdict",
                "reason": "what-if reason",
                "eligible": "what-if eligible",
                "best": "what-if best",
            },
            row_class=lambda r: "changed" if r["verdict"] != r["frozen_verdict"] else "",
        )
        + "</section>"
    )


def _hypothesis_html(hypothesis: str | None) -> str:
    if hypothesis is None:
        return '<blockquote class="hypothesis none">no mechanism declared</blockquote>'
    return f'<blockquote class="hypothesis">{esc(hypothesis)}</blockquote>'


def _unverifiable_html(rows: pl.DataFrame) -> str:
    part = rows.filter(pl.col("status") == "unverifiable")
    if part.is_empty():
        return '<p class="note">none: every quantity has an interval.</p>'
    items = "".join(
        f"<li><b>{esc(r['label'])}</b> — {esc(r['reason'])} "
        f"<span class='null'>(n = {r['n_pairs'] or 0} pairs"
        + (f", estimate {fmt_number(r['estimate'])}" if r["estimate"] is not None else "")
        + ")</span></li>"
        for r in part.iter_rows(named=True)
    )
    return f'<ul class="plain">{items}</ul>'


def _legend_html() -> str:
    swatches = "".join(
        f'<span><span class="swatch" style="background:{c}"></span>{esc(o)}</span>'
        for o, c in OUTCOME_COLOURS.items()
    )
    return f'<div class="legend">expectation outcomes: {swatches}</div>'


def _attempt_head(row: Mapping[str, Any], info: Mapping[str, Any], what_if: str | None) -> str:
    """Title, badges (verdict, explanation, best, what-if verdict) and the attempt's numbers."""
    what_if_badge = (
        badge(f"what-if {what_if}", VERDICT_COLOURS.get(what_if), outline=True) if what_if else ""
    )
    counts = (
        f"{row['n_pairs']} pairs · ok runs {row['n_baseline_ok']} baseline / "
        f"{row['n_candidate_ok']} candidate · unpaired {row['n_unpaired_baseline']} / "
        f"{row['n_unpaired_candidate']} · failed {row['n_failed']}"
    )
    return (
        f'<div class="attempt-head"><h3>Round {row["round"]} · {esc(row["attempt_id"])}</h3>'
        f"{verdict_badge(row['verdict'])} {explanation_badge(row['explanation'])}"
        + (badge("best", "#d4a72c") if row["best"] else "")
        + what_if_badge
        + f"<span class='meta'>candidate <b>{esc(row['candidate'])}</b> vs baseline "
        f"<b>{esc(info.get('baseline'))}</b> · status {esc(row['status'])}</span></div>"
        f'<p class="note">{esc(counts)} · verdict reason: {esc(row["reason"] or "—")} · '
        f"median {fmt_pct(row['improvement_pct'])} · paired "
        f"{fmt_number(row['paired_estimate'])} [{fmt_number(row['paired_low'])}, "
        f"{fmt_number(row['paired_high'])}]</p>"
    )


def _expectations_html(outcomes: pl.DataFrame) -> str:
    if outcomes.is_empty():
        return '<p class="note">no expectations declared.</p>'
    return html_table(
        outcomes.with_columns(pl.format("{} {}", "target", "name").alias("expectation")),
        ("expectation", "expect", "outcome", "reason", "evidence", "direction"),
    )


def attempt_html(
    data: CampaignData, row: Mapping[str, Any], info: Mapping[str, Any], what_if: str | None
) -> str:
    """One attempt: verdict line, hypothesis, forest plot, expectations and unverifiable list."""
    aid = row["attempt_id"]
    outcomes = data.outcomes.filter(pl.col("attempt_id") == aid).sort("position")
    rows = forest_rows(data.comparisons.filter(pl.col("attempt_id") == aid), outcomes)
    gate = 1.0 + float(data.campaign["min_improvement_pct"]) / 100.0
    higher = data.campaign["metric_better"] == "higher"
    plot = (
        figure_block(
            forest_figure(rows, gate=gate, higher_is_better=higher),
            f"plot-attempt-{aid}",
            _forest_height(rows.height),
            f"forest plot of the comparisons of attempt {aid}",
        )
        if rows.height
        else '<p class="note">No comparison: the attempt has no paired runs.</p>'
    )
    return (
        f'<article id="attempt-{esc(aid)}">'
        + _attempt_head(row, info, what_if)
        + _hypothesis_html(info.get("hypothesis"))
        + f'<div class="split"><div class="plot">{plot}</div>'
        + '<div class="side"><h4>Expectations</h4>'
        + _legend_html()
        + _expectations_html(outcomes)
        + "<h4>Unverifiable quantities</h4>"
        + _unverifiable_html(rows)
        + "</div></div></article>"
    )


def blocked_attempt_html(info: Mapping[str, Any], expectations: pl.DataFrame) -> str:
    """A blocked campaign's attempt: what was declared, never a verdict."""
    aid = info["attempt_id"]
    declared = expectations.filter(pl.col("attempt_id") == aid).sort("position")
    listing = (
        html_table(declared, ("target", "name", "expect"))
        if declared.height
        else '<p class="note">no expectations declared.</p>'
    )
    return (
        f'<article id="attempt-{esc(aid)}"><div class="attempt-head">'
        f"<h3>Round {info['round']} · {esc(aid)}</h3><span class='meta'>candidate "
        f"<b>{esc(info['candidate'])}</b> vs baseline <b>{esc(info['baseline'])}</b> · status "
        f"{esc(info['status'])} · not assessed: the campaign is blocked</span></div>"
        + _hypothesis_html(info.get("hypothesis"))
        + "<h4>Declared expectations</h4>"
        + listing
        + "</article>"
    )


def attempts_html(data: CampaignData) -> str:
    infos = {r["attempt_id"]: r for r in data.attempts.iter_rows(named=True)}
    if data.blocked:
        articles = [blocked_attempt_html(i, data.expectations) for i in infos.values()]
    else:
        what_if: dict[str, str] = (
            dict(data.what_if.select("attempt_id", "verdict").iter_rows())
            if data.what_if is not None
            else {}
        )
        articles = [
            attempt_html(
                data, row, infos.get(row["attempt_id"], {}), what_if.get(row["attempt_id"])
            )
            for row in data.assessments.iter_rows(named=True)
        ]
    return f'<div id="attempts">{"".join(articles)}</div>'


def footer_html() -> str:
    return (
        "<footer>Ratios are baseline / candidate, so &gt; 1 means the candidate is smaller (for "
        "the metric: better). Intervals are paired bootstrap percentile intervals; their nominal "
        "confidence is not calibrated in general (no interval under min_pairs pairs). "
        "Normalization cancels only same-proportion change within a step; counters can move "
        f"with cache residency or shared load. Generated by explain-pipeline {esc(__version__)}."
        "</footer>"
    )


def page(title: str, body: str, *, with_plots: bool) -> str:
    template = Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(
        title=esc(title),
        version=esc(__version__),
        body=body,
        plotlyjs=get_plotlyjs() if with_plots else "",
        config=script_json(PLOT_CONFIG),
    )


def render_campaign(data: CampaignData, *, index_href: str | None = None) -> str:
    """The whole HTML page of one campaign."""
    if data.blocked:
        sections = integrity_html(data)
    else:
        sections = timeline_html(data) + verdicts_html(data) + what_if_html(data)
    body = (
        header_html(data, index_href)
        + nav_html(data)
        + "<main>"
        + summary_html(data)
        + sections
        + attempts_html(data)
        + "</main>"
        + footer_html()
    )
    return page(f"{data.campaign_id} · explain-pipeline report", body, with_plots=not data.blocked)


# -- the index -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IndexEntry:
    campaign_id: str
    href: str | None  # None: no page written (never assessed)
    data: CampaignData | None


def index_row(entry: IndexEntry) -> str:
    name = (
        f'<a href="{esc(entry.href)}">{esc(entry.campaign_id)}</a>'
        if entry.href
        else esc(entry.campaign_id)
    )
    data = entry.data
    if data is None:
        hint = f"run <code>explain-pipeline assess {esc(entry.campaign_id)}</code>"
        return f"<tr><td>{name}</td><td colspan='6' class='null'>not assessed: {hint}</td></tr>"
    c, a = data.campaign, data.assessments
    if data.blocked:
        status = badge(f"blocked ({data.integrity.height})", "#82071e")
    else:
        counts = {v: int((a["verdict"] == v).sum()) for v in VERDICT_COLOURS}
        status = " ".join(f"{verdict_badge(v)}&nbsp;{n}" for v, n in counts.items() if n)
        if data.stale.height:
            status += " " + badge("out of date", "#9a6700", outline=True)
    best = a.filter(pl.col("best"))
    best_text = (
        f"{esc(best['attempt_id'][0])} · {esc(best['candidate'][0])}"
        if best.height
        else '<span class="null">—</span>'
    )
    return (
        f"<tr><td>{name}</td><td>{esc(c['kind'])}</td><td>{esc(c['metric_name'])} "
        f"({esc(c['metric_better'])})</td><td>{esc(c['decision'])}"
        f"{' + explanation' if c['require_explanation'] else ''}</td>"
        f"<td class='num'>{data.attempts.height}</td><td>{status}</td><td>{best_text}</td></tr>"
    )


def render_index(entries: Sequence[IndexEntry]) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in ("campaign", "kind", "metric", "decision", "attempts", "verdicts", "best")
    )
    rows = "".join(index_row(e) for e in entries)
    body = (
        '<header class="top"><div class="brand">explain-pipeline report</div>'
        "<h1>All campaigns</h1></header><main><section><h2>Campaigns</h2>"
        '<p class="note">One self-contained page per campaign; each opens offline.</p>'
        f'<div class="tablewrap"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody>'
        "</table></div></section></main>" + footer_html()
    )
    return page("explain-pipeline report · all campaigns", body, with_plots=False)


# -- writing ---------------------------------------------------------------------------------------
def _write(path: Path, text: str) -> Path:
    """Write via a temporary file and rename, so a reader never sees half a report."""
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; give a file name (a folder only with --all)")
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise UsageError(f"{path}: cannot write the report: {exc.strerror or exc}") from exc
    return path


def default_output(campaign_id: str | None) -> Path:
    return Path("report") if campaign_id is None else Path(f"report-{campaign_id}.html")


def campaign_file_name(campaign_id: str) -> str:
    return f"campaign-{campaign_id}.html"


def write_report(
    store: Store, campaign_id: str, out: Path, *, what_if: Mapping[str, str] | None = None
) -> Path:
    """Write the report of one campaign to ``out``; returns the path written."""
    return _write(out, render_campaign(load_campaign(store, campaign_id, what_if=what_if)))


@dataclass(frozen=True)
class IndexResult:
    index: Path
    pages: list[Path]
    not_assessed: list[str]


def write_all(
    store: Store, out_dir: Path, *, what_if: Mapping[str, str] | None = None
) -> IndexResult:
    """Write ``out_dir/index.html`` and one ``campaign-<id>.html`` per campaign beside it.

    A campaign that was never assessed gets no page; the index lists it with the command to run.
    """
    campaign_ids = store.campaign_ids("campaigns")
    if not campaign_ids:
        raise UsageError(
            f"store {store.root} has no campaigns: run `explain-pipeline ingest` first"
        )
    entries, pages = [], []
    for cid in campaign_ids:
        try:
            data = load_campaign(store, cid, what_if=what_if)
        except NotAssessedError:
            entries.append(IndexEntry(cid, None, None))
            continue
        href = campaign_file_name(cid)
        pages.append(_write(out_dir / href, render_campaign(data, index_href="index.html")))
        entries.append(IndexEntry(cid, href, data))
    index = _write(out_dir / "index.html", render_index(entries))
    return IndexResult(index, pages, [e.campaign_id for e in entries if e.data is None])
