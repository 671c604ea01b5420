"""Measurements the cost model is calibrated against: machine profiles and observed training steps.

A ``Profile`` holds micro-benchmarks of one machine (GEMMs, memory-bound kernels, fused
attention, collectives), each a median over repeated runs with its spread, plus the device's
identity and the ``GpuSpec`` the cost model should describe it with. A ``StepObservation`` is a
plan that really ran, with its measured step time (or tokens/s) and optionally its peak memory.
Both are plain data: ``profiler`` produces profiles, users import nccl-tests output and
training logs, and ``costmodel.calibration`` fits ``EfficiencyParams`` to them.

Collective sizes follow nccl-tests' convention (PERFORMANCE.md): all-reduce and all-to-all give
the per-rank buffer, all-gather the gathered OUTPUT and reduce-scatter the INPUT buffer, p2p the
bytes sent, so ``algbw = size / time`` and ``busbw = algbw * factor`` match nccl-tests' columns.
"""

from typing import Literal

from pydantic import Field, field_validator, model_validator

from costmodel.hardware import lookup_gpu
from costmodel.specs import ClusterSpec, GpuSpec, ModelSpec, Plan, TrainingSpec
from costmodel.specs.base import Spec
from costmodel.specs.training import Precision

CollectiveOp = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]
MemoryKernel = Literal["copy", "add", "scale", "gelu", "layer_norm", "softmax"]
# "forward_backward": one timing of a forward and its backward pass together, as the
# FlashAttention benchmark's "fwd + bwd" column reports (priced as 1 + FLASH_BACKWARD_FACTOR
# forwards).
AttentionPass = Literal["forward", "backward", "forward_backward"]

PROFILE_SCHEMA_VERSION = 1


class Timing(Spec):
    """A repeated measurement: median and spread (10th / 90th percentile) over ``repeats`` runs
    taken after warm-up. ``profiler`` never records fewer than 5 repeats; imported data may
    carry 1 when its tool reports an average only (nccl-tests)."""

    median_s: float = Field(gt=0, le=1e6)
    low_s: float | None = Field(default=None, gt=0, le=1e6, description="10th percentile.")
    high_s: float | None = Field(default=None, gt=0, le=1e6, description="90th percentile.")
    repeats: int = Field(default=1, ge=1, le=10_000_000)
    trimmed_mean_s: float | None = Field(
        default=None,
        gt=0,
        le=1e6,
        description=(
            "Mean of the runs between the 10th and 90th percentiles. What a sequence of such "
            "operations adds up to when their times are heavy-tailed (collectives: see "
            "CollectiveSample.priced_s), without the rare extremes of other processes."
        ),
    )

    runs_s: list[float] | None = Field(
        default=None,
        max_length=100_000,
        description="The raw samples: every timed run's seconds per call, in the order taken "
        "(absent when imported from a tool that reports summaries only).",
    )
    citation: str | None = Field(
        default=None,
        max_length=1000,
        description=(
            "Where the figure comes from when it was not measured here: a publication or a "
            "repository file at a commit, and the row it was transcribed from (the built-in "
            "defaults' profiles cite validation/microbench.csv row ids). Not used in fitting."
        ),
    )
    sustained: bool | None = Field(
        default=None,
        description=(
            "Whether the GPU ran under continuous load long enough (seconds) for its clocks to "
            "settle at the power limit, as in training (True), or in a short burst at boost "
            "clocks (False: tens of iterations after a short warm-up); None: not stated. The "
            "built-in defaults read short-burst compute samples at the sustained clock "
            "(costmodel.calibration.defaults)."
        ),
    )

    @model_validator(mode="after")
    def _ordered(self) -> "Timing":
        if self.runs_s is not None:
            if len(self.runs_s) != self.repeats:
                raise ValueError(
                    f"runs_s holds {len(self.runs_s)} runs but repeats is {self.repeats}"
                )
            if not all(0 < run <= 1e6 for run in self.runs_s):
                raise ValueError("runs_s must hold positive seconds (at most 1e6)")
        if self.low_s is not None and self.low_s > self.median_s * (1 + 1e-9):
            raise ValueError("low_s exceeds median_s")
        if self.high_s is not None and self.high_s < self.median_s * (1 - 1e-9):
            raise ValueError("high_s is below median_s")
        return self


