"""explain-pipeline plan: the pairs priced against a plain formula, against simulation, and on a
real recorded campaign (docs/record.md, "Pricing a comparison: plan")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_result as run_main
from helpers import round_args, start_campaign, workload
from scipy import stats

from pipeline.assessment import stopping
from pipeline.assessment.power import fixed_pairs, sequential_pairs
from pipeline.assessment.sequential import Schedule
from pipeline.study.plan import plan

GATE = math.log(1.01)


def student_t_pass_rate(n: int, shift: float, sd: float, sims: int, seed: int) -> float:
    """Plain reference: the share of simulated fixed rounds whose Student-t interval's low end
    clears the gate, for normal log-ratios whose mean exceeds the gate by ``shift``."""
    x = np.random.default_rng(seed).normal(GATE + shift, sd, size=(sims, n))
    low = x.mean(axis=1) - stats.t.ppf(0.975, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
    return float((low >= GATE).mean())


@pytest.mark.parametrize(("sd", "gain_pct"), [(0.05, 5.0), (0.2, 10.0), (0.042, 2.0)])
@pytest.mark.parametrize("power", [0.8, 0.9])
def test_fixed_pairs_against_the_normal_formula(sd: float, gain_pct: float, power: float) -> None:
    shift = math.log(1 + gain_pct / 100) - GATE
    reference = ((stats.norm.ppf(0.975) + stats.norm.ppf(power)) * sd / shift) ** 2
    got = fixed_pairs(shift, sd, power, "student_t", 0.95, 5)
    assert got is not None
    # the t distribution's heavier tails cost a few pairs more than the normal approximation
    assert math.ceil(reference) <= got <= math.ceil(reference) + 4


def test_the_power_claim_holds_in_simulation() -> None:
    sd, shift = 0.1, math.log(1.05) - GATE
    n = fixed_pairs(shift, sd, 0.8, "student_t", 0.95, 5)
    assert n is not None and n > 20
    sims = 20_000  # standard error of a rate near 0.8: 0.003
    assert student_t_pass_rate(n, shift, sd, sims, 1) >= 0.79
    assert student_t_pass_rate(int(0.8 * n), shift, sd, sims, 2) <= 0.76


def test_a_gain_that_does_not_clear_the_gate_is_never_priced() -> None:
    assert fixed_pairs(math.log(1.005) - GATE, 0.05, 0.8, "student_t", 0.95, 5) is None


def test_a_spread_of_rounding_noise_is_priced_at_min_pairs() -> None:
    # identical values give a spread of ~1e-17, where scipy's noncentral t returns NaN: a gain
    # above the gate is then certain at the fewest pairs, never "never"
    for sd in (1e-17, 1e-12, 0.0):
        assert fixed_pairs(math.log(1.02) - GATE, sd, 0.9, "student_t", 0.95, 5) == 5
        assert fixed_pairs(math.log(1.02) - GATE, sd, 0.9, "percentile", 0.95, 5) == 5


def test_sequential_columns_stop_early_on_clear_cases_and_rarely_pass_aa() -> None:
    rng = np.random.default_rng(0)
    power, mean, p90 = sequential_pairs(
        math.log(1.5), 1.01, 0.05, plan=Schedule(6, 2, 40), confidence=0.95, rng=rng
    )
    assert (power, mean, p90) == (1.0, 6.0, 6.0)
    power, mean, _ = sequential_pairs(
        0.0, 1.01, 0.05, plan=Schedule(6, 2, 40), confidence=0.95, rng=rng
    )
    assert power <= 0.01  # A/A: a false PASS at most, within 2.5% by design
    assert mean < 0.3 * 40  # futility stops most A/A rounds early


def test_plan_on_a_recorded_campaign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "loop"
    options = ("--decision", "paired", "--interval", "student_t")
    start_campaign(folder, capsys, *options, metric="cpu_seconds", quiet=False)
    same = workload("work=100000")
    code, _, _ = run_main(round_args(folder, same, same, "-n", "6"), capsys)
    assert code == 0
    code, out, err = run_main(["plan", str(folder), "--effect-pct", "5,50"], capsys)
    assert (code, err) == (0, "")
    lines = [json.loads(x) for x in (folder / "r001" / "measurements.jsonl").read_text().split()]
    metric = {(x["side"], x["repetition"]): x["metric"] for x in lines}
    x = [math.log(metric["baseline", r] / metric["candidate", r]) for r in range(6)]
    sd = float(np.std(x, ddof=1))
    rows = [r.split() for r in out.splitlines() if r.startswith("metric ")]
    assert [r[2] for r in rows] == ["5%", "50%"]
    assert all(float(r[1]) == pytest.approx(sd, abs=1e-4) for r in rows)
    expected = fixed_pairs(math.log(1.05) - GATE, sd, 0.8, "student_t", 0.95, 5)
    assert rows[0][3] == str(expected)
    assert "interval student_t, gate 1 % (metric)" in out
    # this campaign's rounds refuse --until-decided: the seq columns say they price another's
    # (before the fix: "sequential: round --until-decided, ..." as if this one could)
    assert "\nsequential: what a round --until-decided would cost, looks every 2 pairs" in out
    assert "not in this one:\n  --until-decided: this campaign freezes interval student_t" in out
    code, _, err = run_main(["plan", str(folder), "--effect-pct", "5,x"], capsys)
    assert code == 2 and "--effect-pct '5,x'" in err
    empty = tmp_path / "empty"
    run_main(["campaign", "start", str(empty), "--metric", "s"], capsys)
    code, _, err = run_main(["plan", str(empty)], capsys)
    assert code == 2 and "record a round first" in err


@pytest.mark.slow
def test_ab_prices_a_verdict_that_is_not_pass(capsys: pytest.CaptureFixture[str]) -> None:
    same = workload("work=100000")
    code, out, _ = run_main(["ab", same, same, "-n", "6", "--warmup", "0"], capsys)
    assert code == 5
    assert "to detect a true gain of 2% / 5% / 10% at 80% power: ~" in out


def test_the_sequential_columns_name_the_campaigns_that_refuse_early_stopping() -> None:
    from pipeline.study.plan import _refusal

    assert _refusal({"decision": "paired", "interval": "sequential_t"}) is None
    for policy in ({"decision": "paired"}, {"decision": "median", "interval": "sequential_t"}):
        refusal = _refusal(policy)
        assert refusal is not None and refusal.startswith("--until-decided: this campaign")


# -- decide regions: every benchmark priced --------------------------------------------------------
SUITE_SPREADS = {"steady": 0.02, "noisy": 0.3, "middle": 0.1}


def _suite_campaign(root: Path) -> Path:
    """A decide-regions campaign of two attempts of 12 pairs whose benchmarks' log-ratios have
    the spreads above (the baseline's times jittered, the candidate's at 1)."""
    from pipeline.study.stored import write_attempt, write_campaign

    policy = {"decision": "paired", "interval": "student_t", "decide": "regions"}
    folder = write_campaign(
        root,
        "suite",
        created_at="2026-01-01T00:00:00Z",
        metric={"name": "seconds", "better": "lower"},
        policy=policy,
        kind="benchmark",
    )
    rng = np.random.default_rng(7)
    for index in range(2):
        runs = []
        for rep in range(12):
            times = {n: float(np.exp(rng.normal(0, sd))) for n, sd in SUITE_SPREADS.items()}
            for side, values in (("baseline", times), ("candidate", dict.fromkeys(times, 1.0))):
                breakdown = {"all": values}
                runs.append(
                    {
                        "side": side,
                        "repetition": rep,
                        "status": "ok",
                        "metric": sum(values.values()),
                        "breakdown": breakdown,
                    }
                )
        attempt = {
            "attempt_id": f"r{index:03d}",
            "round": index,
            "candidate": "c",
            "baseline": "b",
            "status": "completed",
            "started_at": f"2026-01-01T00:0{index + 1}:00Z",
        }
        write_attempt(folder, attempt, runs)
    return folder


def test_plan_prices_every_benchmark_of_a_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _suite_campaign(tmp_path)
    code, out, err = run_main(["plan", str(folder), "--effect-pct", "10"], capsys)
    assert (code, err) == (0, ""), err
    assert "decide regions, 4 members (the metric and every benchmark)" in out
    # its sequential columns price the family's round: looks from 12 every 4, as the recorder
    # runs a round --until-decided of a campaign deciding regions (they priced 6 every 2)
    every, first = stopping.FAMILY_LOOK_EVERY, stopping.FAMILY_FIRST_LOOK
    assert f"looks every {every} pairs from {first} to 40," in out
    priced = plan(folder, [10.0])
    assert (priced.look_every, priced.first_look) == (every, first)
    lines = [x.split() for x in (folder / "r000" / "measurements.jsonl").read_text().split()]
    assert lines  # the folder is what plan read
    rows = {r.split()[1]: r.split() for r in out.splitlines() if r.startswith("region ")}
    assert list(rows) == ["noisy", "middle", "steady"]  # noisiest first
    docs = [
        json.loads(x)
        for f in ("r000", "r001")
        for x in (folder / f / "measurements.jsonl").read_text().split()
    ]
    for name in SUITE_SPREADS:
        per_attempt = []
        for attempt in range(2):
            part = docs[attempt * 24 : (attempt + 1) * 24]
            value = {(d["side"], d["repetition"]): d["breakdown"]["all"][name] for d in part}
            per_attempt.append(
                np.var(
                    [math.log(value["baseline", r] / value["candidate", r]) for r in range(12)],
                    ddof=1,
                )
            )
        sd = math.sqrt(float(np.mean(per_attempt)))  # equal pairs per attempt: the plain mean
        assert float(rows[name][2]) == pytest.approx(sd, abs=1e-4)
        expected = fixed_pairs(math.log(1.1) - GATE, sd, 0.8, "student_t", 0.95, 5, family_size=4)
        assert rows[name][4] == str(expected)


def test_a_priced_member_is_regressed_as_often_as_promised() -> None:
    """The pairs plan gives a member of a family of 13 for 80% power, against the verdicts of
    assess's own family rule on simulated suites (normal log-ratios, 10% slower)."""
    import polars as pl

    from pipeline.assessment.family import family_intervals, verdict_rule

    sd, m = 0.1, 13
    n = fixed_pairs(math.log(1.1) - GATE, sd, 0.8, "student_t", 0.95, 5, family_size=m)
    alone = fixed_pairs(math.log(1.1) - GATE, sd, 0.8, "student_t", 0.95, 5)
    assert n is not None and alone is not None and n > alone  # alpha / 13 costs pairs

    def regressed(pairs: int, seed: int) -> float:
        x = np.random.default_rng(seed).normal(-math.log(1.1), sd, size=(pairs, 20_000))
        got = family_intervals(x, m, 0.95)
        frame = pl.DataFrame({"low": got.low, "high": got.high})
        verdicts = frame.select(verdict_rule(pl.lit(1.0), pl.lit(1.0)))[:, 0]
        return float(np.mean((verdicts == "regressed").to_numpy()))

    assert regressed(n, 1) >= 0.79
    assert regressed(int(0.8 * n), 2) <= 0.77
