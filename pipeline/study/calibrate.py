"""The calibration study: the decision rules, the interval methods, the explained fraction and
the order-effect flag measured on simulated campaigns that go through the real assess.

For every noise family and repetition count, three campaigns are simulated (``aa``: identical
sides; ``gain``: the candidate's attention and dram_bytes x gain_factor, the declared
mechanism; ``elsewhere``: the same saving in mlp, which the mechanism does not declare) and
written to a temporary store as the tables ``ingest`` makes of the simulated files (built from
the draws directly; tests/test_calibrate.py checks they are equal to ingest's). Each campaign
is assessed once per interval method: under its frozen policy (``percentile``) and with
``--what-if interval=...`` for the two others (only where an interval exists and it matters:
the ``elsewhere`` campaigns and counts under ``min_pairs`` are assessed once).

All the rules come from those assessments. The simulated policy is the median rule without the
explanation gate; ``assess`` also reports, whatever the policy, the paired rule's verdict
(``paired_verdict``) and the explanation. The gate only rewrites a PASS, into PASS exactly when
the explanation is ``explained``; so "paired + require_explanation" is PASS iff
``paired_verdict`` is PASS and ``explanation`` is ``explained`` (every simulated attempt is
``completed`` and no campaign is blocked: both are checked). tests/test_calibrate.py checks the
equivalence against assess's own ``--what-if``.

Coverage is the share of A/A attempts whose metric interval contains the true ratio 1. Under
``min_pairs`` assess reports no interval; there it is computed for the record with
``pipeline.assessment.intervals.method_intervals`` on the stored metric log-ratios.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import sys
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from tqdm import tqdm

from pipeline.assessment import sequential
from pipeline.assessment.campaigns import assess
from pipeline.assessment.intervals import Method, method_intervals
from pipeline.contract.policy import POLICY_DEFAULTS
from pipeline.errors import ExitCode, ExplainError, UsageError
from pipeline.store.tables import Store
from pipeline.study import estimate
from pipeline.study.simulate import (
    ALL_SCENARIOS,
    DEFAULT_REPETITIONS,
    NOISES,
    CampaignDraw,
    Model,
    Noise,
    Scenario,
    campaign_id,
    campaign_tables,
    check_plan,
)

METHODS: tuple[Method, ...] = sequential.FIXED_N
"""The fixed-n methods this study compares. Without a schedule of looks ``sequential_t`` is
``student_t`` exactly; under early stopping it is measured by the sequential study."""
FROZEN: Method = POLICY_DEFAULTS["interval"]
"""The interval the simulated campaigns freeze (their policy leaves it at the default): the
pass that assesses every campaign."""
Format = Literal["table", "json", "csv"]
CoverageSource = Literal["assess", "intervals"]
DEFAULT_ATTEMPTS = 2000

# Per campaign and method: counts of attempts, and sums for the means, from one assessment.
_COUNTS = [
    "attempts",
    "median_pass",
    "paired_pass",
    "paired_explained_pass",
    "explained",
    "covered",
    "fractions",
    "fraction_sum",
    "log_estimate_sum",
    "order_flagged",
]


@dataclass(frozen=True)
class Calibration:
    """The study's result: one row per (noise, repetition count, method); see ``COLUMNS``."""

    seed: int
    attempts: int
    repetitions: tuple[int, ...]
    noises: tuple[Noise, ...]
    model: Model
    rows: pl.DataFrame


# Column -> (scenario, count) it is the rate of (count / attempts).
RATES: dict[str, tuple[Scenario, str]] = {
    "aa_median_false_pass": ("aa", "median_pass"),
    "aa_paired_false_pass": ("aa", "paired_pass"),
    "aa_paired_explained_false_pass": ("aa", "paired_explained_pass"),
    "aa_coverage": ("aa", "covered"),
    "aa_false_explained": ("aa", "explained"),
    "aa_order_flagged": ("aa", "order_flagged"),
    "gain_median_pass": ("gain", "median_pass"),
    "gain_paired_pass": ("gain", "paired_pass"),
    "gain_paired_explained_pass": ("gain", "paired_explained_pass"),
    "gain_explained": ("gain", "explained"),
}
MEANS = ["aa_estimate_bias_pct", "gain_fraction_mean", "elsewhere_fraction_mean"]
COLUMNS = [
    "noise",
    "repetitions",
    "method",
    "attempts",
    "seed",
    *RATES,
    *MEANS,
    "aa_coverage_source",
]


