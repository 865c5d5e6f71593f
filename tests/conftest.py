"""Shared test fixtures: the command line run in-process (``run_cli``, over helpers.cli_result)
and small stored-attempt campaigns written with pipeline/study/stored.py."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import CliRun as CliRun
from helpers import cli_result as cli_result

from pipeline.assessment import boundary
from pipeline.study.stored import write_attempt, write_campaign

# The commands the tests start are a user's commands, and under pytest-xdist (make test) they
# would inherit its worker's variables: a real pytest-benchmark run started by a test then takes
# itself for an xdist worker and disables benchmarking ("Can't have both --benchmark-only and
# --benchmark-disable"). xdist itself reads its worker's id from its config, not from these.
for _name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_name, None)


LONGEST_FIRST = (
    "test_docs_commands.py",
    "test_record_torch.py",
    "test_ci_action.py",
    "test_suite_sets.py",
    "test_gate.py",
    "test_report_browser.py",
    "test_record_measure.py",
    "test_record.py",
    "test_suite_names.py",
    "test_record_limits.py",
    "test_confirm.py",
    "test_ray_engine.py",
    "test_store_files.py",
    "test_round_progress.py",
)
"""The modules that take longest (seconds of a make test run, 3 Dec 2026: 120 down to 12),
longest first. make test hands pytest-xdist whole modules in collection order
(``--no-loadscope-reorder``; by default xdist starts with the modules of most tests, and a
module of 3 long tests, torch's, was then among the last to start, its minute alone at the end).
Starting the long ones first leaves the many short modules to fill both workers at the end.
Order only: no test depends on another module having run (tests/README.md)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept


@pytest.fixture(scope="session", autouse=True)
def children_skip_hypothesis_plugin() -> None:
    """The pytest runs a test starts (a real pytest-benchmark suite as a side's command) load
    every pytest plugin of this environment, and hypothesis's, which only this project's own
    tests need, costs 0.8 s of CPU of the 1.2 s such a run takes (python -X importtime). A
    project measured with pytest-benchmark has no reason to have it; the tests' inner runs leave
    it out (PYTEST_ADDOPTS, which pytest reads at start). Set here, in each test process, not at
    import: xdist's workers read PYTEST_ADDOPTS too, and this suite's tests do need it."""
    os.environ["PYTEST_ADDOPTS"] = " ".join(
        [os.environ.get("PYTEST_ADDOPTS", ""), "-p no:hypothesispytest"]
    ).strip()


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> CliRun:
    """``cli_result`` bound to this test's captured output."""
    return lambda args: cli_result(args, capsys)


MECHANISM: dict[str, Any] = {
    "hypothesis": "fewer launches in attention",
    "expectations": [
        {"target": "region", "name": "attention", "expect": "decrease"},
        {"target": "counter", "name": "kernel_launches", "expect": "decrease"},
        {"target": "region", "name": "sampling", "expect": "unchanged"},
    ],
}


def example_runs(
    repetitions: int = 6, *, candidate_factor: float = 0.95, steps: Sequence[str] = ("s0", "s1")
) -> list[dict[str, Any]]:
    """Baseline then candidate per repetition; a deterministic wobble per repetition; the
    candidate's attention and launches scaled by ``candidate_factor``."""
    runs = []
    for rep in range(repetitions):
        wobble = 1.0 + 0.01 * ((rep * 7) % 5 - 2)
        for side, factor in (("baseline", 1.0), ("candidate", candidate_factor)):
            regions = {
                "attention": 0.001 * factor * wobble,
                "mlp": 0.005 * wobble,
                "sampling": 0.0025 * wobble,
            }
            runs.append(
                {
                    "side": side,
                    "repetition": rep,
                    "status": "ok",
                    "metric": sum(regions.values()) * len(steps),
                    "breakdown": {step: dict(regions) for step in steps},
                    "counters": {
                        "kernel_launches": round(1000 * factor) * len(steps),
                        "dram_bytes": 1.0e9 * len(steps),
                    },
                }
            )
    return runs


def example_attempt(attempt_id: str, round_: int, *, mechanism: bool = True) -> dict[str, Any]:
    """attempt.json fields (without schema and digest, which write_attempt adds)."""
    attempt = {
        "attempt_id": attempt_id,
        "round": round_,
        "candidate": f"cand-{round_}",
        "baseline": "main@0000000",
        "status": "completed",
        "started_at": f"2026-11-01T{10 + round_:02d}:00:00Z",
    }
    if mechanism:
        attempt["declared_at"] = f"2026-11-01T{9 + round_:02d}:58:00Z"
    return attempt


def write_example_campaign(
    root: Path,
    campaign_id: str = "c1",
    *,
    attempts: Sequence[str] = ("r001", "r002"),
    repetitions: int = 6,
    kind: str = "project",
    better: str = "lower",
    policy: dict[str, Any] | None = None,
    mechanism: dict[str, Any] | None = MECHANISM,
) -> Path:
    """A valid campaign under ``root/campaign_id`` with one folder per attempt; its folder."""
    folder = write_campaign(
        root,
        campaign_id,
        created_at="2026-11-01T09:00:00Z",
        metric={"name": "e2e_seconds", "better": better},
        policy=policy or {},
        kind=kind,
    )
    for number, attempt_id in enumerate(attempts, start=1):
        write_attempt(
            folder,
            example_attempt(attempt_id, number, mechanism=mechanism is not None),
            example_runs(repetitions),
            mechanism=mechanism,
        )
    return folder


@pytest.fixture
def attempts_dir(tmp_path: Path) -> Path:
    """``tmp_path/attempts`` holding one valid campaign ``c1`` with attempts r001 and r002."""
    root = tmp_path / "attempts"
    write_example_campaign(root)
    return root


TEST_CONSTANTS = Path(__file__).parent / "fixtures" / "sequential_constants.json"
"""The sequential_t constants the tests' family plans use that the package does not ship (looks
from 12 every 4, confidences 1 - alpha/m), computed with the recipe once and pinned here: each
costs a second or more of CPU (a million sequences), and a session started from an empty
cache computed all of them again. tests/test_sequential.py recomputes one; a plan a test needs
that is not here is computed and cached as before."""


@pytest.fixture(scope="session", autouse=True)
def private_constant_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The sequential_t constants computed by the tests (and the commands they start) are kept
    in a folder of this test run, not in the user's cache (pipeline/assessment/boundary.py); it
    starts with TEST_CONSTANTS, when they are of the recipe in force."""
    folder = tmp_path_factory.mktemp("constant-cache")
    os.environ["EXPLAIN_CACHE_DIR"] = str(folder)
    pinned = json.loads(TEST_CONSTANTS.read_text(encoding="utf-8"))
    path = boundary.cache_file()
    if pinned["recipe"] == boundary.RECIPE and path is not None:
        path.write_text(json.dumps(pinned["constants"], sort_keys=True), encoding="utf-8")
