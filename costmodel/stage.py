"""Per-stage costs: one pipeline stage's time per micro-batch, its step-level traffic and memory.

Every input is a numpy array (one entry per stage instance: a stage of one candidate plan), so
the same code prices one heterogeneous plan's stages or a million homogeneous plans at once. The
formulas and their sources:

- GEMM time: FLOPs / (peak * efficiency(shape)); efficiency = the GPU's large-GEMM efficiency
  x d / (d + d_half) for the smallest GEMM dimension d (tile/wave quantization roll-off).
- Attention core: fused (FlashAttention) at a fixed fraction of the 16-bit peak on the full
  s x s FLOP count, or unfused: batched GEMMs with head_dim-sized inner dimension plus
  softmax/dropout traffic over the a*s*s score matrix (Korthikanti et al. 2022 Sec. 4.1).
- Memory-bound elementwise kernels (norms, residual adds, dropout, activation functions):
  bytes moved / (HBM bandwidth * efficiency), from the tensors Korthikanti et al. Sec. 4.1 lists.
- Tensor parallelism: 2 all-reduces per layer forward and 2 backward (Megatron-LM, Shoeybi et
  al. 2019 Fig. 4), one each for the vocabulary-parallel embedding (forward) and output layer
  (backward), 3 small ones in the vocabulary-parallel cross-entropy; with sequence parallelism
  each but the loss's becomes reduce-scatter + all-gather of the same total volume
  (Korthikanti et al. Sec. 4.2.2).
- Every collective runs at all-reduce's bus bandwidth and per-step latency on its links times
  that op's scales (``EfficiencyParams.*_bandwidth_scale`` / ``*_latency_scale``, neutral 1.0).
- Context parallelism: ring attention passes K and V around the cp ring (cp - 1 hops), hidden
  behind the attention core when it is faster.
- Expert parallelism: dispatch + combine all-to-all per MoE layer, forward and backward
  (GShard, Lepikhin et al. 2020).
- Pipeline: one activation send and one gradient send per micro-batch and virtual stage, of
  b*s*h/t bytes with the scatter/gather optimization (Narayanan et al. SC'21 Sec. 4.1).
- Memory: weights/gradients/optimizer states by ZeRO stage (Rajbhandari et al. SC'20 Fig. 1),
  activations per layer from Korthikanti et al. Table 2, in-flight micro-batches under
  1F1B / interleaving (their Eq. 5 and the (1 + (p-1)/(pm)) factor).
"""

from dataclasses import dataclass

import numpy as np

from costmodel import comm
from costmodel.context import ADAM_STEP_BYTES_PER_PARAM, ModelContext
from costmodel.params import EfficiencyParams

Array = np.ndarray
GIB = float(1024**3)

RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL = 0, 1, 2
RECOMPUTE_CODES = {"none": RECOMPUTE_NONE, "selective": RECOMPUTE_SELECTIVE, "full": RECOMPUTE_FULL}
# FlashAttention's backward recomputes the scores: 2.5x its forward FLOPs (Dao et al. 2022
# Sec. 3.1), where GEMMs and elementwise kernels take 2x (input and weight gradients).
# Calibration prices measured attention backward passes with the same factor.
FLASH_BACKWARD_FACTOR = 2.5


@dataclass
class Hardware:
    """Per stage instance: the GPU and links it runs on (arrays)."""

    gemm_peak_Fps: Array  # FLOP/s of the GEMM datatype
    attention_peak_Fps: Array  # 16-bit peak (attention runs in bf16/fp16 even under FP8)
    gemm_efficiency: Array
    attention_gemm_efficiency: Array  # unfused attention's GEMMs, in the attention datatype
    hbm_Bps: Array
    capacity_gib: Array
    intra_Bps: Array  # scale-up, per GPU, one direction (already x NCCL efficiency)
    inter_Bps: Array  # scale-out, per GPU, one direction (already x NCCL efficiency)
    gpus_per_node: Array


