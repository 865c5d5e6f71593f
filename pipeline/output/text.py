"""The terminal's text: the verdict table of `assess` and `campaign final`, the summary of a
recorded round, `ab`'s report, the `plan` table, and the one-line notes commands print on stderr
(the gate's line, campaigns rejected at ingest, a started campaign)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from functools import singledispatch
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.assessment.campaigns import AssessResult
from pipeline.output.numbers import TEXT, fmt_number, fmt_paired
from pipeline.output.views import (
    METRIC_VERDICT,
    RUSAGE_PREFIX,
    SUMMARY_HEADERS,
    Split,
    accounting_text,
    campaign_order,
    chain_text,
    changed,
    confirmation_notes,
    gain_text,
    gate_leads,
    gate_line,
    issue_text,
    member_cells,
    member_counts,
    members_in_order,
    parts,
    pick_text,
    reference_note,
    rejected_names,
    rejections,
    selected_text,
    summary_cells,
    verdict_text,
    what_if_label,
)
from pipeline.record.campaign import AbResult, FinalResult
from pipeline.record.rounds import RoundResult
from pipeline.study.plan import Plan


@singledispatch
def render(result: object) -> str:
    raise TypeError(f"no text for a {type(result).__name__}")


def _num(value: float | None, spec: str = ".4f") -> str:
    return fmt_number(value, spec, TEXT)


def _interval(estimate: float | None, low: float | None, high: float | None) -> str:
    return fmt_paired(estimate, low, high) or TEXT.none


def _flag(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# -- assess ------------------------------------------------------------------------------------
def _grid(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() + "\n"
        for r in rows
    )


def _order_warnings(rows: pl.DataFrame) -> str:
    """One line per attempt whose run order measurably changed the metric ratio."""
    if not rows["order_bias"].fill_null(False).any():
        return ""
    flagged = rows.filter(pl.col("order_bias").fill_null(False))
    return "".join(
        f"ORDER BIAS {r['attempt_id']}: pairs run baseline first differ from the others by "
        f"x{_num(r['order_effect'])} [{_num(r['order_effect_low'])}, "
        f"{_num(r['order_effect_high'])}]; the side that runs second is measurably "
        "slower or faster (a balanced order keeps the paired estimate unbiased)\n"
        for r in flagged.iter_rows(named=True)
    )


def integrity_lines(errors: pl.DataFrame) -> str:
    """Each integrity error with what was expected and what was found."""
    out = []
    for e in errors.iter_rows(named=True):
        where = f"attempt {e['attempt_id']}" if e["attempt_id"] else "campaign"
        out.append(f"  {where}: [{e['code']}] {e['message']}\n")
        out.append(f"    expected: {e['expected'] or '-'}\n    actual:   {e['actual'] or '-'}\n")
    return "".join(out)


def rejected_lines(rows: pl.DataFrame) -> str:
    """What ingest rejected in one campaign (table ``rejections``): the attempts named, then
    each error as ingest printed it (file:line, field, reason [code])."""
    if rows.is_empty():
        return ""
    names = ", ".join(rejected_names(rows))
    out = [f"REJECTED at ingest, not assessed: {names} (fix the files and ingest again)\n"]
    out += [
        f"  {r['attempt_id'] or 'campaign'}: {issue_text(r)}\n" for r in rows.iter_rows(named=True)
    ]
    return "".join(out)


def rejection_warnings(result: AssessResult) -> list[str]:
    """stderr: one line per campaign with attempts ingest rejected."""
    return [
        f"warning: {key[0]}: rejected at ingest, not assessed: {', '.join(rejected_names(rows))}"
        for key, rows in parts(rejections(result), "campaign_id").items()
    ]


def _campaign_table(split: Split, cid: str, what_if: bool) -> str:
    errors = split.blocked(cid)
    if errors.height:
        return (
            f"campaign {cid}: BLOCKED by {errors.height} integrity error(s); "
            "no verdicts issued\n" + integrity_lines(errors) + "\n"
        )
    out = io.StringIO()
    rows = split.assessed(cid)
    first = rows.row(0, named=True) if rows.height else {}
    policy = (
        f"decision={first.get('decision')} require_explanation="
        f"{_flag(first.get('require_explanation'))}"
        if first
        else "no attempts"
    )
    out.write(f"campaign {cid}: {policy}\n")
    if rows.height:
        cells = (summary_cells(r) for r in rows.iter_rows(named=True))
        out.write(_grid([SUMMARY_HEADERS, *cells]))
        out.write(_order_warnings(rows))
        out.write(_accounting(split.result, cid))
        for aid in rows["attempt_id"]:
            members = split.benchmarks(cid, aid)
            if members.height:
                lines = benchmark_lines(members, "the candidate", f" of {aid}")
                out.write("".join(f"{line}\n" for line in lines))
    out.write(rejected_lines(split.rejected(cid)))
    if what_if:
        differ, total = changed(split.result, cid)
        out.write(f"verdicts that differ from the frozen policy: {differ} of {total}\n")
    out.write("\n")
    return out.getvalue()


def _accounting(result: AssessResult, cid: str) -> str:
    """The campaign's accounting under its table, and what each confirmation round is."""
    account = result.accounts.get(cid)
    if account is None:
        return ""
    lines = [f"campaign accounting: {accounting_text(account)}", *confirmation_notes(account)]
    return "".join(line + "\n" for line in lines)


