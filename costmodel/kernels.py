"""Kernel-time primitives: the per-GPU hardware arrays and the three kinds of kernel time.

The stage model (``costmodel.stage``) and calibration (``costmodel.calibration.points``) price
work with these same functions, so a parameter fitted on micro-benchmarks means exactly what the
model means by it:

- GEMMs: FLOPs / (peak x efficiency(shape)), the efficiency rolling off with the GEMM's smallest
  dimension (tile and wave quantization).
- Fused attention (FlashAttention): FLOPs on the full s x s square / the GPU's achieved fused
  attention throughput; the backward pass at ``FLASH_BACKWARD_FACTOR`` times the forward.
- Memory-bound kernels (norms, residual adds, activation functions, softmax, the optimizer
  step): bytes moved / achieved HBM bandwidth.

Arguments broadcast elementwise (scalars, or ``(n_instances,)`` arrays of stage instances);
times are seconds. See README.md, 'How the cost model works'.
"""

from dataclasses import dataclass

import numpy as np

Array = np.ndarray

# FlashAttention's backward recomputes the scores: 2.5x its forward FLOPs (Dao et al. 2022
# Sec. 3.1), where GEMMs and elementwise kernels take 2x (input and weight gradients).
# Calibration prices measured attention backward passes with the same factor.
FLASH_BACKWARD_FACTOR = 2.5


@dataclass
class Hardware:
    """Per stage instance: the GPU and links it runs on (arrays), efficiencies applied where
    they are properties of the hardware (``hardware_arrays.group_hardware`` builds it)."""

    gemm_peak_Fps: Array  # FLOP/s of the GEMM datatype
    attention_peak_Fps: Array  # 16-bit peak (attention runs in bf16/fp16 even under FP8)
    gemm_efficiency: Array
    attention_gemm_efficiency: Array  # unfused attention's GEMMs, in the attention datatype
    attention_Fps: Array  # achieved fused-attention FLOP/s on the full s x s count
    hbm_Bps: Array  # datasheet HBM bandwidth
    memory_Bps: Array  # achieved bandwidth of memory-bound kernels
    capacity_gib: Array
    intra_Bps: Array  # scale-up, per GPU, one direction (already x NCCL efficiency)
    inter_Bps: Array  # scale-out, per GPU, one direction (already x NCCL efficiency)
    intra_latency_s: Array  # per ring step inside the scale-up domain
    inter_latency_s: Array  # per ring step across it
    gpus_per_node: Array


def gemm_time_s(
    flops: Array | float,
    tokens: Array | float,
    n: Array | float,
    k: Array | float,
    hw: Hardware,
    half: float,
) -> Array:
    """Time of GEMMs totalling ``flops`` whose shape is (tokens x k) @ (k x n).

    Efficiency rolls off with the GEMM's size d = min(tokens, sqrt(n * k)) as d / (d + half):
    small weight shards (high tp, small hidden sizes, thin expert batches) leave tiles and SMs
    idle (wave quantization) and are closer to memory-bound.
    """
    size = np.minimum(tokens, np.sqrt(n * k))
    rolloff = size / (size + half)
    return flops / (hw.gemm_peak_Fps * hw.gemm_efficiency * rolloff)


def fused_attention_s(flops: Array, hw: Hardware) -> Array:
    """Forward time of fused attention doing ``flops`` on the full (non-causal) s x s count."""
    return flops / hw.attention_Fps


def memory_bound_s(moved_B: Array, hw: Hardware) -> Array:
    """Time of memory-bound kernels moving ``moved_B`` bytes through HBM."""
    return moved_B / hw.memory_Bps