class CalibrationError(ExplainError):
    """The simulated data did not go through assess cleanly: a bug, not a user error."""

    exit_code = ExitCode.INTERNAL


def calibrate(
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    seed: int = 0,
    repetitions: Sequence[int] = DEFAULT_REPETITIONS,
    noises: Sequence[Noise] = NOISES,
    model: Model | None = None,
    progress: bool | None = None,
    announce: Callable[[str], object] | None = None,
) -> Calibration:
    """Simulate and assess every (noise, repetition count, scenario) in a temporary store and
    count, per interval method. ``progress=None``: a bar on stderr when it is a terminal.
    ``announce`` gets the time estimate once the arguments are checked, when the run is long."""
    model = model or Model()
    model.check()
    check_plan(ALL_SCENARIOS, repetitions, attempts, seed)
    if not noises or any(n not in NOISES for n in noises) or len(set(noises)) != len(noises):
        raise UsageError(f"--noise: distinct values among {', '.join(NOISES)}, got {list(noises)}")
    scenarios = len(ALL_SCENARIOS)
    seconds = estimate.calibrate_seconds(attempts, repetitions, len(noises) * scenarios)
    if announce is not None and seconds >= estimate.LONG_SECONDS:
        announce(estimate.calibrate_estimate(attempts, repetitions, len(noises), scenarios))
    plan = pl.DataFrame(
        [
            (campaign_id(s, r, n), n, r, s)
            for n in noises
            for r in repetitions
            for s in ALL_SCENARIOS
        ],
        schema=["campaign_id", "noise", "repetitions", "scenario"],
        orient="row",
    )
    show = sys.stderr.isatty() if progress is None else progress
    with (
        tempfile.TemporaryDirectory(prefix="explain-calibrate-") as tmp,
        tqdm(
            total=plan.height + len(METHODS), disable=not show, file=sys.stderr, desc="calibrate"
        ) as bar,
    ):
        store = Store(Path(tmp) / "store")
        for cid, noise, reps, scenario in plan.iter_rows():
            bar.set_postfix_str(cid)
            _write(
                store,
                cid,
                campaign_tables(
                    CampaignDraw(scenario, reps, attempts, seed, model, noise, order="balanced")
                ),
            )
            bar.update()
        tallies = []
        for method in METHODS:
            bar.set_postfix_str(method)
            tallies.append(_tally(store, plan, method, model, attempts))
            bar.update()
        rows = _rates(pl.concat(tallies), plan, attempts=attempts, seed=seed)
        rows = fill_coverage_for_the_record(rows, store, plan, model, attempts)
    return Calibration(seed, attempts, tuple(repetitions), tuple(noises), model, rows)


def _write(store: Store, cid: str, tables: dict[str, pl.DataFrame]) -> None:
    with store.transaction() as txn:
        for name, frame in tables.items():
            txn.put(name, cid, frame)


def _tally(
    store: Store, plan: pl.DataFrame, method: Method, model: Model, attempts: int
) -> pl.DataFrame:
    """Counts per campaign under one interval method. The frozen policy's (FROZEN, percentile)
    assesses every campaign; the others only the A/A and gain campaigns with an interval."""
    wanted = plan
    what_if = None
    if method != FROZEN:
        wanted = plan.filter(
            (pl.col("scenario") != "elsewhere") & (pl.col("repetitions") >= model.min_pairs)
        )
        what_if = {"interval": method}
    ids = wanted["campaign_id"].to_list()
    if not ids:
        return pl.DataFrame(
            schema={
                "campaign_id": pl.String,
                "method": pl.String,
                **{c: pl.Float64 for c in _COUNTS},
            }
        )
    result = assess(store, ids, write=False, what_if=what_if, compare=False)
    if result.blocked.height or result.exit_code != ExitCode.OK:
        raise CalibrationError(f"simulated campaigns blocked by integrity: {ids}")
    counts = count_rules(result.assessments)
    if (counts["attempts"] != attempts).any():
        raise CalibrationError(f"a simulated campaign does not have {attempts} assessments")
    return counts.with_columns(pl.lit(method).alias("method"))


