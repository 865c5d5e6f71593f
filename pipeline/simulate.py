"""The A/A and known-gain simulation (contract §7): synthetic campaigns as stored attempts.

The model, per attempt of ``R`` repetitions (each repetition runs baseline, then candidate):

    seconds[r, side, step, region] = share[region] * step_seconds
                                     * exp(sigma_rep  * z_rep[r]                 # both sides
                                           + sigma_run  * z_run[r, side]         # whole run
                                           + sigma_cell * z_cell[r, side, step, region])
                                     * effect[side, region]
    metric[r, side]       = sum over steps and regions of seconds
    kernel_launches       = launches_per_step * steps (exact)
    dram_bytes[r, side]   = dram_bytes_per_step * steps * (1 + sigma_dram * z_dram[r, side])
                            * effect_dram[side]

with independent standard normals ``z``. The noise factors are log-normal with median 1 (not mean
1): in A/A the true ratio of every quantity is exactly 1 on the log scale the paired interval uses.
``effect`` is 1 except, in scenario ``gain``, ``gain_factor`` on the candidate's ``attention`` and
``dram_bytes``.

Randomness: one ``numpy.random.Generator`` per campaign, from
``SeedSequence(seed, spawn_key=(scenario, repetitions))``, so a campaign does not depend on which
other campaigns are simulated with it. Every normal an attempt needs is one row of a single
``(attempts, draws)`` array, so the first ``k`` attempts are the same whatever ``--attempts`` is.
Timestamps are synthetic and fixed (no wall clock), so the same seed gives byte-identical files.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pipeline.errors import UsageError
from pipeline.stored import write_attempt, write_campaign

if TYPE_CHECKING:  # imported where used: the command line builds its options from Model
    import numpy as np

Scenario = Literal["aa", "gain"]
SCENARIOS: tuple[Scenario, ...] = ("aa", "gain")
_SCENARIO_KEY: dict[str, int] = {"aa": 0, "gain": 1}
SIDES = ("baseline", "candidate")
REGIONS = ("attention", "mlp", "sampling", "comm")
DEFAULT_REPETITIONS: tuple[int, ...] = (3, 5, 10, 20)
DEFAULT_ATTEMPTS = 1000

METRIC = {"name": "e2e_seconds", "better": "lower"}
# The declaration every simulated attempt saves before its candidate runs (contract §7). In scenario
# `aa` it is false, which is what measures the rate of false explanations.
MECHANISM: dict[str, Any] = {
    "hypothesis": "Simulated: the candidate's attention kernel moves fewer DRAM bytes "
    "(true in scenario gain, false in scenario aa)",
    "expectations": [
        {"target": "region", "name": "attention", "expect": "decrease"},
        {"target": "counter", "name": "dram_bytes", "expect": "decrease"},
        {"target": "region", "name": "sampling", "expect": "unchanged"},
    ],
}
# Fixed synthetic clock: campaign created at EPOCH, attempt i started (i + 1) minutes later,
# its mechanism declared 30 seconds before that.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_ATTEMPT_SPACING = timedelta(minutes=1)
_DECLARED_BEFORE = timedelta(seconds=30)


@dataclass(frozen=True)
class Model:
    """Every parameter of the contract §7 model, with its value there as default."""

    steps: int = 4
    step_seconds: float = 0.010
    share_attention: float = 0.10
    share_mlp: float = 0.50
    share_sampling: float = 0.25
    share_comm: float = 0.15
    sigma_rep: float = 0.03
    sigma_run: float = 0.03
    sigma_cell: float = 0.01
    launches_per_step: int = 1000
    dram_bytes_per_step: float = 1e9
    sigma_dram: float = 0.001
    gain_factor: float = 0.88
    min_improvement_pct: float = 1.0
    # Bootstrap settings frozen into each campaign's policy (contract §2.1 defaults).
    resamples: int = 10000
    confidence: float = 0.95
    policy_seed: int = 0
    min_pairs: int = 5

    @property
    def shares(self) -> np.ndarray:
        """Shares of the step time, in the order of REGIONS."""
        import numpy as np

        return np.array(
            [self.share_attention, self.share_mlp, self.share_sampling, self.share_comm]
        )

    def policy(self) -> dict[str, Any]:
        """The frozen policy of every simulated campaign: the median rule, no explanation gate.
        The paired and explanation rules are read from the report-only columns of the same
        assessment (see docs/calibration.md for why that is the same as running them)."""
        return {
            "decision": "median",
            "require_explanation": False,
            "min_improvement_pct": self.min_improvement_pct,
            "confidence": self.confidence,
            "resamples": self.resamples,
            "seed": self.policy_seed,
            "min_pairs": self.min_pairs,
        }

    def check(self) -> None:
        """Raise UsageError naming the first parameter out of range."""
        for name, value in asdict(self).items():
            if not math.isfinite(value):
                raise UsageError(f"--{name.replace('_', '-')}: must be finite, got {value}")
        rules: list[tuple[str, bool, str]] = [
            ("steps", self.steps >= 1, "must be >= 1"),
            ("step_seconds", self.step_seconds > 0, "must be > 0"),
            ("launches_per_step", self.launches_per_step >= 0, "must be >= 0"),
            ("dram_bytes_per_step", self.dram_bytes_per_step >= 0, "must be >= 0"),
            ("gain_factor", self.gain_factor > 0, "must be > 0"),
            ("min_improvement_pct", self.min_improvement_pct >= 0, "must be >= 0"),
            ("resamples", self.resamples >= 1, "must be >= 1"),
            ("confidence", 0 < self.confidence < 1, "must be between 0 and 1"),
            ("policy_seed", self.policy_seed >= 0, "must be >= 0"),
            ("min_pairs", self.min_pairs >= 5, "must be >= 5 (docs/contract.md §2.1)"),
        ]
        nonnegative = [f"share_{region}" for region in REGIONS] + list(_SIGMAS)
        rules += [(n, getattr(self, n) >= 0, "must be >= 0") for n in nonnegative]
        for name, ok, rule in rules:
            if not ok:
                raise UsageError(f"--{name.replace('_', '-')}: {rule}, got {getattr(self, name)}")
        if self.shares.sum() <= 0:
            raise UsageError("region shares: at least one must be > 0 (the metric must be > 0)")


_SIGMAS = ("sigma_rep", "sigma_run", "sigma_cell", "sigma_dram")


@dataclass(frozen=True)
class Runs:
    """The simulated runs of one campaign: index order (attempt, repetition, side, ...)."""

    seconds: np.ndarray  # (attempts, repetitions, 2, steps, regions)
    dram_bytes: np.ndarray  # (attempts, repetitions, 2)
    kernel_launches: int

    @property
    def metric(self) -> np.ndarray:
        """(attempts, repetitions, 2): the run's sum of all regions."""
        return self.seconds.sum(axis=(3, 4))


