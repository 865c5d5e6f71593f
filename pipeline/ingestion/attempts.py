"""Ingest stored attempts (contract §2) into the Parquet store (contract §3), idempotently.

Per campaign, each input table's partition is rewritten as: the stored rows of attempts not
touched by this ingest + the rows of attempts that are new or whose input files changed (a lazy
merge: the old partition is scanned and filtered, never loaded whole). All partitions written by
one ingest land in one store transaction. An attempt is skipped without parsing when its inputs
digest and its campaign.json are as stored; when nothing of a campaign changed, nothing of it is
written. Attempts that are in the store but no longer on disk are kept: deleting a folder is not a
way to drop a measured round (a new store is). A rejected attempt leaves what the store holds for
it untouched. The ``integrity`` partition of every written campaign is recomputed from the stored
evidence (pipeline.store.integrity).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
from tqdm import tqdm

from pipeline.contract.files import ReadMode
from pipeline.contract.inert import printable
from pipeline.contract.layout import CAMPAIGN_FILE, MEASUREMENTS_FILE, MECHANISM_FILE, valid_id
from pipeline.contract.policy import (
    POLICY_FIELDS,
    canonical_policy,
    commands_sha256,
    sequential_sha256,
    with_defaults,
)
from pipeline.contract.schemas import table
from pipeline.engines import Engine, LocalEngine
from pipeline.errors import ExitCode, StoreError, UsageError
from pipeline.ingestion import bulk, decoders
from pipeline.ingestion.batch import run_frames
from pipeline.ingestion.files import Document, Issue, Run
from pipeline.ingestion.folders import (
    AttemptFiles,
    read_attempt_files,
    validate_attempt,
    validate_campaign,
)
from pipeline.ingestion.timestamps import parse_timestamp
from pipeline.store.integrity import NO_PLAN, integrity_errors
from pipeline.store.tables import Store, Transaction

Outcome = Literal["ingested", "replaced", "unchanged", "rejected"]
OUTCOMES: tuple[Outcome, ...] = ("ingested", "replaced", "unchanged", "rejected")
ATTEMPT_TABLES = ("attempts", "samples", "breakdown", "counters", "expectations")
_REPORT_SCHEMA = {
    "campaign_id": pl.String,
    "attempt_id": pl.String,
    "outcome": pl.String,
    "n_issues": pl.Int64,
}


@dataclass(frozen=True)
class IngestReport:
    """What happened to every attempt folder, and every problem found."""

    attempts: pl.DataFrame  # campaign_id, attempt_id, outcome, n_issues
    issues: list[Issue]
    campaigns: pl.DataFrame = field(  # campaign_id, outcome (of campaign.json)
        default_factory=lambda: pl.DataFrame(
            schema={"campaign_id": pl.String, "outcome": pl.String}
        )
    )
    warnings: list[Issue] = field(default_factory=list)  # stored anyway; exit code unchanged

    @property
    def exit_code(self) -> ExitCode:
        rejected = (self.attempts["outcome"] == "rejected").any()
        return ExitCode.REJECTED if rejected or self.issues else ExitCode.OK

    def summary(self) -> pl.DataFrame:
        """One row per campaign: attempts ingested / replaced / unchanged / rejected."""
        counts = [(pl.col("outcome") == o).sum().cast(pl.Int64).alias(o) for o in OUTCOMES]
        per_campaign = self.attempts.group_by("campaign_id").agg(counts)
        return (
            self.campaigns.select("campaign_id", campaign=pl.col("outcome"))
            .join(per_campaign, on="campaign_id", how="left")
            .with_columns(pl.col(OUTCOMES).fill_null(0))
            .sort("campaign_id")
        )


@dataclass
class _Run:
    """Mutable bookkeeping of one ingest run."""

    root: Path | None = None  # the resolved SOURCE: symbolic links out of it are not followed
    rows: list[dict[str, Any]] = field(default_factory=list)
    campaigns: list[dict[str, Any]] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)  # rows of table rejections

    def attempt(
        self, campaign_id: str, attempt_id: str, outcome: Outcome, issues: Sequence[Issue] = ()
    ) -> None:
        self.rows.append(
            {
                "campaign_id": campaign_id,
                "attempt_id": printable(attempt_id),  # a folder name may not be valid UTF-8
                "outcome": outcome,
                "n_issues": len(issues),
            }
        )
        self.issues += issues
        if outcome == "rejected":
            self.rejected(campaign_id, attempt_id, issues)

    def rejected(self, campaign_id: str, attempt_id: str | None, issues: Sequence[Issue]) -> None:
        """Keep the errors for the store, so that assess and report can name them later (as
        printable text: a name or message may hold what is not valid UTF-8)."""
        self.rejections += [
            {
                "campaign_id": campaign_id,
                "path": printable(i.path),
                "attempt_id": None if attempt_id is None else printable(attempt_id),
                "line": i.line,
                "field": printable(i.field),
                "code": i.code,
                "message": printable(i.message),
            }
            for i in issues
        ]

    def merge(self, other: _Run) -> None:
        """Add what ``other`` recorded after what this run holds."""
        self.rows += other.rows
        self.campaigns += other.campaigns
        self.issues += other.issues
        self.warnings += other.warnings
        self.rejections += other.rejections

    def report(self) -> IngestReport:
        return IngestReport(
            pl.DataFrame(self.rows, schema=_REPORT_SCHEMA),
            self.issues,
            pl.DataFrame(self.campaigns, schema={"campaign_id": pl.String, "outcome": pl.String}),
            self.warnings,
        )


def ingest(
    source: Path,
    store: Store,
    *,
    progress: bool = False,
    engine: Engine | None = None,
    mode: ReadMode = "fast",
) -> IngestReport:
    """Validate and store every campaign under ``source`` (an attempts folder or one campaign).
    ``engine`` validates groups of campaigns (default: in this process); this process alone
    writes, in one transaction. ``mode="precise"`` checks every file with the per-line
    validator (the same stored tables, slower)."""
    engine = engine or LocalEngine()
    folders = campaign_folders(Path(source))
    root = Path(source).resolve()  # symbolic links leading out of it are not followed
    run = _Run()
    sizes = [0 if _outside(f, root) else len(attempt_folders(f)) for f in folders]
    bar = tqdm(
        total=sum(sizes), disable=not progress, file=sys.stderr, unit="attempt", desc="ingest"
    )
    tick = bar.update if engine.in_process else None
    work = [(group, store, tick, root, mode) for group in campaign_groups(folders, sizes)]
    try:
        with _no_cycle_collection(), bar, store.transaction() as txn:
            for got in engine.map(prepare_campaigns, work):
                run.merge(got.run)
                _write_group(store, txn, got)
                if tick is None:
                    bar.update(len(got.run.rows))
    except (OSError, pl.exceptions.ComputeError) as exc:  # the store, not the inputs
        raise StoreError(f"{store.root}: cannot update the store: {exc}") from exc
    return run.report()


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector: ingest decodes millions of small objects (the lines'
    dicts and numbers) and frees them batch by batch, and the collector would walk them again
    and again (0.3-0.6 s of a 3,000-attempt ingest) though they form no cycles. Reference
    counting still frees them; the collector's state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _visible_dirs(folder: Path) -> list[Path]:
    """Subfolders, sorted; hidden ones (``.git``, editor files) are not inputs."""
    try:
        with os.scandir(folder) as entries:
            names = [e.name for e in entries if e.is_dir() and not e.name.startswith(".")]
        return [folder / name for name in sorted(names)]
    except OSError:  # unreadable: its campaign.json / attempt.json is then reported missing
        return []


def campaign_folders(source: Path) -> list[Path]:
    """``source`` itself when it holds campaign.json, else its subfolders."""
    if not source.is_dir():
        raise UsageError(f"{source}: no such folder")
    if (source / CAMPAIGN_FILE).is_file():
        return [source]
    folders = _visible_dirs(source)
    if not folders:
        raise UsageError(
            f"{source}: no campaigns here (expected {source}/<campaign_id>/campaign.json "
            f"or {source}/campaign.json)"
        )
    return folders


def attempt_folders(campaign: Path) -> list[Path]:
    return _visible_dirs(campaign)


# -- groups of campaigns ------------------------------------------------------------------------
GROUP_ATTEMPTS = 1024
"""Attempts per unit of work: campaigns are validated and written together up to about this
many attempts (a larger campaign alone). What a campaign costs by itself (reading its stored
partitions, building frames, checking a batch of lines, one pass per table over the rows) is
then paid once per group: 250 campaigns of 12 attempts cost about what 6 of 500 do."""


def campaign_groups(
    folders: Sequence[Path], sizes: Sequence[int], limit: int = GROUP_ATTEMPTS
) -> list[list[Path]]:
    """Consecutive campaign folders in groups of at most ``limit`` attempts (``sizes``), in
    order; a campaign larger than that is a group alone."""
    groups: list[list[Path]] = []
    count = limit
    for folder, size in zip(folders, sizes, strict=True):
        if count + size > limit or not groups:
            groups.append([])
            count = 0
        groups[-1].append(folder)
        count += size
    return groups


Stored = tuple[str, str | None, str | None, str | None]
"""What the store keeps of an attempt across re-ingests: (inputs_sha256,
mechanism_sha256_first_seen, sequential_sha256_first_seen, commands_sha256_first_seen)."""


@dataclass
class _Campaign:
    """A campaign folder whose campaign.json is valid, compared with the store."""

    cid: str
    document: Document
    changed: bool  # campaign.json differs from the stored one
    stored: dict[str, Stored]  # attempt_id -> what the store keeps of it
    attempts: list[Path]
    run: _Run  # what happened to it (kept per campaign: outcomes and issues in folder order)

    @property
    def benchmark(self) -> bool:
        return bool(self.document.data["kind"] == "benchmark")


@dataclass
class _Prepared:
    """A group of campaign folders validated against the store: what to record and the new
    rows of every per-attempt table (all campaigns of the group, in folder order)."""

    run: _Run
    campaigns: list[_Campaign] = field(default_factory=list)  # those with a valid campaign.json
    new: dict[str, pl.DataFrame] = field(default_factory=dict)


def _outside(folder: Path, root: Path | None) -> Issue | None:
    """A folder that is a symbolic link leading out of SOURCE is not followed: reading it would
    ingest files the user did not point at (and a link may point anywhere)."""
    if root is None or not folder.is_symlink():
        return None
    target = folder.resolve()
    if target.is_relative_to(root):
        return None
    message = f"is a symbolic link to {target}, outside {root}: not followed"
    return Issue(str(folder), None, "", "outside_source", message)


def prepare_campaigns(
    folders: Sequence[Path],
    store: Store,
    tick: Callable[[int], object] | None = None,
    root: Path | None = None,
    mode: ReadMode = "fast",
) -> _Prepared:
    """Validate a group of campaign folders and build their new rows. A pure function of the
    folders and the store's files, which an engine may run on another process or machine
    (pipeline.engines); ``tick`` reports progress per attempt when it runs here; symbolic links
    leading out of ``root`` (the resolved SOURCE) are not followed."""
    tick = tick or (lambda n: None)
    with _no_cycle_collection():  # also where an engine runs it on another process
        return _prepare(folders, store, tick, root, mode)


def _prepare(
    folders: Sequence[Path],
    store: Store,
    tick: Callable[[int], object],
    root: Path | None,
    mode: ReadMode,
) -> _Prepared:
    runs = [_Run(root=root) for _ in folders]
    campaigns = [
        c
        for f, r in zip(folders, runs, strict=True)
        if (c := _open_campaign(f, store, r, tick, mode))
    ]
    pending = [item for c in campaigns for item in _pending_attempts(c, tick)]
    new = _rows_in_batches(pending, mode)
    run = _Run(root=root)
    for one in runs:
        run.merge(one)
    return _Prepared(run, campaigns, new)


def _open_campaign(
    folder: Path, store: Store, run: _Run, tick: Callable[[int], object], mode: ReadMode
) -> _Campaign | None:
    """The campaign of ``folder`` when its campaign.json is valid; else its attempts are
    recorded as rejected in ``run`` and None is returned."""
    outside = _outside(folder, run.root)
    attempts = [] if outside else attempt_folders(folder)
    fast = decoders.fast_campaign if mode == "fast" else None
    campaign, issues = (None, [outside]) if outside else validate_campaign(folder, fast)
    if campaign is None:
        run.campaigns.append({"campaign_id": folder.name, "outcome": "rejected"})
        run.issues += issues
        run.rejected(folder.name, None, issues)
        for attempt in attempts:
            run.attempt(folder.name, attempt.name, "rejected")
        tick(len(attempts))
        return None
    cid = folder.name
    changed = _stored_source(store, cid) != campaign.sha256
    run.campaigns.append({"campaign_id": cid, "outcome": _campaign_outcome(store, cid, changed)})
    return _Campaign(cid, campaign, changed, _stored_attempts(store, cid), attempts, run)


_Pending = tuple[_Campaign, AttemptFiles, bool]  # the files of an attempt; unchanged inputs?


def _rows_in_batches(
    pending: Sequence[_Pending], mode: ReadMode, size: int = GROUP_ATTEMPTS
) -> dict[str, pl.DataFrame]:
    """Validate the pending attempts ``size`` at a time (across campaigns) and return the new
    rows of every per-attempt table."""
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in ATTEMPT_TABLES}
    for start in range(0, len(pending), size):
        for name, frame in _validate_batch(pending[start : start + size], mode).items():
            parts[name].append(frame)
    return {
        name: pl.concat(frames) if frames else table(name).empty() for name, frames in parts.items()
    }


def _validate_batch(batch: Sequence[_Pending], mode: ReadMode) -> dict[str, pl.DataFrame]:
    """Outcomes and new rows of a batch of attempts: the bulk check first (``fast`` mode); an
    attempt it does not accept goes through the precise validator (which names every error) one
    by one. Both give their runs to the same row builder (``run_frames``, batch.py)."""
    bodies = [files.bodies[MEASUREMENTS_FILE] for _, files, _ in batch]
    checked = bulk.check_lines(bodies) if mode == "fast" else bulk.nothing_checked(len(batch))
    n_lines = np.bincount(checked.runs["attempt"].to_numpy(), minlength=len(batch))
    keep = np.zeros(len(batch), bool)
    slow: list[tuple[int, list[Run]]] = []
    rows: dict[str, list[dict[str, Any]]] = {"attempts": [], "expectations": []}
    for i, (campaign, files, same) in enumerate(batch):
        cid, name, run = campaign.cid, files.folder.name, campaign.run
        fast = None
        if checked.accepted[i]:
            fast = decoders.fast_attempt(files, benchmark=campaign.benchmark)
        valid = None
        if fast is not None:
            attempt, mechanism, lines = fast[0], fast[1], int(n_lines[i])
        else:
            valid, issues = validate_attempt(files, benchmark=campaign.benchmark)
            if valid is None:
                run.attempt(cid, name, "rejected", issues)
                continue
            attempt, mechanism, lines = valid.attempt, valid.mechanism, len(valid.runs)
        if lines == 0 and attempt.data["status"] == "completed":
            path = str(files.folder / MEASUREMENTS_FILE)
            message = "has no run, but attempt.json says the attempt completed"
            run.attempt(cid, name, "rejected", [Issue(path, None, "", "no_runs", message)])
            continue
        if same:
            run.attempt(cid, name, "unchanged")
            continue
        run.attempt(cid, name, "replaced" if name in campaign.stored else "ingested")
        rows["attempts"].append(
            _attempt_row(cid, files, attempt, mechanism, lines, campaign.stored)
        )
        rows["expectations"] += _expectation_rows(cid, name, mechanism)
        keep[i] = valid is None
        if valid is not None:
            slow.append((i, valid.runs))
    cids = [campaign.cid for campaign, _, _ in batch]
    ids = [files.folder.name for _, files, _ in batch]
    fast_rows = run_frames(cids, ids, checked, keep)
    slow_rows = run_frames(cids, ids, decoders.parsed_runs(slow), ~keep)
    out = {
        name: pl.DataFrame(found, schema=table(name).polars_schema(), strict=False)
        for name, found in rows.items()
    }
    for name, frame in fast_rows.items():
        merged = pl.concat([frame, slow_rows[name]]).sort("_pos", maintain_order=True)
        out[name] = merged.drop("_pos")
    out["attempts"] = _with_pairs(out["attempts"], out["samples"])
    by_id = {(c.cid, files.folder.name): (c, files.folder) for c, files, _ in batch}
    for key, warning in _unmeasured(out, {k: folder for k, (_, folder) in by_id.items()}):
        by_id[key][0].run.warnings.append(warning)
    return out


def _with_pairs(attempts: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame:
    """``n_pairs`` of each attempt: repetitions with an ok run on both sides (the plan's
    integrity checks compare it with the looks)."""
    pairs = (
        samples.filter(pl.col("status") == "ok")
        .group_by("campaign_id", "attempt_id", "repetition")
        .agg(pl.col("side").n_unique().alias("sides"))
        .filter(pl.col("sides") == 2)
        .group_by("campaign_id", "attempt_id")
        .agg(pl.len().cast(pl.Int64).alias("found"))
    )
    return (
        attempts.join(pairs, on=["campaign_id", "attempt_id"], how="left")
        .with_columns(n_pairs=pl.col("found").fill_null(0))
        .drop("found")
    )


def attempt_tables(
    campaign: Document, files: AttemptFiles, mode: ReadMode = "fast"
) -> tuple[dict[str, pl.DataFrame], list[Issue]]:
    """The input tables (campaigns and the per-attempt ones) that ingest would store for one
    attempt, built in memory from its files' bytes, with no store: what ``round
    --until-decided`` assesses after each block. The issues when the attempt is rejected."""
    cid = files.folder.parent.name
    run = _Run()
    mine = _Campaign(cid, campaign, True, {}, [files.folder], run)
    rows = _validate_batch([(mine, files, False)], mode)
    return {"campaigns": campaign_frame(cid, campaign), **rows}, run.issues


def _unmeasured(
    rows: dict[str, pl.DataFrame], folders: dict[tuple[str, str], Path]
) -> list[tuple[tuple[str, str], Issue]]:
    """A warning per expectation naming a region or counter that no run of its attempt
    measured: stored anyway (explain reports it unverifiable), but most likely a typo. Each
    with its (campaign_id, attempt_id)."""
    expectations = rows["expectations"].with_row_index("_at")
    key = ["campaign_id", "attempt_id", "name"]
    missing = pl.concat(
        [
            expectations.filter(pl.col("target") == target).join(
                rows[name].select("campaign_id", "attempt_id", name=column), on=key, how="anti"
            )
            for target, name, column in (
                ("region", "breakdown", "region"),
                ("counter", "counters", "counter"),
            )
        ]
    ).sort("_at")
    return [
        (
            (cid, attempt_id),
            Issue(
                str(folders[cid, attempt_id] / MECHANISM_FILE),
                None,
                f"expectations[{position}]",
                "not_measured",
                f'expects {expect} of {target} "{name}", which no run of this attempt measured',
            ),
        )
        for cid, attempt_id, position, target, name, expect in missing.select(
            "campaign_id", "attempt_id", "position", "target", "name", "expect"
        ).iter_rows()
    ]


def _campaign_outcome(store: Store, cid: str, changed: bool) -> Outcome:
    if not changed:
        return "unchanged"
    return "replaced" if store.partition_file("campaigns", cid).is_file() else "ingested"


def _stored_attempts(store: Store, cid: str) -> dict[str, Stored]:
    """attempt_id -> what the store keeps of it (``Stored``), from this campaign only."""
    if not store.partition_file("attempts", cid).is_file():
        return {}  # a new campaign: no scan to build
    frame = (
        store.scan("attempts", [cid])
        .select(
            "attempt_id",
            "inputs_sha256",
            "mechanism_sha256_first_seen",
            "sequential_sha256_first_seen",
            "commands_sha256_first_seen",
        )
        .collect()
    )
    return {a: (s, m, p, c) for a, s, m, p, c in frame.iter_rows()}


def _stored_source(store: Store, cid: str) -> str | None:
    if not store.partition_file("campaigns", cid).is_file():
        return None
    frame = store.scan("campaigns", [cid]).select("source_sha256").collect()
    return frame.item(0, 0) if frame.height else None


def _pending_attempts(campaign: _Campaign, tick: Callable[[int], object]) -> Iterator[_Pending]:
    """The files of attempts that need validating (new or changed, or all when campaign.json
    changed); unreadable and unchanged attempts are recorded in the campaign's run here."""
    cid, stored, run = campaign.cid, campaign.stored, campaign.run
    for folder in campaign.attempts:
        tick(1)
        outside = _outside(folder, run.root)
        files, issues = (None, [outside]) if outside else read_attempt_files(folder)
        if files is None:
            run.attempt(cid, folder.name, "rejected", issues)
            continue
        same = folder.name in stored and stored[folder.name][0] == files.inputs_sha256
        if same and not campaign.changed:
            run.attempt(cid, folder.name, "unchanged")
            continue
        yield campaign, files, same


