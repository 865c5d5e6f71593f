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

import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from pipeline.contract.declare import SIDES
from pipeline.errors import UsageError
from pipeline.study import estimate
from pipeline.study.stored import write_attempt, write_campaign

if TYPE_CHECKING:  # imported where used: the command line builds its options from Model
    import numpy as np
    import polars as pl

Scenario = Literal["aa", "gain", "elsewhere"]
SCENARIOS: tuple[Scenario, ...] = ("aa", "gain")
"""The scenarios of ``simulate --scenario both``."""
ALL_SCENARIOS: tuple[Scenario, ...] = ("aa", "gain", "elsewhere")
_SCENARIO_KEY: dict[str, int] = {"aa": 0, "gain": 1, "elsewhere": 2}
Noise = Literal["lognormal", "t3", "outliers"]
NOISES: tuple[Noise, ...] = get_args(Noise)
_NOISE_KEY: dict[str, int] = {"t3": 1, "outliers": 2}  # log-normal keeps the original keys
Order = Literal["baseline_first", "balanced"]
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
    outlier_rate: float = 0.05
    outlier_slowdown: float = 0.3
    position_effect_pct: float = 0.0
    min_improvement_pct: float = 1.0
    # Bootstrap settings frozen into each campaign's policy (contract §2.1 defaults).
    resamples: int = 10000
    confidence: float = 0.95
    policy_seed: int = 0
    min_pairs: int = 5

    @property
    def elsewhere_factor(self) -> float:
        """Scenario elsewhere: the candidate's mlp factor that saves as much step time as the
        gain scenario saves in attention (a gain in a region the mechanism does not declare)."""
        saved = self.share_attention * (1.0 - self.gain_factor)
        return 1.0 - saved / self.share_mlp if self.share_mlp > 0 else 1.0

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
            ("outlier_rate", 0 <= self.outlier_rate <= 1, "must be between 0 and 1"),
            ("outlier_slowdown", self.outlier_slowdown >= 0, "must be >= 0"),
            ("position_effect_pct", self.position_effect_pct > -100, "must be > -100"),
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
    order: np.ndarray | None = None
    """(attempts, repetitions, 2): 0 ran first in its repetition, 1 second; None: baseline
    first everywhere and not recorded (the original model)."""

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


def campaign_id(scenario: Scenario, repetitions: int, noise: Noise = "lognormal") -> str:
    middle = "" if noise == "lognormal" else f"-{noise}"
    return f"{scenario}{middle}-r{repetitions:02d}"


def campaign_generator(
    seed: int, scenario: Scenario, repetitions: int, noise: Noise = "lognormal"
) -> np.random.Generator:
    """The one generator of a campaign, derived from the seed and the campaign's key."""
    import numpy as np

    key: tuple[int, ...] = (_SCENARIO_KEY[scenario], repetitions)
    if noise != "lognormal":
        key += (_NOISE_KEY[noise],)
    sequence = np.random.SeedSequence(seed, spawn_key=key)
    return np.random.Generator(np.random.PCG64(sequence))


def balanced_order(repetitions: int, order_seed: int) -> np.ndarray:
    """(repetitions, 2) of 0/1 for (baseline, candidate): the recorder's balanced order, with
    ``perm = Generator(PCG64(order_seed)).permutation(n)``: repetition ``perm[i]`` runs the
    baseline first iff ``i < ceil(n / 2)``."""
    import numpy as np

    perm = np.random.Generator(np.random.PCG64(order_seed)).permutation(repetitions)
    baseline_first = np.zeros(repetitions, dtype=bool)
    baseline_first[perm[: math.ceil(repetitions / 2)]] = True
    return np.where(baseline_first[:, None], [0, 1], [1, 0])