@dataclass
class StageInputs:
    """Per stage instance: what it holds and how it is parallelized (arrays)."""

    dense_layers: Array
    moe_layers: Array
    has_embedding: Array  # 0/1
    has_head: Array  # 0/1
    tp: Array
    cp: Array
    ep: Array
    dp: Array
    micro_batch_size: Array
    sequence_parallel: Array  # 0/1
    recompute: Array  # RECOMPUTE_* codes
    zero_stage: Array
    offload_optimizer: Array  # 0/1
    tp_comm_overlap: Array  # 0/1
    pp: Array
    vpp: Array
    stage_index: Array
    microbatches: Array
    gpipe: Array  # 0/1: all micro-batches in flight (GPipe) instead of 1F1B
    # Links the pipeline traffic of this stage crosses (bytes/s, s); set by the caller.
    pp_Bps: Array
    pp_latency_s: Array
    # Data-parallel group bandwidth override (heterogeneous DP, zone links); NaN = by placement.
    dp_Bps: Array
    dp_latency_s: Array


@dataclass
class StageCosts:
    """Per stage instance results (arrays). Times are seconds, memory GiB."""

    forward_s: Array  # compute only, one micro-batch
    backward_s: Array  # compute only, one micro-batch
    recompute_s: Array
    tp_comm_s: Array
    cp_comm_s: Array
    ep_comm_s: Array
    pp_comm_s: Array
    zero3_exposed_s: Array
    overhead_s: Array
    dp_comm_s: Array  # end-of-step gradient reduction (+ ZeRO-1/2 parameter all-gather)
    dp_overlap_budget_s: Array  # backward compute the reduction may hide behind
    optimizer_s: Array
    parameters_gib: Array
    gradients_gib: Array
    optimizer_states_gib: Array
    activations_gib: Array
    other_gib: Array
    inflight_activations_gib: Array  # the part of activations that scales with in-flight layers
    inflight_layers: Array
    hardware_flops: Array  # per micro-batch, incl. recompute (for HFU)

    @property
    def per_microbatch_s(self) -> Array:
        return (
            self.forward_s
            + self.backward_s
            + self.recompute_s
            + self.tp_comm_s
            + self.cp_comm_s
            + self.ep_comm_s
            + self.pp_comm_s
            + self.zero3_exposed_s
            + self.overhead_s
        )

    @property
    def memory_gib(self) -> Array:
        return (
            self.parameters_gib
            + self.gradients_gib
            + self.optimizer_states_gib
            + self.activations_gib
            + self.other_gib
        )


def _sequence_parallel_scales(params: EfficiencyParams) -> tuple[float, float]:
    """Bandwidth and latency scales that turn a ring all-reduce into reduce-scatter followed by
    all-gather: each moves half the all-reduce's volume and takes half its latency steps, so
    the pair's bandwidth is the harmonic mean of the two and its latency the mean."""
    rs_bw, ag_bw = params.reduce_scatter_bandwidth_scale, params.all_gather_bandwidth_scale
    rs_lat, ag_lat = params.reduce_scatter_latency_scale, params.all_gather_latency_scale
    return 2.0 / (1.0 / rs_bw + 1.0 / ag_bw), 0.5 * (rs_lat + ag_lat)


def _by_recompute(mode: Array, *, full: Array, selective: Array) -> Array:
    """Extra forward work of each recompute mode (0 for none)."""
    return np.where(
        mode == RECOMPUTE_FULL, full, np.where(mode == RECOMPUTE_SELECTIVE, selective, 0.0)
    )


def gemm_time_s(
    flops: Array, tokens: Array, n: Array, k: Array, hw: Hardware, half: float
) -> Array:
    """Time of GEMMs totalling ``flops`` whose shape is (tokens x k) @ (k x n).

    Efficiency rolls off with the GEMM's size d = min(tokens, sqrt(n * k)) as d / (d + half):
    small weight shards (high tp, small hidden sizes, thin expert batches) leave tiles and SMs
    idle (wave quantization) and are closer to memory-bound.
    """
    size = np.minimum(tokens, np.sqrt(n * k))
    rolloff = size / (size + half)
    return flops / (hw.gemm_peak_Fps * hw.gemm_efficiency * rolloff)


