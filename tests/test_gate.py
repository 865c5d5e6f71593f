"""The CI gate `--fail-on not-improved|regression|change` (ab, assess --gate) and what the
terminal shows of a campaign that decides every benchmark: the rule against a plain reference,
the command lines users run (a fake suite harness for the fast tests, a real pytest-benchmark
suite for the slow one), exit codes and the lines that name the benchmarks."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from assess_fixtures import Attempt, campaign, run, write_store
from conftest import cli_result as _cli
from helpers import cli_process, without_progress

from pipeline.assessment.campaigns import assess, gate
from pipeline.assessment.gate import decide_gate, metric_member
from pipeline.output.views import reference_note
from pipeline.record.options import ab_policy
from pipeline.store.tables import Store


# -- the rule ------------------------------------------------------------------------------------
def _members(verdicts: dict[str, str]) -> pl.DataFrame:
    names = list(verdicts)
    return pl.DataFrame(
        {
            "quantity": ["metric", *["region"] * (len(names) - 1)],
            "name": names,
            "estimate": [1.0 + 0.1 * i for i in range(len(names))],
            "low": [0.9] * len(names),
            "high": [1.1] * len(names),
            "method": ["bonferroni_t"] * len(names),
            "critical": [3.0] * len(names),
            "verdict": list(verdicts.values()),
            "reason": [None] * len(names),
        }
    )


@pytest.mark.parametrize(
    ("verdict", "status", "members", "fail_on", "failed", "named"),
    [
        ("PASS", "completed", {"m": "improved", "a": "regressed"}, "not-improved", False, ["a"]),
        ("FAIL", "completed", {"m": "unchanged"}, "not-improved", True, []),
        ("PASS", "completed", {"m": "improved", "a": "regressed"}, "regression", True, ["a"]),
        ("FAIL", "completed", {"m": "inconclusive", "a": "unchanged"}, "regression", False, []),
        ("FAIL", "completed", {"m": "improved", "a": "unchanged"}, "regression", False, []),
        ("FAIL", "completed", {"m": "improved", "a": "unchanged"}, "change", True, ["m"]),
        ("FAIL", "completed", {"m": "inconclusive", "a": "unchanged"}, "change", False, []),
        ("INCONCLUSIVE", "aborted", {"m": "inconclusive"}, "regression", True, []),
    ],
)
def test_the_gate_fails_as_its_rule_says(
    verdict: str,
    status: str,
    members: dict[str, str],
    fail_on: str,
    failed: bool,
    named: list[str],
) -> None:
    row = {"verdict": verdict, "status": status, "attempt_id": "r1", "round": 1}
    got = decide_gate(row, _members(members), fail_on)
    assert (got.failed, got.deciders["name"].to_list()) == (failed, named)


def test_an_unknown_fail_on_is_refused() -> None:
    with pytest.raises(ValueError, match="--fail-on must be one of"):
        decide_gate({"verdict": "PASS", "status": "completed"}, _members({"m": "x"}), "never")


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (0.80, 0.95, "regressed"),
        (0.80, 0.995, "inconclusive"),  # below 1, not beyond the margin: not a regression
        (1.02, 1.20, "improved"),
        (0.995, 1.005, "unchanged"),
        (None, None, "inconclusive"),
    ],
)
def test_a_single_metric_is_one_member_read_by_the_family_rule(
    low: float | None, high: float | None, verdict: str
) -> None:
    row = {"paired_estimate": 1.0, "paired_low": low, "paired_high": high, "status": "completed"}
    assert metric_member(row, "seconds", 1.0, 1.0)["verdict"][0] == verdict


# -- assess --gate --fail-on, and the text of a regions campaign ---------------------------------
def _suite(cid: str, slow: float, seed: int, **policy: Any) -> tuple[dict[str, Any], Attempt]:
    rng = np.random.default_rng(seed)
    runs = []
    for rep in range(10):
        load = rng.lognormal(0, 0.02)
        for side in ("baseline", "candidate"):
            regions = {f"t{k}": 0.001 * (k + 1) * load * rng.lognormal(0, 0.01) for k in range(4)}
            if side == "candidate":
                regions["t2"] *= slow
            runs.append(run(side, rep, sum(regions.values()), breakdown=regions))
    return campaign(cid, decision="paired", **policy), Attempt(cid, "r001", 1, runs)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    parts = [
        _suite("suite", 1.5, 1, decide="regions"),
        _suite("same", 1.0, 2, decide="regions"),
        _suite("metric", 1.5, 3),
    ]
    write_store(Store(tmp_path / "store"), [p[0] for p in parts], [p[1] for p in parts])
    return tmp_path / "store"


def test_assess_gate_fails_on_the_regressed_benchmark_and_names_it(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["assess", "suite", "--store", str(store), "--gate", "--fail-on", "regression"]
    code, out, err = _cli(args, capsys)
    assert code == 5
    assert re.fullmatch(
        r"gate: attempt r001 \(round 1\): FAIL \(--fail-on regression\): "
        r"t2 0\.\d{4} \[0\.\d{4}, 0\.\d{4}\] regressed; metric e2e_seconds .* regressed\n",
        err,
    ), err
    # the terminal shows the metric, then every benchmark, most slowed down first
    block = out[out.index("benchmarks of r001:") :].splitlines()
    assert block[0].startswith("benchmarks of r001: 5 members (the metric and 4 benchmarks) ")
    assert block[0].endswith("; > 1: the candidate is faster")
    assert block[1].split() == ["pairs", "ratio", "[low,", "high]", "verdict"]
    assert block[2].split()[:2] == ["metric", "e2e_seconds"]
    assert block[3].split()[0] == "t2" and block[3].endswith("regressed")
    assert block[7].strip().startswith("2 regressed")  # after the 5 members


@pytest.mark.slow
def test_identical_suites_pass_the_regression_and_change_gates(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for fail_on in ("regression", "change"):
        args = ["assess", "same", "--store", str(store), "--gate", "--fail-on", fail_on]
        code, _, err = _cli(args, capsys)
        verb = "regressed" if fail_on == "regression" else "moved"
        assert (code, err) == (
            0,
            f"gate: attempt r001 (round 1): PASS (--fail-on {fail_on}): "
            f"none of the 5 members {verb}\n",
        )
    # not-improved, the default, is the gate of before: identical code is not PASS
    code, _, err = _cli(["assess", "same", "--store", str(store), "--gate"], capsys)
    assert code == 5 and err.endswith("not PASS\n")


def test_a_campaign_deciding_its_metric_gates_on_the_metric(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["assess", "metric", "--store", str(store), "--gate", "--fail-on", "regression"]
    code, out, err = _cli(args, capsys)
    assert code == 5
    assert "FAIL (--fail-on regression): metric e2e_seconds " in err
    assert "benchmarks of" not in out  # no benchmark table without decide regions


def test_fail_on_needs_the_gate(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(["assess", "suite", "--store", str(store), "--fail-on", "change"], capsys)
    assert code == 2 and "--fail-on says when --gate fails: give --gate too" in err


def test_the_gate_from_python_reads_the_effective_policy(store: Path) -> None:
    result = assess(Store(store), ["suite"])
    got = gate(result, "suite", None, "regression")
    assert got.failed and got.deciders["name"].to_list()[0] == "t2"
    wide = assess(Store(store), ["suite"], what_if={"margin_pct": 900.0})
    assert not gate(wide, "suite", None, "regression").failed  # within a 900% margin


# -- ab and round with a suite -------------------------------------------------------------------
FAKE_HARNESS = """
import json, os, random, sys
random.seed(os.environ['EXPLAIN_SIDE'] + os.environ['EXPLAIN_REPETITION'])  # seeded: same draws
slow = float(sys.argv[2])
load = random.lognormvariate(0, 0.02)
benchmarks = [
    {"fullname": f"test_x.py::test_{k}",
     "stats": {"median": 0.001 * (k + 1) * load * random.lognormvariate(0, 0.01)
               * (slow if k == 1 else 1.0)}}
    for k in range(3)
]
json.dump({"benchmarks": benchmarks}, open(sys.argv[1], "w"))
"""


def _harness(tmp_path: Path, slow: float) -> str:
    script = tmp_path / "harness.py"
    script.write_text(FAKE_HARNESS, encoding="utf-8")
    return f"{sys.executable} {script} {{results}} {slow}"


@pytest.mark.slow
def test_ab_with_a_suite_decides_every_benchmark_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ab_policy(None, until_decided=False, suite=True)["decide"] == "regions"
    assert "decide" not in ab_policy(None, until_decided=False)
    assert ab_policy({"decide": "metric"}, until_decided=False, suite=True)["decide"] == "metric"
    a, b = _harness(tmp_path, 1.0), _harness(tmp_path, 2.0)
    args = ["ab", "--measure", "pytest-benchmark", "-n", "6", "--warmup", "0", a, b]
    code, out, err = _cli([*args, "--fail-on", "regression"], capsys)
    assert code == 5, err
    assert "FAIL (--fail-on regression): test_x.py::test_1 " in out
    rows = out[out.index("benchmarks: 4 members (the metric and 3 benchmarks)") :].splitlines()
    assert rows[2].split()[:2] == ["metric", "seconds"]
    assert rows[3].split()[0] == "test_x.py::test_1"
    assert re.match(r"rusage\.\* \(\d+ counters of each run\): ", rows[7]), rows
    assert not re.search(r"^  region ", out, re.MULTILINE)  # regions are in the table only
    code, out, _ = _cli([*args, "--decide", "metric"], capsys)
    assert "benchmarks:" not in out


@pytest.mark.slow
def test_a_reference_that_regressed_is_shown_so_and_fails_the_regression_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25's second case: a benchmark declared unchanged (a reference for the mechanism)
    made slower. It stays 'assumed' for the mechanism, but its own verdict is computed: the
    table says regressed, the declared line says so beside the assumption (text and Markdown),
    JUnit fails its case, and --fail-on regression fails the gate naming it."""
    mechanism = tmp_path / "m.json"
    mechanism.write_text(
        json.dumps(
            {
                "schema": "explain-pipeline/mechanism/v1",
                "hypothesis": "test_0 got faster; test_1 is untouched",
                "expectations": [
                    {"target": "region", "name": "test_x.py::test_0", "expect": "decrease"},
                    {"target": "region", "name": "test_x.py::test_1", "expect": "unchanged"},
                ],
            }
        )
    )
    a, b = _harness(tmp_path, 1.0), _harness(tmp_path, 1.5)  # test_1 is 1.5x slower in B
    keep, junit = tmp_path / "kept", tmp_path / "junit.xml"
    args = ["ab", "--measure", "pytest-benchmark", "-n", "6", "--warmup", "0", a, b]
    args += ["--mechanism-file", str(mechanism), "--fail-on", "regression", "--keep", str(keep)]
    code, out, err = _cli(args, capsys)
    assert code == 5, err
    row = next(line for line in out.splitlines() if line.startswith("  test_x.py::test_1 "))
    assert row.endswith("regressed")
    declared = next(
        line for line in out.splitlines() if "declared region test_x.py::test_1" in line
    )
    assert re.fullmatch(
        r"  declared region test_x\.py::test_1 unchanged: assumed \(a reference; its own "
        r"verdict: regressed 0\.\d{4} \[0\.\d{4}, 0\.\d{4}\]\)",
        declared,
    ), declared
    assert "FAIL (--fail-on regression): test_x.py::test_1 " in out
    store = ["--store", str(keep / ".explain-store")]
    code, md, _ = _cli(
        ["assess", "--all", *store, "--format", "markdown", "--junit", str(junit)], capsys
    )
    assert "- declared region test\\_x.py::test\\_1 unchanged: assumed (a reference; its own " in md
    failed = re.findall(r'<testcase [^>]*name="([^"]*)"[^>]*>\s*<failure', junit.read_text())
    assert any("test_x.py::test_1" in name for name in failed), failed
    # a reference that did not move, or was judged (not assumed), or no benchmarks: no note
    assumed = {"outcome": "assumed", "name": "a"}
    assert reference_note(assumed, _members({"m": "inconclusive", "a": "unchanged"})) == ""
    assert reference_note(assumed, _members({"m": "inconclusive", "a": "inconclusive"})) == ""
    assert reference_note({**assumed, "outcome": "confirmed"}, _members({"a": "regressed"})) == ""
    assert reference_note(assumed, _members({"m": "inconclusive"}).clear()) == ""
    moved = reference_note(assumed, _members({"m": "inconclusive", "a": "improved"}))
    assert moved == " (a reference; its own verdict: improved 1.1000 [0.9000, 1.1000])"


