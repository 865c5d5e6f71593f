"""The Parquet store: hive-partitioned tables and all-or-nothing multi-file writes.

Layout: ``<store>/<table>/campaign_id=<id>/data.parquet``. The partition column lives in the
path only, so Polars, PyArrow and DuckDB read each table as a hive-partitioned dataset.

Writes are transactions over whole partitions. Each new file is staged under
``_staging/<txid>/`` (outside the table folders, so a reader of ``<store>/<table>/`` never meets
it), then a journal listing every rename is committed by an atomic rename into ``_txn/``, then
the renames are applied and the journal removed. A crash before the journal commit leaves the
store as it was (the staged files are removed by the next writer or `store repair`); a crash
after it is rolled forward by the next command that opens the store, or by `store repair`.
Outside readers may see a mix of old and new partitions only while a commit is being applied:
docs/store.md says what they may see and how to avoid it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.atomic import fsync_path
from pipeline.contract.schemas import PARTITION, table, tables
from pipeline.errors import StoreError, UsageError
from pipeline.store.nofollow import (
    Folders,
    Kind,
    StoreLinkError,
    expect,
    folders,
    lstat_in,
    open_file,
    relative_parts,
    remove,
)

DEFAULT_STORE = ".explain-store"
DATA_FILE = "data.parquet"
_TXN_DIR = "_txn"
_LOCK_FILE = ".lock"
FORMAT_FILE = ".store-format"
STORE_FORMAT = 2
"""The store's layout version, written in FORMAT_FILE by every write and checked on open (a
store of a newer format is refused, never half-read). 1: no FORMAT_FILE, written before it
existed: staged files may lie beside the partitions (``.data.parquet.*.tmp``) or under
``_staging/<txid>/<table>/campaign_id=<id>/``. 2: staged files only under
``_staging/<txid>/<table>/campaign_id=<id>.parquet``. The first write to a format-1 store removes
the format-1 strays (listing every partition folder: about a second at 100,000 attempts), then
writes 2; later writes skip that search; `store check` and `store repair` always search."""
_OLD_MARKER = ".legacy-swept"  # what format-1 stores wrote after their sweep; removed on upgrade
_STAGING_DIR = "_staging"
_INTERNAL: tuple[tuple[tuple[str, ...], Kind], ...] = (
    ((_LOCK_FILE,), "file"),
    ((FORMAT_FILE,), "file"),
    ((_TXN_DIR,), "folder"),
    ((_STAGING_DIR,), "folder"),
)
"""The store's own paths besides the tables (`store check` names one that is a link)."""
# The only paths a journal may name: a partition file, and a staged copy of one (beside it,
# dot-prefixed, or in a folder per file: store format 1; or under _staging/<txid>/).
_PART = rf"(?P<table>[a-z_]+)/{PARTITION}=(?P<id>[^/]+)/"
_TARGET = re.compile(_PART + re.escape(DATA_FILE))
_STAGED = (
    re.compile(rf"{_STAGING_DIR}/[0-9a-f]+/(?P<table>[a-z_]+)/{PARTITION}=(?P<id>[^/]+)\.parquet"),
    re.compile(rf"{_STAGING_DIR}/[0-9a-f]+/" + _TARGET.pattern),  # one folder per file (format 1)
    re.compile(_PART + re.escape(f".{DATA_FILE}.") + r"[0-9a-f]+\.tmp"),
)


def resolve_store_path(path: str | os.PathLike[str] | None) -> Path:
    """--store, else EXPLAIN_STORE, else ./.explain-store."""
    return Path(path or os.environ.get("EXPLAIN_STORE") or DEFAULT_STORE)


_UTC = ("UTC", "+00:00", "Etc/UTC")
_TYPE_NAMES = {pl.String: "string", pl.Int64: "int64", pl.Float64: "float64", pl.Boolean: "bool"}


