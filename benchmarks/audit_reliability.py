"""The reliability audit of issue 19, re-runnable: hostile inputs, kill -9 and concurrent runs.

Every case runs the installed command as its own process against a fresh copy of a small store
and checks what a careful user expects: the right exit code, a message naming the file or link,
nothing outside the store touched, no hang (each command has a time guard), peak memory within
1 GiB (``/usr/bin/time -v``), and every other attempt kept. Then commands are killed with
SIGKILL at random moments and others run concurrently; after them the store must be readable
and, once the same inputs are ingested and assessed again, equal a store no kill touched.

    .venv/bin/python benchmarks/audit_reliability.py            # about 10 minutes on 2 cores
    .venv/bin/python benchmarks/audit_reliability.py --quick    # fewer kills and runs

Prints one line per case that was not handled, then the figures (inputs tried, handled, kills,
losses, concurrent runs, errors); exits 1 when any case was not handled or anything was lost.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.contract.declare import MAX_NAME_LENGTH
from pipeline.contract.schemas import table, tables
from pipeline.record.runner import MAX_MEASUREMENT_BYTES
from pipeline.study.stored import write_attempt, write_campaign

CLI = str(Path(sys.executable).with_name("explain-pipeline"))
GUARD = 120.0  # seconds: a command still running then counts as a hang
LIMIT_KIB = 1024 * 1024  # peak resident memory allowed: 1 GiB
MECHANISM = {
    "hypothesis": "less attention work",
    "expectations": [
        {"target": "region", "name": "attention", "expect": "decrease"},
        {"target": "region", "name": "sampling", "expect": "unchanged"},
    ],
}


@dataclass
class Done:
    code: int | None  # None: killed at the guard (a hang)
    out: str
    err: str
    peak_kib: int


def run(*args: str, guard: float = GUARD) -> Done:
    """One command under /usr/bin/time -v, killed (with its group) at ``guard`` seconds."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            ["/usr/bin/time", "-v", *args],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code: int | None = process.wait(timeout=guard)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        out.seek(0)
        err.seek(0)
        text_out, text_err = out.read(), err.read()
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text_err)
    lines = text_err.split("\tCommand being timed:")[0].splitlines(keepends=True)
    if lines and lines[-1].startswith(("Command exited with", "Command terminated by")):
        lines.pop()  # /usr/bin/time's own line
    return Done(code, text_out, "".join(lines), int(found.group(1)) if found else 0)


def ep(*args: str, guard: float = GUARD) -> Done:
    return run(CLI, *args, guard=guard)


# -- inputs ----------------------------------------------------------------------------------------
def runs(pairs: int, factor: float = 0.95) -> list[dict[str, Any]]:
    lines = []
    for rep in range(pairs):
        wobble = 1.0 + 0.01 * math.sin(rep)
        for side, f in (("baseline", 1.0), ("candidate", factor)):
            regions = {
                "attention": 0.001 * f * wobble,
                "mlp": 0.005 * wobble,
                "sampling": 0.0025 * wobble,
            }
            lines.append(
                {
                    "side": side,
                    "repetition": rep,
                    "status": "ok",
                    "metric": sum(regions.values()),
                    "breakdown": {"s0": regions},
                    "counters": {"launches": round(1000 * f)},
                }
            )
    return lines


def campaign(root: Path, cid: str, attempts: int = 2, pairs: int = 6) -> Path:
    folder = write_campaign(
        root,
        cid,
        created_at="2026-11-01T09:00:00Z",
        metric={"name": "seconds", "better": "lower"},
        policy={"decision": "paired", "resamples": 500},
    )
    for number in range(1, attempts + 1):
        attempt = {
            "attempt_id": f"r{number:03d}",
            "round": number,
            "candidate": f"c{number}",
            "baseline": "main",
            "status": "completed",
            "declared_at": f"2026-11-01T{9 + number:02d}:58:00Z",
            "started_at": f"2026-11-01T{10 + number:02d}:00:00Z",
        }
        write_attempt(folder, attempt, runs(pairs, 0.9 + 0.02 * number), mechanism=MECHANISM)
    return folder


def snapshot(folder: Path) -> dict[str, bytes | str]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        if p.is_file() and not p.is_symlink()
        else "other"
        for p in sorted(folder.rglob("*"))
    }


def tables_of(store: Path) -> dict[str, pl.DataFrame]:
    """Every table of a store as sorted rows (what a loss would change)."""
    found = {}
    for name in tables():
        files = sorted(store.glob(f"{name}/campaign_id=*/data.parquet"))
        if files:
            frame = pl.read_parquet(files, hive_partitioning=True)
            found[name] = frame.sort(frame.columns, nulls_last=True)
    return found


