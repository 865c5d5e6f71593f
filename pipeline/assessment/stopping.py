"""The plan of a round stopped when decided (``round --until-decided``), from the campaign's
policy: which policies may stop early (``check_campaign``) and the looks of such a round
(``plan_for``). The recorder runs its rounds by it (pipeline.record.until) and ``plan`` prices
them by it (pipeline.study.plan), so the two cannot drift apart.
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.assessment import sequential
from pipeline.assessment.family import DECIDES_REGIONS
from pipeline.assessment.intervals import interval_method
from pipeline.assessment.sequential import Schedule
from pipeline.contract.declare import SCHEDULE_DEFAULTS, bounds
from pipeline.contract.policy import with_defaults
from pipeline.errors import UsageError

BLOCK: int = SCHEDULE_DEFAULTS["look_every"]
"""Repetitions per block, the pairs between looks: one baseline-first, one candidate-first, so
every block is balanced."""
FIRST_LOOK: int = SCHEDULE_DEFAULTS["first_look"]
"""Repetitions at the first look (at least the campaign's min_pairs, rounded up to a block)."""
FAMILY_FIRST_LOOK = 12
FAMILY_LOOK_EVERY = 4
"""The looks of a round that decides every benchmark: 12, 16, ..., the maximum. The constant of
``sequential_bonferroni_t`` is the Pocock boundary at the per-member level alpha/m, and at such
levels it is set by the heavy tails of the t statistic at the earliest looks: with the
recorder's plan (6, 2, 40) it is 5.34 for 12 members (t with 5 degrees of freedom at
1 - 0.05/24 is 4.98) against 3.97 with these looks. In a simulation of the whole stopping rule
(normal log-ratios of spread 0.1, one of m benchmarks 10% slower, gate and margin 1%, 1,000
suites; tests/test_until_family.py re-runs a smaller one) the slower benchmark was found
regressed in 60% (m = 12) and 37% (m = 20) of rounds with (6, 2, 40), in 93% and 88% with these
looks, in 26-28 pairs on average; identical code flagged any benchmark in 0.3-0.4% of rounds
(rho 0.5)."""


def check_campaign(policy: dict[str, Any], source: str) -> None:
    """A usage error unless the policy is valid under early stopping; ``source`` says where it
    comes from (``attempts/x/campaign.json freezes``, ``ab's campaign would freeze``)."""
    policy = with_defaults(policy)
    method, advice = policy["interval"], f"--decision paired --interval {sequential.METHOD}"
    if not interval_method(method).sequential:
        rate = sequential.PEEKING_FALSE_PASS.get(method)
        measured = (
            f"; stopping at the first PASS of {method} after every block passes {rate:.1%} of "
            "rounds whose true gain equals the gate, where 2.5% is intended"
            if rate
            else ""
        )
        raise UsageError(
            f"--until-decided: {source} interval {method}, which is not valid under early "
            f"stopping{measured} (use {advice})"
        )
    if policy["decision"] != "paired":
        raise UsageError(
            f"--until-decided: {source} decision {policy['decision']}; only the paired rule's "
            f"interval is valid under early stopping (use {advice})"
        )


def first_look(min_pairs: int, family: bool = False) -> int:
    """Repetitions at the first look: FIRST_LOOK (FAMILY_FIRST_LOOK for a round deciding
    regions), or min_pairs rounded up to a whole block."""
    return max(FAMILY_FIRST_LOOK if family else FIRST_LOOK, BLOCK * math.ceil(min_pairs / BLOCK))


def plan_for(policy: dict[str, Any], max_repetitions: int | None) -> Schedule:
    """The plan of a round with at most ``max_repetitions`` (a usage error when it cannot be):
    from the first look every block, or, deciding regions, every FAMILY_LOOK_EVERY pairs.
    None: the schedule's default maximum, or the first look when the campaign's min_pairs puts
    it later (min_pairs 100 failed on a --max-repetitions of 40 that nobody gave)."""
    filled = with_defaults(policy)
    family = filled["decide"] == DECIDES_REGIONS
    first = first_look(int(filled["min_pairs"]), family)
    every = FAMILY_LOOK_EVERY if family else BLOCK
    if max_repetitions is None:
        max_repetitions = max(SCHEDULE_DEFAULTS["max_pairs"], first)
    spec = bounds("attempt", "sequential", "max_pairs")
    problem = spec.problem(max_repetitions)
    if problem is not None:
        raise UsageError(f"--max-repetitions {problem}, got {max_repetitions}")
    if max_repetitions % BLOCK or max_repetitions < first:
        raise UsageError(
            f"--max-repetitions must be even (blocks of {BLOCK} repetitions) and at least the "
            f"first look, {first} repetitions; got {max_repetitions}"
        )
    return Schedule(first, every, max_repetitions)
