"""Synthetic measurements for calibration tests: a small CPU-like device, a tiny GPT, plans on
two ranks, and ``measured`` to fill in the times the cost model itself predicts under known
parameters (so a fit must recover them)."""

import numpy as np

from costmodel.calibration.points import PointSet
from costmodel.observations import (
    AttentionSample,
    CollectiveSample,
    DeviceInfo,
    GemmSample,
    MemorySample,
    Profile,
    StepObservation,
)
from costmodel.params import EfficiencyParams
from costmodel.specs import ClusterSpec, GpuSpec, ModelSpec, NodeGroup, Plan, TrainingSpec

GPU = GpuSpec(
    name="cpu-test",
    bf16_tflops=0.2,
    fp32_tflops=0.1,
    hbm_gib=8,
    hbm_GBps=20,
    intra_node_GBps=5,
    gemm_efficiency=0.8,
)
TRUTH = EfficiencyParams(
    gemm_efficiency_scale=0.9,
    gemm_half_dim=96,
    attention_efficiency=0.35,
    memory_bound_efficiency=0.5,
    intra_node_efficiency=0.6,
    intra_node_latency_us=40,
    per_microbatch_overhead_s=0.002,
    per_step_overhead_s=0.02,
)
MODEL = ModelSpec(num_layers=4, hidden_size=256, num_attention_heads=8, vocab_size=8192)
CLUSTER = ClusterSpec(groups=[NodeGroup(name="cpu", gpu=GPU, num_nodes=1, gpus_per_node=2)])
PLANS = [
    Plan(dp=1, tp=1, pp=1, micro_batch_size=8),
    Plan(dp=1, tp=1, pp=1, micro_batch_size=2),
    Plan(dp=2, tp=1, pp=1, micro_batch_size=8),
    Plan(dp=2, tp=1, pp=1, micro_batch_size=2),
    Plan(dp=1, tp=1, pp=2, micro_batch_size=2),
    Plan(dp=1, tp=2, pp=1, micro_batch_size=8, sequence_parallel=False),
]
SHAPES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024)]
SHAPES += [(2048, 768, 256), (2048, 256, 1024)]


def unmeasured_profile(gpu: GpuSpec = GPU) -> Profile:
    """Sample shapes with placeholder times (filled in by ``measured``)."""
    return Profile(
        name="synthetic",
        device=DeviceInfo(name="synthetic cpu", kind="cpu", ranks=2, ranks_per_node=2),
        gpu=gpu,
        gemm=[GemmSample(m=m, n=n, k=k, dtype="fp32", median_s=1.0) for m, n, k in SHAPES],
        memory=[
            MemorySample(kernel=kernel, bytes=size, dtype="fp32", median_s=1.0)
            for kernel in ("add", "gelu")
            for size in (1e7, 1e8)
        ],
        attention=[
            AttentionSample(
                batch=2,
                heads=8,
                seq_length=seq,
                head_dim=32,
                dtype="fp32",
                direction=direction,
                median_s=1.0,
            )
            for seq in (128, 256, 512)
            for direction in ("forward", "backward")
        ],
        collectives=[
            CollectiveSample(
                op=op, size_B=size, ranks=2, ranks_per_node=2, median_s=1.0, source="gloo"
            )
            for op in ("all_reduce", "all_gather", "p2p")
            for size in (1e3, 1e5, 1e7)
        ],
    )


def observations(training: TrainingSpec | None = None) -> list[StepObservation]:
    training = training or TrainingSpec(seq_length=128, global_batch_size=16, precision="fp32")
    return [
        StepObservation(
            name=f"plan{index}",
            source="cpu runs",
            model=MODEL,
            training=training,
            cluster=CLUSTER,
            plan=plan,
            step_time_s=1.0,
        )
        for index, plan in enumerate(PLANS)
    ]


def measured(
    profiles: list[Profile],
    observed: list[StepObservation],
    params: EfficiencyParams,
    factors: list[float] | None = None,
) -> tuple[list[Profile], list[StepObservation]]:
    """The same inputs with every time replaced by the model's prediction under ``params``
    (times ``factors``: measurement noise)."""
    points = PointSet.build(profiles, observed)
    times = iter(points.predict(params, np.arange(len(points))) * (factors or 1.0))

    def timed(samples: list) -> list:
        return [s.model_copy(update={"median_s": float(next(times))}) for s in samples]

    profiles = [
        p.model_copy(
            update={
                "gemm": timed(p.gemm),
                "attention": timed(p.attention),
                "memory": timed(p.memory),
                "collectives": timed(p.collectives),
            }
        )
        for p in profiles
    ]
    observed = [o.model_copy(update={"step_time_s": float(next(times))}) for o in observed]
    return profiles, observed
