"""What every format reads off a result the same way: the verdict with its reason, one attempt's
summary cells, the order of campaigns, a result's tables split once by campaign and attempt, the
what-if label, an attempt's evidence line, the text of a rejection, and an attempt's benchmarks.

Benchmarks (campaigns that decide regions, contract §15): ``Split.benchmarks(cid, aid)`` is the
attempt's rows of table ``benchmarks`` (the result's ``benchmarks`` frame), already in the order
every format lists them (``members_in_order``: the metric, then the benchmarks by change, the
largest slowdown first); ``member_cells`` is one row as text (MEMBER_HEADERS), ``member_legend``
the line that says how to read them, ``member_message`` one member in a sentence (a JUnit failure,
a GitHub annotation)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipeline.assessment.gate import ONE_SIDED_TEXT
from pipeline.output.numbers import SUMMARY, TEXT, fmt_number, fmt_paired

if TYPE_CHECKING:
    import polars as pl

    from pipeline.assessment.accounting import Account, Confirmation
    from pipeline.assessment.campaigns import AssessResult
    from pipeline.assessment.gate import Gate

SUMMARY_HEADERS = tuple(header for _, header in SUMMARY)


def verdict_text(row: Mapping[str, Any]) -> str:
    """``FAIL (below_gate)``: the verdict and, when it has one, its reason."""
    return row["verdict"] + (f" ({row['reason']})" if row.get("reason") else "")


def summary_cells(row: Mapping[str, Any]) -> tuple[str, ...]:
    """One attempt's row of the verdict table (SUMMARY_HEADERS), as every text format shows it."""
    interval = fmt_paired(row["paired_estimate"], row["paired_low"], row["paired_high"])
    return (
        str(row["round"]),
        row["attempt_id"],
        row["candidate"],
        str(row["n_pairs"]),
        fmt_number(row["improvement_pct"], "+.2f", TEXT),
        interval or TEXT.none,
        fmt_number(row["share_speedup"], ".4f", TEXT),
        row["explanation"],
        verdict_text(row),
        "yes" if row["eligible"] else "no",
        "*" if row["best"] else "",
    )


def evidence(row: Mapping[str, Any]) -> str:
    """What decided: the rule, the paired ratio, the median improvement, the explanation."""
    paired = fmt_paired(row["paired_estimate"], row["paired_low"], row["paired_high"])
    median = row["improvement_pct"]
    parts = [f"decision {row['decision']}"]
    parts.append(f"paired ratio {paired}" if paired else "no paired ratio")
    if median is not None:
        parts.append(f"median improvement {median:+.2f} %")
    parts.append(f"explanation {row['explanation']}")
    return ", ".join(parts)


def attempt_message(row: Mapping[str, Any]) -> str:
    """One line saying why an attempt's verdict is what it is (the failure message in JUnit,
    the annotation in GitHub Actions)."""
    return f"{verdict_text(row)}, {evidence(row)}"


def reference_note(outcome: Mapping[str, Any], members: pl.DataFrame) -> str:
    """`` (a reference; its own verdict: regressed 0.7802 [0.7405, 0.8220])`` after a declared
    ``unchanged`` region whose outcome is ``assumed`` (a reference, contract §7) when the attempt
    decides every benchmark and that region, as a benchmark, moved; else ``""``. The reference
    keeps its meaning for the mechanism (it is assumed, never judged there), but its own verdict
    is computed like any benchmark's, and a reader of the expectation must see it beside the
    assumption: a slower reference makes every region normalized by it look faster."""
    import polars as pl

    if outcome["outcome"] != "assumed" or members.is_empty():
        return ""
    row = members.filter((pl.col("quantity") == "region") & (pl.col("name") == outcome["name"]))
    if row.is_empty() or row["verdict"][0] not in ("regressed", "improved"):
        return ""
    r = row.row(0, named=True)
    interval = fmt_paired(r["estimate"], r["low"], r["high"])
    return f" (a reference; its own verdict: {r['verdict']} {interval})"


def outcome_message(outcome: Mapping[str, Any], comparison: Mapping[str, Any] | None) -> str:
    """``contradicted: region_normalized attention 0.9120 [0.9010, 0.9233], increase``."""
    text = outcome["outcome"] + (f" ({outcome['reason']})" if outcome["reason"] else "")
    if comparison is None:
        return text
    interval = fmt_paired(comparison["estimate"], comparison["low"], comparison["high"])
    moved = comparison["direction"] or comparison["reason"] or "-"
    return f"{text}: {comparison['quantity']} {comparison['name']} {interval or TEXT.none}, {moved}"


