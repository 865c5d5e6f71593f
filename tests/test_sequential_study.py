"""calibrate --sequential: the vectorized study against a plain per-attempt reference, against
theory (error rates), its reproducibility, and the figures the docs and the code quote."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.assessment import sequential
from pipeline.cli import main
from pipeline.study.sequential import metric_log_ratios, render, sequential_study
from pipeline.study.simulate import Model

REPO = Path(__file__).resolve().parent.parent
MODEL = Model(resamples=200)


def _reference(x: np.ndarray, ratio: float, *, futility: bool) -> dict[str, float]:
    """sequential_t rounds one attempt at a time, written out plainly: closed-form interval,
    contract §6's paired rule, the scalar futility rule."""
    plan, gate = (6, 2, 40), 1.01
    c = sequential.boundary(*plan, 0.95)
    stops, passes, covers = [], [], []
    for column in x.T:
        for n in sequential.schedule(*plan):
            m, s = float(np.mean(column[:n])), float(np.std(column[:n], ddof=1))
            low, high = math.exp(m - c * s / math.sqrt(n)), math.exp(m + c * s / math.sqrt(n))
            passed = low > 1 and low >= gate
            give_up = futility and sequential.futile(
                n, m, s, gate=gate, plan=sequential.Schedule(*plan), confidence=0.95
            )
            if passed or give_up or n == plan[2]:
                stops.append(n)
                passes.append(passed)
                covers.append(low <= ratio <= high)
                break
    return {
        "pass_rate": float(np.mean(passes)),
        "pairs_mean": float(np.mean(stops)),
        "coverage": float(np.mean(covers)),
    }


@pytest.mark.parametrize("gain", [0.0, 1.0, 5.0])
def test_the_vectorized_study_equals_a_plain_loop(gain: float) -> None:
    study = sequential_study(
        attempts=60, seed=4, noises=("t3",), gains=(gain,), fixed=(10,), model=MODEL
    )
    ratio = 1 + gain / 100
    x = metric_log_ratios(MODEL, "t3", 40, 60, 4) + math.log(ratio)
    for design, futility in (("sequential_t", True), ("sequential_t, no futility", False)):
        row = study.rows.filter(pl.col("design") == design).row(0, named=True)
        expected = _reference(x, ratio, futility=futility)
        assert {k: row[k] for k in expected} == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow
def test_sequential_t_keeps_its_error_rates_where_peeking_does_not() -> None:
    """1,000 log-normal attempts at a true gain equal to the gate (the worst case)."""
    study = sequential_study(
        attempts=1000, seed=9, noises=("lognormal",), gains=(0.0, 1.0), fixed=(20,), model=MODEL
    )
    rows = {(r["gain"], r["design"]): r for r in study.rows.iter_rows(named=True)}
    se = math.sqrt(0.025 * 0.975 / 1000)
    for gain in (0.0, 1.0):
        for design in ("sequential_t", "sequential_t, no futility"):
            assert rows[gain, design]["pass_rate"] <= 0.025 + 3 * se
            assert rows[gain, design]["coverage"] >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 1000)
    assert rows[1.0, "peek student_t"]["pass_rate"] > 0.06
    assert rows[1.0, "peek percentile"]["pass_rate"] > rows[1.0, "peek student_t"]["pass_rate"]
    # futility stops A/A rounds early and never adds a PASS
    assert rows[0.0, "sequential_t"]["pairs_mean"] < 12
    assert (
        rows[1.0, "sequential_t"]["pass_rate"]
        <= rows[1.0, "sequential_t, no futility"]["pass_rate"]
    )


def test_same_seed_same_output_and_peeks_only_where_they_mean_something() -> None:
    kwargs = {"attempts": 30, "noises": ("outliers",), "gains": (0.0, 1.0, 2.0), "model": MODEL}
    first = render(sequential_study(seed=1, **kwargs), "json")  # type: ignore[arg-type]
    assert render(sequential_study(seed=1, **kwargs), "json") == first  # type: ignore[arg-type]
    study = sequential_study(seed=1, **kwargs)  # type: ignore[arg-type]
    peeks = study.rows.filter(pl.col("design").str.starts_with("peek"))
    assert sorted(set(peeks["gain"])) == [0.0, 1.0]
    assert set(peeks["design"]) == {f"peek {m}" for m in sequential.PEEKING_FALSE_PASS}


