"""constraints.txt, the versions action.yml installs (pip -c): the runtime part is the closure of
pyproject.toml's dependencies as installed in the environment the tests run in (`make test`'s),
so the action installs what the tests ran with; the build part (hatchling, to build the package
from the action's checkout) is kept by hand in constraints.txt. tests/test_ci_action.py checks
the file against both; `python tests/constraints.py > constraints.txt` writes it again after
an upgrade, keeping the build part."""

from __future__ import annotations

import importlib.metadata
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
FILE = ROOT / "constraints.txt"
HEADER = """\
# The versions explain-pipeline's tests ran with, which the GitHub action (action.yml) installs:
# `pip install -c constraints.txt`, and its environment is cached keyed on this file. Written by
# `python tests/constraints.py > constraints.txt` from the environment `make test` made;
# tests/test_ci_action.py checks it against pyproject.toml's ranges and that environment.
"""
BUILD = "# build: pyproject.toml's build-system (hatchling) and its own requirements (by hand)"


def pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def runtime() -> dict[str, str]:
    """name -> installed version of every package pyproject's dependencies pull in."""
    project = pyproject()["project"]
    assert isinstance(project, dict)
    todo = [Requirement(text) for text in project["dependencies"]]
    found: dict[str, str] = {}
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        distribution = importlib.metadata.distribution(name)
        found[name] = distribution.version
        todo += [Requirement(text) for text in distribution.requires or []]
    return dict(sorted(found.items()))


def pins(text: str) -> dict[str, str]:
    """name -> pinned version of the ``name==version`` lines of a constraints file."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            found[canonicalize_name(name)] = version.strip()
    return found


def build_part(text: str) -> str:
    """The hand-kept build lines of a constraints file (from the BUILD comment on)."""
    return text[text.index(BUILD) :] if BUILD in text else BUILD + "\n"


def written(current: str) -> str:
    lines = [f"{name}=={version}" for name, version in runtime().items()]
    runtime_part = "# runtime: pyproject.toml's dependencies and theirs\n" + "\n".join(lines)
    return f"{HEADER}{runtime_part}\n{build_part(current)}"


if __name__ == "__main__":
    sys.stdout.write(written(FILE.read_text(encoding="utf-8") if FILE.is_file() else ""))
