"""Cluster description: groups of identical nodes, optionally in several zones."""

from pydantic import Field, field_validator, model_validator

from costmodel.specs.base import Integer, Number, Spec
from costmodel.specs.reliability import DEFAULT_RELIABILITY, ReliabilitySpec

# Smallest hardware figures a spec may give. Below them a figure is a typo or a denormal
# (5e-324), and the times divided by it overflow to infinity; every real device is orders of
# magnitude above. A peak of 0 TFLOP/s stays allowed: it means "no such tensor cores" (V100 BF16).
MIN_TFLOPS = 1e-3  # 1 GFLOP/s
MIN_GBPS = 1e-3  # 1 MB/s: below the slowest WAN link a zone link could model
MIN_HBM_GIB = 1e-3  # 1 MiB
MIN_GEMM_EFFICIENCY = 0.01
_PEAK_NOTE = f" 0 = unsupported; otherwise at least {MIN_TFLOPS:g}."


class GpuSpec(Spec):
    """One accelerator type. Peak figures are dense (no 2:4 sparsity), per GPU, in TFLOP/s: 0
    (no such tensor cores) or at least ``MIN_TFLOPS``; at least one 16- or 32-bit peak must be
    positive, or the GPU can time no training at all."""

    name: str = Field(min_length=1, max_length=100)
    bf16_tflops: Number = Field(ge=0, le=1e5, description="Dense BF16 tensor peak;" + _PEAK_NOTE)
    fp16_tflops: Number | None = Field(
        default=None, ge=0, le=1e5, description="Default = bf16;" + _PEAK_NOTE
    )
    fp8_tflops: Number | None = Field(
        default=None, ge=0, le=1e5, description="Default = bf16;" + _PEAK_NOTE
    )
    tf32_tflops: Number | None = Field(
        default=None, ge=0, le=1e5, description="Default = fp32;" + _PEAK_NOTE
    )
    fp32_tflops: Number | None = Field(default=None, ge=0, le=1e5, description=_PEAK_NOTE[1:])
    hbm_gib: Number = Field(ge=MIN_HBM_GIB, le=1e5)
    hbm_GBps: Number = Field(ge=MIN_GBPS, le=1e6, description="HBM bandwidth, GB/s.")
    intra_node_GBps: Number | None = Field(
        default=None,
        ge=MIN_GBPS,
        le=1e6,
        description="Scale-up link per GPU, one direction, GB/s.",
    )
    inter_node_GBps: Number | None = Field(
        default=None,
        ge=MIN_GBPS,
        le=1e6,
        description="Scale-out NIC per GPU, one direction, GB/s.",
    )
    gemm_efficiency: Number | None = Field(
        default=None,
        ge=MIN_GEMM_EFFICIENCY,
        le=1,
        description="Achieved / peak for large BF16 GEMMs.",
    )
    nvlink_domain_gpus: Integer | None = Field(
        default=None, ge=1, le=100_000, description="GPUs sharing one scale-up domain (NVL72)."
    )
    price_per_gpu_hour: Number | None = Field(default=None, ge=0, le=1e4)

    @field_validator("bf16_tflops", "fp16_tflops", "fp8_tflops", "tf32_tflops", "fp32_tflops")
    @classmethod
    def _zero_or_real_peak(cls, value: float | None) -> float | None:
        if value is not None and 0 < value < MIN_TFLOPS:
            raise ValueError(
                f"a peak is 0 (unsupported) or at least {MIN_TFLOPS:g} TFLOP/s; {value:g} is "
                "no real device's"
            )
        return value

    @model_validator(mode="after")
    def _some_peak(self) -> "GpuSpec":
        fp16 = self.fp16_tflops if self.fp16_tflops is not None else self.bf16_tflops
        if not any(peak for peak in (self.bf16_tflops, fp16, self.tf32_tflops, self.fp32_tflops)):
            raise ValueError(
                "every TFLOP/s peak is 0: such a GPU can time no training; give bf16_tflops "
                "(or fp16_tflops, tf32_tflops, fp32_tflops) a positive value"
            )
        return self


class NodeGroup(Spec):
    """Identical nodes: same GPU type, count per node and links."""

    name: str = Field(min_length=1, max_length=100)
    gpu: str | GpuSpec = Field(description="Catalog name (see GET /v1/gpus) or an inline GpuSpec.")
    num_nodes: Integer = Field(ge=1, le=100_000)
    gpus_per_node: Integer = Field(default=8, ge=1, le=1024)
    intra_node_GBps: Number | None = Field(
        default=None,
        ge=MIN_GBPS,
        le=1e6,
        description="Per GPU, one direction; default from the GPU.",
    )
    inter_node_GBps: Number | None = Field(
        default=None,
        ge=MIN_GBPS,
        le=1e6,
        description="Per GPU, one direction; default from the GPU.",
    )
    zone: str = Field(default="default", min_length=1, max_length=100)
    price_per_gpu_hour: Number | None = Field(default=None, ge=0, le=1e4)
    reliability: ReliabilitySpec | None = Field(
        default=None,
        description="Failure rates, restart and checkpoint storage of these nodes; default: "
        "the Llama 3 405B run's (costmodel.specs.reliability).",
    )

    @property
    def num_gpus(self) -> int:
        """GPUs of the group: nodes x GPUs per node."""
        return self.num_nodes * self.gpus_per_node

    @property
    def reliability_or_default(self) -> ReliabilitySpec:
        """The group's reliability, or the defaults (``DEFAULT_RELIABILITY``)."""
        return self.reliability if self.reliability is not None else DEFAULT_RELIABILITY


class ZoneLink(Spec):
    """The link between two zones: aggregate one-direction bandwidth and latency."""

    zones: tuple[str, str]
    bandwidth_GBps: Number = Field(
        ge=MIN_GBPS, le=1e7, description="Aggregate, one direction, GB/s."
    )
    latency_ms: Number = Field(default=1.0, ge=0, le=10_000)


class ClusterSpec(Spec):
    """Node groups (unique names) and the links between their zones."""

    name: str = Field(default="custom", min_length=1, max_length=200)
    groups: list[NodeGroup] = Field(min_length=1, max_length=1000)
    zone_links: list[ZoneLink] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names_and_known_zones(self) -> "ClusterSpec":
        names = [group.name for group in self.groups]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"group names must be unique; repeated: {', '.join(duplicates)}")
        zones = {group.zone for group in self.groups}
        for link in self.zone_links:
            if link.zones[0] == link.zones[1]:
                raise ValueError(f"zone_links joins zone '{link.zones[0]}' to itself")
            unknown = [zone for zone in link.zones if zone not in zones]
            if unknown:
                raise ValueError(f"zone_links names unknown zone(s): {', '.join(unknown)}")
        return self

    @property
    def num_gpus(self) -> int:
        """GPUs of all groups."""
        return sum(group.num_gpus for group in self.groups)

    def group(self, name: str) -> NodeGroup:
        """The group named ``name``; ``KeyError`` when there is none."""
        for candidate in self.groups:
            if candidate.name == name:
                return candidate
        raise KeyError(name)
