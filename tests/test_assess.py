"""assess over a store: integrity blocking, incremental recompute, what-if, batching, and the
median-rule regression (both switches off), against independent reference code."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from assess_fixtures import Attempt, campaign, expect, integrity_row, run, write_store

from pipeline.assessment import intervals
from pipeline.assessment.campaigns import assess
from pipeline.contract.policy import PolicyValue
from pipeline.errors import ExitCode, PolicyError, UsageError
from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt, write_campaign

RESAMPLES = 500
EXPS = [
    expect("region", "attn", "decrease"),
    expect("counter", "launches", "decrease"),
    expect("region", "ref", "unchanged"),
]


def noisy_attempt(rng: np.random.Generator, cid: str, rnd: int, gain: float, **kw: Any) -> Attempt:
    """Unequal repetitions, a failed run, a one-sided repetition; candidate attn x gain."""
    runs = []
    n_b, n_c = int(rng.integers(5, 9)), int(rng.integers(5, 9))
    for side, n, g in (("baseline", n_b, 1.0), ("candidate", n_c, gain)):
        for rep in range(n):
            if rng.random() < 0.1:
                runs.append(run(side, rep, None, status="failed"))
                continue
            drift = rng.lognormal(0, 0.03)
            bd = {"s0": {"attn": 1.0 * g * drift, "mlp": 2.0 * drift, "ref": 1.0 * drift}}
            total = sum(bd["s0"].values())
            runs.append(run(side, rep, total, breakdown=bd, counters={"launches": 100 * g}))
    exps = EXPS if rng.random() < 0.6 else []
    return Attempt(cid, f"r{rnd:03d}", rnd, runs, exps, **kw)


def campaigns_and_attempts(seed: int = 0) -> tuple[list[dict], list[Attempt]]:
    rng = np.random.default_rng(seed)
    camps = [
        campaign("lo", resamples=RESAMPLES),
        campaign("hi", better="higher", resamples=RESAMPLES, min_improvement_pct=2.0),
        campaign("gate", resamples=RESAMPLES, min_improvement_pct=0.0),
    ]
    attempts = []
    for c in camps:
        for rnd in range(1, 9):
            gain = float(rng.choice([0.7, 0.95, 1.0, 1.05, 1.3]))
            status = "aborted" if rnd == 8 else "completed"
            attempts.append(noisy_attempt(rng, c["campaign_id"], rnd, gain, status=status))
    return camps, attempts


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store")
    write_store(s, *campaigns_and_attempts())
    return s


# -- reference: the existing median rule, written out plainly ------------------------------
def reference_median(camps: list[dict], attempts: list[Attempt]) -> dict[tuple[str, str], tuple]:
    """(campaign, attempt) -> (verdict, reason, improvement_pct, best)."""
    out: dict[tuple[str, str], list] = {}
    by_id = {c["campaign_id"]: c for c in camps}
    for a in attempts:
        c = by_id[a.campaign_id]
        b = [r["metric"] for r in a.runs if r["side"] == "baseline" and r["status"] == "ok"]
        k = [r["metric"] for r in a.runs if r["side"] == "candidate" and r["status"] == "ok"]
        pct = None
        if a.status != "completed":
            verdict, reason = "INCONCLUSIVE", f"attempt_{a.status}"
        elif not b or not k:
            verdict, reason = "INCONCLUSIVE", "no_samples"
        else:
            mb, mc = float(np.median(b)), float(np.median(k))
            pct = (mc - mb) / mb * 100 if c["metric_better"] == "higher" else (mb - mc) / mb * 100
            if pct > 0 and pct >= c["min_improvement_pct"]:
                verdict, reason = "PASS", None
            else:
                verdict, reason = "FAIL", "below_gate" if pct > 0 else "not_improved"
        if a.status != "completed" and b and k:
            mb, mc = float(np.median(b)), float(np.median(k))
            pct = (mc - mb) / mb * 100 if c["metric_better"] == "higher" else (mb - mc) / mb * 100
        out[(a.campaign_id, a.attempt_id)] = [verdict, reason, pct, False, a.round]
    for cid in by_id:
        passes = [(-v[2], v[4], key) for key, v in out.items() if key[0] == cid and v[0] == "PASS"]
        if passes:
            out[min(passes)[2]][3] = True
    return {k: tuple(v[:4]) for k, v in out.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_switches_off_is_exactly_the_median_rule(tmp_path: Path, seed: int) -> None:
    camps, attempts = campaigns_and_attempts(seed)
    s = Store(tmp_path / "s")
    write_store(s, camps, attempts)
    got = assess(s).assessments
    expected = reference_median(camps, attempts)
    assert got.height == len(expected)
    for row in got.iter_rows(named=True):
        verdict, reason, pct, best = expected[(row["campaign_id"], row["attempt_id"])]
        assert (row["verdict"], row["reason"], row["best"]) == (verdict, reason, best)
        assert (row["median_verdict"], row["eligible"]) == (verdict, verdict == "PASS")
        if pct is None:
            assert row["improvement_pct"] is None
        else:
            assert row["improvement_pct"] == pytest.approx(pct, rel=1e-12, abs=0)
        assert row["statistical_significance"] == "not_established"
    # the new fields do say something different somewhere: the rule ignores them
    assert (got["paired_verdict"] != got["verdict"]).any()
    assert sum(v[3] for v in expected.values()) >= 2


def test_counts_and_medians_use_unpaired_runs(tmp_path: Path) -> None:
    runs = [run("baseline", r, 2.0) for r in range(5)] + [run("baseline", 9, 10.0)]
    runs += [run("candidate", r, 1.9) for r in range(5)] + [run("candidate", 7, 0.1)]
    runs += [run("candidate", 5, None, status="failed")]
    s = Store(tmp_path / "s")
    write_store(s, [campaign("c", resamples=RESAMPLES)], [Attempt("c", "a", 1, runs)])
    row = assess(s).assessments.row(0, named=True)
    assert (row["n_pairs"], row["n_baseline_ok"], row["n_candidate_ok"]) == (5, 6, 6)
    assert (row["n_unpaired_baseline"], row["n_unpaired_candidate"], row["n_failed"]) == (1, 1, 1)
    mb, mc = np.median([2.0] * 5 + [10.0]), np.median([1.9] * 5 + [0.1])
    assert row["improvement_pct"] == (mb - mc) / mb * 100


# -- integrity ----------------------------------------------------------------------------------
CODES = [
    "policy_digest_mismatch",
    "mechanism_digest_mismatch",
    "mechanism_changed",
    "declared_after_start",
    "mechanism_file_missing",
    "mechanism_digest_missing",
]


@pytest.mark.parametrize("code", CODES)
@pytest.mark.slow
def test_integrity_row_blocks_only_its_campaign(tmp_path: Path, code: str) -> None:
    camps, attempts = campaigns_and_attempts()
    s = Store(tmp_path / "s")
    write_store(s, camps, attempts)
    assess(s)  # first without errors: outputs exist for every campaign
    attempt_id = None if code == "policy_digest_mismatch" else "r001"
    write_store(s, camps, attempts, integrity=[integrity_row("hi", code, attempt_id)])
    result = assess(s)
    assert result.exit_code == ExitCode.INTEGRITY
    assert result.blocked["code"].to_list() == [code]
    assert set(result.assessments["campaign_id"]) == {"lo", "gate"}
    for name in ("assessments", "comparisons", "outcomes"):
        assert s.campaign_ids(name) == ["gate", "lo"]  # no stale verdicts of the blocked one
    assert s.read("assessments")["campaign_id"].n_unique() == 2


def test_unknown_campaign_is_a_usage_error(store: Store) -> None:
    with pytest.raises(UsageError, match="unknown campaign 'nope'"):
        assess(store, ["nope"])


# -- incremental --------------------------------------------------------------------------------
def _files(s: Store) -> dict[str, int]:
    return {
        str(p.relative_to(s.root)): p.stat().st_mtime_ns
        for name in ("assessments", "comparisons", "outcomes")
        for p in s.table_dir(name).rglob("*.parquet")
    }


class Spy:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.quantities = 0
        real = intervals.paired_intervals

        def spy(x: np.ndarray, **kw: Any) -> Any:
            self.quantities += x.shape[1]
            return real(x, **kw)

        monkeypatch.setattr(intervals, "paired_intervals", spy)


def test_unchanged_inputs_recompute_nothing(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    first = assess(store)
    before = _files(store)
    spy = Spy(monkeypatch)
    second = assess(store)
    assert spy.quantities == 0 and second.recomputed == 0
    assert _files(store) == before  # nothing rewritten
    assert second.assessments.equals(first.assessments)
    assert second.comparisons.equals(first.comparisons)
    assert second.outcomes.equals(first.outcomes)


@pytest.mark.slow
def test_changed_attempt_alone_is_recomputed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    camps, attempts = campaigns_and_attempts()
    s = Store(tmp_path / "s")
    write_store(s, camps, attempts)
    first = assess(s)
    target = next(a for a in attempts if a.campaign_id == "lo" and a.attempt_id == "r002")
    for r in target.runs:
        if r["side"] == "candidate" and r["status"] == "ok":
            r["metric"] *= 0.5
    write_store(s, camps, attempts)
    spy = Spy(monkeypatch)
    second = assess(s)
    assert second.recomputed == 1 and spy.quantities > 0
    key = (pl.col("campaign_id") == "lo") & (pl.col("attempt_id") == "r002")
    assert second.comparisons.filter(~key).equals(first.comparisons.filter(~key))
    new = second.assessments.filter(key).row(0, named=True)
    old = first.assessments.filter(key).row(0, named=True)
    assert new["improvement_pct"] > old["improvement_pct"]
    # what is stored is what was returned
    stored = s.read("assessments").sort("campaign_id", "round", "attempt_id")
    assert stored.equals(second.assessments)


@pytest.mark.slow
def test_changed_policy_recomputes_the_campaign(tmp_path: Path) -> None:
    camps, attempts = campaigns_and_attempts()
    s = Store(tmp_path / "s")
    write_store(s, camps, attempts)
    assess(s)
    camps[0] = campaign("lo", resamples=RESAMPLES, seed=9)
    write_store(s, camps, attempts)
    result = assess(s)
    assert result.recomputed == sum(a.campaign_id == "lo" for a in attempts)


# -- what-if ------------------------------------------------------------------------------------
def test_what_if_is_labelled_and_never_stored(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    frozen = assess(store)
    before = _files(store)
    spy = Spy(monkeypatch)
    what = assess(store, what_if={"decision": "paired", "require_explanation": True})
    assert spy.quantities == 0  # verdict-only overrides reuse the stored intervals
    assert _files(store) == before
    assert what.what_if == {"decision": "paired", "require_explanation": "true"}
    rows = what.assessments.join(frozen.assessments, on=["campaign_id", "attempt_id"], suffix="_f")
    # the what-if verdict = the paired verdict, rewritten by the explanation gate when PASS
    gate = {"explained": "PASS", "unsupported": "FAIL", "contradicted": "FAIL"}
    for r in rows.iter_rows(named=True):
        want = r["paired_verdict_f"]
        if want == "PASS":
            want = gate.get(r["explanation_f"], "INCONCLUSIVE")
        assert r["verdict"] == want and r["decision"] == "paired" and r["require_explanation"]
    changed = what.changed_verdicts().height
    assert changed == (rows["verdict"] != rows["verdict_f"]).sum() and changed > 0
    assert (what.assessments["policy_sha256"] != frozen.assessments["policy_sha256"]).all()


def test_what_if_interval_key_recomputes_without_storing(store: Store) -> None:
    frozen = assess(store)
    before = _files(store)
    what = assess(store, what_if={"seed": 123})
    assert what.recomputed == frozen.assessments.height
    assert _files(store) == before
    assert not what.comparisons["low"].equals(frozen.comparisons["low"])
    assert assess(store).recomputed == 0  # the frozen results are still the stored ones


@pytest.mark.parametrize(
    ("what_if", "message"),
    [
        ({"colour": "red"}, 'policy field "colour": unknown policy field'),
        (
            {"decision": "mean"},
            'policy field "decision": must be one of median, paired, got "mean"',
        ),
        ({"require_explanation": "true"}, 'must be true or false, got "true"'),
        ({"min_improvement_pct": float("nan")}, "must be a finite number, got nan"),
        ({"min_pairs": 2}, "must be >= 5, got 2"),
        ({"seed": 1.5}, "must be an integer, got 1.5"),
        ({"resamples": True}, "must be an integer, got true"),
    ],
)
def test_bad_what_if(store: Store, what_if: dict[str, PolicyValue], message: str) -> None:
    """The values checked by the rules campaign.json is checked by, in the library's words."""
    with pytest.raises(PolicyError, match=re.escape(message)):
        assess(store, what_if=what_if)


