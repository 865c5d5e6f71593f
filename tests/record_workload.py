"""A tiny measured command for the recorder's tests (run as a real process by `round`).

Arguments KEY=VALUE: work=N and fixed=N are the iterations of the regions `work` and `fixed`;
fail=REP:ACTION,... makes repetition REP exit 3 (exit), hang (hang) or write an invalid file
(invalid). Counters: the work iterations, and the total size of the environment and the length
of the working directory as this process saw them.

Two clocks. By default each region's loop runs and is timed with this process's CPU time (other
load on the machine does not count, but its caches and frequency do: 20% and more per pair under
load), for the tests that are about timing. With seed=S nothing runs and nothing is timed: a
region's value is its iterations x 1e-8 s times a wobble drawn from (S, $EXPLAIN_SIDE,
$EXPLAIN_REPETITION, the region), uniform within 1 +- W (wobble=W, default 0.02). A test's effect
is then exact and the same on every machine and every run: work=30000 against work=60000 (with
the same fixed=) measures (fixed + 60000) / (fixed + 30000) to within the wobble, and a round's
verdict, stop and estimate are the same numbers each time (tests/README.md).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

SECONDS_PER_ITERATION = 1e-8
"""The exact clock's price of one iteration (seed=S)."""


def spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def timed(n: int) -> float:
    start = time.process_time()
    spin(n)
    return time.process_time() - start


def exact(n: int, seed: str, wobble: float, region: str) -> float:
    """n iterations at the exact clock's price, times this run's seeded wobble for ``region``."""
    side = os.environ.get("EXPLAIN_SIDE", "")
    repetition = os.environ.get("EXPLAIN_REPETITION", "")
    draw = random.Random(f"{seed}:{side}:{repetition}:{region}").uniform(-wobble, wobble)
    return n * SECONDS_PER_ITERATION * (1.0 + draw)


def regions_of(args: dict[str, str]) -> dict[str, float]:
    counts = {"fixed": int(args.get("fixed", "100000")), "work": int(args.get("work", "200000"))}
    if "seed" not in args:
        return {name: timed(n) for name, n in counts.items()}
    wobble = float(args.get("wobble", "0.02"))
    return {name: exact(n, args["seed"], wobble, name) for name, n in counts.items()}


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    actions = dict(p.split(":") for p in args.get("fail", "").split(",") if p)
    action = actions.get(os.environ.get("EXPLAIN_REPETITION", ""))
    if action == "exit":
        print("boom: asked to fail", file=sys.stderr)
        return 3
    if action == "hang":
        time.sleep(600)
    regions = regions_of(args)
    document = {
        "metric": -1.0 if action == "invalid" else sum(regions.values()),
        "breakdown": {"step-0": regions},
        "counters": {
            "iterations": int(args.get("work", "200000")),
            "env_bytes": sum(len(k) + len(v) for k, v in os.environ.items()),
            "cwd_length": len(os.getcwd()),
        },
    }
    path = os.environ.get("EXPLAIN_MEASUREMENT")
    if path is None:
        print(json.dumps(document))
    else:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
