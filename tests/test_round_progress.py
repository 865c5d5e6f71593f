"""What a round says on stderr while it runs, without a terminal (pipeline/record/progress.py):
a line per look with --until-decided, a line every 30 s of a fixed round (an injected clock: no
test waits), and the benchmarks one side only measured. The workload's values are exact
(tests/record_workload.py, seed=), so the looks and their verdicts are the same every run."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from conftest import cli_result
from helpers import without_progress, workload

from pipeline.record.options import RunOptions
from pipeline.record.progress import Ticker, unmatched
from pipeline.record.rounds import RoundRequest, record_round

FAST, SLOW = workload("work=0"), workload("work=1000000")
SEQUENTIAL = ["--decision", "paired", "--interval", "sequential_t"]


def start(folder: Path, capsys: pytest.CaptureFixture[str], *policy: str) -> Path:
    args = ["campaign", "start", str(folder), "--metric", "seconds", *policy]
    assert cli_result(args, capsys)[0] == 0
    return folder


def round_args(folder: Path, baseline: str, candidate: str, *extra: str) -> list[str]:
    return [
        "round",
        str(folder),
        "--baseline",
        "a",
        "--candidate",
        "b",
        "--baseline-cmd",
        baseline,
        "--candidate-cmd",
        candidate,
        "--warmup",
        "0",
        *extra,
    ]


def test_until_decided_prints_one_line_per_look_with_the_stop_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An A/A round looks at 6, 8, 10 and 12 pairs (sequential_t's plan, at most 12) and does
    not pass: each look is one stderr line with its pairs, its verdict and what the rule does
    next; the last says why it stopped."""
    folder = start(tmp_path / "c", capsys, *SEQUENTIAL)
    same = workload(seed=3)
    args = round_args(folder, same, same, "--until-decided", "--max-repetitions", "12")
    code, _, err = cli_result(args, capsys)
    assert code == 0, err
    looks = [x for x in err.splitlines() if x.startswith("round r001: look ")]
    assert len(looks) >= 1, err
    for number, line in enumerate(looks, 1):
        assert line.startswith(f"round r001: look {number} at {4 + 2 * number} pairs: FAIL")
        assert line.endswith("(at most 12)"), line
    *going, last = looks
    for number, line in enumerate(going, 1):
        assert f"; go on, next look at {6 + 2 * number} pairs " in line, line
    assert "; stop (" in last and "next look" not in last, last


def test_a_suite_round_says_how_many_benchmarks_each_look_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A campaign deciding regions: each look line counts its members by verdict."""
    folder = start(tmp_path / "c", capsys, *SEQUENTIAL, "--decide", "regions")
    args = round_args(folder, SLOW, FAST, "--until-decided", "--max-repetitions", "16")
    code, _, err = cli_result(args, capsys)
    assert code == 0, err
    looks = [x for x in err.splitlines() if x.startswith("round r001: look ")]
    assert looks and looks[0].startswith("round r001: look 1 at 12 pairs: benchmarks "), err
    assert "improved" in looks[-1] and "; stop (" in looks[-1], looks


def _request(folder: Path, capsys: pytest.CaptureFixture[str], n: int) -> RoundRequest:
    start(folder, capsys)
    same = workload(seed=1)
    return RoundRequest(
        folder, "b", "a", same, same, run=RunOptions(repetitions=n, warmup=1, order_seed=7)
    )


def test_a_fixed_round_prints_a_line_every_interval_of_its_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clock that advances 10 s at every reading and a 30 s interval: a line every third run
    (2 warm-ups and 12 runs: 4 lines), each with the runs, the pairs and the failures so far."""
    seconds = itertools.count(0, 10)
    said: list[str] = []
    request = _request(tmp_path / "c", capsys, 6)
    record_round(request, warn=said.append, clock=lambda: float(next(seconds)), interval=30)
    assert said == [
        "round r001: 3 of 14 runs, 0 pairs, 0 failed (30 s)",
        "round r001: 6 of 14 runs, 2 pairs, 0 failed (60 s)",
        "round r001: 9 of 14 runs, 3 pairs, 0 failed (90 s)",
        "round r001: 12 of 14 runs, 5 pairs, 0 failed (120 s)",
    ]


def test_a_fixed_round_on_a_terminal_leaves_it_to_the_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said: list[str] = []
    seconds = itertools.count(0, 100)
    request = _request(tmp_path / "c", capsys, 5)
    record_round(request, progress=True, warn=said.append, clock=lambda: float(next(seconds)))
    assert said == []


def test_the_ticker_waits_for_its_interval() -> None:
    now = [0.0]
    said: list[str] = []
    ticker = Ticker(said.append, "r\x1b[31m", 10, interval=30, clock=lambda: now[0])
    for moment in (29.9, 30.0, 59.0, 61.0):
        now[0] = moment
        ticker.tick(1, lambda: 0, 0)
    assert said == [  # the label escaped: a results file's text never reaches stderr raw
        "round r\\x1b[31m: 1 of 10 runs, 0 pairs, 0 failed (30 s)",
        "round r\\x1b[31m: 1 of 10 runs, 0 pairs, 0 failed (61 s)",
    ]


def test_tests_leave_out_exactly_the_progress_lines() -> None:
    """helpers.without_progress, which the tests of a fixed round's stderr use (whether a line
    is written depends on the machine's speed), removes the ticker's lines and nothing else."""
    now = [0.0]
    said: list[str] = []
    ticker = Ticker(said.append, "r001", 10, interval=30, clock=lambda: now[0])
    now[0] = 31.0
    ticker.tick(7, lambda: 3, 0)
    err = f"warning: kept\n{said[0]}\nround r001: completed\n"
    assert without_progress(err) == "warning: kept\nround r001: completed\n"


def _line(side: str, *names: str, status: str = "ok") -> dict[str, object]:
    return {"side": side, "status": status, "breakdown": {"all": dict.fromkeys(names, 1.0)}}


def test_unmatched_benchmarks_are_named_escaped_and_counted_beyond_ten() -> None:
    same = [_line("baseline", "a", "b"), _line("candidate", "a", "b")]
    assert unmatched(same) is None
    assert unmatched([_line("baseline", "a"), _line("candidate", "a", status="failed")]) is None
    many = [f"n{i:02d}" for i in range(12)]
    text = unmatched([_line("baseline", "a", "\x1b]0;x\x07"), _line("candidate", "a", *many)])
    assert text == (
        "benchmarks on one side only (they pair with nothing): the baseline's only: "
        "\\x1b]0;x\\x07; the candidate's only: n00, n01, n02, n03, n04, n05, n06, n07, n08, "
        "n09 and 2 more"
    )
