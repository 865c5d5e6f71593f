"""`--format markdown` and the GitHub job summary: per campaign a heading with the policy, the
verdict table (the text table's cells) and, folded under it, each attempt's quantities with
the declared expectations' outcomes. An attempt whose campaign decides every benchmark shows its
benchmarks first, unfolded: one row each, the decided first (``MEMBER_RANK``), by change within
each verdict, with its verdict and a legend; its other quantities (counters, ``rusage.*``) stay
folded below. A gate other than not-improved leads; a document is at most MAX_MARKDOWN_CHARS.
Free text is escaped as literal Markdown (``md``)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from functools import singledispatch
from typing import Any

import polars as pl

from pipeline.assessment.campaigns import AssessResult
from pipeline.assessment.gate import Gate
from pipeline.contract.inert import inert
from pipeline.output import views
from pipeline.output.numbers import TEXT, fmt_paired
from pipeline.record.campaign import AbResult, FinalResult

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")


MAX_MARKDOWN_CHARS = 60_000
"""The most characters a Markdown document of ours has (``--format markdown`` and the GitHub job
summary): it is pasted into pull-request comments, which hold 65,536, and a 5,000-benchmark
suite's full tables are ~380 KB. Over it, each attempt's table of benchmarks keeps its first
rows (``MEMBER_RANK``: the decided and failing members first) and says how many more members it
left out, by verdict; whatever else is too long is cut at a line, saying so. The CSV and JSON
outputs always have every row."""
MEMBER_RANK = (
    pl.when(pl.col("quantity") == "metric")
    .then(0)
    .when(pl.col("verdict").is_in(["regressed", "removed"]))
    .then(1)
    .when(pl.col("verdict").is_in(["improved", "added"]))
    .then(2)
    .when((pl.col("verdict") == "inconclusive") & pl.col("reason").is_not_null())
    .then(3)
    .when(pl.col("verdict") == "inconclusive")
    .then(4)
    .otherwise(5)
)
"""The order of a table of benchmarks: the metric, then regressed and removed, improved and
added, inconclusive for
want of data (a reason), other inconclusive, unchanged; by change within each
(``views.members_in_order``). A table cut by the cap keeps the members that decide."""
FULL_TABLE = (
    "the full table is in the HTML report (ab --report FILE, which the GitHub action writes) and "
    "in the CSV and JSON outputs (ab: keep its campaign with --keep)"
)


@singledispatch
def _document(result: object, limit: int | None = None) -> str:
    """``result``'s Markdown with at most ``limit`` rows per table of benchmarks (None: all)."""
    raise TypeError(f"no Markdown for a {type(result).__name__}")


def render(result: object) -> str:
    """``result`` as Markdown, at most MAX_MARKDOWN_CHARS long: the most rows of each table of
    benchmarks that fit (found by bisection: the document grows with them), then a cut at a
    line if even none fit."""
    full = _document(result, None)
    if len(full) <= MAX_MARKDOWN_CHARS:
        return full
    low, high = 0, _largest_table(result)
    while low < high:
        mid = (low + high + 1) // 2
        if len(_document(result, mid)) <= MAX_MARKDOWN_CHARS:
            low = mid
        else:
            high = mid - 1
    return _cut(_document(result, low))


def _largest_table(result: object) -> int:
    """The most members an attempt of ``result`` has (0: no table of benchmarks)."""
    for attribute in ("final", "assess"):
        result = getattr(result, attribute, result)
    members = result.benchmarks if isinstance(result, AssessResult) else pl.DataFrame()
    if members.is_empty():
        return 0
    sizes: list[int] = members.group_by("campaign_id", "attempt_id").len()["len"].to_list()
    return max(sizes)


