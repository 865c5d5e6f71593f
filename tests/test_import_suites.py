"""`import pytest-benchmark|gbench|pyperf`: files written by the real harnesses -> one run.

pytest-benchmark and pyperf are run here on tiny benchmarks (a few ms each); the Google
Benchmark files under tests/fixtures/suites were written by a real build (gbench_bench.cc says
how). Every expected number is computed in the test from the harness's own file.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_result

FIXTURES = Path(__file__).parent / "fixtures" / "suites"
UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}

PYTEST_SUITE = """
import pytest

def work(n):
    return sum(range(n))

def test_sum(benchmark):
    benchmark.extra_info["items"] = 1000
    benchmark.extra_info["label"] = "not a number"
    benchmark(work, 1000)

@pytest.mark.parametrize("n", [10, 100])
def test_param(benchmark, n):
    benchmark(work, n)
"""

PYPERF_SCRIPT = """
import pyperf
runner = pyperf.Runner(processes=1, values=3, warmups=1, loops=50)
runner.timeit("sum 100", stmt="sum(range(100))")
runner.timeit("sum\\t1000", stmt="sum(range(1000))")
"""


def run_pytest_benchmark(folder: Path, source: str = PYTEST_SUITE) -> Path:
    """Run a real pytest-benchmark suite (in its own process) and return its JSON file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_tiny.py").write_text(source, encoding="utf-8")
    out = folder / "bench.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_tiny.py",
            "--benchmark-only",
            f"--benchmark-json={out}",
            "--benchmark-max-time=0.005",
            "--benchmark-min-rounds=3",
            "-W",
            "ignore",
        ],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def pytest_benchmark_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_pytest_benchmark(tmp_path_factory.mktemp("pb"))


