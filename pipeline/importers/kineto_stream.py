"""Streaming reader of a Kineto trace: the complete events as a frame, in bounded memory.

The file (plain or gzip) is read in blocks. The ``traceEvents`` array is cut into pieces at
``},`` boundaries and each piece is decoded as a JSON array by a typed msgspec decoder that keeps
only the fields the importer uses (everything else is skipped, never built). A cut inside a
string or inside a nested object leaves a piece that is not a valid array, so when every piece
decodes, the pieces are exactly the items of the array. The members before and after the array
are decoded too (the trace's version fields), so the whole document is known to be valid JSON.

Whenever anything is not as expected (a bare event array, an event that is not an object, a time
that is not plain microseconds with at most three decimals, a piece that does not decode …) the
reader returns None and the caller reads the file whole, which reports the exact error. So the
stream changes the cost, never the result.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from decimal import Decimal
from operator import attrgetter
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import polars as pl
from msgspec import Raw, Struct

from pipeline.files import InputFileError, open_regular

BLOCK = 8 * 2**20
_KEY = b'"traceEvents"'
_PLAIN_US = r"^[0-9]+(\.[0-9]{1,3})?$"  # what Kineto writes: exact nanoseconds


_NULL = Raw(b"null")  # a missing time reads as JSON null, which no time matches


class _Args(Struct, frozen=True):
    correlation: int | None = None
    bytes: int | None = None


_NO_ARGS = _Args()


class _Event(Struct):
    """The fields the importer reads, typed as Kineto writes them; an event written otherwise
    (a category that is no string, a correlation that is no integer …) fails to decode and the
    file is read whole, with the whole reader's exact rules."""

    ph: str | None = None
    cat: str = ""
    name: str = ""
    pid: Any = None
    tid: Any = None
    ts: Raw = _NULL
    dur: Raw = _NULL
    args: _Args = _NO_ARGS


class Unsure(Exception):
    """The stream cannot vouch for this file: read it whole."""


_EVENTS = msgspec.json.Decoder(list[_Event], float_hook=Decimal)
_MEMBERS = msgspec.json.Decoder(dict[str, Any], float_hook=Decimal)


def _blocks(path: Path, size: int) -> Iterator[bytes]:
    fd, _ = open_regular(path)
    with os.fdopen(fd, "rb") as raw:
        magic = raw.read(2)
        raw.seek(0)
        stream: BinaryIO = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw  # type: ignore[assignment]
        try:
            while block := stream.read(size):
                yield block
        except (OSError, EOFError, zlib.error) as exc:
            raise Unsure(str(exc)) from None


_PH, _CAT, _NAME, _PID, _TID, _TS, _DUR, _ARGS = map(
    attrgetter, ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
)
_CORRELATION, _BYTES = attrgetter("correlation"), attrgetter("bytes")


def _piece(items: list[_Event], offset: int, cats: dict[str, str]) -> pl.DataFrame:
    """The kept complete events of one piece, times in nanoseconds (no loop per event in
    Python: attribute lists by ``map``, filters and arithmetic as column expressions)."""
    args = list(map(_ARGS, items))
    frame = pl.DataFrame(
        {
            "ph": pl.Series(list(map(_PH, items)), dtype=pl.String),
            "cat": pl.Series(list(map(_CAT, items)), dtype=pl.String),
            "name": pl.Series(list(map(_NAME, items)), dtype=pl.String),
            "thread": pl.Series(list(map("{}/{}".format, map(_PID, items), map(_TID, items)))),
            "ts": pl.Series(list(map(bytes, map(_TS, items))), dtype=pl.Binary),
            "dur": pl.Series(list(map(bytes, map(_DUR, items))), dtype=pl.Binary),
            "corr": pl.Series(list(map(_CORRELATION, args)), dtype=pl.Int64),
            "nbytes": pl.Series(list(map(_BYTES, args)), dtype=pl.Int64),
        }
    ).with_row_index("idx", offset)
    if frame.select(pl.col("cat").str.contains(r"[^\x00-\x7f]").any()).item():
        raise Unsure("a category that is not ASCII")  # casefold() and to_lowercase() may differ
    kept = frame.with_columns(
        cat=pl.col("cat").str.to_lowercase().replace_strict(cats, default=None)
    ).filter((pl.col("ph") == "X") & pl.col("cat").is_not_null())
    kept = kept.with_columns(pl.col("ts", "dur").cast(pl.String))
    plain = kept.select(
        pl.col("ts").str.contains(_PLAIN_US).all() & pl.col("dur").str.contains(_PLAIN_US).all()
    ).item()
    if not plain:
        raise Unsure("a time that is not plain microseconds")
    return kept.with_columns(start=_ns("ts")).with_columns(end=pl.col("start") + _ns("dur"))


