"""The campaign's own accounting (docs/contract.md §14, §16): how many rounds it tried, how many
passed, how many PASSes identical code would have given at its design, which attempt a
confirmation round measures again, and what the confirmation measured: the campaign's gain.

A campaign is a search; its pick is the largest of many noisy estimates, so its own estimate
leans high (``calibrate --campaigns``). The confirmation round is a fresh round of the campaign's
reference baseline (the first round's) against the pick, recorded after the pick was made; its
interval is the campaign's gain. In a chained campaign (some round's baseline is an earlier
round's candidate: each adopted step builds on the last) the confirmation target is the chain's
last adopted step, compared with the original baseline at once instead of multiplying the steps'
estimates, each of them selected and biased; elsewhere it is the campaign's best attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from pipeline.assessment import chance
from pipeline.assessment.sequential import Schedule

SCHEDULE = ("sequential_first_look", "sequential_look_every", "sequential_max_pairs")

Target = Literal["best", "chain"]


@dataclass(frozen=True)
class Confirmation:
    """A confirmation round as assessed: its interval is the campaign's gain."""

    attempt_id: str
    confirms: str
    baseline: str
    candidate: str
    status: str
    n_pairs: int
    estimate: float | None
    low: float | None
    high: float | None
    verdict: str
    reason: str | None
    chosen: tuple[str, ...] = ()
    """What the caller chose against the rule (attempt.json's ``chosen``: ``again``,
    ``given_commands``), shown beside the interval."""

    @property
    def counts(self) -> bool:
        """A started confirmation counts, aborted or completed (stopping one that looks bad
        and measuring again would be the search over again); only a failed one that measured
        no pair (a broken command) does not."""
        return not (self.status == "failed" and self.n_pairs == 0)


@dataclass(frozen=True)
class Account:
    """One campaign's accounting. ``expected``: the PASSes identical code would give over the
    campaign's rounds (None when no spread could be measured); an upper bound when
    ``explanation_gate``. ``target``: the attempt a confirmation measures again (None: no
    PASS yet), chosen by ``target_rule``; ``confirmation``: the confirmation of it that counts
    (the first one that counts, else the latest), whose interval is the campaign's gain;
    ``again``: those measured after it by choice (``--measure-again``), shown beside it."""

    campaign_id: str
    decision: str
    rounds: int
    passes: int
    expected: float | None
    rule: str
    spread: float | None
    side_spread: float | None
    explanation_gate: bool
    reference: str | None
    chained: bool
    target: str | None
    target_rule: Target
    target_row: dict[str, Any] | None
    chain: tuple[str, ...]
    chain_estimate: float | None
    confirmation: Confirmation | None
    other_confirmations: tuple[tuple[str, str], ...]
    """(confirmation, attempt it confirms) of attempts that are not the target now (the pick
    moved since, or another round was confirmed on purpose)."""
    again: tuple[Confirmation, ...] = ()
    chain_labels: tuple[str, ...] = ()
    """The chain's labels, its first step's baseline first: ``main``, ``a``, ``b``."""
    chain_broken: bool = False
    """The chain does not reach the reference baseline: its first step's baseline is no earlier
    adopted round's candidate (a baseline never recorded)."""


def _rounds_of(attempts: pl.DataFrame) -> pl.DataFrame:
    return attempts.filter(pl.col("kind").fill_null("round") != "confirmation").sort(
        "round", "attempt_id"
    )


def _is_chained(rounds: pl.DataFrame) -> bool:
    """Some round's baseline is the candidate of an earlier round."""
    seen: set[str] = set()
    for baseline, candidate in rounds.select("baseline", "candidate").iter_rows():
        if baseline in seen:
            return True
        seen.add(candidate)
    return False


@dataclass(frozen=True)
class _Chain:
    steps: tuple[str, ...]
    labels: tuple[str, ...]
    product: float | None
    broken: bool


