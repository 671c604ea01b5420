"""Reliability of a node group and the run's checkpointing: what goodput is priced from.

Failure rates are per node-day, by cause. The defaults are the Llama 3 405B pre-training run's
(Meta, "The Llama 3 Herd of Models", 2024, Sec. 3.3.4 and Table 5): 419 unexpected and 47
planned interruptions in 54 days on 16,384 H100 GPUs (2,048 nodes of 8), i.e. over
2,048 x 54 = 110,592 node-days. Kokolis et al. 2024 ("Revisiting Reliability in Large-Scale
Machine Learning Research Clusters", HPCA 2025) measured 6.5 (RSC-1) and 2.3 (RSC-2) failures
per 1,000 node-days on A100 clusters: the same order as Llama 3's 3.8.
"""

from typing import Literal

from pydantic import Field

from costmodel.specs.base import Spec

# Llama 3 (2024) Sec. 3.3.4: interruptions are counted over 2,048 nodes x 54 days.
_LLAMA3_NODE_DAYS = 2_048 * 54

CheckpointStrategy = Literal["sync", "async", "in_memory"]


class ReliabilitySpec(Spec):
    """How often a node group's nodes interrupt a job, and what a restart and a checkpoint cost.

    A synchronous job stops whenever any of its nodes fails, so its failure rate is its node
    count times the per-node rate (Kokolis et al. 2024, Sec. V: MTTF falls as 1/GPUs).
    """

    # Llama 3 Table 5, GPU rows: faulty GPU 148, HBM3 72, SRAM 19, system processor 17, silent
    # data corruption 6, thermal interface + sensor 6 = 268 interruptions.
    gpu_failures_per_node_day: float = Field(
        default=268 / _LLAMA3_NODE_DAYS,
        ge=0,
        le=100,
        description="GPU faults (the GPU, its HBM/SRAM, SDC); the node must be replaced.",
    )
    # Llama 3 Table 5, host rows: NIC 7, SSD 3, power supply 3, chassis 2, IO expansion board 2,
    # CPU 2, system memory 2 = 21.
    host_failures_per_node_day: float = Field(
        default=21 / _LLAMA3_NODE_DAYS,
        ge=0,
        le=100,
        description="Host faults (NIC, SSD, PSU, CPU, DRAM...); the node must be replaced.",
    )
    # Llama 3 Table 5: network switch/cable 35.
    network_failures_per_node_day: float = Field(
        default=35 / _LLAMA3_NODE_DAYS,
        ge=0,
        le=100,
        description="Switch and cable faults; the job restarts on the same nodes.",
    )
    # Llama 3 Table 5: software bug 54, dependency 2, NCCL watchdog timeouts 7 = 63.
    software_failures_per_node_day: float = Field(
        default=63 / _LLAMA3_NODE_DAYS,
        ge=0,
        le=100,
        description="Software bugs, dependencies, collective timeouts; restart, same nodes.",
    )
    # Llama 3 Table 5: (unplanned) host maintenance 32.
    maintenance_failures_per_node_day: float = Field(
        default=32 / _LLAMA3_NODE_DAYS,
        ge=0,
        le=100,
        description="Unplanned host maintenance: the node leaves the job and is replaced.",
    )
    # Llama 3 Sec. 3.3.4: 47 planned interruptions (firmware upgrades, config/dataset updates).
    planned_interruptions_per_node_day: float = Field(
        default=47 / _LLAMA3_NODE_DAYS,
        ge=0,
        le=100,
        description="Planned stops: a checkpoint is written first, so only the restart is lost.",
    )
    # Assumption (no published figure): scheduler requeue, container start, NCCL init and
    # warm-up. Llama 3 Sec. 3.3.4 says startup time was reduced but gives no number.
    restart_s: float = Field(
        default=600.0,
        ge=0,
        le=1e6,
        description="Job restart after an interruption, checkpoint load excluded.",
    )
    # Assumption (no published figure): drain, health checks and re-allocation of a node.
    node_replacement_s: float = Field(
        default=3_600.0,
        ge=0,
        le=1e7,
        description="Extra wait for a healthy node when a node must be replaced and no hot "
        "spare is free.",
    )
    # Assumption (no published figure): a failed node is back in the spare pool after a day.
    node_repair_s: float = Field(
        default=86_400.0,
        ge=0,
        le=1e8,
        description="How long a replaced node stays out of the spare pool (repair, burn-in).",
    )
    # Llama 3 Sec. 3.3.1: Tectonic sustains 2 TB/s and peaks at 7 TB/s for the 16K-GPU job's
    # checkpoints: 7 TB/s / 2,048 nodes = 3.4 GB/s per node.
    checkpoint_write_GBps_per_node: float = Field(
        default=7_000 / 2_048, gt=0, le=1e5, description="Checkpoint storage write, GB/s."
    )
    checkpoint_read_GBps_per_node: float = Field(
        default=7_000 / 2_048, gt=0, le=1e5, description="Checkpoint storage read, GB/s."
    )
    # NVIDIA DGX H100 datasheet: 2 TB system memory.
    host_memory_gib_per_node: float = Field(
        default=2_048.0,
        gt=0,
        le=1e6,
        description="Host DRAM, for async staging buffers and in-memory checkpoints.",
    )
    # Assumption: half of PCIe 5.0 x16's 64 GB/s per direction (two GPUs share a host uplink
    # on DGX H100's PCIe switches).
    host_copy_GBps_per_gpu: float = Field(
        default=25.0,
        gt=0,
        le=1e5,
        description="Device-to-host copy of a GPU's checkpoint shard (async and in-memory).",
    )

    @property
    def unplanned_per_node_day(self) -> float:
        """Unplanned interruptions per node-day, all causes."""
        return (
            self.gpu_failures_per_node_day
            + self.host_failures_per_node_day
            + self.network_failures_per_node_day
            + self.software_failures_per_node_day
            + self.maintenance_failures_per_node_day
        )

    @property
    def replacement_per_node_day(self) -> float:
        """Failures after which the job needs another node."""
        return (
            self.gpu_failures_per_node_day
            + self.host_failures_per_node_day
            + self.maintenance_failures_per_node_day
        )


