"""Knobs a search would exploit if they were priced too cheaply: each test fails on a model that
prices the knob's cost at zero (as the model once did for each of them)."""

import pytest

from costmodel import estimate
from costmodel.catalog import load_preset
from costmodel.params import EfficiencyParams

LLAMA70 = load_preset("model", "llama3-70b")
LLAMA8 = load_preset("model", "llama3-8b")
TRAINING = load_preset("training", "llama3-8k")
H100_16N = load_preset("cluster", "dgx-h100-16n")
# Identical, neutral-efficiency parameters for both sides of each comparison.
PARAMS = EfficiencyParams()


def _price(model, plan: dict, params: EfficiencyParams = PARAMS):
    result = estimate(model, TRAINING, H100_16N, plan, params=params)
    assert result.step_time_s is not None, result.reasons
    return result


def test_zero2_reduce_scatters_gradients_every_microbatch():
    """ZeRO-2 keeps only a gradient shard, so gradient accumulation reduce-scatters after every
    micro-batch; ZeRO-1 once per step. Same memory saving for free would make ZeRO-2 win."""
    base = {"dp": 16, "tp": 8, "pp": 1, "micro_batch_size": 1, "recompute": "full"}
    zero1 = _price(LLAMA70, {**base, "zero_stage": 1})
    zero2 = _price(LLAMA70, {**base, "zero_stage": 2})
    microbatches = TRAINING.global_batch_size // 16
    assert microbatches > 1
    assert zero2.memory_gib.gradients < zero1.memory_gib.gradients
    assert zero2.time_breakdown_s.dp_comm_exposed > zero1.time_breakdown_s.dp_comm_exposed
    assert zero2.step_time_s > zero1.step_time_s


def test_zero2_equals_zero1_traffic_without_accumulation():
    """With one micro-batch per step both reduce-scatter once: the per-micro-batch cost of
    ZeRO-2 comes from accumulation, not from a different volume."""
    training = TRAINING.model_copy(update={"global_batch_size": 16})
    base = {"dp": 16, "tp": 8, "pp": 1, "micro_batch_size": 1, "recompute": "full"}
    zero1 = estimate(LLAMA70, training, H100_16N, {**base, "zero_stage": 1}, params=PARAMS)
    zero2 = estimate(LLAMA70, training, H100_16N, {**base, "zero_stage": 2}, params=PARAMS)
    ratio = zero2.time_breakdown_s.dp_comm_exposed / zero1.time_breakdown_s.dp_comm_exposed
    assert ratio < 1.5


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_context_parallel_exchange_is_never_free(cp: int):
    """Ring attention's K/V passes cost time even when they hide behind the attention core."""
    result = _price(LLAMA8, {"dp": 128 // cp, "tp": 1, "pp": 1, "cp": cp, "micro_batch_size": 1})
    assert result.time_breakdown_s.cp_comm > 0


def test_context_parallel_does_not_tie_with_data_parallel():
    """cp 4 x mbs 4 holds the same tokens per GPU as dp x mbs 1; the ring exchange must make it
    slower, not an exact tie."""
    dp_plan = _price(LLAMA8, {"dp": 128, "tp": 1, "pp": 1, "micro_batch_size": 1, "zero_stage": 1})
    cp_plan = _price(
        LLAMA8, {"dp": 32, "tp": 1, "pp": 1, "cp": 4, "micro_batch_size": 4, "zero_stage": 1}
    )
    assert cp_plan.tokens_per_s < dp_plan.tokens_per_s


def test_tp_comm_overlap_pays_interference():
    """Overlapped TP collectives slow the GEMMs they run beside: hiding 100% of them must still
    leave the interference share on the critical path."""
    params = EfficiencyParams(tp_comm_overlap_fraction=1.0)
    plan = {"dp": 16, "tp": 8, "pp": 1, "micro_batch_size": 1, "zero_stage": 1}
    plain = _price(LLAMA70, plan, params)
    overlapped = _price(LLAMA70, {**plan, "tp_comm_overlap": True}, params)
    assert overlapped.time_breakdown_s.tp_comm > 0
    assert overlapped.time_breakdown_s.tp_comm < plain.time_breakdown_s.tp_comm


def test_fsdp_collectives_are_issued_per_layer():
    """FSDP gathers and reduce-scatters one layer at a time, each with its own latency: at high
    latency the per-layer count shows in the exposed DP time."""
    plan = {"dp": 128, "tp": 1, "pp": 1, "micro_batch_size": 1, "zero_stage": 3}
    fast = _price(LLAMA8, plan, EfficiencyParams(inter_node_latency_us=1.0))
    slow = _price(LLAMA8, plan, EfficiencyParams(inter_node_latency_us=1000.0))
    # Each ring crosses the network once per node (16 nodes): 16 ms per collective at 1 ms a
    # crossing, issued 3 times (2 gathers, 1 reduce-scatter) for each of 32 layers; even if all
    # but the first gather hid behind compute, the interference share would show.
    extra_s = slow.time_breakdown_s.dp_comm_exposed - fast.time_breakdown_s.dp_comm_exposed
    microbatches = TRAINING.global_batch_size // 128
    per_collective_s = 16 * (1000.0 - 1.0) * 1e-6
    floor = PARAMS.overlap_interference * 3 * 32 * per_collective_s
    assert extra_s > microbatches * floor


def test_idle_gpus_are_charged():
    """A plan on half the group is not cheaper per hour than one on all of it: the group is
    held whole, and the estimate says how many GPUs sit idle."""
    cluster = H100_16N.model_copy(
        update={"groups": [H100_16N.groups[0].model_copy(update={"price_per_gpu_hour": 2.0})]}
    )
    half = estimate(LLAMA8, TRAINING, cluster, {"dp": 64, "tp": 1, "pp": 1, "micro_batch_size": 1})
    full = estimate(LLAMA8, TRAINING, cluster, {"dp": 128, "tp": 1, "pp": 1, "micro_batch_size": 1})
    assert half.usd_per_hour == full.usd_per_hour == 128 * 2.0
    assert (half.idle_gpus, full.idle_gpus) == (64, 0)
    assert half.usd_per_million_tokens > full.usd_per_million_tokens
