"""The store defends itself: journals cannot reach outside it, damaged files are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli_result as run_main
from helpers import sample_row as _samples

from pipeline.errors import StoreError
from pipeline.store.tables import Store


@pytest.fixture
def small_store(tmp_path: Path) -> Path:
    """A store with one samples partition and a victim file beside it (outside the store)."""
    root = tmp_path / "store"
    store = Store(root)
    with store.transaction() as txn:
        txn.put("samples", "c1", _samples("a", 1.0))
    (tmp_path / "victim").write_text("keep me")
    return root


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def write_journal(root: Path, body: str, name: str = "0.json") -> Path:
    journal = root / "_txn" / name
    journal.parent.mkdir(exist_ok=True)
    journal.write_text(body)
    return journal


@pytest.mark.parametrize(
    ("ops", "reason"),
    [
        ([{"target": "../victim", "staged": None}], '"ops[0].target": "../victim" is outside'),
        ([{"target": "/tmp/x/victim", "staged": None}], '"ops[0].target": "/tmp/x/victim" is out'),
        (
            [{"target": "samples/campaign_id=c1/data.parquet", "staged": "../victim"}],
            'field "ops[0].staged": "../victim" is outside the store',
        ),
        ([{"target": "samples/../../victim", "staged": None}], "is outside the store"),
    ],
)
def test_a_journal_reaching_outside_the_store_is_refused_and_touches_nothing(
    small_store: Path,
    ops: list[dict[str, object]],
    reason: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    journal = write_journal(small_store, json.dumps({"txid": "x", "ops": ops}))
    before, outside = files(small_store), files(small_store.parent)
    code, out, err = run_main(["query", "SELECT 1 AS one", "--store", str(small_store)], capsys)
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {journal}: ")
    assert reason in err and "nothing was changed" in err
    assert files(small_store) == before
    assert files(small_store.parent) == outside  # the victim is still there, unchanged


def test_a_journal_through_a_symlinked_partition_is_refused(small_store: Path) -> None:
    elsewhere = small_store.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data.parquet").write_text("not ours")
    (small_store / "samples" / "campaign_id=evil").symlink_to(elsewhere)
    target = "samples/campaign_id=evil/data.parquet"
    ops = [{"target": target, "staged": None}]
    write_journal(small_store, json.dumps({"txid": "x", "ops": ops}))
    with pytest.raises(StoreError, match="is outside the store"):
        Store(small_store)
    assert (elsewhere / "data.parquet").read_text() == "not ours"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("{x", "not valid JSON"),
        ('{"txid": "x"}', 'field "ops": missing'),
        ('{"ops": [{"target": 3, "staged": null}]}', '"ops[0].target": must be a path, got 3'),
        (
            '{"txid": "x", "ops": [{"target": "campaigns/campaign_id=c1/x.txt", "staged": null}]}',
            "not a partition file",
        ),
    ],
)
def test_a_corrupt_journal_is_named_with_exit_1(
    small_store: Path, body: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = write_journal(small_store, body)
    before = files(small_store)
    code, out, err = run_main(["query", "SELECT 1 AS one", "--store", str(small_store)], capsys)
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {journal}: ") and reason in err
    assert "Traceback" not in err
    assert files(small_store) == before


@pytest.mark.parametrize(
    "command",
    [
        ["assess", "--all"],
        ["assess", "c1"],
        ["report", "c1"],
        ["report", "--all"],
        ["query", "SELECT 1 AS one"],
    ],
)
@pytest.mark.parametrize("kind", ["missing", "empty folder"])
def test_commands_that_read_need_an_existing_store_and_create_nothing(
    tmp_path: Path,
    command: list[str],
    kind: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # report's default output would land here
    path = tmp_path / "mistyped"
    if kind == "empty folder":
        path.mkdir()
    code, out, err = run_main([*command, "--store", str(path)], capsys)
    assert (code, out) == (2, "")
    hint = "(run `explain-pipeline ingest` first, or pass --store)"
    assert err == f"error: no store at {path} {hint}\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == (["mistyped"] if path.exists() else [])
