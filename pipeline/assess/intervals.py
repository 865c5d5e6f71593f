"""The interval methods of the policy field ``interval``, for quantities with ``n`` pairs.

- ``percentile``: the paired percentile bootstrap (``pipeline.assess.bootstrap``), the default.
- ``expanded_percentile`` (Hesterberg's expanded percentile interval): the same resample means,
  read at ``p = Φ(sqrt(n / (n - 1)) · t_{n-1}(α / 2))`` and ``1 - p`` instead of ``α / 2`` and
  ``1 - α / 2``. The percentile interval of a mean behaves like ``x̄ ± z·σ̂/√n`` with a divisor-n
  ``σ̂``; widening the probabilities turns that into roughly the Student-t interval while keeping
  the bootstrap's shape.
- ``student_t``: ``exp(m ± t_{n-1}(1 - α / 2) · s / √n)`` on the log-ratios, closed form (exact
  under log-normal noise). A quantity with a ``+inf`` pair (the thing vanished) has no finite
  mean or standard deviation: it takes ``expanded_percentile`` instead, and its row says so.
- ``sequential_t``: ``exp(m ± c · s / √n)`` with the constant ``c`` of the attempt's schedule of
  looks (``pipeline.assess.sequential``), valid when a round stops as soon as it is decided;
  with one look ``c`` is ``t_{n-1}(1 - α / 2)``, i.e. ``student_t``. A ``+inf`` pair: as
  ``student_t``.

α = 1 - confidence. scipy is imported where it is needed (it is slow to import).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.assess.bootstrap import FloatArray, Intervals, mean_in_order, paired_intervals
from pipeline.contract.policy import INTERVAL_METHODS

Method = str
"""One of METHODS: the values campaign.schema.json allows for the policy field `interval`."""
METHODS: tuple[Method, ...] = INTERVAL_METHODS


@dataclass(frozen=True)
class MethodIntervals(Intervals):
    """Per quantity: the geometric-mean ratio, the interval as ratios and the method used."""

    method: npt.NDArray[np.str_]


def expanded_probability(n: int, confidence: float) -> float:
    """The lower probability at which the expanded percentile interval reads the resamples."""
    from scipy import stats

    if n < 2:
        raise ValueError(f"the expanded percentile interval needs n >= 2 pairs, got {n}")
    alpha = 1.0 - confidence
    return float(stats.norm.cdf(math.sqrt(n / (n - 1)) * stats.t.ppf(alpha / 2, n - 1)))


def student_t_bounds(
    x: FloatArray, confidence: float, critical: float | None = None
) -> tuple[FloatArray, FloatArray]:
    """``low, high`` of the Student-t interval of every column of finite ``x`` (n >= 2, Q):
    ``exp(m ± critical · s / √n)``, ``critical`` by default ``t_{n-1}(1 - α / 2)``."""
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"the Student-t interval needs n >= 2 pairs, got {n}")
    if critical is None:
        from scipy import stats

        critical = float(stats.t.ppf(1.0 - (1.0 - confidence) / 2, n - 1))
    # sums added row by row: the same bits whatever other columns share the batch
    mean = mean_in_order(x)
    std = np.sqrt(mean_in_order((x - mean) ** 2) * (n / (n - 1)))
    half = critical * std / math.sqrt(n)
    with np.errstate(over="ignore"):
        return np.exp(mean - half), np.exp(mean + half)


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
    values = np.asarray(x, dtype=np.float64)
    n, width = values.shape
    if method == "percentile":
        boot = paired_intervals(values, resamples=resamples, seed=seed, confidence=confidence)
        return MethodIntervals(boot.estimate, boot.low, boot.high, np.full(width, method))
    expanded = (method == "expanded_percentile") | np.isposinf(values).any(axis=0)
    estimate, low, high = np.empty(width), np.empty(width), np.empty(width)
    if expanded.any():
        p = expanded_probability(n, confidence)
        boot = paired_intervals(
            values[:, expanded],
            resamples=resamples,
            seed=seed,
            confidence=confidence,
            probabilities=(p, 1.0 - p),
        )
        estimate[expanded], low[expanded], high[expanded] = boot.estimate, boot.low, boot.high
    closed = ~expanded
    if closed.any():
        with np.errstate(over="ignore"):
            estimate[closed] = np.exp(mean_in_order(values[:, closed]))
        c = critical if method == "sequential_t" else None
        low[closed], high[closed] = student_t_bounds(values[:, closed], confidence, c)
    used = np.where(expanded, "expanded_percentile", method)
    return MethodIntervals(estimate, low, high, used)
