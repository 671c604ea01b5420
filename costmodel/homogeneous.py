"""Vectorized evaluation of homogeneous plans (every stage alike, one node group).

A homogeneous plan has three kinds of pipeline stage: the first (with the input embedding), the
middle ones and the last (with the output layer and loss); with pp = 1 the single stage has both.
We price the three kinds for all N plans in one ``stage_costs`` call on 3N entries, then combine
them with the pipeline schedule (``pipeline.py``).

Shapes: plan columns and results are ``(n_plans,)``; the stage model sees ``(3, n_plans)`` kind
arrays (rows: first, middle, last) against ``(1, n_plans)`` plan rows, and ``(3,)`` for one plan.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodel import comm, pipeline
from costmodel.context import ModelContext
from costmodel.feasibility import Violation, flag
from costmodel.flops import layer_counts
from costmodel.frameworks import broken_limits
from costmodel.hardware import precision_usable, resolve_gpu
from costmodel.hardware_arrays import group_hardware, mfu_peak_tflops
from costmodel.pipeline_split import head_layers, resolve_splits
from costmodel.rules import Facts, violations
from costmodel.specs import ModelSpec, NodeGroup, Plan
from costmodel.stage import RECOMPUTE_CODES, StageCosts, StageInputs, stage_costs

_DEFAULTS: dict[str, Any] = {
    "cp": 1,
    "ep": 1,
    "vpp": 1,
    "zero_stage": 0,
    "recompute": 0,
    "offload_optimizer": False,
    "overlap_grad_reduce": True,
    "tp_comm_overlap": False,
    "schedule": 0,
    "dp_shard": 0,  # 0: the states are sharded over all dp x cp ranks
    "etp": 0,  # 0: expert tensor parallelism = tp
    "first_stage_layers": 0,  # 0: even split when pp * vpp divides the layers, else balanced
    "last_stage_layers": 0,
}
REQUIRED = ("dp", "tp", "pp", "micro_batch_size")
KNOWN = (*REQUIRED, *_DEFAULTS, "sequence_parallel")


def normalize_plans(plans: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Plan field name -> int64 array of shape ``(n_plans,)``, defaults filled, codes for enums."""
    unknown = sorted(set(plans) - set(KNOWN))
    if unknown:
        raise ValueError(f"unknown plan field(s): {', '.join(unknown)}; known: {', '.join(KNOWN)}")
    missing = [name for name in REQUIRED if name not in plans]
    if missing:
        raise ValueError(f"plans is missing required field(s): {', '.join(missing)}")
    size = len(np.atleast_1d(plans["dp"]))
    out: dict[str, np.ndarray] = {}
    for name in KNOWN:
        raw = plans.get(name, _DEFAULTS.get(name))
        if name == "sequence_parallel" and raw is None:
            continue
        values = np.atleast_1d(np.asarray(raw))
        if name == "recompute" and values.dtype.kind in "UO":
            try:
                values = np.array([RECOMPUTE_CODES[str(v)] for v in values])
            except KeyError as exc:
                raise ValueError(f"recompute: unknown mode {exc.args[0]!r}") from None
        if name == "schedule" and values.dtype.kind in "UO":
            values = np.array([1 if str(v) == "gpipe" else 0 for v in values])
        values = values.astype(np.int64)
        if values.shape == (1,) and size != 1:
            values = np.full(size, values[0], dtype=np.int64)
        if values.shape != (size,):
            raise ValueError(f"plans field '{name}' has {values.shape[0]} entries, expected {size}")
        out[name] = values
    if "sequence_parallel" not in out:
        out["sequence_parallel"] = (out["tp"] > 1).astype(np.int64)
    for name in ("dp", "tp", "pp", "cp", "ep", "vpp", "micro_batch_size"):
        if np.any(out[name] < 1):
            raise ValueError(f"plans field '{name}' must be >= 1")
    if np.any((out["zero_stage"] < 0) | (out["zero_stage"] > 3)):
        raise ValueError("plans field 'zero_stage' must be 0..3")
    if np.any(out["etp"] < 0):
        raise ValueError("plans field 'etp' must be 0 (= tp) or >= 1")
    if np.any((out["first_stage_layers"] < 0) | (out["last_stage_layers"] < 0)):
        raise ValueError("plans fields 'first_stage_layers'/'last_stage_layers' must be >= 0")
    shard = out["dp_shard"]
    if np.any((shard < 0) | ((shard > 0) & ((out["dp"] * out["cp"]) % np.maximum(shard, 1) != 0))):
        raise ValueError("plans field 'dp_shard' must be 0 (all) or divide dp x cp")
    return out


