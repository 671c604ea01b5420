"""Hugging Face config.json -> ModelSpec, on real configs of each supported family."""

from typing import Any

import pytest

from costmodel import estimate, estimate_many
from costmodel.catalog import load_model_preset
from costmodel.errors import SpecError
from costmodel.flops import LayerShape, active_params, total_params
from costmodel.hf_import import SUPPORTED_MODEL_TYPES, import_hf_config, model_from_hf_config
from costmodel.specs import ModelSpec, TrainingSpec
from tests.support.hf_configs import DEEPSEEK_V3

# config.json of meta-llama/Meta-Llama-3-8B.
LLAMA3_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}

# config.json of mistralai/Mixtral-8x7B-v0.1.
MIXTRAL_8X7B: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.02,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.36.0.dev0",
    "use_cache": True,
    "vocab_size": 32000,
}

# config.json of openai-community/gpt2 (124M): no n_inner (defaults to 4 * n_embd), tied head.
GPT2: dict[str, Any] = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}

# config.json of Qwen/Qwen2-7B.
QWEN2_7B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 131072,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.37.2",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 152064,
}

# config.json of EleutherAI/gpt-neox-20b.
GPT_NEOX_20B: dict[str, Any] = {
    "architectures": ["GPTNeoXForCausalLM"],
    "bos_token_id": 0,
    "eos_token_id": 0,
    "hidden_act": "gelu_fast",
    "hidden_size": 6144,
    "initializer_range": 0.02,
    "intermediate_size": 24576,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox",
    "num_attention_heads": 64,
    "num_hidden_layers": 44,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "transformers_version": "4.21.0.dev0",
    "use_cache": True,
    "use_parallel_residual": True,
    "vocab_size": 50432,
}

# config.json of Qwen/Qwen1.5-MoE-A2.7B (model_type qwen2_moe): 4 experts' worth of shared FFN.
QWEN15_MOE_A27B: dict[str, Any] = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "max_position_embeddings": 8192,
    "model_type": "qwen2_moe",
    "moe_intermediate_size": 1408,
    "norm_topk_prob": False,
    "num_attention_heads": 16,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 16,
    "shared_expert_intermediate_size": 5632,
    "tie_word_embeddings": False,
    "vocab_size": 151936,
}


# config.json of moonshotai/Kimi-K2-Base (model_type kimi_k2: DeepSeek-V3's architecture).
KIMI_K2: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001,
    "first_k_dense_replace": 1,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "initializer_range": 0.02,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 131072,
    "model_type": "kimi_k2",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 1,
    "n_routed_experts": 384,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 64,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 64,
    "num_nextn_predict_layers": 0,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 1.0,
        "beta_slow": 1.0,
        "factor": 32.0,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 50000.0,
    "routed_scaling_factor": 2.827,
    "scoring_func": "sigmoid",
    "seq_aux": True,
    "tie_word_embeddings": False,
    "topk_group": 1,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "v_head_dim": 128,
    "vocab_size": 163840,
}

# The shape-bearing keys of deepseek-ai/DeepSeek-V2-Lite's config.json: no query compression.
DEEPSEEK_V2_LITE: dict[str, Any] = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "first_k_dense_replace": 1,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v2",
    "moe_intermediate_size": 1408,
    "moe_layer_freq": 1,
    "n_group": 1,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_attention_heads": 16,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 27,
    "num_key_value_heads": 16,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "tie_word_embeddings": False,
    "topk_group": 1,
    "topk_method": "greedy",
    "v_head_dim": 128,
    "vocab_size": 102400,
}

