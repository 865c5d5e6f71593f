"""A benchmark's name is the same for the same test in two checkouts of one repository
(docs/suites.md, contract §2.4): pytest-benchmark's ``fullname``, its node id relative to pytest's
rootdir, whatever else either checkout holds. Real pytest-benchmark runs write the results files
(their names are the harness's own); the round replays each side's file with seeded medians, so
the verdicts are the same on every machine."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_result

from pipeline.importers.lines import import_line

pytestmark = pytest.mark.slow  # every test runs real pytest-benchmark processes

TEST = "def test_read(benchmark):\n    benchmark(sum, range(50))\n"
OTHER = "def test_read(benchmark):\n    benchmark(sum, range(60))\n"  # same test name

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


MARKERS = {
    "settings": ("pyproject.toml", "[tool.pytest.ini_options]\n"),
    "pyproject": ("pyproject.toml", '[project]\nname = "demo"\n'),
    "setup.py": ("setup.py", "from setuptools import setup\nsetup()\n"),
}
"""Files at a checkout's top that make it pytest's rootdir wherever pytest starts: its
settings, else the nearest pyproject.toml, else setup.py (no settings in a folder above)."""


def checkout(
    root: Path, *, integration: bool, config: bool = True, marker: str = "settings"
) -> Path:
    """A checkout of one repository: tests/unit/test_io.py, and (``integration``) the new
    tests/integration/test_io.py of the same file name; with ``config``, the ``marker`` file
    (pytest settings in its pyproject.toml by default), which makes the checkout pytest's
    rootdir."""
    (root / "tests" / "unit").mkdir(parents=True)
    (root / "tests" / "unit" / "test_io.py").write_text(TEST)
    if integration:
        (root / "tests" / "integration").mkdir()
        (root / "tests" / "integration" / "test_io.py").write_text(OTHER)
    for folder in (root / "tests" / "unit", root / "tests" / "integration"):
        if folder.is_dir():  # same-named modules need packages (pytest's rootdir-based ids)
            (folder / "__init__.py").write_text("")
    if config:
        name, text = MARKERS[marker]
        (root / name).write_text(text)
    return root


QUICK = ["-q", "-p", "no:cacheprovider", "-p", "pytest_benchmark.plugin", "-W", "ignore"]
QUICK += ["--benchmark-only", "--benchmark-max-time=0.001", "--benchmark-min-rounds=1"]
"""pytest options that change no name: one short round per benchmark, no other plugin."""
QUIET = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # pytest starts in half a second, not two


def harness(cwd: Path, args: list[str], out: Path) -> Path:
    """Run real pytest-benchmark in ``cwd`` with ``args``; its JSON file ``out``."""
    subprocess.run(
        [sys.executable, "-m", "pytest", *QUICK, f"--benchmark-json={out}", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={**os.environ, **QUIET},
    )
    return out


def pytest_benchmark(parent: Path, folder: str) -> Path:
    """Run real pytest-benchmark from ``parent`` on ``folder``/tests; its JSON file."""
    return harness(parent, [f"{folder}/tests"], parent / f"{folder}.json")


def fullnames(path: Path) -> list[str]:
    return sorted(b["fullname"] for b in json.loads(path.read_text())["benchmarks"])


def imported(path: Path) -> list[str]:
    """The benchmark names the importer gives a results file (the regions of its run)."""
    line, _ = import_line("pytest-benchmark", [str(path)], side="baseline", repetition=0)
    return sorted(line["breakdown"]["all"])


UNIT = "tests/unit/test_io.py::test_read"
ADDED = "tests/integration/test_io.py::test_read"

STARTS = {
    # case: (the file at the checkout's top, or None; where pytest starts and on what)
    "settings, from the parent": ("settings", "parent"),
    "a plain pyproject.toml, from the parent": ("pyproject", "parent"),
    "setup.py, from the parent": ("setup.py", "parent"),
    "no marker, pytest started inside": (None, "inside"),
    "no marker, --rootdir": (None, "rootdir"),
}


def side_names(
    parent: Path, folder: str, marker: str | None, start: str, *, added: bool
) -> list[str]:
    """The imported names of a checkout ``folder`` of ``parent`` run as ``start`` says."""
    root = checkout(
        parent / folder, integration=added, config=marker is not None, marker=marker or "settings"
    )
    out = parent / f"{folder}.json"
    if start == "inside":
        harness(root, ["tests"], out)
    else:
        rootdir = ["--rootdir", folder] if start == "rootdir" else []
        harness(parent, [f"{folder}/tests", *rootdir], out)
    return imported(out)


@pytest.mark.parametrize("case", list(STARTS))
def test_a_test_has_one_name_in_two_checkouts_whatever_else_either_holds(
    tmp_path: Path, case: str
) -> None:
    """The candidate's checkout adds tests/integration/test_io.py beside the baseline's
    tests/unit/test_io.py: the unit test's name is the same on both sides, its path from the
    checkout, wherever the checkout lies (old/ and new/). Before, the baseline named it
    test_io.py::test_read (no other file of that name) and the candidate tests/unit/...: the
    names depended on the other files of the run and never met."""
    marker, start = STARTS[case]
    old = side_names(tmp_path, "old", marker, start, added=False)
    new = side_names(tmp_path, "new", marker, start, added=True)
    assert UNIT in old and UNIT in new, (old, new)
    assert (old, new) == ([UNIT], [ADDED, UNIT])  # fullname as written, folders and all


@pytest.mark.parametrize(
    "case", ["a plain pyproject.toml, from the parent", "no marker, pytest started inside"]
)
def test_two_copies_of_one_repository_give_identical_names(tmp_path: Path, case: str) -> None:
    """Two identical copies in old/ and new/: the same names, file for file."""
    marker, start = STARTS[case]
    old = side_names(tmp_path, "old", marker, start, added=True)
    new = side_names(tmp_path, "new", marker, start, added=True)
    assert old == new == [ADDED, UNIT]


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
        "tests/integration/test_io.py::test_read",
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
        "tests/integration/test_io.py::test_read"
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


def test_ab_of_two_checkouts_at_default_options_pairs_their_benchmarks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``ab --help`` shows, run for real at pytest's defaults: ``ab --measure
    pytest-benchmark "pytest old/ ..." "pytest new/ ..."`` from the folder holding two checkouts
    of a repository with a pyproject.toml, without the --rootdir the help adds, the candidate
    adding tests/integration/test_io.py. Every run
    is real pytest-benchmark: the unit test pairs in every pair and only the added test is on
    one side. Before, the baseline's test_io.py::test_read met nothing (names and pairing only:
    no timing is asserted)."""
    checkout(tmp_path / "old", integration=False, marker="pyproject")
    checkout(tmp_path / "new", integration=True, marker="pyproject")
    monkeypatch.chdir(tmp_path)
    for name, value in QUIET.items():
        monkeypatch.setenv(name, value)

    def command(folder: str) -> str:
        words = [sys.executable, "-m", "pytest", f"{folder}/", *QUICK]
        return shlex.join([*words, "--benchmark-json={results}"])

    args = ["ab", "--measure", "pytest-benchmark", "-n", "5", "--warmup", "0"]
    code, out, err = cli_result([*args, command("old"), command("new")], capsys)
    assert code in (0, 5), out + err  # a verdict, whichever: not a usage or internal error
    assert "5 repetitions, 5 pairs, 0 failed runs" in out, out
    row = next(x for x in out.splitlines() if x.startswith(f"  {UNIT} "))
    assert row.split()[1] == "5", out  # paired in each of the 5 pairs
    unmatched = [x for x in err.splitlines() if x.startswith("benchmarks on one side only")]
    assert unmatched == [
        f"benchmarks on one side only (they pair with nothing): the candidate's only: {ADDED}"
    ], err