def draw_runs(
    model: Model,
    scenario: Scenario,
    repetitions: int,
    attempts: int,
    rng: np.random.Generator,
    *,
    noise: Noise = "lognormal",
    order: Order = "baseline_first",
) -> Runs:
    """Draw every run of a campaign at once (one row of draws per attempt, so the first ``k``
    attempts are the same whatever ``attempts`` is). ``noise``: ``lognormal`` (the original
    model), ``t3`` (the three log-scale factors Student-t with 3 degrees of freedom, scaled to
    the same standard deviation), ``outliers`` (log-normal, and each run independently slower by
    ``outlier_slowdown`` with probability ``outlier_rate``). ``order``: ``balanced`` records the
    recorder's balanced order with attempt ``i``'s order seed ``i``; the run that goes second
    in its repetition is slower by ``position_effect_pct`` percent."""
    import numpy as np

    n, r, s, k = attempts, repetitions, model.steps, len(REGIONS)
    sizes = [r, 2 * r, 2 * r * s * k, 2 * r]
    z = rng.standard_normal((n, sum(sizes)))
    if noise == "t3":  # drawn after the normals: dram_bytes keeps its normal noise
        t = rng.standard_t(3, (n, sum(sizes[:3]))) / math.sqrt(3.0)  # variance of t3 is 3
        z[:, : sum(sizes[:3])] = t
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
    if scenario == "elsewhere":
        region_effect[1, REGIONS.index("mlp")] = model.elsewhere_factor
    base = model.shares * model.step_seconds
    seconds = base * np.exp(log_noise) * region_effect[:, None, :]
    if noise == "outliers":
        slow = rng.random((n, r, 2)) < model.outlier_rate
        seconds *= np.where(slow, 1.0 + model.outlier_slowdown, 1.0)[..., None, None]
    orders = None
    if order == "balanced":
        orders = np.stack([balanced_order(r, i) for i in range(n)]) if n else np.zeros((0, r, 2))
    second = orders if orders is not None else np.broadcast_to([0, 1], (n, r, 2))
    if model.position_effect_pct:
        slower = 1.0 + model.position_effect_pct / 100
        seconds *= np.where(second == 1, slower, 1.0)[..., None, None]
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
    return Runs(seconds, dram, model.launches_per_step * model.steps, orders)


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _candidate_label(scenario: Scenario, model: Model) -> str:
    if scenario == "gain":
        return f"attention-x{model.gain_factor:g}"
    return f"mlp-x{model.elsewhere_factor:.4g}" if scenario == "elsewhere" else "identical"


def attempt_document(
    index: int, width: int, scenario: Scenario, model: Model, seed: int, *, balanced: bool = False
) -> dict:
    """attempt.json of attempt ``index``; a balanced order records its order seed (``index``)."""
    started = EPOCH + (index + 1) * _ATTEMPT_SPACING
    document = {
        "attempt_id": f"r{index:0{width}d}",
        "round": index,
        "candidate": _candidate_label(scenario, model),
        "baseline": f"simulated baseline (seed {seed})",
        "status": "completed",
        "declared_at": _timestamp(started - _DECLARED_BEFORE),
        "started_at": _timestamp(started),
    }
    return {**document, "order_seed": index} if balanced else document


