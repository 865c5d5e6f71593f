"""The stopping plan of a round --until-decided is protected like the mechanism (issue 27):
attempt.json's ``sequential`` object decides the sequential_t interval's width, so its plan is
digested when the round starts, the store keeps the first digest it saw, and the looks are
checked against the plan and the pairs. Before this, deleting ``sequential``, claiming one look
at 1,000 pairs or 16 pairs under a plan ending at 10 turned a FAIL at the maximum into a PASS
with exit 0, and ingest accepted looks ``[]`` and ``[10, 6, 0]``."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.cli import main
from pipeline.contract.policy import sequential_sha256
from pipeline.store.tables import Store
from pipeline.study.stored import write_attempt, write_campaign

POLICY = {"decision": "paired", "interval": "sequential_t", "resamples": 200}
PLAN = {"first_look": 6, "look_every": 2, "max_pairs": 10}


def _runs(pairs: int, gain: float = 1.02) -> list[dict[str, Any]]:
    """A small gain hidden in noise: within_noise under the plan's wide interval."""
    out = []
    for r in range(pairs):
        wobble = 1 + 0.03 * ((r * 7) % 5 - 2)
        for order, (side, value) in enumerate(
            (("baseline", 1.0 * wobble), ("candidate", wobble / gain * (1 + 0.02 * (r % 3 - 1))))
        ):
            out.append(
                {"side": side, "repetition": r, "status": "ok", "metric": value, "order": order}
            )
    return out


def _campaign(root: Path, sequential: dict[str, Any] | None, pairs: int = 10, **extra: Any) -> Path:
    folder = write_campaign(
        root / "attempts",
        "seq",
        created_at="2026-11-01T10:00:00Z",
        metric={"name": "seconds", "better": "lower"},
        policy=POLICY,
    )
    attempt: dict[str, Any] = {
        "attempt_id": "r001",
        "round": 1,
        "candidate": "b",
        "baseline": "a",
        "status": "completed",
        "started_at": "2026-11-01T12:00:00Z",
        **extra,
    }
    if sequential is not None:
        attempt["sequential_sha256"] = sequential_sha256(sequential)
        attempt["sequential"] = sequential
    write_attempt(folder, attempt, _runs(pairs))
    return folder


