"""The report's plots: the campaign timeline and the forest plot of each attempt."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from pipeline.assessment.gate import ONE_SIDED_TEXT
from pipeline.report.data import CampaignData
from pipeline.report.style import (
    DIRECTION_COLOURS,
    EXPLANATION_SYMBOLS,
    MEMBER_COLOURS,
    OUTCOME_COLOURS,
    VERDICT_COLOURS,
    clamp,
    esc,
    finite,
    fmt_pct,
    html_number,
    log_range,
    plot_esc,
    script_json,
)

_DIRECTION_CLASS = {
    "decrease": "down",
    "improved": "down",
    "increase": "up",
    "regressed": "up",
    "none": "none",
}
PLOT_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "showLink": False,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
    "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"],
    "toImageButtonOptions": {"format": "svg"},
}
_FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'


Figure = dict[str, Any]
"""A plotly figure as plain data (`data`, `layout`). The per-attempt forest plots are built this
way rather than through plotly.graph_objects, whose validation costs ~45 ms a figure (minutes for
a simulated campaign of thousands of attempts); a test validates them with plotly's schema."""


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
        f"[{html_number(row['paired_low'])}, {html_number(row['paired_high'])}]"
        if row["paired_low"] is not None
        else f"no interval ({plot_esc(row['paired_reason'] or 'n/a')})"
    )
    return (
        f"<b>{plot_esc(row['attempt_id'])}</b> · {plot_esc(row['candidate'])}<br>"
        f"verdict <b>{plot_esc(row['verdict'])}</b> {plot_esc(row['reason'] or '')}<br>"
        f"paired ratio {html_number(row['paired_estimate'])} {interval}<br>"
        f"median improvement {fmt_pct(row['improvement_pct'])}<br>"
        f"explanation {plot_esc(row['explanation'])}"
        + ("<br><b>best attempt</b>" if row["best"] else "")
    )


def timeline_figure(data: CampaignData) -> go.Figure:
    frame = timeline_frame(data.assessments)
    gate = 1.0 + float(data.campaign["min_improvement_pct"]) / 100.0
    ratio = ratio_definition("metric", data.campaign["metric_better"] == "higher")
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.09,
        row_heights=[0.64, 0.36],
        subplot_titles=(
            f"Paired metric ratio {ratio} (> 1: candidate better) with its interval",
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
        low = [clamp(lo, top) for lo in part["paired_low"]]
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
                        for lo, e in zip(low, est, strict=True)
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
                    f"{plot_esc(r['attempt_id'])}: median rule {plot_esc(r['median_verdict'])} "
                    f"{fmt_pct(r['improvement_pct'])} {plot_esc(r['median_reason'] or '')}"
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
        title_text=f"{ratio} (> 1: better)",
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

    An expectation's row is its evidence comparison (contract §5); a region or counter that never
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
        pl.col("estimate", "low", "high").fill_nan(None),  # never in valid data; JSON has no NaN
        pl.col("quantity").replace_strict(_FAMILY, default=4).alias("family"),
        pl.when(missing).then(pl.lit("unverifiable")).otherwise("status").alias("status"),
        pl.when(missing)
        .then(pl.coalesce("outcome_reason", pl.lit("never appears")))
        .otherwise("reason")
        .alias("reason"),
        pl.col("direction").replace_strict(_DIRECTION_CLASS, default="none").alias("dclass"),
    ).sort("family", "name", "quantity")


