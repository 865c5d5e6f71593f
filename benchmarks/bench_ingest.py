"""Benchmark of ingest and of `import kineto` (not part of the test suite).

ingest: writes a stored-attempt folder (by default 3,000 attempts in 10 campaigns, 10
repetitions x 2 sides, 4 steps x 4 regions and 2 counters per line: 60,000 lines), then runs
the real command on it twice, `explain-pipeline ingest FOLDER --store STORE`, each in its own
process and timed from outside (start-up included): once as shipped (the bulk path), once with
the bulk path switched off (`ingest --precise`: every attempt through the per-line
validator). Asserts the two stores hold the same tables and prints lines per second (wall and
CPU seconds) and the peak RSS of both.

import kineto: replicates the events of tests/fixtures/import/kineto/*.json into a large trace
(default ~58 MB), imports it in a subprocess, and prints MB/s (by wall time, and by the CPU time
of all the process's threads, which says the cost even on a busy machine) and peak RSS against
the file size.
The importing process is warmed first by one import of the small fixture (modules loaded, thread
pool started: start-up is measured on its own), so the figures are those of the trace. With
--compare-import, also imports it with the whole-document reader (the precise mode) and asserts
the two lines are equal.

    .venv/bin/python benchmarks/bench_ingest.py
    .venv/bin/python benchmarks/bench_ingest.py --attempts 100000 --per-campaign 1000 --skip-precise
    .venv/bin/python benchmarks/bench_ingest.py --only kineto --compare-import --repeat 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.contract.files import ReadMode
from pipeline.contract.policy import policy_sha256

STEPS = ("decode-0", "decode-1", "decode-2", "decode-3")
REGIONS = ("attention", "mlp", "sampling", "comm")
SHARES = np.array([0.10, 0.50, 0.25, 0.15])
TABLES = ("campaigns", "attempts", "samples", "breakdown", "counters", "expectations", "integrity")
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "import" / "kineto"


# -- stored attempts ------------------------------------------------------------------------------
def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"


def write_folder(root: Path, attempts: int, per_campaign: int, reps: int, seed: int) -> int:
    """The stored-attempt folder; returns the number of measurement lines."""
    rng = np.random.default_rng(seed)
    mechanism = _dump(
        {
            "schema": "explain-pipeline/mechanism/v1",
            "hypothesis": "fused attention",
            "expectations": [
                {"target": "region", "name": "attention", "expect": "decrease"},
                {"target": "counter", "name": "dram_bytes", "expect": "decrease"},
                {"target": "region", "name": "sampling", "expect": "unchanged"},
            ],
        }
    )
    digest = hashlib.sha256(mechanism.encode()).hexdigest()
    lines = 0
    for start in range(0, attempts, per_campaign):
        cid = f"bench-{start // per_campaign:05d}"
        folder = root / cid
        folder.mkdir(parents=True)
        campaign = {
            "schema": "explain-pipeline/campaign/v1",
            "campaign_id": cid,
            "kind": "project",
            "created_at": "2026-11-01T10:00:00Z",
            "metric": {"name": "e2e_seconds", "better": "lower"},
            "policy": {},
            "policy_sha256": policy_sha256({}),
        }
        (folder / "campaign.json").write_text(_dump(campaign))
        for k in range(start, min(start + per_campaign, attempts)):
            aid = f"r{k:06d}"
            (folder / aid).mkdir()
            (folder / aid / "mechanism.json").write_text(mechanism)
            attempt = {
                "schema": "explain-pipeline/attempt/v1",
                "attempt_id": aid,
                "round": k + 1,
                "candidate": f"cand-{k}",
                "baseline": "main@3f2a9c1",
                "status": "completed",
                "declared_at": "2026-11-01T11:58:00Z",
                "started_at": "2026-11-01T12:00:00Z",
                "mechanism_sha256": digest,
            }
            (folder / aid / "attempt.json").write_text(_dump(attempt))
            seconds = 0.01 * SHARES * rng.lognormal(0, 0.03, (reps, 2, len(STEPS), len(REGIONS)))
            text = []
            for rep in range(reps):
                for s, side in enumerate(("baseline", "candidate")):
                    cells = seconds[rep, s]
                    run = {
                        "side": side,
                        "repetition": rep,
                        "status": "ok",
                        "metric": float(cells.sum()),
                        "breakdown": {
                            step: dict(zip(REGIONS, map(float, cells[i]), strict=True))
                            for i, step in enumerate(STEPS)
                        },
                        "counters": {
                            "kernel_launches": 4000 - 100 * s,
                            "dram_bytes": float(rng.integers(10**9, 2 * 10**9)),
                        },
                    }
                    text.append(json.dumps(run, separators=(",", ":")))
            (folder / aid / "measurements.jsonl").write_text("\n".join(text) + "\n")
            lines += len(text)
    return lines


def _status_mib(key: str) -> float:
    """VmHWM (peak) or VmRSS (now) of this process, in MiB. Not ru_maxrss: Linux keeps that
    across exec, so a subprocess would report its parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mib() -> float:
    return _status_mib("VmHWM")


