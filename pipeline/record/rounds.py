"""One round of a campaign: the mechanism saved first, then every run, in the balanced order.

The attempt folder is assembled under a hidden name and renamed into place whole, already
holding ``attempt.json`` with status ``aborted``, an empty ``measurements.jsonl`` and, when one
is declared, ``mechanism.json`` with its digest and ``declared_at``: from the first moment it is
visible, the attempt is well formed and the declaration precedes every candidate run. After each
run its line is appended to the measurements file in one write (never a part of a line); at the
end attempt.json becomes ``completed`` (or ``failed`` when no repetition has an ok run on both
sides, or when the round stopped early because one side kept failing: see GIVE_UP_AFTER). An
interrupted round (Ctrl-C, SIGTERM, or a kill that cannot be caught) therefore leaves an
``aborted`` attempt that ingest accepts, holding the runs finished so far.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from pipeline.assessment import stopping
from pipeline.assessment.sequential import Schedule
from pipeline.atomic import LineAppender, dump_json, write_atomic
from pipeline.contract.declare import bounds, schema_id
from pipeline.contract.inert import inert
from pipeline.contract.layout import (
    ATTEMPT_FILE,
    CAMPAIGN_FILE,
    MEASUREMENTS_FILE,
    MECHANISM_FILE,
    RUNS_LOG,
    id_rule,
    valid_id,
)
from pipeline.contract.policy import policy_sha256, sequential_sha256, with_defaults
from pipeline.errors import ExitCode, ExplainError, UsageError
from pipeline.ingestion.files import Document, validate_document
from pipeline.ingestion.folders import validate_campaign
from pipeline.record import environment, until
from pipeline.record import progress as progress_lines
from pipeline.record.measure import (
    RESULTS_PLACEHOLDER,
    check_options,
    check_results_path,
    describe,
)
from pipeline.record.options import RunOptions, measured_object
from pipeline.record.order import (
    Side,
    Slot,
    block_schedule,
    random_seed,
    schedule,
    warmup_sides,
)
from pipeline.record.runner import (
    RunResult,
    RunSettings,
    execute,
    now,
    split_command,
    timestamp,
)
from pipeline.version import __version__

RECORDER = f"explain-pipeline {__version__}"
GIVE_UP_AFTER = 5
"""Consecutive failed runs of one side (warm-ups included) after which a round stops as
``failed``: a command that fails five times in a row is broken, not flaky, and running the
remaining repetitions would only burn time. A side whose every warm-up run failed stops the
round before repetition 0, whatever the count."""
SCREEN_TAIL_LINES = 10
"""Lines of the first failed run's stderr shown on screen (runs.log keeps more)."""


@dataclass(frozen=True)
class RoundRequest:
    """Everything ``explain-pipeline round`` is asked to do: which campaign, the two sides,
    and how the runs are made (``run``, the options round and ab share)."""

    campaign_dir: Path
    candidate: str
    baseline: str
    baseline_cmd: str
    candidate_cmd: str
    run: RunOptions = RunOptions()
    attempt_id: str | None = None
    confirms: str | None = None
    """A confirmation round (campaign final --confirm): the attempt it measures again."""
    chosen: tuple[str, ...] = ()
    """A confirmation round: what the caller chose against the rule (attempt.json's chosen)."""
    cwds: Mapping[Side, Path] = field(default_factory=dict)
    """A side's working directory where it is not the recorder's (a confirmation runs each side
    where the campaign recorded it)."""
    after_round: int = 0
    """The round number is above this one too (a confirmation: the largest round the store
    holds, whose folder may be gone, so that no new attempt takes a stored one's id)."""


