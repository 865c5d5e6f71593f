"""`--engine ray`: ingest and assess on a Ray cluster store exactly what the local engine stores.

One local 2-CPU Ray cluster is started for the whole module (starting one takes several seconds,
much more on a loaded machine) and shut down at the end, and the test checks that none of its
processes is left behind. The CLI runs in this process (it joins that cluster) or, once, in a
subprocess that connects to it with --ray-address, as a driver on a real cluster would.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import ray
from conftest import cli_result as cli

from pipeline.assessment.campaigns import assess
from pipeline.cli import main
from pipeline.engines import open_engine
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt, write_campaign

pytestmark = pytest.mark.slow  # real processes, Ray, a browser or long simulations

MECHANISM = {
    "hypothesis": "fusing saves launches",
    "expectations": [
        {"target": "region", "name": "attn", "expect": "decrease"},
        {"target": "counter", "name": "launches", "expect": "decrease"},
        {"target": "region", "name": "ref", "expect": "unchanged"},
    ],
}


# -- inputs ------------------------------------------------------------------------------------
def _runs(rng: np.random.Generator, gain: float) -> list[dict[str, Any]]:
    """Noisy paired runs (lognormal drift per run), a failed run and an unpaired repetition."""
    out: list[dict[str, Any]] = []
    for rep in range(7):
        for side, g in (("baseline", 1.0), ("candidate", gain)):
            if (rep, side) == (6, "candidate"):
                continue
            if rng.random() < 0.08:
                out.append({"side": side, "repetition": rep, "status": "failed"})
                continue
            d = float(rng.lognormal(0, 0.03))
            bd = {
                s: {"attn": round(g * d * 0.4, 7), "mlp": round(d, 7), "ref": round(d * 0.5, 7)}
                for s in ("s0", "s1")
            }
            metric = round(sum(v for r in bd.values() for v in r.values()), 7)
            out.append(
                {
                    "side": side,
                    "repetition": rep,
                    "status": "ok",
                    "metric": metric,
                    "breakdown": bd,
                    "counters": {"launches": round(100 * g)},
                }
            )
    return out


def _campaign(root: Path, cid: str, n: int, seed: int, better: str = "lower") -> Path:
    rng = np.random.default_rng(seed)
    metric = {"name": "e2e_seconds", "better": better}
    folder = write_campaign(
        root, cid, created_at="2026-11-01T09:00:00Z", metric=metric, policy={"resamples": 300}
    )
    for rnd in range(1, n + 1):
        doc = {
            "attempt_id": f"r{rnd:03d}",
            "round": rnd,
            "candidate": f"cand-{rnd}",
            "baseline": "main",
            "status": "completed" if rnd < 4 else "failed",
            "started_at": "2026-11-01T12:00:00Z",
        }
        if rnd % 2:
            doc["declared_at"] = "2026-11-01T11:00:00Z"
        gain = float(rng.choice([0.7, 0.97, 1.0, 1.2]))
        write_attempt(folder, doc, _runs(rng, gain), mechanism=MECHANISM if rnd % 2 else None)
    return folder


def attempts_folder(root: Path) -> Path:
    """Four campaigns; `gamma`'s mechanism was edited after its digest was recorded (blocked)."""
    _campaign(root, "alpha", 4, 1)
    _campaign(root, "beta", 2, 2, better="higher")
    _campaign(root, "delta", 3, 4)
    gamma = _campaign(root, "gamma", 1, 3)
    edited = {"schema": "explain-pipeline/mechanism/v1", **MECHANISM, "hypothesis": "edited"}
    (gamma / "r001" / "mechanism.json").write_text(json.dumps(edited))
    return root


def store_files(store: Path) -> dict[str, pl.DataFrame]:
    """Every Parquet file of a store (the transaction journal and lock are not data)."""
    return {str(p.relative_to(store)): pl.read_parquet(p) for p in sorted(store.rglob("*.parquet"))}