def run_lines(runs: Runs, attempt: int) -> Iterator[dict[str, Any]]:
    """The measurements.jsonl lines of one attempt, baseline then candidate per repetition."""
    seconds = runs.seconds[attempt].tolist()
    metric = runs.metric[attempt].tolist()
    dram = runs.dram_bytes[attempt].tolist()
    orders = runs.order[attempt].tolist() if runs.order is not None else None
    per_rep = zip(seconds, metric, dram, strict=True)
    for rep, (rep_seconds, rep_metric, rep_dram) in enumerate(per_rep):
        sides = zip(SIDES, rep_seconds, rep_metric, rep_dram, strict=True)
        for index, (side, run_seconds, value, dram_bytes) in enumerate(sides):
            line = {
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
            yield line if orders is None else {**line, "order": orders[rep][index]}


@dataclass(frozen=True)
class CampaignDraw:
    """One simulated campaign: what ``write_simulated_campaign`` writes as files and
    ``campaign_tables`` builds as tables, from the same draws."""

    scenario: Scenario
    repetitions: int
    attempts: int
    seed: int
    model: Model
    noise: Noise = "lognormal"
    order: Order = "baseline_first"

    @property
    def campaign_id(self) -> str:
        return campaign_id(self.scenario, self.repetitions, self.noise)

    def runs(self) -> Runs:
        rng = campaign_generator(self.seed, self.scenario, self.repetitions, self.noise)
        return draw_runs(
            self.model,
            self.scenario,
            self.repetitions,
            self.attempts,
            rng,
            noise=self.noise,
            order=self.order,
        )

    def documents(self) -> list[dict]:
        """Every attempt's attempt.json document, in order."""
        width = max(3, len(str(self.attempts - 1)))
        balanced = self.order == "balanced"
        return [
            attempt_document(i, width, self.scenario, self.model, self.seed, balanced=balanced)
            for i in range(self.attempts)
        ]


def write_simulated_campaign(out_dir: Path, draw: CampaignDraw) -> SimulatedCampaign:
    """Draw and write one campaign: ``<out_dir>/<scenario>[-<noise>]-r<RR>/``."""
    cid, runs = draw.campaign_id, draw.runs()
    folder = write_campaign(
        out_dir, cid, created_at=_timestamp(EPOCH), metric=METRIC, policy=draw.model.policy()
    )
    for index, document in enumerate(draw.documents()):
        write_attempt(folder, document, run_lines(runs, index), mechanism=MECHANISM)
    return SimulatedCampaign(cid, draw.scenario, draw.repetitions, draw.attempts, folder)


def check_plan(
    scenarios: Sequence[str], repetitions: Sequence[int], attempts: int, seed: int
) -> None:
    if not scenarios or any(s not in ALL_SCENARIOS for s in scenarios):
        raise UsageError(f"--scenario: must be among {', '.join(ALL_SCENARIOS)}, got {scenarios}")
    if not repetitions or any(r < 1 for r in repetitions):
        raise UsageError(f"--repetitions: each must be >= 1, got {list(repetitions)}")
    if len(set(repetitions)) != len(repetitions):
        raise UsageError(f"--repetitions: duplicate value in {list(repetitions)}")
    if attempts < 1:
        raise UsageError(f"--attempts: must be >= 1, got {attempts}")
    if seed < 0:
        raise UsageError(f"--data-seed: must be >= 0, got {seed}")


def simulate(
    out_dir: Path,
    *,
    scenarios: Sequence[Scenario] = SCENARIOS,
    repetitions: Sequence[int] = DEFAULT_REPETITIONS,
    attempts: int = DEFAULT_ATTEMPTS,
    seed: int = 0,
    model: Model | None = None,
    noise: Noise = "lognormal",
    order: Order = "baseline_first",
    announce: Callable[[str], object] | None = None,
) -> list[SimulatedCampaign]:
    """Write one campaign per (scenario, repetition count) under ``out_dir``.

    Existing campaign folders are never overwritten (stale attempts of an earlier, larger run
    would otherwise be mixed in): the whole call is refused before anything is written.
    ``announce`` gets the size and time estimate once the arguments are checked, when the run
    is long (pipeline.study.estimate)."""
    model = model or Model()
    model.check()
    check_plan(scenarios, repetitions, attempts, seed)
    plan = [(s, r) for s in scenarios for r in repetitions]
    for scenario, reps in plan:
        folder = out_dir / campaign_id(scenario, reps, noise)
        if folder.exists():
            raise UsageError(f"{folder}: already exists; remove it or choose another OUT_DIR")
    seconds = estimate.simulate_seconds(attempts, repetitions, len(scenarios))
    if announce is not None and seconds >= estimate.LONG_SECONDS:
        announce(estimate.simulate_estimate(attempts, repetitions, len(scenarios)))
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        write_simulated_campaign(
            out_dir, CampaignDraw(s, r, attempts, seed, model, noise=noise, order=order)
        )
        for s, r in plan
    ]


# -- the same campaign as store tables -----------------------------------------------------------
def _codes(names: Sequence[str], codes: np.ndarray) -> pl.Series:
    import polars as pl

    return pl.Series(list(names), dtype=pl.String).gather(codes)


