"""Shared by the CPU calibration demonstrations: the plans, the cluster a profile describes,
and pricing plans with a set of efficiency parameters."""

from app.profiling.minigpt import GptShape, TrainPlan
from costmodel.api import estimate
from costmodel.observations import Profile, StepObservation
from costmodel.params import EfficiencyParams
from costmodel.specs import ClusterSpec, NodeGroup

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


def discordant_pairs(measured: list[float], predicted: list[float]) -> int:
    """Plan pairs the prediction orders differently from the measurement."""
    count = 0
    for i in range(len(measured)):
        for j in range(i + 1, len(measured)):
            if (measured[i] - measured[j]) * (predicted[i] - predicted[j]) < 0:
                count += 1
    return count