def _write_group(store: Store, txn: Transaction, got: _Prepared) -> None:
    """Write the partitions of every campaign of the group that changed into the transaction:
    each table in one pass over the group's rows."""
    new = got.new
    _write_rejections(store, txn, got.run)
    touched = set(new["attempts"]["campaign_id"].unique().to_list())
    written = [c for c in got.campaigns if c.cid in touched or c.changed]
    if not written:
        return
    campaign_rows = pl.concat([campaign_frame(c.cid, c.document) for c in written])
    txn.put_partitions("campaigns", campaign_rows, [c.cid for c in written if c.changed])
    replaced = new["attempts"].select(_attempt_key())["key"]
    attempts = _merged(store, "attempts", [c.cid for c in written], replaced, new["attempts"])
    with_new = [c.cid for c in written if c.cid in touched]
    txn.put_partitions("attempts", attempts, with_new)
    for name in ATTEMPT_TABLES[1:]:
        txn.put_partitions(name, _merged(store, name, with_new, replaced, new[name]), with_new)
    txn.put_partitions(
        "integrity", integrity_errors(campaign_rows, attempts), [c.cid for c in written]
    )


def _write_rejections(store: Store, txn: Transaction, run: _Run) -> None:
    """Each campaign folder read gets, in table ``rejections``, exactly the errors this ingest
    found in it: written when they differ from the stored ones, removed when there are none (so
    a clean campaign, the usual case, costs one file test). Folders whose name is not a valid
    campaign id have no partition (their errors are only printed)."""
    cids = [c["campaign_id"] for c in run.campaigns if valid_id(c["campaign_id"])]
    spec = table("rejections")
    frame = pl.DataFrame(run.rejections, schema=spec.polars_schema(), strict=False)
    frame = frame.with_columns(position=pl.int_range(pl.len()).over("campaign_id"))
    frame = frame.filter(pl.col("campaign_id").is_in(cids))
    found = set(frame["campaign_id"].to_list())
    stored = [c for c in cids if store.partition_file("rejections", c).is_file()]
    for cid in stored:
        if cid not in found:
            txn.delete("rejections", cid)
    kept = store.read("rejections", [c for c in stored if c in found])
    changed = [
        cid
        for cid in sorted(found)
        if not frame.filter(pl.col("campaign_id") == cid).equals(
            kept.filter(pl.col("campaign_id") == cid)
        )
    ]
    txn.put_partitions("rejections", frame, changed)


