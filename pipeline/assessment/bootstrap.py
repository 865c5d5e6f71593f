"""The paired percentile bootstrap of contract §4.2, for a whole batch of quantities at once.

Every quantity with ``n`` pairs uses the same index matrix, so all their resample means are one
matrix product ``counts (B, n) @ x (n, Q) / n``, in cache-sized chunks on two threads; only the
order statistics that numpy's ``linear`` quantile reads are selected (a full partition per
quantity would cost about five times the rest). Bounds do not depend on batch, chunk or thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Intervals:
    """Per quantity: the geometric-mean ratio and the percentile interval, as ratios."""

    estimate: FloatArray
    low: FloatArray
    high: FloatArray


COUNTS_BYTES = 64 << 20
"""Largest block of resample counts (float64, resamples x n) made at once. The whole matrix fits
below it (n up to 838 pairs at 10,000 resamples) and is made once; a larger one (50,000 pairs:
3.7 GiB) is made block of resamples after block, so memory stays bounded whatever n is (each
block costs about five times its size while it is made: the index, its offsets, the counts)."""


def _counts_of(idx: npt.NDArray[np.int64], n: int) -> FloatArray:
    rows = idx.shape[0]
    flat = (idx + (np.arange(rows, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


def resample_counts(n: int, *, resamples: int, seed: int) -> FloatArray:
    """``counts[b, i]`` = occurrences of pair ``i`` in resample ``b`` (contract §4.2's idx)."""
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))
    return _counts_of(idx, n)


def fits_whole(n: int, resamples: int, max_bytes: int = COUNTS_BYTES) -> bool:
    """Whether the whole count matrix is made at once (else :func:`resample_count_blocks`)."""
    return 8 * n * resamples <= max_bytes


