"""One run of one side: a fresh process, its measurement file or its wall-clock time.

The command is split like a shell splits words and started without a shell, in its own process
group (a timeout or Ctrl-C kills the command and everything it started), with stdin closed and
stdout/stderr going to files, so nothing of it mixes into the recorder's output. The recorder
passes ``EXPLAIN_SIDE``, ``EXPLAIN_REPETITION``, ``EXPLAIN_MEASUREMENT`` (and
``EXPLAIN_TRACE_DIR`` with a trace format) plus ``EXPLAIN_PAD``, a filler that gives both sides
environments of exactly the same total size: the size of the environment alone shifts the stack
and with it run times (Mytkowicz et al., ASPLOS 2009). The paths passed have the same length for
both sides too.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pipeline.contract.files import InputFileError, MiB, measured_file_problem, read_regular
from pipeline.errors import ExplainError, UsageError
from pipeline.ingestion.jsontext import field_name, parse_json
from pipeline.ingestion.rules import check_document
from pipeline.record import measure
from pipeline.record.measure import MeasureFailure, MeasureOptions
from pipeline.record.options import TraceOptions
from pipeline.record.order import SIDES, Side

RECORDER_VARIABLES = (
    "EXPLAIN_SIDE",
    "EXPLAIN_REPETITION",
    "EXPLAIN_MEASUREMENT",
    "EXPLAIN_TRACE_DIR",
    measure.RESULTS_VARIABLE,
    "EXPLAIN_PAD",
)
FILE_FIELDS = ("metric", "breakdown", "counters")
STDERR_TAIL = 2000  # characters of a failed run's stderr kept in runs.log
MEASUREMENT_NAME = "measurement.json"
TRACE_NAME = "trace"
MAX_MEASUREMENT_BYTES = 4 * MiB
"""Largest $EXPLAIN_MEASUREMENT file read: one run's metric, breakdown and counters (a
breakdown of 1,000 steps of 30 regions is about 1 MB). A larger file fails the run unread; the
strict parser takes about a second per MB, so the cap also bounds the time a run's file costs."""


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What every run of a round shares."""

    commands: Mapping[Side, list[str]]
    timeout: float | None = None
    trace: TraceOptions | None = None
    needs_file: bool = False  # a better: higher campaign has no wall-clock fallback
    cwd: Path = field(default_factory=Path.cwd)
    measure: MeasureOptions = field(default_factory=MeasureOptions)
    cwds: Mapping[Side, Path] = field(default_factory=dict)
    """A side's own working directory where it differs from ``cwd`` (a confirmation round runs
    each side where the campaign recorded it)."""

    def cwd_of(self, side: Side) -> Path:
        return self.cwds.get(side, self.cwd)


@dataclass(frozen=True)
class RunResult:
    status: Literal["ok", "failed"]
    started_at: datetime
    finished_at: datetime
    metric: float | None = None
    breakdown: dict[str, Any] | None = None
    counters: dict[str, Any] | None = None
    reason: str | None = None
    stderr_tail: str = ""

    def line(self, side: Side, repetition: int, order: int) -> dict[str, Any]:
        """The measurement line of this run."""
        line: dict[str, Any] = {"side": side, "repetition": repetition, "status": self.status}
        if self.status == "ok":
            line["metric"] = self.metric
            if self.breakdown:
                line["breakdown"] = self.breakdown
            if self.counters:
                line["counters"] = self.counters
        line["order"] = order
        line["started_at"] = timestamp(self.started_at)
        line["finished_at"] = timestamp(self.finished_at)
        return line


def now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """RFC 3339, UTC, microseconds: ``2026-11-30T12:00:00.123456Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- commands -----------------------------------------------------------------------------------
def split_command(option: str, command: str, cwd: Path | None = None) -> list[str]:
    """Words as a shell splits them; the program must exist (checked before anything runs; a
    program given as a path is looked up from ``cwd``, the folder the command will run in)."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"{option} {command!r}: cannot split into words ({exc})") from None
    if not words:
        raise UsageError(f"{option}: the command is empty")
    program = words[0]
    found = shutil.which(program) if os.sep not in program else str((cwd or Path()) / program)
    if found is None or not os.access(found, os.X_OK) or os.path.isdir(found):
        raise UsageError(f"{option} {command!r}: {program!r} is not an executable program")
    return words


# -- environment --------------------------------------------------------------------------------
def _variables(
    side: Side, repetition: int, folder: Path, trace: bool, options: MeasureOptions
) -> dict[str, str]:
    found = {
        "EXPLAIN_SIDE": side,
        "EXPLAIN_REPETITION": str(repetition),
        "EXPLAIN_MEASUREMENT": str(folder / MEASUREMENT_NAME),
    }
    if trace:
        found["EXPLAIN_TRACE_DIR"] = str(folder / TRACE_NAME)
    return found | measure.variables(options, folder)


def _size(variables: Mapping[str, str]) -> int:
    return sum(len(name) + len(value) for name, value in variables.items())


def run_environment(
    base: Mapping[str, str],
    side: Side,
    repetition: int,
    folder: Path,
    *,
    trace: bool,
    options: MeasureOptions | None = None,
) -> dict[str, str]:
    """``base`` without inherited recorder variables, plus this run's, padded so that both sides
    of a repetition get environments of the same total size (the folder paths have equal lengths
    by construction)."""
    options = options or MeasureOptions()
    clean = {k: v for k, v in base.items() if k not in RECORDER_VARIABLES}
    sizes = {s: _size(_variables(s, repetition, folder, trace, options)) for s in SIDES}
    ours = _variables(side, repetition, folder, trace, options)
    ours["EXPLAIN_PAD"] = "-" * (max(sizes.values()) - sizes[side])
    return {**clean, **ours}


# -- one run ------------------------------------------------------------------------------------
class _Outcome(Exception):
    """A run that failed, with its reason."""


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by signal {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exit code {code}"


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - STDERR_TAIL))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _clear(folder: Path, trace: bool) -> None:
    """The run's scratch folder as a new run must find it: nothing a previous run left (its
    measurement file, suite results, profiler output), and an empty trace folder. One folder
    serves every run of a round (the same path for both sides): creating and removing a folder
    per run cost milliseconds per run on a loaded disk; stdout and stderr are truncated when
    they are opened, so they are left in place."""
    folder.mkdir(parents=True, exist_ok=True)
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name in ("stdout", "stderr") and entry.is_file(follow_symlinks=False):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
    if trace:
        (folder / TRACE_NAME).mkdir()


def execute(settings: RunSettings, side: Side, repetition: int, folder: Path) -> RunResult:
    """Run ``side``'s command once in a fresh process; ``folder`` is its scratch folder, cleared
    first. A KeyboardInterrupt while the command runs kills its process group and propagates."""
    trace = settings.trace is not None
    _clear(folder, trace)
    env = run_environment(
        os.environ, side, repetition, folder, trace=trace, options=settings.measure
    )
    stdout, stderr = folder / "stdout", folder / "stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        started = now()
        clock = time.perf_counter()
        try:
            process = subprocess.Popen(
                measure.command(settings.commands[side], settings.measure, folder),
                env=env,
                cwd=settings.cwd_of(side),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        except OSError as exc:
            return RunResult("failed", started, now(), reason=f"cannot start: {exc}")
        try:
            waited = measure.wait(process, settings.timeout)
        except BaseException:
            _kill(process)
            raise
        if waited.timed_out:
            _kill(process)
            return RunResult(
                "failed",
                started,
                now(),
                reason=f"timed out after {settings.timeout:g} s",
                stderr_tail=_tail(stderr),
            )
        seconds = time.perf_counter() - clock
        finished = now()
        measure.kill_group(process)  # what it left running must not run into the next run
    code = waited.code
    if code != 0:
        return RunResult(
            "failed", started, finished, reason=_describe_exit(code), stderr_tail=_tail(stderr)
        )
    try:
        values = _measured(settings, side, repetition, folder, seconds, waited)
    except (_Outcome, MeasureFailure) as exc:
        return RunResult("failed", started, finished, reason=str(exc), stderr_tail=_tail(stderr))
    except Exception as exc:  # a file the run wrote must cost that run only, never the round
        reason = (
            f"what the run wrote could not be read ({type(exc).__name__}: {exc}); a bug of "
            "explain-pipeline: please report it with this file"
        )
        return RunResult("failed", started, finished, reason=reason, stderr_tail=_tail(stderr))
    return RunResult("ok", started, finished, **values)


# -- what a run measured ------------------------------------------------------------------------
def _measured(
    settings: RunSettings,
    side: Side,
    repetition: int,
    folder: Path,
    seconds: float,
    waited: measure.Waited,
) -> dict[str, Any]:
    written = _measurement_file(folder / MEASUREMENT_NAME)
    if settings.trace is not None:
        written = _with_trace(settings.trace, written, side, repetition, folder / TRACE_NAME)
    if settings.measure.suite is not None:
        written = measure.suite_fields(settings.measure, written, side, repetition, folder)
    if "metric" not in written and settings.needs_file:
        raise _Outcome(
            "wrote no metric to $EXPLAIN_MEASUREMENT (a better: higher campaign cannot use "
            "the wall-clock time)"
        )
    written = measure.recorder_fields(settings.measure, written, waited, seconds, folder)
    # a warm-up run (repetition -1) is checked like repetition 0
    line = {"side": side, "repetition": max(repetition, 0), "status": "ok", **written}
    problems = check_document("measurement", line)
    if problems:
        raise _Outcome(
            "invalid measurement: "
            + "; ".join(f'field "{field_name(p)}": {m} [{c}]' for p, c, m in problems)
        )
    return {k: written.get(k) for k in FILE_FIELDS}


def _measurement_file(path: Path) -> dict[str, Any]:
    """The fields the command wrote to $EXPLAIN_MEASUREMENT ({} when it wrote none). Read after
    the command exited, only if it is a regular file (opened non-blocking, never through a link,
    so a FIFO or a link to /dev/zero cannot stall the recorder) of at most
    MAX_MEASUREMENT_BYTES. Nested values keep what the strict parser saw (NaN tokens, repeated
    keys) for the line's check."""
    try:
        body = read_regular(path, MAX_MEASUREMENT_BYTES, "a measurement file", follow=False)
    except FileNotFoundError:
        return {}
    except InputFileError as exc:
        raise _Outcome(f"$EXPLAIN_MEASUREMENT {exc.reason}") from None
    except OSError as exc:
        raise _Outcome(f"$EXPLAIN_MEASUREMENT: cannot read ({exc.strerror or exc})") from None
    try:
        document = parse_json(body.decode("utf-8-sig"))
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        raise _Outcome(f"invalid measurement file: {exc}") from None
    if not isinstance(document, dict):
        raise _Outcome("invalid measurement file: expected one JSON object")
    repeated = getattr(document, "repeated", ())
    if repeated:
        raise _Outcome(f"invalid measurement file: field {repeated[0]!r} is written twice")
    unknown = sorted(set(document) - set(FILE_FIELDS))
    if unknown:
        raise _Outcome(
            f"invalid measurement file: unknown field {unknown[0]!r} "
            f"(expected {', '.join(FILE_FIELDS)})"
        )
    return dict(document)


