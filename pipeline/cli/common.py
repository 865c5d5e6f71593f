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


def engine_options(command: Any) -> Any:
    """--engine and --ray-address: where the per-campaign work runs (docs/scale-out.md)."""
    command = click.option(
        "--ray-address",
        "ray_address",
        metavar="ADDR",
        default=None,
        help="With --engine ray: the cluster to join (auto: the one started on this node with "
        "`ray start`; or HOST:6379); "
        "default: start a local cluster on this machine's cores.",
    )(command)
    return click.option(
        "--engine",
        type=click.Choice(["local", "ray"]),
        default="local",
        show_default=True,
        help="Run the per-campaign work in this process, or as Ray tasks (needs the ray "
        "extra: pip install 'explain-pipeline[ray]'); the results are the same.",
    )(command)
