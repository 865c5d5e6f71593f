"""`campaign final --confirm` runs only what the user can read and trust, once, measured as the
pick was (issue 33): the real recorder on campaign folders the tests edit. Every command writes a
fixed metric per $EXPLAIN_SIDE and $EXPLAIN_REPETITION, so nothing depends on the machine's
speed."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import CliRun

from pipeline.record import environment
from pipeline.store.tables import Store

MEASURE = """\
import json, os, sys, time
value = float(sys.argv[1])
rep = int(os.environ["EXPLAIN_REPETITION"])
side = 3 if os.environ["EXPLAIN_SIDE"] == "candidate" else 0
if len(sys.argv) > 2 and os.path.exists(sys.argv[2]) and rep == 3:
    open(sys.argv[2] + ".reached", "w").close()
    time.sleep(120)
with open(os.environ["EXPLAIN_MEASUREMENT"], "w") as handle:
    json.dump({"metric": value * (1 + 0.01 * ((rep * 7 + side) % 5 - 2))}, handle)
"""
"""A run's metric: its argument times a fixed wobble of its side and repetition. Given a second
argument naming a file that exists, repetition 3 says so (FILE.reached) and hangs."""


def measure(script: Path, value: float, *hang: Path) -> str:
    return shlex.join([sys.executable, str(script), str(value), *map(str, hang)])


def document(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "attempt.json").read_text(encoding="utf-8"))


def rewrite(folder: Path, **fields: Any) -> None:
    """Edit attempt.json as someone else's campaign folder could hold it."""
    doc = document(folder) | fields
    (folder / "attempt.json").write_text(json.dumps(doc), encoding="utf-8")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "measure.py"
    path.write_text(MEASURE, encoding="utf-8")
    return path


@pytest.fixture
def campaign(tmp_path: Path, script: Path, run_cli: CliRun) -> Path:
    """One round: main (1.0) against fast (0.5), recorded by the real recorder."""
    folder = tmp_path / "attempts" / "received"
    code, _, err = run_cli(
        ["campaign", "start", str(folder), "--metric", "seconds", "--decision", "paired"]
        + ["--interval", "student_t"]
    )
    assert code == 0, err
    code, _, err = run_cli(
        ["round", str(folder), "--baseline", "main", "--candidate", "fast"]
        + ["--baseline-cmd", measure(script, 1.0), "--candidate-cmd", measure(script, 0.5)]
        + ["-n", "6", "--warmup", "0"]
    )
    assert code == 0, err
    return folder


def confirm(run_cli: CliRun, folder: Path, *extra: str) -> tuple[int, str, str]:
    store = folder.parent.parent / "store"
    return run_cli(["campaign", "final", str(folder), "--store", str(store), "--confirm", *extra])


def hostile(folder: Path, mark: Path, **where: str) -> str:
    """The pick's candidate edited to touch ``mark`` from /, its environment edited by ``where``."""
    command = f"sh -c {shlex.quote(f'touch {mark}')}"
    doc = document(folder / "r001")
    commands = doc["commands"] | {"candidate": {"command": command, "cwd": "/"}}
    rewrite(folder / "r001", commands=commands, environment=doc["environment"] | where)
    return command


def test_the_round_records_its_host_and_user(campaign: Path) -> None:
    recorded = document(campaign / "r001")["environment"]
    assert (recorded["host"], recorded["user"]) == (environment.host(), environment.user())


def test_a_command_recorded_on_another_host_is_refused_and_not_run(
    campaign: Path, tmp_path: Path, run_cli: CliRun
) -> None:
    mark = tmp_path / "MARK"
    command = hostile(campaign, mark, host="elsewhere.example")
    code, out, err = confirm(run_cli, campaign, "-n", "6")
    assert code == 2, err
    assert not mark.exists()
    assert not (campaign / "c002").exists()
    here = environment.host()
    assert err.startswith(
        f"error: r001 was recorded on host 'elsewhere.example', not {here!r}: a campaign folder "
        "received from elsewhere can hold any command, and --confirm runs it with your rights. "
        "Nothing was run. Read the commands:\n"
    )
    assert f"  candidate fast: {command}\n            in /\n" in err
    assert "give --trust-recorded-commands to run them" in err


