"""Ingest stored attempts (contract §2) into the Parquet store (contract §3), idempotently.

Per campaign, each input table's partition is rewritten as: the stored rows of attempts not
touched by this ingest + the rows of attempts that are new or whose input files changed (a lazy
merge: the old partition is scanned and filtered, never loaded whole). All partitions written by
one ingest land in one store transaction. An attempt is skipped without parsing when its inputs
digest and its campaign.json are as stored; when nothing of a campaign changed, nothing of it is
written. Attempts that are in the store but no longer on disk are kept: deleting a folder is not a
way to drop a measured round (a new store is). A rejected attempt leaves what the store holds for
it untouched. The ``integrity`` partition of every written campaign is recomputed from the stored
evidence (pipeline.integrity).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
from tqdm import tqdm

from pipeline import bulk
from pipeline.contracts import table
from pipeline.engines import Engine, LocalEngine
from pipeline.errors import ExitCode, StoreError, UsageError
from pipeline.integrity import integrity_errors
from pipeline.policy import POLICY_FIELDS, canonical_policy, with_defaults
from pipeline.store import Store, Transaction
from pipeline.validate import (
    CAMPAIGN_FILE,
    MEASUREMENTS_FILE,
    MECHANISM_FILE,
    AttemptFiles,
    Document,
    Issue,
    ValidAttempt,
    parse_timestamp,
    read_attempt_files,
    validate_attempt,
    validate_campaign,
)

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

    def attempt(
        self, campaign_id: str, attempt_id: str, outcome: Outcome, issues: Sequence[Issue] = ()
    ) -> None:
        self.rows.append(
            {
                "campaign_id": campaign_id,
                "attempt_id": attempt_id,
                "outcome": outcome,
                "n_issues": len(issues),
            }
        )
        self.issues += issues

    def report(self) -> IngestReport:
        return IngestReport(
            pl.DataFrame(self.rows, schema=_REPORT_SCHEMA),
            self.issues,
            pl.DataFrame(self.campaigns, schema={"campaign_id": pl.String, "outcome": pl.String}),
            self.warnings,
        )


def ingest(
    source: Path, store: Store, *, progress: bool = False, engine: Engine | None = None
) -> IngestReport:
    """Validate and store every campaign under ``source`` (an attempts folder or one campaign).
    ``engine`` validates the campaigns (default: in this process); this process alone writes,
    in one transaction."""
    engine = engine or LocalEngine()
    folders = campaign_folders(Path(source))
    root = Path(source).resolve()  # symbolic links leading out of it are not followed
    run = _Run()
    total = sum(len(attempt_folders(f)) for f in folders if _outside(f, root) is None)
    bar = tqdm(total=total, disable=not progress, file=sys.stderr, unit="attempt", desc="ingest")
    tick = bar.update if engine.in_process else None
    try:
        with bar, store.transaction() as txn:
            for got in engine.map(prepare_campaign, [(f, store, tick, root) for f in folders]):
                _commit_campaign(got, store, txn, run)
                if tick is None:
                    bar.update(len(got.run.rows))
    except (OSError, pl.exceptions.ComputeError) as exc:  # the store, not the inputs
        raise StoreError(f"{store.root}: cannot update the store: {exc}") from exc
    return run.report()


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


# -- one campaign -------------------------------------------------------------------------------
@dataclass
class _Prepared:
    """One campaign folder validated against the store: what to record and the new rows."""

    cid: str
    run: _Run
    campaign: Document | None = None  # None: campaign.json rejected, nothing to write
    new: dict[str, pl.DataFrame] = field(default_factory=dict)
    changed: bool = False  # campaign.json differs from the stored one


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


def prepare_campaign(
    folder: Path,
    store: Store,
    tick: Callable[[int], object] | None = None,
    root: Path | None = None,
) -> _Prepared:
    """Validate one campaign folder and build its new rows. A pure function of the folder and
    the store's files, which an engine may run on another process or machine
    (pipeline.engines); ``tick`` reports progress per attempt when it runs here; symbolic links
    leading out of ``root`` (the resolved SOURCE) are not followed."""
    tick = tick or (lambda n: None)
    outside = _outside(folder, root)
    attempts = [] if outside else attempt_folders(folder)
    campaign, issues = (None, [outside]) if outside else validate_campaign(folder)
    run = _Run(root=root)
    if campaign is None:
        run.campaigns.append({"campaign_id": folder.name, "outcome": "rejected"})
        run.issues += issues
        for attempt in attempts:
            run.attempt(folder.name, attempt.name, "rejected")
        tick(len(attempts))
        return _Prepared(folder.name, run)
    cid = folder.name
    stored = _stored_attempts(store, cid)
    campaign_changed = _stored_source(store, cid) != campaign.sha256
    pending = _pending_attempts(cid, attempts, stored, campaign_changed, run, tick)
    benchmark = campaign.data["kind"] == "benchmark"
    new = _rows_in_batches(cid, pending, stored, run, benchmark=benchmark)
    run.campaigns.append(
        {"campaign_id": cid, "outcome": _campaign_outcome(store, cid, campaign_changed)}
    )
    return _Prepared(cid, run, campaign, new, campaign_changed)


def _commit_campaign(got: _Prepared, store: Store, txn: Transaction, run: _Run) -> None:
    """Record the campaign's outcomes and write its partitions into the transaction."""
    run.rows += got.run.rows
    run.campaigns += got.run.campaigns
    run.issues += got.run.issues
    run.warnings += got.run.warnings
    if got.campaign is not None and (got.new["attempts"].height or got.changed):
        _write_campaign(store, txn, got.cid, got.campaign, got.new, got.changed)


