"""Turn the vectorized result of one plan into an explained ``Estimate``."""

import math

import numpy as np

from costmodel.context import ModelContext
from costmodel.feasibility import describe
from costmodel.frameworks import launchable_by, why_not
from costmodel.goodput import goodput_estimate, goodput_warnings, homogeneous_goodput
from costmodel.hardware import resolve_gpu
from costmodel.hardware_arrays import mfu_peak_tflops
from costmodel.homogeneous import HomogeneousResult, plan_arrays
from costmodel.layout_notes import homogeneous_warnings, parameter_counts
from costmodel.pipeline_split import describe_rule, stage_layer_counts
from costmodel.specs import (
    Estimate,
    MemoryBreakdown,
    ModelSpec,
    NodeGroup,
    Plan,
    StageEstimate,
    TimeBreakdown,
    TrainingSpec,
)
from costmodel.stage import StageCosts, inflight_layers

_PER_MICROBATCH_PARTS = (
    "forward_s",
    "backward_s",
    "recompute_s",
    "tp_comm_s",
    "cp_comm_s",
    "ep_comm_s",
    "pp_comm_s",
    "sharded_dp_exposed_s",
    "overhead_s",
)


def _kinds(costs: StageCosts) -> list[dict[str, float]]:
    """Values of the three stage kinds (first, middle, last) of a one-plan result."""
    columns = {
        name: np.asarray(getattr(costs, name)).reshape(-1)
        for name in StageCosts.__dataclass_fields__
    }
    return [
        {name: float(values[kind if values.size == 3 else 0]) for name, values in columns.items()}
        for kind in range(3)
    ]


def memory_of(values: dict[str, float]) -> MemoryBreakdown:
    """``MemoryBreakdown`` (GiB per GPU) from one stage's ``*_gib`` values."""
    return MemoryBreakdown(
        parameters=values["parameters_gib"],
        gradients=values["gradients_gib"],
        optimizer_states=values["optimizer_states_gib"],
        activations=values["activations_gib"],
        other=values["other_gib"],
    )


def time_breakdown(
    slowest: dict[str, float],
    microbatches: float,
    bubble_s: float,
    dp_exposed_s: float,
    optimizer_s: float,
    per_step_overhead_s: float,
) -> TimeBreakdown:
    """Critical path: m x the slowest stage's micro-batch, the bubble, then the step's tail."""
    m = microbatches
    return TimeBreakdown(
        compute=m * (slowest["forward_s"] + slowest["backward_s"]),
        recompute=m * slowest["recompute_s"],
        tp_comm=m * slowest["tp_comm_s"],
        cp_comm=m * slowest["cp_comm_s"],
        ep_comm=m * slowest["ep_comm_s"],
        pp_comm=m * slowest["pp_comm_s"],
        pipeline_bubble=bubble_s,
        dp_comm_exposed=dp_exposed_s + m * slowest["sharded_dp_exposed_s"],
        optimizer=optimizer_s,
        other=per_step_overhead_s + m * slowest["overhead_s"],
    )


def finite_or_none(value: float) -> float | None:
    """``value`` as a float, or None when it is None, NaN or infinite."""
    return None if value is None or not math.isfinite(value) else float(value)


