"""A whole folder of profiler files: its files grouped into runs by side and repetition, read
from each file name, and every run imported in one process (:func:`import_folder`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.contract.declare import Side
from pipeline.errors import UsageError
from pipeline.importers.common import quoted
from pipeline.importers.lines import import_line
from pipeline.importers.measurements import write_lines
from pipeline.importers.reader import ImportOptions, compile_pattern

DEFAULT_NAME_PATTERN = r"(?P<side>baseline|candidate)[-_.]?r?(?P<repetition>\d+)"
"""File names like ``baseline-r3-a.json.gz`` or ``candidate_7.json``: searched in the file name."""


_SIDES: dict[str, Side] = {
    **dict.fromkeys(("b", "base", "baseline"), "baseline"),
    **dict.fromkeys(("c", "cand", "candidate"), "candidate"),
}


@dataclass(frozen=True)
class FolderRun:
    side: Side
    repetition: int
    files: tuple[Path, ...]


def runs_in_folder(
    folder: Path, name_pattern: str | None = None
) -> tuple[list[FolderRun], list[Path]]:
    """Group the files of ``folder`` into runs by side and repetition, read from each file name
    with ``name_pattern`` (named groups ``side`` and ``repetition``; several files of one run are
    its captures). Returns the runs, by repetition then side, and the files that did not match."""
    pattern = compile_pattern("--name-pattern", name_pattern or DEFAULT_NAME_PATTERN)
    assert pattern is not None
    if not {"side", "repetition"} <= set(pattern.groupindex):
        raise UsageError(
            f"--name-pattern {quoted(pattern.pattern)}: expected the named groups "
            "(?P<side>...) and (?P<repetition>...)"
        )
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder")
    grouped: dict[tuple[Side, int], list[Path]] = {}
    skipped: list[Path] = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        match = pattern.search(path.name)
        if match is None:
            skipped.append(path)
            continue
        side = _SIDES.get(match.group("side").casefold())
        if side is None:
            raise UsageError(
                f"{path}: side {quoted(match.group('side'))} from --name-pattern: expected "
                "baseline or candidate (or b, base, c, cand)"
            )
        try:
            repetition = int(match.group("repetition"))
        except ValueError:
            raise UsageError(
                f"{path}: repetition {quoted(match.group('repetition'))} from --name-pattern: "
                "expected an integer"
            ) from None
        grouped.setdefault((side, repetition), []).append(path)
    if not grouped:
        raise UsageError(f"{folder}: no file name matches --name-pattern {quoted(pattern.pattern)}")
    order = sorted(grouped, key=lambda key: (key[1], key[0]))
    return [FolderRun(s, r, tuple(grouped[s, r])) for s, r in order], skipped


def import_folder(
    fmt: str,
    folder: Path,
    *,
    name_pattern: str | None = None,
    output: Path | None = None,
    options: ImportOptions = ImportOptions(),
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every run of a folder of profiler files, in one process: one line per run, all checked
    before any is written (a bad file writes nothing), then appended to ``output`` or printed.
    Returns the lines and the notes."""
    runs, skipped = runs_in_folder(folder, name_pattern)
    lines: list[dict[str, Any]] = []
    notes = [f"{path}: file name does not match --name-pattern; skipped" for path in skipped]
    for run in runs:
        files = [str(p) for p in run.files]
        line, imported = import_line(
            fmt, files, side=run.side, repetition=run.repetition, options=options
        )
        lines.append(line)
        notes += imported.notes
    write_lines(lines, output)
    return lines, list(dict.fromkeys(notes))
