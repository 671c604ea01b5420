"""MoE parallel folding (Liu et al. 2024; Megatron-Core --expert-tensor-parallel-size): expert
groups span tensor, context and data ranks with their own expert tensor-parallel size."""

import numpy as np
import pytest

from costmodel import estimate, estimate_many
from search import SearchRequest, run_search

# Qwen3-235B-A22B (config.json: 94 layers, hidden 4096, 64 heads, 4 KV heads of 128, 128 experts,
# top-8, expert FFN 1536).
QWEN3_235B = {
    "name": "qwen3-235b-a22b", "num_layers": 94, "hidden_size": 4096,
    "num_attention_heads": 64, "num_kv_heads": 4, "head_dim": 128, "ffn_hidden_size": 12288,
    "vocab_size": 151936, "activation": "swiglu",
    "moe": {"num_experts": 128, "top_k": 8, "expert_ffn_hidden_size": 1536},
}  # fmt: skip
TRAINING = {"seq_length": 4096, "global_batch_size": 1024}
H100_256 = {"name": "h100x256", "groups": [{"name": "h100", "gpu": "H100-80GB", "num_nodes": 32}]}
FOLDED = {"dp": 16, "tp": 2, "pp": 8, "ep": 32, "etp": 1, "micro_batch_size": 1,
          "zero_stage": 1, "recompute": "full"}  # fmt: skip


def test_megatrons_recommended_qwen3_layout_prices():
    """TP2 PP8 EP32 on 256 H100: ep 32 > dp 16, the experts fold over the TP ranks."""
    result = estimate(QWEN3_235B, TRAINING, H100_256, FOLDED)
    assert result.feasible, result.reasons


def test_folding_needs_the_expert_ranks_to_tile_the_attention_ranks():
    result = estimate(QWEN3_235B, TRAINING, H100_256, {**FOLDED, "etp": 2})
    assert not result.feasible
    assert any("ep x etp = 32 x 2 must divide tp x cp x dp = 32" in r for r in result.reasons)


def test_unsharded_experts_hold_more_expert_weights():
    """etp 1 keeps each expert whole on its rank (E/ep experts of full width), etp = tp halves
    the width: per-GPU expert parameters grow."""
    base = {**FOLDED, "ep": 16}
    whole = estimate(QWEN3_235B, TRAINING, H100_256, base)
    sharded = estimate(QWEN3_235B, TRAINING, H100_256, {**base, "etp": 2})
    assert whole.memory_gib.parameters > sharded.memory_gib.parameters


def test_faces_agree_on_folded_plans():
    plans = {key: np.array([value] * 2) for key, value in FOLDED.items() if key != "recompute"}
    plans["etp"] = np.array([1, 2])
    plans["ep"] = np.array([32, 16])
    plans["recompute"] = np.array([2, 2])
    many = estimate_many(QWEN3_235B, TRAINING, H100_256, plans)
    for i in range(2):
        plan = {**FOLDED, "etp": int(plans["etp"][i]), "ep": int(plans["ep"][i])}
        one = estimate(QWEN3_235B, TRAINING, H100_256, plan)
        assert one.step_time_s == pytest.approx(many["step_time_s"][i], rel=1e-12)
        assert one.peak_memory_gib == pytest.approx(many["peak_memory_gib"][i], rel=1e-12)


def test_the_search_explores_folded_layouts():
    request = SearchRequest(
        model=QWEN3_235B, training=TRAINING, cluster=H100_256,
        constraints={"tp": 2, "pp": 8, "dp": 16, "ep": 32}, top_k=3,
    )  # fmt: skip
    result = run_search(request)
    assert result.plans, "a folded layout exists and fits"
    assert {ranked.plan.etp for ranked in result.plans} == {1}


def test_token_dropping_prices_capacity_sized_experts():
    """A capacity factor pads every expert to capacity: 2.0 costs more expert time than the
    dropless default's 1.25 pace, 1.0 less."""
    plan = {**FOLDED, "ep": 16, "etp": None}
    times = {}
    for factor in (None, 1.0, 2.0):
        training = {**TRAINING, "moe_capacity_factor": factor}
        result = estimate(QWEN3_235B, training, H100_256, {k: v for k, v in plan.items() if v})
        times[factor] = result.time_breakdown_s.compute + result.time_breakdown_s.ep_comm
    assert times[1.0] < times[None] < times[2.0]
