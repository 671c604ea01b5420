"""Public entry points of the cost model: ``estimate`` (one plan, explained) and
``estimate_many`` (arrays of homogeneous plans, for search)."""

from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel

from costmodel.context import ModelContext
from costmodel.explain import explain_homogeneous
from costmodel.goodput import homogeneous_goodput
from costmodel.gpu_defaults import default_params
from costmodel.hardware import precision_gap, resolve_gpu
from costmodel.heterogeneous import estimate_heterogeneous
from costmodel.homogeneous import evaluate_homogeneous, plan_arrays
from costmodel.params import EfficiencyParams
from costmodel.specs import ClusterSpec, Estimate, ModelSpec, NodeGroup, Plan, TrainingSpec

SpecT = TypeVar("SpecT", bound=BaseModel)
_CHUNK = 16_384


def _as(kind: type[SpecT], value: SpecT | Mapping[str, Any]) -> SpecT:
    return value if isinstance(value, kind) else kind.model_validate(value)


def _group(cluster: ClusterSpec, name: str | None) -> NodeGroup:
    if name is None:
        return cluster.groups[0]
    try:
        return cluster.group(name)
    except KeyError:
        names = ", ".join(group.name for group in cluster.groups)
        raise ValueError(f"plan.group: unknown node group '{name}'; cluster has: {names}") from None


def _check_timeable(cluster: ClusterSpec, plan: Plan, precision: str) -> None:
    """A plan on a GPU that lacks the training precision has no step time at all (its times
    would be infinite or NaN): that is an error naming the GPU, not an infeasible estimate."""
    if plan.stages is None:
        names = {_group(cluster, plan.group).name}
    else:
        names = {
            name
            for stage in plan.stages
            for name in (
                [stage.group or ""] if stage.replicas is None else [r.group for r in stage.replicas]
            )
        }
    for index, group in enumerate(cluster.groups):
        gap = precision_gap(resolve_gpu(group.gpu), precision) if group.name in names else None
        if gap is not None:
            raise ValueError(f"cluster.groups[{index}].gpu: {gap}")


def estimate(
    model: ModelSpec | Mapping[str, Any],
    training: TrainingSpec | Mapping[str, Any],
    cluster: ClusterSpec | Mapping[str, Any],
    plan: Plan | Mapping[str, Any],
    *,
    params: EfficiencyParams | None = None,
) -> Estimate:
    """Price one plan (homogeneous or heterogeneous) with every breakdown.

    Without ``params`` (a calibration), each node group is priced with its own GPU's defaults
    (``costmodel.gpu_defaults.default_params``: fitted from published micro-benchmarks); with
    them, every group uses ``params``.

    Raises ``pydantic.ValidationError`` for malformed specs and ``ValueError`` for a plan that
    references something the cluster lacks (unknown group or GPU, or a GPU without the training
    precision: ``cluster.groups[i].gpu: V100-32GB has no BF16 tensor throughput; use fp16 ...``,
    since such a plan has no step time); returns an Estimate with
    ``feasible=False`` and ``reasons`` for plans that are well-formed but cannot run.
    """
    model = _as(ModelSpec, model)
    training = _as(TrainingSpec, training)
    cluster = _as(ClusterSpec, cluster)
    plan = _as(Plan, plan)
    _check_timeable(cluster, plan, training.precision)
    if plan.stages is not None:
        return estimate_heterogeneous(model, training, cluster, plan, params=params)
    group = _group(cluster, plan.group)
    ctx = ModelContext.build(model, training, params or default_params(group.gpu))
    result = evaluate_homogeneous(model, ctx, group, plan_arrays(plan), normalized=True)
    return explain_homogeneous(model, training, group, plan, ctx, result)


def estimate_many(
    model: ModelSpec | Mapping[str, Any],
    training: TrainingSpec | Mapping[str, Any],
    cluster: ClusterSpec | Mapping[str, Any],
    plans: Mapping[str, Any],
    *,
    group: str | None = None,
    params: EfficiencyParams | None = None,
    goodput: bool = True,
) -> dict[str, np.ndarray]:
    """Price N homogeneous plans at once (one numpy pass, no per-plan Python loop).

    ``plans`` maps Plan field names to arrays of shape ``(n_plans,)`` (a scalar applies to every
    plan): dp, tp, pp, micro_batch_size (required) and cp, ep, vpp, zero_stage, recompute (codes
    0 none / 1 selective / 2 full, or strings), sequence_parallel (default tp > 1),
    offload_optimizer, overlap_grad_reduce, tp_comm_overlap, schedule (0 1f1b / 1 gpipe)
    (optional, Plan defaults). All plans run on
    node group ``group`` (default: the first), priced with ``params`` or, without them, that
    group's GPU defaults (``costmodel.gpu_defaults.default_params``).

    Returns arrays of shape ``(n_plans,)``: feasible (bool), violations (bitmask of
    ``costmodel.feasibility.Violation``), num_gpus, microbatches, step_time_s, tokens_per_s,
    tokens_per_s_per_gpu, peak_memory_gib, capacity_gib, mfu, hfu, usd_per_hour and
    usd_per_million_tokens (NaN without a price), the step-time parts pipeline_s, bubble_s,
    dp_comm_exposed_s, optimizer_s, and goodput (``costmodel.goodput``): goodput,
    effective_tokens_per_s, checkpoint_interval_s, checkpoint_gib_per_gpu,
    checkpoint_total_gib, interruptions and time_to_train_s (NaN without train_tokens),
    usd_to_train and usd_per_million_effective_tokens (NaN without a price), with the
    breakdown as ``goodput_*``. With ``goodput=False`` those are left out (the checkpoint sizes
    stay): a fifth of the time, for callers that rank by throughput, memory or $ per token.
    """
    model = _as(ModelSpec, model)
    training = _as(TrainingSpec, training)
    cluster = _as(ClusterSpec, cluster)
    node_group = _group(cluster, group)
    ctx = ModelContext.build(model, training, params or default_params(node_group.gpu))
    size = len(np.atleast_1d(plans["dp"])) if "dp" in plans else 0
    if size <= _CHUNK:
        arrays = dict(evaluate_homogeneous(model, ctx, node_group, plans).arrays)
    else:
        # Chunks keep the working set in cache: ~3x faster than one pass over 1M plans.
        columns = {name: np.asarray(values) for name, values in plans.items()}
        parts = [
            evaluate_homogeneous(
                model,
                ctx,
                node_group,
                {
                    name: values[start : start + _CHUNK] if values.ndim else values
                    for name, values in columns.items()
                },
            ).arrays
            for start in range(0, size, _CHUNK)
        ]
        arrays = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
    if not goodput:
        return arrays
    homogeneous_goodput(
        arrays,
        node_group.gpus_per_node,
        node_group.reliability_or_default,
        training.checkpoint,
        training.train_tokens,
    )
    return arrays
