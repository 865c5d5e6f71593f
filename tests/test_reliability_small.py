"""The small cases of issue 27: ab's verdict printed when its price cannot be computed, plan on a
campaign whose min_pairs is above the default maximum, an unwritable job summary, and
--metric-source cpu in a better-higher campaign. Each failed on the previous code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_result as run_main

from pipeline.study.stored import write_attempt, write_campaign

ROOT = Path(__file__).resolve().parent.parent
EXPLAIN = [sys.executable, "-m", "pipeline"]


@pytest.mark.slow
def test_ab_prints_its_verdict_when_the_price_cannot_be_computed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "metric.py"
    script.write_text(
        "import json, os, sys\n"
        "open(os.environ['EXPLAIN_MEASUREMENT'], 'w').write(json.dumps({'metric': "
        "float(sys.argv[1])}))\n"
    )
    a, b = (f"{sys.executable} {script} {value}" for value in ("1e-300", "1e300"))
    code, out, err = run_main(["ab", a, b, "-n", "5", "--warmup", "0"], capsys)
    assert code == 5, err  # not PASS; before the fix: exit 2, "no attempt has two pairs"
    assert "verdict: INCONCLUSIVE (not_finite)" in out  # 1e300 / 1e-300 overflows
    assert "to detect a true gain" not in out and "error" not in err


def test_plan_on_a_campaign_whose_min_pairs_is_above_the_default_maximum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_campaign(
        tmp_path / "attempts",
        "big",
        created_at="2026-11-01T10:00:00Z",
        metric={"name": "s", "better": "lower"},
        policy={"decision": "paired", "min_pairs": 100},
    )
    runs = [
        {"side": side, "repetition": r, "status": "ok", "metric": 1.0 + 0.01 * ((r * 3) % 5)}
        for r in range(6)
        for side in ("baseline", "candidate")
    ]
    attempt = {
        "attempt_id": "r001",
        "round": 1,
        "candidate": "b",
        "baseline": "a",
        "status": "completed",
        "started_at": "2026-11-01T12:00:00Z",
    }
    write_attempt(folder, attempt, runs)
    code, out, err = run_main(["plan", str(folder)], capsys)
    assert code == 0, err  # before the fix: exit 2 on --max-repetitions 40, never given
    assert "looks every 2 pairs from 100 to 100" in out
    code, _, err = run_main(["plan", str(folder), "--max-repetitions", "40"], capsys)
    assert code == 2 and "at least the first look, 100" in err  # given: still checked


@pytest.mark.slow
def test_an_unwritable_job_summary_is_a_warning_and_the_gate_keeps_its_code(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    shutil.copytree(ROOT / "data" / "attempts", tmp_path / "attempts")
    subprocess.run([*EXPLAIN, "ingest", str(tmp_path / "attempts"), "--store", str(store)],
                   check=True, capture_output=True)  # fmt: skip
    gate = [*EXPLAIN, "assess", "llama-decode-2026-11", "--store", str(store), "--gate"]
    plain = subprocess.run(gate, capture_output=True, text=True, check=False)
    env = {
        **os.environ,
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "no-such-folder" / "summary.md"),
    }
    done = subprocess.run(gate, capture_output=True, text=True, check=False, env=env)
    assert done.returncode == plain.returncode, done.stderr  # before the fix: 2
    assert done.stdout == plain.stdout
    assert "warning: " in done.stderr and "cannot append the job summary" in done.stderr
    assert "::notice title=explain-pipeline" in done.stderr or "::error title=" in done.stderr


def test_metric_source_cpu_in_a_better_higher_campaign_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "attempts" / "tput"
    code, _, _ = run_main(
        ["campaign", "start", str(folder), "--metric", "tok_s", "--better", "higher"], capsys
    )
    assert code == 0
    code, _, err = run_main(
        ["round", str(folder), "--baseline", "a", "--candidate", "b", "--baseline-cmd", "true",
         "--candidate-cmd", "true", "--metric-source", "cpu", "-n", "5"],
        capsys,
    )  # fmt: skip
    assert code == 2, err  # before the fix: every run failed, exit 6
    assert "--metric-source cpu measures a time" in err
    assert sorted(p.name for p in folder.iterdir()) == ["campaign.json"]  # nothing ran
    assert json.loads((folder / "campaign.json").read_text())["metric"]["better"] == "higher"


@pytest.mark.slow
def test_round_until_decided_on_a_campaign_whose_min_pairs_is_above_the_default_maximum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "attempts" / "big"
    code, _, err = run_main(
        ["campaign", "start", str(folder), "--metric", "s", "--decision", "paired",
         "--interval", "sequential_t", "--min-pairs", "42"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run_main(
        ["round", str(folder), "--baseline", "a", "--candidate", "b", "--baseline-cmd", "true",
         "--candidate-cmd", "true", "--warmup", "0", "--until-decided"],
        capsys,
    )  # fmt: skip
    assert code == 0, err  # before the fix: exit 2 on --max-repetitions 40, never given
    plan = json.loads((folder / "r001" / "attempt.json").read_text())["sequential"]
    assert (plan["first_look"], plan["max_pairs"]) == (42, 42)


@pytest.mark.parametrize("length", [4096, 4097])
def test_import_never_writes_a_name_ingest_would_reject(
    length: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The line check's fast path tested names for being non-empty strings only: a region of
    4,097 characters was written, then rejected by ingest as too_long."""
    name = "n" * (length - len("t.py::"))
    results = tmp_path / "results.json"
    bench = {"name": name, "fullname": f"t.py::{name}", "stats": {"median": 0.001}}
    results.write_text(json.dumps({"benchmarks": [bench]}))
    out = tmp_path / "measurements.jsonl"
    code, _, err = run_main(
        ["import", "pytest-benchmark", str(results), "--side", "baseline", "--repetition", "0",
         "-o", str(out)],
        capsys,
    )  # fmt: skip
    if length > 4096:
        assert code == 1 and not out.exists(), err
        assert err.startswith(f"error: {results}: field ") and err.rstrip().endswith("[too_long]")
    else:
        assert code == 0, err
        line = json.loads(out.read_text())
        assert list(line["breakdown"]["all"]) == [f"t.py::{name}"]
