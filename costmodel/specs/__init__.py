"""The product's vocabulary: pydantic specs shared by the CLI, the API, the database and exporters.

Field names are a public contract (units in the names). Every model forbids unknown fields so a
typo such as ``num_layer`` is reported instead of silently ignored.
"""

from costmodel.specs.cluster import ClusterSpec, GpuSpec, NodeGroup, ZoneLink
from costmodel.specs.estimate import (
    Estimate,
    GoodputEstimate,
    LostTime,
    MemoryBreakdown,
    StageEstimate,
    TimeBreakdown,
)
from costmodel.specs.model import MLASpec, ModelSpec, MoESpec
from costmodel.specs.plan import Plan, ReplicaSpec, StageSpec
from costmodel.specs.reliability import CheckpointSpec, ReliabilitySpec
from costmodel.specs.training import TrainingSpec

__all__ = [
    "CheckpointSpec",
    "ClusterSpec",
    "Estimate",
    "GoodputEstimate",
    "GpuSpec",
    "LostTime",
    "MLASpec",
    "MemoryBreakdown",
    "MoESpec",
    "ModelSpec",
    "NodeGroup",
    "Plan",
    "ReliabilitySpec",
    "ReplicaSpec",
    "StageEstimate",
    "StageSpec",
    "TimeBreakdown",
    "TrainingSpec",
    "ZoneLink",
]