@pytest.mark.slow
def test_a_suite_round_and_its_ingest_warn_of_nothing_deprecated(tmp_path: Path) -> None:
    """Polars reports a deprecated call made inside a query from its engine, on stderr, where
    the test suite's warnings filter does not reach: ab with a suite, then ingest of the same
    folder again (the rows of replaced attempts dropped), run as processes with deprecation
    warnings on (`is_in` of a same-typed Series printed 10 of them before it was imploded)."""
    keep = tmp_path / "kept"
    a, b = _harness(tmp_path, 1.0), _harness(tmp_path, 1.5)
    runs = [
        ["ab", "--measure", "pytest-benchmark", "-n", "6", "--warmup", "0", a, b],
        ["ingest", str(keep), "--store", str(keep / ".explain-store")],
    ]
    runs[0] += ["--keep", str(keep)]
    for args, code in zip(runs, (5, 0), strict=True):  # ab: test_1 regressed, not PASS
        done = cli_process(*args, env={"PYTHONWARNINGS": "error::DeprecationWarning"})
        assert done.returncode == code, done.stdout + done.stderr
        assert "Warning" not in done.stderr, done.stderr


@pytest.mark.slow
def test_round_with_a_suite_in_a_metric_campaign_says_how_to_decide_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "attempts" / "s"
    assert _cli(["campaign", "start", str(folder), "--metric", "seconds"], capsys)[0] == 0
    cmd = _harness(tmp_path, 1.0)
    args = ["round", str(folder), "--baseline", "a", "--candidate", "b", "-n", "5"]
    args += ["--baseline-cmd", cmd, "--candidate-cmd", cmd, "--measure", "pytest-benchmark"]
    code, _, err = _cli([*args, "--warmup", "0"], capsys)
    assert code == 0
    assert err.splitlines()[0] == (
        "note: this campaign decides its metric alone (decide: metric); for a verdict per "
        "benchmark with the suite's error held, start a campaign with --decide regions "
        "(docs/suites.md)"
    )
    regions = tmp_path / "attempts" / "r"
    start = ["campaign", "start", str(regions), "--metric", "seconds", "--decide", "regions"]
    code, out, _ = _cli(start, capsys)
    assert code == 0 and "decide=regions" in out
    args[1] = str(regions)
    assert without_progress(_cli([*args, "--warmup", "0"], capsys)[2]) == ""
    policy = json.loads((regions / "campaign.json").read_text())["policy"]
    assert (policy["decide"], policy["margin_pct"]) == ("regions", 1.0)


