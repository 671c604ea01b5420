"""The scalar and vectorized faces of the cost model must agree plan by plan."""

import numpy as np
import pytest

from costmodel import ClusterSpec, ModelSpec, TrainingSpec, estimate, estimate_many
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from tests.support.model_specs import LLAMA_LIKE_13B

MODEL = LLAMA_LIKE_13B
MOE = ModelSpec(
    name="moe-8x",
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    ffn_hidden_size=14336,
    vocab_size=32000,
    activation="swiglu",
    moe={"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 14336},
)
TRAINING = TrainingSpec(seq_length=4096, global_batch_size=512, train_tokens=1e12)
CLUSTER = ClusterSpec(
    name="h100x256",
    groups=[{"name": "h100", "gpu": "H100-80GB", "num_nodes": 32, "price_per_gpu_hour": 2.5}],
)


def random_plans(rng: np.random.Generator, size: int) -> dict[str, np.ndarray]:
    return {
        "dp": rng.choice([1, 2, 4, 8, 16, 32], size),
        "tp": rng.choice([1, 2, 4, 8], size),
        "pp": rng.choice([1, 2, 4, 8], size),
        "cp": rng.choice([1, 2], size),
        "ep": rng.choice([1, 2], size),
        "vpp": rng.choice([1, 2], size),
        "micro_batch_size": rng.choice([1, 2, 4], size),
        "zero_stage": rng.integers(0, 4, size),
        "recompute": rng.integers(0, 3, size),
        "offload_optimizer": rng.integers(0, 2, size),
        "overlap_grad_reduce": rng.integers(0, 2, size),
        "tp_comm_overlap": rng.integers(0, 2, size),
    }


# Every per-collective scale away from neutral: the paths that apply them (sequence-parallel
# TP, ZeRO, all-to-all, pipeline and context-parallel sends) must agree between the faces too.
PER_OP = EfficiencyParams(
    all_gather_bandwidth_scale=0.8,
    all_gather_latency_scale=1.5,
    reduce_scatter_bandwidth_scale=0.6,
    reduce_scatter_latency_scale=2.0,
    all_to_all_bandwidth_scale=0.7,
    all_to_all_latency_scale=3.0,
    p2p_bandwidth_scale=1.3,
    p2p_latency_scale=0.5,
)


@pytest.mark.parametrize("params", [DEFAULT_PARAMS, PER_OP], ids=["default", "per-op"])
@pytest.mark.parametrize("model", [MODEL, MOE], ids=["dense", "moe"])
def test_scalar_and_vectorized_faces_agree_on_random_plans(
    model: ModelSpec, params: EfficiencyParams
) -> None:
    rng = np.random.default_rng(7)
    plans = random_plans(rng, 120)
    plans["vpp"] = np.where(plans["pp"] == 1, 1, plans["vpp"])
    if model.moe is None:
        plans["ep"] = np.ones(120, dtype=int)
    many = estimate_many(model, TRAINING, CLUSTER, plans, params=params)
    recompute_names = ["none", "selective", "full"]
    for i in range(120):
        plan = {name: int(values[i]) for name, values in plans.items()}
        plan["recompute"] = recompute_names[plan["recompute"]]
        for flag in ("offload_optimizer", "overlap_grad_reduce", "tp_comm_overlap"):
            plan[flag] = bool(plan[flag])
        one = estimate(model, TRAINING, CLUSTER, plan, params=params)
        assert one.feasible == bool(many["feasible"][i]), (plan, one.reasons)
        assert one.step_time_s == pytest.approx(many["step_time_s"][i], rel=1e-12)
        assert one.tokens_per_s == pytest.approx(many["tokens_per_s"][i], rel=1e-12)
        assert one.peak_memory_gib == pytest.approx(many["peak_memory_gib"][i], rel=1e-12)
        assert one.mfu == pytest.approx(many["mfu"][i], rel=1e-12)
        assert one.usd_per_million_tokens == pytest.approx(
            many["usd_per_million_tokens"][i], rel=1e-12
        )
        assert one.time_to_train_s == pytest.approx(many["time_to_train_s"][i], rel=1e-12)
        # The explained breakdown adds up to the step time.
        assert sum(one.time_breakdown_s.model_dump().values()) == pytest.approx(
            one.step_time_s, rel=1e-9
        )


def test_estimate_many_rejects_unknown_and_missing_fields() -> None:
    with pytest.raises(ValueError, match="unknown plan field"):
        estimate_many(
            MODEL,
            TRAINING,
            CLUSTER,
            {"dp": [1], "tp": [1], "pp": [1], "micro_batch_size": [1], "tensor": [2]},
        )
    with pytest.raises(ValueError, match="missing required field"):
        estimate_many(MODEL, TRAINING, CLUSTER, {"dp": [1], "tp": [1]})


def test_single_group_stages_match_the_homogeneous_plan() -> None:
    homogeneous = estimate(
        MODEL,
        TRAINING,
        CLUSTER,
        {
            "dp": 8,
            "tp": 4,
            "pp": 2,
            "micro_batch_size": 1,
            "recompute": "selective",
            "zero_stage": 1,
        },
    )
    staged = estimate(
        MODEL,
        TRAINING,
        CLUSTER,
        {
            "dp": 8,
            "tp": 4,
            "pp": 2,
            "micro_batch_size": 1,
            "recompute": "selective",
            "zero_stage": 1,
            "stages": [{"group": "h100", "num_layers": 20}, {"group": "h100", "num_layers": 20}],
        },
    )
    assert staged.feasible and homogeneous.feasible
    # The heterogeneous path prices inter-stage links as inter-node (stages on separate nodes),
    # exactly what the homogeneous placement gives for dp*tp = 32 > 8 GPUs per node.
    assert staged.step_time_s == pytest.approx(homogeneous.step_time_s, rel=1e-9)
    assert staged.peak_memory_gib == pytest.approx(homogeneous.peak_memory_gib, rel=1e-9)
