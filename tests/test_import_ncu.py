"""ncu importer: details page (base and scaled units, rule columns, older Kernel Time column),
raw page with its units row, exact conversions, refusals."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.importers.common import BYTE_UNITS, TIME_UNITS, ImportFormatError
from pipeline.importers.lines import build_line
from pipeline.importers.ncu import read
from pipeline.importers.reader import ImportOptions, InputFile

FIXTURES = Path(__file__).parent / "fixtures" / "import" / "ncu"


def _counters(*names: str) -> dict:
    imported = read([InputFile(FIXTURES / n) for n in names], ImportOptions())
    return build_line(imported, side="candidate", repetition=1, metric=0.5)["counters"]


def test_details_page_in_base_units_summed_over_kernels() -> None:
    assert _counters("details_base_units.csv") == {
        "kernels": 2,
        "dram_bytes_read": 1_048_576 + 2_000,
        "dram_bytes_write": 524_288 + 1_000,
        "dram_bytes": 1_048_576 + 2_000 + 524_288 + 1_000,  # read + write, by definition
        "l2_bytes": 4_194_304 + 8_000,
        "kernel_seconds": float(Decimal("0.000013")),  # 12,345 ns + 655 ns
    }


def test_scaled_units_are_decimal_multiples_converted_exactly() -> None:
    assert _counters("details_scaled_rules.csv") == {
        "kernels": 2,
        "dram_bytes": 1_250_000 + 1_000_000_001,  # 1.25 Mbyte + 1.000000001 Gbyte
        "dram_bytes_read": 750_500 + 600_000,  # 750.5 Kbyte + 0.6 Mbyte
        "kernel_seconds": float(Decimal("0.00150342")),  # 3.42 usecond + 1.5 msecond
    }


def test_the_time_units_current_ncu_writes_and_the_docs_list(tmp_path: Path) -> None:
    """Current ncu writes `ns`, `us`, `ms` (older versions `nsecond`, ...): the same page in
    those units gives the same counters, and docs/import.md lists them (it listed only the old
    spellings before the fix)."""
    old = (FIXTURES / "details_scaled_rules.csv").read_text()
    current = old.replace('"usecond"', '"us"').replace('"msecond"', '"ms"')
    assert current != old
    (tmp_path / "current.csv").write_text(current)
    imported = read([InputFile(tmp_path / "current.csv")], ImportOptions())
    line = build_line(imported, side="candidate", repetition=1, metric=0.5)
    assert line["counters"] == _counters("details_scaled_rules.csv")
    docs = (Path(__file__).parent.parent / "docs" / "import.md").read_text()
    section = docs.split("## ncu")[1].split("\n## ")[0]
    units = section.split("- Units:")[1].split("\n- ")[0]
    listed = set(re.findall(r"`([a-z]+)`", units))
    assert {"ns", "us", "ms", "s"} <= listed
    assert all(unit in TIME_UNITS or unit in BYTE_UNITS for unit in listed), listed


def test_older_details_page_and_a_metric_repeated_in_two_sections() -> None:
    assert _counters("details_old_kernel_time.csv") == {
        "kernels": 1,
        "dram_bytes_read": 1_500,  # 1.5 Kbyte
        "dram_bytes_write": 500,  # shown in two sections, counted once
        "dram_bytes": 2_000,
    }


def test_raw_page_with_units_row() -> None:
    assert _counters("raw_page.csv") == {
        "kernels": 3,
        "dram_bytes_read": 9_000,
        "dram_bytes_write": 12_000,
        "dram_bytes": 21_000,
        "l2_bytes": 60_000,
        "kernel_seconds": float(Decimal("0.0000075")),
    }


def test_several_files_of_one_run_are_added() -> None:
    both = _counters("details_base_units.csv", "raw_page.csv")
    assert both["kernels"] == 5
    assert both["l2_bytes"] == 4_202_304 + 60_000


def test_unknown_unit_is_refused() -> None:
    with pytest.raises(
        ImportFormatError,
        match=r'bad_unit\.csv:2: metric "dram__bytes_read\.sum" unit: expected a byte unit .*'
        r'got "furlong"',
    ):
        _counters("bad_unit.csv")


def test_two_different_values_for_one_kernel_are_refused() -> None:
    with pytest.raises(ImportFormatError, match=r"conflicting\.csv:3: expected one value of"):
        _counters("conflicting.csv")


def test_a_file_without_an_ncu_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    path.write_text("==PROF== Connected to process 1\nhello, world, from the app\n")
    with pytest.raises(ImportFormatError, match=r"out\.csv:1: expected a header row of ncu"):
        read([InputFile(path)], ImportOptions())


def test_a_failed_profile_is_reported_as_such_not_as_an_empty_file() -> None:
    """ncu's output when it may not read the GPU counters (the common ERR_NVGPUCTRPERM, as ncu
    prints it): tool messages only, no table. Before the fix: "got an empty file"."""
    path = FIXTURES / "failed_profile.csv"
    with pytest.raises(ImportFormatError) as raised:
        read([InputFile(path)], ImportOptions())
    assert str(raised.value) == (
        f"{path}:2: expected a header row of ncu --csv output (details page with Metric "
        "Name/Metric Unit/Metric Value, or --page raw), got a failed profile: the tool reported "
        '"==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA…"'
    )


def test_a_needed_value_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    text = (FIXTURES / "details_base_units.csv").read_text().replace('"12,345"', '"n/a"')
    path.write_text(text)
    with pytest.raises(ImportFormatError, match=r'd\.csv:9: metric "gpu__time_duration\.sum": exp'):
        read([InputFile(path)], ImportOptions())
