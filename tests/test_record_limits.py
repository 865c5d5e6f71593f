"""A measured command cannot stop the recorder, and a tampered campaign is refused before any run
(issue 19, items 2 and 3). Real processes: the installed command records rounds of small Python
commands that leave hostile things where the recorder reads."""

from __future__ import annotations

import json
import shlex
import sys
from functools import partial
from pathlib import Path

import pytest
from helpers import cli_process

from pipeline.record import DEFAULT_TIMEOUT
from pipeline.record.runner import MAX_MEASUREMENT_BYTES

pytestmark = pytest.mark.slow  # real processes, Ray, a browser or long simulations

HANG_GUARD = 120  # seconds: only so that a regression fails instead of hanging the suite
OK = shlex.join([sys.executable, "-c", "pass"])  # metric: its wall-clock time


def python(code: str) -> str:
    return shlex.join([sys.executable, "-c", f"import os; {code}"])


explain = partial(cli_process, timeout=HANG_GUARD)


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    folder = tmp_path / "loop"
    done = explain("campaign", "start", str(folder), "--metric", "seconds")
    assert done.returncode == 0, done.stderr
    return folder


def one_round(campaign: Path, candidate: str, *extra: str) -> tuple[int, str]:
    """One repetition, no warm-up: the exit code and the candidate's line of runs.log."""
    done = explain(
        "round",
        str(campaign),
        "--baseline",
        "a",
        "--candidate",
        "b",
        "--baseline-cmd",
        OK,
        "--candidate-cmd",
        candidate,
        "-n",
        "5",
        "--warmup",
        "0",
        *extra,
    )
    log = (campaign / "r001" / "runs.log").read_text()
    line = next(x for x in log.splitlines() if "repetition 0   candidate" in x)
    return done.returncode, line


@pytest.mark.parametrize(
    ("leave", "reason"),
    [
        # before the fix: open() of the FIFO blocks until a writer comes, which never happens
        ("os.mkfifo(os.environ['EXPLAIN_MEASUREMENT'])", "is not a regular file (a FIFO)"),
        # before the fix: read until MemoryError (exit 4)
        (
            "os.symlink('/dev/zero', os.environ['EXPLAIN_MEASUREMENT'])",
            "is not a regular file (a symbolic link)",
        ),
        # before the fix: read and parsed whole, however large (100 MB: 108 s and 1.15 GB)
        (
            f"open(os.environ['EXPLAIN_MEASUREMENT'], 'w').truncate({MAX_MEASUREMENT_BYTES + 1})",
            "is 4.0 MiB, more than the limit of 4 MiB for a measurement file",
        ),
    ],
)
def test_a_measurement_file_that_is_not_a_small_regular_file_fails_the_run(
    campaign: Path, leave: str, reason: str
) -> None:
    code, line = one_round(campaign, python(leave), "--timeout", "5")
    assert code == 6  # the only candidate run failed: no pair
    assert line.split("  failed: ", 1)[1].startswith(f"$EXPLAIN_MEASUREMENT {reason} (")


def test_a_file_at_the_cap_is_read(campaign: Path) -> None:
    spaces = MAX_MEASUREMENT_BYTES - len('{"metric": 1.5}')  # the file is exactly the cap
    body = f"'{{' + ' ' * {spaces} + '\"metric\": 1.5}}'"
    write = f"open(os.environ['EXPLAIN_MEASUREMENT'], 'w').write({body})"
    code, line = one_round(campaign, python(write))
    assert (code, "ok metric 1.5 (" in line) == (0, True)


@pytest.mark.parametrize(
    ("leave", "reason"),
    [
        (
            "os.mkfifo(os.environ['EXPLAIN_TRACE_DIR'] + '/t.json')",
            "trace t.json is not a regular file (a FIFO)",
        ),
        (
            "os.symlink('/dev/zero', os.environ['EXPLAIN_TRACE_DIR'] + '/t.json')",
            "trace t.json is not a regular file (a symbolic link)",
        ),
    ],
)
def test_a_trace_that_is_not_a_regular_file_fails_the_run(
    campaign: Path, leave: str, reason: str
) -> None:
    code, line = one_round(campaign, python(leave), "--trace", "kineto", "--timeout", "5")
    assert code == 6
    assert line.split("  failed: ", 1)[1].startswith(f"{reason} (")


def test_a_hanging_command_is_killed_at_its_timeout(campaign: Path) -> None:
    code, line = one_round(campaign, python("import time; time.sleep(600)"), "--timeout", "1")
    assert code == 6
    assert "failed: timed out after 1 s (" in line


def test_the_default_timeout_is_shown_and_0_means_none(campaign: Path) -> None:
    for name in ("round", "ab"):
        shown = explain(name, "--help").stdout
        assert f"0: no limit. [default: {DEFAULT_TIMEOUT}; x>=0]" in " ".join(shown.split())
    one_round(campaign, OK)
    assert f"timeout {DEFAULT_TIMEOUT:g} s," in (campaign / "r001" / "runs.log").read_text()
    explain(
        "round",
        str(campaign),
        "--baseline",
        "a",
        "--candidate",
        "b",
        "--baseline-cmd",
        OK,
        "--candidate-cmd",
        OK,
        "-n",
        "5",
        "--warmup",
        "0",
        "--timeout",
        "0",
    )
    assert "timeout none," in (campaign / "r002" / "runs.log").read_text()


def test_a_tampered_policy_is_refused_before_any_run(campaign: Path, tmp_path: Path) -> None:
    # before the fix: recorded against, caught only at `campaign final` (exit 3)
    path = campaign / "campaign.json"
    document = json.loads(path.read_text())
    document["policy"]["min_improvement_pct"] = 0.0  # the digest is left as it was
    path.write_text(json.dumps(document))
    marker = tmp_path / "ran"
    touch = python(f"open({str(marker)!r}, 'w')")
    done = explain(
        "round",
        str(campaign),
        "--baseline",
        "a",
        "--candidate",
        "b",
        "--baseline-cmd",
        touch,
        "--candidate-cmd",
        touch,
        "-n",
        "5",
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith(f'error: {path}: field "policy_sha256": ')
    assert "the policy was changed after the campaign started; nothing was run" in done.stderr
    assert not marker.exists()
    assert sorted(p.name for p in campaign.iterdir()) == ["campaign.json"]


def test_a_round_after_the_largest_round_number_is_refused_before_any_run(
    campaign: Path, tmp_path: Path
) -> None:
    """An attempt numbered 2**63 - 1 leaves no next number: before the fix the round ran every
    repetition and wrote r9223372036854775808, which ingest rejects (the runs were lost)."""
    done = explain(
        "round", str(campaign), "--baseline", "a", "--candidate", "b",
        "--baseline-cmd", OK, "--candidate-cmd", OK, "-n", "5", "--warmup", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    attempt = campaign / "r001" / "attempt.json"
    document = json.loads(attempt.read_text())
    document["round"] = 2**63 - 1
    attempt.write_text(json.dumps(document))
    mark = tmp_path / "MARK"
    done = explain(
        "round", str(campaign), "--baseline", "a", "--candidate", "b",
        "--baseline-cmd", OK, "--candidate-cmd", python(f"open({str(mark)!r}, 'w')"),
        "-n", "5", "--warmup", "0",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f'{attempt}: field "round": 9223372036854775807 leaves no next' in done.stderr
    assert "nothing was run" in done.stderr
    assert not mark.exists()
    assert sorted(p.name for p in campaign.iterdir()) == ["campaign.json", "r001"]
