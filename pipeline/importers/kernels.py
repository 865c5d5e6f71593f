"""Kernel time as regions (`import nsys|ncu|msprof --kernel-regions`): each kernel's GPU time, or
each named group's, becomes a region of the run's breakdown, so that a mechanism can name the
kernel a change targets even when the profile has no NVTX ranges.

A kernel name becomes a region name deterministically (docs/import.md, "Kernel time as
regions"): kept as written when it is short and printable, else shortened to a prefix and a
digest of the whole name, so that two kernels never share a region by accident.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from pipeline.errors import UsageError
from pipeline.importers.common import ImportFormatError, quoted

OTHER = "other"
"""With groups: the region of every kernel no group matches."""
REGION_NAME_MAX = 120
"""Longest region name made from a kernel name (characters); a longer name is shortened. A
choice for names people type in a mechanism and read in a table, far below the bound every
name must keep (pipeline.contract.declare.MAX_NAME_LENGTH; a test holds it below)."""
DIGEST_CHARS = 8
"""Hex digits of sha256(kernel name) that end a shortened name, after a `~`."""
EVERY_KERNEL = "*"
"""The value of a bare `--kernel-regions`: one region per kernel."""


@dataclass(frozen=True)
class KernelRegions:
    """How kernels become regions: one region per kernel (no groups), or named groups whose
    regular expression is searched in the kernel name, first match wins, the rest `other`."""

    groups: tuple[tuple[str, re.Pattern[str]], ...] = ()

    def region_of(self, kernel: str) -> str:
        for name, pattern in self.groups:
            if pattern.search(kernel):
                return name
        return OTHER if self.groups else region_name(kernel)


def region_name(kernel: str) -> str:
    """The region of one kernel: its name without surrounding blanks when that has at most
    REGION_NAME_MAX printable characters; otherwise its first characters (unprintable ones
    written `?`), `~` and the first DIGEST_CHARS hex digits of sha256 of the whole name."""
    name = kernel.strip()
    if len(name) <= REGION_NAME_MAX and name.isprintable():
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:DIGEST_CHARS]
    kept = name[: REGION_NAME_MAX - DIGEST_CHARS - 1]
    prefix = "".join(c if c.isprintable() else "?" for c in kept)
    return f"{prefix}~{digest}"


def gather_kernel_regions(
    files: Sequence[str], regions: KernelRegions | None
) -> tuple[tuple[str, ...], KernelRegions | None]:
    """``--kernel-regions gemm=gemm attn=flash FILE``: an option takes one value, so a second
    NAME=REGEX lands among the files (and was read as STEP=PATH). Such an argument, naming no
    existing file either whole or after its ``=`` (a STEP=PATH names its file), goes back to the
    groups, after the option's. With several --kernel-regions options the order the groups were
    written in (first match wins) is lost, so that mix is refused. Returns the files and the
    groups."""
    if regions is None or not regions.groups:
        return tuple(files), regions
    stray = [f for f in files if _looks_like_group(f)]
    if not stray:
        return tuple(files), regions
    if len(regions.groups) > 1:
        raise UsageError(
            f"--kernel-regions: {quoted(stray[0])} follows the value of one of several "
            "--kernel-regions options: write each group as --kernel-regions NAME=REGEX (their "
            "order decides which group a kernel falls in)"
        )
    given = [f"{name}={pattern.pattern}" for name, pattern in regions.groups]
    return tuple(f for f in files if f not in stray), parse_kernel_regions([*given, *stray])


def _looks_like_group(argument: str) -> bool:
    name, sep, rest = argument.partition("=")
    if not (sep and name and rest) or argument.startswith("-"):
        return False
    return not (Path(argument).exists() or Path(rest).exists())


def parse_kernel_regions(values: Sequence[str]) -> KernelRegions | None:
    """``--kernel-regions`` values: none given -> None (off); the bare option -> one region per
    kernel; ``NAME=REGEX`` (repeatable) -> named groups in the order given."""
    if not values:
        return None
    specs = [v for v in values if v != EVERY_KERNEL]
    groups: list[tuple[str, re.Pattern[str]]] = []
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        name = name.strip()
        if not sep or not name or not pattern:
            raise UsageError(
                f"--kernel-regions {quoted(spec)}: expected NAME=REGEX (a bare --kernel-regions, "
                "one region per kernel, goes after the files or before another option)"
            )
        _check_group_name(name, [g for g, _ in groups])
        try:
            groups.append((name, re.compile(pattern)))
        except re.error as exc:
            raise UsageError(
                f"--kernel-regions {quoted(spec)}: not a regular expression ({exc})"
            ) from None
    return KernelRegions(tuple(groups))


def _check_group_name(name: str, taken: list[str]) -> None:
    if name == OTHER:
        raise UsageError(
            f"--kernel-regions: {OTHER!r} is the region of the kernels no group "
            "matches; give the group another name"
        )
    if name in taken:
        raise UsageError(f"--kernel-regions: group {quoted(name)} is given twice")
    if len(name) > REGION_NAME_MAX or not name.isprintable():
        raise UsageError(
            f"--kernel-regions: group name {quoted(name)}: expected at most "
            f"{REGION_NAME_MAX} printable characters"
        )


def regions_by_step(
    rows: Iterable[tuple[str, str, Decimal]], rule: KernelRegions, source: str
) -> dict[str, dict[str, Decimal]]:
    """(step, kernel, seconds) rows -> step -> region -> seconds: each kernel's time summed
    into its region. Two different kernels that would share a region by their names alone are
    refused (only groups merge kernels)."""
    import polars as pl

    schema: dict[str, pl.DataType] = {
        "step": pl.String(),
        "kernel": pl.String(),
        "seconds": pl.Decimal(38, 15),
    }
    frame = pl.DataFrame(list(rows), schema=schema, orient="row")
    kernels = frame["kernel"].unique(maintain_order=True).to_list()
    regions = {kernel: rule.region_of(kernel) for kernel in kernels}
    if not rule.groups:
        _refuse_collisions(regions, source)
    summed = (
        frame.with_columns(pl.col("kernel").replace_strict(regions).alias("region"))
        .group_by("step", "region", maintain_order=True)
        .agg(pl.col("seconds").sum())
    )
    out: dict[str, dict[str, Decimal]] = {}
    for step, region, seconds in summed.iter_rows():
        out.setdefault(step, {})[region] = seconds
    return out


def _refuse_collisions(regions: dict[str, str], source: str) -> None:
    seen: dict[str, str] = {}
    for kernel, region in regions.items():
        if region in seen and seen[region] != kernel.strip():
            raise ImportFormatError(
                f"{source}: kernels {quoted(seen[region])} and {quoted(kernel)} would both be "
                f"region {quoted(region)}: name groups with --kernel-regions NAME=REGEX"
            )
        seen[region] = kernel.strip()