# -- the audit -------------------------------------------------------------------------------------
@dataclass
class Audit:
    work: Path
    tried: int = 0
    handled: int = 0
    failures: list[str] = field(default_factory=list)
    peak_kib: int = 0

    def case(self, name: str, check: Callable[[], str | None]) -> None:
        """``check`` returns None when the case was handled, else what went wrong."""
        self.tried += 1
        try:
            problem = check()
        except Exception as exc:  # the audit itself must go on
            problem = f"audit error: {type(exc).__name__}: {exc}"
        if problem is None:
            self.handled += 1
        else:
            self.failures.append(f"{name}: {problem}")
            print(f"NOT HANDLED {name}: {problem}", flush=True)

    def note(self, done: Done) -> Done:
        self.peak_kib = max(self.peak_kib, done.peak_kib)
        return done

    def fresh(self, label: str) -> tuple[Path, Path, Path]:
        """A new folder with attempts (3 campaigns), an ingested and assessed store, a victim."""
        base = self.work / f"{self.tried:04d}-{label}"
        for cid in ("c1", "c2", "c3"):
            campaign(base / "attempts", cid)
        store = base / "store"
        assert self.note(ep("ingest", str(base / "attempts"), "--store", str(store))).code == 0
        assert self.note(ep("assess", "--all", "--store", str(store))).code in (0, 5)
        victim = base / "victim"
        (victim / "sub").mkdir(parents=True)
        (victim / "notes.json").write_text('{"ops": []}')
        (victim / "sub" / "data.parquet").write_text("not the store's")
        return base, store, victim


def expect(done: Done, code: int, *needles: str) -> str | None:
    if done.code is None:
        return f"hung (killed at {GUARD:g} s)"
    if done.peak_kib > LIMIT_KIB:
        return f"peak memory {done.peak_kib / 1024:.0f} MiB"
    if done.code != code:
        return f"exit {done.code}, expected {code}: {(done.err or done.out).strip()[:200]}"
    missing = [n for n in needles if n not in done.err + done.out]
    return f"output lacks {missing[0]!r}: {done.err.strip()[:200]}" if missing else None


def change_metric(attempts: Path) -> None:
    path = attempts / "c1" / "r001" / "measurements.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    lines[0]["metric"] = lines[0]["metric"] * 1.5
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


# 1. links among the store's own paths
LINKS = [
    ("_staging", "dir"),
    ("_txn", "dir"),
    (".lock", "file"),
    (".store-format", "file"),
    ("samples", "dir"),
    ("samples/campaign_id=c1", "dir"),
    ("samples/campaign_id=c1/data.parquet", "file"),
    ("attempts", "dir"),
]
COMMANDS = [
    ["ingest", "ATTEMPTS"],
    ["assess", "--all"],
    ["query", "SELECT count(*) FROM samples"],
    ["store", "repair"],
    ["report", "c1", "-o", "REPORT"],
]


def links(audit: Audit) -> None:
    for where, kind in LINKS:
        for command in COMMANDS:
            audit.case(
                f"link {where} / {command[0]}", partial(_link_case, audit, where, kind, command)
            )


def _link_case(audit: Audit, where: str, kind: str, command: list[str]) -> str | None:
    base, store, victim = audit.fresh("link")
    path = store / where
    if path.is_dir():
        shutil.move(path, victim / "moved")
        path.symlink_to(victim / "moved")
    elif path.exists():
        shutil.move(path, victim / "moved.file")
        path.symlink_to(victim / "moved.file")
    else:
        path.symlink_to(victim if kind == "dir" else victim / "created")
    change_metric(base / "attempts")
    before = snapshot(victim)
    args = [
        str(base / "attempts") if a == "ATTEMPTS" else str(base / "r.html") if a == "REPORT" else a
        for a in command
    ]
    done = audit.note(ep(*args, "--store", str(store)))
    if snapshot(victim) != before:
        return "the target outside the store changed"
    if done.code is None:
        return "hung"
    named = str(path) in done.err + done.out
    # 0: the command did not need that path; 3: it refused it; 1: store repair left it, named
    if not (done.code == 0 or (done.code == 3 and named) or (done.code == 1 and named)):
        return f"exit {done.code}: {done.err.strip()[:200]}"
    check = audit.note(ep("store", "check", "--store", str(store)))
    if str(path) not in check.out or "victim" in check.out.replace(str(path), ""):
        return f"store check does not name the link: {check.out.strip()[:200]}"
    return None