def _layer_forward_gemm_s(ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array):
    """Forward GEMM time of one dense layer and one MoE layer for ``tokens`` local tokens."""
    shape, half = ctx.shape, ctx.params.gemm_half_dim
    h, tp = shape.hidden, st.tp

    def gemm(n: Array, k: Array, rows: Array = tokens) -> Array:
        return gemm_time_s(2 * rows * n * k, rows, n, k, hw, half)

    qkv_out = (shape.q_width + 2 * shape.kv_width) / tp
    attention = gemm(qkv_out, h) + gemm(h, shape.q_width / tp)
    up_width = shape.ffn * (shape.ffn_matrices - 1) / tp
    dense_mlp = gemm(up_width, h) + gemm(h, shape.ffn / tp)
    if shape.num_experts:
        # Each GPU hosts E/ep experts; on average each receives tokens * top_k * ep / E tokens.
        experts_per_gpu = shape.num_experts / st.ep
        expert_tokens = tokens * shape.top_k * st.ep / shape.num_experts
        expert_up = shape.expert_ffn * (shape.ffn_matrices - 1) / tp
        routed = experts_per_gpu * (
            gemm(expert_up, h, expert_tokens) + gemm(h, shape.expert_ffn / tp, expert_tokens)
        )
        shared = shape.shared_experts * (gemm(expert_up, h) + gemm(h, shape.expert_ffn / tp))
        router = gemm(float(shape.num_experts), h)
        moe_mlp = routed + shared + router
    else:
        moe_mlp = np.zeros_like(dense_mlp)
    return attention, dense_mlp, moe_mlp


def _attention_core_forward_s(ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array):
    """Scores + softmax + weighted sum for one layer, forward."""
    shape, params = ctx.shape, ctx.params
    flops = 4.0 * tokens * ctx.seq_length * shape.q_width / st.tp
    if ctx.flash_attention:
        return flops / (hw.attention_peak_Fps * params.attention_efficiency)
    head_dim = shape.q_width / shape.heads
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
    softmax = score_elements * bytes_per_element / (hw.hbm_Bps * params.memory_bound_efficiency)
    return gemm + softmax


def _layer_forward_elementwise_s(ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array):
    """Memory-bound kernels of one layer, forward: (dense layer, MoE layer) seconds."""
    shape, a = ctx.shape, ctx.activation_bytes
    h = shape.hidden
    # Outside the tensor-parallel region (sharded only under sequence parallelism): 2 norms
    # (read + write h), 2 residual adds (read 2h, write h), optionally 2 dropouts (read, write,
    # 1-byte mask).
    replicated_elems = 2 * 2 * h + 2 * 3 * h
    replicated_B = replicated_elems * a + (2 * (2 * h * a + h) if ctx.dropout else 0.0)
    replicated_B = replicated_B / np.where(st.sequence_parallel > 0, st.tp, 1)
    # Inside: the activation function over the FFN width (GeLU: read f, write f; SwiGLU: read
    # 2f, write f), sharded by tp. Rotary embeddings on q and k (SwiGLU-era models).
    act_elems_per_ffn = 3.0 if ctx.swiglu else 2.0
    rope_B = 2 * (shape.q_width + shape.kv_width) * a if ctx.swiglu else 0.0
    dense_tp_B = (act_elems_per_ffn * shape.ffn * a + rope_B) / st.tp
    # MoE: routed copies of the token (permute in, unpermute out: read + write h each) and the
    # experts' activation functions over top_k (+ shared) expert widths.
    active = shape.top_k + shape.shared_experts
    moe_tp_B = (
        active * act_elems_per_ffn * shape.expert_ffn * a + 4 * shape.top_k * h * a + rope_B
    ) / st.tp
    rate = hw.hbm_Bps * ctx.params.memory_bound_efficiency
    return tokens * (replicated_B + dense_tp_B) / rate, tokens * (replicated_B + moe_tp_B) / rate


