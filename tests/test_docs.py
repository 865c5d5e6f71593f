"""The documentation runs as written: the Python API walk-through of docs/python.md (code and the
outputs it shows), the store-reading recipes with campaign ids that engines misread, the reference
interval of docs/contract.md against the pipeline's, and the API's import behaviour."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from conftest import write_example_campaign

from pipeline import ingest, open_store
from pipeline.bootstrap import paired_intervals

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RECIPES = "## Reading the store with Polars, PyArrow or DuckDB"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def code_blocks(text: str) -> list[tuple[str, str | None]]:
    """Every ```python block with the ```text block right after it (its expected stdout)."""
    fences = list(_FENCE.finditer(text))
    blocks = []
    for i, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        follower = fences[i + 1] if i + 1 < len(fences) else None
        expected = None
        if follower and follower.group(1) == "text":
            between = text[fence.end() : follower.start()]
            expected = None if between.strip() else follower.group(2)
        blocks.append((fence.group(2), expected))
    return blocks


def run_blocks(blocks: list[tuple[str, str | None]], namespace: dict[str, Any]) -> None:
    for number, (code, expected) in enumerate(blocks, start=1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"<python block {number}>", "exec"), namespace)
        if expected is not None:
            assert _lines(out.getvalue()) == _lines(expected), f"python block {number}:\n{code}"


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_code_blocks_pairs_outputs_with_their_code() -> None:
    text = "```python\nprint(1)\n```\n\n```text\n1\n```\nprose\n```python\nx = 2\n```\n"
    assert code_blocks(text) == [("print(1)\n", "1\n"), ("x = 2\n", None)]
    with pytest.raises(AssertionError):
        run_blocks([("print(1)\n", "2\n")], {})


def test_python_md_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.chdir(tmp_path)
    blocks = code_blocks((DOCS / "python.md").read_text(encoding="utf-8"))
    assert sum(expected is not None for _, expected in blocks) >= 5
    namespace: dict[str, Any] = {}
    run_blocks(blocks, namespace)
    # the recipes at the end read the store the session wrote
    assert namespace["samples"].height == namespace["table"].num_rows > 0
    assert namespace["duck"].aggregate("count(*)").fetchall() == [(namespace["table"].num_rows,)]


@pytest.fixture(scope="module", params=["001", "2026-11-01"])
def odd_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose one campaign has an id that engines guess as a number or a date."""
    root = tmp_path_factory.mktemp("odd")
    write_example_campaign(root / "attempts", request.param, attempts=["r001"], repetitions=5)
    store = open_store(root / "store")
    assert ingest(root / "attempts", store).exit_code == 0
    return root / "store"


def test_store_recipes_read_campaign_id_as_a_string(odd_store: Path) -> None:
    cid = next((odd_store / "samples").iterdir()).name.removeprefix("campaign_id=")
    guessed = pl.scan_parquet(f"{odd_store}/samples/*/data.parquet", hive_partitioning=True)
    assert guessed.collect_schema()["campaign_id"] != pl.String  # the trap the recipes avoid
    text = (DOCS / "python.md").read_text(encoding="utf-8")
    recipes = [b for b in code_blocks(text.split(RECIPES, 1)[1]) if "store_path =" not in b[0]]
    namespace: dict[str, Any] = {"store_path": str(odd_store)}
    run_blocks(recipes, namespace)
    assert namespace["samples"]["campaign_id"].dtype == pl.String
    assert namespace["samples"]["campaign_id"].unique().to_list() == [cid]
    assert namespace["table"].schema.field("campaign_id").type == pa.string()
    assert namespace["table"].column("campaign_id").unique().to_pylist() == [cid]
    duck = namespace["duck"].select("campaign_id, typeof(campaign_id)").distinct().fetchall()
    assert duck == [(cid, "VARCHAR")]


def _reference() -> Any:
    """The percentile_interval function of docs/contract.md."""
    blocks = code_blocks((DOCS / "contract.md").read_text(encoding="utf-8"))
    source = next(code for code, _ in blocks if "def percentile_interval" in code)
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    return namespace["percentile_interval"]


@pytest.mark.parametrize(
    "x",
    [
        [0.03, -0.01, 0.02, 0.05, 0.0],
        [0.1, -0.2, 0.05, 0.0, 0.3, -0.1, 0.02, 0.07],
        [0.01, np.inf, 0.02, -0.01, 0.0],  # +inf in some resamples: the high bound is +inf
        [np.inf] * 5,
    ],
)
def test_contract_reference_interval_equals_the_pipeline(x: list[float]) -> None:
    expected = _reference()(x, resamples=2000, seed=7, confidence=0.9)
    got = paired_intervals(np.array(x)[:, None], resamples=2000, seed=7, confidence=0.9)
    actual = (got.estimate[0], got.low[0], got.high[0])
    np.testing.assert_allclose(actual, expected, rtol=1e-12)  # infinities must match exactly


def test_reference_interval_follows_the_infinity_rule() -> None:
    # One +inf pair of 5: about a third of resamples are finite, so the 5% quantile is finite
    # and the 95% one lands on the infinite resamples.
    _, low, high = _reference()([0.01, np.inf, 0.02, -0.01, 0.0], resamples=2000, seed=7)
    assert np.isfinite(low) and high == np.inf


_IMPORTS = """
import sys, types
import pipeline
heavy = sorted(m for m in ("polars", "numpy", "pyarrow") if m in sys.modules)
assert not heavy, heavy
import pipeline.assess, pipeline.ingest, pipeline.query   # the modules of the same names
from pipeline import assess, ingest, open_store, query, AssessResult, ExplainError
for f in (assess, ingest, open_store, query):
    assert isinstance(f, types.FunctionType), f
assert pipeline.assess is assess and AssessResult.__name__ == "AssessResult"
assert set(pipeline.__all__) == {*pipeline._EXPORTS, "__version__"}
assert all(hasattr(pipeline, name) for name in pipeline.__all__)
from pipeline.assess import assess as inner
assert inner is not assess and inner.__module__ == "pipeline.assess"
print("ok")
"""


def test_import_pipeline_is_light_and_the_api_names_are_stable() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
