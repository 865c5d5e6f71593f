"""The recorder's test workload (tests/record_workload.py): its exact clock is the same on every
machine and in every run, so the tests that record rounds with it get known effects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import record_workload


def measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, side: str, rep: int, *args: str
) -> dict[str, Any]:
    path = tmp_path / f"{side}-{rep}.json"
    monkeypatch.setenv("EXPLAIN_SIDE", side)
    monkeypatch.setenv("EXPLAIN_REPETITION", str(rep))
    monkeypatch.setenv("EXPLAIN_MEASUREMENT", str(path))
    assert record_workload.main(list(args)) == 0
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_exact_clock_prices_the_work_with_a_seeded_wobble(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    args = ("work=30000", "fixed=20000", "seed=4")
    first = measured(monkeypatch, tmp_path, "baseline", 3, *args)
    assert measured(monkeypatch, tmp_path, "baseline", 3, *args) == first  # no timing
    regions = first["breakdown"]["step-0"]
    assert regions["work"] == pytest.approx(30000e-8, rel=0.02)
    assert regions["fixed"] == pytest.approx(20000e-8, rel=0.02)
    assert first["metric"] == sum(regions.values())
    others = [
        measured(monkeypatch, tmp_path, side, rep, *args)["breakdown"]["step-0"]["work"]
        for side, rep in (("candidate", 3), ("baseline", 4))
    ]
    others.append(measured(monkeypatch, tmp_path, "baseline", 3, *args[:2], "seed=5")["metric"])
    assert len({regions["work"], *others}) == 4  # side, repetition and seed each draw anew
    flat = measured(monkeypatch, tmp_path, "candidate", 0, *args, "wobble=0")
    assert flat["breakdown"]["step-0"] == pytest.approx({"fixed": 2e-4, "work": 3e-4}, rel=1e-12)


def test_without_a_seed_the_regions_are_timed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[int] = []

    def timed(n: int) -> float:
        calls.append(n)
        return 0.5

    monkeypatch.setattr(record_workload, "timed", timed)
    document = measured(monkeypatch, tmp_path, "baseline", 0, "work=7", "fixed=3")
    assert sorted(calls) == [3, 7] and document["metric"] == 1.0
