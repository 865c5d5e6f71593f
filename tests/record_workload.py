"""A tiny measured command for the recorder's tests (run as a real process by `round`).

Arguments KEY=VALUE: work=N and fixed=N loop iterations in the regions `work` and `fixed`,
timed with this process's CPU time (other load on the machine does not count);
fail=REP:ACTION,... makes repetition REP exit 3 (exit), hang (hang) or write an invalid file
(invalid). Counters: the loop iterations, and the total size of the environment and the
length of the working directory as this process saw them.
"""

from __future__ import annotations

import json
import os
import sys
import time


def spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def timed(n: int) -> float:
    start = time.process_time()
    spin(n)
    return time.process_time() - start


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    actions = dict(p.split(":") for p in args.get("fail", "").split(",") if p)
    action = actions.get(os.environ.get("EXPLAIN_REPETITION", ""))
    if action == "exit":
        print("boom: asked to fail", file=sys.stderr)
        return 3
    if action == "hang":
        time.sleep(600)
    work = int(args.get("work", "200000"))
    regions = {"fixed": timed(int(args.get("fixed", "100000"))), "work": timed(work)}
    document = {
        "metric": -1.0 if action == "invalid" else sum(regions.values()),
        "breakdown": {"step-0": regions},
        "counters": {
            "iterations": work,
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
