"""Calibration: recovers parameters from data the model itself generated; refuses bad data."""

import math

import numpy as np
import pytest

from costmodel.api import estimate
from costmodel.calibration import CalibrationError, fit_calibration
from costmodel.calibration.points import PointSet
from costmodel.catalog import load_spec
from costmodel.hardware import CATALOG
from costmodel.observations import (
    CollectiveSample,
    DeviceInfo,
    GemmSample,
    Profile,
)
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from costmodel.specs import Plan, TrainingSpec
from profiler.nccl_tests import parse_nccl_tests
from tests.support.calibration_data import (
    GPU,
    TRUTH,
    measured,
    observations,
    unmeasured_profile,
)
from tests.support.paths import DATA_DIR


def test_recovers_the_parameters_that_generated_the_data() -> None:
    profiles, observed = measured([unmeasured_profile()], observations(), TRUTH)
    result = fit_calibration(profiles, observed)
    fitted = {change.name: change.after for change in result.changes}
    for name in ("gemm_efficiency_scale", "attention_efficiency", "memory_bound_efficiency"):
        assert fitted[name] == pytest.approx(getattr(TRUTH, name), rel=0.02), name
    for name in ("gemm_half_dim", "intra_node_efficiency", "intra_node_latency_us"):
        assert fitted[name] == pytest.approx(getattr(TRUTH, name), rel=0.03), name
    for name in ("per_microbatch_overhead_s", "per_step_overhead_s"):
        assert fitted[name] == pytest.approx(getattr(TRUTH, name), rel=0.1), name
    # Nothing measured crosses nodes or overlaps TP communication: left alone, and said so.
    assert {"inter_node_efficiency", "tp_comm_overlap_fraction"} <= set(result.not_identifiable)
    assert result.params.inter_node_efficiency == DEFAULT_PARAMS.inter_node_efficiency
    assert result.held_out_mape_before > 0.1
    assert result.held_out_mape_after < 0.01
    assert {error.source for error in result.held_out} >= {"gemm fp32", "cpu runs", "attention"}
    changed = set(TRUTH.model_dump(exclude_defaults=True))
    assert {change.name for change in result.moved} == changed


def test_a_profile_alone_calibrates_the_step_time_it_did_not_see() -> None:
    profiles, observed = measured([unmeasured_profile()], observations(), TRUTH)
    result = fit_calibration(profiles, [])
    errors = []
    for obs in observed:
        points = PointSet.build([], [obs])
        predicted = points.predict(result.params, np.arange(1))[0]
        errors.append(abs(predicted / obs.measured_step_time_s - 1))
    # Only the step overheads are invisible to micro-benchmarks; the rest is recovered.
    assert max(errors) < 0.15
    assert "per_step_overhead_s" in result.not_identifiable


def test_one_wild_sample_does_not_drag_the_fit() -> None:
    profiles, observed = measured([unmeasured_profile()], observations(), TRUTH)
    gemm = list(profiles[0].gemm)
    gemm[3] = gemm[3].model_copy(update={"median_s": gemm[3].median_s * 4})
    profiles = [profiles[0].model_copy(update={"gemm": gemm})]
    result = fit_calibration(profiles, observed, k_folds=2)
    assert result.params.gemm_efficiency_scale == pytest.approx(0.9, rel=0.05)


def test_nccl_tests_output_calibrates_the_inter_node_links() -> None:
    text = (DATA_DIR / "nccl" / "all_gather_a100_2x8.txt").read_text()
    profile = Profile(
        name="a100 all_gather",
        device=DeviceInfo(name="NVIDIA A100-SXM4-80GB", kind="cuda", ranks=16),
        gpu=CATALOG["A100-80GB"],
        collectives=parse_nccl_tests(text, op="all_gather"),
    )
    result = fit_calibration([profile])
    # One topology (2 nodes x 8): a ring's latency mixes its 2 network and 14 NVLink steps, so
    # only one latency is identifiable from it (either may be the one fitted).
    fitted = set(result.fitted)
    assert "inter_node_efficiency" in fitted
    assert len(fitted & {"inter_node_latency_us", "intra_node_latency_us"}) == 1
    assert len(fitted) == 2
    # 38 GB/s bus bandwidth over 8 x 25 GB/s NICs: the links ran at about 19% of line rate.
    assert result.params.inter_node_efficiency == pytest.approx(0.19, abs=0.02)
    assert result.held_out_mape_after < 0.05 < result.held_out_mape_before


