"""The Python API: ``from pipeline import open_store, ingest, assess, query``.

Four functions over one store, with the same rules and the same results as the commands
(`explain-pipeline ingest | assess | query`); docs/python.md walks through them. Errors a caller can
act on (an unknown campaign, bad SQL, a store that cannot be read) raise
:class:`pipeline.errors.ExplainError` with the message the command would print; nothing is printed
and nothing calls ``sys.exit``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

# `from pipeline import assess` would give this module's own function (pipeline/__init__.py keeps
# the API names bound to the API), so the implementations are imported from their modules by name.
from pipeline.assessment.campaigns import AssessResult
from pipeline.assessment.campaigns import assess as _assess
from pipeline.contract.files import ReadMode
from pipeline.contract.policy import PolicyValue
from pipeline.engines import Engine
from pipeline.ingestion.attempts import IngestReport
from pipeline.ingestion.attempts import ingest as _ingest
from pipeline.store.query import run_sql
from pipeline.store.tables import Store

PathLike = str | os.PathLike[str]


def open_store(path: PathLike | None = None, *, create: bool = False) -> Store:
    """The store at ``path``; default ``$EXPLAIN_STORE``, else ``./.explain-store``.

    A path that holds no store raises ``ExplainError`` (``no store at ...``, as the commands
    say) and nothing is created, so a mistyped path is not an empty store. ``create=True``
    opens a store to be made: the folder need not exist yet, the first :func:`ingest` creates
    it. Opening a store whose last write was interrupted after its commit point finishes that
    write (see docs/contract.md, the store).
    """
    if create:
        return Store.open(path)
    return Store.open_existing(path)


def ingest(
    source: PathLike,
    store: Store,
    *,
    progress: bool = False,
    engine: Engine | None = None,
    mode: ReadMode = "fast",
) -> IngestReport:
    """Validate the stored attempts under ``source`` and write them into ``store``.

    ``source`` is an attempts folder (one subfolder per campaign) or a single campaign folder.
    Rejected attempts do not raise: they are listed in ``report.attempts`` (``outcome ==
    "rejected"``) and ``report.issues`` (one :class:`pipeline.ingestion.files.Issue` per problem,
    its ``str()`` is the one-line message ``file:line: field "x": reason [code]``). A missing
    ``source`` folder or a store that cannot be written raises ``ExplainError``. ``engine`` runs
    the validation elsewhere (``pipeline.engines.open_engine("ray")``); this process writes.
    ``mode="precise"`` checks every file with the per-line validator: the same tables, slower.
    """
    return _ingest(Path(source), store, progress=progress, engine=engine, mode=mode)


def assess(
    store: Store,
    campaign_ids: str | Sequence[str] | None = None,
    *,
    what_if: Mapping[str, PolicyValue] | None = None,
    write: bool = True,
    engine: Engine | None = None,
) -> AssessResult:
    """Comparisons, outcomes and verdicts of the campaigns ``campaign_ids`` (None: every one).

    The result's ``.assessments``, ``.comparisons`` and ``.outcomes`` are Polars DataFrames with the
    columns of the tables of the same names; ``.blocked`` lists the integrity errors of blocked
    campaigns (they get no rows elsewhere) and ``.exit_code`` is what the command would exit with.
    Results are written to the store unless ``write=False``. ``what_if`` (e.g.
    ``{"decision": "paired", "require_explanation": True}``) computes verdicts under another
    policy for comparison and never writes; ``.frozen`` then holds the frozen policy's verdicts.
    ``engine`` computes the batches elsewhere (``pipeline.engines.open_engine("ray")``); the
    results are the same and this process alone writes.
    """
    ids = [campaign_ids] if isinstance(campaign_ids, str) else campaign_ids
    return _assess(store, ids, what_if=what_if, write=write, engine=engine)


def query(store: Store, sql: str) -> pl.DataFrame:
    """The result of one SQL statement (Polars SQL) over every table of ``store``.

    A table not written yet is empty with its columns. Bad SQL raises ``ExplainError``.
    """
    return run_sql(store, sql)


__all__ = ["AssessResult", "IngestReport", "Store", "assess", "ingest", "open_store", "query"]
