"""The campaign study (``calibrate --campaigns``): a campaign is a search, and its pick is the
luckiest of many noisy rounds. Measured here: the pick's selected estimate against its true gain,
a confirmation round of the pick against the baseline (bias and coverage), the false adoptions
per campaign with and without an online false-discovery rule (LORD++) over the rounds, and the
campaign accounting's expected-by-chance count against the PASS rate identical code really had.

Model (calibrate's default, docs/calibration.md): every round has ``pairs`` pairs of the metric
log-ratio drawn by ``simulate.draw_runs`` (scenario ``aa``), and a candidate is truly faster by
``gain_pct`` with probability ``share`` (the log-ratio shifted by ``ln(1 + gain_pct/100)``
exactly, as the sequential study does), else unchanged. The interval is the policy's method
(default ``student_t``), the verdict assess's paired rule (``verdicts.paired_rule``) at the
model's gate and confidence; the pick is ``best``'s rule (the PASS with the largest estimate,
ties to the lowest round). The confirmation is a fresh round of ``pairs`` pairs of the pick's
true ratio, drawn from its own generator, with the same interval.

Campaigns of 10, 30 and 100 rounds are the first 10, 30 and 100 rounds of the same simulated
campaigns (common random numbers: the columns differ by the search's length, not by draws), and
each length has its own confirmation draws. Every round of every campaign is drawn, assessed and
decided in whole-array passes, in blocks of rounds that bound memory; the only loop over round
positions is LORD++'s, whose level at round t depends on the discoveries before t (each step
asks every campaign at once).

LORD++ (Ramdas, Yang, Wainwright & Jordan, 2017; the gamma sequence of Javanmard & Montanari,
2018): round t PASSes under the rule when its one-sided p-value for "the true ratio is at most
the gate" (Student-t, ``n - 1`` degrees of freedom) is at most
``alpha_t = gamma_t W0 + (level - W0) gamma_{t - tau_1} + level * sum_{j >= 2} gamma_{t - tau_j}``,
``tau_j`` the rounds of the earlier discoveries, ``W0 = level / 2``; with independent p-values
it keeps the false discovery rate (the share of false adoptions among the adoptions) at most
``level`` at every round.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from pipeline.assessment import chance, verdicts
from pipeline.assessment.intervals import method_intervals
from pipeline.errors import UsageError, refuse_first
from pipeline.study.output import render_study
from pipeline.study.simulate import Model, draw_runs

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

DEFAULT_ROUNDS: tuple[int, ...] = (10, 30, 100)
DEFAULT_CAMPAIGNS = 2000
STUDY_KEY = 10
"""First element of the study's spawn keys (simulate's campaigns use 0-2): its draws never
overlap calibrate's other studies at the same data seed."""
BLOCK_ROUNDS = 20_000
"""Rounds drawn at once (about 60 MB of draws at 10 pairs, 300 MB at the peak of a block):
the draws are the same whatever it is (one generator, rows drawn in order)."""
LORD_CONSTANT = 0.07720838
"""Normalizes Javanmard & Montanari's gamma_j = C log(max(j, 2)) / (j exp(sqrt(log j))) to a
sum of 1 over all j >= 1 (the constant of Ramdas et al. 2017)."""


@dataclass(frozen=True)
class Design:
    """What the simulated campaigns do: their lengths, the share and size of the real gains, the
    pairs of a round (and of the confirmation), the interval method, and the LORD++ level."""

    rounds: tuple[int, ...] = DEFAULT_ROUNDS
    share: float = 0.2
    gain_pct: float = 3.0
    pairs: int = 10
    method: str = "student_t"
    lord_level: float = 0.05

    def check(self, campaigns: int, model: Model) -> None:
        rules = [
            ("--campaign-rounds", bool(self.rounds) and min(self.rounds) >= 1, "each >= 1"),
            ("--gain-share", 0 <= self.share <= 1, "between 0 and 1"),
            ("--gain-pct", math.isfinite(self.gain_pct) and self.gain_pct > -100, "> -100"),
            ("--pairs", model.min_pairs <= self.pairs <= 1000, f"{model.min_pairs} to 1000"),
            ("--lord-level", 0 < self.lord_level < 1, "between 0 and 1"),
            ("--attempts", campaigns >= 1, ">= 1"),
        ]
        refuse_first((option, ok, f"must be {rule}") for option, ok, rule in rules)
        if len(set(self.rounds)) != len(self.rounds):
            raise UsageError(f"--campaign-rounds: distinct counts, got {list(self.rounds)}")


