"""The power of a round and the pairs it needs: the noncentral-t arithmetic of a fixed round
and the simulation of a round stopped when decided, for a true gain, a spread and a gate.

``plan`` (pipeline.study.plan) prices a campaign's next rounds with it, and the campaign's
accounting (pipeline.assessment.chance) prices identical code, a true gain of 0. The formulas are
in pipeline.study.plan's docstring: ``power(n) = 1 - nct.cdf(k(n), n - 1, (d - g) sqrt(n) / s)``,
``k(n)`` the interval method's constant, and a sequential round simulated by its own rules.
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.assessment.intervals import interval_method
from pipeline.assessment.sequential import Schedule, futile_mask

SIMULATIONS = 2000
"""Simulated rounds per cell of the sequential columns (power to about +-1 point)."""
LIMIT = 100_000
"""Pairs beyond which plan says ``never``: no round of that size will be run."""


# -- fixed rounds -----------------------------------------------------------------------------
def critical(
    n: np.ndarray, method: str, confidence: float, family_size: int | None = None
) -> np.ndarray:
    """``k(n)``: the statistic a fixed round with ``n`` pairs must reach (module docstring),
    as the interval method's registry entry gives it; with a ``family_size``, the Bonferroni
    Student-t constant of a member of that family (contract §15)."""
    if family_size is not None:
        from scipy.special import stdtrit  # = scipy.stats.t.ppf, without scipy.stats' import

        level = (1.0 - confidence) / (2 * family_size)
        return np.asarray(stdtrit(np.asarray(n) - 1, 1 - level), dtype=np.float64)
    return interval_method(method).critical(np.asarray(n, dtype=np.float64), confidence)


def fixed_power(
    n: np.ndarray,
    shift: float,
    sd: float,
    method: str,
    confidence: float,
    family_size: int | None = None,
) -> np.ndarray:
    """Power of a fixed round of ``n`` pairs when the true mean log-ratio exceeds the gate by
    ``shift`` (noncentral t); ``family_size``: of a member of that family (decide regions)."""
    from scipy import stats

    n = np.asarray(n, dtype=np.float64)
    if sd == 0:
        return np.where(shift > 0, 1.0, 0.0) * np.ones_like(n)
    ncp = shift * np.sqrt(n) / sd
    k = critical(n, method, confidence, family_size)
    power = np.asarray(stats.nct.sf(k, n - 1, ncp), dtype=np.float64)
    # scipy's noncentral t gives NaN for a huge ncp (a spread of rounding noise, ~1e-17): there
    # the normal approximation is exact to the printed digits
    return np.where(np.isnan(power), stats.norm.sf(k - ncp), power)


def fixed_pairs(
    shift: float,
    sd: float,
    power: float,
    method: str,
    confidence: float,
    min_pairs: int,
    family_size: int | None = None,
) -> int | None:
    """Smallest n >= min_pairs whose power reaches ``power``; None when the gain does not
    exceed the gate (no n will do) or more than LIMIT pairs would be needed. ``family_size``:
    a member of a family of that size (its level is alpha / m, so it needs more pairs)."""
    from scipy import stats

    if shift <= 0:
        return None
    if sd == 0:
        return min_pairs
    level = (1 - confidence) / (family_size or 1)
    z = stats.norm.ppf(1 - level / 2) + stats.norm.ppf(power)
    guess = (z * sd / shift) ** 2  # the normal approximation: the t needs a few pairs more
    low = max(min_pairs, int(guess * 0.8) - 2)
    if low > LIMIT:
        return None
    grid = np.arange(low, int(guess * 1.5) + 20)
    hit = np.flatnonzero(fixed_power(grid, shift, sd, method, confidence, family_size) >= power)
    return int(grid[hit[0]]) if hit.size else None


# -- sequential rounds ------------------------------------------------------------------------
def sequential_pairs(
    shift_gain: float,
    gate: float,
    sd: float,
    *,
    plan: Schedule,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, float, float]:
    """Power, mean pairs and 90th percentile of pairs of ``round --until-decided`` when the
    true mean log-ratio is ``shift_gain`` and the gate (a ratio) ``gate``: SIMULATIONS rounds of
    normal log-ratios stopped by the round's rules."""
    looks, c = np.array(plan.looks), plan.boundary(confidence)
    x = rng.normal(shift_gain, sd, size=(SIMULATIONS, plan.max_pairs))
    sums, squares = np.cumsum(x, axis=1)[:, looks - 1], np.cumsum(x * x, axis=1)[:, looks - 1]
    mean = sums / looks
    s = np.sqrt(np.maximum(squares - sums * mean, 0.0) / (looks - 1))
    passed = mean - c * s / np.sqrt(looks) >= math.log(max(gate, 1.0))
    if gate <= 1.0:  # a region or counter: its direction needs low > 1, strictly
        passed &= mean - c * s / np.sqrt(looks) > 0
    stop = passed.copy()
    stop[:, -1] = True
    running = np.ones(SIMULATIONS, dtype=bool)
    for k, n in enumerate(looks[:-1]):  # a loop over the looks only: each asks every round
        ask = running & ~passed[:, k]
        stop[ask, k] = futile_mask(
            n, mean[ask, k], s[ask, k], gate=gate, plan=plan, confidence=confidence
        )  # the round's own rule, asked only of the rounds still running at each look
        running &= ~stop[:, k]
    first = stop.argmax(axis=1)
    used = looks[first]
    won = passed[np.arange(SIMULATIONS), first]
    return float(won.mean()), float(used.mean()), float(np.quantile(used, 0.9))
