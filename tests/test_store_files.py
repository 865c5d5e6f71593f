"""Store files are checked against schemas/tables.json when read: damaged files are named."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import write_example_campaign
from helpers import cli_process as cli

from pipeline.assessment.campaigns import assess
from pipeline.contract.schemas import table
from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store

HINT = "see docs/store.md#damaged-files"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    write_example_campaign(tmp_path / "attempts", attempts=("r001",), repetitions=4)
    store = Store(tmp_path / "store")
    ingest(tmp_path / "attempts", store)
    assess(store)
    return store


def rewrite(store: Store, name: str, change: pl.Expr | str) -> Path:
    """Rewrite the c1 partition of ``name`` with one column dropped (a name) or changed."""
    path = store.partition_file(name, "c1")
    frame = pl.read_parquet(path)
    frame = frame.drop(change) if isinstance(change, str) else frame.with_columns(change)
    frame.write_parquet(path)
    return path


@pytest.mark.parametrize(
    ("name", "change", "problem", "command"),
    [
        ("samples", "side", 'column "side" is missing', "assess"),
        ("samples", "metric", 'column "metric" is missing', "assess"),
        (
            "samples",
            pl.col("metric").cast(pl.String),
            'column "metric" is string, not float64',
            "assess",
        ),
        ("assessments", "verdict", 'column "verdict" is missing', "report"),
    ],
)
@pytest.mark.slow
def test_a_file_that_does_not_match_its_table_is_named_with_exit_1(
    store: Store, name: str, change: pl.Expr | str, problem: str, command: str, tmp_path: Path
) -> None:
    path = rewrite(store, name, change)
    if command == "assess":  # no stored results to reuse: assess reads the samples
        store.partition_file("assessments", "c1").unlink()
    args = {"assess": ["assess", "c1"], "report": ["report", "c1", "-o", str(tmp_path / "r.html")]}
    done = cli(*args[command], "--store", str(store.root))
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == (
        f"error: {path}: {problem}; the file does not match table {name} of "
        f"schemas/tables.json ({HINT})\n"
    )
    check = cli("store", "check", "--store", str(store.root))
    assert check.returncode == 1
    assert f"{path}: {problem}; the file does not match table {name}" in check.stdout


@pytest.mark.slow
def test_a_truncated_input_file_is_noticed_when_results_would_be_reused(store: Store) -> None:
    path = store.partition_file("counters", "c1")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    done = cli("assess", "c1", "--store", str(store.root))  # nothing changed: all reused
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"error: {path}: not a readable Parquet file (")
    assert done.stderr.endswith(f"({HINT})\n")


def test_a_nullable_column_added_later_may_be_missing_and_reads_as_nulls(store: Store) -> None:
    spec = table("samples")
    later = [c.name for c in spec.columns if c.nullable and c.name not in spec.in_every_file]
    if not later:
        pytest.skip("samples has no column added after the first store format")
    rewrite(store, "samples", later[0])
    got = store.read("samples")
    assert got.height == 4 * 2 and got[later[0]].null_count() == got.height
    assert assess(store, ["c1"]).assessments["verdict"].to_list() != []


def test_in_every_file_names_only_nullable_columns_of_their_table() -> None:
    for spec in (table(n) for n in ("attempts", "samples", "comparisons", "assessments")):
        nullable = {c.name for c in spec.columns if c.nullable}
        assert spec.in_every_file <= nullable, spec.name
    assert "metric" in table("samples").in_every_file


@pytest.mark.slow
def test_a_store_written_before_the_recorder_and_interval_columns_still_assesses(
    store: Store, tmp_path: Path
) -> None:
    """Every column added after the first store format is dropped from every file, as a store
    written by version 0.1 holds them: assess must read it (a missing interval is percentile),
    give the same verdicts and intervals, and the report must render."""
    fresh = assess(store, ["c1"], write=False)
    for name in ("campaigns", "attempts", "samples", "comparisons", "assessments"):
        spec = table(name)
        later = [c.name for c in spec.columns if c.nullable and c.name not in spec.in_every_file]
        frame = pl.read_parquet(store.partition_file(name, "c1"))
        frame.drop([c for c in later if c in frame.columns]).write_parquet(
            store.partition_file(name, "c1")
        )
    assert "interval" not in pl.read_parquet(store.partition_file("campaigns", "c1")).columns
    store.partition_file("assessments", "c1").unlink()  # recompute from the old input files
    old = assess(store, ["c1"])
    columns = ["attempt_id", "verdict", "paired_estimate", "paired_low", "paired_high"]
    assert old.assessments.select(columns).equals(fresh.assessments.select(columns))
    done = cli("report", "c1", "--store", str(store.root), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_damaged_data_page_behind_a_sound_footer_is_exit_1_naming_the_campaign(
    store: Store,
) -> None:
    path = store.partition_file("samples", "c1")
    data = bytearray(path.read_bytes())
    for i in range(8, min(len(data) - 64, 512)):  # the pages, not the magic bytes nor the footer
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    store.partition_file("assessments", "c1").unlink()  # nothing to reuse: the pages are read
    done = cli("assess", "c1", "--store", str(store.root))
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    expected = f"error: {store.root}: cannot read the input files of campaign c1: "
    assert done.stderr.startswith(expected)
    assert "internal error" not in done.stderr


def _every_file_columns(name: str) -> list[str]:
    spec = table(name)
    every = [c.name for c in spec.columns if not c.nullable or c.name in spec.in_every_file]
    return [name for name in every if name != "campaign_id"]


@pytest.mark.parametrize("column", _every_file_columns("samples"))
@pytest.mark.slow
def test_a_column_dropped_from_an_input_is_noticed_when_results_would_be_reused(
    store: Store, column: str
) -> None:
    # before the fix: assess exits 0 and prints the stored verdicts again (the file is never read)
    path = rewrite(store, "samples", column)
    done = cli("assess", "c1", "--store", str(store.root))  # nothing changed: all reused
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == (
        f'error: {path}: column "{column}" is missing; the file does not match table samples '
        f"of schemas/tables.json ({HINT})\n"
    )


@pytest.mark.slow
def test_a_null_metric_of_an_ok_run_is_named_by_assess_and_store_check(store: Store) -> None:
    # before the fix: assess reuses the stored verdicts and store check says the store is clean
    first_ok = (pl.col("status") == "ok").arg_true().first()
    nulled = pl.when(pl.int_range(pl.len()) == first_ok).then(None).otherwise(pl.col("metric"))
    path = rewrite(store, "samples", nulled.alias("metric"))
    problem = (
        'column "metric" is null where status is ok in 1 row(s); the file does not match table '
        "samples of schemas/tables.json"
    )
    done = cli("assess", "c1", "--store", str(store.root))
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == f"error: {path}: {problem} ({HINT})\n"
    check = cli("store", "check", "--store", str(store.root))
    assert check.returncode == 1
    assert f"{path}: {problem} (store repair cannot fix this)" in check.stdout


@pytest.mark.slow
def test_a_null_in_a_non_nullable_column_is_named_by_store_check(store: Store) -> None:
    path = rewrite(store, "counters", pl.lit(None, dtype=pl.String).alias("counter"))
    rows = pl.read_parquet(path).height  # 4 repetitions x 2 sides x 2 counters
    check = cli("store", "check", "--store", str(store.root))
    assert check.returncode == 1
    assert f'{path}: column "counter" is null in {rows} row(s)' in check.stdout


@pytest.mark.slow
def test_a_failed_run_may_have_no_metric(store: Store) -> None:
    status = pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("failed")).otherwise("status")
    metric = pl.when(pl.int_range(pl.len()) == 0).then(None).otherwise("metric")
    rewrite(store, "samples", [status.alias("status"), metric.alias("metric")])  # type: ignore[arg-type]
    check = cli("store", "check", "--store", str(store.root))
    assert (check.returncode, check.stdout) == (0, f"{store.root}: clean\n"), check.stdout
