"""Build a ``ModelSpec`` from a Hugging Face ``config.json`` (offline: the dict, no download).

Supported ``model_type`` families and the keys each reads (every family also keeps
``max_position_embeddings``, ``n_positions`` for GPT-2, so an estimate can refuse longer
sequences):

- ``llama``, ``mistral``, ``qwen2``: num_hidden_layers, hidden_size, num_attention_heads,
  num_key_value_heads (GQA), intermediate_size, vocab_size, tie_word_embeddings, head_dim,
  hidden_act (gated FFN: ``silu`` -> ``activation="swiglu"``).
- ``mixtral``: as Llama, plus num_local_experts and num_experts_per_tok; every layer is MoE and
  intermediate_size is the width of one expert.
- ``qwen2_moe``: as Qwen2, plus num_experts, num_experts_per_tok, moe_intermediate_size,
  shared_expert_intermediate_size (counted in experts of moe_intermediate_size),
  decoder_sparse_step and mlp_only_layers (leading dense layers).
- ``deepseek_v2``, ``deepseek_v3``, ``kimi_k2`` (Kimi K2 ships DeepSeek-V3's architecture under
  its own model_type): as Llama for the trunk, plus multi-head latent attention (q_lora_rank,
  null for DeepSeek-V2-Lite; kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim ->
  the ``mla`` block; num_key_value_heads is not used: MLA up-projects a key and a value per
  head) and DeepSeekMoE (n_routed_experts, num_experts_per_tok, moe_intermediate_size,
  n_shared_experts, first_k_dense_replace -> first_dense_layers, moe_layer_freq ->
  layer_interval). num_nextn_predict_layers (multi-token prediction) is not modelled: warned.
- ``gemma2``: as Llama with head_dim and tie_word_embeddings (default tied); its GeGLU FFN
  (hidden_activation ``gelu_pytorch_tanh``) is priced as ``swiglu`` (the same three matrices),
  and logit soft-capping, the sliding window of every other layer and the extra post-norms are
  not priced: warned.
- ``nemotron``: as Llama but a non-gated FFN (up, down); hidden_act ``relu2`` (squared ReLU)
  -> ``activation="relu2"`` (2 matrices, GeLU's elementwise cost).
- ``gpt2``: n_layer, n_embd, n_head, n_inner (default 4 * n_embd), vocab_size; GELU; tied.
- ``gpt_neox``: num_hidden_layers, hidden_size, num_attention_heads, intermediate_size,
  vocab_size, tie_word_embeddings; GELU.

Whatever the cost model cannot price exactly comes back as ``warnings`` with the spec
(``import_hf_config``): an activation that is not mapped exactly (GeGLU priced as SwiGLU, an
unknown non-gated activation priced as GeLU), sliding-window attention, soft-capping, MTP.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from costmodel.errors import SpecError, format_validation_error
from costmodel.specs import ModelSpec

Config = Mapping[str, Any]
Warnings = list[str]


@dataclass(frozen=True)
class HfImport:
    """A converted config: the spec and what about it the cost model does not price exactly."""

    spec: ModelSpec
    warnings: tuple[str, ...] = ()


def _require(config: Config, key: str) -> Any:
    value = config.get(key)
    if value is None:
        model_type = config.get("model_type")
        raise ValueError(f"Hugging Face config (model_type '{model_type}') is missing '{key}'")
    return value


def _require_key(config: Config, key: str) -> Any:
    """A key that must be present but may be null (DeepSeek-V2-Lite's q_lora_rank)."""
    if key not in config:
        _require(config, key)
    return config[key]


# Activations (transformers' ACT2FN names). A gated FFN (gate, up, down) with SiLU is SwiGLU;
# the GeLU variants differ only in how the curve is approximated, which the cost model (GEMMs
# and HBM traffic) does not see.
_SILU = frozenset({"silu", "swish"})
_GELU = frozenset(
    {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate"}
)


def _gated_activation(
    config: Config, warnings: Warnings, key: str = "hidden_act", default: str = "silu"
) -> str:
    """``activation`` of a gated FFN (3 matrices): swiglu, with a warning unless it is SiLU."""
    act = str(config.get(key) or default)
    if act not in _SILU:
        kind = "GeGLU" if act in _GELU else f"gated {act}"
        warnings.append(
            f"{key} '{act}': the gated FFN ({kind}) is priced as swiglu (the same three "
            "matrices and elementwise traffic)"
        )
    return "swiglu"


def _plain_activation(
    config: Config, warnings: Warnings, key: str = "hidden_act", default: str = "gelu"
) -> str:
    """``activation`` of a non-gated FFN (2 matrices): gelu or relu2, else gelu with a warning."""
    act = str(config.get(key) or default)
    if act in _GELU:
        return "gelu"
    if act == "relu2":
        return "relu2"
    warnings.append(
        f"{key} '{act}' has no exact match; priced as gelu (two FFN matrices, the same "
        "elementwise traffic)"
    )
    return "gelu"


def _warn_sliding_window(config: Config, warnings: Warnings, layers: str = "every layer") -> None:
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window", True):
        warnings.append(
            f"sliding_window ({window}) on {layers} is not priced: attention is priced over the "
            f"full sequence (exact for seq_length <= {window})"
        )


def _trunk(config: Config) -> dict[str, Any]:
    """Keys Llama-style configs share. transformers' LlamaConfig / MistralConfig / Qwen2Config
    default to untied embeddings."""
    fields: dict[str, Any] = {
        "num_layers": _require(config, "num_hidden_layers"),
        "hidden_size": _require(config, "hidden_size"),
        "num_attention_heads": _require(config, "num_attention_heads"),
        "ffn_hidden_size": _require(config, "intermediate_size"),
        "vocab_size": _require(config, "vocab_size"),
        "tie_embeddings": bool(config.get("tie_word_embeddings", False)),
        "max_position_embeddings": config.get("max_position_embeddings"),
    }
    return fields


def _llama_like(config: Config, warnings: Warnings) -> dict[str, Any]:
    fields = _trunk(config)
    fields["num_kv_heads"] = config.get("num_key_value_heads")
    fields["activation"] = _gated_activation(config, warnings)
    if config.get("head_dim") is not None:
        fields["head_dim"] = config["head_dim"]
    _warn_sliding_window(config, warnings)
    return fields


def _mixtral(config: Config, warnings: Warnings) -> dict[str, Any]:
    fields = _llama_like(config, warnings)
    # Mixtral has no dense FFN; its intermediate_size is one expert's width.
    fields["moe"] = {
        "num_experts": _require(config, "num_local_experts"),
        "top_k": _require(config, "num_experts_per_tok"),
        "expert_ffn_hidden_size": fields["ffn_hidden_size"],
    }
    return fields


def _qwen2_moe(config: Config, warnings: Warnings) -> dict[str, Any]:
    fields = _llama_like(config, warnings)
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


def _deepseek(config: Config, warnings: Warnings) -> dict[str, Any]:
    """DeepSeek-V2/V3 and Kimi K2 (transformers' DeepseekV3Config; DeepSeek's
    modeling_deepseek.py): MLA attention and DeepSeekMoE."""
    fields = _trunk(config)
    fields["activation"] = _gated_activation(config, warnings)
    fields["mla"] = {
        "q_lora_rank": _require_key(config, "q_lora_rank") or None,
        "kv_lora_rank": _require(config, "kv_lora_rank"),
        "qk_rope_head_dim": _require(config, "qk_rope_head_dim"),
        "qk_nope_head_dim": _require(config, "qk_nope_head_dim"),
        "v_head_dim": _require(config, "v_head_dim"),
    }
    experts = config.get("n_routed_experts")
    if experts:
        interval = config.get("moe_layer_freq", 1)
        interval = 1 if interval is None else interval
        if not isinstance(interval, int) or interval < 1:
            raise ValueError(f"moe_layer_freq must be a positive integer, got {interval!r}")
        first_dense = config.get("first_k_dense_replace") or 0
        # modeling_deepseek: layer i is MoE iff i >= first_k_dense_replace and
        # i % moe_layer_freq == 0, so the first MoE layer is the first multiple of the interval
        # at or after first_k_dense_replace (the same layer for DeepSeek's interval of 1).
        first_moe = -(-first_dense // interval) * interval
        fields["moe"] = {
            "num_experts": experts,
            "top_k": _require(config, "num_experts_per_tok"),
            "expert_ffn_hidden_size": _require(config, "moe_intermediate_size"),
            "num_shared_experts": config.get("n_shared_experts") or 0,
            "first_dense_layers": first_moe,
            "layer_interval": interval,
        }
        groups, group_top_k = config.get("n_group") or 1, config.get("topk_group") or 1
        if group_top_k < groups:
            warnings.append(
                f"group-limited routing (each token to at most topk_group={group_top_k} of "
                f"n_group={groups} expert groups) is not priced: the expert-parallel all-to-all "
                "is priced as if tokens could reach every expert"
            )
    mtp = config.get("num_nextn_predict_layers") or 0
    if mtp:
        warnings.append(
            f"num_nextn_predict_layers ({mtp}): the multi-token-prediction module is not "
            "modelled (its extra layer, projection and output pass are left out)"
        )
    return fields


def _gemma2(config: Config, warnings: Warnings) -> dict[str, Any]:
    fields = _trunk(config)
    fields["num_kv_heads"] = config.get("num_key_value_heads")
    # Gemma2Config ties the output layer to the embedding unless told otherwise.
    fields["tie_embeddings"] = bool(config.get("tie_word_embeddings", True))
    # Gemma2MLP applies hidden_activation (hidden_act is the legacy key).
    key = "hidden_activation" if config.get("hidden_activation") else "hidden_act"
    fields["activation"] = _gated_activation(config, warnings, key, "gelu_pytorch_tanh")
    if config.get("head_dim") is not None:
        fields["head_dim"] = config["head_dim"]
    caps = [
        f"{name} ({config[name]})"
        for name in ("attn_logit_softcapping", "final_logit_softcapping")
        if config.get(name)
    ]
    if caps:
        warnings.append(
            f"{' and '.join(caps)}: logit soft-capping (a tanh over the attention scores or the "
            "logits) is not priced"
        )
    _warn_sliding_window(config, warnings, layers="every other layer")
    warnings.append(
        "Gemma 2's post-attention and post-feedforward RMSNorms (two more per layer, 2 x "
        "hidden_size parameters) are not counted"
    )
    return fields


def _nemotron(config: Config, warnings: Warnings) -> dict[str, Any]:
    # NemotronMLP is not gated: down(act(up(x))), with squared ReLU.
    fields = _trunk(config)
    fields["num_kv_heads"] = config.get("num_key_value_heads")
    fields["activation"] = _plain_activation(config, warnings, default="relu2")
    if config.get("head_dim") is not None:
        fields["head_dim"] = config["head_dim"]
    return fields


def _gpt2(config: Config, warnings: Warnings) -> dict[str, Any]:
    hidden = _require(config, "n_embd")
    return {
        "num_layers": _require(config, "n_layer"),
        "hidden_size": hidden,
        "num_attention_heads": _require(config, "n_head"),
        "ffn_hidden_size": config.get("n_inner") or 4 * hidden,
        "vocab_size": _require(config, "vocab_size"),
        "activation": _plain_activation(config, warnings, "activation_function", "gelu_new"),
        # GPT2LMHeadModel always shares the token embedding with the output layer.
        "tie_embeddings": bool(config.get("tie_word_embeddings", True)),
        "max_position_embeddings": config.get("n_positions"),
    }


def _gpt_neox(config: Config, warnings: Warnings) -> dict[str, Any]:
    fields = _trunk(config)
    fields["activation"] = _plain_activation(config, warnings)
    return fields


_FAMILIES: dict[str, Callable[[Config, Warnings], dict[str, Any]]] = {
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gemma2": _gemma2,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "kimi_k2": _deepseek,
    "llama": _llama_like,
    "mistral": _llama_like,
    "mixtral": _mixtral,
    "nemotron": _nemotron,
    "qwen2": _llama_like,
    "qwen2_moe": _qwen2_moe,
}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(sorted(_FAMILIES))


def _default_name(config: Config) -> str:
    # "_name_or_path" is what save_pretrained records ("meta-llama/Meta-Llama-3-8B").
    source = str(config.get("_name_or_path") or config["model_type"])
    return source.rstrip("/").rsplit("/", 1)[-1].lower().replace("_", "-") or "custom"


def import_hf_config(config: Mapping[str, Any], name: str | None = None) -> HfImport:
    """ModelSpec of a Hugging Face ``config.json`` dict, with what it does not price exactly.

    Raises ``ValueError`` naming the missing key or the unsupported ``model_type``, and
    ``SpecError`` (a ``ValueError``) when the resulting shape is invalid. A Gemma 2 config, for
    instance, comes back with ``activation="swiglu"`` and a warning that its GeGLU is priced as
    SwiGLU, one that soft-capping is not priced and one for its sliding window.
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
    warnings: Warnings = []
    fields = {key: value for key, value in family(config, warnings).items() if value is not None}
    fields["name"] = name or _default_name(config)
    try:
        spec = ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, prefix="model")) from None
    return HfImport(spec=spec, warnings=tuple(warnings))


def model_from_hf_config(config: Mapping[str, Any], name: str | None = None) -> ModelSpec:
    """ModelSpec of a Hugging Face ``config.json`` dict (``import_hf_config`` without the
    warnings). Raises as ``import_hf_config`` does."""
    return import_hf_config(config, name).spec
