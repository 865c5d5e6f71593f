"""The bulk path of ingest accepts only what the precise per-line validator accepts, and stores
exactly the rows the precise path stores."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from helpers import ANY_NUMBER, BASE_RUN, INGESTED_TABLES, NAMES, RUN_FIELDS, STAMPS, some_of
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingestion import bulk, columnar, decoders
from pipeline.ingestion.attempts import ingest
from pipeline.ingestion.files import validate_document, validate_measurements
from pipeline.ingestion.folders import AttemptFiles
from pipeline.ingestion.timestamps import parse_timestamp
from pipeline.store.tables import Store

M = Path("a/c1/r1/measurements.jsonl")


def _text(doc: dict[str, Any], style: int) -> str:
    """One line as a measurement script might print it (raw NaN tokens are left as written)."""
    separators = [(",", ":"), (", ", ": "), (",", " : ")][style % 3]
    text = json.dumps(doc, separators=separators, ensure_ascii=style % 2 == 0)
    return text.replace('"k\\\\ud800"', '"k\\ud800"')


def _run(overrides: dict[str, Any], dropped: set[str]) -> dict[str, Any]:
    return {k: v for k, v in {**BASE_RUN, **overrides}.items() if k not in dropped}


LINES = st.builds(
    _run,
    some_of(RUN_FIELDS, 2),
    st.sets(st.sampled_from(sorted(BASE_RUN))),
)


@settings(max_examples=300, deadline=None)
@given(
    docs=st.lists(LINES, min_size=0, max_size=4),
    style=st.integers(0, 5),
    layout=st.sampled_from(["plain", "blank", "crlf", "bom", "repeat", "two-per-line"]),
)
@pytest.mark.slow
def test_bulk_accepts_only_files_the_precise_validator_accepts(
    docs: list[dict[str, Any]], style: int, layout: str
) -> None:
    lines = [
        _text({**d, "repetition": d["repetition"]} if "repetition" in d else d, style) for d in docs
    ]
    if layout == "repeat" and lines:  # a key written twice
        lines[0] = lines[0][:-1] + ', "side": "candidate"}'
    if layout == "two-per-line" and len(lines) > 1:
        lines[:2] = [lines[0] + lines[1]]
    newline = "\r\n" if layout == "crlf" else "\n"
    text = newline.join(lines) + newline
    if layout == "blank":
        text = "\n  \n" + text + "\n"
    body = (b"\xef\xbb\xbf" if layout == "bom" else b"") + text.encode("utf-8", "surrogatepass")
    _same_as_precise(body)


def _same_as_precise(body: bytes) -> bool:
    """When the bulk path accepts ``body``, the precise validator accepts it too and the rows
    are the same; returns whether the bulk path accepted it."""
    checked = bulk.check_lines([body])
    if not checked.accepted[0]:
        return False
    runs, issues = validate_measurements(M, body)
    assert issues == [] and runs is not None
    precise = pl.DataFrame(
        {
            "side": [r.data["side"] for r in runs],
            "repetition": [r.data["repetition"] for r in runs],
            "metric": [float(r.data["metric"]) if "metric" in r.data else None for r in runs],
            "line": [r.line for r in runs],
            "order": [r.data.get("order") for r in runs],
            "started_at": [_stamp(r.data.get("started_at")) for r in runs],
            "finished_at": [_stamp(r.data.get("finished_at")) for r in runs],
        },
        schema={
            "side": pl.String,
            "repetition": pl.Int64,
            "metric": pl.Float64,
            "line": pl.Int64,
            "order": pl.Int64,
            "started_at": pl.Datetime("us", "UTC"),
            "finished_at": pl.Datetime("us", "UTC"),
        },
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
    return True


def _stamp(text: str | None) -> datetime | None:
    return None if text is None else parse_timestamp(text)


def _like(value: Any, data: st.DataObject, key: str, index: int) -> Any:
    """A value in place of ``value`` for a line of the same shape: often the same kind of
    value, sometimes anything the fields may hold."""
    if isinstance(value, dict):
        return {k: _like(v, data, k, index) for k, v in value.items()}
    if key == "repetition":
        rare = data.draw(st.integers(0, 7)) == 0
        return data.draw(RUN_FIELDS["repetition"]) if rare else index
    if key in RUN_FIELDS and key not in ("breakdown", "counters", "metric"):
        rare = data.draw(st.integers(0, 7)) == 0
        return data.draw(RUN_FIELDS[key]) if rare else value
    rare = data.draw(st.integers(0, 15)) == 0  # most lines stay valid
    return data.draw(ANY_NUMBER if rare else st.one_of(st.floats(1e-300, 1e300), st.integers(1)))


VALID_FIRST = st.sampled_from(
    [
        BASE_RUN,
        {**BASE_RUN, "breakdown": {"a": 0.5, "b": 1e-3}, "counters": {}},
        {
            **BASE_RUN,
            "order": 1,
            "started_at": "2026-11-01T12:00:00Z",
            "finished_at": "2026-11-01T12:00:01.5+02:00",
        },
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    first=st.one_of(VALID_FIRST, LINES),
    count=st.integers(1, 4),
    data=st.data(),
    style=st.integers(0, 5),
    change=st.sampled_from(
        ["none", "none", "none", "reordered", "spaced", "escaped", "missing", "extra", "null"]
    ),
)
@pytest.mark.slow
def test_lines_of_one_shape_are_read_as_the_precise_validator_reads_them(
    first: dict[str, Any], count: int, data: st.DataObject, style: int, change: str
) -> None:
    """The columnar reader's case: every line has the keys of the first, only values change
    (and then one line differs in how its keys are written)."""
    docs = [first] + [_like(first, data, "", i) for i in range(1, count)]
    lines = [_text(doc, style) for doc in docs]
    last = docs[-1]
    if change == "reordered":
        last = dict(reversed(last.items()))
        if isinstance(last.get("breakdown"), dict):
            last["breakdown"] = dict(reversed(last["breakdown"].items()))
        lines[-1] = _text(last, style)
    elif change == "null":  # an object written as null
        lines[-1] = _text({k: None if isinstance(v, dict) else v for k, v in last.items()}, style)
    elif change == "spaced":
        lines[-1] = _text(last, style + 2)
    elif change == "escaped":
        lines[-1] = lines[-1].replace('"side"', '"\\u0073ide"')
    elif change in ("missing", "extra"):
        key = next(iter(last), "")
        last = (
            {k: v for k, v in last.items() if k != key}
            if change == "missing"
            else {**last, "extra": 1}
        )
        lines[-1] = _text(last, style)
    _same_as_precise(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))


def _line(breakdown: str) -> str:
    return (
        '{"side":"baseline","repetition":0,"status":"ok","metric":1.5,'
        f'"breakdown":{breakdown},"counters":{{"launches":4000}}}}'
    )


def test_the_columnar_reader_takes_files_of_one_shape_and_leaves_the_others() -> None:
    one_shape = "\n".join(
        _line('{"s0":{"a":0.5,"b":2}}').replace('"repetition":0', f'"repetition":{i}')
        for i in range(3)
    )
    with_a_failed_run = one_shape + '\n{"side":"candidate","repetition":0,"status":"failed"}'
    steps = '{"decode-0":{"ab":1,"ba":2},"decode-1":{"ab":3,"ba":4}}'
    swapped = [
        steps,
        steps.replace('"decode-0"', '"decode-x"')
        .replace('"decode-1"', '"decode-0"')
        .replace('"decode-x"', '"decode-1"'),
        steps.replace('"ab":3,"ba":4', '"ba":4,"ab":3'),
    ]
    swapped_keys = "\n".join(
        _line(b).replace('"repetition":0', f'"repetition":{i}') for i, b in enumerate(swapped)
    )
    odd_quotes = one_shape.replace(
        '"side":"baseline","repetition":1', '"side":"baseline,"repetition":1'
    )
    bodies = [one_shape, with_a_failed_run, swapped_keys, odd_quotes, one_shape]
    vouched, _ = columnar.read_columnar([b.encode() for b in bodies])
    assert vouched.tolist() == [True, False, False, False, True]  # quotes paired anew after
    checked = bulk.check_lines([b.encode() for b in bodies])
    assert checked.accepted.tolist() == [True, True, True, False, True]  # typed decoders: 2, 3
    assert checked.runs.group_by("attempt").len().sort("attempt")["len"].to_list() == [3, 4, 3, 3]
    assert checked.breakdown.height == 2 * 3 * 2 + 3 * 4 + 3 * 2
    assert [_same_as_precise(b.encode()) for b in bodies] == [True, True, True, False, True]


# Decimal texts whose nearest float is hard to find: halfway cases between two floats, the
# largest and smallest (subnormal) floats, integers beyond 2^53, many digits, underflow to 0.
HARD_NUMBERS = [
    "9007199254740993",
    "9007199254740993.0",
    "9007199254740995",
    "2.2250738585072011e-308",
    "2.2250738585072012e-308",
    "4.9e-324",
    "2.4703282292062327e-324",
    "2.4703282292062328e-324",
    "1e-400",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "0.1",
    "1e23",
    "8.988465674311579e307",
    "123456789012345678901234567890",
    "0.30000000000000004441",
    "7.2057594037927933e16",
    "3.0000000000000000000000000000001",
    "1" + "0" * 300,
    "0." + "0" * 320 + "1",
    "1.00000000000000011102230246251565404236316680908203125",
    "1.000000000000000111022302462515654042363166809082031250000001",
    "0E0",
    "0e+00",
    "0.0E-5",
]


def test_numbers_are_read_to_the_bits_of_python_float() -> None:
    text = "\n".join(
        _line(
            '{"s0":{' + ",".join(f'"r{j}":{n}' for j, n in enumerate(HARD_NUMBERS)) + "}}"
        ).replace('"repetition":0', f'"repetition":{i}')
        for i in range(2)
    )
    vouched, parts = columnar.read_columnar([text.encode()])
    assert vouched.tolist() == [True]
    seconds = parts[0].breakdown["seconds"].to_numpy()
    expected = np.array([float(n) for n in HARD_NUMBERS] * 2)
    assert seconds.view(np.int64).tolist() == expected.view(np.int64).tolist()


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
    "sequential": some_of(
        {
            "first_look": st.sampled_from([1, 2, 6, 1000, 1001, 6.0, True]),
            "look_every": st.sampled_from([0, 1, 2, 1001]),
            "max_pairs": st.sampled_from([1, 2, 40, 1000, 1001]),
            "looks": st.lists(st.sampled_from([-1, 0, 6, 1000, 1001, 2.5]), max_size=3),
            "stopped": st.sampled_from(["pass", "futility", "max", "interrupted", "done"]),
            "extra": st.just(1),
        },
        6,
    ),
    "extra": st.just(1),
}


@settings(max_examples=200, deadline=None)
@given(
    overrides=some_of(ATTEMPT_FIELDS, 3),
    style=st.integers(0, 5),
)
def test_bulk_accepts_only_attempt_documents_the_precise_validator_accepts(
    overrides: dict[str, Any], style: int
) -> None:
    body = _text({**ATTEMPT, **overrides}, style).encode("utf-8", "surrogatepass")
    files = AttemptFiles(Path("a/c1/r1"), {"attempt.json": body, "measurements.jsonl": b""})
    fast = decoders.fast_attempt(files, benchmark=False)
    if fast is None:
        return
    document, issues = validate_document(Path("a/c1/r1/attempt.json"), body, "attempt")
    assert issues == [] and document is not None
    assert fast[0].data == document.data


CAMPAIGN: dict[str, Any] = {
    "schema": "explain-pipeline/campaign/v1",
    "campaign_id": "c1",
    "kind": "project",
    "created_at": "2026-11-01T10:00:00Z",
    "metric": {"name": "e2e_seconds", "better": "lower"},
    "policy": {"seed": 11, "confidence": 0.9},
    "policy_sha256": "b" * 64,
}
POLICY_FIELDS = {
    "decision": st.sampled_from(["median", "paired", "mean"]),
    "require_explanation": st.sampled_from([True, False, 0, "yes"]),
    "min_improvement_pct": st.one_of(ANY_NUMBER, st.floats(0, 1000), st.just(1000)),
    "confidence": st.one_of(ANY_NUMBER, st.floats(0, 1), st.sampled_from([0, 1, 0.5])),
    "resamples": st.one_of(st.integers(-1, 2_000_000), st.sampled_from([1.0, 10**6, True])),
    "seed": st.one_of(st.integers(-1, 2**64), st.sampled_from([2**63 - 1, 2**63, 1.0])),
    "min_pairs": st.one_of(st.integers(3, 7), st.sampled_from([10**6, 10**6 + 1, 5.0])),
    "interval": st.sampled_from(["percentile", "expanded_percentile", "student_t", "t"]),
    "other": st.just(1),
}
CAMPAIGN_FIELDS = {
    "schema": st.sampled_from(["explain-pipeline/campaign/v1", "explain-pipeline/campaign/v2"]),
    "campaign_id": st.sampled_from(["c1", "c2", "", "../c1"]),
    "kind": st.sampled_from(["project", "benchmark", "other"]),
    "created_at": STAMPS,
    "metric": st.fixed_dictionaries(
        {
            "name": st.sampled_from(["m", "", "k\\ud800"]),
            "better": st.sampled_from(["lower", "up"]),
        },
        optional={"unit": st.just("s")},
    ),
    "policy_sha256": st.sampled_from(["a" * 64, "A" * 64, "a"]),
    "extra": st.just(1),
}


@settings(max_examples=300, deadline=None)
@given(
    overrides=some_of(CAMPAIGN_FIELDS, 2),
    policy=some_of(POLICY_FIELDS, 4),
    dropped=st.sets(st.sampled_from(sorted(CAMPAIGN))),
    style=st.integers(0, 5),
)
@pytest.mark.slow
def test_bulk_accepts_only_campaign_documents_the_precise_validator_accepts(
    overrides: dict[str, Any], policy: dict[str, Any], dropped: set[str], style: int
) -> None:
    doc = {k: v for k, v in {**CAMPAIGN, "policy": policy, **overrides}.items() if k not in dropped}
    body = _text(doc, style).encode("utf-8", "surrogatepass")
    if style == 5:
        body = b"\xef\xbb\xbf" + body.replace(b'"seed"', b'"seed":1,"seed"')
    fast = decoders.fast_campaign(body, "c1")
    if fast is None:
        return
    document, issues = validate_document(Path("a/c1/campaign.json"), body, "campaign")
    assert issues == [] and document is not None and document.data["campaign_id"] == "c1"
    assert fast.data == document.data and fast.sha256 == document.sha256
    assert json.dumps(fast.data) == json.dumps(document.data)  # ints stay ints, floats floats


def test_a_valid_campaign_is_ingested_without_loading_jsonschema(tmp_path: Path) -> None:
    """jsonschema's import alone cost about 0.1 s of every ingest: only a document the fast
    checks cannot vouch for loads it."""
    from conftest import write_example_campaign

    write_example_campaign(tmp_path / "in", repetitions=5)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from pipeline.ingestion.attempts import ingest\n"
        "from pipeline.store.tables import Store\n"
        f"report = ingest(Path({str(tmp_path / 'in')!r}), Store(Path({str(tmp_path / 's')!r})))\n"
        "print(report.issues == [], report.summary()['ingested'].to_list(),"
        " 'jsonschema' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True [2] False"


def _tables(store: Store) -> dict[str, pl.DataFrame]:
    return {name: store.read(name).drop("source_dir", strict=False) for name in INGESTED_TABLES}


def test_bulk_and_precise_paths_store_the_same_tables(tmp_path: Path) -> None:
    data = Path(__file__).resolve().parent.parent / "data" / "attempts"
    bulk_store, precise_store = Store(tmp_path / "bulk"), Store(tmp_path / "precise")
    assert ingest(data, bulk_store).issues == []
    assert ingest(data, precise_store, mode="precise").issues == []
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
        assert decoders.fast_attempt(files, benchmark=False) is not None, folder


def test_attempts_the_bulk_path_leaves_to_the_precise_one_keep_their_place(
    tmp_path: Path,
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
    assert ingest(root, precise_store, mode="precise").issues == []
    left, right = _tables(bulk_store), _tables(precise_store)
    for name in left:
        assert left[name].equals(right[name]), name
    assert left["samples"]["attempt_id"].unique(maintain_order=True).to_list() == [
        "r001",
        "r002",
        "r003",
    ]
