"""The recorder through the real entry point, with real processes: campaign start, round,
campaign final, ab (docs/record.md)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import helpers
import numpy as np
import pytest
from conftest import cli_result as run_main
from helpers import CLI, start_campaign, without_progress, workload

from pipeline.assessment.campaigns import assess
from pipeline.ingestion.attempts import ingest
from pipeline.record.order import SIDES, schedule
from pipeline.record.runner import run_environment
from pipeline.store.tables import Store

pytestmark = pytest.mark.slow  # real processes, Ray, a browser or long simulations

KINETO = Path(__file__).parent / "fixtures" / "import" / "kineto" / "cpu_steps.json"
MECHANISM = {
    "schema": "explain-pipeline/mechanism/v1",
    "hypothesis": "half the iterations in the work loop",
    "expectations": [
        {"target": "region", "name": "work", "expect": "decrease"},
        {"target": "counter", "name": "iterations", "expect": "decrease"},
        {"target": "region", "name": "fixed", "expect": "unchanged"},
    ],
}


def lines_of(folder: Path) -> list[dict[str, Any]]:
    text = (folder / "measurements.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def start(folder: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Path:
    return start_campaign(
        folder,
        capsys,
        "--decision",
        "paired",
        "--require-explanation",
        *extra,
        metric="cpu_seconds",
    )


@pytest.fixture
def campaign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    return start(tmp_path / "attempts" / "loop", capsys)


@pytest.fixture
def mechanism(tmp_path: Path) -> Path:
    path = tmp_path / "mechanism.json"
    path.write_text(json.dumps(MECHANISM, indent=2))
    return path


round_args = partial(helpers.round_args, names=("main", "change"))


# -- order design ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5, 8, 11])
@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
def test_schedule_is_the_seeded_balanced_permutation(n: int, seed: int) -> None:
    perm = np.random.Generator(np.random.PCG64(seed)).permutation(n)
    baseline_first = {int(perm[i]) for i in range(n) if i < math.ceil(n / 2)}
    slots = schedule(n, seed)
    assert [(s.repetition, s.order) for s in slots] == [(r, o) for r in range(n) for o in (0, 1)]
    firsts = {s.repetition for s in slots if s.side == "baseline" and s.order == 0}
    assert firsts == baseline_first and len(firsts) == math.ceil(n / 2)
    assert all({s.side for s in slots if s.repetition == r} == set(SIDES) for r in range(n))


def test_both_sides_get_environments_of_the_same_size(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "EXPLAIN_SIDE": "inherited", "HOME": "/root"}
    envs = [run_environment(base, side, 12, tmp_path / "run-000001", trace=True) for side in SIDES]
    sizes = [sum(len(k) + len(v) for k, v in env.items()) for env in envs]
    assert sizes[0] == sizes[1]
    assert [env["EXPLAIN_SIDE"] for env in envs] == list(SIDES)
    assert [len(env["EXPLAIN_PAD"]) for env in envs] == [1, 0]
    assert envs[0].keys() == envs[1].keys()


# -- campaign start -------------------------------------------------------------------------
def test_campaign_start_writes_the_full_policy_and_refuses_a_second_start(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.contract.policy import POLICY_DEFAULTS, policy_sha256

    document = json.loads((campaign / "campaign.json").read_text())
    assert document["policy"] == {
        **POLICY_DEFAULTS,
        "decision": "paired",
        "require_explanation": True,
    }
    assert document["policy_sha256"] == policy_sha256(document["policy"])
    assert document["metric"] == {"name": "cpu_seconds", "better": "lower"}
    before = (campaign / "campaign.json").read_bytes()
    code, out, err = run_main(["campaign", "start", str(campaign), "--metric", "x"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"error: {campaign}/campaign.json: already exists; a campaign's policy is "
        "frozen at its start (start a new campaign to change it)\n"
    )
    assert (campaign / "campaign.json").read_bytes() == before


def test_campaign_start_interval_enters_the_digest_only_when_not_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.contract.policy import canonical_policy

    digests = {}
    for interval in ("percentile", "student_t"):
        folder = tmp_path / interval
        run_main(
            ["campaign", "start", str(folder), "--metric", "s", "--interval", interval], capsys
        )
        document = json.loads((folder / "campaign.json").read_text())
        assert document["policy"]["interval"] == interval
        digests[interval] = document["policy_sha256"]
        canonical = json.loads(canonical_policy(document["policy"]))
        assert ("interval" in canonical) == (interval != "percentile")
    v1 = (
        '{"confidence":0.95,"decision":"median","min_improvement_pct":1.0,"min_pairs":5,'
        '"require_explanation":false,"resamples":10000,"seed":0}'
    )  # the digest before v1.1
    assert digests["percentile"] == hashlib.sha256(v1.encode()).hexdigest()


def test_campaign_start_needs_a_valid_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(
        ["campaign", "start", str(tmp_path / "bad name"), "--metric", "s"], capsys
    )
    assert code == 2 and "must match" in err
    assert not (tmp_path / "bad name").exists()


@pytest.mark.parametrize(
    ("option", "value"),
    [("--resamples", "1000001"), ("--min-pairs", "4"), ("--min-improvement-pct", "1000.5")],
)
def test_campaign_start_refuses_policies_ingest_would_reject(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    from pipeline.contract.schemas import document_schema

    key = option.lstrip("-").replace("-", "_")
    spec = document_schema("campaign")["properties"]["policy"]["properties"][key]
    code, _, err = run_main(
        ["campaign", "start", str(tmp_path / "c"), "--metric", "s", option, value], capsys
    )
    assert code == 2 and f"Invalid value for '{option}'" in err
    assert str(spec["maximum"] if float(value) > spec["minimum"] else spec["minimum"]) in err
    assert not (tmp_path / "c").exists()


# -- round: A/A and a real improvement, then final -------------------------------------------
def test_aa_round_and_a_real_improvement(
    mechanism: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the workload's exact values (2% wobble): an A/A PASS or a missed gain (300k -> 110k
    # iterations, ~2.7x) is a defect, on any machine (timed, CI once saw a 1.5x gain FAIL)
    campaign = start(tmp_path / "attempts" / "loop", capsys, "--min-improvement-pct", "20")
    n, seed = 8, 12345
    same = workload()
    for candidate in (same, workload("work=10000")):
        code, out, err = run_main(
            round_args(
                campaign,
                same,
                candidate,
                "-n",
                str(n),
                "--order-seed",
                str(seed),
                "--mechanism-file",
                str(mechanism),
            ),
            capsys,
        )
        assert (code, without_progress(err)) == (0, "")
        assert "completed" in out
    for attempt in ("r001", "r002"):
        folder = campaign / attempt
        document = json.loads((folder / "attempt.json").read_text())
        assert document["status"] == "completed" and document["order_seed"] == seed
        assert document["recorder"].startswith("explain-pipeline ")
        assert document["environment"]["cpu_count"].isdigit()
        assert (folder / "mechanism.json").read_bytes() == mechanism.read_bytes()
        lines = lines_of(folder)
        assert len(lines) == 2 * n and all(line["status"] == "ok" for line in lines)
        expected = [(s.repetition, s.side, s.order) for s in schedule(n, seed)]
        assert [(x["repetition"], x["side"], x["order"]) for x in lines] == expected
        first = [x["repetition"] for x in lines if x["side"] == "baseline" and x["order"] == 0]
        assert len(first) == math.ceil(n / 2)
        declared, started = moment(document["declared_at"]), moment(document["started_at"])
        candidate_starts = [moment(x["started_at"]) for x in lines if x["side"] == "candidate"]
        assert declared < started <= min(candidate_starts)
        assert all(moment(x["started_at"]) < moment(x["finished_at"]) for x in lines)
        # both sides of a repetition saw environments of equal size and equal working directories
        for key in ("env_bytes", "cwd_length"):
            per_rep = {(x["repetition"], x["counters"][key]) for x in lines}
            assert len(per_rep) == n, key

    store = tmp_path / "store"
    code, out, err = run_main(["campaign", "final", str(campaign), "--store", str(store)], capsys)
    assert (code, err) == (0, "")
    rows = {r["attempt_id"]: r for r in Store(store).read("assessments").iter_rows(named=True)}
    assert rows["r001"]["verdict"] != "PASS"  # A/A: identical code
    assert (rows["r002"]["verdict"], rows["r002"]["explanation"]) == ("PASS", "explained")
    assert rows["r002"]["best"] and "best attempt: r002 (round 2, candidate change): PASS" in out
    samples = Store(store).read("samples")
    assert samples["order"].null_count() == 0 and samples["finished_at"].null_count() == 0
    assert Store(store).read("attempts")["order_seed"].to_list() == [seed, seed]


# -- failures -------------------------------------------------------------------------------
def test_failed_runs_are_recorded_and_the_round_completes(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    candidate = workload("fail=1:exit,2:hang,3:invalid")
    code, out, err = run_main(
        round_args(campaign, workload(), candidate, "-n", "5", "--timeout", "5"), capsys
    )
    assert code == 0
    # only the first failure is shown, with the end of its stderr
    log_path = campaign / "r001" / "runs.log"
    assert without_progress(err) == (
        "warning: candidate run (repetition 1) failed: exit code 3; its stderr ends "
        f"with:\n    | boom: asked to fail\n  every run is logged in {log_path}\n"
    )
    assert "candidate 2 ok, 3 failed; 2 pairs" in out
    folder = campaign / "r001"
    status = {(x["side"], x["repetition"]): x["status"] for x in lines_of(folder)}
    failed = sorted(key for key, value in status.items() if value == "failed")
    assert failed == [("candidate", 1), ("candidate", 2), ("candidate", 3)]
    assert json.loads((folder / "attempt.json").read_text())["status"] == "completed"
    log = (folder / "runs.log").read_text()
    assert "repetition 1   candidate order" in log and "failed: exit code 3" in log
    assert "    | boom: asked to fail" in log
    assert "failed: timed out after 5 s" in log
    assert 'failed: invalid measurement: field "metric": must be > 0 for an ok run, got -1.0' in log


def test_a_round_without_any_pair_is_failed(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = shlex.join([sys.executable, "-c", "raise SystemExit(2)"])
    code, out, _ = run_main(round_args(campaign, workload(), failing, "-n", "5"), capsys)
    assert code == 6 and out.startswith("round 1 (r001): failed")
    assert json.loads((campaign / "r001" / "attempt.json").read_text())["status"] == "failed"


def _runs_logged(folder: Path) -> list[str]:
    text = (folder / "runs.log").read_text()
    return [x for x in text.splitlines() if "  warm-up " in x or "  repetition " in x]


def test_a_side_whose_warmups_all_fail_stops_the_round_at_once(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sh -c 'echo boom >&2; exit 3'` as a real process: its stderr on screen, no repetition
    run after both warm-ups failed, the attempt failed, exit 6."""
    args = round_args(campaign, "true", "sh -c 'echo boom >&2; exit 3'", "-n", "20")
    code, out, err = run_main([*args, "--warmup", "2"], capsys)
    assert code == 6
    assert out.startswith(
        "round 1 (r001): failed (stopped: every warm-up run of the candidate failed)\n"
        "  no repetition ran; warm-up: baseline 2 of 2 ok, candidate 0 of 2 ok\n"
        f"  {campaign / 'r001'} (runs.log"
    )  # before the fix: "baseline 0 ok, 0 failed; candidate 0 ok, 0 failed; 0 pairs"
    assert err.startswith(
        "warning: candidate run (warm-up) failed: exit code 3; its stderr ends with:\n    | boom\n"
    )
    folder = campaign / "r001"
    assert len(_runs_logged(folder)) == 4  # the warm-ups only, none of the 40 runs
    assert (folder / "measurements.jsonl").read_text() == ""
    assert json.loads((folder / "attempt.json").read_text())["status"] == "failed"
    assert (
        "stopped: every warm-up run of the candidate failed; the attempt is failed"
        in (folder / "runs.log").read_text()
    )


