"""The in-memory check of a built measurement line accepts only what the full check accepts
(JSON text, then the JSON Schema), and leaves every other line to the full check: the same
words as ingest's errors."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from helpers import ANY_NUMBER, BASE_RUN, RUN_FIELDS, some_of
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.importers.common import ImportFormatError
from pipeline.importers.lines import check_line
from pipeline.ingestion.jsontext import parse_json
from pipeline.ingestion.plain import plainly_valid_line
from pipeline.ingestion.rules import check_document

NAMES = st.sampled_from(["a", "b", "", "ü"])
REGIONS = st.dictionaries(NAMES, ANY_NUMBER, max_size=3)
LINE_FIELDS = {
    **RUN_FIELDS,
    "breakdown": st.one_of(
        REGIONS, st.dictionaries(NAMES, st.one_of(REGIONS, ANY_NUMBER), max_size=2)
    ),
    "counters": REGIONS,
}


@settings(max_examples=400, deadline=None)
@given(
    overrides=some_of(LINE_FIELDS, 2),
    dropped=st.sets(st.sampled_from(sorted(BASE_RUN))),
)
@pytest.mark.slow
def test_in_memory_check_accepts_only_lines_the_full_check_accepts(
    overrides: dict[str, Any], dropped: set[str]
) -> None:
    line = {k: v for k, v in {**BASE_RUN, **overrides}.items() if k not in dropped}
    if plainly_valid_line(line):
        assert check_document("measurement", parse_json(json.dumps(line)), fast=False) == []


def test_in_memory_check_accepts_a_built_line() -> None:
    line = {**BASE_RUN, "breakdown": {"step-1": {"a": 0.5, "b": 2}}, "counters": {"k": 10**20}}
    assert plainly_valid_line(line)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metric": math.nan}, 'field "metric": must be a finite number, got NaN'),
        ({"breakdown": {"s": {"a": math.inf}}}, 'field "breakdown.s.a": must be a finite number'),
        ({"breakdown": {"s": {"": 1.0}}}, 'field "breakdown.s": has an empty name'),
        ({"counters": {"k": -1}}, 'field "counters.k": must be >= 0, got -1'),
    ],
)
def test_lines_the_in_memory_check_refuses_get_the_full_checks_error(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ImportFormatError, match="^" + re.escape(message)):
        check_line({**BASE_RUN, **change})