class GemmSample(Timing):
    """(m x k) @ (k x n) in ``dtype``: 2*m*n*k FLOPs; m plays the tokens' role
    (``kernels.gemm_time_s``)."""

    m: int = Field(ge=1, le=10_000_000)
    n: int = Field(ge=1, le=10_000_000)
    k: int = Field(ge=1, le=10_000_000)
    dtype: Precision
    ceiling: bool = Field(
        default=False,
        description=(
            "The fastest shape of a search over many shapes (stas00's mamf-finder, 'maximum "
            "achievable matmul FLOPS'): a ceiling of large-GEMM throughput. Calibration reads "
            "it as the large-GEMM efficiency itself, without the model's size roll-off, which "
            "looks at the smallest dimension only and would charge a shape the search picked "
            "for running at full speed (e.g. m = 1024 with long n and k)."
        ),
    )

    @property
    def flops(self) -> float:
        """2 m n k: FLOPs of the GEMM."""
        return 2.0 * self.m * self.n * self.k


class MemorySample(Timing):
    """A memory-bound kernel over a large tensor; ``bytes`` counts reads plus writes."""

    kernel: MemoryKernel
    bytes: float = Field(gt=0, le=1e15)
    dtype: Precision


class AttentionSample(Timing):
    """Fused scaled-dot-product attention (PyTorch SDPA / FlashAttention) of one pass."""

    batch: int = Field(ge=1, le=1_000_000)
    heads: int = Field(ge=1, le=100_000)
    seq_length: int = Field(ge=1, le=10_000_000)
    head_dim: int = Field(ge=1, le=100_000)
    causal: bool = True
    direction: AttentionPass = "forward"
    dtype: Precision

    @property
    def full_flops(self) -> float:
        """Forward FLOPs on the full s x s square (the cost model's count, causal or not;
        calibration prices a non-causal sample at twice a causal one's time:
        ``costmodel.calibration.points.CAUSAL_SKIP``)."""
        return 4.0 * self.batch * self.seq_length**2 * self.heads * self.head_dim


class CollectiveSample(Timing):
    """One collective (or point-to-point send) of ``size_B`` bytes (nccl-tests' size column)."""

    op: CollectiveOp
    size_B: float = Field(gt=0, le=1e15)
    ranks: int = Field(ge=2, le=1_000_000)
    ranks_per_node: int = Field(ge=1, le=1_000_000, description="Ranks sharing one node.")
    dtype: str = Field(default="float", max_length=40)
    in_place: bool = False
    source: str = Field(
        default="measured",
        max_length=200,
        description=(
            "Reporting group (the tool or series): calibration weighs each op and source once. "
            "The row a published figure comes from goes in ``citation``."
        ),
    )

    @model_validator(mode="after")
    def _fits(self) -> "CollectiveSample":
        if self.ranks_per_node > self.ranks:
            raise ValueError("ranks_per_node exceeds ranks")
        if self.op == "p2p" and self.ranks != 2:
            raise ValueError("p2p samples are between exactly 2 ranks")
        return self

    @property
    def priced_s(self) -> float:
        """The time calibration fits: the trimmed mean when measured, else the median.

        A training step runs its collectives one after another, so it is their mean that adds
        up. Collective times are bimodal on busy hosts (a run either finds its peer ready or
        waits a scheduler tick for it), and the median jumps between the modes as their shares
        cross one half, while the mean moves with the shares smoothly: it is the better
        predictor of the step and the more repeatable figure."""
        return self.trimmed_mean_s if self.trimmed_mean_s is not None else self.median_s

    @property
    def bus_factor(self) -> float:
        """nccl-tests PERFORMANCE.md: busbw = algbw * factor."""
        n = self.ranks
        if self.op == "all_reduce":
            return 2.0 * (n - 1) / n
        if self.op == "p2p":
            return 1.0
        return (n - 1) / n

    @property
    def busbw_GBps(self) -> float:
        """Bus bandwidth achieved, GB/s (nccl-tests' busbw)."""
        return self.size_B / self.median_s * self.bus_factor / 1e9


