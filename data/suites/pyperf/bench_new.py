"""The pyperf example of docs/suites.md, new version: "sort rows" sorts with
``operator.itemgetter(0)`` instead of a lambda (bench_old.py); "join names" is unchanged."""

import operator

import pyperf

ROWS = [(i * 7919 % 1000, f"name{i}") for i in range(1000)]  # the keys 0..999, shuffled
NAMES = [name for _, name in ROWS]


def sort_rows() -> list[tuple[int, str]]:
    return sorted(ROWS, key=operator.itemgetter(0))


def join_names() -> str:
    return ",".join(NAMES)


if __name__ == "__main__":
    runner = pyperf.Runner()
    runner.bench_func("sort rows", sort_rows)
    runner.bench_func("join names", join_names)
