"""Writing stored attempts in the folder format of contract §2 (for simulate and the examples)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict, Unpack

from pipeline.atomic import dump_json
from pipeline.contract.declare import schema_id
from pipeline.contract.layout import ATTEMPT_FILE, CAMPAIGN_FILE, MEASUREMENTS_FILE, MECHANISM_FILE
from pipeline.contract.policy import policy_sha256


class CampaignFields(TypedDict):
    """What campaign.json says besides its id (``kind``: project unless given)."""

    created_at: str
    metric: Mapping[str, str]
    policy: Mapping[str, Any]
    kind: NotRequired[str]


def campaign_bytes(campaign_id: str, **fields: Unpack[CampaignFields]) -> bytes:
    """The bytes of campaign.json, with the digest of its canonical policy."""
    policy = dict(fields["policy"])
    document = {
        "schema": schema_id("campaign"),
        "campaign_id": campaign_id,
        "kind": fields.get("kind", "project"),
        "created_at": fields["created_at"],
        "metric": dict(fields["metric"]),
        "policy": policy,
        "policy_sha256": policy_sha256(policy),
    }
    return dump_json(document)


def mechanism_bytes(mechanism: Mapping[str, Any]) -> bytes:
    """The bytes of mechanism.json."""
    return dump_json({"schema": schema_id("mechanism"), **mechanism})


def write_campaign(root: Path, campaign_id: str, **fields: Unpack[CampaignFields]) -> Path:
    """Write ``<root>/<campaign_id>/campaign.json`` with the digest of its canonical policy."""
    folder = root / campaign_id
    folder.mkdir(parents=True, exist_ok=True)
    body = campaign_bytes(campaign_id, **fields)
    (folder / CAMPAIGN_FILE).write_bytes(body)
    return folder


def write_attempt(
    campaign_dir: Path,
    attempt: Mapping[str, Any],
    runs: Iterable[Mapping[str, Any]],
    *,
    mechanism: Mapping[str, Any] | None = None,
) -> Path:
    """Write one attempt folder. With a mechanism, its file is written first and its digest
    recorded in attempt.json, as a harness does when the declaration is saved before the run.
    ``attempt`` must then carry ``declared_at``."""
    folder = campaign_dir / str(attempt["attempt_id"])
    folder.mkdir(parents=True, exist_ok=True)
    document = {"schema": schema_id("attempt"), **attempt}
    if mechanism is not None:
        body = mechanism_bytes(mechanism)
        (folder / MECHANISM_FILE).write_bytes(body)
        document["mechanism_sha256"] = hashlib.sha256(body).hexdigest()
    (folder / ATTEMPT_FILE).write_bytes(dump_json(document))
    lines = "".join(json.dumps(run, separators=(",", ":")) + "\n" for run in runs)
    (folder / MEASUREMENTS_FILE).write_text(lines, encoding="utf-8")
    return folder
