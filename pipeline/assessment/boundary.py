"""The ``sequential_t`` constant of a plan of looks: its pinned Monte Carlo and the two places it
is kept so that it is computed once, not on the first look of every process.

The recipe (contract §10): ``SIMULATIONS`` sequences of ``max_pairs`` standard normals from
``numpy.random.Generator(numpy.random.PCG64(BOUNDARY_SEED))`` (row ``i`` is sequence ``i``;
drawing them in blocks of rows gives the same numbers), the Student-t statistic of every row at
every look, ``M`` = the largest ``|t|`` of a row, and ``c = round(quantile(M, confidence,
method="linear"), DECIMALS)``. A million sequences put the Monte Carlo error of the error rate
that ``c`` achieves at ``sqrt(alpha (1 - alpha) / SIMULATIONS)``: 0.022 percentage point at
95%. That costs about 1.5 s of CPU for 40 pairs (30 s for 1,000), so the constant is looked
up first in:

- the table shipped with the package (``boundaries.json``: the plans ``round --until-decided``
  makes from the default ``min_pairs``, at 90, 95 and 99%; ``python -m
  pipeline.assessment.boundary`` writes it, and a test recomputes entries of it), then
- the user's cache (``$EXPLAIN_CACHE_DIR``, else ``$XDG_CACHE_HOME/explain-pipeline``, else
  ``~/.cache/explain-pipeline``; ``EXPLAIN_CACHE_DIR=`` (empty) turns it off), where every
  constant computed on this machine is kept, under the recipe's name: a changed recipe never
  reads an old value. A cached value outside the bounds every valid ``c`` lies in (below:
  the Student-t quantile of the last look; above: Bonferroni's over the looks) is ignored and
  computed again.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.atomic import write_atomic

SIMULATIONS = 10**6  # a million sequences (no relation to the policy's bound on resamples)
BOUNDARY_SEED = 0
DECIMALS = 6
"""``c`` is rounded to this many decimals: implementations that add in another order agree to
the digit (their quantiles differ in the last bits only)."""
RECIPE = f"pcg64-{BOUNDARY_SEED}-{SIMULATIONS}-linear-{DECIMALS}"
"""The recipe's name: cached constants and stored assessments say which recipe made them."""
_VALUES_PER_BLOCK = 2_000_000  # normals drawn at once: bounds memory; the draws are the same
TABLE = Path(__file__).with_name("boundaries.json")
TABLE_CONFIDENCES = (0.9, 0.95, 0.99)
TABLE_PLANS = tuple((6, 2, n) for n in range(8, 101, 2))
"""The shipped plans: looks every 2 pairs from 6 (the first look of the default min_pairs) to
every even maximum up to 100."""
Key = tuple[int, int, int, float]


def plan_looks(first_look: int, look_every: int, max_pairs: int) -> tuple[int, ...]:
    """Pairs at each look of a plan: ``first_look + j * look_every`` below ``max_pairs``, then
    ``max_pairs``; one look when ``first_look >= max_pairs`` (``sequential.Schedule.looks``, whose
    fields are checked against the contract's bounds, reads them here)."""
    return (*range(first_look, max_pairs, look_every), max_pairs)


