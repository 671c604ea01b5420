"""Pipeline point-to-point sends (Narayanan et al. SC'21 Sec. 4.1).

One activation send forward and one gradient send backward per micro-batch and virtual stage.
With the scatter/gather optimization each tensor-parallel rank sends 1/t of the boundary
activation and the receiving node all-gathers it over NVLink.
"""

import numpy as np

from costmodel import comm
from costmodel.context import ModelContext
from costmodel.stage.inputs import Array, StageInputs


def pp_comm_s(ctx: ModelContext, st: StageInputs, tokens: Array) -> Array:
    """Send time of one micro-batch's boundary activations and gradients on this stage."""
    params = ctx.params
    boundary_B = tokens * ctx.shape.hidden * ctx.activation_bytes / st.tp
    send = comm.p2p_s(
        boundary_B,
        comm.scaled(st.pp_Bps, params.p2p_bandwidth_scale),
        comm.scaled(st.pp_latency_s, params.p2p_latency_scale),
    )
    return np.where(st.pp > 1, 2.0 * st.vpp * send, 0.0)