def _with_trace(
    options: TraceOptions, written: dict[str, Any], side: Side, repetition: int, folder: Path
) -> dict[str, Any]:
    """Breakdown and counters from the one trace the command left in $EXPLAIN_TRACE_DIR; the
    metric from the measurement file when the command wrote one, else the trace's."""
    from pipeline.importers.lines import import_line

    if set(written) - {"metric"}:
        raise _Outcome(
            "with --trace the breakdown and counters come from the trace: the measurement file "
            "may give only the metric"
        )
    traces = sorted(
        p
        for p in folder.iterdir()
        if p.name.endswith((".json", ".json.gz")) and not (p.is_dir() and not p.is_symlink())
    )
    if len(traces) != 1:
        found = "no trace" if not traces else f"{len(traces)} traces"
        raise _Outcome(f"{found} in $EXPLAIN_TRACE_DIR (expected exactly one *.json or *.json.gz)")
    _check_trace(traces[0])
    try:
        line, _ = import_line(
            options.format,
            [str(traces[0])],
            side=side,
            repetition=max(repetition, 0),  # a warm-up (-1) is read like repetition 0
            metric=written.get("metric"),
            options=options.imports,
        )
    except ExplainError as exc:
        raise _Outcome(f"trace {traces[0].name}: {exc}") from None
    return {k: line[k] for k in FILE_FIELDS if k in line}


def _check_trace(path: Path) -> None:
    """The measurement file's rules for the trace: a regular file, not a link, opened without
    blocking, at most the importer's MAX_INPUT_BYTES (what `import kineto` reads)."""
    from pipeline.importers.common import MAX_INPUT_BYTES

    problem = measured_file_problem(path, MAX_INPUT_BYTES, "a profiler file")
    if problem is not None:
        raise _Outcome(f"trace {path.name}{problem}")


__all__: Sequence[str] = [
    "MeasureOptions",
    "RunResult",
    "RunSettings",
    "TraceOptions",
    "execute",
    "split_command",
]
