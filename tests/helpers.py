"""Helpers shared by the test modules (import them: ``from helpers import workload``); the
fixtures are in conftest.py."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import polars as pl
import pytest

from pipeline.cli import main

CliRun = Callable[[Sequence[str]], tuple[int, str, str]]
"""``run_cli(args)``: the exit code, stdout and stderr of ``explain-pipeline ARGS``."""


def cli_result(args: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the real entry point in this process: its exit code, stdout and stderr (the
    ``run_cli`` fixture of conftest.py binds it to a test's ``capsys``)."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def start_campaign(
    folder: Path,
    capsys: pytest.CaptureFixture[str],
    *options: str,
    metric: str = "seconds",
    quiet: bool = True,
) -> Path:
    """``campaign start FOLDER --metric METRIC OPTIONS`` in this process; asserts that it exits 0
    and, when ``quiet``, that it writes nothing on stderr; the folder."""
    code, _, err = cli_result(
        ["campaign", "start", str(folder), "--metric", metric, *options], capsys
    )
    if quiet:
        assert (code, err) == (0, "")
    else:
        assert code == 0
    return folder


def round_args(
    folder: Path, baseline: str, candidate: str, *extra: str, names: tuple[str, str] = ("a", "b")
) -> list[str]:
    """``round FOLDER`` of the commands ``baseline`` and ``candidate`` (labelled ``names``), no
    warm-up, then ``extra``."""
    return [
        "round",
        str(folder),
        "--baseline",
        names[0],
        "--candidate",
        names[1],
        "--baseline-cmd",
        baseline,
        "--candidate-cmd",
        candidate,
        "--warmup",
        "0",
        *extra,
    ]


CLI = Path(sys.executable).with_name("explain-pipeline")
"""This environment's console script ``explain-pipeline``."""


def cli_process(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """``explain-pipeline ARGS`` as a real process (``conftest.cli_result`` runs it in this one):
    its exit code, stdout and stderr as text, whatever the exit code; ``env`` adds to this
    process's environment; ``timeout`` (seconds) turns a hang into a failure."""
    return subprocess.run(
        [str(CLI), *args],
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


INGESTED_TABLES = (
    "campaigns",
    "attempts",
    "samples",
    "breakdown",
    "counters",
    "expectations",
    "integrity",
)
"""The tables ``ingest`` writes from a folder of attempts."""


def sample_row(attempt: str, metric: float) -> pl.DataFrame:
    """One ok baseline run of ``attempt`` as a row of the samples table (without campaign_id)."""
    return pl.DataFrame(
        {
            "attempt_id": [attempt],
            "side": ["baseline"],
            "repetition": [0],
            "status": ["ok"],
            "metric": [metric],
            "line": [1],
        }
    )


WORKLOAD = Path(__file__).with_name("record_workload.py")
"""The recorder's measured test command (tests/record_workload.py)."""


def workload(*args: str, script: str | Path = WORKLOAD, seed: int | None = 0) -> str:
    """The command line of the test workload with its KEY=VALUE ``args``: exact values seeded by
    ``seed`` (the same verdicts on every machine), or CPU-timed loops when ``seed`` is None (only
    for a test about timing)."""
    exact = [] if seed is None else [f"seed={seed}"]
    return shlex.join([sys.executable, str(script), *args, *exact])


PROGRESS_LINE = re.compile(
    r"round [^\n]*: \d+ of \d+ runs, \d+ pairs, \d+ failed \(\d+ s\)(; done)?\n"
)
"""The line a fixed round writes on stderr every 30 s, and at its end after one of those, when
stderr is not a terminal, as under capsys (pipeline/record/progress.py): whether they appear
depends on how fast the machine ran the round, so a test of stderr leaves them out."""


def without_progress(err: str) -> str:
    """``err`` without a fixed round's progress lines."""
    return PROGRESS_LINE.sub("", err)
