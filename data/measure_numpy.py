"""A small measured program for the recorder's quick start: NumPy work in named regions.

Each step draws two random matrices (region ``prepare``), multiplies them (region ``matmul``)
and normalizes the rows of the product (region ``reduce``). Every region is timed; the metric is
the sum of the regions, so interpreter start-up and ``import numpy`` are not part of it. Counters
say how much work was done: ``flops`` of the products and ``matmul_bytes`` of their operands.

The sizes make the change plain even on a busy machine: 384x384 matrices of uniform numbers (cheap
to draw, so the product is most of the metric and the float32 gain about a third of it). With
256x256 normal numbers the metric was about 10 ms, the gain about a fifth, and with a
memory-heavy program on the other core about 1 round in 6 of the quick start was not PASS.

``--dtype float32`` is the "candidate change": the product in single precision moves half the
bytes and runs about twice as fast on a CPU; ``prepare`` and ``reduce`` do not change. (The
product is handed to ``reduce`` in double precision whatever ``--dtype`` says, its conversion
timed in ``matmul``: reducing a float32 product reads half the bytes too, and made ``reduce``
about 1.8x faster, a change the example's mechanism does not declare.)

Run by ``explain-pipeline round`` (or ``ab``): the measurement goes to the file named by
$EXPLAIN_MEASUREMENT; run by hand, it is printed. The clock is this process's CPU time by default
(time other programs take from it on a shared machine is not counted; the work is single-threaded,
so CPU time is the time the work took); ``--clock wall`` uses the wall clock instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

# One BLAS thread: a product that spreads over every core competes with the other side's
# measurement and with whatever else runs; one thread makes CPU time the time of the work.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402  (after the thread settings, which NumPy reads at import)


def multiply(a: np.ndarray, b: np.ndarray, dtype: str) -> tuple[np.ndarray, int]:
    """The product in ``dtype``, handed on in double precision whatever ``dtype`` is, so that
    ``reduce`` does the same work on both sides; and the bytes of its operands."""
    left, right = a.astype(dtype), b.astype(dtype)
    return (left @ right).astype(np.float64, copy=False), left.nbytes + right.nbytes


def measure(size: int, steps: int, dtype: str, clock: Callable[[], float]) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    breakdown: dict[str, dict[str, float]] = {}
    matmul_bytes = 0
    # filled in place, so that preparing the data costs the same whatever the product allocates
    a, b = np.empty((size, size)), np.empty((size, size))
    for step in range(steps):
        regions: dict[str, float] = {}
        start = clock()
        rng.random(out=a)
        rng.random(out=b)
        regions["prepare"] = clock() - start
        start = clock()
        product, operand_bytes = multiply(a, b, dtype)
        regions["matmul"] = clock() - start
        matmul_bytes += operand_bytes
        start = clock()
        norms = np.sqrt(np.einsum("ij,ij->i", product, product))
        (product / norms[:, None]).sum()
        regions["reduce"] = clock() - start
        breakdown[f"step-{step}"] = regions
    metric = sum(sum(r.values()) for r in breakdown.values())
    counters = {"flops": 2 * size**3 * steps, "matmul_bytes": matmul_bytes}
    return {"metric": metric, "breakdown": breakdown, "counters": counters}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=384, help="matrix size (default 384)")
    parser.add_argument("--steps", type=int, default=4, help="steps per run (default 4)")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    document = measure(args.size, args.steps, args.dtype, clock)
    target = os.environ.get("EXPLAIN_MEASUREMENT")
    if target is None:
        print(json.dumps(document, indent=2))
    else:
        with open(target, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