@dataclass
class HomogeneousResult:
    """Arrays over N plans, plus the three stage kinds' costs for explanation."""

    arrays: dict[str, np.ndarray]
    stages: StageCosts  # arrays broadcastable to (3, N): first, middle, last stage kinds
    microbatches: np.ndarray


def layer_split(
    model: ModelSpec, ctx: ModelContext, p: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, middle, last) stage layers, each ``(n_plans,)`` (``pipeline_split``); -1 if none."""
    return resolve_splits(
        model.num_layers,
        p["pp"],
        p["vpp"],
        p["first_stage_layers"],
        p["last_stage_layers"],
        head_layers(ctx.shape, ctx.seq_length),
    )


def structural_violations(
    model: ModelSpec,
    ctx: ModelContext,
    group: NodeGroup,
    p: dict[str, np.ndarray],
    split: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """The rule table (``costmodel.rules``) and the framework's limits applied to these plans."""
    structural = violations(p, rule_facts(model, ctx, group, split[0]))
    return structural | flag(broken_limits(ctx.framework, p), Violation.FRAMEWORK)


def rule_facts(
    model: ModelSpec, ctx: ModelContext, group: NodeGroup, first_stage_layers: np.ndarray | None
) -> Facts:
    """The plan-independent facts ``costmodel.rules`` checks homogeneous plans against;
    ``first_stage_layers``: per plan, shape ``(n_plans,)``, or None."""
    return Facts(
        shape=ctx.shape,
        num_layers=model.num_layers,
        global_batch_size=ctx.global_batch_size,
        seq_length=ctx.seq_length,
        group_gpus=group.num_gpus,
        has_precision=precision_usable(resolve_gpu(group.gpu), ctx.precision),
        first_stage_layers=first_stage_layers,
    )


def plan_arrays(plan: Plan) -> dict[str, np.ndarray]:
    """One validated Plan as the 1-element int arrays ``evaluate_homogeneous`` consumes."""
    values = {
        "dp": plan.dp,
        "tp": plan.tp,
        "pp": plan.pp,
        "cp": plan.cp,
        "ep": plan.ep,
        "vpp": plan.vpp,
        "micro_batch_size": plan.micro_batch_size,
        "zero_stage": plan.zero_stage,
        "recompute": RECOMPUTE_CODES[plan.recompute],
        "offload_optimizer": int(plan.offload_optimizer),
        "overlap_grad_reduce": int(plan.overlap_grad_reduce),
        "tp_comm_overlap": int(plan.tp_comm_overlap),
        "schedule": int(plan.schedule == "gpipe"),
        "sequence_parallel": int(plan.sp),
        "dp_shard": plan.dp_shard or 0,
        "etp": plan.etp or 0,
        "first_stage_layers": plan.first_stage_layers or 0,
        "last_stage_layers": plan.last_stage_layers or 0,
    }
    return {name: np.array([value], dtype=np.int64) for name, value in values.items()}