@dataclass(frozen=True)
class SimulatedCampaign:
    campaign_id: str
    scenario: Scenario
    repetitions: int
    attempts: int
    path: Path = field(compare=False)


def campaign_id(scenario: Scenario, repetitions: int) -> str:
    return f"{scenario}-r{repetitions:02d}"


def campaign_generator(seed: int, scenario: Scenario, repetitions: int) -> np.random.Generator:
    import numpy as np

    """The one generator of a campaign, derived from the seed and the campaign's key."""
    sequence = np.random.SeedSequence(seed, spawn_key=(_SCENARIO_KEY[scenario], repetitions))
    return np.random.Generator(np.random.PCG64(sequence))


def draw_runs(
    model: Model, scenario: Scenario, repetitions: int, attempts: int, rng: np.random.Generator
) -> Runs:
    """Draw every run of a campaign at once (one row of normals per attempt)."""
    import numpy as np

    n, r, s, k = attempts, repetitions, model.steps, len(REGIONS)
    sizes = [r, 2 * r, 2 * r * s * k, 2 * r]
    z = rng.standard_normal((n, sum(sizes)))
    z_rep, z_run, z_cell, z_dram = np.split(z, np.cumsum(sizes)[:-1], axis=1)
    log_noise = (
        model.sigma_rep * z_rep.reshape(n, r, 1, 1, 1)
        + model.sigma_run * z_run.reshape(n, r, 2, 1, 1)
        + model.sigma_cell * z_cell.reshape(n, r, 2, s, k)
    )
    region_effect = np.ones((2, k))
    dram_effect = np.ones(2)
    if scenario == "gain":
        region_effect[1, REGIONS.index("attention")] = model.gain_factor
        dram_effect[1] = model.gain_factor
    base = model.shares * model.step_seconds
    seconds = base * np.exp(log_noise) * region_effect[:, None, :]
    dram = (
        model.dram_bytes_per_step
        * model.steps
        * (1.0 + model.sigma_dram * z_dram.reshape(n, r, 2))
        * dram_effect
    )
    if (dram < 0).any():
        raise UsageError(
            f"--sigma-dram {model.sigma_dram}: drew a negative dram_bytes; use a smaller value"
        )
    return Runs(seconds, dram, model.launches_per_step * model.steps)


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def attempt_document(index: int, width: int, scenario: Scenario, model: Model, seed: int) -> dict:
    started = EPOCH + (index + 1) * _ATTEMPT_SPACING
    return {
        "attempt_id": f"r{index:0{width}d}",
        "round": index,
        "candidate": "identical" if scenario == "aa" else f"attention-x{model.gain_factor:g}",
        "baseline": f"simulated baseline (seed {seed})",
        "status": "completed",
        "declared_at": _timestamp(started - _DECLARED_BEFORE),
        "started_at": _timestamp(started),
    }


