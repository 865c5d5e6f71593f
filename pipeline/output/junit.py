"""`--junit FILE`: a JUnit XML report for CI systems that read test reports. One ``testsuite``
per campaign, one ``testcase`` per attempt (failure: not PASS), per declared expectation
(failure: contradicted; skipped: unsupported or unverifiable) and, when the campaign decides
every benchmark, per benchmark (failure: regressed, or inconclusive for want of data; skipped:
inconclusive with a wide interval); a blocked campaign is one test case in error, and so is each
attempt ingest rejected."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import polars as pl

from pipeline.assessment.campaigns import AssessResult
from pipeline.assessment.family import DATA_REASONS
from pipeline.output.views import (
    Split,
    attempt_message,
    campaign_order,
    issue_text,
    member_label,
    member_message,
    outcome_message,
    parts,
)

FAILING_MEMBERS = frozenset({"regressed", "removed"})
SKIPPED_MEMBERS = frozenset({"inconclusive"})
"""JUnit test case of a benchmark (contract §15): failure when it regressed beyond the margin,
was removed (in no candidate run: a lost guard), or could not be decided for want of data (a
reason of DATA_REASONS: too few pairs, a zero or missing value, a value out of range; it fails
the regression gate too); skipped when only its interval is too wide to say; passed when
improved, unchanged or added."""
PASSING_OUTCOMES = frozenset({"confirmed", "consistent", "assumed"})
FAILING_OUTCOMES = frozenset({"contradicted"})
"""JUnit test case of a declared expectation: failure when the data contradict it; skipped
(no evidence either way) when `unsupported` or `unverifiable`; passed otherwise."""

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: object) -> str:
    """Characters XML 1.0 cannot hold (control characters) written as ``\\xNN``."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(
        suite, "testcase", classname=xml_text(classname), name=xml_text(name), time="0"
    )


def _attempt_cases(suite: ET.Element, split: Split, cid: str) -> None:
    for row in split.assessed(cid).iter_rows(named=True):
        case = _case(suite, cid, f"{row['attempt_id']} {row['candidate']}")
        if row["verdict"] != "PASS":
            ET.SubElement(
                case,
                "failure",
                message=xml_text(attempt_message(row)),
                type=xml_text(row["verdict"]),
            )
        aid = row["attempt_id"]
        evidence = {
            (c["quantity"], c["name"]): c for c in split.comparisons(cid, aid).iter_rows(named=True)
        }
        for o in split.outcomes(cid, aid).sort("position").iter_rows(named=True):
            case = _case(suite, f"{cid}.{aid}", f"{o['target']} {o['name']} {o['expect']}")
            message = outcome_message(o, evidence.get((o["evidence"], o["name"])))
            if o["outcome"] in FAILING_OUTCOMES:
                ET.SubElement(
                    case, "failure", message=xml_text(message), type=xml_text(o["outcome"])
                )
            elif o["outcome"] not in PASSING_OUTCOMES:
                ET.SubElement(case, "skipped", message=xml_text(message))
        _member_cases(suite, split.benchmarks(cid, aid), f"{cid}.{aid}")


def _member_cases(suite: ET.Element, members: pl.DataFrame, classname: str) -> None:
    """One case per benchmark of the attempt's family, in the order every format lists them."""
    for m in members.iter_rows(named=True):
        case = _case(suite, classname, f"benchmark {member_label(m)}")
        if m["verdict"] in FAILING_MEMBERS or m["reason"] in DATA_REASONS:
            ET.SubElement(
                case, "failure", message=xml_text(member_message(m)), type=xml_text(m["verdict"])
            )
        elif m["verdict"] in SKIPPED_MEMBERS:
            ET.SubElement(case, "skipped", message=xml_text(member_message(m)))


def _blocked_case(suite: ET.Element, errors: pl.DataFrame, cid: str) -> None:
    case = _case(suite, cid, "integrity")
    error = ET.SubElement(
        case,
        "error",
        type="integrity",
        message=xml_text(f"blocked by {errors.height} integrity error(s); no verdicts issued"),
    )
    error.text = xml_text(
        "".join(
            f"{e['attempt_id'] or 'campaign'}: [{e['code']}] {e['message']}\n"
            for e in errors.iter_rows(named=True)
        )
    )


def _rejected_cases(suite: ET.Element, rows: pl.DataFrame, cid: str) -> None:
    """One case in error per attempt (or campaign.json) that ingest rejected."""
    for name, part in parts(rows, "attempt_id").items():
        case = _case(suite, cid, f"{name[0] or 'campaign.json'} (rejected at ingest)")
        issues = [issue_text(r) for r in part.iter_rows(named=True)]
        message = xml_text(f"rejected at ingest, not assessed: {issues[0]}")
        error = ET.SubElement(case, "error", type="rejected", message=message)
        error.text = xml_text("".join(f"{i}\n" for i in issues))


def _count(element: ET.Element) -> None:
    cases = list(element.iter("testcase"))
    for kind, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        element.set(kind, str(sum(1 for c in cases if c.find(tag) is not None)))
    element.set("tests", str(len(cases)))
    element.set("time", "0")


def render(result: AssessResult) -> bytes:
    """The frozen policy's verdicts as a JUnit XML document (a what-if result has none)."""
    if result.what_if:
        raise ValueError("a JUnit report holds the frozen policy's verdicts, not a what-if's")
    root = ET.Element("testsuites", name="explain-pipeline")
    split = Split(result)
    for cid in campaign_order(result):
        suite = ET.SubElement(root, "testsuite", name=xml_text(cid))
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