def _ns(column: str) -> pl.Expr:
    """``"12.5"`` microseconds -> 12500 nanoseconds, exactly (integer arithmetic)."""
    parts = pl.col(column).str.split_exact(".", 1)
    whole = parts.struct.field("field_0").cast(pl.Int64) * 1000
    fraction = parts.struct.field("field_1").fill_null("").str.pad_end(3, "0").cast(pl.Int64)
    return whole + fraction


def _last_cut(buffer: bytes) -> int:
    """Position of the last ``}`` that is followed by ``,`` and then an object (-1: none)."""
    end = len(buffer)
    while (cut := buffer.rfind(b"},", 0, end)) >= 0:
        if buffer[cut + 2 :].lstrip()[:1] == b"{":
            return cut
        end = cut
    return -1


def _last_piece(buffer: bytes, tries: int = 64) -> tuple[list[_Event], dict[str, Any]]:
    """The last events and the members after the array: the array ends at one of the last
    ``]`` of the file (the members after it may hold arrays too)."""
    close = len(buffer)
    for _ in range(tries):
        close = buffer.rfind(b"]", 0, close)
        if close < 0:
            break
        if _KEY in buffer[close:]:  # json.loads would keep a later traceEvents: be exact
            raise Unsure("traceEvents after the array")
        try:
            tail = _MEMBERS.decode(b'{"traceEvents": [' + buffer[close:])
            items = _EVENTS.decode(b"[" + buffer[:close] + b"]")
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        return items, tail
    raise Unsure("no end of traceEvents")


def read_events(
    path: Path, cats: dict[str, str], schema: dict[str, Any], block: int = BLOCK
) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    """(complete events, the top-level members other than traceEvents), or None when the file
    must be read whole. ``cats`` maps a case-folded category to the one the importer uses."""
    try:
        return _read(path, cats, schema, block)
    except (Unsure, msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    except (InputFileError, OSError):  # the whole reading reports it
        return None


def _read(
    path: Path, cats: dict[str, str], schema: dict[str, Any], block_size: int
) -> tuple[pl.DataFrame, dict[str, Any]]:
    blocks = _blocks(path, block_size)
    buffer = b""
    for block in blocks:  # up to the opening bracket of the array
        buffer += block
        at = buffer.find(_KEY)
        opening = buffer.find(b"[", at) if at >= 0 else -1
        if opening >= 0:
            break
    else:
        raise Unsure("no traceEvents")
    head = buffer[: opening + 1]
    if head.count(_KEY) != 1:
        raise Unsure("traceEvents named twice")
    members = _MEMBERS.decode(head + b"]}")
    buffer = buffer[opening + 1 :]
    frames: list[pl.DataFrame] = []
    count = 0
    for block in blocks:
        buffer += block
        cut = _last_cut(buffer)
        if cut < 0:
            continue
        items = _EVENTS.decode(b"[" + buffer[: cut + 1] + b"]")
        buffer = buffer[cut + 2 :]
        frames.append(_piece(items, count, cats))
        count += len(items)
    items, tail = _last_piece(buffer)
    if set(tail) & (set(members) | {"traceEvents"}) != {"traceEvents"}:
        raise Unsure("a member written twice")
    members |= tail
    frames.append(_piece(items, count, cats))
    members.pop("traceEvents", None)
    frames = [f.select(list(schema)).cast(schema) for f in frames]  # type: ignore[arg-type]
    return (pl.concat(frames) if frames else pl.DataFrame(schema=schema)), members
