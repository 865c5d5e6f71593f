"""Shared parsing for the importers: errors naming file and line, CSV tables found after banner
lines, numbers with thousands separators, and exact unit conversion with Decimal."""

from __future__ import annotations

import csv
import json
import re
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pipeline.contract.files import GiB, InputFileError, MiB, read_regular, size_text
from pipeline.errors import ExitCode, ExplainError

MAX_INPUT_BYTES = 2 * GiB
"""Largest profiler export read (a text table, a trace, plain or as it decompresses when it is
streamed)."""
MAX_DECOMPRESSED_BYTES = 256 * MiB
"""Largest JSON text a gzip-compressed file may decompress to when it is read whole (a trace
the streaming reader cannot vouch for): parsing keeps about five bytes of Python objects per
byte, and a 0.3 MB file of blanks decompresses to 300 MB, which took `import` to 1.3 GB."""
MAX_SUITE_BYTES = 64 * MiB
"""Largest suite results file (pytest-benchmark, Google Benchmark, pyperf), plain or
decompressed, for `import` and for the recorder's {results} alike: a suite of 10,000 benchmarks
with their statistics is about 10 MB; a 0.31 MB gzip file took the recorder to 685 MB."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects read (the formats need 5; deeper ones made Python's
parser overflow its stack: an internal error, exit 4)."""
FLOAT_MAX = Decimal(sys.float_info.max)
"""The largest number the store holds (float64): a larger one is refused by its value."""


class ImportFormatError(ExplainError):
    """A profiler file the importer cannot read: the message names file, line, what was expected
    and what was found. Never a traceback, never a guessed number."""

    exit_code = ExitCode.REJECTED


def fail(
    path: Path | str, line: int | None, message: str, code: str | None = None
) -> ImportFormatError:
    """``file:line: message [code]``; ``code`` is ingest's name for the same rule
    (docs/ingest.md#validation) where there is one."""
    where = f"{path}:{line}" if line is not None else str(path)
    return ImportFormatError(f"{where}: {message}" + (f" [{code}]" if code else ""))


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

_PREFIXES = "kmgt"
"""kilo to tera: the SI factor 1000**n and the binary 1024**n of the n-th."""
BYTE_UNITS: dict[str, Decimal] = {
    **dict.fromkeys(("b", "byte", "bytes"), Decimal(1)),
    **{
        f"{p}{unit}": Decimal(1000**n)
        for n, p in enumerate(_PREFIXES, start=1)
        for unit in ("b", "byte")
    },
    **{f"{p}ib": Decimal(1024**n) for n, p in enumerate(_PREFIXES, start=1)},
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


def read_input(path: Path, limit: int = MAX_INPUT_BYTES, what: str = "a profiler file") -> bytes:
    """The bytes of one profiler file: a regular file (never a FIFO or a device, which would
    block or never end) of at most ``limit`` bytes."""
    try:
        return read_regular(path, limit, what)
    except InputFileError as exc:
        reason = exc.reason.removeprefix("is ") if exc.code == "not_a_file" else f"it {exc.reason}"
        raise fail(path, None, f"cannot read the file: {reason}") from None
    except OSError as exc:
        raise fail(path, None, f"cannot read the file: {exc.strerror or exc}") from None


class _Refused(ValueError):
    """A JSON value the importers refuse while parsing: the message says which and why."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        keys = [k for k, _ in pairs]
        key = next(k for i, k in enumerate(keys) if k in keys[:i])
        raise _Refused(
            f"key {quoted(key)} is written twice in one object (which one counts?)",
            "duplicate_key",
        )
    return found


def _storable(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` (of a number's text) refusing a finite number larger than the store holds:
    ``1e999999999`` made Decimal arithmetic overflow (an internal error, exit 4)."""

    def checked(token: str) -> Any:
        value = Decimal(token)
        if value.is_finite() and value.copy_abs() > FLOAT_MAX:  # (abs() rounds: it overflows)
            shown = token if len(token) <= 40 else token[:39] + "…"
            raise _Refused(
                f"the number {shown} is larger than the store holds (float64, 1.8e308)",
                "not_finite",
            )
        return parse(token)

    return checked


def _inflated(raw: bytes, path: Path, chunk: int) -> Iterator[bytes]:
    """The decompressed bytes of every gzip member of ``raw``, at most ``chunk`` at a time."""
    rest = raw
    while rest:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        pending = rest
        try:
            while not inflater.eof and (pending or inflater.unconsumed_tail):
                yield inflater.decompress(pending or inflater.unconsumed_tail, chunk)
                pending = b""
        except zlib.error as exc:
            raise fail(path, None, f"expected gzip-compressed JSON, got {exc}") from None
        if not inflater.eof:
            raise fail(path, None, "expected gzip-compressed JSON, got a truncated file")
        rest = inflater.unused_data.lstrip(b"\x00")  # members may follow (and zero padding)


def gunzip(raw: bytes, limit: int, path: Path) -> bytes:
    """The decompressed bytes of a gzip file (every member), refused past ``limit`` bytes. The
    size is counted first, a MiB at a time, so a small file that expands a thousandfold is
    refused in constant memory; then it is decompressed once more, whole."""
    size = 0
    for part in _inflated(raw, path, MiB):
        size += len(part)
        if size > limit:
            raise fail(
                path,
                None,
                f"decompresses to more than {size_text(limit)}, the limit for this file",
                "too_large",
            )
    return b"".join(_inflated(raw, path, 0))


def read_json(
    path: Path,
    encoding: str = "utf-8",
    *,
    limit: int = MAX_INPUT_BYTES,
    unzipped: int = MAX_DECOMPRESSED_BYTES,
    what: str = "a profiler file",
    **options: Any,
) -> Any:
    """The JSON document of a file, gzip-compressed or not (the Kineto and suite formats), at
    most ``limit`` bytes as stored and ``unzipped`` once decompressed; ``options`` go to
    ``json.loads`` (e.g. ``parse_float=Decimal``). Refused with a one-line error: nesting past
    MAX_JSON_DEPTH, a key written twice in one object, a number past FLOAT_MAX."""
    from pipeline.ingestion.jsontext import nesting_depth

    raw = read_input(path, limit, what)
    if raw[:2] == b"\x1f\x8b":
        raw = gunzip(raw, unzipped, path)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        raise fail(path, None, "expected UTF-8 JSON, got undecodable bytes") from None
    if nesting_depth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise fail(
            path, None, f"expected JSON nested at most {MAX_JSON_DEPTH} levels deep", "too_deep"
        )
    options["parse_float"] = _storable(options.get("parse_float", float))
    options["parse_int"] = _storable(options.get("parse_int", int))
    try:
        return json.loads(text, object_pairs_hook=_unique, **options)
    except json.JSONDecodeError as exc:
        raise fail(
            path, exc.lineno, f"expected JSON, got {exc.msg} at column {exc.colno}"
        ) from None
    except _Refused as exc:
        raise fail(path, None, str(exc), exc.code) from None
    except (RecursionError, ValueError) as exc:  # Python's digit limit of an integer, a stack
        raise fail(path, None, f"expected JSON, got {type(exc).__name__}: {exc}") from None


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