def what_if_pairs(result: AssessResult) -> str:
    """``decision=paired require_explanation=true``: the overrides of a what-if result."""
    return " ".join(f"{k}={v}" for k, v in (result.what_if or {}).items())


def what_if_label(result: AssessResult) -> str:
    return f"WHAT-IF (not stored): {what_if_pairs(result)}"


def rejections(result: AssessResult) -> pl.DataFrame:
    """Table ``rejections`` of the result's campaigns (empty when assess read none)."""
    from pipeline.contract.schemas import table

    return result.rejected if result.rejected is not None else table("rejections").empty()


def rejected_names(rows: pl.DataFrame) -> list[str]:
    """The rejected attempts of one campaign, in ingest's order (campaign.json: all of them)."""
    return [x or "campaign.json" for x in rows["attempt_id"].unique(maintain_order=True)]


def issue_text(row: Mapping[str, Any]) -> str:
    """One rejection as ingest printed it: ``file:line: field "f": message [code]``."""
    from pipeline.ingestion.files import Issue

    return str(Issue(row["path"], row["line"], row["field"], row["code"], row["message"]))


def campaign_order(result: AssessResult) -> list[str]:
    """The campaigns of a result, assessed or blocked, in the order every format lists them."""
    ids = result.assessments["campaign_id"].to_list() + result.blocked["campaign_id"].to_list()
    return sorted(set(ids) | set(result.campaign_ids))


def changed(result: AssessResult, campaign_id: str | None = None) -> tuple[int, int]:
    """What-if: (verdicts that differ from the frozen policy's, verdicts), of one campaign or
    of all."""
    import polars as pl

    differ, total = result.changed_verdicts(), result.assessments
    if campaign_id is not None:
        differ = differ.filter(pl.col("campaign_id") == campaign_id)
        total = total.filter(pl.col("campaign_id") == campaign_id)
    return differ.height, total.height


def parts(frame: pl.DataFrame, *keys: str) -> dict[tuple[Any, ...], pl.DataFrame]:
    return frame.partition_by(list(keys), as_dict=True, maintain_order=True)


class Split:
    """A result's tables split once, by campaign and by attempt: with --all over thousands of
    campaigns a filter per campaign or attempt would scan every table again each time."""

    def __init__(self, result: AssessResult) -> None:
        self.result = result
        self._rejections = rejections(result)
        self._rejected = parts(self._rejections, "campaign_id")
        self._blocked = parts(result.blocked, "campaign_id")
        self._assessed = parts(result.assessments, "campaign_id")
        self._comparisons = parts(result.comparisons, "campaign_id", "attempt_id")
        self._outcomes = parts(result.outcomes, "campaign_id", "attempt_id")
        self._benchmarks = parts(members_in_order(result.benchmarks), "campaign_id", "attempt_id")

    def blocked(self, cid: str) -> pl.DataFrame:
        return self._blocked.get((cid,), self.result.blocked.clear())

    def assessed(self, cid: str) -> pl.DataFrame:
        return self._assessed.get((cid,), self.result.assessments.clear())

    def rejected(self, cid: str) -> pl.DataFrame:
        return self._rejected.get((cid,), self._rejections.clear())

    def comparisons(self, cid: str, aid: str) -> pl.DataFrame:
        return self._comparisons.get((cid, aid), self.result.comparisons.clear())

    def outcomes(self, cid: str, aid: str) -> pl.DataFrame:
        return self._outcomes.get((cid, aid), self.result.outcomes.clear())

    def benchmarks(self, cid: str, aid: str) -> pl.DataFrame:
        """The attempt's family in ``members_in_order`` (empty: its campaign decides the
        metric alone)."""
        return self._benchmarks.get((cid, aid), self.result.benchmarks.clear())


def best_row(result: AssessResult) -> dict[str, Any] | None:
    """The campaign's pick (the attempt marked best), or None."""
    rows = result.assessments
    best = rows.filter(rows["best"]) if rows.height else rows
    return best.row(0, named=True) if best.height else None


# -- benchmarks: the members of an attempt's family ------------------------------------------------
MEMBER_HEADERS = ("benchmark", "pairs", "ratio [low, high]", "verdict")
SHOWN_ALONE = frozenset({"metric", "region"})
"""The quantities a family's table shows; an attempt's other comparisons (counters, rusage.*,
normalized regions) are listed apart, folded below it."""