def _attempt_key() -> pl.Expr:
    return pl.concat_str("campaign_id", "attempt_id", separator="/").alias("key")


def _merged(
    store: Store, name: str, cids: Sequence[str], replaced: pl.Series, new: pl.DataFrame
) -> pl.DataFrame:
    """Per campaign: the stored rows of the attempts not ``replaced`` (campaign_id/attempt_id),
    then the new rows (a partitioned write keeps that order within each campaign)."""
    stored = [cid for cid in cids if store.partition_file(name, cid).is_file()]
    if not stored:
        return new
    kept = store.scan(name, stored).filter(~_attempt_key().is_in(replaced.implode())).collect()
    return pl.concat([kept, new], how="vertical")


# -- documents -> rows --------------------------------------------------------------------------
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def campaign_frame(cid: str, campaign: Document) -> pl.DataFrame:
    """The one ``campaigns`` row of a valid campaign.json (policy with defaults filled)."""
    doc = campaign.data
    policy = with_defaults(doc["policy"])
    canonical = canonical_policy(doc["policy"])
    row = {
        "campaign_id": cid,
        "kind": doc["kind"],
        "created_at": parse_timestamp(doc["created_at"]),
        "metric_name": doc["metric"]["name"],
        "metric_better": doc["metric"]["better"],
        **{k: policy[k] for k in POLICY_FIELDS},
        "policy_json": canonical.decode("utf-8"),
        "policy_sha256": doc["policy_sha256"],
        "policy_sha256_actual": _sha256(canonical),
        "source_sha256": campaign.sha256,
    }
    return pl.DataFrame([row], schema=table("campaigns").polars_schema())