# ---- refusals -------------------------------------------------------------------------------
def test_refuses_without_data_and_with_too_few_points() -> None:
    with pytest.raises(CalibrationError, match="nothing to calibrate"):
        fit_calibration([], [])
    profile = unmeasured_profile()
    few = profile.model_copy(update={"gemm": profile.gemm[:3], "memory": [], "attention": []})
    few = few.model_copy(update={"collectives": []})
    (few,), _ = measured([few], [], TRUTH)
    with pytest.raises(CalibrationError, match="too few points: 3 measurements for 2 parameters"):
        fit_calibration([few])
    with pytest.raises(ValueError, match="cannot calibrate nonsense"):
        fit_calibration([few], params=["nonsense"])


def test_refuses_contradicting_step_times() -> None:
    _, observed = measured([], observations(), TRUTH)
    slow_twin = observed[0].model_copy(update={"step_time_s": observed[0].step_time_s * 2})
    with pytest.raises(CalibrationError, match="contradicting samples in 'cpu runs'"):
        fit_calibration([], [*observed, slow_twin])


def test_refuses_a_gemm_faster_than_the_peak() -> None:
    (profile,), _ = measured([unmeasured_profile()], [], TRUTH)
    fast = profile.gemm[-1]
    too_fast = fast.model_copy(update={"median_s": fast.flops / (GPU.fp32_tflops * 1e12 * 1.3)})
    profile = profile.model_copy(update={"gemm": [*profile.gemm[:-1], too_fast]})
    with pytest.raises(CalibrationError, match=r"above the 0\.1 TFLOP/s peak of cpu-test"):
        fit_calibration([profile])


def test_refuses_parameters_beyond_their_physical_bounds() -> None:
    # GEMMs that roll off with size yet reach 110% of the nominal peak at the large end: no
    # efficiency <= 100% explains them, so the GPU description must be wrong.
    samples = []
    for size in (64, 128, 256, 512, 1024, 2048):
        rate = GPU.fp32_tflops * 1e12 * 1.1 * size / (size + 100)
        samples.append(
            GemmSample(m=size, n=size, k=size, dtype="fp32", median_s=2 * size**3 / rate)
        )
    profile = Profile(name="p", device=DeviceInfo(name="cpu"), gpu=GPU, gemm=samples)
    with pytest.raises(CalibrationError, match=r"gemm_efficiency_scale .* above its physical"):
        fit_calibration([profile])


def test_refuses_a_calibration_that_predicts_held_out_runs_worse() -> None:
    # Runs priced exactly by the default parameters, measured with +-30% noise: fitting the
    # overheads to the noise can only make unseen runs worse, and k-fold shows it.
    noise = [1.35, 0.7, 1.3, 0.75, 1.4, 0.7, 1.3, 0.8, 1.25, 0.7, 1.35, 0.75, 1.3, 0.7, 1.4]
    observed = []
    for batch in (8, 16, 32):
        training = TrainingSpec(seq_length=128, global_batch_size=batch, precision="fp32")
        observed += observations(training)[:5]
    _, observed = measured([], observed, DEFAULT_PARAMS, factors=noise)
    with pytest.raises(CalibrationError, match="held-out predictions of observed runs worse"):
        fit_calibration([], observed, params=["per_step_overhead_s", "per_microbatch_overhead_s"])


def test_outliers_among_many_micro_benchmarks_are_only_warned_about() -> None:
    series = [
        CollectiveSample(op="all_reduce", size_B=4.0**e, ranks=2, ranks_per_node=2, median_s=1.0)
        for e in range(5, 17)
    ]
    profile = Profile(name="p", device=DeviceInfo(name="cpu"), gpu=GPU, collectives=series)
    (profile,), _ = measured([profile], [], TRUTH)
    repeat = profile.collectives[4].model_copy(
        update={"median_s": profile.collectives[4].median_s * 3}
    )
    noisy = profile.model_copy(update={"collectives": [*profile.collectives, repeat]})
    result = fit_calibration([noisy])
    assert any("1 outlier(s) down-weighted" in warning for warning in result.warnings)
    assert math.isclose(result.params.intra_node_efficiency, 0.6, rel_tol=0.05)
    # Beyond one in ten, the same disagreement is a refusal.
    series = profile.collectives
    repeats = [s.model_copy(update={"median_s": s.median_s * 3}) for s in series[:3]]
    with pytest.raises(CalibrationError, match=r"contradicting samples .* \(3 of 12\)"):
        fit_calibration([profile.model_copy(update={"collectives": [*series, *repeats]})])


