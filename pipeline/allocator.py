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
POLARS_DEFAULT = "dirty_decay_ms:500,muzzy_decay_ms:1000"
"""What Polars writes into the variable as it loads: a program started by a process that loaded
Polars (a benchmark, a notebook, a test) inherits it, and that is not a setting of the user's."""


def _users_own(value: str) -> str:
    """``value`` without the copies of Polars' default it may carry."""
    parts = [p for p in value.replace(POLARS_DEFAULT, "").split(",") if p]
    return ",".join(parts)


def load_polars(setting: str) -> bool:
    """Load Polars with ``setting`` added to its allocator's; True when it was. The setting
    lives only while Polars loads (programs this process starts, such as the commands `round`
    runs, see Polars' own default, as without it), and is not made when the user set one or
    Polars is already loaded (a library user keeps control of their process)."""
    if "polars" in sys.modules or _users_own(os.environ.get(ALLOCATOR, "")):
        return False
    os.environ[ALLOCATOR] = setting
    try:
        import polars  # noqa: F401
    finally:
        polars_default = os.environ.pop(ALLOCATOR, "").removesuffix(setting).rstrip(",")
        if polars_default:
            os.environ[ALLOCATOR] = polars_default
    return True
