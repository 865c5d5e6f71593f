"""`campaign final --confirm` on campaigns recorded with real processes (tests/record_workload.py
with its exact clock: seeded values, the same verdicts and estimates on every machine): the
confirmation round re-measures the pick against the
campaign's first baseline with the recorded commands, in the recorded folders, and reports the
campaign's gain; nothing else of the campaign changes."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import CliRun
from helpers import WORKLOAD
from helpers import workload as command

from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt

pytestmark = pytest.mark.slow  # real processes

FIXED = 20_000
"""Iterations of the workload's region ``fixed``; ``work=N`` adds N more. A candidate with
work=W against a baseline with work=B is faster by (FIXED + B) / (FIXED + W)."""


def workload(work: int, script: str | Path = WORKLOAD) -> str:
    return command(f"work={work}", f"fixed={FIXED}", script=script)


def document(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "attempt.json").read_text(encoding="utf-8"))


def lines(folder: Path) -> list[dict[str, Any]]:
    text = (folder / "measurements.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def start(run_cli: CliRun, folder: Path) -> None:
    code, _, err = run_cli(
        ["campaign", "start", str(folder), "--metric", "seconds", "--decision", "paired"]
        + ["--interval", "student_t"]
    )
    assert code == 0, err


def record(
    run_cli: CliRun, folder: Path, baseline: tuple[str, int], candidate: tuple[str, int]
) -> None:
    code, _, err = run_cli(
        ["round", str(folder), "--baseline", baseline[0], "--candidate", candidate[0]]
        + ["--baseline-cmd", workload(baseline[1]), "--candidate-cmd", workload(candidate[1])]
        + ["-n", "6", "--warmup", "0"]
    )
    assert code == 0, err


def final(run_cli: CliRun, folder: Path, store: Path, *extra: str) -> tuple[int, str, str]:
    return run_cli(["campaign", "final", str(folder), "--store", str(store), *extra])


@pytest.fixture
def searched(tmp_path: Path, run_cli: CliRun) -> Path:
    """Three rounds against main (work 60,000): b (work 30,000) gains the most."""
    folder = tmp_path / "attempts" / "search"
    start(run_cli, folder)
    for label, work in (("a", 50_000), ("b", 30_000), ("c", 45_000)):
        record(run_cli, folder, ("main", 60_000), (label, work))
    return folder


def test_a_round_keeps_each_sides_command_and_folder(searched: Path) -> None:
    commands = document(searched / "r002")["commands"]
    assert commands == {
        "baseline": {"command": workload(60_000), "cwd": str(Path.cwd())},
        "candidate": {"command": workload(30_000), "cwd": str(Path.cwd())},
    }


def test_confirm_measures_the_pick_again_and_reports_the_campaigns_gain(
    searched: Path, tmp_path: Path, run_cli: CliRun
) -> None:
    store = tmp_path / "store"
    code, before, _ = final(run_cli, searched, store)
    assert code == 0
    assert "best attempt: r002 (round 2, candidate b): PASS" in before
    assert "campaign's gain: not measured again: no confirmation round of r002" in before
    digests = Store(store).read("attempts", ["search"]).select("attempt_id", "inputs_sha256")
    verdicts = (
        Store(store)
        .read("assessments", ["search"])
        .select("attempt_id", "verdict", "eligible", "best", "paired_estimate")
    )

    code, out, err = final(run_cli, searched, store, "--confirm", "-n", "6", "--warmup", "0")
    assert code == 0, err
    attempt = document(searched / "c004")
    assert (attempt["kind"], attempt["confirms"]) == ("confirmation", "r002")
    assert (attempt["baseline"], attempt["candidate"]) == ("main", "b")
    assert attempt["commands"]["candidate"]["command"] == workload(30_000)
    assert attempt["order_seed"] != document(searched / "r002")["order_seed"]
    assert out.startswith("round 4 (c004): completed\n")
    assert "c004 is a confirmation round of r002 (never eligible)" in out
    gain = (FIXED + 60_000) / (FIXED + 30_000)
    row = Store(store).read("assessments", ["search"]).filter(pl.col("attempt_id") == "c004")
    estimate = row["paired_estimate"][0]
    assert estimate == pytest.approx(gain, rel=0.02)  # the workload's 2% wobble
    assert (row["eligible"][0], row["best"][0], row["kind"][0]) == (False, False, "confirmation")
    assert f"campaign's gain: {estimate:.4f} [" in out
    assert "from confirmation round c004 (b against main, 6 pairs): PASS" in out
    now = Store(store).read("attempts", ["search"]).filter(pl.col("attempt_id") != "c004")
    assert now.select("attempt_id", "inputs_sha256").equals(digests)
    kept = Store(store).read("assessments", ["search"]).filter(pl.col("attempt_id") != "c004")
    assert kept.select(verdicts.columns).equals(verdicts)

    code, _, err = final(run_cli, searched, store, "--confirm")
    assert code == 2
    assert err.startswith(
        "error: r002 is already confirmed by c004 (completed, 6 pairs): a started confirmation "
        "counts"
    )


def test_options_of_the_confirmation_need_confirm(searched: Path, run_cli: CliRun) -> None:
    code, _, err = run_cli(["campaign", "final", str(searched), "-n", "5", "--attempt", "r001"])
    assert (code, err) == (
        2,
        "error: --repetitions, --attempt: only with --confirm (they set its round)\n",
    )
    code, _, err = run_cli(["campaign", "final", str(searched), "--confirm", "--attempt", "r9"])
    assert (code, err) == (2, "error: --attempt 'r9': no such round in campaign 'search'\n")


def test_a_chained_campaign_confirms_the_last_step_against_the_first_baseline(
    tmp_path: Path, run_cli: CliRun
) -> None:
    folder = tmp_path / "attempts" / "chain"
    start(run_cli, folder)
    record(run_cli, folder, ("main", 80_000), ("step1", 50_000))
    record(run_cli, folder, ("step1", 50_000), ("step2", 30_000))
    store = tmp_path / "store"
    code, out, err = final(run_cli, folder, store, "--confirm", "-n", "6", "--warmup", "0")
    assert code == 0, err
    attempt = document(folder / "c003")
    assert (attempt["confirms"], attempt["baseline"], attempt["candidate"]) == (
        "r002",
        "main",
        "step2",
    )
    assert attempt["commands"]["baseline"]["command"] == workload(80_000)
    assert (
        "chained campaign (a round's baseline is an earlier candidate): main -> step1 -> step2 "
        "(adopted in r001, r002)" in out
    )
    row = Store(store).read("assessments", ["chain"]).filter(pl.col("attempt_id") == "c003")
    # main against step2 directly: 100,000 / 50,000 iterations = 2.0, where a step measures
    # 1.43 (main -> step1) or 1.4 (step1 -> step2)
    gain = (FIXED + 80_000) / (FIXED + 30_000)
    assert row["paired_estimate"][0] == pytest.approx(gain, rel=0.02)  # the 2% wobble


def test_each_side_runs_in_the_folder_it_was_recorded_in(
    tmp_path: Path, run_cli: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first round (main) was recorded in one folder, the pick in a deeper one, each with a
    relative script path: the confirmation runs each side where it ran (the workload counts the
    length of its working directory)."""
    folder = tmp_path / "attempts" / "moved"
    places = {"main": tmp_path / "old", "fast": tmp_path / "new" / "checkout"}
    for place in places.values():
        place.mkdir(parents=True)
        (place / "work.py").write_text(WORKLOAD.read_text(encoding="utf-8"), encoding="utf-8")
    start(run_cli, folder)
    relative = Path("work.py")
    for label, work in (("main", 60_000), ("fast", 30_000)):
        monkeypatch.chdir(places[label])
        code, _, err = run_cli(
            ["round", str(folder), "--baseline", "main", "--candidate", label]
            + ["--baseline-cmd", workload(60_000, relative)]
            + ["--candidate-cmd", workload(work, relative), "-n", "6", "--warmup", "0"]
        )
        assert code == 0, err
    monkeypatch.chdir(tmp_path)  # neither folder: a relative script runs only where recorded
    code, _, err = final(run_cli, folder, tmp_path / "store", "--confirm", "-n", "6")
    assert code == 0, err
    measured = {
        line["side"]: line["counters"]["cwd_length"]
        for line in lines(folder / "c003")
        if line["status"] == "ok"
    }
    assert measured == {
        "baseline": len(str(places["main"])),
        "candidate": len(str(places["fast"])),
    }


