"""The launch layout of a plan: which framework, how many processes on which nodes in what rank
order, the batch identity and how the layers split over (virtual) pipeline stages.

Every exporter reads this one description, so the files of every format agree with each other
and with the estimate the plan was ranked by.

Rank order is Megatron-Core's default (``tp-cp-ep-dp-pp``: tensor-parallel ranks innermost,
pipeline stages outermost), which torchtitan's device mesh (``pp, dp_replicate, dp_shard, cp,
tp``) and DeepSpeed's ``PipeModelDataParallelTopology`` (``pipe, data, model``) share: stage
``s`` owns ranks ``[s·W, (s+1)·W)`` with ``W = dp·cp·tp``, so a pipeline stage sits on a
contiguous run of nodes and a heterogeneous plan's node groups follow each other in node-rank
order.
"""

from dataclasses import dataclass, field

import costmodel
from costmodel.feasibility import OUT_OF_MEMORY, why_it_cannot_have_run
from costmodel.hardware import resolve_gpu
from costmodel.pipeline_split import stage_fits_chunks
from costmodel.specs import ClusterSpec, Estimate, ModelSpec, NodeGroup, Plan, TrainingSpec


class ExportError(ValueError):
    """A plan the requested export cannot express; ``field`` names the request's part to blame
    (``format``, ``framework``, ``plan.<setting>``), ``reason`` says why, in one line."""

    def __init__(self, field: str | None, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class NodeBlock:
    """Consecutive nodes (in node-rank order) of one node group, each running
    ``procs_per_node`` processes (one per GPU used)."""

    group: str
    gpu: str
    zone: str
    first_node_rank: int
    num_nodes: int
    procs_per_node: int
    gpus_per_node: int  # the hardware's

    @property
    def num_procs(self) -> int:
        return self.num_nodes * self.procs_per_node


@dataclass(frozen=True)
class Chunk:
    """One virtual pipeline stage (a model chunk): pipeline rank ``stage``, chunk ``virtual``
    of ``vpp``; ``embedding`` / ``loss`` mark the chunk that holds the input embedding / the
    output layer and loss; ``slot`` is True where that module takes the place of a layer in the
    split (Megatron's ``--account-for-embedding/loss-in-pipeline-split``)."""

    stage: int
    virtual: int
    layers: int
    first_layer: int
    embedding: bool = False
    loss: bool = False
    slot: bool = False


@dataclass(frozen=True)
class LaunchLayout:
    model: ModelSpec
    training: TrainingSpec
    cluster: ClusterSpec
    plan: Plan
    estimate: Estimate
    framework: str
    launchable_by: tuple[str, ...]
    tp: int
    pp: int
    cp: int
    dp: int
    ep: int
    etp: int
    vpp: int
    micro_batch_size: int
    gradient_accumulation_steps: int
    stage_layers: tuple[int, ...]
    chunks: tuple[Chunk, ...]  # virtual order: chunk v of stage s at index v * pp + s
    blocks: tuple[NodeBlock, ...]
    warnings: list[str] = field(default_factory=list)

    @property
    def global_batch_size(self) -> int:
        return self.training.global_batch_size

    @property
    def world_size(self) -> int:
        return sum(block.num_procs for block in self.blocks)

    @property
    def num_nodes(self) -> int:
        return sum(block.num_nodes for block in self.blocks)

    @property
    def uniform_procs(self) -> int | None:
        """Processes per node when every node runs the same number, else None."""
        counts = {block.procs_per_node for block in self.blocks}
        return counts.pop() if len(counts) == 1 else None

    @property
    def is_heterogeneous(self) -> bool:
        return self.plan.is_heterogeneous

    @property
    def sequence_parallel(self) -> bool:
        return self.plan.sp and self.tp > 1

    def chunk(self, stage: int, virtual: int) -> Chunk:
        return self.chunks[virtual * self.pp + stage]


def neutral_estimate(
    model: ModelSpec, training: TrainingSpec, cluster: ClusterSpec, plan: Plan
) -> Estimate:
    """The plan priced for no framework in particular (``framework: any``): its
    ``launchable_by`` lists every framework that can run it, whatever the search was for."""
    try:
        return costmodel.estimate(
            model, training.model_copy(update={"framework": "any"}), cluster, plan
        )
    except ValueError as exc:  # a group or GPU the cluster lacks
        raise ExportError("plan", str(exc)) from None


def framework_gaps(
    framework: str, model: ModelSpec, training: TrainingSpec, cluster: ClusterSpec, plan: Plan
) -> str:
    """Why ``framework`` cannot launch the plan: the settings its table cannot express, as the
    estimate for that framework words them (``zero_stage: Megatron shards only ...``)."""
    result = costmodel.estimate(
        model, training.model_copy(update={"framework": framework}), cluster, plan
    )
    prefix = f"{framework} cannot launch this plan: "
    for reason in result.reasons:
        if reason.startswith(prefix):
            return reason[len(prefix) :]
    return "it is not in the plan's launchable_by"


def launch_layout(
    model: ModelSpec,
    training: TrainingSpec,
    cluster: ClusterSpec,
    plan: Plan,
    *,
    framework: str | None,
    blame: str,
) -> LaunchLayout:
    """The layout of ``plan`` launched by ``framework`` (None: the first framework that can).

    Raises ``ExportError`` when the plan cannot run on the cluster at all (GPU count,
    divisibility: anything but memory) or when ``framework`` cannot launch it; ``blame`` is the
    request field a framework mismatch is reported on (``format`` or ``framework``).
    """
    estimate = neutral_estimate(model, training, cluster, plan)
    impossible = why_it_cannot_have_run(estimate.reasons)
    if impossible is not None:
        raise ExportError(
            "plan", impossible.replace("this plan cannot have run here", "cannot run here")
        )
    warnings = [
        f"the estimate predicts {reason}"
        for reason in estimate.reasons
        if reason.startswith(OUT_OF_MEMORY)
    ]
    launchable = tuple(estimate.launchable_by)
    if framework is None:
        if not launchable:
            gaps = "; ".join(
                f"{name}: {framework_gaps(name, model, training, cluster, plan)}"
                for name in ("megatron", "deepspeed", "torchtitan")
            )
            raise ExportError(blame, f"no framework can launch this plan ({gaps})")
        framework = launchable[0]
    elif framework not in launchable:
        gaps = framework_gaps(framework, model, training, cluster, plan)
        raise ExportError(blame, f"{framework} cannot launch this plan: {gaps}")

    gbs, micro = training.global_batch_size, plan.micro_batch_size
    if plan.batch_shares is not None and max(plan.batch_shares) - min(plan.batch_shares) > 1e-9:
        raise ExportError(
            "plan.batch_shares",
            f"{framework} gives every data-parallel rank the same share of the global batch; "
            f"this plan splits it {list(plan.batch_shares)}",
        )
    accumulation = gbs // (plan.dp * micro)
    stage_layers = tuple(stage.num_layers for stage in estimate.per_stage)
    if sum(stage_layers) != model.num_layers or len(stage_layers) != plan.pp:
        raise ExportError(
            "plan", f"the estimate's stages {list(stage_layers)} do not split the model"
        )
    tp = plan.tp if not plan.is_heterogeneous else estimate.per_stage[0].tp
    return LaunchLayout(
        model=model,
        training=training,
        cluster=cluster,
        plan=plan,
        estimate=estimate,
        framework=framework,
        launchable_by=launchable,
        tp=tp,
        pp=plan.pp,
        cp=plan.cp,
        dp=plan.dp,
        ep=plan.ep,
        etp=plan.etp or tp,
        vpp=plan.vpp,
        micro_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        stage_layers=stage_layers,
        chunks=split_chunks(stage_layers, plan.vpp),
        blocks=place_nodes(cluster, plan, tp, warnings),
        warnings=warnings,
    )


# Pipeline chunks -------------------------------------------------------------------------------
def split_chunks(stage_layers: tuple[int, ...], vpp: int) -> tuple[Chunk, ...]:
    """Each stage's layers in vpp equal chunks, as the cost model splits them
    (``costmodel.pipeline_split``): a stage whose layers do not divide by vpp is the first (last)
    one, whose embedding (loss) then fills a layer's place in its first (last) chunk."""
    pp = len(stage_layers)
    sizes: dict[tuple[int, int], tuple[int, bool]] = {}
    for stage, layers in enumerate(stage_layers):
        if not stage_fits_chunks(layers, vpp, stage in (0, pp - 1)):
            raise ExportError(
                "plan.vpp", f"stage {stage}'s {layers} layers do not split into vpp={vpp} chunks"
            )
        # Divisible as they are, or (an end stage) once its embedding / loss fills a slot.
        slot = layers % vpp != 0
        per_chunk = [(layers + slot) // vpp] * vpp
        if slot:
            per_chunk[0 if stage == 0 else -1] -= 1
        for virtual, count in enumerate(per_chunk):
            slot_here = slot and (
                (stage == 0 and virtual == 0) or (stage == pp - 1 and virtual == vpp - 1)
            )
            sizes[(stage, virtual)] = (count, slot_here)
    chunks: list[Chunk] = []
    next_layer = 0
    for virtual in range(vpp):
        for stage in range(pp):
            count, slot_here = sizes[(stage, virtual)]
            chunks.append(
                Chunk(
                    stage=stage,
                    virtual=virtual,
                    layers=count,
                    first_layer=next_layer,
                    embedding=stage == 0 and virtual == 0,
                    loss=stage == pp - 1 and virtual == vpp - 1,
                    slot=slot_here,
                )
            )
            next_layer += count
    return tuple(chunks)


# Node placement --------------------------------------------------------------------------------
def _rank_groups(cluster: ClusterSpec, plan: Plan, tp: int) -> list[tuple[NodeGroup, int]]:
    """Runs of consecutive ranks (Megatron order) and the node group each runs on."""
    if not plan.is_heterogeneous:
        group = cluster.group(plan.group) if plan.group else cluster.groups[0]
        return [(group, plan.dp * plan.tp * plan.pp * plan.cp)]
    runs: list[tuple[NodeGroup, int]] = []
    for stage in plan.stages or []:
        for replica in range(plan.dp):
            name = stage.group if stage.replicas is None else stage.replicas[replica].group
            group = cluster.group(name or "")
            ranks = tp * plan.cp
            if runs and runs[-1][0].name == group.name:
                runs[-1] = (group, runs[-1][1] + ranks)
            else:
                runs.append((group, ranks))
    return runs


def _procs_per_node(ranks: int, group: NodeGroup) -> int:
    """Processes per node for ``ranks`` processes on ``group``'s nodes: a full node each when
    they fill whole nodes, else the largest even spread that fits the group."""
    per_node = group.gpus_per_node
    if ranks % per_node == 0 or ranks < per_node:
        return min(ranks, per_node)
    for candidate in range(per_node, 0, -1):
        if ranks % candidate == 0 and ranks // candidate <= group.num_nodes:
            return candidate
    return 1


def place_nodes(
    cluster: ClusterSpec, plan: Plan, tp: int, warnings: list[str]
) -> tuple[NodeBlock, ...]:
    blocks: list[NodeBlock] = []
    used: dict[str, int] = {}
    next_rank = 0
    for group, ranks in _rank_groups(cluster, plan, tp):
        procs = _procs_per_node(ranks, group)
        nodes = ranks // procs
        if procs < group.gpus_per_node:
            warnings.append(
                f"{ranks} processes on group '{group.name}' use {procs} of its "
                f"{group.gpus_per_node} GPUs per node"
            )
        if procs % tp:
            warnings.append(
                f"tensor-parallel groups of {tp} span nodes of group '{group.name}' "
                f"({procs} processes per node)"
            )
        used[group.name] = used.get(group.name, 0) + nodes
        if used[group.name] > group.num_nodes:
            raise ExportError(
                "plan",
                f"the plan needs {used[group.name]} nodes of group '{group.name}' "
                f"({procs} processes each) but it has {group.num_nodes}",
            )
        blocks.append(
            NodeBlock(
                group=group.name,
                gpu=resolve_gpu(group.gpu).name,
                zone=group.zone,
                first_node_rank=next_rank,
                num_nodes=nodes,
                procs_per_node=procs,
                gpus_per_node=group.gpus_per_node,
            )
        )
        next_rank += nodes
    return tuple(blocks)
