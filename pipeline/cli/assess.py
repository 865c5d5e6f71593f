"""`explain-pipeline assess`: verdicts and explanations of one campaign or all of them."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipeline.cli.ci import junit_option
from pipeline.cli.common import command, engine_options, format_option, store_option
from pipeline.contracts import BOOKKEEPING_COLUMNS
from pipeline.engines import open_engine
from pipeline.errors import ExitCode, UsageError
from pipeline.formatting import SUMMARY, TEXT, fmt_number, fmt_paired

if TYPE_CHECKING:  # Polars and the library load when the command runs, not for --help
    import polars as pl

    from pipeline.assess.campaigns import AssessResult

_COMPARISON_FIELDS = [
    "quantity",
    "name",
    "n_pairs",
    "estimate",
    "low",
    "high",
    "direction",
    "status",
    "reason",
    "method",
]
_OUTCOME_FIELDS = [
    "position",
    "target",
    "name",
    "expect",
    "evidence",
    "direction",
    "outcome",
    "reason",
]
SUMMARY_HEADERS = tuple(header for _, header in SUMMARY)


@command("assess")
@click.argument("campaign_id", required=False)
@click.option("--all", "all_campaigns", is_flag=True, help="Assess every campaign in the store.")
@store_option
@format_option("table", "json", "csv", "markdown")
@junit_option
@click.option(
    "--what-if",
    "what_if",
    multiple=True,
    metavar="KEY=VALUE",
    help="Verdicts under another policy (decision, require_explanation, min_improvement_pct; "
    "confidence, resamples, seed (the bootstrap seed), min_pairs, interval recompute the "
    "intervals). Never stored. Repeatable.",
)
@click.option(
    "--gate",
    is_flag=True,
    help="CI gate: exit 5 unless the final verdict of the gated attempt (--attempt, default the "
    "latest round) is PASS. Needs a CAMPAIGN_ID; the frozen policy decides (no --what-if).",
)
@click.option(
    "--attempt",
    "gate_attempt",
    metavar="ID",
    default=None,
    help="With --gate: the attempt to gate on (default: the campaign's latest round).",
)
@click.option(
    "--digests",
    is_flag=True,
    help="json, csv: also the bookkeeping columns inputs_sha256 and campaign_sha256.",
)
@engine_options
def assess_command(
    campaign_id: str | None,
    all_campaigns: bool,
    store_path: str | None,
    fmt: str,
    what_if: tuple[str, ...],
    engine: str,
    ray_address: str | None,
    gate: bool,
    gate_attempt: str | None,
    digests: bool,
    junit: Path | None,
) -> int:
    """Paired intervals, mechanical explanations and verdicts (docs/contract.md §4-§6).

    Prints one row per attempt: round, candidate, pairs, median improvement %, paired
    estimate [low, high], share speedup, explanation, verdict (reason), eligible and the
    campaign's best attempt (*). Results are stored in the tables comparisons, outcomes and
    assessments; attempts whose inputs and policy are unchanged are not recomputed. A campaign
    with an integrity error is blocked: its errors are listed, no verdict is issued, exit 3.

    \b
    Example:
      explain-pipeline assess llama-decode-2026-11
      explain-pipeline assess --all --format json
      explain-pipeline assess llama-decode-2026-11 --what-if decision=paired \\
          --what-if require_explanation=true
      explain-pipeline assess --all --engine ray --ray-address auto
      explain-pipeline assess llama-decode-2026-11 --gate   # in CI: exit 5 unless PASS
      explain-pipeline assess llama-decode-2026-11 --format markdown --junit verdicts.xml
    """
    if bool(campaign_id) == all_campaigns:
        raise UsageError("give one CAMPAIGN_ID or --all")
    if gate and (all_campaigns or what_if):
        raise UsageError("--gate needs one CAMPAIGN_ID and the frozen policy (no --all, --what-if)")
    if gate_attempt is not None and not gate:
        raise UsageError("--attempt is the attempt --gate decides on: give --gate too")
    if junit is not None and what_if:
        raise UsageError("--junit reports the frozen policy's verdicts: drop --what-if")
    from pipeline.allocator import load_polars

    # Freed pages handed back after Polars' half second instead of a second more: batch after
    # batch they added ~1 MiB per 1,000 attempts' columns to the peak (100,000 attempts:
    # peak RSS over 1 GiB); no CPU cost measured.
    load_polars("muzzy_decay_ms:0")
    from pipeline.assess.campaigns import assess, parse_what_if
    from pipeline.store.tables import Store

    overrides = parse_what_if(what_if) or None
    wanted = None if all_campaigns else [campaign_id or ""]
    with open_engine(engine, ray_address) as runner:  # a bad engine option is reported first
        store = Store.open_existing(store_path)
        result = assess(store, wanted, what_if=overrides, engine=runner)
    gated = None
    if gate and not result.blocked.height:  # a bad --attempt is refused before any output
        from pipeline.assess.campaigns import gated_attempt

        gated = gated_attempt(result.assessments, campaign_id or "", gate_attempt)
    for cid, rows in _by_campaign(rejections(result)).items():
        click.echo(f"warning: {cid}: rejected at ingest, not assessed: {_named(rows)}", err=True)
    if fmt == "table":
        click.echo(render_table(result), nl=False)
    else:
        from pipeline.cli.ci import render_markdown

        render = {"json": render_json, "csv": render_csv, "markdown": render_markdown}[fmt]
        click.echo(render(result, digests=digests), nl=False)
    from pipeline.cli.ci import emit_ci, render_markdown

    emit_ci(result, junit=junit, markdown=lambda: render_markdown(result), focus=gate_attempt)
    if result.blocked.height:
        ids = ", ".join(result.blocked["campaign_id"].unique(maintain_order=True))
        click.echo(f"error: blocked by integrity errors: {ids}", err=True)
        return int(result.exit_code)
    if gated is not None:
        return _gate(gated)
    return int(result.exit_code)


def _gate(row: dict[str, Any]) -> int:
    """One line on stderr; exit 0 when the gated attempt's final verdict is PASS, else 5."""
    verdict = row["verdict"] + (f" ({row['reason']})" if row["reason"] else "")
    where = f"gate: attempt {row['attempt_id']} (round {row['round']})"
    if row["verdict"] == "PASS":
        click.echo(f"{where}: PASS", err=True)
        return ExitCode.OK
    click.echo(f"{where}: {verdict}, not PASS", err=True)
    return ExitCode.NOT_PASS