_Pending = tuple[AttemptFiles, bool]  # the files of an attempt to validate; unchanged inputs?


def _rows_in_batches(
    cid: str,
    pending: Iterable[_Pending],
    stored: dict[str, tuple[str, str | None]],
    run: _Run,
    *,
    benchmark: bool,
    size: int = 512,
) -> dict[str, pl.DataFrame]:
    """Validate the pending attempts ``size`` at a time and return the new rows of every
    per-attempt table; a large campaign is never held as Python objects."""
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in ATTEMPT_TABLES}
    batch: list[_Pending] = []
    for item in [*pending, None]:
        if item is not None:
            batch.append(item)
        if batch and (item is None or len(batch) == size):
            for name, frame in _validate_batch(cid, batch, stored, run, benchmark).items():
                parts[name].append(frame)
            batch = []
    return {
        name: pl.concat(frames) if frames else table(name).empty() for name, frames in parts.items()
    }


def _validate_batch(
    cid: str,
    batch: Sequence[_Pending],
    stored: dict[str, tuple[str, str | None]],
    run: _Run,
    benchmark: bool,
) -> dict[str, pl.DataFrame]:
    """Outcomes and new rows of a batch of attempts: the bulk check first; an attempt it does
    not accept goes through the precise validator (which names every error) one by one."""
    first_seen = {a: f for a, (_, f) in stored.items()}
    precise = bulk_disabled()
    checked = bulk.check_lines([files.bodies[MEASUREMENTS_FILE] for files, _ in batch])
    n_lines = np.bincount(checked.runs["attempt"].to_numpy(), minlength=len(batch))
    keep = np.zeros(len(batch), bool)
    slow: list[ValidAttempt] = []
    rows: dict[str, list[dict[str, Any]]] = {"attempts": [], "expectations": []}
    for i, (files, same) in enumerate(batch):
        name = files.folder.name
        fast = None
        if not precise and checked.accepted[i]:
            fast = bulk.fast_attempt(files, benchmark=benchmark)
        valid = None
        if fast is not None:
            attempt, mechanism, lines = fast[0], fast[1], int(n_lines[i])
        else:
            valid, issues = validate_attempt(files, benchmark=benchmark)
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
        run.attempt(cid, name, "replaced" if name in stored else "ingested")
        rows["attempts"].append(_attempt_row(cid, files, attempt, mechanism, lines, first_seen))
        rows["expectations"] += _expectation_rows(cid, name, mechanism)
        keep[i] = valid is None
        if valid is not None:
            slow.append(valid)
    ids = [files.folder.name for files, _ in batch]
    fast_rows = bulk.run_frames(cid, ids, checked, keep)
    slow_rows = _run_frames(cid, slow, {a: i for i, a in enumerate(ids)})
    out = {name: pl.DataFrame(found, schema=table(name).polars_schema(), strict=False)
           for name, found in rows.items()}  # fmt: skip
    for name, frame in fast_rows.items():
        merged = pl.concat([frame, slow_rows[name]]).sort("_pos", maintain_order=True)
        out[name] = merged.drop("_pos")
    run.warnings += _unmeasured(out, {files.folder.name: files.folder for files, _ in batch})
    return out


