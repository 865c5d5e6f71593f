"""The small cases of the issue "Reliability IV". Each failed on the previous code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import cli_result as run_main
from conftest import write_example_campaign

from pipeline import ExplainError, assess, ingest, open_store
from pipeline.assessment.accounting import Account
from pipeline.output.views import accounting_text


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


def test_import_batch_shows_a_skipped_file_name_inert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A skipped file's name is free text from the disk: before, its line feed and the
    `::error` after it reached stderr raw, a workflow command for a CI runner."""
    campaign = Path(__file__).parent / "fixtures" / "import" / "kineto" / "campaign"
    folder = tmp_path / "traces"
    folder.mkdir()
    for name in ("baseline-r0-a.json.gz", "candidate-r0-a.json.gz"):
        (folder / name).write_bytes((campaign / name).read_bytes())
    (folder / "notes\n::error title=x::hacked").write_text("not a trace")
    code, out, err = run_main(["import", "kineto", "--batch", str(folder)], capsys)
    assert code == 0, err
    assert len(out.splitlines()) == 2
    assert not [line for line in err.splitlines() if line.lstrip().startswith("::")], err
    assert "notes\\n::error title=x::hacked: file name does not match" in err


def test_open_store_of_a_missing_path_raises_and_creates_nothing(tmp_path: Path) -> None:
    """Before: open_store("typo") returned a store, assess created typo/.lock and
    typo/.store-format and gave empty results, though docs/python.md says a store that cannot
    be read raises."""
    typo = tmp_path / "typo"
    with pytest.raises(ExplainError, match=r"^no store at .*typo \(run `explain-pipeline ingest`"):
        assess(open_store(typo))
    assert not typo.exists()
    write_example_campaign(tmp_path / "attempts")
    new = tmp_path / "new" / "store"
    assert ingest(tmp_path / "attempts", open_store(new, create=True)).exit_code == 0
    assert assess(open_store(new), "c1").assessments.height == 2


@pytest.mark.parametrize(
    ("rounds", "expected", "gated", "said"),
    [
        (4, 0.03, False, "identical code would PASS about 0.03 rounds of these 4 (r; "),
        (7, 0.04, True, "identical code would PASS at most about 0.04 rounds of these 7 (r; "),
        (1, 0.03, False, "identical code would PASS about 0.03 rounds of this one (r; "),
        (2, 0.0, True, "identical code would PASS none of these 2 (r; "),
    ],
)
def test_the_accounting_says_a_count_of_rounds(
    rounds: int, expected: float, gated: bool, said: str
) -> None:
    """Before: "would PASS about 0.03 of them", which reads as a fraction of the rounds."""
    account = Account(
        campaign_id="c",
        decision="paired",
        rounds=rounds,
        passes=1,
        expected=expected,
        rule="r",
        spread=0.03,
        side_spread=None,
        explanation_gate=gated,
        reference=None,
        chained=False,
        target=None,
        target_rule="best",
        target_row=None,
        chain=(),
        chain_estimate=None,
        confirmation=None,
        other_confirmations=(),
    )
    assert f"1 of {rounds} rounds PASS; {said}" in accounting_text(account)
