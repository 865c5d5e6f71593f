"""pipeline.record.campaign called directly: start, final and ab from Python, and ab deciding
alike from Python and from the command line (its policy defaults live in the library)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import CliRun, write_example_campaign

from pipeline.cli.record import ab_command, round_command
from pipeline.contract.policy import POLICY_DEFAULTS, policy_sha256
from pipeline.errors import UsageError
from pipeline.record.campaign import ab, final_campaign, start_campaign
from pipeline.record.options import AB_POLICY, RunOptions, ab_policy
from pipeline.store.tables import Store

pytestmark = pytest.mark.slow  # ab runs real processes

MEASURED = (
    "import json, os, sys\n"
    "side, rep = os.environ['EXPLAIN_SIDE'], int(os.environ['EXPLAIN_REPETITION'])\n"
    "factor = float(sys.argv[1]) if side == 'candidate' else 1.0\n"
    "wobble = 1 + 0.01 * ((rep * 7 + (3 if side == 'candidate' else 0)) % 5 - 2)\n"
    "open(os.environ['EXPLAIN_MEASUREMENT'], 'w').write(json.dumps({'metric': factor * wobble}))\n"
)
"""A run whose metric is written, not timed: the same on every machine and in every process, so
a verdict from Python and one from the command line can be compared."""


def _commands(tmp_path: Path, factor: float) -> tuple[str, str]:
    script = tmp_path / "measured.py"
    script.write_text(MEASURED)
    return f"{sys.executable} {script} 1", f"{sys.executable} {script} {factor}"


def _campaign(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "campaign.json").read_text()))


# -- start and final --------------------------------------------------------------------------
def test_start_campaign_fills_the_defaults_and_freezes(tmp_path: Path) -> None:
    folder = tmp_path / "c1"
    document = start_campaign(folder, metric="seconds", policy={"decision": "paired"})
    assert document == _campaign(folder)
    assert document["policy"] == {**POLICY_DEFAULTS, "decision": "paired"}
    assert document["policy_sha256"] == policy_sha256({"decision": "paired"})
    with pytest.raises(UsageError, match=r"already exists; a campaign's policy is frozen"):
        start_campaign(folder, metric="seconds")
    with pytest.raises(UsageError, match=r"the folder name is the campaign id"):
        start_campaign(tmp_path / "not an id", metric="seconds")


def test_final_campaign_ingests_and_assesses_one_campaign(tmp_path: Path) -> None:
    folder = write_example_campaign(tmp_path / "attempts", "c1", policy={"decision": "paired"})
    final = final_campaign(folder, Store(tmp_path / "store"))
    assert final.campaign_id == "c1"
    assert final.rejected.is_empty()
    rows = final.assess.assessments
    assert rows["attempt_id"].to_list() == ["r001", "r002"]
    assert set(rows["campaign_id"]) == {"c1"}


# -- ab: one policy for Python and the command line -------------------------------------------
def test_ab_policy_defaults() -> None:
    assert ab_policy(None, until_decided=False) == AB_POLICY
    assert ab_policy(None, until_decided=True)["interval"] == "sequential_t"
    given = {"decision": "median", "interval": "percentile"}
    assert ab_policy(given, until_decided=True) == given


@pytest.mark.parametrize("factor", [0.8, 1.0])
def test_ab_decides_alike_from_python_and_the_command_line(
    factor: float, tmp_path: Path, run_cli: CliRun
) -> None:
    a, b = _commands(tmp_path, factor)
    run = RunOptions(repetitions=6, warmup=0, order_seed=5)
    python = ab(a, b, run=run, keep=tmp_path / "python")
    args = ["ab", a, b, "-n", "6", "--warmup", "0", "--order-seed", "5"]
    code, _, _ = run_cli([*args, "--keep", str(tmp_path / "cli")])
    cli = _campaign(tmp_path / "cli")
    assert python.policy == cli["policy"]
    assert python.policy["decision"] == "paired" and python.policy["interval"] == "student_t"
    assert _campaign(tmp_path / "python")["policy_sha256"] == cli["policy_sha256"]
    assert python.row is not None
    assert python.row["verdict"] == ("PASS" if factor < 1 else "FAIL")
    assert code == (0 if python.row["verdict"] == "PASS" else 5)
    kept = final_campaign(tmp_path / "cli", Store(tmp_path / "cli" / ".explain-store"))
    assert kept.assess.assessments.row(0, named=True)["verdict"] == python.row["verdict"]


def test_ab_until_decided_from_python_takes_the_sequential_interval(tmp_path: Path) -> None:
    a, b = _commands(tmp_path, 0.5)
    run = RunOptions(warmup=0, order_seed=5, until_decided=True, max_repetitions=10)
    result = ab(a, b, run=run)
    assert result.policy["interval"] == "sequential_t"
    assert result.round.sequential is not None and result.round.sequential["stopped"] == "pass"
    with pytest.raises(UsageError, match=r"ab's campaign would freeze interval percentile"):
        ab(a, b, run=run, policy={"interval": "percentile"})


# -- the command line builds the same RunOptions --------------------------------------------
@pytest.mark.parametrize("command", [round_command, ab_command], ids=["round", "ab"])
def test_the_run_options_defaults_are_the_library_s(command: Any) -> None:
    """Each option of a RunOptions field has its name and defaults to the field's default (-n
    shows the default a fixed round takes when it is not given)."""
    params = {p.name: p for p in command.params}
    fields = {f.name: f.default for f in dataclasses.fields(RunOptions)}
    plain = set(fields) - {"trace", "measure"}
    assert plain <= set(params)
    assert params["repetitions"].default == RunOptions().fixed_repetitions
    for name in plain - {"repetitions"}:
        assert params[name].default == fields[name], name
