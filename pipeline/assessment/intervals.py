"""The interval methods of the policy field ``interval``, for quantities with ``n`` pairs.

- ``percentile``: the paired percentile bootstrap (``pipeline.assessment.bootstrap``), the default.
- ``expanded_percentile`` (Hesterberg's expanded percentile interval): the same resample means,
  read at ``p = Φ(sqrt(n / (n - 1)) · t_{n-1}(α / 2))`` and ``1 - p`` instead of ``α / 2`` and
  ``1 - α / 2``. The percentile interval of a mean behaves like ``x̄ ± z·σ̂/√n`` with a divisor-n
  ``σ̂``; widening the probabilities turns that into roughly the Student-t interval while keeping
  the bootstrap's shape.
- ``student_t``: ``exp(m ± t_{n-1}(1 - α / 2) · s / √n)`` on the log-ratios, closed form (exact
  under log-normal noise). A quantity with a ``+inf`` pair (the thing vanished) has no finite
  mean or standard deviation: it takes ``expanded_percentile`` instead, and its row says so.
- ``sequential_t``: ``exp(m ± c · s / √n)`` with the constant ``c`` of the attempt's schedule of
  looks (``pipeline.assessment.sequential``), valid when a round stops as soon as it is decided;
  with one look ``c`` is ``t_{n-1}(1 - α / 2)``, i.e. ``student_t``. A ``+inf`` pair: as
  ``student_t``.

α = 1 - confidence. scipy is imported where it is needed (it is slow to import), and only its
``special`` functions: ``stdtrit(df, p)`` and ``ndtr`` are what ``scipy.stats.t.ppf`` and
``scipy.stats.norm.cdf`` compute, to the bit, without ``scipy.stats``' import (a second or more
of every assess's start-up on a loaded 2-core machine).

The methods are a registry, ``METHODS``: name -> its bounds function, the critical value a
fixed round of ``n`` pairs must reach (``study.plan``'s power), whether a quantity with a
``+inf`` pair falls back to ``expanded_percentile``, and whether it stays valid when a round
stops as soon as it is decided. An unknown name is refused (``interval_method``). Adding a
method is: its name in campaign.schema.json's ``interval`` enum, one ``IntervalMethod`` entry
here and its bounds function (tests/test_intervals.py holds the enum and the registry equal).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.assessment.bootstrap import FloatArray, Intervals, mean_in_order, paired_intervals
from pipeline.contract.policy import INTERVAL_METHODS

Method = str
"""One of METHODS: the values campaign.schema.json allows for the policy field `interval`."""


@dataclass(frozen=True)
class MethodIntervals(Intervals):
    """Per quantity: the geometric-mean ratio, the interval as ratios and the method used."""

    method: npt.NDArray[np.str_]


@dataclass(frozen=True)
class Settings:
    """What a bounds function may read besides the pairs: the policy's interval settings and,
    for ``sequential_t``, the constant of the attempts' schedule (None: one look)."""

    resamples: int
    seed: int
    confidence: float
    critical: float | None = None


Bounds = Callable[[FloatArray, Settings], tuple[FloatArray, FloatArray, FloatArray]]
"""(n, Q) log-ratios -> estimate, low, high per column, as ratios."""


def expanded_probability(n: int, confidence: float) -> float:
    """The lower probability at which the expanded percentile interval reads the resamples."""
    from scipy.special import ndtr, stdtrit

    if n < 2:
        raise ValueError(f"the expanded percentile interval needs n >= 2 pairs, got {n}")
    alpha = 1.0 - confidence
    return float(ndtr(math.sqrt(n / (n - 1)) * stdtrit(n - 1, alpha / 2)))


def student_t_bounds(
    x: FloatArray, confidence: float, critical: float | None = None
) -> tuple[FloatArray, FloatArray]:
    """``low, high`` of the Student-t interval of every column of finite ``x`` (n >= 2, Q):
    ``exp(m ± critical · s / √n)``, ``critical`` by default ``t_{n-1}(1 - α / 2)``."""
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"the Student-t interval needs n >= 2 pairs, got {n}")
    if critical is None:
        from scipy.special import stdtrit

        critical = float(stdtrit(n - 1, 1.0 - (1.0 - confidence) / 2))
    # sums added row by row: the same bits whatever other columns share the batch
    mean = mean_in_order(x)
    std = np.sqrt(mean_in_order((x - mean) ** 2) * (n / (n - 1)))
    half = critical * std / math.sqrt(n)
    with np.errstate(over="ignore"):
        return np.exp(mean - half), np.exp(mean + half)


# -- the bounds of each method ------------------------------------------------------------------
def _percentile(x: FloatArray, settings: Settings) -> tuple[FloatArray, FloatArray, FloatArray]:
    boot = paired_intervals(
        x, resamples=settings.resamples, seed=settings.seed, confidence=settings.confidence
    )
    return boot.estimate, boot.low, boot.high


