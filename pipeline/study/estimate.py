"""What a simulation will cost, said before it starts.

`simulate` and `calibrate` run for minutes and write hundreds of megabytes at their default
sizes; a user should know that before pressing Enter, not after. Both scale with the number of
simulated runs (attempts x repetitions x 2 sides), so one rate per command gives the estimate.
The rates were measured with `explain-pipeline simulate sim/ --attempts 100` (1.45 s, 22 MB for
15,200 runs) and `calibrate --attempts 100` / `--attempts 200` (9.8 s for 68,400 runs, 18 s for
136,800) on the project's 2-core machine at a load average of about 3.5, rounded up: a rough
guide, within a factor of two or so of what another machine does.
"""

from __future__ import annotations

from collections.abc import Sequence

SIMULATE_SECONDS_PER_RUN = 0.00007
SIMULATE_BYTES_PER_RUN = 1500
CALIBRATE_SECONDS_PER_RUN = 0.00014
START_SECONDS = 1.0  # start-up and the fixed part of each command
LONG_SECONDS = 10.0
"""Commands estimated to take longer say so before they start; shorter ones stay quiet."""


def runs(attempts: int, repetitions: Sequence[int], campaigns_per_count: int) -> int:
    """Simulated runs: every attempt of every campaign runs both sides once per repetition."""
    return 2 * attempts * sum(repetitions) * campaigns_per_count


def duration(seconds: float) -> str:
    """A rough duration: "a few seconds", "about 20 s", "about 3 min"."""
    if seconds < 5:
        return "a few seconds"
    if seconds < 90:
        return f"about {round(seconds, -1 if seconds >= 15 else 0):.0f} s"
    return f"about {round(seconds / 60):.0f} min"


def size(n_bytes: float) -> str:
    return f"about {n_bytes / 1e6:,.0f} MB" if n_bytes >= 1e6 else "under 1 MB"


def simulate_seconds(attempts: int, repetitions: Sequence[int], scenarios: int) -> float:
    return START_SECONDS + runs(attempts, repetitions, scenarios) * SIMULATE_SECONDS_PER_RUN


def calibrate_seconds(attempts: int, repetitions: Sequence[int], campaigns: int) -> float:
    return START_SECONDS + runs(attempts, repetitions, campaigns) * CALIBRATE_SECONDS_PER_RUN


def simulate_estimate(attempts: int, repetitions: Sequence[int], scenarios: int) -> str:
    n = runs(attempts, repetitions, scenarios)
    seconds = simulate_seconds(attempts, repetitions, scenarios)
    campaigns = scenarios * len(repetitions)
    return (
        f"simulate: {campaigns} campaigns, {campaigns * attempts:,} attempts, {n:,} runs: "
        f"{size(n * SIMULATE_BYTES_PER_RUN)} on disk, "
        f"{duration(seconds)} on a 2-core machine"
    )


def calibrate_estimate(
    attempts: int, repetitions: Sequence[int], noises: int, scenarios: int
) -> str:
    n = runs(attempts, repetitions, scenarios * noises)
    seconds = calibrate_seconds(attempts, repetitions, scenarios * noises)
    line = (
        f"calibrate: {n:,} simulated runs ({noises} noise families x {len(repetitions)} "
        f"repetition counts x {scenarios} scenarios x {attempts:,} attempts), "
        f"{duration(seconds)} on a 2-core machine"
    )
    if seconds >= 90:
        quick = calibrate_seconds(200, repetitions, scenarios * noises)
        line += f" (--attempts 200: {duration(quick)})"
    return line
