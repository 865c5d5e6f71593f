"""msprof / torch_npu importer: op_summary, op_statistic, step_trace, kernel_details and
step_trace_time in their documented variants; exact µs conversion; refusals."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.errors import UsageError
from pipeline.importers.common import ImportFormatError
from pipeline.importers.lines import build_line
from pipeline.importers.msprof import read
from pipeline.importers.reader import ImportOptions, InputFile

FIXTURES = Path(__file__).parent / "fixtures" / "import" / "msprof"


def _line(*names: str, metric: float | None = None) -> dict:
    imported = read([InputFile(FIXTURES / n) for n in names], ImportOptions())
    return build_line(imported, side="baseline", repetition=3, metric=metric)


def us(text: str) -> float:
    """The float nearest to an exact number of microseconds, in seconds."""
    return float(Decimal(text) / Decimal(10**6))


def test_step_trace_gives_steps_regions_and_the_metric() -> None:
    line = _line("step_trace_0_1.csv")
    assert line["metric"] == us("2050")  # 1000 + "1,050" µs
    assert line["breakdown"] == {
        # Data Aug Bound is N/A in the first iteration: absent, not zero.
        "step-1": {
            "fp_bp": us("800.5"),
            "iteration_refresh": us("199.5"),
            "reduce": us("150.375"),
        },  # two Reduce Duration columns: 100.25 + 50.125
        "step-2": {
            "fp_bp": us("800"),
            "iteration_refresh": us("150"),
            "data_aug_bound": us("100"),
            "reduce": us("130"),
        },
    }


def test_op_summary_counts_per_op_type_old_and_new_columns() -> None:
    line = _line("op_summary_0_1.csv", "step_trace_0_1.csv")
    assert line["counters"] == {"kernels": 3, "op:Conv2D": 2, "op:Relu": 1}
    newest = _line("op_summary_newest.csv", metric=1.0)
    assert newest["counters"] == {"kernels": 2, "op:MatMulV2": 1, "op:Add": 1}


def test_op_statistic_counts_with_device_or_model_column() -> None:
    assert _line("op_statistic_0_1.csv", metric=1.0)["counters"] == {
        "kernels": 1512,
        "op:MatMulV2": 1212,  # "1,200" on AI_CORE + 12 on MIX_AIC
        "op:Add": 300,
    }
    assert _line("op_statistic_old.csv", metric=1.0)["counters"] == {
        "kernels": 102,
        "op:Conv2D": 53,
        "op:Relu": 49,
    }


def test_op_statistic_is_ignored_beside_per_task_files() -> None:
    imported = read(
        [InputFile(FIXTURES / "op_summary_0_1.csv"), InputFile(FIXTURES / "op_statistic_old.csv")],
        ImportOptions(),
    )
    assert imported.counters["kernels"] == 3
    assert any("op_statistic ignored" in note for note in imported.notes)


def test_torch_npu_step_trace_time_and_kernel_details() -> None:
    line = _line("step_trace_time.csv", "kernel_details.csv", metric=0.04)
    step1 = line["breakdown"]["step-1"]
    assert step1["computing"] == us("15000.5")
    assert step1["communication_not_overlapped"] == us("2000.25")
    assert step1["communication_not_overlapped_and_exclude_receive"] == us("2000.25")
    assert step1["free"] == us("300")
    # Tasks [0.1, 10.1) and [5.1, 15.1) overlap on two streams, then [30.1, 32.6): 17.5 µs.
    assert step1["npu_busy"] == us("17.5")
    assert line["breakdown"]["step-2"]["npu_busy"] == us("4.25")
    assert "preparing" not in line["breakdown"]["step-2"]  # N/A
    assert line["counters"] == {"kernels": 4, "op:MatMul": 2, "op:Add": 1, "op:Cast": 1}


def test_torch_npu_files_have_no_run_time() -> None:
    imported = read([InputFile(FIXTURES / "step_trace_time.csv")], ImportOptions())
    with pytest.raises(UsageError, match="msprof input has no end-to-end time"):
        build_line(imported, side="baseline", repetition=0)


def test_unknown_unit_is_refused() -> None:
    with pytest.raises(
        ImportFormatError,
        match=r'bad_unit_step_trace\.csv:1: column "Iteration Time\(fs\)": expected a time unit',
    ):
        _line("bad_unit_step_trace.csv")


def test_unknown_header_is_refused() -> None:
    with pytest.raises(ImportFormatError, match=r"unknown_task_time\.csv:1: expected a header row"):
        _line("unknown_task_time.csv", metric=1.0)


def test_two_devices_in_one_file_are_refused() -> None:
    with pytest.raises(ImportFormatError, match=r"expected one device per run, got devices 0, 1"):
        _line("two_devices_step_trace_time.csv", metric=1.0)


def test_a_step_given_twice_is_refused() -> None:
    with pytest.raises(ImportFormatError, match=r'expected each step once, got "step-1" again'):
        _line("step_trace_0_1.csv", "step_trace_0_1.csv")


def test_step_trace_time_without_a_schedule_is_one_step_all(tmp_path: Path) -> None:
    path = tmp_path / "step_trace_time.csv"
    path.write_text(
        "Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,"
        "Communication,Free\n0,,1000.5,20,5,25,3\n"
    )
    imported = read([InputFile(path)], ImportOptions())
    assert imported.breakdown == {
        "all": {
            "computing": Decimal("0.0010005"),
            "communication_not_overlapped": Decimal("2E-5"),
            "overlapped": Decimal("5E-6"),
            "communication": Decimal("2.5E-5"),
            "free": Decimal("3E-6"),
        }
    }
