"""The suite study (``calibrate --suite``): per-benchmark verdicts on simulated suites, how often
identical code flags any benchmark (the family-wise false alarm) and how often one benchmark
made slower is caught, under shared load.

The model, for a suite of ``m`` benchmarks compared over ``n`` pairs (run ``r``, side, benchmark
``j``; every benchmark's time has median 1):

    ln t[r, side, j] = sigma * (sqrt(rho) * u[r, side] + sqrt(1 - rho) * e[r, side, j])
                       + ln(1 + slowdown_pct / 100)   (candidate, benchmark 0 only)
    sigma = spread / sqrt(2)

``u`` is the run-level factor every benchmark of one run shares (load, clock, a noisy
neighbour), ``e`` each benchmark's own noise. Each benchmark's per-pair log-ratio
``ln(t_baseline / t_candidate)`` then has standard deviation ``spread`` and two benchmarks'
log-ratios correlation ``rho``. The run's metric is the sum of its benchmarks, its log-ratio one
more member of the family: the family is the metric and the ``m`` benchmarks, as assess makes
it under ``decide: regions``. Noise families as calibrate's: ``lognormal`` (``u``, ``e``
standard normal), ``t3`` (Student-t with 3 degrees of freedom over sqrt(3)), ``outliers``
(normal, and each run slower as a whole by ``outlier_slowdown`` with probability
``outlier_rate``).

Methods, each applied to the same draws:

- ``bonferroni_t``: assess's own rule, ``pipeline.assessment.family`` (its intervals and its verdict
  expression; nothing of it is copied here), with the gate and the margin;
- ``max_t``: the same verdict rule on ``exp(mean -/+ c * s / sqrt(n))`` with ``c`` the suite's
  own bootstrap quantile (at the confidence) of ``max over members |t*|``, ``t*`` the
  studentized resample mean: whole pairs are resampled with contract §4.2's pinned index matrix
  (seed ``policy_seed``, ``max_t_resamples`` resamples), so the correlation between the
  benchmarks of a run is kept (single-step Romano & Wolf 2005);
- ``per_benchmark``: the rule before per-benchmark verdicts: each member's own 95% ``student_t``
  interval, flagged when it excludes 1 (a direction).

Counted per suite: ``flagged`` (any member improved or regressed; with a slowdown, any benchmark
other than the slowed one, the metric left out since it truly moved too), ``caught`` (the slowed
benchmark regressed). Everything is a few matrix passes over all suites and members of a cell at
once; the loops are over cells (noise, m, rho), pair counts, slowdowns and methods only.

Randomness: one generator per (noise, m, rho), ``SeedSequence(seed, spawn_key=(m,
round(1000 * rho), noise key))``, drawing ``(suites, max pairs, 2, m + 1)`` normals (index 0 of the
last axis is ``u``); a pair count ``n`` reads the first ``n`` pairs and every slowdown reads the
same draws, so the first ``k`` suites are the same whatever ``suites`` is and the methods and
slowdowns differ by their rules, not by their draws.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import polars as pl
from tqdm import tqdm

from pipeline.contract.declare import bounds
from pipeline.errors import refuse_first
from pipeline.study.output import noise_sections, pct, render_study
from pipeline.study.simulate import NOISES, Model, Noise

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Method = Literal["bonferroni_t", "max_t", "per_benchmark"]
METHODS: tuple[Method, ...] = ("bonferroni_t", "max_t", "per_benchmark")
DEFAULT_SIZES: tuple[int, ...] = (5, 20, 100)
DEFAULT_CORRELATIONS: tuple[float, ...] = (0.0, 0.5, 0.9)
DEFAULT_PAIRS: tuple[int, ...] = (10, 20)
DEFAULT_SLOWDOWNS: tuple[float, ...] = (5.0, 10.0)
DEFAULT_SPREAD = 0.042
"""Per-pair standard deviation of a benchmark's log-ratio: the metric's in calibrate's model
(``sqrt(2) * sigma_run``)."""
DEFAULT_MARGIN_PCT = 1.0
DEFAULT_MAX_T_RESAMPLES = 1000
PER_BENCHMARK_CONFIDENCE = 0.95
"""The per-benchmark directions read each member's own interval at 95%, as `ab` prints them."""
_NOISE_KEY = {"lognormal": 0, "t3": 1, "outliers": 2}
_BLOCK = 4_000_000
"""Resample statistics computed at once in max_t (floats): bounds memory to some 100 MB."""


