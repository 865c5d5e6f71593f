"""What the recorder measures itself, with real processes: rusage counters on every run,
``--metric-source cpu``, ``--counters instructions`` under valgrind, and ``--measure`` over a real
pytest-benchmark suite (docs/suites.md)."""

from __future__ import annotations

import json
import os
import resource
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_result as run_main
from helpers import without_progress

from pipeline.record.measure import MeasureFailure, MeasureOptions, instructions, rusage_counters
from pipeline.record.order import SIDES
from pipeline.record.runner import run_environment

pytestmark = pytest.mark.slow  # real processes, Ray, a browser or long simulations

RUSAGE = sorted(rusage_counters(resource.getrusage(resource.RUSAGE_SELF)))
BUSY = "import os; sum(i * i for i in range(int(os.environ.get('N', '300000'))))"
SUITE = """
def work(n):
    return sum(i * i for i in range(n))

def test_scaled(benchmark):
    benchmark(work, {n})

def test_same(benchmark):
    benchmark(work, 2000)
"""


def lines_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "measurements.jsonl").read_text().splitlines()]


def python(code: str) -> str:
    return shlex.join([sys.executable, "-c", code])


def ab(
    tmp_path: Path,
    a: str,
    b: str,
    capsys: pytest.CaptureFixture[str],
    *extra: str,
    quiet: bool = True,
) -> tuple[int, str, list[dict[str, Any]]]:
    kept = tmp_path / "kept"
    code, out, err = run_main(["ab", a, b, "--keep", str(kept), *extra], capsys)
    assert without_progress(err) == "" or not quiet, err
    return code, out, lines_of(kept / "r001")


def test_every_ok_run_carries_rusage_counters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = python(BUSY)
    _, _, lines = ab(tmp_path, busy, busy, capsys, "-n", "5", "--warmup", "0")
    assert len(lines) == 10 and all(x["status"] == "ok" for x in lines)
    for line in lines:
        counters = line["counters"]
        assert sorted(k for k in counters if k.startswith("rusage.")) == RUSAGE
        assert counters["rusage.cpu_seconds"] > 0.01  # 300k squares: tens of ms of CPU
        assert counters["rusage.cpu_seconds"] == pytest.approx(
            counters["rusage.user_seconds"] + counters["rusage.system_seconds"]
        )
        assert counters["rusage.max_rss_bytes"] > 1_000_000  # a Python interpreter
        assert counters["rusage.minor_faults"] > 0


def test_a_counter_the_command_writes_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    writes = python(
        "import json, os; json.dump({'counters': {'rusage.cpu_seconds': 123}}, "
        "open(os.environ['EXPLAIN_MEASUREMENT'], 'w'))"
    )
    _, _, lines = ab(tmp_path, writes, writes, capsys, "-n", "5", "--warmup", "0")
    assert [x["counters"]["rusage.cpu_seconds"] for x in lines] == [123] * 10
    assert all(x["counters"]["rusage.max_rss_bytes"] > 0 for x in lines)


def test_metric_source_cpu_is_the_runs_cpu_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = python(BUSY)
    _, _, lines = ab(
        tmp_path, busy, busy, capsys, "-n", "5", "--warmup", "0", "--metric-source", "cpu"
    )
    assert all(x["metric"] == x["counters"]["rusage.cpu_seconds"] for x in lines)
    sleeper = python("import time; time.sleep(0.3)")
    _, _, slept = ab(
        tmp_path / "2",
        sleeper,
        sleeper,
        capsys,
        "-n",
        "5",
        "--warmup",
        "0",
        "--metric-source",
        "cpu",
    )
    assert all(x["metric"] < 0.2 for x in slept)  # sleeping costs no CPU: why it is opt-in


def test_both_sides_get_environments_of_the_same_size_with_a_results_file(tmp_path: Path) -> None:
    options = MeasureOptions(suite="pytest-benchmark")
    base = {"PATH": "/usr/bin", "EXPLAIN_RESULTS": "inherited"}
    envs = [
        run_environment(base, side, 3, tmp_path / "run-000001", trace=False, options=options)
        for side in SIDES
    ]
    assert len({sum(len(k) + len(v) for k, v in env.items()) for env in envs}) == 1
    results = str(tmp_path / "run-000001" / "results.json")
    assert {env["EXPLAIN_RESULTS"] for env in envs} == {results}


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_grow_with_the_loop_and_repeat_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def loop(n: int) -> str:
        return shlex.join(["sh", "-c", f"i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"])

    _, _, lines = ab(
        tmp_path,
        loop(2000),
        loop(8000),
        capsys,
        "-n",
        "5",
        "--warmup",
        "0",
        "--counters",
        "instructions",
    )
    assert all(x["status"] == "ok" for x in lines)
    by_side = {s: [x["counters"]["instructions"] for x in lines if x["side"] == s] for s in SIDES}
    small, large = min(by_side["baseline"]), min(by_side["candidate"])
    assert large > 2 * small  # 4x the iterations, plus a fixed start-up cost
    for values in by_side.values():  # identical runs: within 1 %
        assert max(values) <= 1.01 * min(values)


