"""The campaign's accounting (pipeline.assessment.accounting) on campaigns that go through the real
ingest and assess: confirmation rounds are never eligible and change no other attempt, the
PASS count sits beside the count a plain reference computes from the written runs, chained
campaigns confirm the chain's last adopted step, and attempt.json's new fields are stored."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline.assessment import chance
from pipeline.assessment.campaigns import assess, gated_attempt
from pipeline.contract.files import ReadMode
from pipeline.ingestion.attempts import ingest
from pipeline.output import render
from pipeline.record.campaign import FinalResult
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt, write_campaign

SPREAD = 0.02


def noisy_runs(factor: float, seed: int, repetitions: int = 10) -> list[dict[str, Any]]:
    """Metric-only runs: baseline 0.1 s, candidate 0.1 s x factor, both log-normal noise."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(0.0, SPREAD, size=(repetitions, 2))
    return [
        {"side": side, "repetition": r, "status": "ok", "metric": 0.1 * f * math.exp(noise[r, i])}
        for r in range(repetitions)
        for i, (side, f) in enumerate((("baseline", 1.0), ("candidate", factor)))
    ]


def attempt(
    attempt_id: str, number: int, baseline: str, candidate: str, **extra: Any
) -> dict[str, Any]:
    return {
        "attempt_id": attempt_id,
        "round": number,
        "candidate": candidate,
        "baseline": baseline,
        "status": "completed",
        "started_at": f"2026-11-01T{10 + number:02d}:00:00Z",
        **extra,
    }


def campaign(root: Path, rounds: list[tuple[str, str, float]], **policy: Any) -> Path:
    """Rounds (baseline, candidate, true factor of the candidate), r001 onwards."""
    folder = write_campaign(
        root,
        "c1",
        created_at="2026-11-01T09:00:00Z",
        metric={"name": "seconds", "better": "lower"},
        policy={"decision": "paired", "interval": "student_t", **policy},
    )
    for i, (baseline, candidate, factor) in enumerate(rounds, start=1):
        write_attempt(folder, attempt(f"r{i:03d}", i, baseline, candidate), noisy_runs(factor, i))
    return folder


def assessed(folder: Path, store: Store) -> Any:
    ingest(folder.parent, store)
    return assess(store, ["c1"])


SEARCH = [("main", "a", 1.0), ("main", "b", 0.9), ("main", "c", 0.93), ("main", "d", 1.0)]


@pytest.mark.slow
def test_a_confirmation_round_is_never_eligible_and_changes_no_other_attempt(
    tmp_path: Path,
) -> None:
    folder = campaign(tmp_path / "attempts", SEARCH)
    store = Store(tmp_path / "store")
    before = assessed(folder, store)
    assert before.accounts["c1"].target == "r002"  # the best: the largest estimate
    digests = store.read("attempts", ["c1"]).select("attempt_id", "inputs_sha256")
    confirm = attempt("r005", 5, "main", "b", kind="confirmation", confirms="r002")
    write_attempt(folder, confirm, noisy_runs(0.8, 99))  # a far larger gain than any round
    after = assessed(folder, store)
    rows = after.assessments.filter(pl.col("attempt_id") == "r005").row(0, named=True)
    assert (rows["verdict"], rows["eligible"], rows["best"], rows["kind"]) == (
        "PASS",
        False,
        False,
        "confirmation",
    )
    old = ["r001", "r002", "r003", "r004"]
    keep = ["attempt_id", "verdict", "eligible", "best", "paired_estimate"]
    assert (
        after.assessments.filter(pl.col("attempt_id").is_in(old))
        .select(keep)
        .equals(before.assessments.select(keep))
    )
    now = store.read("attempts", ["c1"]).filter(pl.col("attempt_id").is_in(old))
    assert (
        now.select("attempt_id", "inputs_sha256")
        .sort("attempt_id")
        .equals(digests.sort("attempt_id"))
    )
    account = after.accounts["c1"]
    assert (account.rounds, account.passes, account.target) == (4, 2, "r002")
    assert account.confirmation is not None
    assert account.confirmation.attempt_id == "r005"
    assert account.confirmation.estimate == rows["paired_estimate"]
    assert gated_attempt(after.assessments, "c1")["attempt_id"] == "r004"  # the latest round
    text = render(after, "table")
    assert "campaign accounting: 2 of 4 rounds PASS" in text
    assert "r005 is a confirmation round of r002 (never eligible)" in text


