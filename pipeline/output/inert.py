"""A result as the terminal, CSV and JUnit show it: a copy in which every free text (names,
labels, reasons, messages, paths) follows pipeline.contract.inert's rule, made once by the sink
before any renderer reads it, so no renderer has to remember which of its cells came from a
file. New result types and fields are covered without registering anything: frozen
dataclasses, frames, mappings, sequences and paths are walked."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pipeline.contract.inert import NEEDS_ESCAPE, inert

T = TypeVar("T")


def inert_frame(frame: Any) -> Any:
    """A frame's text columns inert: one vectorized test per column, Python only on the
    columns that hold a value to escape (a hostile file's, rarely more)."""
    import polars as pl

    text = [name for name, kind in frame.schema.items() if kind == pl.String]
    if not text or frame.is_empty():
        return frame
    found = frame.select(pl.col(text).str.contains(NEEDS_ESCAPE).any()).row(0, named=True)
    dirty = [name for name in text if found[name]]
    return frame.with_columns(
        pl.Series(name, [None if v is None else inert(v) for v in frame[name]], pl.String)
        for name in dirty
    )


def shown(value: T) -> T:
    """``value`` with every string in it inert (see the module docstring)."""
    shown_value: T = _shown(value)
    return shown_value


def _shown(value: Any) -> Any:
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, Path):
        return Path(inert(str(value)))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _shown(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    if isinstance(value, Mapping):
        return {_shown(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    if isinstance(value, tuple):
        items = (_shown(v) for v in value)
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    polars = sys.modules.get("polars")  # a frame exists only if polars was imported
    if polars is not None and isinstance(value, polars.DataFrame):
        return inert_frame(value)
    return value
