"""Expert-parallel all-to-all (GShard, Lepikhin et al. 2020; Megatron-Core token dispatcher).

Every MoE layer dispatches each token's top-k copies to the ranks hosting its experts and
combines the results back: 2 all-to-alls forward and 2 backward (+2 when full recompute re-runs
the forward). Experts sharded over etp > 1 ranks under sequence parallelism also all-gather the
tokens they received within their expert tensor-parallel group (and reduce-scatter the results:
Megatron-Core's dispatcher, ``gather_from_sequence_parallel_region``), at the same counts.

Placement (Megatron-Core rank order): unfolded, the EP group takes data-parallel ranks (stride
tp x cp); folded (Liu et al. 2024, "MoE Parallel Folding"), the expert ranks are ordered
etp-ep-edp and the EP group has stride etp, so it can sit inside a node that tensor
parallelism also spans.
"""

import numpy as np

from costmodel import comm
from costmodel.context import ModelContext
from costmodel.kernels import Hardware
from costmodel.stage.compute import load_imbalance
from costmodel.stage.inputs import RECOMPUTE_FULL, Array, StageInputs, sequence_divisor


def ep_comm_s(ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array) -> Array:
    """All-to-all time of one micro-batch on the stage's MoE layers."""
    if not ctx.shape.num_experts:
        return np.zeros_like(tokens, dtype=float)
    params = ctx.params
    etp = st.expert_tp
    stride = np.where(st.folded, etp, st.tp * st.cp)
    ep_local = comm.ranks_per_node(st.ep, stride, hw.gpus_per_node)
    # The busiest rank receives moe_load_imbalance x the mean and paces the exchange.
    dispatch_B = (
        tokens
        * ctx.shape.top_k
        * ctx.shape.hidden
        * ctx.activation_bytes
        / sequence_divisor(st)
        * load_imbalance(ctx, st)
    )
    bw_scale = params.all_to_all_bandwidth_scale
    latency = np.where(ep_local >= st.ep, hw.intra_latency_s, hw.inter_latency_s)
    one = comm.all_to_all_s(
        dispatch_B,
        st.ep,
        ep_local,
        comm.scaled(hw.intra_Bps, bw_scale),
        comm.scaled(hw.inter_Bps, bw_scale),
        comm.scaled(latency, params.all_to_all_latency_scale),
    )
    gather = _expert_tp_gather_s(ctx, st, hw, dispatch_B, etp)
    per_layer = 4.0 + np.where(st.recompute == RECOMPUTE_FULL, 2.0, 0.0)
    return st.moe_layers * per_layer * (one + gather)


def _expert_tp_gather_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, received_B: Array, etp: Array
) -> Array:
    """All-gather of the received tokens within the expert tensor-parallel group (innermost
    ranks), under sequence parallelism; its reduce-scatter twin costs the same."""
    params = ctx.params
    local = comm.ranks_per_node(etp, 1, hw.gpus_per_node)
    busbw = comm.scaled(
        comm.bus_bandwidth_Bps(etp, local, hw.intra_Bps, hw.inter_Bps),
        params.all_gather_bandwidth_scale,
    )
    latency = comm.scaled(
        comm.link_latency_s(etp, local, hw.intra_latency_s, hw.inter_latency_s),
        params.all_gather_latency_scale,
    )
    gathered = comm.all_gather_s(received_B * etp, etp, busbw, latency)
    return np.where((st.sequence_parallel > 0) & (etp > 1), gathered, 0.0)