def ratio_definition(quantity: str, higher_is_better: bool) -> str:
    """What a quantity's ratio divides, so that > 1 is the candidate better (metric, share
    speedup) or smaller (regions, counters)."""
    if quantity == "share_speedup":
        return "candidate's reference share / baseline's"
    if quantity == "metric" and higher_is_better:
        return "candidate / baseline"
    return "baseline / candidate"


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
    lines = [f"<b>{plot_esc(row['label'])}</b>"]
    if est is None:
        lines.append(f"unverifiable: {plot_esc(row['reason'])}")
    else:
        interval = (
            f"[{html_number(low)}, {html_number(high)}]" if low is not None else "no interval"
        )
        definition = ratio_definition(row["quantity"], higher_is_better)
        lines.append(f"ratio ({definition}) {html_number(est)} {interval}")
        lines.append(_reading(row["quantity"], est, higher_is_better))
    lines.append(
        f"n = {row['n_pairs'] if row['n_pairs'] is not None else 0} pairs · "
        f"direction {plot_esc(row['direction'] or 'n/a')} · {plot_esc(row['status'])}"
    )
    if row["status"] == "unverifiable" and est is not None:
        lines.append(f"reason: {plot_esc(row['reason'])}")
    if row["outcome"] is not None:
        lines.append(f"expected {plot_esc(row['expect'])}: <b>{plot_esc(row['outcome'])}</b>")
    return "<br>".join(lines)


_DIRECTION_NAMES = {
    "down": "ratio > 1 (candidate smaller / better)",
    "up": "ratio < 1",
    "none": "interval spans 1",
    "unverifiable": "unverifiable (no interval)",
}


def _forest_layout(
    height: int,
    labels: list[str],
    xrange: list[float],
    title: str,
    *,
    shapes: list[dict[str, Any]],
    right: int = 20,
    annotations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The layout both forest plots share: one row per label (top down) on a log ratio axis,
    the legend below; ``right`` leaves room for annotations beside the rows."""
    extra = {} if annotations is None else {"annotations": annotations}
    return _base_layout(
        height=height,
        margin={"l": 10, "r": right, "t": 10, "b": 70},
        showlegend=True,
        hovermode="closest",
        legend={
            "orientation": "h",
            "y": -70 / height,
            "x": 0,
            "yanchor": "top",
            "font": {"size": 11},
        },
        shapes=shapes,
        **extra,
        xaxis={
            "type": "log",
            "range": xrange,
            "gridcolor": "#eaeef2",
            "zeroline": False,
            "title": {"text": title, "font": {"size": 11, "color": "#59636e"}},
        },
        yaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": labels,
            "autorange": "reversed",
            "automargin": True,
            "gridcolor": "#f3f5f7",
        },
    )


def _placed(
    rows: pl.DataFrame, labels: list[str], hover: list[str], *, include: tuple[float, ...]
) -> tuple[pl.DataFrame, list[float], float]:
    """A forest's rows with their y (the label) and hover text, its log x range (every estimate
    and bound, and ``include``) and that range's right edge, where +inf is drawn."""
    xrange = log_range([*rows["estimate"], *rows["low"], *rows["high"]], include=include)
    shown = rows.with_columns(pl.Series("y", labels), pl.Series("hover", hover, dtype=pl.String))
    return shown, xrange, 10 ** xrange[1]


def _vertical_line(x: float, line: dict[str, Any]) -> dict[str, Any]:
    """A line across the plot's height at ratio ``x``."""
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": line,
    }


def forest_figure(rows: pl.DataFrame, *, gate: float, higher_is_better: bool) -> Figure:
    """Every comparison of one attempt on a log ratio axis, with its expectation outcomes."""
    labels = [plot_esc(v) for v in rows["label"]]
    hover = [_forest_hover(r, higher_is_better) for r in rows.iter_rows(named=True)]
    shown, xrange, edge = _placed(rows, labels, hover, include=(1.0, gate))
    height = forest_height(rows.height)
    one = _vertical_line(1.0, {"color": "#57606a", "width": 1.2})
    gates = [  # the gate, where it applies: the metric's row
        {
            "type": "rect",
            "xref": "x",
            "yref": "y",
            "x0": 1.0,
            "x1": gate,
            "y0": i - 0.42,
            "y1": i + 0.42,
            "fillcolor": "#d4a72c",
            "opacity": 0.25,
            "line": {"width": 0},
            "layer": "below",
        }
        for i, q in enumerate(rows["quantity"])
        if q == "metric"
    ]
    layout = _forest_layout(
        height,
        labels,
        xrange,
        "ratio, log scale: > 1 = the candidate is better (metric, share speedup) or smaller "
        "(regions, counters)",
        shapes=[one, *gates],
        right=215,
        annotations=_outcome_annotations(shown),
    )
    traces = [
        *_forest_points(shown, edge),
        *_forest_no_estimate(shown),
        *_forest_infinite(shown, edge),
    ]
    return {"data": traces, "layout": layout}


