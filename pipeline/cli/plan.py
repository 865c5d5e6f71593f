"""`explain-pipeline plan`: the pairs a comparison needs, priced before it runs.

Thin: parses the options, calls pipeline.study.plan, prints pipeline.output.text's table
(imported only when this command runs)."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.common import command, declared_range
from pipeline.contract.declare import SCHEDULE_DEFAULTS
from pipeline.errors import ExitCode


@command("plan")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--effect-pct",
    default="2,5,10",
    show_default=True,
    metavar="X,Y,...",
    help="True gains to detect, in percent.",
)
@click.option(
    "--max-repetitions",
    type=declared_range("attempt", "sequential", "max_pairs"),
    default=None,
    help="The --until-decided maximum the sequential columns simulate (default "
    f"{SCHEDULE_DEFAULTS['max_pairs']}, or the first look when the campaign's min_pairs is "
    "larger).",
)
def plan_command(folder: Path, effect_pct: str, max_repetitions: int | None) -> int:
    """Price a comparison before running it: the pairs needed to detect given gains.

    From the spread of the pairs already recorded in the campaign FOLDER (the metric, and
    every region or counter a mechanism declares to decrease or increase), under the
    campaign's frozen gate and interval: the pairs a fixed round needs for 80% and 90% power,
    and what a round --until-decided (looks every 2 pairs, in a campaign deciding every
    benchmark every 4 from 12, up to --max-repetitions) would cost: its power, mean and 90th
    percentile of pairs. See docs/record.md.

    \b
    Example:
      explain-pipeline plan attempts/matmul
      explain-pipeline plan attempts/matmul --effect-pct 1,3 --max-repetitions 100
    """
    from pipeline.study.plan import parse_effects, plan

    result = plan(folder, parse_effects(effect_pct), max_pairs=max_repetitions)
    from pipeline.output.sinks import show

    show(result)
    return int(ExitCode.OK)


COMMANDS: list[click.Command] = [plan_command]
