"""GPU type spellings of ``runs.csv`` -> cost-model GPU specs, and the generation of each."""

from typing import Literal

from costmodel.hardware import CATALOG, UnknownGpuError, lookup_gpu
from costmodel.specs import GpuSpec

Generation = Literal["A100", "H100-class", "Blackwell", "other"]

# Meta's H100 variants in torchtitan's benchmarks: HBM2e parts (96 GB, 2.4 TB/s per the
# torchtitan benchmark file) at a 500 W limit, whose peak torchtitan places "between SXM and
# NVL": we interpolate linearly in power between H100 NVL (400 W, 835 TF BF16 dense, datasheet)
# and H100 SXM (700 W, 989.4 TF): 835 + (500 - 400) / 300 * 154.4 = 886 TF.
_META_H100_BF16_TFLOPS = 835.0 + (500.0 - 400.0) / 300.0 * (989.4 - 835.0)
META_H100 = CATALOG["H100-80GB"].model_copy(
    update={
        "name": "H100-96GB-HBM2e-500W",
        "hbm_gib": 96.0,
        "hbm_GBps": 2400.0,
        "bf16_tflops": _META_H100_BF16_TFLOPS,
        "fp16_tflops": _META_H100_BF16_TFLOPS,
        # Hopper's FP8 tensor peak is twice its BF16 peak (H100 datasheet: 1,979 vs 989 TF).
        "fp8_tflops": 2 * _META_H100_BF16_TFLOPS,
    }
)

GPU_ALIASES: dict[str, GpuSpec] = {
    "A100-SXM4-80GB": CATALOG["A100-80GB"],
    "A100-80GB": CATALOG["A100-80GB"],
    "A100-SXM4-40GB": CATALOG["A100-40GB"],
    "A100-40GB": CATALOG["A100-40GB"],
    "H100-SXM5-80GB (DGX-H100)": CATALOG["H100-80GB"],
    # NVIDIA/dgxc-benchmarking v24.11.1: DGX Cloud, DGX H100 nodes (H100 SXM5 80 GB, 8 per node).
    "H100-SXM5-80GB (DGX Cloud, DGX H100 nodes)": CATALOG["H100-80GB"],
    # Megatron-LM README rows: SKU not stated; their MFU is consistent with the SXM 989 TF peak.
    "H100": CATALOG["H100-80GB"],
    "H200": CATALOG["H200-141GB"],
    "H100 (Meta Grand Teton, 96GB HBM2e, 2.4 TB/s, 500W limit)": META_H100,
    "H100 (HBM2e ~94-95GB, lower-TDP SXM)": META_H100,
}

_GENERATION_PREFIXES: tuple[tuple[tuple[str, ...], Generation], ...] = (
    (("A100",), "A100"),
    (("H100", "H200"), "H100-class"),
    (("B200", "GB200", "B300", "GB300"), "Blackwell"),
)


def gpu_for(gpu_type: str) -> GpuSpec | None:
    """The spec for a ``gpu_type`` cell: an alias above, else a catalog name; None if neither."""
    alias = GPU_ALIASES.get(gpu_type.strip())
    if alias is not None:
        return alias
    try:
        return lookup_gpu(gpu_type.strip())
    except UnknownGpuError:
        return None


def generation(gpu: GpuSpec) -> Generation:
    """The GPU generation slice a spec falls in (by catalog name)."""
    for prefixes, label in _GENERATION_PREFIXES:
        if gpu.name.startswith(prefixes):
            return label
    return "other"
