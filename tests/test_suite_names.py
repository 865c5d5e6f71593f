"""A benchmark's name is the same for the same test in two checkouts of one repository
(docs/suites.md, contract §2.4): pytest-benchmark's ``fullname``, its node id relative to pytest's
rootdir, whatever else either checkout holds. Real pytest-benchmark runs write the results files
(their names are the harness's own); the round replays each side's file with seeded medians, so
the verdicts are the same on every machine."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_result

TEST = "def test_read(benchmark):\n    benchmark(sum, range(50))\n"
OTHER = "def test_write(benchmark):\n    benchmark(sum, range(50))\n"

REPLAY = """
import json, os, random, sys
doc = json.load(open(sys.argv[1]))
slower = float(sys.argv[2])
side, rep = os.environ["EXPLAIN_SIDE"], os.environ["EXPLAIN_REPETITION"]
for bench in doc["benchmarks"]:
    draw = random.Random(f"{side}:{rep}:{bench['fullname']}").uniform(-0.01, 0.01)
    slow = slower if bench["fullname"].endswith("unit/test_io.py::test_read") else 1.0
    bench["stats"]["median"] = 1e-3 * slow * (1 + draw)
json.dump(doc, open(os.environ["EXPLAIN_RESULTS"], "w"))
"""


def checkout(root: Path, *, integration: bool, config: bool = True) -> Path:
    """A checkout of one repository: tests/unit/test_io.py, and (``integration``) the new
    tests/integration/test_io.py of the same file name; with ``config``, the pytest settings
    in its pyproject.toml, which make the checkout pytest's rootdir."""
    (root / "tests" / "unit").mkdir(parents=True)
    (root / "tests" / "unit" / "test_io.py").write_text(TEST)
    if integration:
        (root / "tests" / "integration").mkdir()
        (root / "tests" / "integration" / "test_io.py").write_text(OTHER)
    for folder in (root / "tests" / "unit", root / "tests" / "integration"):
        if folder.is_dir():  # same-named modules need packages (pytest's rootdir-based ids)
            (folder / "__init__.py").write_text("")
    if config:
        (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    return root


def pytest_benchmark(parent: Path, folder: str) -> Path:
    """Run real pytest-benchmark from ``parent`` on ``folder``/tests; its JSON file."""
    out = parent / f"{folder}.json"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{folder}/tests"]
        + ["--benchmark-only", f"--benchmark-json={out}", "--benchmark-max-time=0.001"]
        + ["--benchmark-min-rounds=1", "-W", "ignore"],
        cwd=parent,
        check=True,
        capture_output=True,
    )
    return out


def fullnames(path: Path) -> list[str]:
    return sorted(b["fullname"] for b in json.loads(path.read_text())["benchmarks"])


def ab(
    parent: Path, old: Path, new: Path, slower: float, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    (parent / "replay.py").write_text(REPLAY)

    def command(results: Path, factor: float) -> str:
        return shlex.join([sys.executable, str(parent / "replay.py"), str(results), str(factor)])

    args = ["ab", "--measure", "pytest-benchmark", "-n", "8", "--warmup", "0"]
    args += ["--fail-on", "regression", command(old, 1.0), command(new, slower)]
    return cli_result(args, capsys)


def test_a_same_named_file_added_in_another_checkout_keeps_the_names_and_the_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The candidate's checkout adds tests/integration/test_io.py: its unit test keeps the
    baseline's name, so its 30% slowdown is decided and fails the gate (exit 5). Before, the
    baseline's test was test_io.py::test_read and the candidate's tests/unit/test_io.py::
    test_read: they never paired and the gate passed."""
    checkout(tmp_path / "old", integration=False)
    checkout(tmp_path / "new", integration=True)
    old, new = pytest_benchmark(tmp_path, "old"), pytest_benchmark(tmp_path, "new")
    assert fullnames(old) == ["tests/unit/test_io.py::test_read"]  # relative to its rootdir
    assert fullnames(new) == [
        "tests/integration/test_io.py::test_write",
        "tests/unit/test_io.py::test_read",
    ]
    code, out, err = ab(tmp_path, old, new, 1.3, capsys)
    assert code == 5, out + err
    gate = next(line for line in out.splitlines() if line.startswith("gate: "))
    assert gate.startswith("gate: attempt r001 (round 1): FAIL (--fail-on regression): "), out
    assert "; tests/unit/test_io.py::test_read 0.7" in gate, out  # the 30% slowdown: 1 / 1.3
    row = next(x for x in out.splitlines() if x.startswith("  tests/unit/test_io.py::test_read"))
    assert row.endswith("regressed"), out
    # the benchmark the candidate added is named on stderr, the one it shares is not
    unmatched = [x for x in err.splitlines() if x.startswith("benchmarks on one side only")]
    assert unmatched == [
        "benchmarks on one side only (they pair with nothing): the candidate's only: "
        "tests/integration/test_io.py::test_write"
    ], err


def test_an_identical_candidate_in_another_checkout_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same code in both checkouts, both with the same-named files: nothing regressed
    (exit 0), so the pairing above is not a gate that fails whatever it compares."""
    checkout(tmp_path / "old", integration=True)
    checkout(tmp_path / "new", integration=True)
    old, new = pytest_benchmark(tmp_path, "old"), pytest_benchmark(tmp_path, "new")
    code, out, err = ab(tmp_path, old, new, 1.0, capsys)
    assert code == 0, out + err
    assert "tests/unit/test_io.py::test_read" in out


def test_names_that_differ_only_in_their_folders_are_named_with_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checkouts without pytest settings, run from their parent: pytest's rootdir is the
    parent, so the ids are old/tests/... and new/tests/...: they cannot pair, and stderr says
    which and how to give each side its own rootdir."""
    checkout(tmp_path / "old", integration=False, config=False)
    checkout(tmp_path / "new", integration=False, config=False)
    old, new = pytest_benchmark(tmp_path, "old"), pytest_benchmark(tmp_path, "new")
    if fullnames(old) != ["old/tests/unit/test_io.py::test_read"]:
        pytest.skip(f"this pytest chose another rootdir: {fullnames(old)}")
    code, _, err = ab(tmp_path, old, new, 1.3, capsys)
    lines = [x for x in err.splitlines() if x.startswith("benchmarks on one side only")]
    assert lines == [
        "benchmarks on one side only (they pair with nothing): the baseline's only: "
        "old/tests/unit/test_io.py::test_read; the candidate's only: "
        "new/tests/unit/test_io.py::test_read (they differ only in their leading folders: "
        "pytest names a test by its path from its rootdir; give each side's pytest its own "
        "--rootdir, docs/suites.md)"
    ], err
    assert code != 0  # no benchmark pairs: the round decides none of them