# 2. the recorder
def recorder(audit: Audit) -> None:
    py = shlex.join([sys.executable, "-c", "pass"])

    def cmd(code: str) -> str:
        return shlex.join([sys.executable, "-c", f"import os; {code}"])

    measurement = "os.environ['EXPLAIN_MEASUREMENT']"
    trace = "os.environ['EXPLAIN_TRACE_DIR'] + '/t.json'"
    cases = [
        ("measurement FIFO", cmd(f"os.mkfifo({measurement})"), [], "(a FIFO)"),
        (
            "measurement -> /dev/zero",
            cmd(f"os.symlink('/dev/zero', {measurement})"),
            [],
            "(a symbolic link)",
        ),
        (
            "measurement -> a file elsewhere",
            cmd(f"os.symlink('/etc/hostname', {measurement})"),
            [],
            "(a symbolic link)",
        ),
        (
            "measurement 100 MB",
            cmd(f"open({measurement}, 'w').truncate(100_000_000)"),
            [],
            "more than the limit",
        ),
        (
            "measurement just over the cap",
            cmd(f"open({measurement}, 'w').truncate({MAX_MEASUREMENT_BYTES + 1})"),
            [],
            "more than the limit",
        ),
        ("measurement a folder", cmd(f"os.mkdir({measurement})"), [], "(a folder)"),
        (
            "hang, --timeout 2",
            cmd("import time; time.sleep(600)"),
            ["--timeout", "2"],
            "timed out after 2 s",
        ),
        ("trace FIFO", cmd(f"os.mkfifo({trace})"), ["--trace", "kineto"], "(a FIFO)"),
        (
            "trace -> /dev/zero",
            cmd(f"os.symlink('/dev/zero', {trace})"),
            ["--trace", "kineto"],
            "(a symbolic link)",
        ),
    ]
    for name, candidate, extra, reason in cases:
        audit.case(f"round: {name}", partial(_round_case, audit, py, candidate, extra, reason))
    for name, change in (
        ("policy edited", {"min_improvement_pct": 0.0}),
        ("policy digest edited", None),
    ):
        audit.case(f"round: {name}", partial(_tamper_case, audit, py, change))


def _round_case(audit: Audit, ok: str, candidate: str, extra: list[str], reason: str) -> str | None:
    folder = audit.work / f"{audit.tried:04d}-round" / "loop"
    assert ep("campaign", "start", str(folder), "--metric", "seconds").code == 0
    done = audit.note(
        ep(
            "round",
            str(folder),
            "--baseline",
            "a",
            "--candidate",
            "b",
            "--baseline-cmd",
            ok,
            "--candidate-cmd",
            candidate,
            "-n",
            "5",
            "--warmup",
            "0",
            *extra,
        )
    )
    problem = expect(done, 6)
    if problem:
        return problem
    log = (folder / "r001" / "runs.log").read_text()
    return None if reason in log else f"runs.log lacks {reason!r}"


def _tamper_case(audit: Audit, ok: str, change: dict[str, Any] | None) -> str | None:
    folder = audit.work / f"{audit.tried:04d}-tamper" / "loop"
    assert ep("campaign", "start", str(folder), "--metric", "seconds").code == 0
    path = folder / "campaign.json"
    document = json.loads(path.read_text())
    if change is None:
        document["policy_sha256"] = "0" * 64
    else:
        document["policy"].update(change)
    path.write_text(json.dumps(document))
    done = audit.note(
        ep(
            "round",
            str(folder),
            "--baseline",
            "a",
            "--candidate",
            "b",
            "--baseline-cmd",
            ok,
            "--candidate-cmd",
            ok,
            "-n",
            "5",
        )
    )
    problem = expect(done, 3, "nothing was run")
    if problem is None and sorted(p.name for p in folder.iterdir()) != ["campaign.json"]:
        problem = "an attempt folder was written"
    return problem


# 3. damaged stored inputs
def damaged(audit: Audit) -> None:
    for name in ("campaigns", "attempts", "samples", "breakdown", "counters", "expectations"):
        spec = table(name)
        for column in spec.columns:
            if column.name == "campaign_id":
                continue
            if not column.nullable or column.name in spec.in_every_file:
                audit.case(
                    f"{name}.{column.name} dropped",
                    partial(_damage_case, audit, name, _dropped(column.name), "is missing"),
                )
            if not column.nullable:
                audit.case(
                    f"{name}.{column.name} nulled",
                    partial(_damage_case, audit, name, _nulled(column.name), "is null"),
                )
    audit.case(
        "samples.metric of an ok run nulled",
        partial(
            _damage_case,
            audit,
            "samples",
            _nulled("metric", first_only=True),
            "is null where status is ok",
        ),
    )


