"""The real 12-benchmark suite (benchmarks/suite12/) measured with `explain-pipeline ab --measure
pytest-benchmark` on this machine: what a user gets from per-benchmark verdicts on a shared
machine. Not part of the test suite: a comparison of 10 pairs took 75-221 s on the shared 2-core
machine, one of 40 pairs about 5 minutes, and the runs behind benchmarks/RESULTS.md some three
hours in all (run it in the background; each comparison is kept, so a run stopped is resumed).

    .venv/bin/python benchmarks/measure_suite12.py measure OUT --scenario aa --comparisons 20
    .venv/bin/python benchmarks/measure_suite12.py measure OUT --scenario slower \\
        --comparisons 5 --until-decided
    .venv/bin/python benchmarks/measure_suite12.py analyze OUT

Scenarios (each comparison is one `ab`, kept in OUT/<scenario>/cNN with its output):

- ``aa``: identical code on both sides, Python's hash randomization as it is (a new
  PYTHONHASHSEED in every process);
- ``aa-hashseed-pair``: identical code, PYTHONHASHSEED fixed per pair (both runs of repetition r
  get r + 1; the pairs differ from each other);
- ``aa-hashseed-fixed``: identical code, PYTHONHASHSEED=0 in every run of both sides;
- ``aa-cputimer``: identical code timed by pytest-benchmark with ``time.process_time`` (the
  process's CPU time) instead of its default wall clock;
- ``aa-cputimer-hashseed-pair``, ``aa-cputimer-hashseed-fixed``: the same, with PYTHONHASHSEED
  per pair or fixed (the hash seed's effect, without the wall clock's load noise over it);
- ``slower``: the candidate's ``test_sha256`` (a steady benchmark) hashes 10% more bytes;
- ``slower-cputimer``: the same, timed by CPU time.

``analyze`` reads the kept folders back and prints the tables of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

SUITE = Path(__file__).resolve().parent / "suite12"
CLI = Path(sys.executable).with_name("explain-pipeline")
SLOWER = "test_sha256"
HASHING = ("test_sha256", "test_blake2b", "test_crc32")
"""The steady benchmarks other benchmarks can be normalized by (declared ``unchanged``)."""
SCENARIOS = (
    "aa",
    "aa-hashseed-pair",
    "aa-hashseed-fixed",
    "aa-cputimer",
    "aa-cputimer-hashseed-pair",
    "aa-cputimer-hashseed-fixed",
    "slower",
    "slower-cputimer",
)
HARNESS = "--benchmark-max-time=0.25 --benchmark-min-rounds=5"
"""pytest-benchmark's own settings: each benchmark timed for about 0.25 s (its default, 1 s,
makes a run of the suite 13 s instead of 4 s) and at least 5 rounds."""


def suite_command(scenario: str, side: str) -> str:
    """The pytest line one side of a comparison runs; ``{results}`` is the recorder's."""
    pytest = (
        f"{shlex.quote(sys.executable)} -m pytest -q -c {shlex.quote(str(SUITE / 'pytest.ini'))} "
        f"{shlex.quote(str(SUITE))} --benchmark-only --benchmark-json={{results}} {HARNESS}"
    )
    if "-cputimer" in scenario:
        pytest += " --benchmark-timer=time.process_time"
    if scenario.startswith("slower") and side == "candidate":
        pytest += f" --suite12-slower={SLOWER}"
    if scenario.endswith("hashseed-pair"):  # warm-up runs have repetition -1: seed 0
        return "sh -c " + shlex.quote("PYTHONHASHSEED=$((EXPLAIN_REPETITION + 1)) exec " + pytest)
    if scenario.endswith("hashseed-fixed"):
        return "env PYTHONHASHSEED=0 " + pytest
    return pytest


