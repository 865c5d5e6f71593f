"""Streaming reader of a Kineto trace: the complete events as a frame, in bounded memory.

The file (plain or gzip) is read in blocks. The ``traceEvents`` array is cut into pieces at
``},`` boundaries and each piece is decoded in place as a JSON array by a typed msgspec decoder
that keeps only the fields the importer uses (everything else is skipped, never built). A cut
inside a string or inside a nested object leaves a piece that is not a valid array (then the cut
before it is tried), so when every piece decodes, the pieces are exactly the items of the array.
Each piece's kept complete events become columns at once (so no list of all events is ever
held): the categories are judged once per distinct value, the process and thread ids printed as
the whole reader prints them, and the times (kept as their JSON text, exact) turned into integer
nanoseconds by a few NumPy calls over the piece. The members before and after the array are
decoded too (the trace's version fields), so the whole document is known to be valid JSON.

Whenever anything is not as expected (a bare event array, an event that is not an object, a time
that is not plain microseconds with at most three decimals, an id that is no integer, string or
null, undecodable bytes, a piece that does not decode …) the reader returns None and the caller
reads the file whole, which reports the exact error. So the stream changes the cost, never the
result.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from decimal import Decimal
from itertools import chain, compress, repeat
from operator import attrgetter, eq
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np
import polars as pl
from msgspec import Raw, Struct
from numpy.lib.stride_tricks import sliding_window_view

from pipeline.contract.files import InputFileError, open_regular

_TRIES = 16  # cuts tried in one buffer before the stream gives up on the file
MAX_PIECE = 64 * 2**20
"""Bytes read without an event boundary (or before ``traceEvents``) after which the stream gives
up on the file: Kineto's events are far smaller, and 300 MB of blanks (a 0.3 MB gzip file) held
whole took `import` to 1.3 GB. The whole reader then applies its own limits."""
BLOCK = 2 * 2**20  # small pieces: less memory at once, and faster (they stay in cache)
_KEY = b'"traceEvents"'


_NULL = Raw(b"null")  # a missing field reads as JSON null


class _Args(Struct, frozen=True, gc=False):
    correlation: int | None = None
    bytes: int | None = None


_NO_ARGS = _Args()


_Id = int | str | None  # (a boolean id, which Kineto never writes, is left to the whole reader)


class _Event(Struct, gc=False):
    """The fields the importer reads, typed as Kineto writes them; an event written otherwise
    (a category that is no string, a correlation that is no integer, an id that is a number
    with a fraction or a boolean …) fails to decode and the file is read whole, with the whole
    reader's exact rules. The times stay JSON text (exact: :func:`_ns` makes nanoseconds)."""

    ph: str | None = None
    cat: str = ""
    name: str = ""
    pid: _Id = None
    tid: _Id = None
    ts: Raw = _NULL
    dur: Raw = _NULL
    args: _Args = _NO_ARGS


class Unsure(Exception):
    """The stream cannot vouch for this file: read it whole."""


_EVENTS = msgspec.json.Decoder(list[_Event])
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


_PH, _CAT, _NAME, _ARGS = map(attrgetter, ("ph", "cat", "name", "args"))
_TIMES = attrgetter("ts", "dur")
_PID, _TID, _THREAD = attrgetter("pid"), attrgetter("tid"), attrgetter("pid", "tid")
_CORRELATION, _BYTES = attrgetter("correlation"), attrgetter("bytes")


def _columns(items: list[_Event], offset: int, cats: dict[str, str]) -> pl.DataFrame:
    """The kept complete events of one piece as columns, times in nanoseconds (no loop per
    event in Python: attribute lists by ``map``, events picked by ``compress``, then a few calls
    over the whole piece). ``offset`` is the index of the piece's first event in the array.
    Each kept event must have plain times, else the file is read whole."""
    complete = list(map(eq, map(_PH, items), repeat("X")))
    events = list(compress(items, complete))
    written = list(map(_CAT, events))
    # The few distinct categories are case-folded in Python, exactly as the whole reader does.
    kept_as = {cat: cats.get(cat.casefold()) for cat in set(written)}
    category = list(map(kept_as.__getitem__, written))  # None for a category not kept
    kept = list(compress(events, category))  # (no kept category is the empty string)
    indices = compress(compress(range(offset, offset + len(items)), complete), category)
    args = list(map(_ARGS, kept))
    times, plain = _ns(chain.from_iterable(map(_TIMES, kept)), 2 * len(kept))  # ts, dur, ts, …
    if not plain.all():
        raise Unsure("a time that is not plain microseconds")
    start = times[0::2]
    return pl.DataFrame(
        [
            pl.Series("idx", list(indices), dtype=pl.Int64),
            pl.Series("cat", list(filter(None, category)), dtype=pl.String),
            pl.Series("name", list(map(_NAME, kept)), dtype=pl.String),
            _threads(kept),
            pl.Series("start", start),
            pl.Series("end", start + times[1::2]),
            pl.Series("corr", list(map(_CORRELATION, args)), dtype=pl.Int64),
            pl.Series("nbytes", list(map(_BYTES, args)), dtype=pl.Int64),
        ]
    )


