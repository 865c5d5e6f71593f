"""kineto importer: real PyTorch CPU traces checked against a breakdown computed here from the
trace events, and a synthetic GPU trace for launch-correlation attribution and stream union."""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.importers.common import ImportFormatError
from pipeline.importers.kineto import read, union_ns
from pipeline.importers.lines import build_line
from pipeline.importers.measurements import import_run
from pipeline.importers.reader import ImportOptions, InputFile

FIXTURES = Path(__file__).parent / "fixtures" / "import" / "kineto"


def _events(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return json.loads(raw)["traceEvents"]


def _reference(path: Path, is_step: Any, step_name: Any) -> tuple[dict, float, int]:
    """The expected breakdown written independently of the importer: per step, per annotation
    name, the summed durations of the ranges that are not inside another range of that name."""
    events = [e for e in _events(path) if e.get("ph") == "X"]
    annotations = [e for e in events if e.get("cat") == "user_annotation"]
    steps = [e for e in annotations if is_step(e["name"])]
    others = [e for e in annotations if not is_step(e["name"])]
    expected: dict[str, dict[str, float]] = {}
    aten = 0
    for step in steps:
        lo, hi = step["ts"], step["ts"] + step["dur"]
        inside = [e for e in others if lo <= e["ts"] < hi]
        regions: dict[str, float] = defaultdict(float)
        for e in inside:
            outer = [
                o
                for o in inside
                if o is not e
                and o["name"] == e["name"]
                and o["tid"] == e["tid"]
                and o["ts"] <= e["ts"]
                and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
            ]
            if not outer:
                regions[e["name"]] += e["dur"] / 1e6
        expected[step_name(step["name"])] = dict(regions)
        aten += sum(1 for e in events if e.get("cat") == "cpu_op" and lo <= e["ts"] < hi)
    metric = sum(s["dur"] for s in steps) / 1e6
    return expected, metric, aten


def _line(path: Path, **options: Any) -> dict[str, Any]:
    imported = read([InputFile(path)], ImportOptions(**options))
    return build_line(imported, side="baseline", repetition=0)


def _approx(expected: dict[str, dict[str, float]]) -> dict[str, Any]:
    return {s: pytest.approx(r, rel=1e-9, abs=1e-12) for s, r in expected.items()}


def test_real_trace_breakdown_equals_the_annotation_durations() -> None:
    path = FIXTURES / "cpu_steps.json"
    expected, metric, aten = _reference(
        path, lambda n: n.startswith("ProfilerStep#"), lambda n: "step-" + n.split("#")[1]
    )
    line = _line(path)
    assert len(expected) == 3
    assert line["breakdown"] == _approx(expected)
    assert line["metric"] == pytest.approx(metric, rel=1e-12)
    assert line["counters"] == {"aten_ops": aten}


def test_a_range_nested_inside_itself_is_counted_once() -> None:
    path = FIXTURES / "cpu_steps.json"
    mlp = [e for e in _events(path) if e.get("name") == "mlp" and e.get("ph") == "X"]
    first = sorted(mlp, key=lambda e: e["ts"])[:2]  # the outer mlp and the one nested in it
    assert first[0]["ts"] < first[1]["ts"] < first[0]["ts"] + first[0]["dur"]
    line = _line(path)
    step = min(line["breakdown"], key=lambda s: int(s.split("-")[1]))
    assert line["breakdown"][step]["mlp"] == pytest.approx(first[0]["dur"] / 1e6, rel=1e-9)


def test_parents_are_not_the_sum_of_their_children() -> None:
    line = _line(FIXTURES / "cpu_steps.json")
    for regions in line["breakdown"].values():
        assert regions["forward"] > regions["attention"] + regions["mlp"] - 1e-12
        assert regions["forward"] < regions["attention"] + regions["mlp"] + regions["forward"]


def test_without_profiler_steps_the_capture_is_one_step_all() -> None:
    path = FIXTURES / "cpu_nosteps.json.gz"
    line = _line(path)
    assert list(line["breakdown"]) == ["all"]
    cpu = [e for e in _events(path) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    assert line["counters"]["aten_ops"] == len(cpu)
    assert set(line["breakdown"]["all"]) >= {"decode-0", "attention", "mlp", "sampling"}


def test_step_pattern_turns_user_annotations_into_steps() -> None:
    import re

    path = FIXTURES / "cpu_nosteps.json.gz"
    pattern = re.compile(r"decode-\d+")
    expected, metric, _ = _reference(path, pattern.fullmatch, lambda n: n)
    line = _line(path, step_pattern=pattern)
    assert sorted(line["breakdown"]) == ["decode-0", "decode-1", "decode-2"]
    assert line["breakdown"] == _approx(expected)
    assert line["metric"] == pytest.approx(metric, rel=1e-12)


def test_region_pattern_keeps_only_matching_regions() -> None:
    import re

    line = _line(FIXTURES / "cpu_steps.json", region_pattern=re.compile("attention|sampling"))
    for regions in line["breakdown"].values():
        assert set(regions) == {"attention", "sampling"}


def test_two_captures_of_one_run_are_combined() -> None:
    folder = FIXTURES / "campaign"
    a, b = folder / "baseline-r0-a.json.gz", folder / "baseline-r0-b.json.gz"
    both = build_line(
        read([InputFile(a), InputFile(b)], ImportOptions()), side="baseline", repetition=0
    )
    one, two = _line(a), _line(b)
    assert both["breakdown"] == {**one["breakdown"], **two["breakdown"]}
    assert both["metric"] == pytest.approx(one["metric"] + two["metric"], rel=1e-12)
    assert both["counters"]["aten_ops"] == one["counters"]["aten_ops"] + two["counters"]["aten_ops"]
    with pytest.raises(ImportFormatError, match=r"also in"):
        read([InputFile(a), InputFile(a)], ImportOptions())


# ------------------------------------------------------------------------ synthetic GPU trace


def _x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1 if tid < 7 else 0,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _gpu_trace(tmp_path: Path) -> Path:
    # Times in µs. Step 1 = [1000, 1100), step 2 = [1100, 1200).
    events = [
        _x("user_annotation", "ProfilerStep#1", 1000, 100),
        _x("user_annotation", "ProfilerStep#2", 1100, 100),
        _x("user_annotation", "attn", 1010, 40),  # [1010, 1050)
        _x("user_annotation", "inner", 1020, 10),  # [1020, 1030) inside attn
        _x("cuda_runtime", "cudaLaunchKernel", 1015, 2, correlation=1),  # in attn
        _x("cuda_runtime", "cudaLaunchKernel", 1025, 2, correlation=2),  # in attn and inner
        _x("cuda_runtime", "cudaLaunchKernel", 1060, 2, correlation=3),  # step 1, no annotation
        _x("cuda_runtime", "cudaMemcpyAsync", 1070, 2, correlation=5),
        _x("cuda_runtime", "cudaMemsetAsync", 1072, 2, correlation=6),
        _x("cuda_runtime", "cudaStreamSynchronize", 1090, 5),
        _x("user_annotation", "attn", 1140, 20),  # step 2: [1140, 1160)
        _x("cuda_driver", "cuLaunchKernel", 1150, 2, correlation=4),
        _x("cuda_runtime", "cudaGraphLaunch", 1165, 2, correlation=7),
        # GPU side: stream 7 and stream 8 overlap; kernel 3 runs in step 2's window.
        _x("kernel", "k1", 1040, 50, tid=7, correlation=1),  # [1040, 1090)
        _x("kernel", "k2", 1070, 50, tid=8, correlation=2),  # [1070, 1120)
        _x("kernel", "k3", 1130, 10, tid=7, correlation=3),  # [1130, 1140), launched in step 1
        _x("gpu_memcpy", "Memcpy HtoD", 1075, 5, tid=9, correlation=5, bytes=4096),
        _x("gpu_memset", "Memset", 1081, 1, tid=9, correlation=6, bytes=128),
        _x("kernel", "k4", 1170, 10, tid=7, correlation=4),  # [1170, 1180)
        _x("kernel", "k5", 1185, 5, tid=7, correlation=7),  # graph kernel [1185, 1190)
        _x("kernel", "orphan", 1190, 5, tid=7, correlation=99),  # no launch in the trace
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 1, "tid": 1, "ts": 1015},
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    ]
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_gpu_time_follows_the_launch_and_busy_time_is_the_stream_union(tmp_path: Path) -> None:
    imported = read([InputFile(_gpu_trace(tmp_path))], ImportOptions())
    line = build_line(imported, side="candidate", repetition=2)
    us = 1e-6
    # Step 1 launched k1 [1040,1090), k2 [1070,1120) and k3 [1130,1140): the union is
    # [1040,1120) + [1130,1140) = 90 µs (their plain sum would be 110 µs). k3 runs in step 2's
    # window but belongs to step 1, where it was launched.
    step1 = line["breakdown"]["step-1"]
    assert step1["gpu_busy"] == pytest.approx(90 * us)
    assert step1["gpu:attn"] == pytest.approx(80 * us)  # k1 and k2 were launched inside attn
    assert step1["gpu:inner"] == pytest.approx(50 * us)  # only k2
    assert step1["attn"] == pytest.approx(40 * us) and step1["inner"] == pytest.approx(10 * us)
    step2 = line["breakdown"]["step-2"]
    assert step2["gpu_busy"] == pytest.approx(15 * us)  # k4 and the graph's k5, not k3
    assert step2["gpu:attn"] == pytest.approx(10 * us)
    assert line["metric"] == pytest.approx(200 * us)
    assert line["counters"] == {
        "aten_ops": 0,
        "kernels": 5,  # the orphan has no launch in any step
        "kernel_launches": 4,
        "graph_launches": 1,
        "syncs": 1,
        "memcpy_count": 1,
        "memcpy_bytes": 4096,
        "memset_count": 1,
        "memset_bytes": 128,
    }
    assert any("1 GPU events" in note for note in imported.notes)


# ------------------------------------------------------------------------------------ refusals


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"traceEvents": [\n{"ph": "X",\n}')
    with pytest.raises(ImportFormatError, match=r"bad\.json:3: expected JSON"):
        read([InputFile(path)], ImportOptions())


def test_a_gz_that_is_not_gzip_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(b"\x1f\x8bnot really gzip")
    with pytest.raises(ImportFormatError, match=r"t\.json\.gz: expected gzip-compressed JSON"):
        read([InputFile(path)], ImportOptions())


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1}, r'"dur": expected micro'),
        ({"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": -2}, r"got -2"),
        ({"ph": "X", "cat": "cpu_op", "name": "a", "ts": "x", "dur": 2}, r'"ts".*got "x"'),
    ],
)
def test_events_without_valid_times_are_refused(
    tmp_path: Path, event: dict[str, Any], message: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [event]}))
    with pytest.raises(ImportFormatError, match=r"t\.json: traceEvents\[0\].*" + message):
        read([InputFile(path)], ImportOptions())


