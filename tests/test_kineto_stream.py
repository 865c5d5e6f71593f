"""The streaming Kineto reader gives exactly the events of the whole-file reader, in pieces as
small as a few bytes, and leaves every file it cannot vouch for to the whole-file reader."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from msgspec import Raw
from test_import_kineto import _gpu_trace

from pipeline.importers import kineto, kineto_stream
from pipeline.importers.common import ImportFormatError
from pipeline.importers.kineto_stream import read_events
from pipeline.importers.lines import import_line
from pipeline.importers.reader import ImportOptions

FIXTURES = Path(__file__).parent / "fixtures" / "import" / "kineto"
TRACES = ["cpu_steps.json", "cpu_nosteps.json.gz", "campaign/baseline-r0-a.json.gz"]


def _whole(path: Path) -> tuple[pl.DataFrame, dict[str, object]]:
    doc = kineto._load(path)
    return kineto._frame(path, kineto._events(path, doc)), doc


def _same_as_whole(path: Path, block: int) -> None:
    streamed = read_events(path, kineto._KEPT_CATS, kineto.EVENT_SCHEMA, block=block)
    assert streamed is not None, path
    frame, members = streamed
    whole, doc = _whole(path)
    assert frame.equals(whole) and frame.height > 10
    assert members == {k: v for k, v in doc.items() if k != "traceEvents"}


@pytest.mark.parametrize("name", TRACES)
@pytest.mark.parametrize("block", [7, 4096, 2**23])
def test_stream_gives_the_events_of_the_whole_file(name: str, block: int) -> None:
    _same_as_whole(FIXTURES / name, block)


@pytest.mark.parametrize("name", [*TRACES, "tricky"])
def test_the_streamed_line_is_the_whole_readers_line(tmp_path: Path, name: str) -> None:
    path = _tricky(tmp_path, 2) if name == "tricky" else FIXTURES / name
    assert read_events(path, kineto._KEPT_CATS, kineto.EVENT_SCHEMA, block=4096) is not None
    streamed = import_line("kineto", [str(path)], side="baseline", repetition=0)[0]
    whole = import_line(
        "kineto", [str(path)], side="baseline", repetition=0, options=ImportOptions(mode="precise")
    )
    assert whole[0] == streamed


def test_stream_of_a_gpu_trace_and_the_same_line(tmp_path: Path) -> None:
    path = _gpu_trace(tmp_path)
    _same_as_whole(path, 50)
    streamed = import_line("kineto", [str(path)], side="baseline", repetition=0)[0]
    whole = import_line(
        "kineto", [str(path)], side="baseline", repetition=0, options=ImportOptions(mode="precise")
    )
    assert whole[0] == streamed


@pytest.mark.parametrize(
    "change",
    [
        lambda d: {**d, "traceEvents": [*d["traceEvents"], 3]},  # an event that is no object
        lambda d: d["traceEvents"],  # a bare array of events
        lambda d: json.dumps(d)[:-1] + ', "traceEvents": []}',  # a second, later array
    ],
)
def test_files_the_stream_cannot_vouch_for_are_left_to_the_whole_reader(
    tmp_path: Path, change: object
) -> None:
    doc = json.loads((FIXTURES / "cpu_steps.json").read_text())
    path = tmp_path / "t.json"
    changed = change(doc)  # type: ignore[operator]
    path.write_text(changed if isinstance(changed, str) else json.dumps(changed))
    assert read_events(path, kineto._KEPT_CATS, kineto.EVENT_SCHEMA, block=64) is None


def test_more_than_three_decimals_take_the_exact_whole_reading(tmp_path: Path) -> None:
    text = (FIXTURES / "cpu_steps.json").read_text()
    doc = json.loads(text)
    event = next(e for e in doc["traceEvents"] if e.get("ph") == "X")
    path = tmp_path / "t.json"
    path.write_text(text.replace(json.dumps(event["ts"]), json.dumps(event["ts"]) + "4", 1))
    assert read_events(path, kineto._KEPT_CATS, kineto.EVENT_SCHEMA) is None
    assert import_line("kineto", [str(path)], side="baseline", repetition=0)[0]["metric"] > 0


def _tricky(tmp_path: Path, indent: int | None) -> Path:
    """The fixture with events whose text holds what a cut must not split on: braces, commas
    and escaped quotes in names, nested arrays of objects in args, ids that are strings or
    null, names that are not ASCII, categories in other cases."""
    doc = json.loads((FIXTURES / "cpu_steps.json").read_text())
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    ops[0]["name"] = 'aten::odd "quoted" }, {"ph": "X", "ts": 1} [,] \\ end'
    ops[1]["args"] = {"nested": [{"a": 1}, {"b": [2, {"c": "},{"}]}], "correlation": 7}
    ops[2]["name"] = "naïve ☃},\n{"
    ops[3]["pid"], ops[3]["tid"] = "Spans", None
    del ops[5]["pid"]
    ops[6]["cat"], ops[7]["cat"] = "CPU_Op", "\u212aernel"  # case-folded: cpu_op, kernel
    path = tmp_path / f"tricky-{indent}.json"
    path.write_text(json.dumps(doc, indent=indent, ensure_ascii=False))
    return path


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("block", [1, 7, 64, 4096])
def test_stream_cuts_only_between_events(tmp_path: Path, indent: int | None, block: int) -> None:
    # Every block size puts a block border inside some event, string and nested value.
    _same_as_whole(_tricky(tmp_path, indent), block)


def test_an_empty_event_array_streams_as_no_events(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": [ ], "traceName": "x"}')
    streamed = read_events(path, kineto._KEPT_CATS, kineto.EVENT_SCHEMA, block=3)
    assert streamed is not None
    frame, members = streamed
    assert frame.is_empty() and frame.schema == kineto._frame(path, []).schema
    assert members == {"schemaVersion": 1, "traceName": "x"}


@pytest.mark.parametrize(
    "text",
    [
        '{"schemaVersion": 1}',  # no traceEvents
        '{"note": "traceEvents", "x": [1], "traceEvents": []}',  # the name first as a value
        '{"a": {"traceEvents": []}, "traceEvents": []}',  # first inside another member
        '{"traceEvents": {"events": []}}',  # not an array
    ],
)
def test_a_missing_or_misplaced_array_is_left_to_the_whole_reader(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    assert read_events(path, kineto._KEPT_CATS, kineto.EVENT_SCHEMA, block=5) is None


def _with_value(tmp_path: Path, field: str, text: str) -> Path:
    """The fixture with one CPU op's ``field`` written as ``text``."""
    doc = json.loads((FIXTURES / "cpu_steps.json").read_text())
    next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")[field] = 424242
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc).replace("424242", text, 1))
    return path


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("pid", "1.1583e4"),  # the whole reader writes this id as 1.1583E+4
        ("ts", "5.097152969572436e12"),  # a time with an exponent
        ("ts", "-5097152969572.436"),  # a negative time (an error of the whole reader)
        ("dur", '"12.5"'),  # a time written as a string (idem)
        ("ts", "5097152969572436"),  # 16 digits of microseconds
        ("dur", "null"),
        ("tid", "true"),  # an id Kineto never writes
    ],
)
def test_ids_and_times_written_otherwise_take_the_whole_reading(
    tmp_path: Path, field: str, text: str
) -> None:
    path = _with_value(tmp_path, field, text)
    assert read_events(path, kineto._KEPT_CATS, kineto.EVENT_SCHEMA) is None
    try:
        line = import_line("kineto", [str(path)], side="baseline", repetition=0)[0]
    except ImportFormatError as exc:
        line = {"error": str(exc)}
    try:
        whole = import_line(
            "kineto",
            [str(path)],
            side="baseline",
            repetition=0,
            options=ImportOptions(mode="precise"),
        )[0]
    except ImportFormatError as exc:
        whole = {"error": str(exc)}
    assert whole == line


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("tid", "-0"),  # printed 0 by both readers
        ("tid", '"t\\u0031"'),  # an escaped id: t1
        ("pid", str(2**70)),  # an integer beyond 64 bits
        ("ts", "5097152969572"),  # whole microseconds
        ("dur", "0.5"),
        ("dur", "0"),
        ("ts", "999999999999999.999"),  # the largest plain time
    ],
)
def test_ids_and_times_the_stream_reads_as_the_whole_reader(
    tmp_path: Path, field: str, text: str
) -> None:
    _same_as_whole(_with_value(tmp_path, field, text), 4096)


