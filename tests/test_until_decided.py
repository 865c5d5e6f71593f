"""round/ab --until-decided with real processes (docs/record.md, "Stopping when decided")."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_result as run_main
from helpers import CLI, round_args, workload
from helpers import start_campaign as start
from scipy import stats

from pipeline.assessment import sequential
from pipeline.assessment.campaigns import assess
from pipeline.ingestion.attempts import ingest
from pipeline.record.order import SIDES, block_schedule
from pipeline.store.tables import Store

pytestmark = pytest.mark.slow  # real processes, Ray, a browser or long simulations

FAST, SLOW = workload("work=0"), workload("work=1000000")  # exact values: 11x less work


SEQUENTIAL = ("--decision", "paired", "--interval", sequential.METHOD)


def attempt_json(folder: Path) -> dict:
    return json.loads((folder / "attempt.json").read_text())


# -- the order of a round run in blocks -------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 12345, 2**40 + 7])
def test_every_block_is_balanced_and_a_prefix_of_a_longer_round(seed: int) -> None:
    slots = block_schedule(20, seed)
    assert [s.repetition for s in slots] == [r for r in range(40) for _ in SIDES]
    first = {s.repetition for s in slots if s.side == "baseline" and s.order == 0}
    for block in range(20):
        assert len(first & {2 * block, 2 * block + 1}) == 1  # one baseline-first per block
    assert block_schedule(3, seed) == slots[:12]
    draws = np.random.Generator(np.random.PCG64(seed)).integers(0, 2, size=20)
    assert sorted(first) == [2 * b + int(f) for b, f in enumerate(draws)]


# -- refusals before anything runs ------------------------------------------------------------
@pytest.mark.parametrize("method", ["percentile", "student_t", "expanded_percentile"])
def test_a_campaign_not_frozen_for_early_stopping_refuses_with_the_peeking_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    folder = start(tmp_path / "c", capsys, "--decision", "paired", "--interval", method)
    code, _, err = run_main(round_args(folder, "true", "true", "--until-decided"), capsys)
    assert code == 2
    rate = f"{sequential.PEEKING_FALSE_PASS[method]:.1%}"
    assert f"freezes interval {method}, which is not valid under early stopping" in err
    assert f"passes {rate} of rounds whose true gain equals the gate" in err
    assert len(err.strip().splitlines()) == 1
    assert not [p for p in folder.iterdir() if p.is_dir()]  # no attempt folder was made


def test_the_median_rule_and_conflicting_counts_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    median = start(tmp_path / "m", capsys, "--interval", sequential.METHOD)
    code, _, err = run_main(round_args(median, "true", "true", "--until-decided"), capsys)
    assert code == 2 and "freezes decision median" in err
    folder = start(tmp_path / "s", capsys, *SEQUENTIAL)
    for extra, message in (
        (["--until-decided", "-n", "8"], "--repetitions/-n and --until-decided: give one"),
        (["--max-repetitions", "8"], "--max-repetitions needs --until-decided"),
        (["--until-decided", "--max-repetitions", "9"], "--max-repetitions must be even"),
        (["--until-decided", "--max-repetitions", "4"], "at least the first look, 6"),
    ):
        code, _, err = run_main(round_args(folder, "true", "true", *extra), capsys)
        assert code == 2 and message in err, (extra, err)
    code, _, err = run_main(
        ["ab", "true", "true", "--until-decided", "--interval", "student_t"], capsys
    )
    assert code == 2 and "ab's campaign would freeze interval student_t" in err


# -- stopping ---------------------------------------------------------------------------------
def test_a_huge_real_gain_stops_at_the_first_look_with_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = start(tmp_path / "seq", capsys, *SEQUENTIAL)
    code, out, err = run_main(round_args(folder, SLOW, FAST, "--until-decided"), capsys)
    assert (code, err) == (0, "round r001: look 1 at 6 pairs: PASS; stop (pass) (at most 40)\n")
    plan = attempt_json(folder / "r001")["sequential"]
    assert plan == {
        "first_look": 6,
        "look_every": 2,
        "max_pairs": 40,
        "looks": [6],
        "stopped": "pass",
    }
    assert "until decided: PASS reached at 6 repetitions (pairs at each look: 6" in out
    lines = (folder / "r001" / "measurements.jsonl").read_text().splitlines()
    assert len(lines) == 12
    assert "look 1 at 6 pairs: PASS; stop (pass)" in (folder / "r001" / "runs.log").read_text()
    # the look decided as assess decides on the files: ingest them and compare
    store = Store(tmp_path / "store")
    assert ingest(folder, store).issues == []
    row = assess(store, ["seq"]).assessments.row(0, named=True)
    assert row["verdict"] == "PASS"
    stored = store.read("attempts", ["seq"]).row(0, named=True)
    assert (stored["sequential_stopped"], stored["sequential_looks"]) == ("pass", "[6]")


def test_identical_commands_never_pass_and_stop_by_futility_or_the_maximum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Six A/A rounds of the exact workload, each with its own seed (its own draw of noise);
    each may PASS with probability at most 2.5% (sequential_t's rate), so three or more PASS
    would be a defect (by chance: about 3e-4)."""
    folder = start(tmp_path / "aa", capsys, *SEQUENTIAL)
    stops = []
    for seed in range(6):
        same = workload(seed=seed)
        code, out, _ = run_main(
            round_args(folder, same, same, "--until-decided", "--max-repetitions", "12"), capsys
        )
        assert code == 0, out
    for attempt in sorted(p for p in folder.iterdir() if p.is_dir()):
        plan = attempt_json(attempt)["sequential"]
        stops.append(plan["stopped"])
        assert plan["looks"] and plan["looks"][-1] <= 12
        assert plan["looks"] == sorted(plan["looks"]) and plan["looks"][0] == 6
        if plan["stopped"] == "max":
            assert plan["looks"][-1] == 12
    assert set(stops) <= {"futility", "max", "pass"}
    assert stops.count("pass") <= 2, stops


