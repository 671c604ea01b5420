"""Context-parallel ring attention (Liu et al. 2023, "Ring Attention"; Megatron-Core CP).

Each of the cp ranks holds s/cp tokens; attention passes the K and V blocks around the ring in
cp - 1 point-to-point hops, overlapped with the attention core of the block in hand.
"""

import numpy as np

from costmodel import comm
from costmodel.context import ModelContext
from costmodel.kernels import Hardware
from costmodel.stage.compute import ComputeTimes
from costmodel.stage.inputs import Array, StageInputs


def cp_comm_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array, compute: ComputeTimes
) -> Array:
    """Exposed ring-exchange time of one micro-batch: forward passes K and V, backward K, V and
    their gradients (twice the traffic, behind twice the compute)."""
    cp_local = comm.ranks_per_node(st.cp, st.tp, hw.gpus_per_node)
    bandwidth = comm.scaled(
        np.where(cp_local >= st.cp, hw.intra_Bps, hw.inter_Bps), ctx.params.p2p_bandwidth_scale
    )
    kv_chunk_B = tokens * 2 * ctx.shape.kv_width / st.tp * ctx.activation_bytes
    forward = (st.cp - 1) * kv_chunk_B / bandwidth
    core = compute.attention_core_s
    exposed = np.maximum(0.0, forward - core) + np.maximum(0.0, 2 * forward - 2 * core)
    return np.where(st.cp > 1, st.layers * exposed, 0.0)