@pytest.fixture(scope="module")
def pyperf_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pyperf")
    (folder / "bench.py").write_text(PYPERF_SCRIPT, encoding="utf-8")
    out = folder / "pyperf.json"
    subprocess.run(
        [sys.executable, "bench.py", "-q", "-o", str(out)],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return out


def _import(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return cli_result(["import", *args, "--side", "baseline", "--repetition", "0"], capsys)


def _line(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = _import(args, capsys)
    assert code == 0, err
    line: dict[str, object] = json.loads(out)
    return line


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


@pytest.mark.slow
def test_pytest_benchmark_medians_sum_and_extra_info(
    pytest_benchmark_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = json.loads(pytest_benchmark_file.read_text())
    expected = {b["fullname"].split("/")[-1]: b["stats"]["median"] for b in raw["benchmarks"]}
    line = _line(["pytest-benchmark", str(pytest_benchmark_file)], capsys)
    assert line["breakdown"] == {"all": expected}
    assert sorted(expected) == [
        "test_tiny.py::test_param[100]",
        "test_tiny.py::test_param[10]",
        "test_tiny.py::test_sum",
    ]
    assert line["metric"] == pytest.approx(sum(expected.values()), rel=1e-12)
    assert line["counters"] == {"test_tiny.py::test_sum:items": 1000}  # the string is no counter
    geo = _line(
        ["pytest-benchmark", str(pytest_benchmark_file), "--suite-metric", "geomean"], capsys
    )
    assert geo["metric"] == pytest.approx(_geomean(list(expected.values())), rel=1e-12)


def test_pyperf_median_of_values_and_escaped_names(
    pyperf_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = json.loads(pyperf_file.read_text())
    medians = {
        b["metadata"]["name"]: statistics.median(v for r in b["runs"] for v in r.get("values", []))
        for b in raw["benchmarks"]
    }
    line = _line(["pyperf", str(pyperf_file)], capsys)
    assert line["breakdown"] == {
        "all": {"sum 100": medians["sum 100"], "sum\\x091000": medians["sum\t1000"]}
    }
    assert line["metric"] == pytest.approx(sum(medians.values()), rel=1e-12)


def test_pyperf_region_pattern_keeps_some_benchmarks(
    pyperf_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _line(["pyperf", str(pyperf_file), "--region-pattern", "sum 100"], capsys)
    assert list(line["breakdown"]["all"]) == ["sum 100"]  # type: ignore[index]


def test_gbench_median_of_repetitions_and_user_counters(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "gbench-repetitions.json"
    rows = [b for b in json.loads(path.read_text())["benchmarks"] if b["run_type"] == "iteration"]
    names = list(dict.fromkeys(b["run_name"] for b in rows))
    seconds = {
        n: statistics.median(
            b["real_time"] * UNITS[b["time_unit"]] for b in rows if b["run_name"] == n
        )
        for n in names
    }
    line = _line(["gbench", str(path)], capsys)
    assert line["breakdown"]["all"] == pytest.approx(seconds, rel=1e-12)  # type: ignore[index]
    assert names == ["BM_memcpy/64", "BM_memcpy/4096", "BM_string_concat"]
    counters = line["counters"]
    assert isinstance(counters, dict)
    assert counters["BM_memcpy/64:buffers"] == 2
    assert counters["BM_memcpy/4096:bytes_per_second"] == pytest.approx(
        statistics.median(b["bytes_per_second"] for b in rows if b["run_name"] == "BM_memcpy/4096"),
        rel=1e-12,
    )
    assert "BM_string_concat:appends" in counters
    assert not any(name.endswith((":label", ":iterations", ":cpu_time")) for name in counters)


def test_gbench_aggregates_only_uses_the_median_aggregate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = FIXTURES / "gbench-aggregates.json"
    medians = {
        b["run_name"]: b["real_time"] * UNITS[b["time_unit"]]
        for b in json.loads(path.read_text())["benchmarks"]
        if b.get("aggregate_name") == "median"
    }
    assert len(medians) == 3
    line = _line(["gbench", str(path)], capsys)
    assert line["breakdown"]["all"] == pytest.approx(medians, rel=1e-12)  # type: ignore[index]


def test_gbench_benchmark_error_is_one_line_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "gbench-error.json"
    code, out, err = _import(["gbench", str(path)], capsys)
    assert (code, out) == (1, "")
    assert err == f'error: {path}: benchmark "BM_broken" failed: the input file is missing\n'


def test_damaged_and_foreign_files_are_clear_errors(
    tmp_path: Path, pytest_benchmark_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(pytest_benchmark_file.read_bytes()[:200])
    code, _, err = _import(["pytest-benchmark", str(truncated)], capsys)
    assert code == 1 and err.startswith(f"error: {truncated}:") and "expected JSON" in err
    code, _, err = _import(["gbench", str(pytest_benchmark_file)], capsys)
    assert code == 1
    assert err == (
        f"error: {pytest_benchmark_file}: expected Google Benchmark JSON "
        '(--benchmark_out_format=json): an object with "context" and a "benchmarks" '
        'list of objects with "name", "real_time" and "time_unit", got no "context" '
        "object\n"
    )
    code, _, err = _import(["pyperf", str(FIXTURES / "gbench-repetitions.json")], capsys)
    assert code == 1 and "expected pyperf JSON (-o FILE)" in err
    empty = tmp_path / "empty.json"
    empty.write_text('{"benchmarks": [], "version": "5.1.0"}')
    code, _, err = _import(["pytest-benchmark", str(empty)], capsys)
    assert code == 1 and "expected at least one timed benchmark" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_pytest_names_are_node_ids_from_the_rootdir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = "def test_x(benchmark):\n    benchmark(sum, range(10))\n"
    for folder in ("a", "b/c"):
        (tmp_path / "s" / folder).mkdir(parents=True)
        (tmp_path / "s" / folder / "test_same.py").write_text(suite)
    (tmp_path / "s" / "a" / "test_other.py").write_text(suite)
    (tmp_path / "s" / "conftest.py").write_text("")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            "s",
            "s",
            "--benchmark-only",
            "--benchmark-json=out.json",
            "--benchmark-max-time=0.001",
            "--benchmark-min-rounds=1",
            "-W",
            "ignore",
            "--import-mode=importlib",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    line = _line(["pytest-benchmark", str(tmp_path / "out.json")], capsys)
    assert sorted(line["breakdown"]["all"]) == [  # type: ignore[index]
        "a/test_other.py::test_x",  # its folder kept although no other file shares its name
        "a/test_same.py::test_x",
        "b/c/test_same.py::test_x",
    ]


def test_a_pyperf_track_memory_file_is_refused_for_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real `--track-memory` run: every benchmark's unit is byte, so there is no time to
    import. Before the fix the message described a pyperf file, which this one is."""
    (tmp_path / "bench.py").write_text(PYPERF_SCRIPT, encoding="utf-8")
    out = tmp_path / "memory.json"
    subprocess.run(
        [sys.executable, "bench.py", "-q", "--track-memory", "-o", str(out)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    units = {b["metadata"].get("unit") for b in json.loads(out.read_text())["benchmarks"]}
    assert units == {None} and json.loads(out.read_text())["metadata"]["unit"] == "byte"
    code, _, err = _import(["pyperf", str(out)], capsys)
    assert (code, err) == (
        1,
        f"error: {out}: expected at least one benchmark timed in seconds, got only benchmarks "
        'in "byte" (pyperf --track-memory and --tracemalloc measure memory): import the file '
        "of a run without that option\n",
    )


def test_two_files_of_one_run_join_and_a_repeated_name_is_refused(
    pytest_benchmark_file: Path, pyperf_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _import(["pyperf", str(pyperf_file), str(pyperf_file)], capsys)
    assert code == 1 and err.endswith('benchmark "sum 100" appears twice\n')
