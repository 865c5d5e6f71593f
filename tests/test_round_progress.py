"""What a round says on stderr while it runs, without a terminal (pipeline/record/progress.py):
a line per look with --until-decided, a line every 30 s of a fixed round (an injected clock: no
test waits), and the benchmarks one side only measured. The workload's values are exact
(tests/record_workload.py, seed=), so the looks and their verdicts are the same every run."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from functools import partial
from pathlib import Path

import pytest
from conftest import cli_result
from helpers import CLI, round_args, start_campaign, without_progress, workload

from pipeline.record.options import RunOptions
from pipeline.record.progress import Ticker, unmatched
from pipeline.record.rounds import RoundRequest, record_round

FAST, SLOW = workload("work=0"), workload("work=1000000")
SEQUENTIAL = ["--decision", "paired", "--interval", "sequential_t"]


start = partial(start_campaign, quiet=False)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_fixed_round_prints_a_line_every_interval_of_its_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clock that advances 10 s at every reading and a 30 s interval: a line every third run
    (2 warm-ups and 12 runs: 4 lines), each with the runs, the pairs and the failures so far,
    and one when the runs end."""
    seconds = itertools.count(0, 10)
    said: list[str] = []
    request = _request(tmp_path / "c", capsys, 6)
    record_round(request, warn=said.append, clock=lambda: float(next(seconds)), interval=30)
    assert said == [
        "round r001: 3 of 14 runs, 0 pairs, 0 failed (30 s)",
        "round r001: 6 of 14 runs, 2 pairs, 0 failed (60 s)",
        "round r001: 9 of 14 runs, 3 pairs, 0 failed (90 s)",
        "round r001: 12 of 14 runs, 5 pairs, 0 failed (120 s)",
        "round r001: 14 of 14 runs, 6 pairs, 0 failed (150 s); done",
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


# -- the real command, its stderr a pipe (as in a CI log) ------------------------------------------
def piped(args: list[str], cwd: Path, **variables: str) -> tuple[int, list[str]]:
    """The installed command with stdout and stderr pipes: (exit code, its stderr lines)."""
    environment = {k: v for k, v in os.environ.items() if k != "EXPLAIN_PROGRESS_INTERVAL"}
    done = subprocess.run(
        [str(CLI), *args],
        cwd=cwd,
        env={**environment, **variables},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stderr.splitlines()


@pytest.mark.slow
def test_a_piped_until_decided_round_prints_each_look_with_its_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`round --until-decided` with its stderr a pipe, a candidate 3% faster (exact values:
    the same looks every run): a look at 6 pairs that goes on and one at 8 that stops, one line
    each with the pairs, the verdict and the stop rule's state."""
    folder = start(tmp_path / "c", capsys, *SEQUENTIAL)
    baseline, candidate = workload("work=100000", seed=3), workload("work=97000", seed=3)
    args = round_args(folder, baseline, candidate, "--until-decided", "--max-repetitions", "12")
    code, err = piped(args, tmp_path)
    assert code == 0, err
    looks = [x for x in err if x.startswith("round r001: look ")]
    assert looks == [
        "round r001: look 1 at 6 pairs: FAIL (within_noise); go on, next look at 8 pairs "
        "(at most 12)",
        "round r001: look 2 at 8 pairs: FAIL (within_noise); stop (futility) (at most 12)",
    ], err
    assert not [x for x in err if " runs, " in x], "a sequential round's lines are its looks"


_SECONDS = re.compile(r" \(\d+ s\)")


@pytest.mark.slow
def test_a_piped_fixed_round_prints_a_line_per_interval_of_the_variable(tmp_path: Path) -> None:
    """`ab -n 5` (1 warm-up per side: 12 runs) with EXPLAIN_PROGRESS_INTERVAL=0: a line after
    every run, with the runs, pairs and failures so far, and the line of the end."""
    same = workload(seed=3)
    code, err = piped(
        ["ab", "-n", "5", "--warmup", "1", same, same], tmp_path, EXPLAIN_PROGRESS_INTERVAL="0"
    )
    assert code == 5, err  # an A/A is not PASS
    lines = [_SECONDS.sub("", x) for x in err if x.startswith("round r001: ")]
    pairs = [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5]
    assert lines == [
        *(f"round r001: {r} of 12 runs, {p} pairs, 0 failed" for r, p in enumerate(pairs, 1)),
        "round r001: 12 of 12 runs, 5 pairs, 0 failed; done",
    ], err


@pytest.mark.slow
def test_a_piped_fixed_round_at_the_default_interval_says_only_its_intervals(
    tmp_path: Path,
) -> None:
    """At the default 30 s a short round prints a line per 30 s it took (a loaded machine may
    reach one: not counted) and its end line only after one of those: a round shorter than the
    interval says nothing, so its output does not carry the seconds it took."""
    same = workload(seed=3)
    code, err = piped(["ab", "-n", "5", "--warmup", "1", same, same], tmp_path)
    assert code == 5, err
    lines = [_SECONDS.sub("", x) for x in err if x.startswith("round r001: ")]
    ticks = re.compile(r"round r001: \d+ of 12 runs, \d pairs, 0 failed")
    if lines:
        assert lines[-1] == "round r001: 12 of 12 runs, 5 pairs, 0 failed; done", err
        assert all(ticks.fullmatch(x) for x in lines[:-1]) and len(lines) >= 2, lines


@pytest.mark.slow
def test_a_round_shorter_than_its_interval_has_no_end_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A clock that never reaches the interval: no line at all, not even the end's."""
    said: list[str] = []
    request = _request(tmp_path / "c", capsys, 6)
    record_round(request, warn=said.append, clock=lambda: 0.0, interval=30)
    assert said == []


@pytest.mark.parametrize("value", ["x", "-1", "nan"])
@pytest.mark.slow
def test_a_bad_interval_is_a_usage_error_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    folder = start(tmp_path / "c", capsys)
    same = workload(seed=3)
    code, err = piped(
        round_args(folder, same, same, "-n", "6"), tmp_path, EXPLAIN_PROGRESS_INTERVAL=value
    )
    assert code == 2, err
    assert err[-1] == f"error: EXPLAIN_PROGRESS_INTERVAL={value}: must be a number of seconds >= 0"
    assert not (folder / "r001").exists()
