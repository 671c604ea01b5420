"""Parameters a stage holds per GPU and the model-state memory they take under each ZeRO stage.

Bytes per parameter come from ``context._BYTES_PER_PARAM`` (Megatron's 18 B/param for bf16,
Rajbhandari et al. SC'20 Sec. 3.1's 16 for fp16). ZeRO (Rajbhandari et al. Fig. 1) shards the
optimizer states (stage 1, Megatron's distributed optimizer), also the gradients (stage 2) and
also the weights (stage 3 / FSDP) over the data-parallel group: dp x cp ranks for the
replicated parameters, (dp x cp) / ep for the experts (each expert has fewer replicas).
Hybrid sharding (``dp_shard``) splits the states over dp_shard ranks and replicates the shards.
"""

from dataclasses import dataclass

import numpy as np

from costmodel.context import ModelContext
from costmodel.stage.inputs import Array, StageInputs


@dataclass
class StageParams:
    """Parameter counts per GPU of one stage instance, before ZeRO sharding."""

    replicated: Array  # attention, dense MLP, shared experts, norms, embedding/head shards
    experts: Array  # routed experts this GPU hosts
    shard: Array  # ranks the replicated parameters are sharded over (dp x cp, or dp_shard)
    expert_shard: Array  # ranks the experts are sharded over
    per_layer: Array  # one layer's parameters per GPU (what ZeRO-3 gathers at a time)
    replicas: Array  # copies of each shard (hybrid sharding: dp x cp / dp_shard, else 1)

    def sharded_at(self, stage: int, zero: Array) -> Array:
        """Parameters of one kind of state per GPU: sharded when ``zero >= stage``."""
        return np.where(
            zero >= stage,
            self.replicated / self.shard + self.experts / self.expert_shard,
            self.replicated + self.experts,
        )


def stage_params(ctx: ModelContext, st: StageInputs) -> StageParams:
    """Parameter counts per GPU of each stage instance before ZeRO sharding (arrays
    ``(n_instances,)``)."""
    shape = ctx.shape
    layers = st.layers
    dense_per_layer = shape.attention_params + shape.dense_mlp_params
    moe_replicated = shape.attention_params + shape.moe_shared_params
    embedding = shape.vocab * shape.hidden
    replicated = (
        st.dense_layers * dense_per_layer
        + st.moe_layers * moe_replicated
        + st.has_embedding * embedding
        + st.has_head * embedding
    ) / st.tp + layers * shape.norm_params
    # MLA's down-projections are whole on every tensor-parallel rank (Megatron-Core's
    # MLASelfAttention builds them duplicated): add back what the division took off.
    replicated = replicated + layers * shape.mla_down_params * (1.0 - 1.0 / st.tp)
    experts_per_gpu = np.where(shape.num_experts > 0, shape.num_experts / st.ep, 0.0)
    experts = st.moe_layers * experts_per_gpu * shape.expert_params / st.expert_tp
    data_parallel = st.dp * st.cp
    # Hybrid sharding only means something where states are sharded (ZeRO >= 1).
    shard = (
        data_parallel
        if st.dp_shard is None
        else np.where((st.dp_shard > 0) & (st.zero_stage >= 1), st.dp_shard, data_parallel)
    )
    per_layer = (
        (
            st.dense_layers * dense_per_layer
            + st.moe_layers
            * (moe_replicated + experts_per_gpu * shape.expert_params * st.tp / st.expert_tp)
        )
        / np.maximum(layers, 1)
        / st.tp
    )
    return StageParams(
        replicated=replicated,
        experts=experts,
        shard=shard,
        # Expert data parallelism: the tp x (dp x cp) ranks over ep x etp expert ranks.
        expert_shard=np.maximum(shard * st.tp / (st.ep * st.expert_tp), 1.0),
        per_layer=per_layer,
        replicas=data_parallel / shard,
    )


@dataclass
class StateBytes:
    """Per stage instance, shape ``(n_instances,)``: weight, gradient and optimizer bytes per GPU,
    and the parameters whose optimizer states the GPU updates."""

    weights_B: Array
    grads_B: Array
    optimizer_B: Array
    optimizer_params: Array  # parameters whose optimizer states this GPU holds and updates


def state_bytes(ctx: ModelContext, st: StageInputs, held: StageParams) -> StateBytes:
    """Weights, gradients and optimizer states per GPU under the stage's ZeRO stage."""
    zero = st.zero_stage
    optimizer_params = held.sharded_at(1, zero)
    return StateBytes(
        weights_B=ctx.weight_bytes * held.sharded_at(3, zero),
        grads_B=ctx.grad_bytes * held.sharded_at(2, zero),
        optimizer_B=np.where(st.offload_optimizer > 0, 0.0, ctx.optimizer_bytes * optimizer_params),
        optimizer_params=optimizer_params,
    )


@dataclass
class CheckpointBytes:
    """One GPU's part of a checkpoint: weights and optimizer states (no gradients)."""

    held_B: Array  # what the GPU holds under its ZeRO stage: what it loads on restart
    written_B: Array  # its share of the unique checkpoint (fully parallel save)


def checkpoint_bytes(ctx: ModelContext, st: StageInputs, held: StageParams) -> CheckpointBytes:
    """Checkpoint bytes per GPU, from the same parameter counts as the state memory.

    A checkpoint holds the weights and the optimizer states (Megatron's distributed checkpoint:
    the low-precision weights plus fp32 master, m and v; an offloaded optimizer is saved all
    the same). Replicated state is written once: distributed checkpointing splits each shard's
    replicas' write among them (Megatron-Core ``--ckpt-fully-parallel-save``, PyTorch DCP's
    deduplication), so a GPU writes its stage's unique bytes over every data-parallel rank.
    """
    zero = st.zero_stage
    held_B = ctx.weight_bytes * held.sharded_at(3, zero) + ctx.optimizer_bytes * held.sharded_at(
        1, zero
    )
    unique_params = (held.replicated / held.shard + held.experts / held.expert_shard) / np.maximum(
        held.replicas, 1.0
    )
    return CheckpointBytes(
        held_B=held_B, written_B=(ctx.weight_bytes + ctx.optimizer_bytes) * unique_params
    )
