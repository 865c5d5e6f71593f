"""The packages of pipeline/ import only down: every import (function-local ones included) names
a module of its own package or of a lower layer, and the module graph has no circle.

``LAYERS`` is the order, lowest first, declared here once (docs/contributing.md explains it).
Packages that share a layer are independent: neither imports the other. An import inside a
function may defer an expensive module for start-up time (tests/test_cli_startup.py), never
hide a circle: this test reads it like any other import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pipeline"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "version"),  # no import of pipeline at all
    ("atomic", "allocator", "engines"),  # plain helpers: files, memory, the engine choice
    ("contract",),  # the one declaration of documents, tables, names, policy defaults
    ("store",),  # Parquet tables, transactions, integrity, SQL
    ("ingestion",),  # read and check campaign folders, write them to the store
    ("importers", "assessment"),  # profiler formats -> measurement lines; statistics
    ("study",),  # simulate, calibrate, plan: studies over the assessment
    ("record",),  # run commands, write stored attempts (ab prices a verdict with the plan)
    ("output",),  # one module per format over result objects, the sinks
    ("report",),  # the HTML report (it reuses the output's views and numbers)
    ("cli", "api"),  # the command line and the Python API: neither imports the other
    ("pipeline", "__main__"),  # the package's facade and `python -m pipeline`
)
"""The layers of pipeline/, lowest first: a module may import its own package and any
package of a lower layer."""

RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. pipeline.assessment.chance
    line: int
    target: str  # the imported module, e.g. pipeline.study.plan

    def __str__(self) -> str:
        path = self.source.replace(".", "/")
        return f"{path}.py:{self.line}: imports {self.target}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def package(module: str) -> str:
    """The layer's unit a module belongs to: pipeline.assessment.chance -> assessment,
    pipeline.errors -> errors, pipeline -> pipeline."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def imports(module: str, text: str | None = None) -> Iterator[Import]:
    """Every import of pipeline in the module, at any depth, resolved to the module it loads
    (``from pipeline.assessment import sequential`` loads pipeline.assessment.sequential)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8") if text is None else text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                for a in node.names
            ]
        else:
            continue
        for name in dict.fromkeys(names):
            if name == "pipeline" or name.startswith("pipeline."):
                yield Import(module, node.lineno, name)


ALL_IMPORTS = [i for m in MODULES for i in imports(m) if i.target != i.source]


def test_every_package_has_a_layer() -> None:
    missing = sorted({package(m) for m in MODULES} - set(RANK))
    assert not missing, f"packages of pipeline/ without a layer in LAYERS: {missing}"


def test_no_import_points_up_or_across_a_layer() -> None:
    wrong = [
        f"{i} ({package(i.source)} is in layer {RANK[package(i.source)]}, "
        f"{package(i.target)} in layer {RANK[package(i.target)]})"
        for i in ALL_IMPORTS
        if package(i.source) != package(i.target)
        and RANK[package(i.target)] >= RANK[package(i.source)]
    ]
    assert not wrong, "imports that do not point down a layer:\n" + "\n".join(wrong)


def cycles(edges: dict[str, list[Import]]) -> list[list[Import]]:
    """One circle of imports through each strongly connected set of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        for i in edges.get(m, []):
            if i.target not in index:
                visit(i.target)
                low[m] = min(low[m], low[i.target])
            elif i.target in stack:
                low[m] = min(low[m], index[i.target])
        if low[m] == index[m]:
            members = []
            while True:
                top = stack.pop()
                members.append(top)
                if top == m:
                    break
            if len(members) > 1:
                found.append(members)

    for m in sorted(edges):
        if m not in index:
            visit(m)
    return [_circle(set(members), edges) for members in found]


def _circle(members: set[str], edges: dict[str, list[Import]]) -> list[Import]:
    """A path of imports from the smallest member back to itself, inside ``members``."""
    start = min(members)
    paths: dict[str, list[Import]] = {start: []}
    frontier = [start]
    while frontier:
        m = frontier.pop(0)
        for i in edges.get(m, []):
            if i.target == start:
                return [*paths[m], i]
            if i.target in members and i.target not in paths:
                paths[i.target] = [*paths[m], i]
                frontier.append(i.target)
    raise AssertionError(f"no circle through {sorted(members)}")


def test_the_module_graph_has_no_circle() -> None:
    edges: dict[str, list[Import]] = {}
    for i in ALL_IMPORTS:
        # a package's __init__ is loaded before its modules: ``from pipeline.x import y`` of a
        # module y is an edge to y only (pipeline.x's own imports are read as its own)
        edges.setdefault(i.source, []).append(i)
    found = cycles(edges)
    text = "\n\n".join("\n".join(str(i) for i in circle) for circle in found)
    assert not found, f"{len(found)} circle(s) of imports:\n{text}"


def test_the_checker_finds_a_circle_and_names_its_imports() -> None:
    """The checker itself: a two-module circle is found and each import of it named."""
    a, b = Import("pipeline.a", 3, "pipeline.b"), Import("pipeline.b", 7, "pipeline.a")
    found = cycles({"pipeline.a": [a], "pipeline.b": [b]})
    assert [[str(i) for i in c] for c in found] == [
        ["pipeline/a.py:3: imports pipeline.b", "pipeline/b.py:7: imports pipeline.a"]
    ]
    assert cycles({"pipeline.a": [a]}) == []


def test_a_function_local_import_is_read() -> None:
    """Imports inside functions are imports too: they hid the circles this test refuses."""
    text = "import numpy\n\n\ndef f():\n    from pipeline.study.plan import critical\n"
    found = list(imports("pipeline.assessment.chance", text))
    wanted = "pipeline/assessment/chance.py:5: imports pipeline.study.plan"
    assert [str(i) for i in found] == [wanted]
