"""The installed command leaves with os._exit once its work is done (pipeline.cli.run): its
output, its exit status and the exit handlers must be exactly those of a normal exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import CLI

from pipeline import __version__

KINETO = Path(__file__).parent / "fixtures" / "import" / "kineto" / "cpu_steps.json"
# Buffered output, as on a user's machine (this one may set PYTHONUNBUFFERED, which would hide a
# missing flush).
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


@pytest.mark.slow
def test_output_to_a_file_is_flushed(tmp_path: Path) -> None:
    """Redirected to a file, stdout is block-buffered: without the flush the imported line
    (written with sys.stdout.write) would be lost."""
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    command = [str(CLI), "import", "kineto", str(KINETO), "--side", "baseline", "--repetition", "0"]
    with out.open("w") as stdout, err.open("w") as stderr:
        done = subprocess.run(command, stdout=stdout, stderr=stderr, env=BUFFERED)
    assert done.returncode == 0, err.read_text()
    [line] = out.read_text().splitlines()
    assert (json.loads(line)["side"], json.loads(line)["repetition"]) == ("baseline", 0)
    with out.open("w") as stdout, err.open("w") as stderr:
        usage = subprocess.run(
            [str(CLI), "assess", "--bogus"], stdout=stdout, stderr=stderr, env=BUFFERED
        )
    assert usage.returncode == 2
    assert err.read_text().endswith("\n\nerror: No such option '--bogus'.\n")


def test_python_dash_m_and_exit_handlers() -> None:
    """`python -m pipeline` is the same command; handlers registered with atexit (Ray's
    shutdown, temporary folders) still run, after the command's own output."""
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('handler ran'))\n"
        "sys.argv = ['explain-pipeline', '--version']\n"
        "import runpy\n"
        "runpy.run_module('pipeline', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=BUFFERED
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"explain-pipeline, version {__version__}\nhandler ran\n"


@pytest.mark.parametrize("argument", ["None", "0", "3", "130", "'a message'"])
def test_exit_status_is_pythons(argument: str) -> None:
    """run() turns SystemExit's code into a status as Python's own exit does (None -> 0, an int
    itself, any other object printed to stderr -> 1): compared with a real interpreter."""
    reference = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.exit({argument})"], capture_output=True, text=True
    )
    ours = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import os; from pipeline.cli import _exit_status; os._exit(_exit_status({argument}))",
        ],
        capture_output=True,
        text=True,
    )
    assert (ours.returncode, ours.stderr) == (reference.returncode, reference.stderr)
