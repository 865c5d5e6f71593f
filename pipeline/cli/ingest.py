"""`explain-pipeline ingest`: stored attempts -> the Parquet store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline.cli.common import command, engine_options, store_option
from pipeline.engines import open_engine
from pipeline.errors import ExitCode

if TYPE_CHECKING:
    from pipeline.ingestion.attempts import IngestReport


@command("ingest")
@click.argument("source", type=click.Path(path_type=Path))
@store_option
@engine_options
@click.option(
    "--precise",
    is_flag=True,
    default=False,
    help="Check every file with the per-line validator (same tables, slower).",
)
def ingest_command(
    source: Path, store_path: str | None, engine: str, ray_address: str | None, precise: bool
) -> int:
    """Validate the stored attempts under SOURCE and write them to the store.

    SOURCE is an attempts folder (one subfolder per campaign) or one campaign folder.
    A bad attempt is rejected whole, with every error as `file:line: field "x": reason
    [code]`; the others are still ingested. Unchanged attempts are not rewritten.

    \b
    Example:
      explain-pipeline ingest data/attempts --store .explain-store
      explain-pipeline ingest data/attempts/llama-decode-2026-11
      explain-pipeline ingest /shared/attempts --store /shared/store --engine ray
    """
    from pipeline.ingestion.attempts import (
        ingest,  # the libraries load when a command runs, not for --help
    )
    from pipeline.store.tables import Store

    store = Store.open(store_path)
    with open_engine(engine, ray_address) as runner:
        report = ingest(
            source,
            store,
            progress=sys.stderr.isatty(),
            engine=runner,
            mode="precise" if precise else "fast",
        )
    from pipeline.output.sinks import echo

    echo(format_summary(report) + "\n")
    for issue in report.issues:
        echo(f"{issue}\n", err=True)
    for warning in report.warnings:
        echo(f"warning: {warning}\n", err=True)
    return int(report.exit_code)


def format_summary(report: IngestReport) -> str:
    """A plain-text table: one line per campaign, then the totals."""
    import polars as pl

    from pipeline.contract.inert import inert
    from pipeline.ingestion.attempts import OUTCOMES

    summary = report.summary()
    totals = summary.select(pl.col(OUTCOMES).sum())
    header = ("campaign", "campaign.json", *OUTCOMES)
    rows = [tuple(inert(str(v)) for v in row) for row in summary.iter_rows()]
    rows.append(("total", f"{summary.height} campaigns", *(str(v) for v in totals.row(0))))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in (header, *rows)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, lines[1])
    status = "some input rejected" if report.exit_code == ExitCode.REJECTED else "ok"
    n, w = len(report.issues), len(report.warnings)
    warned = f", {w} warning{'' if w == 1 else 's'}" if w else ""
    return "\n".join([*lines, f"{n} error{'' if n == 1 else 's'}{warned} ({status})"])


COMMANDS: list[click.Command] = [ingest_command]
