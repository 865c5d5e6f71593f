"""The gate fails closed (issue 32): a round too short to decide anything is refused before it
runs, a member that cannot be decided for a data reason fails ``--fail-on regression|change``,
and a non-finite interval or estimate is never a direction. Measured values are fixed per
``$EXPLAIN_SIDE`` and ``$EXPLAIN_REPETITION`` (no test depends on the machine's speed)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from pipeline.cli import main


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def _touch(marker: Path) -> str:
    return shlex.join([sys.executable, "-c", f"open({str(marker)!r}, 'a').write('x')"])


# -- -n below min_pairs ------------------------------------------------------------------------
def test_ab_with_fewer_repetitions_than_min_pairs_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ab -n 3 --fail-on regression "sleep 0.05" "sleep 0.1" exited 0, 'the metric did
    not regress', for a candidate twice as slow: three pairs get no interval."""
    marker = tmp_path / "ran"
    for fail_on in ("regression", "change", "not-improved"):
        code, out, err = _cli(
            ["ab", "-n", "3", "--fail-on", fail_on, _touch(marker), _touch(marker)], capsys
        )
        assert (code, out) == (2, ""), err
        assert err == (
            "error: --repetitions 3: ab's campaign would freeze min_pairs 5, the fewest pairs "
            "that get an interval, so this round could decide nothing; give -n 5 or more (or "
            "--until-decided); nothing was run\n"
        )
    code, _, err = _cli(["ab", "-n", "4", "--decision", "median", "true", "true"], capsys)
    assert code == 2 and "min_pairs 5" in err  # whatever the decision rule
    assert not marker.exists()


def test_round_and_confirm_with_fewer_repetitions_than_min_pairs_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "attempts" / "c"
    start = ["campaign", "start", str(folder), "--metric", "s", "--min-pairs", "8"]
    assert _cli(start, capsys)[0] == 0
    marker = tmp_path / "ran"
    args = ["round", str(folder), "--baseline", "a", "--candidate", "b", "-n", "7"]
    args += ["--baseline-cmd", _touch(marker), "--candidate-cmd", _touch(marker)]
    code, _, err = _cli(args, capsys)
    assert code == 2, err
    assert err.startswith(
        f"error: --repetitions 7: {folder / 'campaign.json'} freezes min_pairs 8, the fewest "
        "pairs that get an interval"
    )
    code, _, err = _cli(["campaign", "final", str(folder), "--confirm", "-n", "5"], capsys)
    assert code == 2, err
    assert err.startswith(f"error: --repetitions 5: {folder / 'campaign.json'} freezes min_pairs 8")
    assert not marker.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["campaign.json"]  # nothing ran
