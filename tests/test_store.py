"""The store as ingest writes it: hive layout, idempotency, replacement, atomicity (contract §3)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import duckdb  # a test extra: contract §3 promises the store reads as is in DuckDB
import polars as pl
import pyarrow.dataset as ds
import pytest
from conftest import MECHANISM, example_runs, write_example_campaign

import pipeline.store.tables
from pipeline.errors import StoreError
from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of the store with its modification time and bytes."""
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def rewrite_metric(attempts: Path, attempt_id: str, line: int, metric: float) -> None:
    path = attempts / "c1" / attempt_id / "measurements.jsonl"
    runs = [json.loads(text) for text in path.read_text().splitlines()]
    runs[line - 1]["metric"] = metric
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))


def test_pyarrow_opens_every_table_as_a_hive_dataset(attempts_dir: Path, tmp_path: Path) -> None:
    write_example_campaign(attempts_dir, "c2", attempts=("x1",))
    ingest(attempts_dir, Store(tmp_path / "store"))
    samples = ds.dataset(tmp_path / "store" / "samples", format="parquet", partitioning="hive")
    table = samples.to_table()
    counts = pl.from_arrow(table).group_by("campaign_id").len().sort("campaign_id")  # type: ignore[union-attr]
    assert counts.rows() == [("c1", 24), ("c2", 12)]
    for name in ("campaigns", "attempts", "breakdown", "counters", "expectations", "integrity"):
        dataset = ds.dataset(tmp_path / "store" / name, format="parquet", partitioning="hive")
        assert "campaign_id" in dataset.schema.names


def test_duckdb_reads_the_tables_as_they_are(attempts_dir: Path, tmp_path: Path) -> None:
    write_example_campaign(attempts_dir, "c2", attempts=("x1",))
    ingest(attempts_dir, Store(tmp_path / "store"))
    pattern = tmp_path / "store" / "samples" / "*" / "*.parquet"
    rows = (
        duckdb.connect()
        .sql(
            "SELECT campaign_id, count(*) "
            f"FROM read_parquet('{pattern}', hive_partitioning = true) GROUP BY 1 ORDER BY 1"
        )
        .fetchall()
    )
    assert rows == [("c1", 24), ("c2", 12)]