# -- rendering -------------------------------------------------------------------------------------
def _num(value: float | None, spec: str) -> str:
    return fmt_number(value, spec, TEXT)


def summary_cells(row: dict[str, Any]) -> tuple[str, ...]:
    """One attempt's row of the verdict table (SUMMARY_HEADERS), as every text format shows it."""
    paired = (row["paired_estimate"], row["paired_low"], row["paired_high"])
    interval = fmt_paired(*paired) or TEXT.none
    verdict = row["verdict"] + (f" ({row['reason']})" if row["reason"] else "")
    return (
        str(row["round"]),
        row["attempt_id"],
        row["candidate"],
        str(row["n_pairs"]),
        _num(row["improvement_pct"], "+.2f"),
        interval,
        _num(row["share_speedup"], ".4f"),
        row["explanation"],
        verdict,
        "yes" if row["eligible"] else "no",
        "*" if row["best"] else "",
    )


def _grid(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() + "\n"
        for r in rows
    )


def _order_warnings(rows: pl.DataFrame) -> str:
    """One line per attempt whose run order measurably changed the metric ratio."""
    import polars as pl

    if not rows["order_bias"].fill_null(False).any():
        return ""
    flagged = rows.filter(pl.col("order_bias").fill_null(False))
    return "".join(
        f"ORDER BIAS {r['attempt_id']}: pairs run baseline first differ from the others by "
        f"x{_num(r['order_effect'], '.4f')} [{_num(r['order_effect_low'], '.4f')}, "
        f"{_num(r['order_effect_high'], '.4f')}]; the side that runs second is measurably "
        "slower or faster (a balanced order keeps the paired estimate unbiased)\n"
        for r in flagged.iter_rows(named=True)
    )