# config.json of google/gemma-2-9b: GeGLU, explicit head_dim, soft-capping, sliding window.
GEMMA2_9B: dict[str, Any] = {
    "architectures": ["Gemma2ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0,
    "bos_token_id": 2,
    "cache_implementation": "hybrid",
    "eos_token_id": 1,
    "final_logit_softcapping": 30.0,
    "head_dim": 256,
    "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "gemma2",
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
    "pad_token_id": 0,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0,
    "sliding_window": 4096,
    "sliding_window_size": 4096,
    "torch_dtype": "float32",
    "transformers_version": "4.42.0.dev0",
    "use_cache": True,
    "vocab_size": 256000,
}

# The shape-bearing keys of nvidia/Minitron-8B-Base's config.json (model_type nemotron): a
# non-gated FFN with squared ReLU.
MINITRON_8B: dict[str, Any] = {
    "architectures": ["NemotronForCausalLM"],
    "head_dim": 128,
    "hidden_act": "relu2",
    "hidden_size": 4096,
    "intermediate_size": 16384,
    "max_position_embeddings": 4096,
    "model_type": "nemotron",
    "num_attention_heads": 48,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "partial_rotary_factor": 0.5,
    "tie_word_embeddings": False,
    "vocab_size": 256000,
}


@pytest.mark.parametrize(
    ("config", "preset"),
    [
        (LLAMA3_8B, "llama3-8b"),
        (MIXTRAL_8X7B, "mixtral-8x7b"),
        (QWEN2_7B, "qwen2-7b"),
        (GPT_NEOX_20B, "gpt-neox-20b"),
        (DEEPSEEK_V3, "deepseek-v3"),
        (KIMI_K2, "kimi-k2"),
    ],
)
def test_import_matches_the_hand_written_preset(config: dict[str, Any], preset: str) -> None:
    imported = model_from_hf_config(config, name=preset)
    assert imported.max_position_embeddings == config["max_position_embeddings"]
    expected = load_model_preset(preset)
    if expected.max_position_embeddings is None:
        # llama3-8b also describes Llama 3.1 8B (131072 positions), so it leaves the limit out.
        imported = imported.model_copy(update={"max_position_embeddings": None})
    assert imported == expected


def test_gpt2_defaults_ffn_and_ties_embeddings() -> None:
    model = model_from_hf_config(GPT2)
    assert model == ModelSpec(
        name="gpt2",
        num_layers=12,
        hidden_size=768,
        num_attention_heads=12,
        ffn_hidden_size=3072,
        vocab_size=50257,
        activation="gelu",
        tie_embeddings=True,
        max_position_embeddings=1024,
    )


def test_gpt2_explicit_inner_width() -> None:
    assert model_from_hf_config({**GPT2, "n_inner": 1000}).ffn_size == 1000


def test_mixtral_expert_width_is_intermediate_size() -> None:
    model = model_from_hf_config(MIXTRAL_8X7B)
    assert model.moe is not None
    assert (model.moe.num_experts, model.moe.top_k, model.moe.expert_ffn_hidden_size) == (
        8,
        2,
        14336,
    )
    assert model.num_moe_layers == 32


def test_qwen2_moe_shared_experts_and_dense_prefix() -> None:
    model = model_from_hf_config({**QWEN15_MOE_A27B, "mlp_only_layers": [0, 1]})
    assert model.moe is not None
    assert model.moe.model_dump() == {
        "num_experts": 60,
        "top_k": 4,
        "expert_ffn_hidden_size": 1408,
        "layer_interval": 1,
        "num_shared_experts": 4,
        "first_dense_layers": 2,
    }
    assert (model.ffn_size, model.num_moe_layers) == (5632, 22)


def test_qwen2_moe_rejects_what_the_spec_cannot_express() -> None:
    with pytest.raises(ValueError, match="mlp_only_layers must be the leading layers"):
        model_from_hf_config({**QWEN15_MOE_A27B, "mlp_only_layers": [3]})
    with pytest.raises(ValueError, match="not a multiple of moe_intermediate_size"):
        model_from_hf_config({**QWEN15_MOE_A27B, "shared_expert_intermediate_size": 1000})


def test_head_dim_is_kept_when_present() -> None:
    # Mistral-Nemo style: head_dim 128 while hidden / heads = 160.
    config = {**LLAMA3_8B, "model_type": "mistral", "hidden_size": 5120, "head_dim": 128}
    assert model_from_hf_config(config).head_size == 128


def test_default_name_comes_from_name_or_path() -> None:
    config = {**LLAMA3_8B, "_name_or_path": "meta-llama/Meta-Llama-3-8B"}
    assert model_from_hf_config(config).name == "meta-llama-3-8b"
    assert model_from_hf_config(LLAMA3_8B).name == "llama"


def test_missing_key_is_named() -> None:
    config = {key: value for key, value in LLAMA3_8B.items() if key != "num_hidden_layers"}
    with pytest.raises(ValueError, match=r"model_type 'llama'.* missing 'num_hidden_layers'"):
        model_from_hf_config(config)


def test_unsupported_model_type_lists_supported_ones() -> None:
    with pytest.raises(ValueError, match="unsupported model_type 'bert'; supported: deepseek_v2"):
        model_from_hf_config({"model_type": "bert", "hidden_size": 768})
    with pytest.raises(ValueError, match="missing 'model_type'"):
        model_from_hf_config({"hidden_size": 768})
    assert set(SUPPORTED_MODEL_TYPES) >= {"llama", "mistral", "mixtral", "qwen2", "gpt2"}
    assert {"deepseek_v2", "deepseek_v3", "kimi_k2", "gemma2", "nemotron"} <= set(
        SUPPORTED_MODEL_TYPES
    )


def test_invalid_shape_is_one_readable_line() -> None:
    with pytest.raises(ValueError, match=r"^model: num_attention_heads \(32\) must be a multiple"):
        model_from_hf_config({**LLAMA3_8B, "num_key_value_heads": 6})


# Multi-head latent attention families -------------------------------------------------------
def test_deepseek_v3_imports_mla_and_moe_with_its_published_counts() -> None:
    result = import_hf_config(DEEPSEEK_V3)
    model = result.spec
    assert model.name == "deepseek-v3"
    assert model.mla is not None and model.moe is not None
    assert model.mla.model_dump() == {
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
    }
    assert (model.moe.first_dense_layers, model.moe.layer_interval, model.num_moe_layers) == (
        3,
        1,
        58,
    )
    assert (model.moe.num_experts, model.moe.top_k, model.moe.num_shared_experts) == (256, 8, 1)
    assert model.num_kv_heads is None  # MLA up-projects a key and a value for every head
    # DeepSeek-V3 README_WEIGHTS.md: 671B main-model parameters, 36.6B activated (including
    # the 0.9B output head); the 14B of the MTP module are not part of either.
    assert total_params(model) == pytest.approx(671e9, rel=0.01)
    assert active_params(model) == pytest.approx(36.6e9, rel=0.01)
    text = " | ".join(result.warnings)
    assert "num_nextn_predict_layers (1)" in text
    assert "topk_group=4 of n_group=8" in text
    assert "hidden_act" not in text  # silu with a gated FFN is SwiGLU exactly


def test_kimi_k2_imports_as_deepseek_v3_with_its_published_counts() -> None:
    result = import_hf_config(KIMI_K2)
    model = result.spec
    assert model.name == "kimi-k2"
    assert model.mla is not None and model.moe is not None
    assert (model.num_attention_heads, model.head_size, model.value_head_size) == (64, 192, 128)
    assert (model.moe.num_experts, model.moe.num_shared_experts, model.num_moe_layers) == (
        384,
        1,
        60,
    )
    # The Hugging Face Hub counts 1026.5B parameters in the checkpoint (the model card rounds
    # to "1T total, 32B activated").
    assert total_params(model) == pytest.approx(1026.5e9, rel=0.01)
    assert total_params(model) == pytest.approx(1e12, rel=0.05)
    assert active_params(model) == pytest.approx(32e9, rel=0.02)
    assert result.warnings == ()  # no MTP, one expert group, SiLU


def test_deepseek_v2_lite_projects_queries_without_compression() -> None:
    model = model_from_hf_config(DEEPSEEK_V2_LITE)
    assert model.mla is not None and model.mla.q_lora_rank is None
    shape = LayerShape.of(model)
    # W_Q (h x n (nope + rope)), W_DKV (h x (512 + 64)), W_UKV (512 x n (128 + 128)), W_O.
    assert shape.attention_params == 2048 * 16 * 192 + 2048 * 576 + 512 * 16 * 256 + 2048 * 2048
    assert shape.norm_params == 2 * 2048 + 512
    # DeepSeek-V2 paper (arXiv:2405.04434) App. B: DeepSeek-V2-Lite has 15.7B parameters.
    assert total_params(model) == pytest.approx(15.7e9, rel=0.01)


def test_moe_layer_freq_counts_from_layer_zero_as_modeling_deepseek_does() -> None:
    # modeling_deepseek: layer i is MoE iff i >= first_k_dense_replace and i % freq == 0.
    config = {**DEEPSEEK_V2_LITE, "num_hidden_layers": 10, "first_k_dense_replace": 3}
    model = model_from_hf_config({**config, "moe_layer_freq": 2})
    assert model.moe is not None
    assert (model.moe.first_dense_layers, model.moe.layer_interval) == (4, 2)
    assert model.num_moe_layers == 3  # layers 4, 6, 8
    with pytest.raises(ValueError, match="moe_layer_freq must be a positive integer"):
        model_from_hf_config({**config, "moe_layer_freq": 0})
    dense = model_from_hf_config({**DEEPSEEK_V2_LITE, "n_routed_experts": None})
    assert dense.moe is None and dense.mla is not None


def test_mla_keys_are_required_and_named() -> None:
    config = {key: value for key, value in KIMI_K2.items() if key != "kv_lora_rank"}
    with pytest.raises(ValueError, match=r"model_type 'kimi_k2'.* missing 'kv_lora_rank'"):
        model_from_hf_config(config)
    config = {key: value for key, value in KIMI_K2.items() if key != "q_lora_rank"}
    with pytest.raises(ValueError, match="missing 'q_lora_rank'"):
        model_from_hf_config(config)
    with pytest.raises(SpecError, match=r"^model\.mla\.v_head_dim: Input should be greater"):
        model_from_hf_config({**KIMI_K2, "v_head_dim": 0})


# Activations that are not SwiGLU ---------------------------------------------------------------
def test_relu2_is_not_turned_into_swiglu() -> None:
    result = import_hf_config(MINITRON_8B)
    model = result.spec
    assert model.activation == "relu2"
    shape = LayerShape.of(model)
    assert shape.ffn_matrices == 2  # up and down: NemotronMLP is not gated
    assert shape.dense_mlp_params == 2 * 4096 * 16384
    assert (model.head_size, model.kv_heads, model.max_position_embeddings) == (128, 8, 4096)
    assert result.warnings == ()
    attention = 4096 * 48 * 128 * 2 + 4096 * 8 * 128 * 2  # Q and O, K and V
    per_layer = attention + 2 * 4096 * 16384 + 2 * 4096
    assert total_params(model) == 32 * per_layer + 2 * 256000 * 4096 + 4096  # ~8.27B


def test_gated_activations_other_than_silu_are_priced_as_swiglu_with_a_warning() -> None:
    result = import_hf_config({**LLAMA3_8B, "hidden_act": "relu2"})
    assert result.spec.activation == "swiglu"  # LlamaMLP is gated: still three matrices
    (warning,) = result.warnings
    assert warning.startswith("hidden_act 'relu2': the gated FFN (gated relu2) is priced as")
    odd = import_hf_config({**MINITRON_8B, "hidden_act": "relu"})
    assert odd.spec.activation == "gelu"
    assert odd.warnings == (
        "hidden_act 'relu' has no exact match; priced as gelu (two FFN matrices, the same "
        "elementwise traffic)",
    )


def test_gemma2_imports_with_its_warnings() -> None:
    result = import_hf_config(GEMMA2_9B)
    model = result.spec
    assert (model.activation, model.head_size, model.kv_heads) == ("swiglu", 256, 8)
    assert model.tie_embeddings  # Gemma2Config ties the output layer by default
    assert model.max_position_embeddings == 8192
    # Gemma 2 9B: 9.24B parameters (the post-norms this spec leaves out are 0.3M of them).
    assert total_params(model) == pytest.approx(9.24e9, rel=0.01)
    geglu, softcap, window, norms = result.warnings
    assert geglu.startswith("hidden_activation 'gelu_pytorch_tanh': the gated FFN (GeGLU)")
    assert softcap.startswith(
        "attn_logit_softcapping (50.0) and final_logit_softcapping (30.0): logit soft-capping"
    )
    assert window.startswith("sliding_window (4096) on every other layer is not priced")
    assert "post-feedforward RMSNorms" in norms


def test_sliding_window_is_warned_only_when_used() -> None:
    assert import_hf_config(QWEN2_7B).warnings == ()  # use_sliding_window false
    assert import_hf_config(MIXTRAL_8X7B).warnings == ()  # sliding_window null
    mistral = {**LLAMA3_8B, "model_type": "mistral", "sliding_window": 4096}
    (warning,) = import_hf_config(mistral).warnings
    assert warning.startswith("sliding_window (4096) on every layer is not priced")


# max_position_embeddings -----------------------------------------------------------------------
def test_seq_length_beyond_max_position_embeddings_is_refused() -> None:
    model = model_from_hf_config(GPT_NEOX_20B, name="gpt-neox-20b")
    assert model.max_position_embeddings == 2048
    cluster = {"name": "c", "groups": [{"name": "g", "gpu": "H100-80GB", "num_nodes": 8}]}
    plan = {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1}
    fits = TrainingSpec(seq_length=2048, global_batch_size=64)
    assert estimate(model, fits, cluster, plan).num_gpus == 64
    too_long = TrainingSpec(seq_length=4096, global_batch_size=64)
    message = r"^training\.seq_length: 4096 exceeds model 'gpt-neox-20b' max_position_embeddings"
    with pytest.raises(SpecError, match=message + r" \(2048\)$"):
        estimate(model, too_long, cluster, plan)
    with pytest.raises(SpecError, match=message):
        estimate_many(model, too_long, cluster, {k: [v] for k, v in plan.items()})
    # A heterogeneous plan (explicit stages) is refused the same way.
    stages = {**plan, "stages": [{"group": "g", "num_layers": 44}]}
    with pytest.raises(SpecError, match=message):
        estimate(model, too_long, cluster, stages)
    # Without the field nothing is checked.
    unlimited = model.model_copy(update={"max_position_embeddings": None})
    assert estimate(unlimited, too_long, cluster, plan).num_gpus == 64