def count_rules(assessments: pl.DataFrame) -> pl.DataFrame:
    """Counts per campaign: PASS under each rule, explained, intervals that contain 1 (assess
    gives no interval under min_pairs: those count as not covered), and the sums behind the
    mean explained fraction and the mean log paired estimate."""
    paired_pass = pl.col("paired_verdict") == "PASS"
    explained = pl.col("explanation") == "explained"
    fraction = pl.col("explained_fraction")
    frame = assessments.group_by("campaign_id", maintain_order=True).agg(
        attempts=pl.len(),
        median_pass=(pl.col("median_verdict") == "PASS").sum(),
        paired_pass=paired_pass.sum(),
        paired_explained_pass=(paired_pass & explained).sum(),
        explained=explained.sum(),
        covered=((pl.col("paired_low") <= 1) & (pl.col("paired_high") >= 1)).sum(),
        fractions=fraction.is_not_null().sum(),
        fraction_sum=fraction.sort().sum(),
        log_estimate_sum=pl.col("paired_estimate").log().sort().sum(),
        order_flagged=pl.col("order_bias").fill_null(False).sum(),
        not_completed=(pl.col("status") != "completed").sum(),
    )
    if frame["not_completed"].sum():
        raise CalibrationError("a simulated attempt is not completed")
    return frame.drop("not_completed").with_columns(pl.col(_COUNTS).cast(pl.Float64))


def metric_log_ratios(samples: pl.DataFrame) -> np.ndarray:
    """(n pairs, attempts): ln(baseline / candidate) of the metric, rows by repetition, columns
    by attempt id. Every simulated run is ok and paired, which is checked."""
    wide = (
        samples.filter(pl.col("status") == "ok")
        .pivot("side", index=["attempt_id", "repetition"], values="metric")
        .sort("attempt_id", "repetition")
        .with_columns(x=(pl.col("baseline") / pl.col("candidate")).log())
    )
    per_attempt = wide.group_by("attempt_id").len()["len"]
    if wide["x"].null_count() or per_attempt.n_unique() != 1:
        raise CalibrationError("simulated runs are not all paired")
    return wide["x"].to_numpy().reshape(per_attempt.len(), per_attempt[0]).T


def covered_for_the_record(store: Store, cid: str, method: Method, model: Model) -> int:
    """A/A attempts whose metric interval by ``method`` contains 1, computed from the stored
    samples where assess gives no interval (fewer than min_pairs pairs)."""
    x = metric_log_ratios(store.read("samples", [cid]))
    if x.shape[0] < 2 and method != "percentile":
        return 0  # one pair has no spread: no t or expanded interval
    got = method_intervals(
        x, method, resamples=model.resamples, seed=model.policy_seed, confidence=model.confidence
    )
    return int(np.sum((got.low <= 1) & (got.high >= 1)))


