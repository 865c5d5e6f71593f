"""Start-up: the program's --help and every command's --help load none of the heavy libraries.

Each command imports its library code when it runs, so that `--help` (and a mistyped option)
answers at once. The walk covers every registered command, including commands added later and
the subcommands of a group."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("polars", "pyarrow", "numpy", "plotly", "jsonschema", "tqdm", "threadpoolctl", "duckdb")

WALK = """
import json, sys
import click
from pipeline.cli import cli

heavy = {heavy!r}

def loaded():
    return sorted(m for m in heavy if m in sys.modules)

def paths(group, prefix):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield [*prefix, name]
        if isinstance(command, click.Group):
            yield from paths(command, [*prefix, name])

found = {{"import": loaded(), "commands": [], "helps": {{}}}}
for path in [[], *paths(cli, [])]:
    try:
        cli.main([*path, "--help"], prog_name="explain-pipeline", standalone_mode=False)
    except SystemExit:
        pass
    found["commands"].append(" ".join(path))
    found["helps"][" ".join(path)] = loaded()
print("\\x00" + json.dumps(found))
"""


def test_help_of_every_command_loads_no_heavy_library() -> None:
    out = subprocess.run(
        [sys.executable, "-c", WALK.format(heavy=HEAVY)], capture_output=True, text=True, check=True
    ).stdout
    found = json.loads(out.rsplit("\x00", 1)[1])
    assert found["import"] == []
    assert {"ingest", "assess", "query", "report", "import"} <= set(found["commands"])
    assert {command: mods for command, mods in found["helps"].items() if mods} == {}


def test_version_through_the_entry_point_loads_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from pipeline.cli import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit as exit:\n"
        f"    print(exit.code, sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "0 []"


@pytest.mark.parametrize(
    ("args", "module"), [(["--help"], None), (["assess", "--help"], "assess"),
                         (["import", "--help"], "imports")],
)  # fmt: skip
def test_a_command_loads_no_other_commands_module(args: list[str], module: str | None) -> None:
    """The lazy registry: the top-level --help loads no command's module, a command only its
    own (pipeline.cli.COMMAND_MODULES)."""
    code = (
        "import sys\n"
        "from pipeline.cli import main, COMMAND_MODULES\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "mods = {m for m, _ in COMMAND_MODULES.values()}\n"
        "print(sorted(m for m in mods if f'pipeline.cli.{m}' in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == str([] if module is None else [module])