def _reference_ns(text: str) -> int | None:
    """A plain time's nanoseconds by decimal arithmetic; None for any other text."""
    if re.fullmatch(r"[0-9]{1,15}(\.[0-9]{1,3})?", text) is None:
        return None
    return int(Decimal(text) * 1000)


def test_times_become_exact_nanoseconds_or_are_refused() -> None:
    rng = random.Random(12)
    texts = [
        "0",
        "0.001",
        "999999999999999.999",
        "1000000000000000",
        "5.1234",
        "1e3",
        "-1",
        "null",
        "true",
        '"12.5"',
        '"1\\n2"',
        "[1, 2]",
        '{"a": 1.5}',
        "12.50",
        "0.0",
        "1234567890123456789",
        "12345678901234567890",
        "1.2.3",
        ".",
    ]
    for _ in range(3000):
        whole = str(rng.randrange(10 ** rng.randrange(1, 17)))
        texts.append(whole + rng.choice(["", "."]) + str(rng.randrange(10**4))[: rng.randrange(5)])
    rng.shuffle(texts)
    ns, plain = kineto_stream._ns(iter([Raw(t.encode()) for t in texts]), len(texts))
    expected = [_reference_ns(t) for t in texts]
    assert plain.tolist() == [e is not None for e in expected]
    assert [int(v) for v, e in zip(ns, expected, strict=True) if e is not None] == [
        e for e in expected if e is not None
    ]
    assert 1500 < plain.sum() < len(texts)


