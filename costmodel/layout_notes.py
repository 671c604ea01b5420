"""Sentences an ``Estimate`` carries besides its numbers: warnings and notes on the layout.

- Warnings (``Estimate.warnings``): a plan can be feasible and still run its busiest
  collectives over the network. Tensor-parallel ranks are innermost in Megatron's rank order,
  so a tp group spans nodes when tp is wider than the node's scale-up domain (the node, or an
  NVLink domain such as GB200 NVL72), and straddles two nodes when tp does not divide it.
  Expert-parallel groups take ranks ``tp x cp`` apart (``etp`` apart under MoE parallel
  folding; see ``stage.expert_parallel``), so they span nodes once ``ep x stride`` outgrows
  the node. Heterogeneous plans also warn where pipeline sends and data-parallel reductions
  cross a zone link, with the link and the time it costs.
- Notes (``Estimate.notes``, heterogeneous plans): which group runs which stages (or
  pipelines), how much of each group the plan uses, and what sets an unused group apart from
  the groups used (another zone, slower or smaller GPUs, no support for the precision).
"""

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from costmodel.flops import active_params, total_params
from costmodel.hardware import (
    DEFAULT_GEMM_EFFICIENCY,
    group_links_GBps,
    peak_tflops,
    precision_usable,
    resolve_gpu,
)
from costmodel.hardware_arrays import scale_up_domain
from costmodel.specs import ClusterSpec, ModelSpec, NodeGroup, Plan


def parameter_counts(model: ModelSpec) -> tuple[int, int]:
    """(total, active) parameters (``costmodel.flops``)."""
    return total_params(model), active_params(model)


def _node_gpus(group: NodeGroup) -> int:
    return scale_up_domain(group, resolve_gpu(group.gpu))


def tensor_parallel_warning(group: NodeGroup, tp: int, where: str = "") -> str | None:
    """Whether tp groups of width ``tp`` on ``group`` leave a node, in words (None: they stay)."""
    node = _node_gpus(group)
    if tp <= 1 or (tp <= node and node % tp == 0):
        return None
    intra, inter = group_links_GBps(group)
    if tp > node:
        return (
            f"{where}tp {tp} is wider than a node of '{group.name}' ({node} GPUs): every "
            f"tensor-parallel group spans {math.ceil(tp / node)} nodes, so the all-reduces of "
            f"every layer cross the network ({inter:g} GB/s per GPU instead of {intra:g} GB/s "
            "inside a node)"
        )
    return (
        f"{where}tp {tp} does not divide the {node} GPUs of a node of '{group.name}': with "
        "tensor-parallel ranks innermost, some tensor-parallel groups straddle two nodes and "
        f"run at the network's {inter:g} GB/s per GPU (the estimate prices them as if inside "
        "one node)"
    )