def members_in_order(rows: pl.DataFrame) -> pl.DataFrame:
    """Members as every format lists them: per attempt the metric first, then the benchmarks by
    change, smallest ratio first (> 1: the candidate is faster, so the largest slowdown is on
    top), those without an estimate last, ties by name."""
    import polars as pl

    return rows.sort(
        "campaign_id",
        "attempt_id",
        pl.col("quantity") != "metric",
        pl.col("estimate").fill_nan(None),
        "name",
        nulls_last=True,
        maintain_order=True,
    )


def member_label(row: Mapping[str, Any]) -> str:
    """``metric seconds`` for the metric, the benchmark's own name otherwise."""
    return f"metric {row['name']}" if row["quantity"] == "metric" else str(row["name"])


def member_cells(row: Mapping[str, Any]) -> tuple[str, ...]:
    """One member as MEMBER_HEADERS: label, pairs, ratio with its simultaneous interval,
    verdict (with its reason when it has one)."""
    interval = fmt_paired(row["estimate"], row["low"], row["high"]) or TEXT.none
    return (member_label(row), str(row["n_pairs"]), interval, verdict_text(row))


def member_legend(rows: pl.DataFrame) -> str:
    """How to read an attempt's members: what > 1 means and what the intervals are."""
    size = rows["family_size"].to_list()[0]  # one attempt's rows: one family
    methods = sorted(set(rows["method"].drop_nulls()))
    how = f" ({', '.join(methods)})" if methods else ""
    return (
        f"ratio > 1: B (the candidate) is faster; {size} members decided together, each with a "
        f"simultaneous interval{how}: regressed when all of it is below 1/(1 + margin), "
        "improved when all of it clears the gate"
        + (
            "; added: in no baseline run, removed: in no candidate run (neither is one of them)"
            if rows["verdict"].is_in(["added", "removed"]).any()
            else ""
        )
    )


def member_message(row: Mapping[str, Any]) -> str:
    """``regressed: 0.9091 [0.9012, 0.9171], 13 members (bonferroni_t), > 1: B is faster``."""
    if row["verdict"] in ONE_SIDED_TEXT:
        return f"{row['verdict']}: {ONE_SIDED_TEXT[row['verdict']]}, not one of the members decided"
    interval = fmt_paired(row["estimate"], row["low"], row["high"])
    measured = f"{interval}, {row['n_pairs']} pairs" if interval else f"{row['n_pairs']} pairs"
    how = f" ({row['method']})" if row["method"] else ""
    return (
        f"{verdict_text(row)}: {measured}, one of {row['family_size']} members decided "
        f"together{how}; ratio > 1: B is faster"
    )


# -- the CI gate ----------------------------------------------------------------------------------
METRIC_VERDICT = "verdict of the metric"
"""What the attempt's verdict is called below a leading gate: information, not the outcome."""


def gate_leads(gate: Gate | None) -> bool:
    """Whether the gate's outcome leads every format (text, Markdown, the job summary) and sets
    the annotation's level: under ``--fail-on regression`` or ``change`` the exit code follows
    the gate, not the attempt's verdict (a PASS gate over a verdict FAIL is a green check).
    Under ``not-improved``, the default, the gate is the verdict, which leads as it always has."""
    from pipeline.assessment.gate import DEFAULT_FAIL_ON

    return gate is not None and gate.fail_on != DEFAULT_FAIL_ON


def gate_line(gate: Gate) -> str:
    """`assess --gate`, `ab --fail-on`: the gated attempt, whether it failed, and the members
    that decided it (the regressed ones, under ``change`` the improved ones, and those that could
    not be decided for want of data, with their reason)."""
    row = gate.attempt
    where = f"gate: attempt {row['attempt_id']} (round {row['round']})"
    named = [
        (member_label(m), fmt_paired(m["estimate"], m["low"], m["high"]) or TEXT.none, m)
        for m in gate.deciders.iter_rows(named=True)
    ]
    if gate.fail_on == "not-improved":
        line = f"{where}: {verdict_text(row)}, not PASS" if gate.failed else f"{where}: PASS"
        regions = "; ".join(
            f"{label} {ratio}" for label, ratio, m in named if m["quantity"] == "region"
        )
        return line + (f"; regressed: {regions}" if regions else "")
    what = f"--fail-on {gate.fail_on}"
    if row["status"] != "completed":
        return f"{where}: FAIL ({what}): the attempt is {row['status']}; nothing was decided"
    allowed = [_named(label, ratio, m, gate) for label, ratio, m in named if _allowed(m, gate)]
    if gate.failed:  # a member inconclusive for want of data is named with its reason
        return f"{where}: FAIL ({what}): " + "; ".join(
            _named(label, ratio, m, gate) for label, ratio, m in named
        )
    tail = f"; {'; '.join(allowed)}" if allowed else ""
    if gate.members == 1:
        verb = "regress" if gate.fail_on == "regression" else "move"
        return f"{where}: PASS ({what}): the metric did not {verb}{tail}"
    moved = "regressed" if gate.fail_on == "regression" else "moved"
    return f"{where}: PASS ({what}): none of the {gate.members} members {moved}{tail}"