def _cut(document: str) -> str:
    """``document`` cut at its last line that leaves room for the note saying so."""
    if len(document) <= MAX_MARKDOWN_CHARS:
        return document
    note = (
        f"\n**… cut here: the document has {len(document):,} characters, more than the "
        f"{MAX_MARKDOWN_CHARS:,} a pull-request comment is given;** {FULL_TABLE}\n"
    )
    kept = document[: MAX_MARKDOWN_CHARS - len(note)]
    return kept[: kept.rfind("\n") + 1] + note


_LINKED = re.compile(r"(@|#(?=\d)|://|(?i:www)\.)")
ZWJ = "\u200d"
"""A zero-width joiner after the first character of `@`, `#` before a digit, `://` and `www.`:
GitHub makes no mention (`@user`, `@org/team`: a notification), no issue reference (`#12`) and
no autolink (a bare URL, `www.`, an e-mail address) of a name, and the text reads the same."""


def _unlinked(text: str) -> str:
    return _LINKED.sub(lambda m: m.group()[0] + ZWJ + m.group()[1:], text)


def md(text: object) -> str:
    """Free text as literal Markdown inside a table cell: inert first (one line, no control
    character, pipeline.contract.inert), then punctuation that Markdown or a table would read
    escaped (`|` included), `<`/`>`/`&` as entities (a C++ template is no HTML tag), and no
    mention, issue reference or autolink (``_LINKED``)."""
    escaped = _MD_SPECIAL.sub(r"\\\1", inert(str(text)))
    escaped = escaped.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _unlinked(escaped)


def html_text(text: object) -> str:
    """Free text inside raw HTML (the `<summary>` line: GitHub reads no Markdown escape
    there, so `\\_` would show its backslash): inert, HTML-escaped, unlinked."""
    return _unlinked(html.escape(inert(str(text)), quote=False))


def md_table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A GitHub-flavoured table; the headers are ours and written as they are."""
    head = list(headers)
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


QUANTITY_HEADERS = (
    "quantity",
    "name",
    "pairs",
    "estimate [low, high]",
    "direction",
    "declared: outcome",
)


def _quantity_rows(comparisons: pl.DataFrame, outcomes: pl.DataFrame) -> list[tuple[str, ...]]:
    """One row per comparison of an attempt, with the outcome of the expectation read from it."""
    read_from = {
        (o["evidence"], o["name"]): f"{o['expect']}: {o['outcome']}"
        for o in outcomes.iter_rows(named=True)
    }
    return [
        (
            c["quantity"],
            c["name"],
            str(c["n_pairs"]),
            fmt_paired(c["estimate"], c["low"], c["high"]) or TEXT.none,
            c["direction"] or c["reason"] or "",
            read_from.get((c["quantity"], c["name"]), ""),
        )
        for c in comparisons.iter_rows(named=True)
    ]


def _unread_outcomes(
    comparisons: pl.DataFrame, outcomes: pl.DataFrame, members: pl.DataFrame
) -> list[str]:
    """Expectations with no comparison to show them beside (a region that never appears, or one
    shown in the table of benchmarks), a reference that moved with its own verdict."""
    shown = {(c["quantity"], c["name"]) for c in comparisons.iter_rows(named=True)}
    return [
        f"- declared {md(o['target'])} {md(o['name'])} {md(o['expect'])}: {md(o['outcome'])}"
        + (f" ({md(o['reason'])})" if o["reason"] else "")
        + md(views.reference_note(o, members))
        for o in outcomes.iter_rows(named=True)
        if (o["evidence"], o["name"]) not in shown
    ]


def _members(members: pl.DataFrame, row: Mapping[str, Any], limit: int | None) -> str:
    """The attempt's benchmarks: a heading line, the legend, one table row per member in
    MEMBER_RANK's order, at most ``limit`` of them, and how many more were left out."""
    head = (
        f"**benchmarks of {md(row['attempt_id'])}** (round {row['round']}, "
        f"{md(row['candidate'])})<br>\n{md(views.member_legend(members))}\n\n"
    )
    ranked = members.sort(MEMBER_RANK, maintain_order=True)
    shown = ranked if limit is None else ranked.head(limit)
    table = md_table(views.MEMBER_HEADERS, map(views.member_cells, shown.iter_rows(named=True)))
    return head + table + _left_out(ranked.slice(shown.height)) + "\n"


