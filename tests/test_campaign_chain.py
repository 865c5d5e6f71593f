"""campaign final on chained campaigns (issue 33): one pick per output, named the same way in
the headline, the chain line and the gain line; the chain by label with the rounds that adopted
it; and a chain broken by a baseline never recorded said to be broken. Stored attempts of fixed
noisy runs (seeded: the same verdicts everywhere), real ingest and assess."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_accounting import assessed, campaign

from pipeline.ingestion.attempts import ingest
from pipeline.output import render
from pipeline.record.campaign import FinalResult
from pipeline.store.tables import Store

# main -> a is the largest single step (best); a -> b the chain's last adopted step (the pick)
CHAIN = [("main", "a", 0.8), ("a", "b", 0.92)]


def final(tmp_path: Path, rounds: list[tuple[str, str, float]], fmt: str) -> str:
    folder = campaign(tmp_path / "attempts", rounds)
    store = Store(tmp_path / "store")
    result = assessed(folder, store)
    return render(FinalResult(ingest(folder.parent, store), result, "c1"), fmt)


@pytest.mark.slow
def test_a_chained_campaign_names_one_pick(tmp_path: Path) -> None:
    text = final(tmp_path, CHAIN, "table")
    tail = text[text.index("campaign accounting") :].splitlines()[1:]
    assert tail[1].startswith(
        "pick: r002 (round 2, candidate b, the chain's last adopted step): PASS; best in the "
        "table, r001, is the largest single step, not the pick of a chained campaign"
    )
    assert "best attempt:" not in text  # before: "best attempt: r001", then the target r002
    assert tail[2].startswith("  selected estimate of r002: ")
    assert tail[3].startswith(
        "  chained campaign (a round's baseline is an earlier candidate): main -> a -> b "
        "(adopted in r001, r002); their estimates multiply to "
    )
    assert "the target is" not in text
    assert tail[4].startswith("campaign's gain: not measured again: no confirmation round of r002")


@pytest.mark.slow
def test_the_markdown_names_the_same_pick(tmp_path: Path) -> None:
    text = final(tmp_path, CHAIN, "markdown")
    assert "**pick:** r002 (round 2, candidate b, the chain's last adopted step): PASS" in text
    assert "**best attempt:**" not in text
    assert "main -&gt; a -&gt; b (adopted in r001, r002)" in text


def test_a_chain_broken_by_a_baseline_never_recorded_says_so(tmp_path: Path) -> None:
    """main -> a, a -> b, then z -> c: c's baseline z is no round's candidate, so r003 does not
    follow main (before: printed ``main -> r003``)."""
    text = final(tmp_path, [*CHAIN, ("z", "c", 0.85)], "table")
    assert "main -> r003" not in text
    assert (
        "chained campaign (a round's baseline is an earlier candidate), chain broken: z -> c "
        "(adopted in r003) starts at z, which no earlier adopted round made, so r003 does not "
        "follow main; its confirmation measures c against main directly"
    ) in text
    assert "pick: r003 (round 3, candidate c, the chain's last adopted step): PASS" in text


@pytest.mark.slow
def test_an_unchained_campaign_keeps_its_best_attempt(tmp_path: Path) -> None:
    text = final(tmp_path, [("main", "a", 0.8), ("main", "b", 0.92)], "table")
    assert "best attempt: r001 (round 1, candidate a): PASS\n" in text
    assert "pick:" not in text and "chained" not in text


def test_the_report_header_counts_a_confirmation_apart(tmp_path: Path) -> None:
    """Two rounds PASS, then a confirmation of the pick: the header said ``PASS × 3`` (the
    confirmation counted as a round, the pick twice); now ``PASS × 2`` and the confirmation
    named beside it."""
    import polars as pl
    from test_accounting import attempt, noisy_runs

    from pipeline.report.pages import _verdict_counts
    from pipeline.study.stored import write_attempt

    folder = campaign(tmp_path / "attempts", [("main", "a", 0.8), ("main", "b", 0.92)])
    confirm = attempt("c003", 3, "main", "a", kind="confirmation", confirms="r001")
    write_attempt(folder, confirm, noisy_runs(0.8, 7))
    rows = assessed(folder, Store(tmp_path / "store")).assessments
    assert rows.filter(pl.col("verdict") == "PASS").height == 3
    header = _verdict_counts(rows)
    assert "&nbsp;×&nbsp;2" in header and "×&nbsp;3" not in header
    assert header.endswith("confirmation c003: " + header.split("confirmation c003: ")[1])
    assert "PASS" in header.split("confirmation c003: ")[1]