def _allowed(member: Mapping[str, Any], gate: Gate) -> bool:
    """A removed benchmark the gate names without failing on it (--allow-removed)."""
    return gate.allow_removed and member["verdict"] == "removed"


def _named(label: str, ratio: str, member: Mapping[str, Any], gate: Gate) -> str:
    """One member the gate names: ``name 0.77 [0.75, 0.79] regressed``; a removed benchmark
    has no ratio: ``name removed`` (``(allowed: --allow-removed)`` when it fails nothing)."""
    if member["verdict"] != "removed":
        return f"{label} {ratio} {verdict_text(member)}"
    allowed = " (allowed: --allow-removed)" if _allowed(member, gate) else ""
    return f"{label} removed ({ONE_SIDED_TEXT['removed']}){allowed}"


# -- the campaign's accounting ------------------------------------------------------------------
def about(value: float) -> str:
    """An expected count as people read it: ``about 12``, ``about 1.6``, ``about 0.03``,
    ``about 0.004``, ``under 0.001``, ``none``."""
    if value == 0:
        return "none"
    if value < 0.001:
        return "under 0.001"
    spec = ".0f" if value >= 10 else ".1f" if value >= 1 else ".2f" if value >= 0.01 else ".3f"
    return f"about {value:{spec}}"


def accounting_text(account: Account) -> str:
    """``3 of 7 rounds PASS; identical code would PASS about 1.6 rounds of these 7 (...)``: the
    expected PASSes are a count of rounds, so the line says so (``about 0.03 of them`` read as
    a fraction)."""
    head = f"{account.passes} of {account.rounds} rounds PASS"
    if account.expected is None:
        return f"{head}; identical code: not estimated ({account.rule})"
    bound = "at most " if account.explanation_gate and account.expected > 0 else ""
    noise = f"spread {fmt_number(account.spread)} per pair"
    if account.decision == "median":
        noise += f", {fmt_number(account.side_spread)} per side"
    gate = "; require_explanation lowers it" if bound else ""
    these = "of this one" if account.rounds == 1 else f"of these {account.rounds}"
    count = about(account.expected)
    passes = f"{count} {these}" if count == "none" else f"{bound}{count} rounds {these}"
    return f"{head}; identical code would PASS {passes} ({account.rule}; {noise}{gate})"


def confirmation_notes(account: Account) -> list[str]:
    """One line per confirmation round: what it measured again (they are never eligible)."""
    notes = []
    if account.confirmation is not None:
        c = account.confirmation
        notes.append(f"{c.attempt_id} is a confirmation round of {c.confirms} (never eligible)")
    notes += [
        f"{c.attempt_id} is a confirmation round of {c.confirms} measured again by choice after "
        f"{account.confirmation.attempt_id} (not the campaign's gain, which counts the first): "
        "{} ({}".format(*_measured(c))
        for c in account.again
        if account.confirmation is not None
    ]
    notes += [
        f"{a} is a confirmation round of {of}, which is not the campaign's pick (never eligible)"
        for a, of in account.other_confirmations
    ]
    return notes


CHOSEN = {"given_commands": "measured with given commands, not the recorded ones"}
"""How a confirmation's chosen departures read beside its interval (``again`` is said by the
note that lists it)."""


def _measured(c: Confirmation) -> tuple[str, str]:
    """A confirmation's interval and what it is: ``1.95 [1.90, 2.00]`` and ``b against main,
    6 pairs, aborted): PASS`` (its closing parenthesis included, the opening one the caller's)."""
    interval = fmt_paired(c.estimate, c.low, c.high) or "no interval"
    facts = [f"{c.candidate} against {c.baseline}", f"{c.n_pairs} pairs"]
    facts += [c.status] if c.status != "completed" else []
    facts += [CHOSEN[x] for x in c.chosen if x in CHOSEN]
    reason = f" ({c.reason})" if c.reason else ""
    return interval, f"{', '.join(facts)}): {c.verdict}{reason}"


