"""explain-pipeline: decide whether a performance improvement is real and explained.

The Python API (docs/python.md)::

    from pipeline import open_store, ingest, assess, query

The API names are loaded on first use (PEP 562), so ``import pipeline`` alone, and the command
line's ``--help``, import neither Polars nor NumPy nor PyArrow. No subpackage is named like an
API function (``ingestion/`` and ``assessment/`` hold what ``ingest`` and ``assess`` call), so
``pipeline.assess`` is the function whatever was imported before.

Where things go (each imports only the layers below it: tests/test_layers.py)::

    contract/    the one declaration of every document, table, name rule, policy default
    ingestion/   read, check and normalize stored attempts (a fast and a precise engine)
    store/       partitions, transactions, integrity
    assessment/  pairs, intervals (a registry: intervals.METHODS), explanation, verdicts,
                 power, staleness of stored verdicts
    record/      run commands and write stored attempts (options parsed once: record/options.py)
    importers/   profiler and harness formats (a registry: importers.registry.IMPORTERS)
    study/       simulate, calibrate, plan        report/  the HTML report
    output/      one module per output format over result objects; the sinks
    cli/         one thin command per file: options -> one library call -> sinks
    api.py       the documented Python API
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pipeline.version import __version__

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads them
    from pipeline.api import AssessResult, IngestReport, Store, assess, ingest, open_store, query
    from pipeline.errors import ExplainError

_EXPORTS = {
    "open_store": "pipeline.api",
    "ingest": "pipeline.api",
    "assess": "pipeline.api",
    "query": "pipeline.api",
    "AssessResult": "pipeline.api",
    "IngestReport": "pipeline.api",
    "Store": "pipeline.api",
    "ExplainError": "pipeline.errors",
}

__all__ = [
    "AssessResult",
    "ExplainError",
    "IngestReport",
    "Store",
    "__version__",
    "assess",
    "ingest",
    "open_store",
    "query",
]


def __getattr__(name: str) -> Any:
    """Load an API name on first access and keep it (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