@dataclass(frozen=True)
class SearchStudy:
    seed: int
    campaigns: int
    design: Design
    model: Model
    rows: pl.DataFrame


COLUMNS = [
    "rounds",
    "campaigns",
    "pass_per_campaign",
    "false_pass_per_campaign",
    "power",
    "fdr",
    "picked",
    "false_pick",
    "selected_pct",
    "pick_true_pct",
    "selected_bias",
    "confirm_pct",
    "confirm_bias",
    "confirm_coverage",
    "chance_expected",
    "chance_measured",
    "lord_pass_per_campaign",
    "lord_false_pass_per_campaign",
    "lord_power",
    "lord_fdr",
]


def _generator(seed: int, *key: int) -> np.random.Generator:
    sequence = np.random.SeedSequence(seed, spawn_key=(STUDY_KEY, *key))
    return np.random.Generator(np.random.PCG64(sequence))


def null_log_ratios(model: Model, pairs: int, count: int, rng: np.random.Generator) -> FloatArray:
    """(count, pairs): ln(baseline / candidate) of the metric of identical sides, drawn in blocks
    of BLOCK_ROUNDS rounds from one generator."""
    parts = []
    for start in range(0, count, BLOCK_ROUNDS):
        metric = draw_runs(model, "aa", pairs, min(BLOCK_ROUNDS, count - start), rng).metric
        parts.append(np.log(metric[:, :, 0] / metric[:, :, 1]))
    return np.concatenate(parts) if parts else np.zeros((0, pairs))


@dataclass(frozen=True)
class Rounds:
    """Every simulated round, shape (campaigns, rounds): its truth and what assess says."""

    real: BoolArray
    log_truth: FloatArray
    estimate: FloatArray
    low: FloatArray
    high: FloatArray
    passed: BoolArray
    p_value: FloatArray
    spread: FloatArray


def decide(x: FloatArray, design: Design, model: Model) -> tuple[FloatArray, ...]:
    """Per row of ``x`` (rounds, pairs): estimate, low, high by the design's method, and PASS by
    assess's paired rule at the model's gate."""
    got = method_intervals(
        x.T,
        design.method,
        resamples=model.resamples,
        seed=model.policy_seed,
        confidence=model.confidence,
    )
    verdict, _ = verdicts.paired_rule()
    frame = pl.DataFrame({"paired_low": got.low, "paired_high": got.high}).with_columns(
        status=pl.lit("completed"),
        metric_status=pl.lit("ok"),
        metric_reason=pl.lit(None, pl.String),
        min_improvement_pct=pl.lit(model.min_improvement_pct),
    )
    passed = frame.select(verdict == "PASS").to_series().to_numpy()
    return got.estimate, got.low, got.high, passed


def simulate_rounds(design: Design, model: Model, campaigns: int, seed: int) -> Rounds:
    """Every round of every campaign, decided (see the module docstring)."""
    from scipy import stats

    longest = max(design.rounds)
    real = _generator(seed, 0).random((campaigns, longest)) < design.share
    log_truth = np.where(real, math.log1p(design.gain_pct / 100), 0.0)
    x = null_log_ratios(model, design.pairs, campaigns * longest, _generator(seed, 1))
    x = x + log_truth.reshape(-1, 1)
    estimate, low, high, passed = decide(x, design, model)
    n = design.pairs
    sd = x.std(axis=1, ddof=1)
    t = (x.mean(axis=1) - math.log1p(model.min_improvement_pct / 100)) / (sd / math.sqrt(n))
    p = np.asarray(stats.t.sf(t, n - 1), dtype=np.float64)
    shape = (campaigns, longest)
    return Rounds(
        real=real,
        log_truth=log_truth,
        estimate=estimate.reshape(shape),
        low=low.reshape(shape),
        high=high.reshape(shape),
        passed=np.asarray(passed, dtype=bool).reshape(shape),
        p_value=p.reshape(shape),
        spread=sd.reshape(shape),
    )


# -- LORD++ ----------------------------------------------------------------------------------
def lord_gamma(length: int) -> FloatArray:
    """gamma_1 .. gamma_length (index 0 is gamma_1)."""
    j = np.arange(1, length + 1, dtype=np.float64)
    return LORD_CONSTANT * np.log(np.maximum(j, 2)) / (j * np.exp(np.sqrt(np.log(j))))


