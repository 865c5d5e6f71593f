"""The command line: a thin layer that parses options, calls one library function per command and
turns library errors into one-line messages and distinct exit codes."""

from __future__ import annotations

import os
import sys

import click

from pipeline import __version__
from pipeline.cli.common import Group
from pipeline.errors import ExitCode, ExplainError


@click.group(
    cls=Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="explain-pipeline")
def cli() -> None:
    """Decide whether a performance improvement is real and explained.

    \b
    Example:
      explain-pipeline ingest data/attempts
      explain-pipeline assess --all
    """


def _register() -> None:
    from pipeline.cli import assess, imports, ingest, query, record, report, simulate, store

    for module in (ingest, assess, query, simulate, report, imports, record, store):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: never a traceback for an error the user can act on."""
    try:
        result = cli.main(args=argv, prog_name="explain-pipeline", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitCode.USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except ExplainError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(exc.exit_code))
    except BrokenPipeError:
        sys.exit(ExitCode.OK)
    except Exception as exc:  # a bug: say so in one line unless asked for the traceback
        if os.environ.get("EXPLAIN_DEBUG"):
            raise
        click.echo(
            f"internal error: {type(exc).__name__}: {exc} (set EXPLAIN_DEBUG=1 for a traceback)",
            err=True,
        )
        sys.exit(ExitCode.INTERNAL)
    sys.exit(int(result) if isinstance(result, int) else ExitCode.OK)
