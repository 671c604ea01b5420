"""Per-GPU defaults: fitted from the shipped micro-benchmark profiles, used whenever an estimate
has no calibration, and overridden by one."""

import csv
import importlib.util
import json
import re
from importlib import resources

import numpy as np
import pytest

from costmodel import ClusterSpec, ModelSpec, Plan, TrainingSpec, estimate, estimate_many
from costmodel.calibration import fit_calibration
from costmodel.calibration.defaults import SUSTAINED_CLOCK_FACTOR, fit_default_params
from costmodel.gpu_defaults import default_params, shipped_fields, shipped_gpus
from costmodel.hardware import CATALOG
from costmodel.observations import DeviceInfo, GemmSample, Profile
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from tests.support.calibration_data import measured
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
MICROBENCH = ROOT / "validation" / "microbench.csv"
DEFAULTS = resources.files("costmodel").joinpath("defaults")
CITATION = re.compile(r"^validation/microbench\.csv (?P<id>[^:]+): \S.+")

LLAMA8B = ModelSpec(
    name="llama3-8b",
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    ffn_hidden_size=14336,
    vocab_size=128256,
    activation="swiglu",
)
TRAINING = TrainingSpec(seq_length=8192, global_batch_size=64)
PLAN = Plan(dp=4, tp=2, pp=1, micro_batch_size=1)


def profile_of(gpu: str) -> Profile:
    text = DEFAULTS.joinpath("profiles").joinpath(f"{gpu}.json").read_text(encoding="utf-8")
    return Profile.model_validate_json(text)


def params_document(gpu: str) -> dict:
    text = DEFAULTS.joinpath("params").joinpath(f"{gpu}.json").read_text(encoding="utf-8")
    return json.loads(text)


def one_group(gpu: str | dict, nodes: int = 1) -> ClusterSpec:
    return ClusterSpec(groups=[{"name": "g", "gpu": gpu, "num_nodes": nodes}])


def test_defaults_ship_for_the_measured_catalog_gpus() -> None:
    # B300 (no catalog entry), GH200 (not an H200 SXM) and the DeepEP parts are not shipped.
    assert shipped_gpus() == [
        "A100-40GB",
        "A100-80GB",
        "B200",
        "GB200",
        "H100-80GB",
        "H200-141GB",
        "MI300X",
    ]
    assert set(shipped_gpus()) <= set(CATALOG)


@pytest.mark.parametrize("gpu", shipped_gpus())
def test_refitting_each_shipped_profile_reproduces_its_params_file(gpu: str) -> None:
    committed = params_document(gpu)
    refitted = fit_default_params(profile_of(gpu), profile_file=f"profiles/{gpu}.json")
    assert refitted["gpu"] == committed["gpu"] == gpu
    assert refitted["params"].keys() == committed["params"].keys()
    for name, value in committed["params"].items():
        assert refitted["params"][name] == pytest.approx(value, rel=2e-3), name
    assert refitted["provenance"]["points"] == committed["provenance"]["points"]
    assert [stage["fitted"].keys() for stage in refitted["provenance"]["stages"]] == [
        stage["fitted"].keys() for stage in committed["provenance"]["stages"]
    ]


@pytest.mark.skipif(not MICROBENCH.is_file(), reason="validation/microbench.csv not present")
def test_the_shipped_profiles_are_what_the_csv_builds() -> None:
    """Changing a measurement in validation/microbench.csv and rerunning the build script is
    how defaults change; a CSV edited without rebuilding fails here."""
    path = ROOT / "scripts" / "build_default_profiles.py"
    spec = importlib.util.spec_from_file_location("build_default_profiles", path)
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    with MICROBENCH.open(newline="", encoding="utf-8") as handle:
        collected, _ = build.collect(list(csv.DictReader(handle)))
    assert sorted(collected) == shipped_gpus()
    for gpu, data in collected.items():
        rebuilt = build.profile_document(build.profile_of(gpu, data))
        assert json.loads(json.dumps(rebuilt)) == json.loads(
            DEFAULTS.joinpath("profiles").joinpath(f"{gpu}.json").read_text(encoding="utf-8")
        ), gpu


@pytest.mark.parametrize("gpu", shipped_gpus())
def test_every_shipped_sample_cites_its_row_and_source(gpu: str) -> None:
    profile = profile_of(gpu)
    samples = [*profile.gemm, *profile.memory, *profile.attention, *profile.collectives]
    assert samples
    ids = []
    for sample in samples:
        match = CITATION.match(sample.citation or "")
        assert match, f"{gpu}: sample without a citation: {sample}"
        ids.append(match.group("id"))
    if MICROBENCH.is_file():
        with MICROBENCH.open(newline="", encoding="utf-8") as handle:
            known = {row["id"] for row in csv.DictReader(handle)}
        assert set(ids) <= known


