"""Reading tables: one scan over the wanted partitions, typed by schemas/tables.json."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from helpers import sample_row as _samples

from pipeline.contract.schemas import table
from pipeline.errors import StoreError
from pipeline.store.tables import Store


def test_scan_reads_only_the_wanted_campaigns_with_their_ids(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with store.transaction() as txn:
        for cid, metric in (("c1", 1.0), ("2026", 2.0), ("c3", 3.0)):
            txn.put("samples", cid, _samples(f"a-{cid}", metric))
    got = store.read("samples", ["2026", "c3", "missing"]).sort("campaign_id")
    assert got["campaign_id"].to_list() == ["2026", "c3"]  # "2026" stays a string
    assert got["metric"].to_list() == [2.0, 3.0]
    assert got.schema == table("samples").polars_schema()
    assert store.read("samples").height == 3


def test_a_partition_written_before_a_column_existed_reads_as_null(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with store.transaction() as txn:
        txn.put("samples", "new", _samples("a", 1.0).with_columns(order=pl.lit(1)))
    old = store.partition_file("samples", "old")
    old.parent.mkdir(parents=True)
    _samples("b", 2.0).write_parquet(old)  # written before the nullable `order` was added
    got = store.read("samples").sort("campaign_id")
    assert got["order"].to_list() == [1, None]
    assert got["attempt_id"].to_list() == ["a", "b"]


def test_a_partition_without_a_column_every_file_needs_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path)
    old = store.partition_file("samples", "old")
    old.parent.mkdir(parents=True)
    _samples("b", 2.0).drop("line").write_parquet(old)  # `line` is not nullable
    with pytest.raises(StoreError, match=f'^{old}: column "line" is missing; the file does not'):
        store.read("samples")


def test_an_empty_or_missing_table_reads_with_its_schema(tmp_path: Path) -> None:
    store = Store(tmp_path)
    got = store.read("comparisons")
    assert got.is_empty()
    assert got.schema == table("comparisons").polars_schema()


def test_opening_and_reading_a_store_writes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    with store.transaction() as txn:
        txn.put("samples", "c1", _samples("a", 1.0))
    (tmp_path / ".lock").unlink()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert Store(tmp_path).read("samples").height == 1
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