def resample_count_blocks(
    n: int, *, resamples: int, seed: int, max_bytes: int = COUNTS_BYTES
) -> Iterator[tuple[slice, FloatArray]]:
    """The rows of :func:`resample_counts` in blocks of at most ``max_bytes``: (which resamples,
    their counts). One generator draws the blocks one after the other, and PCG64 keeps its
    buffered half-word between calls, so the indices are those of the single (resamples, n)
    draw, bit for bit (tests/test_bootstrap.py holds the two equal)."""
    generator = np.random.Generator(np.random.PCG64(seed))
    rows = max(1, max_bytes // (8 * n))
    for start in range(0, resamples, rows):
        stop = min(start + rows, resamples)
        yield slice(start, stop), _counts_of(generator.integers(0, n, size=(stop - start, n)), n)


@dataclass(frozen=True)
class _Positions:
    """Where numpy's ``linear`` quantiles read a sorted sample of ``size`` values, per probability:
    the order statistics ``below`` and ``above`` and the interpolation ``weight`` between them."""

    below: npt.NDArray[np.intp]
    above: npt.NDArray[np.intp]
    weight: FloatArray

    @classmethod
    def of(cls, size: int, probs: FloatArray) -> _Positions:
        virtual = (size - 1) * probs  # Hyndman & Fan type 7, computed as numpy computes it
        floor = np.floor(virtual)
        below = np.clip(floor, 0, size - 1).astype(np.intp)
        above = np.clip(floor + 1, 0, size - 1).astype(np.intp)
        past_end = virtual >= size - 1
        below[past_end] = above[past_end] = size - 1
        return cls(below, above, virtual - floor)


def order_positions(
    size: int, probs: FloatArray
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The two order statistics (0-based ranks in a sorted sample of ``size`` values) between
    which numpy's ``linear`` quantile at each of ``probs`` interpolates."""
    pos = _Positions.of(size, probs)
    return pos.below, pos.above


def _lerp(a: FloatArray, b: FloatArray, t: float) -> FloatArray:
    """numpy's interpolation, to the last bit, plus contract §4.2's rule where ``b`` is ``+inf``:
    ``a`` when the weight is 0, else ``+inf`` (also when both are ``+inf``)."""
    with np.errstate(invalid="ignore"):
        diff = b - a
        value = b - diff * (1 - t) if t >= 0.5 else a + diff * t
    return np.where(np.isposinf(b), a if t == 0 else np.inf, value)


_WORKERS = min(2, os.cpu_count() or 1)  # the machines this runs on have 2 cores
_THREADED_CHUNKS = 8  # fewer chunks than this are computed in the calling thread
_SAMPLE = 512  # resamples per row that locate each tail's band
_Z = 4.0  # the band's margin, in binomial standard deviations of the sample's rank


def _sample_rank(depth: int, size: int, sample: int) -> int:
    """Rank in a sample of ``sample`` values above which, with overwhelming probability, at
    least ``depth`` of the ``size`` values of the row lie (``sample``: no such rank)."""
    frac = depth / size
    return int(np.ceil(sample * frac + _Z * np.sqrt(sample * frac * (1 - frac)))) + 1


def _extract(mask: BoolArray, values: FloatArray) -> FloatArray:
    """``values[mask]`` of C-contiguous arrays, by Polars' filter: several times faster than
    numpy's for a sparse mask (numpy walks the mask element by element)."""
    import polars as pl

    kept = pl.Series(values.reshape(-1)).filter(pl.Series(mask.reshape(-1)))
    return kept.to_numpy()


def _smallest(
    stat_t: FloatArray,
    pivot: FloatArray,
    ranks: npt.NDArray[np.intp],
    band: BoolArray,
    *,
    upper: bool,
) -> FloatArray:
    """The values at ``ranks`` of every row of ``stat_t`` sorted ascending (``upper``: of
    ``-stat_t``, the upper tail seen as a lower one, so that the wanted positions are the same
    in every row). Values beyond the row's ``pivot`` are gathered and partitioned; a rank past
    them holds the pivot's own value when enough values equal it (ties: a counter that never
    moves has one value in every resample); rows where neither holds take a full partition.
    ``band`` is scratch space of the shape of ``stat_t``."""
    rows = stat_t.shape[0]
    deepest = int(ranks.max())
    (np.greater if upper else np.less)(stat_t, pivot, out=band)
    counts = np.count_nonzero(band, axis=1)
    width = max(int(counts.max()), deepest + 1)
    padded = np.full(rows * width, np.inf)
    offsets = np.repeat(np.arange(rows) * width - (np.cumsum(counts) - counts), counts)
    gathered = _extract(band, stat_t)
    padded[offsets + np.arange(offsets.size)] = -gathered if upper else gathered
    result = np.partition(padded.reshape(rows, width), ranks, axis=1)[:, ranks]
    few = np.flatnonzero(counts <= deepest)
    if few.size:  # some wanted ranks lie at or beyond the pivot
        tied = stat_t[few] >= pivot[few] if upper else stat_t[few] <= pivot[few]
        reach = np.count_nonzero(tied, axis=1)
        pivot_value = -pivot[few] if upper else pivot[few]
        result[few] = np.where(ranks >= counts[few, None], pivot_value, result[few])
        short = few[reach <= deepest]
        if short.size:  # the pivot fell inside the wanted ranks: these rows the long way
            values = -stat_t[short] if upper else stat_t[short]
            result[short] = np.partition(values, ranks, axis=1)[:, ranks]
    return result


def _order_statistics(
    stat_t: FloatArray, pos: _Positions, band: BoolArray
) -> tuple[FloatArray, FloatArray]:
    """Exact values of every row of ``stat_t`` (Q, B) at ``pos.below`` and ``pos.above``;
    returns two (len(probs), Q) arrays. ``band`` is scratch space of the shape of ``stat_t``.

    A full partition of B values per quantity is what makes a bootstrap slow. A tail needs far
    less: a pivot from a small sample of the row (the first resamples: they are independent
    draws) bounds a band that holds the wanted ranks with overwhelming probability, which is
    checked exactly by counting, and only the band is partitioned.
    """
    size = stat_t.shape[1]
    sample = min(size, _SAMPLE)
    low = np.empty((len(pos.below), stat_t.shape[0]))
    high = np.empty_like(low)
    for k in range(len(pos.below)):
        below, above = int(pos.below[k]), int(pos.above[k])
        upper = below + above >= size - 1  # the tail this probability lies in
        ranks = np.array([size - 1 - below, size - 1 - above] if upper else [below, above])
        at = _sample_rank(int(ranks.max()) + 1, size, sample)
        if at >= sample:  # the band would be most of the row
            found = np.partition(stat_t, [below, above], axis=1)[:, [below, above]]
        else:
            pick = sample - 1 - at if upper else at
            pivot = np.partition(stat_t[:, :sample], pick, axis=1)[:, pick : pick + 1]
            found = _smallest(stat_t, pivot, ranks, band[: stat_t.shape[0]], upper=upper)
            found = -found if upper else found
        low[k], high[k] = found[:, 0], found[:, 1]
    return low, high


def linear_quantiles(
    stat_t: FloatArray, probs: FloatArray, band: BoolArray | None = None
) -> FloatArray:
    """numpy's ``linear`` quantiles of every row of ``stat_t`` (Q, B), with contract §4.2's infinity
    rule; returns (len(probs), Q). Equal to ``numpy.quantile(stat_t, probs, axis=1)`` to the last
    bit wherever that has no NaN. ``band``: scratch space of at least Q rows of B, reused by a
    caller that reads many blocks (fresh large arrays cost more in page faults than in work)."""
    pos = _Positions.of(stat_t.shape[1], probs)
    if band is None:
        band = np.empty(stat_t.shape, dtype=bool)
    below, above = _order_statistics(stat_t, pos, band)
    return np.array([_lerp(below[k], above[k], float(pos.weight[k])) for k in range(len(probs))])


def _on_grid(finite: FloatArray) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """Each column of ``finite`` (n, Q) as integers ``X = rint(x * 2**s)`` with ``|X| <= 2**53 / n``
    and its ``s``: sums of up to ``n`` counted terms of ``X`` are exact in any order.

    Why: a BLAS product may add a row's terms in an order that depends on the row's place in the
    block, which once moved a bound by one ulp between an incremental and a fresh assess. On the
    grid every partial sum is an integer below ``2**53``. Cost: at most ``n * 2**-53`` of the
    column's largest ``|x|`` (about 1e-15 relative at 10 pairs)."""
    n = finite.shape[0]
    _, top = np.frexp(np.abs(finite).max(axis=0))  # largest |x| < 2**top (0 for all zeros)
    shift = (53 - (n - 1).bit_length()) - top.astype(np.int64)  # bit_length: ceil(log2 n)
    return np.rint(np.ldexp(finite, shift)), shift


def _from_grid(sums: FloatArray, n: int, shift: npt.NDArray[np.int64]) -> FloatArray:
    """Resample means from exact resample sums on the grid of ``_on_grid`` (``+inf`` stays)."""
    return np.ldexp(sums / n, -shift)


def mean_in_order(values: FloatArray) -> FloatArray:
    """Mean of each column, adding the rows first to last: the same bits whatever the width
    (numpy's own reduction may add pairwise, depending on the array's shape)."""
    total = values[0].copy()
    for row in values[1:]:  # over the n pairs, not the quantities
        total += row
    return total / values.shape[0]


def _bounds(
    values: FloatArray,
    *,
    resamples: int,
    seed: int,
    probs: FloatArray,
    chunk_bytes: int,
    counts_bytes: int = COUNTS_BYTES,
) -> FloatArray:
    """The interval's ends on the log scale, (2, Q), for validated ``values`` (n, Q), read at
    the two quantile probabilities ``probs``."""
    n, width = values.shape
    infinite = np.isposinf(values)
    finite, shift = _on_grid(np.where(infinite, 0.0, values))
    pos = _Positions.of(resamples, probs)
    bounds = np.empty((2, width))
    finite_t = np.ascontiguousarray(finite.T)  # (quantities, n): a chunk is a block of rows
    if not fits_whole(n, resamples, counts_bytes):
        _bounds_in_blocks(
            finite_t,
            infinite,
            shift,
            bounds,
            pos,
            resamples=resamples,
            seed=seed,
            counts_bytes=counts_bytes,
        )
        return bounds
    counts_t = np.ascontiguousarray(resample_counts(n, resamples=resamples, seed=seed).T)
    # Chunks of quantities small enough that a chunk's resample means stay in cache while the
    # quantiles read them several times (a chunk, not a quantity, per iteration). Each worker
    # allocates its buffers once: fresh large arrays per chunk cost more in page faults than
    # in work. NumPy releases the GIL in these kernels, so two workers use two cores.
    step = min(width, max(1, chunk_bytes // (8 * resamples)))

    def run(share: range) -> None:
        stat_buffer = np.empty((step, resamples))
        band = np.empty((step, resamples), dtype=bool)
        for start in share:
            rows = slice(start, min(start + step, width))
            stat_t = stat_buffer[: rows.stop - rows.start]
            # exact integer sums (quantities, resamples): the order statistics of the sums are
            # those of the means, so only the selected sums are turned into means
            np.matmul(finite_t[rows], counts_t, out=stat_t)
            if infinite[:, rows].any():  # a +inf pair makes every resample holding it +inf
                hits = infinite[:, rows].T.astype(np.float64) @ counts_t
                stat_t[hits > 0] = np.inf
            below, above = _order_statistics(stat_t, pos, band)
            for k in range(2):
                low_end = _from_grid(below[k], n, shift[rows])
                high_end = _from_grid(above[k], n, shift[rows])
                bounds[k, rows] = _lerp(low_end, high_end, float(pos.weight[k]))

    in_workers(range(0, width, step), run)
    return bounds


def _bounds_in_blocks(
    finite_t: FloatArray,
    infinite: BoolArray,
    shift: npt.NDArray[np.int64],
    bounds: FloatArray,
    pos: _Positions,
    *,
    resamples: int,
    seed: int,
    counts_bytes: int,
) -> None:
    """``_bounds`` when the count matrix is too large to hold: for each block of quantities
    whose resample sums fit in ``counts_bytes``, the counts are drawn again block by block and
    each block's sums go to their columns. The sums are exact integers (``_on_grid``), so they
    are the same bits as the single product's."""
    width, n = finite_t.shape
    step = max(1, counts_bytes // (8 * resamples))
    stat_buffer = np.empty((min(step, width), resamples))
    band = np.empty(stat_buffer.shape, dtype=bool)
    for start in range(0, width, step):
        rows = slice(start, min(start + step, width))
        stat_t = stat_buffer[: rows.stop - rows.start]
        blocks = resample_count_blocks(n, resamples=resamples, seed=seed, max_bytes=counts_bytes)
        for block, counts in blocks:
            sums = stat_t[:, block]
            sums[...] = finite_t[rows] @ counts.T
            if infinite[:, rows].any():
                sums[(infinite[:, rows].T.astype(np.float64) @ counts.T) > 0] = np.inf
        below, above = _order_statistics(stat_t, pos, band)
        for k in range(2):
            low_end = _from_grid(below[k], n, shift[rows])
            high_end = _from_grid(above[k], n, shift[rows])
            bounds[k, rows] = _lerp(low_end, high_end, float(pos.weight[k]))


def in_workers(starts: range, work: Callable[[range], None]) -> None:
    """``work(share)`` on each worker's share of the chunks that begin at ``starts``: two
    threads, each with one BLAS thread (BLAS's own threads would fight the workers for the
    cores), when there are enough chunks; a few chunks (one campaign) take milliseconds, and
    threads would cost more than they save."""
    workers = min(_WORKERS, len(starts)) if len(starts) >= _THREADED_CHUNKS else 1
    if workers == 1:
        work(starts)
        return
    from threadpoolctl import threadpool_limits

    shares = [starts[worker::workers] for worker in range(workers)]
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        list(pool.map(work, shares))  # list(): re-raise a worker's exception


def paired_intervals(
    x: npt.ArrayLike,
    *,
    resamples: int,
    seed: int,
    confidence: float,
    probabilities: tuple[float, float] | None = None,
    chunk_bytes: int = 2 << 20,
    counts_bytes: int = COUNTS_BYTES,
) -> Intervals:
    """contract §4.2 for every column of ``x`` (n pairs ordered by repetition, Q quantities).

    Values must be finite or ``+inf``. The caller decides whether ``n`` is enough pairs.
    ``probabilities``: read the same resample means at these two probabilities instead of
    ``(1 - confidence) / 2`` and ``1 - (1 - confidence) / 2`` (the expanded percentile
    interval, ``pipeline.assessment.intervals``).
    """
    values = np.asarray(x, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] < 1:
        raise ValueError(f"x must be (n >= 1, Q), got shape {values.shape}")
    if np.isnan(values).any() or np.isneginf(values).any():
        raise ValueError("x must be finite or +inf")
    # Equal columns have equal intervals: a counter that never moves gives the same x (zeros)
    # in every attempt, so each distinct column is bootstrapped once.
    distinct, inverse = np.unique(values, axis=1, return_inverse=True)
    if probabilities is None:
        alpha = (1.0 - confidence) / 2.0
        probabilities = (alpha, 1.0 - alpha)
    bounds = _bounds(
        distinct,
        resamples=resamples,
        seed=seed,
        probs=np.array(probabilities),
        chunk_bytes=chunk_bytes,
        counts_bytes=counts_bytes,
    )
    bounds = bounds[:, inverse.ravel()]
    with np.errstate(over="ignore"):
        return Intervals(
            estimate=np.exp(mean_in_order(values)),
            low=np.exp(bounds[0]),
            high=np.exp(bounds[1]),
        )