def test_consecutive_failures_stop_the_round(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without warm-ups, `false` fails GIVE_UP_AFTER times in a row: the round stops there
    instead of running all 30 repetitions; the stderr is empty and the screen says so."""
    from pipeline.record.rounds import GIVE_UP_AFTER

    code, out, err = run_main(round_args(campaign, "false", "true", "-n", "30"), capsys)
    assert code == 6
    assert f"(stopped: the baseline failed {GIVE_UP_AFTER} runs in a row)" in out
    assert err.startswith(
        "warning: baseline run (repetition 0) failed: exit code 1 (its stderr is empty)\n"
    )
    lines = lines_of(campaign / "r001")
    assert sum(x["side"] == "baseline" for x in lines) == GIVE_UP_AFTER
    # the candidate ran in each of those repetitions but perhaps the last
    assert len(lines) in (2 * GIVE_UP_AFTER - 1, 2 * GIVE_UP_AFTER)


def test_a_failing_run_that_recovers_does_not_stop_the_round(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failures that are not consecutive never stop a round: every repetition runs."""
    flaky = workload("fail=0:exit,2:exit,4:exit,6:exit,8:exit,10:exit")
    code, out, _ = run_main(round_args(campaign, workload(), flaky, "-n", "12"), capsys)
    assert code == 0 and "candidate 6 ok, 6 failed; 6 pairs" in out
    assert len(lines_of(campaign / "r001")) == 24


def test_better_higher_needs_the_measurement_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "tput"
    run_main(["campaign", "start", str(folder), "--metric", "ops", "--better", "higher"], capsys)
    quiet = shlex.join([sys.executable, "-c", "pass"])
    code, _, _ = run_main(round_args(folder, quiet, workload(), "-n", "5"), capsys)
    assert code == 6  # the baseline never wrote its metric: not one pair
    statuses = {(x["side"], x["status"]) for x in lines_of(folder / "r001")}
    assert statuses == {("baseline", "failed"), ("candidate", "ok")}
    assert "wrote no metric to $EXPLAIN_MEASUREMENT" in (folder / "r001" / "runs.log").read_text()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_round_is_an_aborted_attempt_that_ingest_accepts(
    campaign: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    slow = shlex.join([sys.executable, "-c", "import time; time.sleep(0.3)"])
    args = round_args(campaign, slow, slow, "-n", "50")
    process = subprocess.Popen(
        [str(CLI), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    measurements = campaign / "r001" / "measurements.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
        not measurements.exists() or len(measurements.read_text().splitlines()) < 2
    ):
        time.sleep(0.05)
    process.send_signal(sig)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert f"{campaign}/r001 is left as an aborted attempt (ingest accepts it)" in err
    assert json.loads((campaign / "r001" / "attempt.json").read_text())["status"] == "aborted"
    assert 2 <= len(lines_of(campaign / "r001")) < 100
    assert "interrupted: the attempt stays aborted" in (campaign / "r001" / "runs.log").read_text()
    store = Store(tmp_path / "store")
    assert ingest(campaign, store).issues == []
    row = assess(store, ["loop"]).assessments.row(0, named=True)
    assert (row["verdict"], row["reason"]) == ("INCONCLUSIVE", "attempt_aborted")


def test_a_round_killed_at_any_moment_leaves_whole_lines(campaign: Path, tmp_path: Path) -> None:
    """SIGKILL (nothing can be cleaned up) while runs of `true` follow each other as fast as the
    recorder can write their lines: the file holds whole lines only, and ingest accepts it."""
    for attempt, delay in enumerate((0.0, 0.004, 0.03)):
        args = round_args(campaign, "true", "true", "-n", "100000", "--attempt-id", f"k{attempt}")
        process = subprocess.Popen(
            [str(CLI), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        measurements = campaign / f"k{attempt}" / "measurements.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (
            not measurements.exists() or not measurements.stat().st_size
        ):
            time.sleep(0.001)
        time.sleep(delay)
        process.kill()
        process.wait(timeout=60)
        body = measurements.read_bytes()
        assert body.endswith(b"\n") and all(json.loads(x) for x in body.splitlines())
    report = ingest(campaign, Store(tmp_path / "store"))
    assert report.issues == [] and report.attempts["outcome"].to_list() == ["ingested"] * 3


# -- refusals before anything runs ----------------------------------------------------------
def test_benchmark_campaign_refuses_a_mechanism(
    tmp_path: Path, mechanism: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "suite"
    run_main(["campaign", "start", str(folder), "--metric", "s", "--kind", "benchmark"], capsys)
    code, out, err = run_main(
        round_args(folder, workload(), workload(), "--mechanism-file", str(mechanism)), capsys
    )
    assert (code, out) == (2, "")
    assert err == (
        f"error: --mechanism-file {mechanism}: a benchmark campaign refuses mechanism "
        "declarations\n"
    )
    assert sorted(p.name for p in folder.iterdir()) == ["campaign.json"]


def test_invalid_mechanism_is_rejected_with_its_line(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                **MECHANISM,
                "expectations": [
                    {"target": "region", "name": "work", "expect": "faster"},
                    {"target": "region", "name": "fixed", "expect": "increase"},
                ],
            },
            indent=2,
        )
    )
    code, _, err = run_main(
        round_args(campaign, workload(), workload(), "--mechanism-file", str(bad)), capsys
    )
    assert code == 1
    assert err == (
        f'error: {bad}:8: field "expectations[0].expect": must be one of decrease, '
        'increase, unchanged, got "faster" [not_allowed]\n'
    )
    assert sorted(p.name for p in campaign.iterdir()) == ["campaign.json"]


def test_round_needs_a_started_campaign_and_real_programs(
    tmp_path: Path, campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(round_args(tmp_path / "nope", "true", "true"), capsys)
    assert code == 2 and "no campaign.json here (start the campaign first" in err
    code, _, err = run_main(round_args(campaign, "no-such-program-x", "true"), capsys)
    assert (code, err) == (
        2,
        "error: --baseline-cmd 'no-such-program-x': 'no-such-program-x' "
        "is not an executable program\n",
    )


# -- trace kineto ---------------------------------------------------------------------------
def test_trace_kineto_imports_the_trace_each_run_leaves(
    campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.importers.lines import import_line

    copy = shlex.join(
        [
            sys.executable,
            "-c",
            "import os, shutil, sys; shutil.copy(sys.argv[1], os.environ['EXPLAIN_TRACE_DIR'])",
            str(KINETO),
        ]
    )
    nothing = shlex.join([sys.executable, "-c", "pass"])
    code, _, err = run_main(
        round_args(campaign, copy, copy, "-n", "5", "--trace", "kineto"), capsys
    )
    assert (code, without_progress(err)) == (0, "")
    reference, _ = import_line("kineto", [str(KINETO)], side="baseline", repetition=0)
    for line in lines_of(campaign / "r001"):
        assert line["status"] == "ok"
        for key in ("metric", "breakdown"):
            assert line[key] == reference[key]
        ours = {k: v for k, v in line["counters"].items() if not k.startswith("rusage.")}
        assert ours == reference["counters"]  # and the recorder's rusage.* beside them
    code, _, _ = run_main(
        round_args(campaign, copy, nothing, "-n", "5", "--trace", "kineto"), capsys
    )
    assert code == 6  # the candidate left no trace: not one pair
    log = (campaign / "r002" / "runs.log").read_text()
    expected = "no trace in $EXPLAIN_TRACE_DIR (expected exactly one *.json or *.json.gz)"
    assert f"failed: {expected}" in log


def _copies_the_trace() -> str:
    return shlex.join(
        [
            sys.executable,
            "-c",
            "import os, shutil, sys; shutil.copy(sys.argv[1], os.environ['EXPLAIN_TRACE_DIR'])",
            str(KINETO),
        ]
    )


def test_trace_kineto_at_the_default_warmup(
    campaign: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command lines of docs/record.md with no --warmup (1 per side): the warm-up runs'
    traces are read like any other (before the fix each failed on "--repetition -1", an
    option nobody typed, and so did the round and ab)."""
    copy = _copies_the_trace()
    args = ["round", str(campaign), "--baseline", "a", "--candidate", "b"]
    args += ["--baseline-cmd", copy, "--candidate-cmd", copy, "-n", "5", "--trace", "kineto"]
    code, out, err = run_main(args, capsys)
    assert (code, without_progress(err)) == (0, ""), out
    assert "baseline 5 ok, 0 failed; candidate 5 ok, 0 failed; 5 pairs\n" in out
    warmups = [x for x in _runs_logged(campaign / "r001") if "  warm-up " in x]
    assert len(warmups) == 2 and all(" ok metric " in x for x in warmups), warmups
    code, out, err = run_main(["ab", copy, copy, "-n", "5", "--trace", "kineto"], capsys)
    assert (code, without_progress(err)) == (5, "")  # identical traces: not PASS, and no failed run
    assert "\n5 repetitions, 5 pairs, 0 failed runs, order seed " in out


# -- ab -------------------------------------------------------------------------------------
def test_ab_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slow, fast = workload("work=300000"), workload("work=20000")  # ~3.3x, exact
    code, out, err = run_main(["ab", slow, fast, "-n", "6", "--warmup", "0"], capsys)
    assert (code, without_progress(err)) == (0, ""), out
    assert f"A (baseline):  {slow}\nB (candidate): {fast}\n" in out
    assert "verdict: PASS (decided by the paired rule, interval student_t, gate 1 %" in out
    code, out, _ = run_main(
        ["ab", fast, slow, "-n", "6", "--warmup", "0", "--keep", str(tmp_path / "kept")], capsys
    )
    assert code == 5
    assert "verdict: FAIL (regressed)" in out
    assert (tmp_path / "kept" / "r001" / "measurements.jsonl").is_file()
    policy = json.loads((tmp_path / "kept" / "campaign.json").read_text())["policy"]
    assert policy["interval"] == "student_t"  # ab's default; campaign start's stays percentile


def test_ab_interval_option_and_median_rule(capsys: pytest.CaptureFixture[str]) -> None:
    slow, fast = workload("work=300000"), workload("work=20000")
    args = ["ab", slow, fast, "-n", "6", "--warmup", "0"]
    code, out, _ = run_main([*args, "--interval", "percentile"], capsys)
    assert code == 0 and "(decided by the paired rule, interval percentile, gate" in out
    code, out, _ = run_main([*args, "--decision", "median"], capsys)
    assert code == 0 and "(decided by the median rule, gate" in out


def test_ab_of_a_failing_command_exits_6_and_keeps_its_folder(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_main(["ab", "true", "sh -c 'echo boom >&2; exit 3'", "-n", "5"], capsys)
    assert code == 6
    assert "    | boom\n" in err
    kept = out.split("its stderr in ")[-1].strip()
    assert out.rstrip().endswith(
        f"the round failed (every warm-up run of the candidate failed): "
        f"its folder is kept, every run with its stderr in {kept}"
    )
    log = Path(kept)
    assert log.name == "runs.log" and "| boom" in log.read_text()
    shutil.rmtree(log.parent.parent.parent)  # explain-ab-*/ab/r001/runs.log


def test_ab_removes_its_folder_when_the_round_completes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tempfile.tempdir = None  # read TMPDIR again
    try:
        code, _, _ = run_main(["ab", "true", "true", "-n", "5", "--warmup", "0"], capsys)
    finally:
        tempfile.tempdir = None
    assert code in (0, 5)  # A/A: PASS now and then by chance; the folder is what counts
    assert not list(tmp_path.glob("explain-ab-*"))
    tempfile.tempdir = None
    refused = ["ab", "true", "true", "--until-decided", "--interval", "percentile"]
    try:  # refused before any run (no early stopping with this interval): no folder left
        code, _, err = run_main(refused, capsys)
    finally:
        tempfile.tempdir = None
    assert code == 2 and err.startswith("error: --until-decided: ")
    assert not list(tmp_path.glob("explain-ab-*"))


@pytest.mark.parametrize("command", ["start", "final"])
def test_campaign_subcommands_have_examples(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(["campaign", command, "--help"], capsys)
    assert code == 0 and "Example" in out and f"explain-pipeline campaign {command} " in out


# -- the quick start's example ----------------------------------------------------------------
def test_the_numpy_example_writes_a_valid_measurement(tmp_path: Path) -> None:
    from pipeline.ingestion.files import validate_document
    from pipeline.ingestion.rules import check_document

    data = Path(__file__).resolve().parent.parent / "data"
    target = tmp_path / "m.json"
    runs = {}
    for dtype in ("float64", "float32"):
        subprocess.run(
            [
                sys.executable,
                str(data / "measure_numpy.py"),
                "--size",
                "64",
                "--steps",
                "2",
                "--dtype",
                dtype,
            ],
            check=True,
            timeout=120,
            env={**os.environ, "EXPLAIN_MEASUREMENT": str(target)},
        )
        runs[dtype] = json.loads(target.read_text())
        line = {"side": "baseline", "repetition": 0, "status": "ok", **runs[dtype]}
        assert check_document("measurement", line) == []
        assert set(runs[dtype]["breakdown"]["step-1"]) == {"prepare", "matmul", "reduce"}
    assert (
        runs["float64"]["counters"]["matmul_bytes"]
        == 2 * runs["float32"]["counters"]["matmul_bytes"]
        == 2 * 2 * 64 * 64 * 8
    )
    path = data / "float32_matmul.mechanism.json"
    assert validate_document(path, path.read_bytes(), "mechanism")[1] == []


def test_the_numpy_example_changes_only_the_product() -> None:
    """`reduce` gets the product in double precision whatever --dtype says: before the fix it
    reduced a float32 product, half the bytes, and ran about 1.8x faster in the "candidate",
    which its docs said does not change."""
    script = Path(__file__).resolve().parent.parent / "data" / "measure_numpy.py"
    probe = (
        "import importlib.util, sys, numpy as np\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(script)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "a, b = np.eye(4) * 3, np.ones((4, 4))\n"
        "for dtype in ('float64', 'float32'):\n"
        "    product, nbytes = m.multiply(a, b, dtype)\n"
        "    print(dtype, product.dtype, nbytes, float(product.sum()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines() == [
        "float64 float64 256 48.0",
        "float32 float64 128 48.0",
    ]


def test_the_report_shows_how_an_attempt_was_recorded() -> None:
    from pipeline.report.pages import recording_html

    info = {
        "recorder": "explain-pipeline 0.1.0",
        "order_seed": 7,
        "environment": '{"host":"<box>","cpu_count":"2"}',
    }
    assert recording_html(info) == (
        '<p class="note recording">recorded by explain-pipeline '
        "0.1.0 · order seed 7 · cpu_count 2 · host &lt;box&gt;</p>"
    )
    assert recording_html({"recorder": None, "environment": None}) == ""
