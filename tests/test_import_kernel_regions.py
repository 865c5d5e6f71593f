"""`import nsys|ncu|msprof --kernel-regions`: kernel time as regions, on real `nsys stats` output
(tests/fixtures/import/nsys/SOURCES.md), checked against a plain reading of the files with the
csv module; the naming rule of long kernel names; groups; refusals; and end to end, a mechanism
that names a kernel group, through ingest and assess."""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import cli_result as cli

from pipeline.contract.declare import MAX_NAME_LENGTH, Side
from pipeline.importers.common import ImportFormatError
from pipeline.importers.kernels import DIGEST_CHARS, OTHER, REGION_NAME_MAX, region_name
from pipeline.importers.lines import import_line
from pipeline.importers.reader import ImportOptions

IMPORT = Path(__file__).parent / "fixtures" / "import"
REAL = IMPORT / "nsys" / "real_moe_cuda_gpu_kern_sum.csv"


def kernel_seconds(
    path: Path, name: str = "Name", time: str = "Total Time (ns)", scale: str = "1e-9"
) -> dict[str, Decimal]:
    """The reference: each kernel's total time in seconds, read with the csv module."""
    totals: dict[str, Decimal] = {}
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("==")]
    for row in csv.DictReader(lines):
        value = Decimal(row[time].replace(",", "")) * Decimal(scale)
        totals[row[name]] = totals.get(row[name], Decimal(0)) + value
    return totals


def regions(fmt: str, files: list[Path], *kernel_regions: str) -> dict[str, dict[str, float]]:
    line, _ = import_line(
        fmt,
        [str(f) for f in files],
        side="baseline",
        repetition=0,
        metric=1.0,
        options=ImportOptions.parse(kernel_regions=kernel_regions or ("*",)),
    )
    return line["breakdown"]


# -- naming -------------------------------------------------------------------------------------
def test_short_printable_names_stay_as_written() -> None:
    for kernel in ["triton_poi_fused_2", "tensorrt_llm::kernels::delayStreamKernel(long long)"]:
        assert region_name(kernel) == kernel
    assert region_name("  padded  ") == "padded"


def test_region_names_keep_within_the_measurement_name_bound() -> None:
    assert REGION_NAME_MAX <= MAX_NAME_LENGTH
    assert len(region_name("k" * (MAX_NAME_LENGTH + 10))) == REGION_NAME_MAX


def test_long_or_unprintable_names_become_a_prefix_and_a_digest() -> None:
    long = "void k<" + "int, " * 40 + "float>(T1)"
    digest = hashlib.sha256(long.encode()).hexdigest()[:DIGEST_CHARS]
    assert region_name(long) == long[: REGION_NAME_MAX - DIGEST_CHARS - 1] + "~" + digest
    assert len(region_name(long)) == REGION_NAME_MAX
    odd = "kernel\tname"
    digest = hashlib.sha256(odd.encode()).hexdigest()[:DIGEST_CHARS]
    assert region_name(odd) == "kernel?name~" + digest