def test_a_step_pattern_that_matches_nothing_is_refused() -> None:
    import re

    with pytest.raises(ImportFormatError, match=r"matching --step-pattern \"nope\", got none"):
        _line(FIXTURES / "cpu_steps.json", step_pattern=re.compile("nope"))


def test_a_step_without_region_events_is_kept_with_zeros_and_a_note(tmp_path: Path) -> None:
    """Before the fix step-2 and step-3 vanished from the breakdown while their 150 µs stayed in
    the metric, and nothing said so."""
    events = [
        _x("user_annotation", "ProfilerStep#1", 1000, 100),
        _x("user_annotation", "attn", 1010, 40),
        _x("user_annotation", "mlp", 1050, 20),
        _x("user_annotation", "ProfilerStep#2", 1100, 100),
        _x("cpu_op", "aten::add", 1110, 5),  # an operator, no annotation
        _x("user_annotation", "ProfilerStep#3", 1200, 50),  # nothing at all
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    imported = read([InputFile(path)], ImportOptions())
    line = build_line(imported, side="baseline", repetition=0)
    assert line["breakdown"] == {
        "step-1": {"attn": pytest.approx(40e-6), "mlp": pytest.approx(20e-6)},
        "step-2": {"attn": 0, "mlp": 0},
        "step-3": {"attn": 0, "mlp": 0},
    }
    assert line["metric"] == pytest.approx(250e-6)
    assert imported.notes == [
        '2 step(s) with no event of a region ("step-2", "step-3"): kept with every region at '
        "0; their time is in the metric"
    ]


def test_overlapping_steps_are_refused(tmp_path: Path) -> None:
    import re

    path = tmp_path / "t.json"
    events = [_x("user_annotation", "s", 0, 10), _x("user_annotation", "s", 5, 10)]
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(ImportFormatError, match=r"traceEvents\[1\]: expected steps that do not"):
        _line(path, step_pattern=re.compile("s"))


def test_not_a_chrome_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"events": []}')
    with pytest.raises(ImportFormatError, match=r'expected a Chrome trace: an object with a "tr'):
        _line(path)


