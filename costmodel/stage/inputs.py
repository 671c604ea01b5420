"""What a stage instance holds and how it is parallelized (in), and what it costs (out).

Every field is a numpy array with one entry per stage instance (a stage of one candidate plan),
so the same code prices one heterogeneous plan's stages or a million homogeneous plans at once.
"""

from dataclasses import dataclass

import numpy as np

Array = np.ndarray
GIB = float(1024**3)

RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL = 0, 1, 2
RECOMPUTE_CODES = {"none": RECOMPUTE_NONE, "selective": RECOMPUTE_SELECTIVE, "full": RECOMPUTE_FULL}


@dataclass
class StageInputs:
    """Per stage instance: what it holds and how it is parallelized (arrays)."""

    dense_layers: Array
    moe_layers: Array
    has_embedding: Array  # 0/1
    has_head: Array  # 0/1
    tp: Array
    cp: Array
    ep: Array
    dp: Array
    micro_batch_size: Array
    sequence_parallel: Array  # 0/1
    recompute: Array  # RECOMPUTE_* codes
    zero_stage: Array
    offload_optimizer: Array  # 0/1
    tp_comm_overlap: Array  # 0/1
    pp: Array
    vpp: Array
    stage_index: Array
    microbatches: Array
    gpipe: Array  # 0/1: all micro-batches in flight (GPipe) instead of 1F1B
    # Links the pipeline traffic of this stage crosses (bytes/s, s); set by the caller.
    pp_Bps: Array
    pp_latency_s: Array
    # Data-parallel group bandwidth override (heterogeneous DP, zone links); NaN = by placement.
    dp_Bps: Array
    dp_latency_s: Array
    # Ranks the ZeRO-sharded states are split over (hybrid sharding); None or 0 = all dp x cp.
    dp_shard: Array | None = None
    # Expert tensor-parallel size (MoE parallel folding); None = tp.
    etp: Array | None = None

    @property
    def expert_tp(self) -> Array:
        """Tensor-parallel degree of the expert layers (``etp``, default ``tp``),
        ``(n_instances,)``."""
        return self.tp if self.etp is None else np.where(self.etp > 0, self.etp, self.tp)

    @property
    def folded(self) -> Array:
        """Whether the expert groups are laid out apart from attention's (MoE parallel folding:
        etp differs from tp, or ep does not fit in the data-parallel ranks)."""
        return (self.expert_tp != self.tp) | ((self.dp * self.cp) % self.ep != 0)

    @property
    def layers(self) -> Array:
        """Layers of each stage instance, dense and MoE, ``(n_instances,)``."""
        return self.dense_layers + self.moe_layers


@dataclass
class StageCosts:
    """Per stage instance results (arrays). Times are seconds, memory GiB."""

    forward_s: Array  # compute only, one micro-batch
    backward_s: Array  # compute only, one micro-batch
    recompute_s: Array
    tp_comm_s: Array
    cp_comm_s: Array
    ep_comm_s: Array
    pp_comm_s: Array
    sharded_dp_exposed_s: Array  # ZeRO-2/3 traffic per micro-batch compute cannot hide
    overhead_s: Array
    dp_comm_s: Array  # end-of-step gradient reduction (+ ZeRO-1/2 parameter all-gather)
    dp_overlap_budget_s: Array  # backward compute the reduction may hide behind
    optimizer_s: Array
    parameters_gib: Array
    gradients_gib: Array
    optimizer_states_gib: Array
    activations_gib: Array
    other_gib: Array
    inflight_activations_gib: Array  # the part of activations that scales with in-flight layers
    inflight_layers: Array
    hardware_flops: Array  # per micro-batch, incl. recompute (for HFU)
    checkpoint_held_gib: Array  # weights + optimizer states one GPU loads on restart
    checkpoint_write_gib: Array  # its share of the unique checkpoint (fully parallel save)

    @property
    def per_microbatch_s(self) -> Array:
        """Seconds of one micro-batch on the stage (compute, recompute, exposed communication,
        overhead), ``(n_instances,)``."""
        return (
            self.forward_s
            + self.backward_s
            + self.recompute_s
            + self.tp_comm_s
            + self.cp_comm_s
            + self.ep_comm_s
            + self.pp_comm_s
            + self.sharded_dp_exposed_s
            + self.overhead_s
        )

    @property
    def memory_gib(self) -> Array:
        """GiB per GPU of the stage (states, activations, other), ``(n_instances,)``."""
        return (
            self.parameters_gib
            + self.gradients_gib
            + self.optimizer_states_gib
            + self.activations_gib
            + self.other_gib
        )


def by_recompute(mode: Array, *, full: Array, selective: Array) -> Array:
    """Extra forward work of each recompute mode (0 for none)."""
    return np.where(
        mode == RECOMPUTE_FULL, full, np.where(mode == RECOMPUTE_SELECTIVE, selective, 0.0)
    )


def sequence_divisor(st: StageInputs) -> Array:
    """What divides the activations outside the TP region: tp under sequence parallelism."""
    return np.where(st.sequence_parallel > 0, st.tp, 1)