@render.register(AssessResult)
def assess(result: AssessResult) -> str:
    """`assess`: per campaign its policy, the verdict table (or its integrity errors), the
    attempts ingest rejected; a what-if result says so first and counts the changed verdicts."""
    out = io.StringIO()
    if result.what_if:
        out.write(what_if_label(result) + "\n\n")
    split = Split(result)
    for cid in campaign_order(result):
        out.write(_campaign_table(split, cid, bool(result.what_if)))
    if result.what_if:
        differ, total = changed(result)
        out.write(f"what-if changes {differ} of {total} verdicts\n")
    if not campaign_order(result):
        out.write("no campaigns to assess\n")
    return out.getvalue()


@render.register(FinalResult)
def final(result: FinalResult) -> str:
    """`campaign final`: the confirmation round it recorded (--confirm), the campaign's table
    and its best attempt."""
    out = [] if result.confirmed is None else [round_(result.confirmed), "\n"]
    out.append(assess(result.assess))
    if result.assess.blocked.height:
        return "".join(out)
    pick = pick_text(result.assess, result.assess.accounts.get(result.campaign_id))
    if pick is not None:
        out.append(f"{pick}\n")
        out.append(_gain(result))
    elif result.rejected.height:
        out.append(
            "best attempt: none (no assessed attempt is PASS; some were rejected at "
            "ingest, above)\n"
        )
    else:
        out.append("best attempt: none (no attempt is PASS)\n")
    return "".join(out)


def _gain(result: FinalResult) -> str:
    """Under the best attempt: its selected estimate, the chain, and the campaign's gain."""
    account = result.assess.accounts.get(result.campaign_id)
    if account is None:
        return ""
    lines = [f"  {x}" for x in (selected_text(account), chain_text(account)) if x]
    lines.append(f"campaign's gain: {gain_text(account, result.folder, result.store)}")
    return "".join(line + "\n" for line in lines)


def benchmark_lines(members: pl.DataFrame, faster: str, which: str = "") -> list[str]:
    """An attempt's benchmarks (contract §15): what the intervals are and which way they read
    (``faster``: the side a ratio above 1 favours), one row per member in the order every
    format lists them (views.members_in_order: the metric, then the largest slowdown first),
    then the count per verdict."""
    m = members.height
    methods = ", ".join(sorted(set(members["method"].drop_nulls()))) or "no interval"
    critical = members["critical"].drop_nulls()
    constant = f", c = {critical[0]:.4f}" if critical.len() else ""
    head = (
        f"benchmarks{which}: {m} members (the metric and {m - 1} benchmarks) decided together, "
        f"simultaneous intervals ({methods}{constant}); > 1: {faster} is faster"
    )
    cells = [member_cells(r) for r in members_in_order(members).iter_rows(named=True)]
    grid = _grid([("", "pairs", "ratio [low, high]", "verdict"), *cells])
    return [head, *("  " + line for line in grid.splitlines()), f"  {member_counts(members)}"]


def campaign_started(document: Mapping[str, Any], folder: Path) -> str:
    """`campaign start`: what was frozen, and the next command."""
    metric = document["metric"]
    settings = " ".join(f"{k}={_flag(v)}" for k, v in sorted(document["policy"].items()))
    return (
        f"started campaign {document['campaign_id']} in {folder}\n"
        f"  metric {metric['name']} ({metric['better']} is better), kind {document['kind']}\n"
        f"  policy {settings}\n"
        f"  policy_sha256 {document['policy_sha256']}\n"
        f"next: explain-pipeline round {folder} --baseline LABEL --baseline-cmd CMD "
        "--candidate LABEL --candidate-cmd CMD\n"
    )


