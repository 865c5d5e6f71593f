"""CI-native output of `assess`, `ab` and `campaign final`: a Markdown table for a pull-request
comment, a JUnit XML file for CI systems that read test reports, and, when the command runs in a
GitHub Actions job, the job summary and annotations (docs/ci.md).

Every renderer here is fed from the rows the text table prints (``summary_cells`` in
pipeline.cli.assess), so the verdict, interval and explanation read the same everywhere. Its
imports are light (click, the standard library): `ab` and `campaign final` load it for their
options without loading another command's module; the rest is imported when output is made.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pipeline.errors import UsageError
from pipeline.formatting import TEXT, fmt_paired

if TYPE_CHECKING:
    import polars as pl

    from pipeline.assess.campaigns import AssessResult
    from pipeline.record.campaign import AbResult, FinalResult

GITHUB_SUMMARY_LIMIT = 1024 * 1024
"""Bytes GitHub accepts in one step's job summary; a larger summary is not appended (a warning
says so): a truncated table would be misread."""
PASSING_OUTCOMES = frozenset({"confirmed", "consistent", "assumed"})
FAILING_OUTCOMES = frozenset({"contradicted"})
"""JUnit test case of a declared expectation: failure when the data contradict it; skipped
(no evidence either way) when `unsupported` or `unverifiable`; passed otherwise."""

junit_option = click.option(
    "--junit",
    "junit",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Also write a JUnit XML report: one test case per attempt (failure = not PASS) and "
    "one per declared expectation (failure = contradicted). See docs/ci.md.",
)


def _order(result: AssessResult) -> list[str]:
    from pipeline.cli.assess import campaign_order

    return campaign_order(result)


class _Split:
    """A result's tables split once, by campaign and by attempt: with --all over thousands of
    campaigns a filter per campaign or attempt would scan every table again each time."""

    def __init__(self, result: AssessResult) -> None:
        from pipeline.cli.assess import rejections

        self.result = result
        self._rejections = rejections(result)
        self._rejected = _parts(self._rejections, "campaign_id")
        self._blocked = _parts(result.blocked, "campaign_id")
        self._assessed = _parts(result.assessments, "campaign_id")
        self._comparisons = _parts(result.comparisons, "campaign_id", "attempt_id")
        self._outcomes = _parts(result.outcomes, "campaign_id", "attempt_id")

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


def _parts(frame: pl.DataFrame, *keys: str) -> dict[tuple[Any, ...], pl.DataFrame]:
    return frame.partition_by(list(keys), as_dict=True, maintain_order=True)


# -- Markdown ----------------------------------------------------------------------------------
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")


def md(text: object) -> str:
    """Text as literal Markdown inside a table cell: punctuation that Markdown or a table would
    read is escaped (`|` included), `<`/`>`/`&` become entities (a C++ template is no HTML tag),
    line breaks become `<br>`."""
    escaped = _MD_SPECIAL.sub(r"\\\1", str(text))
    escaped = escaped.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"\r\n|\r|\n", "<br>", escaped)


def _md_table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A GitHub-flavoured table; the headers are ours and written as they are."""
    head = list(headers)
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