def expert_parallel_warning(
    model: ModelSpec, group: NodeGroup, plan: Plan, tp: int, where: str = ""
) -> str | None:
    """Whether expert-parallel groups on ``group`` leave a node, in words."""
    ep = plan.ep
    if model.moe is None or ep <= 1:
        return None
    etp = plan.etp or tp
    folded = etp != tp or (plan.dp * plan.cp) % ep != 0
    stride = etp if folded else tp * plan.cp
    node = _node_gpus(group)
    local = min(ep, max(node // max(stride, 1), 1))
    _, inter = group_links_GBps(group)
    if local < ep:
        return (
            f"{where}ep {ep} with its ranks {stride} apart: every expert-parallel group spans "
            f"{math.ceil(ep / local)} nodes of '{group.name}' ({local} of its ranks per node), "
            "so the token all-to-alls of every MoE layer cross the network "
            f"({inter:g} GB/s per GPU)"
        )
    if node % (stride * ep):
        return (
            f"{where}ep {ep} x stride {stride} does not divide the {node} GPUs of a node of "
            f"'{group.name}': some expert-parallel groups straddle two nodes"
        )
    return None


def homogeneous_warnings(model: ModelSpec, group: NodeGroup, plan: Plan) -> list[str]:
    """Warnings on a homogeneous plan's layout: tensor or expert parallelism across nodes."""
    found = [
        tensor_parallel_warning(group, plan.tp),
        expert_parallel_warning(model, group, plan, plan.tp),
    ]
    return [text for text in found if text is not None]


# Heterogeneous plans -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PlacedStage:
    """One (pipeline, stage) pair of a heterogeneous plan, with what it costs."""

    pipeline: int
    stage: int
    group: NodeGroup
    tp: int
    dp: int
    num_layers: int
    pp_comm_s: float  # per micro-batch
    dp_comm_s: float  # per step


def _runs(values: Sequence[int]) -> str:
    """'0-3, 5' for [0, 1, 2, 3, 5]."""
    parts: list[str] = []
    start: int | None = None
    previous: int | None = None  # None exactly when start is
    for value in [*values, None]:
        if (
            start is not None
            and previous is not None
            and value is not None
            and value == previous + 1
        ):
            previous = value
            continue
        if start is not None:
            parts.append(f"{start}" if start == previous else f"{start}-{previous}")
        start = previous = value
    return ", ".join(parts)


def _speed(group: NodeGroup, precision: str) -> float:
    gpu = resolve_gpu(group.gpu)
    return peak_tflops(gpu, precision) * (gpu.gemm_efficiency or DEFAULT_GEMM_EFFICIENCY)


def _zone_link(cluster: ClusterSpec, a: str, b: str) -> tuple[float, float] | None:
    for link in cluster.zone_links:
        if set(link.zones) == {a, b}:
            return link.bandwidth_GBps, link.latency_ms
    return None


def heterogeneous_sentences(
    model: ModelSpec,
    cluster: ClusterSpec,
    plan: Plan,
    precision: str,
    placed: Sequence[PlacedStage],
    microbatches: Sequence[int],
) -> tuple[list[str], list[str]]:
    """(notes, warnings) of a heterogeneous plan, ``placed`` in [pipeline][stage] order."""
    notes: list[str] = []
    warnings: list[str] = []
    pipelines = sorted({p.pipeline for p in placed})
    replica_form = len(pipelines) > 1
    first_layer = 1
    bounds = []
    for stage in range(plan.pp):
        count = next(p.num_layers for p in placed if p.stage == stage)
        bounds.append((first_layer, first_layer + count - 1))
        first_layer += count

    # Who runs what.
    if not replica_form:
        row = [p for p in placed if p.pipeline == pipelines[0]]
        index = 0
        while index < len(row):
            end = index
            while (
                end + 1 < len(row)
                and row[end + 1].group.name == row[index].group.name
                and row[end + 1].tp == row[index].tp
            ):
                end += 1
            first, last = row[index], row[end]
            span = f"stage {first.stage}" if index == end else f"stages {first.stage}-{last.stage}"
            gpus = (end - index + 1) * first.tp * first.dp * plan.cp
            verb = "runs" if index == end else "run"
            notes.append(
                f"{span} (layers {bounds[first.stage][0]}-{bounds[last.stage][1]}) {verb} on "
                f"'{first.group.name}' ({resolve_gpu(first.group.gpu).name}, zone "
                f"{first.group.zone}) with tp {first.tp} and dp {first.dp}: {gpus:,} GPUs"
            )
            index = end + 1
    else:
        by_place: dict[tuple[str, int], list[int]] = {}
        for pipeline in pipelines:
            head = next(p for p in placed if p.pipeline == pipeline and p.stage == 0)
            by_place.setdefault((head.group.name, head.tp), []).append(pipeline)
        stage_specs = plan.stages or []  # a heterogeneous plan always lists its stages
        split = "/".join(str(stage_specs[s].num_layers) for s in range(plan.pp))
        for (name, tp), members in by_place.items():
            group = cluster.group(name)
            label, verb = ("pipeline", "runs") if len(members) == 1 else ("pipelines", "run")
            notes.append(
                f"{label} {_runs(members)} {verb} on '{name}' ({resolve_gpu(group.gpu).name}, zone "
                f"{group.zone}) with tp {tp}: {len(members) * tp * plan.pp * plan.cp:,} GPUs"
            )
        total = sum(microbatches) or 1
        shares = ", ".join(f"{100 * m / total:.0f}%" for m in microbatches)
        notes.append(
            f"every pipeline splits the layers {split} over its {plan.pp} stages; the batch "
            f"splits {shares} across pipelines 0-{len(pipelines) - 1}"
        )

    # How much of each group, and why a group is left out.
    used: dict[str, int] = {}
    for p in placed:
        used[p.group.name] = used.get(p.group.name, 0) + p.tp * p.dp * plan.cp
    used_groups = [cluster.group(name) for name in used]
    for group in cluster.groups:
        count = used.get(group.name, 0)
        if 0 < count < group.num_gpus:
            notes.append(f"'{group.name}' uses {count:,} of its {group.num_gpus:,} GPUs")
        elif count == 0:
            notes.append(_unused(cluster, group, used_groups, precision))

    # Tensor- and expert-parallel groups that leave a node.
    for name, tp in dict.fromkeys((p.group.name, p.tp) for p in placed):
        stages = sorted({p.stage for p in placed if p.group.name == name and p.tp == tp})
        where = f"stage{'s' if len(stages) > 1 else ''} {_runs(stages)} on '{name}': "
        group = cluster.group(name)
        for text in (
            tensor_parallel_warning(group, tp, where),
            expert_parallel_warning(model, group, plan, tp, where),
        ):
            if text is not None:
                warnings.append(text)

    # Traffic over zone links.
    crossings: dict[tuple[int, str, str], list[PlacedStage]] = {}
    for pipeline in pipelines:
        row = sorted((p for p in placed if p.pipeline == pipeline), key=lambda p: p.stage)
        for here, after in itertools.pairwise(row):
            if here.group.zone != after.group.zone:
                key = (here.stage, here.group.zone, after.group.zone)
                crossings.setdefault(key, []).append(here)
    for (stage, zone_a, zone_b), senders in crossings.items():
        link = _zone_link(cluster, zone_a, zone_b)
        flows = sum(p.tp * p.dp for p in senders)
        where = (
            f"pipeline traffic between stages {stage} and {stage + 1} crosses the "
            f"{zone_a}-{zone_b} zone link"
        )
        if len(senders) < len(pipelines) or replica_form:
            where += f" ({len(senders)} of {len(pipelines)} pipelines)"
        detail = (
            f"{link[0]:g} GB/s shared by {flows} sends at once, {link[1]:g} ms"
            if link is not None
            else "no zone link is declared"
        )
        slowest = max(p.pp_comm_s for p in senders)
        warnings.append(
            f"{where}: {detail}; activations forward and gradients back every micro-batch, "
            f"{slowest * 1e3:,.1f} ms of pipeline sends per micro-batch on stage {stage}"
        )
    if replica_form:
        for stage in range(plan.pp):
            on_stage = [p for p in placed if p.stage == stage]
            zones = sorted({p.group.zone for p in on_stage})
            if len(zones) < 2:
                continue
            link = _zone_link(cluster, zones[0], zones[1])
            detail = f"{link[0]:g} GB/s, {link[1]:g} ms" if link is not None else "no zone link"
            warnings.append(
                f"the data-parallel gradient reduction of stage {stage} spans zones "
                f"{', '.join(zones)} and crosses the {zones[0]}-{zones[1]} zone link ({detail}): "
                f"{max(p.dp_comm_s for p in on_stage):,.3f} s per step before overlap"
            )
    return notes, warnings


def _unused(
    cluster: ClusterSpec, group: NodeGroup, used: Sequence[NodeGroup], precision: str
) -> str:
    """Why a group takes no part, as far as the hardware tells."""
    gpu = resolve_gpu(group.gpu)
    head = f"'{group.name}' ({group.num_gpus:,} x {gpu.name}, zone {group.zone}) is unused"
    if not used:
        return head
    reasons = []
    if not precision_usable(gpu, precision):
        reasons.append(f"its {gpu.name} has no {precision} support")
    zones = sorted({other.zone for other in used})
    if group.zone not in zones:
        link = _zone_link(cluster, group.zone, zones[0])
        reasons.append(
            f"it sits in zone {group.zone}, away from the stages in {', '.join(zones)}: joining "
            + (
                f"them would put activations on the {link[0]:g} GB/s, {link[1]:g} ms zone link"
                if link is not None
                else "them needs a zone link the cluster does not declare"
            )
        )
    fastest = max(used, key=lambda other: _speed(other, precision))
    if precision_usable(gpu, precision) and _speed(group, precision) < 0.9 * _speed(
        fastest, precision
    ):
        theirs = resolve_gpu(fastest.gpu)
        reasons.append(
            f"its GPUs are {_speed(fastest, precision) / _speed(group, precision):.1f}x slower "
            f"({gpu.name} {peak_tflops(gpu, precision):,.0f} vs {theirs.name} "
            f"{peak_tflops(theirs, precision):,.0f} TFLOP/s {precision} peak)"
        )
    smallest = min(resolve_gpu(other.gpu).hbm_gib for other in used)
    if gpu.hbm_gib < smallest:
        reasons.append(f"it has less memory per GPU ({gpu.hbm_gib:g} vs {smallest:g} GiB)")
    if not reasons:
        reasons.append("its hardware matches the groups used; this plan leaves it idle")
    return f"{head}: " + "; ".join(reasons)
