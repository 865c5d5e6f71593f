"""The store never acts through a symbolic link planted among its own paths (issue 19, item 1).

Each case puts a link where the store expects a folder or a file, pointing at a victim outside
the store, runs a real command, and checks that the command stops with exit 3 naming the link,
that the victim is exactly as it was, and that `store check` names the link without advising to
delete anything outside the store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import cli_result as run_main

from pipeline.errors import ExitCode


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every path under ``folder`` with its bytes (files) or kind (the rest)."""
    seen: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        seen[key] = path.read_bytes() if path.is_file() and not path.is_symlink() else "dir/link"
    return seen


def change_a_metric(attempts: Path) -> None:
    """So the next ingest rewrites the campaign's partitions."""
    path = attempts / "c1" / "r001" / "measurements.jsonl"
    runs = [json.loads(text) for text in path.read_text().splitlines()]
    runs[0]["metric"] = 0.5
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))


@pytest.fixture
def store(attempts_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    root = tmp_path / "store"
    code, _, err = run_main(["ingest", str(attempts_dir), "--store", str(root)], capsys)
    assert code == 0, err
    return root


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder outside the store with files a careless store would delete or overwrite."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    (folder / "settings.json").write_text('{"ops": []}')  # looks like an empty journal
    (folder / "sub").mkdir()
    (folder / "sub" / "data.parquet").write_text("not a store file")
    return folder


def assert_refused(
    code: int, out: str, err: str, link: Path, victim: Path, before: dict[str, bytes | str]
) -> None:
    assert code == ExitCode.INTEGRITY, err
    assert err.startswith(f"error: {link}: the store expects a "), err
    assert "found a symbolic link; nothing was read, written or deleted through it" in err
    assert "Traceback" not in err
    assert snapshot(victim) == before


def assert_check_names(store: Path, link: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["store", "check", "--store", str(store)], capsys)
    assert code == ExitCode.REJECTED
    assert f"{link}: the store expects a " in out
    assert "stray staging files" not in out  # the victim's files are not listed as the store's
    assert "victim" not in out.replace(str(link), "")  # nothing outside is named or advised


@pytest.mark.parametrize("command", [["store", "repair"], ["ingest", "ATTEMPTS"]])
def test_a_linked_staging_folder_is_refused_and_its_target_kept(
    store: Path,
    victim: Path,
    attempts_dir: Path,
    command: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    # before the fix: store repair empties the victim (its entries are taken for stray staging
    # folders)
    (store / "_staging").symlink_to(victim)
    before = snapshot(victim)
    change_a_metric(attempts_dir)
    args = [str(attempts_dir) if a == "ATTEMPTS" else a for a in command]
    code, out, err = run_main([*args, "--store", str(store)], capsys)
    assert_refused(code, out, err, store / "_staging", victim, before)
    assert_check_names(store, store / "_staging", capsys)
    assert snapshot(victim) == before


def test_a_linked_journal_folder_is_refused_and_its_json_files_kept(
    store: Path, victim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before the fix: settings.json ({"ops": []}) is taken for a journal, "applied" and deleted
    (store / "_txn").rmdir()  # empty between writes
    (store / "_txn").symlink_to(victim)
    before = snapshot(victim)
    code, out, err = run_main(["query", "SELECT 1 AS one", "--store", str(store)], capsys)
    assert_refused(code, out, err, store / "_txn", victim, before)
    assert_check_names(store, store / "_txn", capsys)


@pytest.mark.parametrize("name", [".lock", ".store-format"])
def test_a_linked_lock_or_marker_creates_nothing_outside(
    store: Path,
    victim: Path,
    attempts_dir: Path,
    name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # before the fix: the lock is opened and the marker touched through the link:
    # victim/created appears
    (store / name).unlink()
    (store / name).symlink_to(victim / "created")
    before = snapshot(victim)
    change_a_metric(attempts_dir)
    code, out, err = run_main(["ingest", str(attempts_dir), "--store", str(store)], capsys)
    assert_refused(code, out, err, store / name, victim, before)
    assert not (victim / "created").exists()
    assert_check_names(store, store / name, capsys)


@pytest.mark.parametrize("where", ["table", "partition"])
def test_a_linked_table_or_partition_folder_is_never_written_through(
    store: Path,
    tmp_path: Path,
    attempts_dir: Path,
    where: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # before the fix: ingest renames the new data.parquet into the folder outside the store
    folder = store / "samples" if where == "table" else store / "samples" / "campaign_id=c1"
    outside = tmp_path / "outside"
    shutil.move(folder, outside)
    folder.symlink_to(outside)
    before = snapshot(outside)
    change_a_metric(attempts_dir)
    code, out, err = run_main(["ingest", str(attempts_dir), "--store", str(store)], capsys)
    assert_refused(code, out, err, folder, outside, before)
    assert_check_names(store, folder, capsys)


@pytest.mark.parametrize("command", [["query", "SELECT * FROM samples"], ["assess", "c1"]])
def test_a_linked_partition_file_is_not_read(
    store: Path, tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # before the fix: the file outside is read as the campaign's samples
    path = store / "samples" / "campaign_id=c1" / "data.parquet"
    outside = tmp_path / "outside.parquet"
    shutil.move(path, outside)
    path.symlink_to(outside)
    before = outside.read_bytes()
    code, out, err = run_main([*command, "--store", str(store)], capsys)
    assert code == ExitCode.INTEGRITY, err
    assert err.startswith(f"error: {path}: the store expects a file here, found a symbolic link")
    assert outside.read_bytes() == before
    assert_check_names(store, path, capsys)
