"""calibrate --campaigns: the vectorized campaign study against a plain campaign-by-campaign
reference (picks, confirmations, LORD++), against theory (no real gain: every PASS is chance;
the confirmation is unbiased and covers), and its reproducibility through the CLI."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from pipeline.cli import main
from pipeline.study import search
from pipeline.study.simulate import Model

REPO = Path(__file__).resolve().parent.parent
MODEL = Model()
DESIGN = search.Design(rounds=(5, 12), share=0.3, gain_pct=4.0, pairs=6)


def _student_t(x: np.ndarray) -> tuple[float, float, float]:
    n = len(x)
    m, s = float(np.mean(x)), float(np.std(x, ddof=1))
    h = float(stats.t.ppf(0.975, n - 1)) * s / math.sqrt(n)
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def _lord(p: list[float], level: float) -> list[bool]:
    """LORD++ written out from Ramdas et al. 2017, one round after the other."""

    def gamma(j: int) -> float:
        if j < 1:
            return 0.0
        return search.LORD_CONSTANT * math.log(max(j, 2)) / (j * math.exp(math.sqrt(math.log(j))))

    w0 = level / 2
    taus: list[int] = []
    out: list[bool] = []
    for t in range(1, len(p) + 1):
        alpha = gamma(t) * w0
        if taus:
            alpha += (level - w0) * gamma(t - taus[0])
            alpha += level * sum(gamma(t - tau) for tau in taus[1:])
        out.append(bool(p[t - 1] <= alpha))
        if out[-1]:
            taus.append(t)
    return out


def _reference(campaigns: int, seed: int) -> dict[int, dict[str, float]]:
    """The study's figures, one campaign and one round at a time."""
    longest = max(DESIGN.rounds)
    real = search._generator(seed, 0).random((campaigns, longest)) < DESIGN.share
    x = search.null_log_ratios(MODEL, DESIGN.pairs, campaigns * longest, search._generator(seed, 1))
    x = x.reshape(campaigns, longest, DESIGN.pairs)
    gain = math.log(1 + DESIGN.gain_pct / 100)
    rounds: list[list[dict[str, Any]]] = []
    for c in range(campaigns):
        mine = []
        for r in range(longest):
            xs = x[c, r] + (gain if real[c, r] else 0.0)
            est, low, high = _student_t(xs)
            t = (np.mean(xs) - math.log(1.01)) / (np.std(xs, ddof=1) / math.sqrt(len(xs)))
            p = float(stats.t.sf(t, len(xs) - 1))
            mine.append({"est": est, "pass": low > 1 and low >= 1.01, "p": p, "real": real[c, r]})
        rounds.append(mine)
    out = {}
    for length in DESIGN.rounds:
        picks: list[tuple[int, int]] = []
        passes = false = lord_false = 0
        for c in range(campaigns):
            got = rounds[c][:length]
            passes += sum(bool(r["pass"]) for r in got)
            false += sum(bool(r["pass"] and not r["real"]) for r in got)
            adopted = _lord([r["p"] for r in got], DESIGN.lord_level)
            lord_false += sum(bool(a and not r["real"]) for a, r in zip(adopted, got, strict=True))
            eligible = [(r["est"], -i) for i, r in enumerate(got) if r["pass"]]
            if eligible:
                picks.append((c, -max(eligible)[1]))
        confirm = search.null_log_ratios(
            MODEL, DESIGN.pairs, len(picks), search._generator(seed, 2, length)
        )
        bias, covered, selected = [], [], []
        for i, (c, r) in enumerate(picks):
            truth = 1 + DESIGN.gain_pct / 100 if real[c, r] else 1.0
            est, low, high = _student_t(confirm[i] + math.log(truth))
            bias.append((est - truth) * 100)
            covered.append(low <= truth <= high)
            selected.append((rounds[c][r]["est"] - truth) * 100)
        out[length] = {
            "pass_per_campaign": passes / campaigns,
            "false_pass_per_campaign": false / campaigns,
            "picked": len(picks) / campaigns,
            "selected_bias": float(np.mean(selected)),
            "confirm_bias": float(np.mean(bias)),
            "confirm_coverage": float(np.mean(covered)),
            "lord_false_pass_per_campaign": lord_false / campaigns,
        }
    return out


