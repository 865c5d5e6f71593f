"""The gate fails closed (issue 32): a round too short to decide anything is refused before it
runs, a member that cannot be decided for a data reason fails ``--fail-on regression|change``,
and a non-finite interval or estimate is never a direction. Measured values are fixed per
``$EXPLAIN_SIDE`` and ``$EXPLAIN_REPETITION`` (no test depends on the machine's speed)."""

from __future__ import annotations

import json
import re
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest
from conftest import cli_result as _cli
from helpers import workload


def _touch(marker: Path) -> str:
    return shlex.join([sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')"])


# -- -n below min_pairs ------------------------------------------------------------------------
def test_ab_with_fewer_repetitions_than_min_pairs_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ab -n 3 --fail-on regression "sleep 0.05" "sleep 0.1" exited 0, 'the metric did
    not regress', for a candidate twice as slow: three pairs get no interval."""
    marker = tmp_path / "ran"
    for fail_on in ("regression", "change", "not-improved"):
        code, out, err = _cli(
            ["ab", "-n", "3", "--fail-on", fail_on, _touch(marker), _touch(marker)], capsys
        )
        assert (code, out) == (2, ""), err
        assert err == (
            "error: --repetitions 3: ab's campaign would freeze min_pairs 5, the fewest pairs "
            "that get an interval, so this round could decide nothing; give -n 5 or more (or "
            "--until-decided); nothing was run\n"
        )
    code, _, err = _cli(["ab", "-n", "4", "--decision", "median", "true", "true"], capsys)
    assert code == 2 and "min_pairs 5" in err  # whatever the decision rule
    assert not marker.exists()


def test_round_and_confirm_with_fewer_repetitions_than_min_pairs_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "attempts" / "c"
    start = ["campaign", "start", str(folder), "--metric", "s", "--min-pairs", "8"]
    assert _cli(start, capsys)[0] == 0
    marker = tmp_path / "ran"
    args = ["round", str(folder), "--baseline", "a", "--candidate", "b", "-n", "7"]
    args += ["--baseline-cmd", _touch(marker), "--candidate-cmd", _touch(marker)]
    code, _, err = _cli(args, capsys)
    assert code == 2, err
    assert err.startswith(
        f"error: --repetitions 7: {folder / 'campaign.json'} freezes min_pairs 8, the fewest "
        "pairs that get an interval"
    )
    code, _, err = _cli(["campaign", "final", str(folder), "--confirm", "-n", "5"], capsys)
    assert code == 2, err
    assert err.startswith(f"error: --repetitions 5: {folder / 'campaign.json'} freezes min_pairs 8")
    assert not marker.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["campaign.json"]  # nothing ran


# -- a member undecidable for want of data fails the regression and change gates -----------------
SUITE = """
import json, os, sys
side, rep = os.environ["EXPLAIN_SIDE"], int(os.environ["EXPLAIN_REPETITION"])
wobble = 1.0 + 0.001 * ((rep * 7 + (side == "candidate") * 3) % 5)  # fixed, no timing
times = {f"test_s.py::test_{k}": 0.001 * (k + 1) * wobble for k in range(3)}
if side == sys.argv[2] and rep == 2:  # one run of one side: the benchmark vanishes, or reads 0
    if sys.argv[3] == "vanish":
        del times["test_s.py::test_2"]
    else:
        times["test_s.py::test_2"] = 0.0
benchmarks = [{"fullname": name, "stats": {"median": t}} for name, t in times.items()]
json.dump({"benchmarks": benchmarks}, open(sys.argv[1], "w"))
"""


def _suite(tmp_path: Path, *args: str) -> str:
    script = tmp_path / "suite.py"
    script.write_text(SUITE, encoding="utf-8")
    return shlex.join([sys.executable, str(script), "{results}", *args])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("side", "how", "reason"),
    [("candidate", "vanish", "zero_candidate"), ("baseline", "zero", "zero_baseline")],
)
def test_a_benchmark_missing_or_zero_in_one_run_fails_the_regression_and_change_gates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], side: str, how: str, reason: str
) -> None:
    """Before: the gate said 'none of the 4 members regressed' (exit 0) while the benchmark was
    inconclusive (zero_candidate | zero_baseline): a gate that cannot decide passed."""
    commands = [_suite(tmp_path, side, how)] * 2  # identical code; one run of `side` is bad
    for fail_on in ("regression", "change"):
        args = ["ab", "--measure", "pytest-benchmark", "-n", "6", "--warmup", "0"]
        code, out, err = _cli([*args, "--fail-on", fail_on, *commands], capsys)
        assert code == 5, out + err
        gate = out.splitlines()[0]
        assert gate.startswith(f"gate: attempt r001 (round 1): FAIL (--fail-on {fail_on}): ")
        assert gate.endswith(f"test_s.py::test_2 - inconclusive ({reason})") or (
            f"test_s.py::test_2 inf inconclusive ({reason})" in gate
        ), gate
        assert "metric" not in gate and "test_s.py::test_0" not in gate  # decided or wide
    # the JUnit report fails that benchmark's case too, with its reason
    junit = tmp_path / "ab.xml"
    _cli([*args, "--junit", str(junit), *commands], capsys)
    case = next(
        c
        for c in ET.parse(junit).iter("testcase")
        if c.get("name") == "benchmark test_s.py::test_2"
    )
    failure = case.find("failure")
    assert failure is not None and reason in str(failure.get("message")), ET.tostring(case)


