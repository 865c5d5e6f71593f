"""CLI command `report`: the self-contained HTML report of a campaign (or of every campaign)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.common import store_option
from pipeline.errors import ExitCode, UsageError


@click.command("report")
@click.argument("campaign_id", required=False)
@click.option("--all", "all_campaigns", is_flag=True, help="Report every campaign, with an index.")
@store_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=True),
    default=None,
    help="File to write (default report-CAMPAIGN_ID.html); with --all, the folder for "
    "index.html and one campaign-ID.html per campaign (default ./report).",
)
@click.option(
    "--what-if",
    "what_if",
    multiple=True,
    metavar="KEY=VALUE",
    help="Also show verdicts under another policy (decision=paired, require_explanation=true, "
    "...); labelled as what-if, never stored.",
)
def report(
    campaign_id: str | None,
    all_campaigns: bool,
    store_path: str | None,
    output: str | None,
    what_if: tuple[str, ...],
) -> int:
    """Write a self-contained HTML report (works offline) and print its path.

    Shows the campaign's policy, a timeline of the paired interval against the gate, a forest
    plot of every comparison per attempt with its expectation outcomes, and the verdict table.
    Run `assess` first: the report reads the stored verdicts.

    \b
    Example:
      explain-pipeline report llama-decode-2026-11 -o report.html
      explain-pipeline report llama-decode-2026-11 --what-if decision=paired
      explain-pipeline report --all -o report/
    """
    from pipeline.report import default_output, write_all, write_report  # plotly: only here

    if all_campaigns == (campaign_id is not None):
        raise UsageError("give either a CAMPAIGN_ID or --all")
    from pipeline.assess import overrides, parse_what_if
    from pipeline.store import Store

    store = Store.open_existing(store_path)
    changes = parse_what_if(what_if) or None
    overrides(changes or {})  # a bad key or value is a usage error, also for a blocked campaign
    out = Path(output) if output else default_output(campaign_id)
    if campaign_id is not None:
        click.echo(write_report(store, campaign_id, out, what_if=changes))
        return ExitCode.OK
    result = write_all(store, out, what_if=changes)
    for cid in result.not_assessed:
        click.echo(
            f"warning: {cid}: not assessed, no page (run `explain-pipeline assess {cid}`)", err=True
        )
    click.echo(result.index)
    return ExitCode.OK


COMMANDS: list[click.Command] = [report]