def lord_passes(p_value: FloatArray, level: float) -> BoolArray:
    """(campaigns, rounds): which rounds LORD++ at ``level`` adopts, each campaign in its round
    order. The loop is over round positions, each step deciding every campaign at once."""
    campaigns, length = p_value.shape
    gamma = np.concatenate([[0.0], lord_gamma(length)])  # gamma[k] for k = 0..length; gamma_0 = 0
    w0 = level / 2
    adopted = np.zeros((campaigns, length), dtype=bool)
    first = np.full(campaigns, -1)
    for t in range(length):  # round t + 1; the discoveries before it set its level
        lags = t - np.arange(t)  # round s < t is t - s rounds back
        earlier = adopted[:, :t].astype(np.float64) @ gamma[lags] if t else np.zeros(campaigns)
        g_first = np.where(first >= 0, gamma[np.clip(t - first, 0, length)], 0.0)
        alpha_t = gamma[t + 1] * w0 + (level - w0) * g_first + level * (earlier - g_first)
        adopted[:, t] = p_value[:, t] <= alpha_t
        first = np.where((first < 0) & adopted[:, t], t, first)
    return adopted


# -- per campaign length ---------------------------------------------------------------------
def _picks(rounds: Rounds, length: int) -> tuple[BoolArray, npt.NDArray[np.int64]]:
    """Per campaign of ``length`` rounds: whether it has a pick, and the pick's round index
    (best's rule: the largest estimate among the PASSes, ties to the lowest round)."""
    passed = rounds.passed[:, :length]
    score = np.where(passed, rounds.estimate[:, :length], -np.inf)
    has = np.asarray(passed.any(axis=1), dtype=bool)
    return has, np.asarray(score.argmax(axis=1), dtype=np.int64)


def _share_false(adopted: BoolArray, real: BoolArray) -> float:
    """The false discovery rate: mean over campaigns of false adoptions / max(adoptions, 1)."""
    false = (adopted & ~real).sum(axis=1)
    return float(np.mean(false / np.maximum(adopted.sum(axis=1), 1)))


def _pct(ratio: FloatArray) -> FloatArray:
    return (ratio - 1) * 100


def length_row(
    rounds: Rounds, lord: BoolArray, length: int, design: Design, model: Model, seed: int
) -> dict[str, float]:
    """The study's row of campaigns of ``length`` rounds."""
    campaigns = rounds.real.shape[0]
    real, passed = rounds.real[:, :length], rounds.passed[:, :length]
    has, at = _picks(rounds, length)
    rows = np.arange(campaigns)[has]
    truth = np.exp(rounds.log_truth[rows, at[has]])
    selected = rounds.estimate[rows, at[has]]
    confirm_x = null_log_ratios(model, design.pairs, int(has.sum()), _generator(seed, 2, length))
    estimate, low, high, _ = decide(confirm_x + np.log(truth)[:, None], design, model)
    null = ~real
    spread = np.sqrt(np.mean(rounds.spread[:, :length] ** 2, axis=1))  # equal n: the pooled sd
    rates = chance.paired_rates(
        np.full(campaigns, design.pairs),
        spread,
        gate_pct=model.min_improvement_pct,
        method=design.method,
        confidence=model.confidence,
    )
    adopted = lord[:, :length]
    return {
        "rounds": length,
        "campaigns": campaigns,
        "pass_per_campaign": float(passed.sum(axis=1).mean()),
        "false_pass_per_campaign": float((passed & null).sum(axis=1).mean()),
        "power": float((passed & real).sum() / max(real.sum(), 1)),
        "fdr": _share_false(passed, real),
        "picked": float(has.mean()),
        "false_pick": float((has & ~rounds.real[np.arange(campaigns), at]).mean()),
        "selected_pct": float(_pct(selected).mean()) if rows.size else math.nan,
        "pick_true_pct": float(_pct(truth).mean()) if rows.size else math.nan,
        "selected_bias": float((_pct(selected) - _pct(truth)).mean()) if rows.size else math.nan,
        "confirm_pct": float(_pct(estimate).mean()) if rows.size else math.nan,
        "confirm_bias": float((_pct(estimate) - _pct(truth)).mean()) if rows.size else math.nan,
        "confirm_coverage": float(((low <= truth) & (truth <= high)).mean())
        if rows.size
        else math.nan,
        "chance_expected": float(length * rates.mean()),
        "chance_measured": float(length * (passed & null).sum() / max(null.sum(), 1)),
        "lord_pass_per_campaign": float(adopted.sum(axis=1).mean()),
        "lord_false_pass_per_campaign": float((adopted & null).sum(axis=1).mean()),
        "lord_power": float((adopted & real).sum() / max(real.sum(), 1)),
        "lord_fdr": _share_false(adopted, real),
    }


