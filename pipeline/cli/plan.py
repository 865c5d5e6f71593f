"""`explain-pipeline plan`: the pairs a comparison needs, priced before it runs.

Thin: parses the options, calls pipeline.study.plan, prints the table (imported only when
this command runs)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline.cli.common import command, declared_range
from pipeline.errors import ExitCode

if TYPE_CHECKING:
    from pipeline.study.plan import Plan


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
    default=40,
    show_default=True,
    help="The --until-decided maximum the sequential columns simulate.",
)
def plan_command(folder: Path, effect_pct: str, max_repetitions: int) -> int:
    """Price a comparison before running it: the pairs needed to detect given gains.

    From the spread of the pairs already recorded in the campaign FOLDER (the metric, and
    every region or counter a mechanism declares to decrease or increase), under the
    campaign's frozen gate and interval: the pairs a fixed round needs for 80% and 90% power,
    and what a round --until-decided (looks every 2 pairs up to --max-repetitions) would
    cost: its power, mean and 90th percentile of pairs. See docs/record.md.

    \b
    Example:
      explain-pipeline plan attempts/matmul
      explain-pipeline plan attempts/matmul --effect-pct 1,3 --max-repetitions 100
    """
    from pipeline.study.plan import parse_effects, plan

    result = plan(folder, parse_effects(effect_pct), max_pairs=max_repetitions)
    click.echo(render(result), nl=False)
    return int(ExitCode.OK)


def _pairs(value: int | None) -> str:
    return "never" if value is None else str(value)


def render(result: Plan) -> str:
    """The plan as a table: one line per quantity and gain."""
    from pipeline.study.plan import LIMIT, POWERS

    out = [
        f"campaign {result.campaign_id}: interval {result.interval}, gate "
        f"{result.gate_pct:g} % (metric), confidence {result.confidence:g}, min_pairs "
        f"{result.min_pairs}",
        f"sequential: round --until-decided, looks every 2 pairs from {result.first_look} "
        f"to {result.max_pairs}",
        "",
        f"{'quantity':<28} {'spread':>7} {'gain':>6} "
        + " ".join(f"{'fixed ' + format(p, '.0%'):>10}" for p in POWERS)
        + f" {'seq power':>10} {'seq mean':>9} {'seq p90':>8}",
    ]
    for row in result.rows:
        label = (
            row.spread.quantity
            if row.spread.quantity == "metric"
            else (f"{row.spread.quantity} {row.spread.name}")
        )
        seq = (
            ""
            if math.isnan(row.sequential_power)
            else (
                f" {row.sequential_power:>10.0%} {row.sequential_mean:>9.1f} "
                f"{row.sequential_p90:>8.0f}"
            )
        )
        out.append(
            f"{label[:28]:<28} {row.spread.sd:>7.4f} {row.effect_pct:>5g}% "
            + " ".join(f"{_pairs(row.fixed[p]):>10}" for p in POWERS)
            + seq
        )
    spread = result.rows[0].spread
    out += [
        "",
        f"spread: standard deviation of the per-pair log-ratio within each attempt, "
        f"pooled (metric: {spread.n_pairs} pairs in {spread.n_attempts} attempts); "
        "fixed: pairs of a fixed round for that power; never: the gain does not clear the "
        f"gate (or needs over {LIMIT:,} pairs)",
    ]
    return "\n".join(out) + "\n"


COMMANDS: list[click.Command] = [plan_command]
