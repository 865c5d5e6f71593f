"""Start-up: the program's --help and every command's --help load none of the heavy libraries.

Each command imports its library code when it runs, so that `--help` (and a mistyped option)
answers at once. The walk covers every registered command, including commands added later and
the subcommands of a group."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    ("args", "module"),
    [(["--help"], None), (["assess", "--help"], "assess"), (["import", "--help"], "imports")],
)
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


@pytest.mark.slow
def test_jsonschema_loads_only_for_a_document_the_fast_checks_cannot_vouch_for(
    tmp_path: Path,
) -> None:
    """`import` checks the line it built without jsonschema when the line is plainly valid (its
    import alone cost ~0.1 s of every import); a document that needs the schema loads it."""
    fixture = Path(__file__).parent / "fixtures" / "import" / "kineto" / "cpu_steps.json"
    bad = tmp_path / "campaign.json"
    bad.write_text('{"schema": "explain-pipeline/campaign/v1"}')  # every other field missing
    code = (
        "import sys\n"
        "from pipeline.importers.lines import import_line\n"
        f"import_line('kineto', [{str(fixture)!r}], side='baseline', repetition=0)\n"
        "print('jsonschema' in sys.modules)\n"
        "from pipeline.ingestion.folders import validate_campaign\n"
        "from pathlib import Path\n"
        f"_, issues = validate_campaign(Path({str(tmp_path)!r}))\n"
        "print('jsonschema' in sys.modules, bool(issues))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["False", "True True"]


@pytest.mark.slow
def test_assess_in_every_format_does_not_import_scipy_stats(tmp_path: Path) -> None:
    """scipy.stats costs every assess half a second or more of start-up (the 1,000-benchmark
    round of benchmarks/bench_family.py took 1.06 s beyond start-up with it, 0.60 s without):
    the quantiles and tails assess needs, the campaign accounting's included, come from
    scipy.special. The bundled campaigns are assessed in every format."""
    root = Path(__file__).resolve().parent.parent
    store = tmp_path / "store"
    code = (
        "import sys\n"
        "from pipeline.cli import main\n"
        "def run(args):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"run(['ingest', {str(root / 'data' / 'attempts')!r}, '--store', {str(store)!r}])\n"
        "for fmt in ('table', 'json', 'csv', 'markdown'):\n"
        f"    run(['assess', '--all', '--store', {str(store)!r}, '--format', fmt])\n"
        "print('\\x00', 'scipy.stats' in sys.modules, 'scipy.special' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.rsplit("\x00", 1)[1].split() == ["False", "True"]
