"""Group sums are the same to the last bit whatever the row order (quantities._group_sum)."""

from __future__ import annotations

import functools

import numpy as np
import polars as pl
import pytest

from pipeline.assessment.quantities import _group_sum, _ordered_sums


def plain_sum(values: list[float]) -> float:
    """The reference: ascending order, added left to right."""
    return functools.reduce(lambda a, b: a + b, sorted(values))


def random_lists(rng: np.random.Generator, n: int, longest: int) -> list[list[float]]:
    """Values over ten orders of magnitude (so that the order of addition shows in the last
    bits), with +0.0, -0.0 and lists of -0.0 only."""
    lists = []
    for length in rng.integers(1, longest + 1, n):
        v = rng.standard_normal(length) * 10.0 ** rng.uniform(-5, 5, length)
        v[rng.random(length) < 0.2] = 0.0
        v[rng.random(length) < 0.1] = -0.0
        if rng.random() < 0.05:
            v[:] = -0.0
        lists.append(v.tolist())
    return lists


def bits(values: np.ndarray) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.uint64).tolist()


@pytest.mark.parametrize("longest", [1, 2, 3, 4, 9, 17, 200])
def test_ordered_sums_match_plain_sum(longest: int) -> None:
    # longest=200 with mostly short lists is too ragged to pad: the Polars path
    rng = np.random.default_rng(longest)
    lists = random_lists(rng, 300, longest)
    got = _ordered_sums(pl.Series("v", lists, dtype=pl.List(pl.Float64)))
    assert bits(got.to_numpy()) == bits(np.array([plain_sum(v) for v in lists]))


def test_ordered_sums_of_equal_lengths_and_with_nulls() -> None:
    rng = np.random.default_rng(7)
    lists = [list(rng.standard_normal(4) * 1e3) for _ in range(50)]
    got = _ordered_sums(pl.Series("v", lists, dtype=pl.List(pl.Float64)))
    assert bits(got.to_numpy()) == bits(np.array([plain_sum(v) for v in lists]))
    with_null = pl.Series("v", [[1.0, None, 2.0], [3.0]], dtype=pl.List(pl.Float64))
    assert _ordered_sums(with_null).to_list() == [3.0, 3.0]


def test_group_sum_is_independent_of_row_order() -> None:
    rng = np.random.default_rng(3)
    n = 5000
    frame = pl.DataFrame(
        {
            "g": rng.integers(0, 400, n),
            "h": rng.integers(0, 3, n),
            "v": rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, n),
        }
    )

    def sums(f: pl.DataFrame) -> pl.DataFrame:
        return (
            _group_sum(f.lazy(), ["g", "h"], s=pl.col("v"), t=pl.col("v") * 3.0)
            .collect()
            .sort("g", "h")
        )

    first = sums(frame)
    for seed in range(3):
        again = sums(frame.sample(fraction=1.0, shuffle=True, seed=seed))
        assert again.select("g", "h").equals(first.select("g", "h"))
        for column in ("s", "t"):
            assert bits(again[column].to_numpy()) == bits(first[column].to_numpy())
    reference = frame.group_by("g", "h").agg(pl.col("v")).sort("g", "h")
    expected = [plain_sum(v) for v in reference["v"].to_list()]
    assert bits(first["s"].to_numpy()) == bits(np.array(expected))