def search_study(
    *,
    campaigns: int = DEFAULT_CAMPAIGNS,
    seed: int = 0,
    design: Design | None = None,
    model: Model | None = None,
) -> SearchStudy:
    """Every campaign length of the design; one row per length (see ``COLUMNS``)."""
    design = design or Design()
    model = model or Model()
    model.check()
    design.check(campaigns, model)
    rounds = simulate_rounds(design, model, campaigns, seed)
    lord = lord_passes(rounds.p_value, design.lord_level)
    rows = [length_row(rounds, lord, n, design, model, seed) for n in design.rounds]
    return SearchStudy(seed, campaigns, design, model, pl.DataFrame(rows).select(COLUMNS))


# -- output -------------------------------------------------------------------------------------
def render(study: SearchStudy, fmt: str) -> str:
    """The study as a table (or csv, json); fixed digits, nothing that varies between runs."""
    rounded = study.rows.with_columns(pl.col(COLUMNS[2:]).round(4))
    parameters = {"seed": study.seed, "campaigns": study.campaigns, "design": asdict(study.design)}
    return render_study(rounded, fmt, parameters, lambda: _table(study))


def _text(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else format(value, spec)


def _table(study: SearchStudy) -> str:
    d, m = study.design, study.model
    lines = [
        f"calibrate --campaigns: seed {study.seed}, {study.campaigns} campaigns per length; "
        f"{d.share:.0%} of candidates truly {d.gain_pct:g}% faster, the rest unchanged",
        f"each round and each confirmation {d.pairs} pairs, {d.method} at "
        f"{m.confidence:g}, gate {m.min_improvement_pct:g}%; LORD++ at level {d.lord_level:g}",
        "",
        f"{'rounds':>6}  {'PASS':>5}  {'false':>5}  {'power':>6}  {'FDR':>5}  {'picked':>6}  "
        f"{'false pick':>10}  {'selected':>8}  {'truth':>6}  {'bias':>6}  {'confirm':>7}  "
        f"{'bias':>6}  {'coverage':>8}  {'chance est':>10}  {'chance':>6}",
    ]
    for r in study.rows.iter_rows(named=True):
        lines.append(
            f"{r['rounds']:>6}  {r['pass_per_campaign']:>5.2f}  "
            f"{r['false_pass_per_campaign']:>5.2f}  {r['power']:>6.1%}  {r['fdr']:>5.1%}  "
            f"{r['picked']:>6.1%}  {r['false_pick']:>10.1%}  "
            f"{_text(r['selected_pct'], '+.2f'):>7}%  {_text(r['pick_true_pct'], '+.2f'):>5}%  "
            f"{_text(r['selected_bias'], '+.2f'):>6}  {_text(r['confirm_pct'], '+.2f'):>6}%  "
            f"{_text(r['confirm_bias'], '+.2f'):>6}  "
            f"{_text(100 * r['confirm_coverage'], '.1f'):>7}%  "
            f"{r['chance_expected']:>10.2f}  {r['chance_measured']:>6.2f}"
        )
    lines += ["", "with LORD++ over the rounds (the campaign-level rule):"]
    lines.append(f"{'rounds':>6}  {'PASS':>5}  {'false':>5}  {'power':>6}  {'FDR':>5}")
    for r in study.rows.iter_rows(named=True):
        lines.append(
            f"{r['rounds']:>6}  {r['lord_pass_per_campaign']:>5.2f}  "
            f"{r['lord_false_pass_per_campaign']:>5.2f}  {r['lord_power']:>6.1%}  "
            f"{r['lord_fdr']:>5.1%}"
        )
    lines += [
        "",
        "PASS, false: PASSes per campaign, and those of unchanged candidates (false adoptions);",
        "  power: share of truly faster candidates that PASS; FDR: mean share of false adoptions",
        "  among a campaign's adoptions; picked: campaigns with a pick; false pick: campaigns",
        "  whose pick is unchanged code; selected, truth, bias: the pick's selected estimate, its",
        "  true gain and their mean difference (points); confirm, bias, coverage: a confirmation",
        "  round of the pick, its mean estimate, bias (points) and how often its interval holds",
        "  the true gain; chance est: PASSes identical code would give per campaign as the",
        "  campaign accounting estimates them (rounds x rate at the pooled spread); chance: the",
        "  same measured (rounds x the PASS rate of the unchanged candidates).",
    ]
    return "\n".join(lines) + "\n"
