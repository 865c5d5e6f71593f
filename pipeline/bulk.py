"""Bulk validation of attempts: decode every file with typed msgspec decoders and check the
measurement lines of many attempts at once as columns, then build the store rows from the columns.

This is the fast path of ingest. It accepts an attempt only when every file certainly satisfies
``schemas/*.schema.json`` and every rule of :mod:`pipeline.validate` (a property test holds it to
that); any attempt it does not accept goes to :func:`pipeline.validate.validate_attempt`, the
precise per-line validator, which either accepts it too (e.g. a key written as ``"a" : 1``, which
the fast key count does not trust) or names every error with file, line, field and reason code.
So the errors and the stored rows are those of the precise path; only their cost changes.

How the rules are kept without a Python loop per cell:
- types, enumerations, bounds, unknown fields, NaN/Infinity and numbers too large for a float,
  integers written as ``1.0``, invalid UTF-8 and lone surrogates: the msgspec decoders below
  refuse them;
- repeated keys (which a decoder silently collapses): the keys decoded are counted from the
  lengths of the decoded objects and compared with the ``":`` of the file, which is at least the
  number of keys written; equal counts prove that no key was written twice;
- ``metric > 0`` for an ok run, a breakdown mixing flat and nested entries, ``(side, repetition)``
  twice in one file: column expressions over all the lines of the batch.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain, compress, repeat
from operator import attrgetter, is_not
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
import polars as pl
from msgspec import UNSET, Meta, Struct, UnsetType

from pipeline.contracts import table
from pipeline.validate import (
    ATTEMPT_FILE,
    INT64_MAX,
    MECHANISM_FILE,
    AttemptFiles,
    Document,
    parse_timestamp,
)

_ID = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
_COUNT = Annotated[int, Meta(ge=0, le=INT64_MAX)]
_NUMBER = Annotated[float, Meta(ge=0)]  # msgspec refuses NaN, Infinity and 1e400
_TEXT = Annotated[str, Meta(min_length=1)]
_SHA256 = Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")]


class _Attempt(Struct, forbid_unknown_fields=True):
    schema: Literal["explain-pipeline/attempt/v1"]
    attempt_id: _ID
    round: _COUNT
    candidate: _TEXT
    baseline: _TEXT
    status: Literal["completed", "failed", "aborted"]
    started_at: str
    declared_at: str | UnsetType = UNSET
    mechanism_sha256: _SHA256 | UnsetType = UNSET
    order_seed: _COUNT | UnsetType = UNSET
    recorder: _TEXT | UnsetType = UNSET
    environment: dict[str, str] | UnsetType = UNSET


class _Expectation(Struct, forbid_unknown_fields=True):
    target: Literal["region", "counter"]
    name: _TEXT
    expect: Literal["decrease", "increase", "unchanged"]


class _Mechanism(Struct, forbid_unknown_fields=True):
    schema: Literal["explain-pipeline/mechanism/v1"]
    hypothesis: str
    expectations: Annotated[list[_Expectation], Meta(min_length=1)]


class _Run(Struct, forbid_unknown_fields=True):
    side: Literal["baseline", "candidate"]
    repetition: _COUNT
    status: Literal["ok", "failed"]
    metric: _NUMBER | UnsetType = UNSET
    breakdown: dict[str, _NUMBER | dict[str, _NUMBER]] | UnsetType = UNSET
    counters: dict[str, _NUMBER] | UnsetType = UNSET
    order: Annotated[int, Meta(ge=0, le=1)] | UnsetType = UNSET
    started_at: str | UnsetType = UNSET
    finished_at: str | UnsetType = UNSET


_ATTEMPT = msgspec.json.Decoder(_Attempt)
_MECHANISM = msgspec.json.Decoder(_Mechanism)
_RUN = msgspec.json.Decoder(_Run)
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


def _environment_keys(attempt: _Attempt) -> int:
    return 0 if attempt.environment is UNSET else len(attempt.environment)


def fast_attempt(
    files: AttemptFiles, *, benchmark: bool
) -> tuple[Document, Document | None] | None:
    """attempt.json and mechanism.json when both are certainly valid, else None."""
    body = files.bodies[ATTEMPT_FILE]
    attempt = _document(body, _ATTEMPT, extra_keys=_environment_keys)
    if attempt is None or attempt.attempt_id != files.folder.name:
        return None
    if (attempt.declared_at is UNSET) != (attempt.mechanism_sha256 is UNSET):
        return None
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
    return Document(_set_fields(attempt), hashlib.sha256(body).hexdigest(), ""), mechanism


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
    runs: list[_Run]
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


def _file_runs(body: bytes) -> tuple[list[int], list[_Run]]:
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
    runs: list[_Run] = []
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


def breakdown_cells(runs: list[_Run]) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
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


def counter_cells(runs: list[_Run]) -> tuple[pl.DataFrame, np.ndarray]:
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
        "side", "repetition", "status", "metric", "breakdown", "counters", "order", "started_at",
        "finished_at",
    )
)  # fmt: skip


def _present(values: list[Any]) -> np.ndarray:
    return np.fromiter(map(is_not, values, repeat(UNSET)), bool, len(values))


def _timestamps(values: list[Any]) -> tuple[list[datetime | None], np.ndarray]:
    """Parsed optional timestamps (None where absent) and, per value, whether it is valid."""
    parsed = [None if v is UNSET else parse_timestamp(v) for v in values]
    ok = np.fromiter(
        (p is not None or v is UNSET for p, v in zip(parsed, values, strict=True)),
        bool,
        len(values),
    )
    return parsed, ok


@dataclass(frozen=True)
class Checked:
    """Which attempts of a batch the fast path accepts, and their run, breakdown and counter
    rows keyed by ``attempt`` (position in the batch) and ``run`` (line index)."""

    accepted: np.ndarray
    runs: pl.DataFrame  # attempt, side, repetition, status, metric, line
    breakdown: pl.DataFrame  # run, step, region, seconds
    counters: pl.DataFrame  # run, counter, value


def check_lines(bodies: Sequence[bytes]) -> Checked:
    """Decode and check the measurements files of a batch of attempts at once."""
    lines, decoded = decode_lines(bodies)
    runs = lines.runs
    metric = list(map(_METRIC, runs))
    has_metric = _present(metric)
    order = list(map(_ORDER, runs))
    started = list(map(_STARTED, runs))
    finished = list(map(_FINISHED, runs))
    started_at, started_ok = _timestamps(started)
    finished_at, finished_ok = _timestamps(finished)
    frame = pl.DataFrame(
        {
            "attempt": lines.attempt,
            "side": pl.Series(list(map(_SIDE, runs)), dtype=pl.String),
            "repetition": pl.Series(list(map(_REPETITION, runs)), dtype=pl.Int64),
            "status": pl.Series(list(map(_STATUS, runs)), dtype=pl.String),
            "metric": pl.Series([None if m is UNSET else m for m in metric], dtype=pl.Float64),
            "line": lines.line,
            "order": pl.Series([None if o is UNSET else o for o in order], dtype=pl.Int64),
            "started_at": pl.Series(started_at, dtype=pl.Datetime("us", "UTC")),
            "finished_at": pl.Series(finished_at, dtype=pl.Datetime("us", "UTC")),
        }
    )
    breakdown, mixed, breakdown_keys = breakdown_cells(runs)
    counters, counter_keys = counter_cells(runs)
    has_breakdown = _present(list(map(_BREAKDOWN, runs)))
    has_counters = _present(list(map(_COUNTERS, runs)))
    recorded = sum(_present(values) for values in (order, started, finished))
    keys = 3 + has_metric + has_breakdown + has_counters + recorded + breakdown_keys + counter_keys
    unnamed = np.zeros(len(runs), bool)  # an empty step, region or counter name
    for cells, names in ((breakdown, ("step", "region")), (counters, ("counter",))):
        empty = cells.filter(pl.any_horizontal(pl.col(n) == "" for n in names))["run"]
        unnamed[empty.to_numpy()] = True
    bad = frame.select(
        bad=((pl.col("status") == "ok") & ~(pl.col("metric") > 0).fill_null(False))
        | pl.struct("attempt", "side", "repetition").is_duplicated()
        | pl.Series(mixed | unnamed | ~started_ok | ~finished_ok)
    )["bad"].to_numpy()
    n = len(bodies)
    failed = np.bincount(lines.attempt[bad], minlength=n) > 0
    counted = np.bincount(lines.attempt, weights=keys, minlength=n).astype(np.int64)
    accepted = decoded & ~failed & (counted == lines.written_keys)
    return Checked(accepted, frame, breakdown, counters)


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