DEFAULT_RELIABILITY = ReliabilitySpec()


class CheckpointSpec(Spec):
    """How the run checkpoints and how many hot spare nodes it keeps."""

    strategy: CheckpointStrategy = Field(
        default="sync",
        description=(
            "sync: training stops while each GPU writes its shard to storage "
            "(torch.distributed.checkpoint.save, Megatron's default); async: training stops "
            "only for the device-to-host copy and storage is written in the background "
            "(torch.distributed.checkpoint.async_save, Megatron --async-save), which needs a "
            "pinned host buffer; in_memory: shards are copied to host memory and to peers' "
            "host memory (Gemini, Wang et al. SOSP 2023), restarts load from there; needs "
            "host memory for every copy and at least in_memory_copies + 1 nodes. When host "
            "memory or peers are short, the plan is priced as sync (a warning says so)."
        ),
    )
    interval_s: float | None = Field(
        default=None,
        gt=0,
        le=1e8,
        description="Compute time between checkpoints; default: the optimal interval "
        "(Young 1974 / Daly 2006, costmodel.goodput). Never shorter than a step, nor than "
        "an asynchronous write (saves cannot overlap).",
    )
    in_memory_copies: int = Field(
        default=1,
        ge=1,
        le=16,
        description="Peer nodes holding a copy of each node's in-memory checkpoint (Gemini).",
    )
    hot_spare_nodes: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="Idle nodes of the plan's node group kept warm to replace a failed node "
        "at once. Default: every node the plan leaves idle (they are paid for anyway); more "
        "than the idle nodes cannot be kept.",
    )
