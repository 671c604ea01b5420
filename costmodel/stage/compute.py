"""Compute time of one micro-batch on one stage: forward, backward and recompute.

- Layer GEMMs (QKV, projection, MLP or routed/shared experts and router) from the layer shape,
  sharded by tp (Megatron-LM column/row parallel linears, Shoeybi et al. 2019 Sec. 3).
- Attention core: fused (FlashAttention) on the full s x s FLOP count, or unfused batched GEMMs
  with a head_dim inner dimension plus softmax/dropout traffic over the score matrix
  (Korthikanti et al. 2022 Sec. 4.1).
- Memory-bound kernels (norms, residual adds, dropout, activation functions, rotary embedding,
  MoE permutation) from the tensors Korthikanti et al. Sec. 4.1 lists.
- Backward = 2x forward for GEMMs and elementwise kernels (input and weight gradients),
  ``FLASH_BACKWARD_FACTOR`` x for the fused attention core.
- Recompute re-runs the layers' forward (full) or the attention core (selective; Korthikanti
  et al. Sec. 5).
- FP8 GEMMs add their quantization kernels (``fp8_casts``).
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from costmodel.context import ModelContext
from costmodel.flops import LayerShape
from costmodel.kernels import (
    FLASH_BACKWARD_FACTOR,
    Hardware,
    fused_attention_s,
    gemm_time_s,
    memory_bound_s,
)
from costmodel.stage.fp8_casts import cast_bytes_per_token
from costmodel.stage.inputs import Array, StageInputs, by_recompute, sequence_divisor

# Cross-entropy over the vocabulary shard, forward + backward, in HBM bytes per logit:
# implementations range from ~6-12 B (flash-attn's fused xentropy: read the 16-bit logits
# twice, write the gradient) to ~30-36 B (Megatron's vocab-parallel and PyTorch's unfused paths
# materialize an fp32 copy, exp/log-softmax and an fp32 gradient). We do not know which kernel a
# job runs, so time takes the middle of that range, 24 B; memory follows ``fused_cross_entropy``.
LOSS_BYTES_PER_LOGIT = 24.0


@dataclass
class ComputeTimes:
    """One micro-batch's compute on one stage, and the parts other terms overlap with."""

    forward_s: Array
    backward_s: Array
    recompute_s: Array
    attention_core_s: Array  # one layer's attention core, forward (CP hides its ring behind it)
    # Per layer, forward: how long the GPU waits for the host to issue kernels (the host floor
    # over the kernels' own time). The ring exchange runs then too: its copy engines are idle.
    host_slack_s: Array
    weight_grad_s: Array  # weight-gradient GEMMs of the stage (TP backward hides behind them)


def load_imbalance(ctx: ModelContext, st: StageInputs) -> Array:
    """Routed tokens the paced expert rank processes / the mean: the capacity every expert is
    padded to when tokens are dropped (``moe_capacity_factor``), else (dropless) the busiest
    expert-parallel rank's load, ``moe_load_imbalance`` (1 without expert parallelism)."""
    if ctx.moe_capacity_factor is not None:
        return np.full_like(st.ep, ctx.moe_capacity_factor, dtype=float)
    return np.where(st.ep > 1, ctx.params.moe_load_imbalance, 1.0)