def campaign_tables(draw: CampaignDraw) -> dict[str, pl.DataFrame]:
    """The input tables that ``ingest`` makes of ``write_simulated_campaign``'s folder, built
    from the draws directly (calibrate: no JSON to write and parse). Equal to ingest's tables
    except ``inputs_sha256`` and ``source_dir``, which name files that do not exist here
    (tests/test_calibrate.py checks it)."""
    import numpy as np
    import polars as pl

    from pipeline.contract.policy import canonical_policy, policy_sha256, with_defaults
    from pipeline.contract.schemas import table
    from pipeline.store.integrity import NO_PLAN
    from pipeline.study.stored import campaign_bytes, mechanism_bytes

    cid, runs, docs = draw.campaign_id, draw.runs(), draw.documents()
    attempts, repetitions, seed, model = draw.attempts, draw.repetitions, draw.seed, draw.model
    ids = [d["attempt_id"] for d in docs]
    mechanism = mechanism_bytes(MECHANISM)
    digest = hashlib.sha256(mechanism).hexdigest()
    key = {"campaign_id": cid}
    attempts_frame = pl.DataFrame(
        {
            **key,
            "attempt_id": ids,
            "round": [d["round"] for d in docs],
            "candidate": [d["candidate"] for d in docs],
            "baseline": [d["baseline"] for d in docs],
            "status": "completed",
            "declared_at": [
                EPOCH + (i + 1) * _ATTEMPT_SPACING - _DECLARED_BEFORE for i in range(attempts)
            ],
            "started_at": [EPOCH + (i + 1) * _ATTEMPT_SPACING for i in range(attempts)],
            "mechanism_sha256": digest,
            "mechanism_sha256_actual": digest,
            "mechanism_sha256_first_seen": digest,
            "hypothesis": MECHANISM["hypothesis"],
            "n_lines": 2 * repetitions,
            "inputs_sha256": [
                hashlib.sha256(f"{cid}/{a}/{seed}".encode()).hexdigest() for a in ids
            ],
            "source_dir": [f"(calibrate, in memory)/{cid}/{a}" for a in ids],
            "order_seed": pl.Series([d.get("order_seed") for d in docs], dtype=pl.Int64),
            "sequential_sha256_first_seen": NO_PLAN,  # fixed-n rounds: no stopping plan
            "commands_sha256_first_seen": NO_PLAN,  # simulated rounds record no commands
            "n_pairs": repetitions,  # every simulated run is ok
        }
    )
    policy = model.policy()
    canonical = canonical_policy(policy)
    source = campaign_bytes(cid, created_at=_timestamp(EPOCH), metric=METRIC, policy=policy)
    campaigns = pl.DataFrame(
        {
            **key,
            "kind": "project",
            "created_at": EPOCH,
            "metric_name": METRIC["name"],
            "metric_better": METRIC["better"],
            **{k: [v] for k, v in with_defaults(policy).items()},
            "policy_json": canonical.decode(),
            "policy_sha256": policy_sha256(policy),
            "policy_sha256_actual": policy_sha256(policy),
            "source_sha256": hashlib.sha256(source).hexdigest(),
        }
    )
    shape = runs.seconds.shape
    cell = np.indices(shape).reshape(len(shape), -1)
    run = np.indices(shape[:3]).reshape(3, -1)
    steps = [f"decode-{k}" for k in range(model.steps)]
    breakdown = pl.DataFrame(
        {
            **key,
            "attempt_id": _codes(ids, cell[0]),
            "side": _codes(SIDES, cell[2]),
            "repetition": cell[1],
            "step": _codes(steps, cell[3]),
            "region": _codes(REGIONS, cell[4]),
            "seconds": runs.seconds.ravel(),
        }
    )
    run_keys = {
        **key,
        "attempt_id": _codes(ids, run[0]),
        "side": _codes(SIDES, run[2]),
        "repetition": run[1],
    }
    order_column = (
        pl.Series(runs.order.ravel(), dtype=pl.Int64)
        if runs.order is not None
        else pl.repeat(None, run.shape[1], dtype=pl.Int64, eager=True)
    )
    samples = pl.DataFrame(
        {
            **run_keys,
            "status": "ok",
            "metric": runs.metric.ravel(),
            "line": run[1] * 2 + run[2] + 1,
            "order": order_column,
        }
    )
    counters = pl.concat(
        [
            pl.DataFrame(
                {
                    **run_keys,
                    "counter": "kernel_launches",
                    "value": np.full(run.shape[1], float(runs.kernel_launches)),
                }
            ),
            pl.DataFrame({**run_keys, "counter": "dram_bytes", "value": runs.dram_bytes.ravel()}),
        ]
    )
    exp = np.indices((attempts, len(MECHANISM["expectations"]))).reshape(2, -1)
    items = MECHANISM["expectations"]
    expectations = pl.DataFrame(
        {
            **key,
            "attempt_id": _codes(ids, exp[0]),
            "position": exp[1],
            **{f: _codes([e[f] for e in items], exp[1]) for f in ("target", "name", "expect")},
        }
    )
    frames = {
        "campaigns": campaigns,
        "attempts": attempts_frame,
        "samples": samples,
        "breakdown": breakdown,
        "counters": counters,
        "expectations": expectations,
    }
    return {name: table(name).conform(f.lazy()).collect() for name, f in frames.items()}