@pytest.mark.slow
def test_what_if_numbers_are_read_as_campaign_json_reads_them(store: Store) -> None:
    """An integer for a number field is that number: the same what-if, the same digest."""
    as_int = assess(store, what_if={"min_improvement_pct": 2})
    as_float = assess(store, what_if={"min_improvement_pct": 2.0})
    assert as_int.assessments.equals(as_float.assessments)
    assert as_int.what_if == as_float.what_if == {"min_improvement_pct": "2"}


@pytest.mark.slow
def test_batches_give_the_same_results(tmp_path: Path) -> None:
    camps, attempts = campaigns_and_attempts(3)
    s = Store(tmp_path / "s")
    write_store(s, camps, attempts)
    whole = assess(s, write=False)
    small = assess(s, write=False, batch_size=3)
    assert small.assessments.equals(whole.assessments)
    assert small.comparisons.equals(whole.comparisons)
    assert small.outcomes.equals(whole.outcomes)


@pytest.mark.slow
def test_incremental_equals_fresh_bit_for_bit(tmp_path: Path) -> None:
    # Attempts added later are computed in a batch of their own, beside other attempts than in a
    # fresh assess of the same store: every number must still be the same to the last bit.
    camps, attempts = campaigns_and_attempts(5)
    grown = Store(tmp_path / "grown")
    write_store(grown, camps, [a for a in attempts if a.round <= 3])
    assess(grown)
    write_store(grown, camps, attempts)
    incremental = assess(grown)
    assert 0 < incremental.recomputed < len(attempts)
    fresh_store = Store(tmp_path / "fresh")
    write_store(fresh_store, camps, attempts)
    fresh = assess(fresh_store, batch_size=5)
    assert incremental.comparisons.equals(fresh.comparisons)  # exact float equality
    assert incremental.assessments.equals(fresh.assessments)


