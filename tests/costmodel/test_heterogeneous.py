"""Heterogeneous plans: stages on different GPU types, zones and replicas."""

import pytest

from costmodel import ClusterSpec, ModelSpec, TrainingSpec, estimate

LLAMA70B = ModelSpec(
    name="llama3-70b",
    num_layers=80,
    hidden_size=8192,
    num_attention_heads=64,
    num_kv_heads=8,
    ffn_hidden_size=28672,
    vocab_size=128256,
    activation="swiglu",
)
TRAINING = TrainingSpec(seq_length=4096, global_batch_size=256)


def cluster(link_GBps: float = 12.5) -> ClusterSpec:
    return ClusterSpec(
        groups=[
            {
                "name": "h100",
                "gpu": "H100-80GB",
                "num_nodes": 16,
                "zone": "east",
                "price_per_gpu_hour": 3.0,
            },
            {
                "name": "a100",
                "gpu": "A100-80GB",
                "num_nodes": 16,
                "zone": "east",
                "price_per_gpu_hour": 1.5,
            },
            {
                "name": "a100w",
                "gpu": "A100-80GB",
                "num_nodes": 8,
                "zone": "west",
                "price_per_gpu_hour": 1.5,
            },
        ],
        zone_links=[{"zones": ["east", "west"], "bandwidth_GBps": link_GBps, "latency_ms": 20}],
    )


def staged(first: str, second: str, split: tuple[int, int] = (40, 40)) -> dict:
    return {
        "dp": 8,
        "tp": 8,
        "pp": 2,
        "micro_batch_size": 1,
        "recompute": "selective",
        "zero_stage": 1,
        "stages": [
            {"group": first, "num_layers": split[0]},
            {"group": second, "num_layers": split[1]},
        ],
    }


def test_the_slowest_stage_sets_the_pace():
    fast = estimate(LLAMA70B, TRAINING, cluster(), staged("h100", "h100"))
    mixed = estimate(LLAMA70B, TRAINING, cluster(), staged("h100", "a100"))
    slow = estimate(LLAMA70B, TRAINING, cluster(), staged("a100", "a100"))
    assert fast.feasible and mixed.feasible and slow.feasible
    assert fast.step_time_s < mixed.step_time_s <= slow.step_time_s * 1.001
    # Moving layers off the slow A100 stage onto the H100 stage balances the pipeline.
    balanced = estimate(LLAMA70B, TRAINING, cluster(), staged("h100", "a100", (48, 32)))
    assert balanced.step_time_s < mixed.step_time_s
    assert {stage.gpu for stage in mixed.per_stage} == {"H100-80GB", "A100-80GB"}


def test_crossing_a_slow_zone_link_costs_time():
    same_zone = estimate(LLAMA70B, TRAINING, cluster(), staged("h100", "a100"))
    cross_zone = estimate(LLAMA70B, TRAINING, cluster(), staged("h100", "a100w"))
    slower_link = estimate(LLAMA70B, TRAINING, cluster(1.0), staged("h100", "a100w"))
    assert same_zone.time_breakdown_s.pp_comm < cross_zone.time_breakdown_s.pp_comm
    assert cross_zone.step_time_s < slower_link.step_time_s


def test_replica_stages_split_the_batch_by_speed():
    plan = {
        "dp": 2,
        "tp": 8,
        "pp": 2,
        "micro_batch_size": 1,
        "recompute": "selective",
        "zero_stage": 1,
        "stages": [
            {
                "num_layers": 40,
                "replicas": [{"group": "h100", "tp": 8}, {"group": "a100", "tp": 8}],
            },
            {
                "num_layers": 40,
                "replicas": [{"group": "h100", "tp": 8}, {"group": "a100", "tp": 8}],
            },
        ],
    }
    by_speed = estimate(LLAMA70B, TRAINING, cluster(), plan)
    even = estimate(LLAMA70B, TRAINING, cluster(), {**plan, "batch_shares": [0.5, 0.5]})
    assert by_speed.feasible and even.feasible
    assert by_speed.step_time_s < even.step_time_s
    assert by_speed.num_gpus == 32
    # Both groups are held whole (16 nodes x 8 GPUs each): their idle GPUs are charged too.
    assert by_speed.usd_per_hour == pytest.approx(128 * 3.0 + 128 * 1.5)
    assert by_speed.idle_gpus == 256 - 32


def test_heterogeneous_rules_are_reported():
    too_many = staged("h100", "a100", (40, 30))
    result = estimate(LLAMA70B, TRAINING, cluster(), too_many)
    assert not result.feasible
    assert "stages hold 70 layers but the model has 80" in result.reasons
    overfull = estimate(LLAMA70B, TRAINING, cluster(), {**staged("h100", "h100"), "dp": 16})
    assert any("needs 256 GPUs of group 'h100' but it has 128" in r for r in overfull.reasons)


def test_unknown_group_and_missing_zone_link_are_errors():
    with pytest.raises(ValueError, match="unknown node group 'tpu'"):
        estimate(LLAMA70B, TRAINING, cluster(), staged("h100", "tpu"))
    no_link = ClusterSpec(
        groups=[
            {"name": "a", "gpu": "H100-80GB", "num_nodes": 8, "zone": "x"},
            {"name": "b", "gpu": "H100-80GB", "num_nodes": 8, "zone": "y"},
        ]
    )
    with pytest.raises(ValueError, match="no link between zones"):
        estimate(LLAMA70B, TRAINING, no_link, staged("a", "b"))


def test_heterogeneous_stages_enforce_the_homogeneous_divisibility_rules():
    odd = ModelSpec(
        name="odd",
        num_layers=8,
        hidden_size=4608,
        num_attention_heads=36,
        ffn_hidden_size=12288,
        vocab_size=32000,
    )
    training = TrainingSpec(seq_length=4096, global_batch_size=40)
    plan = {
        "dp": 1,
        "tp": 9,
        "pp": 2,
        "cp": 3,
        "vpp": 2,
        "micro_batch_size": 2,
        "stages": [{"group": "h100", "num_layers": 4}, {"group": "a100", "num_layers": 4}],
    }
    result = estimate(odd, training, cluster(), plan)
    text = " | ".join(result.reasons)
    assert not result.feasible
    assert "tp=9 does not divide the FFN width" in text
    assert "cp=3 does not divide seq_length=4096" in text
    assert "needs each pipeline's micro-batches (20) to be a multiple of pp=2" not in text
    three = {
        **plan,
        "pp": 3,
        "cp": 1,
        "tp": 4,
        "stages": [
            {"group": "h100", "num_layers": 2},
            {"group": "a100", "num_layers": 4},
            {"group": "a100", "num_layers": 2},
        ],
    }
    interleaved = estimate(odd, training, cluster(), three)
    assert any("multiple of pp=3" in reason for reason in interleaved.reasons)
