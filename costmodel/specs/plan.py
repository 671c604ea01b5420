"""A parallelization plan: how one training step is laid out over the cluster's GPUs."""

from typing import Literal

from pydantic import Field, model_validator

from costmodel.specs.base import Integer, Number, Spec

Recompute = Literal["none", "selective", "full"]
Schedule = Literal["1f1b", "gpipe"]


class ReplicaSpec(Spec):
    """One data-parallel replica of a stage, placed on a given node group."""

    group: str = Field(min_length=1, max_length=100)
    tp: Integer = Field(default=1, ge=1, le=4096)


class StageSpec(Spec):
    """One pipeline stage of a heterogeneous plan.

    Either ``group`` (+ optional ``tp``/``dp``, all replicas on one GPU type) or ``replicas``
    (heterogeneous data parallelism: replica r of every stage forms pipeline r).
    """

    num_layers: Integer = Field(ge=1, le=10_000)
    group: str | None = Field(default=None, min_length=1, max_length=100)
    tp: Integer | None = Field(default=None, ge=1, le=4096)
    dp: Integer | None = Field(default=None, ge=1, le=1_000_000)
    replicas: list[ReplicaSpec] | None = Field(default=None, min_length=1, max_length=100_000)

    @model_validator(mode="after")
    def _group_or_replicas(self) -> "StageSpec":
        if (self.group is None) == (self.replicas is None):
            raise ValueError("a stage gives exactly one of 'group' or 'replicas'")
        if self.replicas is not None and (self.tp is not None or self.dp is not None):
            raise ValueError("a stage with 'replicas' sets tp per replica and no dp")
        return self


class Plan(Spec):
    """Parallel degrees, micro-batch, ZeRO stage, recompute and schedule of one training step;
    homogeneous (one group) or per stage (``stages``)."""

    dp: Integer = Field(ge=1, le=1_000_000, description="Data-parallel replicas.")
    tp: Integer = Field(ge=1, le=4096, description="Tensor-parallel degree (Megatron).")
    pp: Integer = Field(ge=1, le=10_000, description="Pipeline stages.")
    cp: Integer = Field(
        default=1, ge=1, le=4096, description="Context-parallel degree (ring attn)."
    )
    ep: Integer = Field(
        default=1,
        ge=1,
        le=100_000,
        description=(
            "Expert-parallel degree (MoE). With MoE parallel folding (Megatron-Core, Liu et al. "
            "2024) the expert groups span tensor, context and data ranks: ep x etp divides "
            "tp x cp x dp."
        ),
    )
    etp: Integer | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Expert tensor-parallel size (Megatron --expert-tensor-parallel-size); "
        "default: tp.",
    )
    vpp: Integer = Field(default=1, ge=1, le=1024, description="Virtual stages per pipeline rank.")
    micro_batch_size: Integer = Field(ge=1, le=1_000_000, description="Sequences per micro-batch.")
    zero_stage: Integer = Field(
        default=0, ge=0, le=3, description="0 none, 1 distributed optimizer, 2 +grads, 3 FSDP."
    )
    first_stage_layers: Integer | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description=(
            "Layers of the first pipeline stage (Megatron --decoder-first-pipeline-num-layers); "
            "the rest split evenly over the middle stages. Default: the even split when pp x "
            "vpp divides num_layers, else the balanced uneven one."
        ),
    )
    last_stage_layers: Integer | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Layers of the last stage (Megatron --decoder-last-pipeline-num-layers).",
    )
    dp_shard: Integer | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description=(
            "Ranks the ZeRO-sharded states are split over: hybrid sharding (PyTorch HSDP, "
            "torchtitan's data_parallel_shard_degree, DeepSpeed MiCS), replicated across the "
            "dp x cp / dp_shard groups; default: all dp x cp ranks."
        ),
    )
    recompute: Recompute = "none"
    sequence_parallel: bool | None = Field(default=None, description="Default: tp > 1.")
    offload_optimizer: bool = False
    schedule: Schedule = "1f1b"
    overlap_grad_reduce: bool = Field(
        default=True, description="Overlap DP gradient reduction with backward compute."
    )
    tp_comm_overlap: bool = Field(
        default=False, description="Overlap TP collectives with GEMMs (Megatron/async TP)."
    )
    group: str | None = Field(
        default=None, description="Node group of a homogeneous plan; default: the first group."
    )
    stages: list[StageSpec] | None = Field(default=None, min_length=1, max_length=10_000)
    batch_shares: list[Number] | None = Field(
        default=None, description="Fraction of the global batch per pipeline (heterogeneous DP)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> "Plan":
        if self.vpp > 1 and self.pp == 1:
            raise ValueError("vpp > 1 needs pp > 1 (interleaving splits pipeline stages)")
        if self.vpp > 1 and self.schedule == "gpipe":
            raise ValueError("vpp > 1 (interleaved) is a 1F1B schedule; set schedule '1f1b'")
        if (self.first_stage_layers or self.last_stage_layers) and self.pp == 1:
            raise ValueError("first_stage_layers/last_stage_layers need pp > 1")
        if (self.first_stage_layers or self.last_stage_layers) and self.stages is not None:
            raise ValueError("stages give every stage's num_layers; drop first/last_stage_layers")
        if self.dp_shard is not None:
            if self.zero_stage == 0:
                raise ValueError("dp_shard needs zero_stage >= 1 (nothing is sharded at 0)")
            if (self.dp * self.cp) % self.dp_shard:
                raise ValueError(
                    f"dp_shard {self.dp_shard} must divide dp x cp = {self.dp * self.cp}"
                )
            if self.stages is not None:
                raise ValueError("dp_shard applies to homogeneous plans only")
        if self.etp is not None and self.stages is not None:
            raise ValueError("etp applies to homogeneous plans only")
        if self.sequence_parallel and self.tp == 1 and self.stages is None:
            raise ValueError("sequence_parallel needs tp > 1")
        if self.stages is not None:
            if self.group is not None:
                raise ValueError("give either 'group' (homogeneous) or 'stages', not both")
            uneven = sorted({s.dp for s in self.stages if s.dp is not None and s.dp != self.dp})
            if uneven:
                raise ValueError(f"stage dp {uneven[0]} differs from the plan's dp {self.dp}")
            if len(self.stages) != self.pp:
                raise ValueError(f"stages lists {len(self.stages)} stages but pp is {self.pp}")
            replica_counts = {len(s.replicas) for s in self.stages if s.replicas is not None}
            if replica_counts and (
                len(replica_counts) > 1 or any(s.replicas is None for s in self.stages)
            ):
                raise ValueError("every stage must list the same number of replicas")
            if replica_counts and replica_counts != {self.dp}:
                raise ValueError(f"stages list {replica_counts.pop()} replicas but dp is {self.dp}")
        if self.batch_shares is not None:
            if len(self.batch_shares) != self.dp:
                raise ValueError("batch_shares needs one entry per data-parallel pipeline (dp)")
            if any(share <= 0 for share in self.batch_shares):
                raise ValueError("batch_shares must be positive")
            # Shares are fractions of one global batch; rounded inputs (0.33, 0.33, 0.34) pass.
            if abs(sum(self.batch_shares) - 1.0) > 1e-3:
                raise ValueError(f"batch_shares must sum to 1 (got {sum(self.batch_shares):g})")
        return self

    @property
    def sp(self) -> bool:
        """Sequence parallelism in effect."""
        if self.sequence_parallel is None:
            return self.tp > 1
        return self.sequence_parallel

    @property
    def is_heterogeneous(self) -> bool:
        """Whether the plan lists its stages (``stages``)."""
        return self.stages is not None