def ingest_command(folder: Path, store: Path, options: list[str]) -> dict[str, float]:
    """Run `explain-pipeline ingest` in its own process: wall and CPU seconds (user + system)
    and its peak RSS in MiB (from wait4); a rejected attempt or any error fails the benchmark."""
    cli = Path(sys.executable).parent / "explain-pipeline"
    os.sync()  # what the previous step wrote reaches the disk before, not during, this one
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [str(cli), "ingest", str(folder), "--store", str(store), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    assert code == 0, f"ingest exited with {code}: {stderr[-2000:]}"
    cpu = usage.ru_utime + usage.ru_stime
    return {"seconds": seconds, "cpu": cpu, "peak_rss_mib": usage.ru_maxrss / 1024}


def phase_import(trace: str, mode: ReadMode = "fast") -> dict[str, Any]:
    from pipeline.importers.lines import import_line
    from pipeline.importers.reader import ImportOptions

    # The program loaded and warmed: one import of the small fixture first loads every module an
    # import uses and starts Polars' thread pool (start-up has its own row), so the time and the
    # memory measured are those of the trace.
    import_line("kineto", [str(FIXTURES / "cpu_steps.json")], side="baseline", repetition=0)
    before = _status_mib("VmRSS")
    t0, c0 = time.perf_counter(), time.process_time()
    options = ImportOptions(mode=mode)
    line, _ = import_line("kineto", [trace], side="baseline", repetition=0, options=options)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_rss_mib": _rss_mib(),
        "before_mib": before,
        "line": line,
    }


def _subprocess(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def same_stores(a: Path, b: Path) -> None:
    from pipeline.store.tables import Store

    for name in TABLES:
        left, right = Store(a).read(name), Store(b).read(name)
        sort = [c for c in ("campaign_id", "attempt_id") if c in left.columns]
        left, right = left.sort(sort, maintain_order=True), right.sort(sort, maintain_order=True)
        if name == "attempts":
            left, right = left.drop("source_dir"), right.drop("source_dir")
        assert left.equals(right), f"table {name} differs between the two ingests"


# -- kineto trace ---------------------------------------------------------------------------------
def write_trace(path: Path, megabytes: float) -> int:
    """Replicate the events of the fixture trace (real Kineto output), shifted in time with new
    step numbers per copy, until the file has about ``megabytes`` MB."""
    source = json.loads((FIXTURES / "cpu_steps.json").read_text())
    events = source["traceEvents"]
    times = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), int | float)]
    span = max(times) - min(times) + 1000
    with path.open("w") as out:
        out.write('{\n  "schemaVersion": 1,\n  "traceEvents": [\n')
        size, copy = 0, 0
        while size < megabytes * 1e6:
            chunk = []
            for event in events:
                e = dict(event)
                if isinstance(e.get("ts"), int | float):
                    e["ts"] = round(e["ts"] + copy * span, 3)
                name = str(e.get("name", ""))
                if e.get("cat") == "user_annotation" and name.startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{copy * 1000 + int(name.split('#')[1])}"
                chunk.append("    " + json.dumps(e))
            text = ("" if copy == 0 else ",\n") + ",\n".join(chunk)
            out.write(text)
            size += len(text)
            copy += 1
        out.write('\n  ],\n  "traceName": "bench"\n}\n')
    return path.stat().st_size


