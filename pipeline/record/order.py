"""The run order of a round: both sides back to back in each repetition, balanced and shuffled.

A fixed baseline-then-candidate order lets run position masquerade as a code change (the second
run of a pair profits from warm caches, or suffers from a heating CPU). With ``n`` repetitions,
``perm = Generator(PCG64(order_seed)).permutation(n)``; repetition ``perm[i]`` runs the baseline
first iff ``i < ceil(n / 2)``. So ceil(n/2) repetitions are baseline-first, the others
candidate-first, in an order that cannot line up with a periodic disturbance, and the seed,
recorded in attempt.json, reproduces it.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np

from pipeline.contract.declare import SIDES, Side

__all__ = ["SIDES", "Side", "Slot"]


@dataclass(frozen=True)
class Slot:
    """One run of the round: repetition, side and position in its repetition (0 first, 1 second)."""

    repetition: int
    side: Side
    order: int


def baseline_first(n: int, seed: int) -> np.ndarray:
    """Boolean per repetition index: True when that repetition runs the baseline first."""
    perm = np.random.Generator(np.random.PCG64(seed)).permutation(n)
    first = np.zeros(n, dtype=bool)
    first[perm[: math.ceil(n / 2)]] = True
    return first


def schedule(n: int, seed: int) -> list[Slot]:
    """Every run of the round in execution order: repetition 0, 1, …, each side back to back."""
    slots = []
    for repetition, b_first in enumerate(baseline_first(n, seed).tolist()):
        pair: tuple[Side, Side] = SIDES if b_first else (SIDES[1], SIDES[0])
        slots += [Slot(repetition, side, order) for order, side in enumerate(pair)]
    return slots


def block_schedule(blocks: int, seed: int) -> list[Slot]:
    """The runs of ``blocks`` blocks of two repetitions (``round --until-decided``): in block
    ``j`` (repetitions ``2j`` and ``2j + 1``) repetition ``2j + f[j]`` runs the baseline first
    and the other the candidate first, ``f = Generator(PCG64(order_seed)).integers(0, 2,
    blocks)``. Every block is balanced, so the round is balanced wherever it stops, and the
    first blocks do not depend on how many there may be (a prefix of a longer draw)."""
    first = np.random.Generator(np.random.PCG64(seed)).integers(0, 2, size=blocks)
    slots = []
    for block, f in enumerate(first.tolist()):
        for repetition in (2 * block, 2 * block + 1):
            b_first = repetition == 2 * block + f
            pair: tuple[Side, Side] = SIDES if b_first else (SIDES[1], SIDES[0])
            slots += [Slot(repetition, side, order) for order, side in enumerate(pair)]
    return slots


def warmup_sides(k: int) -> list[Side]:
    """``k`` warm-up runs per side, alternating, baseline first (not recorded)."""
    return [SIDES[i % 2] for i in range(2 * k)]


def random_seed() -> int:
    """A fresh order seed (32 bits: short enough to type back with --order-seed)."""
    return secrets.randbelow(2**32)