# -- round -------------------------------------------------------------------------------------
STOPS = {
    "pass": "PASS reached",
    "futility": "PASS out of reach by the maximum (futility)",
    "max": "the maximum reached",
    "interrupted": "stopped before a decision",
}
FAMILY_STOPS = {
    **STOPS,
    "decided": "every benchmark decided",
    "futility": "the undecided benchmarks out of reach by the maximum (futility)",
}
"""Why a round deciding every benchmark stopped (contract §15)."""


def sequential_line(result: RoundResult) -> str | None:
    """--until-decided: why the round stopped, after which looks, and the verdict there."""
    plan = result.sequential
    if plan is None:
        return None
    looks = ", ".join(str(n) for n in plan["looks"]) or "none"
    row = result.decision
    verdict = f"; verdict there {verdict_text(row)}" if row is not None else ""
    stops = STOPS
    if result.members is not None:
        stops = FAMILY_STOPS
        counts = ", ".join(f"{n} {v}" for v, n in result.members.items() if n)
        verdict = f"; benchmarks there: {counts}"
    repetitions = len({x["repetition"] for x in result.lines})
    stop = stops[plan["stopped"]]
    if result.stop_why:
        stop = f"PASS out of reach (futility: {result.stop_why})"
    return (
        f"until decided: {stop} at {repetitions} repetitions "
        f"(pairs at each look: {looks}; looks from {plan['first_look']} every "
        f"{plan['look_every']}, at most {plan['max_pairs']}){verdict}"
    )


def warmup_text(result: RoundResult) -> str:
    """The warm-up runs that succeeded per side, e.g. ``warm-up: baseline 0 of 1 ok, ...``."""
    return "warm-up: " + ", ".join(
        f"{side} {result.warmup_ok.get(side, 0)} of {result.warmup} ok"
        for side in ("baseline", "candidate")
    )


@render.register(RoundResult)
def round_(result: RoundResult) -> str:
    """`round`: runs per side, pairs, why it stopped, the order, where runs.log is. A round
    stopped by its warm-ups ran no repetition: it says so and which warm-ups failed, rather
    than counting zero runs."""
    stopped = f" (stopped: {result.stopped})" if result.stopped else ""
    head = f"round {result.round} ({result.attempt_id}): {result.status}{stopped}\n"
    tail = f"  {result.folder} (runs.log: every run, failures with their stderr)\n"
    if not result.lines:
        return head + f"  no repetition ran; {warmup_text(result)}\n" + tail
    counts = "; ".join(
        f"{side} {result.count(side, 'ok')} ok, {result.count(side, 'failed')} failed"
        for side in ("baseline", "candidate")
    )
    warmups = f"; {warmup_text(result)}" if result.warmups_failed else ""
    first = sum(1 for x in result.lines if x["side"] == "baseline" and x["order"] == 0)
    total = len({x["repetition"] for x in result.lines})
    until = sequential_line(result)
    return (
        head
        + f"  {counts}; {result.n_pairs} pairs{warmups}\n"
        + (f"  {until}\n" if until else "")
        + f"  order seed {result.order_seed}: baseline first in {first} of {total} repetitions\n"
        + tail
    )


# -- ab ----------------------------------------------------------------------------------------
def _order_effect(row: Mapping[str, Any]) -> str | None:
    """The order-effect columns when this version of assess computes them."""
    if "order_effect" not in row:
        return None
    if row["order_effect"] is None:
        return f"order effect: - ({row.get('order_effect_reason') or 'not computed'})"
    bias = "biased by run order" if row.get("order_bias") else "no order bias found"
    estimate = _interval(
        row["order_effect"], row.get("order_effect_low"), row.get("order_effect_high")
    )
    return f"order effect (A-first pairs vs B-first pairs): {estimate}, {bias}"


def rusage_line(counters: pl.DataFrame) -> str:
    """The recorder's ``rusage.*`` counters in one line: how many, and those that moved."""
    moved = counters.filter(pl.col("direction").is_in(["decrease", "increase"]))
    said = "; ".join(
        f"{c['name'].removeprefix(RUSAGE_PREFIX)} "
        f"{_interval(c['estimate'], c['low'], c['high'])} {c['direction']}"
        for c in moved.iter_rows(named=True)
    )
    return f"{RUSAGE_PREFIX}* ({counters.height} counters of each run): " + (
        f"moved: {said}" if said else "none moved"
    )


