"""The pyperf example of docs/suites.md, old version: "sort rows" sorts with a lambda key.

bench_new.py is the same script with ``key=operator.itemgetter(0)``; "join names" is the same in
both, a benchmark the change does not touch. Run as a pyperf script (``python bench_old.py -o
FILE``, pyperf's options), e.g. by ``explain-pipeline ab --measure pyperf``.
"""

import pyperf

ROWS = [(i * 7919 % 1000, f"name{i}") for i in range(1000)]  # the keys 0..999, shuffled
NAMES = [name for _, name in ROWS]


def sort_rows() -> list[tuple[int, str]]:
    return sorted(ROWS, key=lambda row: row[0])


def join_names() -> str:
    return ",".join(NAMES)


if __name__ == "__main__":
    runner = pyperf.Runner()
    runner.bench_func("sort rows", sort_rows)
    runner.bench_func("join names", join_names)