@dataclass(frozen=True)
class RoundResult:
    folder: Path
    attempt_id: str
    round: int
    status: str
    order_seed: int
    lines: list[dict[str, Any]] = field(default_factory=list)
    stopped: str | None = None  # why the round ended before its last repetition, if it did
    sequential: dict[str, Any] | None = None  # --until-decided: attempt.json's sequential object
    decision: dict[str, Any] | None = None  # --until-decided: the last look's assessments row
    warmup: int = 0  # warm-up runs per side
    warmup_ok: dict[Side, int] = field(default_factory=dict)  # of them, those that succeeded
    stop_why: str | None = None  # --until-decided: why PASS is out of reach, when not the metric
    members: dict[str, int] | None = None  # deciding regions: members per verdict, last look

    def count(self, side: Side, status: str) -> int:
        return sum(1 for x in self.lines if x["side"] == side and x["status"] == status)

    @property
    def warmups_failed(self) -> bool:
        return any(self.warmup_ok.get(side, 0) < self.warmup for side in ("baseline", "candidate"))

    @property
    def n_pairs(self) -> int:
        return _pairs(self.lines)


class RoundInterrupted(ExplainError):
    """Ctrl-C or SIGTERM during a round: the attempt is left ``aborted``, well formed."""

    exit_code = ExitCode.INTERRUPTED


# -- the campaign and the round number ------------------------------------------------------
def read_campaign_json(folder: Path) -> Document:
    """The campaign.json of ``folder``, valid, or a one-line error."""
    if not (folder / CAMPAIGN_FILE).is_file():
        raise UsageError(
            f"{folder}: no campaign.json here (start the campaign first: explain-pipeline "
            f"campaign start {folder} --metric NAME)"
        )
    document, issues = validate_campaign(folder)
    if document is None:
        raise ExplainError("\n".join(str(i) for i in issues), ExitCode.REJECTED)
    recorded, actual = document.data["policy_sha256"], policy_sha256(document.data["policy"])
    if recorded != actual:  # the rule assess blocks a campaign for, checked before any run
        raise ExplainError(
            f'{folder / CAMPAIGN_FILE}: field "policy_sha256": {recorded[:12]}… does not match '
            f"the sha256 of the canonical policy {actual[:12]}…: the policy was changed after "
            "the campaign started; nothing was run (docs/record.md#integrity-before-any-run)",
            ExitCode.INTEGRITY,
        )
    return document


def next_round(campaign_dir: Path, after: int = 0) -> int:
    """1 + the largest ``round`` of the campaign's attempts (unreadable ones are skipped) and
    ``after`` (a round the store holds).

    Refused when that number is above the contract's largest round: the round would run every
    repetition and then be rejected by ingest, its runs lost."""
    rounds = [(after, campaign_dir)]
    for path in campaign_dir.glob(f"*/{ATTEMPT_FILE}"):
        if path.parent.name.startswith("."):
            continue
        with contextlib.suppress(OSError, ValueError):
            value = json.loads(path.read_text(encoding="utf-8")).get("round")
            if isinstance(value, int) and not isinstance(value, bool):
                rounds.append((value, path))
    largest, where = max(rounds, key=lambda pair: pair[0])
    problem = bounds("attempt", "round").problem(largest + 1)
    if problem is not None:
        raise UsageError(
            f'{where}: field "round": {largest} leaves no next round number (a round number '
            f"{problem}); nothing was run"
        )
    return largest + 1


def _mechanism(request: RoundRequest, campaign: Document) -> bytes | None:
    path = request.run.mechanism_file
    if path is None:
        return None
    if campaign.data["kind"] == "benchmark":
        raise UsageError(
            f"--mechanism-file {path}: a benchmark campaign refuses mechanism declarations"
        )
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"--mechanism-file {path}: cannot read: {exc.strerror}") from None
    _, issues = validate_document(path, body, "mechanism")
    if issues:
        raise ExplainError("\n".join(str(i) for i in issues), ExitCode.REJECTED)
    return body


def _attempt_id(request: RoundRequest, number: int) -> str:
    attempt_id = request.attempt_id or f"r{number:03d}"
    if not valid_id(attempt_id):
        raise UsageError(f"--attempt-id {attempt_id!r}: {id_rule()}")
    if (request.campaign_dir / attempt_id).exists():
        raise UsageError(f"{request.campaign_dir / attempt_id}: already exists")
    return attempt_id


