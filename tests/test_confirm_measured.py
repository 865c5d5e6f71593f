"""How a round measured is recorded, and `campaign final --confirm` measures the same way
(issue 33): attempt.json's ``measured`` keeps the metric source, the harness and its options,
the trace, the counters and the warm-up; the confirmation reuses the pick's, refuses a given
value that differs, and a pick recorded before rounds kept it measures as the options say.
Real processes with deterministic metrics (tests/record_workload.py, a seeded harness)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CliRun
from helpers import workload as command

from pipeline.contract.schemas import document_schema
from pipeline.importers.registry import SUITE_FORMATS, SUITE_METRICS
from pipeline.record.measure import COUNTER_SETS, METRIC_SOURCES
from pipeline.record.options import (
    MEASURED_KEYS,
    RunOptions,
    build_run_options,
    measure_as,
    measured_object,
    measured_values,
)

FIXED = 20_000


def workload(work: int) -> str:
    return command(f"work={work}", f"fixed={FIXED}")


def document(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "attempt.json").read_text(encoding="utf-8"))


def start(run_cli: CliRun, folder: Path) -> None:
    code, _, err = run_cli(
        ["campaign", "start", str(folder), "--metric", "seconds", "--decision", "paired"]
        + ["--interval", "student_t"]
    )
    assert code == 0, err


def record(run_cli: CliRun, folder: Path, *options: str) -> None:
    code, _, err = run_cli(
        ["round", str(folder), "--baseline", "main", "--candidate", "fast"]
        + ["--baseline-cmd", workload(60_000), "--candidate-cmd", workload(20_000)]
        + ["-n", "6", *options]
    )
    assert code == 0, err


def confirm(run_cli: CliRun, folder: Path, *extra: str) -> tuple[int, str, str]:
    store = folder.parent.parent / "store"
    return run_cli(["campaign", "final", str(folder), "--store", str(store), "--confirm", *extra])


# -- the record ------------------------------------------------------------------------------
def test_the_schema_names_what_the_options_accept() -> None:
    """attempt.json's measured object: one property per MEASURED_KEYS, the enumerations the
    options' (declared once in the code, checked here against the schema file)."""
    schema = document_schema("attempt")["properties"]["measured"]["properties"]
    assert set(schema) == set(MEASURED_KEYS)
    assert tuple(schema["metric_source"]["enum"]) == METRIC_SOURCES
    assert tuple(schema["suite"]["enum"]) == SUITE_FORMATS
    assert tuple(schema["suite_metric"]["enum"]) == SUITE_METRICS
    assert tuple(schema["counters"]["items"]["enum"]) == COUNTER_SETS


def test_the_measured_object_round_trips() -> None:
    run = build_run_options(
        {
            "warmup": 3,
            "trace": "kineto",
            "step_pattern": "ProfilerStep.*",
            "renames": ("a=b", "c=d"),
        }
    )
    found = measured_object(run)
    assert found == {
        "warmup": 3,
        "metric_source": "wall",
        "counters": [],
        "trace": "kineto",
        "step_pattern": "ProfilerStep.*",
        "renames": ["a=b", "c=d"],
    }
    again = measure_as(RunOptions(repetitions=8), found)
    assert measured_values(again) == measured_values(run)
    assert again.repetitions == 8  # not a measurement option: the confirmation's own
    assert measured_object(RunOptions()) == {"warmup": 1, "metric_source": "wall", "counters": []}


@pytest.mark.slow
def test_a_round_records_how_it_measured(tmp_path: Path, run_cli: CliRun) -> None:
    folder = tmp_path / "attempts" / "cpu"
    start(run_cli, folder)
    record(run_cli, folder, "--metric-source", "cpu", "--warmup", "2")
    assert document(folder / "r001")["measured"] == {
        "warmup": 2,
        "metric_source": "cpu",
        "counters": [],
    }


# -- the confirmation -------------------------------------------------------------------------
@pytest.mark.slow
def test_the_confirmation_measures_as_the_pick_did(tmp_path: Path, run_cli: CliRun) -> None:
    """The pick measured CPU time with no warm-up; --confirm given neither measures so (before:
    wall time, one warm-up run per side, silently)."""
    folder = tmp_path / "attempts" / "cpu"
    start(run_cli, folder)
    record(run_cli, folder, "--metric-source", "cpu", "--warmup", "0")
    code, _, err = confirm(run_cli, folder, "-n", "6")
    assert code == 0, err
    assert document(folder / "c002")["measured"] == document(folder / "r001")["measured"]
    assert "  measured as r001 was: the command's file or its cpu time, rusage counters, " in err
    assert "warm-up 0 per side" in err
    log = (folder / "c002" / "runs.log").read_text(encoding="utf-8")
    assert "warm-up 0 per side" in log
    assert "measured by the command's file or its cpu time" in log


