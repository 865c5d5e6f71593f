"""Shared parsing for the importers: errors naming file and line, CSV tables found after banner
lines, numbers with thousands separators, and exact unit conversion with Decimal."""

from __future__ import annotations

import csv
import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pipeline.contract.files import GiB, InputFileError, read_regular
from pipeline.errors import ExitCode, ExplainError

MAX_INPUT_BYTES = 2 * GiB
"""Largest profiler export read whole (a text table or a compressed trace)."""


class ImportFormatError(ExplainError):
    """A profiler file the importer cannot read: the message names file, line, what was expected
    and what was found. Never a traceback, never a guessed number."""

    exit_code = ExitCode.REJECTED


def fail(path: Path | str, line: int | None, message: str) -> ImportFormatError:
    where = f"{path}:{line}" if line is not None else str(path)
    return ImportFormatError(f"{where}: {message}")


def quoted(text: str, limit: int = 80) -> str:
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return '"' + text.replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------- numbers

_PLAIN = re.compile(r"\+?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_GROUPED = re.compile(r"\d{1,3}(,\d{3})+(\.\d*)?")


def parse_number(text: str, path: Path | str, line: int, what: str) -> Decimal:
    """A finite, exact number >= 0 (every quantity read is a time, a size or a count):
    ``1234.5``, ``1,234.5`` (thousands separators), ``1e3``.
    Surrounding blanks and tabs are dropped (msprof ends timestamps with a tab)."""
    value = text.strip().strip("\t")
    if _GROUPED.fullmatch(value):
        value = value.replace(",", "")
    if not _PLAIN.fullmatch(value):
        expected = "a number >= 0" if value.startswith("-") else "a number"
        raise fail(path, line, f"{what}: expected {expected}, got {quoted(text)}")
    try:
        return Decimal(value)
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid literals
        raise fail(path, line, f"{what}: expected a number, got {quoted(text)}") from None


def parse_optional(text: str, path: Path | str, line: int, what: str) -> Decimal | None:
    """Like :func:`parse_number`, but ``N/A``, ``NA``, ``-`` and empty cells are missing values."""
    if text.strip().upper() in {"", "N/A", "NA", "-", "NONE"}:
        return None
    return parse_number(text, path, line, what)


# ------------------------------------------------------------------------------------------ units

TIME_UNITS: dict[str, Decimal] = {
    "s": Decimal(1),
    "sec": Decimal(1),
    "second": Decimal(1),
    "seconds": Decimal(1),
    "ms": Decimal("1e-3"),
    "msec": Decimal("1e-3"),
    "msecond": Decimal("1e-3"),
    "us": Decimal("1e-6"),
    "usec": Decimal("1e-6"),
    "usecond": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "μs": Decimal("1e-6"),
    "ns": Decimal("1e-9"),
    "nsec": Decimal("1e-9"),
    "nsecond": Decimal("1e-9"),
}
"""Seconds per unit. ``µs`` appears with the micro sign (U+00B5) or the Greek mu (U+03BC)."""

BYTE_UNITS: dict[str, Decimal] = {
    "b": Decimal(1),
    "byte": Decimal(1),
    "bytes": Decimal(1),
    "kb": Decimal(10**3),
    "kbyte": Decimal(10**3),
    "mb": Decimal(10**6),
    "mbyte": Decimal(10**6),
    "gb": Decimal(10**9),
    "gbyte": Decimal(10**9),
    "tb": Decimal(10**12),
    "tbyte": Decimal(10**12),
    "kib": Decimal(2**10),
    "mib": Decimal(2**20),
    "gib": Decimal(2**30),
    "tib": Decimal(2**40),
}
"""Bytes per unit, keys lower-case. Nsight Compute's ``Kbyte``/``Mbyte``/``Gbyte`` and nsys's
``MB`` are decimal (SI) multiples; the binary ones are spelled ``KiB``/``MiB``/``GiB``."""


def time_factor(unit: str, path: Path | str, line: int, what: str) -> Decimal:
    factor = TIME_UNITS.get(unit.strip())
    if factor is None:
        known = ", ".join(sorted(TIME_UNITS))
        raise fail(path, line, f"{what}: expected a time unit ({known}), got {quoted(unit)}")
    return factor


def byte_factor(unit: str, path: Path | str, line: int, what: str) -> Decimal:
    factor = BYTE_UNITS.get(unit.strip().lower())
    if factor is None:
        known = "byte, Kbyte, Mbyte, Gbyte, Tbyte, B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
        raise fail(path, line, f"{what}: expected a byte unit ({known}), got {quoted(unit)}")
    return factor


_UNIT = re.compile(r"^(?P<name>.*?)\s*\((?P<unit>[^()]*)\)\s*$")


def split_unit(header: str) -> tuple[str, str | None]:
    """``"Total Time (ns)"`` -> ``("Total Time", "ns")``; ``"Name"`` -> ``("Name", None)``."""
    match = _UNIT.match(header.strip())
    if match is None:
        return " ".join(header.split()), None
    return " ".join(match["name"].split()), match["unit"].strip()


# ------------------------------------------------------------------------------------ CSV tables


@dataclass
class CsvTable:
    """One CSV table of a file: its kind, the header (as written) and its data rows."""

    path: Path
    kind: str
    header_line: int
    columns: list[str]
    rows: list[tuple[int, list[str]]] = field(default_factory=list)
    units: list[str] | None = None  # the units row of ncu's raw page

    def index(self, *names: str) -> int | None:
        """Column position of the first of ``names`` present (compared without unit and case)."""
        plain = [split_unit(c)[0].casefold() for c in self.columns]
        for name in names:
            if name.casefold() in plain:
                return plain.index(name.casefold())
        return None

    def require(self, *names: str) -> int:
        position = self.index(*names)
        if position is None:
            wanted = " or ".join(quoted(n) for n in names)
            raise fail(self.path, self.header_line, f"expected a column {wanted} in the header")
        return position

    def unit(self, position: int) -> str | None:
        return split_unit(self.columns[position])[1]


Classifier = Callable[[list[str]], str | None]
"""Returns the kind of table a header row starts, or None when the row is no known header."""


def read_input(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of one profiler file: a regular file (never a FIFO or a device, which would
    block or never end) of at most ``limit`` bytes."""
    try:
        return read_regular(path, limit, "a profiler file")
    except InputFileError as exc:
        reason = exc.reason.removeprefix("is ") if exc.code == "not_a_file" else f"it {exc.reason}"
        raise fail(path, None, f"cannot read the file: {reason}") from None
    except OSError as exc:
        raise fail(path, None, f"cannot read the file: {exc.strerror or exc}") from None


def read_json(path: Path, encoding: str = "utf-8", **options: Any) -> Any:
    """The JSON document of a file, gzip-compressed or not (the Kineto and suite formats);
    ``options`` go to ``json.loads`` (e.g. ``parse_float=Decimal``)."""
    raw = read_input(path)
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise fail(path, None, f"expected gzip-compressed JSON, got {exc}") from None
    try:
        return json.loads(raw.decode(encoding), **options)
    except UnicodeDecodeError:
        raise fail(path, None, "expected UTF-8 JSON, got undecodable bytes") from None
    except json.JSONDecodeError as exc:
        raise fail(
            path, exc.lineno, f"expected JSON, got {exc.msg} at column {exc.colno}"
        ) from None


def read_text(path: Path) -> str:
    body = read_input(path)
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        raise fail(path, line, "expected UTF-8 text, got undecodable bytes") from None


def _fields(line: str) -> list[str]:
    return next(csv.reader([line]), [])


ERROR = "==ERROR=="  # how ncu and nsys start the lines of an error


def _is_tool_message(line: str) -> bool:
    # ncu and nsys interleave their own messages (==PROF==, ==WARNING==) with the CSV.
    return line.lstrip().startswith("==")


def iter_tables(
    path: Path,
    text: str,
    classify: Classifier,
    expected: str,
    *,
    units_row: Callable[[str], bool] = lambda kind: False,
) -> Iterator[CsvTable]:
    """Every CSV table of ``text``: a table starts at a row that ``classify`` knows and ends at a
    blank line. Lines outside tables (banners such as ``Generating SQLite file…``) are skipped;
    a file without any known header is refused, naming ``expected``."""
    lines = text.splitlines()
    found = False
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        if not line.strip() or _is_tool_message(line):
            continue
        kind = classify([c.strip() for c in _fields(line)])
        if kind is None:
            continue
        found = True
        table = CsvTable(path, kind, number, [c.strip() for c in _fields(line)])
        if units_row(kind) and number < len(lines):
            table.units = [c.strip() for c in _fields(lines[number])]
            number += 1
        number = _read_rows(lines, number, table)
        yield table
    if not found:
        raise _no_table(path, lines, expected)


def _no_table(path: Path, lines: Sequence[str], expected: str) -> ImportFormatError:
    """A file without a table: a failed profile (the tool's ``==ERROR==`` lines, e.g. no
    permission for the GPU counters) says so with its first error, not "an empty file"."""
    errors = [(n, ln.strip()) for n, ln in enumerate(lines, 1) if ln.lstrip().startswith(ERROR)]
    if errors:
        number, first = errors[0]
        return fail(
            path,
            number,
            f"expected a header row of {expected}, got a failed profile: the tool reported "
            f"{quoted(first)}",
        )
    first = next((ln for ln in lines if ln.strip() and not _is_tool_message(ln)), "")
    got = f"first line {quoted(first)}" if first else "an empty file"
    return fail(path, 1, f"expected a header row of {expected}, got {got}")


def _read_rows(lines: Sequence[str], number: int, table: CsvTable) -> int:
    width = len(table.columns)
    while number < len(lines):
        line = lines[number]
        number += 1
        if not line.strip():
            break
        if _is_tool_message(line):
            continue
        cells = _fields(line)
        if len(cells) != width:
            raise fail(
                table.path,
                number,
                f"expected {width} fields as in the header on line {table.header_line}, "
                f"got {len(cells)}",
            )
        table.rows.append((number, cells))
    return number


def normalized(columns: Sequence[str]) -> set[str]:
    """Header names without units, case-folded, blanks collapsed: for recognizing layouts."""
    return {split_unit(c)[0].casefold() for c in columns}
