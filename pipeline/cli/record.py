"""`explain-pipeline campaign start|final`, `round` and `ab`: record campaigns, then assess them.

Thin: options are parsed here and handed to pipeline.record; polars-backed modules are imported
only by the commands that need them, so `--help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from pipeline.cli.common import (
    allow_removed_option,
    click_range,
    command,
    declared_choice,
    declared_range,
    fail_on_option,
    group,
    junit_option,
    option_group,
    result_format_option,
    store_option,
)
from pipeline.contract.policy import POLICY_DEFAULTS
from pipeline.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from pipeline.store.tables import Store

from pipeline.record.options import (
    AB_POLICY,
    MEASURED_KEYS,
    ROUND_OPTIONS,
    RoundOption,
    RunOptions,
    build_run_options,
)


def policy_range(key: str) -> Any:
    """The click range of policy field ``key`` (campaign.schema.json's bounds)."""
    return declared_range("campaign", "policy", key)


# -- campaign start / final -----------------------------------------------------------------
@group("campaign")
def campaign_group() -> None:
    """Start a campaign (its policy frozen from then on) or finish it (ingest + assess).

    \b
    Example:
      explain-pipeline campaign start attempts/matmul --metric seconds --decision paired
      explain-pipeline campaign final attempts/matmul
    """


@campaign_group.command("start")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--metric", required=True, help="Name of the end-to-end metric, e.g. seconds.")
@click.option(
    "--better",
    type=declared_choice("campaign", "metric", "better"),
    default="lower",
    show_default=True,
    help="lower for a time, higher for a throughput.",
)
@click.option(
    "--kind",
    type=declared_choice("campaign", "kind"),
    default="project",
    show_default=True,
    help="A benchmark campaign refuses mechanism declarations.",
)
@click.option(
    "--decision",
    type=declared_choice("campaign", "policy", "decision"),
    default=None,
    help=f"Verdict rule (default {POLICY_DEFAULTS['decision']}).",
)
@click.option(
    "--require-explanation",
    is_flag=True,
    default=False,
    help="A PASS also needs its declared mechanism confirmed.",
)
@click.option(
    "--min-improvement-pct",
    type=policy_range("min_improvement_pct"),
    default=None,
    help=f"The gate, in percent (default {POLICY_DEFAULTS['min_improvement_pct']}).",
)
@click.option(
    "--confidence",
    type=policy_range("confidence"),
    default=None,
    help=f"Interval confidence (default {POLICY_DEFAULTS['confidence']}).",
)
@click.option(
    "--resamples",
    type=policy_range("resamples"),
    default=None,
    help=f"Bootstrap resamples (default {POLICY_DEFAULTS['resamples']}).",
)
@click.option(
    "--seed",
    type=policy_range("seed"),
    default=None,
    help=f"Bootstrap seed (default {POLICY_DEFAULTS['seed']}).",
)
@click.option(
    "--min-pairs",
    type=policy_range("min_pairs"),
    default=None,
    help=f"Fewest pairs for an interval (default {POLICY_DEFAULTS['min_pairs']}, at least "
    f"{policy_range('min_pairs').min}).",
)
@click.option(
    "--interval",
    type=declared_choice("campaign", "policy", "interval"),
    default=POLICY_DEFAULTS["interval"],
    show_default=True,
    help="Interval method.",
)
@click.option(
    "--decide",
    type=declared_choice("campaign", "policy", "decide"),
    default=None,
    help="What a round decides: its metric (default), or regions: also every region, "
    "each benchmark of a suite, with the suite's error held (docs/assess.md).",
)
@click.option(
    "--margin-pct",
    type=policy_range("margin_pct"),
    default=None,
    help="--decide regions: a benchmark within this margin is unchanged, one slower by more "
    "is regressed (default 1.0).",
)
def start_command(
    folder: Path,
    metric: str,
    better: str,
    kind: str,
    interval: str,
    require_explanation: bool,
    **chosen: Any,
) -> int:
    """Write FOLDER/campaign.json: the metric and the policy with every default filled in and
    its digest. The folder name is the campaign id. Refused (exit 2) when the folder already
    holds a campaign.json: the policy is frozen for the whole campaign.

    \b
    Example:
      explain-pipeline campaign start attempts/matmul --metric seconds
      explain-pipeline campaign start attempts/serve --metric tokens_per_s --better higher \\
          --decision paired --require-explanation
      explain-pipeline campaign start attempts/suite --metric seconds --decision paired \\
          --decide regions --margin-pct 2
    """
    from pipeline.record.campaign import start_campaign

    policy = {k: v for k, v in chosen.items() if v is not None}
    if require_explanation:
        policy["require_explanation"] = True
    if interval != POLICY_DEFAULTS["interval"]:  # omitted at the default: digests stay as before
        policy["interval"] = interval
    from pipeline.output.inert import shown
    from pipeline.output.sinks import echo
    from pipeline.output.text import campaign_started

    document = start_campaign(folder, metric=metric, better=better, kind=kind, policy=policy)
    echo(campaign_started(shown(document), shown(folder)))
    return int(ExitCode.OK)


# -- round ------------------------------------------------------------------------------------
def round_option(entry: RoundOption) -> Any:
    """The click option of one entry of ROUND_OPTIONS (pipeline/record/options.py)."""
    attrs: dict[str, Any] = {
        "default": entry.default,
        "show_default": entry.show_default,
        "multiple": entry.multiple,
        "metavar": entry.metavar,
        "help": entry.help,
    }
    if entry.kind == "flag":
        attrs["is_flag"] = True
    elif entry.kind == "number" and entry.bounds is not None:
        attrs["type"] = click_range(entry.bounds)
    elif entry.kind == "choice":
        attrs["type"] = click.Choice(entry.choices)
    elif entry.kind == "file":
        attrs["type"] = click.Path(dir_okay=False, path_type=Path)
    return click.option(*entry.flags, entry.name, **attrs)


RUN_OPTIONS = [round_option(entry) for entry in ROUND_OPTIONS]
"""How runs are made and measured, in round and ab: one click option per entry of the table."""


def _run_options(**values: Any) -> RunOptions:
    """The RunOptions of the command line (the library refuses options that contradict). -n
    counts only when it is given: with --until-decided the plan of looks decides."""
    if click.get_current_context().get_parameter_source("repetitions") != (
        ParameterSource.COMMANDLINE
    ):
        values["repetitions"] = None
    return build_run_options(values)


run_options = option_group("run", RUN_OPTIONS, _run_options)
"""round's and ab's run options, handed to the command as one ``run`` (a RunOptions)."""
confirm_run_options = option_group(
    "run", [round_option(entry) for entry in ROUND_OPTIONS if entry.confirm], _run_options
)
"""campaign final --confirm's: round's, but the declaration is the confirmed attempt's."""


# -- campaign final (after the run options, which --confirm takes) ----------------------------
@campaign_group.command("final")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@store_option
@result_format_option("FinalResult")
@junit_option
@click.option(
    "--confirm",
    is_flag=True,
    default=False,
    help="First record a confirmation round: the campaign's first baseline against its pick, "
    "with the recorded commands; its interval is the campaign's gain.",
)
@click.option(
    "--attempt",
    default=None,
    metavar="ID",
    help="--confirm: the round to confirm (default: the best attempt; in a chained campaign "
    "the chain's last adopted step).",
)
@click.option(
    "--baseline-cmd",
    default=None,
    metavar="CMD",
    help="--confirm: the baseline's command, when the campaign did not record it.",
)
@click.option(
    "--candidate-cmd",
    default=None,
    metavar="CMD",
    help="--confirm: the candidate's command, when the campaign did not record it.",
)
@click.option(
    "--trust-recorded-commands",
    "trust_recorded",
    is_flag=True,
    default=False,
    help="--confirm: run the recorded commands although another host or user recorded them "
    "(read them first: a received campaign folder can hold any command).",
)
@click.option(
    "--with-given-commands",
    "given_commands",
    is_flag=True,
    default=False,
    help="--confirm: measure with --baseline-cmd/--candidate-cmd although they differ from the "
    "recorded commands (recorded and shown as such).",
)
@click.option(
    "--measure-again",
    "again",
    is_flag=True,
    default=False,
    help="--confirm: measure again a pick whose confirmation already counts (started, aborted "
    "or completed); recorded, and shown beside the first, which stays the campaign's gain.",
)
@confirm_run_options
def final_command(
    folder: Path,
    store_path: str | None,
    fmt: str,
    junit: Path | None,
    confirm: bool,
    attempt: str | None,
    baseline_cmd: str | None,
    candidate_cmd: str | None,
    trust_recorded: bool,
    given_commands: bool,
    again: bool,
    run: RunOptions,
) -> int:
    """Ingest the campaign in FOLDER, assess it, print the verdict table, the campaign's
    accounting (rounds, PASSes, and the PASSes identical code would give) and the best
    attempt with its selected estimate and the campaign's gain.

    With --confirm, first record a confirmation round: a fresh round of the campaign's first
    baseline against its pick (the best attempt; in a chained campaign, where a round's
    baseline is an earlier candidate, the chain's last adopted step), each side's recorded
    command run in its recorded folder, under the frozen policy (both are shown before the
    first run; commands recorded on another host or by another user are refused without
    --trust-recorded-commands); its interval is reported as
    the campaign's gain, beside the pick's selected estimate (the largest of several noisy
    ones, which leans high). The run options of `round` apply to it (-n,
    --until-decided, ...). A pick is confirmed once: a started confirmation counts, aborted or
    completed (--measure-again measures again, recorded and shown beside the first).
    Attempts that ingest rejected are named under the table (file:line, field, reason
    [code]). Exits with assess's code (3 when an integrity error blocks the campaign), else 1
    when any attempt of the campaign was rejected at ingest. See docs/record.md.

    \b
    Example:
      explain-pipeline campaign final attempts/matmul
      explain-pipeline campaign final attempts/matmul --confirm -n 20
      explain-pipeline campaign final attempts/matmul --store .explain-store
      explain-pipeline campaign final attempts/matmul --format markdown --junit verdicts.xml
    """
    from pipeline.output.sinks import Sinks, echo
    from pipeline.store.tables import Store

    sinks = Sinks.chosen(fmt, junit=junit)
    store = Store.open(store_path)
    if confirm:
        from pipeline.record.confirm import ConfirmRequest, confirm_campaign

        request = ConfirmRequest(
            folder,
            run,
            attempt,
            baseline_cmd,
            candidate_cmd,
            trust_recorded=trust_recorded,
            again=again,
            given_commands=given_commands,
            measured_given=_given(MEASURED_KEYS),
        )
        final = confirm_campaign(request, store, progress=sys.stderr.isatty(), warn=_warn)
    else:
        _without_confirm()
        from pipeline.record.campaign import final_campaign

        final = final_campaign(folder, store)
    sinks.emit(final)
    for issue in final.ingest.issues:
        echo(f"{issue}\n", err=True)
    code = final.assess.exit_code
    if code == ExitCode.OK and final.confirmed is not None and final.confirmed.status == "failed":
        return int(ExitCode.ROUND_FAILED)
    if code == ExitCode.OK and (final.rejected.height or final.ingest.exit_code):
        return int(ExitCode.REJECTED)
    return int(code)


def _given(names: tuple[str, ...]) -> frozenset[str]:
    """Which of the options ``names`` the command line gave (not left at their default)."""
    ctx = click.get_current_context()
    return frozenset(n for n in names if ctx.get_parameter_source(n) == ParameterSource.COMMANDLINE)


def _without_confirm() -> None:
    """The options of the confirmation round, given without --confirm: refused, not ignored."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = [
        f"--{name.replace('_', '-')}"
        for name, source in ((n, ctx.get_parameter_source(n)) for n in ctx.params)
        if source == ParameterSource.COMMANDLINE
        and name not in ("folder", "store_path", "fmt", "junit", "confirm")
    ]
    if given:
        raise UsageError(f"{', '.join(given)}: only with --confirm (they set its round)")


@command("round")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--baseline", required=True, metavar="LABEL", help="What the baseline is.")
@click.option("--candidate", required=True, metavar="LABEL", help="What the candidate is.")
@click.option("--baseline-cmd", required=True, metavar="CMD", help="Command of one baseline run.")
@click.option("--candidate-cmd", required=True, metavar="CMD", help="Command of one candidate run.")
@click.option("--attempt-id", default=None, help="Attempt id (default r + round, e.g. r003).")
@run_options
def round_command(
    folder: Path,
    baseline: str,
    candidate: str,
    baseline_cmd: str,
    candidate_cmd: str,
    attempt_id: str | None,
    run: RunOptions,
) -> int:
    """Record one round of the campaign in FOLDER: both commands run once per repetition, in
    a balanced, shuffled order, each run a fresh process.

    A run may write one JSON object ({"metric": …, "breakdown": …, "counters": …}) to the
    path in $EXPLAIN_MEASUREMENT; otherwise its metric is its wall-clock time in seconds.
    $EXPLAIN_SIDE and $EXPLAIN_REPETITION say which run it is (-1 during warm-up). A run that
    fails, times out or writes an invalid file is recorded as failed; the reason and its
    stderr go to FOLDER/<attempt>/runs.log, and the first failure's stderr to the screen.
    A side whose warm-ups all fail, or that fails 5 runs in a row, stops the round as
    failed; a failed round (no usable pair) exits 6. Ctrl-C leaves an aborted attempt that
    ingest accepts (exit 130). Every run also records rusage.* counters (CPU time, peak RSS,
    faults, context switches). With --measure the command runs a benchmark suite that
    writes its results to {results}. With --until-decided the round stops as soon as it is
    decided (PASS, or PASS out of reach), at most --max-repetitions. See docs/record.md and
    docs/suites.md.

    \b
    Example:
      explain-pipeline round attempts/matmul --baseline main --candidate float32 \\
          --baseline-cmd "python data/measure_numpy.py" \\
          --candidate-cmd "python data/measure_numpy.py --dtype float32" \\
          --mechanism-file data/float32_matmul.mechanism.json
      explain-pipeline round attempts/suite --baseline main --candidate fast \\
          --measure pytest-benchmark \\
          --baseline-cmd "pytest bench/ --benchmark-only --benchmark-json={results}" \\
          --candidate-cmd "pytest bench-fast/ --benchmark-only --benchmark-json={results}"
      explain-pipeline round attempts/seq --baseline main --candidate float32 \\
          --baseline-cmd "python data/measure_numpy.py" \\
          --candidate-cmd "python data/measure_numpy.py --dtype float32" --until-decided
    """
    from pipeline.record.rounds import RoundRequest, record_round

    request = RoundRequest(
        folder,
        candidate=candidate,
        baseline=baseline,
        baseline_cmd=baseline_cmd,
        candidate_cmd=candidate_cmd,
        run=run,
        attempt_id=attempt_id,
    )
    result = record_round(request, progress=sys.stderr.isatty(), warn=_warn)
    from pipeline.output.sinks import show

    show(result)
    return int(ExitCode.ROUND_FAILED if result.status == "failed" else ExitCode.OK)


def _warn(text: str) -> None:
    from pipeline.output.sinks import echo

    echo(text + "\n", err=True)


# -- ab ---------------------------------------------------------------------------------------
@command(
    "ab",
    epilog="Exit code 5: the verdict of B against A is not PASS; 6: the round failed "
    "(no usable pair: its folder is kept and runs.log named).",
)
@click.argument("command_a", metavar="CMD_A")
@click.argument("command_b", metavar="CMD_B")
@run_options
@click.option(
    "--decision",
    type=declared_choice("campaign", "policy", "decision"),
    default=AB_POLICY["decision"],
    show_default=True,
    help="Verdict rule.",
)
@click.option(
    "--require-explanation",
    is_flag=True,
    default=False,
    help="A PASS also needs the --mechanism-file confirmed.",
)
@click.option(
    "--interval",
    type=declared_choice("campaign", "policy", "interval"),
    default=None,
    help=f"Interval method (default {AB_POLICY['interval']}, the calibrated one, "
    "docs/calibration.md; "
    "with --until-decided the one valid under early stopping).",
)
@click.option(
    "--min-improvement-pct",
    type=policy_range("min_improvement_pct"),
    default=POLICY_DEFAULTS["min_improvement_pct"],
    show_default=True,
    help="The gate, in percent.",
)
@click.option(
    "--decide",
    type=declared_choice("campaign", "policy", "decide"),
    default=None,
    help="What the round decides: its metric, or regions: also every benchmark, with the "
    "suite's error held (default: regions with --measure, else metric).",
)
@click.option(
    "--margin-pct",
    type=policy_range("margin_pct"),
    default=POLICY_DEFAULTS["margin_pct"],
    show_default=True,
    help="--decide regions: a benchmark within this margin is unchanged, one slower by more "
    "is regressed.",
)
@fail_on_option("Exit 5")
@allow_removed_option("With --fail-on regression or change")
@click.option("--metric", default="seconds", show_default=True, help="Name of the metric.")
@click.option(
    "--better",
    type=declared_choice("campaign", "metric", "better"),
    default="lower",
    show_default=True,
    help="higher needs the metric in $EXPLAIN_MEASUREMENT.",
)
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep the campaign in this new folder (its store in DIR/.explain-store).",
)
@click.option(
    "--names",
    metavar="A,B",
    default=None,
    callback=lambda _ctx, _param, value: _names(value),
    help="Short labels of A and B, shown and recorded instead of the whole commands "
    "(e.g. --names main,fast).",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Also write the round's HTML report page to FILE (as `report` writes it).",
)
@result_format_option("AbResult")
@junit_option
def ab_command(
    command_a: str,
    command_b: str,
    run: RunOptions,
    decision: str,
    require_explanation: bool,
    interval: str | None,
    min_improvement_pct: float,
    decide: str | None,
    margin_pct: float,
    fail_on: str,
    allow_removed: bool,
    metric: str,
    better: str,
    keep: Path | None,
    names: tuple[str, str] | None,
    report: Path | None,
    fmt: str,
    junit: Path | None,
) -> int:
    """Is B better than A? One round of both commands in a throw-away campaign, then the
    verdict, the paired interval, the order effect and the explanation. Exit 0 when the
    verdict is PASS, 5 when it is not: usable as a CI gate.

    The paired rule with the Student-t interval decides by default: the median rule passes
    identical code too often to gate anything, and student_t is the interval whose error rate
    calibration found nearest its nominal 2.5% (docs/calibration.md). Each run is measured as
    in `round` (see docs/record.md).

    \b
    Example:
      explain-pipeline ab "python old.py" "python new.py" -n 20
      explain-pipeline ab "./bench --impl a" "./bench --impl b" --min-improvement-pct 5 \\
          --keep ab-2026-11-30
      explain-pipeline ab --measure pytest-benchmark -n 10 \\
          "pytest old/ --rootdir old --benchmark-only --benchmark-json={results}" \\
          "pytest new/ --rootdir new --benchmark-only --benchmark-json={results}"
      explain-pipeline ab "python old.py" "python new.py" --format markdown --junit ab.xml
      explain-pipeline ab "python old.py" "python new.py" --until-decided
      explain-pipeline ab "python old.py" "python new.py" --names old,new --report ab.html
      explain-pipeline ab --measure pytest-benchmark -n 10 --fail-on regression \\
          "pytest old/ --rootdir old --benchmark-only --benchmark-json={results}" \\
          "pytest new/ --rootdir new --benchmark-only --benchmark-json={results}"
    """
    from pipeline.output.sinks import Sinks
    from pipeline.record.campaign import ab

    sinks = Sinks.chosen(fmt, junit=junit)
    policy = {
        "decision": decision,
        "require_explanation": require_explanation,
        "min_improvement_pct": min_improvement_pct,
        "margin_pct": margin_pct,
    }
    if interval is not None:  # else ab's default (ab_policy)
        policy["interval"] = interval
    if decide is not None:  # else ab's default: regions with --measure
        policy["decide"] = decide
    result = ab(
        command_a,
        command_b,
        run=run,
        policy=policy,
        metric=metric,
        better=better,
        keep=keep,
        progress=sys.stderr.isatty(),
        warn=_warn,
        fail_on=fail_on,
        names=names,
        report=report,
        write_page=_write_page,
        allow_removed=allow_removed,
    )
    sinks.emit(result)
    if result.final.assess.blocked.height:
        return int(ExitCode.INTEGRITY)
    if result.round.status == "failed":
        return int(ExitCode.ROUND_FAILED)
    return int(ExitCode.NOT_PASS if result.gate is None or result.gate.failed else ExitCode.OK)


def _write_page(store: Store, campaign_id: str, path: Path) -> None:
    """ab --report: the campaign's page, as `explain-pipeline report` writes it."""
    from pipeline.report import write_report

    write_report(store, campaign_id, path)


def _names(value: str | None) -> tuple[str, str] | None:
    """--names A,B: the two labels, or a usage error naming the option."""
    if value is None:
        return None
    from pipeline.record.campaign import check_names

    try:
        return check_names(value.split(","))
    except UsageError as exc:
        raise click.BadParameter(str(exc)) from None


COMMANDS: list[click.Command] = [campaign_group, round_command, ab_command]
