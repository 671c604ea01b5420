"""Build a ``ModelSpec`` from a Hugging Face ``config.json`` (offline: the dict, no download).

Supported ``model_type`` families and the keys each reads:

- ``llama``, ``mistral``, ``qwen2``: num_hidden_layers, hidden_size, num_attention_heads,
  num_key_value_heads (GQA), intermediate_size, vocab_size, tie_word_embeddings, head_dim.
  Gated SiLU FFN -> ``activation="swiglu"``.
- ``mixtral``: as Llama, plus num_local_experts and num_experts_per_tok; every layer is MoE and
  intermediate_size is the width of one expert.
- ``qwen2_moe``: as Qwen2, plus num_experts, num_experts_per_tok, moe_intermediate_size,
  shared_expert_intermediate_size (counted in experts of moe_intermediate_size),
  decoder_sparse_step and mlp_only_layers (leading dense layers).
- ``gpt2``: n_layer, n_embd, n_head, n_inner (default 4 * n_embd), vocab_size; GELU; tied.
- ``gpt_neox``: num_hidden_layers, hidden_size, num_attention_heads, intermediate_size,
  vocab_size, tie_word_embeddings; GELU.
"""

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from costmodel.errors import SpecError, format_validation_error
from costmodel.specs import ModelSpec

Config = Mapping[str, Any]


def _require(config: Config, key: str) -> Any:
    value = config.get(key)
    if value is None:
        model_type = config.get("model_type")
        raise ValueError(f"Hugging Face config (model_type '{model_type}') is missing '{key}'")
    return value


def _llama_like(config: Config) -> dict[str, Any]:
    # transformers' LlamaConfig / MistralConfig / Qwen2Config default to untied embeddings.
    fields: dict[str, Any] = {
        "num_layers": _require(config, "num_hidden_layers"),
        "hidden_size": _require(config, "hidden_size"),
        "num_attention_heads": _require(config, "num_attention_heads"),
        "num_kv_heads": config.get("num_key_value_heads"),
        "ffn_hidden_size": _require(config, "intermediate_size"),
        "vocab_size": _require(config, "vocab_size"),
        "activation": "swiglu",
        "tie_embeddings": bool(config.get("tie_word_embeddings", False)),
    }
    if config.get("head_dim") is not None:
        fields["head_dim"] = config["head_dim"]
    return fields


def _mixtral(config: Config) -> dict[str, Any]:
    fields = _llama_like(config)
    # Mixtral has no dense FFN; its intermediate_size is one expert's width.
    fields["moe"] = {
        "num_experts": _require(config, "num_local_experts"),
        "top_k": _require(config, "num_experts_per_tok"),
        "expert_ffn_hidden_size": fields["ffn_hidden_size"],
    }
    return fields


def _qwen2_moe(config: Config) -> dict[str, Any]:
    fields = _llama_like(config)
    expert_width = _require(config, "moe_intermediate_size")
    shared_width = config.get("shared_expert_intermediate_size") or 0
    if shared_width % expert_width:
        raise ValueError(
            f"shared_expert_intermediate_size ({shared_width}) is not a multiple of "
            f"moe_intermediate_size ({expert_width}); it cannot be expressed as shared experts"
        )
    if config.get("decoder_sparse_step", 1) != 1:
        raise ValueError("decoder_sparse_step other than 1 is not supported")
    dense_layers = sorted(config.get("mlp_only_layers") or [])
    if dense_layers != list(range(len(dense_layers))):
        raise ValueError(
            "mlp_only_layers must be the leading layers (0, 1, ...) to map to first_dense_layers"
        )
    fields["moe"] = {
        "num_experts": _require(config, "num_experts"),
        "top_k": _require(config, "num_experts_per_tok"),
        "expert_ffn_hidden_size": expert_width,
        "num_shared_experts": shared_width // expert_width,
        "first_dense_layers": len(dense_layers),
    }
    return fields


def _gpt2(config: Config) -> dict[str, Any]:
    hidden = _require(config, "n_embd")
    return {
        "num_layers": _require(config, "n_layer"),
        "hidden_size": hidden,
        "num_attention_heads": _require(config, "n_head"),
        "ffn_hidden_size": config.get("n_inner") or 4 * hidden,
        "vocab_size": _require(config, "vocab_size"),
        "activation": "gelu",
        # GPT2LMHeadModel always shares the token embedding with the output layer.
        "tie_embeddings": bool(config.get("tie_word_embeddings", True)),
    }


def _gpt_neox(config: Config) -> dict[str, Any]:
    return {
        "num_layers": _require(config, "num_hidden_layers"),
        "hidden_size": _require(config, "hidden_size"),
        "num_attention_heads": _require(config, "num_attention_heads"),
        "ffn_hidden_size": _require(config, "intermediate_size"),
        "vocab_size": _require(config, "vocab_size"),
        "activation": "gelu",
        "tie_embeddings": bool(config.get("tie_word_embeddings", False)),
    }


_FAMILIES: dict[str, Callable[[Config], dict[str, Any]]] = {
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "llama": _llama_like,
    "mistral": _llama_like,
    "mixtral": _mixtral,
    "qwen2": _llama_like,
    "qwen2_moe": _qwen2_moe,
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_FAMILIES))


def _default_name(config: Config) -> str:
    # "_name_or_path" is what save_pretrained records ("meta-llama/Meta-Llama-3-8B").
    source = str(config.get("_name_or_path") or config["model_type"])
    return source.rstrip("/").rsplit("/", 1)[-1].lower().replace("_", "-") or "custom"


def model_from_hf_config(config: Mapping[str, Any], name: str | None = None) -> ModelSpec:
    """ModelSpec of a Hugging Face ``config.json`` dict.

    Raises ``ValueError`` naming the missing key or the unsupported ``model_type``, and
    ``SpecError`` (a ``ValueError``) when the resulting shape is invalid.
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"expected a config.json mapping, got {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type is None:
        raise ValueError("Hugging Face config is missing 'model_type'")
    family = _FAMILIES.get(str(model_type))
    if family is None:
        raise ValueError(
            f"unsupported model_type '{model_type}'; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    fields = family(config)
    fields["name"] = name or _default_name(config)
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, prefix="model")) from None