def _dropped(column: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
    return lambda frame: frame.drop(column)


def _nulled(column: str, *, first_only: bool = False) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def change(frame: pl.DataFrame) -> pl.DataFrame:
        null = pl.lit(None, dtype=frame.schema[column])
        where = pl.int_range(pl.len()) == 0 if first_only else pl.lit(True)
        return frame.with_columns(pl.when(where).then(null).otherwise(column).alias(column))

    return change


def _damage_case(
    audit: Audit, name: str, change: Callable[[pl.DataFrame], pl.DataFrame], reason: str
) -> str | None:
    base, store, _ = audit.fresh("damage")
    path = store / name / "campaign_id=c1" / "data.parquet"
    change(pl.read_parquet(path)).write_parquet(path)
    done = audit.note(ep("assess", "c1", "--store", str(store)))  # every result reused
    problem = expect(done, 1, str(path), reason)
    if problem:
        return f"assess: {problem}"
    other = audit.note(ep("assess", "c2", "--store", str(store)))
    if other.code not in (0, 5):
        return f"the other campaign c2 was not assessed: exit {other.code}"
    check = audit.note(ep("store", "check", "--store", str(store)))
    return None if f"{path}: " in check.out else "store check does not name the file"


# 4. bounded costs
def costs(audit: Audit, pairs: int) -> None:
    def ingest_of(label: str, write: Callable[[Path], None], *needles: str) -> str | None:
        base = audit.work / f"{audit.tried:04d}-{label}"
        folder = campaign(base / "attempts", "c1")
        write(folder / "r001" / "measurements.jsonl")
        done = audit.note(ep("ingest", str(base / "attempts"), "--store", str(base / "store")))
        problem = expect(done, 1, *needles)
        if (
            problem is None
            and "c1        ingested              1         0          0         1" not in done.out
        ):
            problem = "the other attempt of c1 was not kept"
        if problem is None and len(done.err) > 64_000:
            problem = f"{len(done.err)} bytes of errors"
        return problem

    def long_name(length: int) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            lines = [json.loads(x) for x in path.read_text().splitlines()]
            lines[0]["breakdown"]["s0"]["x" * length] = 0.001
            path.write_text("".join(json.dumps(x) + "\n" for x in lines))

        return write

    def many_keys(path: Path) -> None:
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        for line in lines:
            line["breakdown"]["s0"].update({f"{i:02d}" + "k" * 4094: 0.001 for i in range(60)})
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))

    audit.case(
        "a region named by 4 MB", lambda: ingest_of("name", long_name(4 * 2**20), "[too_long]")
    )
    audit.case(
        f"a region name of {MAX_NAME_LENGTH + 1} characters",
        lambda: ingest_of("name", long_name(MAX_NAME_LENGTH + 1), "[too_long]"),
    )
    audit.case(
        "60 keys of 4,096 characters in every line", lambda: _accepted_many_keys(audit, many_keys)
    )

    def empty_lines(path: Path) -> None:
        path.write_text("{}\n" * 1_000_000)

    audit.case("1 M lines of {}", lambda: ingest_of("lines", empty_lines, "[too_many_errors]"))
    audit.case(f"{pairs} pairs assessed", lambda: _many_pairs(audit, pairs))


def _accepted_many_keys(audit: Audit, write: Callable[[Path], None]) -> str | None:
    base = audit.work / f"{audit.tried:04d}-keys"
    folder = campaign(base / "attempts", "c1")
    write(folder / "r001" / "measurements.jsonl")
    done = audit.note(ep("ingest", str(base / "attempts"), "--store", str(base / "store")))
    return expect(done, 0)


def _many_pairs(audit: Audit, pairs: int) -> str | None:
    base = audit.work / f"{audit.tried:04d}-pairs"
    folder = write_campaign(
        base / "attempts",
        "big",
        created_at="2026-11-01T09:00:00Z",
        metric={"name": "seconds", "better": "lower"},
        policy={"decision": "paired"},
    )
    attempt = {
        "attempt_id": "r001",
        "round": 1,
        "candidate": "c",
        "baseline": "b",
        "status": "completed",
        "declared_at": "2026-11-01T09:58:00Z",
        "started_at": "2026-11-01T10:00:00Z",
    }
    write_attempt(folder, attempt, runs(pairs), mechanism=MECHANISM)
    store = str(base / "store")
    problem = expect(
        audit.note(ep("ingest", str(base / "attempts"), "--store", store, guard=600)), 0
    )
    done = audit.note(ep("assess", "big", "--store", store, guard=600))
    print(f"  {pairs} pairs: assess peak {done.peak_kib / 1024:.0f} MiB", flush=True)
    return problem or expect(done, 0)


