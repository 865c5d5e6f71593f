"""Ingest: what is stored, what is rejected, and the integrity evidence (contract §2, §3, §6)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import MECHANISM, example_attempt, example_runs, write_example_campaign
from helpers import INGESTED_TABLES

from pipeline.errors import ExitCode, UsageError
from pipeline.ingestion.attempts import IngestReport, ingest
from pipeline.store.integrity import integrity_errors
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt


def outcomes(report: IngestReport) -> dict[str, str]:
    return dict(report.attempts.select("attempt_id", "outcome").iter_rows())


def stored_ids(store: Store, table: str) -> list[str]:
    return sorted(set(store.read(table)["attempt_id"]))


def integrity(store: Store) -> list[tuple[str | None, str]]:
    return list(store.read("integrity").select("attempt_id", "code").sort("attempt_id").iter_rows())


def edit_json(path: Path, **changes: object) -> None:
    doc = json.loads(path.read_text())
    doc.update(changes)
    doc = {k: v for k, v in doc.items() if v is not None}
    path.write_text(json.dumps(doc, indent=2) + "\n")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


# -- what is stored -------------------------------------------------------------------------
def test_every_input_table_gets_its_rows(attempts_dir: Path, store: Store) -> None:
    report = ingest(attempts_dir, store)
    assert report.exit_code == ExitCode.OK and report.issues == []
    assert outcomes(report) == {"r001": "ingested", "r002": "ingested"}
    # 2 attempts x 6 repetitions x 2 sides; 2 steps x 3 regions; 2 counters; 3 expectations
    heights = {t: store.read(t).height for t in INGESTED_TABLES}
    assert heights == {
        "campaigns": 1,
        "attempts": 2,
        "samples": 24,
        "breakdown": 144,
        "counters": 48,
        "expectations": 6,
        "integrity": 0,
    }


def test_campaign_row_has_the_policy_with_defaults(attempts_dir: Path, store: Store) -> None:
    ingest(attempts_dir, store)
    row = store.read("campaigns").row(0, named=True)
    assert (row["decision"], row["min_pairs"], row["resamples"]) == ("median", 5, 10000)
    assert row["policy_sha256"] == row["policy_sha256_actual"]
    source = (attempts_dir / "c1" / "campaign.json").read_bytes()
    assert row["source_sha256"] == hashlib.sha256(source).hexdigest()


def test_attempt_row_keeps_the_evidence(attempts_dir: Path, store: Store) -> None:
    ingest(attempts_dir, store)
    row = store.read("attempts").filter(pl.col("attempt_id") == "r001").row(0, named=True)
    digest = hashlib.sha256((attempts_dir / "c1/r001/mechanism.json").read_bytes()).hexdigest()
    assert row["mechanism_sha256"] == row["mechanism_sha256_actual"] == digest
    assert row["mechanism_sha256_first_seen"] == digest
    assert row["declared_at"].isoformat() == "2026-11-01T10:58:00+00:00"
    assert row["hypothesis"] == MECHANISM["hypothesis"] and row["n_lines"] == 12


def test_flat_breakdown_is_one_step_named_all(tmp_path: Path, store: Store) -> None:
    folder = write_example_campaign(tmp_path / "in", attempts=())
    runs = [
        {
            "side": "baseline",
            "repetition": 0,
            "status": "ok",
            "metric": 1.0,
            "breakdown": {"mlp": 0.5, "attention": 0.25},
        }
    ]
    write_attempt(folder, example_attempt("r1", 1, mechanism=False), runs)
    ingest(tmp_path / "in", store)
    rows = store.read("breakdown").select("step", "region", "seconds").sort("region").rows()
    assert rows == [("all", "attention", 0.25), ("all", "mlp", 0.5)]


def test_one_campaign_folder_as_source(attempts_dir: Path, store: Store) -> None:
    report = ingest(attempts_dir / "c1", store)
    assert outcomes(report) == {"r001": "ingested", "r002": "ingested"}


def test_missing_source_is_a_usage_error(tmp_path: Path, store: Store) -> None:
    with pytest.raises(UsageError, match=r"nowhere: no such folder"):
        ingest(tmp_path / "nowhere", store)


def test_folder_without_campaigns_is_a_usage_error(tmp_path: Path, store: Store) -> None:
    with pytest.raises(UsageError, match="no campaigns here"):
        ingest(tmp_path, store)


# -- rejection --------------------------------------------------------------------------------
def test_bad_attempt_is_rejected_whole_and_others_ingested(
    attempts_dir: Path, store: Store
) -> None:
    path = attempts_dir / "c1" / "r002" / "measurements.jsonl"
    runs = [json.loads(line) for line in path.read_text().splitlines()]
    runs[2]["x"] = 0
    runs[4]["metric"] = -1
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    report = ingest(attempts_dir, store)
    assert outcomes(report) == {"r001": "ingested", "r002": "rejected"}
    assert report.exit_code == ExitCode.REJECTED
    assert [str(i) for i in report.issues] == [
        f'{path}:3: field "x": is not a known field (known fields: breakdown, counters, '
        "finished_at, metric, order, repetition, side, started_at, status) [unknown_field]",
        f'{path}:5: field "metric": must be > 0 for an ok run, got -1 [not_positive]',
    ]
    for table in ("attempts", "samples", "breakdown", "counters", "expectations"):
        assert stored_ids(store, table) == ["r001"], table


def test_bad_campaign_json_rejects_all_its_attempts(attempts_dir: Path, store: Store) -> None:
    write_example_campaign(attempts_dir, "c2", attempts=("x1",))
    edit_json(attempts_dir / "c1" / "campaign.json", kind="suite")
    report = ingest(attempts_dir, store)
    assert sorted(report.attempts.select("campaign_id", "attempt_id", "outcome").rows()) == [
        ("c1", "r001", "rejected"),
        ("c1", "r002", "rejected"),
        ("c2", "x1", "ingested"),
    ]
    assert [i.code for i in report.issues] == ["not_allowed"]
    assert store.campaign_ids("samples") == ["c2"]


def test_campaign_folder_with_a_bad_name_is_not_used(attempts_dir: Path, store: Store) -> None:
    (attempts_dir / "c1").rename(attempts_dir / "c 1")
    report = ingest(attempts_dir, store)
    assert [str(i) for i in report.issues] == [
        f'{attempts_dir}/c 1: field "campaign_id": directory name must match '
        '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$, got "c 1" [bad_id]'
    ]
    assert report.exit_code == ExitCode.REJECTED and store.campaign_ids() == []


def test_benchmark_campaign_rejects_only_attempts_with_a_mechanism(
    tmp_path: Path, store: Store
) -> None:
    folder = write_example_campaign(
        tmp_path / "in", kind="benchmark", attempts=("plain",), mechanism=None
    )
    write_attempt(folder, example_attempt("declared", 2), example_runs(), mechanism=MECHANISM)
    report = ingest(tmp_path / "in", store)
    assert outcomes(report) == {"declared": "rejected", "plain": "ingested"}
    assert [i.code for i in report.issues] == ["mechanism_in_benchmark"]


def test_rejected_new_version_keeps_the_stored_one(attempts_dir: Path, store: Store) -> None:
    ingest(attempts_dir, store)
    before = store.read("samples")
    (attempts_dir / "c1" / "r001" / "measurements.jsonl").write_text("{broken\n")
    report = ingest(attempts_dir, store)
    assert outcomes(report) == {"r001": "rejected", "r002": "unchanged"}
    assert store.read("samples").equals(before)


def test_attempts_gone_from_disk_are_kept(attempts_dir: Path, store: Store) -> None:
    ingest(attempts_dir, store)
    for name in ("attempt.json", "measurements.jsonl", "mechanism.json"):
        (attempts_dir / "c1" / "r002" / name).unlink()
    (attempts_dir / "c1" / "r002").rmdir()
    (attempts_dir / "c1" / "r001" / "measurements.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in example_runs(7))
    )
    report = ingest(attempts_dir, store)
    assert outcomes(report) == {"r001": "replaced"}
    assert stored_ids(store, "samples") == ["r001", "r002"]


# -- integrity evidence ---------------------------------------------------------------------
def test_policy_digest_mismatch_is_stored_not_rejected(attempts_dir: Path, store: Store) -> None:
    edit_json(attempts_dir / "c1" / "campaign.json", policy_sha256="ab" * 32)
    report = ingest(attempts_dir, store)
    assert report.exit_code == ExitCode.OK
    row = store.read("integrity").row(0, named=True)
    actual = store.read("campaigns")["policy_sha256_actual"][0]
    assert (row["attempt_id"], row["code"], row["expected"], row["actual"]) == (
        None,
        "policy_digest_mismatch",
        "ab" * 32,
        actual,
    )
    assert row["message"] == (
        f"policy_sha256 {'ab' * 6}… does not match the sha256 "
        f"of the canonical policy {actual[:12]}…"
    )


def test_edited_mechanism_differs_from_attempt_json(attempts_dir: Path, store: Store) -> None:
    edit_json(attempts_dir / "c1" / "r001" / "mechanism.json", hypothesis="edited")
    ingest(attempts_dir, store)
    assert integrity(store) == [("r001", "mechanism_digest_mismatch")]


def test_mechanism_changed_after_first_ingest_even_with_matching_attempt_json(
    attempts_dir: Path, store: Store
) -> None:
    ingest(attempts_dir, store)
    folder = attempts_dir / "c1" / "r001"
    first = hashlib.sha256((folder / "mechanism.json").read_bytes()).hexdigest()
    edit_json(folder / "mechanism.json", hypothesis="rewritten after the run")
    now = hashlib.sha256((folder / "mechanism.json").read_bytes()).hexdigest()
    edit_json(folder / "attempt.json", mechanism_sha256=now)
    report = ingest(attempts_dir, store)
    assert outcomes(report)["r001"] == "replaced"
    rows = store.read("integrity").select("attempt_id", "code", "expected", "actual").rows()
    assert rows == [("r001", "mechanism_changed", first, now)]
    # and the first digest stays the reference on every later ingest
    edit_json(folder / "attempt.json", candidate="renamed")
    ingest(attempts_dir, store)
    attempts = store.read("attempts").filter(pl.col("attempt_id") == "r001")
    assert attempts["mechanism_sha256_first_seen"].to_list() == [first]
    assert integrity(store) == [("r001", "mechanism_changed")]


def test_declared_after_start(attempts_dir: Path, store: Store) -> None:
    edit_json(
        attempts_dir / "c1" / "r002" / "attempt.json", declared_at="2026-11-01T12:00:01+00:00"
    )
    ingest(attempts_dir, store)
    row = store.read("integrity").row(0, named=True)
    assert (row["attempt_id"], row["code"], row["expected"], row["actual"]) == (
        "r002",
        "declared_after_start",
        "2026-11-01T12:00:00Z",
        "2026-11-01T12:00:01Z",
    )


def test_mechanism_file_missing(attempts_dir: Path, store: Store) -> None:
    (attempts_dir / "c1" / "r001" / "mechanism.json").unlink()
    ingest(attempts_dir, store)
    assert integrity(store) == [("r001", "mechanism_file_missing")]
    assert store.read("expectations")["attempt_id"].unique().to_list() == ["r002"]


def test_mechanism_digest_missing(attempts_dir: Path, store: Store) -> None:
    edit_json(
        attempts_dir / "c1" / "r001" / "attempt.json", mechanism_sha256=None, declared_at=None
    )
    ingest(attempts_dir, store)
    assert integrity(store) == [("r001", "mechanism_digest_missing")]


def test_fixing_the_input_clears_the_integrity_rows(attempts_dir: Path, store: Store) -> None:
    path = attempts_dir / "c1" / "campaign.json"
    original = path.read_bytes()
    edit_json(path, policy_sha256="ab" * 32)
    ingest(attempts_dir, store)
    assert integrity(store) == [(None, "policy_digest_mismatch")]
    path.write_bytes(original)
    ingest(attempts_dir, store)
    assert integrity(store) == []


def test_integrity_errors_is_a_pure_function_of_the_evidence() -> None:
    attempts = pl.DataFrame(
        {
            "campaign_id": ["c", "c"],
            "attempt_id": ["a1", "a2"],
            "declared_at": [None, None],
            "started_at": [None, None],
            "mechanism_sha256": ["1" * 64, None],
            "mechanism_sha256_actual": ["2" * 64, None],
            "mechanism_sha256_first_seen": ["1" * 64, None],
        },
        schema_overrides={
            "declared_at": pl.Datetime("us", "UTC"),
            "started_at": pl.Datetime("us", "UTC"),
        },
    )
    campaigns = pl.DataFrame(
        {"campaign_id": ["c"], "policy_sha256": ["x"], "policy_sha256_actual": ["x"]}
    )
    found = integrity_errors(campaigns, attempts)
    assert found.select("attempt_id", "code").rows() == [
        ("a1", "mechanism_changed"),
        ("a1", "mechanism_digest_mismatch"),
    ]
    assert found["message"][1] == (
        f"mechanism.json sha256 {'2' * 12}… differs from attempt.json mechanism_sha256 {'1' * 12}…"
    )


def test_mechanism_that_appears_after_the_first_ingest_is_a_change(
    tmp_path: Path, store: Store
) -> None:
    write_example_campaign(tmp_path / "in", attempts=("r001",), mechanism=None)
    ingest(tmp_path / "in", store)
    write_attempt(
        tmp_path / "in" / "c1", example_attempt("r001", 1), example_runs(), mechanism=MECHANISM
    )  # declared later, digest recorded to match
    report = ingest(tmp_path / "in", store)
    assert outcomes(report) == {"r001": "replaced"}
    row = store.read("integrity").row(0, named=True)
    digest = hashlib.sha256((tmp_path / "in/c1/r001/mechanism.json").read_bytes()).hexdigest()
    assert (row["code"], row["expected"], row["actual"]) == ("mechanism_changed", None, digest)
    assert row["message"] == (
        f"mechanism.json (sha256 {digest[:12]}…) appeared after the attempt was first ingested"
    )


# -- the recorder's optional fields ---------------------------------------------------------
def test_recorded_fields_are_stored_and_older_files_read_as_nulls(
    tmp_path: Path, store: Store
) -> None:
    root = tmp_path / "attempts"
    folder = write_example_campaign(root, attempts=("r001",))
    environment = {"host": "box", "cpu_count": "2"}
    runs = [
        {
            **line,
            "order": (line["repetition"] + (line["side"] == "candidate")) % 2,
            "started_at": f"2026-11-01T12:00:{i:02d}.25+01:00",
            "finished_at": f"2026-11-01T12:00:{i:02d}.75+01:00",
        }
        for i, line in enumerate(example_runs(6))
    ]
    recorded = {
        **example_attempt("r002", 2),
        "order_seed": 42,
        "recorder": "explain-pipeline 0.1.0",
        "environment": environment,
    }
    write_attempt(folder, recorded, runs, mechanism=MECHANISM)
    report = ingest(root, store)
    assert report.issues == [] and report.exit_code == ExitCode.OK
    attempts = store.read("attempts").sort("attempt_id")
    assert attempts["order_seed"].to_list() == [None, 42]
    assert attempts["recorder"].to_list() == [None, "explain-pipeline 0.1.0"]
    assert attempts["environment"].to_list() == [None, '{"cpu_count":"2","host":"box"}']
    samples = store.read("samples").sort("attempt_id", "line")
    old, new = samples.partition_by("attempt_id", maintain_order=True)
    assert old.select("order", "started_at", "finished_at").null_count().row(0) == (12, 12, 12)
    assert new["order"].to_list() == [r["order"] for r in runs]
    assert new["started_at"][0].isoformat() == "2026-11-01T11:00:00.250000+00:00"
    assert (new["finished_at"] - new["started_at"]).dt.total_milliseconds().to_list() == [500] * 12
    assert samples.schema["order"] == pl.Int64
