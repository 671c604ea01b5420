"""Hugging Face config.json -> ModelSpec, on real configs of each supported family."""

from typing import Any

import pytest

from costmodel.catalog import load_model_preset
from costmodel.hf_import import SUPPORTED_MODEL_TYPES, model_from_hf_config
from costmodel.specs import ModelSpec

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


@pytest.mark.parametrize(
    ("config", "preset"),
    [
        (LLAMA3_8B, "llama3-8b"),
        (MIXTRAL_8X7B, "mixtral-8x7b"),
        (QWEN2_7B, "qwen2-7b"),
        (GPT_NEOX_20B, "gpt-neox-20b"),
    ],
)
def test_import_matches_the_hand_written_preset(config: dict[str, Any], preset: str) -> None:
    assert model_from_hf_config(config, name=preset) == load_model_preset(preset)


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
    with pytest.raises(ValueError, match="unsupported model_type 'bert'; supported: gpt2"):
        model_from_hf_config({"model_type": "bert", "hidden_size": 768})
    with pytest.raises(ValueError, match="missing 'model_type'"):
        model_from_hf_config({"hidden_size": 768})
    assert set(SUPPORTED_MODEL_TYPES) >= {"llama", "mistral", "mixtral", "qwen2", "gpt2"}


def test_invalid_shape_is_one_readable_line() -> None:
    with pytest.raises(ValueError, match=r"^model: num_attention_heads \(32\) must be a multiple"):
        model_from_hf_config({**LLAMA3_8B, "num_key_value_heads": 6})