def _type_name(dtype: pl.DataType) -> str:
    """The tables.json type name of a Parquet column as Polars reads it (its Polars name, in
    lower case, when there is none)."""
    if isinstance(dtype, pl.Datetime):
        return "timestamp" if dtype.time_zone in _UTC else str(dtype).lower()
    return _TYPE_NAMES.get(dtype.base_type(), str(dtype).lower())


@cache
def _schema_problems(table_name: str, schema: tuple[tuple[str, pl.DataType], ...]) -> list[str]:
    """What is wrong with a file of ``table_name`` that has ``schema`` (files share a few)."""
    return table(table_name).file_problems({name: _type_name(t) for name, t in schema})


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def is_store(path: Path) -> bool:
    """A store is a folder holding the campaigns table or the lock file every write creates
    (so a store that ingest created from an empty source is one too)."""
    return (
        (path / "campaigns").is_dir()
        or (path / _LOCK_FILE).is_file()
        or (path / FORMAT_FILE).is_file()
    )


def _collect(links: list[StoreLinkError] | None, exc: StoreLinkError, value: Any) -> Any:
    """Raise ``exc``, or append it to ``links`` (what `store check` reports) and return value."""
    if links is None:
        raise exc
    links.append(exc)
    return value


def _fsync_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _exists(folder: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=folder)
    except FileNotFoundError:
        return False
    return True


def _remove_staging(root: Path, txid: str) -> None:
    """Remove a staging folder (links inside are removed, never followed), then ``_staging``
    itself once empty."""
    with folders(root) as dirs:
        remove(dirs, (_STAGING_DIR, txid))
        root_fd = dirs.fd(())
        with contextlib.suppress(OSError):
            os.rmdir(_STAGING_DIR, dir_fd=root_fd)  # never follows a link


def _read_small(dirs: Folders, parts: Sequence[str]) -> bytes:
    """The bytes of a store-internal file (a journal), opened without following a link."""
    fd = open_file(dirs, parts, os.O_RDONLY)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", str(dirs.root.joinpath(*parts)))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


@dataclass(frozen=True)
class Problem:
    """Something `store check` reports: a file or folder of the store and what is wrong with it."""

    path: Path
    reason: str
    repairable: bool  # `store repair` fixes it

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class Repaired:
    commits_finished: int
    strays_removed: int


def _fsync_all(sync: Callable[[Any], None], paths: Iterable[Any]) -> None:
    """``sync`` every path, several at once: the file system commits concurrent syncs together
    (about ten times faster than one after the other for hundreds of small partition files)."""
    paths = list(paths)
    if len(paths) <= 1:
        for path in paths:
            sync(path)
        return
    with ThreadPoolExecutor(min(16, len(paths))) as pool:
        list(pool.map(sync, paths))  # list(): re-raise the first error


@dataclass
class _Op:
    target: Path
    staged: Path | None  # None: delete the target