def _forest_points(shown: pl.DataFrame, edge: float) -> list[dict[str, Any]]:
    """Estimates and interval segments, one pair of traces per direction class."""
    unverifiable = pl.col("status") == "unverifiable"

    def rows(dclass: str) -> pl.Expr:  # an unverifiable row is drawn hollow, whatever its class
        if dclass == "unverifiable":
            return unverifiable
        return ~unverifiable & (pl.col("dclass") == dclass)

    classes = [
        (dclass, _DIRECTION_NAMES[dclass], colour, rows(dclass), dclass == "unverifiable")
        for dclass, colour in DIRECTION_COLOURS.items()
    ]
    return _estimate_traces(shown, edge, classes)


def _estimate_traces(
    shown: pl.DataFrame, edge: float, classes: list[tuple[str, str, str, pl.Expr, bool]]
) -> list[dict[str, Any]]:
    """Per class (legend group, legend name, colour, which rows, hollow marker): its interval
    segments and its estimates, the rows with an estimate only; +inf is drawn at the edge."""
    traces: list[dict[str, Any]] = []
    for group, name, colour, rows, hollow in classes:
        part = shown.filter(rows & pl.col("estimate").is_not_null())
        if part.is_empty():
            continue
        spans = part.filter(pl.col("low").is_not_null() & pl.col("high").is_not_null())
        if spans.height:  # segments low..high, separated by gaps (None)
            xs = [
                v
                for lo, hi in zip(spans["low"], spans["high"], strict=True)
                for v in (min(lo, edge), min(hi, edge), None)  # +inf: at the edge
            ]
            ys = [v for y in spans["y"] for v in (y, y, None)]
            traces.append(
                {
                    "type": "scatter",
                    "x": xs,
                    "y": ys,
                    "mode": "lines",
                    "showlegend": False,
                    "legendgroup": group,
                    "hoverinfo": "skip",
                    "line": {"color": colour, "width": 2.5},
                }
            )
        traces.append(
            {
                "type": "scatter",
                "x": [min(v, edge) for v in part["estimate"]],
                "y": part["y"].to_list(),
                "mode": "markers",
                "name": name,
                "legendgroup": group,
                "hovertext": part["hover"].to_list(),
                "hoverinfo": "text",
                "marker": {
                    "color": "#ffffff" if hollow else colour,
                    "size": 9,
                    "symbol": "diamond" if hollow else "circle",
                    "line": {"color": colour, "width": 2},
                },
            }
        )
    return traces


def forest_height(n_rows: int) -> int:
    return 110 + 28 * max(n_rows, 2)


def _forest_no_estimate(shown: pl.DataFrame) -> list[dict[str, Any]]:
    """Rows with no estimate at all: their reason written on the plot at ratio 1."""
    return _no_estimate(shown, "unverifiable", DIRECTION_COLOURS["unverifiable"], plot_esc)


def _no_estimate(
    shown: pl.DataFrame, label: str, colour: str, escape: Callable[[str], str]
) -> list[dict[str, Any]]:
    """Rows without an estimate: ``label: reason`` written at ratio 1."""
    part = shown.filter(pl.col("estimate").is_null())
    if part.is_empty():
        return []
    return [
        {
            "type": "scatter",
            "x": [1.0] * part.height,
            "y": part["y"].to_list(),
            "mode": "text",
            "showlegend": False,
            "text": [f"{label}: {escape(r)}" for r in part["reason"]],
            "textposition": "middle right",
            "hovertext": part["hover"].to_list(),
            "hoverinfo": "text",
            "textfont": {"color": colour, "size": 11},
        }
    ]


