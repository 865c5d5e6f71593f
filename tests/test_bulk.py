"""The bulk path of ingest accepts only what the precise per-line validator accepts, and stores
exactly the rows the precise path stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import bulk
from pipeline.ingest import ingest
from pipeline.store import Store
from pipeline.validate import AttemptFiles, validate_document, validate_measurements

M = Path("a/c1/r1/measurements.jsonl")
ANY_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 0.0, -0.0, 10**400, True, None, "1", 1e-320]),
)
NAMES = st.sampled_from(["a", "b", "", "s\u00e9", "k\\ud800"])
REGIONS = st.dictionaries(NAMES, ANY_NUMBER, max_size=3)
STAMPS = st.sampled_from(
    ["2026-11-01T12:00:00Z", "2026-11-01T12:00:00", "9999-12-31T23:59:59-01:00", 5]
)
RUN_FIELDS = {
    "side": st.sampled_from(["baseline", "candidate", "base", 1]),
    "repetition": st.one_of(
        st.integers(min_value=-2, max_value=2**64), st.sampled_from([1.0, "2", True, 2**63])
    ),
    "status": st.sampled_from(["ok", "failed", "done"]),
    "metric": ANY_NUMBER,
    "breakdown": st.one_of(
        REGIONS,
        st.dictionaries(st.sampled_from(["s0", "s1"]), st.one_of(REGIONS, ANY_NUMBER), max_size=2),
    ),
    "counters": REGIONS,
    "order": st.sampled_from([0, 1, 2, -1, 1.0, None]),
    "started_at": STAMPS,
    "finished_at": STAMPS,
    "extra": st.just(1),
}
BASE_RUN = {
    "side": "baseline",
    "repetition": 0,
    "status": "ok",
    "metric": 1.0,
    "breakdown": {"s0": {"a": 0.5, "b": 2}},
    "counters": {"k": 3},
}


def _text(doc: dict[str, Any], style: int) -> str:
    """One line as a measurement script might print it (raw NaN tokens are left as written)."""
    separators = [(",", ":"), (", ", ": "), (",", " : ")][style % 3]
    text = json.dumps(doc, separators=separators, ensure_ascii=style % 2 == 0)
    return text.replace('"k\\\\ud800"', '"k\\ud800"')


def _run(overrides: dict[str, Any], dropped: set[str]) -> dict[str, Any]:
    return {k: v for k, v in {**BASE_RUN, **overrides}.items() if k not in dropped}


LINES = st.builds(
    _run,
    st.dictionaries(st.sampled_from(sorted(RUN_FIELDS)), st.none(), max_size=2).flatmap(
        lambda keys: st.fixed_dictionaries({k: RUN_FIELDS[k] for k in keys})
    ),
    st.sets(st.sampled_from(sorted(BASE_RUN))),
)


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(LINES, min_size=0, max_size=4),
    style=st.integers(0, 5),
    layout=st.sampled_from(["plain", "blank", "crlf", "bom", "repeat", "two-per-line"]),
)
def test_bulk_accepts_only_files_the_precise_validator_accepts(
    docs: list[dict[str, Any]], style: int, layout: str
) -> None:
    lines = [_text({**d, "repetition": d["repetition"]} if "repetition" in d else d, style)
             for d in docs]  # fmt: skip
    if layout == "repeat" and lines:  # a key written twice
        lines[0] = lines[0][:-1] + ', "side": "candidate"}'
    if layout == "two-per-line" and len(lines) > 1:
        lines[:2] = [lines[0] + lines[1]]
    newline = "\r\n" if layout == "crlf" else "\n"
    text = newline.join(lines) + newline
    if layout == "blank":
        text = "\n  \n" + text + "\n"
    body = (b"\xef\xbb\xbf" if layout == "bom" else b"") + text.encode("utf-8", "surrogatepass")
    checked = bulk.check_lines([body])
    if not checked.accepted[0]:
        return
    runs, issues = validate_measurements(M, body)
    assert issues == [] and runs is not None
    precise = pl.DataFrame(
        {
            "side": [r.data["side"] for r in runs],
            "repetition": [r.data["repetition"] for r in runs],
            "metric": [float(r.data["metric"]) if "metric" in r.data else None for r in runs],
            "line": [r.line for r in runs],
        },
        schema={"side": pl.String, "repetition": pl.Int64, "metric": pl.Float64, "line": pl.Int64},
    )
    assert checked.runs.select(precise.columns).equals(precise)
    cells = [
        (i, step, region, float(v))
        for i, r in enumerate(runs)
        for step, regions in _nested(r.data.get("breakdown") or {}).items()
        for region, v in regions.items()
    ]
    assert checked.breakdown.rows() == cells
    counters = [
        (i, k, float(v))
        for i, r in enumerate(runs)
        for k, v in (r.data.get("counters") or {}).items()
    ]
    assert checked.counters.rows() == counters


def _nested(breakdown: dict[str, Any]) -> dict[str, Any]:
    if breakdown and not isinstance(next(iter(breakdown.values())), dict):
        return {"all": breakdown}
    return breakdown


ATTEMPT: dict[str, Any] = {
    "schema": "explain-pipeline/attempt/v1",
    "attempt_id": "r1",
    "round": 1,
    "candidate": "fuse",
    "baseline": "main",
    "status": "completed",
    "started_at": "2026-11-01T12:00:00Z",
}
ATTEMPT_FIELDS = {
    "schema": st.sampled_from(["explain-pipeline/attempt/v1", "explain-pipeline/attempt/v2"]),
    "attempt_id": st.sampled_from(["r1", "r2", "../x", ""]),
    "round": st.one_of(st.integers(-1, 2**64), st.just(1.0)),
    "candidate": st.sampled_from(["", "x", 3]),
    "status": st.sampled_from(["completed", "done"]),
    "started_at": STAMPS,
    "declared_at": STAMPS,
    "mechanism_sha256": st.sampled_from(["a" * 64, "A" * 64, "a"]),
    "order_seed": st.one_of(st.integers(-1, 2**64), st.just(1.5)),
    "recorder": st.sampled_from(["", "explain-pipeline 0.1.0", None]),
    "environment": st.one_of(st.dictionaries(NAMES, st.sampled_from(["x", 1]), max_size=2)),
    "extra": st.just(1),
}


@settings(max_examples=200, deadline=None)
@given(
    overrides=st.dictionaries(
        st.sampled_from(sorted(ATTEMPT_FIELDS)), st.none(), max_size=3
    ).flatmap(lambda keys: st.fixed_dictionaries({k: ATTEMPT_FIELDS[k] for k in keys})),
    style=st.integers(0, 5),
)
def test_bulk_accepts_only_attempt_documents_the_precise_validator_accepts(
    overrides: dict[str, Any], style: int
) -> None:
    body = _text({**ATTEMPT, **overrides}, style).encode("utf-8", "surrogatepass")
    files = AttemptFiles(Path("a/c1/r1"), {"attempt.json": body, "measurements.jsonl": b""})
    fast = bulk.fast_attempt(files, benchmark=False)
    if fast is None:
        return
    document, issues = validate_document(Path("a/c1/r1/attempt.json"), body, "attempt")
    assert issues == [] and document is not None
    assert fast[0].data == document.data


def _tables(store: Store) -> dict[str, pl.DataFrame]:
    names = (
        "campaigns",
        "attempts",
        "samples",
        "breakdown",
        "counters",
        "expectations",
        "integrity",
    )
    return {name: store.read(name).drop("source_dir", strict=False) for name in names}


def test_bulk_and_precise_paths_store_the_same_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = Path(__file__).resolve().parent.parent / "data" / "attempts"
    bulk_store, precise_store = Store(tmp_path / "bulk"), Store(tmp_path / "precise")
    assert ingest(data, bulk_store).issues == []
    monkeypatch.setenv("EXPLAIN_INGEST_PRECISE", "1")
    assert ingest(data, precise_store).issues == []
    left, right = _tables(bulk_store), _tables(precise_store)
    for name in left:
        assert left[name].equals(right[name]), name
    assert left["breakdown"].height > 1000


def test_the_example_data_takes_the_bulk_path() -> None:
    data = Path(__file__).resolve().parent.parent / "data" / "attempts"
    folders = sorted(p.parent for p in data.glob("*/*/attempt.json"))
    bodies = [(f / "measurements.jsonl").read_bytes() for f in folders]
    assert len(folders) > 5 and bulk.check_lines(bodies).accepted.all()
    for folder in folders:
        files = AttemptFiles(
            folder,
            {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".json", ".jsonl")},
        )
        assert bulk.fast_attempt(files, benchmark=False) is not None, folder


def test_attempts_the_bulk_path_leaves_to_the_precise_one_keep_their_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """r002's lines are valid but written so that the bulk path cannot vouch for them (CRLF,
    a blank before a colon, a blank line): stored rows and their order are still the same."""
    from conftest import write_example_campaign

    root = tmp_path / "in"
    write_example_campaign(root, attempts=("r001", "r002", "r003"), repetitions=3)
    path = root / "c1" / "r002" / "measurements.jsonl"
    text = path.read_text().replace('"status":', '"status" :').replace("\n", "\r\n", 3)
    path.write_text("\n" + text)
    bulk_store, precise_store = Store(tmp_path / "bulk"), Store(tmp_path / "precise")
    assert bulk.check_lines([path.read_bytes()]).accepted.tolist() == [False]
    assert ingest(root, bulk_store).issues == []
    monkeypatch.setenv("EXPLAIN_INGEST_PRECISE", "1")
    assert ingest(root, precise_store).issues == []
    left, right = _tables(bulk_store), _tables(precise_store)
    for name in left:
        assert left[name].equals(right[name]), name
    assert left["samples"]["attempt_id"].unique(maintain_order=True).to_list() == [
        "r001",
        "r002",
        "r003",
    ]