def checkpoint_arrays(
    kinds: Any,
    costs: StageCosts,
    weights: tuple[np.ndarray, np.ndarray, np.ndarray],
    pp: np.ndarray,
    num_gpus: np.ndarray,
    group: NodeGroup,
) -> dict[str, np.ndarray]:
    """Checkpoint sizes (``stage.state.checkpoint_bytes``) and the nodes a plan occupies."""
    write = kinds(costs.checkpoint_write_gib)
    load = kinds(costs.checkpoint_held_gib)
    middle = pp > 2
    per_stage_gpus = num_gpus / pp
    total = (weights[0] * write[0] + weights[1] * write[1] + weights[2] * write[2]) * per_stage_gpus
    job_nodes = -(-num_gpus // group.gpus_per_node)
    return {
        "checkpoint_gib_per_gpu": np.maximum(
            np.maximum(write[0], write[2]), np.where(middle, write[1], 0.0)
        ),
        "checkpoint_load_gib_per_gpu": np.maximum(
            np.maximum(load[0], load[2]), np.where(middle, load[1], 0.0)
        ),
        "checkpoint_total_gib": total,
        "job_nodes": job_nodes,
        "idle_nodes": np.maximum(group.num_nodes - job_nodes, 0),
    }


def evaluate_homogeneous(
    model: ModelSpec,
    ctx: ModelContext,
    group: NodeGroup,
    plans: Mapping[str, Any],
    *,
    normalized: bool = False,
) -> HomogeneousResult:
    """Price N homogeneous plans; ``normalized`` skips checks for ``plan_arrays`` output."""
    p = dict(plans) if normalized else normalize_plans(plans)
    n = p["dp"].shape[0]
    split = layer_split(model, ctx, p)
    violations = structural_violations(model, ctx, group, p, split)
    microbatches = np.maximum(ctx.global_batch_size // (p["dp"] * p["micro_batch_size"]), 1)

    dense_total, moe_total = layer_counts(model)
    pp = p["pp"]
    single = pp == 1
    # Plan fields broadcast as (1, N); fields that differ between the three stage kinds (first,
    # middle, last) are (3, N). numpy then computes plan-only terms once, not three times.
    zeros = np.zeros(n)
    ones = np.ones(n)
    hw = group_hardware(group, ctx.precision, ctx.params)  # scalars (shape (1,)) broadcast
    gpn = hw.gpus_per_node[0]
    # Adjacent pipeline stages share a node only if a whole model replica slice fits twice.
    pp_local = comm.ranks_per_node(pp, p["tp"] * p["cp"] * p["dp"], gpn)
    pp_Bps = np.where(pp_local > 1, hw.intra_Bps[0], hw.inter_Bps[0])
    pp_latency = np.where(pp_local > 1, hw.intra_latency_s[0], hw.inter_latency_s[0])

    # One plan (the scalar face): flat length-3 arrays, one per stage kind, keep every ufunc
    # on numpy's same-shape fast path; N plans: (1, N) rows against (3, N) kind arrays.
    flat = n == 1

    def row(values: np.ndarray, dtype: type = float) -> np.ndarray:
        values = values.astype(dtype)
        return np.repeat(values, 3) if flat else values[None, :]

    def stack(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if flat else np.stack(parts)

    nan = np.full(3 if flat else (1, 1), np.nan)

    single_f = single.astype(float)
    # Stages of an invalid split are priced as even ones; the plan is flagged infeasible.
    even = model.num_layers / pp
    first_l, middle_l, last_l = (np.where(split[0] < 0, even, part) for part in split)
    stage_layers = stack([first_l.astype(float), middle_l.astype(float), last_l.astype(float)])
    inputs = StageInputs(
        # MoE models: each stage's layers are dense and MoE in the model's proportion.
        dense_layers=stage_layers * (dense_total / model.num_layers),
        moe_layers=stage_layers * (moe_total / model.num_layers),
        has_embedding=stack([ones, zeros, single_f]),
        has_head=stack([single_f, zeros, ones]),
        tp=row(p["tp"]),
        cp=row(p["cp"]),
        ep=row(p["ep"]),
        dp=row(p["dp"]),
        micro_batch_size=row(p["micro_batch_size"]),
        sequence_parallel=row(p["sequence_parallel"], np.int64),
        recompute=row(p["recompute"], np.int64),
        zero_stage=row(p["zero_stage"], np.int64),
        offload_optimizer=row(p["offload_optimizer"], np.int64),
        tp_comm_overlap=row(p["tp_comm_overlap"], np.int64),
        pp=row(pp),
        vpp=row(p["vpp"]),
        stage_index=stack([zeros, np.minimum(1, pp - 1), pp - 1]).astype(float),
        microbatches=row(microbatches),
        gpipe=row(p["schedule"], np.int64),
        pp_Bps=row(pp_Bps),
        pp_latency_s=row(pp_latency),
        dp_Bps=nan,
        dp_latency_s=nan,
        dp_shard=row(p["dp_shard"]),
        etp=row(p["etp"]),
    )
    costs = stage_costs(ctx, inputs, hw)

    def kinds(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Split a ``(3, n_plans)`` stage-model output (or one broadcast to it) into the
        (first, middle, last) kinds, each ``(n_plans,)``."""
        values = np.asarray(values)
        per_kind = values.shape[0] == 3 if values.ndim else False
        if flat:
            if per_kind:
                return values[0:1], values[1:2], values[2:3]
            same = values.reshape(-1)[:1]
            return same, same, same
        if per_kind:
            return values[0], values[1], values[2]
        same = np.broadcast_to(values.reshape(-1), (n,))
        return same, same, same

    per_mb = kinds(costs.per_microbatch_s)
    # Stage-count weights of the three kinds: 1 first, pp - 2 middle, 1 last (pp = 1: one stage).
    weights = (ones, np.maximum(pp - 2, 0).astype(float), np.where(single, 0.0, 1.0))
    schedule = pipeline.homogeneous_schedule(per_mb, weights, microbatches, p["vpp"])

    backward = kinds(costs.backward_s)
    dp_exposed = pipeline.exposed_dp_comm(
        dp_comm=kinds(costs.dp_comm_s),
        budget=tuple(b * (p["overlap_grad_reduce"] > 0) for b in kinds(costs.dp_overlap_budget_s)),
        # Stage i finishes its last backward i backward-steps before stage 0 does.
        slack=(
            zeros,
            np.where(pp > 2, backward[1], 0.0),
            np.where(single, 0.0, (pp - 1) * backward[1]),
        ),
        present=(ones, (pp > 2).astype(float), ones),
        interference=ctx.params.overlap_interference,
    )
    optimizer = np.max(np.stack(kinds(costs.optimizer_s)), axis=0)
    step = schedule.pipeline_s + dp_exposed + optimizer + ctx.params.per_step_overhead_s

    memory = kinds(costs.memory_gib)
    # The fullest stage: the first (most micro-batches in flight), the last (logits), or under
    # an uneven split the first middle stage (more layers than the first, one fewer in flight).
    middle_memory = np.where(pp > 2, memory[1], -np.inf)
    peak_memory = np.maximum(np.maximum(memory[0], memory[2]), middle_memory)
    worst_stage = np.where(
        middle_memory > np.maximum(memory[0], memory[2]),
        1,
        np.where(memory[2] > memory[0], pp - 1, 0),
    )
    capacity = np.full(n, hw.capacity_gib[0])
    violations |= flag(peak_memory > capacity, Violation.MEMORY)

    gpu = resolve_gpu(group.gpu)
    num_gpus = p["dp"] * p["tp"] * p["pp"] * p["cp"]
    tokens = float(ctx.global_batch_size * ctx.seq_length)
    tokens_per_s = tokens / step
    mfu_peak = mfu_peak_tflops(gpu, ctx.precision) * 1e12
    hw_flops = kinds(costs.hardware_flops)
    mean_hw_flops = (
        weights[0] * hw_flops[0] + weights[1] * hw_flops[1] + weights[2] * hw_flops[2]
    ) / pp
    price = (
        group.price_per_gpu_hour if group.price_per_gpu_hour is not None else gpu.price_per_gpu_hour
    )
    # The group's idle GPUs are held (and paid for) too: a plan that leaves GPUs idle is not
    # cheaper per hour than one that uses them.
    idle_gpus = np.maximum(group.num_gpus - num_gpus, 0)
    usd_per_hour = (
        np.full(n, float(group.num_gpus * price)) if price is not None else np.full(n, np.nan)
    )
    arrays = {
        "feasible": violations == 0,
        "violations": violations,
        "num_gpus": num_gpus,
        "microbatches": microbatches,
        "step_time_s": step,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_gpu": tokens_per_s / num_gpus,
        "peak_memory_gib": peak_memory,
        "capacity_gib": capacity,
        "worst_stage": worst_stage,
        "pipeline_s": schedule.pipeline_s,
        "bubble_s": schedule.bubble_s,
        "slowest_kind": schedule.slowest_kind,
        "dp_comm_exposed_s": dp_exposed,
        "optimizer_s": optimizer,
        "mfu": tokens_per_s * ctx.model_flops_per_token / (num_gpus * mfu_peak),
        "hfu": mean_hw_flops * microbatches / step / mfu_peak,
        "usd_per_hour": usd_per_hour,
        "idle_gpus": idle_gpus,
        "usd_per_million_tokens": usd_per_hour / 3600.0 / tokens_per_s * 1e6,
    }
    arrays.update(checkpoint_arrays(kinds, costs, weights, pp, num_gpus, group))
    arrays["inter_node_GBps"] = np.full(n, hw.inter_Bps[0] / 1e9)
    arrays["first_stage_layers"] = split[0]
    arrays["middle_stage_layers"] = split[1]
    arrays["last_stage_layers"] = split[2]
    return HomogeneousResult(arrays=arrays, stages=costs, microbatches=microbatches)
