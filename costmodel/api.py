"""Public entry points of the cost model (implementation in progress)."""

from collections.abc import Mapping
from typing import Any

import numpy as np

from costmodel.params import EfficiencyParams
from costmodel.specs import ClusterSpec, Estimate, ModelSpec, Plan, TrainingSpec


def estimate(
    model: ModelSpec | Mapping[str, Any],
    training: TrainingSpec | Mapping[str, Any],
    cluster: ClusterSpec | Mapping[str, Any],
    plan: Plan | Mapping[str, Any],
    *,
    params: EfficiencyParams | None = None,
) -> Estimate:
    """Price one plan (homogeneous or heterogeneous) with every breakdown."""
    raise NotImplementedError


def estimate_many(
    model: ModelSpec | Mapping[str, Any],
    training: TrainingSpec | Mapping[str, Any],
    cluster: ClusterSpec | Mapping[str, Any],
    plans: Mapping[str, Any],
    *,
    group: str | None = None,
    params: EfficiencyParams | None = None,
) -> dict[str, np.ndarray]:
    """Price N homogeneous plans at once.

    ``plans`` maps Plan field names to equal-length arrays: dp, tp, pp, micro_batch_size
    (required) and cp, ep, vpp, zero_stage, recompute (codes 0 none / 1 selective / 2 full, or
    strings), sequence_parallel, offload_optimizer, overlap_grad_reduce, tp_comm_overlap
    (optional, Plan defaults). All plans run on node group ``group`` (default: the first).

    Returns arrays of length N: feasible (bool), step_time_s, tokens_per_s,
    tokens_per_s_per_gpu, peak_memory_gib, capacity_gib, mfu, num_gpus, usd_per_hour,
    usd_per_million_tokens and time_to_train_s (NaN where unknown), violations (int bitmask of
    ``costmodel.feasibility.Violation``).
    """
    raise NotImplementedError