_QUANTITY_HEADERS = (
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
    rows: list[tuple[str, ...]] = []
    for c in comparisons.iter_rows(named=True):
        interval = fmt_paired(c["estimate"], c["low"], c["high"]) or TEXT.none
        declared = read_from.get((c["quantity"], c["name"]), "")
        rows.append(
            (
                c["quantity"],
                c["name"],
                str(c["n_pairs"]),
                interval,
                c["direction"] or c["reason"] or "",
                declared,
            )
        )
    return rows


def _unread_outcomes(comparisons: pl.DataFrame, outcomes: pl.DataFrame) -> list[str]:
    """Expectations with no comparison to show them beside (a region that never appears)."""
    shown = {(c["quantity"], c["name"]) for c in comparisons.iter_rows(named=True)}
    return [
        f"- declared {md(o['target'])} {md(o['name'])} {md(o['expect'])}: {md(o['outcome'])}"
        + (f" ({md(o['reason'])})" if o["reason"] else "")
        for o in outcomes.iter_rows(named=True)
        if (o["evidence"], o["name"]) not in shown
    ]


def _attempt_details(split: _Split, cid: str, row: Mapping[str, Any], *, open_: bool) -> str:
    comparisons = split.comparisons(cid, row["attempt_id"])
    outcomes = split.outcomes(cid, row["attempt_id"])
    summary = (
        f"{md(row['attempt_id'])} (round {row['round']}, {md(row['candidate'])}): "
        f"quantities {comparisons.height}, "
        f"declared expectations {outcomes.height}"
    )
    body = _md_table(_QUANTITY_HEADERS, _quantity_rows(comparisons, outcomes))
    extra = _unread_outcomes(comparisons, outcomes)
    tail = "\n" + "\n".join(extra) + "\n" if extra else ""
    return (
        f"<details{' open' if open_ else ''}><summary>{summary}</summary>\n\n"
        f"{body}{tail}\n</details>\n\n"
    )


def render_markdown(result: AssessResult, *, details_open: bool = False, **_: Any) -> str:
    """Per campaign: a heading with the policy, the verdict table (one row per attempt) and,
    folded under it, each attempt's quantities with the declared expectations' outcomes."""
    out = []
    if result.what_if:
        pairs = " ".join(f"{k}={v}" for k, v in result.what_if.items())
        out.append(f"**WHAT-IF (not stored): {md(pairs)}**\n\n")
    split = _Split(result)
    for cid in _order(result):
        out.append(_campaign_markdown(split, cid, details_open))
        out.append(_rejected_markdown(split.rejected(cid)))
    if not out:
        out.append("no campaigns to assess\n")
    return "".join(out)


def _rejected_markdown(rows: pl.DataFrame) -> str:
    """What ingest rejected in one campaign: the attempts named, each error as ingest wrote it."""
    if rows.is_empty():
        return ""
    names = ", ".join(md(n) for n in _rejected_names(rows))
    lines = [
        f"- {md(r['attempt_id'] or 'campaign')}: {md(_issue(r))}\n"
        for r in rows.iter_rows(named=True)
    ]
    return (
        f"**Rejected at ingest, not assessed:** {names} (fix the files and ingest again)\n\n"
        + "".join(lines)
        + "\n"
    )


def _rejected_names(rows: pl.DataFrame) -> list[str]:
    return [x or "campaign.json" for x in rows["attempt_id"].unique(maintain_order=True)]


def _issue(row: Mapping[str, Any]) -> str:
    """One rejection as ingest printed it: ``file:line: field "f": message [code]``."""
    from pipeline.ingest.validate import Issue

    return str(Issue(row["path"], row["line"], row["field"], row["code"], row["message"]))


def _campaign_markdown(split: _Split, cid: str, details_open: bool) -> str:
    from pipeline.cli.assess import SUMMARY_HEADERS, summary_cells

    out = []
    errors = split.blocked(cid)
    if errors.height:
        out.append(
            f"### campaign {md(cid)}: BLOCKED by {errors.height} integrity "
            "error(s); no verdicts issued\n\n"
        )
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
    out.append(
        f"### campaign {md(cid)}: decision {md(first['decision'])}, "
        f"require_explanation {explain}\n\n"
    )
    named = list(rows.iter_rows(named=True))
    out.append(_md_table(SUMMARY_HEADERS, (summary_cells(r) for r in named)) + "\n")
    out += [_attempt_details(split, cid, r, open_=details_open) for r in named]
    return "".join(out)


def final_markdown(final: FinalResult) -> str:
    """`campaign final --format markdown`: the campaign's tables and its best attempt."""
    out = render_markdown(final.assess)
    rows = final.assess.assessments
    if final.assess.blocked.height:
        return out
    best = rows.filter(rows["best"]) if rows.height else rows
    if best.is_empty():
        return out + "**best attempt:** none (no attempt is PASS)\n"
    row = best.row(0, named=True)
    return out + (
        f"**best attempt:** {md(row['attempt_id'])} (round {row['round']}, candidate "
        f"{md(row['candidate'])}): {md(_verdict(row))}\n"
    )


def ab_markdown(result: AbResult, command_a: str, command_b: str) -> str:
    """`ab --format markdown`: the two commands, the verdict line, then the attempt's tables
    with its quantities unfolded (there is one attempt)."""
    head = f"**A (baseline):** {md(command_a)}<br>\n**B (candidate):** {md(command_b)}\n\n"
    row = result.row
    if row is not None and not result.final.assess.blocked.height:
        head += f"**verdict: {md(_verdict(row))}** ({md(_evidence(row))})\n\n"
    return head + render_markdown(result.final.assess, details_open=True)


def _where(error: Mapping[str, Any]) -> str:
    return f"attempt {md(error['attempt_id'])}" if error["attempt_id"] else "campaign"


# -- JUnit XML ---------------------------------------------------------------------------------
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: object) -> str:
    """Characters XML 1.0 cannot hold (control characters) written as ``\\xNN``."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def _verdict(row: Mapping[str, Any]) -> str:
    return row["verdict"] + (f" ({row['reason']})" if row["reason"] else "")


def attempt_message(row: Mapping[str, Any]) -> str:
    """One line saying why an attempt's verdict is what it is (the failure message in JUnit,
    the annotation in GitHub Actions)."""
    return f"{_verdict(row)}, {_evidence(row)}"


def _evidence(row: Mapping[str, Any]) -> str:
    paired = fmt_paired(row["paired_estimate"], row["paired_low"], row["paired_high"])
    median = row["improvement_pct"]
    parts = [f"decision {row['decision']}"]
    parts.append(f"paired ratio {paired}" if paired else "no paired ratio")
    if median is not None:
        parts.append(f"median improvement {median:+.2f} %")
    parts.append(f"explanation {row['explanation']}")
    return ", ".join(parts)


def outcome_message(outcome: Mapping[str, Any], comparison: Mapping[str, Any] | None) -> str:
    """``contradicted: region_normalized attention 0.9120 [0.9010, 0.9233], increase``."""
    text = outcome["outcome"] + (f" ({outcome['reason']})" if outcome["reason"] else "")
    if comparison is None:
        return text
    interval = fmt_paired(comparison["estimate"], comparison["low"], comparison["high"])
    moved = comparison["direction"] or comparison["reason"] or "-"
    return f"{text}: {comparison['quantity']} {comparison['name']} {interval or TEXT.none}, {moved}"


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=_xml(classname), name=_xml(name), time="0")


def _attempt_cases(suite: ET.Element, split: _Split, cid: str) -> None:
    for row in split.assessed(cid).iter_rows(named=True):
        case = _case(suite, cid, f"{row['attempt_id']} {row['candidate']}")
        if row["verdict"] != "PASS":
            ET.SubElement(
                case, "failure", message=_xml(attempt_message(row)), type=_xml(row["verdict"])
            )
        aid = row["attempt_id"]
        evidence = {
            (c["quantity"], c["name"]): c for c in split.comparisons(cid, aid).iter_rows(named=True)
        }
        for o in split.outcomes(cid, aid).sort("position").iter_rows(named=True):
            case = _case(
                suite, f"{cid}.{row['attempt_id']}", f"{o['target']} {o['name']} {o['expect']}"
            )
            message = outcome_message(o, evidence.get((o["evidence"], o["name"])))
            if o["outcome"] in FAILING_OUTCOMES:
                ET.SubElement(case, "failure", message=_xml(message), type=_xml(o["outcome"]))
            elif o["outcome"] not in PASSING_OUTCOMES:
                ET.SubElement(case, "skipped", message=_xml(message))


def _blocked_case(suite: ET.Element, errors: pl.DataFrame, cid: str) -> None:
    case = _case(suite, cid, "integrity")
    error = ET.SubElement(
        case,
        "error",
        type="integrity",
        message=_xml(f"blocked by {errors.height} integrity error(s); no verdicts issued"),
    )
    error.text = _xml(
        "".join(
            f"{e['attempt_id'] or 'campaign'}: [{e['code']}] {e['message']}\n"
            for e in errors.iter_rows(named=True)
        )
    )


def _rejected_cases(suite: ET.Element, rows: pl.DataFrame, cid: str) -> None:
    """One case in error per attempt (or campaign.json) that ingest rejected."""
    for name, part in _parts(rows, "attempt_id").items():
        case = _case(suite, cid, f"{name[0] or 'campaign.json'} (rejected at ingest)")
        issues = [_issue(r) for r in part.iter_rows(named=True)]
        message = _xml(f"rejected at ingest, not assessed: {issues[0]}")
        error = ET.SubElement(case, "error", type="rejected", message=message)
        error.text = _xml("".join(f"{i}\n" for i in issues))


def render_junit(result: AssessResult) -> bytes:
    """A JUnit XML document: one ``testsuite`` per campaign (its id as name), one ``testcase``
    per attempt and per declared expectation; a blocked campaign is one test case in error."""
    if result.what_if:
        raise UsageError("--junit reports the frozen policy's verdicts: drop --what-if")
    root = ET.Element("testsuites", name="explain-pipeline")
    split = _Split(result)
    for cid in _order(result):
        suite = ET.SubElement(root, "testsuite", name=_xml(cid))
        errors = split.blocked(cid)
        if errors.height:
            _blocked_case(suite, errors, cid)
        else:
            _attempt_cases(suite, split, cid)
        _rejected_cases(suite, split.rejected(cid), cid)
        _count(suite)
    _count(root)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def _count(element: ET.Element) -> None:
    cases = list(element.iter("testcase"))
    for kind, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        element.set(kind, str(sum(1 for c in cases if c.find(tag) is not None)))
    element.set("tests", str(len(cases)))
    element.set("time", "0")


def write_junit(path: Path, result: AssessResult) -> None:
    from pipeline.cli.common import write_output

    write_output(path, render_junit(result))


# -- GitHub Actions ----------------------------------------------------------------------------
def in_github_actions(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get("GITHUB_ACTIONS") == "true"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, title: str, message: str) -> str:
    """A workflow command: ``::error title=…::message`` (properties and data escaped as GitHub
    documents: ``%``, CR, LF everywhere, ``:`` and ``,`` in properties)."""
    return f"::{level} title={_escape_property(title)}::{_escape_data(message)}"


def github_annotations(result: AssessResult, focus: str | None = None) -> list[str]:
    """One annotation per campaign: ``error`` when it is blocked or when the verdict of its
    latest round (or of attempt ``focus``) is not PASS, ``notice`` when it is PASS."""
    from pipeline.assess.campaigns import gated_attempt

    out = []
    split = _Split(result)
    for cid in _order(result):
        refused = split.rejected(cid)
        if refused.height:
            out.append(
                annotation(
                    "error",
                    f"explain-pipeline: campaign {cid} rejected at ingest",
                    f"not assessed: {', '.join(_rejected_names(refused))}; first: "
                    f"{_issue(refused.row(0, named=True))}",
                )
            )
        errors = split.blocked(cid)
        if errors.height:
            first = errors.row(0, named=True)
            out.append(
                annotation(
                    "error",
                    f"explain-pipeline: campaign {cid} blocked",
                    f"{errors.height} integrity error(s), first: [{first['code']}] "
                    f"{first['message']}",
                )
            )
            continue
        rows = split.assessed(cid)
        if rows.is_empty():
            continue
        row = gated_attempt(rows, cid, focus)
        level = "notice" if row["verdict"] == "PASS" else "error"
        title = f"explain-pipeline: {cid} {row['attempt_id']} (round {row['round']})"
        out.append(annotation(level, title, attempt_message(row)))
    return out


def report_to_github(markdown: str, lines: list[str], *, stream: Callable[[str], None]) -> None:
    """Append ``markdown`` to $GITHUB_STEP_SUMMARY (when set) and write the annotations."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        data = markdown.encode("utf-8")
        if len(data) > GITHUB_SUMMARY_LIMIT:
            click.echo(
                f"warning: the job summary ({len(data)} bytes) is larger than GitHub "
                f"accepts ({GITHUB_SUMMARY_LIMIT}); not appended",
                err=True,
            )
        else:
            try:
                with open(summary, "a", encoding="utf-8") as handle:
                    handle.write(markdown + ("" if markdown.endswith("\n") else "\n"))
            except OSError as exc:
                raise UsageError(
                    f"{summary}: cannot append the job summary ($GITHUB_STEP_SUMMARY): "
                    f"{exc.strerror or exc}"
                ) from None
    for line in lines:
        stream(line)


def emit_ci(
    result: AssessResult,
    *,
    junit: Path | None,
    markdown: Callable[[], str],
    focus: str | None = None,
) -> None:
    """After a command printed its own output: write the JUnit file, then, in GitHub Actions,
    the job summary and annotations. Annotations go to stderr: the runner reads workflow
    commands from both streams, and stdout keeps only the command's output (a table, JSON or
    Markdown redirected to a file stays clean)."""
    if junit is not None:
        write_junit(junit, result)
    if in_github_actions():
        report_to_github(
            markdown(), github_annotations(result, focus), stream=lambda s: click.echo(s, err=True)
        )
