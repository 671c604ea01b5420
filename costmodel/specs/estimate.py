"""The cost model's answer for one plan: feasibility, time, memory and cost, all explained."""

from pydantic import BaseModel, ConfigDict, Field


class Result(BaseModel):
    """Base of the estimate models: unknown fields refused."""

    model_config = ConfigDict(extra="forbid")


class TimeBreakdown(Result):
    """Seconds per optimizer step on the critical path; the parts add up to ``step_time_s``."""

    compute: float = 0.0
    recompute: float = 0.0
    tp_comm: float = 0.0
    cp_comm: float = 0.0
    ep_comm: float = 0.0
    pp_comm: float = 0.0
    pipeline_bubble: float = 0.0
    dp_comm_exposed: float = 0.0
    optimizer: float = 0.0
    other: float = 0.0


class MemoryBreakdown(Result):
    """GiB per GPU."""

    parameters: float = 0.0
    gradients: float = 0.0
    optimizer_states: float = 0.0
    activations: float = 0.0
    other: float = 0.0

    @property
    def total(self) -> float:
        """GiB per GPU of all parts."""
        return (
            self.parameters + self.gradients + self.optimizer_states + self.activations + self.other
        )


class StageEstimate(Result):
    """One pipeline stage of an estimate: layout, times per micro-batch and memory per GPU."""

    stage: int
    group: str
    gpu: str
    num_layers: int
    tp: int
    dp: int
    time_per_microbatch_s: float = Field(description="Forward + backward of one micro-batch.")
    forward_s: float | None = Field(
        default=None, description="Forward compute of one micro-batch (no communication)."
    )
    backward_s: float | None = Field(
        default=None,
        description="Backward compute of one micro-batch, recompute included (no communication).",
    )
    memory_gib: MemoryBreakdown
    peak_memory_gib: float
    capacity_gib: float


class LostTime(Result):
    """Where the wall time that trains nothing goes (shares of wall time, or seconds)."""

    checkpoint_writes: float = Field(description="Training stalled by checkpoint saves.")
    recomputed: float = Field(
        description="Steps redone after a failure: work since the last durable checkpoint."
    )
    restarts: float = Field(
        description="Restarts: requeue and init, checkpoint load, waits for a replacement node."
    )


class GoodputEstimate(Result):
    """Failures, checkpoints and restarts priced for one plan (``costmodel.goodput``)."""

    goodput: float = Field(description="Share of wall time spent on steps that are kept.")
    checkpoint_strategy: str = Field(
        description="The strategy priced: the one asked for, or sync when it cannot run."
    )
    job_nodes: int
    hot_spare_nodes: int = Field(description="Idle nodes of the group used as hot spares.")
    mtbf_s: float | None = Field(
        default=None,
        description="Mean time between unplanned job interruptions (no failures: None).",
    )
    checkpoint_gib_per_gpu: float = Field(
        description="Largest share of the checkpoint one GPU writes (weights + optimizer states, "
        "deduplicated over replicas: fully parallel save)."
    )
    checkpoint_total_gib: float = Field(description="The whole checkpoint, every shard once.")
    checkpoint_load_gib_per_gpu: float = Field(
        description="What one GPU loads on restart: its weights and optimizer states."
    )
    checkpoint_write_s: float = Field(description="Time to make one checkpoint durable.")
    checkpoint_exposed_s: float = Field(
        description="Training stall per checkpoint (= write for sync; the host copy otherwise)."
    )
    checkpoint_load_s: float
    checkpoint_interval_s: float | None = Field(
        default=None,
        description="Compute time between checkpoints: optimal (Daly 2006) unless set.",
    )
    restart_s: float = Field(description="Expected downtime per unplanned interruption.")
    lost_work_per_failure_s: float = Field(
        description="Expected work redone per unplanned interruption."
    )
    host_memory_gib_per_node: float = Field(
        description="Host memory the strategy holds per node (staging buffer, in-memory copies)."
    )
    interruptions: float | None = Field(
        default=None, description="Expected interruptions over training.train_tokens."
    )
    unplanned_interruptions: float | None = None
    lost_share: LostTime = Field(description="Shares of wall time; they add up to 1 - goodput.")
    lost_time_s: LostTime | None = Field(
        default=None, description="Seconds over training.train_tokens."
    )


class Estimate(Result):
    """The cost model's answer for one plan: feasibility and reasons, step time, throughput, memory,
    cost and goodput, with per-stage breakdowns."""

    feasible: bool
    reasons: list[str] = Field(default_factory=list)
    num_gpus: int
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    peak_memory_gib: float
    memory_gib: MemoryBreakdown
    per_stage: list[StageEstimate]
    time_breakdown_s: TimeBreakdown
    usd_per_hour: float | None = None
    usd_per_million_tokens: float | None = None
    time_to_train_s: float | None = Field(
        default=None,
        description="Wall time for training.train_tokens at effective_tokens_per_s: "
        "failures, checkpoints and restarts included.",
    )
    effective_tokens_per_s: float | None = Field(
        default=None, description="tokens_per_s x goodput: the tokens/s a run really keeps."
    )
    usd_to_train: float | None = Field(
        default=None, description="usd_per_hour x time_to_train_s (goodput included)."
    )
    goodput: GoodputEstimate | None = None
    total_params: int | None = Field(
        default=None, description="Every weight of the model (costmodel.flops.total_params)."
    )
    active_params: int | None = Field(
        default=None,
        description="Parameters one token uses: all but the routed experts it is not sent to "
        "and the input embedding lookup (costmodel.flops.active_params); = total for dense "
        "models but the lookup.",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="What a feasible plan should not hide: tensor- or expert-parallel groups "
        "that span nodes (their collectives then cross the network), pipeline or "
        "data-parallel traffic over a zone link.",
    )
    notes: list[str] = Field(
        default_factory=list,
        description="Heterogeneous plans in words: which node group runs which stages (or "
        "pipelines), how much of each group is used, and why a group is left out.",
    )
    framework: str = Field(
        default="any", description="The runtime the plan was priced for (training.framework)."
    )
    idle_gpus: int = Field(
        default=0,
        description="GPUs of the node groups the plan runs on that it leaves idle; they are "
        "charged in usd_per_hour (they are held all the same).",
    )
    launchable_by: list[str] = Field(
        default_factory=list,
        description="Frameworks whose launch table can run this plan (costmodel.frameworks): "
        "what the exports can write it for.",
    )
