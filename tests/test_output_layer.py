"""pipeline.output is a library layer: Python callers render results without the CLI, every
format of the registry renders, and nothing below the CLI imports it."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.output import FORMATS

ROOT = Path(__file__).resolve().parent.parent

RENDER_FROM_PYTHON = """
import json, sys
from pipeline.api import ingest, assess
from pipeline.output import render
from pipeline.store.tables import Store
store = Store(sys.argv[1])
ingest("data/attempts", store)
result = assess(store)
shown = {fmt: render(result, fmt) for fmt in ("table", "json", "csv", "markdown")}
loaded = sorted(name for name in sys.modules if name.startswith("pipeline.cli"))
print(json.dumps({"shown": shown, "cli_modules": loaded}))
"""


@pytest.mark.slow
def test_python_renders_what_the_cli_prints_without_loading_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    done = subprocess.run(
        [sys.executable, "-c", RENDER_FROM_PYTHON, str(store)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["cli_modules"] == []
    for fmt, shown in found["shown"].items():
        with pytest.raises(SystemExit):
            main(["assess", "--all", "--store", str(store), "--format", fmt])
        assert capsys.readouterr().out == shown, fmt


def test_every_registered_format_has_a_renderer() -> None:
    for fmt, name in FORMATS.items():
        module = importlib.import_module(f"pipeline.output.{name}")
        assert callable(module.render), fmt


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.slow
def test_nothing_below_the_cli_imports_it() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "pipeline").rglob("*.py"))
        if "cli" not in path.relative_to(ROOT / "pipeline").parts[:1]
        and path.name != "__main__.py"
        and any(name.startswith("pipeline.cli") for name in _imports(path))
    ]
    assert offenders == []
