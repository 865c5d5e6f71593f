"""A campaign or attempt folder: its name checked first (an id: ``bad_id``), its files read, every
document validated and its id equal to the folder's name (``id_mismatch``); a benchmark campaign
refuses mechanism declarations (``mechanism_in_benchmark``). Any issue rejects the attempt whole.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

from pipeline.contract.layout import (
    ATTEMPT_FILE,
    CAMPAIGN_FILE,
    MEASUREMENTS_FILE,
    MECHANISM_FILE,
    id_rule,
    valid_id,
)
from pipeline.ingestion.files import (
    Document,
    Issue,
    Run,
    read_bytes,
    validate_document,
    validate_measurements,
)
from pipeline.ingestion.jsontext import describe


def check_directory_id(folder: Path, what: Literal["campaign", "attempt"]) -> list[Issue]:
    """A directory name is checked before it is used for anything else."""
    if valid_id(folder.name):
        return []
    return [
        Issue(
            str(folder),
            None,
            f"{what}_id",
            "bad_id",
            f"directory name {id_rule()}, got {describe(folder.name)}",
        )
    ]


def check_id_matches(path: Path, document: Document, key: str, folder_name: str) -> list[Issue]:
    value = document.data[key]
    if value == folder_name:
        return []
    return [
        Issue(
            str(path),
            document.line_of(key),
            key,
            "id_mismatch",
            f"must equal its directory name {describe(folder_name)}, got {describe(value)}",
        )
    ]


def validate_campaign(
    folder: Path, fast: Callable[[bytes, str], Document | None] | None = None
) -> tuple[Document | None, list[Issue]]:
    """campaign.json of a campaign folder whose name was checked first; ``fast(body, folder
    name)`` may vouch for a valid file first (ingest's bulk check), else every rule is checked
    here."""
    issues = check_directory_id(folder, "campaign")
    if issues:
        return None, issues
    path = folder / CAMPAIGN_FILE
    body, issues = read_bytes(path)
    if body is None:
        return None, issues
    vouched = fast(body, folder.name) if fast is not None else None
    if vouched is not None:
        return vouched, []
    document, issues = validate_document(path, body, "campaign")
    if document is None:
        return None, issues
    issues = check_id_matches(path, document, "campaign_id", folder.name)
    return (None, issues) if issues else (document, [])


@dataclass(frozen=True)
class AttemptFiles:
    """The bytes of one attempt folder's input files and their digest."""

    folder: Path
    bodies: dict[str, bytes]

    @cached_property  # ingest asks twice: is the attempt unchanged, and for its row
    def inputs_sha256(self) -> str:
        """sha256 over (name, size, bytes) of each input file, in name order."""
        digest = hashlib.sha256()
        for name in sorted(self.bodies):
            body = self.bodies[name]
            digest.update(name.encode() + b"\0" + len(body).to_bytes(8, "big"))
            digest.update(body)
        return digest.hexdigest()


def read_attempt_files(folder: Path) -> tuple[AttemptFiles | None, list[Issue]]:
    """attempt.json and measurements.jsonl must exist; mechanism.json is optional."""
    issues = check_directory_id(folder, "attempt")
    if issues:
        return None, issues
    bodies: dict[str, bytes] = {}
    base = str(folder)  # plain strings: a Path per file cost more than reading it
    for name in (ATTEMPT_FILE, MEASUREMENTS_FILE, MECHANISM_FILE):
        body, problems = read_bytes(os.path.join(base, name))
        if body is not None:
            bodies[name] = body
        elif name != MECHANISM_FILE or problems[0].code != "missing_file":
            issues += problems
    return (None, issues) if issues else (AttemptFiles(folder, bodies), [])


@dataclass(frozen=True)
class ValidAttempt:
    """One attempt whose every document passed validation."""

    files: AttemptFiles
    attempt: Document
    mechanism: Document | None
    runs: list[Run]

    @property
    def attempt_id(self) -> str:
        return str(self.attempt.data["attempt_id"])


def validate_attempt(
    files: AttemptFiles, *, benchmark: bool
) -> tuple[ValidAttempt | None, list[Issue]]:
    """Every document of one attempt; any issue rejects the attempt whole."""
    folder = files.folder
    attempt, issues = validate_document(
        folder / ATTEMPT_FILE, files.bodies[ATTEMPT_FILE], "attempt"
    )
    if attempt is not None:
        issues += check_id_matches(folder / ATTEMPT_FILE, attempt, "attempt_id", folder.name)
    mechanism = None
    if MECHANISM_FILE in files.bodies:
        mechanism, problems = _validate_mechanism(files, benchmark=benchmark)
        issues += problems
    runs, problems = validate_measurements(
        folder / MEASUREMENTS_FILE, files.bodies[MEASUREMENTS_FILE]
    )
    issues += problems
    if issues or attempt is None or runs is None:
        return None, issues
    return ValidAttempt(files, attempt, mechanism, runs), []


def _validate_mechanism(
    files: AttemptFiles, *, benchmark: bool
) -> tuple[Document | None, list[Issue]]:
    path = files.folder / MECHANISM_FILE
    if benchmark:
        message = "a benchmark campaign refuses mechanism declarations (remove mechanism.json)"
        return None, [Issue(str(path), None, "", "mechanism_in_benchmark", message)]
    return validate_document(path, files.bodies[MECHANISM_FILE], "mechanism")
