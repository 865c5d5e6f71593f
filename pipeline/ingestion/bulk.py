"""The fast engine of ingest's reader: many attempts' files checked at once, as columns.

It accepts an attempt only when every file certainly satisfies the schemas and every rule of the
precise engine (:mod:`pipeline.ingestion.rules` and the modules beside it; property tests hold it
to that); any other attempt goes to the precise validator, which accepts it too or names every
error. So the errors and the stored rows are the precise path's; only their cost changes.

    columnar.py  the usual file, every line of one shape: Arrow's JSON reader, checks as columns
    decoders.py  the typed decoders (msgspec) for the rest, and for the JSON documents
    batch.py     what the check of a batch gives (Checked), the store's rows from it (run_frames)

How each keeps the rules: see the comments in columnar.py and decoders.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import polars as pl

from pipeline.ingestion.batch import Checked
from pipeline.ingestion.columnar import read_columnar
from pipeline.ingestion.decoders import decode_and_check, parsed_runs


def check_lines(bodies: Sequence[bytes]) -> Checked:
    """Check the measurements files of a batch of attempts at once: the columnar reader first,
    the typed decoders for the files it does not vouch for."""
    vouched, parts = read_columnar(bodies)
    rest = np.flatnonzero(~vouched)
    accepted = vouched.copy()
    if len(rest):
        decoded = decode_and_check([bodies[i] for i in rest.tolist()])
        accepted[rest] = decoded.accepted
        at = pl.Series(rest).gather(decoded.runs["attempt"].to_numpy())
        parts.append(replace(decoded, runs=decoded.runs.with_columns(attempt=at)))
    if len(parts) == 1:
        return replace(parts[0], accepted=accepted)
    offsets = np.cumsum([0] + [p.runs.height for p in parts])
    shifted = [
        (p.breakdown.with_columns(pl.col("run") + o), p.counters.with_columns(pl.col("run") + o))
        for p, o in zip(parts, offsets.tolist(), strict=False)
    ]
    return Checked(
        accepted,
        pl.concat([p.runs for p in parts]),
        pl.concat([b for b, _ in shifted]),
        pl.concat([c for _, c in shifted]),
    )


def nothing_checked(n: int) -> Checked:
    """No attempt of a batch of ``n`` accepted, no rows: the precise mode's bulk check."""
    return replace(parsed_runs([]), accepted=np.zeros(n, bool))
