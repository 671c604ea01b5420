"""Heterogeneous plans: pipeline stages on different node groups, GPU types and zones.

Two shapes (see ``Plan.stages``):

- group stages: stage i runs on one node group with its own tp and dp; all replicas of a stage
  share a GPU type (Metis-style non-uniform stages);
- replica stages: replica r of every stage forms pipeline r, and replicas of one stage may sit on
  different GPU types (heterogeneous data parallelism, as in Sailor / Metis). The global batch is
  split across pipelines in proportion to their steady-state speed unless ``batch_shares`` fix it.

Every (pipeline, stage) pair becomes one entry of the stage arrays, so the same ``stage_costs``
formulas as the homogeneous path price it; the pipeline schedule then lets the slowest stage of
each pipeline set its pace, and the slowest pipeline set the step.
"""

import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from costmodel import pipeline
from costmodel.context import ModelContext
from costmodel.explain import finite_or_none, memory_of, time_breakdown
from costmodel.feasibility import Violation, describe
from costmodel.flops import is_moe_layer, model_flops_per_token
from costmodel.frameworks import FRAMEWORK_NAMES, why_not
from costmodel.goodput import (
    GoodputInputs,
    combined_reliability,
    finish_arrays,
    goodput_estimate,
    goodput_warnings,
    price_goodput,
)
from costmodel.gpu_defaults import default_params
from costmodel.hardware import group_links_GBps, precision_usable, resolve_gpu
from costmodel.hardware_arrays import concat_hardware, group_hardware, mfu_peak_tflops
from costmodel.kernels import Hardware
from costmodel.layout_notes import PlacedStage, heterogeneous_sentences, parameter_counts
from costmodel.params import EfficiencyParams
from costmodel.pipeline_split import stages_fit_chunks
from costmodel.rules import RULES, Facts, violations
from costmodel.specs import (
    ClusterSpec,
    Estimate,
    ModelSpec,
    NodeGroup,
    Plan,
    ReplicaSpec,
    StageEstimate,
    TrainingSpec,
)
from costmodel.stage import RECOMPUTE_CODES, StageCosts, StageInputs, stage_costs


@dataclass(frozen=True)
class Placement:
    """One (pipeline, stage) pair: where it runs and how wide it is."""

    pipeline: int
    stage: int
    group: NodeGroup
    tp: int
    dp: int  # replicas of this stage that share the work (1 in the replica form)


def _zone_link(cluster: ClusterSpec, zone_a: str, zone_b: str) -> tuple[float, float] | None:
    """(bandwidth GB/s, latency s) of the link between two zones; None inside one zone."""
    if zone_a == zone_b:
        return None
    for link in cluster.zone_links:
        if set(link.zones) == {zone_a, zone_b}:
            return link.bandwidth_GBps, link.latency_ms * 1e-3
    raise ValueError(
        f"cluster.zone_links: no link between zones '{zone_a}' and '{zone_b}', which the plan's "
        "stages cross"
    )


def _placements(cluster: ClusterSpec, plan: Plan) -> list[list[Placement]]:
    """Placements indexed [pipeline][stage]."""
    stages = plan.stages or []

    def group(name: str, where: str) -> NodeGroup:
        try:
            return cluster.group(name)
        except KeyError:
            names = ", ".join(g.name for g in cluster.groups)
            raise ValueError(
                f"{where}: unknown node group '{name}'; cluster has: {names}"
            ) from None

    if stages[0].replicas is None:
        row = [
            Placement(
                0,
                i,
                group(s.group or "", f"plan.stages[{i}].group"),
                s.tp or plan.tp,
                s.dp or plan.dp,
            )
            for i, s in enumerate(stages)
        ]
        return [row]
    # Replica form: the plan's validation gives every stage its replicas when the first has.
    replicas = [cast(list[ReplicaSpec], s.replicas) for s in stages]
    return [
        [
            Placement(
                r,
                i,
                group(reps[r].group, f"plan.stages[{i}].replicas[{r}].group"),
                reps[r].tp,
                1,
            )
            for i, reps in enumerate(replicas)
        ]
        for r in range(plan.dp)
    ]


