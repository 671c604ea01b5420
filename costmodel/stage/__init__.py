"""Per-stage costs: one pipeline stage's time per micro-batch, its step-level traffic and memory.

One module per cost term, each citing its source: ``compute`` (forward, backward, recompute),
``tensor_parallel``, ``context_parallel``, ``expert_parallel``, ``pipeline_sends`` and
``data_parallel`` (the communication kinds), ``optimizer`` (the step), ``state`` (parameters,
gradients, optimizer states) and ``activations`` (activation and other memory). ``stage_costs``
composes them; the kernel-time primitives live in ``costmodel.kernels``.

Every array argument and result has one entry per stage instance (a stage of one candidate
plan): ``(n_instances,)``, or shapes that broadcast (``costmodel.homogeneous`` passes
``(3, n_plans)`` arrays, the first, middle and last stage of each plan). Times are seconds per
micro-batch unless named otherwise, memory is bytes (``*_B``) or GiB (``*_gib``) per GPU. See
README.md, 'How the cost model works'.
"""

import numpy as np

from costmodel.context import ModelContext
from costmodel.kernels import FLASH_BACKWARD_FACTOR, Hardware, gemm_time_s
from costmodel.stage.activations import activation_memory, inflight_layers, other_memory_B
from costmodel.stage.compute import compute_times, hardware_flops_per_microbatch
from costmodel.stage.context_parallel import cp_comm_s
from costmodel.stage.data_parallel import dp_traffic
from costmodel.stage.expert_parallel import ep_comm_s
from costmodel.stage.inputs import (
    GIB,
    RECOMPUTE_CODES,
    RECOMPUTE_FULL,
    RECOMPUTE_NONE,
    RECOMPUTE_SELECTIVE,
    StageCosts,
    StageInputs,
)
from costmodel.stage.optimizer import optimizer_step_s
from costmodel.stage.pipeline_sends import pp_comm_s
from costmodel.stage.state import checkpoint_bytes, stage_params, state_bytes
from costmodel.stage.tensor_parallel import tp_comm_s

__all__ = [
    "FLASH_BACKWARD_FACTOR",
    "RECOMPUTE_CODES",
    "RECOMPUTE_FULL",
    "RECOMPUTE_NONE",
    "RECOMPUTE_SELECTIVE",
    "Hardware",
    "StageCosts",
    "StageInputs",
    "gemm_time_s",
    "inflight_layers",
    "stage_costs",
]


def stage_costs(ctx: ModelContext, st: StageInputs, hw: Hardware) -> StageCosts:
    """Every cost term of each stage instance, for one micro-batch and one step."""
    tokens = st.micro_batch_size * ctx.seq_length / st.cp  # local tokens per micro-batch
    compute = compute_times(ctx, st, hw, tokens)
    held = stage_params(ctx, st)
    states = state_bytes(ctx, st, held)
    dp = dp_traffic(
        ctx,
        st,
        hw,
        held,
        backward_s=compute.backward_s,
        microbatch_compute_s=compute.forward_s + compute.backward_s + compute.recompute_s,
    )
    activations = activation_memory(ctx, st, tokens)
    other_B = other_memory_B(ctx, st, held)
    checkpoint = checkpoint_bytes(ctx, st, held)
    return StageCosts(
        forward_s=compute.forward_s,
        backward_s=compute.backward_s,
        recompute_s=compute.recompute_s,
        tp_comm_s=tp_comm_s(ctx, st, hw, tokens, compute),
        cp_comm_s=cp_comm_s(ctx, st, hw, tokens, compute),
        ep_comm_s=ep_comm_s(ctx, st, hw, tokens),
        pp_comm_s=pp_comm_s(ctx, st, tokens),
        sharded_dp_exposed_s=dp.sharded_exposed_s,
        overhead_s=np.full_like(compute.forward_s, ctx.params.per_microbatch_overhead_s),
        dp_comm_s=dp.end_of_step_s,
        dp_overlap_budget_s=dp.overlap_budget_s,
        optimizer_s=optimizer_step_s(ctx, st, hw, states.optimizer_params),
        parameters_gib=states.weights_B / GIB,
        gradients_gib=states.grads_B / GIB,
        optimizer_states_gib=states.optimizer_B / GIB,
        activations_gib=activations.total_B / GIB,
        inflight_activations_gib=activations.inflight_B / GIB,
        inflight_layers=activations.inflight_layers,
        other_gib=ctx.params.framework_memory_gib + other_B / GIB,
        hardware_flops=hardware_flops_per_microbatch(ctx, st, tokens),
        checkpoint_held_gib=checkpoint.held_B / GIB,
        checkpoint_write_gib=checkpoint.written_B / GIB,
    )