def _activation_bytes_per_layer(ctx: ModelContext, st: StageInputs, tokens: Array):
    """Stored activations of one layer and one micro-batch: (dense, moe, full-recompute input).

    Korthikanti et al. 2022 Table 2 generalized to GQA, SwiGLU, MoE and optional dropout; in
    units of tokens * h bytes (they use s*b*h with 16-bit activations):
      outside TP: 2 norm inputs (4) + QKV input (2) + MLP input (2) + dropout masks (2)
      inside TP:  Q, K, V (2 + 4 * kv/q) + projection input (2) + FFN internals
                  (GeLU 2f/h + 2f/h; SwiGLU 4 * 2f/h) + attention core (5as/h unfused with
                  dropout, 2as/h without, 0 fused).
    """
    shape = ctx.shape
    h = float(shape.hidden)
    scale = ctx.activation_bytes / 2.0
    sp_div = np.where(st.sequence_parallel > 0, st.tp, 1)
    outside = 8.0 + (2.0 if ctx.dropout else 0.0)
    q_ratio = shape.q_width / h
    kv_ratio = shape.kv_width / h
    attention_inside = 2 * q_ratio + 4 * kv_ratio + 2 * q_ratio
    ffn_factor = 8.0 if ctx.swiglu else 4.0
    dense_ffn = ffn_factor * shape.ffn / h
    active = shape.top_k + shape.shared_experts
    # Routed experts keep their input copy (2) and internals per active expert.
    moe_ffn = active * (2.0 + ffn_factor * shape.expert_ffn / h)
    if ctx.flash_attention:
        core = 0.0
    else:
        core = (5.0 if ctx.dropout else 2.0) * shape.heads * ctx.seq_length / h
    core_kept = np.where(st.recompute == RECOMPUTE_NONE, core, 0.0)
    per_token_B = h * scale
    dense = (
        tokens
        * per_token_B
        * (outside / sp_div + (attention_inside + dense_ffn + core_kept) / st.tp)
    )
    moe = (
        tokens * per_token_B * (outside / sp_div + (attention_inside + moe_ffn + core_kept) / st.tp)
    )
    checkpoint = tokens * per_token_B * 2.0 / sp_div
    return dense, moe, checkpoint


