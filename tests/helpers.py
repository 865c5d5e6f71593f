"""Helpers shared by the test modules (import them: ``from helpers import workload``); the
fixtures are in conftest.py."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

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