def _expanded(x: FloatArray, settings: Settings) -> tuple[FloatArray, FloatArray, FloatArray]:
    p = expanded_probability(x.shape[0], settings.confidence)
    boot = paired_intervals(
        x,
        resamples=settings.resamples,
        seed=settings.seed,
        confidence=settings.confidence,
        probabilities=(p, 1.0 - p),
    )
    return boot.estimate, boot.low, boot.high


def _closed_form(
    x: FloatArray, confidence: float, critical: float | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    with np.errstate(over="ignore"):
        estimate = np.exp(mean_in_order(x))
    return (estimate, *student_t_bounds(x, confidence, critical))


def _student_t(x: FloatArray, settings: Settings) -> tuple[FloatArray, FloatArray, FloatArray]:
    return _closed_form(x, settings.confidence, None)


def _sequential_t(x: FloatArray, settings: Settings) -> tuple[FloatArray, FloatArray, FloatArray]:
    return _closed_form(x, settings.confidence, settings.critical)


# -- what a fixed round of n pairs must reach (study.plan) ----------------------------------------
def _normal_critical(n: npt.NDArray[np.float64], confidence: float) -> npt.NDArray[np.float64]:
    """The percentile bootstrap reads ``x̄ ± z·σ̂/√n`` with a divisor-n ``σ̂``."""
    from scipy.special import ndtri  # = scipy.stats.norm.ppf, without scipy.stats' import

    return float(ndtri(1 - (1 - confidence) / 2)) * np.sqrt((n - 1) / n)


def _t_critical(n: npt.NDArray[np.float64], confidence: float) -> npt.NDArray[np.float64]:
    from scipy.special import stdtrit  # = scipy.stats.t.ppf, without scipy.stats' import

    return np.asarray(stdtrit(n - 1, 1 - (1 - confidence) / 2), dtype=np.float64)


@dataclass(frozen=True)
class IntervalMethod:
    """One value of the policy field ``interval`` and what it means."""

    name: Method
    bounds: Bounds
    critical: Callable[[npt.NDArray[np.float64], float], npt.NDArray[np.float64]]
    """``k(n)`` a fixed round's statistic must reach at one look (study.plan's power)."""
    finite_only: bool = False
    """A quantity with a ``+inf`` pair (no finite mean) takes ``expanded_percentile``."""
    sequential: bool = False
    """Valid when a round stops as soon as it is decided (``round --until-decided``)."""


FALLBACK: Method = "expanded_percentile"
"""The method of a quantity with a ``+inf`` pair under a ``finite_only`` method."""
METHODS: dict[Method, IntervalMethod] = {
    m.name: m
    for m in (
        IntervalMethod("percentile", _percentile, _normal_critical),
        IntervalMethod("expanded_percentile", _expanded, _t_critical),
        IntervalMethod("student_t", _student_t, _t_critical, finite_only=True),
        IntervalMethod(
            "sequential_t", _sequential_t, _t_critical, finite_only=True, sequential=True
        ),
    )
}
"""The interval methods, in campaign.schema.json's order (a test holds the two equal)."""


def interval_method(name: str) -> IntervalMethod:
    """The method called ``name``; a ValueError naming the known ones otherwise."""
    found = METHODS.get(name)
    if found is None:
        raise ValueError(
            f"unknown interval method {name!r}: expected one of {', '.join(INTERVAL_METHODS)}"
        )
    return found


def method_intervals(
    x: npt.ArrayLike,
    method: Method,
    *,
    resamples: int,
    seed: int,
    confidence: float,
    critical: float | None = None,
) -> MethodIntervals:
    """The interval of every column of ``x`` (n pairs ordered by repetition, Q quantities) by
    ``method``; values finite or ``+inf``, as for ``paired_intervals``. ``critical``: the
    ``sequential_t`` constant of the attempts' schedule (``sequential.boundary``); None: one
    look at ``n``, which is ``student_t``'s quantile."""
    chosen = interval_method(method)
    values = np.asarray(x, dtype=np.float64)
    width = values.shape[1]
    settings = Settings(resamples, seed, confidence, critical)
    fallback = np.isposinf(values).any(axis=0) if chosen.finite_only else np.zeros(width, bool)
    estimate, low, high = np.empty(width), np.empty(width), np.empty(width)
    for used, columns in ((chosen, ~fallback), (METHODS[FALLBACK], fallback)):
        if columns.any():
            found = used.bounds(values[:, columns], settings)
            estimate[columns], low[columns], high[columns] = found
    return MethodIntervals(estimate, low, high, np.where(fallback, FALLBACK, method))
