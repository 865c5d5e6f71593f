"""Timestamps: RFC 3339 with a time zone, stored as UTC microseconds (``bad_timestamp``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pipeline.ingestion.jsontext import describe


def _local_timestamp(text: str) -> datetime | None:
    """RFC 3339 with a time zone -> aware datetime in its own zone; None when not that."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    date, time, fraction, zone = match.groups()
    fraction = (fraction or "")[:7].ljust(7, "0") if fraction else ""
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        return datetime.fromisoformat(f"{date}T{time}{fraction}{zone}")
    except ValueError:
        return None


def parse_timestamp(text: str) -> datetime | None:
    """RFC 3339 with a time zone -> aware UTC datetime (microseconds); None when not that, or
    when its offset moves it before year 1 or after year 9999 in UTC."""
    local = _local_timestamp(text)
    try:
        return None if local is None else local.astimezone(UTC)
    except OverflowError:
        return None


def timestamp_problem(value: str) -> str | None:
    """Why ``value`` is not a timestamp ingest can store (None when it is one)."""
    if parse_timestamp(value) is not None:
        return None
    if _local_timestamp(value) is not None:
        return (
            "must be an RFC 3339 timestamp with a time zone between years 1 and 9999 in UTC, "
            f"got {describe(value)}"
        )
    return f"must be an RFC 3339 timestamp with a time zone, got {describe(value)}"


_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