def _quantities(result: AbResult) -> list[str]:
    """Every comparison but the metric's; with benchmarks, the regions are in their table
    first and the rusage.* counters folded into one line below it."""
    comparisons = result.final.assess.comparisons
    shown = comparisons.filter(comparisons["quantity"] != "metric")
    members = result.final.assess.benchmarks  # deciding regions (--measure by default)
    head: list[str] = []
    if members.height:
        rusage = (pl.col("quantity") == "counter") & pl.col("name").str.starts_with(RUSAGE_PREFIX)
        head = [*benchmark_lines(members, "B"), rusage_line(shown.filter(rusage))]
        shown = shown.filter(~rusage & (pl.col("quantity") != "region"))
    width = max([24, *(len(name) for name in shown["name"])])  # names line up, long ones too
    lines = head + [
        f"  {c['quantity']:<17} {c['name']:<{width}} "
        f"{_interval(c['estimate'], c['low'], c['high']):<30} "
        f"{c['direction'] or c['reason'] or ''}"
        for c in shown.iter_rows(named=True)
    ]
    outcomes = result.final.assess.outcomes
    lines += [
        f"  declared {o['target']} {o['name']} {o['expect']}: {o['outcome']}"
        + reference_note(o, members)
        for o in outcomes.iter_rows(named=True)
    ]
    return lines


def decided_by(result: AbResult) -> str:
    """The rule that gave the verdict: the median rule, or the paired rule with the interval
    method its metric row actually used (student_t falls back to expanded_percentile when a
    pair has a vanished candidate; the row says so)."""
    if result.policy["decision"] == "median":
        return "the median rule"
    comparisons = result.final.assess.comparisons
    metric = comparisons.filter(comparisons["quantity"] == "metric")
    used = metric["method"][0] if metric.height else None
    return f"the paired rule, interval {used or result.policy['interval']}"


def _price_line(priced: Mapping[float, int | None]) -> str:
    gains = " / ".join(f"{g:g}%" for g in priced)
    pairs = " / ".join("never" if n is None else f"~{n}" for n in priced.values())
    return (
        f"to detect a true gain of {gains} at 80% power: {pairs} pairs (from this "
        "round's spread; explain-pipeline plan prices it in detail)"
    )


def _ab_verdict(result: AbResult, row: Mapping[str, Any]) -> list[str]:
    out = [
        "paired ratio (> 1: B is better): "
        + _interval(row["paired_estimate"], row["paired_low"], row["paired_high"])
        + (f" ({row['paired_reason']})" if row["paired_reason"] else ""),
        f"median improvement: {_num(row['improvement_pct'], '+.2f')} %",
    ]
    effect = _order_effect(row)
    if effect:
        out.append(effect)
    out.append(f"explanation: {row['explanation']}")
    out += _quantities(result)
    gate = result.policy["min_improvement_pct"]
    label = METRIC_VERDICT if gate_leads(result.gate) else "verdict"
    out.append(
        f"{label}: {verdict_text(row)} (decided by {decided_by(result)}, gate {gate:g} %, "
        f"require_explanation {_flag(row['require_explanation'])})"
    )
    if result.gate is not None and not gate_leads(result.gate) and view_regions(result):
        out.append(gate_line(result.gate))
    if result.priced:
        out.append(_price_line(result.priced))
    return out


def view_regions(result: AbResult) -> bool:
    """Whether ab's campaign decided every benchmark."""
    return not result.final.assess.benchmarks.is_empty()


@render.register(AbResult)
def ab(result: AbResult) -> str:
    """`ab`: a gate other than not-improved first (it decides the exit code), the two commands,
    the round, the paired ratio, the order effect, the explanation, every quantity, the verdict
    and what it was decided by; the price of a verdict not PASS."""
    row = result.row
    recorded = result.round
    command_a, command_b = result.commands
    out = [gate_line(result.gate)] if result.gate is not None and gate_leads(result.gate) else []
    name_a, name_b = (f" {n}" for n in result.names) if result.names else ("", "")
    out += [f"A (baseline){name_a}:  {command_a}", f"B (candidate){name_b}: {command_b}"]
    failed = recorded.count("baseline", "failed") + recorded.count("candidate", "failed")
    if recorded.lines:
        out.append(
            f"{len({x['repetition'] for x in recorded.lines})} repetitions, "
            f"{recorded.n_pairs} pairs, {failed} failed runs, order seed "
            f"{recorded.order_seed}"
        )
    else:
        out.append(f"no repetition ran ({warmup_text(recorded)}), order seed {recorded.order_seed}")
    until = sequential_line(recorded)
    if until:
        out.append(until)
    if result.final.assess.blocked.height or row is None:
        out.append("no verdict (see the errors above)")
        return "\n".join(out) + "\n"
    out += _ab_verdict(result, row)
    if result.report is not None:
        out.append(f"report: {result.report}")
    if result.kept is not None:
        out.append(f"kept: {result.round.folder} (store {result.kept / '.explain-store'})")
    elif recorded.status == "failed":
        stopped = f" ({recorded.stopped})" if recorded.stopped else ""
        out.append(
            f"the round failed{stopped}: its folder is kept, every run with "
            f"its stderr in {recorded.folder / 'runs.log'}"
        )
    return "\n".join(out) + "\n"