# -- the attempt folder -----------------------------------------------------------------------
def _after(moment: datetime | None) -> datetime:
    """Now, strictly later than ``moment`` (timestamps have microseconds)."""
    current = now()
    while moment is not None and current <= moment:
        current = now()
    return current


@dataclass
class _Attempt:
    """attempt.json as it is rewritten during the round."""

    folder: Path
    document: dict[str, Any]
    candidate_started: bool = False

    def write(self) -> None:
        write_atomic(self.folder / ATTEMPT_FILE, dump_json(self.document))

    def candidate_starts(self) -> None:
        """started_at = the start of the first candidate run (warm-up included)."""
        if not self.candidate_started:
            declared = self.document.get("declared_at")
            self.document["started_at"] = timestamp(_after(_parse(declared)))
            self.candidate_started = True
            self.write()


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _create(
    request: RoundRequest,
    attempt_id: str,
    number: int,
    seed: int,
    mechanism: bytes | None,
    extra: dict[str, Any],
) -> _Attempt:
    """Assemble the attempt folder under a hidden name, then rename it into place."""
    final = request.campaign_dir / attempt_id
    staging = Path(tempfile.mkdtemp(prefix=f".{attempt_id}.", dir=request.campaign_dir))
    try:
        document: dict[str, Any] = {
            "schema": schema_id("attempt"),
            "attempt_id": attempt_id,
            "round": number,
            "candidate": request.candidate,
            "baseline": request.baseline,
            "status": "aborted",
        }
        if mechanism is not None:
            write_atomic(staging / MECHANISM_FILE, mechanism)
            declared = now()
            document["declared_at"] = timestamp(declared)
            document["mechanism_sha256"] = hashlib.sha256(mechanism).hexdigest()
            document["started_at"] = timestamp(_after(declared))
        else:
            document["started_at"] = timestamp(now())
        document |= {
            "order_seed": seed,
            "recorder": RECORDER,
            "environment": environment.capture(),
            **extra,
        }
        write_atomic(staging / MEASUREMENTS_FILE, b"")
        write_atomic(staging / ATTEMPT_FILE, dump_json(document))
        staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _Attempt(final, document)


# -- signals ----------------------------------------------------------------------------------
@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (``kill``) ends the round like Ctrl-C: the running command is killed too."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- the runs ---------------------------------------------------------------------------------
def _pairs(lines: list[dict[str, Any]]) -> int:
    ok = [
        {x["repetition"] for x in lines if x["side"] == s and x["status"] == "ok"}
        for s in ("baseline", "candidate")
    ]
    return len(ok[0] & ok[1])


def _log_run(log: TextIO, label: str, side: Side, result: RunResult, order: str = "") -> None:
    what = (
        f"ok metric {result.metric:.6g}"
        if result.status == "ok"
        else f"failed: {inert(result.reason or '')}"
    )
    seconds = (result.finished_at - result.started_at).total_seconds()
    log.write(
        f"{timestamp(result.started_at)}  {label:<14} {side:<9} {order}{what} ({seconds:.3f} s)\n"
    )
    if result.status == "failed" and result.stderr_tail.strip():
        log.write("".join(f"    | {inert(x)}\n" for x in result.stderr_tail.rstrip().splitlines()))
    log.flush()


def _header(log: TextIO, request: RoundRequest, attempt: _Attempt, settings: RunSettings) -> None:
    doc = attempt.document
    plan = doc.get("sequential")
    length = (
        f"until decided: looks from {plan['first_look']} every {plan['look_every']} pairs, at "
        f"most {plan['max_pairs']} repetitions"
        if plan
        else f"repetitions {request.run.fixed_repetitions}"
    )
    log.write(
        f"round {doc['round']} ({doc['attempt_id']}), {RECORDER}, started "
        f"{timestamp(now())}\n  baseline  {inert(request.baseline)}: "
        f"{inert(request.baseline_cmd)}\n"
        f"  candidate {inert(request.candidate)}: {inert(request.candidate_cmd)}\n"
        f"  {length}, warm-up {request.run.warmup} per side, "
        f"order seed {doc['order_seed']}, timeout {_seconds(request.run.timeout)}, "
        f"cwd {_cwds(settings)}\n"
        f"  measured by {describe(request.run.measure)}\n"
    )
    log.flush()


