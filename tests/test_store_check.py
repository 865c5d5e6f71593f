"""What outside readers see during and after a write, and `store check` / `store repair`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.dataset as ds
import pytest
from helpers import CLI
from helpers import cli_process as cli
from helpers import sample_row as _samples

import pipeline.store.tables
from pipeline.contract.schemas import table
from pipeline.store.tables import STORE_FORMAT, Store


def _attempts(attempt: str) -> pl.DataFrame:
    values = {
        "attempt_id": attempt,
        "round": 1,
        "candidate": "c",
        "baseline": "b",
        "status": "completed",
        "started_at": datetime(2026, 11, 1, tzinfo=UTC),
        "n_lines": 2,
        "inputs_sha256": "0" * 64,
        "source_dir": "x",
    }
    schema = table("attempts").polars_schema(with_partition=False)
    return pl.DataFrame([{name: values.get(name) for name in schema}], schema=schema)


def outside_read(root: Path, name: str) -> pl.DataFrame:
    """The documented Polars recipe for reading one table from outside explain-pipeline."""
    return pl.scan_parquet(f"{root}/{name}/", hive_partitioning=True).collect()


def test_outside_readers_see_the_old_table_while_a_write_is_staged(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with store.transaction() as txn:
        txn.put("samples", "c1", _samples("a", 1.0))
    with store.transaction() as txn:
        txn.put("samples", "c1", _samples("a", 2.0))
        txn.put("samples", "c2", _samples("b", 3.0))
        # staged, not committed: the table folder holds only the old file
        assert outside_read(store.root, "samples")["metric"].to_list() == [1.0]
        assert not list((store.root / "samples").rglob(".*"))
    got = outside_read(store.root, "samples").sort("campaign_id")
    assert got["metric"].to_list() == [2.0, 3.0]
    assert not (store.root / "_staging").exists()  # nothing left behind


@pytest.mark.slow
def test_an_interrupted_commit_is_reported_and_finished_by_store_repair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "store")
    with store.transaction() as txn:
        txn.put("attempts", "c1", _attempts("a"))
        txn.put("samples", "c1", _samples("a", 1.0))
    real_replace = os.replace
    calls = {"n": 0}

    def crashing_replace(src: Any, dst: Any, **folders: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # journal committed, attempts renamed, then the crash
            raise KeyboardInterrupt
        real_replace(src, dst, **folders)

    monkeypatch.setattr(pipeline.store.tables.os, "replace", crashing_replace)
    with pytest.raises(KeyboardInterrupt), store.transaction() as txn:
        txn.put("attempts", "c1", _attempts("new"))
        txn.put("samples", "c1", _samples("new", 2.0))
    monkeypatch.undo()
    # what docs/store.md tells outside readers: new attempts, old samples, until repaired
    assert outside_read(store.root, "attempts")["attempt_id"].to_list() == ["new"]
    assert outside_read(store.root, "samples")["attempt_id"].to_list() == ["a"]
    journal = next((store.root / "_txn").glob("*.json"))

    check = cli("store", "check", "--store", str(store.root))
    assert check.returncode == 1, check.stderr
    assert check.stdout.splitlines() == [
        f"{journal}: commit not finished: 2 partition file(s) still to be replaced; readers "
        "outside explain-pipeline may see a mix of old and new partitions",
        f"{store.root}: 1 problem(s)",
    ]
    assert journal.exists()  # check changed nothing

    repair = cli("store", "repair", "--store", str(store.root))
    assert (repair.returncode, repair.stderr) == (0, "")
    assert repair.stdout.splitlines() == [
        "finished 1 interrupted commit(s); removed 0 stray staging file(s) or folder(s)",
        f"{store.root}: clean",
    ]
    assert outside_read(store.root, "samples")["attempt_id"].to_list() == ["new"]
    assert ds.dataset(store.root / "samples", partitioning="hive").to_table().num_rows == 1
    clean = cli("store", "check", "--store", str(store.root))
    assert (clean.returncode, clean.stdout) == (0, f"{store.root}: clean\n")


def test_strays_of_writes_that_never_committed_are_reported_then_removed(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with store.transaction() as txn:
        txn.put("samples", "c1", _samples("a", 1.0))
    legacy = store.root / "samples" / "campaign_id=c1" / ".data.parquet.0badc0de.tmp"
    legacy.write_bytes(b"half a file from an older version")
    staged = store.root / "_staging" / "feed" / "samples" / "campaign_id=c1" / "data.parquet"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"half a file")

    check = cli("store", "check", "--store", str(store.root))
    assert check.returncode == 1
    assert check.stdout.splitlines() == [
        f"{store.root / '_staging' / 'feed'}: stray staging files of a write that never committed",
        f"{legacy}: stray staging files of a write that never committed",
        f"{store.root}: 2 problem(s)",
    ]
    assert legacy.exists() and staged.exists()
    (store.root / ".store-format").unlink()  # as a store written before the format file
    with store.transaction() as txn:  # every writer removes them first, as repair does
        txn.put("samples", "c2", _samples("b", 2.0))
    assert not legacy.exists() and not (store.root / "_staging").exists()
    assert sorted(outside_read(store.root, "samples")["metric"].to_list()) == [1.0, 2.0]


def test_once_swept_writers_leave_format_1_temporaries_to_repair(tmp_path: Path) -> None:
    """A write marks the store as of the current format once format 1's temporary files are
    gone, and later writes do not list every partition folder again; `store check` and `store
    repair` still look."""
    store = Store(tmp_path / "store")
    with store.transaction() as txn:
        txn.put("samples", "c1", _samples("a", 1.0))
    assert (store.root / ".store-format").read_text() == f"{STORE_FORMAT}\n"
    legacy = store.root / "samples" / "campaign_id=c1" / ".data.parquet.0badc0de.tmp"
    legacy.write_bytes(b"left by an older version run after this one")
    with store.transaction() as txn:
        txn.put("samples", "c2", _samples("b", 2.0))
    assert legacy.exists()
    check = cli("store", "check", "--store", str(store.root))
    assert check.returncode == 1 and f"{legacy}: stray staging files" in check.stdout
    repair = cli("store", "repair", "--store", str(store.root))
    assert repair.returncode == 0, repair.stderr
    assert not legacy.exists()
    assert sorted(outside_read(store.root, "samples")["metric"].to_list()) == [1.0, 2.0]


def test_store_check_on_a_missing_store_is_a_usage_error_and_creates_nothing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere"
    for command in ("check", "repair"):
        done = cli("store", command, "--store", str(missing))
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            f"error: no store at {missing} (run `explain-pipeline ingest` first, or pass --store)\n"
        )
    assert not missing.exists()


WRITER = """
import fcntl, os, sys, time
from pathlib import Path
lock, ready, go, new, target = map(Path, sys.argv[1:])
with open(lock, "a+b") as handle:
    fcntl.flock(handle, fcntl.LOCK_EX)  # what every explain-pipeline write holds
    ready.touch()
    while not go.exists():
        time.sleep(0.02)
    os.replace(new, target)  # the commit lands while the lock is held
