"""A round's options are one table (pipeline.record.options.ROUND_OPTIONS): the click options of
round, ab and campaign final --confirm are made from it, and RunOptions and MeasureOptions, built
by keyword, refuse from Python what the command line refuses."""

from __future__ import annotations

import dataclasses
from typing import Any

import click
import pytest

from pipeline.cli.record import ab_command, final_command, round_command
from pipeline.errors import UsageError
from pipeline.record.options import (
    ROUND_OPTIONS,
    MeasureOptions,
    RunOptions,
    TraceOptions,
    build_run_options,
)
from pipeline.record.runner import RunSettings

COMMANDS = {"round": round_command, "ab": ab_command, "campaign final": final_command}


@pytest.mark.parametrize("name", COMMANDS)
def test_each_commands_run_options_are_the_tables_entries(name: str) -> None:
    """Flags, help, default and accepted values of every entry reach the click option."""
    params = {p.name: p for p in COMMANDS[name].params if isinstance(p, click.Option)}
    wanted = [e for e in ROUND_OPTIONS if name != "campaign final" or e.confirm]
    assert name != "campaign final" or "mechanism_file" not in params
    for entry in wanted:
        option = params[entry.name]
        assert tuple(option.opts) == entry.flags, entry.name
        assert option.help == entry.help and option.multiple == entry.multiple, entry.name
        if not entry.multiple:
            assert option.default == entry.default, entry.name
        if entry.kind == "choice":
            assert isinstance(option.type, click.Choice)
            assert tuple(option.type.choices) == entry.choices, entry.name
        if entry.kind == "number" and entry.bounds is not None:
            low = getattr(option.type, "min", None)
            assert low == entry.bounds.low, entry.name


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"repetitions": 0}, "--repetitions must be >= 1, got 0"),
        ({"repetitions": 100_001}, "--repetitions must be <= 100000"),
        ({"warmup": -1}, "--warmup must be >= 0, got -1"),
        ({"timeout": -5.0}, "--timeout must be >= 0, got -5.0"),
        ({"until_decided": True, "repetitions": 8}, "--repetitions/-n and --until-decided"),
        ({"max_repetitions": 8}, "--max-repetitions needs --until-decided"),
        ({"until_decided": True, "max_repetitions": 1}, "--max-repetitions must be >="),
    ],
)
def test_python_callers_are_refused_what_the_command_line_is(
    given: dict[str, Any], message: str
) -> None:
    """Before, only the command line checked these (click's ranges and _one_count): a
    RunOptions(repetitions=0) from Python reached the recorder."""
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        RunOptions(**given)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"suite": "junit"}, "--measure 'junit': expected one of"),
        ({"suite_metric": "mean"}, "--suite-metric 'mean': expected one of sum, geomean"),
        ({"metric_source": "gpu"}, "--metric-source 'gpu': expected one of wall, cpu"),
        ({"counters": ("cycles",)}, "--counters 'cycles': expected one of instructions"),
    ],
)
def test_measure_options_accept_only_their_choices(given: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        MeasureOptions(**given)


def test_defaults_and_normal_forms() -> None:
    run = RunOptions()
    assert run.repetitions is None and run.fixed_repetitions == 10
    assert RunOptions(repetitions=4).fixed_repetitions == 4
    assert RunOptions(timeout=0).timeout is None  # 0: no limit, as on the command line
    assert MeasureOptions(counters=("instructions", "instructions")).counters == ("instructions",)
    assert RunOptions(until_decided=True, max_repetitions=20).max_repetitions == 20


@pytest.mark.parametrize("kind", [RunOptions, MeasureOptions, TraceOptions, RunSettings])
def test_options_are_built_by_keyword(kind: Any) -> None:
    """A positional RunOptions(5) or MeasureOptions('pyperf') would bind by field order, which
    a new field silently shifts."""
    assert all(f.kw_only for f in dataclasses.fields(kind))
    with pytest.raises(TypeError):
        kind(5)


def test_the_tables_keywords_build_the_same_object() -> None:
    built = build_run_options(
        {
            "repetitions": 6,
            "trace": "kineto",
            "step_pattern": "step.*",
            "region_pattern": None,
            "renames": (),
            "suite": None,
            "suite_metric": "sum",
            "metric_source": "wall",
            "counters": (),
        }
    )
    assert built.repetitions == 6 and built.trace is not None
    assert built.trace.imports.step_pattern is not None
    with pytest.raises(UsageError, match="need --trace kineto"):
        build_run_options({"step_pattern": "step.*"})
    assert build_run_options({}) == RunOptions()