def _final(folder: Path, store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        main(["campaign", "final", str(folder), "--store", str(store)])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out + err


def _edit(folder: Path, change: Any) -> None:
    path = folder / "r001" / "attempt.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def _codes(store: Path) -> list[str]:
    return Store(store).read("integrity")["code"].to_list()


def test_an_untouched_plan_decides_and_a_deleted_one_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _campaign(tmp_path, {**PLAN, "looks": [6, 8, 10], "stopped": "max"})
    code, out = _final(folder, tmp_path / "store", capsys)
    assert code == 0 and "FAIL (within_noise)" in out, out
    _edit(folder, lambda d: d.pop("sequential"))  # the interval becomes student_t's: narrower
    code, out = _final(folder, tmp_path / "store", capsys)
    assert code == 3, out
    assert set(_codes(tmp_path / "store")) == {"sequential_missing", "sequential_changed"}
    assert "BLOCKED" in out and "no verdicts issued" in out


def test_deleting_the_plan_and_its_digest_after_ingest_is_seen_by_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _campaign(tmp_path, {**PLAN, "looks": [6, 8, 10], "stopped": "max"})
    assert _final(folder, tmp_path / "store", capsys)[0] == 0
    _edit(folder, lambda d: [d.pop("sequential"), d.pop("sequential_sha256")])
    code, out = _final(folder, tmp_path / "store", capsys)
    assert code == 3, out
    assert _codes(tmp_path / "store") == ["sequential_changed"]
    assert "the stopping plan (sequential, first seen with sha256" in out


def test_claiming_one_look_at_1000_pairs_breaks_the_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _campaign(tmp_path, {**PLAN, "looks": [6, 8, 10], "stopped": "max"})

    def one_look(document: dict[str, Any]) -> None:
        document["sequential"] |= {"first_look": 1000, "max_pairs": 1000, "looks": [10]}

    _edit(folder, one_look)
    code, out = _final(folder, tmp_path / "store", capsys)
    assert code == 3, out
    assert "sequential_digest_mismatch" in _codes(tmp_path / "store")


@pytest.mark.parametrize(
    ("sequential", "pairs", "code"),
    [
        ({**PLAN, "looks": [], "stopped": "max"}, 10, "sequential_looks_invalid"),
        ({**PLAN, "looks": [10, 6, 0], "stopped": "max"}, 10, "sequential_looks_invalid"),
        ({**PLAN, "looks": [6, 8, 12], "stopped": "max"}, 10, "sequential_looks_invalid"),
        ({**PLAN, "looks": [6, 8], "stopped": "pass"}, 10, "sequential_looks_invalid"),
        ({**PLAN, "looks": [6, 8, 10], "stopped": "max"}, 16, "sequential_pairs_over_plan"),
        (
            {"first_look": 12, "look_every": 2, "max_pairs": 10, "looks": [10], "stopped": "max"},
            10,
            "sequential_plan_invalid",
        ),
    ],
)
def test_looks_the_plan_and_the_pairs_cannot_have_given_block_the_campaign(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sequential: dict[str, Any],
    pairs: int,
    code: str,
) -> None:
    """Each with a matching digest: the consistency checks alone catch them."""
    folder = _campaign(tmp_path, sequential, pairs=pairs)
    exit_code, out = _final(folder, tmp_path / "store", capsys)
    assert exit_code == 3, out
    assert code in _codes(tmp_path / "store")
    assert f"[{code}]" in out


@pytest.mark.slow
def test_consistent_plans_without_a_digest_and_interrupted_rounds_are_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An attempt recorded before plans were digested keeps its verdict; an interrupted round
    may have taken no look, or have pairs past its last look."""
    folder = _campaign(tmp_path, None)
    _edit(folder, lambda d: d.update(sequential={**PLAN, "looks": [6, 8, 10], "stopped": "max"}))
    code, out = _final(folder, tmp_path / "store", capsys)
    assert code == 0 and "FAIL (within_noise)" in out, out
    for looks in ([], [6]):
        shutil.rmtree(tmp_path / "attempts")
        sequential = {**PLAN, "looks": looks, "stopped": "interrupted"}
        folder = _campaign(tmp_path, sequential, pairs=9, status="aborted")
        code, out = _final(folder, tmp_path / "store2", capsys)
        assert code == 0, out
        assert _codes(tmp_path / "store2") == []


@pytest.mark.slow
def test_a_store_written_before_plans_were_digested_adopts_the_plan_it_sees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sequential = {**PLAN, "looks": [6, 8, 10], "stopped": "max"}
    folder = _campaign(tmp_path, sequential)
    store = tmp_path / "store"
    assert _final(folder, store, capsys)[0] == 0
    frame = (
        Store(store)
        .read("attempts")
        .with_columns(sequential_sha256_first_seen=pl.lit(None, pl.String))
    )
    with Store(store).transaction() as txn:
        txn.put("attempts", "seq", frame)
    _edit(folder, lambda d: d.update(candidate="b2"))  # re-ingested: its first plan is unknown
    assert _final(folder, store, capsys)[0] == 0
    first = Store(store).read("attempts")["sequential_sha256_first_seen"][0]
    assert first == sequential_sha256(sequential)


@pytest.mark.slow
def test_a_real_round_records_its_plan_digest_before_the_first_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "attempts" / "real"
    with pytest.raises(SystemExit):
        main(["campaign", "start", str(folder), "--metric", "s", "--decision", "paired",
              "--interval", "sequential_t"])  # fmt: skip
    script = tmp_path / "peek.py"
    script.write_text(  # the first run sees attempt.json as written when the round started
        "import json, os, pathlib, sys\n"
        f"root = pathlib.Path({str(folder)!r})\n"
        "seen = root / 'seen.json'\n"
        "if not seen.exists():\n"
        "    doc = json.loads(next(root.glob('r001/attempt.json')).read_text())\n"
        "    seen.write_text(json.dumps(doc))\n"
    )
    with pytest.raises(SystemExit) as exc:
        main(["round", str(folder), "--baseline", "a", "--candidate", "b", "--warmup", "0",
              "--baseline-cmd", f"{sys.executable} {script}",
              "--candidate-cmd", f"{sys.executable} {script}",
              "--until-decided", "--max-repetitions", "8"])  # fmt: skip
    capsys.readouterr()
    assert exc.value.code == 0
    seen = json.loads((folder / "seen.json").read_text())
    final = json.loads((folder / "r001" / "attempt.json").read_text())
    plan = {k: final["sequential"][k] for k in PLAN}
    assert plan == {"first_look": 6, "look_every": 2, "max_pairs": 8}
    assert seen["sequential_sha256"] == final["sequential_sha256"]
    canonical = json.dumps(plan, sort_keys=True, separators=(",", ":")).encode()
    assert final["sequential_sha256"] == hashlib.sha256(canonical).hexdigest()  # contract §2.2
    (folder / "seen.json").unlink()
    code, out = _final(folder, tmp_path / "store", capsys)
    assert code == 0 and _codes(tmp_path / "store") == [], out
