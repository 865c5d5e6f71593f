"""A pull request that skips or adds a benchmark (contract §15, docs/suites.md): the suite's
metric is formed over the benchmarks both sides measured, and a benchmark on one side only is
``removed`` (in no candidate run: the gate fails on it under ``--fail-on regression|change``
unless ``--allow-removed``) or ``added`` (never fails it).

The sets come from real pytest-benchmark runs (a checkout whose slowest test is marked
``@pytest.mark.skip``, one with a test more); for the verdicts, each round replays its side's
results file with fixed medians that are the same on both sides for every shared benchmark, so
nothing measured on both sides moved and the verdicts are the same on every machine. One test
runs pytest-benchmark itself in every run and asserts only what does not depend on speed."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import cli_result

SUITE = """
import pytest

def test_fast(benchmark):
    benchmark(sum, range(10))

def test_mid(benchmark):
    benchmark(sum, range(100))

{skip}def test_slow(benchmark):
    benchmark(sum, range(1000))
{extra}"""
EXTRA = """
def test_new(benchmark):
    benchmark(sum, range(20))
"""
SECONDS = {"test_fast": 1e-3, "test_mid": 2e-3, "test_slow": 9e-3, "test_new": 4e-3}
REPLAY = f"""
import json, os, random, sys
seconds = {SECONDS!r}
doc = json.load(open(sys.argv[1]))
rep = os.environ["EXPLAIN_REPETITION"]
for bench in doc["benchmarks"]:
    name = bench["fullname"].rsplit("::", 1)[-1]
    draw = random.Random(f"{{rep}}:{{name}}").uniform(-0.01, 0.01)  # the same on both sides
    bench["stats"]["median"] = seconds[name] * (1 + draw)
json.dump(doc, open(os.environ["EXPLAIN_RESULTS"], "w"))
"""
SLOW = "tests/test_suite.py::test_slow"
NEW = "tests/test_suite.py::test_new"


def checkout(root: Path, *, skip_slow: bool = False, extra: bool = False) -> Path:
    """A checkout of one repository: tests/test_suite.py (its rootdir by its pyproject.toml)."""
    (root / "tests").mkdir(parents=True)
    text = SUITE.format(
        skip='@pytest.mark.skip(reason="too slow")\n' if skip_slow else "",
        extra=EXTRA if extra else "",
    )
    (root / "tests" / "test_suite.py").write_text(text)
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    return root


PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
PYTEST += ["--benchmark-only", "--benchmark-max-time=0.001", "--benchmark-min-rounds=1"]
PYTEST += ["-W", "ignore"]


def results(root: Path) -> Path:
    """Real pytest-benchmark in ``root``: its results file."""
    out = root / "results.json"
    subprocess.run([*PYTEST, f"--benchmark-json={out}"], cwd=root, check=True, capture_output=True)
    return out


def names(path: Path) -> list[str]:
    return sorted(b["fullname"] for b in json.loads(path.read_text())["benchmarks"])


def replay_ab(
    tmp_path: Path, old: Path, new: Path, capsys: pytest.CaptureFixture[str], *options: str
) -> tuple[int, str, str]:
    (tmp_path / "replay.py").write_text(REPLAY)
    a, b = (shlex.join([sys.executable, str(tmp_path / "replay.py"), str(p)]) for p in (old, new))
    args = ["ab", "--measure", "pytest-benchmark", "-n", "6", "--warmup", "0", *options, a, b]
    return cli_result(args, capsys)


def row_of(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.strip().startswith(name))


def gate_of(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("gate: "))


@pytest.fixture
def skipped(tmp_path: Path) -> tuple[Path, Path]:
    """Results files of a baseline and of a candidate that skips its slowest benchmark."""
    old = results(checkout(tmp_path / "old"))
    new = results(checkout(tmp_path / "new", skip_slow=True))
    assert SLOW in names(old) and SLOW not in names(new)
    return old, new


@pytest.mark.slow
def test_a_skipped_slowest_benchmark_is_removed_and_fails_the_regression_gate(
    tmp_path: Path, skipped: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the metric summed what each run reported, so the candidate was ~4x "faster"
    (PASS) and the skipped benchmark was inconclusive (zero_candidate); the gate passed (exit
    0). Now the metric is over the shared benchmarks (ratio 1.0000: nothing shared moved), the
    skipped one is removed, and --fail-on regression fails naming it (exit 5)."""
    old, new = skipped
    code, out, err = replay_ab(tmp_path, old, new, capsys, "--fail-on", "regression")
    assert code == 5, out + err
    assert row_of(out, SLOW).endswith("removed"), out
    assert "zero_candidate" not in out
    metric = row_of(out, "metric seconds")
    assert "1.0000 [1.0000, 1.0000]" in metric, out  # over test_fast and test_mid only
    assert gate_of(out) == (
        "gate: attempt r001 (round 1): FAIL (--fail-on regression): "
        f"{SLOW} removed (in the baseline's runs, in no candidate run)"
    ), out
    assert (
        "benchmarks on one side only (they pair with nothing): the baseline's only: " + SLOW
    ) in err.splitlines()


