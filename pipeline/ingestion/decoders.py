"""The typed decoders of the fast engine (msgspec structs built from the schemas): campaign.json,
attempt.json and mechanism.json accepted when certainly valid (:func:`fast_campaign`,
:func:`fast_attempt`), the lines of many measurements files decoded and checked at once
(:func:`decode_and_check`), and the one row builder of the typed structs and of the precise
validator's runs (:func:`parsed_runs`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain, compress, repeat
from operator import attrgetter, is_not
from typing import Any

import msgspec
import numpy as np
import polars as pl
from msgspec import UNSET, Struct

from pipeline.contract.declare import conditional_rules, struct
from pipeline.contract.layout import ATTEMPT_FILE, MECHANISM_FILE
from pipeline.ingestion.batch import _RUN_SCHEMA, Checked
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
# columnar reader (Arrow's JSON reader with that line's schema; see columnar.py).
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
    """Keys of the attempt's nested objects: the environment's, the sequential object's, the
    measured object's and the commands' (two sides of two keys each)."""
    nested = 0 if attempt.sequential is UNSET else len(_set_fields(attempt.sequential))
    nested += 0 if attempt.measured is UNSET else len(_set_fields(attempt.measured))
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
    if attempt.measured is not UNSET:  # unset fields left out, as written
        data["measured"] = msgspec.to_builtins(attempt.measured)
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
