"""nsys importer: every documented report and header variant, exact unit conversion, refusals."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.importers.common import ImportFormatError
from pipeline.importers.lines import build_line
from pipeline.importers.nsys import NO_RANGES, read
from pipeline.importers.reader import ImportOptions, InputFile, parse_inputs

FIXTURES = Path(__file__).parent / "fixtures" / "import" / "nsys"


def _line(*names: str, metric: float = 1.0) -> dict:
    inputs = parse_inputs([n if "=" in n else str(FIXTURES / n) for n in names])
    imported = read(inputs, ImportOptions())
    return build_line(imported, side="baseline", repetition=0, metric=metric)


def s(text: str) -> float:
    """The float nearest to an exact decimal number of seconds."""
    return float(Decimal(text))


def test_nvtx_ranges_become_regions_converted_exactly() -> None:
    line = _line("report_nvtx_sum.csv")
    # 21,000,500 ns; attention is PushPop 10,500,250 ns + StartEnd 3,500,000 ns; the empty
    # default domain prefix ":" is dropped, a named domain stays.
    assert line["breakdown"] == {
        "all": {
            "mlp": s("0.0210005"),
            "attention": s("0.01400025"),
            "sampler:sampling": s("0.001750001"),
        }
    }


def test_a_kernel_summary_alone_has_no_breakdown_and_says_so() -> None:
    """docs/import.md said "one step `all`" for every summary; a kernel summary without NVTX
    ranges gives counters only, and before the fix nothing said why the breakdown was empty."""
    imported = read([InputFile(FIXTURES / "report_cuda_gpu_kern_sum.csv")], ImportOptions())
    line = build_line(imported, side="baseline", repetition=0, metric=1.0)
    assert "breakdown" not in line and line["counters"] == {"kernels": 1800}
    assert imported.notes == [NO_RANGES]
    with_ranges = read(
        [InputFile(FIXTURES / n) for n in ("report_cuda_gpu_kern_sum.csv", "report_nvtx_sum.csv")],
        ImportOptions(),
    )
    assert set(with_ranges.breakdown) == {"all"} and with_ranges.notes == []


def test_older_nvtx_pushpop_sum_without_style() -> None:
    assert _line("old_nvtx_pushpop_sum.csv")["breakdown"] == {
        "all": {"attention": s("0.000002"), "mlp": s("0.000001")}
    }


def test_scaled_time_unit_microseconds_with_separators() -> None:
    assert _line("usec_nvtx_sum.csv")["breakdown"] == {"all": {"decode": s("0.001234567")}}


def test_counters_from_kernels_api_calls_and_memory_reports() -> None:
    line = _line(
        "report_cuda_gpu_kern_sum.csv",
        "report_cuda_api_sum.csv",
        "report_cuda_gpu_mem_time_sum.csv",
        "report_cuda_gpu_mem_size_sum.csv",
    )
    assert line["counters"] == {
        "kernels": 1800,  # "1,200" + 600 instances
        "kernel_launches": 1900,  # cudaLaunchKernel 1,500 + cuLaunchKernelEx 300 + _ptsz 100
        "syncs": 14,  # cudaStreamSynchronize_v3020 12 + cudaDeviceSynchronize 2
        "graph_launches": 5,
        "memcpy_count": 40,  # Host-to-Device 30 + Device-to-Host 10
        "memset_count": 8,
        "memcpy_bytes": 1_258_332_000,  # ("1,258.291" + 0.041) MB, MB = 10^6 bytes
        "memset_bytes": 8_389_000,
    }
    assert "breakdown" not in line


def test_grid_block_columns_and_old_operation_names() -> None:
    assert _line("report_cuda_gpu_kern_sum_grid.csv")["counters"] == {"kernels": 7}
    assert _line("old_cuda_gpu_mem_time_sum.csv")["counters"] == {
        "memcpy_count": 5,  # [CUDA memcpy HtoD] 4 + [CUDA memcpy DtoH] 1
        "memset_count": 0,
    }


def test_several_reports_in_one_stdout_capture() -> None:
    line = _line("stdout_all.txt")
    assert line["breakdown"] == {"all": {"attention": s("0.000005")}}
    assert line["counters"] == {"kernels": 9}


def test_per_step_files_are_named_step_equals_path() -> None:
    line = _line(
        f"decode-0={FIXTURES / 'report_nvtx_sum.csv'}",
        f"decode-1={FIXTURES / 'old_nvtx_pushpop_sum.csv'}",
    )
    assert line["breakdown"]["decode-0"]["mlp"] == s("0.0210005")
    assert line["breakdown"]["decode-1"] == {"attention": s("0.000002"), "mlp": s("0.000001")}


def test_mixing_named_and_unnamed_files_is_refused() -> None:
    with pytest.raises(ImportFormatError, match="every FILE as STEP=PATH or none"):
        _line(f"a={FIXTURES / 'report_nvtx_sum.csv'}", "old_nvtx_pushpop_sum.csv")


def test_the_same_report_twice_for_a_step_is_refused() -> None:
    with pytest.raises(ImportFormatError, match=r"expected one nvtx report per step"):
        _line("report_nvtx_sum.csv", "old_nvtx_pushpop_sum.csv")


def test_summaries_need_a_metric() -> None:
    imported = read(parse_inputs([str(FIXTURES / "report_nvtx_sum.csv")]), ImportOptions())
    from pipeline.errors import UsageError

    with pytest.raises(UsageError, match="nsys input has no end-to-end time.*--metric"):
        build_line(imported, side="baseline", repetition=0)


def test_unknown_unit_is_refused() -> None:
    with pytest.raises(
        ImportFormatError,
        match=r"bad_unit_nvtx_sum\.csv:1: column \"Total Time \(fortnights\)\": expected a time",
    ):
        _line("bad_unit_nvtx_sum.csv")


def test_unknown_header_is_refused() -> None:
    with pytest.raises(ImportFormatError, match=r"unknown_cuda_gpu_sum\.csv:1: expected a header"):
        _line("unknown_cuda_gpu_sum.csv")


def test_a_cell_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(
        ImportFormatError,
        match=r'bad_number_kern_sum\.csv:2: column "Instances": expected a number, got "many"',
    ):
        _line("bad_number_kern_sum.csv")


def test_a_row_with_missing_fields_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text(
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        "100.0,5000,5\n"
    )
    with pytest.raises(ImportFormatError, match=r"r\.csv:2: expected 9 fields as in the header"):
        read(parse_inputs([str(path)]), ImportOptions())


def test_a_negative_time_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    text = (FIXTURES / "old_nvtx_pushpop_sum.csv").read_text().replace(",2000,", ",-2000,")
    path.write_text(text)
    with pytest.raises(ImportFormatError, match=r'n\.csv:2: .*expected a number >= 0, got "-2000"'):
        read(parse_inputs([str(path)]), ImportOptions())
