"""The documentation holds: every English page has its Chinese counterpart and every relative link
and anchor resolves inside the repository; the Python API walk-through of docs/python.md runs as
written (code and the outputs it shows); the store-reading recipes read campaign ids that engines
misread; the reference interval of docs/contract.md equals the pipeline's; and the API's imports
stay light."""

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
from pipeline.assessment.bootstrap import paired_intervals

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RECIPES = {
    "python.md": "## Reading the store with Polars, PyArrow or DuckDB",
    "zh/python.md": "## 用 Polars、PyArrow 或 DuckDB 直接读 store",
}
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


# -- pages, translations and links ----------------------------------------------------------------
def english_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def chinese_page(english: Path) -> Path:
    if english.name == "README.md":
        return ROOT / "README.zh-CN.md"
    return DOCS / "zh" / english.name


def _prose(text: str) -> str:
    """The text without fenced code blocks (where # is a comment and links are not links)."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _prose(page.read_text(encoding="utf-8")), re.M):
        base = slug(heading)
        name, n = base, 0
        while name in found:
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_english_page_has_a_chinese_page_linked_both_ways() -> None:
    missing = []
    for english in english_pages():
        chinese = chinese_page(english)
        there = chinese.relative_to(ROOT)
        if not chinese.is_file():
            missing.append(f"{english.relative_to(ROOT)}: no Chinese page {there}")
            continue
        en_text, zh_text = english.read_text("utf-8"), chinese.read_text("utf-8")
        if f"({Path(*chinese.relative_to(english.parent).parts)})" not in en_text:
            here = chinese.relative_to(english.parent)
            missing.append(f"{english.relative_to(ROOT)}: no link to its Chinese page ({here})")
        back = Path("..", english.name) if english.parent == DOCS else Path(english.name)
        if f"({back})" not in zh_text:
            missing.append(f"{there}: no link back to its English page ({back})")
        if len(_CJK.findall(_prose(zh_text))) < 300:
            missing.append(f"{there}: hardly any Chinese text")
    assert not missing, "\n".join(missing)
    extra = {p.name for p in (DOCS / "zh").glob("*.md")} - {p.name for p in DOCS.glob("*.md")}
    assert not extra, f"docs/zh pages without an English page: {sorted(extra)}"


def test_every_relative_link_and_anchor_resolves_inside_the_repository() -> None:
    pages = [*english_pages(), ROOT / "README.zh-CN.md", *sorted((DOCS / "zh").glob("*.md"))]
    broken = []
    for page in pages:
        for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{where}: no such file in the repository")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where}: no heading with that anchor")
    assert not broken, "\n".join(broken)


def test_slug_follows_github() -> None:
    assert slug("4.2 The interval (pinned)") == "42-the-interval-pinned"
    assert slug("用 Polars、PyArrow 读 store") == "用-polarspyarrow-读-store"
    assert slug("Methods (field `interval`)") == "methods-field-interval"


# -- code blocks --------------------------------------------------------------------------------
def test_code_blocks_pairs_outputs_with_their_code() -> None:
    text = "```python\nprint(1)\n```\n\n```text\n1\n```\nprose\n```python\nx = 2\n```\n"
    assert code_blocks(text) == [("print(1)\n", "1\n"), ("x = 2\n", None)]
    with pytest.raises(AssertionError):
        run_blocks([("print(1)\n", "2\n")], {})


@pytest.mark.parametrize("page", ["python.md", "zh/python.md"])
@pytest.mark.slow
def test_python_md_runs_as_written(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.chdir(tmp_path)
    blocks = code_blocks((DOCS / page).read_text(encoding="utf-8"))
    assert len(blocks) >= 9
    assert sum(expected is not None for _, expected in blocks) >= 6  # both pages show outputs
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
    store = open_store(root / "store", create=True)
    assert ingest(root / "attempts", store).exit_code == 0
    return root / "store"


@pytest.mark.parametrize("page", list(RECIPES))
def test_store_recipes_read_campaign_id_as_a_string(odd_store: Path, page: str) -> None:
    cid = next((odd_store / "samples").iterdir()).name.removeprefix("campaign_id=")
    guessed = pl.scan_parquet(f"{odd_store}/samples/*/data.parquet", hive_partitioning=True)
    assert guessed.collect_schema()["campaign_id"] != pl.String  # the trap the recipes avoid
    text = (DOCS / page).read_text(encoding="utf-8")
    section = text.split(RECIPES[page], 1)[1]
    recipes = [b for b in code_blocks(section) if "store_path =" not in b[0]]
    assert len(recipes) == 3
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
import pipeline.assessment.campaigns, pipeline.ingestion.attempts  # the implementations
from pipeline import assess, ingest, open_store, query, AssessResult, ExplainError
for f in (assess, ingest, open_store, query):
    assert isinstance(f, types.FunctionType), f
assert pipeline.assess is assess and AssessResult.__name__ == "AssessResult"
assert set(pipeline.__all__) == {*pipeline._EXPORTS, "__version__"}
assert all(hasattr(pipeline, name) for name in pipeline.__all__)
from pipeline.assessment.campaigns import assess as inner
assert inner is not assess and inner.__module__ == "pipeline.assessment.campaigns"
print("ok")
"""


