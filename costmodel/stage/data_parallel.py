"""Data-parallel (and ZeRO/FSDP) traffic of one stage.

- No ZeRO: one all-reduce of the gradients after the last backward (PyTorch DDP, Megatron DDP),
  overlapped with the backward pass (``pipeline.exposed_dp_comm``).
- ZeRO-1/2 (Megatron distributed optimizer, DeepSpeed ZeRO-1/2): reduce-scatter the gradients,
  then all-gather the updated 16-bit weights (Rajbhandari et al. SC'20 Sec. 5; the same volume
  as one all-reduce).
- ZeRO-3 / FSDP: every micro-batch all-gathers the weights for forward and again for backward
  and reduce-scatters its gradients (PyTorch FSDP reshard_after_forward; Zhao et al. VLDB'23),
  hidden behind that micro-batch's compute when prefetching keeps up.
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
    end_of_step_s: Array  # gradient reduction (+ ZeRO-1/2 parameter all-gather) per step
    zero3_exposed_s: Array  # per micro-batch: the part of ZeRO-3's traffic compute cannot hide
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
    expert_local = comm.ranks_per_node(held.expert_shard, st.tp * st.ep, hw.gpus_per_node)
    expert_busbw = comm.bus_bandwidth_Bps(
        held.expert_shard, expert_local, hw.intra_Bps, hw.inter_Bps
    )
    override = ~np.isnan(st.dp_Bps)
    return _Links(
        busbw=np.where(override, st.dp_Bps, busbw),
        expert_busbw=np.where(override, st.dp_Bps, expert_busbw),
        latency=np.where(np.isnan(st.dp_latency_s), latency, st.dp_latency_s),
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
    grads_B, expert_grads_B = held.replicated * ctx.grad_bytes, held.experts * ctx.grad_bytes
    weights_B, expert_weights_B = (
        held.replicated * ctx.weight_bytes,
        held.experts * ctx.weight_bytes,
    )
    all_reduce = comm.all_reduce_s(
        grads_B, held.shard, links.busbw, links.latency
    ) + comm.all_reduce_s(expert_grads_B, held.expert_shard, links.expert_busbw, links.latency)
    # The same links at each op's bus bandwidth and latency (all-reduce is the reference).
    gather = links.scaled(params.all_gather_bandwidth_scale, params.all_gather_latency_scale)
    scatter = links.scaled(
        params.reduce_scatter_bandwidth_scale, params.reduce_scatter_latency_scale
    )
    gather_weights = comm.all_gather_s(weights_B, held.shard, gather.busbw, gather.latency)
    scatter_grads = comm.reduce_scatter_s(grads_B, held.shard, scatter.busbw, scatter.latency)
    gather_experts = comm.all_gather_s(
        expert_weights_B, held.expert_shard, gather.expert_busbw, gather.latency
    )
    scatter_experts = comm.reduce_scatter_s(
        expert_grads_B, held.expert_shard, scatter.expert_busbw, scatter.latency
    )
    sharded_reduce = scatter_grads + gather_weights + scatter_experts + gather_experts
    zero = st.zero_stage
    zero3_per_mb = 2.0 * gather_weights + scatter_grads + 2.0 * gather_experts + scatter_experts
    zero3_hidden_cost = np.maximum(
        zero3_per_mb - params.grad_reduce_overlap * microbatch_compute_s,
        params.overlap_interference * zero3_per_mb,
    )
    end_of_step = np.where(zero >= 3, 0.0, np.where(zero >= 1, sharded_reduce, all_reduce))
    return DpTraffic(
        end_of_step_s=np.where(held.shard > 1, end_of_step, 0.0),
        zero3_exposed_s=np.where(zero >= 3, zero3_hidden_cost, 0.0),
        overlap_budget_s=params.grad_reduce_overlap * backward_s,
    )
