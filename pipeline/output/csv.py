"""`--format csv`: one row per attempt (the columns of table assessments). What a row cannot
hold, the integrity errors and the attempts rejected at ingest, is in ``notes``, which the sink
writes to stderr."""

from __future__ import annotations

from functools import singledispatch

import polars as pl

from pipeline.assessment.campaigns import AssessResult
from pipeline.output.json import readable
from pipeline.output.text import integrity_lines, rejected_lines
from pipeline.output.views import parts, rejections, what_if_pairs


@singledispatch
def render(result: object, *, digests: bool = False) -> str:
    raise TypeError(f"no CSV for a {type(result).__name__}")


@render.register(AssessResult)
def assess(result: AssessResult, *, digests: bool = False) -> str:
    frame = readable(result.assessments, digests)
    if result.what_if:
        frame = frame.with_columns(pl.lit(what_if_pairs(result)).alias("what_if"))
    return frame.write_csv()


def notes(result: AssessResult) -> str:
    """The integrity errors and the rejected attempts, for stderr."""
    out = [integrity_lines(result.blocked)] if result.blocked.height else []
    out += [
        f"campaign {key[0]}: " + rejected_lines(rows)
        for key, rows in parts(rejections(result), "campaign_id").items()
    ]
    return "".join(out)
