"""explain-pipeline: decide whether a performance improvement is real and explained.

The Python API (docs/python.md)::

    from pipeline import open_store, ingest, assess, query

The API names are loaded on first use (PEP 562), so ``import pipeline`` alone, and the command
line's ``--help``, import neither Polars nor NumPy nor PyArrow.
"""

from __future__ import annotations

import importlib
import sys
import types
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


class _Package(types.ModuleType):
    """Keeps ``pipeline.ingest`` and ``pipeline.assess`` bound to the API functions.

    Python binds every submodule it loads as an attribute of its package, so loading the package
    ``pipeline/ingest/`` would otherwise replace the function ``pipeline.ingest``, and what
    ``from pipeline import ingest`` returns would depend on what was imported before. Subpackages
    stay reachable as always through ``from pipeline.ingest.attempts import ...`` (``sys.modules``).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
