"""The report's HTML: the sections of a campaign's page, the page itself and the index."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from string import Template
from typing import Any

import polars as pl
from plotly.offline import get_plotlyjs

from pipeline.contract.inert import printable
from pipeline.contract.policy import POLICY_DEFAULTS, POLICY_FIELDS
from pipeline.output.markdown import MEMBER_RANK
from pipeline.output.numbers import HTML, SUMMARY, fmt_number, fmt_paired
from pipeline.output.views import (
    about,
    accounting_text,
    chain_text,
    confirmation_notes,
    gain_text,
    selected_text,
)
from pipeline.report.data import VERDICT_COLUMNS, CampaignData
from pipeline.report.figures import (
    PLOT_CONFIG,
    STRIP_HEIGHT,
    figure_block,
    forest_figure,
    forest_height,
    forest_rows,
    member_forest_figure,
    member_rows,
    ratio_definition,
    strip_figure,
    timeline_figure,
)
from pipeline.report.style import (
    EXPLANATION_COLOURS,
    MEMBER_COLOURS,
    OUTCOME_COLOURS,
    VERDICT_COLOURS,
    esc,
    fmt_pct,
    html_number,
    script_json,
)
from pipeline.report.words import interval_words, reason_html
from pipeline.version import __version__

TEMPLATE = Path(__file__).with_name("template.html")
NAV_ATTEMPTS = 24  # attempts linked from the sticky navigation bar; more would bury the page

DEFAULT = POLICY_DEFAULTS["interval"]
"""The interval of a campaign stored before the policy had one (read as the default)."""


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
        return f'<td class="num">{html_number(value)}</td>'
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    if column == "message":
        return f'<td class="text">{esc(value)}</td>'
    if column == "reason":
        return f"<td>{reason_html(str(value))}</td>"
    if column == "paired":  # an estimate and its interval read as one: never broken
        return f'<td class="nowrap">{esc(value)}</td>'
    mono = ' class="mono"' if column.endswith("sha256") or column in ("expected", "actual") else ""
    return f"<td{mono}>{esc(value)}</td>"


def html_table(
    frame: pl.DataFrame,
    columns: Sequence[str],
    *,
    row_class: Callable[[dict[str, Any]], str] | None = None,
    headers: Mapping[str, str] | None = None,
    fit: bool = False,
) -> str:
    """``fit``: the cells wrap so that the table fits its column instead of scrolling sideways."""
    head = "".join(f"<th>{esc((headers or {}).get(c, c))}</th>" for c in columns)
    rows = []
    for row in frame.iter_rows(named=True):
        cls = row_class(row) if row_class else ""
        attr = f' class="{cls}"' if cls else ""
        rows.append(f"<tr{attr}>" + "".join(cell(row.get(c), c) for c in columns) + "</tr>")
    table = '<table class="fit">' if fit else "<table>"
    return (
        f'<div class="tablewrap">{table}'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


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
        if data.account is not None:
            links.append(("accounting", "Accounting"))
        if data.what_if is not None:
            links.append(("what-if", "What-if"))
    if data.rejected.height:
        links.append(("rejected", "Rejected at ingest"))
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


def _verdict_counts(assessments: pl.DataFrame) -> str:
    """The header's verdicts: the rounds' counted per verdict, each confirmation round named
    apart (it measures a round again: counting it would count that round twice)."""
    confirming = assessments["kind"] == "confirmation"
    rounds = assessments.filter(~confirming)
    status = " ".join(
        f"{verdict_badge(v)}&nbsp;×&nbsp;{n}"
        for v in VERDICT_COLOURS
        if (n := int((rounds["verdict"] == v).sum()))
    )
    confirmations = [
        f"confirmation {esc(str(r['attempt_id']))}: {verdict_badge(r['verdict'])}"
        for r in assessments.filter(confirming).iter_rows(named=True)
    ]
    return " · ".join([x for x in [status] if x] + confirmations)


def summary_html(data: CampaignData) -> str:
    c = data.campaign
    if data.blocked:
        status = badge(f"blocked · {data.integrity.height} integrity error(s)", "#82071e")
    elif data.assessments.is_empty():
        status = badge("no attempts", "#6e7781")
    else:
        status = _verdict_counts(data.assessments)
    cards = [
        _kv(
            "metric",
            f"{esc(c['metric_name'])} <span class='null'>({esc(c['metric_better'])} "
            "is better)</span>",
        ),
        _kv("kind", esc(c["kind"])),
        _kv("created", timestamp_html(c["created_at"])),
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
    cards += _account_cards(data)
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
        "declared out of order (docs/contract.md §6), so no verdict is issued for any of its "
        "attempts. Fix the inputs, ingest again and assess.</div>"
        + html_table(frame, ("where", "code", "message", "expected", "actual"))
        + "</section>"
    )


def rejected_html(data: CampaignData) -> str:
    """The attempts ingest rejected: they are in no table and no plot, so they are named here,
    each error as ingest reported it."""
    if data.rejected.is_empty():
        return ""
    frame = data.rejected.with_columns(
        attempt=pl.col("attempt_id").fill_null("(campaign.json)"),  # not a link: no such page part
        where=pl.when(pl.col("line").is_null())
        .then(pl.col("path"))
        .otherwise(pl.format("{}:{}", "path", "line")),
    )
    n = frame["attempt"].n_unique()
    return (
        '<section id="rejected"><h2>Rejected at ingest</h2>'
        f'<div class="banner warn"><b>{n} attempt folder(s) were rejected at ingest</b> and are '
        "not assessed (an attempt rejected after an earlier valid version keeps that version's "
        "verdict). Fix the files named below and ingest again.</div>"
        + html_table(frame, ("attempt", "where", "field", "code", "message"))
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
# The report gives the verdict's reason a column of its own, after the verdict.
SUMMARY_COLUMNS = tuple(
    c for column, _ in SUMMARY for c in ((column, "reason") if column == "verdict" else (column,))
)
SUMMARY_HEADERS = dict(SUMMARY)


def _account_cards(data: CampaignData) -> list[str]:
    """The summary's rounds, PASSes and chance count, and the campaign's gain."""
    a = data.account
    if a is None:
        return []
    chance = "" if a.expected is None else f" · chance: {about(a.expected)}"
    cards = [_kv("rounds", esc(f"{a.passes} PASS of {a.rounds}{chance}"))]
    c = a.confirmation
    if c is not None:
        gain = paired_text(c.estimate, c.low, c.high) or "—"
        cards.append(
            _kv(
                "campaign's gain",
                f'{esc(gain)} · <a href="#attempt-{esc(c.attempt_id)}">{esc(c.attempt_id)}</a>',
            )
        )
    elif a.target is not None:
        cards.append(_kv("campaign's gain", '<span class="null">not measured again</span>'))
    return cards


def accounting_html(data: CampaignData) -> str:
    """The campaign's accounting: PASSes against chance, the pick's selected estimate, the
    chain, and the confirmation round's interval, the campaign's gain."""
    a = data.account
    if a is None:
        return ""
    lines = [accounting_text(a), selected_text(a), chain_text(a), *confirmation_notes(a)]
    items = "".join(f"<li>{esc(x)}</li>" for x in lines if x)
    return (
        '<section id="accounting"><h2>Campaign accounting</h2>'
        f"<ul>{items}</ul>"
        f"<p><b>campaign's gain:</b> {esc(gain_text(a))}</p>"
        '<p class="note">A campaign is a search: its pick is the largest of several noisy '
        "estimates, so its own estimate leans high. A confirmation round measures the pick "
        "again against the campaign's first baseline, after the pick was made; its interval "
        "is the campaign's gain.</p></section>"
    )


def paired_text(estimate: float | None, low: float | None, high: float | None) -> str | None:
    return fmt_paired(estimate, low, high, HTML)


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
        # fit: the reason wraps rather than push eligible and best behind a scrollbar
        + html_table(summary, SUMMARY_COLUMNS, headers=SUMMARY_HEADERS, row_class=best, fit=True)
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


def timestamp_html(moment: object) -> str:
    """A time to the second, in UTC: ``2026-11-30 12:35:33 UTC`` (stored times have microseconds
    and an offset, which only made the line wrap mid-offset). A narrow card may break the line
    between the date and the time, never inside either."""
    if not isinstance(moment, datetime):
        return esc("—" if moment is None else moment)
    day, time = moment.astimezone(UTC).strftime("%Y-%m-%d|%H:%M:%S UTC").split("|")
    return f'<span class="nowrap">{day}</span> <span class="nowrap">{time}</span>'


def recording_html(info: Mapping[str, Any]) -> str:
    """How and where the attempt was recorded, when `explain-pipeline round` wrote it."""
    if not info.get("recorder"):
        return ""
    try:
        environment = json.loads(info.get("environment") or "{}")
    except ValueError:  # the column holds what ingest wrote; never fail a report over it
        environment = {}
    parts = [f"recorded by {info['recorder']}"]
    if info.get("confirms"):
        parts.append(f"confirmation round of {info['confirms']}")
    if info.get("order_seed") is not None:
        parts.append(f"order seed {info['order_seed']}")
    parts += [f"{key} {value}" for key, value in sorted(environment.items())]
    return f'<p class="note recording">{esc(" · ".join(parts))}</p>' + commands_html(info)


def commands_html(info: Mapping[str, Any]) -> str:
    """What each side ran and where (attempt.json's commands), when the recorder kept it."""
    rows = [
        (side, info.get(f"{side}_command"), info.get(f"{side}_cwd"))
        for side in ("baseline", "candidate")
    ]
    if not any(command for _, command, _ in rows):
        return ""
    cells = "".join(
        f"<tr><td>{esc(side)}</td><td><code>{esc(command or '—')}</code></td>"
        f"<td><code>{esc(cwd or '—')}</code></td></tr>"
        for side, command, cwd in rows
    )
    return (
        '<table class="commands"><thead><tr><th>side</th><th>command</th><th>working '
        f"directory</th></tr></thead><tbody>{cells}</tbody></table>"
    )


def _unverifiable_html(rows: pl.DataFrame) -> str:
    """The quantities without an interval, one line per reason and pair count: a round with too
    few pairs makes every quantity unverifiable for the same reason, which is said once (it was
    repeated on each of a dozen lines), with the quantities and their estimates after it."""
    part = rows.filter(pl.col("status") == "unverifiable")
    if part.is_empty():
        return '<p class="note">none: every quantity has an interval.</p>'
    groups = part.with_columns(pl.col("n_pairs").fill_null(0)).group_by(
        "reason", "n_pairs", maintain_order=True
    )
    items = "".join(
        _unverifiable_group(reason, n_pairs, group) for (reason, n_pairs), group in groups
    )
    return f'<ul class="plain">{items}</ul>'


def _unverifiable_group(reason: str | None, n_pairs: int, group: pl.DataFrame) -> str:
    def named(r: Mapping[str, Any]) -> str:
        estimate = r["estimate"]
        return f"<b>{esc(r['label'])}</b>" + (
            f" <span class='null'>{html_number(estimate)}</span>" if estimate is not None else ""
        )

    quantities = ", ".join(named(r) for r in group.iter_rows(named=True))
    if group.height == 1:
        row = group.row(0, named=True)
        shown = f"<b>{esc(row['label'])}</b>"
        estimate = (
            f", estimate {html_number(row['estimate'])}" if row["estimate"] is not None else ""
        )
        return (
            f"<li>{shown} — {reason_html(reason)} "
            f"<span class='null'>(n = {n_pairs} pairs{estimate})</span></li>"
        )
    return (
        f"<li>{group.height} quantities — {reason_html(reason)} "
        f"<span class='null'>(n = {n_pairs} pairs; each with its estimate)</span>: "
        f"{quantities}</li>"
    )


def _legend_html() -> str:
    swatches = "".join(
        f'<span><span class="swatch" style="background:{c}"></span>{esc(o)}</span>'
        for o, c in OUTCOME_COLOURS.items()
    )
    return f'<div class="legend">expectation outcomes: {swatches}</div>'


def fraction_html(row: Mapping[str, Any]) -> str:
    """The explained fraction beside the explanation badge: value [low, high], or why none."""
    if row.get("explained_fraction") is not None:
        return esc(
            f"explains {html_number(row['explained_fraction'])} of the saving "
            f"[{html_number(row['explained_fraction_low'])}, "
            f"{html_number(row['explained_fraction_high'])}]"
        )
    reason = row.get("explained_fraction_reason")
    return f"explained fraction: {reason_html(reason)}" if reason else ""


def order_html(row: Mapping[str, Any]) -> str:
    """The order effect: a red badge when it is measurable, else a quiet note (or nothing)."""
    if row.get("order_effect") is None:
        reason = row.get("order_effect_reason")
        return f" · order effect: {reason_html(reason)}" if reason else ""
    text = (
        f"order effect {html_number(row['order_effect'])} [{html_number(row['order_effect_low'])}, "
        f"{html_number(row['order_effect_high'])}]"
    )
    if row.get("order_bias"):
        return " " + badge(f"ORDER BIAS · {text}", "#cf222e")
    return f" · {esc(text)}"


def environment_html(info: Mapping[str, Any]) -> str:
    """Where the attempt ran (attempt.json's environment) when a harness other than `round`
    recorded it (`recording_html` shows it for attempts `round` recorded)."""
    text = info.get("environment")
    if not text or info.get("recorder"):
        return ""
    try:
        fields = json.loads(text)
    except ValueError:
        return f'<p class="note">environment: {esc(text)}</p>'
    items = " · ".join(f"{esc(k)} <b>{esc(v)}</b>" for k, v in sorted(fields.items()))
    return f'<p class="note">environment: {items}</p>'


def medians_html(data: CampaignData, aid: str) -> str:
    """The absolute values behind the ratios: each side's median metric over its ok runs, in the
    metric's unit (its name)."""
    found = {
        side: (median, n)
        for _, side, median, n in data.medians.filter(pl.col("attempt_id") == aid).iter_rows()
    }
    if not found:
        return ""
    sides = " · ".join(
        f"{side} <b>{fmt_number(found[side][0], '.6g', HTML)}</b> "
        f"<span class='null'>({found[side][1]} ok runs)</span>"
        if side in found
        else f"{side} <span class='null'>no ok run</span>"
        for side in ("baseline", "candidate")
    )
    return (
        f'<p class="note medians">median {esc(data.campaign["metric_name"])} per side: {sides}</p>'
    )


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
        + (f"<span class='meta'>{fraction_html(row)}</span>" if fraction_html(row) else "")
        + (badge("best", "#d4a72c") if row["best"] else "")
        + what_if_badge
        + f"<span class='meta'>candidate <b>{esc(row['candidate'])}</b> vs baseline "
        f"<b>{esc(info.get('baseline'))}</b> · status {esc(row['status'])}"
        f"{_times_html(info)}</span></div>"
        f'<p class="note">{esc(counts)} · verdict reason: {reason_html(row["reason"])} · '
        f"median {fmt_pct(row['improvement_pct'])} · paired "
        f"{html_number(row['paired_estimate'])} [{html_number(row['paired_low'])}, "
        f"{html_number(row['paired_high'])}]{order_html(row)}</p>" + environment_html(info)
    )


