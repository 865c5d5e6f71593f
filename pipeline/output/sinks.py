"""Where a command's result goes, chosen once from its options and the environment: a list of
reporters (pipeline.output.REPORTERS): stdout in the chosen format, a JUnit file, and, inside a
GitHub Actions job, the job summary and the annotations. A command builds its ``Sinks`` and
hands them its result; each reporter renders it and the sink writes it; renderers never print.

Light at import (no Polars): the CLI builds its options from this module before any work."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipeline.contract.inert import inert_output
from pipeline.errors import UsageError
from pipeline.output import REPORTERS, Reporter
from pipeline.output.inert import shown

if TYPE_CHECKING:
    from pipeline.assessment.campaigns import AssessResult

STDOUT = "-"
"""`-o -` / `--output -`: write to stdout instead of a file."""


def is_stdout(output: str | Path | None) -> bool:
    return output is not None and str(output) == STDOUT


def write_output(output: str | Path | None, data: str | bytes) -> Path | None:
    """Write ``data`` to the file ``output`` or, for None or ``-``, to stdout. Returns the file
    written, or None."""
    if output is None or is_stdout(output):
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            click.echo(data, nl=False)
        return None
    path = Path(output)
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; give a file name")
    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            with path.open("w", encoding="utf-8", newline="") as handle:
                handle.write(data)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    return path


def _stderr(text: str) -> None:
    click.echo(text, err=True, nl=False)


def echo(text: str, *, err: bool = False, json: bool = False) -> None:
    """Print a rendered text (no newline added) with no line that starts a CI workflow
    command (pipeline.contract.inert): the last step of every output of the CLI."""
    click.echo(inert_output(text, json=json), err=err, nl=False)


def show(result: Any, fmt: str = "text") -> None:
    """Print ``result`` in format ``fmt`` on stdout, its free text inert (a round, a plan: the
    results that have no JUnit or GitHub output)."""
    Sinks(fmt).emit(result)


def assessed_part(result: Any) -> AssessResult:
    """The assessment inside a result: an AssessResult itself, a FinalResult's, an AbResult's."""
    for attribute in ("final", "assess"):
        result = getattr(result, attribute, result)
    return result


Target = Path | str | None
"""What a reporter writes to beside its kind of place: the file of a file option, the job
summary's file; None for stdout and the annotations."""


@dataclass(frozen=True)
class Sinks:
    """The outputs of one command. ``fmt`` is a --format (a stdout reporter of
    pipeline.output.REPORTERS); ``digests`` adds the bookkeeping columns to JSON and CSV;
    ``focus`` is the attempt the annotations speak of (default: each campaign's latest round)."""

    fmt: str
    junit: Path | None = None
    digests: bool = False
    focus: str | None = None
    summary: str | None = None
    """$GITHUB_STEP_SUMMARY, when the command runs in a GitHub Actions job."""
    github: bool = False
    stderr: Callable[[str], None] = field(default=_stderr, repr=False)

    @classmethod
    def chosen(
        cls,
        fmt: str,
        *,
        junit: Path | None = None,
        digests: bool = False,
        focus: str | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> Sinks:
        github = environ.get("GITHUB_ACTIONS") == "true"
        summary = (environ.get("GITHUB_STEP_SUMMARY") or None) if github else None
        return cls(fmt, junit, digests, focus, summary, github)

    @property
    def reporters(self) -> list[tuple[Reporter, Target]]:
        """The reporters this run writes, in order, each with its target: stdout in the chosen
        format, the JUnit file, then in a GitHub Actions job the summary and the annotations."""
        chosen: list[tuple[Reporter, Target]] = [(REPORTERS[self.fmt], None)]
        if self.junit is not None:
            chosen.append((REPORTERS["junit"], self.junit))
        if self.github and self.summary:
            chosen.append((REPORTERS["summary"], self.summary))
        if self.github:
            chosen.append((REPORTERS["annotations"], None))
        return chosen

    def emit(self, result: Any) -> None:
        """Hand the result to each reporter in turn. Annotations go to stderr: the runner
        reads workflow commands from both streams, and stdout keeps only the command's output
        (a table, JSON or Markdown redirected to a file stays clean)."""
        copies: dict[bool, Any] = {True: result}  # reporter.raw -> the copy it reads
        for reporter, target in self.reporters:
            if reporter.raw not in copies:
                copies[reporter.raw] = shown(result)
            _WRITERS[reporter.writes](self, reporter, target, copies[reporter.raw])

    def _stdout(self, reporter: Reporter, _target: Target, seen: Any) -> None:
        """A --format: its notes on stderr first (csv's), then its text on stdout."""
        if reporter.notes is not None:
            self.stderr(inert_output(reporter.renderer(reporter.notes)(assessed_part(seen))))
        echo(_rendered(reporter, seen, self.digests), json=reporter.raw)

    def _file(self, reporter: Reporter, target: Target, seen: Any) -> None:
        """A file option's FILE (--junit): the document, inert."""
        write_output(target, inert_output(_rendered(reporter, seen, self.digests)).encode("utf-8"))

    def _summary(self, reporter: Reporter, target: Target, seen: Any) -> None:
        """The GitHub job summary: the document appended to its file; a warning on stderr
        when the file cannot take it."""
        from pipeline.output import github

        warning = github.append_summary(str(target), _rendered(reporter, seen, self.digests))
        if warning:
            self.stderr(inert_output(warning + "\n"))

    def _annotations(self, reporter: Reporter, _target: Target, seen: Any) -> None:
        """The annotations of the inert copy; the only workflow commands the tool prints, so
        they bypass the sink's rule (their data is escaped as GitHub documents, and their free
        text is inert)."""
        gate = getattr(seen, "gate", None)  # ab's and assess --gate's: it decided the exit
        for line in reporter.renderer()(_part(reporter, seen), self.focus, gate):
            self.stderr(line + "\n")


def _part(reporter: Reporter, seen: Any) -> Any:
    return assessed_part(seen) if reporter.part else seen


def _rendered(reporter: Reporter, seen: Any, digests: bool) -> str:
    return reporter.rendered(_part(reporter, seen), digests=digests)


_WRITERS: dict[str, Callable[[Sinks, Reporter, Target, Any], None]] = {
    "stdout": Sinks._stdout,
    "file": Sinks._file,
    "summary": Sinks._summary,
    "annotations": Sinks._annotations,
}
"""How each kind of place is written (pipeline.output.Writes)."""
