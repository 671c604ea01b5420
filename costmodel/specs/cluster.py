"""Cluster description: groups of identical nodes, optionally in several zones."""

from pydantic import Field, model_validator

from costmodel.specs.base import Spec
from costmodel.specs.reliability import DEFAULT_RELIABILITY, ReliabilitySpec


class GpuSpec(Spec):
    """One accelerator type. Peak figures are dense (no 2:4 sparsity), per GPU."""

    name: str = Field(min_length=1, max_length=100)
    bf16_tflops: float = Field(ge=0, le=1e5, description="Dense BF16 tensor peak; 0 = unsupported.")
    fp16_tflops: float | None = Field(default=None, ge=0, le=1e5, description="Default = bf16.")
    fp8_tflops: float | None = Field(default=None, ge=0, le=1e5)
    tf32_tflops: float | None = Field(default=None, ge=0, le=1e5)
    fp32_tflops: float | None = Field(default=None, ge=0, le=1e5)
    hbm_gib: float = Field(gt=0, le=1e5)
    hbm_GBps: float = Field(gt=0, le=1e6, description="HBM bandwidth, GB/s.")
    intra_node_GBps: float | None = Field(
        default=None, gt=0, le=1e6, description="Scale-up link per GPU, one direction, GB/s."
    )
    inter_node_GBps: float | None = Field(
        default=None, gt=0, le=1e6, description="Scale-out NIC per GPU, one direction, GB/s."
    )
    gemm_efficiency: float | None = Field(
        default=None, gt=0, le=1, description="Achieved / peak for large BF16 GEMMs."
    )
    nvlink_domain_gpus: int | None = Field(
        default=None, ge=1, le=100_000, description="GPUs sharing one scale-up domain (NVL72)."
    )
    price_per_gpu_hour: float | None = Field(default=None, ge=0, le=1e4)


class NodeGroup(Spec):
    """Identical nodes: same GPU type, count per node and links."""

    name: str = Field(min_length=1, max_length=100)
    gpu: str | GpuSpec = Field(description="Catalog name (see GET /v1/gpus) or an inline GpuSpec.")
    num_nodes: int = Field(ge=1, le=100_000)
    gpus_per_node: int = Field(default=8, ge=1, le=1024)
    intra_node_GBps: float | None = Field(
        default=None, gt=0, le=1e6, description="Per GPU, one direction; default from the GPU."
    )
    inter_node_GBps: float | None = Field(
        default=None, gt=0, le=1e6, description="Per GPU, one direction; default from the GPU."
    )
    zone: str = Field(default="default", min_length=1, max_length=100)
    price_per_gpu_hour: float | None = Field(default=None, ge=0, le=1e4)
    reliability: ReliabilitySpec | None = Field(
        default=None,
        description="Failure rates, restart and checkpoint storage of these nodes; default: "
        "the Llama 3 405B run's (costmodel.specs.reliability).",
    )

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node

    @property
    def reliability_or_default(self) -> ReliabilitySpec:
        return self.reliability if self.reliability is not None else DEFAULT_RELIABILITY


class ZoneLink(Spec):
    zones: tuple[str, str]
    bandwidth_GBps: float = Field(gt=0, le=1e7, description="Aggregate, one direction, GB/s.")
    latency_ms: float = Field(default=1.0, ge=0, le=10_000)


class ClusterSpec(Spec):
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
        return sum(group.num_gpus for group in self.groups)

    def group(self, name: str) -> NodeGroup:
        for candidate in self.groups:
            if candidate.name == name:
                return candidate
        raise KeyError(name)
