"""Cost-model speed: scalar ``estimate`` latency and vectorized ``estimate_many`` throughput.

Run with ``make bench``. Pins numpy to one thread so the vectorized figure is per core.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import time

import numpy as np

from costmodel import ClusterSpec, ModelSpec, Plan, TrainingSpec, estimate, estimate_many
from costmodel.catalog import load_cluster_preset, load_model_preset


def main() -> None:
    model: ModelSpec = load_model_preset("gpt3-175b")
    cluster: ClusterSpec = load_cluster_preset("dgx-h100-128n")
    training = TrainingSpec(seq_length=2048, global_batch_size=1536, train_tokens=300e9)
    plan = Plan(dp=16, tp=8, pp=8, vpp=2, micro_batch_size=1, zero_stage=1, recompute="selective")

    for _ in range(50):
        estimate(model, training, cluster, plan)
    # Median of 7 repetitions: the figure is robust to other processes sharing the machine.
    calls, repetitions = 300, 7
    samples = []
    for _ in range(repetitions):
        start = time.perf_counter()
        for _ in range(calls):
            estimate(model, training, cluster, plan)
        samples.append((time.perf_counter() - start) / calls * 1e3)
    scalar_ms = float(np.median(samples))

    rng = np.random.default_rng(0)
    size = 1_000_000
    plans = {
        "dp": rng.choice([1, 2, 4, 8, 16, 32, 64, 128], size),
        "tp": rng.choice([1, 2, 4, 8], size),
        "pp": rng.choice([1, 2, 4, 8, 16], size),
        "vpp": rng.choice([1, 2], size),
        "micro_batch_size": rng.choice([1, 2, 4], size),
        "zero_stage": rng.integers(0, 4, size),
        "recompute": rng.integers(0, 3, size),
    }
    plans["vpp"] = np.where(plans["pp"] == 1, 1, plans["vpp"])
    estimate_many(model, training, cluster, {k: v[:1000] for k, v in plans.items()})
    start = time.perf_counter()
    result = estimate_many(model, training, cluster, plans)
    vector_s = time.perf_counter() - start

    print(
        f"scalar estimate:     {scalar_ms:.3f} ms per plan (median of {repetitions} x {calls} "
        f"calls, GPT-3 175B tp8 pp8 vpp2 on {cluster.num_gpus} H100)"
    )
    print(
        f"vectorized estimate: {size / vector_s:,.0f} plans/s ({size:,} homogeneous plans in "
        f"{vector_s:.2f} s, one core; {int(result['feasible'].sum()):,} feasible)"
    )


if __name__ == "__main__":
    main()
