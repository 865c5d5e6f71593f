"""What the commands print, as a library: results in, text out.

    numbers.py   how a number is written (the terminal's marks and the report's)
    views.py     what every format reads off a result the same way (verdict text, summary cells)
    text.py      the terminal: verdict tables, a round, ab, plan, one-line notes
    json.py      --format json          csv.py       --format csv (notes for stderr)
    markdown.py  --format markdown and the GitHub job summary
    junit.py     --junit FILE           github.py    GitHub Actions annotations, job summary
    sinks.py     where a command's result goes: the reporters a run chose, in order

A new format is one module with a ``render(result)`` (a ``functools.singledispatch`` over the
result types it can show) and one Reporter in REPORTERS: every command whose result it can show
offers it in --format, and the sinks print it (docs/contributing.md). Renderers never print,
never read options and never recompute a verdict; this package never imports pipeline.cli.

Light at import (no Polars): the CLI builds its --format choices from REPORTERS before any work.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Shown = Literal["AssessResult", "FinalResult", "AbResult", "RoundResult", "Plan"]
"""The results a reporter can show, by class name (this package stays light: the classes live
in the layers below, with Polars)."""
Writes = Literal["stdout", "file", "summary", "annotations"]
"""Where a reporter writes: stdout (a --format), a file option's FILE (--junit), the GitHub
job's summary file, or the job's annotations (workflow commands on stderr)."""


@dataclass(frozen=True)
class Reporter:
    """One output of the tool: the module of pipeline.output that renders it, the results it
    can show (``shows``: the types its module's singledispatch registers) and where it writes
    (pipeline.output.sinks writes it)."""

    name: str
    """The --format value (for stdout), else the output's name."""
    module: str
    shows: tuple[Shown, ...]
    writes: Writes = "stdout"
    digests: bool = False
    """Its render takes ``digests=`` (--digests: the bookkeeping columns)."""
    raw: bool = False
    """It reads the result as it is and escapes every string itself (JSON); every other
    reporter reads the inert copy (pipeline.output.inert)."""
    notes: str | None = None
    """The module's function whose text goes to stderr before the output (csv's notes)."""
    part: bool = False
    """It reads the assessment inside the result (a FinalResult's, an AbResult's)."""
    function: str = "render"
    """The module's function that renders: ``render(result)`` (with ``digests=`` if it takes
    them), its text or bytes written as they are; for the annotations,
    ``annotation_lines(assessment, focus, gate)``, one workflow command per line."""

    def renderer(self, function: str | None = None) -> Callable[..., Any]:
        """The module's function (``self.function`` by default), imported when first used."""
        module = importlib.import_module(f"pipeline.output.{self.module}")
        return getattr(module, function or self.function)

    def rendered(self, result: Any, *, digests: bool = False) -> str:
        """``result`` rendered (bytes, as JUnit's, read as UTF-8); ``digests`` when it takes
        them."""
        data = self.renderer()(result, digests=digests) if self.digests else self.renderer()(result)
        return data.decode("utf-8") if isinstance(data, bytes) else str(data)


REPORTERS: dict[str, Reporter] = {
    r.name: r
    for r in (
        Reporter("table", "text", ("AssessResult", "FinalResult")),
        Reporter("text", "text", ("AbResult", "RoundResult", "Plan")),
        Reporter("json", "json", ("AssessResult",), digests=True, raw=True),
        Reporter("csv", "csv", ("AssessResult",), digests=True, notes="notes"),
        Reporter("markdown", "markdown", ("AssessResult", "FinalResult", "AbResult")),
        Reporter("junit", "junit", ("AssessResult",), writes="file", part=True),
        Reporter(
            "summary", "markdown", ("AssessResult", "FinalResult", "AbResult"), writes="summary"
        ),
        Reporter(
            "annotations",
            "github",
            ("AssessResult",),
            writes="annotations",
            part=True,
            function="annotation_lines",
        ),
    )
}
"""Every output, the --format values first in the order each command lists them (`table` and
`text` are the terminal's text, by the name each command has always used: `text` for ab, a
round and a plan)."""


def formats(shows: Shown) -> tuple[str, ...]:
    """The --format choices of a command whose result is a ``shows``, the first the default."""
    return tuple(r.name for r in REPORTERS.values() if r.writes == "stdout" and shows in r.shows)


FORMATS: dict[str, str] = {r.name: r.module for r in REPORTERS.values() if r.writes == "stdout"}
"""--format value -> the module of pipeline.output that renders it."""


def render(result: Any, fmt: str, *, digests: bool = False) -> str:
    """``result`` (an AssessResult, FinalResult, AbResult, RoundResult or Plan) in format
    ``fmt``; a TypeError when that format cannot show that result."""
    return REPORTERS[fmt].rendered(result, digests=digests)