def measure(out: Path, scenario: str, comparisons: int, pairs: int, extra: list[str]) -> None:
    """``comparisons`` runs of `ab`, each kept in its own folder with its output and exit code;
    ``extra`` (options this script does not know, e.g. ``--until-decided``) go to `ab`."""
    folder = out / scenario
    folder.mkdir(parents=True, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    for k in range(comparisons):  # resumable: comparisons already kept are not run again
        keep = folder / f"c{k:02d}"
        if (folder / f"c{k:02d}.txt").is_file():
            continue
        shutil.rmtree(keep, ignore_errors=True)  # one interrupted: measured again
        args = [
            str(CLI),
            "ab",
            suite_command(scenario, "baseline"),
            suite_command(scenario, "candidate"),
            "--measure",
            "pytest-benchmark",
            *([] if "--until-decided" in extra else ["-n", str(pairs)]),  # its length is the rule's
            "--keep",
            str(keep),
            *extra,
        ]
        start = time.monotonic()
        shown = subprocess.run(args, capture_output=True, text=True, env=environment)
        (folder / f"c{k:02d}.txt").write_text(
            f"$ {shlex.join(args)}\nexit {shown.returncode}, {time.monotonic() - start:.0f} s, "
            f"load {os.getloadavg()[0]:.1f}\n{shown.stdout}{shown.stderr}"
        )
        print(f"{scenario} c{k:02d}: exit {shown.returncode}", flush=True)


# -- analysis -------------------------------------------------------------------------------------
def comparisons(out: Path) -> list[tuple[str, Path]]:
    """(scenario, kept campaign folder) of every comparison that finished (its output kept)."""
    return [
        (scenario, folder)
        for scenario in SCENARIOS
        for folder in sorted((out / scenario).glob("c[0-9][0-9]"))
        if folder.with_suffix(".txt").is_file()
    ]


def log_ratios(out: Path) -> pl.DataFrame:
    """One row per (scenario, comparison, pair, benchmark or the metric): ``x = ln(baseline /
    candidate)`` of the benchmark's median per-iteration time (the metric: their sum), and the
    same benchmark normalized by the hashing benchmarks (``by_hashing``) and by the sum of all
    the other benchmarks (``by_others``), run by run, as contract §4.3 normalizes a region."""
    rows = []
    for scenario, folder in comparisons(out):
        for text in (folder / "r001" / "measurements.jsonl").read_text().splitlines():
            line = json.loads(text)
            if line["status"] != "ok":
                continue
            values = {**line["breakdown"]["all"], "metric": line["metric"]}
            rows += [
                (scenario, folder.name, line["repetition"], line["side"], short(name), value)
                for name, value in values.items()
            ]
    runs = pl.DataFrame(
        rows, schema=["scenario", "comparison", "pair", "side", "name", "seconds"], orient="row"
    )
    run = ["scenario", "comparison", "pair", "side"]
    benchmark = pl.col("name") != "metric"
    hashing = pl.col("seconds").filter(pl.col("name").is_in(HASHING)).sum().over(run)
    runs = runs.filter(benchmark).with_columns(
        # a reference is compared raw, never normalized by the references (contract §4.3)
        by_hashing=pl.when(~pl.col("name").is_in(HASHING)).then(pl.col("seconds") / hashing),
        by_others=pl.col("seconds") / (pl.col("seconds").sum().over(run) - pl.col("seconds")),
    )
    runs = pl.concat(
        [runs, pl.DataFrame(rows, schema=runs.columns[:6], orient="row").filter(~benchmark)],
        how="diagonal",
    )
    wide = runs.pivot("side", index=[*run[:3], "name"], values=list(VALUES))
    return wide.select(
        *run[:3],
        "name",
        *((pl.col(f"{v}_baseline") / pl.col(f"{v}_candidate")).log().alias(v) for v in VALUES),
    )


VALUES = ("seconds", "by_hashing", "by_others")
VERDICTS = ("improved", "regressed", "unchanged", "inconclusive")


def short(name: str) -> str:
    """``test_suite12.py::test_sha256`` -> ``test_sha256``."""
    return name.rsplit("::", 1)[-1]


def pooled_spreads(x: pl.DataFrame, value: str = "seconds") -> pl.DataFrame:
    """Per (scenario, name): the standard deviation of the per-pair log-ratio within each
    comparison, pooled over the comparisons (as `explain-pipeline plan` pools attempts), and a
    robust one beside it (1.4826 x the median absolute deviation from each comparison's median,
    pooled): far apart when a few pairs are outliers."""
    centred = x.drop_nulls(value).with_columns(
        (pl.col(value) - pl.col(value).median().over("scenario", "comparison", "name"))
        .abs()
        .alias("deviation")
    )
    return (
        centred.group_by("scenario", "comparison", "name")
        .agg(
            pl.len().alias("n"),
            pl.col(value).var(ddof=1).alias("v"),
            pl.col("deviation").median().alias("mad"),
        )
        .group_by("scenario", "name")
        .agg(
            ((pl.col("v") * (pl.col("n") - 1)).sum() / (pl.col("n") - 1).sum()).sqrt().alias(value),
            (1.4826 * pl.col("mad").median()).alias(f"{value}_robust"),
        )
    )


def verdicts(out: Path) -> pl.DataFrame:
    """Per scenario, comparison and member (the metric and each benchmark): the per-benchmark
    verdict of the real assess (each kept folder ingested into a scratch store and assessed
    with ``--what-if decide=regions``, which is the frozen policy when the comparison was
    recorded deciding regions) and the direction of the member's own 95% interval, the rule
    before per-benchmark verdicts."""
    import tempfile

    from pipeline import api

    found = []
    for scenario in SCENARIOS:
        folders = [f for s, f in comparisons(out) if s == scenario]
        if not folders:
            continue
        with tempfile.TemporaryDirectory(prefix="suite12-") as scratch:
            store = api.open_store(Path(scratch) / "store", create=True)
            for folder in folders:
                api.ingest(folder, store)
            result = api.assess(store, what_if={"decide": "regions"}, write=False)
            own = result.comparisons.filter(pl.col("quantity").is_in(["metric", "region"]))
            found.append(
                result.benchmarks.join(
                    own.select("campaign_id", "quantity", "name", "direction"),
                    on=["campaign_id", "quantity", "name"],
                    how="left",
                ).with_columns(
                    pl.lit(scenario).alias("scenario"),
                    pl.col("name").map_elements(short, return_dtype=pl.String),
                )
            )
    return pl.concat(found).rename({"campaign_id": "comparison"})


def flags(members: pl.DataFrame, out: Path) -> pl.DataFrame:
    """Per scenario: comparisons, the share that flag any member (per-benchmark verdicts:
    improved or regressed; before: any 95% interval without 1), and for the slowed benchmark
    how often it is caught and another benchmark flagged."""
    moved = pl.col("verdict").is_in(["improved", "regressed"])
    before = pl.col("direction").is_in(["decrease", "increase", "improved", "regressed"])
    slowed = pl.col("name") == SLOWER
    other = (pl.col("quantity") == "region") & ~slowed
    per = members.group_by("scenario", "comparison").agg(
        pl.col("n_pairs").max().alias("pairs"),
        moved.any().alias("now_any"),
        before.any().alias("before_any"),
        (slowed & (pl.col("verdict") == "regressed")).any().alias("now_caught"),
        (slowed & pl.col("direction").is_in(["increase"])).any().alias("before_caught"),
        (other & moved).any().alias("now_others"),
        (other & before).any().alias("before_others"),
        *((pl.col("verdict") == v).sum().alias(v) for v in VERDICTS),
    )
    load = pl.DataFrame(
        [(s, f.name, _load(f)) for s, f in comparisons(out)],
        schema=["scenario", "comparison", "load"],
        orient="row",
    )
    return (
        per.join(load, on=["scenario", "comparison"])
        .group_by("scenario")
        .agg(
            pl.len().alias("comparisons"),
            pl.col("pairs").mean(),
            pl.col("load").min().alias("load_min"),
            pl.col("load").max().alias("load_max"),
            *(pl.col(c).sum() for c in per.columns[3:]),
        )
        .sort(pl.col("scenario").replace_strict({s: i for i, s in enumerate(SCENARIOS)}))
    )


def _load(folder: Path) -> float:
    """The 1-minute load average when the comparison finished (its output's second line)."""
    second = folder.with_suffix(".txt").read_text().splitlines()[1]
    return float(second.rsplit("load ", 1)[1])


def correlation(x: pl.DataFrame, value: str) -> pl.DataFrame:
    """Per scenario: the median correlation between two benchmarks' log-ratios over the pairs
    of a comparison (each comparison's mean taken out), over every pair of benchmarks."""
    centred = x.filter(pl.col("name") != "metric").with_columns(
        pl.col(value) - pl.col(value).mean().over("scenario", "comparison", "name")
    )
    wide = centred.pivot("name", index=["scenario", "comparison", "pair"], values=value)
    rows = []
    for (scenario,), part in wide.partition_by("scenario", as_dict=True).items():
        names = [c for c in part.columns if c.startswith("test_") and part[c].null_count() == 0]
        matrix = np.corrcoef(part.select(names).to_numpy().T)  # references: no normalized value
        upper = matrix[np.triu_indices(len(names), 1)]
        rows.append((scenario, value, float(np.median(upper))))
    return pl.DataFrame(rows, schema=["scenario", "value", "median_correlation"], orient="row")


def pairs_needed(spreads: pl.DataFrame, size: int = 13) -> pl.DataFrame:
    """Pairs a fixed round needs to call a 10% change of each benchmark at 80% power in a family
    of ``size`` (plan's own formula: pipeline.assessment.power.fixed_pairs, gate and margin 1%)."""
    import math

    from pipeline.assessment.power import fixed_pairs

    shift = math.log(1.10) - math.log(1.01)
    return spreads.with_columns(
        pl.col("seconds")
        .map_elements(
            lambda sd: fixed_pairs(shift, sd, 0.8, "student_t", 0.95, 5, family_size=size),
            return_dtype=pl.Int64,
        )
        .alias("pairs_10pct")
    )


def analyze(out: Path) -> None:
    x = log_ratios(out)
    with pl.Config(tbl_rows=60, tbl_cols=20, float_precision=3, tbl_width_chars=200):
        print("comparisons flagging a benchmark (real assess, decide regions; before: 95% each)")
        print(flags(verdicts(out), out))
        spreads = pooled_spreads(x)
        print("\nper-pair spread of each benchmark's log-ratio (pooled within comparisons)")
        print(spreads.pivot("scenario", index="name", values="seconds").sort("name"))
        print("\nrobust spread (1.4826 MAD)")
        print(spreads.pivot("scenario", index="name", values="seconds_robust").sort("name"))
        print("\nraw against normalized")
        joined = spreads.select("scenario", "name", "seconds")
        for value in VALUES[1:]:
            joined = joined.join(
                pooled_spreads(x, value).select("scenario", "name", value),
                on=["scenario", "name"],
                how="left",
            )
        print(joined.filter(pl.col("scenario").str.starts_with("aa")).sort("scenario", "name"))
        print("\ncorrelation between benchmarks")
        print(pl.concat([correlation(x, v) for v in VALUES]).sort("scenario", "value"))
        print("\npairs a 10% change needs at 80% power (13 members)")
        needed = pairs_needed(spreads.filter(pl.col("name") != "metric"))
        print(needed.pivot("scenario", index="name", values="pairs_10pct").sort("name"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("measure", help="run the comparisons of one scenario")
    run.add_argument("out", type=Path)
    run.add_argument("--scenario", choices=SCENARIOS, required=True)
    run.add_argument("--comparisons", type=int, default=20)
    run.add_argument("-n", "--pairs", type=int, default=10)
    read = commands.add_parser("analyze", help="the tables of the kept comparisons")
    read.add_argument("out", type=Path)
    args, ab_options = parser.parse_known_args()  # measure: options it does not know go to ab
    if args.command == "measure":
        measure(args.out, args.scenario, args.comparisons, args.pairs, ab_options)
    else:
        analyze(args.out)


if __name__ == "__main__":
    main()
