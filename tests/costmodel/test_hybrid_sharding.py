"""Hybrid sharding (HSDP / MiCS): states sharded over dp_shard ranks, shards replicated."""

import pytest
from pydantic import ValidationError

from costmodel import estimate
from costmodel.catalog import load_preset
from costmodel.params import EfficiencyParams

MODEL = load_preset("model", "llama3-8b")
TRAINING = load_preset("training", "llama3-8k")
CLUSTER = load_preset("cluster", "dgx-h100-16n")
PARAMS = EfficiencyParams()
FSDP = {"dp": 128, "tp": 1, "pp": 1, "micro_batch_size": 1, "zero_stage": 3}


def test_states_shard_over_the_shard_group_only():
    full = estimate(MODEL, TRAINING, CLUSTER, FSDP, params=PARAMS)
    hybrid = estimate(MODEL, TRAINING, CLUSTER, {**FSDP, "dp_shard": 8}, params=PARAMS)
    ratio = hybrid.memory_gib.optimizer_states / full.memory_gib.optimizer_states
    assert ratio == pytest.approx(128 / 8)
    assert hybrid.memory_gib.parameters == pytest.approx(16 * full.memory_gib.parameters)


def test_shards_are_all_reduced_across_replicas():
    """dp_shard 8 keeps the per-micro-batch gathers inside a node, but each shard's gradients
    (8B x 4 B / 8 = 4 GB) are still all-reduced across the 16 nodes' replicas every step."""
    hybrid = {**FSDP, "dp_shard": 8, "overlap_grad_reduce": False}
    fast = estimate(MODEL, TRAINING, CLUSTER, hybrid, params=PARAMS)
    slow_links = EfficiencyParams(inter_node_efficiency=0.01)
    slow = estimate(MODEL, TRAINING, CLUSTER, hybrid, params=slow_links)
    # Each GPU all-reduces its 4 GB shard with its 15 peers over its own NIC (rail-optimized):
    # 2 x 15/16 x 4 GB at 1% of 50 GB/s = 15 s more than with healthy links.
    assert slow.time_breakdown_s.dp_comm_exposed - fast.time_breakdown_s.dp_comm_exposed > 10.0
    assert slow.time_breakdown_s.compute == pytest.approx(fast.time_breakdown_s.compute)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({**FSDP, "dp_shard": 7}, "dp_shard 7 must divide dp x cp = 128"),
        ({**FSDP, "zero_stage": 0, "dp_shard": 8}, "dp_shard needs zero_stage >= 1"),
    ],
)
def test_bad_shard_sizes_are_refused(plan: dict, message: str):
    with pytest.raises(ValidationError, match=message):
        estimate(MODEL, TRAINING, CLUSTER, plan)
