"""What a heterogeneous trial decides: the ``Skeleton`` (a plan less its layer split), the
``SkeletonDraft`` the decoder builds it from, and the plan a skeleton plus a split makes."""

from dataclasses import dataclass

from costmodel.hardware import DEFAULT_GEMM_EFFICIENCY, peak_tflops, resolve_gpu
from costmodel.specs import NodeGroup, Plan, ReplicaSpec, StageSpec
from costmodel.specs.plan import Recompute

LAYOUTS = ("stages", "replicas")
# How much of a group a skeleton uses: the share of its GPUs (stages layout) or of the pipelines
# that fit (replicas). Sampling a share rather than a count lets the sampler learn "use the whole
# group" once, for every tp x dp x cp, where the matching count differs for each.
SHARES = (0.125, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Skeleton:
    """Everything about a heterogeneous plan except its layer split."""

    layout: str
    global_batch_size: int
    groups: tuple[str, ...]  # pipeline order (stages) or any order (replicas)
    tps: tuple[int, ...]  # per group
    counts: tuple[int, ...]  # per group: stages (stages layout) or pipelines (replicas)
    dp: int  # stages layout: replicas of every stage; replicas layout: sum(counts)
    pp: int
    cp: int
    micro_batch_size: int
    vpp: int
    zero_stage: int
    offload_optimizer: bool
    recompute: Recompute
    sequence_parallel: bool
    ep: int = 1

    def stage_groups(self) -> list[tuple[str, int]]:
        """(group, tp) of each stage (stages layout); the slowest member's (replicas)."""
        if self.layout == "stages":
            return [
                (name, tp)
                for name, tp, count in zip(self.groups, self.tps, self.counts, strict=True)
                for _ in range(count)
            ]
        return [(self.groups[0], self.tps[0])] * self.pp

    def plan(self, layers: list[int]) -> Plan:
        """The plan of this skeleton with ``layers`` per pipeline stage."""
        if self.layout == "stages":
            stages = [
                StageSpec(num_layers=n, group=name, tp=tp, dp=self.dp)
                for n, (name, tp) in zip(layers, self.stage_groups(), strict=True)
            ]
        else:
            pipelines = [
                ReplicaSpec(group=name, tp=tp)
                for name, tp, count in zip(self.groups, self.tps, self.counts, strict=True)
                for _ in range(count)
            ]
            stages = [StageSpec(num_layers=n, replicas=pipelines) for n in layers]
        return Plan(
            dp=self.dp,
            tp=self.tps[0],
            pp=self.pp,
            cp=self.cp,
            ep=self.ep,
            vpp=self.vpp,
            micro_batch_size=self.micro_batch_size,
            zero_stage=self.zero_stage,
            recompute=self.recompute,
            sequence_parallel=self.sequence_parallel,
            offload_optimizer=self.offload_optimizer,
            stages=stages,
        )


@dataclass(frozen=True)
class SkeletonDraft:
    """A skeleton's layout once decoded, before its memory options (ZeRO, offload, recompute,
    sequence parallelism) and ep, which depend on it, are chosen."""

    layout: str
    global_batch_size: int
    groups: tuple[NodeGroup, ...]  # pipeline order (stages) or any order (replicas)
    tps: tuple[int, ...]  # per group
    counts: tuple[int, ...]  # per group: stages (stages layout) or pipelines (replicas)
    dp: int
    pp: int
    cp: int
    micro_batch_size: int
    vpp: int


def group_speed(group: NodeGroup, precision: str) -> float:
    """Peak dense throughput of one of the group's GPUs at ``precision``, GEMM efficiency in."""
    gpu = resolve_gpu(group.gpu)
    return peak_tflops(gpu, precision) * (gpu.gemm_efficiency or DEFAULT_GEMM_EFFICIENCY)