@dataclass(frozen=True)
class SuiteDesign:
    """What the study simulates (``calibrate --suite``'s options): ``suites`` per cell of
    (noise, size, correlation), each read at every pair count, and every slowdown of benchmark
    0; the per-pair ``spread``, the margin and ``max_t``'s resamples."""

    suites: int = 2000
    sizes: tuple[int, ...] = DEFAULT_SIZES
    correlations: tuple[float, ...] = DEFAULT_CORRELATIONS
    pairs: tuple[int, ...] = DEFAULT_PAIRS
    slowdowns: tuple[float, ...] = DEFAULT_SLOWDOWNS
    noises: tuple[Noise, ...] = NOISES
    spread: float = DEFAULT_SPREAD
    margin_pct: float = DEFAULT_MARGIN_PCT
    max_t_resamples: int = DEFAULT_MAX_T_RESAMPLES

    def check(self) -> None:
        """UsageError naming the first option out of range (the margin's bounds: the policy
        field's, campaign.schema.json)."""
        margin_problem = bounds("campaign", "policy", "margin_pct").problem(self.margin_pct)
        sizes, correlations, pairs = self.sizes, self.correlations, self.pairs
        slowdowns, spread, noises = self.slowdowns, self.spread, self.noises
        rules = [
            ("--attempts", self.suites >= 1, "must be >= 1", self.suites),
            ("--benchmarks", bool(sizes) and all(m >= 1 for m in sizes), "each >= 1", sizes),
            (
                "--correlations",
                bool(correlations) and all(0 <= r <= 1 for r in correlations),
                "each between 0 and 1",
                correlations,
            ),
            ("--fixed-pairs", bool(pairs) and all(n >= 2 for n in pairs), "each >= 2", pairs),
            (
                "--slowdown-pct",
                all(math.isfinite(s) and s > 0 for s in slowdowns),
                "each > 0",
                slowdowns,
            ),
            ("--spread", math.isfinite(spread) and spread > 0, "must be > 0", spread),
            ("--margin-pct", margin_problem is None, str(margin_problem), self.margin_pct),
            (
                "--max-t-resamples",
                self.max_t_resamples >= 1,
                "must be >= 1",
                self.max_t_resamples,
            ),
            ("--noise", all(n in NOISES for n in noises), f"among {', '.join(NOISES)}", noises),
        ]
        refuse_first((option, ok, f"{rule}, got {_shown(got)}") for option, ok, rule, got in rules)


def _shown(value: object) -> object:
    """An option's value as the user gave it: a list for several."""
    return list(value) if isinstance(value, tuple | list) else value


@dataclass(frozen=True)
class SuiteStudy:
    """The study's result: one row per (noise, m, rho, pairs, method); see ``COLUMNS``."""

    seed: int
    design: SuiteDesign
    model: Model
    rows: pl.DataFrame


def _slowdown_columns(slowdowns: Sequence[float]) -> list[str]:
    return [f"{kind}_{_pct_name(s)}" for s in slowdowns for kind in ("caught", "others")]


def _pct_name(slowdown: float) -> str:
    return f"{slowdown:g}pct".replace(".", "_")


def columns(slowdowns: Sequence[float]) -> list[str]:
    """The rows' columns: the cell, the method, its mean constant ``c``, the A/A family-wise
    false alarm, then per slowdown the share caught and the share flagging another benchmark."""
    return [
        "noise",
        "benchmarks",
        "correlation",
        "pairs",
        "method",
        "suites",
        "critical",
        "aa_flagged",
        "aa_excludes_one",
        *_slowdown_columns(slowdowns),
    ]


