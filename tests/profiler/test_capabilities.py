"""What ``autopar profile`` leaves out on a device that only emulates a dtype, and what it says
``--full`` will cost (no torch kernels timed here: the rates are given)."""

import pytest

pytest.importorskip("torch")

from costmodel.observations import DeviceInfo, GemmSample, MemorySample, Profile
from profiler import capabilities, compute
from profiler.duration import predicted_duration_s
from profiler.runner import shapes_for, with_native_dtypes
from profiler.sweeps import sweep_for


def rates(monkeypatch: pytest.MonkeyPatch, **per_dtype: float) -> None:
    """Pretend matmuls of each torch dtype run at the given FLOP/s."""
    by_torch = {compute.TORCH_DTYPES[name]: rate for name, rate in per_dtype.items()}
    monkeypatch.setattr(capabilities, "_matmul_rate", lambda dtype, device: by_torch[dtype])


def test_an_emulated_dtype_is_left_out_of_the_default_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rates(monkeypatch, fp32=88e9, bf16=2.1e9)  # the 2-core AVX2 machine's 0.088 / 0.0021 TFLOP/s
    sweep = with_native_dtypes(sweep_for("cpu", "default"), "cpu", "default")
    assert sweep.dtypes == ["fp32"]
    assert "emulated" in sweep.skipped["bf16"] and "2%" in sweep.skipped["bf16"]


def test_a_native_dtype_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    rates(monkeypatch, fp32=1e12, bf16=2e12)  # AMX: BF16 faster than FP32
    sweep = with_native_dtypes(sweep_for("cpu", "default"), "cpu", "default")
    assert sweep.dtypes == ["fp32", "bf16"] and not sweep.skipped


def test_full_times_an_emulated_dtype_at_small_gemms_only(monkeypatch: pytest.MonkeyPatch) -> None:
    rates(monkeypatch, fp32=88e9, bf16=2.1e9)
    sweep = with_native_dtypes(sweep_for("cpu", "full"), "cpu", "full")
    assert sweep.dtypes == ["fp32", "bf16"] and "bf16" in sweep.emulated
    assert max(max(shape) for shape in shapes_for(sweep, "bf16")) <= capabilities.EMULATED_MAX_SIDE
    assert shapes_for(sweep, "fp32") == sweep.gemm_shapes


def measured(gemm_flops_per_s: float) -> Profile:
    gemm = [
        GemmSample(
            m=n,
            n=n,
            k=n,
            dtype="fp32",
            median_s=2 * n**3 / gemm_flops_per_s,
            low_s=2 * n**3 / gemm_flops_per_s,
            high_s=2 * n**3 / gemm_flops_per_s,
            repeats=7,
        )
        for n in (128, 256, 512)
    ]
    memory = [
        MemorySample(
            kernel="copy",
            bytes=64e6,
            dtype="fp32",
            median_s=0.01,
            low_s=0.01,
            high_s=0.01,
            repeats=7,
        )
    ]
    return Profile(
        name="cpu",
        device=DeviceInfo(name="cpu", kind="cpu", ranks=1),
        gemm=gemm,
        memory=memory,
        gpu={"name": "cpu", "bf16_tflops": 0.1, "hbm_gib": 8, "hbm_GBps": 6.4},
    )


def test_full_is_predicted_longer_than_default_and_slower_machines_longer() -> None:
    fast, slow = measured(1e12), measured(1e10)
    default = sweep_for("cpu", "default")
    full = sweep_for("cpu", "full")
    assert predicted_duration_s(fast, full, 1) > predicted_duration_s(fast, default, 1)
    assert predicted_duration_s(slow, full, 1) > predicted_duration_s(fast, full, 1)