def _unmeasured(rows: dict[str, pl.DataFrame], folders: dict[str, Path]) -> list[Issue]:
    """A warning per expectation naming a region or counter that no run of its attempt
    measured: stored anyway (explain reports it unverifiable), but most likely a typo."""
    key = ["attempt_id", "target", "name"]
    measured = pl.concat(
        [
            rows["breakdown"].select("attempt_id", target=pl.lit("region"), name="region"),
            rows["counters"].select("attempt_id", target=pl.lit("counter"), name="counter"),
        ]
    ).unique()
    missing = rows["expectations"].join(measured, on=key, how="anti")
    return [
        Issue(
            str(folders[attempt_id] / MECHANISM_FILE),
            None,
            f"expectations[{position}]",
            "not_measured",
            f'expects {expect} of {target} "{name}", which no run of this attempt measured',
        )
        for attempt_id, position, target, name, expect in missing.select(
            "attempt_id", "position", "target", "name", "expect"
        ).iter_rows()
    ]


def bulk_disabled() -> bool:
    """EXPLAIN_INGEST_PRECISE=1 sends every attempt through the per-line validator (the
    benchmark's comparison; results are the same, only slower)."""
    return os.environ.get("EXPLAIN_INGEST_PRECISE") == "1"


def _campaign_outcome(store: Store, cid: str, changed: bool) -> Outcome:
    if not changed:
        return "unchanged"
    return "replaced" if cid in store.campaign_ids("campaigns") else "ingested"


def _stored_attempts(store: Store, cid: str) -> dict[str, tuple[str, str | None]]:
    """attempt_id -> (inputs_sha256, mechanism_sha256_first_seen), from this campaign only."""
    frame = (
        store.scan("attempts", [cid])
        .select("attempt_id", "inputs_sha256", "mechanism_sha256_first_seen")
        .collect()
    )
    return {a: (s, f) for a, s, f in frame.iter_rows()}


def _stored_source(store: Store, cid: str) -> str | None:
    frame = store.scan("campaigns", [cid]).select("source_sha256").collect()
    return frame.item(0, 0) if frame.height else None


def _pending_attempts(
    cid: str,
    folders: Iterable[Path],
    stored: dict[str, tuple[str, str | None]],
    campaign_changed: bool,
    run: _Run,
    tick: Callable[[int], object],
) -> Iterator[_Pending]:
    """The files of attempts that need validating (new or changed, or all when campaign.json
    changed); unreadable and unchanged attempts are recorded in ``run`` here."""
    for folder in folders:
        tick(1)
        outside = _outside(folder, run.root)
        files, issues = (None, [outside]) if outside else read_attempt_files(folder)
        if files is None:
            run.attempt(cid, folder.name, "rejected", issues)
            continue
        same = folder.name in stored and stored[folder.name][0] == files.inputs_sha256
        if same and not campaign_changed:
            run.attempt(cid, folder.name, "unchanged")
            continue
        yield files, same