def _times_html(info: Mapping[str, Any]) -> str:
    """When the round was declared and started (attempt.json, UTC): the report showed only the
    campaign's creation, so rounds could not be placed in time."""
    moments = [(k, info.get(f"{k}_at")) for k in ("declared", "started")]
    return "".join(f" · {k} {timestamp_html(m)}" for k, m in moments if m is not None)


def _expectations_html(outcomes: pl.DataFrame) -> str:
    if outcomes.is_empty():
        return '<p class="note">no expectations declared.</p>'
    # four columns that fit beside the plot: what was expected, its outcome, why, and the
    # comparison it was judged on with the direction measured (forest-plot names: "/ ref")
    evidence = pl.col("evidence").replace({"region_normalized": "region / ref"})
    shown = outcomes.with_columns(
        pl.format("{} {}: {}", "target", "name", "expect").alias("expectation"),
        pl.when(pl.col("direction").is_null())
        .then(evidence)
        .otherwise(pl.format("{}: {}", evidence, "direction"))
        .alias("evidence"),
    )
    return html_table(
        shown,
        ("expectation", "outcome", "reason", "evidence"),
        headers={"evidence": "evidence: direction"},
        fit=True,
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
            forest_height(rows.height),
            f"forest plot of the comparisons of attempt {aid}",
        )
        if rows.height
        else '<p class="note">No comparison: the attempt has no paired runs.</p>'
    )
    ratios = data.pair_ratios.filter(pl.col("attempt_id") == aid)
    strip = (
        figure_block(
            strip_figure(ratios, estimate=row["paired_estimate"], gate=gate),
            f"plot-pairs-{aid}",
            STRIP_HEIGHT,
            f"metric ratio of every pair of attempt {aid}",
        )
        if ratios.height
        else ""
    )
    return (
        f'<article id="attempt-{esc(aid)}">'
        + _attempt_head(row, info, what_if)
        + medians_html(data, aid)
        + _hypothesis_html(info.get("hypothesis"))
        + recording_html(info)
        + members_html(data, aid)
        + f'<div class="split"><div class="plot">{plot}{strip}</div>'
        + '<div class="side"><h4>Expectations</h4>'
        + _legend_html()
        + _expectations_html(outcomes)
        + "<h4>Unverifiable quantities</h4>"
        + _unverifiable_html(rows)
        + "</div></div></article>"
    )


