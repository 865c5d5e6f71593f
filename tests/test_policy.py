"""The canonical policy and its digest (contract §2.1), and the stored-attempt writer using it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pipeline.contract.policy import canonical_policy, policy_sha256
from pipeline.study.stored import write_attempt, write_campaign


def test_canonical_policy_is_the_defaults_filled_sorted_compact_form() -> None:
    expected = (
        b'{"confidence":0.95,"decision":"paired","min_improvement_pct":1.0,"min_pairs":5,'
        b'"require_explanation":false,"resamples":10000,"seed":0}'
    )
    assert canonical_policy({"decision": "paired"}) == expected
    assert policy_sha256({"decision": "paired"}) == hashlib.sha256(expected).hexdigest()


def test_given_values_are_kept_as_given_and_non_ascii_stays_utf8() -> None:
    assert b'"min_improvement_pct":2' in canonical_policy({"min_improvement_pct": 2})
    assert "é".encode() in canonical_policy({"note": "é"})


def test_an_empty_policy_and_the_explicit_defaults_have_one_digest() -> None:
    explicit = {
        "decision": "median",
        "require_explanation": False,
        "min_improvement_pct": 1.0,
        "confidence": 0.95,
        "resamples": 10000,
        "seed": 0,
        "min_pairs": 5,
    }
    assert policy_sha256({}) == policy_sha256(explicit)
    assert policy_sha256({}) != policy_sha256({"seed": 1})


def test_writer_records_digests_of_what_it_wrote(tmp_path: Path) -> None:
    folder = write_campaign(
        tmp_path,
        "c1",
        created_at="2026-11-01T10:00:00Z",
        metric={"name": "e2e_seconds", "better": "lower"},
        policy={"seed": 3},
    )
    campaign = json.loads((folder / "campaign.json").read_text())
    assert campaign["policy_sha256"] == policy_sha256({"seed": 3})
    attempt = write_attempt(
        folder,
        {
            "attempt_id": "r1",
            "round": 1,
            "candidate": "x",
            "baseline": "y",
            "status": "completed",
            "declared_at": "2026-11-01T11:00:00Z",
            "started_at": "2026-11-01T12:00:00Z",
        },
        [{"side": "baseline", "repetition": 0, "status": "ok", "metric": 1.0}],
        mechanism={
            "hypothesis": "h",
            "expectations": [{"target": "region", "name": "a", "expect": "decrease"}],
        },
    )
    recorded = json.loads((attempt / "attempt.json").read_text())["mechanism_sha256"]
    assert recorded == hashlib.sha256((attempt / "mechanism.json").read_bytes()).hexdigest()
    lines = (attempt / "measurements.jsonl").read_text().splitlines()
    assert [json.loads(line)["metric"] for line in lines] == [1.0]
