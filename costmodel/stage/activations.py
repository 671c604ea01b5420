"""Activation memory of one stage at its peak, and the other per-GPU memory it needs.

Per layer: Korthikanti et al. 2022 Table 2 generalized to GQA, SwiGLU, MoE and optional
dropout. In flight: 1F1B keeps min(p - i, m) micro-batches on stage i (Narayanan et al. SC'21
Sec. 2.2), interleaving L (1 + (p - 1)/(p v)) layers on stage 0 (Korthikanti et al. Sec.
4.2.3), GPipe all m. The table as quoted: validation/formulas.md; README.md, 'How the cost
model works' (memory, and what ``peak_memory_gib`` reports).
"""

from dataclasses import dataclass

import numpy as np

from costmodel.context import ModelContext
from costmodel.stage.inputs import (
    RECOMPUTE_FULL,
    RECOMPUTE_NONE,
    Array,
    StageInputs,
    sequence_divisor,
)
from costmodel.stage.state import StageParams


@dataclass
class LayerActivations:
    """Stored activation bytes of one layer and one micro-batch."""

    dense_B: Array
    moe_B: Array
    checkpoint_B: Array  # the layer input full recompute keeps instead


def layer_activation_bytes(ctx: ModelContext, st: StageInputs, tokens: Array) -> LayerActivations:
    """Korthikanti et al. 2022 Table 2 generalized; in units of tokens * h bytes (they use
    s*b*h with 16-bit activations):

      outside TP: 2 norm inputs (4) + QKV input (2) + MLP input (2) + dropout masks (2)
      inside TP:  Q, K, V (2 + 4 * kv/q) + projection input (2) + FFN internals
                  + attention core (5as/h unfused with dropout, 2as/h without, 0 fused).

    FFN internals: GeLU keeps the FC1 output and the FC2 input (2f/h + 2f/h); SwiGLU keeps the
    FC1 output (gate and up, 4f/h) and the FC2 input (2f/h): Megatron-Core's fused bias-SwiGLU
    saves only its input and recomputes the activation in backward
    (megatron/core/fusions/fused_bias_swiglu.py), as torch.compile's min-cut partitioner does.
    Under FP8, Transformer Engine saves each linear's input as its FP8 cast (1 byte instead of
    2): the QKV, projection, FC1 and FC2 inputs.

    Multi-head latent attention (Megatron-Core ``MLASelfAttention``, the up-projected training
    path): the core keeps Q and K (heads * (nope + rope) each) and V (heads * v), the
    projection its input (heads * v, the core's output); the shared rotary key is broadcast
    into K (RoPE's backward needs only cos/sin). Each latent (q_lora_rank, kv_lora_rank) keeps
    its RMSNorm's input (2) and its up-projection's input (2, FP8: 1), outside the TP region:
    the down-projections are duplicated on every TP rank (sharded only under sequence
    parallelism). Megatron's optional up-projection recompute (``mla_up_proj``) is not modelled.
    """
    shape = ctx.shape
    h = float(shape.hidden)
    sp_div = sequence_divisor(st)
    # A linear's saved input: 2 bytes per element, 1 when Transformer Engine keeps it in FP8.
    linear_input = 1.0 if ctx.precision == "fp8" else 2.0
    outside = 4.0 + 2.0 * linear_input + (2.0 if ctx.dropout else 0.0)
    q_ratio = shape.q_width / h
    kv_ratio = shape.kv_width / h
    # The projection's input is the core's output: heads * v head dim (q_width but under MLA).
    attention_inside = 2 * q_ratio + 4 * kv_ratio + linear_input * (shape.o_width / h)
    # MLA's latents: norm input + up-projection input each (0 without MLA).
    outside += (2.0 + linear_input) * (shape.q_lora + shape.kv_lora) / h
    fc1_output = 4.0 if ctx.swiglu else 2.0  # gate and up, or the GeLU input
    ffn_factor = fc1_output + linear_input
    dense_ffn = ffn_factor * shape.ffn / h
    active = shape.top_k + shape.shared_experts
    # Routed experts keep their input copy (2) and internals per active expert.
    moe_ffn = active * (2.0 + ffn_factor * shape.expert_ffn / h)
    if ctx.flash_attention:
        core = 0.0
    else:
        core = (5.0 if ctx.dropout else 2.0) * shape.heads * ctx.seq_length / h
    core_kept = np.where(st.recompute == RECOMPUTE_NONE, core, 0.0)
    per_token_B = h * (ctx.activation_bytes / 2.0)
    dense = (
        tokens
        * per_token_B
        * (outside / sp_div + (attention_inside + dense_ffn + core_kept) / st.tp)
    )
    moe = (
        tokens * per_token_B * (outside / sp_div + (attention_inside + moe_ffn + core_kept) / st.tp)
    )
    return LayerActivations(
        dense_B=dense, moe_B=moe, checkpoint_B=tokens * per_token_B * 2.0 / sp_div
    )