def _pooled_spread(rounds: list[tuple[str, str, float]]) -> float:
    """The pooled within-round sd of ln(b / c), from the written runs (plain Python)."""
    total, df = 0.0, 0
    for i, (_, _, factor) in enumerate(rounds, start=1):
        runs = noisy_runs(factor, i)
        b = [r["metric"] for r in runs if r["side"] == "baseline"]
        c = [r["metric"] for r in runs if r["side"] == "candidate"]
        x = [math.log(p / q) for p, q in zip(b, c, strict=True)]
        total += (len(x) - 1) * float(np.var(x, ddof=1))
        df += len(x) - 1
    return math.sqrt(total / df)


def test_the_expected_count_is_the_per_round_rate_at_the_pooled_spread(tmp_path: Path) -> None:
    folder = campaign(tmp_path / "attempts", SEARCH)
    account = assessed(folder, Store(tmp_path / "store")).accounts["c1"]
    spread = _pooled_spread(SEARCH)
    assert account.spread == pytest.approx(spread, rel=1e-12)
    (rate,) = chance.paired_rates([10], spread, gate_pct=1.0, method="student_t", confidence=0.95)
    assert account.expected == pytest.approx(4 * rate, rel=1e-12)
    assert account.rule == "paired rule, student_t at the rounds' pairs"


def test_the_median_rule_reads_the_per_side_spread_too(tmp_path: Path) -> None:
    folder = campaign(tmp_path / "attempts", SEARCH, decision="median")
    account = assessed(folder, Store(tmp_path / "store")).accounts["c1"]
    assert account.spread is not None and account.side_spread is not None
    rate = chance.median_rate(10, account.spread, account.side_spread, gate_pct=1.0)
    assert account.expected == pytest.approx(4 * rate)
    assert 4 * rate > 0.5  # the median rule passes identical code often: about a fifth


def test_a_chained_campaign_confirms_its_last_adopted_step(tmp_path: Path) -> None:
    chain = [("main", "a", 0.9), ("a", "b", 0.92), ("b", "c", 1.0), ("main", "x", 0.85)]
    account = assessed(campaign(tmp_path / "attempts", chain), Store(tmp_path / "s")).accounts
    got = account["c1"]
    assert got.chained and got.target_rule == "chain"
    assert got.target == "r004"  # the latest PASS: x builds on main, the chain's last adoption
    chain = [("main", "a", 0.9), ("a", "b", 0.92), ("b", "c", 1.0)]
    folder = campaign(tmp_path / "other", chain)
    store = Store(tmp_path / "s2")
    result = assessed(folder, store)
    got = result.accounts["c1"]
    assert (got.target, got.chain, got.reference) == ("r002", ("r001", "r002"), "main")
    rows = dict(result.assessments.select("attempt_id", "paired_estimate").iter_rows())
    assert got.chain_estimate == pytest.approx(rows["r001"] * rows["r002"])
    text = render(FinalResult(ingest(folder.parent, store), result, "c1"), "table")
    assert (
        "chained campaign (a round's baseline is an earlier candidate): main -> a -> b "
        "(adopted in r001, r002)" in text
    )


def test_attempt_json_keeps_commands_and_a_confirmation_needs_its_target(tmp_path: Path) -> None:
    folder = campaign(tmp_path / "attempts", SEARCH[:1])
    commands = {
        "baseline": {"command": "python bench.py --old", "cwd": "/src/old"},
        "candidate": {"command": "python bench.py", "cwd": "/src/new"},
    }
    write_attempt(folder, attempt("r002", 2, "main", "a", commands=commands), noisy_runs(1, 2))
    write_attempt(folder, attempt("r003", 3, "main", "a", kind="confirmation"), noisy_runs(1, 3))
    modes: tuple[ReadMode, ...] = ("fast", "precise")
    for mode in modes:
        store = Store(tmp_path / f"store-{mode}")
        report = ingest(folder.parent, store, mode=mode)
        row = store.read("attempts", ["c1"]).filter(pl.col("attempt_id") == "r002")
        assert row.select(
            "baseline_command", "baseline_cwd", "candidate_command", "candidate_cwd"
        ).row(0) == ("python bench.py --old", "/src/old", "python bench.py", "/src/new")
        messages = [str(issue) for issue in report.issues]
        assert any(
            'r003/attempt.json:1: field "confirms": is required when "kind" is present' in m
            for m in messages
        ), messages
