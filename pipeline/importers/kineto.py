"""PyTorch profiler / Kineto Chrome traces (plain or .gz) -> steps, regions and counters.

Steps are ``ProfilerStep#N`` user annotations (named ``step-N``), or the annotations matched by
``--step-pattern`` (named as written); without either, user annotations named like steps
(``step-3``, ``train_step_7``, ``iteration 2``: the word step, iter or iteration and a number) are
the steps, as written, with a note saying so; else one step ``all`` spans the CPU events, and a
note names any numbered family of annotations (``decode-0``, ``decode-1``, ...) that could be steps
through ``--step-pattern``. A CPU event belongs to the step whose window contains its start.
Regions are the other user annotations, each with its own inclusive CPU time: nested ranges are
never added to their parents, and a name nested inside itself is counted once (the union of its
ranges on a thread, summed over threads). With GPU events, a kernel belongs to the step and the
annotations of the launch that issued it (joined on ``args.correlation``), not to the window it
runs in: ``gpu:<annotation>`` is the union of the kernel intervals launched inside that annotation
and ``gpu_busy`` the union of every kernel launched in the step, across streams.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.importers.common import ImportFormatError, fail, quoted, read_json
from pipeline.importers.kineto_stream import read_events
from pipeline.importers.naming import (
    API_SUFFIX,
    GRAPH_LAUNCH_APIS,
    KERNEL_LAUNCH_APIS,
    SYNC_SUFFIX,
    C,
)
from pipeline.importers.reader import Imported, ImportOptions, InputFile

DEFAULT_STEP = re.compile(r"ProfilerStep#(\d+)")
STEP_LIKE = re.compile(r"(?i)(?:.*[-_. ])?(?:step|iter|iteration)[-_#. ]?\d+")
NUMBERED = re.compile(r"(.*?[^\d])(\d+)")  # a name and its trailing number: decode-12
STEP_SCHEMA = {"step": pl.String, "idx": pl.Int64, "s_start": pl.Int64, "s_end": pl.Int64}

CPU_CATS = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function"}
API_CATS = {"cuda_runtime", "cuda_driver"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
CAT_ALIASES = {  # early Kineto traces (PyTorch 1.8) capitalized their categories
    "operator": "cpu_op",
    "runtime": "cuda_runtime",
    "driver": "cuda_driver",
    "memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
}
VERSION_KEYS = ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version")

EVENT_SCHEMA = {
    "idx": pl.Int64,
    "cat": pl.String,
    "name": pl.String,
    "thread": pl.String,
    "start": pl.Int64,
    "end": pl.Int64,
    "corr": pl.Int64,
    "nbytes": pl.Int64,
}


_KEPT_CATS = {c: c for c in CPU_CATS | GPU_CATS} | {
    alias: cat for alias, cat in CAT_ALIASES.items() if cat in CPU_CATS | GPU_CATS
}


def _stream(path: Path) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    """The events read as a stream (bounded memory), or None: then the file is read whole
    (always with ``ImportOptions.mode == "precise"``: the reference the stream is tested
    against)."""
    return read_events(path, _KEPT_CATS, EVENT_SCHEMA)


def read(inputs: Sequence[InputFile], options: ImportOptions) -> Imported:
    runs = [_read_file(item, options) for item in inputs]
    return _empty_steps_kept(_merge(runs, inputs))


def _empty_steps_kept(run: Imported) -> Imported:
    """A step with no event of a kept region (no annotation ran in it: Python-only work, or an
    idle step) still took its time, which the metric counts. It stays in the breakdown with every
    region of the run at 0, and a note names it, rather than vanishing from the breakdown alone
    (a region absent from a step is 0 there for assess anyway: the sums are the same, the line
    shows what was measured). A run without any region has no breakdown to keep it in."""
    regions = sorted({r for found in run.breakdown.values() for r in found})
    empty = [step for step, found in run.breakdown.items() if not found]
    if not regions or not empty:
        return run
    for step in empty:
        run.breakdown[step] = dict.fromkeys(regions, Decimal(0))
    shown = ", ".join(quoted(step) for step in empty[:5]) + (", …" if len(empty) > 5 else "")
    run.notes.append(
        f"{len(empty)} step(s) with no event of a region ({shown}): kept with every region at 0; "
        "their time is in the metric"
    )
    return run


# ----------------------------------------------------------------------------------- loading


def _load(path: Path) -> Any:
    return read_json(path, parse_float=Decimal)


def _events(path: Path, doc: Any) -> list[Any]:
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise fail(path, 1, 'expected a Chrome trace: an object with a "traceEvents" list')
    return events


MAX_TRACE_US = 2**62 // 1000
"""The largest time (a ts or a dur) read, in microseconds: 2^62 ns, about 146 years, so that a
start plus a duration stays within the 64-bit nanoseconds of the trace's columns (1e300 made
an internal error, exit 4). The streaming reader's plain times (15 digits) are below it."""