def _threads(events: list[_Event]) -> pl.Series:
    """Each event's ``pid/tid`` as the whole reader prints it (``f"{pid}/{tid}"``)."""
    try:  # integers or null (CPU threads, as Kineto writes them): one cast to text
        ids = [pl.Series(list(map(get, events)), dtype=pl.Int64) for get in (_PID, _TID)]
    except (TypeError, OverflowError):  # a string or an integer beyond 64 bits
        return _threads_by_pair(list(map(_THREAD, events)))
    pid, tid = (
        i.cast(pl.String).fill_null("None") if i.has_nulls() else i.cast(pl.String) for i in ids
    )
    return (pid + "/" + tid).alias("thread")


def _threads_by_pair(pairs: list[tuple[_Id, _Id]]) -> pl.Series:
    """A piece holds few distinct (pid, tid): each is printed once, the column gathered by
    code."""
    distinct = dict.fromkeys(pairs)  # of ints, strings and None: no two of them are equal
    codes = {pair: code for code, pair in enumerate(distinct)}
    printed = pl.Series("thread", [f"{pid}/{tid}" for pid, tid in distinct], dtype=pl.String)
    return printed.gather(pl.Series(list(map(codes.__getitem__, pairs)), dtype=pl.UInt32))


_WIDTH = 19  # the longest plain time: 15 digits, a point and 3 decimals
_PAD = b" " * _WIDTH
_DIGIT_VALUES = np.array(
    [c - ord("0") if chr(c).isdigit() and c < 128 else 0 for c in range(256)], dtype=np.uint64
)
_WEIGHTS = 10 ** np.arange(_WIDTH - 1, -1, -1, dtype=np.uint64)
_POWERS = 10 ** np.arange(_WIDTH + 1, dtype=np.uint64)


def _ns(texts: Iterator[Raw], count: int) -> tuple[np.ndarray, np.ndarray]:
    """JSON texts of times in microseconds -> (exact integer nanoseconds, which were plain).

    Plain is what Kineto writes: digits, at most 15 before the point and 1 to 3 after it
    (valid JSON, so no sign, exponent or leading zero goes unnoticed: those hold other
    characters). The texts are joined by newlines, which no JSON value outside a string holds.
    The 19 bytes before each newline, each as its digit value (0 for any other character),
    make one row of a matrix; one product with the powers of ten reads each row as an integer
    (below 10^19 < 2^64), whose last ``length`` digits are the text's digits (a point reads as
    a 0 digit, and the newline before the text as another). The point's place splits that into
    whole microseconds and decimals. All in integers of 64 bits: exact. A text that is not
    plain gets a meaningless value, and False."""
    padded = np.frombuffer(b"\n".join(chain((_PAD,), texts, (b"",))), np.uint8)
    text = padded[_WIDTH + 1 :]
    newline = text == ord("\n")
    ends = np.flatnonzero(newline)
    if len(ends) != count:  # a nested value written over several lines
        raise Unsure("a time that is not a plain value")
    length = np.diff(ends, prepend=-1) - 1
    point = text == ord(".")
    plain = (length >= 1) & (length <= _WIDTH)
    other = ~((text - np.uint8(ord("0")) <= 9) | point | newline)
    plain[np.searchsorted(ends, np.flatnonzero(other))] = False
    points = np.flatnonzero(point)
    rows = np.searchsorted(ends, points)
    plain[rows[1:][np.diff(rows) == 0]] = False  # two points in one text
    has_point = np.zeros(count, dtype=bool)
    has_point[rows] = True
    decimals = np.zeros(count, dtype=np.int64)
    decimals[rows] = ends[rows] - points - 1
    whole = length - decimals - has_point
    plain &= (whole >= 1) & (whole <= 15) & (decimals <= 3) & (~has_point | (decimals >= 1))
    window = sliding_window_view(padded, _WIDTH)[ends + 1]  # the 19 bytes before each newline
    number = _DIGIT_VALUES[window] @ _WEIGHTS % _POWERS[np.minimum(length, _WIDTH)]
    decimals = np.minimum(decimals, 3)
    micro = number // _POWERS[decimals + has_point]
    fraction = number % _POWERS[decimals]
    return (micro * 1000 + fraction * _POWERS[3 - decimals]).astype(np.int64), plain


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
    except OverflowError:  # an integer argument beyond 64 bits: the whole reader's rule
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
        if len(buffer) > MAX_PIECE:
            raise Unsure("no traceEvents array in the first bytes")
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
    frames: list[pl.DataFrame] = []  # kept events, piece by piece
    done = 0  # events before the buffer
    for block in blocks:
        events += block
        if len(events) > MAX_PIECE:
            raise Unsure("no event boundary")
        ascii_only = ascii_only and block.isascii()
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
            frames.append(_columns(items, done, cats))
            done += len(items)
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
        frames.append(_columns(items, done, cats))
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
