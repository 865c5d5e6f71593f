"""GitHub Actions: the job summary ($GITHUB_STEP_SUMMARY, the Markdown of the result), one
annotation per campaign and one per regressed benchmark of its gated attempt, written as
workflow commands with GitHub's escaping. Under a gate (ab, assess --gate) the gated attempt's
annotation has the gate's level: a gate that passed is never a red ``::error``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from pipeline.assessment.campaigns import AssessResult, gated_attempt
from pipeline.assessment.gate import Gate, failing
from pipeline.output import views

SUMMARY_LIMIT = 1024 * 1024
"""Bytes GitHub accepts in one step's job summary; a larger summary is not appended (a warning
says so): a truncated table would be misread."""


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, title: str, message: str) -> str:
    """A workflow command: ``::error title=…::message`` (properties and data escaped as GitHub
    documents: ``%``, CR, LF everywhere, ``:`` and ``,`` in properties)."""
    return f"::{level} title={_escape_property(title)}::{_escape_data(message)}"


def annotation_lines(
    result: AssessResult, focus: str | None = None, gate: Gate | None = None
) -> list[str]:
    """One annotation per campaign: ``error`` when it is blocked or when the verdict of its
    latest round (or of attempt ``focus``) is not PASS, ``notice`` when it is PASS; one
    ``error`` per benchmark of that attempt that regressed or was removed, a ``notice`` per one
    added (a campaign deciding every benchmark); and one ``error`` per campaign with attempts
    ingest rejected. The gated
    attempt's annotation follows ``gate`` instead (``error`` when it failed, else ``notice``):
    the check is what the gate decided, and the verdict of the metric follows it as
    information."""
    out = []
    split = views.Split(result)
    for cid in views.campaign_order(result):
        refused = split.rejected(cid)
        if refused.height:
            out.append(
                annotation(
                    "error",
                    f"explain-pipeline: campaign {cid} rejected at ingest",
                    f"not assessed: {', '.join(views.rejected_names(refused))}; first: "
                    f"{views.issue_text(refused.row(0, named=True))}",
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
        title = f"explain-pipeline: {cid} {row['attempt_id']} (round {row['round']})"
        out.append(_attempt_annotation(title, row, gate))
        members = split.benchmarks(cid, row["attempt_id"])
        fails = _gate_fails(gate, row)
        out += [
            annotation(
                _member_level(m["verdict"], gate),
                f"explain-pipeline: {cid} {row['attempt_id']}: {views.member_label(m)} "
                f"{m['verdict']}" + (f" ({m['reason']})" if m.get("reason") else ""),
                views.member_message(m),
            )
            for m in members.filter(pl.col("verdict").is_in(ANNOTATED) | fails).iter_rows(
                named=True
            )
        ]
    return out


ANNOTATED = ("regressed", "removed", "added")
"""The members that get an annotation of their own: a regression, and a benchmark one side
only ran (a lost guard; a new one). Under a gate, so does every member that fails it
(``--fail-on change``: an improvement too; ``regression`` and ``change``: a member not decided
for want of data), so each member that turned the check red is named where GitHub shows it."""


def _gate_fails(gate: Gate | None, row: Mapping[str, Any]) -> pl.Expr:
    """Whether a member of ``row``'s attempt fails ``gate`` (False when the gate is another
    attempt's, or none)."""
    if gate is None or (gate.attempt["campaign_id"], gate.attempt["attempt_id"]) != (
        row["campaign_id"],
        row["attempt_id"],
    ):
        return pl.lit(False)
    return failing(gate.fail_on)


def _member_level(verdict: str, gate: Gate | None) -> str:
    """``notice`` for an added benchmark, ``warning`` for a removed one under --allow-removed,
    ``error`` for every other annotated member (a regression, a removal, a member failing the
    gate)."""
    if verdict == "added":
        return "notice"
    if verdict == "removed" and gate is not None and gate.allow_removed:
        return "warning"
    return "error"


def _attempt_annotation(title: str, row: Mapping[str, Any], gate: Gate | None) -> str:
    """The annotation of one campaign's gated attempt: the gate's level and line when it is
    this attempt's, else the verdict's."""
    ours = gate is not None and (gate.attempt["campaign_id"], gate.attempt["attempt_id"]) == (
        row["campaign_id"],
        row["attempt_id"],
    )
    if gate is None or not ours:
        level = "notice" if row["verdict"] == "PASS" else "error"
        return annotation(level, title, views.attempt_message(row))
    message = views.attempt_message(row)
    if views.gate_leads(gate):
        message = f"{views.gate_line(gate)}; {views.METRIC_VERDICT}: {message}"
    return annotation("error" if gate.failed else "notice", title, message)


def append_summary(path: str, markdown: str) -> str | None:
    """Append ``markdown`` to the job summary file; a warning to print when it is too large or
    cannot be written."""
    data = markdown.encode("utf-8")
    if len(data) > SUMMARY_LIMIT:
        return (
            f"warning: the job summary ({len(data)} bytes) is larger than GitHub "
            f"accepts ({SUMMARY_LIMIT}); not appended"
        )
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(markdown + ("" if markdown.endswith("\n") else "\n"))
    except OSError as exc:  # the summary is a courtesy: the verdict, its exit code and the
        # annotations must not depend on it (it turned a PASS gate into exit 2, unannotated)
        return (
            f"warning: {path}: cannot append the job summary ($GITHUB_STEP_SUMMARY): "
            f"{exc.strerror or exc}; the verdict and its exit code are unchanged"
        )
    return None
