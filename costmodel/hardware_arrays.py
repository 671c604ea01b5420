"""Turn a node group into the per-stage ``Hardware`` arrays the stage model consumes."""

from functools import lru_cache

import numpy as np

from costmodel.hardware import (
    DEFAULT_GEMM_EFFICIENCY,
    attention_precision,
    group_links_GBps,
    peak_tflops,
    resolve_gpu,
)
from costmodel.kernels import Hardware
from costmodel.params import EfficiencyParams
from costmodel.specs import GpuSpec, NodeGroup


def mfu_peak_tflops(gpu: GpuSpec, precision: str) -> float:
    """Peak MFU is reported against: the 16-bit peak for 16-bit and FP8 training (torchtitan and
    NeMo quote FP8 runs' MFU against BF16 peak), TF32/FP32 peaks otherwise."""
    return peak_tflops(gpu, "bf16" if precision == "fp8" else precision)


def scale_up_domain(group: NodeGroup, gpu: GpuSpec) -> int:
    """GPUs that share the scale-up fabric: the node, or a larger NVLink domain (GB200 NVL72)."""
    return min(max(group.gpus_per_node, gpu.nvlink_domain_gpus or 0), group.num_gpus)


@lru_cache(maxsize=1024)
def group_hardware(
    group: NodeGroup, precision: str, params: EfficiencyParams, size: int = 1
) -> Hardware:
    """Hardware arrays of one node group (cached: treat the result as read-only)."""
    gpu = resolve_gpu(group.gpu)
    intra_GBps, inter_GBps = group_links_GBps(group)
    attention_dtype = attention_precision(precision)
    efficiency = (gpu.gemm_efficiency or DEFAULT_GEMM_EFFICIENCY) * params.gemm_efficiency_scale

    def full(value: float) -> np.ndarray:
        return np.full(size, float(value))

    attention_peak_Fps = peak_tflops(gpu, attention_dtype) * 1e12
    return Hardware(
        gemm_peak_Fps=full(peak_tflops(gpu, precision) * 1e12),
        attention_peak_Fps=full(attention_peak_Fps),
        gemm_efficiency=full(min(1.0, efficiency * params.gemm_dtype_scale(precision))),
        attention_gemm_efficiency=full(
            min(1.0, efficiency * params.gemm_dtype_scale(attention_dtype))
        ),
        attention_Fps=full(attention_peak_Fps * params.attention_efficiency),
        hbm_Bps=full(gpu.hbm_GBps * 1e9),
        memory_Bps=full(gpu.hbm_GBps * 1e9 * params.memory_bound_efficiency),
        capacity_gib=full(gpu.hbm_gib),
        intra_Bps=full(intra_GBps * 1e9 * params.intra_node_efficiency),
        inter_Bps=full(inter_GBps * 1e9 * params.inter_node_efficiency),
        intra_latency_s=full(params.intra_node_latency_us * 1e-6),
        inter_latency_s=full(params.inter_node_latency_us * 1e-6),
        gpus_per_node=full(scale_up_domain(group, gpu)),
    )


def concat_hardware(parts: list[Hardware]) -> Hardware:
    """One ``Hardware`` of the arrays of ``parts`` concatenated, in stage instance order."""
    return Hardware(
        **{
            name: np.concatenate([getattr(part, name) for part in parts])
            for name in Hardware.__dataclass_fields__
        }
    )
