"""What the commands print, as a library: results in, text out.

    numbers.py   how a number is written (the terminal's marks and the report's)
    views.py     what every format reads off a result the same way (verdict text, summary cells)
    text.py      the terminal: verdict tables, a round, ab, plan, one-line notes
    json.py      --format json          csv.py       --format csv (notes for stderr)
    markdown.py  --format markdown and the GitHub job summary
    junit.py     --junit FILE           github.py    GitHub Actions annotations, job summary
    sinks.py     where a command's result goes: stdout, the JUnit file, GitHub, chosen once

A new format is one module with a ``render(result)`` (a ``functools.singledispatch`` over the
result types it can show) and one entry in FORMATS. Renderers never print, never read options
and never recompute a verdict; this package never imports pipeline.cli.
"""

from __future__ import annotations

import importlib
from typing import Any

FORMATS: dict[str, str] = {
    "table": "text",
    "text": "text",
    "json": "json",
    "csv": "csv",
    "markdown": "markdown",
}
"""--format value -> the module of pipeline.output that renders it (`table` and `text` are the
terminal's text, by the name each command has always used)."""
WITH_DIGESTS = frozenset({"json", "csv"})
"""Formats that can add the bookkeeping columns (--digests)."""


def render(result: Any, fmt: str, *, digests: bool = False) -> str:
    """``result`` (an AssessResult, FinalResult, AbResult, RoundResult or Plan) in format
    ``fmt``; a TypeError when that format cannot show that result."""
    module = importlib.import_module(f"pipeline.output.{FORMATS[fmt]}")
    if FORMATS[fmt] in WITH_DIGESTS:
        return str(module.render(result, digests=digests))
    return str(module.render(result))