def _mla_projection_gemm_s(
    shape: LayerShape, st: StageInputs, tokens: Array, gemm: Callable[..., Array]
) -> Array:
    """Multi-head latent attention's projections, forward, as Megatron-Core runs them
    (megatron/core/transformer/multi_latent_attention.py, ``MLASelfAttention``, with the
    ``gpt_layer_specs`` MLA spec): the down-projections W_DQ (h x q_lora) and W_DKV
    (h x (kv_lora + rope)) are ``TELinear(parallel_mode="duplicated")``, whole on every TP rank
    and run on its tokens (the sequence shard under sequence parallelism, all tokens without);
    the up-projections W_UQ (q_lora x n (nope + rope); W_Q from h without query compression)
    and W_UKV (kv_lora x n (nope + v)) are column-parallel and W_O (n v x h) row-parallel, so
    they shard by tp as the QKV and projection GEMMs do. Separate GEMMs, each with its roll-off.
    """
    h, tp = shape.hidden, st.tp
    down_rows = tokens / sequence_divisor(st)
    q_down = gemm(float(shape.q_lora), h, down_rows) if shape.q_lora else 0.0
    kv_down = gemm(float(shape.kv_lora + shape.qk_rope), h, down_rows)
    q_up = gemm(shape.q_width / tp, shape.q_lora or h)
    kv_up = gemm(shape.kv_up_width / tp, shape.kv_lora)
    return q_down + kv_down + q_up + kv_up + gemm(h, shape.o_width / tp)


def layer_forward_gemm_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array
) -> tuple[Array, Array, Array]:
    """Forward GEMM time of one layer: (attention projections, dense MLP, MoE MLP)."""
    shape, half = ctx.shape, ctx.params.gemm_half_dim
    h, tp = shape.hidden, st.tp

    def gemm(n: Array | float, k: Array | float, rows: Array = tokens) -> Array:
        return gemm_time_s(2 * rows * n * k, rows, n, k, hw, half)

    if shape.mla:
        attention = _mla_projection_gemm_s(shape, st, tokens, gemm)
    else:
        qkv_out = (shape.q_width + 2 * shape.kv_width) / tp
        attention = gemm(qkv_out, h) + gemm(h, shape.q_width / tp)
    up_width = shape.ffn * (shape.ffn_matrices - 1) / tp
    dense_mlp = gemm(up_width, h) + gemm(h, shape.ffn / tp)
    if not shape.num_experts:
        return attention, dense_mlp, np.zeros_like(dense_mlp)
    # Each GPU hosts E/ep experts, each sharded etp ways; the tp x cp x dp ranks' routed tokens
    # spread over the ep x etp x edp expert ranks, so each expert GEMM here sees
    # tokens * top_k * ep * etp / (E * tp) rows (tokens * top_k * ep / E when etp = tp, the
    # unfolded layout), the busiest rank moe_load_imbalance times that.
    etp = st.expert_tp
    experts_per_gpu = shape.num_experts / st.ep
    expert_tokens = (
        tokens * shape.top_k * st.ep * etp / (shape.num_experts * tp) * load_imbalance(ctx, st)
    )
    expert_up = shape.expert_ffn * (shape.ffn_matrices - 1) / etp
    routed = experts_per_gpu * (
        gemm(expert_up, h, expert_tokens) + gemm(h, shape.expert_ffn / etp, expert_tokens)
    )
    shared = shape.shared_experts * (gemm(expert_up, h) + gemm(h, shape.expert_ffn / tp))
    router = gemm(float(shape.num_experts), h)
    return attention, dense_mlp, routed + shared + router


def attention_core_forward_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array
) -> Array:
    """Scores + softmax + weighted sum of one layer, forward.

    FLOPs ``2 tokens s (q_width + o_width) / tp`` (``LayerShape.attention_core_flops``): 4 s h_q
    per token when query/key and value heads are equally wide; under MLA queries/keys of
    nope + rope and values of v_head_dim. The unfused GEMMs' size roll-off uses the mean of the
    two head widths.
    """
    shape, params = ctx.shape, ctx.params
    flops = 2.0 * tokens * ctx.seq_length * (shape.q_width + shape.o_width) / st.tp
    if ctx.flash_attention:
        return fused_attention_s(flops, hw)
    head_dim = (shape.q_width + shape.o_width) / (2 * shape.heads)
    gemm = flops / (
        hw.attention_peak_Fps
        * hw.attention_gemm_efficiency
        * head_dim
        / (head_dim + params.gemm_half_dim)
    )
    # Fused scale-mask-softmax reads and writes the score matrix (2 + 2 bytes per element);
    # dropout adds a read, a write and a 1-byte mask (Korthikanti et al. Sec. 4.1).
    score_elements = tokens * ctx.seq_length * shape.heads / st.tp
    bytes_per_element = 4.0 + (5.0 if ctx.dropout else 0.0)
    return gemm + memory_bound_s(score_elements * bytes_per_element, hw)