def _integrity_lines(errors: pl.DataFrame) -> str:
    out = []
    for e in errors.iter_rows(named=True):
        where = f"attempt {e['attempt_id']}" if e["attempt_id"] else "campaign"
        out.append(f"  {where}: [{e['code']}] {e['message']}\n")
        out.append(f"    expected: {e['expected'] or '-'}\n    actual:   {e['actual'] or '-'}\n")
    return "".join(out)


def rejections(result: AssessResult) -> pl.DataFrame:
    """Table ``rejections`` of the result's campaigns (empty when assess read none)."""
    from pipeline.contracts import table

    return result.rejected if result.rejected is not None else table("rejections").empty()


def _named(rows: pl.DataFrame) -> str:
    """The rejected attempts of one campaign, in ingest's order (campaign.json: all of them)."""
    ids = rows["attempt_id"].unique(maintain_order=True).to_list()
    return ", ".join(x or "campaign.json" for x in ids)


def rejected_lines(rows: pl.DataFrame | None) -> str:
    """What ingest rejected in one campaign (table ``rejections``): the attempts named, then
    each error as ingest printed it (file:line, field, reason [code])."""
    if rows is None or rows.is_empty():
        return ""
    from pipeline.ingest.validate import Issue

    out = [f"REJECTED at ingest, not assessed: {_named(rows)} (fix the files and ingest again)\n"]
    for r in rows.iter_rows(named=True):
        issue = Issue(r["path"], r["line"], r["field"], r["code"], r["message"])
        out.append(f"  {r['attempt_id'] or 'campaign'}: {issue}\n")
    return "".join(out)


def campaign_order(result: AssessResult) -> list[str]:
    """The campaigns of a result, assessed or blocked, in the order every format lists them."""
    ids = result.assessments["campaign_id"].to_list() + result.blocked["campaign_id"].to_list()
    return sorted(set(ids) | set(result.campaign_ids))


def _changed(result: AssessResult, campaign_id: str | None = None) -> tuple[int, int]:
    import polars as pl

    changed, total = result.changed_verdicts(), result.assessments
    if campaign_id is not None:
        changed = changed.filter(pl.col("campaign_id") == campaign_id)
        total = total.filter(pl.col("campaign_id") == campaign_id)
    return changed.height, total.height


def _what_if_label(result: AssessResult) -> str:
    pairs = " ".join(f"{k}={v}" for k, v in (result.what_if or {}).items())
    return f"WHAT-IF (not stored): {pairs}"


