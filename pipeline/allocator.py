"""Polars' memory allocator, set up for commands whose peak memory matters.

Polars allocates with jemalloc, which reads its settings from ``_RJEM_MALLOC_CONF`` once, as
Polars loads; Polars puts its own defaults first (``dirty_decay_ms:500,muzzy_decay_ms:1000``)
and a value found there after them (the later one wins). Freed pages are kept for a while to be
reused: "dirty" ones for half a second, then "muzzy" ones (handed back lazily, still counted as
resident) for another second. A command that frees and allocates large columns piece after
piece sees its peak resident memory grow by what is kept.
"""

from __future__ import annotations

import os
import sys

ALLOCATOR = "_RJEM_MALLOC_CONF"


def load_polars(setting: str) -> None:
    """Load Polars with ``setting`` added to its allocator's. The setting lives only while
    Polars loads (programs this process starts, such as the commands `round` runs, see Polars'
    own default, as without it), and is not made when the user set one or Polars is already
    loaded (then it does nothing: a library user keeps control of their process)."""
    if "polars" in sys.modules or ALLOCATOR in os.environ:
        return
    os.environ[ALLOCATOR] = setting
    try:
        import polars  # noqa: F401
    finally:
        polars_default = os.environ.pop(ALLOCATOR, "").removesuffix(setting)
        if polars_default.rstrip(","):
            os.environ[ALLOCATOR] = polars_default.rstrip(",")
