"""One dense layer's stage inputs for formula tests: a single plan, no pipeline, no data
parallelism, nothing sharded or offloaded (arrays of shape ``(1,)``)."""

import numpy as np

from costmodel.stage import StageInputs


def one_layer_inputs(
    *, tp: int, sp: int, micro_batch_size: float, recompute: int = 0
) -> StageInputs:
    """``tp``-way tensor parallelism (``sp``: sequence parallel 0/1), ``micro_batch_size``
    sequences, ``recompute`` code (0 none / 1 selective / 2 full)."""
    one = np.ones(1)
    return StageInputs(
        dense_layers=one,
        moe_layers=0 * one,
        has_embedding=0 * one,
        has_head=0 * one,
        tp=tp * one,
        cp=one,
        ep=one,
        dp=one,
        micro_batch_size=micro_batch_size * one,
        sequence_parallel=np.array([sp]),
        recompute=np.array([recompute]),
        zero_stage=np.array([0]),
        offload_optimizer=np.array([0]),
        tp_comm_overlap=np.array([0]),
        pp=one,
        vpp=one,
        stage_index=0 * one,
        microbatches=one,
        gpipe=np.array([0]),
        pp_Bps=one,
        pp_latency_s=0 * one,
        dp_Bps=np.full(1, np.nan),
        dp_latency_s=np.full(1, np.nan),
    )