def _layer_kinds(model: ModelSpec, plan: Plan) -> list[tuple[int, int]]:
    """(dense, moe) layer counts of each stage, walking the model's layers in order."""
    kinds, start = [], 0
    for stage in plan.stages or []:
        indices = range(start, min(start + stage.num_layers, model.num_layers))
        moe = sum(is_moe_layer(model, i) for i in indices)
        kinds.append((stage.num_layers - moe, moe))
        start += stage.num_layers
    return kinds


# The rules of ``costmodel.rules`` that one stage placement decides on its own (GPU counts and
# the batch split are the plan's, checked above and below).
_STAGE_RULES = tuple(
    rule
    for rule in RULES
    if rule.violation
    in (
        Violation.HEADS_TP,
        Violation.KV_HEADS_TP,
        Violation.FFN_TP,
        Violation.EXPERTS_EP,
        Violation.EP_DENSE,
        Violation.SEQ_CP,
        Violation.PRECISION,
    )
)


def _plan_columns(plan: Plan, tp: int) -> dict[str, np.ndarray]:
    """The plan-level settings as the 1-element columns ``frameworks`` reads."""
    values = {
        "dp": plan.dp, "tp": tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep, "etp": 0,
        "vpp": plan.vpp, "zero_stage": plan.zero_stage,
        "recompute": RECOMPUTE_CODES[plan.recompute],
        "offload_optimizer": int(plan.offload_optimizer),
        "tp_comm_overlap": int(plan.tp_comm_overlap), "schedule": int(plan.schedule == "gpipe"),
    }  # fmt: skip
    return {name: np.array([value]) for name, value in values.items()}


def _framework_gaps(framework: str, plan: Plan, flat: list["Placement"]) -> list[str]:
    """What of a heterogeneous plan ``framework`` cannot express: one TP size on every stage
    (all three run one), and the plan-level settings of its table."""
    tps = sorted({placement.tp for placement in flat})
    gaps = [f"tp: one tensor-parallel size on every stage (this plan has {tps})"]
    gaps = gaps if len(tps) > 1 else []
    return gaps + why_not(framework, _plan_columns(plan, tps[0]))


def _launchable(plan: Plan, flat: list["Placement"]) -> list[str]:
    return [name for name in FRAMEWORK_NAMES[1:] if not _framework_gaps(name, plan, flat)]


def _stage_rule_reasons(
    model: ModelSpec,
    training: TrainingSpec,
    plan: Plan,
    flat: list["Placement"],
    ctx: ModelContext,
) -> list[str]:
    """The rule table applied to each distinct (group, tp) placement, worded per stage."""
    reasons: list[str] = []
    seen: set[tuple[str, int]] = set()
    for placement in flat:
        key = (placement.group.name, placement.tp)
        if key in seen:
            continue
        seen.add(key)
        gpu = resolve_gpu(placement.group.gpu)
        columns = {
            name: np.array([value])
            for name, value in {
                "dp": placement.dp, "tp": placement.tp, "pp": plan.pp, "cp": plan.cp,
                "ep": plan.ep, "etp": 0, "vpp": plan.vpp,
                "micro_batch_size": plan.micro_batch_size, "sequence_parallel": 0,
            }.items()
        }  # fmt: skip
        facts = Facts(
            shape=ctx.shape,
            num_layers=model.num_layers,
            global_batch_size=training.global_batch_size,
            seq_length=training.seq_length,
            group_gpus=placement.group.num_gpus,
            has_precision=precision_usable(gpu, training.precision),
        )
        broken = int(violations(columns, facts, _STAGE_RULES)[0])
        words = describe(broken, _stage_facts(model, training, plan, placement, gpu.name))
        reasons += [f"stage {placement.stage}: {text}" for text in words]
    return reasons