def _cwds(settings: RunSettings) -> str:
    """The folder the runs start in, or each side's when they differ."""
    b, c = settings.cwd_of("baseline"), settings.cwd_of("candidate")
    return inert(str(b)) if b == c else f"baseline {inert(str(b))}, candidate {inert(str(c))}"


def _recorded(request: RoundRequest, settings: RunSettings) -> dict[str, Any]:
    """What attempt.json keeps of the round beyond the runs: each side's command and folder and
    how the runs were measured (so it can be measured again alike), a suite round's metric rule
    (its metric is formed again over the benchmarks both sides measured, contract §15) and, for
    a confirmation round, what it confirms."""
    given: dict[Side, str] = {
        "baseline": request.baseline_cmd,
        "candidate": request.candidate_cmd,
    }
    commands = {
        side: {"command": command, "cwd": str(settings.cwd_of(side))}
        for side, command in given.items()
    }
    found: dict[str, Any] = {"commands": commands, "measured": measured_object(request.run)}
    if settings.measure.suite is not None and not settings.needs_file:
        found["suite_metric"] = settings.measure.suite_metric  # assess combines common ones
    if request.confirms is not None:
        found |= {"kind": "confirmation", "confirms": request.confirms}
        if request.chosen:
            found["chosen"] = list(request.chosen)
    return found


def _seconds(timeout: float | None) -> str:
    return "none" if timeout is None else f"{timeout:g} s"


@dataclass
class _Watch:
    """Failures as they happen: the first one goes to the screen with the end of its stderr,
    and a side that keeps failing stops the round (GIVE_UP_AFTER)."""

    log_path: Path
    warn: Callable[[str], None]
    streak: dict[Side, int] = field(default_factory=lambda: {"baseline": 0, "candidate": 0})
    warmups_ok: dict[Side, int] = field(default_factory=lambda: {"baseline": 0, "candidate": 0})
    shown: bool = False
    stopped: str | None = None

    def saw(self, label: str, side: Side, result: RunResult) -> None:
        if result.status == "ok":
            self.streak[side] = 0
            if label == "warm-up":
                self.warmups_ok[side] += 1
            return
        self.streak[side] += 1
        if self.streak[side] >= GIVE_UP_AFTER:
            self.stopped = f"the {side} failed {GIVE_UP_AFTER} runs in a row"
        if not self.shown:
            self.shown = True
            self.warn(_first_failure(label, side, result, self.log_path))

    def after_warmup(self, warmup: int) -> None:
        broken = [side for side, ok in self.warmups_ok.items() if warmup and not ok]
        if broken and self.stopped is None:
            self.stopped = f"every warm-up run of the {' and the '.join(broken)} failed"


def _first_failure(label: str, side: Side, result: RunResult, log_path: Path) -> str:
    """The screen message for the first failed run of a round."""
    lines = result.stderr_tail.rstrip().splitlines()[-SCREEN_TAIL_LINES:]
    if lines:
        tail = "; its stderr ends with:\n" + "".join(f"    | {inert(x)}\n" for x in lines)
    else:
        tail = " (its stderr is empty)\n"
    return (
        f"warning: {side} run ({label}) failed: {inert(result.reason or '')}{tail}"
        f"  every run is logged in {inert(str(log_path))}"
    )