def inflight_layers(
    pp: Array, vpp: Array, stage_index: Array, microbatches: Array, layers: Array, gpipe: Array
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


def stage_costs(ctx: ModelContext, st: StageInputs, hw: Hardware) -> StageCosts:
    shape, params = ctx.shape, ctx.params
    h = shape.hidden
    a = ctx.activation_bytes
    tokens = st.micro_batch_size * ctx.seq_length / st.cp  # local tokens per micro-batch
    layers = st.dense_layers + st.moe_layers

    # ---- compute, one micro-batch ----------------------------------------------------------------
    attn_gemm, dense_mlp, moe_mlp = _layer_forward_gemm_s(ctx, st, hw, tokens)
    core = _attention_core_forward_s(ctx, st, hw, tokens)
    dense_elem, moe_elem = _layer_forward_elementwise_s(ctx, st, hw, tokens)
    dense_fwd = attn_gemm + dense_mlp + core + dense_elem
    moe_fwd = attn_gemm + moe_mlp + core + moe_elem
    layers_fwd = st.dense_layers * dense_fwd + st.moe_layers * moe_fwd
    vocab_tp = shape.vocab / st.tp
    head_fwd = gemm_time_s(2 * tokens * h * vocab_tp, tokens, vocab_tp, h, hw, params.gemm_half_dim)
    # Cross-entropy over the vocabulary shard, forward + backward, in HBM bytes per logit:
    # implementations range from ~6-12 B (flash-attn's fused xentropy: read the 16-bit logits
    # twice, write the gradient) to ~30-36 B (Megatron's vocab-parallel and PyTorch's unfused
    # paths materialize an fp32 copy, exp/log-softmax and an fp32 gradient). We do not know
    # which kernel a job runs, so time takes the middle of that range, 24 B; memory (below)
    # follows ``fused_cross_entropy``.
    loss_B_per_logit = 24.0
    loss_s = tokens * vocab_tp * loss_B_per_logit / (hw.hbm_Bps * params.memory_bound_efficiency)
    embed_s = tokens * h * a * 3.0 / (hw.hbm_Bps * params.memory_bound_efficiency)
    forward = layers_fwd + st.has_head * (head_fwd + loss_s / 3.0) + st.has_embedding * embed_s
    # GEMMs and elementwise kernels take 2x their forward (input and weight gradients); the
    # fused attention core FLASH_BACKWARD_FACTOR x, the excess over 2x added here.
    attention_bwd_extra = (
        (FLASH_BACKWARD_FACTOR - 2.0) * layers * core if ctx.flash_attention else 0.0
    )
    backward = (
        2.0 * layers_fwd
        + attention_bwd_extra
        + st.has_head * (2.0 * head_fwd + 2.0 * loss_s / 3.0)
        + (st.has_embedding * embed_s)
    )
    recompute = _by_recompute(st.recompute, full=layers_fwd, selective=layers * core)

    # ---- tensor-parallel collectives -------------------------------------------------------------
    tp_local = comm.ranks_per_node(st.tp, 1, hw.gpus_per_node)
    tp_busbw = comm.bus_bandwidth_Bps(st.tp, tp_local, hw.intra_Bps, hw.inter_Bps)
    tp_lat = comm.link_latency_s(
        st.tp, tp_local, params.intra_node_latency_us * 1e-6, params.inter_node_latency_us * 1e-6
    )
    one_allreduce = comm.all_reduce_s(tokens * h * a, st.tp, tp_busbw, tp_lat)
    sp_bw_scale, sp_lat_scale = _sequence_parallel_scales(params)
    if (sp_bw_scale, sp_lat_scale) != (1.0, 1.0):
        # Sequence parallelism runs reduce-scatter + all-gather in place of each all-reduce:
        # the ring all-reduce's bandwidth term split in halves at the two ops' bandwidths.
        one_allreduce = np.where(
            st.sequence_parallel > 0,
            comm.all_reduce_s(tokens * h * a, st.tp, tp_busbw * sp_bw_scale, tp_lat * sp_lat_scale),
            one_allreduce,
        )
    # Forward: 2 collectives per layer (+2 when full recompute re-runs the forward), on the
    # critical path unless tp_comm_overlap pipelines them with the GEMMs. Backward: Megatron-LM
    # overlaps its 2 collectives with the weight-gradient GEMMs (Korthikanti et al. Table 4
    # note; LinearWithGradAccumulationAndAsyncCommunication), so only the excess shows.
    forward_collectives = 2.0 + np.where(st.recompute == RECOMPUTE_FULL, 2.0, 0.0)
    tp_forward = layers * forward_collectives * one_allreduce
    tp_forward = tp_forward * np.where(
        st.tp_comm_overlap > 0, 1.0 - params.tp_comm_overlap_fraction, 1.0
    )
    # Vocabulary-parallel embedding and output layer (Megatron-LM VocabParallelEmbedding,
    # vocab_parallel_cross_entropy): the embedding's output is all-reduced forward (with
    # sequence parallelism reduce-scattered, its gradient all-gathered backward), on the
    # critical path; the output layer's input gradient backward, behind its weight-gradient
    # GEMM like the layers'; the loss all-reduces 3 fp32 numbers per token (logit maximum,
    # sum of exponentials, target logit), latency-bound.
    loss_allreduce = comm.all_reduce_s(tokens * 4.0, st.tp, tp_busbw, tp_lat)
    tp_forward = tp_forward + st.has_embedding * one_allreduce + st.has_head * 3.0 * loss_allreduce
    weight_grad_s = (
        st.dense_layers * (attn_gemm + dense_mlp)
        + st.moe_layers * (attn_gemm + moe_mlp)
        + st.has_head * head_fwd
    )
    tp_backward = (layers * 2.0 + st.has_head) * one_allreduce
    tp_backward = np.maximum(params.overlap_interference * tp_backward, tp_backward - weight_grad_s)
    tp_comm = tp_forward + tp_backward

    # ---- context-parallel ring exchange ----------------------------------------------------------
    cp_local = comm.ranks_per_node(st.cp, st.tp, hw.gpus_per_node)
    # Ring attention passes K/V blocks with send/recv: point-to-point bandwidth.
    cp_bw = comm.scaled(
        np.where(cp_local >= st.cp, hw.intra_Bps, hw.inter_Bps), params.p2p_bandwidth_scale
    )
    kv_chunk_B = tokens * 2 * shape.kv_width / st.tp * a
    cp_hops = st.cp - 1
    cp_fwd = cp_hops * kv_chunk_B / cp_bw
    # Backward moves K, V and their gradients: twice the forward traffic, behind 2x the compute.
    cp_exposed = np.maximum(0.0, cp_fwd - core) + np.maximum(0.0, 2 * cp_fwd - 2 * core)
    cp_comm = np.where(st.cp > 1, layers * cp_exposed, 0.0)

    # ---- expert-parallel all-to-all --------------------------------------------------------------
    ep_local = comm.ranks_per_node(st.ep, st.tp * st.cp, hw.gpus_per_node)
    dispatch_B = tokens * shape.top_k * h * a / np.where(st.sequence_parallel > 0, st.tp, 1)
    a2a_bw = params.all_to_all_bandwidth_scale
    one_a2a = comm.all_to_all_s(
        dispatch_B,
        st.ep,
        ep_local,
        comm.scaled(hw.intra_Bps, a2a_bw),
        comm.scaled(hw.inter_Bps, a2a_bw),
        np.where(ep_local >= st.ep, params.intra_node_latency_us, params.inter_node_latency_us)
        * (1e-6 * params.all_to_all_latency_scale),
    )
    a2a_per_layer = 4.0 + np.where(st.recompute == RECOMPUTE_FULL, 2.0, 0.0)
    ep_comm = st.moe_layers * a2a_per_layer * one_a2a

    # ---- pipeline point-to-point -----------------------------------------------------------------
    # Scatter/gather optimization (Narayanan et al. SC'21 Sec. 4.1): each tensor-parallel rank
    # sends 1/t of the boundary activation; the receiving node all-gathers it over NVLink.
    boundary_B = tokens * h * a / st.tp
    pp_send = comm.p2p_s(
        boundary_B,
        comm.scaled(st.pp_Bps, params.p2p_bandwidth_scale),
        comm.scaled(st.pp_latency_s, params.p2p_latency_scale),
    )
    pp_comm = np.where(st.pp > 1, 2.0 * st.vpp * pp_send, 0.0)

    # ---- parameters held by this stage (per GPU) -------------------------------------------------
    dense_per_layer = shape.attention_params + shape.dense_mlp_params
    moe_replicated = shape.attention_params + shape.moe_shared_params
    embedding = shape.vocab * h
    replicated_params = (
        st.dense_layers * dense_per_layer
        + st.moe_layers * moe_replicated
        + st.has_embedding * embedding
        + st.has_head * embedding
    ) / st.tp + layers * shape.norm_params
    experts_per_gpu = np.where(shape.num_experts > 0, shape.num_experts / st.ep, 0.0)
    expert_params = st.moe_layers * experts_per_gpu * shape.expert_params / st.tp
    shard = st.dp * st.cp
    expert_shard = np.maximum(shard / st.ep, 1.0)
    zero = st.zero_stage

    weights_B = ctx.weight_bytes * np.where(
        zero >= 3,
        replicated_params / shard + expert_params / expert_shard,
        replicated_params + expert_params,
    )
    grads_B = ctx.grad_bytes * np.where(
        zero >= 2,
        replicated_params / shard + expert_params / expert_shard,
        replicated_params + expert_params,
    )
    optimizer_params = np.where(
        zero >= 1,
        replicated_params / shard + expert_params / expert_shard,
        replicated_params + expert_params,
    )
    optimizer_B = np.where(st.offload_optimizer > 0, 0.0, ctx.optimizer_bytes * optimizer_params)

    # ---- data-parallel traffic -------------------------------------------------------------------
    dp_local = comm.ranks_per_node(shard, st.tp, hw.gpus_per_node)
    dp_busbw = comm.bus_bandwidth_Bps(shard, dp_local, hw.intra_Bps, hw.inter_Bps)
    dp_busbw = np.where(np.isnan(st.dp_Bps), dp_busbw, st.dp_Bps)
    dp_lat = np.where(
        np.isnan(st.dp_latency_s),
        comm.link_latency_s(
            shard,
            dp_local,
            params.intra_node_latency_us * 1e-6,
            params.inter_node_latency_us * 1e-6,
        ),
        st.dp_latency_s,
    )
    expert_dp_local = comm.ranks_per_node(expert_shard, st.tp * st.ep, hw.gpus_per_node)
    expert_busbw = comm.bus_bandwidth_Bps(expert_shard, expert_dp_local, hw.intra_Bps, hw.inter_Bps)
    expert_busbw = np.where(np.isnan(st.dp_Bps), expert_busbw, st.dp_Bps)
    grad_reduce = comm.all_reduce_s(
        replicated_params * ctx.grad_bytes, shard, dp_busbw, dp_lat
    ) + comm.all_reduce_s(expert_params * ctx.grad_bytes, expert_shard, expert_busbw, dp_lat)
    # The same links at each op's bus bandwidth and latency (all-reduce is the reference).
    ag_bw, ag_lat = params.all_gather_bandwidth_scale, params.all_gather_latency_scale
    rs_bw, rs_lat = params.reduce_scatter_bandwidth_scale, params.reduce_scatter_latency_scale
    ag_busbw, ag_expert_busbw, ag_dp_lat = (
        comm.scaled(dp_busbw, ag_bw),
        comm.scaled(expert_busbw, ag_bw),
        comm.scaled(dp_lat, ag_lat),
    )
    rs_busbw, rs_expert_busbw, rs_dp_lat = (
        comm.scaled(dp_busbw, rs_bw),
        comm.scaled(expert_busbw, rs_bw),
        comm.scaled(dp_lat, rs_lat),
    )
    gather_weights = comm.all_gather_s(
        replicated_params * ctx.weight_bytes, shard, ag_busbw, ag_dp_lat
    )
    scatter_grads = comm.reduce_scatter_s(
        replicated_params * ctx.grad_bytes, shard, rs_busbw, rs_dp_lat
    )
    gather_expert_weights = comm.all_gather_s(
        expert_params * ctx.weight_bytes, expert_shard, ag_expert_busbw, ag_dp_lat
    )
    scatter_expert_grads = comm.reduce_scatter_s(
        expert_params * ctx.grad_bytes, expert_shard, rs_expert_busbw, rs_dp_lat
    )
    # ZeRO-1/2: reduce-scatter gradients, then all-gather the updated 16-bit weights.
    sharded_reduce = scatter_grads + gather_weights + scatter_expert_grads + gather_expert_weights
    # ZeRO-3 / FSDP: every micro-batch all-gathers weights for forward and again for backward
    # and reduce-scatters its gradients (PyTorch FSDP reshard_after_forward), hidden behind
    # that micro-batch's compute when prefetching keeps up.
    zero3_per_mb = (
        2.0 * gather_weights + scatter_grads + 2.0 * gather_expert_weights + scatter_expert_grads
    )
    mb_compute = forward + backward + recompute
    zero3_hidden_cost = np.maximum(
        zero3_per_mb - params.grad_reduce_overlap * mb_compute,
        params.overlap_interference * zero3_per_mb,
    )
    zero3_exposed = np.where(zero >= 3, zero3_hidden_cost, 0.0)
    dp_comm = np.where(zero >= 3, 0.0, np.where(zero >= 1, sharded_reduce, grad_reduce))
    dp_comm = np.where(shard > 1, dp_comm, 0.0)
    overlap_budget = params.grad_reduce_overlap * backward

    # ---- optimizer step --------------------------------------------------------------------------
    step_B = ADAM_STEP_BYTES_PER_PARAM * optimizer_params
    on_gpu = step_B / (hw.hbm_Bps * params.memory_bound_efficiency)
    offloaded = optimizer_params * (ctx.grad_bytes + ctx.weight_bytes) / (
        params.pcie_GBps * 1e9
    ) + step_B / (params.cpu_adam_GBps * 1e9)
    optimizer = np.where(st.offload_optimizer > 0, offloaded, on_gpu)

    # ---- activations -----------------------------------------------------------------------------
    dense_act, moe_act, checkpoint = _activation_bytes_per_layer(ctx, st, tokens)
    avg_layer_act = (st.dense_layers * dense_act + st.moe_layers * moe_act) / np.maximum(layers, 1)
    stored_per_layer = np.where(st.recompute == RECOMPUTE_FULL, checkpoint, avg_layer_act)
    held_layers = inflight_layers(st.pp, st.vpp, st.stage_index, st.microbatches, layers, st.gpipe)
    # Full recompute re-materializes one layer at a time during backward.
    working = np.where(st.recompute == RECOMPUTE_FULL, np.maximum(dense_act, moe_act), 0.0)
    embed_act = st.has_embedding * tokens * h * a / np.where(st.sequence_parallel > 0, st.tp, 1)
    inflight_mbs = np.where(layers > 0, held_layers / np.maximum(layers, 1), 1.0)
    # Logits of the micro-batch in its loss: 16-bit logits + the fp32 softmax a fused cross
    # entropy keeps for backward (gradient computed in place); unfused PyTorch also holds the
    # fp32 upcast and an fp32 gradient at the peak.
    loss_keep_B = 4.0 if ctx.fused_cross_entropy else 12.0
    logits_B = st.has_head * tokens * vocab_tp * (a + loss_keep_B)
    inflight_B = held_layers * stored_per_layer + embed_act * inflight_mbs
    activations_B = inflight_B + working + logits_B

    # ZeRO-3 keeps the current and the prefetched layer's full weights gathered.
    per_layer_params = (
        (
            st.dense_layers * dense_per_layer
            + st.moe_layers * (moe_replicated + experts_per_gpu * shape.expert_params)
        )
        / np.maximum(layers, 1)
        / st.tp
    )
    gathered_B = np.where(zero >= 3, 2.0 * per_layer_params * ctx.weight_bytes, 0.0)
    other_gib = params.framework_memory_gib + gathered_B / GIB

    hardware_flops = _hardware_flops_per_microbatch(ctx, st, tokens, layers)
    overhead = np.full_like(forward, params.per_microbatch_overhead_s)
    return StageCosts(
        forward_s=forward,
        backward_s=backward,
        recompute_s=recompute,
        tp_comm_s=tp_comm,
        cp_comm_s=cp_comm,
        ep_comm_s=ep_comm,
        pp_comm_s=pp_comm,
        zero3_exposed_s=zero3_exposed,
        overhead_s=overhead,
        dp_comm_s=dp_comm,
        dp_overlap_budget_s=overlap_budget,
        optimizer_s=optimizer,
        parameters_gib=weights_B / GIB,
        gradients_gib=grads_B / GIB,
        optimizer_states_gib=optimizer_B / GIB,
        activations_gib=activations_B / GIB,
        inflight_activations_gib=inflight_B / GIB,
        inflight_layers=held_layers,
        other_gib=other_gib,
        hardware_flops=hardware_flops,
    )


def _hardware_flops_per_microbatch(ctx: ModelContext, st: StageInputs, tokens: Array, layers):
    """FLOPs this GPU executes per micro-batch, recompute included (HFU's numerator)."""
    shape = ctx.shape
    core = shape.attention_core_flops(ctx.seq_length)
    dense = shape.attention_proj_flops + shape.dense_mlp_flops + core
    moe = shape.attention_proj_flops + shape.moe_mlp_flops + core
    layer_fwd = tokens * (st.dense_layers * dense + st.moe_layers * moe) / st.tp
    head = st.has_head * tokens * shape.logits_flops / st.tp
    recompute = _by_recompute(
        st.recompute, full=layer_fwd, selective=tokens * layers * core / st.tp
    )
    return 3.0 * (layer_fwd + head) + recompute