def _attempt_row(
    cid: str,
    files: AttemptFiles,
    attempt: Document,
    mechanism: Document | None,
    n_lines: int,
    stored: dict[str, Stored],
) -> dict[str, Any]:
    doc, attempt_id = attempt.data, files.folder.name
    actual = mechanism.sha256 if mechanism else None
    declared = doc.get("declared_at")
    plan = doc.get("sequential")
    plan_now = sequential_sha256(plan) if plan is not None else None
    # null first plan: stored before plans were digested, so the plan seen now is the first known
    plan_first = stored[attempt_id][2] if attempt_id in stored else None
    plan_first = plan_first if plan_first is not None else (plan_now or NO_PLAN)
    commands = doc.get("commands")
    commands_now = commands_sha256(commands) if commands is not None else None
    commands_first = stored[attempt_id][3] if attempt_id in stored else None  # null: as plans
    commands_first = commands_first if commands_first is not None else (commands_now or NO_PLAN)
    # The first digest the store saw is kept (even "no mechanism"); a new attempt is seen now.
    return {
        "campaign_id": cid,
        "attempt_id": attempt_id,
        "round": doc["round"],
        "candidate": doc["candidate"],
        "baseline": doc["baseline"],
        "status": doc["status"],
        "declared_at": parse_timestamp(declared) if declared else None,
        "started_at": parse_timestamp(doc["started_at"]),
        "mechanism_sha256": doc.get("mechanism_sha256"),
        "mechanism_sha256_actual": actual,
        "mechanism_sha256_first_seen": stored[attempt_id][1] if attempt_id in stored else actual,
        "hypothesis": mechanism.data["hypothesis"] if mechanism else None,
        "n_lines": n_lines,
        "inputs_sha256": files.inputs_sha256,
        "source_dir": str(files.folder),
        "order_seed": doc.get("order_seed"),
        "recorder": doc.get("recorder"),
        "environment": _json_text(doc.get("environment")),
        **_sequential_columns(plan),
        "sequential_sha256": doc.get("sequential_sha256"),
        "sequential_sha256_actual": plan_now,
        "sequential_sha256_first_seen": plan_first,
        "kind": doc.get("kind"),
        "confirms": doc.get("confirms"),
        "chosen": ",".join(doc["chosen"]) if doc.get("chosen") else None,
        "measured": _json_text(doc.get("measured")),
        **_command_columns(commands),
        "commands_sha256_actual": commands_now,
        "commands_sha256_first_seen": commands_first,
        "suite_metric": doc.get("suite_metric"),
    }