def assert_same_store(a: Path, b: Path) -> None:
    left, right = store_files(a), store_files(b)
    assert list(left) == list(right)
    for name, frame in left.items():
        assert frame.equals(right[name], null_equal=True), name  # exact, to the last bit


# -- the cluster ---------------------------------------------------------------------------------
def _processes_of(gcs_address: str) -> list[str]:
    """Command lines of live processes that belong to the cluster at ``gcs_address``."""
    port = gcs_address.rsplit(":", 1)[1]
    found = []
    for proc in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = proc.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if gcs_address in cmd or f"--gcs_server_port={port}" in cmd:
            found.append(cmd)
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local 2-CPU Ray cluster for this module; its GCS address."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    address = ray.get_runtime_context().gcs_address
    assert _processes_of(address)  # the check below can see the cluster's processes
    try:
        yield address
    finally:
        ray.shutdown()
        deadline = time.monotonic() + 30
        while _processes_of(address) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _processes_of(address) == [], "Ray processes left behind"


@pytest.fixture
def ingested(tmp_path: Path) -> Path:
    """A store with the four campaigns ingested (by the local engine)."""
    store = tmp_path / "store"
    main_args = ["ingest", str(attempts_folder(tmp_path / "attempts")), "--store", str(store)]
    with pytest.raises(SystemExit) as exc:
        main(main_args)
    assert exc.value.code == 0
    return store