PLOTTED_MEMBERS = 100
"""The most members an attempt's forest plot draws (28 px each): the first in the table's order,
so the failing ones; a 5,000-benchmark suite's plot would be 140,000 px tall. The table below it
lists every member."""
MEMBER_TABLE = (
    ("member", "text"),
    ("pairs", "num"),
    ("ratio [low, high]", "num"),
    ("verdict", "num"),
    ("reason", "text"),
)
"""The columns of an attempt's table of benchmarks and how each sorts (its cells' ``data-v``)."""


def members_html(data: CampaignData, aid: str) -> str:
    """The attempt's benchmarks (a campaign that decides every benchmark): how many of each
    verdict, the forest plot of their simultaneous intervals with the margin band, and the
    table of every member, the failing ones first (sortable by any column in the page)."""
    members = data.benchmarks.filter(pl.col("attempt_id") == aid)
    if members.is_empty():
        return ""
    rows = member_rows(members).sort(MEMBER_RANK, maintain_order=True)
    gate = 1.0 + float(data.campaign["min_improvement_pct"]) / 100.0
    margin = 1.0 + float(data.campaign.get("margin_pct") or 1.0) / 100.0
    counts = rows["verdict"].value_counts(sort=True, name="n")
    summary = " · ".join(f"{esc(v)} {n}" for v, n in counts.iter_rows())
    size = rows["family_size"].to_list()[0]
    plotted = rows.head(PLOTTED_MEMBERS)
    cut = (
        f" The plot shows the first {plotted.height} of the {rows.height} members in the "
        "table's order (the failing ones first); the table lists them all."
        if plotted.height < rows.height
        else ""
    )
    return (
        f"<h4>Benchmarks: {size} decided together</h4>"
        f'<p class="note">{summary}. Each interval is simultaneous over the {size} members '
        "(contract §15): regressed when all of it lies left of the band, unchanged when all of "
        f"it lies inside, improved when all of it clears the gate.{cut}</p>"
        + figure_block(
            member_forest_figure(plotted, gate=gate, margin=margin),
            f"plot-benchmarks-{aid}",
            forest_height(plotted.height),
            f"simultaneous intervals of the benchmarks of attempt {aid}",
        )
        + member_table_html(rows, aid)
    )


