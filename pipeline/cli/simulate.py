"""CLI: `simulate` (synthetic A/A and known-gain campaigns) and `calibrate` (the study on them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click

from pipeline.errors import ExitCode
from pipeline.simulate import Model

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
    "gain_factor": "Scenario gain: factor on the candidate's attention and dram_bytes.",
    "min_improvement_pct": "Policy gate min_improvement_pct of the simulated campaigns.",
    "resamples": "Policy bootstrap resamples of the simulated campaigns.",
    "confidence": "Policy interval confidence of the simulated campaigns.",
    "policy_seed": "Policy bootstrap seed of the simulated campaigns (not the data seed).",
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
seed_option = click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Data seed."
)


@click.command("simulate")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--scenario",
    type=click.Choice(["aa", "gain", "both"]),
    default="both",
    show_default=True,
    help="aa: identical sides; gain: the candidate's attention and dram_bytes x gain factor.",
)
@repetitions_option
@click.option(
    "--attempts", type=click.IntRange(min=1), default=1000, show_default=True,
    help="Attempts per campaign.",
)
@seed_option
@model_options
def simulate_command(
    out_dir: Path, scenario: str, repetitions: tuple[int, ...], attempts: int, seed: int,
    **model: Any,
) -> int:
    """Write synthetic A/A and known-gain campaigns (docs/contract.md §7) as stored attempts.

    One campaign per scenario and repetition count (aa-r03, gain-r10, ...), each with
    ATTEMPTS attempts that declare: attention decrease, dram_bytes decrease, sampling
    unchanged. The policy is the median rule without the explanation gate. The same seed
    gives byte-identical files.

    \b
    Example:
      explain-pipeline simulate /tmp/sim --scenario aa --repetitions 5 --attempts 50
      explain-pipeline ingest /tmp/sim && explain-pipeline assess --all
    """
    from pipeline.simulate import SCENARIOS, Scenario, simulate

    scenarios = SCENARIOS if scenario == "both" else (cast(Scenario, scenario),)
    written = simulate(
        out_dir, scenarios=scenarios, repetitions=repetitions, attempts=attempts, seed=seed,
        model=_model(model),
    )
    for campaign in written:
        click.echo(f"{campaign.path}: {campaign.attempts} attempts")
    click.echo(f"seed {seed}: {len(written)} campaigns written to {out_dir}")
    return ExitCode.OK


@click.command("calibrate")
@click.option(
    "--attempts", type=click.IntRange(min=1), default=1000, show_default=True,
    help="Attempts per scenario and repetition count.",
)
@seed_option
@repetitions_option
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
    show_default=True, help="Output format.",
)
@model_options
def calibrate_command(
    attempts: int, seed: int, repetitions: tuple[int, ...], fmt: str, **model: Any
) -> int:
    """Measure the decision rules on simulated A/A and known-gain campaigns (docs/contract.md §7).

    Simulates both scenarios for every repetition count into a temporary folder, runs the
    real ingest and assess on them in a temporary store, and prints per repetition count:
    the A/A false PASS rate of the median rule, the paired rule and paired +
    require_explanation, the coverage of the 95% metric interval, the share of false
    explanations, and the gain scenario's PASS and explained shares. The same seed gives
    byte-identical output. A progress bar is shown on stderr when it is a terminal.

    \b
    Example:
      explain-pipeline calibrate
      explain-pipeline calibrate --attempts 200 --resamples 2000 --format csv
    """
    from pipeline.calibrate import calibrate, render

    result = calibrate(
        attempts=attempts, seed=seed, repetitions=repetitions, model=_model(model),
        progress=None,
    )
    click.echo(render(result, fmt), nl=False)
    return ExitCode.OK


COMMANDS: list[click.Command] = [simulate_command, calibrate_command]
