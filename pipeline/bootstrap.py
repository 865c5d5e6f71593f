"""The paired percentile bootstrap of SPEC 4.2, for a whole batch of quantities at once.

Every quantity with ``n`` pairs is resampled with the same index matrix (common random numbers),
so the resample means of all of them are one matrix product: ``counts (B, n) @ x (n, Q) / n``,
where ``counts[b, i]`` is how often pair ``i`` appears in resample ``b``. Columns are processed in
chunks so that memory stays bounded whatever ``Q`` is.

A pair whose candidate value is 0 has ``x = +inf``: every resample that contains it has a mean of
``+inf``. The product is taken over the finite part only and the infinite resamples are marked
from ``counts @ isinf(x)``, so no ``inf - inf`` NaN ever reaches the quantiles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Intervals:
    """Per quantity: the geometric-mean ratio and the percentile interval, as ratios."""

    estimate: FloatArray
    low: FloatArray
    high: FloatArray


def resample_counts(n: int, *, resamples: int, seed: int) -> FloatArray:
    """``counts[b, i]`` = occurrences of pair ``i`` in resample ``b`` of SPEC 4.2's index matrix."""
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))
    flat = (idx + (np.arange(resamples, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * n).reshape(resamples, n).astype(np.float64)


def _quantiles(stat: FloatArray, probs: FloatArray) -> FloatArray:
    """numpy's ``linear`` quantiles along axis 0, with SPEC 4.2's rule where ``+inf`` is involved.

    numpy interpolates ``a + (b - a) * t``; with ``b = +inf`` that is NaN when ``t = 0`` (SPEC: the
    answer is ``a``) or when ``a = +inf`` too (SPEC: ``+inf``). Only those entries are patched.
    """
    with np.errstate(invalid="ignore"):
        q = np.quantile(stat, probs, axis=0, method="linear")
    broken = np.isnan(q)
    if broken.any():
        size = stat.shape[0]
        virtual = size * probs + (1 - probs) - 1  # numpy's virtual index for method "linear"
        below = np.floor(virtual).astype(np.int64)
        exact = (virtual - below) == 0
        for k in np.flatnonzero(broken.any(axis=1)):  # at most two probabilities
            cols = np.flatnonzero(broken[k])
            if exact[k]:
                q[k, cols] = np.partition(stat[:, cols], below[k], axis=0)[below[k]]
            else:
                q[k, cols] = np.inf
    return q


def paired_intervals(
    x: npt.ArrayLike,
    *,
    resamples: int,
    seed: int,
    confidence: float,
    chunk_bytes: int = 64 << 20,
) -> Intervals:
    """SPEC 4.2 for every column of ``x`` (n pairs ordered by repetition, Q quantities).

    Values must be finite or ``+inf``. The caller decides whether ``n`` is enough pairs.
    """
    values = np.asarray(x, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] < 1:
        raise ValueError(f"x must be (n >= 1, Q), got shape {values.shape}")
    if np.isnan(values).any() or np.isneginf(values).any():
        raise ValueError("x must be finite or +inf")
    n, width = values.shape
    infinite = np.isposinf(values)
    finite = np.where(infinite, 0.0, values)
    counts = resample_counts(n, resamples=resamples, seed=seed)
    alpha = (1.0 - confidence) / 2.0
    probs = np.array([alpha, 1.0 - alpha])
    bounds = np.empty((2, width))
    step = max(1, chunk_bytes // (8 * resamples))
    for start in range(0, width, step):  # chunks of columns, not quantities one by one
        cols = slice(start, start + step)
        stat = counts @ finite[:, cols]
        stat /= n
        if infinite[:, cols].any():
            stat[(counts @ infinite[:, cols]) > 0] = np.inf
        bounds[:, cols] = _quantiles(stat, probs)
    with np.errstate(over="ignore"):
        return Intervals(
            estimate=np.exp(values.mean(axis=0)),
            low=np.exp(bounds[0]),
            high=np.exp(bounds[1]),
        )
