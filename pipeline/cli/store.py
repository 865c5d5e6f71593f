"""`explain-pipeline store check` and `store repair`: the state of the store folder itself."""

from __future__ import annotations

import click

from pipeline.cli.common import group, store_option
from pipeline.contract.inert import inert
from pipeline.errors import ExitCode

_EXIT_CODES = (  # what the common codes mean here; the list of every code follows in --help
    "Here: 0 the store is clean; 1 problems found (each printed as PATH: reason); "
    "2 no store at the path or a bad option; 3 (repair) a symbolic link where the store "
    "expects a folder or file (docs/store.md#links-in-the-store)."
)


@group("store", epilog=_EXIT_CODES)
def store_group() -> None:
    """Check the store folder and finish an interrupted write (see docs/store.md).

    \b
    Example:
      explain-pipeline store check --store .explain-store
      explain-pipeline store repair --store .explain-store
    """


@store_group.command("check", epilog=_EXIT_CODES)
@store_option
def check_command(store_path: str | None) -> int:
    """Report what a reader outside explain-pipeline should know; change nothing.

    Lists commits that were interrupted after their journal was written (a reader may see a
    mix of old and new partitions until they are finished), staging files of writes that
    never committed, journals that are not explain-pipeline's, table files that are
    damaged or do not match schemas/tables.json, and symbolic links where the store expects
    a folder or file. Waits for a running write to finish.

    \b
    Example:
      explain-pipeline store check --store .explain-store
      explain-pipeline store check || explain-pipeline store repair
    """
    from pipeline.store.nofollow import StoreLinkError
    from pipeline.store.tables import Store  # imported here: --help loads no heavy library

    store = Store.open_existing(store_path, recover=False)
    try:
        with store.shared_lock():
            problems = store.problems()
    except StoreLinkError:  # the lock file itself is a link: reported with the rest, unlocked
        problems = store.problems()
    for problem in problems:  # a file name in the store is text from the disk: inert
        note = "" if problem.repairable else " (store repair cannot fix this)"
        click.echo(inert(f"{problem}{note}"))
    n = len(problems)
    click.echo(f"{store.root}: {'clean' if not n else f'{n} problem(s)'}")
    return ExitCode.REJECTED if n else ExitCode.OK


@store_group.command("repair", epilog=_EXIT_CODES)
@store_option
def repair_command(store_path: str | None) -> int:
    """Finish interrupted commits and remove stray staging files, then check again.

    A commit interrupted after its journal was written is rolled forward (its files were
    all written before the journal); files of a write that never committed are removed.
    Every command that writes does the same before it starts; this one does only that.
    Damaged table files are reported, not changed.

    \b
    Example:
      explain-pipeline store repair --store .explain-store
    """
    from pipeline.store.tables import Store

    store = Store.open_existing(store_path, recover=False)
    repaired = store.repair()
    click.echo(
        f"finished {repaired.commits_finished} interrupted commit(s); "
        f"removed {repaired.strays_removed} stray staging file(s) or folder(s)"
    )
    problems = store.problems()
    for problem in problems:
        click.echo(inert(str(problem)))
    n = len(problems)
    click.echo(f"{store.root}: {'clean' if not n else f'{n} problem(s) left'}")
    return ExitCode.REJECTED if n else ExitCode.OK


COMMANDS: list[click.Command] = [store_group]
