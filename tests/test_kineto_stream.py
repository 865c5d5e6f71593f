"""The streaming Kineto reader gives exactly the events of the whole-file reader, in pieces as
small as a few bytes, and leaves every file it cannot vouch for to the whole-file reader."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from test_import_kineto import _gpu_trace

from pipeline.importers import import_line, kineto
from pipeline.importers.kineto_stream import read_events

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


def test_stream_of_a_gpu_trace_and_the_same_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _gpu_trace(tmp_path)
    _same_as_whole(path, 50)
    streamed = import_line("kineto", [str(path)], side="baseline", repetition=0)[0]
    monkeypatch.setenv("EXPLAIN_KINETO_WHOLE", "1")
    assert import_line("kineto", [str(path)], side="baseline", repetition=0)[0] == streamed


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
