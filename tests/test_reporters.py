"""Outputs are a list of reporters (pipeline.output.REPORTERS): each command's --format choices
are the reporters that can show its result, a reporter shows what its module's render takes,
a run writes each reporter it chose in turn, and a new format is one module plus one entry
(docs/contributing.md, "A new output format")."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import click
import pytest

from pipeline.cli import cli
from pipeline.output import FORMATS, REPORTERS, Shown, formats
from pipeline.output.sinks import Sinks

ROOT = Path(__file__).resolve().parent.parent

SHOWN_BY: dict[str, Shown] = {
    "assess": "AssessResult",
    "campaign final": "FinalResult",
    "ab": "AbResult",
}
"""The commands whose result pipeline.output renders, and that result."""


def _format_options() -> dict[str, click.Parameter]:
    """Every command's --format, by the command's path."""
    found: dict[str, click.Parameter] = {}

    def walk(group: click.Group, prefix: list[str]) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            path = " ".join([*prefix, name])
            for param in command.params:
                if "--format" in param.opts:
                    found[path] = param
            if isinstance(command, click.Group):
                walk(command, [*prefix, name])

    walk(cli, [])
    return found


def test_the_choices_of_each_command_are_the_registrys() -> None:
    options = _format_options()
    for path, shows in SHOWN_BY.items():
        option = options[path]
        assert isinstance(option.type, click.Choice)
        assert tuple(option.type.choices) == formats(shows), path
        assert option.default == formats(shows)[0], path
    # today's order and default, which the registry keeps
    assert formats("AssessResult") == ("table", "json", "csv", "markdown")
    assert formats("FinalResult") == ("table", "markdown")
    assert formats("AbResult") == ("text", "markdown")
    # the other --format options are not pipeline.output's: a study's table, a query's rows
    assert set(options) - set(SHOWN_BY) == {"calibrate", "query"}
    assert set(FORMATS) == {r.name for r in REPORTERS.values() if r.writes == "stdout"}


def _registered(module: Any, function: str) -> set[str]:
    """The class names a module's function takes: the registrations of the module's
    singledispatch (markdown's render bounds its ``_document``), else the first parameter's
    annotation."""
    dispatchers = [f for f in vars(module).values() if callable(f) and hasattr(f, "registry")]
    if dispatchers:
        (dispatch,) = dispatchers
        return {cls.__name__ for cls in dispatch.registry if cls is not object}
    hints = typing.get_type_hints(getattr(module, function))
    first = next(iter(hints))
    return {hints[first].__name__}


def test_a_reporter_shows_what_its_modules_render_takes() -> None:
    by_function: dict[tuple[str, str], set[str]] = {}
    for reporter in REPORTERS.values():
        by_function.setdefault((reporter.module, reporter.function), set()).update(reporter.shows)
    for (name, function), shows in by_function.items():
        module = importlib.import_module(f"pipeline.output.{name}")
        assert shows == _registered(module, function), (name, function)


def test_a_run_lists_each_output_it_chose_in_order(tmp_path: Path) -> None:
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    sinks = Sinks.chosen("csv", junit=tmp_path / "v.xml", environ=environ)
    assert [(r.name, t) for r, t in sinks.reporters] == [
        ("csv", None),
        ("junit", tmp_path / "v.xml"),
        ("summary", str(tmp_path / "summary.md")),
        ("annotations", None),
    ]
    assert [r.name for r, _ in Sinks.chosen("table", environ={}).reporters] == ["table"]


TOY = """
import json, sys, types
from functools import singledispatch

from pipeline.assessment.campaigns import AssessResult

# the module: pipeline/output/toy.py
toy = types.ModuleType("pipeline.output.toy")

@singledispatch
def render(result):
    raise TypeError(type(result).__name__)

@render.register(AssessResult)
def _(result):
    return f"toy: {result.assessments.height} attempts\\n"

toy.render = render
sys.modules[toy.__name__] = toy

# the entry: one line in pipeline.output.REPORTERS
from pipeline import output
output.REPORTERS["toy"] = output.Reporter("toy", "toy", ("AssessResult",))

import click
from pipeline.api import assess, ingest
from pipeline.cli import cli, main
from pipeline.store.tables import Store

choices = {}
for path in (["assess"], ["campaign", "final"], ["ab"]):
    command = cli
    for name in path:
        command = command.get_command(click.Context(command), name)
    (option,) = [p for p in command.params if "--format" in p.opts]
    choices[" ".join(path)] = list(option.type.choices)
ingest("data/attempts", Store(sys.argv[1]))
print(json.dumps(choices))
sys.stdout.flush()
try:
    main(["assess", "--all", "--store", sys.argv[1], "--format", "toy", "--junit", sys.argv[2]])
except SystemExit as exit:
    print("exit", exit.code)
"""


@pytest.mark.slow
def test_a_new_format_is_one_module_and_one_registry_entry(tmp_path: Path) -> None:
    junit = tmp_path / "v.xml"
    done = subprocess.run(
        [sys.executable, "-c", TOY, str(tmp_path / "store"), str(junit)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
    )
    first, rest = done.stdout.split("\n", 1)
    assert json.loads(first) == {
        "assess": ["table", "json", "csv", "markdown", "toy"],
        "campaign final": ["table", "markdown"],  # a toy cannot show a FinalResult
        "ab": ["text", "markdown"],
    }
    assert rest.startswith("toy: ") and rest.endswith(" attempts\nexit 0\n"), rest
    assert junit.read_text(encoding="utf-8").startswith("<?xml")  # two outputs, one run