def _by_campaign(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The rows of each campaign, in their order."""
    parts = frame.partition_by("campaign_id", as_dict=True, maintain_order=True)
    return {str(key[0]): part for key, part in parts.items()}


def render_table(result: AssessResult) -> str:
    out = io.StringIO()
    if result.what_if:
        out.write(_what_if_label(result) + "\n\n")
    # one split per table, not a filter per campaign (thousands of campaigns with --all)
    blocked = _by_campaign(result.blocked)
    assessed = _by_campaign(result.assessments)
    rejected = _by_campaign(rejections(result))
    for cid in campaign_order(result):
        errors = blocked.get(cid, result.blocked.clear())
        if errors.height:
            out.write(f"campaign {cid}: BLOCKED by {errors.height} integrity error(s); ")
            out.write("no verdicts issued\n" + _integrity_lines(errors) + "\n")
            continue
        rows = assessed.get(cid, result.assessments.clear())
        first = rows.row(0, named=True) if rows.height else {}
        policy = (
            f"decision={first.get('decision')} require_explanation="
            f"{str(first.get('require_explanation')).lower()}"
            if first
            else "no attempts"
        )
        out.write(f"campaign {cid}: {policy}\n")
        if rows.height:
            cells = (summary_cells(r) for r in rows.iter_rows(named=True))
            out.write(_grid([SUMMARY_HEADERS, *cells]))
            out.write(_order_warnings(rows))
        out.write(rejected_lines(rejected.get(cid)))
        if result.what_if:
            changed, total = _changed(result, cid)
            out.write(f"verdicts that differ from the frozen policy: {changed} of {total}\n")
        out.write("\n")
    if result.what_if:
        changed, total = _changed(result)
        out.write(f"what-if changes {changed} of {total} verdicts\n")
    if not campaign_order(result):
        out.write("no campaigns to assess\n")
    return out.getvalue()


def _jsonable(value: Any) -> Any:
    """Infinite ratios become the strings "inf"/"-inf" (JSON has no infinity); NaN becomes null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _readable(frame: pl.DataFrame, digests: bool) -> pl.DataFrame:
    """Without ``digests``, the bookkeeping columns are left out."""
    return frame if digests else frame.drop(BOOKKEEPING_COLUMNS, strict=False)


def _nested(result: AssessResult, digests: bool) -> pl.DataFrame:
    import polars as pl

    from pipeline.assess.quantities import ATTEMPT

    comps = result.comparisons.group_by(ATTEMPT).agg(
        pl.struct(_COMPARISON_FIELDS).alias("comparisons")
    )
    outs = result.outcomes.group_by(ATTEMPT).agg(pl.struct(_OUTCOME_FIELDS).alias("outcomes"))
    rows = _readable(result.assessments, digests)
    if result.frozen is not None:  # what-if: the frozen policy's verdict beside the what-if one
        frozen = result.frozen.select(
            *ATTEMPT,
            pl.col("verdict").alias("frozen_verdict"),
            pl.col("reason").alias("frozen_reason"),
        )
        rows = rows.join(frozen, on=ATTEMPT, how="left")
    return (
        rows.join(comps, on=ATTEMPT, how="left")
        .join(outs, on=ATTEMPT, how="left")
        .with_columns(
            pl.col("comparisons").fill_null([]),
            pl.col("outcomes").fill_null([]),
        )
    )


def render_json(result: AssessResult, *, digests: bool = False) -> str:

    nested = _nested(result, digests)
    blocked, attempts = _by_campaign(result.blocked), _by_campaign(nested)
    rejected = _by_campaign(rejections(result))
    campaigns = []
    for cid in campaign_order(result):
        errors = blocked.get(cid, result.blocked.clear())
        entry: dict[str, Any] = {
            "campaign_id": cid,
            "status": "blocked" if errors.height else "assessed",
        }
        entry["integrity_errors"] = errors.drop("campaign_id").to_dicts()
        refused = rejected.get(cid)
        entry["rejected_at_ingest"] = (
            [] if refused is None else refused.drop("campaign_id", "position").to_dicts()
        )
        entry["attempts"] = attempts.get(cid, nested.clear()).drop("campaign_id").to_dicts()
        if result.what_if:
            entry["verdicts_changed"] = _changed(result, cid)[0]
        campaigns.append(entry)
    document: dict[str, Any] = {"what_if": result.what_if, "campaigns": campaigns}
    if result.what_if:
        document["verdicts_changed"] = _changed(result)[0]
    return json.dumps(_jsonable(document), indent=2, default=str) + "\n"


def render_csv(result: AssessResult, *, digests: bool = False) -> str:
    """One row per attempt (assessments columns); integrity errors go to stderr."""
    import polars as pl

    if result.blocked.height:
        click.echo(_integrity_lines(result.blocked), err=True, nl=False)
    for cid, rows in _by_campaign(rejections(result)).items():
        click.echo(f"campaign {cid}: " + rejected_lines(rows), err=True, nl=False)
    frame = _readable(result.assessments, digests)
    if result.what_if:
        label = " ".join(f"{k}={v}" for k, v in result.what_if.items())
        frame = frame.with_columns(pl.lit(label).alias("what_if"))
    return frame.write_csv()


COMMANDS: list[click.Command] = [assess_command]
