"""CLI command `report`: the self-contained HTML report of a campaign (or of every campaign)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.common import (
    campaigns_chosen,
    command,
    output_option,
    what_if_named,
    what_if_option,
)
from pipeline.contract.policy import PolicyValue
from pipeline.errors import ExitCode, UsageError
from pipeline.output.sinks import is_stdout, write_output


@command("report")
@campaigns_chosen("Report every campaign, with an index.")
@output_option(
    "With a CAMPAIGN_ID: the page's file (default report-CAMPAIGN_ID.html). With --all: the "
    "folder for index.html and one campaign-ID.html per campaign (default ./report); a name "
    "ending in .html is refused there. With a CAMPAIGN_ID,",
    dir_okay=True,
    metavar="PATH",
)
@click.option(
    "--shared-plotly",
    is_flag=True,
    help="With --all: write plotly.js once into the folder, loaded by every page, instead of "
    "inlining it (about 4.8 MB) in each; the pages then work only beside that file.",
)
@what_if_option(
    "Also show verdicts under another policy (decision=paired, require_explanation=true, "
    "...); labelled as what-if, never stored."
)
def report(
    campaign_id: str | None,
    all_campaigns: bool,
    store_path: str | None,
    output: str | None,
    shared_plotly: bool,
    what_if: dict[str, PolicyValue],
) -> int:
    """Write a self-contained HTML report (works offline) and print its path.

    Shows the campaign's policy, a timeline of the paired interval against the gate, a forest
    plot of every comparison per attempt with its expectation outcomes, each side's median, the
    verdict table, and for a suite each attempt's sortable table of benchmarks (failing first).
    Run `assess` first: the report reads the stored verdicts.

    \b
    Example:
      explain-pipeline report llama-decode-2026-11 -o report.html
      explain-pipeline report llama-decode-2026-11 --what-if decision=paired
      explain-pipeline report --all -o report/
      explain-pipeline report --all -o report/ --shared-plotly   # many campaigns

    -o is the page's file with a CAMPAIGN_ID, the folder with --all (there a name ending in
    .html is refused: the folder form is suggested).
    """
    from pipeline.report import (  # plotly: only here
        default_output,
        load_campaign_data,
        render_campaign,
        write_all,
        write_report,
    )

    if all_campaigns == (campaign_id is not None):
        raise UsageError("give either a CAMPAIGN_ID or --all")
    if all_campaigns and is_stdout(output):
        raise UsageError("-o -: only one campaign's page goes to stdout; give a folder with --all")
    if shared_plotly and not all_campaigns:
        raise UsageError("--shared-plotly needs --all (a single page carries plotly.js itself)")
    if output and not is_stdout(output):
        check_output(output, all_campaigns)
    from pipeline.assessment.campaigns import overrides
    from pipeline.store.tables import Store

    store = Store.open_existing(store_path)
    with what_if_named():  # a bad key or value is a usage error, also for a blocked campaign
        changes = overrides(what_if) or None
    out = Path(output) if output else default_output(campaign_id)
    with store.shared_lock():  # one committed state: a running write finishes first
        if campaign_id is not None and is_stdout(output):
            page = render_campaign(load_campaign_data(store, campaign_id, what_if=changes))
            write_output(output, page)
            return ExitCode.OK
        if campaign_id is not None:
            click.echo(write_report(store, campaign_id, out, what_if=changes))
            return ExitCode.OK
        result = write_all(store, out, what_if=changes, shared_plotly=shared_plotly)
    for cid in result.not_assessed:
        click.echo(
            f"warning: {cid}: not assessed, no page (run `explain-pipeline assess {cid}`)", err=True
        )
    click.echo(result.index)
    return ExitCode.OK


def check_output(output: str, all_campaigns: bool) -> None:
    """-o is a file with a CAMPAIGN_ID and a folder with --all; a path that says the other (a
    name ending in .html for --all, an existing folder or a trailing slash for one campaign)
    is refused before anything is written, with the form that works."""
    path = Path(output)
    if all_campaigns:
        if path.suffix.lower() in (".html", ".htm"):
            raise UsageError(
                f"-o {output}: with --all, -o is a folder (index.html and one page per campaign "
                f"go into it); give a folder, e.g. -o {path.with_suffix('')}/, or one campaign: "
                f"report CAMPAIGN_ID -o {output}"
            )
        if path.exists() and not path.is_dir():
            raise UsageError(f"-o {output}: is a file; with --all, -o is a folder")
    elif output.endswith(("/", "\\")) or path.is_dir():
        raise UsageError(
            f"-o {output}: is a folder; with a CAMPAIGN_ID, -o is the page's file "
            f"(e.g. -o {path / 'report.html'}); a folder only with --all"
        )


COMMANDS: list[click.Command] = [report]
