"""campaign.json at campaign start, the final assessment, and the one-line A/B comparison."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.assessment import stopping
from pipeline.atomic import create_atomic, dump_json
from pipeline.contract.declare import schema_id
from pipeline.contract.layout import CAMPAIGN_FILE, id_rule, valid_id
from pipeline.contract.policy import policy_sha256, with_defaults
from pipeline.errors import ExplainError, UsageError
from pipeline.ingestion.files import validate_document
from pipeline.record.options import RunOptions, ab_policy
from pipeline.record.rounds import (
    RoundInterrupted,
    RoundRequest,
    RoundResult,
    check_repetitions,
    record_round,
)
from pipeline.record.runner import now, timestamp

if TYPE_CHECKING:  # polars-backed modules load when a command needs them, not at --help
    import polars as pl

    from pipeline.assessment.campaigns import AssessResult
    from pipeline.assessment.gate import Gate
    from pipeline.ingestion.attempts import IngestReport
    from pipeline.store.tables import Store


def frozen_message(path: Path) -> str:
    return (
        f"{path}: already exists; a campaign's policy is frozen at its start "
        "(start a new campaign to change it)"
    )


def start_campaign(
    folder: Path,
    *,
    metric: str,
    better: str = "lower",
    kind: str = "project",
    policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``folder/campaign.json``: every policy default filled in, its digest, created now.
    Refused when the folder already holds one. Returns the document."""
    if not valid_id(folder.name):
        raise UsageError(f"{folder}: the folder name is the campaign id and {id_rule()}")
    path = folder / CAMPAIGN_FILE
    if path.exists():
        raise UsageError(frozen_message(path))
    given = dict(policy or {})
    document = {
        "schema": schema_id("campaign"),
        "campaign_id": folder.name,
        "kind": kind,
        "created_at": timestamp(now()),
        "metric": {"name": metric, "better": better},
        "policy": with_defaults(given),
        "policy_sha256": policy_sha256(given),
    }
    body = dump_json(document)
    _, issues = validate_document(path, body, "campaign")
    if issues:
        raise UsageError("\n".join(str(issue) for issue in issues))
    folder.mkdir(parents=True, exist_ok=True)
    if not create_atomic(path, body):
        raise UsageError(frozen_message(path))
    return document


@dataclass(frozen=True)
class FinalResult:
    ingest: IngestReport
    assess: AssessResult
    campaign_id: str
    confirmed: RoundResult | None = None
    """``campaign final --confirm``: the confirmation round recorded before this assessment."""
    folder: Path | None = None
    """The campaign folder (the next command names it)."""
    store: Path | None = None
    """The store's folder, when it is not the default one (the next command names it too)."""

    @property
    def rejected(self) -> pl.DataFrame:
        """What ingest rejected in this campaign (rows of table ``rejections``)."""
        from pipeline.contract.schemas import table

        found = self.assess.rejected
        return found if found is not None else table("rejections").empty()


def final_campaign(folder: Path, store: Store) -> FinalResult:
    """Ingest the campaign folder into ``store`` and assess that campaign."""
    from pipeline.assessment.campaigns import assess
    from pipeline.ingestion.attempts import ingest
    from pipeline.record.rounds import read_campaign_json

    read_campaign_json(folder)
    report = ingest(folder, store)
    return FinalResult(
        report, assess(store, [folder.name]), folder.name, folder=folder, store=named_store(store)
    )


def named_store(store: Store) -> Path | None:
    """The store's folder as a printed command must name it: None when it is the default one
    (a command without --store and without $EXPLAIN_STORE finds it)."""
    from pipeline.store.tables import DEFAULT_STORE

    return None if store.root == Path(DEFAULT_STORE) else store.root


LABEL_RULE = "two labels A,B: distinct, not empty, without commas or control characters"


def check_names(names: Sequence[str]) -> tuple[str, str]:
    """ab's short labels of its two sides (shown in every output, recorded as the attempt's
    baseline and candidate instead of the whole commands); a UsageError says what is wrong."""
    from pipeline.contract.inert import printable

    if len(names) != 2:
        raise UsageError(f"{LABEL_RULE}; got {len(names)}")
    for name in names:
        if not name.strip():
            raise UsageError(f"{LABEL_RULE}; got an empty one")
        if "," in name or printable(name) != name:
            raise UsageError(f"{LABEL_RULE}; got {printable(name)!r}")
    if names[0] == names[1]:
        raise UsageError(f"{LABEL_RULE}; got {printable(names[0])!r} twice")
    return names[0], names[1]


@dataclass(frozen=True)
class AbResult:
    round: RoundResult
    final: FinalResult
    kept: Path | None
    policy: dict[str, Any]
    priced: dict[float, int | None] | None = None
    """Not PASS: pairs a fixed round needs to detect each gain of PRICED_EFFECTS_PCT at 80%
    power, from this round's spread (pipeline.study.plan); None when it is PASS or unpriced."""
    commands: tuple[str, str] = ("", "")
    """The two commands compared: A (the baseline) and B (the candidate)."""
    names: tuple[str, str] | None = None
    """Their short labels (``names``), when given: the attempt's baseline and candidate."""
    report: Path | None = None
    """The HTML report page written (``report``), when asked for."""
    gate: Gate | None = None
    """The CI gate (``fail_on``): exit 5 when it failed; None when there is no verdict (the
    round failed, or an integrity error blocked the campaign)."""

    @property
    def row(self) -> dict[str, Any] | None:
        rows = self.final.assess.assessments
        return rows.row(0, named=True) if rows.height else None


