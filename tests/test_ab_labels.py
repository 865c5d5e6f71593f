"""`ab --names A,B` and `ab --report FILE` (issue 32): short labels for the two sides, checked
as a usage error naming the option; the report page written in the same step; and the
`--confirm` command a kept ab's `campaign final` prints, run as printed (its --store included)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from helpers import cli_process, workload

OLD = workload("work=60000", "fixed=1000")
NEW = workload("work=30000", "fixed=1000")  # B is about twice as fast: PASS


cli = partial(cli_process, env={"PYTHONPATH": os.pathsep.join(sys.path)})
"""``explain-pipeline ARGS`` as a real process (pass ``cwd``) running this interpreter's code."""


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A kept ab with --names and --report, run in its own folder with relative paths."""
    root = tmp_path_factory.mktemp("ab")
    done = cli(
        "ab", OLD, NEW, "-n", "6", "--names", "main,fast", "--keep", "kept", "--report",
        "out/ab.html", cwd=root,
    )  # fmt: skip
    return root, done


@pytest.mark.slow
def test_ab_report_writes_the_page_in_the_same_step(
    kept: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """Fails before issue 32: ab had no --report (usage error, exit 2)."""
    root, done = kept
    assert done.returncode == 0, done.stderr
    page = (root / "out" / "ab.html").read_text("utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<h1>kept</h1>" in page
    assert "candidate <b>fast</b> vs baseline <b>main</b>" in page
    assert "median seconds per side: baseline" in page
    assert "report: out/ab.html" in done.stdout


@pytest.mark.slow
def test_ab_names_label_the_sides_in_ab_and_in_campaign_final(
    kept: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """Fails before issue 32: the labels were the whole commands (a 126-character-wide
    campaign final)."""
    root, done = kept
    assert f"A (baseline) main:  {OLD}" in done.stdout
    assert f"B (candidate) fast: {NEW}" in done.stdout
    final = cli("campaign", "final", "kept", "--store", "kept/.explain-store", cwd=root)
    assert final.returncode == 0, final.stderr
    assert "fast" in final.stdout and NEW not in final.stdout
    lines = final.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("round  attempt"))
    row = lines[head + 1].split()
    assert row[:3] == ["1", "r001", "fast"], lines[head + 1]
    assert max(len(lines[head]), len(lines[head + 1])) < 120  # the verdict table's width


@pytest.mark.slow
def test_the_printed_confirm_command_runs_as_printed(tmp_path: Path) -> None:
    """Fails before issue 32: the hint left out --store, so it ingested the campaign into the
    default store (./.explain-store) and confirmed nothing of the kept one's."""
    root = tmp_path
    assert cli("ab", OLD, NEW, "-n", "6", "--keep", "kept", cwd=root).returncode == 0
    final = cli("campaign", "final", "kept", "--store", "kept/.explain-store", cwd=root)
    hint = re.search(r"\((explain-pipeline campaign final [^)]*--confirm)\)", final.stdout)
    assert hint is not None, final.stdout
    assert "--store kept/.explain-store" in hint.group(1)
    words = shlex.split(hint.group(1))
    confirmed = cli(*words[1:], "-n", "6", cwd=root)
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    assert "campaign's gain: " in confirmed.stdout
    assert "from confirmation round c002 (" in confirmed.stdout
    assert not (root / ".explain-store").exists()  # nothing went to another store


@pytest.mark.parametrize(
    ("names", "why"),
    [
        ("main", "got 1"),
        ("a,b,c", "got 3"),
        ("main,", "got an empty one"),
        (" ,fast", "got an empty one"),
        ("same,same", "got 'same' twice"),
        ("ma\tin,fast", "got 'ma\\\\tin'"),
        ("main,fa\u202est", "got 'fa\\\\u202est'"),
    ],
)
def test_bad_names_are_a_usage_error_naming_the_option(
    names: str, why: str, tmp_path: Path
) -> None:
    done = cli("ab", OLD, NEW, "-n", "6", "--names", names, cwd=tmp_path)
    assert done.returncode == 2
    assert "Invalid value for '--names': two labels A,B: distinct, not empty" in done.stderr
    assert why in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []  # refused before anything ran


def test_a_report_that_is_a_folder_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "page").mkdir()
    done = cli("ab", OLD, NEW, "-n", "6", "--report", "page", cwd=tmp_path)
    assert done.returncode == 2
    assert "Invalid value for '--report': File 'page' is a directory" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["page"]
