"""The fast engine of ingest's reader: many attempts' files checked at once, as columns.

It accepts an attempt only when every file certainly satisfies the schemas and every rule of
:mod:`pipeline.ingestion.validate` (property tests hold it to that); any other attempt goes to the
precise validator, which accepts it too or names every error. So the errors and the stored rows
are the precise path's; only their cost changes. How it keeps the rules: see the comments below.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import chain, compress, pairwise, repeat
from operator import attrgetter, is_not
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.json as pj
from msgspec import UNSET, Struct

from pipeline.contract.declare import (
    column_rules,
    conditional_rules,
    spec,
    struct,
    timestamp_fields,
)
from pipeline.contract.layout import ATTEMPT_FILE, MECHANISM_FILE
from pipeline.contract.schemas import table
from pipeline.ingestion.files import Document, Run
from pipeline.ingestion.folders import AttemptFiles
from pipeline.ingestion.timestamps import parse_timestamp

# How the typed decoders keep the rules without a Python loop per cell:
# - types, enumerations, bounds, unknown fields, NaN/Infinity and numbers too large for a float,
#   integers written as ``1.0``, invalid UTF-8 and lone surrogates: the msgspec decoders, built
#   from the schemas by pipeline.contract.declare, refuse them;
# - repeated keys (which a decoder silently collapses): the keys decoded are counted from the
#   lengths of the decoded objects and compared with the ``":`` of the file, which is at least the
#   number of keys written; equal counts prove that no key was written twice (a key written as
#   ``"a" : 1`` makes the count unsure: the file goes to the precise validator);
# - ``metric > 0`` for an ok run (the schema's if/then, a column expression from the same
#   declaration), a breakdown mixing flat and nested entries, ``(side, repetition)`` twice in one
#   file: column expressions over all the lines of the batch.
# The usual file, whose lines all have the keys of its first line, is read before that by a
# columnar reader (Arrow's JSON reader with that line's schema; see "the columnar reader").
# The typed decoders, built from the schemas' declaration (fields, types, enumerations, patterns,
# bounds); the rules across fields are checked below.
_ATTEMPT = msgspec.json.Decoder(struct("attempt"))
_MECHANISM = msgspec.json.Decoder(struct("mechanism"))
_CAMPAIGN = msgspec.json.Decoder(struct("campaign"))
_RUN = msgspec.json.Decoder(struct("measurement"))
_SPACED_COLON = re.compile(rb'"[ \t\r\n]+:')
_BOM = b"\xef\xbb\xbf"
_EMPTY: dict[str, Any] = {}


def _keys_written(body: bytes) -> int | None:
    """An upper bound of the keys written in a JSON text: its ``":`` count (a key followed by
    blanks before its colon makes the bound unsure: None)."""
    keys = body.count(b'":')
    if keys != body.count(b":") and _SPACED_COLON.search(body):  # every colon after a quote?
        return None
    return keys


def _no_bom(body: bytes) -> bytes:
    return body[3:] if body.startswith(_BOM) else body


def _set_fields(item: Struct) -> dict[str, Any]:
    return {k: v for k, v in msgspec.structs.asdict(item).items() if v is not UNSET}


def _document(body: bytes, decoder: msgspec.json.Decoder[Any], extra_keys: Any) -> Any:
    """The decoded struct when ``body`` is certainly a valid document, else None;
    ``extra_keys(item)`` counts the keys of its nested objects."""
    try:
        item = decoder.decode(_no_bom(body))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    keys = len(_set_fields(item)) + extra_keys(item)
    return item if _keys_written(body) == keys else None


def _nested_keys(attempt: Any) -> int:
    """Keys of the attempt's nested objects: the environment's, the sequential object's and the
    commands' (two sides of two keys each)."""
    nested = 0 if attempt.sequential is UNSET else len(_set_fields(attempt.sequential))
    nested += 0 if attempt.commands is UNSET else 2 + 2 * 2
    return nested + (0 if attempt.environment is UNSET else len(attempt.environment))


