"""Every command has help text with an example, and the exit codes are documented."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from pipeline.cli import cli, main

EXPECTED_COMMANDS = {"ingest", "assess", "query", "simulate", "calibrate", "report", "import",
                     "campaign", "round", "ab", "store"}  # fmt: skip


def test_every_command_of_the_spec_is_registered() -> None:
    assert set(cli.commands) >= EXPECTED_COMMANDS


@pytest.mark.parametrize("name", sorted(EXPECTED_COMMANDS))
def test_help_has_an_example(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "Example" in out, f"`explain-pipeline {name} --help` shows no example"
    assert f"explain-pipeline {name}" in out


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
    for name, command in cli.commands.items():
        assert isinstance(command, click.Command)
        assert command.help, f"{name} has no help text"