def _left_out(members: pl.DataFrame) -> str:
    """``… and 4,812 more members (4,800 unchanged, 12 inconclusive): …`` under a cut table."""
    if members.is_empty():
        return ""
    counts = members.group_by("verdict", maintain_order=True).len()
    verdicts = ", ".join(f"{n:,} {v}" for v, n in counts.iter_rows())
    more = "member" if members.height == 1 else "members"
    return (
        f"\n… and {members.height:,} more {more} ({md(verdicts)}) not listed, to keep this "
        f"under {MAX_MARKDOWN_CHARS:,} characters: {FULL_TABLE}\n"
    )


def _attempt_details(
    split: views.Split, cid: str, row: Mapping[str, Any], *, open_: bool, limit: int | None
) -> str:
    comparisons = split.comparisons(cid, row["attempt_id"])
    outcomes = split.outcomes(cid, row["attempt_id"])
    members = split.benchmarks(cid, row["attempt_id"])
    what = "quantities"
    if members.height:  # shown in their own table above: the rest is folded here
        comparisons = comparisons.filter(~pl.col("quantity").is_in(views.SHOWN_ALONE))
        what, open_ = "other quantities (counters, rusage.*)", False
    summary = (
        f"{html_text(row['attempt_id'])} (round {row['round']}, {html_text(row['candidate'])}): "
        f"{what} {comparisons.height}, "
        f"declared expectations {outcomes.height}"
    )
    body = md_table(QUANTITY_HEADERS, _quantity_rows(comparisons, outcomes))
    extra = _unread_outcomes(comparisons, outcomes, members)
    tail = "\n" + "\n".join(extra) + "\n" if extra else ""
    return (
        (_members(members, row, limit) if members.height else "")
        + f"<details{' open' if open_ else ''}><summary>{summary}</summary>\n\n"
        f"{body}{tail}\n</details>\n\n"
    )


def _rejected(rows: pl.DataFrame) -> str:
    """What ingest rejected in one campaign: the attempts named, each error as ingest wrote it."""
    if rows.is_empty():
        return ""
    names = ", ".join(md(n) for n in views.rejected_names(rows))
    lines = [
        f"- {md(r['attempt_id'] or 'campaign')}: {md(views.issue_text(r))}\n"
        for r in rows.iter_rows(named=True)
    ]
    return (
        f"**Rejected at ingest, not assessed:** {names} (fix the files and ingest again)\n\n"
        + "".join(lines)
        + "\n"
    )


def _where(error: Mapping[str, Any]) -> str:
    return f"attempt {md(error['attempt_id'])}" if error["attempt_id"] else "campaign"


def _campaign(
    split: views.Split, cid: str, details_open: bool, accounting: bool, limit: int | None
) -> str:
    errors = split.blocked(cid)
    if errors.height:
        out = [
            f"### campaign {md(cid)}: BLOCKED by {errors.height} integrity "
            "error(s); no verdicts issued\n\n"
        ]
        out += [
            f"- {_where(e)}: \\[{md(e['code'])}\\] {md(e['message'])}\n"
            for e in errors.iter_rows(named=True)
        ]
        return "".join(out) + "\n"
    rows = split.assessed(cid)
    if rows.is_empty():
        return f"### campaign {md(cid)}: no attempts assessed\n\n"
    first = rows.row(0, named=True)
    explain = str(first["require_explanation"]).lower()
    out = [
        f"### campaign {md(cid)}: decision {md(first['decision'])}, "
        f"require_explanation {explain}\n\n"
    ]
    named = list(rows.iter_rows(named=True))
    out.append(md_table(views.SUMMARY_HEADERS, (views.summary_cells(r) for r in named)) + "\n")
    if accounting:
        out.append(_accounting(split.result, cid))
    out += [_attempt_details(split, cid, r, open_=details_open, limit=limit) for r in named]
    return "".join(out)


