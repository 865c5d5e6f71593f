"""The explained fraction through every output it reaches, from real rounds of the exact
workload: table assessments, `assess --format json` and `csv`, and the HTML report. When every
measured region is declared (the workload's `work` declared, `fixed` its reference: a suite of
two benchmarks, one the reference) the fraction is 1 [1, 1] by construction: none is given,
with the reason `all_regions_declared`."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import CliRun, workload

from pipeline.store.tables import Store

pytestmark = pytest.mark.slow

FRACTION = [f"explained_fraction{end}" for end in ("", "_low", "_high", "_reason")]
ONE_REFERENCE = [("work", "decrease"), ("fixed", "unchanged")]
ONE_UNDECLARED = [("work", "decrease")]  # fixed is a region of the total left undeclared


def _kept(tmp_path: Path, run_cli: CliRun, name: str, declared: list[tuple[str, str]]) -> Path:
    """`ab --keep` of work=60000 against work=30000 under ``declared``: the kept folder."""
    mechanism = tmp_path / f"{name}.mechanism.json"
    expectations = [{"target": "region", "name": g, "expect": e} for g, e in declared]
    mechanism.write_text(
        json.dumps(
            {
                "schema": "explain-pipeline/mechanism/v1",
                "hypothesis": "half the work",
                "expectations": expectations,
            }
        )
    )
    kept = tmp_path / name
    code, out, err = run_cli(
        [
            "ab",
            "-n",
            "6",
            "--warmup",
            "0",
            "--order-seed",
            "1",
            "--mechanism-file",
            str(mechanism),
            "--keep",
            str(kept),
            "--report",
            str(tmp_path / f"{name}.html"),
            workload("work=60000", "fixed=30000"),
            workload("work=30000", "fixed=30000"),
        ]
    )
    assert code == 0, err
    assert "explanation: explained" in out
    return kept


def _outputs(kept: Path, run_cli: CliRun) -> dict[str, dict[str, Any]]:
    """The four fraction columns as JSON, the store (after that assess) and CSV give them."""
    store = kept / ".explain-store"
    code, out, _ = run_cli(["assess", "--all", "--format", "json", "--store", str(store)])
    assert code == 0
    stored = Store(store).read("assessments").select(FRACTION).row(0, named=True)
    row = json.loads(out)["campaigns"][0]["attempts"][0]
    from_json = {k: row[k] for k in FRACTION}
    code, out, _ = run_cli(["assess", "--all", "--format", "csv", "--store", str(store)])
    assert code == 0
    line = next(csv.DictReader(io.StringIO(out)))
    from_csv = {k: line[k] for k in FRACTION}
    return {"store": stored, "json": from_json, "csv": from_csv}


def test_every_region_declared_gives_no_fraction_in_any_output(
    tmp_path: Path, run_cli: CliRun
) -> None:
    """Before the fix: 1.0 [1.0, 1.0] in every output, "explains 1.0000 of the saving [1.0000,
    1.0000]" in the report."""
    kept = _kept(tmp_path, run_cli, "ref", ONE_REFERENCE)
    none = dict.fromkeys(FRACTION[:3], None) | {"explained_fraction_reason": "all_regions_declared"}
    got = _outputs(kept, run_cli)
    assert got["store"] == none
    assert got["json"] == none
    assert got["csv"] == dict.fromkeys(FRACTION[:3], "") | {
        "explained_fraction_reason": none[FRACTION[3]]
    }
    page = (tmp_path / "ref.html").read_text()
    assert "of the saving" not in page
    assert 'title="reason code: all_regions_declared"' in page


def test_an_undeclared_region_gives_a_fraction_in_every_output(
    tmp_path: Path, run_cli: CliRun
) -> None:
    """fixed is undeclared and the same work on both sides: work explains the saving, about 1,
    within an interval measured from the wobble (not 1 by construction)."""
    kept = _kept(tmp_path, run_cli, "raw", ONE_UNDECLARED)
    got = _outputs(kept, run_cli)
    fraction = got["store"]
    assert fraction["explained_fraction_reason"] is None
    assert fraction["explained_fraction_low"] < 1 < fraction["explained_fraction_high"]
    assert fraction["explained_fraction"] == pytest.approx(1.0, abs=0.05)
    assert got["json"] == fraction
    assert {k: float(got["csv"][k]) for k in FRACTION[:3]} == pytest.approx(
        {k: fraction[k] for k in FRACTION[:3]}, rel=1e-12
    )
    shown = re.search(r"explains (\d\.\d{4}) of the saving \[", (tmp_path / "raw.html").read_text())
    assert shown is not None
    assert float(shown.group(1)) == pytest.approx(fraction["explained_fraction"], abs=5e-5)