def _forest_infinite(shown: pl.DataFrame, edge: float) -> list[dict[str, Any]]:
    """An interval or estimate at +inf (the quantity vanished) runs to the edge, marked ∞."""
    part = shown.filter(pl.col("high").is_infinite() | pl.col("estimate").is_infinite())
    if part.is_empty():
        return []
    return [
        {
            "type": "scatter",
            "x": [edge] * part.height,
            "y": part["y"].to_list(),
            "mode": "text",
            "text": ["∞"] * part.height,
            "textposition": "top left",
            "showlegend": False,
            "hoverinfo": "skip",
            "textfont": {"size": 14, "color": "#1f2328"},
        }
    ]


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
            "text": f"<b>{plot_esc(outcome)}</b> · expect {plot_esc(expect)}",
            "font": {"color": OUTCOME_COLOURS.get(outcome, "#57606a"), "size": 11},
        }
        for y, outcome, expect in zip(marked["y"], marked["outcome"], marked["expect"], strict=True)
    ]


# -- the benchmarks of one attempt: simultaneous intervals ----------------------------------------
def member_rows(members: pl.DataFrame) -> pl.DataFrame:
    """An attempt's rows of table ``benchmarks`` as the plot shows them, in the order every
    output lists them (pipeline.output.views): the metric first, then by change."""
    from pipeline.output.views import members_in_order

    return members_in_order(members).with_columns(
        pl.when(pl.col("quantity") == "metric")
        .then(pl.format("metric {}", pl.col("name")))
        .otherwise(pl.col("name"))
        .alias("label"),
        pl.col("estimate", "low", "high").fill_nan(None),
    )


def _member_hover(row: Mapping[str, Any]) -> str:
    verdict = row["verdict"] + (f" ({row['reason']})" if row["reason"] else "")
    lines = [f"<b>{esc(row['label'])}</b>", f"verdict <b>{esc(verdict)}</b>"]
    if row["estimate"] is not None:
        interval = (
            f"[{html_number(row['low'])}, {html_number(row['high'])}]"
            if row["low"] is not None
            else "no interval"
        )
        lines.append(f"ratio (baseline / candidate) {html_number(row['estimate'])} {interval}")
        lines.append(_reading(str(row["quantity"]), row["estimate"], False))
    method = f" · {esc(row['method'])} c = {html_number(row['critical'])}" if row["method"] else ""
    lines.append(f"n = {row['n_pairs']} pairs · {row['family_size']} members{method}")
    return "<br>".join(lines)


def member_forest_figure(rows: pl.DataFrame, *, gate: float, margin: float) -> Figure:
    """Every member of one attempt's family on a log ratio axis: its estimate and simultaneous
    interval coloured by verdict, the margin band ``[1/M, M]`` (unchanged lies inside it,
    regressed wholly left of it), the gate ``g`` (improved lies right of it) and 1."""
    labels = [esc(v) for v in rows["label"]]
    hover = [_member_hover(r) for r in rows.iter_rows(named=True)]
    shown, xrange, edge = _placed(rows, labels, hover, include=(1.0, 1 / margin, margin, gate))
    height = forest_height(rows.height)
    band = {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": 1 / margin,
        "x1": margin,
        "y0": 0,
        "y1": 1,
        "fillcolor": "#0969da",
        "opacity": 0.10,
        "line": {"width": 0},
        "layer": "below",
    }
    lines = [
        _vertical_line(x, {"color": colour, "width": 1.2, "dash": dash})
        for x, colour, dash in ((1.0, "#57606a", "solid"), (gate, "#d4a72c", "dash"))
    ]
    layout = _forest_layout(
        height,
        labels,
        xrange,
        f"ratio, log scale: > 1 = the candidate is faster; band: the margin "
        f"[{1 / margin:.4g}, {margin:.4g}], dashed: the gate {gate:.4g}",
        shapes=[band, *lines],
    )
    traces = [
        *_member_points(shown, edge),
        *_member_no_estimate(shown),
        *_forest_infinite(shown, edge),
    ]
    return {"data": traces, "layout": layout}