def test_measure_pytest_benchmark_ab_gives_per_benchmark_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, n in (("slow", 20000), ("fast", 2000)):  # the scaled benchmark 10x slower on A
        (tmp_path / name).mkdir()
        (tmp_path / name / "test_suite.py").write_text(SUITE.format(n=n))

    def suite(name: str) -> str:
        return shlex.join(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(tmp_path / name),
                # its own rootdir (docs/suites.md), or pytest names the tests from the folder
                # both paths are in, the checkout's and this test's (/tmp for a checkout in /tmp)
                f"--rootdir={tmp_path / name}",
                "--benchmark-only",
                "--benchmark-json={results}",
                "--benchmark-max-time=0.02",
                "--benchmark-min-rounds=5",
            ]
        )

    code, out, lines = ab(
        tmp_path,
        suite("slow"),
        suite("fast"),
        capsys,
        "-n",
        "5",
        "--warmup",
        "0",
        "--measure",
        "pytest-benchmark",
    )
    assert all(x["status"] == "ok" for x in lines), out
    scaled, same = "test_suite.py::test_scaled", "test_suite.py::test_same"
    for line in lines:
        assert set(line["breakdown"]["all"]) == {scaled, same}
        assert line["metric"] == pytest.approx(sum(line["breakdown"]["all"].values()))
    # with --measure, ab decides every benchmark: one row each in its benchmarks table
    rows = {r.split()[0]: r for r in out.splitlines() if r.startswith("  test_suite.py::")}
    assert rows[scaled].endswith("improved"), out  # B is ~10x faster on the scaled benchmark
    estimate = float(rows[scaled].split()[2])  # name, pairs, ratio
    assert 4 < estimate < 25, out
    assert "verdict: PASS" in out and code == 0


def test_measure_failures_are_failed_runs_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nothing = python("pass")
    garbage = python("import sys; open(sys.argv[1], 'w').write('{not json')") + " {results}"
    _, _, lines = ab(
        tmp_path,
        nothing,
        garbage,
        capsys,
        "-n",
        "5",
        "--warmup",
        "0",
        "--measure",
        "gbench",
        quiet=False,
    )
    assert len(lines) >= 2 and {x["status"] for x in lines} == {"failed"}
    log = (tmp_path / "kept" / "r001" / "runs.log").read_text()
    assert "  measured by gbench results (metric sum), rusage counters\n" in log
    assert "failed: wrote no results file at $EXPLAIN_RESULTS" in log
    assert "failed: gbench results: " in log and "results.json:1: expected JSON" in log


def test_measure_options_that_cannot_work_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmd = python("pass")
    code, _, err = run_main(
        ["ab", cmd, cmd, "--measure", "pyperf", "--metric-source", "cpu"], capsys
    )
    assert code == 2 and "--metric-source cpu: with --measure or --trace" in err
    code, _, err = run_main(["ab", cmd, cmd, "--measure", "pyperf", "--trace", "kineto"], capsys)
    assert code == 2 and "--measure and --trace" in err
    code, _, err = run_main(["ab", cmd, f"{cmd} {{results}}"], capsys)
    assert code == 2 and err.startswith("error: {results} in a command stands for the results")


def test_cachegrind_outputs_are_read_as_bounded_regular_files(tmp_path: Path) -> None:
    (tmp_path / "cachegrind.out.1").write_bytes(b"events: Ir\nsummary: 1200\n")
    (tmp_path / "cachegrind.out.2").write_bytes(b"events: Ir\nsummary: 34\n")
    assert instructions(tmp_path) == 1234
    # the command can write its folder: a FIFO there once blocked the recorder's read forever
    os.mkfifo(tmp_path / "cachegrind.out.3")
    with pytest.raises(MeasureFailure, match=r"cachegrind.out.3: .*FIFO"):
        instructions(tmp_path)
    (tmp_path / "cachegrind.out.3").unlink()
    (tmp_path / "cachegrind.out.3").symlink_to(tmp_path / "cachegrind.out.1")
    with pytest.raises(MeasureFailure, match=r"cachegrind.out.3"):
        instructions(tmp_path)
