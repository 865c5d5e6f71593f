"""calibrate --suite: the vectorized study against a plain per-suite, per-member reference, the
model against its own definition, the rates against theory, reproducibility, and the command."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_result as _cli
from scipy import stats

from pipeline.study.simulate import NOISES, Model, Noise
from pipeline.study.suites import (
    SuiteDesign,
    family_log_ratios,
    log_times,
    render,
    suite_study,
)

REPO = Path(__file__).resolve().parent.parent
GATE, MARGIN = 1.01, 1.01


def _verdict(low: float, high: float, gate: float = GATE, margin: float = MARGIN) -> str:
    """contract's per-benchmark rule, written out: directional claims first."""
    if high < 1 and high <= 1 / margin:
        return "regressed"
    if low > 1 and low >= gate:
        return "improved"
    if low >= 1 / margin and high <= margin:
        return "unchanged"
    return "inconclusive"


def _interval(column: np.ndarray, c: float) -> tuple[float, float]:
    m, s = float(np.mean(column)), float(np.std(column, ddof=1))
    half = c * s / math.sqrt(len(column))
    return math.exp(m - half), math.exp(m + half)


def _max_t(family: np.ndarray, idx: np.ndarray, confidence: float) -> float:
    """One suite's (n, members) bootstrap max-|t|, one resample at a time."""
    n = family.shape[0]
    mean = family.mean(axis=0)
    largest = []
    for row in idx:
        sample = family[row]
        spread = sample.std(axis=0, ddof=1)
        diff = np.abs(sample.mean(axis=0) - mean)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(diff == 0, 0.0, diff * math.sqrt(n) / spread)
        largest.append(np.max(t))
    return float(np.quantile(largest, confidence))


def _reference(times: np.ndarray, n: int, slowdown: float, resamples: int) -> dict[str, dict]:
    """Per method: share of suites flagging any member (A/A) or, with a slowdown, catching
    benchmark 0 and flagging another benchmark; one suite and one member at a time."""
    suites, _, _, m = times.shape
    idx = np.random.Generator(np.random.PCG64(0)).integers(0, n, size=(resamples, n))
    c_bonferroni = float(stats.t.ppf(1 - 0.05 / (2 * (m + 1)), n - 1))
    c_95 = float(stats.t.ppf(0.975, n - 1))
    found: dict[str, list[tuple[bool, bool, bool]]] = {}
    for s in range(suites):
        base, cand = times[s, :n, 0, :], times[s, :n, 1, :].copy()
        cand[:, 0] += math.log(1 + slowdown / 100)
        metric = np.log(np.exp(base).sum(axis=1) / np.exp(cand).sum(axis=1))
        family = np.column_stack([metric, base - cand])
        c_max = _max_t(family, idx, 0.95)
        for method, c in (("bonferroni_t", c_bonferroni), ("max_t", c_max), ("per", c_95)):
            verdicts = []
            for k in range(m + 1):
                low, high = _interval(family[:, k], c)
                gate = (1.0, 1.0) if method == "per" else (GATE, MARGIN)
                verdicts.append(_verdict(low, high, *gate))
            flagged = [v in ("improved", "regressed") for v in verdicts]
            found.setdefault(method, []).append(
                (any(flagged), verdicts[1] == "regressed", any(flagged[2:]))
            )
    return {
        method: {
            "any": np.mean([a for a, _, _ in rows]),
            "caught": np.mean([b for _, b, _ in rows]),
            "others": np.mean([c for _, _, c in rows]),
        }
        for method, rows in found.items()
    }


@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.slow
def test_the_vectorized_study_equals_a_plain_loop(noise: Noise) -> None:
    """Spread 0.3: wide enough that every method flags something at 8 pairs."""
    model = Model()
    design = SuiteDesign(
        suites=40,
        sizes=(4,),
        correlations=(0.6,),
        pairs=(8,),
        slowdowns=(20.0,),
        noises=(noise,),
        spread=0.3,
        max_t_resamples=150,
    )
    study = suite_study(design, seed=3, model=model)
    times = log_times(model, noise, suites=40, size=4, correlation=0.6, pairs=8, spread=0.3, seed=3)
    aa = _reference(times, 8, 0.0, 150)
    slower = _reference(times, 8, 20.0, 150)
    rows = {r["method"]: r for r in study.rows.iter_rows(named=True)}
    names = {"bonferroni_t": "bonferroni_t", "max_t": "max_t", "per_benchmark": "per"}
    seen = 0.0
    for method, ref in names.items():
        assert rows[method]["aa_flagged"] == pytest.approx(aa[ref]["any"], abs=1e-12)
        assert rows[method]["caught_20pct"] == pytest.approx(slower[ref]["caught"], abs=1e-12)
        assert rows[method]["others_20pct"] == pytest.approx(slower[ref]["others"], abs=1e-12)
        seen += rows[method]["aa_flagged"] + rows[method]["caught_20pct"]
    assert seen > 0  # the comparison is not of zeros