def _chain(
    target: str, rounds: pl.DataFrame, rows: Mapping[str, dict[str, Any]], reference: str
) -> _Chain:
    """The adopted steps from the reference baseline to ``target`` (each step's baseline is the
    candidate of the latest eligible round before it), their labels and the product of their
    estimates; broken when a step's baseline is no earlier adopted candidate (no product)."""
    by_id = {r["attempt_id"]: r for r in rounds.iter_rows(named=True)}
    steps, current = [target], by_id[target]
    labels = [current["candidate"]]
    while current["baseline"] != reference:
        before = [
            r
            for r in by_id.values()
            if r["candidate"] == current["baseline"]
            and r["round"] < current["round"]
            and rows.get(r["attempt_id"], {}).get("eligible")
        ]
        if not before:
            labels.append(current["baseline"])
            return _Chain(tuple(reversed(steps)), tuple(reversed(labels)), None, True)
        current = max(before, key=lambda r: (r["round"], r["attempt_id"]))
        steps.append(current["attempt_id"])
        labels.append(current["candidate"])
    labels.append(reference)
    chain = tuple(reversed(steps)), tuple(reversed(labels))
    estimates = [rows[s].get("paired_estimate") for s in steps]
    if any(e is None for e in estimates):
        return _Chain(*chain, None, False)
    return _Chain(*chain, float(np.prod(np.asarray(estimates, dtype=np.float64))), False)


def _target(
    rounds: pl.DataFrame, rows: Mapping[str, dict[str, Any]], chained: bool
) -> tuple[str | None, Target]:
    """The attempt to confirm: the chain's last adopted step, or the campaign's best."""
    eligible = [a for a in rounds["attempt_id"] if rows.get(a, {}).get("eligible")]
    if chained:
        return (eligible[-1] if eligible else None), "chain"
    best = [a for a in rounds["attempt_id"] if rows.get(a, {}).get("best")]
    return (best[0] if best else None), "best"


def _confirmations(
    attempts: pl.DataFrame, rows: Mapping[str, dict[str, Any]], target: str | None
) -> tuple[Confirmation | None, tuple[tuple[str, str], ...], tuple[Confirmation, ...]]:
    """The target's confirmation that counts, the other attempts' confirmations, and the
    target's confirmations measured again after the one that counts."""
    confirming = attempts.filter(pl.col("kind") == "confirmation").sort("round", "attempt_id")
    mine: list[Confirmation] = []
    others = []
    for a in confirming.iter_rows(named=True):
        row = rows.get(a["attempt_id"])
        if row is None:
            continue
        if a["confirms"] != target:
            others.append((a["attempt_id"], a["confirms"]))
            continue
        mine.append(_confirmation(a, row))
    counted = [c for c in mine if c.counts]
    if not counted:
        return (mine[-1] if mine else None), tuple(others), ()
    return counted[0], tuple(others), tuple(counted[1:])


def _confirmation(a: Mapping[str, Any], row: Mapping[str, Any]) -> Confirmation:
    return Confirmation(
        a["attempt_id"],
        a["confirms"],
        a["baseline"],
        a["candidate"],
        row["status"],
        int(row["n_pairs"]),
        row["paired_estimate"],
        row["paired_low"],
        row["paired_high"],
        row["verdict"],
        row["reason"],
        tuple(a["chosen"].split(",")) if a.get("chosen") else (),
    )


# -- the count expected by chance ----------------------------------------------------------------
def _paired_expected(
    rounds: pl.DataFrame, policy: Mapping[str, Any], spread: float
) -> tuple[float, str]:
    gate, confidence = float(policy["min_improvement_pct"]), float(policy["confidence"])
    method, min_pairs = str(policy["interval"]), int(policy["min_pairs"])
    done = rounds.filter(pl.col("status") == "completed")
    fixed = done.filter(pl.col("sequential_max_pairs").is_null())
    n = fixed["n_pairs"].to_numpy().astype(np.float64)
    rates = chance.paired_rates(
        np.where(n >= min_pairs, n, 0), spread, gate_pct=gate, method=method, confidence=confidence
    )
    total = float(rates.sum())
    sequential = done.filter(pl.col("sequential_max_pairs").is_not_null())
    plans = sequential.group_by(*SCHEDULE).len().sort(*SCHEDULE)
    for first, every, most, count in plans.iter_rows():  # one simulation per plan, not per round
        plan = Schedule(first, every, most)
        rate = chance.sequential_rate(spread, gate_pct=gate, plan=plan, confidence=confidence)
        total += count * rate
    how = f"paired rule, {method} at the rounds' pairs"
    if sequential.height:  # the rate of a round stopped when decided is the plan's simulation
        how += " (rounds stopped when decided: simulated)"
    return total, how