@pytest.mark.slow
def test_allow_removed_keeps_a_removed_benchmark_from_failing_the_gate(
    tmp_path: Path, skipped: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """--allow-removed: the removal is meant; the gate passes and still names it."""
    old, new = skipped
    for fail_on in ("regression", "change"):
        code, out, err = replay_ab(
            tmp_path, old, new, capsys, "--fail-on", fail_on, "--allow-removed"
        )
        assert code == 0, out + err
        assert gate_of(out).endswith(
            f"; {SLOW} removed (in the baseline's runs, in no candidate run) "
            "(allowed: --allow-removed)"
        ), out


@pytest.mark.slow
def test_a_removed_benchmark_fails_the_change_gate_and_every_ci_output_names_it(
    tmp_path: Path,
    skipped: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--fail-on change fails on it too; Markdown, JUnit and the GitHub annotations name it."""
    old, new = skipped
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit = tmp_path / "ab.xml"
    code, out, err = replay_ab(
        tmp_path,
        old,
        new,
        capsys,
        "--fail-on",
        "change",
        "--format",
        "markdown",
        "--junit",
        str(junit),
    )
    assert code == 5, out + err
    assert "| tests/test\\_suite.py::test\\_slow | 6 | - | removed |" in out, out
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    failure = cases[f"benchmark {SLOW}"].find("failure")
    assert failure is not None and failure.get("type") == "removed"
    annotations = [x for x in (out + err).splitlines() if x.startswith("::")]
    assert any(x.startswith("::error ") and "removed" in x for x in annotations), annotations


@pytest.mark.slow
def test_an_added_benchmark_is_added_and_passes_the_regression_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the added benchmark made the candidate's sum larger, so the metric "regressed"
    and --fail-on regression exited 5 although nothing measured on both sides moved. Now the
    metric is over the shared ones (1.0000), the new benchmark is added, and the gate passes."""
    old = results(checkout(tmp_path / "old"))
    new = results(checkout(tmp_path / "new", extra=True))
    assert NEW in names(new) and NEW not in names(old)
    code, out, err = replay_ab(tmp_path, old, new, capsys, "--fail-on", "regression")
    assert code == 0, out + err
    assert row_of(out, NEW).endswith("added"), out
    assert "1.0000 [1.0000, 1.0000]" in row_of(out, "metric seconds"), out
    assert gate_of(out).startswith("gate: attempt r001 (round 1): PASS (--fail-on regression)")
    assert (
        "benchmarks on one side only (they pair with nothing): the candidate's only: " + NEW
    ) in err.splitlines()


@pytest.mark.slow
def test_a_kept_round_stores_the_rule_and_the_verdicts(
    tmp_path: Path, skipped: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """attempt.json records how the metric combines the benchmarks (suite_metric), and table
    ``benchmarks`` keeps the removed verdict, read again by assess --gate."""
    old, new = skipped
    keep = tmp_path / "kept"
    code, out, err = replay_ab(tmp_path, old, new, capsys, "--keep", str(keep))
    attempt = json.loads((keep / "r001" / "attempt.json").read_text())
    assert attempt["suite_metric"] == "sum"
    import polars as pl

    table = pl.read_parquet(keep / ".explain-store" / "benchmarks" / "*" / "*.parquet")
    removed = table.filter(pl.col("name") == SLOW).row(0, named=True)
    assert (removed["verdict"], removed["reason"], removed["estimate"]) == ("removed", None, None)
    assert table.filter(pl.col("name") != SLOW)["family_size"].to_list() == [3, 3, 3]
    store = str(keep / ".explain-store")
    args = ["assess", "--store", store, "--gate", "kept", "--fail-on", "regression"]
    code, out, err = cli_result(args, capsys)
    assert code == 5, out + err
    code, out, err = cli_result([*args, "--allow-removed"], capsys)
    assert code == 0, out + err


@pytest.mark.slow
def test_real_pytest_benchmark_in_every_run_names_the_skipped_benchmark_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Real pytest-benchmark as each side's command, real timings: what does not depend on
    speed holds — the skipped benchmark is removed (not inconclusive for a zero candidate), it
    fails --fail-on regression, and stderr names it."""
    old, new = checkout(tmp_path / "old"), checkout(tmp_path / "new", skip_slow=True)
    a, b = (
        shlex.join(
            [*(str(root / w) if w == "tests" else w for w in PYTEST), f"--rootdir={root}"]
            + ["--benchmark-json={results}"]
        )
        for root in (old, new)
    )
    args = ["ab", "--measure", "pytest-benchmark", "-n", "5", "--warmup", "0"]
    code, out, err = cli_result([*args, "--fail-on", "regression", a, b], capsys)
    assert code == 5, out + err
    assert row_of(out, SLOW).endswith("removed"), out
    assert f"{SLOW} removed" in gate_of(out), out
    assert (
        "benchmarks on one side only (they pair with nothing): the baseline's only: " + SLOW
    ) in err.splitlines()
