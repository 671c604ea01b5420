"""Tensor-parallel collectives of one micro-batch on one stage.

Megatron-LM (Shoeybi et al. 2019 Fig. 4): 2 all-reduces per layer forward and 2 backward, one
for the vocabulary-parallel embedding (forward) and one for the output layer (backward), and 3
small ones in the vocabulary-parallel cross-entropy. With sequence parallelism each but the
loss's becomes reduce-scatter + all-gather of the same total volume (Korthikanti et al. 2022
Sec. 4.2.2).
"""

import numpy as np

from costmodel import comm
from costmodel.context import ModelContext
from costmodel.kernels import Hardware
from costmodel.params import EfficiencyParams
from costmodel.stage.compute import ComputeTimes
from costmodel.stage.inputs import RECOMPUTE_FULL, Array, StageInputs


def sequence_parallel_scales(params: EfficiencyParams) -> tuple[float, float]:
    """Bandwidth and latency scales that turn a ring all-reduce into reduce-scatter followed by
    all-gather: each moves half the all-reduce's volume and takes half its latency steps, so
    the pair's bandwidth is the harmonic mean of the two and its latency the mean."""
    rs_bw, ag_bw = params.reduce_scatter_bandwidth_scale, params.all_gather_bandwidth_scale
    rs_lat, ag_lat = params.reduce_scatter_latency_scale, params.all_gather_latency_scale
    return 2.0 / (1.0 / rs_bw + 1.0 / ag_bw), 0.5 * (rs_lat + ag_lat)


def _one_activation_allreduce_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array, busbw: Array, lat: Array
) -> Array:
    """One all-reduce of the (tokens x h) activation, or its reduce-scatter + all-gather pair."""
    size_B = tokens * ctx.shape.hidden * ctx.activation_bytes
    one = comm.all_reduce_s(size_B, st.tp, busbw, lat)
    bw_scale, lat_scale = sequence_parallel_scales(ctx.params)
    if (bw_scale, lat_scale) == (1.0, 1.0):
        return one
    # The ring all-reduce's bandwidth term split in halves at the two ops' bandwidths.
    pair = comm.all_reduce_s(size_B, st.tp, busbw * bw_scale, lat * lat_scale)
    return np.where(st.sequence_parallel > 0, pair, one)


def tp_comm_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, tokens: Array, compute: ComputeTimes
) -> Array:
    """Exposed tensor-parallel communication time of one micro-batch.

    Forward: 2 collectives per layer (+2 when full recompute re-runs the forward), on the
    critical path unless ``tp_comm_overlap`` pipelines them with the GEMMs (then a share,
    minus the interference, is hidden). Backward: Megatron-LM
    overlaps its 2 collectives with the weight-gradient GEMMs (Korthikanti et al. Table 4 note;
    LinearWithGradAccumulationAndAsyncCommunication), so only the excess shows, and hidden
    traffic still costs ``overlap_interference`` of its time.
    """
    params, layers = ctx.params, st.layers
    tp_local = comm.ranks_per_node(st.tp, 1, hw.gpus_per_node)
    busbw = comm.bus_bandwidth_Bps(st.tp, tp_local, hw.intra_Bps, hw.inter_Bps)
    lat = comm.link_latency_s(st.tp, tp_local, hw.intra_latency_s, hw.inter_latency_s)
    one_allreduce = _one_activation_allreduce_s(ctx, st, hw, tokens, busbw, lat)
    forward_collectives = 2.0 + np.where(st.recompute == RECOMPUTE_FULL, 2.0, 0.0)
    forward = layers * forward_collectives * one_allreduce
    # tp_comm_overlap (Transformer Engine userbuffers) hides a share behind the GEMMs, which
    # still pays the interference every overlapped collective does.
    hidden = params.tp_comm_overlap_fraction * (1.0 - params.overlap_interference)
    forward = forward * np.where(st.tp_comm_overlap > 0, 1.0 - hidden, 1.0)
    # Vocabulary-parallel embedding and output layer (Megatron-LM VocabParallelEmbedding,
    # vocab_parallel_cross_entropy): the embedding's output is all-reduced forward, on the
    # critical path; the output layer's input gradient backward, behind its weight-gradient
    # GEMM like the layers'; the loss all-reduces 3 fp32 numbers per token (logit maximum,
    # sum of exponentials, target logit), latency-bound.
    loss_allreduce = comm.all_reduce_s(tokens * 4.0, st.tp, busbw, lat)
    forward = forward + st.has_embedding * one_allreduce + st.has_head * 3.0 * loss_allreduce
    backward = (layers * 2.0 + st.has_head) * one_allreduce
    backward = np.maximum(params.overlap_interference * backward, backward - compute.weight_grad_s)
    return forward + backward
