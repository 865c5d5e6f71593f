"""What the recorder measures of a run itself, and suite result files turned into the run's line.

- **Resource counters**, on every run, free: the child's own resource usage as ``os.wait4``
  returns it when the recorder reaps it (CPU user and system seconds, peak RSS, page faults,
  context switches), named ``rusage.*``. They cover the command and every descendant it waited
  for, not one it left running. A counter the command writes itself under the same name wins.
- ``--metric-source cpu``: when the command gives no metric, the run's metric is its CPU time
  (user + system) instead of its wall-clock time; steadier for CPU-bound commands on a shared
  machine (docs/suites.md has the measurement), blind to waiting (I/O, sleep, GPU).
- ``--counters instructions``: each run under ``valgrind --tool=cachegrind --cache-sim=no``; the
  instructions executed (summed over the command's processes) become counter ``instructions``.
  ~70x slower, deterministic up to hash randomization (set PYTHONHASHSEED for Python).
- ``--measure pytest-benchmark|gbench|pyperf``: the command writes its harness's results to the
  path in ``$EXPLAIN_RESULTS`` (also written ``{results}`` in the command), read with the
  ``import`` adapters (pipeline/importers/suites.py) into the run's breakdown, counters and metric.

The wait itself is here because the resource usage comes with it: ``os.wait4`` blocks until the
child ends, so the wall-clock time is read the moment the child is reaped (``Popen.wait`` with a
timeout polls, up to 50 ms late); a timer thread kills the process group at the timeout.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.contract.files import InputFileError, MiB, read_regular
from pipeline.errors import ExplainError, UsageError
from pipeline.importers.registry import SUITE_FORMATS, SUITE_METRICS

RUSAGE_PREFIX = "rusage."
METRIC_SOURCES = ("wall", "cpu")
COUNTER_SETS = ("instructions",)
INSTRUCTIONS = "instructions"
RESULTS_VARIABLE = "EXPLAIN_RESULTS"
RESULTS_PLACEHOLDER = "{results}"
RESULTS_NAME = "results.json"
CACHEGRIND_PREFIX = "cachegrind.out"
CACHEGRIND_LIMIT = 64 * MiB  # a file per process: a summary and a line per function run
VALGRIND = (
    "valgrind",
    "--tool=cachegrind",
    "--cache-sim=no",
    "--branch-sim=no",
    "--trace-children=yes",
)


class MeasureFailure(Exception):
    """The run cannot be measured as asked: it is recorded as failed, with this reason."""


@dataclass(frozen=True, kw_only=True)
class MeasureOptions:
    """How every run of a round is measured beyond the command's own measurement file. Each
    value is one its option accepts (a usage error otherwise); counters named twice count once."""

    suite: str | None = None  # pytest-benchmark | gbench | pyperf
    suite_metric: str = "sum"
    metric_source: str = "wall"
    counters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "counters", tuple(dict.fromkeys(self.counters)))
        given = (
            ("--measure", (self.suite,) if self.suite is not None else (), SUITE_FORMATS),
            ("--suite-metric", (self.suite_metric,), SUITE_METRICS),
            ("--metric-source", (self.metric_source,), METRIC_SOURCES),
            ("--counters", self.counters, COUNTER_SETS),
        )
        for flag, values, allowed in given:
            for value in values:
                if value not in allowed:
                    raise UsageError(f"{flag} {value!r}: expected one of {', '.join(allowed)}")

    @property
    def instructions(self) -> bool:
        return INSTRUCTIONS in self.counters


def check_options(
    options: MeasureOptions, *, tracing: bool, commands: Sequence[Sequence[str]] = ()
) -> None:
    """Combinations that cannot work are usage errors before anything runs. ``{results}``
    without --measure would be passed on as it is: the harness would write a file of that name
    into the working directory and the run would be timed by the clock instead."""
    if options.suite is None and any(RESULTS_PLACEHOLDER in w for c in commands for w in c):
        raise UsageError(
            f"{RESULTS_PLACEHOLDER} in a command stands for the results file of --measure "
            "pytest-benchmark|gbench|pyperf: give --measure"
        )
    if options.suite is not None and tracing:
        raise UsageError("--measure and --trace both say where the breakdown comes from: give one")
    if options.metric_source != "wall" and (options.suite is not None or tracing):
        raise UsageError(
            f"--metric-source {options.metric_source}: with --measure or --trace the metric "
            "comes from the harness or the trace"
        )
    if options.instructions and shutil.which(VALGRIND[0]) is None:
        raise UsageError("--counters instructions runs every run under valgrind: not installed")


def describe(options: MeasureOptions) -> str:
    """How the runs are measured, for runs.log: ``pytest-benchmark results (metric sum), rusage
    counters, instructions``."""
    what = (
        f"{options.suite} results (metric {options.suite_metric})"
        if options.suite
        else f"the command's file or its {options.metric_source} time"
    )
    return ", ".join([what, "rusage counters", *options.counters])


# -- the command ------------------------------------------------------------------------------
def command(words: Sequence[str], options: MeasureOptions, folder: Path) -> list[str]:
    """The words of one run: ``{results}`` replaced by the run's results path; under valgrind
    with ``--counters instructions`` (its messages to a log file, not the command's stderr)."""
    out = list(words)
    if options.suite is not None:
        results = str(folder / RESULTS_NAME)
        out = [w.replace(RESULTS_PLACEHOLDER, results) for w in out]
    if options.instructions:
        out = [
            *VALGRIND,
            f"--cachegrind-out-file={folder / CACHEGRIND_PREFIX}.%p",
            f"--log-file={folder / 'valgrind.log'}.%p",
            *out,
        ]
    return out


def variables(options: MeasureOptions, folder: Path) -> dict[str, str]:
    return {RESULTS_VARIABLE: str(folder / RESULTS_NAME)} if options.suite is not None else {}


# -- the wait ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Waited:
    code: int
    usage: resource.struct_rusage | None
    timed_out: bool


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _until_exit(pid: int) -> None:
    """Block until ``pid`` has ended, in a call a signal always interrupts. polars installs its
    SIGINT handler with SA_RESTART at import, so a blocking wait4 resumed after Ctrl-C and the
    KeyboardInterrupt came only when the command ended (a hanging one: never); poll on a pidfd
    is never restarted (signal(7)), so Python's handler raises at once."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd (not Linux >= 5.3): wait4 alone, as before
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def wait(process: subprocess.Popen[bytes], timeout: float | None) -> Waited:
    """Block until the child ends (killing its process group at ``timeout``); its exit code and
    resource usage. An exception while waiting (Ctrl-C) propagates with the child still running."""
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def expire() -> None:
        with lock:
            if not state["done"]:
                state["fired"] = True
                kill_group(process)

    timer = threading.Timer(timeout, expire) if timeout is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        _until_exit(process.pid)
        _, status, usage = os.wait4(process.pid, 0)
        with lock:
            state["done"] = True
    finally:
        if timer is not None:
            timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    return Waited(process.returncode, usage, state["fired"])


def rusage_counters(usage: resource.struct_rusage) -> dict[str, int | float]:
    """The ``rusage.*`` counters of one run (Linux reports ``ru_maxrss`` in KiB).

    Linux charges a new process with the resident size of the process that started it until
    it calls exec (the old memory's high-water mark is kept at exec), so ``max_rss_bytes`` is
    never below the recorder's own size when it started the command: exact for a command that
    peaks above that, only a bound for a smaller one (docs/suites.md)."""
    return {
        f"{RUSAGE_PREFIX}user_seconds": usage.ru_utime,
        f"{RUSAGE_PREFIX}system_seconds": usage.ru_stime,
        f"{RUSAGE_PREFIX}cpu_seconds": usage.ru_utime + usage.ru_stime,
        f"{RUSAGE_PREFIX}max_rss_bytes": usage.ru_maxrss * 1024,
        f"{RUSAGE_PREFIX}minor_faults": usage.ru_minflt,
        f"{RUSAGE_PREFIX}major_faults": usage.ru_majflt,
        f"{RUSAGE_PREFIX}voluntary_switches": usage.ru_nvcsw,
        f"{RUSAGE_PREFIX}involuntary_switches": usage.ru_nivcsw,
    }


# -- after the run ----------------------------------------------------------------------------
_SUMMARY = re.compile(rb"^summary:\s+(\d+)", re.MULTILINE)


def instructions(folder: Path) -> int:
    """Instructions executed, summed over the cachegrind files of the run's processes."""
    files = sorted(folder.glob(f"{CACHEGRIND_PREFIX}.*"))
    if not files:
        raise MeasureFailure("valgrind wrote no cachegrind output (see valgrind.log)")
    total = 0
    for path in files:  # in the run's folder, which the command can write: read as any input
        try:
            text = read_regular(path, CACHEGRIND_LIMIT, "a cachegrind output", follow=False)
        except (InputFileError, OSError) as exc:
            raise MeasureFailure(f"cachegrind output {path.name}: {exc}") from None
        found = _SUMMARY.search(text)
        if found is None:
            raise MeasureFailure(f"cachegrind output {path.name} has no summary line")
        total += int(found.group(1))
    return total


def suite_fields(
    options: MeasureOptions, written: dict[str, Any], side: str, repetition: int, folder: Path
) -> dict[str, Any]:
    """Breakdown, counters and metric from the harness's results file; the metric from the
    measurement file instead when the command wrote one there."""
    from pipeline.importers.lines import import_line
    from pipeline.importers.reader import ImportOptions

    assert options.suite is not None
    if set(written) - {"metric"}:
        raise MeasureFailure(
            "with --measure the breakdown and counters come from the harness's results: the "
            "measurement file may give only the metric"
        )
    results = folder / RESULTS_NAME
    if not os.path.lexists(results):
        raise MeasureFailure(
            f"wrote no results file at ${RESULTS_VARIABLE} (write it to {RESULTS_PLACEHOLDER} in "
            f"the command, e.g. --benchmark-json={RESULTS_PLACEHOLDER} for pytest-benchmark)"
        )
    _check_results(results)
    try:
        line, _ = import_line(
            options.suite,
            [str(results)],
            side=side,  # type: ignore[arg-type]
            repetition=max(repetition, 0),
            metric=written.get("metric"),
            options=ImportOptions(suite_metric=options.suite_metric),
        )
    except ExplainError as exc:
        raise MeasureFailure(f"{options.suite} results: {exc}") from None
    return {k: line[k] for k in ("metric", "breakdown", "counters") if k in line}


def _check_results(path: Path) -> None:
    """The measurement file's rules for {results}: a regular file, not a link (the command
    could point it anywhere), opened without blocking, at most the suite reader's limit."""
    from pipeline.contract.files import measured_file_problem
    from pipeline.importers.common import MAX_SUITE_BYTES

    problem = measured_file_problem(path, MAX_SUITE_BYTES, "a results file")
    if problem is not None:
        raise MeasureFailure(f"${RESULTS_VARIABLE}{problem}")


SHELL_SAFE = re.compile(r"[A-Za-z0-9_./+-]+")
"""A path a shell reads as one word, unchanged: {results} is pasted into the command as it is."""


def check_results_path(folder: Path) -> None:
    """{results} is replaced by the run's results path as it is: a path holding a quote, a
    blank or ``$(…)`` would be re-read by ``sh -c``. A usage error before anything runs (set
    TMPDIR to a plain path, or write ``"$EXPLAIN_RESULTS"`` in the command)."""
    path = str(folder / RESULTS_NAME)
    if SHELL_SAFE.fullmatch(path) is None:
        raise UsageError(
            f"{RESULTS_PLACEHOLDER} would be {path!r}, which a shell would not read as one "
            "plain word: set TMPDIR to a plain path (letters, digits, _ . / + -), or use "
            f'"${RESULTS_VARIABLE}" in the command'
        )


def recorder_fields(
    options: MeasureOptions, written: dict[str, Any], waited: Waited, wall: float, folder: Path
) -> dict[str, Any]:
    """The run's fields with what the recorder measured added: its counters beside the
    command's (the command's win on a name clash) and, when the command gave none, the metric."""
    ours: dict[str, Any] = rusage_counters(waited.usage) if waited.usage is not None else {}
    if options.instructions:
        ours[INSTRUCTIONS] = instructions(folder)
    out = dict(written)
    out["counters"] = {**ours, **(written.get("counters") or {})}
    if "metric" not in out:
        if options.metric_source == "cpu":
            cpu = ours.get(f"{RUSAGE_PREFIX}cpu_seconds", 0)
            if not cpu > 0:
                raise MeasureFailure("--metric-source cpu: the run used no measurable CPU time")
            out["metric"] = cpu
        else:
            out["metric"] = wall
    return out
