"""A small PyTorch program for ``--trace kineto``: two named regions under the real profiler.

Each profiled step runs an ``attention`` region (a 256-wide scaled dot-product attention) and an
``mlp`` region (two linear layers whose hidden width is the first argument, 2048 by default), each
inside ``torch.profiler.record_function``. The profiler's trace goes to $EXPLAIN_TRACE_DIR, where
``explain-pipeline round … --trace kineto`` imports it: the run's breakdown (step × region), its
counters (``aten_ops``, …) and its metric, the sum of the profiled steps (so ``import torch``,
about a second, is not part of it).

A smaller hidden width is the "candidate change": ``mlp`` shrinks, ``attention`` does not (the
mechanism ``mlp`` decrease, ``attention`` unchanged).

Run by hand without $EXPLAIN_TRACE_DIR, the trace is written to the current folder.
"""

from __future__ import annotations

import os
import sys

# One thread. PyTorch's CPU operators split their work over a pool of threads (one per core):
# on a machine where anything else runs, such as the other side's next run or another job, a
# step's time is then decided by when the pool's threads get a core, not by the work, and two
# runs of the same code differ by more than a change is worth. One thread makes the time the
# work's. Set before torch is imported, which reads it then.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402  (after the thread setting)
from torch.profiler import (  # noqa: E402
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)

WIDTH = 256  # the attention's width (both sides)
TOKENS = 128  # rows per step


def main(argv: list[str]) -> int:
    hidden = int(argv[0]) if argv else 2048
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    x = torch.randn(1, 4, TOKENS, WIDTH // 4)
    up, down = torch.nn.Linear(WIDTH, hidden), torch.nn.Linear(hidden, WIDTH)
    tokens = torch.randn(TOKENS, WIDTH)
    trace_dir = os.environ.get("EXPLAIN_TRACE_DIR", ".")
    with (
        torch.inference_mode(),
        profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=3),
            on_trace_ready=tensorboard_trace_handler(trace_dir),
        ) as prof,
    ):
        for _ in range(4):  # 1 warm-up step, then 3 profiled steps
            with record_function("attention"):
                torch.nn.functional.scaled_dot_product_attention(x, x, x)
            with record_function("mlp"):
                down(torch.relu(up(tokens)))
            prof.step()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