@dataclass
class Transaction:
    """Collects partition writes; nothing is visible until the transaction commits."""

    store: Store
    txid: str = field(default_factory=lambda: uuid.uuid4().hex)
    ops: list[_Op] = field(default_factory=list)
    _folders: set[str] = field(default_factory=set)  # staging folders made (one per table)

    def put(self, table_name: str, campaign_id: str, frame: pl.DataFrame | pl.LazyFrame) -> None:
        """Replace one partition with ``frame`` (its rows of that campaign, table columns)."""
        spec = table(table_name)
        lazy = frame.lazy().with_columns(pl.lit(campaign_id).alias(PARTITION))
        conformed = spec.conform(lazy).select(spec.file_columns)
        conformed.sink_parquet(self._stage(table_name, campaign_id), statistics=True)

    def put_partitions(
        self, table_name: str, frame: pl.DataFrame, campaign_ids: Sequence[str]
    ) -> None:
        """Replace the partition of each of ``campaign_ids`` with its rows of ``frame`` (table
        columns; a campaign without rows gets an empty file, rows of other campaigns are
        ignored): one partitioned write of the rows of many campaigns instead of one write per
        campaign (a write costs about a millisecond however small the file)."""
        if not campaign_ids:
            return
        spec = table(table_name)
        wanted = pl.Series(PARTITION, list(campaign_ids), dtype=pl.String)
        rows = (
            spec.conform(frame.lazy()).filter(pl.col(PARTITION).is_in(wanted.implode())).collect()
        )
        staged = {cid: self._stage(table_name, cid) for cid in campaign_ids}
        present = set(rows[PARTITION].unique().to_list())
        if present:
            _write_partitions(rows, spec.file_columns, {c: staged[c] for c in present})
        empty = [staged[cid] for cid in campaign_ids if cid not in present]
        if empty:  # the same bytes for every empty partition of the table
            body = io.BytesIO()
            rows.clear().select(spec.file_columns).write_parquet(body, statistics=True)
            for path in empty:
                path.write_bytes(body.getvalue())

    def _stage(self, table_name: str, campaign_id: str) -> Path:
        """The staged path of one partition file, recorded to be renamed over its target at
        commit (and synced then): ``_staging/<txid>/<table>/campaign_id=<id>.parquet``, one
        folder per table (a folder per file cost two more file-system calls per partition)."""
        target = self.store.partition_file(table_name, campaign_id)
        folder = self.staging_dir / table_name
        if table_name not in self._folders:
            with folders(self.store.root) as dirs:
                dirs.fd((_STAGING_DIR, self.txid, table_name), create=True)
            self._folders.add(table_name)
        staged = folder / f"{PARTITION}={campaign_id}.parquet"
        self.ops.append(_Op(target, staged))
        return staged

    def delete(self, table_name: str, campaign_id: str) -> None:
        if self.store.has_partition(table_name, campaign_id):
            self.ops.append(_Op(self.store.partition_file(table_name, campaign_id), None))

    def _journal(self) -> dict[str, object]:
        root = self.store.root
        return {
            "txid": self.txid,
            "ops": [
                {
                    "target": str(op.target.relative_to(root)),
                    "staged": None if op.staged is None else str(op.staged.relative_to(root)),
                }
                for op in self.ops
            ],
        }

    def commit(self) -> None:
        if not self.ops:
            return
        _fsync_all(fsync_path, [op.staged for op in self.ops if op.staged is not None])
        final, pending = f"{self.txid}.json", f".{self.txid}.json.tmp"
        with folders(self.store.root) as dirs:
            fd = open_file(dirs, (_TXN_DIR, pending), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            assert fd is not None  # O_CREAT
            with os.fdopen(fd, "wb") as handle:
                handle.write(json.dumps(self._journal()).encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            txn_fd = dirs.fd((_TXN_DIR,))
            os.replace(pending, final, src_dir_fd=txn_fd, dst_dir_fd=txn_fd)  # the commit point
            os.fsync(txn_fd)  # type: ignore[arg-type]
        # this transaction's own operations: no need to read back and check the journal it has
        # just written (checking every path costs about a millisecond each)
        ops = [(op.target, op.staged) for op in self.ops]
        self.store._apply_journal(self.store.root / _TXN_DIR / final, ops)

    @property
    def staging_dir(self) -> Path:
        return self.store.root / _STAGING_DIR / self.txid

    def abandon(self) -> None:
        with contextlib.suppress(StoreError, OSError):  # never hide the error that got here
            _remove_staging(self.store.root, self.txid)


def _write_partitions(rows: pl.DataFrame, columns: list[str], paths: dict[str, Path]) -> None:
    """Write the rows of each campaign to its path (``columns`` only), in one partitioned sink
    when this Polars has one, else one file after the other."""
    partition_by = getattr(pl, "PartitionBy", None)
    if partition_by is None:  # Polars before 1.3x: one write per campaign
        for (cid,), part in rows.partition_by(PARTITION, as_dict=True, maintain_order=True).items():
            part.select(columns).write_parquet(paths[str(cid)], statistics=True)
        return

    def path_of(args: Any) -> str:
        return paths[args.partition_keys[PARTITION][0]].name  # relative to the base folder

    rows.lazy().select(PARTITION, *columns).sink_parquet(
        partition_by(
            next(iter(paths.values())).parent,
            key=PARTITION,
            include_key=False,
            file_path_provider=path_of,
            approximate_bytes_per_file=None,
        ),
        statistics=True,
        compression="lz4",  # about half zstd's time on the breakdown, files ~8 % larger
        maintain_order=True,
    )


@contextlib.contextmanager
def _flocked(fd: int, mode: str, lock: int) -> Iterator[None]:
    """Hold ``lock`` (LOCK_EX or LOCK_SH) on the open lock file ``fd`` while the block runs; the
    file is closed after."""
    with os.fdopen(fd, mode) as handle:
        fcntl.flock(handle, lock)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Store:
    """A folder of hive-partitioned Parquet tables."""

    def __init__(self, root: str | os.PathLike[str], *, recover: bool = True) -> None:
        """Open the folder ``root`` (created by the first write). A commit that was interrupted
        after its journal was written is finished first, unless ``recover`` is false."""
        self.root = Path(root)
        self._checked: set[tuple[str, int, int]] = set()  # (file, size, mtime) that matched
        self._refuse_newer_format()
        if recover and self._pending_journals():  # otherwise readers take no lock, write nothing
            with self._locked():
                self._recover()

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> Store:
        """The store at ``path`` (--store, $EXPLAIN_STORE, ./.explain-store), created by the first
        write if it does not exist: for commands that create a store (ingest)."""
        return cls(resolve_store_path(path))

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str] | None = None, **kwargs: bool) -> Store:
        """The store at ``path``; a usage error if there is none (nothing is created)."""
        root = resolve_store_path(path)
        if not is_store(root):
            raise UsageError(
                f"no store at {root} (run `explain-pipeline ingest` first, or pass --store)"
            )
        return cls(root, **kwargs)

    # -- layout -----------------------------------------------------------------------------
    def table_dir(self, table_name: str) -> Path:
        return self.root / table_name

    def partition_file(self, table_name: str, campaign_id: str) -> Path:
        return self.table_dir(table_name) / f"{PARTITION}={campaign_id}" / DATA_FILE

    def campaign_ids(
        self, table_name: str = "campaigns", links: list[StoreLinkError] | None = None
    ) -> list[str]:
        """Campaigns with a partition in ``table_name``, sorted. A link where a partition folder
        or file should be is a StoreLinkError (appended to ``links`` instead, when given)."""
        found: list[str] = []
        prefix = f"{PARTITION}="
        for folder in self._partition_folders(table_name, links):
            try:
                if lstat_in(self.root, (table_name, folder, DATA_FILE), "file") is not None:
                    found.append(folder[len(prefix) :])
            except StoreLinkError as exc:
                _collect(links, exc, None)
        return sorted(found)

    def _partition_folders(
        self, table_name: str, links: list[StoreLinkError] | None = None
    ) -> list[str]:
        """The names of the partition folders of ``table_name``; a link among them (or in the
        table folder's place) is a StoreLinkError, appended to ``links`` when given."""
        try:
            if lstat_in(self.root, (table_name,), "folder") is None:
                return []
        except StoreLinkError as exc:
            return _collect(links, exc, [])
        found: list[str] = []
        with os.scandir(self.table_dir(table_name)) as entries:
            for entry in entries:
                if not entry.name.startswith(f"{PARTITION}="):
                    continue
                try:
                    expect(Path(entry.path), entry.stat(follow_symlinks=False).st_mode, "folder")
                    found.append(entry.name)
                except StoreLinkError as exc:
                    _collect(links, exc, None)
        return found

    def has_partition(self, table_name: str, campaign_id: str) -> bool:
        """Whether the partition file exists (a link on the way is a StoreLinkError)."""
        parts = (table_name, f"{PARTITION}={campaign_id}", DATA_FILE)
        return lstat_in(self.root, parts, "file") is not None

    # -- reading ----------------------------------------------------------------------------
    def file_problem(self, table_name: str, path: Path) -> str | None:
        """Why the partition file ``path`` cannot be read as table ``table_name`` (None: it can).
        Reads the file's footer only, once per file version and Store."""
        try:
            stat = path.stat()
        except OSError as exc:
            return f"cannot read the file ({exc.strerror or exc})"
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key in self._checked:
            return None
        try:  # the footer only (~0.2 ms); Polars, so reading a store never loads PyArrow
            schema = tuple(pl.read_parquet_schema(path).items())
        except (OSError, pl.exceptions.PolarsError) as exc:
            return f"not a readable Parquet file ({_first_line(exc)})"
        problems = _schema_problems(table_name, schema)
        if problems:
            return (
                f"{'; '.join(problems)}; the file does not match table {table_name} of "
                "schemas/tables.json"
            )
        self._checked.add(key)
        return None

    def check(
        self, table_name: str, campaign_ids: Iterable[str] | None = None, *, values: bool = False
    ) -> list[Path]:
        """The partition files of ``table_name`` (optionally only some campaigns), each checked
        against schemas/tables.json (columns and types; with ``values`` also the required
        values, for files whose rows are reused unread): a damaged file is a StoreError naming
        it."""
        wanted = self.campaign_ids(table_name) if campaign_ids is None else list(campaign_ids)
        present = [c for c in wanted if self.has_partition(table_name, c)]
        files = [self.partition_file(table_name, c) for c in present]
        for path in files:
            problem = self.file_problem(table_name, path)
            if problem is not None:
                raise StoreError(f"{path}: {problem} (see docs/store.md#damaged-files)")
        for path, problem in self.value_problems(table_name, files if values else []):
            raise StoreError(f"{path}: {problem} (see docs/store.md#damaged-files)")
        return files

    def value_problems(self, table_name: str, files: Sequence[Path]) -> list[tuple[Path, str]]:
        """The files (whose columns were checked) that break a required value of the table
        (Table.value_rules), each with what is wrong. One scan of them all whose filter Polars
        answers from each row group's null counts, so a clean file costs its footer only."""
        rules = table(table_name).value_rules()
        if not files or not rules:
            return []
        frame = pl.scan_parquet(
            list(files),
            schema=table(table_name).polars_schema(with_partition=False),
            missing_columns="insert",
            extra_columns="ignore",
            include_file_paths="_file",
        )
        try:
            broken = (
                frame.filter(pl.any_horizontal([expr for _, expr in rules]))
                .group_by("_file")
                .agg([expr.sum().alias(str(i)) for i, (_, expr) in enumerate(rules)])
                .sort("_file")
                .collect()
            )
        except (OSError, pl.exceptions.PolarsError) as exc:
            return [(Path(files[0]).parent.parent, f"cannot read the table ({_first_line(exc)})")]
        return [
            (
                Path(row["_file"]),
                "; ".join(
                    f"{text} in {row[str(i)]} row(s)"
                    for i, (text, _) in enumerate(rules)
                    if row[str(i)]
                )
                + f"; the file does not match table {table_name} of schemas/tables.json",
            )
            for row in broken.iter_rows(named=True)
        ]

    def scan(self, table_name: str, campaign_ids: Iterable[str] | None = None) -> pl.LazyFrame:
        """The table as a LazyFrame with its declared columns (optionally only some campaigns)."""
        spec = table(table_name)
        files = self.check(table_name, campaign_ids)
        if not files:
            return spec.empty().lazy()
        # One scan over all partitions (a scan per partition costs ~10 ms each); files written
        # before a nullable column was added get it as nulls (check() refused any other gap).
        frame = pl.scan_parquet(
            files,
            hive_partitioning=True,
            hive_schema={PARTITION: pl.String},
            schema=spec.polars_schema(with_partition=False),
            missing_columns="insert",
            extra_columns="ignore",
        )
        return spec.conform(frame)

    def read(self, table_name: str, campaign_ids: Iterable[str] | None = None) -> pl.DataFrame:
        try:
            return self.scan(table_name, campaign_ids).collect()
        except (OSError, pl.exceptions.PolarsError) as exc:
            raise StoreError(f"{self.table_dir(table_name)}: cannot read table: {exc}") from exc

    # -- writing ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """All partition writes in the block land together, or none of them does."""
        self.root.mkdir(parents=True, exist_ok=True)
        with self._locked():
            self._recover()
            self._remove_stray_staging()
            txn = Transaction(self)
            try:
                yield txn
            except BaseException:
                txn.abandon()
                raise
            txn.commit()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with folders(self.root) as dirs:
            fd = open_file(dirs, (_LOCK_FILE,), os.O_RDWR | os.O_CREAT)
        assert fd is not None  # O_CREAT
        with _flocked(fd, "r+b", fcntl.LOCK_EX):
            yield

    def _apply_journal(self, journal: Path, ops: list[tuple[Path, Path | None]]) -> None:
        """Rename (or delete) every partition file of a committed journal, each relative to its
        folder's descriptor: a link where a folder should be stops before anything is done
        through it (the files already renamed are in the store, and the journal stays)."""
        with folders(self.root) as dirs:
            touched: dict[tuple[str, ...], int | None] = {}
            for target, staged in ops:
                where = relative_parts(self.root, target.parent)
                if staged is None:
                    self._delete_partition(dirs, where)
                else:
                    source = dirs.fd(relative_parts(self.root, staged.parent))
                    if source is None or not _exists(source, staged.name):
                        continue  # renamed before a crash
                    folder = dirs.fd(where, create=True)
                    os.replace(staged.name, target.name, src_dir_fd=source, dst_dir_fd=folder)
                fd = dirs.fd(where)
                touched[where] = fd if fd is not None else dirs.fd(where[:-1])
            _fsync_all(_fsync_fd, [fd for fd in touched.values() if fd is not None])
            txn_fd = dirs.fd((_TXN_DIR,))
            os.unlink(journal.name, dir_fd=txn_fd)
            os.fsync(txn_fd)  # type: ignore[arg-type]
        _remove_staging(self.root, journal.stem)

    @staticmethod
    def _delete_partition(dirs: Folders, where: tuple[str, ...]) -> None:
        folder = dirs.fd(where)
        if folder is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(DATA_FILE, dir_fd=folder)
        with contextlib.suppress(OSError):  # only succeeds when the partition is empty
            os.rmdir(where[-1], dir_fd=dirs.fd(where[:-1]))

    def _journal_ops(self, journal: Path) -> list[tuple[Path, Path | None]]:
        """The (target, staged) pairs of a committed journal, each path checked to be a file of
        this store; anything else stops the command before a single file is touched."""
        try:
            with folders(self.root) as dirs:
                body = _read_small(dirs, (_TXN_DIR, journal.name))
            document = json.loads(body.decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self._bad_journal(journal, f"not valid JSON ({exc})") from exc
        ops = document.get("ops") if isinstance(document, dict) else None
        if not isinstance(ops, list):
            raise self._bad_journal(journal, 'field "ops": missing or not a list')
        checked: list[tuple[Path, Path | None]] = []
        for i, op in enumerate(ops):
            if not isinstance(op, dict):
                raise self._bad_journal(journal, f'field "ops[{i}]": must be an object')
            target = self._journal_path(journal, f"ops[{i}].target", op.get("target"), (_TARGET,))
            staged = op.get("staged")
            checked.append(
                (
                    target,
                    None
                    if staged is None
                    else self._journal_path(journal, f"ops[{i}].staged", staged, _STAGED),
                )
            )
        return checked

    def _journal_path(
        self, journal: Path, name: str, value: object, shapes: tuple[re.Pattern[str], ...]
    ) -> Path:
        if not isinstance(value, str):
            raise self._bad_journal(journal, f'field "{name}": must be a path, got {value!r}')
        root = self.root.resolve()
        resolved = (root / value).resolve()
        if Path(value).is_absolute() or not resolved.is_relative_to(root):
            raise self._bad_journal(journal, f'field "{name}": "{value}" is outside the store')
        match = next((m for shape in shapes if (m := shape.fullmatch(value))), None)
        if match is None or match["table"] not in tables() or match["id"] in (".", ".."):
            raise self._bad_journal(journal, f'field "{name}": "{value}" is not a partition file')
        return self.root / value

    @staticmethod
    def _bad_journal(journal: Path, reason: str) -> StoreError:
        return StoreError(
            f"{journal}: {reason}; nothing was changed. This is not a journal explain-pipeline "
            "wrote: move it out of the store to continue (see docs/store.md)"
        )

    def _pending_journals(self) -> list[Path]:
        if lstat_in(self.root, (_TXN_DIR,), "folder") is None:
            return []
        return sorted((self.root / _TXN_DIR).glob("*.json"))

    def _recover(self) -> None:
        # Every journal is checked before any is applied: a bad one stops with nothing touched.
        checked = [(journal, self._journal_ops(journal)) for journal in self._pending_journals()]
        for journal, ops in checked:
            self._apply_journal(journal, ops)

    def _refuse_newer_format(self) -> None:
        try:
            found = self.format()
        except StoreLinkError:  # `store check` names it; a write refuses it
            return
        if found > STORE_FORMAT:
            raise StoreError(
                f"{self.root / FORMAT_FILE}: store format {found} was written by a newer "
                f"explain-pipeline; this one reads formats up to {STORE_FORMAT}: upgrade it"
            )

    def format(self) -> int:
        """The store's format (STORE_FORMAT): 1 when FORMAT_FILE is absent (a store written
        before it existed, or none yet)."""
        with folders(self.root) as dirs:
            fd = open_file(dirs, (FORMAT_FILE,), os.O_RDONLY)
        if fd is None:
            return 1
        with os.fdopen(fd, "rb") as handle:
            text = handle.read(64).decode("ascii", errors="replace").strip()
        if not text.isdigit():
            raise StoreError(
                f"{self.root / FORMAT_FILE}: expected the store format (a number), got {text!r}"
            )
        return int(text)

    def _write_format(self) -> None:
        """Mark the store as of STORE_FORMAT (the caller holds the lock): written beside and
        renamed into place, so a reader sees the old mark or the new one."""
        pending = f"{FORMAT_FILE}.tmp"
        with folders(self.root) as dirs:
            fd = open_file(dirs, (pending,), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            assert fd is not None  # O_CREAT
            with os.fdopen(fd, "wb") as handle:
                handle.write(f"{STORE_FORMAT}\n".encode("ascii"))
                handle.flush()
                os.fsync(handle.fileno())
            root_fd = dirs.fd(())
            os.replace(pending, FORMAT_FILE, src_dir_fd=root_fd, dst_dir_fd=root_fd)
            remove(dirs, (_OLD_MARKER,))

    def _strays(self, *, legacy: bool = True) -> list[Path]:
        """Staged files no committed journal names: what a write that never committed left.
        ``legacy``: also the temporary files store format 1 staged beside the partitions."""
        pending = {journal.stem for journal in self._pending_journals()}
        staging = self.root / _STAGING_DIR
        found: list[Path] = []
        if lstat_in(self.root, (_STAGING_DIR,), "folder") is not None:
            found += [p for p in staging.iterdir() if p.name not in pending]
        if legacy:
            for name in tables():
                for folder in self._partition_folders(name):  # a linked one is refused
                    found += self.table_dir(name).glob(f"{folder}/.{DATA_FILE}.*.tmp")
        if lstat_in(self.root, (_TXN_DIR,), "folder") is not None:
            found += self.root.glob(f"{_TXN_DIR}/.*.json.tmp")  # a journal never committed
        return sorted(found)

    def _remove_stray_staging(self, *, always_legacy: bool = False) -> int:
        """Remove the strays (the caller holds the lock); the format-1 ones only while the
        store is of format 1, unless ``always_legacy``; then mark the store as STORE_FORMAT."""
        old = self.format() < STORE_FORMAT
        strays = self._strays(legacy=always_legacy or old)
        with folders(self.root) as dirs:
            for stray in strays:
                remove(dirs, relative_parts(self.root, stray))  # a link: itself, not its target
        if old:
            self._write_format()
        return len(strays)

    # -- checking and repairing -------------------------------------------------------------
    def problems(self) -> list[Problem]:
        """What `store check` reports; reads only."""
        found: list[Problem] = []
        links: list[StoreLinkError] = []
        for parts, kind in _INTERNAL:
            try:
                lstat_in(self.root, parts, kind)
            except StoreLinkError as exc:
                links.append(exc)
        journals = [] if links else self._pending_journals()
        for journal in journals:
            try:
                n = len(self._journal_ops(journal))
            except StoreError as exc:
                found.append(Problem(journal, str(exc).split(": ", 1)[1], repairable=False))
                continue
            found.append(
                Problem(
                    journal,
                    f"commit not finished: {n} partition file(s) still to be replaced; readers "
                    "outside explain-pipeline may see a mix of old and new partitions",
                    repairable=True,
                )
            )
        if not links:
            found += [
                Problem(p, "stray staging files of a write that never committed", repairable=True)
                for p in self._strays_or_links(links)
            ]
        for name in tables():
            readable = []
            for cid in self.campaign_ids(name, links):
                path = self.partition_file(name, cid)
                problem = self.file_problem(name, path)
                if problem is not None:
                    found.append(Problem(path, problem, repairable=False))
                else:
                    readable.append(path)
            found += [
                Problem(path, problem, repairable=False)
                for path, problem in self.value_problems(name, readable)
            ]
        found += [Problem(link.path, link.reason, repairable=False) for link in links]
        return sorted(found, key=lambda problem: str(problem.path))

    def _strays_or_links(self, links: list[StoreLinkError]) -> list[Path]:
        """The strays; none when a link is in the way (appended to ``links``)."""
        try:
            return self._strays()
        except StoreLinkError as exc:
            links.append(exc)
            return []

    @contextlib.contextmanager
    def shared_lock(self) -> Iterator[None]:
        """Wait for a running write to finish and keep writers out, without creating a file:
        `query`, `report` and `store check` read under it. Never take a write's lock (a
        transaction) inside it: the two are separate open files, so that would wait forever."""
        with folders(self.root) as dirs:
            fd = open_file(dirs, (_LOCK_FILE,), os.O_RDONLY)
        if fd is None:
            yield
            return
        with _flocked(fd, "rb", fcntl.LOCK_SH):
            yield

    def repair(self) -> Repaired:
        """Finish every interrupted commit and remove stray staging files (takes the lock)."""
        with self._locked():
            finished = len(self._pending_journals())
            self._recover()
            return Repaired(finished, self._remove_stray_staging(always_legacy=True))


def known_campaigns(store: Store, wanted: Sequence[str] | None = None) -> list[str]:
    """The store's campaigns (``wanted`` None), else ``wanted`` once each in the order given; an
    id the store does not have is a usage error naming the campaigns it has."""
    if wanted is None:
        return store.campaign_ids("campaigns")
    # only the wanted partitions are looked at: one campaign of a large store stays fast
    unknown = [c for c in wanted if not store.has_partition("campaigns", c)]
    if unknown:
        known = store.campaign_ids("campaigns")
        have = ", ".join(known[:10]) + (" …" if len(known) > 10 else "")
        hint = f"the store {store.root} " + (f"has: {have}" if known else "is empty")
        raise UsageError(f"unknown campaign {unknown[0]!r} ({hint})")
    return list(dict.fromkeys(wanted))