def test_the_vectorized_study_equals_a_plain_campaign_by_campaign_loop() -> None:
    study = search.search_study(campaigns=40, seed=3, design=DESIGN, model=MODEL)
    expected = _reference(40, 3)
    for row in study.rows.iter_rows(named=True):
        want = expected[row["rounds"]]
        assert {k: row[k] for k in want} == pytest.approx(want, abs=1e-9)


def test_lord_matches_the_plain_rule_on_small_p_values() -> None:
    rng = np.random.default_rng(5)
    p = rng.random((30, 25)) ** 8  # many small p-values: discoveries early and late
    got = search.lord_passes(p, 0.1)
    assert got.any()
    expected = np.array([_lord(list(row), 0.1) for row in p])
    assert (got == expected).all()


@pytest.mark.slow
def test_the_confirmation_is_unbiased_and_covers_where_the_pick_is_not() -> None:
    """Theory: the pick's selected estimate is the largest of several noisy ones (biased up);
    a fresh round of the pick is not (calibrate's default model, 2,000 campaigns)."""
    study = search.search_study(campaigns=2000, seed=1, design=search.Design(rounds=(30,)))
    row = study.rows.row(0, named=True)
    assert row["selected_bias"] > 1.0  # points: the winner's curse
    assert abs(row["confirm_bias"]) < 0.15  # SE about 0.05 points
    assert abs(row["confirm_coverage"] - 0.95) < 0.02  # SE about 0.5 points
    assert row["chance_expected"] == pytest.approx(row["chance_measured"], abs=0.05)


@pytest.mark.slow
def test_with_no_real_gain_every_pass_is_chance_and_lord_holds_its_level() -> None:
    design = search.Design(rounds=(100,), share=0.0)
    row = search.search_study(campaigns=500, seed=2, design=design).rows.row(0, named=True)
    assert row["false_pass_per_campaign"] == row["pass_per_campaign"] > 0
    assert row["chance_measured"] == pytest.approx(row["pass_per_campaign"])
    assert row["chance_expected"] == pytest.approx(row["chance_measured"], rel=0.25)
    assert row["lord_fdr"] <= 0.05  # with no real gain the FDR is the chance of any adoption
    assert row["fdr"] > 0.3  # the plain rule adopts noise in about a third of such campaigns


# Not conftest.cli_result: it leaves the captured output unread, for the test to read once.
def _run(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return int(exc.value.code or 0)


def test_calibrate_campaigns_is_reproducible_and_refuses_bad_designs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["calibrate", "--campaigns", "--attempts", "60", "--campaign-rounds", "4,9"]
    assert _run(args) == 0
    first = capsys.readouterr().out
    assert _run(args) == 0
    assert capsys.readouterr().out == first
    assert first.startswith("calibrate --campaigns: seed 0, 60 campaigns per length")
    assert _run(["calibrate", "--campaigns", "--pairs", "3"]) == 2
    assert capsys.readouterr().err == "error: --pairs: must be 5 to 1000\n"


def test_the_draws_do_not_depend_on_the_block_size(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = search.null_log_ratios(MODEL, 6, 50, search._generator(0, 1))
    monkeypatch.setattr(search, "BLOCK_ROUNDS", 7)
    assert (search.null_log_ratios(MODEL, 6, 50, search._generator(0, 1)) == whole).all()


def _docs_block(page: str) -> str:
    text = (REPO / page).read_text(encoding="utf-8")
    found = re.search(r"<!-- campaigns-run -->\n```\n(.*?)\n```\n.*?```\n(.*?)```", text, re.S)
    assert found, f"{page} lost the campaign study's command and output"
    assert found.group(1) == "explain-pipeline calibrate --campaigns"
    return found.group(2)


@pytest.mark.slow
def test_the_documented_run_is_what_the_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/calibration.md (and the Chinese page) quote `calibrate --campaigns` exactly."""
    assert _run(["calibrate", "--campaigns"]) == 0
    printed = capsys.readouterr().out
    assert _docs_block("docs/calibration.md") == printed
    assert _docs_block("docs/zh/calibration.md") == printed
