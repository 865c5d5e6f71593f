"""The stored-attempt layout (contract §2): the file names of a campaign folder and the one
identifier rule with its one message."""

from __future__ import annotations

from pipeline.contract.declare import ID_PATTERN

CAMPAIGN_FILE = "campaign.json"
ATTEMPT_FILE = "attempt.json"
MECHANISM_FILE = "mechanism.json"
MEASUREMENTS_FILE = "measurements.jsonl"
RUNS_LOG = "runs.log"
"""The recorder's log of every run of an attempt (not read by ingest)."""


def valid_id(name: str) -> bool:
    """Whether ``name`` may be a campaign or attempt id (and so a folder name)."""
    return ID_PATTERN.fullmatch(name) is not None


def id_rule() -> str:
    """The rule an id breaks, as every message states it: ``must match ^…$``."""
    return f"must match ^{ID_PATTERN.pattern}$"
