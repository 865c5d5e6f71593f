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
from typing import Any

import polars as pl
import pytest
from hypothesis import strategies as st

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


# -- run lines for the property tests of the fast engines ---------------------------------------
# test_bulk.py, test_validate.py and test_import_line.py draw from one set of strategies, the
# union of what test_bulk.py and test_validate.py drew before (they had drifted apart): each test
# claims that a fast engine accepts nothing the precise check rejects, for any line, so a
# wider set of lines keeps each claim as it was.
ANY_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 0.0, -0.0, 10**400, True, None, "1", 1e-320]),
)
"""Any JSON value a number field may be given, valid or not."""

NAMES = st.sampled_from(["a", "b", "c", "", "s\u00e9", "k\\ud800"])
"""Names of regions, counters and environment keys; test_bulk.py writes ``k\\ud800`` as a lone
surrogate escape."""

REGIONS = st.dictionaries(NAMES, ANY_NUMBER, max_size=3)

STAMPS = st.sampled_from(
    ["2026-11-01T12:00:00Z", "2026-11-01T12:00:00", "9999-12-31T23:59:59-01:00", 5]
)
"""Timestamps valid and not, for any document."""


def some_of(fields: dict[str, Any], most: int) -> st.SearchStrategy[dict[str, Any]]:
    """Up to ``most`` of ``fields`` (name -> strategy of its value), each drawn from its own."""
    return st.dictionaries(st.sampled_from(sorted(fields)), st.none(), max_size=most).flatmap(
        lambda keys: st.fixed_dictionaries({k: fields[k] for k in keys})
    )


RUN_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "side": st.sampled_from(["baseline", "candidate", "base", 1]),
    "repetition": st.one_of(
        st.integers(min_value=-2, max_value=2**64), st.sampled_from([1.0, "2", True, 2**63])
    ),
    "status": st.sampled_from(["ok", "failed", "done"]),
    "metric": ANY_NUMBER,
    "breakdown": st.one_of(
        REGIONS,
        st.dictionaries(st.sampled_from(["s0", "s1"]), st.one_of(REGIONS, ANY_NUMBER), max_size=2),
    ),
    "counters": REGIONS,
    "order": st.sampled_from([0, 1, 2, -1, 1.0, 0.0, True, "0", None]),
    "started_at": st.one_of(
        STAMPS,
        st.sampled_from(
            ["2026-11-01T12:00:00.123456Z", "2026-11-01T12:00:00+02:00", "", 3],
        ),
    ),
    "finished_at": st.one_of(
        STAMPS, st.sampled_from(["2026-11-01T12:00:01Z", "2026-11-01 12:00", None])
    ),
    "extra": st.just(1),
}
"""A value, valid or not, for each field of a run line (and one field no run has)."""

BASE_RUN: dict[str, Any] = {
    "side": "baseline",
    "repetition": 0,
    "status": "ok",
    "metric": 1.0,
    "breakdown": {"s0": {"a": 0.5, "b": 2}},
    "counters": {"k": 3},
}
"""A valid run line, for the strategies to change."""


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