def run_lines(runs: Runs, attempt: int) -> Iterator[dict[str, Any]]:
    """The measurements.jsonl lines of one attempt, baseline then candidate per repetition."""
    seconds = runs.seconds[attempt].tolist()
    metric = runs.metric[attempt].tolist()
    dram = runs.dram_bytes[attempt].tolist()
    per_rep = zip(seconds, metric, dram, strict=True)
    for rep, (rep_seconds, rep_metric, rep_dram) in enumerate(per_rep):
        sides = zip(SIDES, rep_seconds, rep_metric, rep_dram, strict=True)
        for side, run_seconds, value, dram_bytes in sides:
            yield {
                "side": side,
                "repetition": rep,
                "status": "ok",
                "metric": value,
                "breakdown": {
                    f"decode-{step}": dict(zip(REGIONS, cells, strict=True))
                    for step, cells in enumerate(run_seconds)
                },
                "counters": {"kernel_launches": runs.kernel_launches, "dram_bytes": dram_bytes},
            }


def write_simulated_campaign(
    out_dir: Path, scenario: Scenario, repetitions: int, *, attempts: int, seed: int, model: Model
) -> SimulatedCampaign:
    """Draw and write one campaign: ``<out_dir>/<scenario>-r<RR>/``."""
    cid = campaign_id(scenario, repetitions)
    rng = campaign_generator(seed, scenario, repetitions)
    runs = draw_runs(model, scenario, repetitions, attempts, rng)
    folder = write_campaign(
        out_dir, cid, created_at=_timestamp(EPOCH), metric=METRIC, policy=model.policy()
    )
    width = max(3, len(str(attempts - 1)))
    for index in range(attempts):
        document = attempt_document(index, width, scenario, model, seed)
        write_attempt(folder, document, run_lines(runs, index), mechanism=MECHANISM)
    return SimulatedCampaign(cid, scenario, repetitions, attempts, folder)


def check_plan(
    scenarios: Sequence[str], repetitions: Sequence[int], attempts: int, seed: int
) -> None:
    if not scenarios or any(s not in SCENARIOS for s in scenarios):
        raise UsageError(f"--scenario: must be among {', '.join(SCENARIOS)}, got {scenarios}")
    if not repetitions or any(r < 1 for r in repetitions):
        raise UsageError(f"--repetitions: each must be >= 1, got {list(repetitions)}")
    if len(set(repetitions)) != len(repetitions):
        raise UsageError(f"--repetitions: duplicate value in {list(repetitions)}")
    if attempts < 1:
        raise UsageError(f"--attempts: must be >= 1, got {attempts}")
    if seed < 0:
        raise UsageError(f"--seed: must be >= 0, got {seed}")


def simulate(
    out_dir: Path,
    *,
    scenarios: Sequence[Scenario] = SCENARIOS,
    repetitions: Sequence[int] = DEFAULT_REPETITIONS,
    attempts: int = DEFAULT_ATTEMPTS,
    seed: int = 0,
    model: Model | None = None,
) -> list[SimulatedCampaign]:
    """Write one campaign per (scenario, repetition count) under ``out_dir``.

    Existing campaign folders are never overwritten (stale attempts of an earlier, larger run
    would otherwise be mixed in): the whole call is refused before anything is written."""
    model = model or Model()
    model.check()
    check_plan(scenarios, repetitions, attempts, seed)
    plan = [(s, r) for s in scenarios for r in repetitions]
    for scenario, reps in plan:
        if (out_dir / campaign_id(scenario, reps)).exists():
            folder = out_dir / campaign_id(scenario, reps)
            raise UsageError(f"{folder}: already exists; remove it or choose another OUT_DIR")
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        write_simulated_campaign(out_dir, s, r, attempts=attempts, seed=seed, model=model)
        for s, r in plan
    ]