# 5. kill -9 and concurrent runs
def kills_and_concurrency(audit: Audit, kills: int, concurrent: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    base = audit.work / "crash"
    for cid in ("c1", "c2", "c3", "c4"):
        campaign(base / "attempts", cid, attempts=3, pairs=8)
    reference = base / "reference"
    assert ep("ingest", str(base / "attempts"), "--store", str(reference)).code == 0
    assert ep("assess", "--all", "--store", str(reference)).code in (0, 5)
    store = base / "store"
    assert ep("ingest", str(base / "attempts"), "--store", str(store)).code == 0
    figures = {"kills": 0, "losses": 0, "concurrent": 0, "errors": 0}
    for i in range(kills):
        if i % 2 == 0:  # a changed metric makes ingest rewrite c1's partitions
            change_metric(base / "attempts")
        args = (
            [CLI, "ingest", str(base / "attempts"), "--store", str(store)]
            if i % 3
            else [CLI, "assess", "--all", "--store", str(store)]
        )
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.6))  # start-up takes ~0.4 s; writes come after
        process.send_signal(signal.SIGKILL)
        process.wait()
        figures["kills"] += 1
        readable = ep("query", "SELECT count(*) AS n FROM samples", "--store", str(store))
        if readable.code != 0:
            figures["errors"] += 1
            print(f"after kill {i}: query exit {readable.code}: {readable.err.strip()[:200]}")
    # put the inputs back as the reference saw them, then many commands at once
    shutil.rmtree(base / "attempts")
    for cid in ("c1", "c2", "c3", "c4"):
        campaign(base / "attempts", cid, attempts=3, pairs=8)
    kinds = [
        ["ingest", str(base / "attempts")],
        ["assess", "--all"],
        ["query", "SELECT count(*) FROM assessments"],
        ["store", "check"],
    ]
    started = [
        (
            kinds[i % len(kinds)][0],
            subprocess.Popen(
                [CLI, *kinds[i % len(kinds)], "--store", str(store)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
        for i in range(concurrent)
    ]
    for name, running in started:
        _, err = running.communicate(timeout=600)
        figures["concurrent"] += 1
        # store check exits 1 with its findings on stdout (staging a killed write left)
        if running.returncode not in (0, 5) and not (name == "store" and not err):
            figures["errors"] += 1
            print(f"concurrent {name}: exit {running.returncode}: {err.strip()[:200]}")
    assert ep("ingest", str(base / "attempts"), "--store", str(store)).code == 0
    assert ep("assess", "--all", "--store", str(store)).code in (0, 5)
    ours, theirs = tables_of(store), tables_of(reference)
    for name in sorted(set(ours) | set(theirs)):
        if name not in ours or name not in theirs or not ours[name].equals(theirs[name]):
            figures["losses"] += 1
            print(f"table {name} differs from the reference after the kills")
    check = ep("store", "check", "--store", str(store))
    if check.code != 0:
        figures["errors"] += 1
        print(f"store check after everything: {check.out.strip()[:300]}")
    return figures


# 5. issue 27: text from files at every output, hostile results files and traces, the stopping
#    plan, instruction counts per run, the small ones
RUNNER_COMMANDS = frozenset(
    "error warning notice debug add-mask stop-commands group endgroup set-output save-state "
    "add-matcher remove-matcher echo add-path set-env".split()
)
HOSTILE_NAMES = [
    "x\n::error::injected",
    "y\r::add-mask::secret",
    "::stop-commands::tok",
    "  ::warning::indented",
    "a ##[error]legacy form",
    "##[stop-commands]tok2",
    "@octocat and https://example.com",
]


def runner_commands(output: str) -> list[str]:
    """The lines a GitHub Actions runner executes (actions/runner ActionCommand: ``::name …::``
    after a line's blanks, ``##[name …]`` anywhere), but the tool's own annotations."""
    found = []
    for line in re.split(r"\r\n|\r|\n", output):
        trimmed = line.lstrip()
        if re.match(r"::(error|notice|warning) title=explain-pipeline%3A ", trimmed):
            continue
        end = trimmed.find("::", 2) if trimmed.startswith("::") else -1
        if end >= 0 and trimmed[2:end].split(" ")[0].lower() in RUNNER_COMMANDS:
            found.append(line)
            continue
        start = line.find("##[")
        close = line.find("]", start) if start >= 0 else -1
        if close >= 0 and line[start + 3 : close].split(" ")[0].lower() in RUNNER_COMMANDS:
            found.append(line)
    return found


def _hostile_campaign(root: Path) -> Path:
    folder = write_campaign(
        root,
        "hostile",
        created_at="2026-11-01T09:00:00Z",
        metric={"name": "seconds", "better": "lower"},
        policy={"decision": "paired", "resamples": 500},
    )
    lines = []
    for rep in range(6):
        for side, f in (("baseline", 1.0), ("candidate", 0.9)):
            regions = {n: 0.001 * f * (1 + 0.01 * rep) for n in HOSTILE_NAMES}
            counters = {f"c {n}": 100 * f for n in HOSTILE_NAMES}
            lines.append({"side": side, "repetition": rep, "status": "ok",
                          "metric": sum(regions.values()), "breakdown": {"s": regions},
                          "counters": counters})  # fmt: skip
    attempt = {"attempt_id": "r001", "round": 1, "candidate": "cand " + HOSTILE_NAMES[0],
               "baseline": HOSTILE_NAMES[1], "status": "completed",
               "started_at": "2026-11-01T10:00:00Z"}  # fmt: skip
    write_attempt(folder, attempt, lines)
    (folder / "::warning::folder ##[error]x").mkdir()
    return folder


class _Environment:
    """Environment variables set for the commands run inside the block."""

    def __init__(self, **values: str) -> None:
        self.values, self.saved = values, {k: os.environ.get(k) for k in values}

    def __enter__(self) -> None:
        os.environ.update(self.values)

    def __exit__(self, *exc: object) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _inert_case(audit: Audit, store: Path, fmt: str) -> str | None:
    summary = store.parent / f"summary-{fmt}.md"
    junit = store.parent / f"junit-{fmt}.xml"
    with _Environment(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary)):
        done = audit.note(ep("assess", "hostile", "--store", str(store), "--format", fmt,
                             "--junit", str(junit)))  # fmt: skip
    problem = expect(done, 0)
    found = runner_commands(done.out + done.err + summary.read_text() + junit.read_text())
    return problem or (f"{len(found)} workflow command(s): {found[0]!r}" if found else None)


def _import_case(audit: Audit, fmt: str, path: Path, needle: str) -> str | None:
    done = audit.note(ep("import", fmt, str(path), "--side", "baseline", "--repetition", "0"))
    problem = expect(done, 1, needle)
    lines = done.err.strip().splitlines()
    return problem or (None if len(lines) == 1 else f"{len(lines)} lines on stderr")


def _bomb(path: Path, size: int, head: bytes, tail: bytes) -> Path:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    with path.open("wb") as out:
        out.write(packer.compress(head))
        for _ in range(size // 2**20):
            out.write(packer.compress(b" " * 2**20))
        out.write(packer.compress(tail) + packer.flush())
    return path


def _hostile_files(folder: Path) -> list[tuple[str, str, Path, str]]:
    """(case, format, file, what the error says) of each hostile suite file and trace."""
    folder.mkdir(parents=True)

    def write(name: str, text: str) -> Path:
        (folder / name).write_text(text)
        return folder / name

    bench = '{"name": "a", "fullname": "t.py::a", "stats": {"median": %s}}'
    pyperf = '{"version": "1.0", "metadata": %s, "benchmarks": [{"metadata": {"name": "x"}, "runs": [{"values": %s}]}]}'  # noqa: E501
    event = '{"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 1, "tid": 1, "ts": %s, "dur": %s}'
    deep = "[" * 200_000 + "]" * 200_000
    return [
        ("suite nested 200,000 deep", "pytest-benchmark",
         write("deep.json", '{"benchmarks": ' + deep + "}"), "nested at most 32"),
        ("suite 1e999999999", "pytest-benchmark",
         write("huge.json", '{"benchmarks": [' + bench % "1e999999999" + "]}"),
         "larger than the store holds"),
        ("suite repeated key", "pytest-benchmark",
         write("repeated.json", '{"benchmarks": [], "benchmarks": [' + bench % "0.1" + "]}"),
         "written twice"),
        ("gbench 1e999999999", "gbench",
         write("gbench.json", '{"context": {}, "benchmarks": [{"name": "BM", "real_time": '
               '1e999999999, "time_unit": "ns"}]}'), "larger than the store holds"),
        ("pyperf NaN value", "pyperf", write("nan.json", pyperf % ("{}", "[0.1, NaN]")),
         "a value is NaN"),
        ("pyperf metadata []", "pyperf", write("meta.json", pyperf % ("[]", "[0.1]")),
         "metadata: expected an object"),
        ("suite gzip bomb (0.07 MB -> 65 MiB)", "pytest-benchmark",
         _bomb(folder / "bomb.json.gz", 65 * 2**20, b'{"benchmarks": [', b"]}"),
         "decompresses to more than 64 MiB"),
        ("trace ts 1e300", "kineto", write("ts.json", '{"traceEvents": [' + event % ("1e300", 1)
                                          + "]}"), "expected microseconds up to"),
        ("trace dur 10^30", "kineto", write("dur.json", '{"traceEvents": [' + event % (0, 10**30)
                                           + "]}"), "expected microseconds up to"),
        ("trace nested 200,000 deep", "kineto",
         write("tdeep.json", '{"traceEvents": [' + deep + "]}"), "nested at most 32"),
        ("trace gzip bomb (0.3 MB -> 300 MB)", "kineto",
         _bomb(folder / "tbomb.json.gz", 300 * 2**20, b'{"traceEvents": [', b"]}"),
         "decompresses to more than 256 MiB"),
    ]  # fmt: skip


RESULTS_WRITER = """
import os, pathlib, sys
side, rep = os.environ["EXPLAIN_SIDE"], int(os.environ["EXPLAIN_REPETITION"])
good = '{"benchmarks": [{"name": "a", "fullname": "t.py::a", "stats": {"median": 0.001}}]}'
target, bad = pathlib.Path(os.environ["EXPLAIN_RESULTS"]), pathlib.Path(sys.argv[1])
if side == "candidate" and rep == 1:
    target.symlink_to(bad) if bad.name == "link" else target.write_bytes(bad.read_bytes())
else:
    target.write_text(good)
"""


def _results_case(audit: Audit, bad: Path, reason: str) -> str | None:
    base = audit.work / f"{audit.tried:04d}-results"
    folder = base / "suite"
    assert ep("campaign", "start", str(folder), "--metric", "s").code == 0
    script = base / "writer.py"
    script.write_text(RESULTS_WRITER)
    command = shlex.join([sys.executable, str(script), str(bad)])
    done = audit.note(ep("round", str(folder), "--baseline", "a", "--candidate", "b", "-n", "5",
                         "--warmup", "0", "--measure", "pytest-benchmark",
                         "--baseline-cmd", command, "--candidate-cmd", command))  # fmt: skip
    problem = expect(done, 0)
    if problem:
        return problem
    if json.loads((folder / "r001" / "attempt.json").read_text())["status"] != "completed":
        return "the attempt is not completed"
    log = (folder / "r001" / "runs.log").read_text()
    return None if reason in log else f"runs.log lacks {reason!r}"


PLAN = {"first_look": 6, "look_every": 2, "max_pairs": 10}
TAMPERED: list[tuple[str, dict[str, Any] | None, int, str]] = [
    ("sequential deleted", None, 10, "sequential_missing"),
    ("one look at 1,000 pairs", {**PLAN, "first_look": 1000, "max_pairs": 1000,
                                 "looks": [10], "stopped": "max"}, 10,
     "sequential_digest_mismatch"),
    ("looks []", {**PLAN, "looks": [], "stopped": "max"}, 10, "sequential_looks_invalid"),
    ("looks [10, 6, 0]", {**PLAN, "looks": [10, 6, 0], "stopped": "max"}, 10,
     "sequential_looks_invalid"),
    ("16 pairs under a plan ending at 10", {**PLAN, "looks": [6, 8, 10], "stopped": "max"}, 16,
     "sequential_pairs_over_plan"),
    ("first_look > max_pairs", {"first_look": 12, "look_every": 2, "max_pairs": 10,
                                "looks": [10], "stopped": "max"}, 10, "sequential_plan_invalid"),
]  # fmt: skip


def _plan_case(
    audit: Audit, sequential: dict[str, Any] | None, pairs: int, code: str, *, seal: bool
) -> str | None:
    """A round stopped at its maximum (plan digest recorded), then ``sequential`` replaced (None:
    deleted); ``seal``: the digest recomputed to match, so only the consistency checks see it."""
    from pipeline.contract.policy import sequential_sha256

    base = audit.work / f"{audit.tried:04d}-plan"
    folder = write_campaign(base / "attempts", "seq", created_at="2026-11-01T09:00:00Z",
                            metric={"name": "seconds", "better": "lower"},
                            policy={"decision": "paired", "interval": "sequential_t",
                                    "resamples": 500})  # fmt: skip
    original = {**PLAN, "looks": [6, 8, 10], "stopped": "max"}
    attempt: dict[str, Any] = {"attempt_id": "r001", "round": 1, "candidate": "b",
                               "baseline": "a", "status": "completed",
                               "started_at": "2026-11-01T10:00:00Z",
                               "sequential_sha256": sequential_sha256(original)}  # fmt: skip
    if sequential is not None:
        attempt["sequential"] = sequential
        if seal:
            attempt["sequential_sha256"] = sequential_sha256(sequential)
    write_attempt(folder, attempt, runs(pairs, 0.98))
    done = audit.note(ep("campaign", "final", str(folder), "--store", str(base / "store")))
    return expect(done, 3, code)


def _leftover_child_case(audit: Audit) -> str | None:
    base = audit.work / f"{audit.tried:04d}-instructions"
    command = shlex.join(["sh", "-c", "sleep 2 & exit 0"])
    done = audit.note(ep("ab", command, command, "-n", "5", "--warmup", "1", "--counters",
                         "instructions", "--keep", str(base), guard=600))  # fmt: skip
    if done.code not in (0, 5):
        return expect(done, 0)
    path = next(base.rglob("measurements.jsonl"))
    counts = [json.loads(x)["counters"]["instructions"] for x in path.read_text().split()]
    spread = max(counts) / min(counts)
    return None if spread <= 1.05 else f"instructions {min(counts)} .. {max(counts)}"


def _small_cases(audit: Audit) -> None:
    base = audit.work / "small"
    script = base / "metric.py"
    script.parent.mkdir(parents=True)
    script.write_text("import json, os, sys\nopen(os.environ['EXPLAIN_MEASUREMENT'], 'w')"
                      ".write(json.dumps({'metric': float(sys.argv[1])}))\n")  # fmt: skip
    a, b = (f"{sys.executable} {script} {v}" for v in ("1e-300", "1e300"))
    audit.case("ab: metrics 1e-300 vs 1e300 print a verdict",
               lambda: expect(audit.note(ep("ab", a, b, "-n", "5", "--warmup", "0")), 5,
                              "verdict: INCONCLUSIVE"))  # fmt: skip
    folder = write_campaign(base / "attempts", "big", created_at="2026-11-01T09:00:00Z",
                            metric={"name": "s", "better": "lower"},
                            policy={"decision": "paired", "min_pairs": 100})  # fmt: skip
    write_attempt(folder, {"attempt_id": "r001", "round": 1, "candidate": "b", "baseline": "a",
                           "status": "completed", "started_at": "2026-11-01T10:00:00Z"},
                  runs(6))  # fmt: skip
    audit.case(
        "plan: min_pairs 100 without --max-repetitions",
        lambda: expect(audit.note(ep("plan", str(folder))), 0, "from 100 to 100"),
    )
    store = base / "store"
    ep("ingest", str(base / "attempts"), "--store", str(store))

    def summary() -> str | None:
        gate = ("assess", "big", "--store", str(store), "--gate")
        plain = ep(*gate)
        with _Environment(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(base / "no" / "s.md")):
            done = audit.note(ep(*gate))
        return expect(done, plain.code or 0, "cannot append the job summary", "::")

    audit.case("unwritable $GITHUB_STEP_SUMMARY: a warning, the gate's code", summary)
    tput = base / "tput"
    ep("campaign", "start", str(tput), "--metric", "t", "--better", "higher")
    audit.case("--metric-source cpu --better higher: a usage error",
               lambda: expect(audit.note(ep("round", str(tput), "--baseline", "a", "--candidate",
                                            "b", "--baseline-cmd", "true", "--candidate-cmd",
                                            "true", "--metric-source", "cpu")), 2,
                              "--metric-source cpu measures a time"))  # fmt: skip


def issue27(audit: Audit) -> None:
    base = audit.work / "hostile-names"
    _hostile_campaign(base / "attempts")
    store = base / "store"
    ingested = ep("ingest", str(base / "attempts"), "--store", str(store))
    audit.case("ingest of hostile names prints no workflow command",
               lambda: expect(ingested, 1) or ("; ".join(runner_commands(ingested.out
                                                                          + ingested.err))
                                                or None))  # fmt: skip
    for fmt in ("table", "csv", "json", "markdown"):
        audit.case(f"assess --format {fmt} of hostile names in GitHub Actions",
                   partial(_inert_case, audit, store, fmt))  # fmt: skip
    files = _hostile_files(audit.work / "hostile-files")
    for name, fmt, path, needle in files:
        audit.case(f"import: {name}", partial(_import_case, audit, fmt, path, needle))
    link = files[0][2].with_name("link")
    link.write_text('{"benchmarks": []}')
    for name, bad, reason in (
        ("nested 200,000 deep", files[0][2], "nested at most 32"),
        ("1e999999999", files[1][2], "larger than the store holds"),
        ("repeated key", files[2][2], "written twice"),
        ("gzip bomb", files[6][2], "decompresses to more than 64 MiB"),
        ("a link", link, "(a symbolic link)"),
    ):
        audit.case(f"round --measure: results {name}", partial(_results_case, audit, bad, reason))
    for name, sequential, pairs, code in TAMPERED:
        audit.case(f"stopping plan: {name}",
                   partial(_plan_case, audit, sequential, pairs, code, seal=name not in
                           ("sequential deleted", "one look at 1,000 pairs")))  # fmt: skip
    if shutil.which("valgrind"):
        audit.case("--counters instructions: a background child left running",
                   partial(_leftover_child_case, audit))  # fmt: skip
    _small_cases(audit)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 kills, 8 concurrent runs")
    parser.add_argument("--pairs", type=int, default=50_000, help="pairs of the memory case")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument(
        "--parts",
        default="links,recorder,damaged,issue27,costs,crash",
        help="which parts to run (comma-separated)",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    kills, concurrent = (10, 8) if args.quick else (40, 24)
    work = Path(tempfile.mkdtemp(prefix="audit-"))
    started = time.perf_counter()
    try:
        audit = Audit(work)
        for name, part in (
            ("links", links),
            ("recorder", recorder),
            ("damaged", damaged),
            ("issue27", issue27),
        ):
            if name in parts:
                part(audit)
        if "costs" in parts:
            costs(audit, args.pairs)
        figures = {"kills": 0, "losses": 0, "concurrent": 0, "errors": 0}
        if "crash" in parts:
            figures = kills_and_concurrency(audit, kills, concurrent, args.seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"hostile inputs tried {audit.tried}, handled {audit.handled}; kill -9 "
        f"{figures['kills']}, losses {figures['losses']}; concurrent runs "
        f"{figures['concurrent']}, errors {figures['errors']}; largest peak memory "
        f"{audit.peak_kib / 1024:.0f} MiB; {time.perf_counter() - started:.0f} s"
    )
    if audit.failures or figures["losses"] or figures["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