# -- end to end through real ingest -------------------------------------------------------------
SCHEMA = {"schema": "explain-pipeline/mechanism/v1"}
MECHANISM = {
    "hypothesis": "fusing saves launches",
    "expectations": [
        {"target": "region", "name": "attn", "expect": "decrease"},
        {"target": "region", "name": "ref", "expect": "unchanged"},
    ],
}


def _runs(gain: float) -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    out = []
    for rep in range(6):
        for side, g in (("baseline", 1.0), ("candidate", gain)):
            d = float(rng.lognormal(0, 0.02))
            bd = {"s0": {"attn": round(g * d, 6), "ref": round(d, 6)}}
            out.append(
                {
                    "side": side,
                    "repetition": rep,
                    "status": "ok",
                    "metric": round(sum(bd["s0"].values()), 6),
                    "breakdown": bd,
                }
            )
    return out


def _attempt_doc(aid: str, declared: str | None = "2026-11-01T11:00:00Z") -> dict[str, Any]:
    doc = {
        "attempt_id": aid,
        "round": int(aid[1:]),
        "candidate": "x",
        "baseline": "main",
        "status": "completed",
        "started_at": "2026-11-01T12:00:00Z",
    }
    if declared:
        doc["declared_at"] = declared
    return doc


def _campaign_dir(root: Path, cid: str) -> Path:
    policy = {"resamples": RESAMPLES}
    metric = {"name": "e2e_seconds", "better": "lower"}
    folder = write_campaign(
        root, cid, created_at="2026-11-01T10:00:00Z", metric=metric, policy=policy
    )
    write_attempt(folder, _attempt_doc("r1"), _runs(0.7), mechanism=MECHANISM)
    return folder