def test_import_run_prints_or_appends(tmp_path: Path) -> None:
    out = tmp_path / "m.jsonl"
    trace = str(FIXTURES / "cpu_steps.json")
    first, _ = import_run("kineto", [trace], side="baseline", repetition=0, output=out)
    import_run(
        "kineto",
        [trace],
        side="candidate",
        repetition=0,
        output=out,
        options=ImportOptions.parse(renames=["attention=attn", "aten_ops=ops"]),
    )
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0] == first
    assert "attn" in lines[1]["breakdown"]["step-2"] and "attention" not in lines[1]["breakdown"]
    assert lines[1]["counters"] == {"ops": first["counters"]["aten_ops"]}
    with pytest.raises(ImportFormatError, match=r"side baseline repetition 0 already in the file"):
        import_run("kineto", [trace], side="baseline", repetition=0, output=out)


def test_region_pattern_applies_to_gpu_regions_by_annotation_name(tmp_path: Path) -> None:
    import re

    options = ImportOptions(region_pattern=re.compile("inner"))
    imported = read([InputFile(_gpu_trace(tmp_path))], options)
    line = build_line(imported, side="baseline", repetition=0)
    assert line["breakdown"]["step-1"] == {
        "inner": pytest.approx(10e-6),
        "gpu:inner": pytest.approx(50e-6),
    }
    # no kept region in step 2: kept at 0 (before the fix: dropped, while in the metric)
    assert line["breakdown"]["step-2"] == {"inner": 0, "gpu:inner": 0}
    assert imported.notes[-1].startswith('1 step(s) with no event of a region ("step-2")')


def _union_reference(rows: list[tuple[str, str, int, int]]) -> dict[tuple[str, str], int]:
    """The union length per group, by merging sorted intervals one by one."""
    merged: dict[tuple[str, str], list[list[int]]] = {}
    for a, b, start, end in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
        spans = merged.setdefault((a, b), [])
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    return {key: sum(e - s for s, e in spans) for key, spans in merged.items()}


@pytest.mark.parametrize("base", [0, 2**61])  # 2**61: shifted times would overflow
def test_union_ns_equals_merging_sorted_intervals(base: int) -> None:
    rng = random.Random(7)
    rows = []
    for _ in range(400):
        start = base + rng.randrange(0, 40_000)  # gaps, overlaps and nesting
        rows.append((rng.choice("xyz"), rng.choice("pq"), start, start + rng.randrange(0, 600)))
    frame = pl.DataFrame(rows, schema=["a", "b", "start", "end"], orient="row")
    got = union_ns(frame, ["a", "b"])
    assert dict(zip(zip(got["a"], got["b"], strict=True), got["ns"], strict=True)) == (
        _union_reference(rows)
    )