def fast_campaign(body: bytes, folder_name: str) -> Document | None:
    """campaign.json when it is certainly valid and names its folder, else None (the per-line
    validator then names every problem): without jsonschema, whose import alone costs about
    0.1 s of an ingest. The document's values are those ``json`` would give (ints stay ints:
    the policy's canonical text depends on it)."""
    campaign = _document(body, _CAMPAIGN, extra_keys=_campaign_keys)
    if campaign is None or campaign.campaign_id != folder_name:
        return None
    if parse_timestamp(campaign.created_at) is None:
        return None
    text = body.decode("utf-8-sig")
    return Document(msgspec.json.decode(text), hashlib.sha256(body).hexdigest(), text)


def _campaign_keys(campaign: Any) -> int:
    return 2 + len(_set_fields(campaign.policy))  # metric's name and better, the policy's


def fast_attempt(
    files: AttemptFiles, *, benchmark: bool
) -> tuple[Document, Document | None] | None:
    """attempt.json and mechanism.json when both are certainly valid, else None."""
    body = files.bodies[ATTEMPT_FILE]
    attempt = _document(body, _ATTEMPT, extra_keys=_nested_keys)
    if attempt is None or attempt.attempt_id != files.folder.name:
        return None
    if (attempt.declared_at is UNSET) != (attempt.mechanism_sha256 is UNSET):
        return None
    if (attempt.kind is UNSET) != (attempt.confirms is UNSET):
        return None
    if attempt.chosen is not UNSET and attempt.kind is UNSET:
        return None  # the precise validator names the rule
    stamps = [attempt.started_at] + ([] if attempt.declared_at is UNSET else [attempt.declared_at])
    if any(parse_timestamp(s) is None for s in stamps):
        return None
    mechanism = None
    if MECHANISM_FILE in files.bodies:
        if benchmark:
            return None
        mechanism = _fast_mechanism(files.bodies[MECHANISM_FILE])
        if mechanism is None:
            return None
    data = _set_fields(attempt)
    if attempt.sequential is not UNSET:
        data["sequential"] = msgspec.structs.asdict(attempt.sequential)
    if attempt.commands is not UNSET:
        data["commands"] = msgspec.to_builtins(attempt.commands)
    return Document(data, hashlib.sha256(body).hexdigest(), ""), mechanism


def _fast_mechanism(body: bytes) -> Document | None:
    try:
        head = _MECHANISM.decode(_no_bom(body))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    items = head.expectations
    if _keys_written(body) != 3 + 3 * len(items):  # schema, hypothesis, expectations + items
        return None
    if len({(e.target, e.name) for e in items}) != len(items):
        return None
    if all(e.expect == "unchanged" for e in items):
        return None
    data = {
        "schema": head.schema,
        "hypothesis": head.hypothesis,
        "expectations": [msgspec.structs.asdict(e) for e in items],
    }
    return Document(data, hashlib.sha256(body).hexdigest(), "")


# -- measurement lines ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Lines:
    """The decoded lines of many measurements files: one entry per non-blank line."""

    attempt: np.ndarray  # position of the attempt in the batch
    line: np.ndarray  # 1-based line number in its file
    runs: list[Any]
    written_keys: np.ndarray  # per attempt: the key bound of its file (-1: unsure)


def _one_object_per_line(body: bytes) -> int:
    """The number of lines when every line of ``body`` is ``{...}`` and none is blank (the
    usual file), else 0. Then a stream decoder that yields that many values has found exactly
    one per line: a value cannot continue on a line that starts with ``{`` after a line that
    ends with ``}``."""
    core = body[:-1] if body.endswith(b"\n") else body
    if not (core.startswith(b"{") and core.endswith(b"}")):
        return 0
    newlines = core.count(b"\n")
    return newlines + 1 if core.count(b"}\n{") == newlines else 0


def _file_runs(body: bytes) -> tuple[list[int], list[Any]]:
    """Line numbers and decoded runs of the non-blank lines (raises a msgspec error)."""
    body = _no_bom(body)
    n = _one_object_per_line(body)
    if n:
        runs = _RUN.decode_lines(body)
        if len(runs) == n:
            return list(range(1, n + 1)), runs
    lines = body.split(b"\n")
    numbers = [i for i, raw in enumerate(lines, start=1) if raw.strip()]
    return numbers, list(map(_RUN.decode, [lines[i - 1] for i in numbers]))


