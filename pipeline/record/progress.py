"""What a round says on stderr while it runs, terminal or not (a CI log has no progress bar).

- ``--until-decided``: one line per look: the pairs so far, the verdict or the members decided,
  and the stop rule's state (go on to the next look, or stop and why).
- A fixed round: a line every ``INTERVAL`` seconds (runs done, pairs so far, failed runs) and,
  when it printed one, one when its runs end; none on a terminal, where the progress bar says
  the same. The environment variable ``EXPLAIN_PROGRESS_INTERVAL`` (seconds) replaces the
  30 s: it is for tests, which then see the lines without waiting (docs/record.md).
- A suite round whose two sides measured different benchmarks: one line naming those on one
  side only (they pair with nothing), with the way out when the names differ only in their
  leading folders (pytest names a test by its path from its rootdir).

Every name is escaped (``inert``): a results file's text is data. The clock is injectable, so
the cadence is tested without waiting.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.contract.inert import inert
from pipeline.errors import UsageError

INTERVAL = 30.0
"""Seconds between the progress lines of a fixed round (docs/record.md)."""
INTERVAL_VARIABLE = "EXPLAIN_PROGRESS_INTERVAL"
"""The environment variable that replaces ``INTERVAL``, for tests (docs/record.md)."""
SHOWN_NAMES = 10
"""Names listed per side in the line of unmatched benchmarks; the rest are counted."""


@dataclass
class Ticker:
    """A fixed round's progress line, at most every ``interval`` seconds of ``clock``."""

    say: Callable[[str], None]
    label: str
    total: int
    interval: float = INTERVAL
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=0.0)
    last: float = field(default=0.0)
    runs: int = field(default=0)
    failed: int = field(default=0)
    lines: int = field(default=0)

    def __post_init__(self) -> None:
        self.started = self.last = self.clock()

    def tick(self, runs: int, pairs: Callable[[], int], failed: int) -> None:
        """After each run: a line when ``interval`` has passed since the last one (``pairs``
        counted then)."""
        self.runs, self.failed = runs, failed
        now = self.clock()
        if now - self.last < self.interval:
            return
        self.last = now
        self.lines += 1
        self.say(self._line(now, pairs()))

    def end(self, pairs: int) -> None:
        """When the runs end (all of them, or the round stopped): the last line, if the round
        printed one before. A round shorter than one interval stays silent: its end line would
        carry the seconds it took, the one thing in a round's output that varies with the
        machine's speed, and a short round is not what a CI log needs to be told about."""
        if self.lines:
            self.say(self._line(self.clock(), pairs) + "; done")

    def _line(self, now: float, pairs: int) -> str:
        return (
            f"round {inert(self.label)}: {self.runs} of {self.total} runs, {pairs} pairs, "
            f"{self.failed} failed ({now - self.started:.0f} s)"
        )


def interval() -> float:
    """Seconds between a fixed round's lines: ``INTERVAL``, or ``$EXPLAIN_PROGRESS_INTERVAL``
    (for tests) when it is set."""
    given = os.environ.get(INTERVAL_VARIABLE, "").strip()
    if not given:
        return INTERVAL
    try:
        seconds = float(given)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise UsageError(f"{INTERVAL_VARIABLE}={inert(given)}: must be a number of seconds >= 0")
    return seconds


def look_line(
    label: str,
    number: int,
    pairs: int,
    verdict: str,
    going: str,
    next_look: int | None,
    max_pairs: int,
) -> str:
    """One look of an --until-decided round, as stderr shows it."""
    after = "" if next_look is None else f", next look at {next_look} pairs"
    return (
        f"round {inert(label)}: look {number} at {pairs} pairs: {inert(verdict)}; "
        f"{inert(going)}{after} (at most {max_pairs})"
    )


def next_look(looks: Iterable[int], repetitions: int) -> int | None:
    """The planned look after ``repetitions`` (None: this was the last)."""
    return next((x for x in looks if x > repetitions), None)


def _sides(lines: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """The benchmarks (regions) each side's ok runs measured."""
    found: dict[str, set[str]] = {"baseline": set(), "candidate": set()}
    for line in lines:
        if line.get("status") != "ok":
            continue
        for regions in (line.get("breakdown") or {}).values():
            found[line["side"]].update(regions)
    return found


def _bare(name: str) -> str:
    """``old/tests/test_x.py::test_y`` -> ``test_x.py::test_y``."""
    where, sep, test = name.partition("::")
    return where.rsplit("/", 1)[-1] + sep + test


def _listed(names: set[str]) -> str:
    ordered = sorted(names)
    shown = ", ".join(inert(x) for x in ordered[:SHOWN_NAMES])
    more = len(ordered) - SHOWN_NAMES
    return shown + (f" and {more} more" if more > 0 else "")


def unmatched(lines: Iterable[Mapping[str, Any]]) -> str | None:
    """The line naming the benchmarks one side measured and the other did not (None: the two
    sides measured the same ones, or a side measured nothing)."""
    sides = _sides(lines)
    baseline, candidate = sides["baseline"], sides["candidate"]
    if not baseline or not candidate or baseline == candidate:
        return None
    only = {"baseline": baseline - candidate, "candidate": candidate - baseline}
    parts = [f"the {side}'s only: {_listed(names)}" for side, names in only.items() if names]
    text = "benchmarks on one side only (they pair with nothing): " + "; ".join(parts)
    bare = [{_bare(x) for x in names} for names in only.values()]
    if "::" in text and bare[0] & bare[1]:
        text += (
            " (they differ only in their leading folders: pytest names a test by its path "
            "from its rootdir; give each side's pytest its own --rootdir, docs/suites.md)"
        )
    return text
