"""Ad-hoc and named SQL over every table of the store (Polars SQL on lazy scans).

Named queries live in ``queries/*.sql``, each introduced by ``-- name:`` and ``-- description:``
comment lines; the loader rejects a malformed or duplicate one naming ``file:line``
(docs/ingest.md, "Named queries").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pipeline.contract.schemas import contracts_dir, tables
from pipeline.errors import StoreError, UsageError

if TYPE_CHECKING:  # imported where used: the command line reads FORMATS for its --help
    import polars as pl

    from pipeline.store.tables import Store

OutputFormat = Literal["table", "csv", "json", "parquet"]
FORMATS: tuple[OutputFormat, ...] = ("table", "csv", "json", "parquet")
_NAME = re.compile(r"--\s*name:(.*)")
_DESCRIPTION = re.compile(r"--\s*description:(.*)")
_VALID_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    sql: str
    path: Path
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


# -- named queries --------------------------------------------------------------------------
def load_named_queries(folder: Path | None = None) -> dict[str, NamedQuery]:
    """Every query of every ``*.sql`` file in ``folder`` (default: the project's queries/)."""
    folder = contracts_dir("queries") if folder is None else folder
    found: dict[str, NamedQuery] = {}
    errors: list[str] = []
    for path in sorted(folder.glob("*.sql")):
        for query, error in _parse_file(path):
            if error:
                errors.append(error)
            elif query.name in found:
                first = found[query.name].where
                errors.append(f'{query.where}: query name "{query.name}" already used at {first}')
            else:
                found[query.name] = query
    if errors:
        raise UsageError("bad named query file:\n" + "\n".join(errors))
    return found


def _parse_file(path: Path) -> Iterator[tuple[NamedQuery, str]]:
    """(query, "") for each well-formed query, (dummy, error text) for each broken one."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, text in enumerate(lines) if _NAME.fullmatch(text.strip())]
    stray = next(
        (
            i
            for i in range(starts[0] if starts else len(lines))
            if lines[i].strip() and not lines[i].strip().startswith("--")
        ),
        None,
    )
    if stray is not None:
        yield _broken(path, stray), f"{path}:{stray + 1}: SQL before the first '-- name:' header"
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        yield _parse_block(path, start, lines[start:end])


def _broken(path: Path, index: int) -> NamedQuery:
    return NamedQuery("", "", "", path, index + 1)


def _parse_block(path: Path, start: int, block: list[str]) -> tuple[NamedQuery, str]:
    where = f"{path}:{start + 1}"
    name = _NAME.fullmatch(block[0].strip()).group(1).strip()  # type: ignore[union-attr]
    if not _VALID_NAME.fullmatch(name):
        return _broken(path, start), f"{where}: '-- name:' needs a name (letters, digits, _ . -)"
    body = 1
    description: list[str] = []
    while body < len(block) and block[body].strip().startswith("--"):
        text = block[body].strip()
        match = _DESCRIPTION.fullmatch(text)
        description.append(match.group(1).strip() if match else text[2:].strip())
        body += 1
    sql = "\n".join(block[body:]).strip().rstrip(";").strip()
    if not sql:
        return _broken(path, start), f'{where}: query "{name}" has no SQL'
    return NamedQuery(name, " ".join(d for d in description if d), sql, path, start + 1), ""


# -- running SQL ---------------------------------------------------------------------------
def open_store(path: Path) -> Store:
    from pipeline.store.tables import Store

    return Store.open_existing(path)


# Polars SQL reads files and URLs through table functions named like Polars' readers
# (read_csv, read_parquet, read_ipc, read_json, ...). A name of one anywhere in the text, in any
# case, quoted or not, even inside a string or a comment, refuses the query before Polars sees
# it: no lexing of ours to get wrong, and no file is opened and no URL fetched. The cost is a
# rare false refusal (a string literal that spells such a name), which --allow-files lifts.
@cache
def _file_functions() -> re.Pattern[str]:
    import polars as pl

    names = {n for n in dir(pl) if n.startswith(("read_", "scan_"))}
    names |= {"read_csv", "read_parquet", "read_ipc", "read_json", "read_ndjson"}
    return re.compile("|".join(sorted(names, key=len, reverse=True)), re.IGNORECASE)


def check_store_only(sql: str) -> None:
    """Refuse SQL that names a Polars table function (it could read any file or URL)."""
    found = _file_functions().search(sql)
    if found:
        raise UsageError(
            f'query reads only the store\'s tables: "{found.group(0)}" would read a file or URL '
            "(pass --allow-files to allow it)"
        )


def run_sql(store: Store, sql: str, *, allow_files: bool = False) -> pl.DataFrame:
    """The result of one SQL statement over every table of the store. Unless ``allow_files``,
    SQL that could read other files or URLs is refused (a usage error)."""
    if not allow_files:
        check_store_only(sql)
    import polars as pl

    try:
        with store.shared_lock():  # one committed state: a running write finishes first
            context = pl.SQLContext({name: store.scan(name) for name in tables()}, eager=False)
            return context.execute(sql.strip().rstrip(";")).collect()
    except pl.exceptions.ComputeError as exc:
        if str(exc).startswith("parquet"):
            raise StoreError(f"{store.root}: cannot read the store: {_first_line(exc)}") from exc
        raise UsageError(f"bad query: {_first_line(exc)}") from exc
    except pl.exceptions.PolarsError as exc:
        raise UsageError(f"bad query: {_first_line(exc)}") from exc
    except OSError as exc:
        raise StoreError(f"{store.root}: cannot read the store: {exc}") from exc


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# -- output --------------------------------------------------------------------------------
def render(frame: pl.DataFrame, fmt: OutputFormat) -> str:
    """The frame as text; ``table`` shows every row and column, strings in full."""
    if fmt == "csv":
        return frame.write_csv()
    if fmt == "json":
        return frame.write_json() + "\n"
    if fmt == "table":
        import polars as pl

        with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=10_000, tbl_width_chars=10_000):
            return f"{frame}\n"
    raise UsageError("--format parquet needs --output FILE (Parquet is binary)")
