"""Multi-head latent attention: the spec, its parameters, FLOPs, GEMMs and activations, and the
DeepSeek-V3 / Kimi K2 presets priced on the layout DeepSeek trained with."""

import numpy as np
import pytest
from pydantic import ValidationError

from costmodel import ClusterSpec, ModelSpec, TrainingSpec, estimate, estimate_many
from costmodel.catalog import load_model_preset, load_training_preset
from costmodel.context import ModelContext
from costmodel.flops import LayerShape, active_params, model_flops_per_token, total_params
from costmodel.hardware_arrays import group_hardware
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from costmodel.specs import NodeGroup
from costmodel.stage import StageInputs
from costmodel.stage.activations import layer_activation_bytes
from costmodel.stage.compute import attention_core_forward_s, layer_forward_gemm_s
from tests.support.stage_inputs import one_layer_inputs

# A tiny MLA model whose counts are worked out by hand below: hidden 64, 4 heads, query latent
# 16, key/value latent 8, rope 4, nope 8 (query/key heads of 12), value heads of 6.
MLA = {"q_lora_rank": 16, "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 8}
TINY = ModelSpec(
    name="tiny-mla",
    num_layers=2,
    hidden_size=64,
    num_attention_heads=4,
    ffn_hidden_size=128,
    vocab_size=100,
    activation="swiglu",
    mla={**MLA, "v_head_dim": 6},
)
# Per layer: W_DQ 64x16 + W_UQ 16x48 + W_DKV 64x(8+4) + W_UKV 8x(4 (8+6)) + W_O 24x64.
TINY_ATTENTION = 1024 + 768 + 768 + 448 + 1536


# The spec ------------------------------------------------------------------------------------
def test_mla_block_validates_and_names_the_field() -> None:
    with pytest.raises(ValidationError, match=r"mla\.kv_lora_rank"):
        ModelSpec.model_validate(
            {**TINY.model_dump(), "mla": {**MLA, "v_head_dim": 6, "kv_lora_rank": 0}}
        )
    with pytest.raises(ValidationError, match=r"mla\.v_head_dim\n.*Field required"):
        ModelSpec.model_validate({**TINY.model_dump(), "mla": MLA})
    with pytest.raises(ValidationError, match=r"mla: num_kv_heads \(2\) must be unset or equal"):
        ModelSpec.model_validate({**TINY.model_dump(), "num_kv_heads": 2})
    with pytest.raises(ValidationError, match="mla: head_dim must be unset"):
        ModelSpec.model_validate({**TINY.model_dump(), "head_dim": 16})
    # hidden need not divide by heads: the head widths come from the mla block.
    odd = ModelSpec.model_validate({**TINY.model_dump(), "hidden_size": 66})
    assert (odd.head_size, odd.value_head_size, odd.kv_heads) == (12, 6, 4)
    assert ModelSpec.model_validate({**TINY.model_dump(), "num_kv_heads": 4}).kv_heads == 4


def test_parameters_follow_the_deepseek_v2_shapes() -> None:
    shape = LayerShape.of(TINY)
    assert (shape.q_width, shape.o_width, shape.kv_width) == (48, 24, 36.0)
    assert shape.attention_params == TINY_ATTENTION == 4544
    assert shape.mla_down_params == 64 * 16 + 64 * 12
    assert shape.norm_params == 2 * 64 + 16 + 8  # + the query and key/value latent RMSNorms
    per_layer = TINY_ATTENTION + 3 * 64 * 128 + (2 * 64 + 24)
    assert total_params(TINY) == 2 * per_layer + 2 * 100 * 64 + 64
    # No query compression: one W_Q (64 x 48) instead of W_DQ and W_UQ, and no query norm.
    plain_q = TINY.model_copy(update={"mla": TINY.mla.model_copy(update={"q_lora_rank": None})})
    assert LayerShape.of(plain_q).attention_params == TINY_ATTENTION - 1024 - 768 + 64 * 48
    assert LayerShape.of(plain_q).norm_params == 2 * 64 + 8


@pytest.mark.parametrize(
    ("preset", "total", "active"),
    [
        # DeepSeek-V3 README_WEIGHTS.md: 671B, 36.6B activated including the 0.9B output head.
        ("deepseek-v3", 671e9, 36.6e9),
        # Hugging Face Hub: 1026.5B in the checkpoint; model card: 32B activated.
        ("kimi-k2", 1026.5e9, 32e9),
    ],
)
def test_presets_match_published_totals(preset: str, total: float, active: float) -> None:
    model = load_model_preset(preset)
    assert model.mla is not None
    assert total_params(model) == pytest.approx(total, rel=0.01)
    assert active_params(model) == pytest.approx(active, rel=0.02)


def test_deepseek_v2_counts() -> None:
    # DeepSeek-V2 (arXiv:2405.04434 Sec. 3.1.2): 236B total, 21B activated.
    v2 = ModelSpec(
        name="deepseek-v2",
        num_layers=60,
        hidden_size=5120,
        num_attention_heads=128,
        ffn_hidden_size=12288,
        vocab_size=102400,
        activation="swiglu",
        moe={
            "num_experts": 160,
            "top_k": 6,
            "expert_ffn_hidden_size": 1536,
            "num_shared_experts": 2,
            "first_dense_layers": 1,
        },
        mla={
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
        },
    )
    assert total_params(v2) == pytest.approx(236e9, rel=0.01)
    assert active_params(v2) == pytest.approx(21e9, rel=0.01)


# FLOPs ---------------------------------------------------------------------------------------
def test_attention_core_flops_on_a_hand_computed_case() -> None:
    s = 32
    shape = LayerShape.of(TINY)
    # Scores: 2 s heads (nope + rope) = 2 * 32 * 4 * 12; weighted sum: 2 s heads v = 2 * 32 * 4 * 6.
    assert shape.attention_core_flops(s) == 3072 + 1536 == 4608
    # = 2 s (q_width + o_width); without MLA it stays 4 s h_q.
    gqa = LayerShape.of(load_model_preset("llama3-8b"))
    assert gqa.attention_core_flops(s) == 4 * s * gqa.q_width
    # MFU numerator: 3 x (layers (2 attention params + core + 2 MLP params) + 2 h V).
    per_layer = 2 * TINY_ATTENTION + 4608 + 2 * 3 * 64 * 128
    assert model_flops_per_token(TINY, s) == 3 * (2 * per_layer + 2 * 64 * 100) == 415488


def _inputs(tp: int, sp: int, tokens_per_microbatch: int = 64) -> StageInputs:
    return one_layer_inputs(tp=tp, sp=sp, micro_batch_size=tokens_per_microbatch / 32)


TRAINING = TrainingSpec(seq_length=32, global_batch_size=8)
GROUP = NodeGroup(name="g", gpu="H100-80GB", num_nodes=1)


@pytest.mark.parametrize(("tp", "sp"), [(1, 0), (2, 0), (2, 1), (4, 1)])
def test_projection_gemms_shard_like_megatron_core(tp: int, sp: int) -> None:
    """Without the size roll-off a GEMM's time is its FLOPs over the achieved peak, so the
    attention projections' time gives the FLOPs one GPU runs: the down-projections are
    duplicated on every TP rank (on the sequence shard under sequence parallelism), the
    up-projections and the output projection are split by tp."""
    params = EfficiencyParams(gemm_half_dim=0.0)
    ctx = ModelContext.build(TINY, TRAINING, params)
    hw = group_hardware(GROUP, "bf16", params)
    tokens = np.array([64.0])
    attention_s, _, _ = layer_forward_gemm_s(ctx, _inputs(tp, sp), hw, tokens)
    flops = attention_s * hw.gemm_peak_Fps * hw.gemm_efficiency
    down = 64 * (16 + 8 + 4) / (tp if sp else 1)
    up_and_out = (16 * 48 + 8 * 4 * (8 + 6) + 24 * 64) / tp
    assert flops[0] == pytest.approx(2 * 64 * (down + up_and_out), rel=1e-12)


def test_attention_core_time_uses_the_mla_flops() -> None:
    ctx = ModelContext.build(TINY, TRAINING, DEFAULT_PARAMS)
    hw = group_hardware(GROUP, "bf16", DEFAULT_PARAMS)
    tokens = np.array([64.0])
    core_s = attention_core_forward_s(ctx, _inputs(2, 1), hw, tokens)
    assert core_s[0] == pytest.approx(64 * 4608 / 2 / hw.attention_Fps[0], rel=1e-12)


def test_activations_keep_latents_and_up_projected_qkv() -> None:
    """Per token (bf16, fused attention, no dropout): outside the TP region 2 norm inputs
    (2 x 64 x 2 B), the down-projections' input and the MLP input (64 x 2 B each), and per
    latent its norm input and up-projection input (2 x (16 + 8) x 2 B); inside, sharded by tp:
    Q, K (48 x 2 B each), V and the projection input (24 x 2 B each), the SwiGLU FFN's gate,
    up (2 x 128 x 2 B) and FC2 input (128 x 2 B)."""
    ctx = ModelContext.build(TINY, TRAINING, DEFAULT_PARAMS)
    tokens = np.array([64.0])
    outside = 2 * 64 * 2 + 64 * 2 + 64 * 2 + 2 * (16 + 8) * 2
    inside = (48 + 48 + 24 + 24) * 2 + (2 * 128 + 128) * 2
    for tp, sp in [(1, 0), (2, 0), (2, 1)]:
        stored = layer_activation_bytes(ctx, _inputs(tp, sp), tokens)
        expected = 64 * (outside / (tp if sp else 1) + inside / tp)
        assert stored.dense_B[0] == pytest.approx(expected, rel=1e-12)


# The two faces ---------------------------------------------------------------------------------
SMALL_MLA_MOE = ModelSpec(
    name="small-mla-moe",
    num_layers=8,
    hidden_size=1024,
    num_attention_heads=16,
    ffn_hidden_size=2816,
    vocab_size=32000,
    activation="swiglu",
    moe={
        "num_experts": 16,
        "top_k": 4,
        "expert_ffn_hidden_size": 512,
        "num_shared_experts": 1,
        "first_dense_layers": 1,
    },
    mla={
        "q_lora_rank": 384,
        "kv_lora_rank": 256,
        "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 64,
        "v_head_dim": 64,
    },
)
NO_Q_LORA = SMALL_MLA_MOE.model_copy(
    update={
        "name": "small-mla-dense",
        "moe": None,
        "mla": SMALL_MLA_MOE.mla.model_copy(update={"q_lora_rank": 0}),
    }
)
FACES_TRAINING = TrainingSpec(
    seq_length=2048, global_batch_size=256, train_tokens=1e11, precision="fp8"
)
FACES_CLUSTER = ClusterSpec(
    name="h100x64",
    groups=[{"name": "h100", "gpu": "H100-80GB", "num_nodes": 8, "price_per_gpu_hour": 2.5}],
)


@pytest.mark.parametrize("model", [SMALL_MLA_MOE, NO_Q_LORA], ids=["moe", "dense-no-q-lora"])
def test_scalar_and_vectorized_faces_agree_on_an_mla_model(model: ModelSpec) -> None:
    rng = np.random.default_rng(11)
    size = 80
    plans = {
        "dp": rng.choice([1, 2, 4, 8], size),
        "tp": rng.choice([1, 2, 4, 8], size),
        "pp": rng.choice([1, 2, 4], size),
        "ep": rng.choice([1, 2, 4], size) if model.moe else np.ones(size, dtype=int),
        "micro_batch_size": rng.choice([1, 2], size),
        "zero_stage": rng.integers(0, 4, size),
        "recompute": rng.integers(0, 3, size),
        "sequence_parallel": rng.integers(0, 2, size),
    }
    plans["sequence_parallel"] = np.where(plans["tp"] == 1, 0, plans["sequence_parallel"])
    many = estimate_many(model, FACES_TRAINING, FACES_CLUSTER, plans)
    recompute_names = ["none", "selective", "full"]
    for i in range(size):
        plan = {name: int(values[i]) for name, values in plans.items()}
        plan["recompute"] = recompute_names[plan["recompute"]]
        plan["sequence_parallel"] = bool(plan["sequence_parallel"])
        one = estimate(model, FACES_TRAINING, FACES_CLUSTER, plan)
        assert one.feasible == bool(many["feasible"][i]), (plan, one.reasons)
        assert one.step_time_s == pytest.approx(many["step_time_s"][i], rel=1e-12)
        assert one.peak_memory_gib == pytest.approx(many["peak_memory_gib"][i], rel=1e-12)
        assert one.mfu == pytest.approx(many["mfu"][i], rel=1e-12)
        assert one.hfu == pytest.approx(many["hfu"][i], rel=1e-12)


def test_mla_costs_less_attention_than_the_old_mha_approximation() -> None:
    """The preset used to approximate MLA as 128 heads of 128: MLA has fewer attention
    parameters (187M vs 235M per layer) and a larger attention core (qk heads of 192)."""
    mla = load_model_preset("deepseek-v3")
    assert mla.mla is not None
    mha = mla.model_copy(update={"mla": None, "head_dim": 128})
    assert LayerShape.of(mla).attention_params == 187_105_280
    assert LayerShape.of(mha).attention_params == 4 * 7168 * 128 * 128
    assert LayerShape.of(mla).attention_core_flops(4096) == 2 * 4096 * 128 * (192 + 128)
    assert LayerShape.of(mla).attention_core_flops(4096) > LayerShape.of(mha).attention_core_flops(
        4096
    )


# DeepSeek-V3 on its published layout ----------------------------------------------------------
# DeepSeek-V3 technical report (arXiv:2412.19437) Sec. 3.2: 2,048 H800 GPUs (256 nodes of 8),
# 16-way pipeline, 64-way expert parallelism over 8 nodes, ZeRO-1 data parallelism, no TP.
# H800 is not in the catalog; H100-80GB stands in (same SMs and HBM, 2.25x the NVLink).
DEEPSEEK_CLUSTER = ClusterSpec(
    name="h100-256n",
    groups=[{"name": "h100", "gpu": "H100-80GB", "num_nodes": 256, "price_per_gpu_hour": 2.0}],
)
DEEPSEEK_PLAN = {"dp": 128, "tp": 1, "pp": 16, "ep": 64, "micro_batch_size": 1, "zero_stage": 1}


def test_deepseek_v3_prices_on_its_published_layout() -> None:
    model = load_model_preset("deepseek-v3")
    training = load_training_preset("deepseek-v3-4k")
    full = estimate(model, training, DEEPSEEK_CLUSTER, {**DEEPSEEK_PLAN, "recompute": "full"})
    assert full.feasible, full.reasons
    assert full.num_gpus == 2048
    assert np.isfinite(full.step_time_s) and full.step_time_s > 0
    # Published: 180K H800 GPU hours per trillion tokens = 1,543 tokens/s per GPU. The model
    # prices the all-to-all without DualPipe's overlap, so it lands below that, not above.
    assert 200 < full.tokens_per_s_per_gpu < 1543
    assert 0.05 < full.mfu < 0.5
    # Without recompute the 16 stages' in-flight micro-batches do not fit in 80 GB.
    none = estimate(model, training, DEEPSEEK_CLUSTER, {**DEEPSEEK_PLAN, "recompute": "none"})
    assert not none.feasible and none.reasons[0].startswith("out of memory:")


def test_the_training_presets_sequence_fits_the_models_positions() -> None:
    training = load_training_preset("deepseek-v3-4k")
    model = load_model_preset("deepseek-v3")
    assert model.max_position_embeddings == 163840
    assert training.seq_length <= model.max_position_embeddings
    longer = training.model_copy(update={"seq_length": 163841})
    with pytest.raises(ValueError, match=r"^training\.seq_length: 163841 exceeds"):
        estimate(model, longer, DEEPSEEK_CLUSTER, {**DEEPSEEK_PLAN, "recompute": "full"})