def member_table_html(rows: pl.DataFrame, aid: str) -> str:
    """Every member as a row (rows in MEMBER_RANK's order: the metric, regressed, improved,
    inconclusive for want of data, inconclusive, unchanged; by change within each). Each cell
    carries its sort key in ``data-v``; the page's script sorts on a click of a header and
    returns to this order on a click of "verdict"."""
    head = "".join(
        f'<th data-type="{kind}" aria-sort="none"><button type="button">{esc(name)}</button></th>'
        for name, kind in MEMBER_TABLE
    )
    ranks = rows.select(MEMBER_RANK.alias("rank"))["rank"].to_list()
    body = "".join(
        _member_row(row, rank) for row, rank in zip(rows.iter_rows(named=True), ranks, strict=True)
    )
    return (
        f'<p class="note">Every benchmark of {esc(aid)}, the failing ones first (regressed, '
        "then inconclusive for want of data); click a column's header to sort by it.</p>"
        f'<div class="tablewrap members"><table class="fit sortable" id="benchmarks-{esc(aid)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def sort_number(value: float | None) -> str:
    """A number as the page's script reads it (``Number``): none is empty (sorted last)."""
    if value is None or math.isnan(value):
        return ""
    return repr(value) if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")


def _member_row(row: Mapping[str, Any], rank: int) -> str:
    """One member: its label, pairs, ratio with its simultaneous interval, verdict, reason."""
    verdict, reason = row["verdict"], row["reason"]
    fails = "regressed" if verdict == "regressed" else "nodata" if reason else ""
    estimate = row["estimate"]
    key = sort_number(estimate)
    ratio = paired_text(estimate, row["low"], row["high"]) or "—"
    name = esc(printable(row["label"]))  # one line, as the terminal shows it: "\n" as \n
    return (
        f'<tr class="{fails}">'
        f'<td class="member mono" data-v="{name}">{name}</td>'
        f'<td class="num" data-v="{row["n_pairs"]}">{row["n_pairs"]}</td>'
        f'<td class="nowrap num" data-v="{key}">{esc(ratio)}</td>'
        f'<td data-v="{rank}">{badge(verdict, MEMBER_COLOURS.get(verdict))}</td>'
        f'<td data-v="{esc(reason or "")}">{reason_html(reason)}</td></tr>'
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


def footer_html(metric_better: str | None = None, interval: str | None = None) -> str:
    """The page's fine print; on a campaign page the metric's ratio is named by its direction and
    the intervals by the campaign's frozen method (``interval``)."""
    metric = (
        f"the metric ({esc(metric_better)} is better) "
        f"{ratio_definition('metric', metric_better == 'higher')}"
        if metric_better
        else "the metric baseline / candidate when lower is better, candidate / baseline when "
        "higher is better"
    )
    return (
        f"<footer>Each ratio is taken so that &gt; 1 means the candidate is better or smaller: "
        f"{metric}; the share speedup the candidate's reference share / the baseline's; "
        f"regions and counters baseline / candidate. {interval_words(interval)}; no interval "
        "under min_pairs pairs. Normalization cancels only same-proportion change within a step; "
        "counters can "
        "move with cache residency or shared load. "
        f"Generated by explain-pipeline {esc(__version__)}.</footer>"
    )


def plotly_element(with_plots: bool, plotly_src: str | None) -> str:
    """plotly.js inlined (the page stands alone), or loaded from a file beside the page."""
    if plotly_src is not None:
        return f'<script id="plotlyjs" src="{esc(plotly_src)}"></script>'
    return f'<script id="plotlyjs">{get_plotlyjs() if with_plots else ""}</script>'


def page(title: str, body: str, *, with_plots: bool, plotly_src: str | None = None) -> str:
    template = Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(
        title=esc(title),
        version=esc(__version__),
        body=body,
        plotlyjs=plotly_element(with_plots, plotly_src if with_plots else None),
        config=script_json(PLOT_CONFIG),
    )


def render_campaign(
    data: CampaignData, *, index_href: str | None = None, plotly_src: str | None = None
) -> str:
    """The whole HTML page of one campaign (``plotly_src``: load plotly.js from that file)."""
    if data.blocked:
        sections = integrity_html(data)
    else:
        sections = (
            timeline_html(data) + verdicts_html(data) + accounting_html(data) + what_if_html(data)
        )
    sections += rejected_html(data)
    body = (
        header_html(data, index_href)
        + nav_html(data)
        + "<main>"
        + summary_html(data)
        + sections
        + attempts_html(data)
        + "</main>"
        + footer_html(data.campaign["metric_better"], data.campaign.get("interval") or DEFAULT)
    )
    title = f"{data.campaign_id} · explain-pipeline report"
    return page(title, body, with_plots=not data.blocked, plotly_src=plotly_src)


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
