"""Each formula against its published source."""

from dataclasses import replace

import numpy as np
import pytest

from costmodel import ClusterSpec, ModelSpec, TrainingSpec, comm, estimate
from costmodel.context import ModelContext
from costmodel.flops import model_flops_per_token, total_params
from costmodel.hardware_arrays import group_hardware
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from costmodel.pipeline import schedule_from_stage_times
from costmodel.specs import NodeGroup
from costmodel.stage import StageInputs, stage_costs
from costmodel.stage.activations import layer_activation_bytes
from tests.support.stage_inputs import one_layer_inputs

GPT22B = ModelSpec(
    name="gpt-22b", num_layers=48, hidden_size=6144, num_attention_heads=64, vocab_size=51200
)
GPT3 = ModelSpec(
    name="gpt3-175b",
    num_layers=96,
    hidden_size=12288,
    num_attention_heads=96,
    vocab_size=51200,
    tie_embeddings=True,
)
S, B, H, A, T = 2048, 4, 6144, 64, 8


def _inputs(tp: int, sp: int, recompute: int) -> StageInputs:
    return one_layer_inputs(tp=tp, sp=sp, micro_batch_size=B, recompute=recompute)


@pytest.mark.parametrize(
    ("tp", "sp", "recompute", "korthikanti_bytes"),
    [
        # Korthikanti et al. 2022 Table 2, bytes per layer.
        (1, 0, 0, S * B * H * (34 + 5 * A * S / H)),
        (T, 0, 0, S * B * H * (10 + 24 / T + 5 * A * S / (H * T))),
        (T, 1, 0, S * B * H * (34 / T + 5 * A * S / (H * T))),
        (T, 0, 1, S * B * H * (10 + 24 / T)),
        (T, 1, 1, S * B * H * (34 / T)),
    ],
)
def test_activation_memory_matches_korthikanti_table_2(tp, sp, recompute, korthikanti_bytes):
    training = TrainingSpec(seq_length=S, global_batch_size=B, flash_attention=False, dropout=True)
    ctx = ModelContext.build(GPT22B, training, DEFAULT_PARAMS)
    dense = layer_activation_bytes(ctx, _inputs(tp, sp, recompute), np.array([S * B])).dense_B
    assert dense[0] == pytest.approx(korthikanti_bytes, rel=1e-12)


def test_full_recompute_keeps_only_the_layer_input():
    training = TrainingSpec(seq_length=S, global_batch_size=B, flash_attention=False, dropout=True)
    ctx = ModelContext.build(GPT22B, training, DEFAULT_PARAMS)
    checkpoint = layer_activation_bytes(ctx, _inputs(1, 0, 2), np.array([S * B])).checkpoint_B
    assert checkpoint[0] == pytest.approx(2 * S * B * H)  # Table 2: sbh * 2


def test_model_flops_match_narayanan_equation_3_without_recompute():
    # Eq. 3 counts 96 B s l h^2 (1 + s/6h + V/16lh) with recompute (4 passes); model FLOPs
    # per token are the 3-pass part: 72 l h^2 (1 + s/6h) + 6 h V.
    layers, h, s, v = 96, 12288, 2048, 51200
    expected = 72 * layers * h**2 * (1 + s / (6 * h)) + 6 * h * v
    assert model_flops_per_token(GPT3, s) == pytest.approx(expected, rel=1e-12)
    # Narayanan Eq. 2: P = 12 l h^2 (1 + 13/12h + (V + s)/12lh); we omit biases and learned
    # position embeddings, so agree to within those terms (< 0.1%).
    assert total_params(GPT3) == pytest.approx(
        12 * layers * h**2 * (1 + v / (12 * layers * h)), rel=1e-3
    )


