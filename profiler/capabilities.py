"""Which dtypes this device runs natively, so a profile does not spend minutes timing a format
the hardware only emulates (a CPU without AVX512-BF16/AMX runs BF16 matmuls ~40x slower than
FP32: 0.0021 vs 0.088 TFLOP/s measured on a 2-core AVX2 VM), and says what it left out.

GPUs: BF16 and TF32 tensor cores need compute capability 8.0 (Ampere; NVIDIA A100 whitepaper,
"Third-generation Tensor Cores"). CPUs: measured, since ISA flags do not say whether the BLAS
uses them: a dtype whose 256^3 matmul rate is under ``EMULATED_BELOW`` of FP32's is emulated.
"""

import time
from collections.abc import Sequence

import torch

# Native BF16 (AMX, AVX512-BF16) runs at or above FP32's rate; emulation at a few percent of it.
# Half of FP32 separates the two with a wide margin either way.
EMULATED_BELOW = 0.5
_PROBE_N = 256
# Largest GEMM side an emulated dtype is timed at with --full (seconds, not minutes, per shape).
EMULATED_MAX_SIDE = 256


def _matmul_rate(dtype: torch.dtype, device: torch.device) -> float:
    a = torch.randn(_PROBE_N, _PROBE_N, device=device, dtype=dtype)
    b = torch.randn(_PROBE_N, _PROBE_N, device=device, dtype=dtype)
    torch.matmul(a, b)  # warm-up: library dispatch, caches
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * _PROBE_N**3 / max(best, 1e-9)


def emulated_dtypes(kind: str, dtypes: Sequence[str], torch_dtypes: dict[str, torch.dtype]) -> dict:
    """dtype -> why it is not native here, for the ``dtypes`` this device only emulates."""
    if kind == "cuda":
        major, _minor = torch.cuda.get_device_capability(0)
        if major >= 8:
            return {}
        reason = f"compute capability {major}.x has no BF16/TF32 tensor cores (needs 8.0)"
        return {dtype: reason for dtype in dtypes if dtype in ("bf16", "tf32")}
    device = torch.device("cpu")
    fp32 = _matmul_rate(torch.float32, device)
    found = {}
    for dtype in dtypes:
        if torch_dtypes[dtype] == torch.float32:
            continue
        ratio = _matmul_rate(torch_dtypes[dtype], device) / fp32
        if ratio < EMULATED_BELOW:
            found[dtype] = f"{dtype} matmuls run at {ratio:.0%} of fp32's rate here (emulated)"
    return found