def test_the_model_has_the_spread_and_correlation_it_is_given() -> None:
    times = log_times(
        Model(), "lognormal", suites=4000, size=3, correlation=0.5, pairs=5, spread=0.042, seed=1
    )
    x = family_log_ratios(times, 0.0).reshape(5, 4000, 4)[:, :, 1:].reshape(-1, 3)
    assert np.std(x, axis=0) == pytest.approx([0.042] * 3, rel=0.03)
    correlation = np.asarray(np.corrcoef(x.T))
    assert correlation[0, 1] == pytest.approx(0.5, abs=0.03)
    assert correlation[1, 2] == pytest.approx(0.5, abs=0.03)
    # the slowdown is the candidate's benchmark 0 alone, ln(1.1) in every pair
    slowed = family_log_ratios(times, 10.0) - family_log_ratios(times, 0.0)
    per_member = slowed.reshape(5, 4000, 4)
    assert np.allclose(per_member[:, :, 1], -math.log(1.1))
    assert np.allclose(per_member[:, :, 2:], 0.0)


def test_bonferroni_t_holds_the_family_wise_rate_and_has_the_theoretical_power() -> None:
    """2,000 log-normal suites: the interval of every member excludes 1 at most alpha of the
    time (3 standard errors), at any correlation; the slowed benchmark is regressed with the
    probability a noncentral t gives (its log-ratios are normal with the spread, whatever rho)."""
    suites = 2000
    design = SuiteDesign(
        suites=suites,
        sizes=(10,),
        correlations=(0.0, 0.9),
        pairs=(10,),
        slowdowns=(5.0,),
        noises=("lognormal",),
        max_t_resamples=100,
    )
    study = suite_study(design, seed=11)
    c = stats.t.ppf(1 - 0.05 / 22, 9)
    power = stats.nct.sf(c, 9, (math.log(1.05) - math.log(1.01)) * math.sqrt(10) / 0.042)
    se = math.sqrt(power * (1 - power) / suites)
    for row in study.rows.iter_rows(named=True):
        if row["method"] == "bonferroni_t":
            assert row["critical"] == pytest.approx(c)
            assert row["aa_excludes_one"] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / suites)
            assert row["aa_flagged"] <= row["aa_excludes_one"]
            assert row["caught_5pct"] == pytest.approx(power, abs=4 * se)
        if row["method"] == "per_benchmark" and row["correlation"] == 0.0:
            assert row["aa_flagged"] > 0.3  # 11 members at 5% each: most suites flag one


def test_same_seed_same_numbers_and_the_first_suites_do_not_depend_on_the_count() -> None:
    def study(seed: int) -> str:
        return render(
            suite_study(
                SuiteDesign(
                    suites=30,
                    sizes=(3,),
                    correlations=(0.5,),
                    pairs=(6,),
                    noises=("t3",),
                    max_t_resamples=50,
                ),
                seed=seed,
            ),
            "json",
        )

    assert study(2) == study(2)
    assert study(2) != study(5)
    few = log_times(Model(), "t3", suites=7, size=3, correlation=0.5, pairs=6, spread=0.1, seed=2)
    many = log_times(Model(), "t3", suites=30, size=3, correlation=0.5, pairs=6, spread=0.1, seed=2)
    assert np.array_equal(few, many[:7])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--suite", "--repetitions", "5"], "--repetitions does not apply with --suite"),
        (["--suite", "--sequential"], "--sequential and --suite are different studies: choose one"),
        (["--suite", "--correlations", "0,1.5"], "--correlations: each between 0 and 1"),
        (["--suite", "--benchmarks", "0"], "--benchmarks: each >= 1"),
        (["--suite", "--slowdown-pct", "0"], "--slowdown-pct: each > 0"),
        (["--suite", "--spread", "0"], "--spread: must be > 0"),
    ],
)
def test_bad_suite_options_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(["calibrate", *argv], capsys)
    assert code == 2 and out == ""
    assert message in err


def test_csv_and_json_carry_the_table_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    small = ["calibrate", "--suite", "--attempts", "20", "--benchmarks", "3", "--noise", "t3"]
    small += ["--correlations", "0", "--fixed-pairs", "6", "--max-t-resamples", "40"]
    code, table, _ = _cli(small, capsys)
    assert code == 0
    _, text, _ = _cli([*small, "--format", "json"], capsys)
    rows = json.loads(text)["rows"]
    assert [r["method"] for r in rows] == ["bonferroni_t", "max_t", "per_benchmark"]
    line = next(x for x in table.splitlines() if " per_benchmark " in x)
    assert line.split()[5] == f"{100 * rows[2]['aa_flagged']:.1f}%"
    _, csv, _ = _cli([*small, "--format", "csv"], capsys)
    assert csv.splitlines()[0].startswith("noise,benchmarks,correlation,pairs,method,suites")


def test_the_small_run_in_the_docs_is_reproduced_byte_for_byte(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (REPO / "docs" / "calibration.md").read_text(encoding="utf-8")
    found = re.search(
        r"<!-- small-suite-run -->\n```\nexplain-pipeline (calibrate[^\n]*)\n```\n\n"
        r"[^\n]*\n\n```\n(.*?)```",
        text,
        re.S,
    )
    assert found, "docs/calibration.md lost its small reproducible suite run"
    code, out, _ = _cli(found.group(1).split(), capsys)
    assert code == 0 and out == found.group(2)