def _member_points(shown: pl.DataFrame, edge: float) -> list[dict[str, Any]]:
    """Estimates and interval segments, one pair of traces per verdict."""
    classes = [
        (verdict, verdict, colour, pl.col("verdict") == verdict, verdict == "inconclusive")
        for verdict, colour in MEMBER_COLOURS.items()
    ]
    return _estimate_traces(shown, edge, classes)


def _member_no_estimate(shown: pl.DataFrame) -> list[dict[str, Any]]:
    """Members without an estimate (a zero baseline): their verdict and reason at ratio 1; a
    benchmark one side only ran (added, removed) says which side."""
    one_sided = pl.col("verdict").is_in(list(ONE_SIDED_TEXT))
    out = _no_estimate(
        shown.filter(~one_sided), "inconclusive", MEMBER_COLOURS["inconclusive"], esc
    )
    for verdict, where in ONE_SIDED_TEXT.items():
        part = shown.filter(pl.col("verdict") == verdict).with_columns(
            pl.lit(where).alias("reason")
        )
        out += _no_estimate(part, verdict, MEMBER_COLOURS[verdict], esc)
    return out


# -- per-pair strip plot -------------------------------------------------------------------------
STRIP_HEIGHT = 200  # the legend (the dots' colours and the three lines) takes two rows
_ORDER_MARKS = {
    True: ("baseline ran first", "#0969da"),
    False: ("candidate ran first", "#bc4c00"),
    None: ("order not recorded", "#57606a"),
}


def strip_figure(ratios: pl.DataFrame, *, estimate: float | None, gate: float) -> Figure:
    """Every pair's metric ratio of one attempt on a log axis, one dot per pair (outliers are
    seen, not hidden in an interval), coloured by which side ran first, with the paired
    estimate, 1 and the gate as vertical lines. ``ratios``: repetition, ratio, baseline_first."""
    xrange = log_range([*ratios["ratio"], estimate], include=(1.0, gate))
    # a fixed jitter per repetition (no randomness: the page is the same every time)
    shown = ratios.with_columns(((pl.col("repetition") * 0.618034) % 1 - 0.5).alias("y"))
    traces = []
    for key, (name, colour) in _ORDER_MARKS.items():
        part = shown.filter(
            pl.col("baseline_first").is_null() if key is None else pl.col("baseline_first") == key
        )
        if part.height:
            traces.append(
                {
                    "type": "scatter",
                    "x": part["ratio"].to_list(),
                    "y": part["y"].to_list(),
                    "mode": "markers",
                    "name": name,
                    "hoverinfo": "text",
                    "hovertext": [
                        f"repetition {r}: ratio {html_number(v)}"
                        for r, v in zip(part["repetition"], part["ratio"], strict=True)
                    ],
                    "marker": {"color": colour, "size": 8, "opacity": 0.8},
                }
            )
    # each line is a trace of its own, so the legend names it (shapes have no legend entry)
    traces += [
        {
            "type": "scatter",
            "x": [x, x],
            "y": [-0.8, 0.8],
            "mode": "lines",
            "name": name,
            "hoverinfo": "name",
            "line": {"color": colour, "width": width, "dash": dash},
        }
        for x, name, colour, width, dash in (
            (1.0, "1: no change", "#57606a", 1.2, "solid"),
            (gate, f"gate ×{gate:.4g}", "#d4a72c", 1.2, "dot"),
            (estimate, f"paired estimate {html_number(estimate)}", "#1f2328", 2, "solid"),
        )
        if x is not None and math.isfinite(x)
    ]
    layout = _base_layout(
        height=STRIP_HEIGHT,
        margin={"l": 10, "r": 10, "t": 52, "b": 40},
        showlegend=True,
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "font": {"size": 11}},
        xaxis={
            "type": "log",
            "range": xrange,
            "gridcolor": "#eaeef2",
            "zeroline": False,
            "title": {
                "text": "metric ratio of each pair (> 1 = candidate better), log scale",
                "font": {"size": 11, "color": "#59636e"},
            },
        },
        yaxis={"visible": False, "range": [-0.8, 0.8]},
    )
    return {"data": traces, "layout": layout}
