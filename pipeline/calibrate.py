"""The calibration study of contract §7: the decision rules measured on simulated A/A and known-gain
campaigns that go through the real ingest and assess.

All three rules come from one assessment per campaign. The simulated policy is the median rule
without the explanation gate; ``assess`` also reports, for every attempt, the paired rule's
verdict (``paired_verdict``) and the explanation, whatever the policy. Under contract §6 the
explanation gate only rewrites a PASS, and turns it into PASS exactly when the explanation is
``explained``; so "paired + require_explanation" is PASS iff ``paired_verdict`` is PASS and
``explanation`` is ``explained``. The other ways a verdict can differ do not occur here: every
simulated attempt is ``completed`` and no campaign has an integrity error (both are checked).
tests/test_calibrate.py checks the equivalence against assess's own ``--what-if`` run.

Coverage is the share of A/A attempts whose metric interval contains the true ratio 1
(``low <= 1 <= high``: direction ``none``). Under ``min_pairs`` assess reports no interval; there
the interval is computed for the record with ``pipeline.bootstrap.paired_intervals`` on the stored
metric log-ratios, with the policy's seed, resamples and confidence.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
from tqdm import tqdm

from pipeline.assess import assess
from pipeline.bootstrap import paired_intervals
from pipeline.errors import ExitCode, ExplainError
from pipeline.ingest import ingest
from pipeline.simulate import (
    DEFAULT_ATTEMPTS,
    DEFAULT_REPETITIONS,
    SCENARIOS,
    Model,
    Scenario,
    check_plan,
    write_simulated_campaign,
)
from pipeline.store import Store

Format = Literal["table", "json", "csv"]
CoverageSource = Literal["assess", "bootstrap"]

# Per campaign: counts of attempts, read from one assessment.
_COUNTS = [
    "attempts", "median_pass", "paired_pass", "paired_explained_pass", "explained", "covered"
]


@dataclass(frozen=True)
class Calibration:
    """The study's result: one row per repetition count (see ``COLUMNS``)."""

    seed: int
    attempts: int
    repetitions: tuple[int, ...]
    model: Model
    rows: pl.DataFrame


# Column -> (scenario, count) it is the rate of.
RATES: dict[str, tuple[Scenario, str]] = {
    "aa_median_false_pass": ("aa", "median_pass"),
    "aa_paired_false_pass": ("aa", "paired_pass"),
    "aa_paired_explained_false_pass": ("aa", "paired_explained_pass"),
    "aa_coverage": ("aa", "covered"),
    "aa_false_explained": ("aa", "explained"),
    "gain_median_pass": ("gain", "median_pass"),
    "gain_paired_pass": ("gain", "paired_pass"),
    "gain_paired_explained_pass": ("gain", "paired_explained_pass"),
    "gain_explained": ("gain", "explained"),
}
COLUMNS = ["repetitions", "attempts", "seed", *RATES, "aa_coverage_source"]


class CalibrationError(ExplainError):
    """The simulated data did not go through ingest/assess cleanly: a bug, not a user error."""

    exit_code = ExitCode.INTERNAL


def calibrate(
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    seed: int = 0,
    repetitions: Sequence[int] = DEFAULT_REPETITIONS,
    model: Model | None = None,
    progress: bool | None = None,
) -> Calibration:
    """Simulate, ingest and assess both scenarios for every repetition count, in a temporary
    folder, and count verdicts. ``progress=None``: a bar on stderr when it is a terminal."""
    model = model or Model()
    model.check()
    check_plan(SCENARIOS, repetitions, attempts, seed)
    plan = [(scenario, reps) for reps in repetitions for scenario in SCENARIOS]
    show = sys.stderr.isatty() if progress is None else progress
    tallies = []
    with (
        tempfile.TemporaryDirectory(prefix="explain-calibrate-") as tmp,
        tqdm(total=len(plan), disable=not show, file=sys.stderr, desc="calibrate") as bar,
    ):
        store = Store(Path(tmp) / "store")
        for scenario, reps in plan:
            bar.set_postfix_str(f"{scenario} x{reps}")
            tallies.append(_run_campaign(Path(tmp) / "attempts", store, scenario, reps,
                                         attempts=attempts, seed=seed, model=model))
            bar.update()
    rows = _rates(pl.DataFrame(tallies), attempts=attempts, seed=seed)
    return Calibration(seed, attempts, tuple(repetitions), model, rows)


def _run_campaign(
    root: Path, store: Store, scenario: Scenario, reps: int, *, attempts: int, seed: int,
    model: Model,
) -> dict[str, object]:
    campaign = write_simulated_campaign(
        root, scenario, reps, attempts=attempts, seed=seed, model=model
    )
    report = ingest(campaign.path, store)
    if report.issues or report.exit_code != ExitCode.OK:
        first = report.issues[0] if report.issues else "an attempt was rejected"
        raise CalibrationError(f"simulated campaign {campaign.campaign_id} rejected: {first}")
    shutil.rmtree(campaign.path)  # in the store now; keeps the temporary folder small
    result = assess(store, [campaign.campaign_id], write=False)
    if result.blocked.height or result.exit_code != ExitCode.OK:
        raise CalibrationError(f"simulated campaign {campaign.campaign_id} blocked by integrity")
    counts = count_rules(result.assessments)
    if counts["attempts"] != attempts:
        raise CalibrationError(f"{campaign.campaign_id}: {counts['attempts']} assessments")
    source: CoverageSource = "assess"
    if reps < model.min_pairs:
        source = "bootstrap"
        counts["covered"] = _bootstrap_covered(store, campaign.campaign_id, model)
    return {"scenario": scenario, "repetitions": reps, **counts, "coverage_source": source}