def _break(folder: Path, how: str) -> None:
    attempt = folder / "r1"
    if how == "policy_digest_mismatch":
        doc = json.loads((folder / "campaign.json").read_text())
        doc["policy_sha256"] = "0" * 64
        (folder / "campaign.json").write_text(json.dumps(doc))
    elif how == "mechanism_digest_mismatch":
        (attempt / "mechanism.json").write_text(json.dumps({**SCHEMA, **MECHANISM}))
    elif how == "declared_after_start":
        late = _attempt_doc("r1", "2026-11-01T13:00:00Z")
        write_attempt(folder, late, _runs(0.7), mechanism=MECHANISM)
    elif how == "mechanism_file_missing":
        (attempt / "mechanism.json").unlink()
    elif how == "mechanism_digest_missing":
        write_attempt(folder, _attempt_doc("r1", None), _runs(0.7))
        (attempt / "mechanism.json").write_text(json.dumps({**SCHEMA, **MECHANISM}))


@pytest.mark.parametrize(
    "how",
    [
        "policy_digest_mismatch",
        "mechanism_digest_mismatch",
        "declared_after_start",
        "mechanism_file_missing",
        "mechanism_digest_missing",
    ],
)
@pytest.mark.slow
def test_ingested_integrity_errors_block(tmp_path: Path, how: str) -> None:
    root = tmp_path / "attempts"
    _campaign_dir(root, "good")
    _break(_campaign_dir(root, "bad"), how)
    s = Store(tmp_path / "store")
    ingest(root, s)
    result = assess(s)
    assert result.exit_code == ExitCode.INTEGRITY
    assert set(result.blocked["campaign_id"]) == {"bad"}
    assert how in set(result.blocked["code"])
    row = result.assessments.row(0, named=True)
    assert (row["campaign_id"], row["verdict"], row["explanation"]) == ("good", "PASS", "explained")
    assert s.campaign_ids("assessments") == ["good"]


def test_mechanism_edited_after_first_ingest_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "attempts"
    folder = _campaign_dir(root, "c")
    s = Store(tmp_path / "store")
    ingest(root, s)
    assert assess(s).exit_code == ExitCode.OK
    edited = {**MECHANISM, "hypothesis": "something else"}
    write_attempt(folder, _attempt_doc("r1"), _runs(0.7), mechanism=edited)  # digest updated too
    ingest(root, s)
    result = assess(s)
    assert result.exit_code == ExitCode.INTEGRITY
    assert "mechanism_changed" in set(result.blocked["code"])
    assert s.campaign_ids("assessments") == []  # the old verdicts are not shown as current