"""


def _waiting_for_a_lock(pid: int) -> bool:
    """Whether /proc/locks lists a blocked lock request of process ``pid``."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and str(pid) in fields:
            return True
    return False


@pytest.mark.parametrize("command", ["query", "report"])
@pytest.mark.slow
def test_readers_wait_for_a_running_write_and_read_what_it_committed(
    tmp_path: Path, command: str
) -> None:
    """`query` and `report` read under the store's lock held shared: a write in progress
    finishes first, so they see its result, never a state in between."""
    store, other = Store(tmp_path / "store"), Store(tmp_path / "other")
    for where, metric in ((store, 1.0), (other, 2.0)):
        with where.transaction() as txn:
            txn.put("samples", "c1", _samples("a", metric))
    ready, go = tmp_path / "ready", tmp_path / "go"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(store.root / ".lock"),
            str(ready),
            str(go),
            str(other.partition_file("samples", "c1")),
            str(store.partition_file("samples", "c1")),
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        args = {
            "query": ["query", "SELECT metric FROM samples", "--format", "csv"],
            "report": ["report", "c1", "-o", "-"],
        }[command]
        query = subprocess.Popen(
            [str(CLI), *args, "--store", str(store.root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while not _waiting_for_a_lock(query.pid) and query.poll() is None:
            assert time.monotonic() < deadline, "query never waited for the store's lock"
            time.sleep(0.02)
        assert query.poll() is None, query.communicate()
        go.touch()
        out, err = query.communicate(timeout=60)
    finally:
        go.touch()
        writer.wait(timeout=60)
    if command == "query":
        assert (query.returncode, out, err) == (0, "metric\n2.0\n", "")
    else:  # the store holds samples only: the report, once it could read, finds no campaign c1
        assert query.returncode == 2 and "c1" in err, err


@pytest.mark.slow
def test_the_store_format_is_written_by_a_write_and_checked_on_open(tmp_path: Path) -> None:
    """A store written before the format file (format 1) gets it at its next write, with the
    old marker gone; a store of a newer format is refused by every command, nothing changed."""
    store = Store(tmp_path / "store")
    with store.transaction() as txn:
        txn.put("samples", "c1", _samples("a", 1.0))
    mark = store.root / ".store-format"
    mark.unlink()
    (store.root / ".legacy-swept").write_bytes(b"")  # what format-1 stores wrote
    assert Store(store.root).format() == 1
    with Store(store.root).transaction() as txn:
        txn.put("samples", "c2", _samples("b", 2.0))
    assert mark.read_text() == f"{STORE_FORMAT}\n" and not (store.root / ".legacy-swept").exists()
    mark.write_text(f"{STORE_FORMAT + 1}\n")
    for command in (["query", "SELECT 1"], ["store", "check"], ["assess", "--all"]):
        done = cli(*command, "--store", str(store.root))
        assert done.returncode == 1, command
        assert done.stderr == (
            f"error: {mark}: store format {STORE_FORMAT + 1} was written by a newer "
            f"explain-pipeline; this one reads formats up to {STORE_FORMAT}: upgrade it\n"
        )
    assert mark.read_text() == f"{STORE_FORMAT + 1}\n"