def _rates(tallies: pl.DataFrame, plan: pl.DataFrame, *, attempts: int, seed: int) -> pl.DataFrame:
    """One row per (noise, repetitions, method). Counts that do not depend on the method (the
    median rule, the explained fraction, and everything where no interval exists) come from
    the percentile pass."""
    base = tallies.filter(pl.col("method") == FROZEN).drop("method")
    methods = pl.DataFrame({"method": list(METHODS)})
    full = (
        plan.join(methods, how="cross")
        .join(base, on="campaign_id", how="left")
        .join(tallies, on=["campaign_id", "method"], how="left", suffix="_m")
    )
    by_method = ["paired_pass", "paired_explained_pass", "explained", "covered", "log_estimate_sum"]
    full = full.with_columns([pl.coalesce(f"{c}_m", c).alias(c) for c in by_method]).select(
        "noise", "repetitions", "method", "scenario", *_COUNTS
    )

    def pick(scenario: str, name: str) -> pl.Expr:
        return pl.col(name).filter(pl.col("scenario") == scenario).first()

    def mean_fraction(scenario: str) -> pl.Expr:
        """Over the attempts that have a fraction; null when none has."""
        count = pick(scenario, "fractions")
        return pl.when(count > 0).then(pick(scenario, "fraction_sum") / count)

    return (
        full.group_by("noise", "repetitions", "method", maintain_order=True)
        .agg(
            *((pick(s, n) / attempts).alias(column) for column, (s, n) in RATES.items()),
            ((pick("aa", "log_estimate_sum") / attempts).exp() * 100 - 100).alias(
                "aa_estimate_bias_pct"
            ),
            mean_fraction("gain").alias("gain_fraction_mean"),
            mean_fraction("elsewhere").alias("elsewhere_fraction_mean"),
        )
        .with_columns(
            attempts=pl.lit(attempts),
            seed=pl.lit(seed),
            aa_coverage_source=pl.lit("assess"),
        )
        .select(COLUMNS)
    )


def fill_coverage_for_the_record(
    rows: pl.DataFrame, store: Store, plan: pl.DataFrame, model: Model, attempts: int
) -> pl.DataFrame:
    """Rows under min_pairs: coverage of each method computed from the samples."""
    short = plan.filter((pl.col("scenario") == "aa") & (pl.col("repetitions") < model.min_pairs))
    fixes = [
        {
            "noise": n,
            "repetitions": r,
            "method": m,
            "covered": covered_for_the_record(store, cid, m, model) / attempts,
        }
        for cid, n, r, _ in short.iter_rows()
        for m in METHODS
    ]
    if not fixes:
        return rows
    fixed = pl.DataFrame(
        fixes,
        schema={
            "noise": pl.String,
            "repetitions": pl.Int64,
            "method": pl.String,
            "covered": pl.Float64,
        },
    )
    return (
        rows.join(fixed, on=["noise", "repetitions", "method"], how="left")
        .with_columns(
            pl.coalesce("covered", "aa_coverage").alias("aa_coverage"),
            pl.when(pl.col("covered").is_not_null())
            .then(pl.lit("intervals"))
            .otherwise(pl.col("aa_coverage_source"))
            .alias("aa_coverage_source"),
        )
        .select(COLUMNS)
    )


# -- output -------------------------------------------------------------------------------------


def render(result: Calibration, fmt: Format | str) -> str:
    """The study as text; rates with fixed digits, nothing that varies between runs."""
    if fmt == "json":
        return _json(result)
    if fmt == "csv":
        return _csv(result)
    return _table(result)


