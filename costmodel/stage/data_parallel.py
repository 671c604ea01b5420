"""Data-parallel (and ZeRO/FSDP) traffic of one stage.

- No ZeRO: one all-reduce of the gradients after the last backward (PyTorch DDP, Megatron DDP),
  overlapped with the backward pass (``pipeline.exposed_dp_comm``).
- ZeRO-1 (Megatron's distributed optimizer, DeepSpeed ZeRO-1): full gradients accumulate over
  the micro-batches; after the last one, reduce-scatter them and all-gather the updated 16-bit
  weights (Rajbhandari et al. SC'20 Sec. 5; the volume of one all-reduce).
- ZeRO-2 (DeepSpeed ZeRO-2, FSDP SHARD_GRAD_OP without no_sync): only a gradient shard is kept,
  so every micro-batch reduce-scatters its gradients during its backward (DeepSpeed's
  ``reduce_scatter`` in ``stage_1_and_2.py`` runs per backward; gradient accumulation cannot
  keep unsharded gradients it has no memory for); the weights are all-gathered once per step.
- ZeRO-3 / FSDP: every micro-batch all-gathers each layer's weights for forward and again for
  backward and reduce-scatters each layer's gradients (PyTorch FSDP reshard_after_forward; Zhao
  et al. VLDB'23 Sec. 3.3), one collective per layer (FSDP unit) and kind, each paying its own
  latency; prefetching hides them behind the neighbouring layer's compute, except the first
  forward gather, which nothing precedes.
Hidden traffic still costs ``overlap_interference`` of its time (SM and HBM contention).
Expert parameters reduce over their own, smaller data-parallel group.
"""

from dataclasses import dataclass

import numpy as np

from costmodel import comm
from costmodel.context import ModelContext
from costmodel.kernels import Hardware
from costmodel.stage.inputs import Array, StageInputs
from costmodel.stage.state import StageParams


@dataclass
class DpTraffic:
    """Per stage instance, shape ``(n_instances,)``, seconds: end-of-step reduction, exposed sharded
    traffic per micro-batch and the compute the reduction may hide behind."""

    end_of_step_s: Array  # gradient reduction (+ ZeRO-1/2 parameter all-gather) per step
    sharded_exposed_s: Array  # per micro-batch: ZeRO-2/3 traffic compute cannot hide
    overlap_budget_s: Array  # backward compute the end-of-step reduction may hide behind


@dataclass
class _Links:
    """Bus bandwidth and per-step latency of the replicated and the expert DP groups."""

    busbw: Array
    expert_busbw: Array
    latency: Array

    def scaled(self, bandwidth: float, latency: float) -> "_Links":
        return _Links(
            comm.scaled(self.busbw, bandwidth),
            comm.scaled(self.expert_busbw, bandwidth),
            comm.scaled(self.latency, latency),
        )


def _dp_links(st: StageInputs, hw: Hardware, held: StageParams) -> _Links:
    """Placement of the DP groups (Megatron rank order: tp innermost, then cp/ep, then dp), or
    the caller's override for heterogeneous data parallelism (NaN = by placement)."""
    dp_local = comm.ranks_per_node(held.shard, st.tp, hw.gpus_per_node)
    busbw = comm.bus_bandwidth_Bps(held.shard, dp_local, hw.intra_Bps, hw.inter_Bps)
    latency = comm.link_latency_s(held.shard, dp_local, hw.intra_latency_s, hw.inter_latency_s)
    expert_local = comm.ranks_per_node(held.expert_shard, st.expert_tp * st.ep, hw.gpus_per_node)
    expert_busbw = comm.bus_bandwidth_Bps(
        held.expert_shard, expert_local, hw.intra_Bps, hw.inter_Bps
    )
    override = ~np.isnan(st.dp_Bps)
    return _Links(
        busbw=np.where(override, st.dp_Bps, busbw),
        expert_busbw=np.where(override, st.dp_Bps, expert_busbw),
        latency=np.where(np.isnan(st.dp_latency_s), latency, st.dp_latency_s),
    )