def layer_forward_elementwise_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array
) -> tuple[Array, Array]:
    """Memory-bound kernels of one layer, forward: (dense layer, MoE layer) seconds."""
    shape, act_B = ctx.shape, ctx.activation_bytes
    h = shape.hidden
    # Outside the tensor-parallel region (sharded only under sequence parallelism): 2 norms
    # (read + write h), 2 residual adds (read 2h, write h), optionally 2 dropouts (read, write,
    # 1-byte mask).
    replicated_elems = 2 * 2 * h + 2 * 3 * h
    replicated_B: Array | float = replicated_elems * act_B + (
        2 * (2 * h * act_B + h) if ctx.dropout else 0.0
    )
    replicated_B = replicated_B / sequence_divisor(st)
    # Inside: the activation function over the FFN width (GeLU: read f, write f; SwiGLU: read
    # 2f, write f), sharded by tp. Rotary embeddings on q and k (SwiGLU-era models).
    act_elems_per_ffn = 3.0 if ctx.swiglu else 2.0
    rope_B = 2 * (shape.q_width + shape.kv_width) * act_B if ctx.swiglu else 0.0
    dense_tp_B = (act_elems_per_ffn * shape.ffn * act_B + rope_B) / st.tp
    # MoE: routed copies of the token (permute in, unpermute out: read + write h each) and the
    # experts' activation functions over top_k (+ shared) expert widths.
    active = shape.top_k + shape.shared_experts
    moe_tp_B = (
        active * act_elems_per_ffn * shape.expert_ffn * act_B + 4 * shape.top_k * h * act_B + rope_B
    ) / st.tp
    return (
        memory_bound_s(tokens * (replicated_B + dense_tp_B), hw),
        memory_bound_s(tokens * (replicated_B + moe_tp_B), hw),
    )


def forward_kernels_per_layer(ctx: ModelContext) -> tuple[float, float]:
    """Kernels one layer's forward issues: (dense layer, MoE layer).

    The kernels this module prices: QKV and projection GEMMs, the MLP's GEMMs (2 GeLU, 3
    SwiGLU), 2 norms, 2 residual adds, the activation (SwiGLU: + the gating multiply), rotary
    embedding on q and k (SwiGLU-era models), the attention core (fused: 1; unfused: 2 batched
    GEMMs + softmax, + dropout), 2 dropouts when present and 2 TP collectives; an MoE layer adds
    the router GEMM, top-k, permute and unpermute and runs its experts as grouped GEMMs.
    """
    shape = ctx.shape
    attention = 2.0 + (1.0 if ctx.flash_attention else 3.0 + float(ctx.dropout))
    elementwise = 4.0 + (2.0 if ctx.swiglu else 1.0) + (2.0 if ctx.swiglu else 0.0)
    common = attention + elementwise + (2.0 if ctx.dropout else 0.0) + 2.0
    dense = common + shape.ffn_matrices
    moe = common + shape.ffn_matrices * (1 + min(shape.shared_experts, 1)) + 4.0
    return dense, moe


def _fp8_cast_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array
) -> tuple[Array, Array]:
    """FP8 quantization kernels of the stage's layers: (forward, backward) seconds."""
    dense_fwd, dense_bwd, moe_fwd, moe_bwd = cast_bytes_per_token(ctx)
    if not (dense_fwd or moe_fwd):
        return np.zeros_like(tokens), np.zeros_like(tokens)
    per_gpu = tokens / st.tp

    def seconds(dense_B: float, moe_B: float) -> Array:
        return memory_bound_s(per_gpu * (st.dense_layers * dense_B + st.moe_layers * moe_B), hw)

    return seconds(dense_fwd, moe_fwd), seconds(dense_bwd, moe_bwd)