@pytest.mark.slow
def test_a_command_recorded_by_another_user_or_nowhere_said_is_refused(
    campaign: Path, tmp_path: Path, run_cli: CliRun
) -> None:
    mark = tmp_path / "MARK"
    hostile(campaign, mark, user="mallory")
    code, _, err = confirm(run_cli, campaign, "-n", "6")
    assert code == 2, err
    assert err.startswith("error: r001 was recorded by user 'mallory', not ")
    doc = document(campaign / "r001")
    rewrite(campaign / "r001", environment={"os": doc["environment"]["os"]})
    code, _, err = confirm(run_cli, campaign, "-n", "6")
    assert code == 2, err
    assert err.startswith("error: r001 does not say which host recorded it (no environment.host)")
    assert not mark.exists()


@pytest.mark.slow
def test_trusted_commands_run_after_being_shown(
    campaign: Path, tmp_path: Path, run_cli: CliRun
) -> None:
    mark = tmp_path / "MARK"
    command = hostile(campaign, mark, host="elsewhere.example")
    code, _, err = confirm(run_cli, campaign, "-n", "6", "--trust-recorded-commands")
    assert mark.exists()  # trusted on purpose: it ran, from the recorded folder
    assert document(campaign / "c002")["commands"]["candidate"] == {"command": command, "cwd": "/"}
    shown = err.index("confirmation round c002 of r001 runs:\n")
    assert err[shown:].startswith(
        "confirmation round c002 of r001 runs:\n"
        f"  baseline  main: {measure(tmp_path / 'measure.py', 1.0)}\n"
        "            in the current folder\n"
        f"  candidate fast: {command}\n            in /\n"
    )
    assert code == 0, err


@pytest.mark.slow
def test_the_shown_commands_are_escaped(campaign: Path, tmp_path: Path, run_cli: CliRun) -> None:
    doc = document(campaign / "r001")
    candidate = {"command": "true\n::error::forged", "cwd": "/"}
    rewrite(campaign / "r001", commands=doc["commands"] | {"candidate": candidate})
    code, _, err = confirm(run_cli, campaign, "-n", "6")
    assert code == 0, err
    assert "  candidate fast: true\\n::error::forged\n" in err
    assert "\n::error" not in err


