"""Quantization traffic of FP8 training (NVIDIA Transformer Engine's delayed scaling).

An FP8 GEMM needs FP8 operands. Per layer and token (Transformer Engine 1.x, ``Linear`` and
``LayerNormLinear``; Micikevicius et al. 2022, "FP8 Formats for Deep Learning"):

- forward: the QKV and FC1 inputs are written in FP8 by the fused norm (1 extra byte per
  element); the projection and FC2 inputs are cast by their own kernel (read 2 bytes, write 1);
- backward: each GEMM's output gradient is cast and transposed (read 2 bytes, write 2 x 1) for
  its data- and weight-gradient GEMMs, and each saved FP8 input is transposed for the
  weight-gradient GEMM (read 1, write 1).

All of it streams through HBM (memory-bound) and is sharded like the GEMMs (by tp). Amax
reductions and weight casts (once per step, not per micro-batch) are small and not priced.
"""

from costmodel.context import ModelContext


def cast_bytes_per_token(ctx: ModelContext) -> tuple[float, float, float, float]:
    """(dense forward, dense backward, MoE forward, MoE backward) HBM bytes per token and layer
    before tp sharding; zeros unless the GEMMs run in FP8."""
    if ctx.precision != "fp8":
        return 0.0, 0.0, 0.0, 0.0
    shape = ctx.shape
    h, q, kv = shape.hidden, shape.q_width, shape.kv_width
    # Attention: QKV input (fused norm) and projection input (own cast); backward casts the QKV
    # and projection output gradients and transposes both saved inputs.
    attention_fwd = 1.0 * h + 3.0 * q
    attention_bwd = 4.0 * (q + 2 * kv + h) + 2.0 * (h + q)

    def mlp(ffn: float) -> tuple[float, float]:
        """FC1 input (fused norm), FC2 input (own cast); backward as the attention's."""
        up = ffn * (shape.ffn_matrices - 1)
        return 1.0 * h + 3.0 * ffn, 4.0 * (up + h) + 2.0 * (h + ffn)

    dense_fwd, dense_bwd = mlp(shape.ffn)
    expert_fwd, expert_bwd = mlp(shape.expert_ffn)
    active = shape.top_k + shape.shared_experts
    return (
        attention_fwd + dense_fwd,
        attention_bwd + dense_bwd,
        attention_fwd + active * expert_fwd,
        attention_bwd + active * expert_bwd,
    )