# ---- per-collective bandwidth and latency -----------------------------------------------------
PER_OP_TRUTH = TRUTH.model_copy(
    update={
        "all_gather_bandwidth_scale": 0.8,
        "all_gather_latency_scale": 0.5,
        "reduce_scatter_bandwidth_scale": 0.3,
        "all_to_all_latency_scale": 2.0,
        "p2p_bandwidth_scale": 2.0,
        "p2p_latency_scale": 0.25,
    }
)


def collectives_profile(ops: tuple[str, ...]) -> Profile:
    """Each op from latency-bound (1 KiB) to bandwidth-bound (16 MiB) messages."""
    samples = [
        CollectiveSample(op=op, size_B=4.0**e, ranks=2, ranks_per_node=2, median_s=1.0)
        for op in ops
        for e in range(5, 13)
    ]
    return Profile(name="p", device=DeviceInfo(name="cpu"), gpu=GPU, collectives=samples)


def test_recovers_each_collective_s_bandwidth_and_latency_against_all_reduce() -> None:
    ops = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
    (profile,), _ = measured([collectives_profile(ops)], [], PER_OP_TRUTH)
    result = fit_calibration([profile])
    fitted = {change.name: change.after for change in result.changes}
    scales = [f"{op}_{kind}_scale" for op in ops[1:] for kind in ("bandwidth", "latency")]
    for name in ("intra_node_efficiency", "intra_node_latency_us", *scales):
        assert fitted[name] == pytest.approx(getattr(PER_OP_TRUTH, name), rel=0.03), name
    # What moved is exactly what differs from the defaults (all-to-all bandwidth does not).
    differs = {name for name in scales if getattr(PER_OP_TRUTH, name) != 1.0}
    moved = {change.name for change in result.moved}
    assert moved == {"intra_node_efficiency", "intra_node_latency_us", *differs}
    assert result.held_out_mape_after < 0.01 < result.held_out_mape_before


def test_collectives_without_samples_leave_their_scales_alone() -> None:
    (profile,), _ = measured([collectives_profile(("all_reduce", "p2p"))], [], PER_OP_TRUTH)
    result = fit_calibration([profile])
    assert result.params.p2p_bandwidth_scale == pytest.approx(2.0, rel=0.03)
    unmeasured = {
        f"{op}_{kind}_scale"
        for op in ("all_gather", "reduce_scatter", "all_to_all")
        for kind in ("bandwidth", "latency")
    }
    assert unmeasured <= set(result.not_identifiable)
    assert all(getattr(result.params, name) == 1.0 for name in unmeasured)


def test_one_collective_alone_calibrates_the_links_not_its_scale() -> None:
    # Without all-reduce (the reference), an all-gather-only profile cannot tell its links from
    # its own scale: the link parameters take the change, the scales are reported degenerate.
    (profile,), _ = measured([collectives_profile(("all_gather",))], [], PER_OP_TRUTH)
    result = fit_calibration([profile])
    assert set(result.fitted) == {"intra_node_efficiency", "intra_node_latency_us"}
    assert {"all_gather_bandwidth_scale", "all_gather_latency_scale"} <= set(
        result.not_identifiable
    )
    # 0.6 x 0.8: what all-gather's bus bandwidth really is.
    assert result.params.intra_node_efficiency == pytest.approx(0.48, rel=0.03)
    assert result.held_out_mape_after < 0.01


def test_collectives_are_fitted_to_their_trimmed_mean() -> None:
    # Times of a run of collectives add up by their mean: a profile whose trimmed means sit
    # 30% above the medians calibrates to links 30% slower than the medians alone say.
    ops = ("all_reduce", "p2p")
    (profile,), _ = measured([collectives_profile(ops)], [], PER_OP_TRUTH)
    by_median = fit_calibration([profile])
    skewed = [
        s.model_copy(update={"trimmed_mean_s": 1.3 * s.median_s, "high_s": 2 * s.median_s})
        for s in profile.collectives
    ]
    by_mean = fit_calibration([profile.model_copy(update={"collectives": skewed})])
    ratio = by_median.params.intra_node_efficiency / by_mean.params.intra_node_efficiency
    assert ratio == pytest.approx(1.3, rel=0.02)
    assert by_mean.params.p2p_bandwidth_scale == pytest.approx(2.0, rel=0.03)