def _stage_facts(
    model: ModelSpec, training: TrainingSpec, plan: Plan, placement: "Placement", gpu: str
) -> dict[str, float | int | str]:
    return {
        "tp": placement.tp,
        "heads": model.num_attention_heads,
        "kv_heads": model.kv_heads,
        "ffn": model.ffn_size
        if model.moe is None
        else f"{model.ffn_size}/{model.moe.expert_ffn_hidden_size}",
        "ep": plan.ep,
        "etp": placement.tp,
        "experts": model.moe.num_experts if model.moe else 0,
        "cp": plan.cp,
        "seq": training.seq_length,
        "gpu": gpu,
        "precision": training.precision,
    }


def estimate_heterogeneous(
    model: ModelSpec,
    training: TrainingSpec,
    cluster: ClusterSpec,
    plan: Plan,
    *,
    params: EfficiencyParams | None = None,
) -> Estimate:
    """Price a heterogeneous plan with ``params`` for every stage, or, without them, each
    (pipeline, stage) pair with its own GPU's defaults (``gpu_defaults.default_params``).
    Plan-level knobs (overlap interference, per-step overhead) then come from the defaults of
    the GPU running the first stage (of the first pipeline)."""
    grid = _placements(cluster, plan)
    replica_form = (plan.stages or [])[0].replicas is not None
    num_pipelines, pp = len(grid), plan.pp
    flat = [placement for row in grid for placement in row]
    contexts = [
        ModelContext.build(model, training, params or default_params(placement.group.gpu))
        for placement in flat
    ]
    ctx = contexts[0]
    kinds = _layer_kinds(model, plan)
    reasons: list[str] = []

    # ---- structural rules -------------------------------------------------------------------
    total_layers = sum(stage.num_layers for stage in plan.stages or [])
    if total_layers != model.num_layers:
        reasons.append(f"stages hold {total_layers} layers but the model has {model.num_layers}")
    stage_layers = [stage.num_layers for stage in plan.stages or []]
    if plan.vpp > 1 and not stages_fit_chunks(stage_layers, plan.vpp):
        reasons.append(
            f"vpp={plan.vpp} does not divide every stage's num_layers (the first and last may "
            "count the embedding or loss as a layer)"
        )
    used: dict[str, int] = {}
    for placement in flat:
        used[placement.group.name] = used.get(placement.group.name, 0) + (
            placement.tp * placement.dp * plan.cp
        )
    for name, count in used.items():
        available = cluster.group(name).num_gpus
        if count > available:
            reasons.append(f"plan needs {count} GPUs of group '{name}' but it has {available}")
    reasons += _stage_rule_reasons(model, training, plan, flat, ctx)
    launchable = _launchable(plan, flat)
    if training.framework != "any" and training.framework not in launchable:
        reasons.append(
            f"{training.framework} cannot launch this plan: "
            + "; ".join(_framework_gaps(training.framework, plan, flat))
        )
    gbs, mbs = training.global_batch_size, plan.micro_batch_size

    # ---- batch split ------------------------------------------------------------------------
    def microbatches_for(shares: list[float]) -> list[int]:
        sequences = [max(mbs, round(gbs * share / mbs) * mbs) for share in shares]
        sequences[int(np.argmax(sequences))] += gbs - sum(sequences)
        return [max(1, s // mbs) for s in sequences]

    if replica_form:
        if plan.batch_shares is not None:
            total = sum(plan.batch_shares)
            microbatches = microbatches_for([share / total for share in plan.batch_shares])
        else:
            microbatches = [max(1, gbs // (num_pipelines * mbs))] * num_pipelines
    else:
        dp = plan.dp  # the spec guarantees every group stage runs plan.dp replicas
        if gbs % (dp * mbs):
            reasons.append(
                f"global_batch_size={gbs} is not a multiple of dp*micro_batch_size={dp * mbs}"
            )
        microbatches = [max(1, gbs // (dp * mbs))]

    costs = _price(contexts, cluster, plan, grid, kinds, microbatches)
    per_mb = costs.per_microbatch_s.reshape(num_pipelines, pp)
    if plan.vpp > 1 and any(count % pp for count in microbatches):
        reasons.append(
            f"interleaved schedule (vpp={plan.vpp}) needs each pipeline's micro-batches "
            f"({', '.join(map(str, microbatches))}) to be a multiple of pp={pp}"
        )
    if replica_form and plan.batch_shares is None:
        # Speed-proportional split: pipeline r's steady-state rate is 1 / (slowest stage time).
        speed = 1.0 / per_mb.max(axis=1)
        microbatches = microbatches_for(list(speed / speed.sum()))
        costs = _price(contexts, cluster, plan, grid, kinds, microbatches)
        per_mb = costs.per_microbatch_s.reshape(num_pipelines, pp)

    m = np.asarray(microbatches, dtype=float)
    slowest = per_mb.max(axis=1)
    pipe_s, bubble = pipeline.schedule_from_stage_times(per_mb.sum(axis=1), slowest, m, plan.vpp)
    critical = int(np.argmax(pipe_s))
    backward = costs.backward_s.reshape(num_pipelines, pp)[critical]
    slack = np.concatenate([[0.0], np.cumsum(backward)[:-1]])
    overlap = 1.0 if plan.overlap_grad_reduce else 0.0
    dp_comm = costs.dp_comm_s.reshape(num_pipelines, pp).max(axis=0)
    budget = overlap * costs.dp_overlap_budget_s.reshape(num_pipelines, pp)[critical]
    dp_exposed = float(
        pipeline.exposed_dp_comm(
            tuple(dp_comm),
            tuple(budget),
            tuple(slack),
            tuple(np.ones(pp)),
            ctx.params.overlap_interference,
        )
    )
    optimizer = float(costs.optimizer_s.max())
    step = float(pipe_s[critical]) + dp_exposed + optimizer + ctx.params.per_step_overhead_s

    # ---- memory -----------------------------------------------------------------------------
    memory = costs.memory_gib
    capacity = np.array([resolve_gpu(p.group.gpu).hbm_gib for p in flat])
    for index in np.flatnonzero(memory > capacity):
        placement = flat[index]
        reasons.append(
            f"out of memory: stage {placement.stage} on '{placement.group.name}' needs "
            f"{memory[index]:.1f} GiB per GPU but {resolve_gpu(placement.group.gpu).name} has "
            f"{capacity[index]:.1f} GiB"
        )

    # ---- throughput, utilization, cost ------------------------------------------------------
    num_gpus = sum(p.tp * p.dp * plan.cp for p in flat)
    tokens = float(gbs * training.seq_length)
    tokens_per_s = tokens / step
    flops_per_token = model_flops_per_token(model, training.seq_length)
    peak_sum = sum(
        mfu_peak_tflops(resolve_gpu(p.group.gpu), training.precision) * 1e12 * p.tp * p.dp * plan.cp
        for p in flat
    )
    hardware_flops = float(
        sum(
            costs.hardware_flops[i] * m[p.pipeline] * p.tp * p.dp * plan.cp
            for i, p in enumerate(flat)
        )
    )
    prices = [
        p.group.price_per_gpu_hour
        if p.group.price_per_gpu_hour is not None
        else resolve_gpu(p.group.gpu).price_per_gpu_hour
        for p in flat
    ]
    # Every GPU of a group the plan runs on is held, the idle ones included.
    used_groups = {p.group.name: (p.group, price) for p, price in zip(flat, prices, strict=True)}
    usd_per_hour = (
        # Every price is checked not None first.
        sum(group.num_gpus * cast(float, price) for group, price in used_groups.values())
        if all(price is not None for price in prices)
        else None
    )
    idle_gpus = sum(group.num_gpus for group, _ in used_groups.values()) - sum(
        p.tp * p.dp * plan.cp for p in flat
    )
    goodput_arrays = _goodput_arrays(
        training, flat, used_groups, plan.cp, costs, step, tokens_per_s, usd_per_hour
    )
    goodput = goodput_estimate(goodput_arrays, 0)
    slow_index = critical * pp + int(np.argmax(per_mb[critical]))
    breakdown = time_breakdown(
        {name: float(getattr(costs, name)[slow_index]) for name in StageCosts.__dataclass_fields__},
        float(m[critical]),
        float(bubble[critical]),
        dp_exposed,
        optimizer,
        ctx.params.per_step_overhead_s,
    )

    per_stage = []
    for stage in range(pp):
        members = [i for i, p in enumerate(flat) if p.stage == stage]
        worst = max(members, key=lambda i: memory[i])
        values = {
            name: float(getattr(costs, name)[worst]) for name in StageCosts.__dataclass_fields__
        }
        breakdown_memory = memory_of(values)
        per_stage.append(
            StageEstimate(
                stage=stage,
                group="+".join(dict.fromkeys(flat[i].group.name for i in members)),
                gpu="+".join(dict.fromkeys(resolve_gpu(flat[i].group.gpu).name for i in members)),
                num_layers=(plan.stages or [])[stage].num_layers,
                tp=flat[worst].tp,
                dp=len(members) if replica_form else flat[worst].dp,
                time_per_microbatch_s=float(max(costs.per_microbatch_s[i] for i in members)),
                memory_gib=breakdown_memory,
                peak_memory_gib=breakdown_memory.total,
                capacity_gib=float(capacity[worst]),
            )
        )
    worst_stage = max(per_stage, key=lambda s: s.peak_memory_gib / s.capacity_gib)
    total, active = parameter_counts(model)
    dp_comm_flat = costs.dp_comm_s.reshape(-1)
    placed = [
        PlacedStage(
            pipeline=p.pipeline,
            stage=p.stage,
            group=p.group,
            tp=p.tp,
            dp=p.dp,
            num_layers=(plan.stages or [])[p.stage].num_layers,
            pp_comm_s=float(costs.pp_comm_s[i]),
            dp_comm_s=float(dp_comm_flat[i]) if dp_comm_flat.size == len(flat) else 0.0,
        )
        for i, p in enumerate(flat)
    ]
    notes, warnings = heterogeneous_sentences(
        model, cluster, plan, training.precision, placed, microbatches
    )
    return Estimate(
        feasible=not reasons,
        reasons=list(dict.fromkeys(reasons)),
        num_gpus=num_gpus,
        step_time_s=step,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=tokens_per_s / num_gpus,
        model_tflops_per_gpu=tokens_per_s * flops_per_token / num_gpus / 1e12,
        mfu=tokens_per_s * flops_per_token / peak_sum,
        hfu=hardware_flops / step / peak_sum,
        peak_memory_gib=worst_stage.peak_memory_gib,
        memory_gib=worst_stage.memory_gib,
        per_stage=per_stage,
        time_breakdown_s=breakdown,
        usd_per_hour=usd_per_hour,
        usd_per_million_tokens=(
            finite_or_none(usd_per_hour / 3600.0 / tokens_per_s * 1e6) if usd_per_hour else None
        ),
        time_to_train_s=finite_or_none(float(goodput_arrays["time_to_train_s"][0])),
        effective_tokens_per_s=float(goodput_arrays["effective_tokens_per_s"][0]),
        usd_to_train=finite_or_none(float(goodput_arrays["usd_to_train"][0])),
        goodput=goodput,
        total_params=total,
        active_params=active,
        warnings=warnings + goodput_warnings(goodput, training.checkpoint.strategy),
        notes=notes,
        framework=training.framework,
        launchable_by=launchable,
        idle_gpus=max(idle_gpus, 0),
    )


def _goodput_arrays(
    training: TrainingSpec,
    flat: list[Placement],
    used_groups: dict[str, tuple[NodeGroup, float | None]],
    cp: int,
    costs: StageCosts,
    step_s: float,
    tokens_per_s: float,
    usd_per_hour: float | None,
) -> dict[str, np.ndarray]:
    """Goodput of a heterogeneous plan (``costmodel.goodput``): the job's nodes in every
    group it uses, their combined reliability, its largest checkpoint shard per GPU."""
    gpus_in = {name: 0 for name in used_groups}
    for placement in flat:
        gpus_in[placement.group.name] += placement.tp * placement.dp * cp
    job_nodes = {
        name: -(-gpus_in[name] // group.gpus_per_node) for name, (group, _) in used_groups.items()
    }
    groups = [group for group, _ in used_groups.values()]
    gpus = np.array([p.tp * p.dp * cp for p in flat], dtype=float)
    write = np.asarray(costs.checkpoint_write_gib, dtype=float).reshape(-1)
    write = np.broadcast_to(write, gpus.shape) if write.size == 1 else write
    load = np.asarray(costs.checkpoint_held_gib, dtype=float).reshape(-1)
    inputs = GoodputInputs(
        step_time_s=np.array([step_s]),
        job_nodes=np.array([sum(job_nodes.values())]),
        idle_nodes=np.array([sum(g.num_nodes - job_nodes[g.name] for g in groups)]),
        gpus_per_node=max(g.gpus_per_node for g in groups),
        write_gib_per_gpu=np.array([write.max()]),
        load_gib_per_gpu=np.array([load.max()]),
        total_gib=np.array([float((write * gpus).sum())]),
        inter_node_GBps_per_gpu=np.array(
            [min(group_links_GBps(g)[1] for g in groups)], dtype=float
        ),
    )
    reliability = combined_reliability(
        [(g.reliability_or_default, job_nodes[g.name]) for g in groups]
    )
    arrays = {
        "tokens_per_s": np.array([tokens_per_s]),
        "usd_per_hour": np.array([usd_per_hour if usd_per_hour is not None else np.nan]),
        "job_nodes": inputs.job_nodes,
        "checkpoint_gib_per_gpu": inputs.write_gib_per_gpu,
        "checkpoint_load_gib_per_gpu": inputs.load_gib_per_gpu,
        "checkpoint_total_gib": inputs.total_gib,
    }
    parts = price_goodput(inputs, reliability, training.checkpoint)
    finish_arrays(arrays, parts, training.train_tokens)
    return arrays


def _price(
    contexts: list[ModelContext],
    cluster: ClusterSpec,
    plan: Plan,
    grid: list[list[Placement]],
    kinds: list[tuple[int, int]],
    microbatches: list[int],
) -> StageCosts:
    """Run the stage model on every (pipeline, stage) pair, each with its context (flat order):
    its efficiency parameters price its hardware and its side of the links it uses."""
    flat = [placement for row in grid for placement in row]
    pp = plan.pp
    hardware = concat_hardware(
        [
            group_hardware(p.group, c.precision, c.params)
            for p, c in zip(flat, contexts, strict=True)
        ]
    )
    params_of = {(p.pipeline, p.stage): c.params for p, c in zip(flat, contexts, strict=True)}

    def inter_Bps(placement: Placement) -> float:
        efficiency = params_of[placement.pipeline, placement.stage].inter_node_efficiency
        return group_links_GBps(placement.group)[1] * 1e9 * efficiency

    def inter_latency_s(placement: Placement) -> float:
        return params_of[placement.pipeline, placement.stage].inter_node_latency_us * 1e-6

    pp_Bps, pp_latency, dp_Bps, dp_latency = [], [], [], []
    for row in grid:
        for i, placement in enumerate(row):
            # Traffic to the next stage (the last stage sends nothing forward; use its input).
            # Each end sends at its own NIC rate and NCCL efficiency: the slower end sets it.
            neighbor = row[i + 1] if i + 1 < len(row) else row[i - 1] if i else placement
            bandwidth = min(inter_Bps(placement), inter_Bps(neighbor))
            latency = max(inter_latency_s(placement), inter_latency_s(neighbor))
            link = _zone_link(cluster, placement.group.zone, neighbor.group.zone)
            if link is not None:
                # Every tp x dp rank of the boundary sends at once through the shared zone link.
                flows = placement.tp * placement.dp * len(grid)
                bandwidth = min(bandwidth, link[0] * 1e9 / flows)
                latency = link[1]
            pp_Bps.append(bandwidth)
            pp_latency.append(latency)
            if len(grid) > 1:
                # Heterogeneous DP: the stage's replicas sit on different nodes (or zones).
                members = [other[i] for other in grid]
                bandwidth_dp = min(inter_Bps(m) for m in members)
                latency_dp = max(inter_latency_s(m) for m in members)
                zones = {m.group.zone for m in members}
                if len(zones) > 1:
                    zone_a, zone_b = sorted(zones)[:2]
                    link_bw, link_latency = _zone_link(cluster, zone_a, zone_b) or (math.inf, 0.0)
                    # All stages' tp rings cross the zone link concurrently.
                    bandwidth_dp = min(bandwidth_dp, link_bw * 1e9 / (placement.tp * pp))
                    latency_dp = max(latency_dp, link_latency)
                dp_Bps.append(bandwidth_dp)
                dp_latency.append(latency_dp)
            else:
                dp_Bps.append(np.nan)
                dp_latency.append(np.nan)

    def column(values: list[float]) -> np.ndarray:
        return np.asarray(values, dtype=float)

    n = len(flat)
    inputs = StageInputs(
        dense_layers=column([kinds[p.stage][0] for p in flat]),
        moe_layers=column([kinds[p.stage][1] for p in flat]),
        has_embedding=column([p.stage == 0 for p in flat]),
        has_head=column([p.stage == pp - 1 for p in flat]),
        tp=column([p.tp for p in flat]),
        cp=np.full(n, float(plan.cp)),
        ep=np.full(n, float(plan.ep)),
        dp=column([len(grid) if len(grid) > 1 else p.dp for p in flat]),
        micro_batch_size=np.full(n, float(plan.micro_batch_size)),
        sequence_parallel=column([plan.sp and p.tp > 1 for p in flat]).astype(np.int64),
        recompute=np.full(n, RECOMPUTE_CODES[plan.recompute], dtype=np.int64),
        zero_stage=np.full(n, plan.zero_stage, dtype=np.int64),
        offload_optimizer=np.full(n, int(plan.offload_optimizer), dtype=np.int64),
        tp_comm_overlap=np.full(n, int(plan.tp_comm_overlap), dtype=np.int64),
        pp=np.full(n, float(pp)),
        vpp=np.full(n, float(plan.vpp)),
        stage_index=column([p.stage for p in flat]),
        microbatches=column([microbatches[p.pipeline] for p in flat]),
        gpipe=np.full(n, int(plan.schedule == "gpipe"), dtype=np.int64),
        pp_Bps=column(pp_Bps),
        pp_latency_s=column(pp_latency),
        dp_Bps=column(dp_Bps),
        dp_latency_s=column(dp_latency),
    )
    return _stage_costs_by_context(contexts, inputs, hardware)


def _stage_costs_by_context(
    contexts: list[ModelContext], inputs: StageInputs, hardware: Hardware
) -> StageCosts:
    """``stage_costs`` of each entry under its own context: one call per distinct set of
    efficiency parameters (one in all but mixed-GPU plans priced with per-GPU defaults)."""
    by_params: dict[EfficiencyParams, list[int]] = {}
    for index, context in enumerate(contexts):
        by_params.setdefault(context.params, []).append(index)
    if len(by_params) == 1:
        return stage_costs(contexts[0], inputs, hardware)
    n = len(contexts)

    def take(value: Any, rows: np.ndarray) -> Any:
        # Per-entry arrays are sliced; optional fields left None (or scalars) pass as they are.
        if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == n:
            return value[rows]
        return value

    out = {name: np.empty(n) for name in StageCosts.__dataclass_fields__}
    for members in by_params.values():
        rows = np.asarray(members)
        part = stage_costs(
            contexts[members[0]],
            StageInputs(
                **{
                    name: take(getattr(inputs, name), rows)
                    for name in StageInputs.__dataclass_fields__
                }
            ),
            Hardware(
                **{
                    name: take(getattr(hardware, name), rows)
                    for name in Hardware.__dataclass_fields__
                }
            ),
        )
        for name in out:
            out[name][rows] = np.broadcast_to(getattr(part, name), rows.shape)
    return StageCosts(**out)