# -- nsys, real output --------------------------------------------------------------------------
def test_every_kernel_of_a_real_nsys_summary_is_a_region(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = cli(
        [
            "import",
            "nsys",
            str(REAL),
            "--side",
            "candidate",
            "--repetition",
            "2",
            "--metric",
            "1.5",
            "--kernel-regions",
        ],
        capsys,
    )
    assert code == 0, err
    line = json.loads(out)
    reference = kernel_seconds(REAL)
    assert len(reference) == 13
    expected = {region_name(k): float(v) for k, v in reference.items()}
    assert line["breakdown"] == {"all": expected}
    # quoted names with commas and templates survive whole; the long ones are shortened
    fill = (
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, "
        "std::array<char *, (unsigned long)1>>(int, T2, T3)"
    )
    assert fill in reference and len(fill) > REGION_NAME_MAX
    assert region_name(fill) in line["breakdown"]["all"]
    assert "triton_poi_fused_2" in line["breakdown"]["all"]
    # two real kernels that share their first 111 characters stay two regions
    random = [k for k in reference if "distribution_elementwise_grid_stride_kernel" in k]
    names = {region_name(k) for k in random}
    assert len(random) == 2 and len(names) == 2
    assert len({n[: REGION_NAME_MAX - DIGEST_CHARS - 1] for n in names}) == 1
    rows = csv.DictReader(REAL.read_text().splitlines())
    assert line["counters"]["kernels"] == sum(int(r["Instances"]) for r in rows)


def test_groups_sum_their_kernels_first_match_wins_the_rest_is_other() -> None:
    groups = [
        "moe=fused_moe|Expert",
        "fill=FillFunctor",
        "elementwise=elementwise",
        "triton=^triton_",
    ]
    got = regions("nsys", [REAL], *groups)["all"]
    reference = kernel_seconds(REAL)

    def total(keep: Callable[[str], bool]) -> float:
        return float(sum((v for k, v in reference.items() if keep(k)), Decimal(0)))

    expected = {
        "moe": total(lambda k: "fused_moe" in k or "Expert" in k),
        "fill": total(lambda k: "FillFunctor" in k),
        "elementwise": total(lambda k: "elementwise" in k and "FillFunctor" not in k),
        "triton": total(lambda k: k.startswith("triton_")),
    }
    grouped = {"fused_moe", "Expert", "FillFunctor", "elementwise", "triton_"}
    expected[OTHER] = total(lambda k: not any(g in k for g in grouped))
    assert got == expected
    assert sum(got.values()) == pytest.approx(float(sum(reference.values())), rel=1e-15)


def test_several_groups_after_one_option_are_groups_in_the_order_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--kernel-regions attention=attention norm=rmsnorm FILE`: before the fix the second
    group was taken for a STEP=PATH file and the error named the CSV ("a mix")."""
    small = IMPORT / "nsys" / "report_cuda_gpu_kern_sum.csv"
    expected = {"attention": 0.001482333, "norm": 0.0008894}
    base = ["import", "nsys", "--side", "baseline", "--repetition", "0", "--metric", "1"]
    for args in (
        [*base, "--kernel-regions", "attention=attention", "norm=rmsnorm", str(small)],
        [*base, str(small), "--kernel-regions", "attention=attention", "norm=rmsnorm"],
    ):
        code, out, err = cli(args, capsys)
        assert code == 0, err
        assert json.loads(out)["breakdown"] == {"all": expected}
    first_wins = [*base, str(small), "--kernel-regions", "a=kernel", "norm=rmsnorm"]
    code, out, _ = cli(first_wins, capsys)
    assert json.loads(out)["breakdown"] == {"all": {"a": sum(expected.values())}}
    mixed = [*first_wins, "--kernel-regions", "x=y"]
    code, _, err = cli(mixed, capsys)
    assert (code, err) == (
        2,
        'error: --kernel-regions: "norm=rmsnorm" follows the value of one of several '
        "--kernel-regions options: write each group as --kernel-regions NAME=REGEX (their order "
        "decides which group a kernel falls in)\n",
    )


def test_per_step_files_give_per_step_kernel_regions(tmp_path: Path) -> None:
    line, _ = import_line(
        "nsys",
        [f"prefill={REAL}", f"decode={IMPORT / 'nsys' / 'report_cuda_gpu_kern_sum.csv'}"],
        side="baseline",
        repetition=0,
        metric=2.0,
        options=ImportOptions.parse(kernel_regions=("attention=attention", "moe=fused_moe")),
    )
    assert set(line["breakdown"]) == {"prefill", "decode"}
    assert line["breakdown"]["decode"] == {"attention": 0.001482333, "other": 0.0008894}
    assert line["breakdown"]["prefill"]["moe"] == 0.116821981


def test_nvtx_ranges_give_way_to_kernel_regions() -> None:
    nsys = IMPORT / "nsys"
    line, imported = import_line(
        "nsys",
        [str(nsys / "report_nvtx_sum.csv"), str(nsys / "report_cuda_gpu_kern_sum.csv")],
        side="baseline",
        repetition=0,
        metric=1.0,
        options=ImportOptions.parse(kernel_regions=("*",)),
    )
    assert set(line["breakdown"]["all"]) == {
        "void attention_kernel<float>(float*, int)",
        "rmsnorm_kernel",
    }
    assert any("NVTX" in note for note in imported.notes)


def test_names_that_would_collide_are_refused(tmp_path: Path) -> None:
    long = "void k<" + "int, " * 40 + "float>(T1)"
    clash = tmp_path / "clash.csv"
    clash.write_text(
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        f'50.0,100,1,100.0,100.0,100,100,0.0,"{long}"\n'
        f'50.0,100,1,100.0,100.0,100,100,0.0,"{region_name(long)}"\n'
    )
    with pytest.raises(ImportFormatError, match="would both be region .*NAME=REGEX"):
        regions("nsys", [clash])


def test_refusals_are_one_line_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["import", "nsys", str(REAL), "--side", "baseline", "--repetition", "0", "--metric", "1"]
    for extra, message in [
        (["--kernel-regions", "other=gemm"], "'other' is the region of the kernels no group"),
        (["--kernel-regions", "gemm"], "expected NAME=REGEX"),
        (["--kernel-regions", "gemm=("], "not a regular expression"),
        (["--kernel-regions", "a=x", "--kernel-regions", "a=y"], 'group "a" is given twice'),
    ]:
        code, out, err = cli(base + extra, capsys)
        assert (code, out) == (2, ""), err
        assert message in err and len(err.splitlines()) == 1
    kineto = str(IMPORT / "kineto" / "cpu_steps.json")
    code, _, err = cli(
        ["import", "kineto", kineto, "--side", "baseline", "--repetition", "0", "--kernel-regions"],
        capsys,
    )
    assert code == 2 and "--kernel-regions: nsys, ncu and msprof" in err
    nvtx = str(IMPORT / "nsys" / "report_nvtx_sum.csv")
    code, _, err = cli(
        [
            "import",
            "nsys",
            nvtx,
            "--side",
            "baseline",
            "--repetition",
            "0",
            "--metric",
            "1",
            "--kernel-regions",
        ],
        capsys,
    )
    assert code == 1 and "expected a cuda_gpu_kern_sum report" in err


# -- ncu and msprof -----------------------------------------------------------------------------
def test_ncu_kernel_time_by_kernel_name() -> None:
    path = IMPORT / "ncu" / "details_base_units.csv"
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("==")]
    rows = [r for r in csv.DictReader(lines) if r["Metric Name"] == "gpu__time_duration.sum"]
    assert {r["Metric Unit"] for r in rows} == {"nsecond"}
    expected: dict[str, Decimal] = {}
    for r in rows:
        expected[r["Kernel Name"]] = expected.get(r["Kernel Name"], Decimal(0)) + Decimal(
            r["Metric Value"].replace(",", "")
        ) * Decimal("1e-9")
    assert regions("ncu", [path]) == {"all": {k: float(v) for k, v in expected.items()}}


def test_msprof_kernel_details_per_step_and_op_summary_whole() -> None:
    details = IMPORT / "msprof" / "kernel_details.csv"
    got = regions("msprof", [details], "matmul=Matmul")
    reference: dict[str, dict[str, Decimal]] = {}
    for r in csv.DictReader(details.read_text().splitlines()):
        step = f"step-{r['Step Id']}"
        region = "matmul" if "Matmul" in r["Name"] else OTHER
        seconds = Decimal(r["Duration(us)"].strip()) * Decimal("1e-6")
        per_step = reference.setdefault(step, {})
        per_step[region] = per_step.get(region, Decimal(0)) + seconds
    assert got == {s: {k: float(v) for k, v in r.items()} for s, r in reference.items()}
    summary = IMPORT / "msprof" / "op_summary_0_1.csv"
    whole = kernel_seconds(summary, name="Op Name", time="Task Duration(us)", scale="1e-6")
    assert regions("msprof", [summary]) == {"all": {k: float(v) for k, v in whole.items()}}


# -- end to end: a mechanism names a kernel group ---------------------------------------------
def _scaled_summary(path: Path, factor: Decimal, moe_factor: Decimal) -> None:
    """The real summary with every kernel's Total Time times ``factor``, and the MoE kernels'
    times ``moe_factor`` more; written back with the csv module (long names quoted again)."""
    rows = list(csv.reader(REAL.read_text().splitlines()))
    for row in rows[1:]:
        scale = factor * (moe_factor if ("fused_moe" in row[-1] or "Expert" in row[-1]) else 1)
        row[1] = str(int(Decimal(row[1]) * scale))
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)


def test_a_mechanism_names_a_kernel_group_and_is_confirmed(tmp_path: Path) -> None:
    """Five repetitions of real kernel summaries: every kernel slows together from one
    repetition to the next (drift shared by both sides), the candidate's MoE kernels take 4/5 of
    the time. Declared: moe decrease, gemm unchanged (the reference)."""
    from pipeline.assessment.campaigns import assess
    from pipeline.ingestion.attempts import ingest
    from pipeline.store.tables import Store
    from pipeline.study.stored import write_attempt, write_campaign

    groups = ("moe=fused_moe|Expert", "gemm=cutlass|nvjet")
    runs = []
    for rep in range(5):
        sides: tuple[tuple[Side, Decimal], ...] = (
            ("baseline", Decimal(1)),
            ("candidate", Decimal("0.8")),
        )
        for side, moe in sides:
            path = tmp_path / f"{side}-{rep}.csv"
            _scaled_summary(path, Decimal(1) + Decimal(rep) / 50, moe)
            seconds = float(sum(kernel_seconds(path).values()))
            runs.append(
                import_line(
                    "nsys",
                    [str(path)],
                    side=side,
                    repetition=rep,
                    metric=seconds,
                    options=ImportOptions.parse(kernel_regions=groups),
                )[0]
            )
    policy = {
        "decision": "paired",
        "require_explanation": True,
        "min_improvement_pct": 1.0,
        "confidence": 0.95,
        "resamples": 2000,
        "seed": 0,
        "min_pairs": 5,
    }
    root = tmp_path / "attempts"
    write_campaign(
        root,
        "moe",
        created_at="2026-12-01T10:00:00Z",
        metric={"name": "gpu_seconds", "better": "lower"},
        policy=policy,
    )
    mechanism = {
        "hypothesis": "a fused MoE kernel",
        "expectations": [
            {"target": "region", "name": "moe", "expect": "decrease"},
            {"target": "region", "name": "gemm", "expect": "unchanged"},
        ],
    }
    attempt = {
        "attempt_id": "r001",
        "round": 1,
        "candidate": "fused-moe",
        "baseline": "main",
        "status": "completed",
        "declared_at": "2026-12-01T10:01:00Z",
        "started_at": "2026-12-01T10:02:00Z",
    }
    write_attempt(root / "moe", attempt, runs, mechanism=mechanism)
    store = Store(tmp_path / "store")
    assert ingest(root, store).exit_code == 0
    result = assess(store, ["moe"])
    normalized = {
        r["name"]: r
        for r in result.comparisons.iter_rows(named=True)
        if r["quantity"] == "region_normalized"
    }
    assert normalized["moe"]["estimate"] == pytest.approx(1.25, rel=1e-6)
    assert normalized["moe"]["direction"] == "decrease"
    assert dict(result.outcomes.select("name", "outcome").iter_rows()) == {
        "moe": "confirmed",
        "gemm": "assumed",
    }
    assert result.assessments.row(0, named=True)["explanation"] == "explained"