PYTEST_SUITE = """
def work(n):
    return sorted(str(i) for i in range(n))

def test_sort(benchmark):
    benchmark(work, 200)

def test_sum(benchmark):
    benchmark(work, {size})

def test_join(benchmark):
    benchmark(lambda: ",".join(str(i) for i in range(200)))
"""


@pytest.mark.slow
def test_real_pytest_benchmark_suite_fails_the_regression_gate_on_the_slowed_benchmark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's "done when": ab --measure pytest-benchmark --fail-on regression at base and
    head, one benchmark made much slower (5x the work: noise cannot flip it) -> exit 5, and the
    output names it."""
    for name, size in (("old", 200), ("new", 1000)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "test_bench.py").write_text(PYTEST_SUITE.format(size=size))
    options = (
        "-q -p no:cacheprovider --benchmark-only --benchmark-json={results} "
        "--benchmark-max-time=0.02 --benchmark-min-rounds=5 -W ignore"
    )
    # each side its own --rootdir (docs/suites.md): pytest names a test from its rootdir, which
    # without one is the folder both the test's and the checkout's paths are in (/tmp for a
    # checkout in /tmp), and the two sides' names would then differ
    a = f"{sys.executable} -m pytest {tmp_path / 'old'} --rootdir {tmp_path / 'old'} {options}"
    b = f"{sys.executable} -m pytest {tmp_path / 'new'} --rootdir {tmp_path / 'new'} {options}"
    args = ["ab", "--measure", "pytest-benchmark", "-n", "6", "--fail-on", "regression", a, b]
    code, out, err = _cli(args, capsys)
    assert code == 5, out + err
    gate_line = next(line for line in out.splitlines() if line.startswith("gate: "))
    assert "FAIL (--fail-on regression): test_bench.py::test_sum " in gate_line
    row = next(line for line in out.splitlines() if line.startswith("  test_bench.py::test_sum"))
    assert row.endswith("regressed")


# -- what the CI outputs say of the gate ----------------------------------------------------------
def _github_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    return summary


def test_a_passing_regression_gate_leads_the_markdown_and_annotates_a_notice(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identical suites: the metric's verdict is FAIL, the gate --fail-on regression passes
    (exit 0). The Markdown and the job summary lead with the gate, and the annotation is a
    notice, not a red error on a green check."""
    summary = _github_env(monkeypatch, tmp_path)
    args = ["assess", "same", "--store", str(store), "--gate", "--fail-on", "regression"]
    code, out, err = _cli([*args, "--format", "markdown"], capsys)
    assert code == 0, err
    gate = "gate: attempt r001 (round 1): PASS (--fail-on regression): none of the 5 members "
    assert out.startswith(f"**{gate}regressed**\n")
    assert summary.read_text().startswith(f"**{gate}regressed**\n")
    assert err.startswith(gate)  # the terminal's line leads too
    annotations = [line for line in err.splitlines() if line.startswith("::")]
    assert annotations == [
        f"::notice title=explain-pipeline%3A same r001 (round 1)::{gate}regressed; verdict of "
        "the metric: FAIL " + annotations[0].split("verdict of the metric: FAIL ", 1)[1]
    ]


