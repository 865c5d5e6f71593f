"""Helpers shared by the test modules (import them: ``from helpers import workload``); the
fixtures are in conftest.py."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

WORKLOAD = Path(__file__).with_name("record_workload.py")
"""The recorder's measured test command (tests/record_workload.py)."""


def workload(*args: str, script: str | Path = WORKLOAD, seed: int | None = 0) -> str:
    """The command line of the test workload with its KEY=VALUE ``args``: exact values seeded by
    ``seed`` (the same verdicts on every machine), or CPU-timed loops when ``seed`` is None (only
    for a test about timing)."""
    exact = [] if seed is None else [f"seed={seed}"]
    return shlex.join([sys.executable, str(script), *args, *exact])


_PROGRESS = re.compile(r"round \S+: \d+ of \d+ runs, \d+ pairs, \d+ failed \(\d+ s\)(; done)?\n")


def without_progress(err: str) -> str:
    """stderr without a fixed round's progress lines (pipeline/record/progress.py: every 30 s
    and at the end when stderr is not a terminal, as under capsys)."""
    return _PROGRESS.sub("", err)