def _to_ns(value: Any, path: Path, index: int, name: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or value < 0:
        raise fail(
            path,
            None,
            f'traceEvents[{index}] ({quoted(name)}): field "{key}": expected microseconds >= 0, '
            f"got {json.dumps(value, default=str)}",
        )
    if value > MAX_TRACE_US:  # a start plus a duration must fit 64-bit nanoseconds
        raise fail(
            path,
            None,
            f'traceEvents[{index}] ({quoted(name)}): field "{key}": expected microseconds up '
            f"to {MAX_TRACE_US} (2^62 ns, what the store's 64-bit times hold), got "
            f"{json.dumps(value, default=str)[:40]}",
            "out_of_range",
        )
    # µs with up to three decimals (what Kineto writes) are exact nanoseconds.
    return int((Decimal(value) * 1000).to_integral_value(ROUND_HALF_EVEN))


def _int_arg(args: Any, key: str) -> int | None:
    value = args.get(key) if isinstance(args, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        return None  # (beyond 64 bits it is no correlation id or byte count Kineto writes)
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode(text: str) -> str:
    """A lone surrogate (a ``"\\udcff"`` escape in the file: no Unicode text, which no column
    and no line can hold; it was an internal error, exit 4) written as the escape ``\\udcff``."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _frame(path: Path, events: list[Any]) -> pl.DataFrame:
    """The complete (``ph: X``) events the importer uses, one row each, times in nanoseconds."""
    columns: dict[str, list[Any]] = {key: [] for key in EVENT_SCHEMA}
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            raise fail(path, None, f"traceEvents[{index}]: expected an object, got {event!r:.60}")
        if event.get("ph") != "X":
            continue
        cat = str(event.get("cat", "")).casefold()
        cat = CAT_ALIASES.get(cat, cat)
        if cat not in CPU_CATS | GPU_CATS:
            continue
        name = _unicode(str(event.get("name", "")))
        start = _to_ns(event.get("ts"), path, index, name, "ts")
        args = event.get("args")
        row = (
            index,
            cat,
            name,
            _unicode(f"{event.get('pid')}/{event.get('tid')}"),
            start,
            start + _to_ns(event.get("dur"), path, index, name, "dur"),
            _int_arg(args, "correlation"),
            _int_arg(args, "bytes"),
        )
        for key, value in zip(EVENT_SCHEMA, row, strict=True):
            columns[key].append(value)
    return pl.DataFrame(columns, schema=EVENT_SCHEMA)


# ------------------------------------------------------------------------------------- steps


def _steps(
    path: Path, frame: pl.DataFrame, options: ImportOptions, notes: list[str]
) -> pl.DataFrame:
    """Step windows: step, idx, s_start, s_end, sorted by start."""
    pattern = options.step_pattern or DEFAULT_STEP
    annotations = frame.filter(pl.col("cat") == "user_annotation")
    names = annotations["name"].unique().to_list()
    matched = {n: m for n in names if (m := pattern.fullmatch(n)) is not None}
    steps = annotations.filter(pl.col("name").is_in(list(matched))).sort("start")
    if steps.is_empty():
        if options.step_pattern is not None:
            raise fail(
                path,
                None,
                f"expected user annotations matching --step-pattern "
                f"{quoted(options.step_pattern.pattern)}, got none",
            )
        return _steps_without_profiler_steps(path, frame, annotations, names, notes)
    if options.step_pattern is None:
        label = {n: f"step-{m.group(1)}" for n, m in matched.items()}
        steps = steps.with_columns(step=pl.col("name").replace_strict(label))
    else:
        steps = _as_written(steps)
    _check_disjoint(path, steps)
    return steps.select("step", "idx", s_start="start", s_end="end")


def _as_written(steps: pl.DataFrame) -> pl.DataFrame:
    """Steps named by their annotation; a name used twice gets #0, #1, ... in time order."""
    return steps.with_columns(
        step=pl.when(pl.len().over("name") > 1)
        .then(pl.col("name") + "#" + pl.int_range(pl.len()).over("name").cast(pl.String))
        .otherwise(pl.col("name"))
    )


def _examples(names: Sequence[str]) -> str:
    shown = sorted(names, key=lambda n: (len(n), n))
    return ", ".join(quoted(n) for n in shown[:3]) + (", ..." if len(shown) > 3 else "")


def _steps_without_profiler_steps(
    path: Path, frame: pl.DataFrame, annotations: pl.DataFrame, names: list[str], notes: list[str]
) -> pl.DataFrame:
    """No ProfilerStep#N and no --step-pattern: annotations named like steps are the steps (when
    they do not overlap); else the whole capture is one step ``all``, and a numbered family of
    annotations that could be steps is named in a note, never silently turned into regions."""
    like = [n for n in names if STEP_LIKE.fullmatch(n)]
    if like:
        steps = _as_written(annotations.filter(pl.col("name").is_in(like)).sort("start"))
        try:
            _check_disjoint(path, steps)
        except ImportFormatError:
            notes.append(
                f"{path}: the annotations named like steps ({_examples(like)}) overlap, so they "
                "are regions of one step `all`; give --step-pattern to choose the steps"
            )
        else:
            notes.append(
                f"{path}: no ProfilerStep#N annotations; the {len(like)} annotation names that "
                f"look like steps ({_examples(like)}) are the steps (--step-pattern chooses others)"
            )
            return steps.select("step", "idx", s_start="start", s_end="end")
    else:
        families: dict[str, list[str]] = {}
        for name in names:
            if (m := NUMBERED.fullmatch(name)) is not None:
                families.setdefault(m.group(1), []).append(name)
        for prefix, members in sorted(families.items()):
            if len(members) > 1:
                regex = re.escape(prefix).replace("\\-", "-") + r"\d+"
                notes.append(
                    f"{path}: no ProfilerStep#N annotations, so the capture is one step `all` and "
                    f"{_examples(members)} are regions; if they are steps, give --step-pattern "
                    f"{quoted(regex)}"
                )
    cpu = frame.filter(pl.col("cat").is_in(CPU_CATS))
    if cpu.is_empty():
        raise fail(path, None, "expected CPU trace events (cpu_op, user_annotation), got none")
    return pl.DataFrame(
        {
            "step": ["all"],
            "idx": [-1],
            "s_start": [cpu["start"].min()],
            "s_end": [cpu["end"].max()],
        },
        schema=STEP_SCHEMA,
    )


def _check_disjoint(path: Path, steps: pl.DataFrame) -> None:
    overlaps = steps.with_columns(
        prev=pl.col("name").shift(1), prev_end=pl.col("end").shift(1)
    ).filter(pl.col("start") < pl.col("prev_end"))
    if not overlaps.is_empty():
        row = overlaps.row(0, named=True)
        raise fail(
            path,
            None,
            f"traceEvents[{row['idx']}]: expected steps that do not overlap, got "
            f"{quoted(row['name'])} starting inside {quoted(row['prev'])}",
        )


def _assign(
    events: pl.DataFrame | pl.LazyFrame, steps: pl.DataFrame, at: str = "start"
) -> pl.LazyFrame:
    """Each event's step: the step whose window [s_start, s_end) contains ``at`` (null if none).
    Lazy, so that the caller's filters run in the same pass (no full copy in between)."""
    if steps["idx"].to_list() == [-1]:  # no step annotations: the whole capture
        return events.lazy().with_columns(step=pl.lit("all"))
    joined = (
        events.lazy()
        .sort(at)
        .join_asof(steps.lazy().select("step", "s_start", "s_end"), left_on=at, right_on="s_start")
    )
    inside = pl.col(at) < pl.col("s_end")
    return joined.with_columns(step=pl.when(inside).then(pl.col("step"))).drop("s_start", "s_end")


# ---------------------------------------------------------------------------------- intervals


def union_ns(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Length of the union of [start, end) intervals per group of ``keys``: overlapping or
    nested intervals are counted once.

    Sorted by group then start, an interval opens a new stretch when it starts after the
    furthest end reached before it in its group. The groups are numbered in that order and each
    one's times are shifted past the previous one's (group * span), so one running maximum over
    the whole frame never carries an end into the next group (no window per group)."""
    if frame.is_empty():
        return frame.select(*keys).with_columns(ns=pl.lit(0, pl.Int64)).head(0)
    ordered = frame.sort([*keys, "start"]).with_columns(group=pl.struct(keys).rle_id())
    low, high, groups = ordered.select(
        pl.col("start").min(), pl.col("end").max(), pl.col("group").max()
    ).row(0)
    span = max(high - low, 0) + 1
    if (groups + 1) * span >= 2**62:  # the shifted times would overflow: a window per group
        reach = pl.col("end").cum_max().shift(1).over("group")
        opens = reach.is_null() | (pl.col("start") > reach)
    else:
        shift = pl.col("group").cast(pl.Int64) * span - low
        reach = (pl.col("end") + shift).cum_max().shift(1)
        opens = reach.is_null() | (pl.col("start") + shift > reach)
    return (
        ordered.with_columns(stretch=opens.cum_sum())
        .group_by("stretch")
        .agg(*(pl.col(k).first() for k in keys), s=pl.col("start").min(), e=pl.col("end").max())
        .group_by(keys)
        .agg(ns=(pl.col("e") - pl.col("s")).sum())
    )


# ------------------------------------------------------------------------------------ one file


def _read_file(item: InputFile, options: ImportOptions) -> tuple[Imported, int]:
    path = item.path
    if item.step is not None:
        raise fail(
            path,
            None,
            "kineto steps come from ProfilerStep annotations or --step-pattern; "
            f"expected PATH, got {quoted(item.step + '=' + str(path))}",
        )
    streamed = _stream(path) if options.mode == "fast" else None
    if streamed is None:  # the stream could not vouch for the file: the exact, whole reading
        doc = _load(path)
        frame = _frame(path, _events(path, doc))
        members = doc if isinstance(doc, dict) else {}
    else:
        frame, members = streamed
    notes: list[str] = []
    steps = _steps(path, frame, options, notes)
    # The CPU events used by name and time (annotations, runtime calls) get their step; of the
    # operators, by far the most events, only the number inside a step is used, from their
    # start times alone.
    cpu = (
        _assign(frame.lazy().filter(pl.col("cat").is_in(CPU_CATS - {"cpu_op"})), steps)
        .filter(pl.col("step").is_not_null() & ~pl.col("idx").is_in(steps["idx"].implode()))
        .drop("corr", "nbytes")
        .collect()
    )
    operators = frame.lazy().filter(pl.col("cat") == "cpu_op").select("start")
    counters: dict[str, int] = {
        C.ATEN_OPS: _assign(operators, steps).filter(pl.col("step").is_not_null()).collect().height
    }
    regions = _cpu_regions(cpu, options)
    has_gpu = frame.select(pl.col("cat").is_in(GPU_CATS | API_CATS).any()).item()
    if has_gpu:
        gpu = _gpu_events(frame, steps)
        lost = gpu.filter(pl.col("step").is_null()).height
        if lost:
            notes.append(
                f"{path}: {lost} GPU events whose launch is outside every step (or missing) "
                "were left out"
            )
        gpu = gpu.filter(pl.col("step").is_not_null())
        regions = pl.concat([regions, _gpu_regions(gpu, cpu, options)])
        counters |= _gpu_counters(cpu, gpu, path, notes)
    breakdown: dict[str, dict[str, Decimal]] = {s: {} for s in steps["step"].to_list()}
    for step, region, ns in zip(*(c.to_list() for c in regions.get_columns()), strict=True):
        breakdown[step][region] = seconds(ns)
    metric_ns = int(steps.select((pl.col("s_end") - pl.col("s_start")).sum()).item())
    version = ", ".join(f"{k} {members[k]}" for k in VERSION_KEYS if k in members)
    imported = Imported(
        format="kineto",
        breakdown=breakdown,
        counters={k: Decimal(v) for k, v in counters.items()},
        metric=seconds(metric_ns),
        provenance=f"kineto trace {path}" + (f" ({version})" if version else ""),
        notes=notes,
    )
    return imported, metric_ns


_BILLION = Decimal(10**9)


def seconds(ns: int) -> Decimal:
    return Decimal(ns) / _BILLION


def _kept(names: pl.Series, options: ImportOptions) -> list[str]:
    return [n for n in names.unique().to_list() if options.keeps_region(n)]


def _cpu_regions(cpu: pl.DataFrame, options: ImportOptions) -> pl.DataFrame:
    annotations = cpu.filter(pl.col("cat") == "user_annotation")
    annotations = annotations.filter(pl.col("name").is_in(_kept(annotations["name"], options)))
    per_thread = union_ns(annotations, ["step", "name", "thread"])
    return (
        per_thread.group_by("step", "name")
        .agg(pl.col("ns").sum())
        .select("step", region="name", ns="ns")
    )


def _gpu_events(frame: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """GPU events with the step, thread and start time of the API call that launched them."""
    launches = _assign(
        frame.filter(pl.col("cat").is_in(API_CATS) & pl.col("corr").is_not_null()), steps
    ).collect()
    # A runtime call and the driver call under it may share a correlation: keep the outer one.
    launches = (
        launches.sort("start")
        .unique("corr", keep="first")
        .select("corr", "step", l_thread="thread", l_start="start")
    )
    gpu = frame.filter(pl.col("cat").is_in(GPU_CATS))
    return gpu.join(launches, on="corr", how="left")


def _gpu_regions(gpu: pl.DataFrame, cpu: pl.DataFrame, options: ImportOptions) -> pl.DataFrame:
    kernels = gpu.filter(pl.col("cat") == "kernel")
    busy = union_ns(kernels, ["step"]).select("step", region=pl.lit(C.GPU_BUSY), ns="ns")
    annotations = cpu.filter(pl.col("cat") == "user_annotation")
    annotations = annotations.filter(pl.col("name").is_in(_kept(annotations["name"], options)))
    inside = kernels.join(
        annotations.select("step", region="name", l_thread="thread", a_start="start", a_end="end"),
        on=["step", "l_thread"],
    ).filter((pl.col("a_start") <= pl.col("l_start")) & (pl.col("l_start") <= pl.col("a_end")))
    per_region = union_ns(inside, ["step", "region"]).select(
        "step", region=pl.lit(C.GPU_PREFIX) + pl.col("region"), ns="ns"
    )
    return pl.concat([per_region, busy]) if options.keeps_region(C.GPU_BUSY) else per_region


def _gpu_counters(
    cpu: pl.DataFrame, gpu: pl.DataFrame, path: Path, notes: list[str]
) -> dict[str, int]:
    api = cpu.filter(pl.col("cat").is_in(API_CATS)).with_columns(
        base=pl.col("name").str.replace(API_SUFFIX, "")
    )
    counts = {
        C.KERNELS: gpu.filter(pl.col("cat") == "kernel").height,
        C.KERNEL_LAUNCHES: api.filter(pl.col("base").is_in(KERNEL_LAUNCH_APIS)).height,
        C.GRAPH_LAUNCHES: api.filter(pl.col("base").is_in(GRAPH_LAUNCH_APIS)).height,
        C.SYNCS: api.filter(pl.col("base").str.ends_with(SYNC_SUFFIX)).height,
    }
    for cat, count_name, bytes_name in (
        ("gpu_memcpy", C.MEMCPY_COUNT, C.MEMCPY_BYTES),
        ("gpu_memset", C.MEMSET_COUNT, C.MEMSET_BYTES),
    ):
        ops = gpu.filter(pl.col("cat") == cat)
        counts[count_name] = ops.height
        if ops["nbytes"].null_count():
            notes.append(f"{path}: {cat} events without args.bytes: {bytes_name} left out")
        else:
            counts[bytes_name] = int(ops["nbytes"].sum())
    return counts


# ------------------------------------------------------------------------------------- merging


def _merge(runs: list[tuple[Imported, int]], inputs: Sequence[InputFile]) -> Imported:
    """Several traces of one run (e.g. successive captures): their steps must be distinct."""
    first, _ = runs[0]
    if len(runs) == 1:
        return first
    breakdown: dict[str, dict[str, Decimal]] = {}
    owner: dict[str, Path] = {}
    counters: dict[str, Decimal] = {}
    for (run, _), item in zip(runs, inputs, strict=True):
        for step, regions in run.breakdown.items():
            if step in breakdown:
                raise fail(
                    item.path,
                    None,
                    f"expected steps not already imported, got {quoted(step)} "
                    f"also in {owner[step]}",
                )
            breakdown[step], owner[step] = regions, item.path
        for name, value in run.counters.items():
            counters[name] = counters.get(name, Decimal(0)) + value
    return Imported(
        format="kineto",
        breakdown=breakdown,
        counters=counters,
        metric=seconds(sum(ns for _, ns in runs)),
        provenance="; ".join(run.provenance for run, _ in runs),
        notes=[note for run, _ in runs for note in run.notes],
    )