def test_ab_until_decided_freezes_sequential_t_and_says_why_it_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "kept"
    code, out, err = run_main(
        ["ab", SLOW, FAST, "--warmup", "0", "--until-decided", "--keep", str(kept)], capsys
    )
    assert (code, err) == (0, "round r001: look 1 at 6 pairs: PASS; stop (pass) (at most 40)\n")
    policy = json.loads((kept / "campaign.json").read_text())["policy"]
    assert (policy["interval"], policy["decision"]) == (sequential.METHOD, "paired")
    assert "until decided: PASS reached at 6 repetitions" in out
    assert f"(decided by the paired rule, interval {sequential.METHOD}, gate 1 %" in out


def test_identical_deterministic_commands_at_a_gate_of_0_pct_stop_at_the_first_look(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every log-ratio 0, no spread: PASS needs low > 1, out of reach; before, the round ran
    all 40 pairs (the futility rule counted a mean equal to the gate as reaching it)."""
    same = workload("wobble=0")
    code, out, err = run_main(
        ["ab", same, same, "--warmup", "0", "--until-decided", "--min-improvement-pct", "0"],
        capsys,
    )
    assert code == 5, err  # FAIL (within_noise): not PASS
    assert err == (
        "round r001: look 1 at 6 pairs: FAIL (within_noise); stop (futility) (at most 40)\n"
    )
    assert "until decided: PASS out of reach by the maximum (futility) at 6 repetitions" in out


def test_an_interrupted_round_says_interrupted_and_keeps_its_looks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = start(tmp_path / "int", capsys, *SEQUENTIAL)
    same = "sleep 0.1"
    args = round_args(folder, same, same, "--until-decided", "--order-seed", "3")
    process = subprocess.Popen(
        [str(CLI), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    measurements = folder / "r001" / "measurements.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
        not measurements.exists() or len(measurements.read_text().splitlines()) < 2
    ):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    document = attempt_json(folder / "r001")
    assert document["status"] == "aborted"
    assert document["sequential"]["stopped"] == "interrupted"
    assert ingest(folder, Store(tmp_path / "store")).issues == []


# -- the edges (issue 28) -------------------------------------------------------------------------
def test_a_round_that_reaches_its_maximum_with_a_failed_run_says_max(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Six repetitions at most, one look: the candidate of repetition 5 fails, so the look has 5
    pairs. Before the fix the round was not recorded `max` (pairs were counted against the
    maximum: `interrupted`, or `futility` at what was its last look) and its interval used
    t(5), as if it had 6 pairs: narrower than student_t's."""
    folder = start(tmp_path / "edge", capsys, *SEQUENTIAL)
    args = round_args(
        folder,
        workload(),
        workload("work=400000", "fail=5:exit"),  # slower: the look cannot PASS
        "--until-decided",
        "--max-repetitions",
        "6",
    )
    code, out, _ = run_main(args, capsys)
    assert code == 0, out
    plan = attempt_json(folder / "r001")["sequential"]
    assert (plan["looks"], plan["stopped"]) == ([5], "max")
    assert "until decided: the maximum reached at 6 repetitions" in out
    log = (folder / "r001" / "runs.log").read_text()
    assert "  until decided: looks from 6 every 2 pairs, at most 6 repetitions, warm-up 0" in log
    assert "repetitions 10" not in log
    # the stored interval is student_t's at the 5 pairs there
    store = Store(tmp_path / "store")
    assert ingest(folder, store).issues == []
    comparisons = assess(store, ["edge"]).comparisons
    metric = comparisons.filter(comparisons["quantity"] == "metric").row(0, named=True)
    lines = [json.loads(x) for x in (folder / "r001" / "measurements.jsonl").read_text().split()]
    ok = {(x["side"], x["repetition"]): x["metric"] for x in lines if x["status"] == "ok"}
    x = np.log([ok["baseline", r] / ok["candidate", r] for r in range(5)])
    half = stats.t.ppf(0.975, 4) * x.std(ddof=1) / np.sqrt(5)
    assert metric["n_pairs"] == 5 and metric["method"] == sequential.METHOD
    np.testing.assert_allclose(
        [metric["low"], metric["high"]], np.exp([x.mean() - half, x.mean() + half]), rtol=1e-12
    )


MECHANISM_UP = {
    "schema": "explain-pipeline/mechanism/v1",
    "hypothesis": "more iterations",
    "expectations": [{"target": "counter", "name": "iterations", "expect": "increase"}],
}


@pytest.mark.parametrize("declared", [False, True], ids=["not_declared", "contradicted"])
def test_a_round_that_can_never_pass_its_explanation_stops_for_futility(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], declared: bool
) -> None:
    """require_explanation: the candidate does a tenth of the work (its metric would PASS at
    the first look), but no mechanism was declared, or the one declared (iterations increase)
    is contradicted. Before the fix futility looked at the metric only, so the round ran to its
    maximum though it could never PASS."""
    folder = start(tmp_path / "expl", capsys, *SEQUENTIAL, "--require-explanation")
    extra = ["--until-decided", "--max-repetitions", "10"]
    if declared:
        mechanism = tmp_path / "up.json"
        mechanism.write_text(json.dumps(MECHANISM_UP))
        extra += ["--mechanism-file", str(mechanism)]
    args = round_args(folder, workload("work=2000000"), workload("work=200000"), *extra)
    code, out, _ = run_main(args, capsys)
    assert code == 0, out
    explanation = "contradicted" if declared else "not_declared"
    plan = attempt_json(folder / "r001")["sequential"]
    assert (plan["looks"], plan["stopped"]) == ([6], "futility")
    why = f"explanation {explanation}, where require_explanation needs explained"
    assert f"until decided: PASS out of reach (futility: {why}) at 6 repetitions" in out
    assert "look 1 at 6 pairs: " in (folder / "r001" / "runs.log").read_text()
    assert f"stop (futility: {why})" in (folder / "r001" / "runs.log").read_text()