def _across_replicas_s(st: StageInputs, hw: Hardware, held: StageParams, grads_B: Array) -> Array:
    """Hybrid sharding: each shard's gradients are all-reduced across its replicas once per step
    (PyTorch HSDP; torchtitan data_parallel_replicate_degree), over the network."""
    if not np.any(held.replicas > 1):
        return np.zeros_like(held.shard, dtype=float)
    local = comm.ranks_per_node(held.replicas, st.tp * held.shard, hw.gpus_per_node)
    busbw = comm.bus_bandwidth_Bps(held.replicas, local, hw.intra_Bps, hw.inter_Bps)
    latency = comm.link_latency_s(held.replicas, local, hw.intra_latency_s, hw.inter_latency_s)
    return comm.all_reduce_s(grads_B / held.shard, held.replicas, busbw, latency)


def _hidden_cost_s(traffic: Array, compute: Array, ctx: ModelContext) -> Array:
    """What ``traffic`` overlapped with ``compute`` adds to the critical path."""
    params = ctx.params
    return np.maximum(
        traffic - params.grad_reduce_overlap * compute, params.overlap_interference * traffic
    )


def dp_traffic(
    ctx: ModelContext,
    st: StageInputs,
    hw: Hardware,
    held: StageParams,
    *,
    backward_s: Array,
    microbatch_compute_s: Array,
) -> DpTraffic:
    """End-of-step and per-micro-batch data-parallel traffic under the stage's ZeRO stage."""
    params = ctx.params
    links = _dp_links(st, hw, held)
    # The same links at each op's bus bandwidth and latency (all-reduce is the reference).
    gather = links.scaled(params.all_gather_bandwidth_scale, params.all_gather_latency_scale)
    scatter = links.scaled(
        params.reduce_scatter_bandwidth_scale, params.reduce_scatter_latency_scale
    )
    # Collectives are issued per FSDP unit / ZeRO bucket: one per layer, embedding and head.
    units = np.maximum(st.layers, 1) + st.has_embedding + st.has_head

    has_experts = bool(ctx.shape.num_experts)

    def per_unit(op, total_B: Array, experts_B: Array, links_: _Links, count: Array) -> Array:
        """``count`` collectives of 1/count of the replicated and the expert volumes."""
        replicated = op(total_B / count, held.shard, links_.busbw, links_.latency)
        if has_experts:  # dense models skip the (zero) expert collectives: the search's hot path
            replicated = replicated + op(
                experts_B / count, held.expert_shard, links_.expert_busbw, links_.latency
            )
        return count * replicated

    grads_B, expert_grads_B = held.replicated * ctx.grad_bytes, held.experts * ctx.grad_bytes
    weights_B = held.replicated * ctx.weight_bytes
    expert_weights_B = held.experts * ctx.weight_bytes
    one = np.ones_like(units)
    all_reduce = per_unit(comm.all_reduce_s, grads_B, expert_grads_B, links, one)
    gather_step = per_unit(comm.all_gather_s, weights_B, expert_weights_B, gather, one)
    scatter_step = per_unit(comm.reduce_scatter_s, grads_B, expert_grads_B, scatter, one)
    gather_layers = per_unit(comm.all_gather_s, weights_B, expert_weights_B, gather, units)
    scatter_layers = per_unit(comm.reduce_scatter_s, grads_B, expert_grads_B, scatter, units)

    zero = st.zero_stage
    # ZeRO-3: the first forward gather is exposed, the rest hide behind the compute.
    first_gather = gather_layers / units
    zero3 = first_gather + _hidden_cost_s(
        2.0 * gather_layers + scatter_layers - first_gather, microbatch_compute_s, ctx
    )
    zero2 = _hidden_cost_s(scatter_layers, backward_s, ctx)
    sharded = np.where(zero >= 3, zero3, np.where(zero == 2, zero2, 0.0))
    across_replicas = _across_replicas_s(st, hw, held, grads_B + expert_grads_B)
    end_of_step = np.select(
        [zero >= 3, zero == 2, zero == 1],
        [0.0, gather_step, scatter_step + gather_step],
        default=all_reduce,
    )
    end_of_step = end_of_step + np.where(zero >= 1, across_replicas, 0.0)
    return DpTraffic(
        end_of_step_s=np.where(held.shard * held.replicas > 1, end_of_step, 0.0),
        sharded_exposed_s=np.where(held.shard > 1, sharded, 0.0),
        overlap_budget_s=params.grad_reduce_overlap * backward_s,
    )
