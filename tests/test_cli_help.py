"""Every command has help text with an example, and the exit codes are documented."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from pipeline.cli import cli, main
from pipeline.errors import EXIT_CODES_HELP

EXPECTED_COMMANDS = {
    "ingest",
    "assess",
    "query",
    "simulate",
    "calibrate",
    "report",
    "import",
    "campaign",
    "round",
    "ab",
    "store",
}


def subcommands(group: click.Group) -> dict[str, click.Command]:
    """A group's commands by name, loading the lazily registered ones."""
    ctx = click.Context(group)
    found = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    assert all(found.values()), found
    return {name: command for name, command in found.items() if command is not None}


def test_every_command_of_the_spec_is_registered() -> None:
    assert set(subcommands(cli)) >= EXPECTED_COMMANDS


@pytest.mark.parametrize("limit", [45, 60, 1000])
def test_the_top_level_listing_says_what_each_command_says(limit: int) -> None:
    """The listing comes from summaries kept beside the lazy registry (so --help imports no
    command module): each must be the first sentence of the command's own help."""
    from pipeline.cli import COMMAND_MODULES, summary_of

    for name, command in subcommands(cli).items():
        module = f"pipeline.cli.{COMMAND_MODULES[name][0]}"
        assert command.callback is not None and command.callback.__module__ == module
        assert summary_of(name, limit) == command.get_short_help_str(limit), name


@pytest.mark.parametrize("name", sorted(EXPECTED_COMMANDS))
def test_help_has_an_example(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "Example" in out, f"`explain-pipeline {name} --help` shows no example"
    example = out[out.index("Example") :]  # the Usage line always names the command: skip it
    assert f"explain-pipeline {name} " in example


def test_top_level_help_documents_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for code in ("0 success", "1 some input rejected", "2 usage error", "3 integrity error"):
        assert code in out


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2
    assert "No such command" in capsys.readouterr().err


def test_console_script_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "explain-pipeline" in done.stdout


def test_commands_are_click_commands_with_docstrings() -> None:
    for name, command in subcommands(cli).items():
        assert isinstance(command, click.Command)
        assert command.help, f"{name} has no help text"


def every_command(group: click.Group = cli, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The path of every registered command and group, subcommands of groups included."""
    found = [path]
    for name, sub in sorted(subcommands(group).items()):
        if isinstance(sub, click.Group):
            found += every_command(sub, (*path, name))
        else:
            found.append((*path, name))
    return found


@pytest.mark.parametrize("path", every_command(), ids=lambda p: " ".join(p) or "(top)")
def test_every_help_ends_with_the_exit_codes(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*path, "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.endswith(" ".join(EXIT_CODES_HELP.split())), f"{' '.join(path)} --help"


def test_exit_codes_help_names_every_exit_code() -> None:
    from pipeline.errors import ExitCode

    for code in ExitCode:
        assert f"{int(code)} " in EXIT_CODES_HELP, code


def test_one_spelling_of_output_and_format() -> None:
    """Every option that writes a result is -o/--output (`-` meaning stdout); every --format
    is the shared option."""
    for path in every_command():
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = subcommands(command)[name]
        for param in command.params:
            if "--output" in param.opts:
                assert param.opts == ["-o", "--output"], path
                assert "`-` writes to stdout" in (getattr(param, "help", "") or ""), path
            if "--format" in param.opts:
                assert (param.name, getattr(param, "help", None)) == ("fmt", "Output format."), path


@pytest.mark.parametrize("path", every_command(), ids=lambda p: " ".join(p) or "(top)")
def test_every_repository_file_a_help_example_names_exists(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """An example that names data/… must work from a clone (round's once named a file that
    does not exist)."""
    import re
    from pathlib import Path

    with pytest.raises(SystemExit):
        main([*path, "--help"])
    root = Path(__file__).resolve().parent.parent
    named = re.findall(r"(?<![\w/.])data/[\w./-]*\w", capsys.readouterr().out)
    missing = [name for name in named if not (root / name).exists()]
    assert missing == [], f"{' '.join(path)} --help names {missing}"


def test_until_decided_help_fits_ab_which_freezes_its_own_campaign() -> None:
    """`ab --help` said --until-decided "needs a campaign frozen with ..." though ab makes its
    own campaign (and freezes it with the interval it needs); round's help keeps the rule."""
    commands = subcommands(cli)
    for name in ("ab", "round"):
        option = next(p for p in commands[name].params if p.name == "until_decided")
        text = " ".join((getattr(option, "help", "") or "").split())
        assert "needs a campaign frozen" not in text, name
        assert "round: the campaign must be frozen with --decision paired --interval " in text
        assert "ab freezes its own so" in text