def compute_times(ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array) -> ComputeTimes:
    """Forward, backward and recompute time of one micro-batch on this stage.

    A layer's GPU time is floored by the host time to issue its kernels (``host_op_overhead_us``
    per kernel; the backward issues twice the forward's: input and weight gradients, and an
    autograd node per op): kernels run asynchronously, so the slower of the two sets the pace.
    """
    shape, half = ctx.shape, ctx.params.gemm_half_dim
    h, layers = shape.hidden, st.layers
    attn_gemm, dense_mlp, moe_mlp = layer_forward_gemm_s(ctx, st, hw, tokens)
    core = attention_core_forward_s(ctx, st, hw, tokens)
    dense_elem, moe_elem = layer_forward_elementwise_s(ctx, st, hw, tokens)
    dense_kernels, moe_kernels = forward_kernels_per_layer(ctx)
    issue_s = ctx.params.host_op_overhead_us * 1e-6
    dense_gpu = attn_gemm + dense_mlp + core + dense_elem
    moe_gpu = attn_gemm + moe_mlp + core + moe_elem
    dense_fwd = np.maximum(dense_gpu, dense_kernels * issue_s)
    moe_fwd = np.maximum(moe_gpu, moe_kernels * issue_s)
    slack = st.dense_layers * (dense_fwd - dense_gpu) + st.moe_layers * (moe_fwd - moe_gpu)
    cast_fwd, cast_bwd = _fp8_cast_s(ctx, st, hw, tokens)
    kernels_fwd = st.dense_layers * dense_fwd + st.moe_layers * moe_fwd  # 2x in backward
    layers_fwd = kernels_fwd + cast_fwd
    vocab_tp = shape.vocab / st.tp
    head_fwd = gemm_time_s(2 * tokens * h * vocab_tp, tokens, vocab_tp, h, hw, half)
    loss_s = memory_bound_s(tokens * vocab_tp * LOSS_BYTES_PER_LOGIT, hw)
    embed_s = memory_bound_s(tokens * h * ctx.activation_bytes * 3.0, hw)
    forward = layers_fwd + st.has_head * (head_fwd + loss_s / 3.0) + st.has_embedding * embed_s
    # The fused attention core's backward is FLASH_BACKWARD_FACTOR x its forward; the excess
    # over the 2x every other kernel takes is added here.
    attention_bwd_extra = (
        (FLASH_BACKWARD_FACTOR - 2.0) * layers * core if ctx.flash_attention else 0.0
    )
    backward = (
        2.0 * kernels_fwd
        + cast_bwd
        + attention_bwd_extra
        + st.has_head * (2.0 * head_fwd + 2.0 * loss_s / 3.0)
        + (st.has_embedding * embed_s)
    )
    weight_grad = (
        st.dense_layers * (attn_gemm + dense_mlp)
        + st.moe_layers * (attn_gemm + moe_mlp)
        + st.has_head * head_fwd
    )
    return ComputeTimes(
        forward_s=forward,
        backward_s=backward,
        recompute_s=by_recompute(st.recompute, full=layers_fwd, selective=layers * core),
        attention_core_s=core,
        host_slack_s=slack / np.maximum(layers, 1),
        weight_grad_s=weight_grad,
    )


def hardware_flops_per_microbatch(ctx: ModelContext, st: StageInputs, tokens: Array) -> Array:
    """FLOPs this GPU executes per micro-batch, recompute included (HFU's numerator)."""
    shape = ctx.shape
    core = shape.attention_core_flops(ctx.seq_length)
    dense = shape.attention_proj_flops + shape.dense_mlp_flops + core
    moe = shape.attention_proj_flops + shape.moe_mlp_flops + core
    layer_fwd = tokens * (st.dense_layers * dense + st.moe_layers * moe) / st.tp
    head = st.has_head * tokens * shape.logits_flops / st.tp
    recompute = by_recompute(
        st.recompute, full=layer_fwd, selective=tokens * st.layers * core / st.tp
    )
    return 3.0 * (layer_fwd + head) + recompute
