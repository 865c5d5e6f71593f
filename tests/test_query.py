"""Query: SQL over the store, output formats, the named-query loader and the shipped queries."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.errors import UsageError
from pipeline.ingestion.attempts import ingest
from pipeline.store.query import load_named_queries, open_store, render, run_sql
from pipeline.store.tables import Store

EXAMPLES = Path(__file__).resolve().parent.parent / "data" / "attempts"


@pytest.fixture
def store(attempts_dir: Path, tmp_path: Path) -> Store:
    store = Store(tmp_path / "store")
    ingest(attempts_dir, store)
    return store


@pytest.fixture(scope="module")
def example_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("examples") / "store")
    ingest(EXAMPLES, store)
    return store


def test_sql_over_the_input_tables(store: Store) -> None:
    result = run_sql(store, "SELECT campaign_id, count(*) AS n FROM samples GROUP BY 1;")
    assert result.rows() == [("c1", 24)]


def test_tables_never_written_are_empty_with_their_columns(store: Store) -> None:
    result = run_sql(store, "SELECT attempt_id, verdict FROM assessments")
    assert result.height == 0 and result.columns == ["attempt_id", "verdict"]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC 1", "bad query: sql parser error: Expected: an SQL statement, found: SELEC"),
        ("SELECT * FROM nope", "bad query: relation 'nope' was not found"),
        ("SELECT nope FROM samples", 'bad query: unable to find column "nope"'),
    ],
)
def test_bad_sql_is_one_usage_line(store: Store, sql: str, message: str) -> None:
    with pytest.raises(UsageError) as error:
        run_sql(store, sql)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_missing_store_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no store at .*nowhere"):
        open_store(tmp_path / "nowhere")


def test_table_shows_every_row_and_full_strings() -> None:
    long = "x" * 300
    frame = pl.DataFrame({"i": list(range(40)), "s": [long] * 40})
    text = render(frame, "table")
    assert "…" not in text and text.count(long) == 40
    assert all(f"│ {i} " in text for i in range(40))


def test_csv_and_json_outputs_and_parquet_is_no_text() -> None:
    frame = pl.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    assert render(frame, "csv") == "a,b\n1,x\n2,y\n"
    assert json.loads(render(frame, "json")) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(UsageError, match="--format parquet needs --output FILE"):
        render(frame, "parquet")


# -- named queries -------------------------------------------------------------------------
def write_sql(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_loader_reads_headers_and_several_queries_per_file(tmp_path: Path) -> None:
    write_sql(
        tmp_path,
        "a.sql",
        "-- shared notes\n\n-- name: one\n-- description: first\n"
        "-- continued here\nSELECT 1;\n\n-- name: two\nSELECT 2\n",
    )
    queries = load_named_queries(tmp_path)
    assert [(q.name, q.description, q.sql, q.line) for q in queries.values()] == [
        ("one", "first continued here", "SELECT 1", 3),
        ("two", "", "SELECT 2", 8),
    ]


def test_loader_rejects_duplicate_names_with_file_and_line(tmp_path: Path) -> None:
    a = write_sql(tmp_path, "a.sql", "-- name: same\nSELECT 1\n")
    b = write_sql(tmp_path, "b.sql", "\n-- name: same\nSELECT 2\n")
    with pytest.raises(UsageError) as error:
        load_named_queries(tmp_path)
    assert str(error.value).splitlines()[1] == f'{b}:2: query name "same" already used at {a}:1'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("-- name:\nSELECT 1\n", "1: '-- name:' needs a name (letters, digits, _ . -)"),
        ("-- name: empty\n-- description: nothing\n\n", '1: query "empty" has no SQL'),
        ("SELECT 0\n-- name: x\nSELECT 1\n", "1: SQL before the first '-- name:' header"),
    ],
)
def test_loader_rejects_broken_headers(tmp_path: Path, text: str, problem: str) -> None:
    path = write_sql(tmp_path, "q.sql", text)
    with pytest.raises(UsageError) as error:
        load_named_queries(tmp_path)
    assert str(error.value).splitlines()[1] == f"{path}:{problem}"


def test_shipped_queries_load_with_descriptions() -> None:
    queries = load_named_queries()
    mine = {"runs_per_side", "region_share", "counters_per_attempt", "attempts_overview"}
    assert mine <= set(queries)
    assert all(queries[name].description for name in mine)


def test_runs_per_side_counts_the_example_runs(example_store: Store) -> None:
    sql = load_named_queries()["runs_per_side"].sql
    result = run_sql(example_store, sql).filter(pl.col("campaign_id") == "llama-decode-2026-11")
    by_key = {
        (r["attempt_id"], r["side"]): (r["ok_runs"], r["failed_runs"])
        for r in result.iter_rows(named=True)
    }
    # data/make_examples.py: 10 repetitions; r001 candidate repetition 4 failed; r002 has one
    # extra (unpaired) baseline repetition; r006 never ran its candidate.
    assert by_key[("r001", "candidate")] == (9, 1)
    assert by_key[("r002", "baseline")] == (11, 0)
    assert by_key[("r006", "candidate")] == (0, 10)
    assert by_key[("r003", "baseline")] == (10, 0)


def test_region_share_sums_to_one_per_side(example_store: Store) -> None:
    result = run_sql(example_store, load_named_queries()["region_share"].sql)
    totals = result.group_by("campaign_id", "attempt_id", "side").agg(pl.col("share_of_step").sum())
    assert totals.height > 0
    assert ((totals["share_of_step"] - 1).abs() < 1e-9).all()


def test_counters_per_attempt_matches_the_counters_table(example_store: Store) -> None:
    result = run_sql(example_store, load_named_queries()["counters_per_attempt"].sql)
    row = result.filter((pl.col("attempt_id") == "r002") & (pl.col("counter") == "kernel_launches"))
    # r002's candidate launches 1.25x the baseline's 4000 per run, exactly (launch counts are exact)
    assert row.select("baseline_mean", "candidate_mean").row(0) == (4000.0, 5000.0)


def test_attempts_overview_lists_every_attempt_in_round_order(example_store: Store) -> None:
    result = run_sql(example_store, load_named_queries()["attempts_overview"].sql)
    llama = result.filter(pl.col("campaign_id") == "llama-decode-2026-11")
    assert llama["attempt_id"].to_list() == [f"r00{i}" for i in range(1, 8)]
    assert llama.filter(pl.col("attempt_id") == "r005")["expectations"].to_list() == [0]
    assert result["integrity_errors"].sum() == 0