def _price(folder: Path, final: FinalResult) -> dict[float, int | None] | None:
    """What ab adds to a verdict that is not PASS: how far from shown it was, in pairs."""
    from pipeline.study.plan import EFFECTS_PCT, plan

    rows = final.assess.assessments
    if rows.is_empty() or rows["verdict"][0] == "PASS" or not (rows["n_pairs"][0] or 0) >= 2:
        return None
    try:
        priced = plan(folder, EFFECTS_PCT, sequential_columns=False)
    except ExplainError:  # no spread to price from (metrics of 1e-300 and 1e300: no log-ratio)
        return None  # the verdict is printed all the same, without its price line
    return {r.effect_pct: r.fixed[0.8] for r in priced.rows if r.spread.quantity == "metric"}


def ab(
    command_a: str,
    command_b: str,
    *,
    run: RunOptions | None = None,
    policy: dict[str, Any] | None = None,
    metric: str = "seconds",
    better: str = "lower",
    keep: Path | None = None,
    progress: bool = False,
    warn: Callable[[str], None] | None = None,
    fail_on: str = "not-improved",
    names: Sequence[str] | None = None,
    report: Path | None = None,
    write_page: Callable[[Store, str, Path], object] | None = None,
    allow_removed: bool = False,
) -> AbResult:
    """A throw-away campaign (or one kept in ``keep``) with one round, A the baseline and B the
    candidate, then its assessment. ``policy`` is laid over ab's defaults (``ab_policy``: the
    paired rule and the calibrated interval), the same from Python as from the command line.
    The throw-away folder is deleted only when the round completed: a failed or interrupted
    round keeps it, so its runs.log can be read. ``fail_on`` is the gate (pipeline.assessment.gate:
    ``not-improved``, ``regression`` or ``change``) the result's ``gate`` reads; ``allow_removed``
    keeps a benchmark the candidate no longer runs from failing it. ``names``: the
    two sides' short labels (check_names), else each side is labelled by its command.
    ``report``: the file the campaign's HTML report page is written to by ``write_page`` (the
    store, the campaign id, the file: the report's ``write_report``, which the caller passes,
    since the report is a layer above the recorder), after the assessment and before a
    throw-away store is removed."""
    from pipeline.assessment.gate import FAIL_ON
    from pipeline.store.tables import Store

    if fail_on not in FAIL_ON:
        raise UsageError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}")
    labels = check_names(names) if names is not None else None
    if report is not None and report.is_dir():  # refused before any run
        raise UsageError(f"report {report}: is a folder; give the page's file name")
    if report is not None and write_page is None:
        raise UsageError("report: give write_page, the function that writes the page")
    run = run or RunOptions()
    suite = run.measure.suite is not None
    policy = ab_policy(policy, until_decided=run.until_decided, suite=suite)
    if run.until_decided:  # refused before any folder is made
        stopping.check_campaign(policy, "ab's campaign would freeze")
    check_repetitions(policy, run, "ab's campaign would freeze")
    scratch = None
    if keep is None:
        scratch = Path(tempfile.mkdtemp(prefix="explain-ab-"))
        folder, store = scratch / "ab", Store(scratch / "store")
    else:
        folder, store = keep, Store(keep / ".explain-store")
    request = RoundRequest(
        folder,
        candidate=command_b if labels is None else labels[1],
        baseline=command_a if labels is None else labels[0],
        baseline_cmd=command_a,
        candidate_cmd=command_b,
        run=run,
    )
    try:
        campaign = start_campaign(folder, metric=metric, better=better, policy=policy)
        recorded = record_round(request, progress=progress, warn=warn)
    except RoundInterrupted:
        raise  # its message names the attempt folder, which stays
    except BaseException:
        if scratch is not None:  # refused before any run: nothing to keep
            shutil.rmtree(scratch, ignore_errors=True)
        raise
    final = final_campaign(folder, store)
    priced = _price(folder, final)
    try:
        if report is not None and write_page is not None:
            write_page(store, final.campaign_id, report)
    finally:
        if scratch is not None and recorded.status == "completed":
            shutil.rmtree(scratch, ignore_errors=True)
    commands = (command_a, command_b)
    gated = _gate(final, recorded, fail_on, allow_removed)
    return AbResult(
        recorded,
        final,
        keep,
        campaign["policy"],
        priced,
        commands,
        gate=gated,
        names=labels,
        report=report,
    )


def _gate(
    final: FinalResult, recorded: RoundResult, fail_on: str, allow_removed: bool
) -> Gate | None:
    """The gate of ab's one round, when it has a verdict."""
    from pipeline.assessment.campaigns import gate

    assessed = final.assess
    if assessed.blocked.height or recorded.status == "failed" or assessed.assessments.is_empty():
        return None
    return gate(
        assessed, final.campaign_id, recorded.attempt_id, fail_on, allow_removed=allow_removed
    )
