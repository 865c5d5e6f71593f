"""Where a command's result goes, chosen once from its options and the environment: stdout in
the chosen format, a JUnit file, and, inside a GitHub Actions job, the job summary and the
annotations. A command builds its ``Sinks`` and hands them its result; renderers never print.

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
from pipeline.output import FORMATS, render
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
    echo(render(_for_format(result, fmt), fmt), json=FORMATS[fmt] == "json")


def _for_format(result: Any, fmt: str) -> Any:
    """What the renderer of ``fmt`` reads: JSON escapes every string itself and must keep the
    data as it is; every other format gets the inert copy."""
    return result if FORMATS[fmt] == "json" else shown(result)


def assessed_part(result: Any) -> AssessResult:
    """The assessment inside a result: an AssessResult itself, a FinalResult's, an AbResult's."""
    for attribute in ("final", "assess"):
        result = getattr(result, attribute, result)
    return result


@dataclass(frozen=True)
class Sinks:
    """The outputs of one command. ``fmt`` is a key of pipeline.output.FORMATS; ``digests``
    adds the bookkeeping columns to JSON and CSV; ``focus`` is the attempt the annotations
    speak of (default: each campaign's latest round)."""

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

    def emit(self, result: Any) -> None:
        """Print the result in the chosen format, then write the JUnit file, then the GitHub
        job summary and annotations. Annotations go to stderr: the runner reads workflow
        commands from both streams, and stdout keeps only the command's output (a table, JSON
        or Markdown redirected to a file stays clean)."""
        visible = _for_format(result, self.fmt)
        if FORMATS[self.fmt] == "csv":
            from pipeline.output.csv import notes

            self.stderr(inert_output(notes(assessed_part(visible))))
        rendered = render(visible, self.fmt, digests=self.digests)
        echo(rendered, json=FORMATS[self.fmt] == "json")
        if self.junit is not None or self.github:
            visible = visible if visible is not result else shown(result)
        if self.junit is not None:
            from pipeline.output import junit

            document = junit.render(assessed_part(visible)).decode("utf-8")
            write_output(self.junit, inert_output(document).encode("utf-8"))
        if self.github:
            self._github(visible)

    def _github(self, visible: Any) -> None:
        """The job summary and the annotations of the inert copy; the annotations are the
        only workflow commands the tool prints, so they bypass the sink's rule (their data is
        escaped as GitHub documents, and their free text is inert)."""
        from pipeline.output import github

        if self.summary:
            warning = github.append_summary(self.summary, render(visible, "markdown"))
            if warning:
                self.stderr(inert_output(warning + "\n"))
        gate = getattr(visible, "gate", None)  # ab's and assess --gate's: it decided the exit
        for line in github.annotation_lines(assessed_part(visible), self.focus, gate):
            self.stderr(line + "\n")
