"""Round trip: what ingest stores in Parquet equals the JSON it read (property test)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import example_attempt, write_example_campaign
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt

names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12
)
seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
counts = st.one_of(st.integers(min_value=0, max_value=2**53), seconds)
regions = st.dictionaries(names, seconds, max_size=4)


@st.composite
def runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Distinct (side, repetition) runs with nested or flat breakdowns and counters."""
    keys = draw(
        st.sets(
            st.tuples(st.sampled_from(["baseline", "candidate"]), st.integers(0, 2**40)),
            min_size=1,  # a completed attempt has at least one run
            max_size=6,
        )
    )
    out = []
    for side, repetition in sorted(keys):
        run: dict[str, Any] = {"side": side, "repetition": repetition}
        if draw(st.booleans()):
            run |= {"status": "ok", "metric": draw(seconds.filter(lambda x: x > 0))}
        else:
            run["status"] = "failed"
        if draw(st.booleans()):
            flat = draw(st.booleans())
            run["breakdown"] = draw(
                regions if flat else st.dictionaries(names, regions, max_size=3)
            )
        if draw(st.booleans()):
            run["counters"] = draw(st.dictionaries(names, counts, max_size=3))
        out.append(run)
    return out


def expected_rows(written: list[dict[str, Any]]) -> tuple[set[tuple[Any, ...]], ...]:
    """What the tables must hold, derived from the JSON documents directly."""
    samples = {(r["side"], r["repetition"], r["status"], r.get("metric")) for r in written}
    breakdown = set()
    for r in written:
        tree = r.get("breakdown", {})
        if tree and not isinstance(next(iter(tree.values())), dict):
            tree = {"all": tree}
        breakdown |= {
            (r["side"], r["repetition"], step, region, float(value))
            for step, inner in tree.items()
            for region, value in inner.items()
        }
    counters = {
        (r["side"], r["repetition"], name, float(value))
        for r in written
        for name, value in r.get("counters", {}).items()
    }
    return samples, breakdown, counters


def stored_rows(store: Store) -> tuple[set[tuple[Any, ...]], ...]:
    columns = {
        "samples": ["side", "repetition", "status", "metric"],
        "breakdown": ["side", "repetition", "step", "region", "seconds"],
        "counters": ["side", "repetition", "counter", "value"],
    }
    return tuple(set(store.read(t).select(c).rows()) for t, c in columns.items())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=runs())
@pytest.mark.slow
def test_values_read_back_from_parquet_equal_the_json_input(written: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = write_example_campaign(root / "in", attempts=())
        write_attempt(folder, example_attempt("r1", 1, mechanism=False), written)
        store = Store(root / "store")
        report = ingest(root / "in", store)
        assert report.issues == []
        assert stored_rows(store) == expected_rows(written)
        n_rows = store.read("breakdown").height
        assert n_rows == len(expected_rows(written)[1])
        assert store.read("attempts")["n_lines"].to_list() == [len(written)]
        assert store.read("samples").schema["repetition"] == pl.Int64
