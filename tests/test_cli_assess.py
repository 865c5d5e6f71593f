"""`explain-pipeline assess` through the real entry point: output, exit codes, messages."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import polars as pl
import pytest
from assess_fixtures import Attempt, campaign, expect, run, write_gain_and_blocked, write_store
from conftest import cli_result as cli

from pipeline.contract.schemas import table
from pipeline.store.tables import Store

EXPS = [expect("region", "attn", "decrease"), expect("region", "ref", "unchanged")]


def _attempts(cid: str) -> list[Attempt]:
    """r1: every pair 2.0 -> 1.5 s (attn 1.0 -> 0.5, ref 1.0); r2: no change, no mechanism."""
    gain = [run("baseline", r, 2.0, breakdown={"attn": 1.0, "ref": 1.0}) for r in range(6)]
    gain += [run("candidate", r, 1.5, breakdown={"attn": 0.5, "ref": 1.0}) for r in range(6)]
    same = [run(side, r, 2.0) for r in range(6) for side in ("baseline", "candidate")]
    return [Attempt(cid, "r1", 1, gain, EXPS), Attempt(cid, "r2", 2, same)]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return write_gain_and_blocked(tmp_path / "store", _attempts)


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_table_rows(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(["assess", "c", "--store", str(store)], capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "campaign c: decision=median require_explanation=false"
    assert cells(lines[1]) == [
        "round",
        "attempt",
        "candidate",
        "pairs",
        "median %",
        "paired [low, high]",
        "share",
        "explanation",
        "verdict",
        "eligible",
        "best",
    ]
    # 2.0 -> 1.5: +25 %, ratio 4/3 in every pair; share 0.5 -> 2/3; attn/ref 1 -> 0.5
    assert cells(lines[2]) == [
        "1",
        "r1",
        "cand-r1",
        "6",
        "+25.00",
        "1.3333 [1.3333, 1.3333]",
        "1.3333",
        "explained",
        "PASS",
        "yes",
        "*",
    ]
    assert cells(lines[3]) == [
        "2",
        "r2",
        "cand-r2",
        "6",
        "+0.00",
        "1.0000 [1.0000, 1.0000]",
        "-",
        "not_declared",
        "FAIL (not_improved)",
        "no",
    ]


def test_blocked_campaign_lists_errors_and_exits_3(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(["assess", "--all", "--store", str(store)], capsys)
    assert code == 3
    assert err == "error: blocked by integrity errors: b\n"
    blocked = out[out.index("campaign b:") :].splitlines()
    assert blocked[:4] == [
        "campaign b: BLOCKED by 1 integrity error(s); no verdicts issued",
        "  attempt r1: [mechanism_digest_mismatch] mechanism_digest_mismatch (what is wrong, as "
        "ingest words it)",
        "    expected: aaaa",
        "    actual:   bbbb",
    ]
    assert "campaign c: decision=median" in out  # the other campaign is assessed
    assert Store(store).campaign_ids("assessments") == ["c"]


def test_json_has_comparisons_outcomes_and_errors(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(["assess", "--all", "--store", str(store), "--format", "json"], capsys)
    doc = json.loads(out)
    assert code == 3 and doc["what_if"] is None
    by_id = {c["campaign_id"]: c for c in doc["campaigns"]}
    assert by_id["b"]["status"] == "blocked" and by_id["b"]["attempts"] == []
    assert by_id["b"]["integrity_errors"][0]["expected"] == "aaaa"
    r1 = by_id["c"]["attempts"][0]
    assert (r1["attempt_id"], r1["verdict"], r1["best"]) == ("r1", "PASS", True)
    metric = next(c for c in r1["comparisons"] if c["quantity"] == "metric")
    assert metric["estimate"] == pytest.approx(4 / 3, rel=1e-12)
    assert [(o["name"], o["outcome"]) for o in r1["outcomes"]] == [
        ("attn", "confirmed"),
        ("ref", "assumed"),
    ]


def test_csv_is_one_row_per_attempt(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["assess", "c", "--store", str(store), "--format", "csv"], capsys)
    frame = pl.read_csv(io.StringIO(out))
    digests = ("inputs_sha256", "campaign_sha256", "boundary_recipe")
    readable = [c for c in table("assessments").names if c not in digests]
    assert code == 0 and frame.columns == readable
    assert frame["verdict"].to_list() == ["PASS", "FAIL"]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_bookkeeping_digests_only_when_asked(
    store: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    def columns(*extra: str) -> list[str]:
        code, out, _ = cli(["assess", "c", "--store", str(store), "--format", fmt, *extra], capsys)
        assert code == 0
        if fmt == "csv":
            return pl.read_csv(io.StringIO(out)).columns
        return list(json.loads(out)["campaigns"][0]["attempts"][0])

    plain, asked = columns(), columns("--digests")
    assert "policy_sha256" in plain  # the policy's digest is not bookkeeping: people compare it
    assert "inputs_sha256" not in plain and "campaign_sha256" not in plain
    assert [c for c in asked if c not in plain] == [
        "inputs_sha256",
        "campaign_sha256",
        "boundary_recipe",
    ]


def test_what_if_is_labelled_counted_and_not_stored(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(["assess", "c", "--store", str(store)], capsys)
    files = {p: p.stat().st_mtime_ns for p in (store / "assessments").rglob("*.parquet")}
    args = ["assess", "c", "--store", str(store), "--what-if", "min_improvement_pct=30"]
    code, out, _ = cli(args, capsys)
    assert code == 0
    assert out.splitlines()[0] == "WHAT-IF (not stored): min_improvement_pct=30"
    assert "FAIL (below_gate)" in out  # +25 % is under a 30 % gate
    assert out.rstrip().splitlines()[-1] == "what-if changes 1 of 2 verdicts"
    assert {p: p.stat().st_mtime_ns for p in (store / "assessments").rglob("*.parquet")} == files


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["assess", "zzz"], "error: unknown campaign 'zzz' (the store {store} has: b, c)"),
        (["assess"], "error: give one CAMPAIGN_ID or --all"),
        (["assess", "c", "--all"], "error: give one CAMPAIGN_ID or --all"),
        (
            ["assess", "c", "--what-if", "decision"],
            "error: --what-if 'decision': expected KEY=VALUE, e.g. decision=paired",
        ),
        (
            ["assess", "c", "--what-if", "decision=best"],
            'error: --what-if decision=best: must be one of median, paired, got "best"',
        ),
    ],
)
def test_usage_errors_exit_2(
    store: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = cli([*args, "--store", str(store)], capsys)
    assert (code, out, err) == (2, "", message.format(store=store) + "\n")


def test_help_has_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["assess", "--help"], capsys)
    assert code == 0 and "Example:" in out and "--what-if KEY=VALUE" in out


def test_example_data_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(__file__).resolve().parent.parent / "data" / "attempts"
    store = str(tmp_path / "store")
    assert cli(["ingest", str(data), "--store", store], capsys)[0] == 0
    code, out, _ = cli(["assess", "--all", "--store", store, "--format", "json"], capsys)
    doc = json.loads(out)
    attempts = [a for c in doc["campaigns"] for a in c["attempts"]]
    assert code == 0 and len(attempts) == sum(1 for p in data.glob("*/*") if p.is_dir())
    assert all(sum(a["best"] for a in c["attempts"]) <= 1 for c in doc["campaigns"])


def test_named_queries_over_the_output_tables(store: Path) -> None:
    from pipeline.assessment.campaigns import assess
    from pipeline.store.query import load_named_queries, run_sql

    s = Store(store)
    unexplained = Attempt("c", "r3", 3, _attempts("c")[0].runs)  # r1's gain, no mechanism
    write_store(s, [campaign("c", resamples=200)], [*_attempts("c"), unexplained])
    result = assess(s)  # campaign b stays blocked: none of its rows may show up
    queries = load_named_queries()
    best = run_sql(s, queries["best_attempts"].sql)
    assert best.select("campaign_id", "attempt_id").rows() == [("c", "r1")]  # tie -> lowest round
    passes = run_sql(s, queries["passes_not_explained"].sql)
    assert passes.select("attempt_id", "explanation").rows() == [("r3", "not_declared")]
    differ = run_sql(s, queries["median_vs_paired"].sql)
    expected = result.assessments.filter(pl.col("median_verdict") != pl.col("paired_verdict"))
    assert differ["attempt_id"].to_list() == expected["attempt_id"].to_list()
    outcomes = run_sql(s, queries["outcomes_by_campaign"].sql)
    assert sorted(outcomes.select("outcome", "expectations").rows()) == [
        ("assumed", 1),
        ("confirmed", 1),
    ]


def test_what_if_json_shows_both_verdicts(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "assess",
        "c",
        "--store",
        str(store),
        "--format",
        "json",
        "--what-if",
        "min_improvement_pct=30",
    ]
    code, out, _ = cli(args, capsys)
    doc = json.loads(out)
    assert doc["what_if"] == {"min_improvement_pct": "30"} and doc["verdicts_changed"] == 1
    r1 = doc["campaigns"][0]["attempts"][0]
    assert (r1["verdict"], r1["reason"], r1["frozen_verdict"]) == ("FAIL", "below_gate", "PASS")


def test_campaign_without_attempts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    write_store(Store(store), [campaign("empty")], [])
    code, out, _ = cli(["assess", "empty", "--store", str(store)], capsys)
    assert (code, out) == (0, "campaign empty: no attempts\n\n")


def test_order_bias_is_shown_under_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import math

    runs = []
    for rep in range(8):  # the second run of each repetition is 3% slower, order alternating
        first = rep % 2 == 0
        b, c = (1.0, 1.03) if first else (1.03, 1.0)
        b *= math.exp(0.001 * rep)
        runs.append({**run("baseline", rep, b), "order": 0 if first else 1})
        runs.append({**run("candidate", rep, c), "order": 1 if first else 0})
    s = Store(tmp_path / "s")
    write_store(s, [campaign("c", resamples=200)], [Attempt("c", "r1", 1, runs)])
    code, out, err = cli(["assess", "c", "--store", str(s.root)], capsys)
    assert code == 0, err
    warning = next(line for line in out.splitlines() if line.startswith("ORDER BIAS"))
    assert warning.startswith(
        "ORDER BIAS r1: pairs run baseline first differ from the others by x0.94"
    )