def inflight_layers(
    pp: Array | int,
    vpp: Array | int,
    stage_index: Array,
    microbatches: Array | float,
    layers: Array | float,
    gpipe: Array | int,
) -> Array:
    """Layers' worth of one micro-batch's activations a stage holds at its peak.

    1F1B: stage i keeps min(p - i, m) micro-batches (Narayanan et al. Sec. 2.2); interleaved
    with v chunks: Megatron's warm-up runs (p - i - 1) * 2 + (v - 1) * p + 1 chunks of L/(pv)
    layers, which for i = 0 gives L (1 + (p - 1)/(p v)) (Korthikanti et al. Sec. 4.2.3);
    GPipe keeps all m micro-batches.
    """
    p, v, i, m = pp, vpp, stage_index, microbatches
    one_f_one_b = np.minimum(p - i, m) * layers
    chunks = np.minimum((p - i - 1) * 2 + (v - 1) * p + 1, m * v)
    interleaved = chunks * layers / v
    steady = np.where(v > 1, interleaved, one_f_one_b)
    return np.where(gpipe > 0, m * layers, steady)


@dataclass
class ActivationMemory:
    """Per stage instance, shape ``(n_instances,)``: activation bytes at the peak, the in-flight
    part and the in-flight layers."""

    total_B: Array
    inflight_B: Array  # the part that scales with in-flight layers
    inflight_layers: Array


def activation_memory(ctx: ModelContext, st: StageInputs, tokens: Array) -> ActivationMemory:
    """Peak activation bytes of the stage: in-flight micro-batches' stored activations, the
    layer full recompute re-materializes, the embedding output and the loss's logits."""
    shape, act_B = ctx.shape, ctx.activation_bytes
    layers = st.layers
    per_layer = layer_activation_bytes(ctx, st, tokens)
    avg_layer = (st.dense_layers * per_layer.dense_B + st.moe_layers * per_layer.moe_B) / (
        np.maximum(layers, 1)
    )
    stored_per_layer = np.where(st.recompute == RECOMPUTE_FULL, per_layer.checkpoint_B, avg_layer)
    held_layers = inflight_layers(st.pp, st.vpp, st.stage_index, st.microbatches, layers, st.gpipe)
    # Full recompute re-materializes one layer at a time during backward.
    working = np.where(
        st.recompute == RECOMPUTE_FULL, np.maximum(per_layer.dense_B, per_layer.moe_B), 0.0
    )
    embed = st.has_embedding * tokens * shape.hidden * act_B / sequence_divisor(st)
    inflight_mbs = np.where(layers > 0, held_layers / np.maximum(layers, 1), 1.0)
    # Logits of the micro-batch in its loss: 16-bit logits + the fp32 softmax a fused cross
    # entropy keeps for backward (gradient computed in place); unfused PyTorch also holds the
    # fp32 upcast and an fp32 gradient at the peak.
    loss_keep_B = 4.0 if ctx.fused_cross_entropy else 12.0
    logits = st.has_head * tokens * (shape.vocab / st.tp) * (act_B + loss_keep_B)
    inflight = held_layers * stored_per_layer + embed * inflight_mbs
    return ActivationMemory(
        total_B=inflight + working + logits, inflight_B=inflight, inflight_layers=held_layers
    )


# DeepSpeed ZeRO-3 gathers parameters individually and bounds what is live at once
# (``stage3_max_live_parameters``, default 1e9) and reduces gradients in buckets
# (``reduce_bucket_size``, default 5e8 elements): DeepSpeed's configuration docs, ZeRO section.
DEEPSPEED_MAX_LIVE_PARAMS = 1e9
DEEPSPEED_REDUCE_BUCKET = 5e8


def other_memory_B(ctx: ModelContext, st: StageInputs, held: StageParams) -> Array:
    """Memory beyond states and activations (the framework's own is added by the caller).

    ZeRO-3 keeps the current and the prefetched layer's full weights gathered (FSDP's units);
    ZeRO-2 and 3 hold one layer's full gradients until their reduce-scatter. DeepSpeed caps
    both (live parameters, reduce bucket): for ``deepspeed``, and for ``any`` (the runtime best
    suited to the plan), the smaller of the two applies.
    """
    gathered = 2.0 * held.per_layer
    unsharded = held.per_layer
    if ctx.framework in ("deepspeed", "any"):
        gathered = np.minimum(gathered, DEEPSPEED_MAX_LIVE_PARAMS)
        unsharded = np.minimum(unsharded, DEEPSPEED_REDUCE_BUCKET)
    gathered_B = np.where(st.zero_stage >= 3, gathered * ctx.weight_bytes, 0.0)
    unsharded_B = np.where(st.zero_stage >= 2, unsharded * ctx.grad_bytes, 0.0)
    return gathered_B + unsharded_B
