"""`explain-pipeline query`: SQL over every table of the store, ad hoc or named."""

from __future__ import annotations

import io
from typing import Any

import click

from pipeline.cli.common import command, format_option, output_option, store_option
from pipeline.errors import ExitCode, UsageError
from pipeline.output.sinks import is_stdout, write_output
from pipeline.store.query import FORMATS, load_named_queries


@command("query")
@click.argument("sql", required=False)
@click.option("--name", "name", metavar="NAME", help="Run the named query NAME (see --list).")
@click.option("--list", "list_", is_flag=True, help="List the named queries and exit.")
@format_option(*FORMATS)
@output_option("Write the result to FILE instead of stdout (required by --format parquet).")
@click.option(
    "--allow-files",
    is_flag=True,
    help="Let SQL read other files and URLs (read_csv, read_parquet, read_ipc, read_json); "
    "refused by default.",
)
@store_option
def query_command(
    sql: str | None,
    name: str | None,
    list_: bool,
    fmt: str,
    output: str | None,
    allow_files: bool,
    store_path: str | None,
) -> int:
    """Run SQL over every table of the store (Polars SQL).

    Tables: campaigns, attempts, samples, breakdown, counters, expectations, integrity,
    comparisons, outcomes, assessments (columns: schemas/tables.json). Named queries live in
    queries/*.sql. SQL that names a file-reading table function (read_csv, read_parquet, ...)
    is refused unless --allow-files is given.

    \b
    Example:
      explain-pipeline query "SELECT campaign_id, count(*) FROM samples GROUP BY 1"
      explain-pipeline query --list
      explain-pipeline query --name runs_per_side --format csv -o runs.csv
      explain-pipeline query --name best_attempts --format json -o -
    """
    if list_:
        click.echo(_listing())
        return ExitCode.OK
    if (sql is None) == (name is None):
        raise UsageError("give either SQL or --name NAME (or --list)")
    if fmt == "parquet" and output is None:
        raise UsageError("--format parquet needs -o FILE (or -o - for stdout: Parquet is binary)")
    text = sql if sql is not None else _named(name or "")
    from pipeline.store.query import open_store, run_sql
    from pipeline.store.tables import resolve_store_path

    frame = run_sql(open_store(resolve_store_path(store_path)), text, allow_files=allow_files)
    if fmt == "parquet":
        buffer = io.BytesIO()
        frame.write_parquet(buffer)
        data: str | bytes = buffer.getvalue()
    else:
        data = _shown(frame, fmt, on_screen=output is None or is_stdout(output))
    written = write_output(output, data)
    if written is not None:
        click.echo(f"wrote {frame.height} rows to {written}", err=True)
    return ExitCode.OK


def _shown(frame: Any, fmt: str, *, on_screen: bool) -> str:
    """The result as text. On stdout (a terminal, a CI log) free text follows the one rule of
    pipeline.contract.inert (names may hold line breaks and workflow commands); a file written
    with -o keeps the data exactly."""
    from pipeline.store.query import render

    if not on_screen:
        return render(frame, fmt)  # type: ignore[arg-type]
    from pipeline.contract.inert import inert_output
    from pipeline.output.inert import inert_frame

    shown = frame if fmt == "json" else inert_frame(frame)
    return inert_output(render(shown, fmt), json=fmt == "json")  # type: ignore[arg-type]


def _named(name: str) -> str:
    queries = load_named_queries()
    if name not in queries:
        known = ", ".join(sorted(queries)) or "none"
        raise UsageError(f'no named query "{name}" (known: {known})')
    return queries[name].sql


def _listing() -> str:
    queries = load_named_queries()
    if not queries:
        return "no named queries"
    width = max(len(n) for n in queries)
    return "\n".join(
        f"{q.name.ljust(width)}  {q.description}"
        for q in sorted(queries.values(), key=lambda q: q.name)
    )


COMMANDS: list[click.Command] = [query_command]
