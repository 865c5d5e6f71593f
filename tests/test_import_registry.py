"""The importer registry: each format's facts (has a run time, has kernels, is a suite) hold for
what its reader does, and the command's choices, help texts and checks are derived from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.imports import import_command
from pipeline.cli.record import round_command
from pipeline.errors import UsageError
from pipeline.importers.lines import import_line
from pipeline.importers.reader import ImportOptions
from pipeline.importers.registry import FORMATS, IMPORTERS, importer, listed

FIXTURES = Path(__file__).parent / "fixtures"
IMPORT = FIXTURES / "import"


def _pytest_benchmark(folder: Path) -> Path:
    path = folder / "pytest-benchmark.json"
    bench = {"fullname": "bench/test_x.py::test_sum", "stats": {"median": 0.002}}
    path.write_text(json.dumps({"benchmarks": [bench]}))
    return path


def _pyperf(folder: Path) -> Path:
    path = folder / "pyperf.json"
    bench = {"metadata": {"name": "sum"}, "runs": [{"values": [0.002, 0.0021, 0.0019]}]}
    path.write_text(json.dumps({"version": "1.0", "benchmarks": [bench]}))
    return path


def one_run(fmt: str, folder: Path) -> list[str]:
    """The files of one run of each format (a new format needs its entry here)."""
    files = {
        "kineto": [IMPORT / "kineto" / "cpu_steps.json"],
        "nsys": [IMPORT / "nsys" / "report_cuda_gpu_kern_sum.csv"],
        "ncu": [IMPORT / "ncu" / "details_base_units.csv"],
        "msprof": [
            IMPORT / "msprof" / "step_trace_0_1.csv",
            IMPORT / "msprof" / "kernel_details.csv",
        ],
        "pytest-benchmark": [_pytest_benchmark(folder)],
        "gbench": [FIXTURES / "suites" / "gbench-repetitions.json"],
        "pyperf": [_pyperf(folder)],
    }[fmt]
    return [str(f) for f in files]


@pytest.mark.parametrize("fmt", FORMATS)
def test_has_a_run_time_is_what_the_reader_gives(fmt: str, tmp_path: Path) -> None:
    files = one_run(fmt, tmp_path)
    if IMPORTERS[fmt].run_time:
        line, _ = import_line(fmt, files, side="baseline", repetition=0)
        assert line["metric"] > 0
    else:
        with pytest.raises(UsageError, match=r"has no end-to-end time for the run: give --metric"):
            import_line(fmt, files, side="baseline", repetition=0)
    line, _ = import_line(fmt, files, side="baseline", repetition=0, metric=2.5)
    assert line["metric"] == 2.5


@pytest.mark.parametrize("fmt", FORMATS)
def test_has_kernels_is_what_the_reader_accepts(fmt: str, tmp_path: Path) -> None:
    files = one_run(fmt, tmp_path)
    options = ImportOptions.parse(kernel_regions=("*",))
    if IMPORTERS[fmt].kernels:
        line, _ = import_line(
            fmt, files, side="baseline", repetition=0, metric=1.0, options=options
        )
        assert line["breakdown"]
    else:
        with pytest.raises(UsageError, match=rf"have kernels; {fmt} has none"):
            import_line(fmt, files, side="baseline", repetition=0, metric=1.0, options=options)


@pytest.mark.parametrize("fmt", [n for n, i in IMPORTERS.items() if i.suite])
def test_a_suite_is_a_whole_run_one_region_per_benchmark(fmt: str, tmp_path: Path) -> None:
    line, _ = import_line(fmt, one_run(fmt, tmp_path), side="baseline", repetition=0)
    assert list(line["breakdown"]) == ["all"] and line["breakdown"]["all"]


def test_an_unknown_format_fails_loudly() -> None:
    with pytest.raises(UsageError, match=r'unknown format "vtune": expected one of kineto, nsys'):
        importer("vtune")
    with pytest.raises(UsageError, match=r'unknown format "vtune"'):
        import_line("vtune", ["x.json"], side="baseline", repetition=0)


def test_the_command_line_is_derived_from_the_registry() -> None:
    params = {p.name: p for p in import_command.params}
    assert tuple(params["fmt"].type.choices) == tuple(IMPORTERS)  # type: ignore[attr-defined]
    suites = [n for n, i in IMPORTERS.items() if i.suite]
    measure = {p.name: p for p in round_command.params}["suite"]
    assert list(measure.type.choices) == suites  # type: ignore[attr-defined]
    helps = {name: " ".join((p.help or "").split()) for name, p in params.items()}
    no_time = [n for n, i in IMPORTERS.items() if not i.run_time]
    assert f"required for {listed(no_time)}, which have no run time" in helps["metric"]
    kernels = [n for n, i in IMPORTERS.items() if i.kernels]
    assert helps["kernel_regions"].startswith(f"{listed(kernels)}: kernel GPU time")
    assert helps["suite_metric"].startswith(f"{listed(suites)}: the run's metric")