def _accounting(result: AssessResult, cid: str) -> str:
    """The campaign's accounting under its table, and what each confirmation round is."""
    account = result.accounts.get(cid)
    if account is None:
        return ""
    lines = [f"**Campaign accounting:** {md(views.accounting_text(account))}"]
    lines += [md(note) for note in views.confirmation_notes(account)]
    return "<br>\n".join(lines) + "\n\n"


def assessed(
    result: AssessResult,
    *,
    details_open: bool = False,
    accounting: bool = True,
    limit: int | None = None,
) -> str:
    """Every campaign of the result; ``details_open`` unfolds each attempt's quantities;
    ``accounting``: the campaign's accounting under its table (not for ab's single round);
    ``limit``: the most rows of each table of benchmarks."""
    out = []
    if result.what_if:
        out.append(f"**WHAT-IF (not stored): {md(views.what_if_pairs(result))}**\n\n")
    split = views.Split(result)
    for cid in views.campaign_order(result):
        out.append(_campaign(split, cid, details_open, accounting, limit))
        out.append(_rejected(split.rejected(cid)))
    if not out:
        out.append("no campaigns to assess\n")
    return "".join(out)


def _gate_head(gate: Gate) -> str:
    """The gate's line, first and in bold: the outcome the exit code and the check follow."""
    return f"**{md(views.gate_line(gate))}**\n\n"


@_document.register(AssessResult)
def assess(result: AssessResult, limit: int | None = None) -> str:
    """`assess --format markdown`; with `--gate --fail-on regression|change`, the gate first."""
    head = (
        _gate_head(result.gate) if result.gate is not None and views.gate_leads(result.gate) else ""
    )
    return head + assessed(result, limit=limit)


@_document.register(FinalResult)
def final(result: FinalResult, limit: int | None = None) -> str:
    """`campaign final --format markdown`: the campaign's tables and its best attempt."""
    out = assessed(result.assess, limit=limit)
    if result.assess.blocked.height:
        return out
    account = result.assess.accounts.get(result.campaign_id)
    pick = views.pick_text(result.assess, account)
    if pick is None:
        return out + "**best attempt:** none (no attempt is PASS)\n"
    word, rest = pick.split(": ", 1)
    out += f"**{word}:** {md(rest)}\n"
    if account is None:
        return out
    notes = [x for x in (views.selected_text(account), views.chain_text(account)) if x]
    return (
        out
        + "".join(f"- {md(x)}\n" for x in notes)
        + f"\n**campaign's gain:** {md(views.gain_text(account, result.folder, result.store))}\n"
    )


@_document.register(AbResult)
def ab(result: AbResult, limit: int | None = None) -> str:
    """`ab --format markdown`: a gate other than not-improved first (it decides the exit code),
    the two commands, the verdict line (under such a gate: the verdict of the metric, for
    information), then the attempt's tables with its quantities unfolded (one attempt)."""
    command_a, command_b = result.commands
    leads = result.gate is not None and views.gate_leads(result.gate)
    head = _gate_head(result.gate) if result.gate is not None and leads else ""
    head += f"**A (baseline):** {md(command_a)}<br>\n**B (candidate):** {md(command_b)}\n\n"
    row = result.row
    if row is not None and not result.final.assess.blocked.height:
        verdict, evidence = md(views.verdict_text(row)), md(views.evidence(row))
        if leads:
            head += f"{views.METRIC_VERDICT}: {verdict} ({evidence})\n\n"
        else:
            head += f"**verdict: {verdict}** ({evidence})\n\n"
    return head + assessed(result.final.assess, details_open=True, accounting=False, limit=limit)