@pytest.mark.slow
@pytest.mark.parametrize(
    ("given", "message"),
    [
        (("--metric-source", "wall"), "--metric-source wall: r001 was measured with "),
        (("--warmup", "3"), "--warmup 3: r001 was measured with --warmup 0"),
        (("--measure", "pyperf"), "--measure pyperf: r001 was measured with --measure none"),
    ],
)
def test_a_different_measurement_is_refused_before_anything_runs(
    tmp_path: Path, run_cli: CliRun, given: tuple[str, str], message: str
) -> None:
    folder = tmp_path / "attempts" / "cpu"
    start(run_cli, folder)
    record(run_cli, folder, "--metric-source", "cpu", "--warmup", "0")
    code, _, err = confirm(run_cli, folder, "-n", "6", *given)
    assert code == 2, err
    assert err.startswith(f"error: {message}")
    assert "--metric-source cpu" in err or given[0] != "--metric-source"
    assert err.rstrip().endswith("Nothing was run")
    assert not (folder / "c002").exists()
    code, _, err = confirm(run_cli, folder, "-n", "6", "--metric-source", "cpu", "--warmup", "0")
    assert code == 0, err  # the recorded values, given again: accepted


HARNESS = """
import json, os, random, sys
random.seed(os.environ['EXPLAIN_SIDE'] + os.environ['EXPLAIN_REPETITION'])  # seeded: same draws
benchmarks = [
    {"fullname": f"test_x.py::test_{k}",
     "stats": {"median": 0.001 * (k + 1) * float(sys.argv[2]) * random.uniform(0.999, 1.001)}}
    for k in range(3)
]
json.dump({"benchmarks": benchmarks}, open(sys.argv[1], "w"))
"""


@pytest.mark.slow
def test_the_confirmation_reuses_the_picks_harness(tmp_path: Path, run_cli: CliRun) -> None:
    """The pick ran a pytest-benchmark suite read with --suite-metric geomean: --confirm alone
    measures it so (before: {results} without --measure was refused, the options had to be
    given again by hand)."""
    script = tmp_path / "harness.py"
    script.write_text(HARNESS, encoding="utf-8")
    folder = tmp_path / "attempts" / "suite"
    start(run_cli, folder)
    a, b = (f"{sys.executable} {script} {{results}} {s}" for s in (1.0, 0.5))
    code, _, err = run_cli(
        ["round", str(folder), "--baseline", "main", "--candidate", "fast", "--warmup", "0"]
        + ["--baseline-cmd", a, "--candidate-cmd", b, "-n", "6"]
        + ["--measure", "pytest-benchmark", "--suite-metric", "geomean"]
    )
    assert code == 0, err
    assert document(folder / "r001")["measured"] == {
        "warmup": 0,
        "metric_source": "wall",
        "counters": [],
        "suite": "pytest-benchmark",
        "suite_metric": "geomean",
    }
    code, _, err = confirm(run_cli, folder, "-n", "6")
    assert code == 0, err
    assert document(folder / "c002")["measured"] == document(folder / "r001")["measured"]
    assert "measured as r001 was: pytest-benchmark results (metric geomean)" in err


@pytest.mark.slow
def test_a_pick_recorded_before_measured_was_kept_measures_as_given(
    tmp_path: Path, run_cli: CliRun
) -> None:
    """An attempt.json without ``measured`` (recorded before rounds kept it) still ingests and
    confirms: the options given (or their defaults) measure it, and the output says so."""
    folder = tmp_path / "attempts" / "old"
    start(run_cli, folder)
    record(run_cli, folder, "--metric-source", "cpu", "--warmup", "0")
    attempt = document(folder / "r001")
    del attempt["measured"]
    (folder / "r001" / "attempt.json").write_text(json.dumps(attempt), encoding="utf-8")
    code, _, err = confirm(run_cli, folder, "-n", "6", "--warmup", "2")
    assert code == 0, err
    assert "r001 did not record how it measured: measured as given, " in err
    assert document(folder / "c002")["measured"]["warmup"] == 2
    assert document(folder / "c002")["measured"]["metric_source"] == "wall"


@pytest.mark.slow
def test_confirm_below_min_pairs_is_refused_before_anything_runs(
    tmp_path: Path, run_cli: CliRun
) -> None:
    """--confirm -n 4 under the default min_pairs 5 would give a confirmation without an
    interval that then counts and cannot be measured again: refused, no attempt folder made
    (already so before this change: the test holds it)."""
    folder = tmp_path / "attempts" / "few"
    start(run_cli, folder)
    record(run_cli, folder, "--warmup", "0")
    code, _, err = confirm(run_cli, folder, "-n", "4")
    assert code == 2
    assert "--repetitions 4: " in err and "min_pairs 5" in err and "nothing was run" in err
    assert sorted(p.name for p in folder.iterdir()) == ["campaign.json", "r001"]