def selected_text(account: Account) -> str | None:
    """The pick's own estimate, and why it leans high."""
    row = account.target_row
    if row is None:
        return None
    paired = fmt_paired(row["paired_estimate"], row["paired_low"], row["paired_high"])
    parts = [f"paired {paired}" if paired else "no paired ratio"]
    if row["improvement_pct"] is not None:
        parts.append(f"median {row['improvement_pct']:+.2f} %")
    why = (
        f"the largest of {account.passes} PASSes, so it leans high"
        if account.target_rule == "best" and account.passes > 1
        else "selected by a PASS, so it leans high"
    )
    return f"selected estimate of {row['attempt_id']}: {', '.join(parts)}; {why}"


def chain_text(account: Account) -> str | None:
    """A chained campaign: its steps by label (``main -> a -> b``), the rounds that adopted
    them and their multiplied estimates; or that the chain is broken (a step's baseline was no
    earlier adopted candidate), so the pick does not follow the reference baseline."""
    if not account.chained or account.target is None:
        return None
    labels = " -> ".join(account.chain_labels)
    rounds = ", ".join(account.chain)
    head = "chained campaign (a round's baseline is an earlier candidate)"
    if account.chain_broken:
        return (
            f"{head}, chain broken: {labels} (adopted in {rounds}) starts at "
            f"{account.chain_labels[0]}, which no earlier adopted round made, so "
            f"{account.target} does not follow {account.reference}; its confirmation measures "
            f"{account.chain_labels[-1]} against {account.reference} directly"
        )
    product = (
        f"; their estimates multiply to {fmt_number(account.chain_estimate)} (each step "
        "selected: it leans high)"
        if account.chain_estimate is not None
        else ""
    )
    return f"{head}: {labels} (adopted in {rounds}){product}"


def pick_text(result: AssessResult, account: Account | None) -> str | None:
    """campaign final's headline: ``best attempt: r002 (round 2, candidate b): PASS``; in a
    chained campaign the pick is the chain's last adopted step, named so (``pick: …``), and
    when the table's best is another round, the line says that one is not the pick. None: no
    pick."""
    row = best_row(result)
    if account is not None and account.chained and account.target_row is not None:
        pick = account.target_row
        text = (
            f"pick: {pick['attempt_id']} (round {pick['round']}, candidate {pick['candidate']}, "
            f"the chain's last adopted step): {verdict_text(pick)}"
        )
        if row is not None and row["attempt_id"] != pick["attempt_id"]:
            text += (
                f"; best in the table, {row['attempt_id']}, is the largest single step, not "
                "the pick of a chained campaign"
            )
        return text
    if row is None:
        return None
    return (
        f"best attempt: {row['attempt_id']} (round {row['round']}, candidate "
        f"{row['candidate']}): {verdict_text(row)}"
    )


def gain_text(account: Account, folder: object = None, store: object = None) -> str:
    """The campaign's gain: the confirmation round's interval, or why there is none (and, with
    the campaign's ``folder``, the command that measures it, with the ``store`` when it is not
    the default one: without it the command would ingest into another store)."""
    c = account.confirmation
    if account.target is None:
        return "none (no attempt is PASS)"
    if c is None:
        how = f" ({confirm_command(folder, store)})" if folder else ""
        return (
            f"not measured again: no confirmation round of {account.target} against "
            f"{account.reference} yet{how}"
        )
    interval, rest = _measured(c)
    return f"{interval} from confirmation round {c.attempt_id} ({rest}"


def confirm_command(folder: object, store: object = None) -> str:
    """``explain-pipeline campaign final FOLDER [--store STORE] --confirm``, quoted for a shell."""
    import shlex

    where = "" if store is None else f" --store {shlex.quote(str(store))}"
    return f"explain-pipeline campaign final {shlex.quote(str(folder))}{where} --confirm"


RUSAGE_PREFIX = "rusage."
"""The recorder's own counters of every run (docs/suites.md): folded below the benchmarks."""


def member_counts(rows: pl.DataFrame) -> str:
    """``1 regressed, 11 unchanged``: how many members got each verdict (none: left out)."""
    from pipeline.assessment.family import VERDICTS

    found = rows["verdict"].to_list()
    return ", ".join(f"{found.count(v)} {v}" for v in VERDICTS if v in found)