def count_rules(assessments: pl.DataFrame) -> dict[str, int]:
    """Counts over one campaign's assessments: PASS under each rule, explained, and intervals
    that contain 1 (assess gives no interval under min_pairs: those count as not covered)."""
    paired_pass = pl.col("paired_verdict") == "PASS"
    explained = pl.col("explanation") == "explained"
    frame = assessments.select(
        attempts=pl.len(),
        median_pass=(pl.col("median_verdict") == "PASS").sum(),
        paired_pass=paired_pass.sum(),
        paired_explained_pass=(paired_pass & explained).sum(),
        explained=explained.sum(),
        covered=((pl.col("paired_low") <= 1) & (pl.col("paired_high") >= 1)).sum(),
        not_completed=(pl.col("status") != "completed").sum(),
    )
    counts = {name: int(value) for name, value in frame.row(0, named=True).items()}
    if counts.pop("not_completed"):
        raise CalibrationError("a simulated attempt is not completed")
    return counts


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


def _bootstrap_covered(store: Store, campaign_id: str, model: Model) -> int:
    x = metric_log_ratios(store.read("samples", [campaign_id]))
    intervals = paired_intervals(
        x, resamples=model.resamples, seed=model.policy_seed, confidence=model.confidence
    )
    return int(np.sum((intervals.low <= 1) & (intervals.high >= 1)))


def _rates(tallies: pl.DataFrame, *, attempts: int, seed: int) -> pl.DataFrame:
    """One row per repetition count: every rate of RATES, from the per-campaign counts."""
    def count(scenario: str, name: str) -> pl.Expr:
        return pl.col(name).filter(pl.col("scenario") == scenario).first()

    source = pl.col("coverage_source").filter(pl.col("scenario") == "aa").first()
    return (
        tallies.group_by("repetitions", maintain_order=True)
        .agg(
            *(
                (count(scenario, name) / attempts).alias(column)
                for column, (scenario, name) in RATES.items()
            ),
            source.alias("aa_coverage_source"),
        )
        .with_columns(attempts=pl.lit(attempts), seed=pl.lit(seed))
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


def _json(result: Calibration) -> str:
    rows = result.rows.with_columns(pl.col(list(RATES)).round(4))
    document = {
        "seed": result.seed,
        "attempts": result.attempts,
        "repetitions": list(result.repetitions),
        "model": dataclasses.asdict(result.model),
        "rows": rows.to_dicts(),
    }
    return json.dumps(document, indent=2) + "\n"


def _csv(result: Calibration) -> str:
    buffer = io.StringIO()
    result.rows.write_csv(buffer, float_precision=4)
    return buffer.getvalue()


def _pct(rate: float) -> str:
    return f"{100 * rate:.1f}%"


def _table(result: Calibration) -> str:
    m = result.model
    level = f"{100 * m.confidence:g}%"
    lines = [
        f"calibrate: seed {result.seed}, {result.attempts} attempts per scenario and repetition "
        "count",
        f"policy: min_improvement_pct {m.min_improvement_pct:g}, confidence {m.confidence:g}, "
        f"resamples {m.resamples}, seed {m.policy_seed}, min_pairs {m.min_pairs}",
        "",
        "A/A (identical sides; every PASS is false)",
        f"{'reps':>4}  {'median PASS':>11}  {'paired PASS':>11}  {'paired+expl PASS':>16}  "
        f"{level + ' coverage':>13}  {'explained':>9}",
    ]
    footnote = False
    for row in result.rows.iter_rows(named=True):
        mark = "*" if row["aa_coverage_source"] == "bootstrap" else " "
        footnote = footnote or mark == "*"
        lines.append(
            f"{row['repetitions']:>4}  {_pct(row['aa_median_false_pass']):>11}  "
            f"{_pct(row['aa_paired_false_pass']):>11}  "
            f"{_pct(row['aa_paired_explained_false_pass']):>16}  "
            f"{_pct(row['aa_coverage']) + mark:>13}  {_pct(row['aa_false_explained']):>9}"
        )
    lines += [
        "",
        f"gain (candidate attention and dram_bytes x{m.gain_factor:g})",
        f"{'reps':>4}  {'median PASS':>11}  {'paired PASS':>11}  {'paired+expl PASS':>16}  "
        f"{'explained':>9}",
    ]
    lines += [
        f"{row['repetitions']:>4}  {_pct(row['gain_median_pass']):>11}  "
        f"{_pct(row['gain_paired_pass']):>11}  {_pct(row['gain_paired_explained_pass']):>16}  "
        f"{_pct(row['gain_explained']):>9}"
        for row in result.rows.iter_rows(named=True)
    ]
    if footnote:
        lines += [""] + textwrap.wrap(
            f"* fewer than min_pairs ({m.min_pairs}) pairs: assess reports no interval (and every "
            "comparison is unverifiable, so nothing is explained); this coverage is computed for "
            "the record with pipeline.bootstrap on the metric log-ratios, with the policy's seed "
            "and resamples.",
            width=100,
            subsequent_indent="  ",
        )
    lines += [""] + textwrap.wrap("model: " + _model_line(m), width=100, subsequent_indent="  ")
    return "\n".join(lines) + "\n"


def _model_line(m: Model) -> str:
    return (
        f"{m.steps} steps x {m.step_seconds:g} s; shares attention {m.share_attention:g}, "
        f"mlp {m.share_mlp:g}, sampling {m.share_sampling:g}, comm {m.share_comm:g}; "
        f"log-normal sigma rep {m.sigma_rep:g}, run {m.sigma_run:g}, cell {m.sigma_cell:g}; "
        f"kernel_launches {m.launches_per_step}/step; dram_bytes {m.dram_bytes_per_step:g}/step "
        f"sigma {m.sigma_dram:g}; gain x{m.gain_factor:g}"
    )
