"""CLI: `simulate` (synthetic A/A and known-gain campaigns) and `calibrate` (the study on them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click

from pipeline.cli.common import command, declared_range, format_option
from pipeline.contract.declare import SCHEDULE_DEFAULTS
from pipeline.errors import ExitCode, UsageError
from pipeline.study.simulate import NOISES, Model

_MODEL_HELP: dict[str, str] = {
    "steps": "Steps per run (decode-0 .. decode-N-1).",
    "step_seconds": "Time of one step before noise, seconds.",
    "share_attention": "Share of the step time in region attention.",
    "share_mlp": "Share of the step time in region mlp.",
    "share_sampling": "Share of the step time in region sampling (the declared reference).",
    "share_comm": "Share of the step time in region comm.",
    "sigma_rep": "Log-normal sigma of the per-repetition factor shared by both sides.",
    "sigma_run": "Log-normal sigma of the per-run factor shared by every region of the run.",
    "sigma_cell": "Log-normal sigma of the independent per step-and-region factor.",
    "launches_per_step": "kernel_launches per step (exact).",
    "dram_bytes_per_step": "dram_bytes per step before noise.",
    "sigma_dram": "Sigma of the normal relative noise of dram_bytes.",
    "gain_factor": "Scenario gain: factor on the candidate's attention and dram_bytes "
    "(scenario elsewhere: the same saving in mlp).",
    "outlier_rate": "Noise outliers: probability that a run is a slow outlier.",
    "outlier_slowdown": "Noise outliers: how much slower an outlier run is (0.3 = 30%).",
    "position_effect_pct": "The run that goes second in its repetition is this many percent "
    "slower.",
    "min_improvement_pct": "Policy gate min_improvement_pct of the simulated campaigns.",
    "resamples": "Policy bootstrap resamples of the simulated campaigns.",
    "confidence": "Policy interval confidence of the simulated campaigns.",
    "policy_seed": "The simulated campaigns' policy field seed: the bootstrap seed (what "
    "`assess --what-if seed=N` overrides); not the data seed.",
    "min_pairs": "Policy min_pairs of the simulated campaigns.",
}


def _parse_repetitions(_ctx: Any, _param: Any, value: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    return counts


def model_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """One option per Model field, the docs/contract.md §7 value as default."""
    for spec in reversed(dataclasses.fields(Model)):
        default = spec.default
        command = click.option(
            f"--{spec.name.replace('_', '-')}",
            spec.name,
            type=type(default),
            default=default,
            show_default=True,
            help=_MODEL_HELP[spec.name],
        )(command)
    return command


def _model(options: dict[str, Any]) -> Model:
    names = {f.name for f in dataclasses.fields(Model)}
    return Model(**{k: v for k, v in options.items() if k in names})


repetitions_option = click.option(
    "--repetitions",
    default="3,5,10,20",
    show_default=True,
    callback=_parse_repetitions,
    help="Repetition counts, one campaign per count and scenario.",
)


# "seed" alone always means the policy's bootstrap seed (policy field `seed`, `--what-if seed=N`,
# here --policy-seed); the generator of the simulated runs has its own name, --data-seed.
def _old_seed(_ctx: Any, _param: Any, value: int | None) -> None:
    if value is not None:
        raise UsageError(
            "--seed is now --data-seed (the seed of the simulated data); the simulated "
            "campaigns' bootstrap seed is --policy-seed"
        )


def _parse_gains(_ctx: Any, _param: Any, value: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}") from None


def _parse_noises(_ctx: Any, _param: Any, value: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in value.split(","))
    if any(n not in NOISES for n in names) or len(set(names)) != len(names):
        raise click.BadParameter(
            f"expected distinct values among {', '.join(NOISES)}, got {value!r}"
        )
    return names


def seed_option(command: Callable[..., Any]) -> Callable[..., Any]:
    data_seed = click.option(
        "--data-seed",
        "seed",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Seed of the simulated data: the same seed gives byte-identical output. (The "
        "bootstrap seed of the simulated policy is --policy-seed.)",
    )
    old = click.option(
        "--seed",
        "old_seed",
        type=int,
        default=None,
        hidden=True,
        expose_value=False,
        callback=_old_seed,
    )
    return data_seed(old(command))


@command("simulate")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--scenario",
    type=click.Choice(["aa", "gain", "elsewhere", "both"]),
    default="both",
    show_default=True,
    help="aa: identical sides; gain: the candidate's attention and dram_bytes x gain factor; "
    "elsewhere: the same saving in mlp (undeclared); both: aa and gain.",
)
@click.option(
    "--noise",
    type=click.Choice(NOISES),
    default="lognormal",
    show_default=True,
    help="lognormal: the specified model; t3: Student-t(3) factors scaled to the same sigma; "
    "outliers: log-normal plus slow outlier runs.",
)
@click.option(
    "--order",
    type=click.Choice(["baseline_first", "balanced"]),
    default="baseline_first",
    show_default=True,
    help="Which side runs first in each repetition: always the baseline (the specified model), "
    "or balanced as the recorder does (attempt i's order seed is i).",
)
@repetitions_option
@click.option(
    "--attempts",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Attempts per campaign.",
)
@seed_option
@model_options
def simulate_command(
    out_dir: Path,
    scenario: str,
    noise: str,
    order: str,
    repetitions: tuple[int, ...],
    attempts: int,
    seed: int,
    **model: Any,
) -> int:
    """Write synthetic A/A and known-gain campaigns (docs/contract.md §7) as stored attempts.

    One campaign per scenario and repetition count (aa-r03, gain-r10, ...), each with
    ATTEMPTS attempts that declare: attention decrease, dram_bytes decrease, sampling
    unchanged. The policy is the median rule without the explanation gate. The same
    --data-seed gives byte-identical files.

    \b
    Example:
      explain-pipeline simulate /tmp/sim --scenario aa --repetitions 5 --attempts 50 \\
          --data-seed 1
      explain-pipeline ingest /tmp/sim && explain-pipeline assess --all
    """
    from pipeline.study.simulate import SCENARIOS, Noise, Order, Scenario, simulate

    scenarios = SCENARIOS if scenario == "both" else (cast(Scenario, scenario),)
    written = simulate(
        out_dir,
        scenarios=scenarios,
        repetitions=repetitions,
        attempts=attempts,
        seed=seed,
        model=_model(model),
        noise=cast(Noise, noise),
        order=cast(Order, order),
        announce=_announce,
    )
    for campaign in written:
        click.echo(f"{campaign.path}: {campaign.attempts} attempts")
    click.echo(f"data seed {seed}: {len(written)} campaigns written to {out_dir}")
    return ExitCode.OK


@command("calibrate")
@click.option(
    "--attempts",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="Attempts per scenario, noise and repetition count.",
)
@seed_option
@repetitions_option
@click.option(
    "--noise",
    "noises",
    default=",".join(NOISES),
    show_default=True,
    callback=_parse_noises,
    help="Noise families, comma-separated: lognormal, t3 (Student-t, 3 degrees of freedom, "
    "same sigma), outliers (log-normal plus slow outlier runs).",
)
@click.option(
    "--sequential",
    is_flag=True,
    help="Run the sequential study instead: rounds that stop when decided (sequential_t, with "
    "and without futility), peeking at fixed-n methods, and fixed-n rounds, per noise and true "
    "gain (docs/calibration.md, Sequential rounds).",
)
@click.option(
    "--suite",
    is_flag=True,
    help="Run the suite study instead: per-benchmark verdicts of simulated suites (--benchmarks, "
    "--correlations, --fixed-pairs), their family-wise false alarm and their power to catch one "
    "benchmark --slowdown-pct slower, against a bootstrap max-|t| and per-benchmark 95% "
    "directions (docs/calibration.md, Benchmark suites).",
)
@click.option(
    "--benchmarks",
    default="5,20,100",
    show_default=True,
    callback=_parse_repetitions,
    help="--suite: benchmarks per suite.",
)
@click.option(
    "--correlations",
    default="0,0.5,0.9",
    show_default=True,
    callback=_parse_gains,
    help="--suite: correlation the shared run-level factor puts between benchmarks of one run.",
)
@click.option(
    "--slowdown-pct",
    default="5,10",
    show_default=True,
    callback=_parse_gains,
    help="--suite: how much slower the one changed benchmark is, in percent.",
)
@click.option(
    "--spread",
    type=float,
    default=0.042,
    show_default=True,
    help="--suite: standard deviation of a benchmark's per-pair log-ratio.",
)
@click.option(
    "--margin-pct",
    type=declared_range("campaign", "policy", "margin_pct"),
    default=1.0,
    show_default=True,
    help="--suite: the margin of unchanged and regressed, in percent.",
)
@click.option(
    "--max-t-resamples",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="--suite: resamples of the bootstrap max-|t| compared with.",
)
@click.option(
    "--first-look",
    type=declared_range("attempt", "sequential", "first_look"),
    default=SCHEDULE_DEFAULTS["first_look"],
    show_default=True,
    help="--sequential: pairs at the first look.",
)
@click.option(
    "--look-every",
    type=declared_range("attempt", "sequential", "look_every"),
    default=SCHEDULE_DEFAULTS["look_every"],
    show_default=True,
    help="--sequential: pairs between looks.",
)
@click.option(
    "--max-pairs",
    type=declared_range("attempt", "sequential", "max_pairs"),
    default=SCHEDULE_DEFAULTS["max_pairs"],
    show_default=True,
    help="--sequential: pairs at the last look.",
)
@click.option(
    "--fixed-pairs",
    default="10,20",
    show_default=True,
    callback=_parse_repetitions,
    help="--sequential: pair counts of the fixed-n designs compared; --suite: pair counts of "
    "the suites.",
)
@click.option(
    "--gains",
    default="0,1,2,5,10",
    show_default=True,
    callback=_parse_gains,
    help="--sequential: true gains as multiples of the gate (min_improvement_pct).",
)
@click.option(
    "--campaigns",
    is_flag=True,
    help="Run the campaign study instead: campaigns of many rounds, the pick's selected "
    "estimate against a confirmation round, false adoptions with and without LORD++ "
    "(docs/calibration.md, Campaigns).",
)
@click.option(
    "--campaign-rounds",
    default="10,30,100",
    show_default=True,
    callback=_parse_repetitions,
    help="--campaigns: rounds per campaign, one row per count.",
)
@click.option(
    "--gain-share",
    type=click.FloatRange(0, 1),
    default=0.2,
    show_default=True,
    help="--campaigns: share of candidates truly faster.",
)
@click.option(
    "--gain-pct",
    type=float,
    default=3.0,
    show_default=True,
    help="--campaigns: how much faster they are, percent.",
)
@click.option(
    "--pairs",
    type=int,
    default=10,
    show_default=True,
    help="--campaigns: pairs of every round and of the confirmation.",
)
@click.option(
    "--lord-level",
    type=float,
    default=0.05,
    show_default=True,
    help="--campaigns: level of the LORD++ false-discovery rule over the rounds.",
)
@format_option("table", "json", "csv")
@model_options
def calibrate_command(
    attempts: int,
    seed: int,
    repetitions: tuple[int, ...],
    noises: tuple[str, ...],
    fmt: str,
    sequential: bool,
    first_look: int,
    look_every: int,
    max_pairs: int,
    fixed_pairs: tuple[int, ...],
    gains: tuple[float, ...],
    campaigns: bool,
    campaign_rounds: tuple[int, ...],
    gain_share: float,
    gain_pct: float,
    pairs: int,
    lord_level: float,
    suite: bool,
    benchmarks: tuple[int, ...],
    correlations: tuple[float, ...],
    slowdown_pct: tuple[float, ...],
    spread: float,
    margin_pct: float,
    max_t_resamples: int,
    **model: Any,
) -> int:
    """Measure the decision rules and interval methods on simulated campaigns.

    For every noise family and repetition count, simulates an A/A, a known-gain and an
    undeclared-gain ("elsewhere") campaign into a temporary store, assesses them with the
    real assess under each interval method (percentile, expanded_percentile, student_t) and
    prints: coverage of the metric interval, A/A false PASS of the paired rule and paired +
    require_explanation, false explanations, the paired estimate's bias, the gain scenario's
    PASS and explained shares, the mean explained fraction of both gain scenarios, and the
    median rule's rates. The same --data-seed gives byte-identical output. A progress bar is shown
    on stderr when it is a terminal.

    With --sequential: the per-pair metric log-ratios of the same model, vectorized over
    attempts, under every design and true gain: PASS rate, coverage at the stop, and the
    pairs used (mean, median, 90th percentile). --repetitions does not apply.

    With --campaigns: campaigns of --campaign-rounds rounds where --gain-share of the
    candidates are truly --gain-pct faster; per length, the PASSes and false adoptions per
    campaign, the pick's selected estimate against its true gain, a confirmation round's bias
    and coverage, the expected-by-chance count, and the same under LORD++. --attempts is the
    number of campaigns per length.

    With --suite: --attempts suites of each size, correlation, pair count and noise, decided
    per benchmark by assess's Bonferroni Student-t rule, by a bootstrap max-|t| and by
    per-benchmark 95% directions: identical code flagging any benchmark, and one benchmark
    --slowdown-pct slower caught (and others flagged). --repetitions does not apply.

    \b
    Example:
      explain-pipeline calibrate
      explain-pipeline calibrate --attempts 200 --resamples 2000 --format csv
      explain-pipeline calibrate --noise lognormal --position-effect-pct 3
      explain-pipeline calibrate --sequential
      explain-pipeline calibrate --campaigns
      explain-pipeline calibrate --suite --noise lognormal
    """
    from pipeline.study.calibrate import calibrate, render
    from pipeline.study.simulate import Noise

    chosen = [
        name
        for name, on in (
            ("--sequential", sequential),
            ("--suite", suite),
            ("--campaigns", campaigns),
        )
        if on
    ]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} are different studies: choose one")
    if campaigns:
        from pipeline.study import search

        design = search.Design(
            campaign_rounds, gain_share, gain_pct, pairs, "student_t", lord_level
        )
        searched = search.search_study(
            campaigns=attempts, seed=seed, design=design, model=_model(model)
        )
        click.echo(search.render(searched, fmt), nl=False)
        return ExitCode.OK
    ctx = click.get_current_context()
    repetitions_given = (
        ctx.get_parameter_source("repetitions") != click.core.ParameterSource.DEFAULT
    )
    if suite:
        if repetitions_given:
            raise UsageError("--repetitions does not apply with --suite (see --fixed-pairs)")
        from pipeline.study import suites

        cells = suites.SuiteDesign(
            suites=attempts,
            sizes=tuple(benchmarks),
            correlations=tuple(correlations),
            pairs=tuple(fixed_pairs),
            slowdowns=tuple(slowdown_pct),
            noises=tuple(cast(Noise, n) for n in noises),
            spread=spread,
            margin_pct=margin_pct,
            max_t_resamples=max_t_resamples,
        )
        suite_result = suites.suite_study(cells, seed=seed, model=_model(model))
        click.echo(suites.render(suite_result, fmt), nl=False)
        return ExitCode.OK
    if sequential:
        if repetitions_given:
            raise UsageError("--repetitions does not apply with --sequential (see --fixed-pairs)")
        from pipeline.assessment.sequential import Schedule
        from pipeline.study import sequential as study

        found = study.sequential_study(
            attempts=attempts,
            seed=seed,
            noises=[cast(Noise, n) for n in noises],
            plan=Schedule(first_look, look_every, max_pairs),
            fixed=fixed_pairs,
            gains=gains,
            model=_model(model),
        )
        click.echo(study.render(found, fmt), nl=False)
        return ExitCode.OK

    result = calibrate(
        attempts=attempts,
        seed=seed,
        repetitions=repetitions,
        model=_model(model),
        noises=[cast(Noise, n) for n in noises],
        progress=None,
        announce=_announce,
    )
    click.echo(render(result, fmt), nl=False)
    return ExitCode.OK


def _announce(text: str) -> None:
    """A long run's estimate, on stderr before it starts (pipeline.study.estimate)."""
    click.echo(text, err=True)


COMMANDS: list[click.Command] = [simulate_command, calibrate_command]