def explain_homogeneous(
    model: ModelSpec,
    training: TrainingSpec,
    group: NodeGroup,
    plan: Plan,
    ctx: ModelContext,
    result: HomogeneousResult,
) -> Estimate:
    """The explained ``Estimate`` of one homogeneous plan from its 1-plan evaluation (``result``:
    arrays of shape ``(1,)``), with goodput, warnings and notes."""
    homogeneous_goodput(
        result.arrays,
        group.gpus_per_node,
        group.reliability_or_default,
        training.checkpoint,
        training.train_tokens,
    )
    goodput = goodput_estimate(result.arrays, 0)
    arrays = {name: values[0] for name, values in result.arrays.items()}
    gpu = resolve_gpu(group.gpu)
    kinds = _kinds(result.stages)  # first, middle, last
    slowest = kinds[int(arrays["slowest_kind"])]
    microbatches = float(result.microbatches[0])
    breakdown = time_breakdown(
        slowest,
        microbatches,
        float(arrays["bubble_s"]),
        float(arrays["dp_comm_exposed_s"]),
        float(arrays["optimizer_s"]),
        ctx.params.per_step_overhead_s,
    )
    per_stage = []
    first, middle, last = (
        int(arrays[f"{part}_stage_layers"]) for part in ("first", "middle", "last")
    )
    split = (first, middle, last)
    valid = split[0] > 0
    counts = stage_layer_counts(model.num_layers, plan.pp, split) if valid else None
    layers = split[1] if valid else model.num_layers / plan.pp
    # Middle stages differ only in how many micro-batches they hold in flight (one call for all).
    held_by_stage = inflight_layers(
        plan.pp,
        plan.vpp,
        np.arange(plan.pp, dtype=float),
        microbatches,
        layers,
        int(plan.schedule == "gpipe"),
    ).tolist()
    for index in range(plan.pp):
        kind = kinds[0] if index == 0 else kinds[2] if index == plan.pp - 1 else kinds[1]
        if 0 < index < plan.pp - 1:
            held = float(held_by_stage[index])
            scale = held / kind["inflight_layers"] if kind["inflight_layers"] else 1.0
            extra = kind["inflight_activations_gib"] * (scale - 1.0)
            kind = {**kind, "activations_gib": kind["activations_gib"] + extra}
        memory = memory_of(kind)
        per_stage.append(
            StageEstimate(
                stage=index,
                group=group.name,
                gpu=gpu.name,
                num_layers=counts[index] if counts else model.num_layers // plan.pp,
                tp=plan.tp,
                dp=plan.dp,
                time_per_microbatch_s=sum(kind[name] for name in _PER_MICROBATCH_PARTS),
                forward_s=kind["forward_s"],
                backward_s=kind["backward_s"] + kind["recompute_s"],
                memory_gib=memory,
                peak_memory_gib=memory.total,
                capacity_gib=float(arrays["capacity_gib"]),
            )
        )
    worst = max(per_stage, key=lambda stage: stage.peak_memory_gib)
    violations = int(arrays["violations"])
    facts: dict[str, float | int | str] = {
        "needed": plan.dp * plan.tp * plan.pp * plan.cp,
        "group": group.name,
        "available": group.num_gpus,
        "tp": plan.tp,
        "heads": model.num_attention_heads,
        "kv_heads": model.kv_heads,
        "ffn": model.ffn_size
        if model.moe is None
        else f"{model.ffn_size}/{model.moe.expert_ffn_hidden_size}",
        "split_rule": describe_rule(model.num_layers, plan.pp, plan.vpp),
        "layers": model.num_layers,
        "ep": plan.ep,
        "experts": model.moe.num_experts if model.moe else 0,
        "dp_cp": plan.dp * plan.cp,
        "etp": plan.etp or plan.tp,
        "tp_cp_dp": plan.tp * plan.cp * plan.dp,
        "gbs": training.global_batch_size,
        "dp_mbs": plan.dp * plan.micro_batch_size,
        "vpp": plan.vpp,
        "pp": plan.pp,
        "microbatches": training.global_batch_size // (plan.dp * plan.micro_batch_size),
        "cp": plan.cp,
        "seq": training.seq_length,
        "worst_stage": worst.stage,
        "peak_gib": worst.peak_memory_gib,
        "gpu": gpu.name,
        "capacity_gib": float(arrays["capacity_gib"]),
        "precision": training.precision,
    }
    columns = plan_arrays(plan)
    facts["framework"] = training.framework
    facts["framework_why"] = "; ".join(why_not(training.framework, columns))
    tokens_per_s = float(arrays["tokens_per_s"])
    usd_per_hour = finite_or_none(float(arrays["usd_per_hour"]))
    total, active = parameter_counts(model)
    return Estimate(
        feasible=violations == 0,
        reasons=describe(violations, facts),
        num_gpus=int(arrays["num_gpus"]),
        step_time_s=float(arrays["step_time_s"]),
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=float(arrays["tokens_per_s_per_gpu"]),
        model_tflops_per_gpu=float(arrays["mfu"]) * mfu_peak_tflops(gpu, training.precision),
        mfu=float(arrays["mfu"]),
        hfu=float(arrays["hfu"]),
        peak_memory_gib=worst.peak_memory_gib,
        memory_gib=worst.memory_gib,
        per_stage=per_stage,
        time_breakdown_s=breakdown,
        usd_per_hour=usd_per_hour,
        usd_per_million_tokens=finite_or_none(float(arrays["usd_per_million_tokens"])),
        time_to_train_s=finite_or_none(float(arrays["time_to_train_s"])),
        effective_tokens_per_s=float(arrays["effective_tokens_per_s"]),
        usd_to_train=finite_or_none(float(arrays["usd_to_train"])),
        goodput=goodput,
        total_params=total,
        active_params=active,
        warnings=homogeneous_warnings(model, group, plan)
        + goodput_warnings(goodput, training.checkpoint.strategy),
        framework=training.framework,
        launchable_by=launchable_by(columns),
        idle_gpus=int(arrays["idle_gpus"]),
    )