# -- the draws ------------------------------------------------------------------------------------
def cell_generator(seed: int, noise: Noise, size: int, correlation: float) -> np.random.Generator:
    key = (size, round(1000 * correlation), _NOISE_KEY[noise])
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def log_times(
    model: Model,
    noise: Noise,
    *,
    suites: int,
    size: int,
    correlation: float,
    pairs: int,
    spread: float,
    seed: int,
) -> FloatArray:
    """(suites, pairs, 2, size): every run's benchmark log-times in A/A (module docstring)."""
    rng = cell_generator(seed, noise, size, correlation)
    shape = (suites, pairs, 2, size + 1)
    t3 = noise == "t3"  # scaled to variance 1, as calibrate's t3 noise
    z = rng.standard_t(3, shape) / math.sqrt(3.0) if t3 else rng.standard_normal(shape)
    sigma = spread / math.sqrt(2.0)
    shared, own = z[..., :1], z[..., 1:]
    out = sigma * (math.sqrt(correlation) * shared + math.sqrt(1.0 - correlation) * own)
    if noise == "outliers":
        slow = rng.random((suites, pairs, 2, 1)) < model.outlier_rate
        out += np.where(slow, math.log1p(model.outlier_slowdown), 0.0)
    return out


def family_log_ratios(times: FloatArray, slowdown_pct: float) -> FloatArray:
    """(n, suites * (m + 1)): per pair, each suite's metric then its benchmarks, the
    log-ratios ``ln(baseline / candidate)`` with benchmark 0 of the candidate slower by
    ``slowdown_pct``. Column ``s * (m + 1) + k``: suite ``s``, member ``k`` (0: the metric)."""
    base, cand = times[:, :, 0, :], times[:, :, 1, :].copy()
    cand[..., 0] += math.log1p(slowdown_pct / 100)
    metric = np.log(np.exp(base).sum(axis=2)) - np.log(np.exp(cand).sum(axis=2))
    family = np.concatenate([metric[..., None], base - cand], axis=2)
    suites, n, width = family.shape
    return family.transpose(1, 0, 2).reshape(n, suites * width)


# -- the methods ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decided:
    """Per suite and member (suites, m + 1): flagged improved or regressed, regressed, and the
    interval without 1 (what the method alone promises to hold at alpha, before the gate and
    the margin); and the constant ``c`` of each suite."""

    flagged: BoolArray
    regressed: BoolArray
    excludes_one: BoolArray
    critical: FloatArray


def _verdicts(low: FloatArray, high: FloatArray, gate_pct: float, margin_pct: float) -> pl.Series:
    from pipeline.assessment.family import verdict_rule

    frame = pl.DataFrame({"low": low, "high": high})
    return frame.select(verdict_rule(pl.lit(gate_pct), pl.lit(margin_pct)))[:, 0]


def _decided(
    low: FloatArray, high: FloatArray, critical: FloatArray, width: int, gate: float, margin: float
) -> Decided:
    verdict = _verdicts(low, high, gate, margin)
    flagged = verdict.is_in(["improved", "regressed"]).to_numpy().reshape(-1, width)
    regressed = (verdict == "regressed").to_numpy().reshape(-1, width)
    excludes = ((low > 1) | (high < 1)).reshape(-1, width)
    return Decided(flagged, regressed, excludes, critical)


def bonferroni_t(x: FloatArray, width: int, model: Model, margin_pct: float) -> Decided:
    """assess's rule (pipeline.assessment.family) on every member of every suite at once."""
    from pipeline.assessment.family import family_intervals

    got = family_intervals(x, width, model.confidence)
    suites = x.shape[1] // width
    return _decided(
        got.low,
        got.high,
        np.full(suites, got.critical),
        width,
        model.min_improvement_pct,
        margin_pct,
    )


def per_benchmark(x: FloatArray, width: int) -> Decided:
    """Each member's own 95% student_t interval; flagged when it excludes 1."""
    from scipy import stats

    from pipeline.assessment.intervals import student_t_bounds

    low, high = student_t_bounds(x, PER_BENCHMARK_CONFIDENCE)
    flagged = ((low > 1) | (high < 1)).reshape(-1, width)
    regressed = (high < 1).reshape(-1, width)
    c = float(stats.t.ppf(1 - (1 - PER_BENCHMARK_CONFIDENCE) / 2, x.shape[0] - 1))
    return Decided(flagged, regressed, flagged, np.full(flagged.shape[0], c))


