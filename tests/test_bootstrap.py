"""The paired bootstrap against a plain reference implementation of contract §4.2, written here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.assessment.bootstrap import (
    Intervals,
    linear_quantiles,
    paired_intervals,
    resample_counts,
)


def reference_quantile(values: list[float], p: float) -> float:
    """numpy's "linear" method, written out, with contract §4.2's infinity rule."""
    ordered = sorted(values)
    size = len(ordered)
    virtual = (size - 1) * p
    below = math.floor(virtual)
    above = min(below + 1, size - 1)
    weight = virtual - below
    a, b = ordered[below], ordered[above]
    if math.isinf(b):
        return a if weight == 0 else math.inf
    diff = b - a
    return a + diff * weight if weight < 0.5 else b - diff * (1 - weight)


def reference_interval(
    x: list[float], resamples: int, seed: int, confidence: float
) -> tuple[float, float, float]:
    """One quantity, one resample at a time: the obvious loop contract §4.2 describes."""
    n = len(x)
    idx = np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=(resamples, n))
    stats = []
    for row in idx:
        picked = [x[i] for i in row]
        stats.append(math.inf if math.inf in picked else sum(picked) / n)
    alpha = (1 - confidence) / 2
    low = reference_quantile(stats, alpha)
    high = reference_quantile(stats, 1 - alpha)
    return math.exp(sum(x) / n), math.exp(low), math.exp(high)


def assert_close(actual: float, expected: float) -> None:
    if math.isinf(expected):
        assert actual == expected
    else:
        assert actual == pytest.approx(expected, rel=1e-12, abs=0)


def assert_matches_reference(x: np.ndarray, resamples: int, seed: int, confidence: float) -> None:
    got = paired_intervals(x, resamples=resamples, seed=seed, confidence=confidence)
    for j in range(x.shape[1]):
        est, low, high = reference_interval(list(x[:, j]), resamples, seed, confidence)
        assert_close(got.estimate[j], est)
        assert_close(got.low[j], low)
        assert_close(got.high[j], high)


@pytest.mark.parametrize("n", [1, 2, 5, 7, 10, 20])
@pytest.mark.parametrize("seed", [0, 11])
def test_matches_reference_for_random_columns(n: int, seed: int) -> None:
    x = np.random.default_rng(1000 + n).normal(0.02, 0.05, size=(n, 4))
    assert_matches_reference(x, 2000, seed, 0.95)


def test_default_resamples_and_other_confidence() -> None:
    x = np.random.default_rng(5).normal(0.0, 0.1, size=(6, 2))
    assert_matches_reference(x, 10000, 3, 0.9)


@pytest.mark.parametrize("n", [5, 10, 13])
def test_columns_are_bit_identical_whatever_shares_their_batch(n: int) -> None:
    # An incremental assess computes an attempt beside other attempts than a fresh one does, and
    # a worker of a distributed engine beside other campaigns: the bits must not change.
    rng = np.random.default_rng(n)
    x = rng.normal(0.01, 0.05, size=(n, 120)) * rng.lognormal(0, 2, size=120)
    x[rng.integers(0, n, 6), rng.integers(0, 120, 6)] = np.inf

    def intervals(columns: np.ndarray, chunk_bytes: int = 2 << 20) -> Intervals:
        return paired_intervals(
            columns, resamples=1000, seed=1, confidence=0.95, chunk_bytes=chunk_bytes
        )

    whole = intervals(x)
    reversed_ = intervals(x[:, ::-1])
    tiny_chunks = intervals(x, chunk_bytes=1)
    for got, order in ((reversed_, slice(None, None, -1)), (tiny_chunks, slice(None))):
        for field in ("estimate", "low", "high"):
            np.testing.assert_array_equal(getattr(got, field)[order], getattr(whole, field))
    for j in range(0, 120, 9):  # alone, and with two neighbours
        for cols in ([j], [j, (j + 1) % 120, (j + 50) % 120]):
            part = intervals(x[:, cols])
            assert (part.estimate[0], part.low[0], part.high[0]) == (
                whole.estimate[j],
                whole.low[j],
                whole.high[j],
            )


@pytest.mark.parametrize("scale", [1e-300, 1e-9, 1.0, 100.0])
def test_exact_sums_keep_the_reference_precision_at_any_scale(scale: float) -> None:
    x = np.random.default_rng(3).normal(0.5, 1.0, size=(7, 3)) * scale
    x[:, 2] = x[:, 0] + 1e-12 * scale  # nearly equal columns stay apart
    assert_matches_reference(x, 500, 2, 0.95)


def test_one_infinite_pair_among_finite_ones() -> None:
    x = np.array([[0.1], [0.2], [np.inf], [0.05], [0.0]])
    got = paired_intervals(x, resamples=400, seed=2, confidence=0.95)
    est, low, high = reference_interval(list(x[:, 0]), 400, 2, 0.95)
    assert got.estimate[0] == math.inf == est
    assert_close(got.low[0], low)
    assert got.high[0] == math.inf == high
    assert math.isfinite(got.low[0])  # most resamples of 5 miss the vanished pair at the low end


def test_all_pairs_infinite() -> None:
    x = np.full((5, 1), np.inf)
    got = paired_intervals(x, resamples=100, seed=0, confidence=0.95)
    assert got.estimate[0] == got.low[0] == got.high[0] == math.inf


@pytest.mark.parametrize("seed", [6, 7])
def test_interpolation_weight_zero_next_to_infinity_gives_the_finite_value(seed: int) -> None:
    # 5 resamples, confidence 0.5: quantile positions 1.0 and 3.0 exactly (weight 0). With seed 6
    # one resample holds the infinite pair (high: finite a beside +inf), with seed 7 three do (low).
    resamples = 5
    counts = resample_counts(3, resamples=resamples, seed=seed)
    n_inf = int((counts[:, 0] > 0).sum())
    assert n_inf == {6: 1, 7: 3}[seed]
    x = np.array([[np.inf], [0.1], [0.3]])
    got = paired_intervals(x, resamples=resamples, seed=seed, confidence=0.5)
    _, low, high = reference_interval([math.inf, 0.1, 0.3], resamples, seed, 0.5)
    assert_close(got.low[0], low)
    assert_close(got.high[0], high)
    finite_stats = sorted((counts[counts[:, 0] == 0] @ np.array([0.0, 0.1, 0.3])) / 3)
    stats = finite_stats + [math.inf] * n_inf
    boundary = 3 if seed == 6 else 1  # the order statistic just below the first +inf
    assert math.isfinite(stats[boundary]) and math.isinf(stats[boundary + 1])
    got_at_boundary = got.high[0] if seed == 6 else got.low[0]
    assert got_at_boundary == pytest.approx(math.exp(stats[boundary]), rel=1e-12)


def test_no_nan_or_warning_with_infinities_in_a_large_batch() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(0, 0.05, size=(10, 300))
    x[rng.integers(0, 10, 60), rng.integers(0, 300, 60)] = np.inf
    got = paired_intervals(x, resamples=1000, seed=0, confidence=0.95, chunk_bytes=8 * 1000 * 7)
    assert not np.isnan(got.low).any() and not np.isnan(got.high).any()
    for j in np.flatnonzero(np.isinf(x).any(axis=0))[:5]:
        _, low, high = reference_interval(list(x[:, j]), 1000, 0, 0.95)
        assert_close(got.low[j], low)
        assert_close(got.high[j], high)


def test_same_n_uses_the_same_resamples() -> None:
    a = resample_counts(6, resamples=50, seed=7)
    b = resample_counts(6, resamples=50, seed=7)
    np.testing.assert_array_equal(a, b)
    assert (a.sum(axis=1) == 6).all()


@pytest.mark.parametrize("bad", [np.nan, -np.inf])
def test_rejects_nan_and_negative_infinity(bad: float) -> None:
    with pytest.raises(ValueError, match="finite or \\+inf"):
        paired_intervals(np.array([[0.1], [bad]]), resamples=10, seed=0, confidence=0.95)


# -- the quantile selection: equal to numpy.quantile to the last bit -----------------------------
@pytest.mark.parametrize("size", [1, 2, 5, 41, 999, 10000])
@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.5, 0.1])
def test_selected_quantiles_equal_numpy_bit_for_bit(size: int, confidence: float) -> None:
    rng = np.random.default_rng(size)
    stat_t = rng.normal(0.0, 0.03, size=(7, size))
    stat_t[3] = rng.integers(0, 4, size=size) / 3  # many ties
    stat_t[4] = 0.25  # all equal
    alpha = (1 - confidence) / 2
    probs = np.array([alpha, 1 - alpha])
    expected = np.quantile(stat_t, probs, axis=1, method="linear")
    np.testing.assert_array_equal(linear_quantiles(stat_t, probs), expected)


def test_an_unrepresentative_sample_falls_back_to_the_full_partition() -> None:
    # The first 512 resamples (the pivot's sample) are the smallest values of the row, in
    # one row, and the largest in another: the band around the pivot misses the wanted ranks.
    rng = np.random.default_rng(1)
    row = np.sort(rng.normal(size=10000))
    stat_t = np.vstack([row, row[::-1], rng.permutation(row)])
    probs = np.array([0.025, 0.975])
    expected = np.quantile(stat_t, probs, axis=1, method="linear")
    np.testing.assert_array_equal(linear_quantiles(stat_t, probs), expected)


def test_selected_quantiles_with_infinite_resamples_follow_the_spec_rule() -> None:
    rng = np.random.default_rng(2)
    stat_t = rng.normal(size=(3, 41))
    stat_t[0, rng.choice(41, 3, replace=False)] = np.inf  # upper end reaches into +inf
    stat_t[1, :] = np.inf
    got = linear_quantiles(stat_t, np.array([0.025, 0.975]))
    for row in range(3):
        for k, p in enumerate((0.025, 0.975)):
            assert got[k, row] == reference_quantile(list(stat_t[row]), p)


def test_equal_columns_get_the_interval_of_their_distinct_column() -> None:
    rng = np.random.default_rng(8)
    a, b = rng.normal(0, 0.05, size=(2, 6))
    x = np.column_stack([a, b, a, np.zeros(6), a, np.zeros(6)])
    assert_matches_reference(x, 700, 4, 0.95)


# -- memory bounded whatever n is: the counts drawn in blocks of resamples ----------------------
@pytest.mark.parametrize(("n", "rows"), [(1, 1), (5, 1), (7, 3), (50, 64), (101, 999)])
def test_count_blocks_are_the_rows_of_the_single_draw(n: int, rows: int) -> None:
    from pipeline.assessment.bootstrap import resample_count_blocks

    whole = resample_counts(n, resamples=1000, seed=11)
    blocks = list(resample_count_blocks(n, resamples=1000, seed=11, max_bytes=8 * n * rows))
    assert [b.stop - b.start for b, _ in blocks][:-1] == [rows] * (len(blocks) - 1)
    assert np.array_equal(np.concatenate([counts for _, counts in blocks]), whole)


@pytest.mark.parametrize("n", [5, 12, 333])
@pytest.mark.slow
def test_intervals_from_blocks_of_counts_are_the_same_bits(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.normal(0.02, 0.1, size=(n, 40))
    x[1, 3] = x[4, 7] = math.inf  # a vanished quantity: the +inf rules in the blocks too
    x[:, 9] = 0.0
    whole = paired_intervals(x, resamples=2000, seed=5, confidence=0.95)
    for rows in (1, 7, 1999):  # down to one resample per block
        blocks = paired_intervals(
            x, resamples=2000, seed=5, confidence=0.95, counts_bytes=8 * n * rows
        )
        for name in ("estimate", "low", "high"):
            assert np.array_equal(getattr(blocks, name), getattr(whole, name)), (rows, name)


def test_explained_fraction_from_blocks_of_counts_agrees() -> None:
    from pipeline.assessment.fraction import fraction_bounds

    rng = np.random.default_rng(3)
    d = rng.normal(1.0, 0.3, size=(300, 6))
    t = d + rng.normal(0.5, 0.3, size=(300, 6))
    whole = fraction_bounds(d, t, resamples=1500, seed=2, confidence=0.95)
    blocks = fraction_bounds(
        d, t, resamples=1500, seed=2, confidence=0.95, counts_bytes=8 * 300 * 37
    )
    # plain floating-point products: equal to a few ulps (a block's shape may move the last bit)
    assert np.array_equal(blocks[2], whole[2])
    np.testing.assert_allclose(blocks[0], whole[0], rtol=1e-13)
    np.testing.assert_allclose(blocks[1], whole[1], rtol=1e-13)
