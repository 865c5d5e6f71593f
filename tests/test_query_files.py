"""`query` reads only the store's tables unless --allow-files; `report` never writes through a
symbolic link at its temporary name."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from conftest import write_example_campaign
from helpers import cli_process

from pipeline.assessment.campaigns import assess
from pipeline.ingestion.attempts import ingest
from pipeline.store.tables import Store

REFUSED = (
    "error: query reads only the store's tables: {name} would read a file or URL "
    "(pass --allow-files to allow it)\n"
)


@pytest.fixture(scope="module")
def assessed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("assessed")
    write_example_campaign(root / "attempts", attempts=("r001",))
    store = Store(root / "store")
    ingest(root / "attempts", store)
    assess(store)
    return store.root


# A proxy that refuses every connection: any network attempt would fail differently.
cli = partial(
    cli_process, env={"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
)


@pytest.mark.slow
def test_table_functions_are_refused_in_every_spelling_then_allowed(
    assessed: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("token\n4242\n")
    spellings = [
        (f"SELECT * FROM read_csv('{secret}')", "read_csv"),
        (f"SELECT * FROM \"read_csv\"('{secret}')", "read_csv"),
        (f"select * from READ_CSV('{secret}')", "READ_CSV"),
        (f"SELECT * FROM samples, /* x */ read_csv ('{secret}') AS s", "read_csv"),
        ("SELECT * FROM Read_Parquet('https://example.invalid/x.parquet')", "Read_Parquet"),
        ("SELECT * FROM read_json('s3://bucket/x.json')", "read_json"),
    ]
    for sql, name in spellings:
        done = cli("query", sql, "--store", str(assessed))
        assert (done.returncode, done.stdout) == (2, ""), sql
        assert done.stderr == REFUSED.format(name=f'"{name}"'), sql
    allowed = cli(
        "query",
        f"SELECT * FROM read_csv('{secret}')",
        "--store",
        str(assessed),
        "--format",
        "csv",
        "--allow-files",
    )
    assert (allowed.returncode, allowed.stdout) == (0, "token\n4242\n"), allowed.stderr


def test_queries_over_the_store_tables_still_run(assessed: Path) -> None:
    done = cli(
        "query", "SELECT count(*) AS n FROM samples", "--store", str(assessed), "--format", "csv"
    )
    assert (done.returncode, done.stdout) == (0, "n\n12\n"), done.stderr


@pytest.mark.slow
def test_report_never_writes_through_a_link_at_a_predictable_name(
    assessed: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    for name in (".report.html.tmp", ".report.html.tmp.0", "report.html.tmp"):
        (out / name).symlink_to(victim)
    done = cli("report", "c1", "--store", str(assessed), "-o", str(out / "report.html"))
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me"
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert not (out / "report.html").is_symlink()
    leftovers = sorted(p.name for p in out.iterdir())
    assert leftovers == sorted(
        [".report.html.tmp", ".report.html.tmp.0", "report.html.tmp", "report.html"]
    )
