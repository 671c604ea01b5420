"""Context-parallel ring attention (Liu et al. 2023, "Ring Attention"; Megatron-Core CP).

Each of the cp ranks holds s/cp tokens; attention passes the K and V blocks around the ring in
cp - 1 point-to-point hops, overlapped with the attention core of the block in hand.
"""

import numpy as np

from costmodel import comm
from costmodel.context import ModelContext
from costmodel.kernels import FLASH_BACKWARD_FACTOR, Hardware
from costmodel.stage.compute import ComputeTimes
from costmodel.stage.inputs import Array, StageInputs


def cp_comm_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array, compute: ComputeTimes
) -> Array:
    """Ring-exchange time of one micro-batch on the critical path.

    Forward passes K and V in cp - 1 hops, each a send/receive with its own latency; backward
    passes K, V and their gradients (twice the traffic) behind the attention backward. Traffic
    hidden behind the attention core still costs ``overlap_interference`` of its time, like
    every other overlapped collective. A layer the host cannot issue fast enough leaves the GPU
    waiting (``host_slack_s``; the backward issues twice the kernels): the exchange hides there
    too, so faster kernels never expose more ring than they save.
    """
    params = ctx.params
    cp_local = comm.ranks_per_node(st.cp, st.tp, hw.gpus_per_node)
    inside = cp_local >= st.cp
    bandwidth = comm.scaled(
        np.where(inside, hw.intra_Bps, hw.inter_Bps), params.p2p_bandwidth_scale
    )
    latency = comm.scaled(
        np.where(inside, hw.intra_latency_s, hw.inter_latency_s), params.p2p_latency_scale
    )
    kv_chunk_B = tokens * 2 * ctx.shape.kv_width / st.tp * ctx.activation_bytes
    hops = st.cp - 1
    forward = hops * comm.p2p_s(kv_chunk_B, bandwidth, latency)
    backward = hops * comm.p2p_s(2.0 * kv_chunk_B, bandwidth, latency)
    core = compute.attention_core_s
    core_backward = (FLASH_BACKWARD_FACTOR if ctx.flash_attention else 2.0) * core
    core, core_backward = core + compute.host_slack_s, core_backward + 2.0 * compute.host_slack_s
    interference = params.overlap_interference
    exposed = np.maximum(forward - core, interference * forward) + np.maximum(
        backward - core_backward, interference * backward
    )
    return np.where(st.cp > 1, st.layers * exposed, 0.0)
