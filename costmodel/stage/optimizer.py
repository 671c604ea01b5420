"""Optimizer step time: memory-bound over the local parameter shard, or on the host when the
optimizer is offloaded (ZeRO-Offload, Ren et al. ATC'21: CPU Adam + PCIe copies)."""

import numpy as np

from costmodel.context import ADAM_STEP_BYTES_PER_PARAM, ModelContext
from costmodel.kernels import Hardware, memory_bound_s
from costmodel.stage.inputs import Array, StageInputs


def optimizer_step_s(
    ctx: ModelContext, st: StageInputs, hw: Hardware, optimizer_params: Array
) -> Array:
    """One Adam update of the ``optimizer_params`` this GPU owns."""
    params = ctx.params
    step_B = ADAM_STEP_BYTES_PER_PARAM * optimizer_params
    on_gpu = memory_bound_s(step_B, hw)
    offloaded = optimizer_params * (ctx.grad_bytes + ctx.weight_bytes) / (
        params.pcie_GBps * 1e9
    ) + step_B / (params.cpu_adam_GBps * 1e9)
    return np.where(st.offload_optimizer > 0, offloaded, on_gpu)