def _median_expected(
    rounds: pl.DataFrame, policy: Mapping[str, Any], spread: float, side: float
) -> tuple[float, str]:
    gate = float(policy["min_improvement_pct"])
    done = rounds.filter(pl.col("status") == "completed").with_columns(
        pl.min_horizontal("n_baseline_ok", "n_candidate_ok").alias("n")
    )
    total = 0.0
    for n, count in done.group_by("n").len().iter_rows():  # one simulation per run count
        total += count * chance.median_rate(int(n), spread, side, gate_pct=gate)
    return total, "median rule at the rounds' runs"


def _expected(
    rows: pl.DataFrame, rounds: pl.DataFrame, policy: Mapping[str, Any]
) -> tuple[float | None, str, float | None, float | None]:
    """(expected PASSes, how, spread, side spread) from every attempt's noise."""
    spread = chance.pooled(
        rows["metric_spread"].fill_null(np.nan).to_numpy(),
        (rows["n_pairs"] - 1).clip(lower_bound=0).to_numpy(),
    )
    side = chance.pooled(
        rows["side_spread"].fill_null(np.nan).to_numpy(),
        (rows["n_baseline_ok"] + rows["n_candidate_ok"] - 2).clip(lower_bound=0).to_numpy(),
    )
    if spread is None:
        return None, "no round has 2 pairs: no spread measured", None, side
    if policy["decision"] == "paired":
        total, how = _paired_expected(rounds, policy, spread)
        return total, how, spread, side
    if side is None:
        return None, "no side has 2 runs: no spread measured", spread, None
    total, how = _median_expected(rounds, policy, spread, side)
    return total, how, spread, side


def _round_facts(attempts: pl.DataFrame, assessments: pl.DataFrame) -> pl.DataFrame:
    """The rounds (not confirmations) with their counts and verdicts."""
    wanted = ["attempt_id", "n_pairs", "n_baseline_ok", "n_candidate_ok", "verdict"]
    return _rounds_of(attempts).join(
        assessments.select(wanted), on="attempt_id", how="inner", suffix="_assessed"
    )


def account(
    policy: Mapping[str, Any], attempts: pl.DataFrame, assessments: pl.DataFrame
) -> Account:
    """The accounting of one campaign: its ``campaigns`` row (the effective policy), its rows of
    table ``attempts`` and its rows of table ``assessments``."""
    rows = {r["attempt_id"]: r for r in assessments.iter_rows(named=True)}
    attempts = attempts.select(ACCOUNT_COLUMNS)  # the counts and verdicts are assess's
    rounds = _round_facts(attempts, assessments)
    chained = _is_chained(rounds)
    target, rule = _target(rounds, rows, chained)
    reference = rounds["baseline"][0] if rounds.height else None
    found = _Chain((), (), None, False)
    if chained and target is not None and reference is not None:
        found = _chain(target, rounds, rows, reference)
    expected, how, spread, side = _expected(assessments, rounds, policy)
    confirmation, others, again = _confirmations(attempts, rows, target)
    return Account(
        campaign_id=str(policy["campaign_id"]),
        decision=str(policy["decision"]),
        rounds=rounds.height,
        passes=int((rounds["verdict"] == "PASS").sum()),
        expected=expected,
        rule=how,
        spread=spread,
        side_spread=side,
        explanation_gate=bool(policy["require_explanation"]),
        reference=reference,
        chained=chained,
        target=target,
        target_rule=rule,
        target_row=rows.get(target) if target is not None else None,
        chain=found.steps,
        chain_estimate=found.product,
        confirmation=confirmation,
        other_confirmations=others,
        again=again,
        chain_labels=found.labels,
        chain_broken=found.broken,
    )


ACCOUNT_COLUMNS = (
    "attempt_id",
    "round",
    "candidate",
    "baseline",
    "status",
    "kind",
    "confirms",
    "chosen",
    *SCHEDULE,
)


def accounts(
    campaigns: pl.DataFrame, attempts: pl.DataFrame, assessments: pl.DataFrame
) -> dict[str, Account]:
    """The accounting of every campaign with assessments, by campaign id."""
    policies = {r["campaign_id"]: r for r in campaigns.iter_rows(named=True)}
    columns = attempts.select("campaign_id", *ACCOUNT_COLUMNS)
    mine = columns.partition_by("campaign_id", as_dict=True)
    found: dict[str, Account] = {}
    for (cid,), rows in assessments.partition_by("campaign_id", as_dict=True).items():
        own = mine.get((cid,), columns.clear()).drop("campaign_id")
        found[str(cid)] = account(policies[cid], own, rows)
    return found