def test_repetitions_do_not_apply(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--sequential", "--repetitions", "5"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        "error: --repetitions does not apply with --sequential (see --fixed-pairs)\n"
    )


def _docs_table(page: str) -> str:
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    found = re.search(r"<!-- sequential-run -->\n```\n(.*?)```", text, re.S)
    assert found, f"docs/{page} lost the sequential study's table"
    return found.group(1)


def test_peeking_rates_in_the_code_are_the_documented_run() -> None:
    """PEEKING_FALSE_PASS (quoted by --until-decided's refusal) = the docs table's log-normal
    rows at a true gain equal to the gate."""
    table = _docs_table("calibration.md")
    lognormal = table.split("noise lognormal\n")[1].split("\n\n")[0]
    for method, rate in sequential.PEEKING_FALSE_PASS.items():
        line = next(x for x in lognormal.splitlines() if re.match(rf"\s+1x  peek {method} ", x))
        assert f"{100 * rate:.1f}%" == line.split()[3], method
    assert _docs_table("zh/calibration.md") == table


def test_where_the_study_stops_assess_gives_the_same_interval_and_verdict(
    tmp_path: Path,
) -> None:
    """Attempts cut at the study's stop, written as stored attempts with their `sequential`
    object, through the real ingest and assess: the same interval and PASS as the study's."""
    from pipeline.assessment.campaigns import assess
    from pipeline.ingestion.attempts import ingest
    from pipeline.store.tables import Store
    from pipeline.study.sequential import designs, stops
    from pipeline.study.stored import write_attempt, write_campaign

    ratio, attempts = 1.03, 16
    x = metric_log_ratios(MODEL, "lognormal", 40, attempts, 2) + math.log(ratio)
    design = designs(sequential.Schedule(6, 2, 40), (20,), 0.95)[0]
    found = stops(x, design, MODEL, ratio)
    assert set(found["passed"]) == {True, False}  # both kinds of stop are checked
    policy = {"decision": "paired", "interval": "sequential_t", "resamples": 200}
    folder = write_campaign(
        tmp_path / "attempts",
        "seq",
        created_at="2026-12-01T10:00:00Z",
        metric={"name": "seconds", "better": "lower"},
        policy=policy,
    )
    for row in found.iter_rows(named=True):
        n, i = row["look"], row["attempt"]
        runs = [
            {"side": side, "repetition": r, "status": "ok", "metric": value}
            for r in range(n)
            for side, value in (("baseline", math.exp(x[r, i])), ("candidate", 1.0))
        ]
        stopped = "pass" if row["passed"] else "futility" if row["futility"] else "max"
        plan = {
            "first_look": 6,
            "look_every": 2,
            "max_pairs": 40,
            "looks": list(range(6, n + 1, 2)),
            "stopped": stopped,
        }
        write_attempt(
            folder,
            {
                "attempt_id": f"a{i:02d}",
                "round": i,
                "candidate": "c",
                "baseline": "b",
                "status": "completed",
                "started_at": "2026-12-01T11:00:00Z",
                "sequential": plan,
            },
            runs,
        )
    store = Store(tmp_path / "store")
    ingest(tmp_path / "attempts", store)
    got = assess(store, ["seq"], write=False).assessments.sort("round")
    assert got["n_pairs"].to_list() == found["look"].to_list()
    np.testing.assert_allclose(got["paired_low"], found["paired_low"], rtol=1e-9)
    np.testing.assert_allclose(got["paired_high"], found["paired_high"], rtol=1e-9)
    assert (got["paired_verdict"] == "PASS").to_list() == found["passed"].to_list()