@dataclass
class _Decider:
    """--until-decided: after each block from the first look, the round assessed in memory;
    attempt.json keeps the looks taken (``stopped: interrupted`` until the round ends)."""

    plan: Schedule
    campaign: Document
    attempt: _Attempt
    mechanism: bytes | None
    say: Callable[[str], None] = lambda text: None  # stderr: one line per look
    looks: list[int] = field(default_factory=list)
    last: until.Look | None = None

    def after(self, lines: list[dict[str, Any]], repetitions: int, log: TextIO) -> bool:
        """True when the round stops after ``repetitions`` repetitions."""
        if repetitions not in self.plan.looks:
            return False
        clock = time.perf_counter()
        found = until.look(
            self.plan,
            self.campaign,
            self.attempt.folder,
            self.attempt.document,
            lines,
            self.mechanism,
            self.looks,
            _pairs(lines),
            repetitions,
        )
        self.looks.append(found.pairs)
        self.last = found
        self.mark(found.stop or "interrupted")
        verdict = found.row["verdict"] + (
            f" ({found.row['reason']})" if found.row["reason"] else ""
        )
        if found.members is not None:
            verdict = "benchmarks " + ", ".join(f"{n} {v}" for v, n in found.members.items() if n)
        log.write(
            f"{timestamp(now())}  look {len(self.looks)} at {found.pairs} pairs: "
            f"{verdict}; {_going(found.stop, found.why)} (look took "
            f"{time.perf_counter() - clock:.3f} s)\n"
        )
        log.flush()
        ahead = None if found.stop else progress_lines.next_look(self.plan.looks, repetitions)
        self.say(
            progress_lines.look_line(
                self.attempt.document["attempt_id"],
                len(self.looks),
                found.pairs,
                verdict,
                _going(found.stop, found.why),
                ahead,
                self.plan.max_pairs,
            )
        )
        return found.stop is not None

    def mark(self, stopped: until.Stopped) -> None:
        looks = list(self.looks)
        self.attempt.document["sequential"] = until.sequential_object(self.plan, looks, stopped)
        self.attempt.write()


def _going(stop: str | None, why: str | None) -> str:
    return "go on" if stop is None else f"stop ({stop}{': ' + why if why else ''})"


SCRATCH_PREFIX = "explain-round-"  # the runs' scratch folders, in the temporary directory


def _run_folders(scratch: Path, settings: RunSettings) -> Iterator[Path]:
    """The scratch folder of each run. One folder serves every run (cleared before each:
    creating one per run cost milliseconds on a loaded disk), except with --counters
    instructions, where each run gets its own (``run-000001``, …: the same length for both
    sides) and the previous one is removed: cachegrind writes one file per process when that
    process ends, so a file of an earlier run must never be in a later run's folder."""
    if not settings.measure.instructions:
        while True:
            yield scratch / "run"
    for index in itertools.count(1):
        folder = scratch / f"run-{index:06d}"
        yield folder
        shutil.rmtree(folder, ignore_errors=True)


def _execute_runs(
    attempt: _Attempt,
    settings: RunSettings,
    request: RoundRequest,
    slots: list[Slot],
    scratch: Path,
    bar: tqdm,
    watch: _Watch,
    decider: _Decider | None = None,
    ticker: progress_lines.Ticker | None = None,
) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    runs = failed = 0
    folders = _run_folders(scratch, settings)
    with (
        (attempt.folder / RUNS_LOG).open("a", encoding="utf-8") as log,
        LineAppender(attempt.folder / MEASUREMENTS_FILE) as measurements,
    ):
        _header(log, request, attempt, settings)
        for side in warmup_sides(request.run.warmup):
            if side == "candidate":
                attempt.candidate_starts()
            result = execute(settings, side, -1, next(folders))
            _log_run(log, "warm-up", side, result)
            watch.saw("warm-up", side, result)
            bar.update(1)
            runs, failed = runs + 1, failed + (result.status != "ok")
            if ticker is not None:
                ticker.tick(runs, lambda: 0, failed)
        watch.after_warmup(request.run.warmup)
        for slot in slots:
            if watch.stopped:
                break
            if slot.side == "candidate":
                attempt.candidate_starts()
            result = execute(settings, slot.side, slot.repetition, next(folders))
            lines.append(result.line(slot.side, slot.repetition, slot.order))
            measurements.append(lines[-1])
            _log_run(
                log, f"repetition {slot.repetition}", slot.side, result, f"order {slot.order}  "
            )
            watch.saw(f"repetition {slot.repetition}", slot.side, result)
            shown = f"{result.metric:.4g}" if result.metric is not None else "failed"
            bar.set_postfix_str(f"rep {slot.repetition} {slot.side} {shown}", refresh=False)
            bar.update(1)
            runs, failed = runs + 1, failed + (result.status != "ok")
            if ticker is not None:
                ticker.tick(runs, lambda: _pairs(lines), failed)
            pair_done = slot.order == 1 and not watch.stopped
            if decider and pair_done and decider.after(lines, slot.repetition + 1, log):
                break
        if watch.stopped:
            log.write(f"{timestamp(now())}  stopped: {watch.stopped}; the attempt is failed\n")
    return lines