def decode_lines(bodies: Sequence[bytes]) -> tuple[Lines, np.ndarray]:
    """Decode every line of every file; the second value says per file whether all decoded."""
    decoded: list[bool] = []
    attempts: list[np.ndarray] = []
    numbers: list[int] = []
    runs: list[Any] = []
    written: list[int] = []
    for position, body in enumerate(bodies):
        try:
            found, items = _file_runs(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            decoded.append(False)
            written.append(-1)
            continue
        decoded.append(True)
        bound = _keys_written(body)
        written.append(-1 if bound is None else bound)
        attempts.append(np.full(len(items), position, np.int64))
        numbers += found
        runs += items
    lines = Lines(
        attempt=np.concatenate(attempts) if attempts else np.zeros(0, np.int64),
        line=np.asarray(numbers, np.int64),
        runs=runs,
        written_keys=np.asarray(written, np.int64),
    )
    return lines, np.asarray(decoded, bool)


def _flatten(dicts: list[dict[str, Any]]) -> tuple[np.ndarray, list[str], list[Any]]:
    """(entries per dict, keys, values) of many dicts, without a Python loop per entry."""
    sizes = np.fromiter(map(len, dicts), np.int64, len(dicts))
    keys = list(chain.from_iterable(dicts))
    values = list(chain.from_iterable(map(dict.values, dicts)))
    return sizes, keys, values


def _given(values: list[Any]) -> list[dict[str, Any]]:
    return [_EMPTY if v is UNSET else v for v in values]


def breakdown_cells(runs: list[Any]) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """Breakdown cells (run, step, region, seconds) in line and key order, a flat breakdown
    being the step ``all``; per line, whether it mixes flat and nested entries, and its keys."""
    n_steps, steps, values = _flatten(_given(list(map(_BREAKDOWN, runs))))
    line_of_step = np.repeat(np.arange(len(runs), dtype=np.int64), n_steps)
    nested = np.fromiter(map(isinstance, values, repeat(dict)), bool, len(values))
    nested_at, flat_at = np.flatnonzero(nested), np.flatnonzero(~nested)
    n_nested = np.bincount(line_of_step[nested_at], minlength=len(runs))
    mixed = (n_nested > 0) & (n_nested < n_steps)
    steps_of = values if len(flat_at) == 0 else list(compress(values, nested))
    n_regions = np.fromiter(map(len, steps_of), np.int64, len(steps_of))
    seconds = chain.from_iterable(map(dict.values, steps_of))
    step_names = pl.Series(steps, dtype=pl.String)
    of_cell = np.repeat(nested_at, n_regions)
    parts = [
        pl.DataFrame(
            {
                "run": line_of_step[of_cell],
                "step": step_names.gather(of_cell),
                "region": pl.Series(list(chain.from_iterable(steps_of)), dtype=pl.String),
                "seconds": np.fromiter(seconds, np.float64, len(of_cell)),
            }
        ),
        pl.DataFrame(
            {
                "run": line_of_step[flat_at],
                "step": pl.repeat("all", len(flat_at), dtype=pl.String, eager=True),
                "region": step_names.gather(flat_at),
                "seconds": np.fromiter(compress(values, ~nested), np.float64, len(flat_at)),
            }
        ),
    ]
    if len(flat_at) == 0 or len(nested_at) == 0:  # the usual case: nothing to interleave
        cells = parts[0] if len(flat_at) == 0 else parts[1]
    else:  # a line is all nested or all flat (else rejected): key order is kept
        cells = pl.concat(parts).sort("run", maintain_order=True)
    keys = n_steps + np.bincount(line_of_step[of_cell], minlength=len(runs))
    return cells, mixed, keys


def counter_cells(runs: list[Any]) -> tuple[pl.DataFrame, np.ndarray]:
    """Counter entries (run, counter, value) in line and key order, and the keys per line."""
    sizes, names, values = _flatten(_given(list(map(_COUNTERS, runs))))
    cells = pl.DataFrame(
        {
            "run": np.repeat(np.arange(len(runs), dtype=np.int64), sizes),
            "counter": pl.Series(names, dtype=pl.String),
            "value": np.asarray(values, np.float64),
        }
    )
    return cells, sizes


_SIDE, _REPETITION, _STATUS, _METRIC, _BREAKDOWN, _COUNTERS, _ORDER, _STARTED, _FINISHED = (
    attrgetter(name)
    for name in (
        "side",
        "repetition",
        "status",
        "metric",
        "breakdown",
        "counters",
        "order",
        "started_at",
        "finished_at",
    )
)


def _present(values: list[Any]) -> np.ndarray:
    return np.fromiter(map(is_not, values, repeat(UNSET)), bool, len(values))


def _timestamps(values: list[Any]) -> list[datetime | None]:
    """Parsed optional timestamps: None where absent or not valid."""
    return [None if v is UNSET else parse_timestamp(v) for v in values]


@dataclass(frozen=True)
class Checked:
    """Which attempts of a batch the fast path accepts, and their run, breakdown and counter
    rows keyed by ``attempt`` (position in the batch) and ``run`` (line index)."""

    accepted: np.ndarray
    runs: pl.DataFrame  # attempt, side, repetition, status, metric, line
    breakdown: pl.DataFrame  # run, step, region, seconds
    counters: pl.DataFrame  # run, counter, value


def check_lines(bodies: Sequence[bytes]) -> Checked:
    """Check the measurements files of a batch of attempts at once: the columnar reader first,
    the typed decoders for the files it does not vouch for."""
    vouched, parts = read_columnar(bodies)
    rest = np.flatnonzero(~vouched)
    accepted = vouched.copy()
    if len(rest):
        decoded = decode_and_check([bodies[i] for i in rest.tolist()])
        accepted[rest] = decoded.accepted
        at = pl.Series(rest).gather(decoded.runs["attempt"].to_numpy())
        parts.append(replace(decoded, runs=decoded.runs.with_columns(attempt=at)))
    if len(parts) == 1:
        return replace(parts[0], accepted=accepted)
    offsets = np.cumsum([0] + [p.runs.height for p in parts])
    shifted = [
        (p.breakdown.with_columns(pl.col("run") + o), p.counters.with_columns(pl.col("run") + o))
        for p, o in zip(parts, offsets.tolist(), strict=False)
    ]
    return Checked(
        accepted,
        pl.concat([p.runs for p in parts]),
        pl.concat([b for b, _ in shifted]),
        pl.concat([c for _, c in shifted]),
    )


def _run_frame(runs: list[Any], attempt: np.ndarray, line: np.ndarray) -> pl.DataFrame:
    """The ``samples`` columns of decoded runs (typed structs, or the precise validator's
    documents seen through :class:`_Fields`): the one row builder of both paths."""
    order = list(map(_ORDER, runs))
    started_at = _timestamps(list(map(_STARTED, runs)))
    finished_at = _timestamps(list(map(_FINISHED, runs)))
    return pl.DataFrame(
        {
            "attempt": attempt,
            "side": pl.Series(list(map(_SIDE, runs)), dtype=pl.String),
            "repetition": pl.Series(list(map(_REPETITION, runs)), dtype=pl.Int64),
            "status": pl.Series(list(map(_STATUS, runs)), dtype=pl.String),
            "metric": pl.Series(
                [None if m is UNSET else m for m in map(_METRIC, runs)], dtype=pl.Float64
            ),
            "line": line,
            "order": pl.Series([None if o is UNSET else o for o in order], dtype=pl.Int64),
            "started_at": pl.Series(started_at, dtype=pl.Datetime("us", "UTC")),
            "finished_at": pl.Series(finished_at, dtype=pl.Datetime("us", "UTC")),
        },
        schema=_RUN_SCHEMA,
    )


class _Fields:
    """A parsed run document read like a typed struct: a field it lacks is UNSET."""

    __slots__ = ("_doc",)

    def __init__(self, doc: dict[str, Any]) -> None:
        self._doc = doc

    def __getattr__(self, name: str) -> Any:
        return self._doc.get(name, UNSET)


def parsed_runs(attempts: Sequence[tuple[int, Sequence[Run]]]) -> Checked:
    """The rows of attempts the precise validator accepted (each given with its position in the
    batch), built like the typed decoders' rows."""
    runs = [_Fields(run.data) for _, found in attempts for run in found]
    position = np.asarray([p for p, found in attempts for _ in found], np.int64)
    line = np.asarray([run.line for _, found in attempts for run in found], np.int64)
    return Checked(
        np.ones(len(attempts), bool),
        _run_frame(runs, position, line),
        breakdown_cells(runs)[0],
        counter_cells(runs)[0],
    )


def nothing_checked(n: int) -> Checked:
    """No attempt of a batch of ``n`` accepted, no rows: the precise mode's bulk check."""
    return replace(parsed_runs([]), accepted=np.zeros(n, bool))


def decode_and_check(bodies: Sequence[bytes]) -> Checked:
    """Decode and check the measurements files of a batch of attempts at once (the typed
    decoders)."""
    lines, decoded = decode_lines(bodies)
    runs = lines.runs
    metric = list(map(_METRIC, runs))
    has_metric = _present(metric)
    order = list(map(_ORDER, runs))
    started = list(map(_STARTED, runs))
    finished = list(map(_FINISHED, runs))
    frame = _run_frame(runs, lines.attempt, lines.line)
    started_ok = frame["started_at"].is_not_null().to_numpy() | ~_present(started)
    finished_ok = frame["finished_at"].is_not_null().to_numpy() | ~_present(finished)
    breakdown, mixed, breakdown_keys = breakdown_cells(runs)
    counters, counter_keys = counter_cells(runs)
    has_breakdown = _present(list(map(_BREAKDOWN, runs)))
    has_counters = _present(list(map(_COUNTERS, runs)))
    recorded = sum(_present(values) for values in (order, started, finished))
    keys = 3 + has_metric + has_breakdown + has_counters + recorded + breakdown_keys + counter_keys
    bad = frame.select(
        bad=~conditional_rules("measurement", {"metric"}).fill_null(False)
        | pl.struct("attempt", "side", "repetition").is_duplicated()
        | pl.Series(mixed | ~started_ok | ~finished_ok)
    )["bad"].to_numpy()
    n = len(bodies)
    failed = np.bincount(lines.attempt[bad], minlength=n) > 0
    counted = np.bincount(lines.attempt, weights=keys, minlength=n).astype(np.int64)
    accepted = decoded & ~failed & (counted == lines.written_keys)
    return Checked(accepted, frame, breakdown, counters)


# -- the columnar reader: the usual file without a Python object per cell -------------------------
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


_RUN_SCHEMA = pl.Schema(
    {
        "attempt": pl.Int64(),
        "side": pl.String(),
        "repetition": pl.Int64(),
        "status": pl.String(),
        "metric": pl.Float64(),
        "line": pl.Int64(),
        "order": pl.Int64(),
        "started_at": pl.Datetime("us", "UTC"),
        "finished_at": pl.Datetime("us", "UTC"),
    }
)


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


RUN_TABLES = ("samples", "breakdown", "counters")


def run_frames(
    campaign_ids: Sequence[str], attempt_ids: Sequence[str], checked: Checked, keep: np.ndarray
) -> dict[str, pl.DataFrame]:
    """``samples``, ``breakdown`` and ``counters`` rows of the kept attempts of a batch (each
    attempt's campaign and id given by position), in file order, each with the attempt's
    position in the batch as ``_pos``."""
    position = checked.runs["attempt"].to_numpy()
    runs = checked.runs.with_columns(
        campaign_id=pl.Series(list(campaign_ids), dtype=pl.String).gather(position),
        attempt_id=pl.Series(list(attempt_ids), dtype=pl.String).gather(position),
        _keep=pl.Series(keep).gather(position),
    ).rename({"attempt": "_pos"})
    key = runs.select("campaign_id", "attempt_id", "side", "repetition", "_pos", "_keep")
    out = {"samples": runs}
    for name, cells in (("breakdown", checked.breakdown), ("counters", checked.counters)):
        out[name] = pl.concat([key[cells["run"]], cells.drop("run")], how="horizontal")
    return {
        name: frame.filter("_keep").select(
            *(pl.col(c).cast(t) for c, t in table(name).polars_schema().items()), "_pos"
        )
        for name, frame in out.items()
    }
