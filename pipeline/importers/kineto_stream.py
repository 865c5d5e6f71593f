"""Streaming reader of a Kineto trace: the complete events as a frame, in bounded memory.

The file (plain or gzip) is read in blocks. The ``traceEvents`` array is cut into pieces at
``},`` boundaries and each piece is decoded in place as a JSON array by a typed msgspec decoder
that keeps only the fields the importer uses (everything else is skipped, never built). A cut
inside a string or inside a nested object leaves a piece that is not a valid array (then the cut
before it is tried), so when every piece decodes, the pieces are exactly the items of the array.
The fields become columns (the ids and times as their JSON text, exact); every ~20,000 events
they are filtered to the kept complete events and the times turned into integer nanoseconds by
one query, so no list of all events is ever held. The members before and after the array are
decoded too (the trace's version fields), so the whole document is known to be valid JSON.

Whenever anything is not as expected (a bare event array, an event that is not an object, a time
that is not plain microseconds with at most three decimals, an id written in a way the whole
reader would print differently, undecodable bytes, a piece that does not decode …) the reader
returns None and the caller reads the file whole, which reports the exact error. So the stream
changes the cost, never the result.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from decimal import Decimal
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import polars as pl
from msgspec import Raw, Struct

from pipeline.files import InputFileError, open_regular

_BATCH = 20_000  # events filtered at once (~4 MB of trace): fewer calls than piece by piece
_TRIES = 16  # cuts tried in one buffer before the stream gives up on the file
BLOCK = 2 * 2**20  # small pieces: less memory at once, and faster (they stay in cache)
_KEY = b'"traceEvents"'
_PLAIN_US = r"^[0-9]{1,15}(\.[0-9]{1,3})?$"  # what Kineto writes: exact nanoseconds in int64


_NULL = Raw(b"null")  # a missing field reads as JSON null


class _Args(Struct, frozen=True, gc=False):
    correlation: int | None = None
    bytes: int | None = None


_NO_ARGS = _Args()


class _Event(Struct, gc=False):
    """The fields the importer reads, typed as Kineto writes them; an event written otherwise
    (a category that is no string, a correlation that is no integer …) fails to decode and the
    file is read whole, with the whole reader's exact rules. The process and thread ids and the
    times stay JSON text (exact, and one column expression turns them into values)."""

    ph: str | None = None
    cat: str = ""
    name: str = ""
    pid: Raw = _NULL
    tid: Raw = _NULL
    ts: Raw = _NULL
    dur: Raw = _NULL
    args: _Args = _NO_ARGS


class Unsure(Exception):
    """The stream cannot vouch for this file: read it whole."""


_EVENTS = msgspec.json.Decoder(list[_Event])
_MEMBERS = msgspec.json.Decoder(dict[str, Any], float_hook=Decimal)
# A process or thread id the whole reader would write the same way: null, a boolean, an integer
# written plainly, or a string without escapes (its text is the string itself).
_PLAIN_ID = r'^(null|true|false|0|-?[1-9][0-9]*|"[^"\\]*")$'


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


_PH, _CAT, _NAME, _ARGS = map(attrgetter, ("ph", "cat", "name", "args"))
_RAW_FIELDS = ("pid", "tid", "ts", "dur")
_RAW = attrgetter(*_RAW_FIELDS)
_CORRELATION, _BYTES = attrgetter("correlation"), attrgetter("bytes")


def _texts(items: list[_Event]) -> list[pl.Series]:
    """The JSON texts of the ids and times of every event, one string column each: the texts
    are joined with newlines (which no JSON number, string or literal contains) and split in
    one call."""
    joined = b"\n".join(chain.from_iterable(map(_RAW, items))).decode()
    texts = pl.Series([joined]).str.split("\n").explode()
    if texts.len() != len(_RAW_FIELDS) * len(items):  # a nested value over several lines
        raise Unsure("an id or time that is not a plain value")
    return [texts.gather_every(len(_RAW_FIELDS), k).alias(f) for k, f in enumerate(_RAW_FIELDS)]


def _columns(items: list[_Event]) -> pl.DataFrame:
    """The fields of one piece's events as columns, the ids and times still JSON text (no
    loop per event in Python: attribute lists by ``map``)."""
    args = list(map(_ARGS, items))
    return pl.DataFrame(
        [
            pl.Series("ph", list(map(_PH, items)), dtype=pl.String),
            pl.Series("cat", list(map(_CAT, items)), dtype=pl.String),
            pl.Series("name", list(map(_NAME, items)), dtype=pl.String),
            *_texts(items),
            pl.Series("corr", list(map(_CORRELATION, args)), dtype=pl.Int64),
            pl.Series("nbytes", list(map(_BYTES, args)), dtype=pl.Int64),
        ]
    )


def _kept(frames: list[pl.DataFrame], offset: int, cats: dict[str, str]) -> pl.DataFrame:
    """The kept complete events of a batch of pieces, times in nanoseconds: filters and
    arithmetic as one query over the batch. Each kept event must have plain ids and times
    (else the file is read whole); a value that is not plain only turns into a null here."""
    frame = pl.concat(frames)
    # The few distinct categories are case-folded in Python, exactly as the whole reader does.
    folded = {c: cats.get(c.casefold()) for c in frame.get_column("cat").unique().to_list()}
    kept = (
        frame.lazy()
        .with_row_index("idx", offset)
        .with_columns(cat=pl.col("cat").replace_strict(folded, return_dtype=pl.String))
        .filter((pl.col("ph") == "X") & pl.col("cat").is_not_null())
        .select(
            "idx",
            "cat",
            "name",
            thread=pl.concat_str(_id("pid"), pl.lit("/"), _id("tid")),
            start=_ns("ts"),
            end=_ns("ts") + _ns("dur"),
            corr="corr",
            nbytes="nbytes",
            plain=pl.all_horizontal(
                pl.col("ts", "dur").str.contains(_PLAIN_US),
                pl.col("pid", "tid").str.contains(_PLAIN_ID),
            ),
        )
        .collect()
    )
    if not kept.get_column("plain").all():
        raise Unsure("a time that is not plain microseconds, or an id written otherwise")
    return kept.drop("plain")


def _id(column: str) -> pl.Expr:
    """A plain process or thread id as the whole reader formats it (``f"{pid}"``)."""
    text = pl.col(column)
    return (
        pl.when(text == "null")
        .then(pl.lit("None"))
        .when(text == "true")
        .then(pl.lit("True"))
        .when(text == "false")
        .then(pl.lit("False"))
        .otherwise(text.str.strip_prefix('"').str.strip_suffix('"'))
    )


def _ns(column: str) -> pl.Expr:
    """``"12.5"`` microseconds -> 12500 nanoseconds, exactly (a plain decimal of at most three
    places is read as a 128-bit decimal of scale 3, whose digits are the nanoseconds)."""
    return (pl.col(column).str.to_decimal(scale=3) * 1000).cast(pl.Int64, strict=False)


def _cuts(buffer: bytes | bytearray) -> Iterator[int]:
    """Positions of the ``}`` followed by ``,`` and then an object, from the last one back."""
    end = len(buffer)
    while (cut := buffer.rfind(b"},", 0, end)) > 0:
        if buffer[cut + 2 : cut + 258].lstrip()[:1] == b"{":
            yield cut
        end = cut


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
    head = _utf8(buffer[: opening + 1])
    if head.count(_KEY) != 1:
        raise Unsure("traceEvents named twice")
    members = _MEMBERS.decode(head + b"]}")
    if members.pop("traceEvents", None) != []:  # the name was no top-level member
        raise Unsure("no top-level traceEvents")
    events = bytearray(b"[" + buffer[opening + 1 :])  # "[" and the events read so far
    ascii_only = events.isascii()
    frames: list[pl.DataFrame] = []  # kept events
    batch: list[pl.DataFrame] = []  # pieces not yet filtered
    done = pending = 0  # events in frames, in batch
    for block in blocks:
        events += block
        ascii_only = ascii_only and block.isascii()
        if pending >= _BATCH:
            frames.append(_kept(batch, done, cats))
            done, batch, pending = done + pending, [], 0
        for tries, cut in enumerate(_cuts(events)):
            if tries == _TRIES:
                raise Unsure("no event boundary in the last pieces")
            events[cut + 1] = ord("]")  # the comma after the last whole event closes the piece
            try:
                items = _decode(events, cut + 2, ascii_only)
            except msgspec.ValidationError:
                raise
            except msgspec.DecodeError:  # a cut inside a string or a nested value: an earlier one
                events[cut + 1] = ord(",")
                continue
            batch.append(_columns(items))
            pending += len(items)
            del items  # its raw texts point into the buffer
            del events[: cut + 1]
            events[0] = ord("[")
            break
    buffer = bytes(events[1:])
    items, tail = _last_piece(_utf8(buffer))
    if set(tail) & (set(members) | {"traceEvents"}) != {"traceEvents"}:
        raise Unsure("a member written twice")
    members |= tail
    if items:
        batch.append(_columns(items))
    if batch:
        frames.append(_kept(batch, done, cats))
    members.pop("traceEvents", None)
    frames = [f.cast(schema) for f in frames]  # type: ignore[arg-type]
    return (pl.concat(frames) if frames else pl.DataFrame(schema=schema)), members


def _decode(events: bytearray, end: int, ascii_only: bool) -> list[_Event]:
    """The events of ``events[:end]`` (a JSON array), decoded in place (their raw texts hold
    the buffer until they are dropped)."""
    piece = memoryview(events)[:end]
    if not ascii_only:
        str(piece, "utf-8")  # msgspec does not check the strings it skips
    return _EVENTS.decode(piece)


def _utf8(piece: bytes) -> bytes:
    """The piece, known to be UTF-8 (msgspec does not check the strings it skips; the whole
    reader rejects a file with undecodable bytes anywhere)."""
    if not piece.isascii():
        piece.decode("utf-8")
    return piece