@pytest.mark.slow
def test_a_candidate_crashing_in_2_of_6_runs_fails_the_gate_for_too_few_pairs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """4 pairs, min_pairs 5: nothing gets an interval. Before: 'the metric did not regress',
    exit 0, for a candidate twice as slow (--decide metric: the metric is the one member)."""
    a = workload("work=60000")
    b = workload("work=120000", "fail=1:exit,4:exit")
    for decide in ("metric", "regions"):
        args = ["ab", "-n", "6", "--warmup", "0", "--decide", decide, "--fail-on", "regression"]
        code, out, err = _cli([*args, a, b], capsys)
        assert code == 5, out + err
        gate = out.splitlines()[0]
        assert gate.startswith("gate: attempt r001 (round 1): FAIL (--fail-on regression): ")
        assert "metric seconds 0.7" in gate and "inconclusive (too_few_pairs)" in gate, gate
        if decide == "regions":  # every member, named with its reason
            assert gate.count("inconclusive (too_few_pairs)") == 3, gate
        assert "6 repetitions, 4 pairs, 2 failed runs" in out


def test_an_interval_too_wide_to_decide_does_not_fail_the_gate() -> None:
    """Inconclusive without a reason (the interval is wide): the gate fails on a regression
    shown, not on one not ruled out; with a data reason it fails, naming it."""
    from pipeline.assessment.gate import decide_gate

    members = pl.DataFrame(
        {
            "quantity": ["metric", "region", "region"],
            "name": ["s", "wide", "gone"],
            "estimate": [1.0, 0.9, None],
            "low": [0.8, 0.5, None],
            "high": [1.2, 1.6, None],
            "method": ["bonferroni_t", "bonferroni_t", None],
            "critical": [3.0, 3.0, None],
            "verdict": ["inconclusive"] * 3,
            "reason": [None, None, "not_finite"],
        }
    )
    row = {"verdict": "FAIL", "status": "completed", "attempt_id": "r1", "round": 1}
    for fail_on in ("regression", "change"):
        got = decide_gate(row, members, fail_on)
        assert got.failed and got.deciders["name"].to_list() == ["gone"]
        assert not decide_gate(row, members.head(2), fail_on).failed
    assert decide_gate({**row, "verdict": "PASS"}, members, "not-improved").failed is False


# -- a value out of range is never a direction ---------------------------------------------------
OVERFLOW = """
import json, os
side, rep = os.environ["EXPLAIN_SIDE"], int(os.environ["EXPLAIN_REPETITION"])
wobble = 1.0 + 0.01 * ((rep * 7 + (side == "candidate") * 3) % 5)  # fixed, no timing
big = 1e308 * (0.9 + 0.01 * ((rep * 3 + (side == "candidate")) % 4))
breakdown = {"step-0": {"big": big, "work": 0.1 * wobble}, "step-1": {"big": 1e308, "work": 0.1}}
document = {"metric": 0.2 * wobble, "breakdown": breakdown}  # big's run sum overflows to inf
json.dump(document, open(os.environ["EXPLAIN_MEASUREMENT"], "w"))
"""
MECHANISM = {
    "schema": "explain-pipeline/mechanism/v1",
    "hypothesis": "big shrinks",
    "expectations": [{"target": "region", "name": "big", "expect": "decrease"}],
}


@pytest.mark.slow
def test_an_overflowed_sum_is_not_finite_never_a_direction_in_an_a_a(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the region's log-ratios were NaN and NaN > 1 is true in Polars, so identical
    code had big 'improved', its declared decrease 'confirmed', the explanation 'explained', and
    --fail-on change exited 5 naming big as improved."""
    script = tmp_path / "overflow.py"
    script.write_text(OVERFLOW, encoding="utf-8")
    mechanism = tmp_path / "mechanism.json"
    mechanism.write_text(json.dumps(MECHANISM), encoding="utf-8")
    command = shlex.join([sys.executable, str(script)])
    args = ["ab", "-n", "6", "--warmup", "0", "--mechanism-file", str(mechanism)]
    code, out, err = _cli(
        [*args, "--decide", "regions", "--fail-on", "change", command, command], capsys
    )
    assert code == 5, out + err  # fail closed: big cannot be decided
    lines = out.splitlines()
    assert (
        lines[0]
        == "gate: attempt r001 (round 1): FAIL (--fail-on change): big - inconclusive (not_finite)"
    )
    assert re.search(r"^  big +6 +- +inconclusive \(not_finite\)$", out, re.MULTILINE), out
    assert "explanation: unverifiable" in lines
    assert "  declared region big decrease: unverifiable" in lines, out
    # the metric alone is finite and did not move: the change gate passes, big still no direction
    args += ["--decide", "metric", "--fail-on", "change", "--format", "markdown"]
    code, out, err = _cli([*args, command, command], capsys)
    assert code == 0, out + err
    assert out.startswith("**gate: attempt r001 (round 1): PASS (--fail-on change): ")
    assert "| region | big | 6 | - | not\\_finite | decrease: unverifiable |" in out, out