def test_second_ingest_is_unchanged_and_touches_nothing(attempts_dir: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    ingest(attempts_dir, store)
    before = snapshot(store.root)
    report = ingest(attempts_dir, store)
    assert set(report.attempts["outcome"]) == {"unchanged"}
    assert report.summary()["campaign"].to_list() == ["unchanged"]
    assert snapshot(store.root) == before


def test_changed_measurements_replace_the_attempts_rows(attempts_dir: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    ingest(attempts_dir, store)
    before = store.read("samples")
    rewrite_metric(attempts_dir, "r001", 3, 0.5)
    report = ingest(attempts_dir, store)
    assert dict(report.attempts.select("attempt_id", "outcome").rows()) == {
        "r001": "replaced",
        "r002": "unchanged",
    }
    after = store.read("samples")
    assert after.height == before.height
    key = ["attempt_id", "side", "repetition"]
    changed = after.join(before, on=key, suffix="_before").filter(
        pl.col("metric") != pl.col("metric_before")
    )
    assert changed.select(*key, "metric").rows() == [("r001", "baseline", 1, 0.5)]


def test_fewer_runs_leave_no_stale_rows(attempts_dir: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    ingest(attempts_dir, store)
    path = attempts_dir / "c1" / "r002" / "measurements.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in example_runs(2)))
    ingest(attempts_dir, store)
    per_attempt = store.read("samples").group_by("attempt_id").len().sort("attempt_id")
    assert per_attempt.rows() == [("r001", 12), ("r002", 4)]
    assert store.read("breakdown").filter(pl.col("attempt_id") == "r002").height == 4 * 2 * 3


def test_ingest_reads_only_the_partitions_of_its_campaign(
    attempts_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_example_campaign(attempts_dir, "c2", attempts=("x1",))
    store = Store(tmp_path / "store")
    ingest(attempts_dir, store)
    path = attempts_dir / "c2" / "x1" / "measurements.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in example_runs(3)))
    scanned: list[str] = []
    real_scan = pl.scan_parquet

    def recording_scan(source: Any, *args: Any, **kwargs: Any) -> pl.LazyFrame:
        scanned.append(str(source))
        return real_scan(source, *args, **kwargs)

    monkeypatch.setattr(pl, "scan_parquet", recording_scan)
    report = ingest(attempts_dir / "c2", store)
    assert report.attempts["outcome"].to_list() == ["replaced"]
    assert any("samples/campaign_id=c2" in s for s in scanned)
    assert [s for s in scanned if "campaign_id=c2" not in s] == []


def test_failure_before_the_commit_leaves_the_store_as_it_was(
    attempts_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    ingest(attempts_dir, store)
    before, samples = snapshot(store.root), store.read("samples")
    rewrite_metric(attempts_dir, "r001", 1, 0.5)
    real_sink = pl.LazyFrame.sink_parquet
    calls = {"n": 0}

    def failing_sink(self: pl.LazyFrame, path: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:  # after two partitions were staged
            raise OSError("disk full")
        return real_sink(self, path, *args, **kwargs)

    monkeypatch.setattr(pl.LazyFrame, "sink_parquet", failing_sink)
    with pytest.raises(StoreError, match=r"store: cannot update the store: disk full"):
        ingest(attempts_dir, store)
    monkeypatch.undo()
    assert snapshot(store.root) == before  # staged files removed, nothing renamed
    assert Store(store.root).read("samples").equals(samples)


def test_crash_after_the_journal_commit_is_rolled_forward(
    attempts_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    ingest(attempts_dir, store)
    rewrite_metric(attempts_dir, "r001", 1, 0.5)
    real_replace = os.replace
    calls = {"n": 0}

    def crashing_replace(src: Any, dst: Any, **folders: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # journal committed, one partition renamed, then the crash
            raise KeyboardInterrupt
        real_replace(src, dst, **folders)

    monkeypatch.setattr(pipeline.store.tables.os, "replace", crashing_replace)
    with pytest.raises(KeyboardInterrupt):
        ingest(attempts_dir, store)
    monkeypatch.undo()
    assert list((store.root / "_txn").glob("*.json"))  # the committed journal is still there
    reopened = Store(store.root)  # recovery happens on open
    assert list((store.root / "_txn").glob("*.json")) == []
    samples = reopened.read("samples")
    first = samples.filter((pl.col("attempt_id") == "r001") & (pl.col("line") == 1))
    assert first["metric"].to_list() == [0.5]
    assert reopened.read("attempts").height == 2
    assert set(ingest(attempts_dir, reopened).attempts["outcome"]) == {"unchanged"}


def test_campaigns_ingested_together_keep_their_own_rows_and_files(tmp_path: Path) -> None:
    """Small campaigns are validated and written in one group: the same attempt ids in three
    campaigns still land in three partitions, each with its own rows; a campaign without
    expectations gets an empty expectations file, and a rejected attempt stays out."""
    root = tmp_path / "attempts"
    for cid in ("c1", "c2", "c3"):
        write_example_campaign(root, cid, mechanism=None if cid == "c2" else MECHANISM)
    rewrite_metric(root, "r002", 2, 0.25)  # c1/r002 only
    (root / "c3" / "r001" / "measurements.jsonl").write_text('{"side": "baseline"}\n')
    store = Store(tmp_path / "store")
    report = ingest(root, store)
    outcomes = report.attempts.select(pl.concat_str("campaign_id", "attempt_id", "outcome"))
    assert outcomes.to_series().to_list() == [
        "c1r001ingested",
        "c1r002ingested",
        "c2r001ingested",
        "c2r002ingested",
        "c3r001rejected",
        "c3r002ingested",
    ]
    assert {str(i).split(":")[0] for i in report.issues} == {
        str(root / "c3" / "r001" / "measurements.jsonl")
    }
    for table_name in ("samples", "breakdown", "counters", "expectations", "integrity"):
        assert store.campaign_ids(table_name) == ["c1", "c2", "c3"], table_name
    samples = store.read("samples")
    for cid, attempts in (("c1", ["r001", "r002"]), ("c2", ["r001", "r002"]), ("c3", ["r002"])):
        mine = samples.filter(pl.col("campaign_id") == cid)
        assert mine["attempt_id"].unique(maintain_order=True).to_list() == attempts
        assert mine.height == 12 * len(attempts)
    changed = samples.filter(pl.col("metric") == 0.25)
    assert changed.select("campaign_id", "attempt_id", "line").rows() == [("c1", "r002", 2)]
    expectations = store.read("expectations")
    assert sorted(set(expectations["campaign_id"])) == ["c1", "c3"]
    assert pl.read_parquet(store.partition_file("expectations", "c2")).height == 0


def test_a_journal_staged_one_folder_per_file_is_still_finished(
    attempts_dir: Path, tmp_path: Path
) -> None:
    """Writes before this layout staged each file in its own folder
    (``_staging/<txid>/<table>/campaign_id=<id>/data.parquet``); a journal a crash left with
    such paths is rolled forward like a new one."""
    store = Store(tmp_path / "store")
    ingest(attempts_dir, store)
    target = store.partition_file("samples", "c1")
    frame = pl.read_parquet(target).with_columns(metric=pl.lit(0.5))
    staged = store.root / "_staging" / "ab12" / "samples" / "campaign_id=c1" / "data.parquet"
    staged.parent.mkdir(parents=True)
    frame.write_parquet(staged)
    ops = [
        {
            "target": "samples/campaign_id=c1/data.parquet",
            "staged": str(staged.relative_to(store.root)),
        }
    ]
    (store.root / "_txn").mkdir(exist_ok=True)
    (store.root / "_txn" / "ab12.json").write_text(json.dumps({"txid": "ab12", "ops": ops}))
    reopened = Store(store.root)
    assert set(reopened.read("samples")["metric"]) == {0.5}
    assert not (store.root / "_staging").exists() and not list((store.root / "_txn").glob("*"))


def test_put_partitions_writes_the_same_files_without_a_partitioned_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`put_partitions` writes one file per campaign with Polars' partitioned sink, or one write
    per campaign on a Polars without it (pyproject allows versions before PartitionBy): the
    tables read back are the same, an empty campaign included."""
    frame = pl.DataFrame(
        {
            "campaign_id": ["b", "a", "b"],
            "attempt_id": ["r2", "r1", "r1"],
            "side": ["baseline"] * 3,
            "repetition": [1, 0, 0],
            "status": ["ok", "ok", "failed"],
            "metric": [2.0, 1.0, None],
            "line": [2, 1, 1],
        }
    )
    read = {}
    for label in ("sink", "one by one"):
        if label == "one by one":
            monkeypatch.delattr(pl, "PartitionBy")
        store = Store(tmp_path / label)
        with store.transaction() as txn:
            txn.put_partitions("samples", frame, ["a", "b", "c"])
        read[label] = {cid: store.read("samples", [cid]) for cid in ("a", "b", "c")}
    assert read["sink"]["c"].height == 0 and read["sink"]["b"].height == 2
    for cid in ("a", "b", "c"):
        assert read["sink"][cid].equals(read["one by one"][cid])