@pytest.mark.slow
def test_commands_edited_after_ingest_block_the_campaign(
    campaign: Path, tmp_path: Path, run_cli: CliRun
) -> None:
    store = tmp_path / "store"
    code, out, err = run_cli(["campaign", "final", str(campaign), "--store", str(store)])
    assert code == 0, err
    first = Store(store).read("attempts", ["received"])["commands_sha256_first_seen"][0]
    recorded = document(campaign / "r001")["commands"]
    canonical = json.dumps(recorded, sort_keys=True, separators=(",", ":")).encode()
    assert first == hashlib.sha256(canonical).hexdigest()
    mark = tmp_path / "MARK"
    hostile(campaign, mark)  # same host, same user: only the store saw the first commands
    code, out, err = confirm(run_cli, campaign, "-n", "6")
    assert code == 3, err
    assert not mark.exists()
    assert err.startswith("error: campaign 'received' is blocked by integrity errors")
    rows = Store(store).read("integrity", ["received"])
    assert rows.select("attempt_id", "code", "expected").rows() == [
        ("r001", "commands_changed", first)
    ]
    assert rows["message"][0] == (
        f"attempt.json's commands have sha256 {rows['actual'][0][:12]}…, not the {first[:12]}… "
        "the store saw first"
    )
    code, out, _ = run_cli(["campaign", "final", str(campaign), "--store", str(store)])
    assert code == 3 and "commands_changed" in out and "BLOCKED" in out


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
@pytest.mark.slow
def test_an_interrupted_confirmation_counts_and_measuring_again_is_recorded(
    tmp_path: Path, script: Path, run_cli: CliRun, stop: signal.Signals
) -> None:
    """SIGTERM, or SIGINT as Ctrl-C sends it, to the real process while the command of
    repetition 3 hangs: the round stops at once (the hanging command killed), the aborted
    confirmation keeps its pairs and counts; a second --confirm is refused; --measure-again
    runs, says so in attempt.json, and is shown beside the first, which stays the campaign's
    gain."""
    folder, hang = tmp_path / "attempts" / "stopped", tmp_path / "hang"
    store = tmp_path / "store"
    code, _, err = run_cli(
        ["campaign", "start", str(folder), "--metric", "seconds", "--decision", "paired"]
    )
    assert code == 0, err
    code, _, err = run_cli(
        ["round", str(folder), "--baseline", "main", "--candidate", "fast"]
        + ["--baseline-cmd", measure(script, 1.0, hang)]
        + ["--candidate-cmd", measure(script, 0.5, hang), "-n", "6", "--warmup", "0"]
    )
    assert code == 0, err
    hang.touch()
    args = ["campaign", "final", str(folder), "--store", str(store), "--confirm", "-n", "6"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *args, "--warmup", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not Path(f"{hang}.reached").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(stop)
    try:  # the command hangs for 120 s: only the signal ends the round before
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.returncode == 130, err
    assert document(folder / "c002")["status"] == "aborted"
    hang.unlink()

    code, _, err = run_cli(args)
    assert code == 2, err
    assert err.startswith(
        "error: r001 is already confirmed by c002 (aborted, 3 pairs): a started confirmation "
        "counts, aborted or completed"
    )
    assert not (folder / "c003").exists()

    code, out, err = run_cli([*args, "--measure-again", "--warmup", "0"])
    assert code == 0, err
    assert document(folder / "c003")["chosen"] == ["again"]
    assert (
        "campaign's gain: 2.0066 from confirmation round c002 (fast against main, 3 pairs, "
        "aborted): INCONCLUSIVE (attempt_aborted)\n" in out
    )
    assert (
        "c003 is a confirmation round of r001 measured again by choice after c002 (not the "
        "campaign's gain, which counts the first): 1.9900 [1.9569, 2.0236] (fast against main, "
        "6 pairs): PASS\n"
    ) in out
    code, _, err = run_cli(
        ["report", "stopped", "--store", str(store), "-o", str(tmp_path / "r.html")]
    )
    assert code == 0, err
    assert "c003 is a confirmation round of r001 measured again by choice after c002" in (
        tmp_path / "r.html"
    ).read_text(encoding="utf-8")


@pytest.mark.slow
def test_given_commands_other_than_the_recorded_ones_are_refused_or_recorded(
    campaign: Path, script: Path, run_cli: CliRun
) -> None:
    other = measure(script, 0.9)
    code, _, err = confirm(run_cli, campaign, "-n", "6", "--baseline-cmd", other)
    assert code == 2, err
    assert err == (
        f"error: --baseline-cmd {other!r}: r001 recorded {measure(script, 1.0)!r} for 'main', "
        "and the output would say 'main' was measured; give --with-given-commands to measure "
        "with given commands (recorded and shown as such)\n"
    )
    assert not (campaign / "c002").exists()
    same = measure(script, 1.0)  # the recorded command, given again: nothing chosen
    code, out, err = confirm(run_cli, campaign, "-n", "6", "--warmup", "0", "--baseline-cmd", same)
    assert code == 0, err
    assert "chosen" not in document(campaign / "c002")
    code, out, err = confirm(
        run_cli,
        campaign,
        "-n",
        "6",
        "--warmup",
        "0",
        "--baseline-cmd",
        other,
        "--with-given-commands",
        "--measure-again",
    )
    assert code == 0, err
    confirmation = document(campaign / "c003")
    assert confirmation["chosen"] == ["again", "given_commands"]
    assert confirmation["commands"]["baseline"]["command"] == other
    assert "6 pairs, measured with given commands, not the recorded ones): " in out


@pytest.mark.slow
def test_a_confirmation_whose_folder_was_deleted_still_counts(
    campaign: Path, tmp_path: Path, run_cli: CliRun
) -> None:
    """The store keeps a confirmation whose folder is gone: a second one is refused, and one
    measured again by choice takes a new id beside it instead of replacing it under its own."""
    code, _, err = confirm(run_cli, campaign, "-n", "6", "--warmup", "0")
    assert code == 0, err
    first = document(campaign / "c002")["order_seed"]
    shutil.rmtree(campaign / "c002")
    code, _, err = confirm(run_cli, campaign, "-n", "6", "--warmup", "0")
    assert code == 2, err
    assert err.startswith("error: r001 is already confirmed by c002 (completed, 6 pairs)")
    code, out, err = confirm(run_cli, campaign, "-n", "6", "--warmup", "0", "--measure-again")
    assert code == 0, err
    assert not (campaign / "c002").exists()
    assert document(campaign / "c003")["chosen"] == ["again"]
    stored = Store(tmp_path / "store").read("attempts", ["received"])
    seeds = dict(stored.select("attempt_id", "order_seed").iter_rows())
    assert seeds["c002"] == first
    assert "c003 is a confirmation round of r001 measured again by choice after c002" in out
    assert (
        "campaign's gain: 1.9900 [1.9335, 2.0481] from confirmation round c002 (fast against "
        "main, 6 pairs): PASS\n"
    ) in out
