"""`explain-pipeline assess`: verdicts and explanations of one campaign or all of them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from pipeline.assessment.gate import DEFAULT_FAIL_ON
from pipeline.cli.common import (
    allow_removed_option,
    campaigns_chosen,
    command,
    engine_options,
    fail_on_option,
    junit_option,
    result_format_option,
    what_if_named,
    what_if_option,
)
from pipeline.contract.policy import PolicyValue
from pipeline.engines import open_engine
from pipeline.errors import ExitCode, UsageError


@command("assess")
@campaigns_chosen("Assess every campaign in the store.")
@result_format_option("AssessResult")
@junit_option
@what_if_option(
    "Verdicts under another policy (decision, require_explanation, min_improvement_pct, "
    "margin_pct; confidence, resamples, seed (the bootstrap seed), min_pairs, interval, decide "
    "recompute the intervals). Never stored. Repeatable."
)
@click.option(
    "--gate",
    is_flag=True,
    help="CI gate: exit 5 unless the final verdict of the gated attempt (--attempt, default the "
    "latest round) is PASS. Needs a CAMPAIGN_ID; the frozen policy decides (no --what-if).",
)
@click.option(
    "--attempt",
    "gate_attempt",
    metavar="ID",
    default=None,
    help="With --gate: the attempt to gate on (default: the campaign's latest round).",
)
@fail_on_option("With --gate: exit 5")
@allow_removed_option("With --gate")
@click.option(
    "--digests",
    is_flag=True,
    help="json, csv: also the bookkeeping columns inputs_sha256, campaign_sha256 and "
    "boundary_recipe.",
)
@engine_options
def assess_command(
    campaign_id: str | None,
    all_campaigns: bool,
    store_path: str | None,
    fmt: str,
    what_if: dict[str, PolicyValue],
    engine: str,
    ray_address: str | None,
    gate: bool,
    gate_attempt: str | None,
    fail_on: str,
    allow_removed: bool,
    digests: bool,
    junit: Path | None,
) -> int:
    """Paired intervals, mechanical explanations and verdicts (docs/contract.md §4-§6).

    Prints one row per attempt: round, candidate, pairs, median improvement %, paired
    estimate [low, high], share speedup, explanation, verdict (reason), eligible and the
    campaign's best attempt (*). Results are stored in the tables comparisons, outcomes and
    assessments; attempts whose inputs and policy are unchanged are not recomputed. A campaign
    with an integrity error is blocked: its errors are listed, no verdict is issued, exit 3.

    \b
    Example:
      explain-pipeline assess llama-decode-2026-11
      explain-pipeline assess --all --format json
      explain-pipeline assess llama-decode-2026-11 --what-if decision=paired \\
          --what-if require_explanation=true
      explain-pipeline assess --all --engine ray --ray-address auto
      explain-pipeline assess llama-decode-2026-11 --gate   # in CI: exit 5 unless PASS
      explain-pipeline assess suite-2026-12 --gate --fail-on regression
      explain-pipeline assess llama-decode-2026-11 --format markdown --junit verdicts.xml
    """
    if bool(campaign_id) == all_campaigns:
        raise UsageError("give one CAMPAIGN_ID or --all")
    if gate and (all_campaigns or what_if):
        raise UsageError("--gate needs one CAMPAIGN_ID and the frozen policy (no --all, --what-if)")
    if gate_attempt is not None and not gate:
        raise UsageError("--attempt is the attempt --gate decides on: give --gate too")
    if fail_on != DEFAULT_FAIL_ON and not gate:
        raise UsageError("--fail-on says when --gate fails: give --gate too")
    if allow_removed and not gate:
        raise UsageError("--allow-removed says when --gate fails: give --gate too")
    if junit is not None and what_if:
        raise UsageError("--junit reports the frozen policy's verdicts: drop --what-if")
    from pipeline.allocator import load_polars

    # Freed pages handed back after Polars' half second instead of a second more: batch after
    # batch they added ~1 MiB per 1,000 attempts' columns to the peak (100,000 attempts:
    # peak RSS over 1 GiB); no CPU cost measured.
    load_polars("muzzy_decay_ms:0")
    from pipeline.assessment.campaigns import assess
    from pipeline.output.inert import shown
    from pipeline.output.sinks import Sinks, echo
    from pipeline.output.text import rejection_warnings
    from pipeline.output.views import gate_line
    from pipeline.store.tables import Store

    sinks = Sinks.chosen(fmt, junit=junit, digests=digests, focus=gate_attempt)
    wanted = None if all_campaigns else [campaign_id or ""]
    with open_engine(engine, ray_address) as runner:  # a bad engine option is reported first
        store = Store.open_existing(store_path)
        with what_if_named():
            result = assess(store, wanted, what_if=what_if or None, engine=runner)
    gated = None
    if gate and not result.blocked.height:  # a bad --attempt is refused before any output
        from pipeline.assessment.campaigns import gate as gate_of

        try:
            gated = gate_of(
                result, campaign_id or "", gate_attempt, fail_on, allow_removed=allow_removed
            )
        except UsageError as exc:
            option = "--gate" if gate_attempt is None else "--attempt"
            raise UsageError(f"{option}: {exc}") from None
    for line in rejection_warnings(result):
        echo(line + "\n", err=True)
    if gated is not None:  # the gate's outcome leads: it is what the exit code says
        echo(gate_line(shown(gated)) + "\n", err=True)
        result = replace(result, gate=gated)
    sinks.emit(result)
    if result.blocked.height:
        ids = ", ".join(result.blocked["campaign_id"].unique(maintain_order=True))
        click.echo(f"error: blocked by integrity errors: {ids}", err=True)
        return int(result.exit_code)
    if gated is not None:
        return int(ExitCode.NOT_PASS if gated.failed else ExitCode.OK)
    return int(result.exit_code)


COMMANDS: list[click.Command] = [assess_command]