def _write_campaign(
    store: Store,
    txn: Transaction,
    cid: str,
    campaign: Document,
    new: dict[str, pl.DataFrame],
    campaign_changed: bool,
) -> None:
    campaign_row = campaign_frame(cid, campaign)
    if campaign_changed:
        txn.put("campaigns", cid, campaign_row)
    changed = new["attempts"]["attempt_id"].to_list()
    merged_attempts = _merged(store, "attempts", cid, changed, new["attempts"]).collect()
    if changed:
        txn.put("attempts", cid, merged_attempts)
        for name in ATTEMPT_TABLES[1:]:
            txn.put(name, cid, _merged(store, name, cid, changed, new[name]))
    txn.put("integrity", cid, integrity_errors(campaign_row, merged_attempts))


def _merged(
    store: Store, name: str, cid: str, changed: list[str], new: pl.DataFrame
) -> pl.LazyFrame:
    """The stored rows of untouched attempts, then the new rows (streams the old partition)."""
    kept = store.scan(name, [cid]).filter(~pl.col("attempt_id").is_in(changed))
    return pl.concat([kept, new.lazy()], how="vertical")


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


def _run_frames(
    cid: str, attempts: Sequence[ValidAttempt], position: dict[str, int]
) -> dict[str, pl.DataFrame]:
    """``samples``, ``breakdown`` and ``counters`` rows of attempts the precise validator
    accepted (built from its parsed documents), with the attempt's position in the batch."""
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in bulk.RUN_TABLES}
    for attempt in attempts:
        for run in attempt.runs:
            key = {
                "campaign_id": cid,
                "attempt_id": attempt.attempt_id,
                "side": run.data["side"],
                "repetition": run.data["repetition"],
            }
            rows["samples"].append(
                {
                    **key,
                    "status": run.data["status"],
                    "metric": run.data.get("metric"),
                    "line": run.line,
                    **_recording(run.data),
                }
            )
            rows["breakdown"] += _breakdown_rows(key, run.data.get("breakdown") or {})
            rows["counters"] += [
                {**key, "counter": name, "value": float(value)}
                for name, value in (run.data.get("counters") or {}).items()
            ]
    return {
        name: pl.DataFrame(found, schema=table(name).polars_schema(), strict=False).with_columns(
            _pos=pl.col("attempt_id").replace_strict(position, return_dtype=pl.Int64)
        )
        for name, found in rows.items()
    }


def _attempt_row(
    cid: str,
    files: AttemptFiles,
    attempt: Document,
    mechanism: Document | None,
    n_lines: int,
    first_seen: dict[str, str | None],
) -> dict[str, Any]:
    doc, attempt_id = attempt.data, files.folder.name
    actual = mechanism.sha256 if mechanism else None
    declared = doc.get("declared_at")
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
        "mechanism_sha256_first_seen": first_seen.get(attempt_id, actual),
        "hypothesis": mechanism.data["hypothesis"] if mechanism else None,
        "n_lines": n_lines,
        "inputs_sha256": files.inputs_sha256,
        "source_dir": str(files.folder),
        "order_seed": doc.get("order_seed"),
        "recorder": doc.get("recorder"),
        "environment": _json_text(doc.get("environment")),
    }


def _recording(run: dict[str, Any]) -> dict[str, Any]:
    """The recorder's optional fields of one run (null when absent)."""
    started, finished = run.get("started_at"), run.get("finished_at")
    return {
        "order": run.get("order"),
        "started_at": parse_timestamp(started) if started else None,
        "finished_at": parse_timestamp(finished) if finished else None,
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


def _breakdown_rows(key: dict[str, Any], breakdown: dict[str, Any]) -> list[dict[str, Any]]:
    """step -> region -> seconds; a flat {region: seconds} is the single step ``all``."""
    if breakdown and not isinstance(next(iter(breakdown.values())), dict):
        breakdown = {"all": breakdown}
    return [
        {**key, "step": step, "region": region, "seconds": float(seconds)}
        for step, regions in breakdown.items()
        for region, seconds in regions.items()
    ]


__all__ = ["IngestReport", "Issue", "ingest"]