def _rounded(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.with_columns(pl.col([*RATES, *MEANS]).round(4))


def _json(result: Calibration) -> str:
    document = {
        "seed": result.seed,
        "attempts": result.attempts,
        "repetitions": list(result.repetitions),
        "noises": list(result.noises),
        "model": dataclasses.asdict(result.model),
        "rows": _rounded(result.rows).to_dicts(),
    }
    return json.dumps(document, indent=2) + "\n"


def _csv(result: Calibration) -> str:
    buffer = io.StringIO()
    result.rows.write_csv(buffer, float_precision=4)
    return buffer.getvalue()


def _pct(rate: float | None) -> str:
    return "-" if rate is None or math.isnan(rate) else f"{100 * rate:.1f}%"


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None or math.isnan(value) else format(value, spec)


_NOISE_TITLE = {
    "lognormal": "log-normal noise (the model as specified)",
    "t3": "Student-t noise, 3 degrees of freedom, scaled to the same sigma",
    "outliers": "log-normal noise plus slow outlier runs",
}
_HEAD = (
    f"{'reps':>4}  {'method':<19}  {'coverage':>8}  {'aa PASS':>7}  {'aa+expl':>7}  "
    f"{'aa expl':>7}  {'bias':>6}  {'order':>6}  {'gain PASS':>9}  {'gain+expl':>9}  "
    f"{'gain expl':>9}  {'frac gain':>9}  {'frac else':>9}"
)


def _line(row: dict) -> str:
    mark = "*" if row["aa_coverage_source"] == "intervals" else " "
    return (
        f"{row['repetitions']:>4}  {row['method']:<19}  {_pct(row['aa_coverage']) + mark:>8}  "
        f"{_pct(row['aa_paired_false_pass']):>7}  "
        f"{_pct(row['aa_paired_explained_false_pass']):>7}  "
        f"{_pct(row['aa_false_explained']):>7}  {_num(row['aa_estimate_bias_pct'], '+.2f'):>5}%  "
        f"{_pct(row['aa_order_flagged']):>6}  "
        f"{_pct(row['gain_paired_pass']):>9}  {_pct(row['gain_paired_explained_pass']):>9}  "
        f"{_pct(row['gain_explained']):>9}  {_num(row['gain_fraction_mean'], '.3f'):>9}  "
        f"{_num(row['elsewhere_fraction_mean'], '.3f'):>9}"
    )


def _table(result: Calibration) -> str:
    m = result.model
    lines = [
        f"calibrate: seed {result.seed}, {result.attempts} attempts per scenario, noise and "
        "repetition count",
        f"policy: min_improvement_pct {m.min_improvement_pct:g}, confidence {m.confidence:g}, "
        f"resamples {m.resamples}, seed {m.policy_seed}, min_pairs {m.min_pairs}",
    ]
    footnote = False
    for noise in result.noises:
        rows = result.rows.filter(pl.col("noise") == noise)
        lines += [
            "",
            _NOISE_TITLE[noise],
            "median rule: "
            + ", ".join(
                f"{r['repetitions']} reps A/A PASS {_pct(r['aa_median_false_pass'])} "
                f"gain PASS {_pct(r['gain_median_pass'])}"
                for r in rows.filter(pl.col("method") == FROZEN).iter_rows(named=True)
            ),
            _HEAD,
        ]
        for row in rows.iter_rows(named=True):
            footnote = footnote or row["aa_coverage_source"] == "intervals"
            lines.append(_line(row))
    lines += [""] + textwrap.wrap(
        "columns: coverage = A/A attempts whose metric interval contains 1; aa PASS, aa+expl = "
        "A/A false PASS of the paired rule, and with require_explanation; aa expl = A/A false "
        "explained; bias = the A/A paired estimate's geometric mean - 1; order = A/A attempts "
        "flagged order_bias; gain PASS, gain+expl, "
        "gain expl = the same in the gain scenario; frac gain, frac else = mean explained "
        "fraction when the gain is in the declared region (attention) and when it is in mlp.",
        width=100,
        subsequent_indent="  ",
    )
    if footnote:
        lines += textwrap.wrap(
            f"* fewer than min_pairs ({m.min_pairs}) pairs: assess reports no interval (and "
            "every comparison is unverifiable, so nothing is explained); this coverage is "
            "computed for the record with pipeline.assessment.intervals on the metric log-ratios.",
            width=100,
            subsequent_indent="  ",
        )
    lines += textwrap.wrap("model: " + _model_line(m), width=100, subsequent_indent="  ")
    return "\n".join(lines) + "\n"


def _model_line(m: Model) -> str:
    return (
        f"{m.steps} steps x {m.step_seconds:g} s; shares attention {m.share_attention:g}, "
        f"mlp {m.share_mlp:g}, sampling {m.share_sampling:g}, comm {m.share_comm:g}; "
        f"sigma rep {m.sigma_rep:g}, run {m.sigma_run:g}, cell {m.sigma_cell:g}; "
        f"kernel_launches {m.launches_per_step}/step; dram_bytes {m.dram_bytes_per_step:g}/step "
        f"sigma {m.sigma_dram:g}; gain x{m.gain_factor:g} (elsewhere: mlp "
        f"x{m.elsewhere_factor:.4g}); outliers {m.outlier_rate:g} of runs "
        f"+{100 * m.outlier_slowdown:g}%; position effect {m.position_effect_pct:g}% on the "
        "second run of a repetition, order balanced"
    )
