"""Options and error handling shared by every command."""

from __future__ import annotations

from typing import Any

import click

store_option = click.option(
    "--store",
    "store_path",
    type=click.Path(file_okay=False),
    default=None,
    help="Store folder (default: $EXPLAIN_STORE, else ./.explain-store).",
)


def format_option(*choices: str, default: str = "table") -> Any:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(list(choices)),
        default=default,
        show_default=True,
        help="Output format.",
    )