# -- tests ---------------------------------------------------------------------------------------
def test_assess_all_from_another_process_stores_what_local_stores(
    cluster: str, ingested: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real entry point in a subprocess, a driver joining the cluster by its address."""
    local, remote = tmp_path / "local", tmp_path / "ray"
    shutil.copytree(ingested, local)
    shutil.copytree(ingested, remote)
    code, out, err = cli(["assess", "--all", "--store", str(local)], capsys)
    assert (code, err) == (3, "error: blocked by integrity errors: gamma\n")
    command = [
        sys.executable,
        "-m",
        "pipeline",
        "assess",
        "--all",
        "--store",
        str(remote),
        "--engine",
        "ray",
        "--ray-address",
        cluster,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert (done.returncode, done.stdout, done.stderr) == (code, out, err)
    assert_same_store(local, remote)
    assessments = pl.read_parquet(remote / "assessments")
    assert sorted(set(assessments["campaign_id"])) == ["alpha", "beta", "delta"]
    assert assessments.height == 9 and not (remote / "assessments" / "campaign_id=gamma").exists()


def test_many_tasks_give_the_local_results(cluster: str, ingested: Path, tmp_path: Path) -> None:
    """Batches of at most 2 attempts: several tasks in flight at once, a campaign sliced."""
    local, remote = tmp_path / "local", tmp_path / "ray"
    shutil.copytree(ingested, local)
    shutil.copytree(ingested, remote)
    expected = assess(Store(local), batch_size=2)
    with open_engine("ray") as engine:
        got = assess(Store(remote), batch_size=2, engine=engine)
    assert got.recomputed == expected.recomputed == 9
    for name in ("assessments", "comparisons", "outcomes", "blocked"):
        assert getattr(got, name).equals(getattr(expected, name), null_equal=True), name
    assert_same_store(local, remote)


def test_what_if_on_ray_prints_what_local_prints_and_writes_nothing(
    cluster: str, ingested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["assess", "--all", "--store", str(ingested)], capsys)[0] == 3
    before = store_files(ingested)
    args = [
        "assess",
        "--all",
        "--store",
        str(ingested),
        "--format",
        "json",
        "--what-if",
        "resamples=400",
        "--what-if",
        "decision=paired",
    ]
    local = cli(args, capsys)
    remote = cli([*args, "--engine", "ray"], capsys)
    assert local == remote and local[0] == 3
    doc = json.loads(remote[1])
    assert doc["what_if"] == {"resamples": "400", "decision": "paired"}
    assert sum(len(c["attempts"]) for c in doc["campaigns"]) == 9
    after = store_files(ingested)
    assert list(after) == list(before)
    assert all(after[n].equals(before[n], null_equal=True) for n in before)


def test_ingest_on_ray_stores_what_local_stores(
    cluster: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Relative paths, as a user types them: workers resolve them in the driver's directory, so
    messages and attempts.source_dir are the same. A rejected attempt, then a changed one."""
    monkeypatch.chdir(tmp_path)
    attempts_folder(Path("attempts"))
    bad = Path("attempts/beta/r002/measurements.jsonl")
    bad.write_text(bad.read_text().replace('"metric":', '"metric":-', 1))
    runs: list[tuple[int, str, str]] = []
    for engine in ("local", "ray"):
        runs.append(cli(["ingest", "attempts", "--store", engine, "--engine", engine], capsys))
    assert runs[0] == runs[1] and runs[0][0] == 1
    assert "attempts/beta/r002/measurements.jsonl:" in runs[0][2]
    assert_same_store(Path("local"), Path("ray"))
    changed = {
        "attempt_id": "r002",
        "round": 2,
        "candidate": "c",
        "baseline": "main",
        "status": "completed",
        "started_at": "2026-11-01T12:00:00Z",
    }
    write_attempt(Path("attempts/alpha"), changed, _runs(np.random.default_rng(9), 0.8))
    again = [
        cli(["ingest", "attempts", "--store", e, "--engine", e], capsys) for e in ("local", "ray")
    ]
    assert again[0] == again[1]
    assert re.search(r"^alpha +unchanged +0 +1 +3 +0$", again[0][1], re.MULTILINE)
    assert_same_store(Path("local"), Path("ray"))
    sources = pl.read_parquet("ray/attempts")["source_dir"].to_list()
    assert "attempts/alpha/r001" in sources


def test_an_error_in_a_worker_reads_as_with_the_local_engine(
    cluster: str, ingested: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged input partition: the worker's error comes back as the one-line message and
    exit code of the local engine, and nothing is written."""
    (ingested / "samples" / "campaign_id=beta" / "data.parquet").write_bytes(b"garbage")
    args = ["assess", "--all", "--store", str(ingested)]
    local = cli(args, capsys)
    remote = cli([*args, "--engine", "ray"], capsys)
    assert local == remote
    code, out, err = remote
    assert code in (1, 4) and out == "" and err.count("\n") == 1  # one line, no traceback
    assert not (ingested / "assessments").exists()


def test_ray_address_without_ray_engine_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(
        ["assess", "--all", "--store", str(tmp_path), "--ray-address", "auto"], capsys
    )
    assert (code, err) == (2, "error: --ray-address needs --engine ray\n")


def test_unreachable_ray_address_exits_2_at_once(tmp_path: Path) -> None:
    """In a subprocess: this process has a Ray session already, which the engine would join."""
    command = [
        sys.executable,
        "-m",
        "pipeline",
        "assess",
        "--all",
        "--store",
        str(tmp_path),
        "--engine",
        "ray",
        "--ray-address",
        "127.0.0.1:1",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    expected = (
        "error: --ray-address 127.0.0.1:1: no Ray cluster answers there (Connection refused)\n"
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", expected)


def test_without_ray_the_engine_exits_2_with_the_install_command(tmp_path: Path) -> None:
    """A real run where `import ray` fails: a `ray` package first on PYTHONPATH that raises
    ImportError, as an environment without the ray extra does."""
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shim")}
    attempts = attempts_folder(tmp_path / "attempts")
    expected = (
        "error: --engine ray needs Ray (No module named 'ray'); install it with: "
        "pip install 'explain-pipeline[ray]'\n"
    )
    for args in (["ingest", str(attempts)], ["assess", "--all"]):
        command = [
            sys.executable,
            "-m",
            "pipeline",
            *args,
            "--store",
            str(tmp_path / "s"),
            "--engine",
            "ray",
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", expected)
    assert not (tmp_path / "s").exists()  # nothing was written
