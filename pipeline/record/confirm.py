"""``campaign final --confirm``: a confirmation round of the campaign's pick, recorded after the
pick was made, then the campaign assessed again (docs/contract.md §15).

The pick of a campaign is the largest of many noisy estimates, so its own estimate leans high
(``calibrate --campaigns``); a fresh round of it, whose draws nothing selected, does not. The
round runs the campaign's reference baseline (its first round's) against the target the
accounting names (the best attempt; in a chained campaign the chain's last adopted step),
with a new order seed, under the frozen policy (campaign.json is not touched), as a new attempt
``c<round>`` that says ``kind: confirmation`` and which attempt it confirms. Each side runs the
command the campaign recorded for it (attempt.json's ``commands``) in the folder it was recorded
in; a campaign recorded without them takes the commands as options. The target's declaration
(mechanism.json) is declared again before the confirmation's candidate runs, so its evidence is
measured again too. Its runs are measured as the target's were (attempt.json's ``measured``:
metric source, harness and its options, trace, counters, warm-up): a measurement option given
with another value is refused, since the round would not measure what the pick measured; a
target recorded before rounds kept it measures as the options given say.

A target confirmed once is refused: a started confirmation counts, aborted or completed
(stopping one whose progress looks bad and measuring again would be the search over again);
only a failed one that measured no pair (a broken command) does not. Measuring again is the
caller's explicit choice (``again``, ``--measure-again``), recorded in attempt.json's ``chosen``
and shown beside the first, which stays the campaign's gain. So are commands given in place of
the recorded ones (``given_commands``, ``--with-given-commands``): without it a command other
than the recorded one is refused, since the output would name a side whose command never ran.

A recorded command is whatever attempt.json says, and a campaign folder may come from elsewhere
(a CI artifact, a colleague's tarball): before anything runs both commands and their folders are
shown, and commands recorded on another host or by another user (attempt.json's
``environment``), or where the attempt does not say, are refused unless the caller trusts them
(``trust_recorded``, ``--trust-recorded-commands``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.contract.inert import inert
from pipeline.contract.layout import CAMPAIGN_FILE, MECHANISM_FILE
from pipeline.errors import ExitCode, ExplainError, UsageError
from pipeline.record import environment
from pipeline.record.measure import describe
from pipeline.record.options import (
    MEASURED_KEYS,
    RunOptions,
    flag_of,
    measure_as,
    measured_values,
    recorded_values,
)
from pipeline.record.order import Side

if TYPE_CHECKING:
    import polars as pl

    from pipeline.assessment.accounting import Account
    from pipeline.record.campaign import FinalResult
    from pipeline.record.rounds import RoundRequest
    from pipeline.store.tables import Store


@dataclass(frozen=True)
class ConfirmRequest:
    """What ``campaign final --confirm`` is asked to do. ``attempt``: the attempt to confirm
    (default: the accounting's target); ``baseline_cmd``/``candidate_cmd``: the commands when
    the campaign did not record them (they then run in the current folder);
    ``trust_recorded``: run recorded commands although another host or user recorded them."""

    campaign_dir: Path
    run: RunOptions = RunOptions()
    attempt: str | None = None
    baseline_cmd: str | None = None
    candidate_cmd: str | None = None
    trust_recorded: bool = False
    again: bool = False
    """Measure again a target whose confirmation already counts (recorded: ``again``)."""
    given_commands: bool = False
    """Run given commands that differ from the recorded ones (recorded: ``given_commands``)."""
    measured_given: frozenset[str] | None = None
    """The keywords of options.MEASURED_KEYS the caller gave (the command line's); None: those
    whose value in ``run`` is not the default. How the target measured (attempt.json's
    ``measured``) is reused; a given value other than the recorded one is refused."""


TRUST_OPTION = "--trust-recorded-commands"


@dataclass(frozen=True)
class _Side:
    side: Side
    label: str
    command: str
    cwd: Path | None  # None: the recorder's folder
    recorded_by: Mapping[str, Any] | None = None  # the attempt whose record gave the command
    given_instead: bool = False  # a given command, not the one recorded

    def shown(self) -> str:
        """``  baseline  main: CMD`` and the folder it runs in, escaped (text from a file)."""
        folder = self.cwd if self.cwd is not None else Path.cwd()
        where = "the current folder" if folder == Path.cwd() else inert(str(folder))
        return (
            f"  {self.side:<9} {inert(self.label)}: {inert(self.command)}\n            in {where}"
        )


def _target(request: ConfirmRequest, account: Account, attempts: pl.DataFrame) -> str:
    """The attempt to confirm: the one asked for (a round of the campaign), else the target."""
    rounds = attempts.filter(attempts["kind"].fill_null("round") != "confirmation")
    if request.attempt is not None:
        if request.attempt not in rounds["attempt_id"].to_list():
            raise UsageError(
                f"--attempt {request.attempt!r}: no such round in campaign {account.campaign_id!r}"
            )
        return request.attempt
    if account.target is None:
        raise UsageError(
            f"campaign {account.campaign_id!r}: nothing to confirm, no attempt is PASS "
            "(--attempt ID confirms a given round)"
        )
    return account.target


def _once(
    target: str, attempts: pl.DataFrame, assessments: pl.DataFrame, again: bool
) -> tuple[str, ...]:
    """A target confirmed once (a confirmation that counts: started, and not a failure that
    measured no pair) is measured again only by choice; returns ``("again",)`` then."""
    import polars as pl

    done = assessments.select("attempt_id", "status", "n_pairs")
    found = (
        attempts.filter((pl.col("kind") == "confirmation") & (pl.col("confirms") == target))
        .join(done, on="attempt_id", suffix="_assessed")
        .filter((pl.col("status_assessed") != "failed") | (pl.col("n_pairs_assessed") > 0))
        .sort("round", "attempt_id")
    )
    if found.height and not again:
        first = found.row(0, named=True)
        raise UsageError(
            f"{target} is already confirmed by {first['attempt_id']} ({first['status_assessed']}, "
            f"{first['n_pairs_assessed']} pairs): a started confirmation counts, aborted or "
            "completed (stopping one that looks bad and measuring again would be the search "
            "over again), and its interval is the campaign's gain; --measure-again measures "
            "again, recorded as chosen and shown beside it"
        )
    if not found.height and again:
        raise UsageError(f"--measure-again: {target} has no confirmation that counts yet")
    return ("again",) if again else ()


def _side(
    side: Side, row: Mapping[str, Any], given: str | None, option: str, instead: bool
) -> tuple[_Side, str | None]:
    """A side's label, command and folder: the recorded one, else the command given; the
    second value names what is missing (None: nothing). A given command other than the
    recorded one is refused unless ``instead`` (--with-given-commands)."""
    label = row[side]
    command, cwd = row.get(f"{side}_command"), row.get(f"{side}_cwd")
    if given is not None and command is None:
        return _Side(side, label, given, None), None
    if given is not None and given != command:
        if not instead:
            raise UsageError(
                f"{option} {inert(repr(given))}: {row['attempt_id']} recorded "
                f"{inert(repr(command))} for {inert(repr(label))}, and the output would say "
                f"{inert(repr(label))} was measured; give --with-given-commands to measure "
                "with given commands (recorded and shown as such)"
            )
        return _Side(side, label, given, None, given_instead=True), None
    if command is None:
        return _Side(side, label, "", None), f"{option} CMD (the command of {label!r})"
    return _Side(side, label, command, Path(cwd) if cwd else None, row), None


def _sides(
    request: ConfirmRequest, reference: Mapping[str, Any], target: Mapping[str, Any]
) -> tuple[_Side, _Side]:
    """The reference baseline (from the campaign's first round) and the target's candidate."""
    instead = request.given_commands
    baseline, missing_b = _side(
        "baseline", reference, request.baseline_cmd, "--baseline-cmd", instead
    )
    candidate, missing_c = _side(
        "candidate", target, request.candidate_cmd, "--candidate-cmd", instead
    )
    missing = [m for m in (missing_b, missing_c) if m]
    if missing:
        raise UsageError(
            f"the campaign was recorded without the commands a confirmation of "
            f"{target['attempt_id']} needs: give {' and '.join(missing)}"
        )
    for side in (baseline, candidate):
        if side.cwd is not None and not side.cwd.is_dir():
            raise UsageError(
                f"{side.cwd}: the folder {side.label!r} was recorded in is gone; give its "
                "command with --baseline-cmd/--candidate-cmd to run it from here"
            )
    return baseline, candidate


def _stranger(row: Mapping[str, Any]) -> str | None:
    """Why a round's recorded commands may not be this user's on this host (None: they are):
    its environment names another host or user, or no host at all. A round recorded before the
    recorder kept the user is taken by its host alone."""
    import json

    text = row.get("environment")
    recorded = json.loads(text) if text else {}
    here = {"host": environment.host(), "user": environment.user()}
    if not recorded.get("host"):
        return f"{row['attempt_id']} does not say which host recorded it (no environment.host)"
    for key, word in (("host", "on host"), ("user", "by user")):
        theirs = recorded.get(key)
        if theirs is not None and here[key] is not None and theirs != here[key]:
            return (
                f"{row['attempt_id']} was recorded {word} {inert(repr(theirs))}, not "
                f"{inert(repr(here[key]))}"
            )
    return None


def _check_recorded(sides: tuple[_Side, _Side], trusted: bool) -> None:
    """Recorded commands run only where and for whom they were recorded, unless trusted."""
    rows = {id(s.recorded_by): s.recorded_by for s in sides if s.recorded_by is not None}
    found = [why for why in (_stranger(row) for row in rows.values()) if why]
    if found and not trusted:
        raise UsageError(
            f"{'; '.join(found)}: a campaign folder received from elsewhere can hold any "
            "command, and --confirm runs it with your rights. Nothing was run. Read the "
            f"commands:\n{sides[0].shown()}\n{sides[1].shown()}\nthen give {TRUST_OPTION} to "
            "run them, or --baseline-cmd/--candidate-cmd to run your own"
        )


def _measured_as(request: ConfirmRequest, row: Mapping[str, Any]) -> tuple[RunOptions, str]:
    """The run options of the confirmation: measured as the target was (attempt.json's
    ``measured``), and the line that says so. A measurement option given with another value
    than the recorded one is refused: the round would not measure what the pick measured. A
    target recorded before rounds kept it measures as the options say (as before)."""
    import json

    run, target = request.run, row["attempt_id"]
    if not row.get("measured"):
        return run, (
            f"{target} did not record how it measured: measured as given, "
            f"{describe(run.measure)}, warm-up {run.warmup} per side"
        )
    recorded = recorded_values(json.loads(row["measured"]))
    mine = measured_values(run)
    given = request.measured_given
    if given is None:
        given = frozenset(k for k, v in measured_values(RunOptions()).items() if mine[k] != v)
    for key in MEASURED_KEYS:
        if key in given and mine[key] != recorded[key]:
            raise UsageError(
                f"{flag_of(key)} {inert(_value(mine[key]))}: {target} was measured with "
                f"{flag_of(key)} {inert(_value(recorded[key]))}, and a confirmation measures as "
                "the pick did (else it would not confirm it); leave the option out, or record "
                "a new round measured so. Nothing was run"
            )
    run = measure_as(run, json.loads(row["measured"]))
    return run, (
        f"measured as {target} was: {describe(run.measure)}, warm-up {run.warmup} per side"
        + (f", trace {run.trace.format}" if run.trace is not None else "")
    )


def _value(value: Any) -> str:
    """An option's value as the command line writes it (``none`` when not given)."""
    if value is None or value == ():
        return "none"
    return " ".join(value) if isinstance(value, tuple) else str(value)


def _round_request(
    request: ConfirmRequest,
    target: str,
    attempts: pl.DataFrame,
    warn: Callable[[str], None] | None,
    chosen: tuple[str, ...],
) -> RoundRequest:
    from pipeline.record.rounds import RoundRequest, next_round

    rows = {r["attempt_id"]: r for r in attempts.iter_rows(named=True)}
    rounds = [r for r in rows.values() if (r.get("kind") or "round") != "confirmation"]
    first = min(rounds, key=lambda r: (r["round"], r["attempt_id"]))
    baseline, candidate = _sides(request, first, rows[target])
    _check_recorded((baseline, candidate), request.trust_recorded)
    if baseline.given_instead or candidate.given_instead:
        chosen += ("given_commands",)
    mechanism = request.campaign_dir / target / MECHANISM_FILE
    measured, how = _measured_as(request, rows[target])
    run = dataclasses.replace(measured, mechanism_file=mechanism if mechanism.is_file() else None)
    sides: dict[Side, _Side] = {"baseline": baseline, "candidate": candidate}
    cwds = {side: found.cwd for side, found in sides.items() if found.cwd is not None}
    stored = max(r["round"] for r in rows.values())  # a deleted folder's round stays taken
    attempt_id = f"c{next_round(request.campaign_dir, stored):03d}"
    if warn is not None:  # before the first run: what is about to run, and where
        warn(
            f"confirmation round {attempt_id} of {target} runs:\n{baseline.shown()}\n"
            f"{candidate.shown()}\n  {how}"
        )
    return RoundRequest(
        request.campaign_dir,
        candidate=candidate.label,
        baseline=baseline.label,
        baseline_cmd=baseline.command,
        candidate_cmd=candidate.command,
        run=run,
        attempt_id=attempt_id,
        confirms=target,
        chosen=chosen,
        cwds=cwds,
        after_round=stored,
    )


def confirm_campaign(
    request: ConfirmRequest,
    store: Store,
    *,
    progress: bool = False,
    warn: Callable[[str], None] | None = None,
) -> FinalResult:
    """Ingest and assess the campaign, record a confirmation round of its target, then ingest
    and assess it again (module docstring). The result carries the round it recorded."""
    from pipeline.record.campaign import final_campaign
    from pipeline.record.rounds import check_repetitions, read_campaign_json, record_round

    if request.run.mechanism_file is not None:
        raise UsageError(
            "--mechanism-file: a confirmation declares again what the confirmed attempt "
            "declared (its mechanism.json)"
        )
    campaign = read_campaign_json(request.campaign_dir)
    check_repetitions(
        campaign.data["policy"], request.run, f"{request.campaign_dir / CAMPAIGN_FILE} freezes"
    )
    before = final_campaign(request.campaign_dir, store)
    cid = before.campaign_id
    if before.assess.blocked.height:
        raise ExplainError(
            f"campaign {cid!r} is blocked by integrity errors: nothing is confirmed "
            f"(explain-pipeline campaign final {request.campaign_dir} lists them)",
            ExitCode.INTEGRITY,
        )
    account = before.assess.accounts.get(cid)
    attempts = store.read("attempts", [cid])
    if account is None or attempts.is_empty():
        raise UsageError(f"campaign {cid!r}: no round to confirm yet")
    target = _target(request, account, attempts)
    chosen = _once(target, attempts, before.assess.assessments, request.again)
    recorded = record_round(
        _round_request(request, target, attempts, warn, chosen), progress=progress, warn=warn
    )
    after = final_campaign(request.campaign_dir, store)
    return dataclasses.replace(after, confirmed=recorded)