def test_a_campaign_recorded_without_commands_asks_for_them(
    tmp_path: Path, run_cli: CliRun
) -> None:
    """Attempts written by another harness have no commands: --confirm names the options."""
    folder = tmp_path / "attempts" / "harness"
    start(run_cli, folder)
    runs = [
        {"side": side, "repetition": r, "status": "ok", "metric": m * (1 + 0.01 * (r % 3))}
        for r in range(6)
        for side, m in (("baseline", 1.0), ("candidate", 0.5))
    ]
    write_attempt(
        folder,
        {
            "attempt_id": "r001",
            "round": 1,
            "candidate": "half",
            "baseline": "main",
            "status": "completed",
            "started_at": "2026-11-01T10:00:00Z",
        },
        runs,
    )
    store = tmp_path / "store"
    code, _, err = final(run_cli, folder, store, "--confirm")
    assert code == 2
    assert err == (
        "error: the campaign was recorded without the commands a confirmation of r001 needs: "
        "give --baseline-cmd CMD (the command of 'main') and --candidate-cmd CMD (the command "
        "of 'half')\n"
    )
    code, out, err = final(
        run_cli,
        folder,
        store,
        "--confirm",
        "--baseline-cmd",
        workload(60_000),
        "--candidate-cmd",
        workload(10_000),
        "-n",
        "6",
        "--warmup",
        "0",
    )
    assert code == 0, err
    assert document(folder / "c002")["commands"]["baseline"]["command"] == workload(60_000)
    assert "from confirmation round c002 (half against main, 6 pairs): PASS" in out


