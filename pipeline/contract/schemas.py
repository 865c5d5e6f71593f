"""The data contracts: JSON Schemas of the input documents and column types of every table.

Polars and PyArrow are imported when a schema is first built, not with this module: the command
line reads the contracts' constants for its --help, which must start fast."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import polars as pl

PARTITION = "campaign_id"
OUTPUT_TABLES = ("assessments", "comparisons", "outcomes", "benchmarks")
"""The tables `assess` writes (the others are written by ingest). `benchmarks` has a partition
only for campaigns that decide regions (contract §15)."""
BOOKKEEPING_COLUMNS = ("inputs_sha256", "campaign_sha256", "boundary_recipe")
"""Columns of `assessments` that record what an attempt was assessed from (to find stale rows);
left out of what people read unless asked for."""

ColumnType = Literal["string", "int64", "float64", "bool", "timestamp"]


@cache
def _polars_types() -> dict[str, pl.DataType]:
    import polars as pl

    return {
        "string": pl.String(),
        "int64": pl.Int64(),
        "float64": pl.Float64(),
        "bool": pl.Boolean(),
        "timestamp": pl.Datetime("us", "UTC"),
    }


def contracts_dir(kind: Literal["schemas", "queries"]) -> Path:
    """The schemas or queries folder: the packaged copy in a wheel, else the checkout's."""
    package = Path(__file__).resolve().parent.parent  # pipeline/
    packaged = package / "_contracts" / kind
    if packaged.is_dir():
        return packaged
    return package.parent / kind


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool
    description: str = ""
    required_when: tuple[tuple[str, str], ...] = ()  # (column, value): not null on such rows


@dataclass(frozen=True)
class Table:
    name: str
    kind: Literal["input", "output"]
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    in_every_file: frozenset[str] = frozenset()  # nullable columns no file may lack

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def file_columns(self) -> list[str]:
        """Columns stored inside the Parquet files (the partition column lives in the path)."""
        return [c.name for c in self.columns if c.name != PARTITION]

    def polars_schema(self, *, with_partition: bool = True) -> pl.Schema:
        import polars as pl

        types = _polars_types()
        return pl.Schema(
            {c.name: types[c.type] for c in self.columns if with_partition or c.name != PARTITION}
        )

    def conform(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        """Select exactly this table's columns, in order, cast to their declared types. A
        nullable column the frame lacks (one added to the table later) becomes nulls."""
        missing = frozenset(c.name for c in self.columns) - set(frame.collect_schema().names())
        return frame.select(_casts(self, missing))

    def file_problems(self, found: Mapping[str, str]) -> list[str]:
        """What is wrong with a file of this table whose columns have the types ``found``
        (column -> type name): a column every file needs that is missing, or a column of another
        type. A missing nullable column added after the first store format is not a problem."""
        problems = []
        for c in self.columns:
            if c.name == PARTITION:
                continue
            if c.name not in found:
                if not c.nullable or c.name in self.in_every_file:
                    problems.append(f'column "{c.name}" is missing')
            elif found[c.name] != c.type:
                problems.append(f'column "{c.name}" is {found[c.name]}, not {c.type}')
        return problems

    def value_rules(self) -> list[tuple[str, pl.Expr]]:
        """The required values of a file of this table, each as (what is wrong, an expression
        true on a row that breaks it): no null in a non-nullable column, and none in a nullable
        one on the rows its ``required_when`` names (``samples.metric`` of an ok run)."""
        import polars as pl

        rules = []
        for c in self.columns:
            if c.name == PARTITION or (c.nullable and not c.required_when):
                continue
            where = pl.lit(True)
            for other, value in c.required_when:
                where = where & (pl.col(other) == value)
            text = " and ".join(f"{other} is {value}" for other, value in c.required_when)
            rules.append(
                (
                    f'column "{c.name}" is null' + (f" where {text}" if text else ""),
                    pl.col(c.name).is_null() & where,
                )
            )
        return rules

    def empty(self) -> pl.DataFrame:
        import polars as pl

        return pl.DataFrame(schema=self.polars_schema())


@cache
def _casts(spec: Table, missing: frozenset[str]) -> list[pl.Expr]:
    """The column expressions of `Table.conform`, built once per table and set of missing
    columns (building a few dozen expressions costs more than running them on a small
    partition). A missing nullable column is nulls; a missing required one fails when run."""
    import polars as pl

    types = _polars_types()
    return [
        (pl.lit(None) if c.name in missing and c.nullable else pl.col(c.name))
        .cast(types[c.type], strict=True)
        .alias(c.name)
        for c in spec.columns
    ]


@cache
def tables() -> dict[str, Table]:
    raw = json.loads((contracts_dir("schemas") / "tables.json").read_text(encoding="utf-8"))
    return {
        name: Table(
            name=name,
            kind=spec["kind"],
            key=tuple(spec["key"]),
            columns=tuple(
                Column(
                    c["name"],
                    c["type"],
                    c["nullable"],
                    c.get("description", ""),
                    tuple(c.get("required_when", {}).items()),
                )
                for c in spec["columns"]
            ),
            in_every_file=frozenset(raw.get("in_every_file", {}).get(name, ())),
        )
        for name, spec in raw["tables"].items()
    }


def table(name: str) -> Table:
    return tables()[name]


@cache
def document_schema(kind: Literal["campaign", "attempt", "mechanism", "measurement"]) -> Any:
    path = contracts_dir("schemas") / f"{kind}.schema.json"
    return json.loads(path.read_text(encoding="utf-8"))
