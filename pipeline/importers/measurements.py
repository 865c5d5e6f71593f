"""Writing measurement lines out: appended to a measurements file in one write, refusing a run
already there, or printed; :func:`import_run` is the ``import`` command's call for one run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.atomic import dump_lines
from pipeline.contract.declare import Side
from pipeline.importers.common import fail, read_input
from pipeline.importers.lines import import_line
from pipeline.importers.reader import Imported, ImportOptions


def _existing_runs(output: Path) -> set[tuple[str, int]]:
    runs: set[tuple[str, int]] = set()
    text = read_input(output).decode("utf-8", errors="replace")
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise fail(output, number, f"expected a JSON measurement line, got {exc}") from None
        if isinstance(doc, dict):
            runs.add((str(doc.get("side")), doc.get("repetition", -1)))
    return runs


def write_line(line: Mapping[str, Any], output: Path | None) -> None:
    """Append the line to ``output`` (refusing a run already there), or print it."""
    write_lines([line], output)


def write_lines(lines: Sequence[Mapping[str, Any]], output: Path | None) -> None:
    """Append the lines to ``output`` in one write (refusing any run already there, so nothing
    is written then), or print them."""
    text = dump_lines(lines).decode("utf-8")
    if output is None:
        sys.stdout.write(text)
        return
    if output.exists():
        existing = _existing_runs(output)
        for line in lines:
            key = (str(line["side"]), int(line["repetition"]))
            if key in existing:
                raise fail(
                    output,
                    None,
                    f"expected a new run, got side {key[0]} repetition {key[1]} already in the "
                    "file",
                )
        body = read_input(output)
        prefix = "" if not body or body.endswith(b"\n") else "\n"
    else:
        prefix = ""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)  # a new attempt's folder, as documented
        with output.open("a", encoding="utf-8") as handle:
            handle.write(prefix + text)
    except OSError as exc:
        raise fail(output, None, f"cannot write the file: {exc.strerror or exc}") from None


def import_run(
    fmt: str,
    arguments: Sequence[str],
    *,
    side: Side,
    repetition: int,
    metric: float | None = None,
    output: Path | None = None,
    options: ImportOptions = ImportOptions(),
) -> tuple[dict[str, Any], Imported]:
    """The library call behind ``explain-pipeline import``: read, build, validate, then append
    the line to ``output`` or print it."""
    line, imported = import_line(
        fmt, arguments, side=side, repetition=repetition, metric=metric, options=options
    )
    write_line(line, output)
    return line, imported
