"""The contract §7 simulation: valid stored attempts, right digests and clock, reproducible, and the
statistics of the model are the ones contract §7 states."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from pipeline.cli import main
from pipeline.contract.schemas import document_schema
from pipeline.store.tables import Store
from pipeline.study.simulate import REGIONS, Model, campaign_generator, draw_runs, simulate

MODEL_SHARES = {"attention": 0.10, "mlp": 0.50, "sampling": 0.25, "comm": 0.15}


def _files(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim")
    simulate(out, repetitions=(3, 5), attempts=4, seed=7)
    return out


def test_layout_and_documents_follow_the_input_schemas(small: Path) -> None:
    assert sorted(p.name for p in small.iterdir()) == ["aa-r03", "aa-r05", "gain-r03", "gain-r05"]
    campaign = small / "gain-r05"
    assert sorted(p.name for p in campaign.iterdir()) == [
        "campaign.json",
        "r000",
        "r001",
        "r002",
        "r003",
    ]
    jsonschema.validate(
        json.loads((campaign / "campaign.json").read_bytes()), document_schema("campaign")
    )
    for attempt in sorted(p for p in campaign.iterdir() if p.is_dir()):
        jsonschema.validate(
            json.loads((attempt / "attempt.json").read_bytes()), document_schema("attempt")
        )
        jsonschema.validate(
            json.loads((attempt / "mechanism.json").read_bytes()), document_schema("mechanism")
        )
        runs = _lines(attempt / "measurements.jsonl")
        assert [(r["repetition"], r["side"]) for r in runs] == [
            (rep, side) for rep in range(5) for side in ("baseline", "candidate")
        ]
        for run in runs:
            jsonschema.validate(run, document_schema("measurement"))


def test_policy_digest_recomputed_by_hand(small: Path) -> None:
    document = json.loads((small / "aa-r03" / "campaign.json").read_bytes())
    assert document["policy"] == {
        "decision": "median",
        "require_explanation": False,
        "min_improvement_pct": 1.0,
        "confidence": 0.95,
        "resamples": 10000,
        "seed": 0,
        "min_pairs": 5,
    }
    canonical = (
        '{"confidence":0.95,"decision":"median","min_improvement_pct":1.0,"min_pairs":5,'
        '"require_explanation":false,"resamples":10000,"seed":0}'
    )
    assert document["policy_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()


def test_mechanism_digest_and_clock(small: Path) -> None:
    created = json.loads((small / "gain-r03" / "campaign.json").read_bytes())["created_at"]
    previous_start = created
    for attempt in sorted(p for p in (small / "gain-r03").iterdir() if p.is_dir()):
        document = json.loads((attempt / "attempt.json").read_bytes())
        body = (attempt / "mechanism.json").read_bytes()
        assert document["mechanism_sha256"] == hashlib.sha256(body).hexdigest()
        # Same fixed-format UTC strings compare in time order.
        assert created < document["declared_at"] < document["started_at"]
        assert document["started_at"] > previous_start
        previous_start = document["started_at"]
        assert document["round"] == int(document["attempt_id"][1:])
        expectations = json.loads(body)["expectations"]
        assert [(e["name"], e["expect"]) for e in expectations] == [
            ("attention", "decrease"),
            ("dram_bytes", "decrease"),
            ("sampling", "unchanged"),
        ]


def test_metric_is_the_sum_of_regions_and_launches_are_exact(small: Path) -> None:
    for run in _lines(small / "aa-r05" / "r002" / "measurements.jsonl"):
        cells = [v for step in run["breakdown"].values() for v in step.values()]
        assert sorted(run["breakdown"]) == ["decode-0", "decode-1", "decode-2", "decode-3"]
        assert run["metric"] == pytest.approx(sum(cells), rel=1e-12)
        assert run["counters"]["kernel_launches"] == 4000
        assert isinstance(run["counters"]["kernel_launches"], int)


def test_same_seed_is_byte_identical_and_another_seed_differs(tmp_path: Path, small: Path) -> None:
    simulate(tmp_path / "again", repetitions=(3, 5), attempts=4, seed=7)
    simulate(tmp_path / "other", repetitions=(3, 5), attempts=4, seed=8)
    assert _files(tmp_path / "again") == _files(small)
    other = _files(tmp_path / "other")
    assert other.keys() == _files(small).keys()
    measurement = "aa-r03/r000/measurements.jsonl"
    assert other[measurement] != _files(small)[measurement]


def test_a_campaign_does_not_depend_on_the_others_or_on_the_attempt_count(
    tmp_path: Path, small: Path
) -> None:
    simulate(tmp_path, scenarios=("gain",), repetitions=(5,), attempts=2, seed=7)
    mine, reference = _files(tmp_path / "gain-r05"), _files(small / "gain-r05")
    assert mine == {k: v for k, v in reference.items() if not k.startswith(("r002", "r003"))}


def test_existing_campaign_is_refused_through_the_cli(
    small: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", str(small), "--scenario", "aa", "--repetitions", "3", "--attempts", "1"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        f"error: {small / 'aa-r03'}: already exists; remove it or choose another OUT_DIR\n"
    )


def test_cli_writes_what_it_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "simulate",
        str(tmp_path),
        "--scenario",
        "gain",
        "--repetitions",
        "10",
        "--attempts",
        "2",
        "--data-seed",
        "3",
        "--gain-factor",
        "0.5",
        "--sigma-run",
        "0",
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"data seed 3: 1 campaigns written to {tmp_path}"
    )
    runs = _lines(tmp_path / "gain-r10" / "r001" / "measurements.jsonl")
    ratio = [
        c["counters"]["dram_bytes"] / b["counters"]["dram_bytes"]
        for b, c in zip(runs[::2], runs[1::2], strict=True)
    ]
    assert np.allclose(ratio, 0.5, rtol=0.01)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--steps", "0"], "--steps: must be >= 1, got 0"),
        (["--share-mlp", "-0.1"], "--share-mlp: must be >= 0, got -0.1"),
        (["--repetitions", "3,3"], "--repetitions: duplicate value in [3, 3]"),
        (["--min-pairs", "4"], "--min-pairs: must be >= 5 (docs/contract.md §2.1), got 4"),
    ],
)
def test_bad_model_parameters_are_usage_errors(
    tmp_path: Path, option: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", str(tmp_path / "out"), *option])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not (tmp_path / "out").exists()


# -- the model's statistics (contract §7), from many simulated runs ---------------------------


@pytest.fixture(scope="module")
def draws() -> dict[str, np.ndarray]:
    model = Model()
    out = {}
    for scenario in ("aa", "gain"):
        runs = draw_runs(model, scenario, 5, 2000, campaign_generator(11, scenario, 5))
        out[scenario] = np.log(runs.seconds)  # (2000, 5, 2, 4, 4)
        out[f"{scenario}_dram"] = runs.dram_bytes
    return out


def test_regions_have_the_configured_shares_of_ten_ms(draws: dict[str, np.ndarray]) -> None:
    logs = draws["aa"]
    for k, region in enumerate(REGIONS):
        # median-1 log-normal noise: the mean log is the log of the noiseless time
        assert logs[..., k].mean() == pytest.approx(np.log(MODEL_SHARES[region] * 0.010), abs=0.002)


def test_noise_has_the_three_spec_components(draws: dict[str, np.ndarray]) -> None:
    logs = draws["aa"] - draws["aa"].mean(axis=(0, 1, 2, 3))  # centre each region
    base, cand = logs[:, :, 0], logs[:, :, 1]
    # shared by both sides of a repetition: only the per-repetition factor
    assert np.mean(base * cand) == pytest.approx(0.03**2, rel=0.1)
    # two regions of the same run share the per-repetition and per-run factors
    assert np.mean(base[..., 0] * base[..., 1]) == pytest.approx(0.03**2 + 0.03**2, rel=0.1)
    # one cell's total variance: all three
    assert np.var(base) == pytest.approx(0.03**2 + 0.03**2 + 0.01**2, rel=0.1)
    # across repetitions of one attempt: independent
    assert abs(np.mean(base[:, 0] * base[:, 1])) < 0.0002


def test_gain_scales_attention_and_dram_only(draws: dict[str, np.ndarray]) -> None:
    for scenario, attention in (("aa", 1.0), ("gain", 0.88)):
        log_ratio = (draws[scenario][:, :, 1] - draws[scenario][:, :, 0]).mean(axis=(0, 1, 2))
        expected = np.log([attention, 1.0, 1.0, 1.0])
        assert np.allclose(log_ratio, expected, atol=0.003), (scenario, np.exp(log_ratio))
        dram = draws[f"{scenario}_dram"]
        assert np.mean(dram[:, :, 1] / dram[:, :, 0]) == pytest.approx(attention, abs=1e-4)
    assert np.std(draws["aa_dram"] / 4e9) == pytest.approx(0.001, rel=0.05)


def test_end_to_end_gain_is_about_one_point_two_percent(draws: dict[str, np.ndarray]) -> None:
    metric = np.exp(draws["gain"]).sum(axis=(3, 4))
    gain = np.exp(np.mean(np.log(metric[:, :, 0] / metric[:, :, 1]))) - 1
    assert gain == pytest.approx(0.012 / 0.988, abs=0.001)


def test_simulated_campaigns_pass_ingest_without_integrity_errors(tmp_path: Path) -> None:
    from pipeline.ingestion.attempts import ingest

    simulate(tmp_path / "attempts", repetitions=(3, 5), attempts=3, seed=1)
    store = Store(tmp_path / "store")
    report = ingest(tmp_path / "attempts", store)
    assert report.issues == []
    assert int(report.exit_code) == 0
    assert sorted(report.attempts["outcome"].unique().to_list()) == ["ingested"]
    assert report.attempts.height == 4 * 3
    assert store.read("integrity").height == 0
    samples = store.read("samples")
    assert samples.height == 2 * 3 * (3 + 5) * 2


# -- noise families, the undeclared gain and the position effect ---------------------------------
def _log_rep_factor(noise: str) -> np.ndarray:
    """ln of the per-repetition factor alone (every other sigma 0), one value per repetition."""
    model = Model(sigma_run=0, sigma_cell=0, sigma_dram=0, sigma_rep=0.03)
    rng = campaign_generator(1, "aa", 50, noise)  # type: ignore[arg-type]
    runs = draw_runs(model, "aa", 50, 400, rng, noise=noise)  # type: ignore[arg-type]
    return np.log(runs.seconds[:, :, 0, 0, 0] / (0.1 * model.step_seconds)).ravel()


def test_student_t_noise_has_the_same_sigma_and_heavier_tails() -> None:
    normal, heavy = _log_rep_factor("lognormal"), _log_rep_factor("t3")
    assert np.std(normal) == pytest.approx(0.03, rel=0.03)
    assert np.std(heavy) == pytest.approx(0.03, rel=0.25)  # t3's variance converges slowly
    # beyond 4 sigma: about 6e-5 of normal draws, about 1% of scaled t3 draws
    assert np.mean(np.abs(heavy) > 0.12) > 0.004 > np.mean(np.abs(normal) > 0.12)


def test_outliers_slow_whole_runs_at_the_configured_rate() -> None:
    model = Model(sigma_rep=0, sigma_run=0, sigma_cell=0, outlier_rate=0.1, outlier_slowdown=0.5)
    rng = campaign_generator(2, "aa", 10, "outliers")
    runs = draw_runs(model, "aa", 10, 500, rng, noise="outliers")
    factor = runs.seconds / (model.shares * model.step_seconds)
    assert set(np.round(np.unique(factor), 12)) == {1.0, 1.5}
    whole_run = np.broadcast_to(factor[..., :1, :1], factor.shape)  # every region of a run alike
    np.testing.assert_allclose(factor, whole_run, rtol=1e-12)
    assert np.mean(factor[..., 0, 0] == 1.5) == pytest.approx(0.1, abs=0.01)


def test_lognormal_noise_keeps_the_original_draws() -> None:
    model = Model()
    a = draw_runs(model, "gain", 5, 3, campaign_generator(4, "gain", 5))
    b = draw_runs(
        model, "gain", 5, 3, campaign_generator(4, "gain", 5, "lognormal"), noise="lognormal"
    )
    np.testing.assert_array_equal(a.seconds, b.seconds)
    assert a.order is None


def test_elsewhere_saves_the_same_time_in_mlp() -> None:
    model = Model(sigma_rep=0, sigma_run=0, sigma_cell=0)
    gain = draw_runs(model, "gain", 2, 1, campaign_generator(0, "gain", 2)).metric
    elsewhere = draw_runs(model, "elsewhere", 2, 1, campaign_generator(0, "elsewhere", 2))
    assert elsewhere.metric[0, 0, 1] == pytest.approx(gain[0, 0, 1], rel=1e-12)
    ratio = elsewhere.seconds[0, 0, 1, 0] / elsewhere.seconds[0, 0, 0, 0]
    np.testing.assert_allclose(ratio, [1.0, 1 - 0.1 * 0.12 / 0.5, 1.0, 1.0], rtol=1e-12)


@pytest.mark.parametrize("reps", [5, 10])
def test_balanced_order_and_the_position_effect(reps: int) -> None:
    model = Model(sigma_rep=0, sigma_run=0, sigma_cell=0, position_effect_pct=3)
    runs = draw_runs(model, "aa", reps, 6, campaign_generator(0, "aa", reps), order="balanced")
    assert runs.order is not None
    for attempt in range(6):
        perm = np.random.Generator(np.random.PCG64(attempt)).permutation(reps)
        first = set(perm[: -(-reps // 2)].tolist())
        assert [r for r in range(reps) if runs.order[attempt, r, 0] == 0] == sorted(first)
    assert ((runs.order.sum(axis=2)) == 1).all()
    second = np.where(runs.order == 1, 1.03, 1.0)
    np.testing.assert_allclose(runs.metric / model.step_seconds / model.steps, second, rtol=1e-12)


def test_recorded_order_goes_through_ingest(tmp_path: Path) -> None:
    simulate(
        tmp_path / "in", scenarios=("aa",), repetitions=(5,), attempts=2, seed=1, order="balanced"
    )
    lines = _lines(tmp_path / "in" / "aa-r05" / "r001" / "measurements.jsonl")
    assert sorted({line["order"] for line in lines}) == [0, 1]
    attempt = json.loads((tmp_path / "in" / "aa-r05" / "r001" / "attempt.json").read_bytes())
    assert attempt["order_seed"] == 1
    from pipeline.ingestion.attempts import ingest

    store = Store(tmp_path / "store")
    assert ingest(tmp_path / "in", store).exit_code == 0
    samples = store.read("samples").sort("attempt_id", "repetition", "side")
    assert samples["order"].to_list() == [
        line["order"] for line in _lines(tmp_path / "in" / "aa-r05" / "r000" / "measurements.jsonl")
    ] + [line["order"] for line in lines]
