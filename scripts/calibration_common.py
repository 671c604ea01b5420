"""Shared by the CPU calibration demonstrations: the plans, the cluster a profile describes,
and pricing plans with a set of efficiency parameters."""

from pathlib import Path

import numpy as np

from costmodel.api import estimate
from costmodel.observations import Profile, StepObservation
from costmodel.params import EfficiencyParams
from costmodel.specs import ClusterSpec, NodeGroup
from profiler.minigpt import GptShape, TrainPlan

SHAPE = GptShape(layers=4, hidden=256, heads=8, vocab=8192, seq_length=128)
GLOBAL_BATCH = 16
# Two "GPUs" (CPU ranks): single-device, data-parallel, pipeline and tensor-parallel layouts
# with large and small micro-batches.
PLANS = [
    TrainPlan(micro_batch_size=8),
    TrainPlan(micro_batch_size=2),
    TrainPlan(micro_batch_size=8, dp=2),
    TrainPlan(micro_batch_size=2, dp=2),
    TrainPlan(micro_batch_size=4, pp=2),
    TrainPlan(micro_batch_size=1, pp=2),
    TrainPlan(micro_batch_size=8, tp=2),
    TrainPlan(micro_batch_size=2, tp=2),
]


def cluster_of(profile: Profile) -> ClusterSpec:
    """One node whose 'GPUs' are the profiled ranks, described as the profile describes them."""
    return ClusterSpec(
        name="this-machine",
        groups=[
            NodeGroup(
                name="local",
                gpu=profile.gpu,
                num_nodes=1,
                gpus_per_node=profile.device.ranks_per_node,
            )
        ],
    )


def observation(profile: Profile, plan: TrainPlan, step_time_s: float) -> StepObservation:
    return StepObservation(
        name=plan.label,
        source="mini-GPT on this machine",
        model=SHAPE.model_spec(),
        training=SHAPE.training_spec(GLOBAL_BATCH),
        cluster=cluster_of(profile),
        plan=plan.plan_spec(),
        step_time_s=step_time_s,
    )


def predict(profile: Profile, plan: TrainPlan, params: EfficiencyParams) -> float:
    result = estimate(
        SHAPE.model_spec(),
        SHAPE.training_spec(GLOBAL_BATCH),
        cluster_of(profile),
        plan.plan_spec(),
        params=params,
    )
    return result.step_time_s


def ranks(values: list[float]) -> list[int]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0] * len(values)
    for position, index in enumerate(order):
        result[index] = position + 1
    return result


def discordant_pairs(
    measured: list[float], predicted: list[float], pairs: list[tuple[int, int]] | None = None
) -> int:
    """Plan pairs (all of them, or ``pairs``) the prediction orders differently from the
    measurement."""
    if pairs is None:
        pairs = [(i, j) for i in range(len(measured)) for j in range(i + 1, len(measured))]
    return sum(
        1 for i, j in pairs if (measured[i] - measured[j]) * (predicted[i] - predicted[j]) < 0
    )


def resolved_pairs(step_times_s: list[list[float]]) -> list[tuple[int, int]]:
    """Plan pairs whose measured order is beyond the measurement's own spread: their
    interquartile ranges of step times do not overlap. Pairs closer than that would swap
    between two measurements of the same machine, so no model can be held to their order."""
    quartiles = [(float(np.percentile(t, 25)), float(np.percentile(t, 75))) for t in step_times_s]
    pairs = []
    for i in range(len(quartiles)):
        for j in range(i + 1, len(quartiles)):
            (low_i, high_i), (low_j, high_j) = quartiles[i], quartiles[j]
            if high_i < low_j or high_j < low_i:
                pairs.append((i, j))
    return pairs


def load_average() -> str:
    """The 1-minute load average: above the ranks' own ~2, someone else shared the cores."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"