# -- plan --------------------------------------------------------------------------------------
def _pairs(value: int | None) -> str:
    return "never" if value is None else str(value)


def _sequential_head(result: Plan) -> list[str]:
    """What the seq columns price: this campaign's round --until-decided, or, when its policy
    refuses that, such a round in a campaign frozen for it (the refusal is quoted)."""
    looks = f"looks every {result.look_every} pairs from {result.first_look} to {result.max_pairs}"
    if result.refusal is None:
        return [f"sequential: round --until-decided, {looks}"]
    return [
        f"sequential: what a round --until-decided would cost, {looks}, in a campaign frozen "
        "with --decision paired --interval sequential_t (or ab --until-decided), not in this one:",
        f"  {result.refusal}",
    ]


@render.register(Plan)
def plan(result: Plan) -> str:
    """`plan`: one line per quantity and gain (decide regions: per member and change)."""
    from pipeline.assessment.power import LIMIT
    from pipeline.study.plan import POWERS

    labels = [
        r.spread.quantity
        if r.spread.quantity == "metric"
        else f"{r.spread.quantity} {r.spread.name}"
        for r in result.rows
    ]
    width = max(28, *(len(x) for x in labels)) if result.family_size else 28
    out = [_plan_head(result), *_sequential_head(result), ""]
    out.append(
        f"{'quantity':<{width}} {'spread':>7} {'change' if result.family_size else 'gain':>6} "
        + " ".join(f"{'fixed ' + format(p, '.0%'):>10}" for p in POWERS)
        + f" {'seq power':>10} {'seq mean':>9} {'seq p90':>8}"
    )
    for label, row in zip(labels, result.rows, strict=True):
        seq = (
            ""
            if math.isnan(row.sequential_power)
            else (
                f" {row.sequential_power:>10.0%} {row.sequential_mean:>9.1f} "
                f"{row.sequential_p90:>8.0f}"
            )
        )
        out.append(
            f"{label[:width]:<{width}} {row.spread.sd:>7.4f} {row.effect_pct:>5g}% "
            + " ".join(f"{_pairs(row.fixed[p]):>10}" for p in POWERS)
            + seq
        )
    spread = result.rows[0].spread
    out += [
        "",
        f"spread: standard deviation of the per-pair log-ratio within each attempt, "
        f"pooled (metric: {spread.n_pairs} pairs in {spread.n_attempts} attempts); "
        "fixed: pairs of a fixed round for that power; never: the gain does not clear the "
        f"gate (or needs over {LIMIT:,} pairs)",
    ]
    if result.family_size:
        out.append(
            "decide regions: a change of that size, either way, called improved (clears the "
            "gate) or regressed (clears the margin) by the member's simultaneous interval; the "
            "round stops when every member is decided, so it needs at least the largest of "
            "these"
        )
    return "\n".join(out) + "\n"


def _plan_head(result: Plan) -> str:
    """The campaign's policy as the plan reads it (decide regions: the family's)."""
    if result.family_size:
        return (
            f"campaign {result.campaign_id}: decide regions, {result.family_size} members "
            f"(the metric and every benchmark) decided together, Bonferroni Student-t; gate "
            f"{result.gate_pct:g} % (improved), margin {result.margin_pct:g} % (regressed), "
            f"confidence {result.confidence:g}, min_pairs {result.min_pairs}"
        )
    return (
        f"campaign {result.campaign_id}: interval {result.interval}, gate "
        f"{result.gate_pct:g} % (metric), confidence {result.confidence:g}, min_pairs "
        f"{result.min_pairs}"
    )