def test_the_confirmation_declares_the_picks_mechanism_again(
    tmp_path: Path, run_cli: CliRun
) -> None:
    folder = tmp_path / "attempts" / "declared"
    start(run_cli, folder)
    mechanism = tmp_path / "mechanism.json"
    mechanism.write_text(
        json.dumps(
            {
                "schema": "explain-pipeline/mechanism/v1",
                "hypothesis": "fewer iterations in the work loop",
                "expectations": [
                    {"target": "region", "name": "work", "expect": "decrease"},
                    {"target": "region", "name": "fixed", "expect": "unchanged"},
                ],
            }
        ),
        encoding="utf-8",
    )
    code, _, err = run_cli(
        ["round", str(folder), "--baseline", "main", "--candidate", "fast"]
        + ["--baseline-cmd", workload(60_000), "--candidate-cmd", workload(20_000)]
        + ["-n", "6", "--warmup", "0", "--mechanism-file", str(mechanism)]
    )
    assert code == 0, err
    code, out, err = final(run_cli, folder, tmp_path / "store", "--confirm", "-n", "6")
    assert code == 0, err
    confirmation = document(folder / "c002")
    assert (folder / "c002" / "mechanism.json").read_bytes() == (
        folder / "r001" / "mechanism.json"
    ).read_bytes()
    assert confirmation["declared_at"] < confirmation["started_at"]
    row = (
        Store(tmp_path / "store")
        .read("assessments", ["declared"])
        .filter(pl.col("attempt_id") == "c002")
    )
    assert row["explanation"][0] == "explained"
    code, _, err = final(run_cli, folder, tmp_path / "store", "--confirm", "--mechanism-file", "x")
    assert code == 2 and "No such option '--mechanism-file'" in err  # the pick's, not a new one


def test_the_report_shows_the_accounting_the_gain_and_the_commands(
    searched: Path, tmp_path: Path, run_cli: CliRun
) -> None:
    store = tmp_path / "store"
    code, _, err = final(run_cli, searched, store, "--confirm", "-n", "6", "--warmup", "0")
    assert code == 0, err
    page = tmp_path / "report.html"
    code, _, err = run_cli(["report", "search", "--store", str(store), "-o", str(page)])
    assert code == 0, err
    html = page.read_text(encoding="utf-8")
    assert '<section id="accounting"><h2>Campaign accounting</h2>' in html
    # the smallest gain, a's 17%, passes too: the workload's values wobble by 2% at most
    assert "3 of 3 rounds PASS; identical code would PASS" in html
    assert "c004 is a confirmation round of r002 (never eligible)" in html
    assert "from confirmation round c004 (b against main, 6 pairs): PASS" in html
    assert "confirmation round of r002" in html  # the attempt's recording line
    assert f"<code>{escape(workload(30_000))}</code>" in html  # each side's command, shown


def test_confirm_until_decided_stops_when_decided(tmp_path: Path, run_cli: CliRun) -> None:
    """--until-decided applies to the confirmation as to a round (a campaign frozen with
    sequential_t): a large gain is decided at the first look."""
    folder = tmp_path / "attempts" / "seq"
    code, _, err = run_cli(
        ["campaign", "start", str(folder), "--metric", "seconds", "--decision", "paired"]
        + ["--interval", "sequential_t"]
    )
    assert code == 0, err
    record(run_cli, folder, ("main", 60_000), ("fast", 10_000))
    code, out, err = final(run_cli, folder, tmp_path / "store", "--confirm", "--until-decided")
    assert code == 0, err
    attempt = document(folder / "c002")
    assert attempt["sequential"]["stopped"] == "pass"
    assert attempt["sequential"]["looks"] == [6]
    assert "until decided: PASS reached at 6 repetitions" in out


def test_a_failed_confirmation_exits_6_and_does_not_count(tmp_path: Path, run_cli: CliRun) -> None:
    """The candidate's script is gone since its round: every run of the confirmation fails, the
    round is failed (exit 6, as round's), and the pick may be confirmed again later."""
    folder = tmp_path / "attempts" / "gone"
    script = tmp_path / "work.py"
    script.write_text(WORKLOAD.read_text(encoding="utf-8"), encoding="utf-8")
    start(run_cli, folder)
    code, _, err = run_cli(
        ["round", str(folder), "--baseline", "main", "--candidate", "fast"]
        + ["--baseline-cmd", workload(60_000), "--candidate-cmd", workload(20_000, script)]
        + ["-n", "6", "--warmup", "0"]
    )
    assert code == 0, err
    script.unlink()
    store = tmp_path / "store"
    code, out, err = final(run_cli, folder, store, "--confirm", "-n", "6", "--warmup", "0")
    assert code == 6, err
    assert out.startswith("round 2 (c002): failed (stopped: the candidate failed 5 runs in a row)")
    assert "c002 is a confirmation round of r001 (never eligible)" in out
    code, out, err = final(run_cli, folder, store, "--confirm", "-n", "6", "--warmup", "0")
    assert code == 6, err  # measured again: a failed confirmation measured nothing
    assert out.startswith("round 3 (c003): failed")