class DeviceInfo(Spec):
    """What was measured: one rank of the machine (a GPU, or a CPU process with its threads)."""

    name: str = Field(min_length=1, max_length=200, description="e.g. 'NVIDIA H100 80GB HBM3'.")
    kind: Literal["cuda", "cpu", "other"] = "other"
    ranks: int = Field(default=1, ge=1, le=1_000_000, description="Ranks collectives ran on.")
    ranks_per_node: int = Field(default=1, ge=1, le=1_000_000)
    threads_per_rank: int | None = Field(default=None, ge=1, le=100_000)
    memory_gib: float | None = Field(default=None, gt=0, le=1e6, description="Per rank.")
    host: str | None = Field(default=None, max_length=200)
    backend: str | None = Field(default=None, max_length=40, description="nccl, gloo...")


class Profile(Spec):
    """Micro-benchmarks of one machine, and how the cost model should describe its devices."""

    schema_version: int = PROFILE_SCHEMA_VERSION
    name: str = Field(default="profile", min_length=1, max_length=200)
    created_at: str | None = Field(default=None, max_length=40, description="ISO 8601, UTC.")
    device: DeviceInfo
    gpu: GpuSpec = Field(
        description=(
            "The device as the cost model sees it: a catalog GPU (by name), or for other devices "
            "(a CPU) an inline spec whose peaks are derived from the measurements."
        )
    )
    software: dict[str, str] = Field(default_factory=dict)
    settings: dict[str, float | int | str | bool] = Field(default_factory=dict)
    gemm: list[GemmSample] = Field(default_factory=list)
    memory: list[MemorySample] = Field(default_factory=list)
    attention: list[AttentionSample] = Field(default_factory=list)
    collectives: list[CollectiveSample] = Field(default_factory=list)

    @field_validator("gpu", mode="before")
    @classmethod
    def _catalog_name(cls, value: object) -> object:
        return lookup_gpu(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _has_samples(self) -> "Profile":
        if self.schema_version != PROFILE_SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {self.schema_version} is not supported "
                f"(this autopar reads version {PROFILE_SCHEMA_VERSION})"
            )
        if not (self.gemm or self.memory or self.attention or self.collectives):
            raise ValueError("profile has no samples (gemm, memory, attention or collectives)")
        return self

    @property
    def sample_count(self) -> int:
        """Samples of every kind in the profile."""
        return len(self.gemm) + len(self.memory) + len(self.attention) + len(self.collectives)


class StepObservation(Spec):
    """A plan that really ran: specs plus what was measured (median over steps after warm-up)."""

    name: str = Field(default="observation", min_length=1, max_length=200)
    source: str = Field(
        default="observed", min_length=1, max_length=200, description="Reporting group."
    )
    model: ModelSpec
    training: TrainingSpec
    cluster: ClusterSpec
    plan: Plan
    step_time_s: float | None = Field(default=None, gt=0, le=1e7)
    tokens_per_s: float | None = Field(default=None, gt=0, le=1e15, description="All GPUs.")
    peak_memory_gib: float | None = Field(default=None, gt=0, le=1e6, description="Per GPU.")

    @model_validator(mode="after")
    def _measured(self) -> "StepObservation":
        if self.step_time_s is None and self.tokens_per_s is None:
            raise ValueError("give step_time_s or tokens_per_s")
        return self

    @property
    def tokens_per_step(self) -> float:
        """Tokens per optimizer step: global batch x sequence length."""
        return float(self.training.global_batch_size * self.training.seq_length)

    @property
    def measured_step_time_s(self) -> float:
        """Step time measured, or derived from ``tokens_per_s``, seconds."""
        if self.step_time_s is not None:
            return self.step_time_s
        return self.tokens_per_step / float(self.tokens_per_s or 0.0)