def test_a_gpu_with_only_a_gemm_ceiling_gets_only_a_gemm_efficiency() -> None:
    # MI300X: one BF16 MAMF ceiling, 668.4 of 1307.4 TFLOP/s.
    assert shipped_fields("MI300X").keys() == {"gemm_efficiency_scale"}
    efficiency = (
        CATALOG["MI300X"].gemm_efficiency * shipped_fields("MI300X")["gemm_efficiency_scale"]
    )
    assert efficiency == pytest.approx(668.4 / 1307.4 * SUSTAINED_CLOCK_FACTOR, rel=1e-3)
    # GB200 (BF16 and FP8 ceilings): its FP8 ceiling is within 1% of its BF16 one, so only the
    # GEMM efficiency moves.
    assert shipped_fields("GB200").keys() == {"gemm_efficiency_scale"}


def test_the_gemm_roll_off_is_fitted_where_a_shape_sweep_was_measured() -> None:
    swept = [gpu for gpu in shipped_gpus() if "gemm_half_dim" in shipped_fields(gpu)]
    assert swept == ["H100-80GB", "H200-141GB"]  # Azure's FP8 cuBLASLt sweeps
    for gpu in swept:
        params = default_params(gpu)
        # FP8 GEMMs reach a lower fraction of their (2x) peak than BF16 ones.
        assert 0.8 < params.gemm_fp8_scale < 1.0
        assert params.gemm_half_dim > DEFAULT_PARAMS.gemm_half_dim


def test_attention_defaults_follow_the_data() -> None:
    """What the data implies: FlashAttention-2 was measured on H100 and H200 only (Azure, 327.9
    and 329.3 TFLOP/s fwd + bwd, non-causal). A100 has no attention row, so it keeps the
    generic default; the two Hoppers agree, and equal twice FA2's non-causal utilization (the
    model's count is causal training's) at sustained clocks."""
    assert "attention_efficiency" not in shipped_fields("A100-80GB")
    assert default_params("A100-80GB").attention_efficiency == DEFAULT_PARAMS.attention_efficiency
    h100 = default_params("H100-80GB").attention_efficiency
    h200 = default_params("H200-141GB").attention_efficiency
    assert h100 == pytest.approx(2 * 327.9 / 989.4 * SUSTAINED_CLOCK_FACTOR, rel=1e-3)
    assert h200 == pytest.approx(h100, rel=0.01)


def test_memory_and_links_follow_the_data() -> None:
    # STREAM Add: 2.97 of 3.35 TB/s on H100, 4.15 of 4.8 on H200 (~87-89%).
    assert default_params("H100-80GB").memory_bound_efficiency == pytest.approx(2.97 / 3.35, 1e-3)
    assert default_params("H200-141GB").memory_bound_efficiency == pytest.approx(4.15 / 4.8, 1e-3)
    # A100's one all-reduce (16 GiB ring, 234.89 GB/s bus bandwidth of 300).
    assert default_params("A100-80GB").intra_node_efficiency == pytest.approx(234.89 / 300, 1e-2)
    # Only B200 and H200 were measured across nodes.
    across = [gpu for gpu in shipped_gpus() if "inter_node_efficiency" in shipped_fields(gpu)]
    assert across == ["B200", "H200-141GB"]


def test_default_params_is_defaults_plus_the_shipped_fields() -> None:
    for gpu in shipped_gpus():
        params = default_params(gpu)
        fields = shipped_fields(gpu)
        assert fields
        for name in EfficiencyParams.model_fields:
            expected = fields.get(name, getattr(DEFAULT_PARAMS, name))
            assert getattr(params, name) == expected, (gpu, name)
        assert default_params(CATALOG[gpu]) is params  # by spec as by name, and cached
        assert default_params(gpu.lower()) is params
    # No measurement: the generic defaults.
    assert default_params("V100-32GB") is DEFAULT_PARAMS
    assert default_params("L40S") is DEFAULT_PARAMS
    # An inline GPU, even one named like a catalog entry, is not the measured part.
    custom = CATALOG["H100-80GB"].model_copy(update={"bf16_tflops": 900.0})
    assert default_params(custom) is DEFAULT_PARAMS


def test_estimate_without_params_uses_the_gpu_s_defaults_and_explicit_params_override() -> None:
    cluster = one_group("H100-80GB")
    uncalibrated = estimate(LLAMA8B, TRAINING, cluster, PLAN)
    with_defaults = estimate(LLAMA8B, TRAINING, cluster, PLAN, params=default_params("H100-80GB"))
    generic = estimate(LLAMA8B, TRAINING, cluster, PLAN, params=DEFAULT_PARAMS)
    assert uncalibrated.step_time_s == with_defaults.step_time_s
    assert uncalibrated.step_time_s != pytest.approx(generic.step_time_s, rel=1e-3)
    # A calibration overrides the defaults entirely.
    slow = DEFAULT_PARAMS.model_copy(update={"gemm_efficiency_scale": 0.5})
    calibrated = estimate(LLAMA8B, TRAINING, cluster, PLAN, params=slow)
    assert calibrated.step_time_s > generic.step_time_s
    # A GPU without shipped defaults is priced as before.
    l40s = one_group("L40S")
    assert (
        estimate(LLAMA8B, TRAINING, l40s, PLAN).step_time_s
        == estimate(LLAMA8B, TRAINING, l40s, PLAN, params=DEFAULT_PARAMS).step_time_s
    )