def test_collectives_use_nccl_bus_bandwidth_factors():
    size, n, busbw = 1e9, 8, 100e9
    assert comm.all_reduce_s(size, n, busbw, 0.0) == pytest.approx(2 * 7 / 8 * size / busbw)
    assert comm.all_gather_s(size, n, busbw, 0.0) == pytest.approx(7 / 8 * size / busbw)
    assert comm.all_reduce_s(size, 1, busbw, 1.0) == 0.0
    # Groups that span nodes run at local x NIC bandwidth, capped by the node's links.
    assert comm.bus_bandwidth_Bps(16, 8, 300e9, 25e9) == pytest.approx(200e9)
    assert comm.bus_bandwidth_Bps(16, 1, 300e9, 25e9) == pytest.approx(25e9)
    assert comm.bus_bandwidth_Bps(8, 8, 300e9, 25e9) == pytest.approx(300e9)


def test_pipeline_schedule_reduces_to_narayanan_bubble():
    t, p, m = 1.0, 8, 32
    total, _ = schedule_from_stage_times(p * t, t, m, 1)
    assert total == pytest.approx((m + p - 1) * t)
    _, interleaved = schedule_from_stage_times(p * t, t, m, 4)
    assert interleaved == pytest.approx((p - 1) * t / 4)
    # Unequal stages: the slowest stage sets the pace.
    total, _ = schedule_from_stage_times(1 + 2 + 1, 2.0, 10, 1)
    assert total == pytest.approx(10 * 2 + 2)


def _cluster(gpu: str = "A100-80GB", nodes: int = 16) -> ClusterSpec:
    return ClusterSpec(groups=[{"name": "g", "gpu": gpu, "num_nodes": nodes}])


def test_zero_stages_shard_states_as_rajbhandari():
    training = TrainingSpec(seq_length=2048, global_batch_size=64, precision="fp16")
    base = {"dp": 64, "tp": 1, "pp": 1, "micro_batch_size": 1, "recompute": "full"}
    params_b = total_params(GPT22B) / 1024**3
    stages = {
        z: estimate(GPT22B, training, _cluster(), {**base, "zero_stage": z}) for z in range(4)
    }
    zero0 = stages[0].memory_gib
    assert zero0.parameters == pytest.approx(2 * params_b, rel=1e-6)
    assert zero0.gradients == pytest.approx(2 * params_b, rel=1e-6)
    assert zero0.optimizer_states == pytest.approx(12 * params_b, rel=1e-6)
    assert stages[1].memory_gib.optimizer_states == pytest.approx(12 * params_b / 64, rel=1e-6)
    assert stages[2].memory_gib.gradients == pytest.approx(2 * params_b / 64, rel=1e-6)
    assert stages[3].memory_gib.parameters == pytest.approx(2 * params_b / 64, rel=1e-6)


def test_offloading_the_optimizer_frees_its_memory_and_costs_time():
    training = TrainingSpec(seq_length=2048, global_batch_size=64)
    plan = {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1, "recompute": "full"}
    kept = estimate(GPT22B, training, _cluster(nodes=8), plan)
    offloaded = estimate(GPT22B, training, _cluster(nodes=8), {**plan, "offload_optimizer": True})
    assert offloaded.memory_gib.optimizer_states == 0.0
    assert offloaded.time_breakdown_s.optimizer > kept.time_breakdown_s.optimizer


def test_infeasible_plans_list_every_violated_rule():
    training = TrainingSpec(seq_length=2048, global_batch_size=100)
    result = estimate(
        GPT22B,
        training,
        _cluster(nodes=1),
        {"dp": 8, "tp": 3, "pp": 50, "micro_batch_size": 1},
    )
    assert not result.feasible
    text = " | ".join(result.reasons)
    for fragment in (
        "needs dp*tp*pp*cp = 1200 GPUs",
        "tp=3 does not divide num_attention_heads",
        "no split of num_layers=48 over pp=50 stages",
        "global_batch_size=100",
    ):
        assert fragment in text