def gemm_profile(dtypes: tuple[str, ...]) -> Profile:
    """GEMMs of an H100 in ``dtypes`` (times filled in by ``measured``)."""
    return Profile(
        name="gemms",
        device=DeviceInfo(name="NVIDIA H100 80GB HBM3", kind="cuda"),
        gpu=CATALOG["H100-80GB"],
        gemm=[
            GemmSample(m=size, n=size, k=size, dtype=dtype, median_s=1.0)  # type: ignore[arg-type]
            for dtype in dtypes
            for size in (512, 1024, 2048, 4096, 8192)
        ],
    )


def test_recovers_each_datatype_s_gemm_efficiency_against_16_bit() -> None:
    truth = DEFAULT_PARAMS.model_copy(
        update={"gemm_efficiency_scale": 0.9, "gemm_fp8_scale": 0.7, "gemm_fp32_scale": 0.5}
    )
    (profile,), _ = measured([gemm_profile(("bf16", "fp8", "tf32"))], [], truth)
    result = fit_calibration([profile], params=["gemm_efficiency_scale", "gemm_fp8_scale",
                                                "gemm_fp32_scale", "gemm_half_dim"])  # fmt: skip
    for name in ("gemm_efficiency_scale", "gemm_fp8_scale", "gemm_fp32_scale"):
        assert getattr(result.params, name) == pytest.approx(getattr(truth, name), rel=0.02)
    assert {error.source for error in result.held_out} == {"gemm bf16", "gemm fp8", "gemm tf32"}
    assert result.held_out_mape_after < 0.01 < result.held_out_mape_before


def test_one_datatype_alone_calibrates_the_gemm_efficiency_not_its_scale() -> None:
    truth = DEFAULT_PARAMS.model_copy(update={"gemm_fp8_scale": 0.7})
    (profile,), _ = measured([gemm_profile(("fp8",))], [], truth)
    # The truth is DEFAULT_PARAMS-based, so the fit starts there, not at the H100's shipped
    # defaults (another roll-off and FP8 scale, which would be the fitted scale's reference).
    result = fit_calibration(
        [profile], base=DEFAULT_PARAMS, params=["gemm_efficiency_scale", "gemm_fp8_scale"]
    )
    # FP8 GEMMs alone cannot tell the 16-bit efficiency from FP8's own: the shared one moves.
    assert result.fitted == ["gemm_efficiency_scale"]
    assert result.not_identifiable == ["gemm_fp8_scale"]
    assert result.params.gemm_efficiency_scale == pytest.approx(0.7, rel=0.02)


def test_a_datatype_scale_prices_only_its_own_gemms() -> None:
    model, cluster = load_spec("model", "llama3-8b"), load_spec("cluster", "dgx-h100-16n")
    plan = Plan(dp=16, tp=8, pp=1, micro_batch_size=1)
    slow_fp8 = DEFAULT_PARAMS.model_copy(update={"gemm_fp8_scale": 0.5})
    slow_gemms = DEFAULT_PARAMS.model_copy(update={"gemm_efficiency_scale": 0.5})

    def compute_s(precision: str, params: EfficiencyParams) -> float:
        training = TrainingSpec(seq_length=8192, global_batch_size=128, precision=precision)
        return estimate(model, training, cluster, plan, params=params).time_breakdown_s.compute

    # In FP8 training, halving FP8 GEMM efficiency is halving every GEMM's (flash attention and
    # memory-bound kernels keep their own efficiencies), and it is slower than the default.
    assert compute_s("fp8", slow_fp8) == pytest.approx(compute_s("fp8", slow_gemms), rel=1e-12)
    assert compute_s("fp8", slow_fp8) > compute_s("fp8", DEFAULT_PARAMS)
    # In BF16 training it changes nothing, though BF16 GEMMs do respond to their own efficiency.
    assert compute_s("bf16", slow_fp8) == compute_s("bf16", DEFAULT_PARAMS)
    assert compute_s("bf16", slow_gemms) > compute_s("bf16", DEFAULT_PARAMS)
