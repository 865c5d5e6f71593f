"""The studies' three outputs, alike for every study: csv of its rows, a JSON document of its
parameters and rows, or its own table; fixed digits, nothing that varies between runs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import polars as pl


def render_study(
    rows: pl.DataFrame, fmt: str, parameters: Mapping[str, Any], table: Callable[[], str]
) -> str:
    """``rows`` (rounded already) as csv; as JSON, ``parameters`` and then the rows; else the
    study's ``table()``."""
    if fmt == "csv":
        return rows.write_csv()
    if fmt == "json":
        return json.dumps({**parameters, "rows": rows.to_dicts()}, indent=2) + "\n"
    return table()


def pct(rate: float) -> str:
    """A rate as the tables print it."""
    return f"{100 * rate:.1f}%"


def noise_sections(
    rows: pl.DataFrame, noises: Iterable[str], head: str, line: Callable[[dict[str, Any]], str]
) -> list[str]:
    """The table's body: per noise a blank line, its name, the column heads and one ``line``
    per row of that noise."""
    lines: list[str] = []
    for noise in noises:
        lines += ["", f"noise {noise}", head]
        lines += [line(row) for row in rows.filter(pl.col("noise") == noise).iter_rows(named=True)]
    return lines