def test_out_of_memory_is_reported_with_numbers():
    training = TrainingSpec(seq_length=2048, global_batch_size=8)
    result = estimate(
        GPT3, training, _cluster(nodes=1), {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 1}
    )
    assert not result.feasible
    assert any(reason.startswith("out of memory: stage 0 needs") for reason in result.reasons)
    assert result.peak_memory_gib > 80


def test_bigger_gpus_and_more_tensor_parallel_bandwidth_help():
    training = TrainingSpec(seq_length=2048, global_batch_size=512)
    plan = {"dp": 16, "tp": 8, "pp": 1, "micro_batch_size": 1, "recompute": "selective"}
    a100 = estimate(GPT22B, training, _cluster("A100-80GB"), plan)
    h100 = estimate(GPT22B, training, _cluster("H100-80GB"), plan)
    assert h100.step_time_s < a100.step_time_s
    # tp spanning nodes (16 > 8 GPUs per node) is slower than tp inside a node.
    across = estimate(GPT22B, training, _cluster("A100-80GB"), {**plan, "tp": 16, "dp": 8})
    assert across.time_breakdown_s.tp_comm > a100.time_breakdown_s.tp_comm


def test_each_collective_scale_prices_only_its_own_op():
    """Per-collective scales multiply all-reduce's bus bandwidth (and per-step latency) where
    that op runs, and nowhere else; at 1.0 every op is priced as before they existed."""
    training = TrainingSpec(seq_length=S, global_batch_size=B)
    ctx = ModelContext.build(GPT22B, training, DEFAULT_PARAMS)
    hw = group_hardware(NodeGroup(name="g", gpu="A100-80GB", num_nodes=1), "bf16", DEFAULT_PARAMS)
    base = replace(_inputs(T, 0, 0), dp=2 * np.ones(1), pp=2 * np.ones(1), pp_Bps=hw.intra_Bps)
    base = replace(base, pp_latency_s=np.full(1, 5e-6))

    def costs(inputs: StageInputs, hardware=hw, **scales: float):
        return stage_costs(
            ModelContext.build(GPT22B, training, EfficiencyParams(**scales)), inputs, hardware
        )

    reference = costs(base)
    assert reference.tp_comm_s == stage_costs(ctx, base, hw).tp_comm_s
    # Point-to-point: the pipeline sends, and only they.
    p2p = costs(base, p2p_bandwidth_scale=0.5, p2p_latency_scale=2.0)
    boundary_B = B * S * H * 2 / T
    expected = 2 * (boundary_B / (0.5 * hw.intra_Bps[0]) + 2 * 5e-6)
    assert p2p.pp_comm_s[0] == pytest.approx(expected, rel=1e-12)
    assert p2p.tp_comm_s == reference.tp_comm_s and p2p.dp_comm_s == reference.dp_comm_s
    # Sequence parallelism swaps each all-reduce for reduce-scatter + all-gather: at half
    # all-reduce's bandwidth both, TP traffic costs what it would on links half as fast.
    sp = replace(base, sequence_parallel=np.array([1]))
    halved = costs(sp, reduce_scatter_bandwidth_scale=0.5, all_gather_bandwidth_scale=0.5)
    slow_links = replace(hw, intra_Bps=hw.intra_Bps / 2, inter_Bps=hw.inter_Bps / 2)
    assert halved.tp_comm_s[0] == pytest.approx(costs(sp, slow_links).tp_comm_s[0], rel=1e-12)
    assert costs(base, all_gather_bandwidth_scale=0.5).tp_comm_s == reference.tp_comm_s
    # ZeRO-1 reduce-scatters gradients and all-gathers weights; ZeRO-0 all-reduces.
    zero1 = replace(base, zero_stage=np.array([1]))
    assert costs(zero1, all_gather_bandwidth_scale=0.5).dp_comm_s > costs(zero1).dp_comm_s
    assert costs(base, all_gather_bandwidth_scale=0.5).dp_comm_s == reference.dp_comm_s