def _command_columns(commands: dict[str, Any] | None) -> dict[str, str | None]:
    """attempt.json's optional ``commands`` object as the attempts table's columns."""
    given = commands or {}
    return {
        f"{side}_{key}": given.get(side, {}).get(field)
        for side in ("baseline", "candidate")
        for key, field in (("command", "command"), ("cwd", "cwd"))
    }


def _sequential_columns(sequential: dict[str, Any] | None) -> dict[str, Any]:
    """attempt.json's optional ``sequential`` object as the attempts table's columns."""
    plan = sequential or {}
    looks = plan.get("looks")
    return {
        **{
            f"sequential_{key}": plan.get(key)
            for key in ("first_look", "look_every", "max_pairs", "stopped")
        },
        "sequential_looks": None if looks is None else json.dumps(looks, separators=(",", ":")),
    }


def _json_text(value: dict[str, Any] | None) -> str | None:
    if value is None:
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _expectation_rows(
    cid: str, attempt_id: str, mechanism: Document | None
) -> list[dict[str, Any]]:
    if mechanism is None:
        return []
    return [
        {"campaign_id": cid, "attempt_id": attempt_id, "position": i, **item}
        for i, item in enumerate(mechanism.data["expectations"])
    ]


__all__ = ["IngestReport", "Issue", "ingest"]
