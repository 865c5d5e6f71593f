"""The command line: a thin layer that parses options, calls one library function per command and
turns library errors into one-line messages and distinct exit codes."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import os
import re
import sys
from typing import NoReturn

import click

from pipeline.cli.common import Group
from pipeline.contract.inert import inert_lines
from pipeline.errors import ExitCode, ExplainError
from pipeline.version import __version__

COMMAND_MODULES: dict[str, tuple[str, str]] = {
    "ab": (
        "record",
        "Is B better than A? One round of both commands in a throw-away campaign, "
        "then the verdict, the paired interval, the order effect and the explanation.",
    ),
    "assess": (
        "assess",
        "Paired intervals, mechanical explanations and verdicts (docs/contract.md §4-§6).",
    ),
    "calibrate": (
        "simulate",
        "Measure the decision rules and interval methods on simulated campaigns.",
    ),
    "campaign": (
        "record",
        "Start a campaign (its policy frozen from then on) or finish it (ingest + assess).",
    ),
    "import": (
        "imports",
        "Turn the profiler files of one run into one measurement line (docs/contract.md §2.4).",
    ),
    "ingest": ("ingest", "Validate the stored attempts under SOURCE and write them to the store."),
    "plan": (
        "plan",
        "Price a comparison before running it: the pairs needed to detect given gains.",
    ),
    "query": ("query", "Run SQL over every table of the store (Polars SQL)."),
    "report": ("report", "Write a self-contained HTML report (works offline) and print its path."),
    "round": (
        "record",
        "Record one round of the campaign in FOLDER: both commands run once per "
        "repetition, in a balanced, shuffled order, each run a fresh process.",
    ),
    "simulate": (
        "simulate",
        "Write synthetic A/A and known-gain campaigns (docs/contract.md §7) as stored attempts.",
    ),
    "store": (
        "store",
        "Check the store folder and finish an interrupted write (see docs/store.md).",
    ),
}
"""Command name -> (module of pipeline.cli that defines it, the first sentence of its help).

A command's module is imported only when that command runs or shows its help: importing all of
them costs more than Python's own start-up, and `assess` should not pay for `import` or
`simulate`. The top-level --help lists the commands from these summaries; a test checks each
equals the command's own help, so they cannot drift."""


def summary_of(name: str, limit: int) -> str:
    """The listing's line for command ``name``, shortened as click shortens a command's help."""
    return click.Command(name, help=COMMAND_MODULES[name][1]).get_short_help_str(limit)


class LazyGroup(Group):
    """The top-level group: commands are loaded from COMMAND_MODULES on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMAND_MODULES))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            module = importlib.import_module(f"pipeline.cli.{COMMAND_MODULES[cmd_name][0]}")
            for command in module.COMMANDS:
                self.add_command(command)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the summaries, without importing any command's module."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(name, summary_of(name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
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


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: never a traceback for an error the user can act on."""
    try:
        result = cli.main(args=argv, prog_name="explain-pipeline", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        show_click_error(exc)
        sys.exit(ExitCode.USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except ExplainError as exc:
        click.echo(inert_lines(f"error: {exc}"), err=True)
        sys.exit(int(exc.exit_code))
    except BrokenPipeError:
        sys.exit(ExitCode.OK)
    except Exception as exc:  # a bug: say so in one line unless asked for the traceback
        if os.environ.get("EXPLAIN_DEBUG"):
            raise
        click.echo(
            inert_lines(
                f"internal error: {type(exc).__name__}: {exc} (set EXPLAIN_DEBUG=1 for a traceback)"
            ),
            err=True,
        )
        sys.exit(ExitCode.INTERNAL)
    sys.exit(int(result) if isinstance(result, int) else ExitCode.OK)


def show_click_error(exc: click.ClickException) -> None:
    """Click's own errors (bad option, missing argument) in the tool's one style: click's usage
    line and hint, then ``error: …`` where click writes ``Error: …``, so every error of the
    command line starts the same way."""
    buffer = io.StringIO()
    exc.show(file=buffer)
    shown = buffer.getvalue()
    click.echo(
        re.sub(r"^Error: ", "error: ", shown, count=1, flags=re.MULTILINE), err=True, nl=False
    )


def run() -> NoReturn:
    """The installed command (and ``python -m pipeline``): :func:`main`, then leave at once.

    Once a command is done, tearing the interpreter down frees every object of Polars, NumPy and
    the command one by one: about 0.1 s, as long as some commands' work. So the output is
    flushed, the exit handlers run (Ray's shutdown, temporary folders, logging), and the process
    ends with ``os._exit``. Nothing is lost that a normal exit would keep: every file the store
    writes is closed (and synced) before its command returns. ``main`` itself exits normally, so
    callers in Python (the tests) keep their interpreter."""
    try:
        main()
        code: int = ExitCode.OK
    except SystemExit as exc:
        code = _exit_status(exc.code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):  # a reader gone, a closed stream
            stream.flush()
    os._exit(code)


def _exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` gives: None is 0, an int itself, anything else is printed
    and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
