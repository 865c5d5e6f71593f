"""Small input stores for the assess tests, written directly as tables (columns of tables.json)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.assessment.quantities import Inputs
from pipeline.contract.policy import POLICY_DEFAULTS, canonical_policy, policy_sha256
from pipeline.contract.schemas import table
from pipeline.store.tables import Store

T0 = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)


def run(
    side: str,
    repetition: int,
    metric: float | None = 1.0,
    *,
    status: str = "ok",
    breakdown: Mapping[str, Any] | None = None,
    counters: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One measurement line; a flat {region: seconds} breakdown is one step named `all`."""
    if breakdown and not all(isinstance(v, Mapping) for v in breakdown.values()):
        breakdown = {"all": dict(breakdown)}
    return {
        "side": side,
        "repetition": repetition,
        "status": status,
        "metric": metric,
        "breakdown": breakdown or {},
        "counters": dict(counters or {}),
    }


def expect(target: str, name: str, direction: str) -> dict[str, str]:
    return {"target": target, "name": name, "expect": direction}


@dataclass
class Attempt:
    campaign_id: str
    attempt_id: str
    round: int
    runs: list[dict[str, Any]]
    expectations: list[dict[str, str]] = field(default_factory=list)
    status: str = "completed"
    candidate: str = ""

    @property
    def inputs_sha256(self) -> str:
        body = json.dumps([self.round, self.status, self.runs, self.expectations], sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()


def campaign(
    campaign_id: str, *, better: str = "lower", metric_name: str = "e2e_seconds", **policy: Any
) -> dict[str, Any]:
    """A campaigns row with the policy's defaults filled in and a matching digest."""
    full = {**POLICY_DEFAULTS, **policy}
    return {
        "campaign_id": campaign_id,
        "kind": "project",
        "created_at": T0,
        "metric_name": metric_name,
        "metric_better": better,
        **full,
        "policy_json": canonical_policy(full).decode(),
        "policy_sha256": policy_sha256(full),
        "policy_sha256_actual": policy_sha256(full),
        "source_sha256": hashlib.sha256(f"{campaign_id}{better}{_v1(full)}".encode()).hexdigest(),
    }


def _v1(policy: Mapping[str, Any]) -> dict[str, Any]:
    """The policy as this helper hashed it before `decide` and `margin_pct` existed (those two
    left out at their defaults), so the stand-in campaign digests of the golden outputs stay."""
    later = ("decide", "margin_pct")
    return {k: v for k, v in policy.items() if k not in later or v != POLICY_DEFAULTS[k]}


def tables(
    campaigns: Sequence[Mapping[str, Any]], attempts: Iterable[Attempt]
) -> dict[str, pl.DataFrame]:
    rows: dict[str, list[dict[str, Any]]] = {
        n: [] for n in ("attempts", "samples", "breakdown", "counters", "expectations")
    }
    for a in attempts:
        key = {"campaign_id": a.campaign_id, "attempt_id": a.attempt_id}
        declared = bool(a.expectations)
        rows["attempts"].append(
            {
                **key,
                "round": a.round,
                "candidate": a.candidate or f"cand-{a.attempt_id}",
                "baseline": "main",
                "status": a.status,
                "declared_at": T0 if declared else None,
                "started_at": T0,
                "mechanism_sha256": "m" if declared else None,
                "mechanism_sha256_actual": "m" if declared else None,
                "mechanism_sha256_first_seen": "m" if declared else None,
                "hypothesis": "h" if declared else None,
                "n_lines": len(a.runs),
                "inputs_sha256": a.inputs_sha256,
                "source_dir": f"attempts/{a.campaign_id}/{a.attempt_id}",
            }
        )
        for position, e in enumerate(a.expectations):
            rows["expectations"].append({**key, "position": position, **e})
        for line, r in enumerate(a.runs, start=1):
            run_key = {**key, "side": r["side"], "repetition": r["repetition"]}
            rows["samples"].append(
                {
                    **run_key,
                    "status": r["status"],
                    "metric": r["metric"],
                    "line": line,
                    "order": r.get("order"),
                }
            )
            for step, regions in r["breakdown"].items():
                for region, seconds in regions.items():
                    rows["breakdown"].append(
                        {**run_key, "step": step, "region": region, "seconds": seconds}
                    )
            for counter, value in r["counters"].items():
                rows["counters"].append({**run_key, "counter": counter, "value": value})
    out = {"campaigns": _frame("campaigns", list(campaigns))}
    out.update({name: _frame(name, r) for name, r in rows.items()})
    return out


def _frame(name: str, rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    spec = table(name)
    if not rows:
        return spec.empty()
    return pl.DataFrame(rows, schema=spec.polars_schema())


def inputs(campaigns: Sequence[Mapping[str, Any]], attempts: Iterable[Attempt]) -> Inputs:
    t = tables(campaigns, attempts)
    return Inputs(**{name: frame.lazy() for name, frame in t.items()})


def write_store(
    store: Store,
    campaigns: Sequence[Mapping[str, Any]],
    attempts: Iterable[Attempt],
    integrity: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Write every input table, one partition per campaign (integrity rows replace the table's)."""
    t = tables(campaigns, attempts)
    t["integrity"] = _frame("integrity", list(integrity))
    ids = [c["campaign_id"] for c in campaigns]
    with store.transaction() as txn:
        for name, frame in t.items():
            for cid in ids:
                part = frame.filter(pl.col("campaign_id") == cid)
                if name == "integrity" and part.is_empty():
                    txn.delete(name, cid)
                else:
                    txn.put(name, cid, part)


def integrity_row(campaign_id: str, code: str, attempt_id: str | None = "r1") -> dict[str, Any]:
    return {
        "campaign_id": campaign_id,
        "attempt_id": attempt_id,
        "code": code,
        "message": f"{code} (what is wrong, as ingest words it)",
        "expected": "aaaa",
        "actual": "bbbb",
    }


def write_gain_and_blocked(
    path: Path, attempts: Callable[[str], Sequence[Attempt]], resamples: int = 200
) -> Path:
    """A store at ``path`` with campaign ``c`` (assessable) and ``b`` (the same attempts,
    blocked by a mechanism digest mismatch on r1): the store the CLI output tests read."""
    write_store(
        Store(path),
        [campaign("c", resamples=resamples), campaign("b", resamples=resamples)],
        [*attempts("c"), *attempts("b")],
        integrity=[integrity_row("b", "mechanism_digest_mismatch", "r1")],
    )
    return path