def test_undecodable_bytes_in_a_skipped_field_are_reported_as_by_the_whole_reader(
    tmp_path: Path,
) -> None:
    doc = json.loads((FIXTURES / "cpu_steps.json").read_text())
    doc["traceEvents"][-1]["args"] = {"note": "BAD"}
    path = tmp_path / "t.json"
    path.write_bytes(json.dumps(doc).encode().replace(b"BAD", b"\xff\xfe"))
    assert read_events(path, kineto._KEPT_CATS, kineto.EVENT_SCHEMA, block=4096) is None
    with pytest.raises(ImportFormatError, match="expected UTF-8 JSON, got undecodable bytes"):
        import_line("kineto", [str(path)], side="baseline", repetition=0)


_ALLOCATOR_CHECK = """
import os, sys
if sys.argv[1] == "import":
    from pipeline.importers.registry import importer
    importer("kineto").reader()
else:  # the assess command loads Polars the same way, then finds no store
    from pipeline.cli import main
    try:
        main(["assess", "c1", "--store", sys.argv[2]])
    except SystemExit as exit:
        assert exit.code == 2, exit.code
print("polars" in sys.modules, os.environ.get("_RJEM_MALLOC_CONF"))
"""


@pytest.mark.slow
def test_an_inherited_polars_default_is_not_a_users_setting() -> None:
    """A process started by one that loaded Polars inherits the variable Polars wrote; the
    setting is still made then (a benchmark that compared tables once lost it), not over a
    setting of the user's."""
    check = (
        "import sys\n"
        "from pipeline.allocator import load_polars\n"
        "print(load_polars('muzzy_decay_ms:0'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    loaded = subprocess.run(
        [sys.executable, "-c", "import os, polars; print(os.environ['_RJEM_MALLOC_CONF'])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for inherited, made in ((loaded, "True"), (f"{loaded},narenas:2", "False"), (None, "True")):
        child = dict(env) if inherited is None else {**env, "_RJEM_MALLOC_CONF": inherited}
        out = subprocess.run(
            [sys.executable, "-c", check], env=child, capture_output=True, text=True, check=True
        ).stdout.strip()
        assert out == made, (inherited, out)


@pytest.mark.parametrize("command", ["import", "assess"])
@pytest.mark.parametrize("own", [None, "narenas:2"])
def test_the_allocator_setting_lives_only_while_polars_loads(
    own: str | None, command: str, tmp_path: Path
) -> None:
    # Commands that record runs see Polars' own setting, as without it; a user's is kept.
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if own is not None:
        env["_RJEM_MALLOC_CONF"] = own
    out = subprocess.run(
        [sys.executable, "-c", _ALLOCATOR_CHECK, command, str(tmp_path / "no-store")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded, setting = out.stdout.split()
    assert loaded == "True" and "decay_ms:0" not in setting
    assert own is None or setting.endswith(own)
