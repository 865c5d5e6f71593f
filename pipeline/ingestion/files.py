"""One input file: its bytes read within its size limit, decoded, parsed and checked whole
(:func:`validate_document` for campaign.json, attempt.json and mechanism.json,
:func:`validate_measurements` for measurements.jsonl, where ``(side, repetition)`` is unique:
``duplicate_run``). Every problem becomes an :class:`Issue` naming file, line, field, reason and
a reason code; all the problems of a document are reported in one pass.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.contract.declare import SIDES, DocumentKind
from pipeline.contract.files import InputFileError, MiB, read_regular
from pipeline.contract.inert import printable
from pipeline.contract.layout import MEASUREMENTS_FILE
from pipeline.ingestion.jsontext import TooDeep, field_name, locate, parse_json
from pipeline.ingestion.rules import _strict_integer, check_document, in_text_order

MAX_DOCUMENT_BYTES = 16 * MiB
"""Largest campaign.json, attempt.json or mechanism.json read."""


MAX_MEASUREMENTS_BYTES = 256 * MiB
"""Largest measurements.jsonl read (about a million runs with a small breakdown each)."""


MAX_ISSUES_PER_FILE = 100
"""Errors listed per file: the first ones, then one `too_many_errors` line with how many lines
were left unchecked. A file of a million bad lines would otherwise cost minutes, a gigabyte and
hundreds of megabytes of output, to say what its first lines already say."""


@dataclass(frozen=True)
class Issue:
    """One problem of one input file, at one line and field."""

    path: str
    line: int | None
    field: str
    code: str
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        what = f'field "{self.field}": ' if self.field else ""
        return printable(f"{where}: {what}{self.message} [{self.code}]")


@dataclass(frozen=True)
class Document:
    """A parsed, valid JSON document and the digest of its bytes."""

    data: dict[str, Any]
    sha256: str
    text: str

    def line_of(self, *path: str | int) -> int:
        return locate(self.text, path)


def read_bytes(path: Path | str) -> tuple[bytes | None, list[Issue]]:
    """The bytes of one input file: a regular file within its size limit, else an issue."""
    name = os.path.basename(path)
    limit = MAX_MEASUREMENTS_BYTES if name == MEASUREMENTS_FILE else MAX_DOCUMENT_BYTES
    try:
        return read_regular(path, limit), []
    except FileNotFoundError:
        return None, [Issue(str(path), None, "", "missing_file", "file not found")]
    except InputFileError as exc:
        return None, [Issue(str(path), None, "", exc.code, exc.reason)]
    except OSError as exc:
        return None, [Issue(str(path), None, "", "unreadable", f"cannot read: {exc.strerror}")]


def _decode(path: Path, body: bytes) -> tuple[str | None, list[Issue]]:
    try:
        return body.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        return None, [Issue(str(path), line, "", "bad_encoding", "is not valid UTF-8")]


def _json_error(path: Path, exc: ValueError, line_offset: int = 0) -> Issue:
    if isinstance(exc, json.JSONDecodeError):
        where = f" (column {exc.colno})"
        return Issue(
            str(path), line_offset + exc.lineno, "", "bad_json", f"invalid JSON: {exc.msg}{where}"
        )
    return Issue(str(path), line_offset + 1, "", "bad_json", f"invalid JSON: {exc}")


def validate_document(
    path: Path, body: bytes, kind: DocumentKind
) -> tuple[Document | None, list[Issue]]:
    """Parse and check one JSON document (campaign.json, attempt.json, mechanism.json)."""
    text, issues = _decode(path, body)
    if text is None:
        return None, issues
    try:
        doc = parse_json(text)
    except TooDeep as exc:
        return None, [Issue(str(path), None, "", "too_deep", str(exc))]
    except ValueError as exc:
        return None, [_json_error(path, exc)]
    found = [
        Issue(str(path), locate(text, p), field_name(p), code, message)
        for p, code, message in in_text_order(text, check_document(kind, doc))
    ]
    if found:
        return None, found
    return Document(doc, hashlib.sha256(body).hexdigest(), text), []


@dataclass(frozen=True)
class Run:
    """One valid line of measurements.jsonl."""

    line: int
    data: dict[str, Any]


def validate_measurements(path: Path, body: bytes) -> tuple[list[Run] | None, list[Issue]]:
    """Every line of measurements.jsonl (blank lines are skipped), then (side, repetition)."""
    text, issues = _decode(path, body)
    if text is None:
        return None, issues
    parsed: list[Run] = []
    # split on "\n" only: str.splitlines would also split at U+2028 inside a JSON string
    lines = text.split("\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if len(issues) >= MAX_ISSUES_PER_FILE:
            return None, _capped(path, issues, number, lines)
        try:
            doc = parse_json(raw)
        except TooDeep as exc:
            issues.append(Issue(str(path), number, "", "too_deep", str(exc)))
            continue
        except ValueError as exc:
            issues.append(_json_error(path, exc, number - 1))
            continue
        # a \u escape may hide a lone surrogate, which only the full check looks for
        fast = "\\u" not in raw
        problems = in_text_order(raw, check_document("measurement", doc, fast=fast))
        issues += [Issue(str(path), number, field_name(p), c, m) for p, c, m in problems]
        parsed.append(Run(number, doc))
    issues += _duplicate_runs(path, parsed)
    if issues:
        issues = sorted(issues, key=lambda issue: issue.line or 0)
        return None, _capped(path, issues, None, lines)
    return parsed, []


def _capped(path: Path, issues: list[Issue], stopped: int | None, lines: list[str]) -> list[Issue]:
    """The first MAX_ISSUES_PER_FILE issues, then (when more were found, or checking stopped at
    line ``stopped``) one line saying so and how many non-blank lines were not checked."""
    if len(issues) <= MAX_ISSUES_PER_FILE and stopped is None:
        return issues
    unchecked = 0 if stopped is None else sum(1 for raw in lines[stopped - 1 :] if raw.strip())
    more = len(issues) - MAX_ISSUES_PER_FILE
    said = [f"{more} more error(s) not listed"] if more > 0 else []
    if unchecked:
        said.append(f"{unchecked} line(s) from line {stopped} on not checked")
    message = (
        f"stopped after {MAX_ISSUES_PER_FILE} errors: "
        + "; ".join(said)
        + " (the attempt is rejected; fix these and ingest again)"
    )
    return [*issues[:MAX_ISSUES_PER_FILE], Issue(str(path), None, "", "too_many_errors", message)]


def _run_key(doc: Any) -> tuple[str, int] | None:
    """(side, repetition) of a line whose two key fields are well formed, even if others are not."""
    if not isinstance(doc, dict):
        return None
    side, repetition = doc.get("side"), doc.get("repetition")
    if side not in SIDES or not isinstance(repetition, int):
        return None
    if not _strict_integer(None, repetition):
        return None
    return str(side), repetition


def _duplicate_runs(path: Path, runs: Sequence[Run]) -> Iterator[Issue]:
    first: dict[tuple[str, int], int] = {}
    for run in runs:
        key = _run_key(run.data)
        if key is None:
            continue
        if key in first:
            message = f"repeats the {key[0]} run of repetition {key[1]} (line {first[key]})"
            yield Issue(str(path), run.line, "repetition", "duplicate_run", message)
        else:
            first[key] = run.line
