"""Imported lines ingest and assess end to end: real Kineto traces (two captures per run, five
repetitions per side) -> measurements.jsonl -> stored attempt -> ingest -> assess. The expected
numbers are computed here from the trace events, independently of the importer."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.assessment.campaigns import assess
from pipeline.errors import ExitCode
from pipeline.importers.lines import import_line
from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt, write_campaign

TRACES = Path(__file__).parent / "fixtures" / "import" / "kineto" / "campaign"
REPETITIONS = 5
CID = "kineto-e2e"
POLICY: dict[str, Any] = {
    "decision": "paired",
    "require_explanation": True,
    "min_improvement_pct": 1.0,
    "confidence": 0.95,
    "resamples": 2000,
    "seed": 0,
    "min_pairs": 5,
}
MECHANISM = {
    "hypothesis": "a third of the attention matmuls",
    "expectations": [
        {"target": "region", "name": "attention", "expect": "decrease"},
        {"target": "counter", "name": "aten_ops", "expect": "decrease"},
        {"target": "region", "name": "sampling", "expect": "unchanged"},
    ],
}


def _files(side: str, rep: int) -> list[Path]:
    return [TRACES / f"{side}-r{rep}-{capture}.json.gz" for capture in "ab"]


def _reference(side: str, rep: int) -> dict[str, Any]:
    """Per run, from the raw events: step durations, aten ops inside steps, and the mean over
    steps of attention / sampling (each region = its top-level ranges)."""
    total, aten, ratios = 0.0, 0, []
    for path in _files(side, rep):
        events = [
            e
            for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
            if e.get("ph") == "X"
        ]
        for step in (e for e in events if e["name"].startswith("ProfilerStep#")):
            lo, hi = step["ts"], step["ts"] + step["dur"]
            inside = [e for e in events if lo <= e["ts"] < hi]
            total += step["dur"] / 1e6
            aten += sum(1 for e in inside if e.get("cat") == "cpu_op")
            attention = sum(e["dur"] for e in inside if e["name"] == "attention")
            sampling = sum(e["dur"] for e in inside if e["name"] == "sampling")
            ratios.append(attention / sampling)
    return {"metric": total, "aten_ops": aten, "normalized": sum(ratios) / len(ratios)}


def _campaign(root: Path) -> None:
    write_campaign(
        root,
        CID,
        created_at="2026-11-29T10:00:00Z",
        metric={"name": "step_seconds", "better": "lower"},
        policy=POLICY,
    )
    runs = [
        import_line("kineto", [str(f) for f in _files(side, rep)], side=side, repetition=rep)[0]
        for rep in range(REPETITIONS)
        for side in ("baseline", "candidate")
    ]
    attempt = {
        "attempt_id": "r001",
        "round": 1,
        "candidate": "fewer-matmuls",
        "baseline": "main",
        "status": "completed",
        "declared_at": "2026-11-29T10:01:00Z",
        "started_at": "2026-11-29T10:02:00Z",
    }
    write_attempt(root / CID, attempt, runs, mechanism=MECHANISM)


def _log_ratios(key: str) -> list[float]:
    return [
        math.log(_reference("baseline", r)[key] / _reference("candidate", r)[key])
        for r in range(REPETITIONS)
    ]


def test_imported_kineto_runs_ingest_and_assess(tmp_path: Path) -> None:
    _campaign(tmp_path / "attempts")
    store = Store(tmp_path / "store")
    report = ingest(tmp_path / "attempts", store)
    assert report.exit_code == ExitCode.OK, [str(i) for i in report.issues]
    result = assess(store, [CID])
    comparisons = result.comparisons.filter(pl.col("attempt_id") == "r001")

    def row(quantity: str, name: str) -> dict[str, Any]:
        found = comparisons.filter((pl.col("quantity") == quantity) & (pl.col("name") == name))
        assert found.height == 1, (quantity, name)
        return found.row(0, named=True)

    # Counters: the candidate's capture executes fewer aten ops, the same count every run.
    aten = _log_ratios("aten_ops")
    assert len(set(aten)) == 1 and aten[0] > 0
    counter = row("counter", "aten_ops")
    assert counter["n_pairs"] == REPETITIONS
    assert counter["estimate"] == pytest.approx(math.exp(aten[0]), rel=1e-12)
    assert counter["direction"] == "decrease"

    # The metric is the sum of the ProfilerStep durations of both captures.
    expected = math.exp(sum(_log_ratios("metric")) / REPETITIONS)
    assessment = result.assessments.row(0, named=True)
    assert assessment["paired_estimate"] == pytest.approx(expected, rel=1e-9)
    assert row("metric", "step_seconds")["estimate"] == pytest.approx(expected, rel=1e-9)

    # attention normalized by the reference region sampling: every pair shrinks in these traces,
    # so every bootstrap resample does too and the interval lies above 1.
    normalized = _log_ratios("normalized")
    assert min(normalized) > 0
    region = row("region_normalized", "attention")
    assert region["estimate"] == pytest.approx(math.exp(sum(normalized) / REPETITIONS), rel=1e-9)
    assert region["direction"] == "decrease"

    outcomes = dict(result.outcomes.select("name", "outcome").iter_rows())
    assert outcomes == {"attention": "confirmed", "aten_ops": "confirmed", "sampling": "assumed"}
    assert assessment["explanation"] == "explained"
    # Every pair's metric ratio clears the 1% gate, so every resample mean does: PASS.
    assert min(_log_ratios("metric")) > math.log(1 + POLICY["min_improvement_pct"] / 100)
    assert (assessment["verdict"], assessment["paired_verdict"]) == ("PASS", "PASS")
    assert assessment["n_pairs"] == REPETITIONS