# -- main -----------------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=3000)
    parser.add_argument("--per-campaign", type=int, default=300)
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace-mb", type=float, default=58.0)
    parser.add_argument("--skip-precise", action="store_true", help="no comparison ingest")
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--skip-import", action="store_true")
    parser.add_argument(
        "--only", choices=["ingest", "kineto"], help="run one part (skips the other)"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="import the trace this many times (fresh processes)"
    )
    parser.add_argument(
        "--compare-import", action="store_true", help="also the whole-file importer"
    )
    parser.add_argument("--work", type=Path, default=None, help="folder to keep the inputs in")
    parser.add_argument("--phase", choices=["import"], help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    return parser


def main() -> None:
    args = parser().parse_args()
    if args.phase == "import":
        print(json.dumps(phase_import(*args.paths)))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        if not args.skip_ingest and args.only in (None, "ingest"):
            bench_ingest(args, work)
        if not args.skip_import and args.only in (None, "kineto"):
            bench_import(args, work)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


def bench_ingest(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Both ingests of one generated folder; returns their results by label, with "lines" and
    "campaigns" (bench_assess.py --with-ingest puts them in its table)."""
    folder = work / "attempts"
    shutil.rmtree(folder, ignore_errors=True)
    lines = write_folder(folder, args.attempts, args.per_campaign, args.repetitions, args.seed)
    campaigns = -(-args.attempts // args.per_campaign)
    rows: list[tuple[str, list[str]]] = [("bulk", [])]
    if not args.skip_precise:
        rows.append(("per-line", ["--precise"]))
    results = {}
    for label, options in rows:
        store = work / f"store-{label}"
        shutil.rmtree(store, ignore_errors=True)
        result = ingest_command(folder, store, options)
        results[label] = result
        print(
            f"ingest ({label}): {args.attempts:,} attempts in {campaigns} campaigns, {lines:,} "
            f"lines in {result['seconds']:.2f} s [{result['cpu']:.2f} CPU] = "
            f"{lines / result['seconds']:,.0f} lines/s [{lines / result['cpu']:,.0f} per CPU "
            f"second], start-up included, peak RSS {result['peak_rss_mib']:,.0f} MiB"
        )
    if len(results) == 2:
        same_stores(work / "store-bulk", work / "store-per-line")
        ratio = results["per-line"]["seconds"] / results["bulk"]["seconds"]
        print(
            f"ingest: same stored tables; bulk path {ratio:.1f}x the per-line validator "
            f"(load average {os.getloadavg()[0]:.1f})"
        )
    return {**results, "lines": lines, "campaigns": campaigns, "attempts": args.attempts}


def bench_import(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The trace imported by each importer (the last run of each); returns the results by
    label, with "mb" (the file's size in MB)."""
    trace = work / "trace.json"
    size = write_trace(trace, args.trace_mb)
    mb = size / 1e6
    rows: list[tuple[str, list[str]]] = [("streaming", [])]
    if args.compare_import:
        rows.append(("whole-file", ["precise"]))
    lines: dict[str, Any] = {}
    results: dict[str, Any] = {"mb": mb}
    for label, mode in rows * args.repeat:
        os.sync()  # the trace and the ingests' stores on the disk before the import is timed
        result = _subprocess("--phase", "import", str(trace), *mode)
        assert lines.setdefault(label, result["line"]) == result["line"]
        results[label] = result
        print(
            f"import kineto ({label}): {mb:,.1f} MB trace in {result['seconds']:.2f} s = "
            f"{mb / result['seconds']:,.1f} MB/s [CPU {result['cpu_seconds']:.2f} s = "
            f"{mb / result['cpu_seconds']:,.1f} MB/s], peak RSS {result['peak_rss_mib']:,.0f} MiB, "
            f"{result['peak_rss_mib'] - result['before_mib']:,.0f} MiB above the "
            f"{result['before_mib']:,.0f} MiB of the loaded program "
            f"({(result['peak_rss_mib'] - result['before_mib']) * 2**20 / size:.2f}x the file)"
        )
    if len(lines) == 2:
        assert lines["streaming"] == lines["whole-file"], "the two importers disagree"
        print("import kineto: same measurement line from both importers")
    return results


if __name__ == "__main__":
    main()