def record_round(
    request: RoundRequest,
    *,
    progress: bool = False,
    warn: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    interval: float | None = None,
) -> RoundResult:
    """Run one round and write its attempt folder (see the module docstring). ``warn`` gets the
    message about the first failed run (the end of its stderr) as soon as it fails, the note
    that a suite in a campaign deciding its metric alone gets no verdict per benchmark, and the
    progress lines (pipeline/record/progress.py: one per look, or every ``interval`` seconds of
    ``clock`` and one at the end for a fixed round without a progress bar, ``progress`` False;
    ``interval`` None: progress.interval(), 30 s), and the benchmarks one side only measured."""
    campaign, run = read_campaign_json(request.campaign_dir), request.run
    every = progress_lines.interval() if interval is None else interval  # before anything runs
    note = per_benchmark_note(campaign.data["policy"], run)
    if note is not None and warn is not None:
        warn(note)
    check_repetitions(
        campaign.data["policy"], run, f"{request.campaign_dir / CAMPAIGN_FILE} freezes"
    )
    commands: dict[Side, list[str]] = {
        "baseline": split_command(
            "--baseline-cmd", request.baseline_cmd, request.cwds.get("baseline")
        ),
        "candidate": split_command(
            "--candidate-cmd", request.candidate_cmd, request.cwds.get("candidate")
        ),
    }
    check_options(run.measure, tracing=run.trace is not None, commands=list(commands.values()))
    if any(RESULTS_PLACEHOLDER in word for words in commands.values() for word in words):
        check_results_path(Path(tempfile.gettempdir()) / f"{SCRATCH_PREFIX}xxxxxxxx" / "run")
    mechanism = _mechanism(request, campaign)
    seed = random_seed() if run.order_seed is None else run.order_seed
    needs_file = campaign.data["metric"]["better"] == "higher"
    if needs_file and run.measure.metric_source == "cpu":  # every run would fail
        raise UsageError(
            "--metric-source cpu measures a time (lower is better), but the campaign's metric "
            f"is better higher ({request.campaign_dir / 'campaign.json'}): the command must "
            "write its metric to $EXPLAIN_MEASUREMENT"
        )
    settings = RunSettings(
        commands=commands,
        timeout=run.timeout,
        trace=run.trace,
        needs_file=needs_file,
        measure=run.measure,
        cwds=request.cwds,
    )
    number = next_round(request.campaign_dir, request.after_round)
    attempt_id = _attempt_id(request, number)
    plan = _plan(request, campaign)
    extra = _recorded(request, settings)
    if plan is None:
        slots = schedule(run.fixed_repetitions, seed)
    else:
        slots = block_schedule(plan.max_pairs // stopping.BLOCK, seed)
        started = until.sequential_object(plan, [], "interrupted")
        extra |= {"sequential_sha256": sequential_sha256(started), "sequential": started}
    attempt = _create(request, attempt_id, number, seed, mechanism, extra)
    say = warn or (lambda text: None)
    total = len(slots) + 2 * run.warmup
    bar = tqdm(
        total=total,
        disable=not progress,
        file=sys.stderr,
        unit="run",
        desc=f"round {attempt_id}",
        leave=False,
    )
    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    watch = _Watch(attempt.folder / RUNS_LOG, _beside(bar, say))
    decider = (
        None if plan is None else _Decider(plan, campaign, attempt, mechanism, _beside(bar, say))
    )
    ticker = None
    if plan is None and not progress and warn is not None:  # on a terminal the bar says it
        ticker = progress_lines.Ticker(say, attempt_id, total, every, clock)
    try:
        with bar, _sigterm_interrupts():
            lines = _execute_runs(
                attempt, settings, request, slots, scratch, bar, watch, decider, ticker
            )
    except KeyboardInterrupt:
        with (attempt.folder / RUNS_LOG).open("a", encoding="utf-8") as log:
            log.write(f"{timestamp(now())}  interrupted: the attempt stays aborted\n")
        raise RoundInterrupted(
            f"interrupted: {attempt.folder} is left as an aborted attempt (ingest accepts it)"
        ) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if ticker is not None:
        ticker.end(_pairs(lines))
    if run.measure.suite is not None and (text := progress_lines.unmatched(lines)) is not None:
        say(text)
    usable = _pairs(lines) and watch.stopped is None
    attempt.document["status"] = "completed" if usable else "failed"
    if decider is not None and decider.last is not None and decider.last.stop is not None:
        decider.mark(decider.last.stop)  # written with the status below, in one write
    attempt.write()
    status = attempt.document["status"]
    last = decider.last if decider is not None else None
    return RoundResult(
        attempt.folder,
        attempt_id,
        number,
        status,
        seed,
        lines,
        watch.stopped,
        attempt.document.get("sequential"),
        last.row if last is not None else None,
        request.run.warmup,
        dict(watch.warmups_ok),
        last.why if last is not None else None,
        last.members if last is not None else None,
    )


def check_repetitions(policy: dict[str, Any], run: RunOptions, source: str) -> None:
    """A fixed round of fewer repetitions than the policy's ``min_pairs`` is a usage error
    before anything runs, whatever the decision rule: every interval would be
    ``too_few_pairs``, so the round could decide nothing, and a gate must not pass on a round
    that could not decide (contract §9). ``source`` says where the policy comes from. A round
    that stops when decided looks first at ``min_pairs`` or later (until.first_look)."""
    min_pairs, n = int(with_defaults(policy)["min_pairs"]), run.fixed_repetitions
    if not run.until_decided and n < min_pairs:
        raise UsageError(
            f"--repetitions {n}: {source} min_pairs {min_pairs}, the fewest pairs "
            f"that get an interval, so this round could decide nothing; give -n {min_pairs} or "
            "more (or --until-decided); nothing was run"
        )


def per_benchmark_note(policy: dict[str, Any], run: RunOptions) -> str | None:
    """A suite (``--measure``) recorded in a campaign that decides its metric alone: its
    benchmarks get directions from 95% intervals, not verdicts with the suite's error held; say
    how to get those (contract §15). None otherwise."""
    if run.measure.suite is None or with_defaults(policy)["decide"] != "metric":
        return None
    return (
        "note: this campaign decides its metric alone (decide: metric); for a verdict per "
        "benchmark with the suite's error held, start a campaign with --decide regions "
        "(docs/suites.md)"
    )


def _plan(request: RoundRequest, campaign: Document) -> Schedule | None:
    """--until-decided: the campaign must allow it (a usage error before anything runs)."""
    if not request.run.until_decided:
        return None
    source = f"{request.campaign_dir / 'campaign.json'} freezes"
    stopping.check_campaign(campaign.data["policy"], source)
    return stopping.plan_for(campaign.data["policy"], request.run.max_repetitions)


def _beside(bar: tqdm, warn: Callable[[str], None]) -> Callable[[str], None]:
    """``warn`` that does not tear the progress bar (cleared, written, drawn again)."""

    def write(text: str) -> None:
        with bar.external_write_mode(file=sys.stderr):
            warn(text)

    return write
