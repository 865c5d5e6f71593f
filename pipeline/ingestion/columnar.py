"""The columnar reader of the fast engine: the usual measurements file, every line of one shape,
read by Arrow's JSON reader into typed columns and checked over the columns, without a Python
object per cell (:func:`read_columnar`; how it keeps the rules: see the comment below).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, pairwise, repeat
from operator import is_not
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.json as pj

from pipeline.contract.declare import column_rules, spec, timestamp_fields
from pipeline.ingestion.batch import _RUN_SCHEMA, Checked
from pipeline.ingestion.decoders import _RUN
from pipeline.ingestion.timestamps import parse_timestamp

# Most measurements files repeat one shape on every line: the same keys in the same order, only
# the values change. For such files the lines are parsed by Arrow's JSON reader into typed
# columns, and what the typed decoders above would check per value is proven over the columns:
# - the shape: every line's keys, in order, are those of its file's first line (found with array
#   operations over the bytes: with no backslash in a line every quote opens or closes a string,
#   so a closing quote followed by ":" ends a key, and each line must have as many as the first;
#   a key with blanks before its colon is then missing, and the file is left to the decoders),
#   and that first line is a valid run by the typed decoder. A key is compared by its length and
#   its bytes at a few offsets that tell apart the distinct keys of the first line; since the
#   reader refuses any key the schema does not name, that is a comparison of the whole key;
# - types: the reader is given that line's schema and refuses a line with a field of another
#   type (a string for a number, ``1.0`` for an integer, an integer beyond int64), an unknown
#   field, a key written twice or a number too large for a float; a null leaves a column empty,
#   which refuses the line here;
# - values: bounds, enumerations, NaN and Infinity (which the reader accepts), timestamps and the
#   rules across fields, as column expressions.
# Numbers: the reader's conversion of a decimal text to a float is correctly rounded, the same
# bits as Python's float() of that text (tests/test_bulk.py checks it on hard cases). A file the
# columnar reader does not vouch for goes to the typed decoders, and so on to the per-line
# validator.
_ARROW_TYPES = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64()}


_LEAF_TYPES = {  # the run fields that are one value (an enumeration is a string)
    name: _ARROW_TYPES[field.get("type", "string")]
    for name, field in spec("measurement")["properties"].items()
    if field.get("type", "string") in _ARROW_TYPES
}


@dataclass(frozen=True)
class _Shape:
    """The keys of a run line in written order and the Arrow schema they call for."""

    lengths: np.ndarray  # the byte length of each key of the line (nested ones too), in order
    probes: np.ndarray  # (keys, probes): where in each key a byte is compared (see _probes)
    expected: np.ndarray  # (keys, probes): the bytes found there in this line
    schema: pa.Schema
    cells: tuple[tuple[str, str], ...]  # (step, region) of each breakdown value, in order
    counters: tuple[str, ...]


def _numbers_of(value: Any) -> list[str] | None:
    """The names of an object of numbers (None when it is not one, or names one "")."""
    if not isinstance(value, dict) or "" in value:
        return None
    if not all(type(v) in (int, float) for v in value.values()):
        return None
    return list(value)


def _shape(line: bytes) -> _Shape | None:
    """The shape of one run line that the typed decoder accepts, else None."""
    try:
        _RUN.decode(line)
        doc = msgspec.json.decode(line)  # in written order
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    keys: list[str] = []
    fields: list[pa.Field] = []
    cells: list[tuple[str, str]] = []
    counters: list[str] = []
    for name, value in doc.items():
        keys.append(name)
        if name in _LEAF_TYPES:
            fields.append(pa.field(name, _LEAF_TYPES[name]))
        elif name == "counters":
            names = _numbers_of(value)
            if names is None:
                return None
            keys += names
            counters = names
            fields.append(pa.field(name, pa.struct([(n, pa.float64()) for n in names])))
        else:  # breakdown: flat {region: s} (the step "all") or nested {step: {region: s}}
            flat = _numbers_of(value)
            if flat is not None:
                keys += flat
                cells = [("all", region) for region in flat]
                fields.append(pa.field(name, pa.struct([(n, pa.float64()) for n in flat])))
                continue
            if "" in value:
                return None
            steps = []
            for step, regions in value.items():
                names = _numbers_of(regions)
                if names is None:
                    return None
                keys += [step, *names]
                cells += [(step, region) for region in names]
                steps.append((step, pa.struct([(n, pa.float64()) for n in names])))
            fields.append(pa.field(name, pa.struct(steps)))
    encoded = [k.encode() for k in keys]
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    offsets = _probes(encoded)
    probes = np.minimum(np.asarray(offsets, np.int64)[None, :], lengths[:, None] - 1)
    rows = zip(encoded, probes.tolist(), strict=True)
    expected = np.array([[k[i] for i in row] for k, row in rows], np.uint8).reshape(probes.shape)
    return _Shape(
        lengths,
        probes,
        expected,
        pa.schema(fields),
        tuple(cells),
        tuple(counters),
    )


def _probes(keys: list[bytes]) -> list[int]:
    """Offsets into a key (the last byte for a shorter key) whose bytes, with its length, tell
    apart every distinct key of ``keys``: a few where the names differ early. Every key a line
    of the shape writes is one of ``keys`` (the reader refuses any other), so equal lengths and
    equal bytes there mean equal keys.

    Only the offsets where two neighbours of a length differ in sorted order are candidates:
    together they tell apart every two keys of a length (between two keys, the first byte that
    differs is the smallest of their neighbours' along the way), and keys of other lengths differ
    by length. So the greedy choice below looks at fewer offsets than there are keys, and the
    cost is linear in the keys' total length however long one of them is."""
    distinct = sorted(set(keys))
    candidates = _split_offsets(distinct)

    def classes(offsets: list[int]) -> int:
        return len({(len(k), *(k[min(o, len(k) - 1)] for o in offsets)) for k in distinct})

    offsets: list[int] = []
    if len(candidates) * len(distinct) > _GREEDY_WORK:  # many names: every candidate
        return candidates
    while (have := classes(offsets)) < len(distinct):
        best = max(candidates, key=lambda o: classes([*offsets, o]))
        if classes([*offsets, best]) == have:  # cannot happen (see above); be exhaustive
            return candidates
        offsets.append(best)
    return offsets


_GREEDY_WORK = 1 << 16
"""Above this many (candidate, key) pairs the greedy search costs more than it saves."""


def _split_offsets(distinct: list[bytes]) -> list[int]:
    """The first offset at which each key differs from the next one of its length (sorted)."""
    by_length: dict[int, list[bytes]] = {}
    for key in distinct:  # sorted, so each length's keys stay sorted
        by_length.setdefault(len(key), []).append(key)
    found: set[int] = set()
    for same in by_length.values():
        for a, b in pairwise(same):
            found.add(_first_difference(a, b))
    return sorted(found)


def _first_difference(a: bytes, b: bytes) -> int:
    """The first offset where two distinct keys of one length differ (vectorized: linear)."""
    if len(a) <= 64:
        return next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    left, right = np.frombuffer(a, np.uint8), np.frombuffer(b, np.uint8)
    return int(np.argmax(left != right))


def _first_line(body: bytes) -> bytes:
    end = body.find(b"\n")
    return body if end < 0 else body[:end]


def _lines_of_shape(text: bytes, shape: _Shape) -> tuple[np.ndarray, np.ndarray]:
    """Per line of ``text`` (lines each ending with a newline): whether it is ``{...}`` without
    a backslash and its keys (each closing quote followed by a colon) are exactly those of
    ``shape``; and where each line ends."""
    buf = np.frombuffer(text, np.uint8)
    marks = np.flatnonzero((buf == ord("\n")) | (buf == ord('"')))
    newline = buf[marks] == ord("\n")
    ends = marks[newline]
    n = len(ends)
    starts = np.concatenate(([0], ends[:-1] + 1))
    ok = (ends > starts) & (buf[starts] == ord("{")) & (buf[np.maximum(ends - 1, 0)] == ord("}"))
    if text.find(b"\\") >= 0:  # rare: located only when present
        ok[np.searchsorted(ends, np.flatnonzero(buf == ord("\\")))] = False
    quotes = marks[~newline]
    quote_line = np.cumsum(newline)[~newline]  # the newlines before a quote: its line
    del marks, newline
    per_line = np.bincount(quote_line, minlength=n)
    odd = per_line % 2 == 1
    ok &= ~odd
    if odd.any():  # rare: the quotes of the lines after an odd one are paired anew
        shift = (np.cumsum(odd) - odd)[quote_line] % 2
        at = np.flatnonzero((np.arange(len(quotes)) + shift) % 2 == 1)
        opening, closing, closing_line = quotes[at - 1], quotes[at], quote_line[at]
    else:  # every line pairs its quotes: the first of each pair opens a string, the second closes
        opening, closing, closing_line = quotes[0::2], quotes[1::2], quote_line[1::2]
    is_key = buf[closing + 1] == ord(":")
    key_end, key_start = closing[is_key], opening[is_key] + 1
    keys_per_line = np.bincount(closing_line[is_key], minlength=n)
    m = len(shape.lengths)
    ok &= keys_per_line == m
    lines = np.flatnonzero(ok)
    if len(lines) == 0:
        return ok, ends
    at = (np.cumsum(keys_per_line) - m)[lines][:, None] + np.arange(m)  # (lines, m) keys
    same_lengths = ((key_end - key_start)[at] == shape.lengths).all(axis=1)
    ok[lines[~same_lengths]] = False
    lines, at = lines[same_lengths], at[same_lengths]
    written = buf[key_start[at][:, :, None] + shape.probes]  # (lines, keys, probes)
    ok[lines[~(written == shape.expected).all(axis=(1, 2))]] = False
    return ok, ends


def _read_columns(joined: bytes, schema: pa.Schema) -> pa.Table | None:
    """The lines of ``joined`` as columns of ``schema``; None when a line does not fit it."""
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    try:
        return pj.read_json(io.BytesIO(joined), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
        return None


def _written(array: pa.Array) -> np.ndarray:
    """Per row, whether ``array`` holds a value (not null), from its validity bitmap (Array's
    is_valid would load pyarrow.compute, a tenth of a second)."""
    if array.null_count == 0:
        return np.ones(len(array), bool)
    bits = np.unpackbits(np.frombuffer(array.buffers()[0], np.uint8), bitorder="little")
    return bits[array.offset : array.offset + len(array)].astype(bool)


def _leaves(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The numbers of an object column (one level of objects or two) as a (lines, numbers)
    matrix in written order, and per line whether they are all finite and >= 0 and no object
    of it is null (NaN, the reader's value for a null number, is not finite)."""
    sound = np.ones(table.num_rows, bool)
    if name not in table.column_names:
        return np.zeros((table.num_rows, 0)), sound
    arrays = [table.column(name).combine_chunks()]
    while any(pa.types.is_struct(a.type) for a in arrays):
        for a in arrays:
            sound &= _written(a)
        arrays = [c for a in arrays for c in (a.flatten() if pa.types.is_struct(a.type) else [a])]
    matrix = np.zeros((table.num_rows, len(arrays)))
    for i, a in enumerate(arrays):
        matrix[:, i] = a.to_numpy(zero_copy_only=False)
    sound &= (np.isfinite(matrix) & (matrix >= 0)).all(axis=1)
    return matrix, sound


def _columnar_group(
    bodies: Sequence[bytes], positions: Sequence[int], shape: _Shape
) -> tuple[np.ndarray, np.ndarray, Checked | None]:
    """Files of a batch (at ``positions``) tried with ``shape``: the positions of those whose
    every line has it, of those the columnar reader vouches for, and the rows of these."""
    parts = [b if b.endswith(b"\n") else b + b"\n" for b in bodies]
    sizes = np.fromiter(map(len, parts), np.int64, len(parts))
    joined = b"".join(parts)
    fit, ends = _lines_of_shape(joined, shape)
    file_of = np.searchsorted(np.cumsum(sizes), ends, side="right")
    fits = np.bincount(file_of[~fit], minlength=len(parts)) == 0
    at = np.asarray(positions, np.int64)
    none = np.zeros(0, np.int64)
    if not fits.any():
        return none, none, None
    if not fits.all():  # rare: the reader is given only the files of this shape
        joined = b"".join(compress(parts, fits))
        ends = np.flatnonzero(np.frombuffer(joined, np.uint8) == ord("\n"))
        file_of = np.searchsorted(np.cumsum(sizes[fits]), ends, side="right")
    tried, n_files = at[fits], int(fits.sum())
    table = _read_columns(joined, shape.schema)
    if table is None or table.num_rows != len(ends):
        return tried, none, None
    names = set(shape.schema.names)
    runs = pl.from_arrow(table.select([n for n in shape.schema.names if n in _LEAF_TYPES]))
    assert isinstance(runs, pl.DataFrame)
    per_file = np.bincount(file_of, minlength=n_files)
    first = np.cumsum(per_file) - per_file  # the first line of each file
    runs = runs.with_columns(
        attempt=pl.Series(tried[file_of]),
        line=pl.Series(np.arange(len(ends)) - first[file_of] + 1),
    )
    good = (
        runs.select(
            column_rules("measurement", names)
            & ~pl.struct("attempt", "side", "repetition").is_duplicated()
        )
        .to_series()
        .fill_null(False)
        .to_numpy()
    )
    stamps = {}
    for name in timestamp_fields("measurement"):
        if name in names:
            parsed = [None if s is None else parse_timestamp(s) for s in runs[name].to_list()]
            good &= np.fromiter(map(is_not, parsed, repeat(None)), bool, len(parsed))
            stamps[name] = pl.Series(name, parsed, dtype=_RUN_SCHEMA[name])
    seconds, sound_seconds = _leaves(table, "breakdown")
    values, sound_values = _leaves(table, "counters")
    good &= sound_seconds & sound_values
    vouched = np.bincount(file_of[~good], minlength=n_files) == 0
    kept = vouched[file_of]
    runs = (
        runs.with_columns(*stamps.values())
        .select(
            pl.col(n) if n in runs.columns or n in stamps else pl.lit(None, d).alias(n)
            for n, d in _RUN_SCHEMA.items()
        )
        .cast(_RUN_SCHEMA)
        .filter(pl.Series(kept))
    )
    n_runs = runs.height
    cells = len(shape.cells)
    step = pl.Series([s for s, _ in shape.cells], dtype=pl.String)
    region = pl.Series([r for _, r in shape.cells], dtype=pl.String)
    pattern = np.tile(np.arange(cells), n_runs)
    breakdown = pl.DataFrame(
        {
            "run": np.repeat(np.arange(n_runs, dtype=np.int64), cells),
            "step": step.gather(pattern),
            "region": region.gather(pattern),
            "seconds": seconds[kept].ravel(),
        }
    )
    n_counters = len(shape.counters)
    counter = pl.Series(list(shape.counters), dtype=pl.String)
    counters = pl.DataFrame(
        {
            "run": np.repeat(np.arange(n_runs, dtype=np.int64), n_counters),
            "counter": counter.gather(np.tile(np.arange(n_counters), n_runs)),
            "value": values[kept].ravel(),
        }
    )
    return tried, tried[vouched], Checked(vouched, runs, breakdown, counters)


_SHAPES = 4
"""Shapes tried per batch: the usual batch has one; files of a shape beyond these are left to
the typed decoders."""


def read_columnar(bodies: Sequence[bytes]) -> tuple[np.ndarray, list[Checked]]:
    """The files of a batch the columnar reader vouches for (a mask) and their rows, one part
    per shape (``attempt`` is the position in the batch)."""
    vouched = np.zeros(len(bodies), bool)
    parts = []
    left = [i for i, body in enumerate(bodies) if body[:1] == b"{"]
    for _ in range(_SHAPES):
        if not left:
            break
        shape = _shape(_first_line(bodies[left[0]]))
        if shape is None:
            left = left[1:]
            continue
        fitting, accepted, checked = _columnar_group([bodies[i] for i in left], left, shape)
        vouched[accepted] = True
        if checked is not None:
            parts.append(checked)
        tried = {left[0], *fitting.tolist()}
        left = [i for i in left if i not in tried]
    return vouched, parts