def test_estimate_many_prices_each_group_with_its_own_gpu_s_defaults() -> None:
    cluster = ClusterSpec(
        groups=[
            {"name": "h100", "gpu": "H100-80GB", "num_nodes": 1},
            {"name": "a100", "gpu": "A100-80GB", "num_nodes": 1},
        ]
    )
    plans = {"dp": np.array([8, 4, 2]), "tp": np.array([1, 2, 4]), "pp": 1, "micro_batch_size": 1}
    for group, gpu in (("h100", "H100-80GB"), ("a100", "A100-80GB")):
        uncalibrated = estimate_many(LLAMA8B, TRAINING, cluster, plans, group=group)
        own = estimate_many(
            LLAMA8B, TRAINING, cluster, plans, group=group, params=default_params(gpu)
        )
        generic = estimate_many(
            LLAMA8B, TRAINING, cluster, plans, group=group, params=DEFAULT_PARAMS
        )
        np.testing.assert_array_equal(uncalibrated["step_time_s"], own["step_time_s"])
        assert not np.allclose(uncalibrated["step_time_s"], generic["step_time_s"], rtol=1e-4)
        # The scalar face agrees (tests/costmodel/test_faces.py holds them equal in general).
        single = estimate(
            LLAMA8B, TRAINING, cluster, Plan(dp=4, tp=2, pp=1, micro_batch_size=1, group=group)
        )
        assert single.step_time_s == pytest.approx(uncalibrated["step_time_s"][1], rel=1e-9)


def mixed_plan(first: str, second: str) -> dict:
    return {
        "dp": 2,
        "tp": 4,
        "pp": 2,
        "micro_batch_size": 1,
        "stages": [{"group": first, "num_layers": 16}, {"group": second, "num_layers": 16}],
    }


def test_a_mixed_gpu_plan_prices_each_stage_with_its_own_gpu_s_defaults() -> None:
    cluster = ClusterSpec(
        groups=[
            {"name": "h100", "gpu": "H100-80GB", "num_nodes": 2},
            {"name": "a100", "gpu": "A100-80GB", "num_nodes": 2},
        ]
    )
    plan = mixed_plan("h100", "a100")
    mixed = estimate(LLAMA8B, TRAINING, cluster, plan)
    as_h100 = estimate(LLAMA8B, TRAINING, cluster, plan, params=default_params("H100-80GB"))
    as_a100 = estimate(LLAMA8B, TRAINING, cluster, plan, params=default_params("A100-80GB"))

    def stage_s(result, index: int) -> float:  # type: ignore[no-untyped-def]
        return result.per_stage[index].time_per_microbatch_s

    assert mixed.feasible
    assert stage_s(mixed, 0) == pytest.approx(stage_s(as_h100, 0), rel=1e-12)
    assert stage_s(mixed, 1) == pytest.approx(stage_s(as_a100, 1), rel=1e-12)
    # ... and not with the other stage's: the two GPUs' defaults do differ.
    assert stage_s(mixed, 0) != pytest.approx(stage_s(as_a100, 0), rel=1e-3)
    assert stage_s(mixed, 1) != pytest.approx(stage_s(as_h100, 1), rel=1e-3)
    # One GPU type throughout: the same as the homogeneous plan.
    same = estimate(LLAMA8B, TRAINING, cluster, mixed_plan("h100", "h100"))
    homogeneous = estimate(
        LLAMA8B, TRAINING, cluster, Plan(dp=2, tp=4, pp=2, micro_batch_size=1, group="h100")
    )
    assert same.step_time_s == pytest.approx(homogeneous.step_time_s, rel=1e-9)


def test_a_fit_without_base_starts_from_the_gpu_s_defaults() -> None:
    h100 = default_params("H100-80GB")
    truth = h100.model_copy(update={"gemm_efficiency_scale": 0.9})
    gemms = [
        GemmSample(m=size, n=size, k=size, dtype="bf16", median_s=1.0)
        for size in (1024, 2048, 4096, 8192, 16384, 32768)
    ]
    (profile,), _ = measured(
        [Profile(name="h100", device=DeviceInfo(name="H100"), gpu="H100-80GB", gemm=gemms)],
        [],
        truth,
    )
    result = fit_calibration([profile], params=["gemm_efficiency_scale"], k_folds=2)
    assert result.base == h100
    # The roll-off it does not fit stays the H100's, so the efficiency comes out exactly.
    assert result.params.gemm_half_dim == h100.gemm_half_dim != DEFAULT_PARAMS.gemm_half_dim
    assert result.params.gemm_efficiency_scale == pytest.approx(0.9, rel=1e-3)
    # Data on several GPUs (or an inline one) starts from the generic defaults.
    other = profile.model_copy(update={"gpu": CATALOG["H200-141GB"]})
    assert fit_calibration([profile, other], params=["gemm_efficiency_scale"]).base == (
        DEFAULT_PARAMS
    )