def test_a_failing_regression_gate_annotates_an_error_with_the_gate_first(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = _github_env(monkeypatch, tmp_path)
    args = ["assess", "suite", "--store", str(store), "--gate", "--fail-on", "regression"]
    code, out, err = _cli(args, capsys)
    assert code == 5, err
    gate = "gate: attempt r001 (round 1): FAIL (--fail-on regression): t2 "
    assert summary.read_text().startswith(f"**{gate}")
    annotations = [line for line in err.splitlines() if line.startswith("::")]
    assert annotations[0].startswith(
        f"::error title=explain-pipeline%3A suite r001 (round 1)::{gate}"
    )
    assert "::error title=explain-pipeline%3A suite r001%3A t2 regressed::" in err


@pytest.mark.slow
def test_ab_passing_the_regression_gate_says_so_first_and_the_metric_verdict_below(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: ab --fail-on regression of identical code exits 0; its text and its
    Markdown start with the gate that passed, the verdict of the metric below it."""
    a = _harness(tmp_path, 1.0)
    args = ["ab", "--measure", "pytest-benchmark", "-n", "6", "--warmup", "0", a, a]
    args += ["--fail-on", "regression"]
    code, out, err = _cli(args, capsys)
    assert code == 0, err
    gate = "gate: attempt r001 (round 1): PASS (--fail-on regression): none of the 4 members "
    assert out.splitlines()[0] == f"{gate}regressed"
    assert re.search(r"^verdict of the metric: (FAIL|INCONCLUSIVE) ", out, re.MULTILINE), out
    summary = _github_env(monkeypatch, tmp_path)
    code, out, err = _cli([*args, "--format", "markdown"], capsys)
    assert code == 0, err
    for document in (out, summary.read_text()):
        assert document.startswith(f"**{gate}regressed**\n\n**A (baseline):**")
        assert "\nverdict of the metric: " in document and "**verdict:" not in document
    annotations = [line for line in err.splitlines() if line.startswith("::")]
    assert len(annotations) == 1 and annotations[0].startswith("::notice "), annotations


def _moved_suite() -> tuple[dict[str, Any], Attempt]:
    """A suite of 10 pairs: t0 twice as fast in the candidate (improved), t1 with no baseline
    time (zero_baseline: not decided for want of data), t2 and t3 the same on both sides."""
    runs = []
    for rep in range(10):
        wobble = 1 + 0.001 * (rep % 3)
        for side in ("baseline", "candidate"):
            regions = {
                "t0": (0.001 if side == "candidate" else 0.002) * wobble,
                "t1": 0.0 if side == "baseline" else 0.001 * wobble,
                "t2": 0.003 * wobble,
                "t3": 0.004 * wobble,
            }
            runs.append(run(side, rep, sum(regions.values()), breakdown=regions))
    return campaign("moved", decision="paired", decide="regions"), Attempt("moved", "r001", 1, runs)


@pytest.mark.parametrize(
    ("fail_on", "named"),
    [
        ("change", {"t0 improved", "t1 inconclusive (zero_baseline)"}),
        ("regression", {"t1 inconclusive (zero_baseline)"}),
        ("not-improved", set()),
    ],
)
def test_every_member_that_fails_the_gate_gets_its_own_annotation(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fail_on: str,
    named: set[str],
) -> None:
    """The check turns red for each member the gate fails on, so each is named where GitHub
    shows it, at error level: an improvement under --fail-on change, a member not decided for
    want of data under regression and change (fail closed); under not-improved none is."""
    cid, attempt = _moved_suite()
    write_store(Store(tmp_path / "store"), [cid], [attempt])
    _github_env(monkeypatch, tmp_path)
    args = ["assess", "moved", "--store", str(tmp_path / "store"), "--gate", "--fail-on", fail_on]
    code, _, err = _cli(args, capsys)
    assert code == 5, err
    prefix = "::error title=explain-pipeline%3A moved r001%3A "
    members = {
        line[len(prefix) :].split("::", 1)[0]
        for line in err.splitlines()
        if line.startswith(prefix)
    }
    assert {m for m in members if not m.startswith("metric")} == named, err