def maxima(looks: Sequence[int], simulations: int = SIMULATIONS) -> np.ndarray:
    """``M`` of the recipe, for looks ``n_1 < ... < n_K``: the largest ``|t_k|`` of each
    simulated sequence. The statistic of each row is taken from the sums and sums of squares of
    the stretches between looks (the same numbers as summing every prefix, in fewer steps)."""
    checkpoints = np.asarray(looks)
    width = int(checkpoints[-1])
    rng = np.random.Generator(np.random.PCG64(BOUNDARY_SEED))
    largest = np.empty(simulations)
    starts = np.concatenate([[0], checkpoints[:-1]])  # first draw of each stretch
    rows = max(1, _VALUES_PER_BLOCK // width)
    for first in range(0, simulations, rows):
        z = rng.standard_normal((min(rows, simulations - first), width))
        sums = np.cumsum(np.add.reduceat(z, starts, axis=1), axis=1)
        squares = np.cumsum(np.add.reduceat(z * z, starts, axis=1), axis=1)
        spread = (squares - sums * sums / checkpoints) / (checkpoints - 1) / checkpoints
        t = (sums / checkpoints) / np.sqrt(spread)
        largest[first : first + len(z)] = np.abs(t).max(axis=1)
    return largest


def quantile(largest: np.ndarray, confidence: float) -> float:
    """``c`` from the recipe's ``M``."""
    return round(float(np.quantile(largest, confidence, method="linear")), DECIMALS)


def simulate(looks: Sequence[int], confidence: float, simulations: int = SIMULATIONS) -> float:
    """The recipe for looks ``n_1 < ... < n_K`` (K >= 2), computed."""
    return quantile(maxima(looks, simulations), confidence)


def plausible(looks: Sequence[int], confidence: float, c: float) -> bool:
    """Whether ``c`` lies where the constant of these looks must: at least the Student-t quantile
    of the last look (M is at least its |t|), at most Bonferroni's over the looks (the chance of
    any |t_k| > c is at most the sum of the chances)."""
    from scipy import stats

    alpha = 1.0 - confidence
    low = stats.t.ppf(1 - alpha / 2, looks[-1] - 1)
    high = max(stats.t.ppf(1 - alpha / (2 * len(looks)), n - 1) for n in looks)
    return bool(math.isfinite(c) and low - 1e-3 <= c <= high + 1e-3)


def _key_text(key: Key) -> str:
    return ",".join(str(v) for v in key)


# -- the shipped table ------------------------------------------------------------------------
@functools.cache
def shipped() -> dict[str, float]:
    """The table of the package: key text -> c, for RECIPE only."""
    try:
        document = json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a package without its table computes every constant
        return {}
    return dict(document["constants"]) if document.get("recipe") == RECIPE else {}


def write_table(plans: Sequence[tuple[int, int, int]], confidences: Sequence[float]) -> None:
    """Compute every plan at every confidence with the recipe and write the shipped table."""
    constants = []
    for plan in plans:
        largest = maxima(plan_looks(*plan))
        for confidence in confidences:
            constants.append([_key_text((*plan, confidence)), quantile(largest, confidence)])
        print(f"{plan}: {constants[-len(confidences) :]}", file=sys.stderr, flush=True)
    write_atomic(TABLE, table_text(constants).encode())


def table_text(constants: Sequence[Sequence[object]]) -> str:
    """The shipped table's JSON: the recipe, then one constant per line."""
    rows = ",\n".join(f"  {json.dumps(list(row))}" for row in constants)
    return f'{{"recipe": "{RECIPE}",\n "constants": [\n{rows}\n]}}\n'


# -- the user's cache -----------------------------------------------------------------------------
def cache_file() -> Path | None:
    """Where this machine keeps the constants it computed (None: no cache)."""
    chosen = os.environ.get("EXPLAIN_CACHE_DIR")
    if chosen is not None:
        return Path(chosen) / f"sequential-{RECIPE}.json" if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "explain-pipeline" / f"sequential-{RECIPE}.json"


def _read_cache(path: Path) -> dict[str, float]:
    try:
        if path.stat().st_size > 1 << 20:
            return {}
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict):
        return {}
    return {k: float(v) for k, v in document.items() if isinstance(v, int | float)}


def cached(key: Key, looks: Sequence[int]) -> float | None:
    path = cache_file()
    if path is None:
        return None
    value = _read_cache(path).get(_key_text(key))
    return value if value is not None and plausible(looks, key[3], value) else None


def remember(key: Key, value: float) -> None:
    """Add a computed constant to the cache (best effort: a cache that cannot be written only
    costs the computation again)."""
    path = cache_file()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        known = _read_cache(path)
        known[_key_text(key)] = value
        write_atomic(path, json.dumps(known, sort_keys=True).encode())
    except OSError:
        pass


def constant(key: Key, looks: Sequence[int]) -> float:
    """The recipe's constant for ``key`` (first_look, look_every, max_pairs, confidence) and its
    looks: from the shipped table, the cache, or computed (and then cached)."""
    found = shipped().get(_key_text(key))
    if found is None:
        found = cached(key, looks)
    if found is None:
        found = simulate(looks, key[3])
        remember(key, found)
    return found


if __name__ == "__main__":  # python -m pipeline.assessment.boundary: write the shipped table
    write_table(TABLE_PLANS, TABLE_CONFIDENCES)
