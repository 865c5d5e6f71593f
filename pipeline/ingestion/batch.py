"""What the fast engine's checks give for a batch of attempts (:class:`Checked`: which attempts
are accepted, and their run, breakdown and counter rows), and the store's ``samples``,
``breakdown`` and ``counters`` rows made from it (:func:`run_frames`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.contract.schemas import table


@dataclass(frozen=True)
class Checked:
    """Which attempts of a batch the fast path accepts, and their run, breakdown and counter
    rows keyed by ``attempt`` (position in the batch) and ``run`` (line index)."""

    accepted: np.ndarray
    runs: pl.DataFrame  # attempt, side, repetition, status, metric, line
    breakdown: pl.DataFrame  # run, step, region, seconds
    counters: pl.DataFrame  # run, counter, value


_RUN_SCHEMA = pl.Schema(
    {
        "attempt": pl.Int64(),
        "side": pl.String(),
        "repetition": pl.Int64(),
        "status": pl.String(),
        "metric": pl.Float64(),
        "line": pl.Int64(),
        "order": pl.Int64(),
        "started_at": pl.Datetime("us", "UTC"),
        "finished_at": pl.Datetime("us", "UTC"),
    }
)


RUN_TABLES = ("samples", "breakdown", "counters")


def run_frames(
    campaign_ids: Sequence[str], attempt_ids: Sequence[str], checked: Checked, keep: np.ndarray
) -> dict[str, pl.DataFrame]:
    """``samples``, ``breakdown`` and ``counters`` rows of the kept attempts of a batch (each
    attempt's campaign and id given by position), in file order, each with the attempt's
    position in the batch as ``_pos``."""
    position = checked.runs["attempt"].to_numpy()
    runs = checked.runs.with_columns(
        campaign_id=pl.Series(list(campaign_ids), dtype=pl.String).gather(position),
        attempt_id=pl.Series(list(attempt_ids), dtype=pl.String).gather(position),
        _keep=pl.Series(keep).gather(position),
    ).rename({"attempt": "_pos"})
    key = runs.select("campaign_id", "attempt_id", "side", "repetition", "_pos", "_keep")
    out = {"samples": runs}
    for name, cells in (("breakdown", checked.breakdown), ("counters", checked.counters)):
        out[name] = pl.concat([key[cells["run"]], cells.drop("run")], how="horizontal")
    return {
        name: frame.filter("_keep").select(
            *(pl.col(c).cast(t) for c, t in table(name).polars_schema().items()), "_pos"
        )
        for name, frame in out.items()
    }
