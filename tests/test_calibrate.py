"""The calibration study: the expected shape, agreement with a plain reference implementation of
the rules, the one-assessment shortcut against assess's own what-if, the tables it builds against
ingest's, and byte-identical output (the small run in docs/calibration.md, regenerated)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import cli_result

from pipeline.assessment.campaigns import assess
from pipeline.cli import main
from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store
from pipeline.study.calibrate import Calibration, calibrate, count_rules, metric_log_ratios, render
from pipeline.study.simulate import (
    CampaignDraw,
    Model,
    Scenario,
    campaign_generator,
    campaign_tables,
    draw_runs,
    simulate,
    write_simulated_campaign,
)

pytestmark = pytest.mark.slow  # real processes, Ray, a browser or long simulations

FAST = Model(resamples=1000)
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def study() -> Calibration:
    return calibrate(
        attempts=200, seed=5, repetitions=(3, 10), noises=("lognormal",), model=FAST, progress=False
    )


def _row(result: Calibration, reps: int, method: str = "percentile") -> dict:
    return result.rows.filter((pl.col("repetitions") == reps) & (pl.col("method") == method)).row(
        0, named=True
    )


def test_expected_shape(study: Calibration) -> None:
    r3, r10 = _row(study, 3), _row(study, 10)
    # The median rule's false PASS is large at 3 repetitions (about 40%); the paired rule
    # gives no interval at 3 pairs and few false PASS at 10.
    assert 0.25 < r3["aa_median_false_pass"] < 0.55
    assert r3["aa_paired_false_pass"] == 0.0
    assert r3["aa_median_false_pass"] > r3["aa_paired_false_pass"] + 0.2
    assert r10["aa_paired_false_pass"] < 0.05 < r10["aa_median_false_pass"]
    # A declared mechanism that is true is confirmed; a false one almost never.
    assert r10["gain_explained"] > 0.9
    assert r10["aa_false_explained"] < 0.05
    assert r3["gain_explained"] == 0.0  # 3 pairs: every comparison is too_few_pairs
    # The nominal 95% percentile interval under-covers, much more so at 3 pairs (about 75%).
    assert 0.6 < r3["aa_coverage"] < r10["aa_coverage"] - 0.05
    assert 0.82 < r10["aa_coverage"] < 0.99
    assert [r3["aa_coverage_source"], r10["aa_coverage_source"]] == ["intervals", "assess"]
    # Student t is exact under log-normal noise; expanded percentile lies in between.
    t10, e10 = _row(study, 10, "student_t"), _row(study, 10, "expanded_percentile")
    assert r10["aa_coverage"] < e10["aa_coverage"] and t10["aa_coverage"] > 0.9
    assert _row(study, 3, "student_t")["aa_coverage"] > 0.88
    # The explained fraction: about 1 when the gain is where declared, about 0 when elsewhere.
    assert abs(r10["gain_fraction_mean"] - 1) < 0.1
    assert abs(r10["elsewhere_fraction_mean"]) < 0.1
    assert r3["gain_fraction_mean"] is None  # fewer than min_pairs: no fraction
    # No position effect: the order is flagged about as often as the 5% error rate allows.
    assert r10["aa_order_flagged"] < 0.1
    # Method-independent columns are the same in every method's row.
    for column in ("aa_median_false_pass", "gain_fraction_mean", "aa_order_flagged"):
        assert t10[column] == e10[column] == r10[column]


def test_position_effect_is_flagged_and_balanced_away() -> None:
    model = Model(resamples=300, position_effect_pct=3)
    result = calibrate(
        attempts=150, seed=2, repetitions=(20,), noises=("lognormal",), model=model, progress=False
    )
    row = _row(result, 20)
    assert row["aa_order_flagged"] > 0.7  # a power calculation gives about 85%
    assert abs(row["aa_estimate_bias_pct"]) < 0.2  # an even pair count cancels it


# -- a plain reference implementation of contract §4.2, §5 and §6 for this model ---------------


def _interval(x: np.ndarray, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """x (n, Q) -> low, high of contract §4.2, one resample at a time (no count matrix)."""
    n = x.shape[0]
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))
    stat = np.stack([x[row].mean(axis=0) for row in idx])
    low, high = np.quantile(stat, [0.025, 0.975], axis=0)
    return np.exp(low), np.exp(high)


def _reference_counts(
    scenario: Scenario, reps: int, attempts: int, seed: int, model: Model
) -> dict:
    runs = draw_runs(model, scenario, reps, attempts, campaign_generator(seed, scenario, reps))
    metric = runs.metric
    med_b, med_c = np.median(metric[:, :, 0], axis=1), np.median(metric[:, :, 1], axis=1)
    pct = (med_b - med_c) / med_b * 100
    median_pass = (pct > 0) & (pct >= model.min_improvement_pct)
    low, high = _interval(np.log(metric[:, :, 0] / metric[:, :, 1]).T, model.resamples, 0)
    # attention normalized by the reference region sampling, step by step (contract §4.3)
    normalized = (runs.seconds[..., 0] / runs.seconds[..., 2]).mean(axis=3)
    attention_low, _ = _interval(
        np.log(normalized[:, :, 0] / normalized[:, :, 1]).T, model.resamples, 0
    )
    dram_low, _ = _interval(
        np.log(runs.dram_bytes[:, :, 0] / runs.dram_bytes[:, :, 1]).T, model.resamples, 0
    )
    enough = reps >= model.min_pairs
    paired_pass = enough & (low > 1) & (low >= 1 + model.min_improvement_pct / 100)
    explained = enough & (attention_low > 1) & (dram_low > 1)
    return {
        "attempts": attempts,
        "median_pass": int(median_pass.sum()),
        "paired_pass": int(paired_pass.sum()),
        "paired_explained_pass": int((paired_pass & explained).sum()),
        "explained": int(explained.sum()),
        "covered": int(((low <= 1) & (high >= 1)).sum()) if enough else 0,
    }


@pytest.mark.parametrize(("scenario", "reps"), [("aa", 5), ("gain", 5), ("aa", 3)])
def test_assess_counts_match_the_reference(tmp_path: Path, scenario: Scenario, reps: int) -> None:
    model = Model(resamples=300)
    simulate(
        tmp_path / "in",
        scenarios=(scenario,),
        repetitions=(reps,),
        attempts=60,
        seed=2,
        model=model,
    )
    store = Store(tmp_path / "store")
    ingest(tmp_path / "in", store)
    got = count_rules(assess(store, write=False).assessments).row(0, named=True)
    expected = _reference_counts(scenario, reps, 60, 2, model)
    assert {k: got[k] for k in expected} == expected


def test_coverage_by_bootstrap_equals_assess_where_both_exist(tmp_path: Path) -> None:
    model = Model(resamples=400)
    simulate(tmp_path / "in", scenarios=("aa",), repetitions=(5,), attempts=40, seed=4, model=model)
    store = Store(tmp_path / "store")
    ingest(tmp_path / "in", store)
    assessments = assess(store, write=False).assessments.sort("attempt_id")
    x = metric_log_ratios(store.read("samples"))
    assert x.shape == (5, 40)
    from pipeline.assessment.bootstrap import paired_intervals

    intervals = paired_intervals(x, resamples=400, seed=0, confidence=0.95)
    np.testing.assert_allclose(intervals.low, assessments["paired_low"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(intervals.high, assessments["paired_high"].to_numpy(), rtol=1e-12)


def test_one_assessment_gives_the_paired_plus_explanation_verdict(tmp_path: Path) -> None:
    """calibrate reads 'paired + require_explanation' as paired PASS and explained; assess's own
    what-if under that policy must agree attempt by attempt, including PASS the gate rewrites."""
    model = Model(resamples=300, gain_factor=0.7, sigma_dram=0.2)
    simulate(
        tmp_path / "in",
        scenarios=("aa", "gain"),
        repetitions=(5,),
        attempts=30,
        seed=9,
        model=model,
    )
    store = Store(tmp_path / "store")
    ingest(tmp_path / "in", store)
    frozen = assess(store, write=False).assessments
    what_if = assess(
        store, write=False, what_if={"decision": "paired", "require_explanation": True}
    ).assessments
    joined = frozen.join(
        what_if.select("campaign_id", "attempt_id", "verdict"),
        on=["campaign_id", "attempt_id"],
        suffix="_what_if",
    )
    shortcut = (joined["paired_verdict"] == "PASS") & (joined["explanation"] == "explained")
    assert (shortcut == (joined["verdict_what_if"] == "PASS")).all()
    # both kinds of paired PASS occur, so the gate was exercised both ways
    paired_pass = joined["paired_verdict"] == "PASS"
    assert (paired_pass & shortcut).any()
    assert (paired_pass & ~shortcut).any()


# -- the tables calibrate builds are ingest's tables -------------------------------------------


def test_campaign_tables_equal_what_ingest_makes_of_the_files(tmp_path: Path) -> None:
    model = Model(resamples=200, position_effect_pct=3)
    options = {"attempts": 7, "seed": 3, "model": model, "noise": "outliers", "order": "balanced"}
    draw = CampaignDraw("elsewhere", 5, **options)  # type: ignore[arg-type]
    write_simulated_campaign(tmp_path / "in", draw)
    store = Store(tmp_path / "s")
    ingest(tmp_path / "in", store)
    built = campaign_tables(draw)
    for name, frame in built.items():
        stored = store.read(name)
        key = [
            k
            for k in stored.columns
            if k in ("attempt_id", "side", "repetition", "step", "region", "counter", "position")
        ]
        # these two name the input files, which calibrate never writes
        drop = [c for c in ("inputs_sha256", "source_dir") if c in stored.columns]
        assert stored.drop(drop).sort(key).equals(frame.drop(drop).sort(key)), name
    assert built["samples"]["order"].null_count() == 0


# -- output --------------------------------------------------------------------------------------


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = cli_result(argv, capsys)
    assert code == 0
    assert err == ""  # no progress bar when stderr is not a terminal
    return out


SMALL = [
    "calibrate",
    "--attempts",
    "12",
    "--repetitions",
    "3,5",
    "--resamples",
    "200",
    "--noise",
    "lognormal,outliers",
]


def test_same_seed_gives_byte_identical_output(capsys: pytest.CaptureFixture[str]) -> None:
    first = _cli([*SMALL, "--data-seed", "1", "--format", "json"], capsys)
    assert _cli([*SMALL, "--data-seed", "1", "--format", "json"], capsys) == first
    other = _cli([*SMALL, "--data-seed", "2", "--format", "json"], capsys)
    document, different = json.loads(first), json.loads(other)
    assert (document["seed"], document["attempts"]) == (1, 12)
    assert document["model"]["resamples"] == 200
    assert document["noises"] == ["lognormal", "outliers"]
    assert [(r["noise"], r["repetitions"], r["method"]) for r in document["rows"]] == [
        (n, r, m)
        for n in ("lognormal", "outliers")
        for r in (3, 5)
        for m in ("percentile", "expanded_percentile", "student_t")
    ]
    assert document["rows"] != different["rows"]


def test_the_small_run_in_the_docs_is_reproduced_byte_for_byte(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (REPO / "docs" / "calibration.md").read_text(encoding="utf-8")
    found = re.search(
        r"<!-- small-run -->\n```\nexplain-pipeline (calibrate[^\n]*)\n```\n\n"
        r"[^\n]*\n\n```\n(.*?)```",
        text,
        re.S,
    )
    assert found, "docs/calibration.md lost its small reproducible run"
    argv, expected = found.group(1).split(), found.group(2)
    assert _cli(argv, capsys) == expected


def test_table_and_csv_render_the_same_rates(study: Calibration) -> None:
    table = render(study, "table")
    assert table == render(study, "table")
    assert table.startswith("calibrate: seed 5, 200 attempts per scenario, noise and repetition")
    r10 = _row(study, 10, "student_t")
    line = next(x for x in table.splitlines() if x.startswith("  10  student_t "))
    assert line.split()[2] == f"{100 * r10['aa_coverage']:.1f}%"
    r3 = _row(study, 3)
    assert next(x for x in table.splitlines() if x.startswith("   3  percentile ")).split()[2] == (
        f"{100 * r3['aa_coverage']:.1f}%*"
    )  # coverage computed for the record, footnoted
    csv = pl.read_csv(render(study, "csv").encode())
    assert csv["repetitions"].to_list() == [3, 3, 3, 10, 10, 10]
    assert csv["seed"].to_list() == [5] * 6
    assert csv["aa_median_false_pass"][0] == pytest.approx(r3["aa_median_false_pass"], abs=5e-5)


def test_progress_bar_goes_to_stderr_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    result = calibrate(
        attempts=2,
        repetitions=(5,),
        noises=("lognormal",),
        model=Model(resamples=50),
        progress=True,
    )
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "calibrate" in captured.err and "6/6" in captured.err
    assert result.rows.height == 3


def test_bad_noise_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["calibrate", "--noise", "lognormal,gaussian"])
    assert exit_info.value.code == 2
    assert "expected distinct values among lognormal, t3, outliers" in capsys.readouterr().err
