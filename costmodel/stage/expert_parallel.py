"""Expert-parallel all-to-all (GShard, Lepikhin et al. 2020; Megatron-Core token dispatcher).

Every MoE layer dispatches each token's top-k copies to the ranks hosting its experts and
combines the results back: 2 all-to-alls forward and 2 backward (+2 when full recompute re-runs
the forward).
"""

import numpy as np

from costmodel import comm
from costmodel.context import ModelContext
from costmodel.kernels import Hardware
from costmodel.stage.compute import load_imbalance
from costmodel.stage.inputs import RECOMPUTE_FULL, Array, StageInputs, sequence_divisor


def ep_comm_s(ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array) -> Array:
    """All-to-all time of one micro-batch on the stage's MoE layers."""
    params = ctx.params
    ep_local = comm.ranks_per_node(st.ep, st.tp * st.cp, hw.gpus_per_node)
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
    per_layer = 4.0 + np.where(st.recompute == RECOMPUTE_FULL, 2.0, 0.0)
    return st.moe_layers * per_layer * one