@pytest.mark.slow
def test_import_pipeline_is_light_and_the_api_names_are_stable() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTS], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


# -- the repository stands on its own ------------------------------------------------------------
_OUTSIDE = re.compile(r"\b" + "SP" + "EC" + r"\b")  # spelled apart so this file passes its own test
_SHIPPED = (
    "README*",
    "docs/**/*",
    "pipeline/**/*",
    "schemas/**/*",
    "queries/**/*",
    "tests/**/*",
    "benchmarks/**/*",
    "data/*.py",
    "Makefile",
    "pyproject.toml",
)
_TEXT = {".md", ".py", ".json", ".sql", ".toml", ".html", ".txt", ".cfg", ""}


def test_nothing_cites_a_file_users_do_not_get() -> None:
    """Users get the repository: rules are cited from docs/contract.md ("contract §N")."""
    found = []
    for pattern in _SHIPPED:
        for path in sorted(ROOT.glob(pattern)):
            if not path.is_file() or path.suffix not in _TEXT:
                continue
            lines = path.read_text("utf-8", errors="replace").splitlines()
            for number, line in enumerate(lines, 1):
                if _OUTSIDE.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "cite docs/contract.md (contract §N) instead:\n" + "\n".join(found)


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command and subcommand (groups that load their commands lazily included)."""
    import click

    found = [(path, command)]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            found += _commands(command.get_command(ctx, name), (*path, name))
    return found


def test_no_help_text_cites_a_file_users_do_not_get() -> None:
    import click

    from pipeline.cli import cli

    for path, command in _commands(cli):
        ctx = click.Context(command, info_name=" ".join(("explain-pipeline", *path)))
        text = command.get_help(ctx)
        assert text.strip() and not _OUTSIDE.search(text), (path, text)


def test_the_api_passes_an_engine_through(tmp_path: Path) -> None:
    """A caller's own engine (the Engine protocol) runs the work of ingest and assess."""
    from pipeline import assess
    from pipeline.engines import LocalEngine

    class Counting(LocalEngine):
        calls = 0

        def map(self, fn: Any, work: Any) -> Any:
            Counting.calls += 1
            return super().map(fn, work)

    write_example_campaign(tmp_path / "attempts")
    store = open_store(tmp_path / "store", create=True)
    assert ingest(tmp_path / "attempts", store, engine=Counting()).exit_code == 0
    after_ingest = Counting.calls
    result = assess(store, "c1", engine=Counting())
    assert after_ingest >= 1 and Counting.calls > after_ingest
    assert result.assessments["attempt_id"].to_list() == ["r001", "r002"]