def largest_t(x: FloatArray, width: int, counts: FloatArray) -> FloatArray:
    """(resamples, suites): per pinned resample and suite, ``max over its members of
    |mean* - mean| / (s* / sqrt(n))``, the studentized resample mean (``counts``: contract
    §4.2's resample counts over ``n``, whole pairs resampled). A resample of one repeated pair
    has ``s* = 0``: its statistic is +inf (0 when its mean is the mean)."""
    n = x.shape[0]
    weights = counts / n
    resamples, suites = counts.shape[0], x.shape[1] // width
    per_block = max(1, _BLOCK // (resamples * width))
    out = np.empty((resamples, suites))
    for first in range(0, suites, per_block):  # blocks of suites: bounded memory
        cols = slice(first * width, min(suites, first + per_block) * width)
        part = x[:, cols]
        m1 = weights @ part
        var = weights @ (part * part)
        var -= m1 * m1
        np.maximum(var, 0.0, out=var)
        m1 -= part.mean(axis=0)
        m1 *= m1
        with np.errstate(divide="ignore", invalid="ignore"):
            m1 /= var  # (mean* - mean)^2 / var*, var* with divisor n; 0 / 0 is nan
        squared = np.fmax.reduce(m1.reshape(resamples, -1, width), axis=2)  # nan: ignored
        out[:, first : first + squared.shape[1]] = np.sqrt(np.nan_to_num(squared) * (n - 1))
    return out


@dataclass(frozen=True)
class MaxT:
    """The pinned resample counts of ``n`` pairs and the benchmarks' part of the max-|t| of
    each suite: a slowdown shifts a benchmark's log-ratios by a constant, which leaves its
    studentized statistics as they are, so only the metric's part is drawn again per
    slowdown."""

    counts: FloatArray
    benchmarks: FloatArray  # (resamples, suites)

    @classmethod
    def of(cls, x: FloatArray, width: int, *, resamples: int, seed: int) -> MaxT:
        from pipeline.assessment.bootstrap import resample_counts

        counts = resample_counts(x.shape[0], resamples=resamples, seed=seed)
        members = x.reshape(x.shape[0], -1, width)[:, :, 1:].reshape(x.shape[0], -1)
        return cls(counts, largest_t(members, width - 1, counts))

    def critical(self, x: FloatArray, width: int, confidence: float) -> FloatArray:
        """Per suite of ``x``: the ``confidence`` quantile (numpy's linear) of its max-|t|."""
        metric = np.ascontiguousarray(x[:, ::width])
        largest = np.maximum(self.benchmarks, largest_t(metric, 1, self.counts))
        return np.quantile(largest, confidence, axis=0)


def max_t(x: FloatArray, width: int, model: Model, margin_pct: float, resampled: MaxT) -> Decided:
    """The verdict rule on intervals whose constant is each suite's bootstrap max-|t|."""
    n = x.shape[0]
    c = resampled.critical(x, width, model.confidence)
    mean, sd = x.mean(axis=0), x.std(axis=0, ddof=1)
    half = np.repeat(c, width) * sd / math.sqrt(n)
    with np.errstate(over="ignore"):
        low, high = np.exp(mean - half), np.exp(mean + half)
    return _decided(low, high, c, width, model.min_improvement_pct, margin_pct)


# -- the study ------------------------------------------------------------------------------------
def _counts(decided: Decided, slowdown: float) -> dict[str, float]:
    """Shares of suites: any member flagged (A/A), or the slowed benchmark caught and any
    other benchmark flagged (members 2.. : the metric is left out, it truly moved)."""
    if slowdown == 0:
        return {
            "aa_flagged": float(decided.flagged.any(axis=1).mean()),
            "aa_excludes_one": float(decided.excludes_one.any(axis=1).mean()),
        }
    name = _pct_name(slowdown)
    return {
        f"caught_{name}": float(decided.regressed[:, 1].mean()),
        f"others_{name}": float(decided.flagged[:, 2:].any(axis=1).mean()),
    }


def _decide(
    method: Method, x: FloatArray, width: int, model: Model, margin_pct: float, resampled: MaxT
) -> Decided:
    if method == "bonferroni_t":
        return bonferroni_t(x, width, model, margin_pct)
    if method == "max_t":
        return max_t(x, width, model, margin_pct, resampled)
    return per_benchmark(x, width)


def suite_study(
    design: SuiteDesign = SuiteDesign(),
    *,
    seed: int = 0,
    model: Model | None = None,
    progress: bool | None = None,
) -> SuiteStudy:
    """Every method on every cell; one row per (noise, m, rho, pairs, method)."""
    model = model or Model()
    model.check()
    design.check()
    d = design
    cells = [(noise, m, rho) for noise in d.noises for m in d.sizes for rho in d.correlations]
    show = sys.stderr.isatty() if progress is None else progress
    rows: list[dict[str, object]] = []
    with tqdm(total=len(cells), disable=not show, file=sys.stderr, desc="calibrate") as bar:
        for noise, m, rho in cells:
            bar.set_postfix_str(f"{noise} m={m} rho={rho:g}")
            times = log_times(
                model,
                noise,
                suites=d.suites,
                size=m,
                correlation=rho,
                pairs=max(d.pairs),
                spread=d.spread,
                seed=seed,
            )
            for n in d.pairs:
                found: dict[Method, dict[str, object]] = {
                    method: {
                        "noise": noise,
                        "benchmarks": m,
                        "correlation": rho,
                        "pairs": n,
                        "method": method,
                        "suites": d.suites,
                    }
                    for method in METHODS
                }
                resampled: MaxT | None = None
                for slowdown in (0.0, *d.slowdowns):
                    x = family_log_ratios(times[:, :n], slowdown)
                    resampled = resampled or MaxT.of(
                        x, m + 1, resamples=d.max_t_resamples, seed=model.policy_seed
                    )
                    for method, row in found.items():
                        got = _decide(method, x, m + 1, model, d.margin_pct, resampled)
                        row |= _counts(got, slowdown)
                        if slowdown == 0:
                            row["critical"] = float(got.critical.mean())
                rows += found.values()
            bar.update()
    return SuiteStudy(seed, design, model, pl.DataFrame(rows).select(columns(d.slowdowns)))


# -- output ---------------------------------------------------------------------------------------
def render(study: SuiteStudy, fmt: str) -> str:
    """The study as a table (or csv, json); fixed digits, nothing that varies between runs."""
    rates = study.rows.columns[7:]
    rounded = study.rows.with_columns(pl.col(rates).round(4), pl.col("critical").round(4))
    parameters = {
        "seed": study.seed,
        "suites": study.design.suites,
        "spread": study.design.spread,
        "margin_pct": study.design.margin_pct,
        "max_t_resamples": study.design.max_t_resamples,
        "model": asdict(study.model),
    }
    return render_study(rounded, fmt, parameters, lambda: _table(study))


def _table(study: SuiteStudy) -> str:
    m, d = study.model, study.design
    head = (
        f"{'m':>4}  {'corr':>4}  {'pairs':>5}  {'method':<13}  {'c':>6}  {'A/A any':>7}  "
        f"{'A/A !=1':>7}"
    )
    for s in d.slowdowns:
        head += f"  {f'{s:g}% caught':>11}  {f'{s:g}% others':>11}"
    lines = [
        f"calibrate --suite: seed {study.seed}, {d.suites} suites per noise, size, "
        "correlation and pair count",
        f"spread {d.spread:g} per pair; gate {m.min_improvement_pct:g}%, margin "
        f"{d.margin_pct:g}%, confidence {m.confidence:g}; max_t: {d.max_t_resamples} "
        f"resamples, seed {m.policy_seed}",
        *noise_sections(study.rows, d.noises, head, lambda row: _line(row, d.slowdowns)),
        "",
        "m: benchmarks per suite (the family is the metric and the m benchmarks); corr: the",
        "  correlation the shared run-level factor puts between two benchmarks' log-ratios;",
        "  c: the mean constant of exp(mean -/+ c s / sqrt(n)); A/A any: identical code, suites",
        "  with any member improved or regressed (per_benchmark: any 95% interval without 1);",
        "  A/A !=1: suites with any member's interval without 1 (the method's own error, before",
        "  the gate and the margin);",
        "  caught: one benchmark that much slower, called regressed; others: any other",
        "  benchmark flagged in those suites.",
    ]
    return "\n".join(lines) + "\n"


def _line(row: dict[str, Any], slowdowns: Sequence[float]) -> str:
    line = (
        f"{row['benchmarks']:>4}  {row['correlation']:>4g}  {row['pairs']:>5}  "
        f"{row['method']:<13}  {row['critical']:>6.3f}  {pct(row['aa_flagged']):>7}  "
        f"{pct(row['aa_excludes_one']):>7}"
    )
    for s in slowdowns:
        name = _pct_name(s)
        line += f"  {pct(row[f'caught_{name}']):>11}  {pct(row[f'others_{name}']):>11}"
    return line
