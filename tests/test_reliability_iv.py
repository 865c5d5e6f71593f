"""The small cases of the issue "Reliability IV". Each failed on the previous code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pipeline.cli import main


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.mark.parametrize("option", ["--margin-pct", "--min-improvement-pct"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("command", ["ab", "campaign start"])
def test_a_non_finite_policy_number_is_a_usage_error_naming_the_option(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
    command: str,
) -> None:
    """Before: nan passed click's range (it compares false with both bounds) and ab exited 2
    naming line 20 of a deleted temporary campaign.json."""
    monkeypatch.chdir(tmp_path)
    mark = tmp_path / "MARK"
    run = f"{sys.executable} -c \"open({str(mark)!r}, 'w')\""
    if command == "ab":
        args = ["ab", run, run, "-n", "5", "--warmup", "0"]
    else:
        args = ["campaign", "start", "new", "--metric", "seconds"]
    code, out, err = run_main([*args, option, value], capsys)
    assert code == 2, err
    assert f"Invalid value for '{option}': must be a finite number, got '{value}'." in err
    assert "campaign.json" not in err and out == ""
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing run
