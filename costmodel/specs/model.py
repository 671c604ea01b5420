"""Transformer shape: what the cost model needs to count parameters, FLOPs and activations."""

from typing import Literal

from pydantic import Field, model_validator

from costmodel.errors import SpecError
from costmodel.specs.base import Integer, Spec


class MoESpec(Spec):
    """Mixture-of-Experts block (GShard / Switch / Mixtral / DeepSeek style)."""

    num_experts: Integer = Field(ge=1, le=4096, description="Routed experts per MoE layer.")
    top_k: Integer = Field(ge=1, le=64, description="Experts each token is routed to.")
    expert_ffn_hidden_size: Integer = Field(
        ge=1, le=1_000_000, description="FFN width of one expert."
    )
    layer_interval: Integer = Field(
        default=1, ge=1, description="Every n-th layer (after the dense ones) is an MoE layer."
    )
    num_shared_experts: Integer = Field(
        default=0, ge=0, le=64, description="Always-active experts (DeepSeek-MoE)."
    )
    first_dense_layers: Integer = Field(
        default=0, ge=0, description="Leading layers that keep a dense FFN (DeepSeek-V3: 3)."
    )

    @model_validator(mode="after")
    def _top_k_fits(self) -> "MoESpec":
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds num_experts ({self.num_experts})")
        return self


class MLASpec(Spec):
    """Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 Sec. 2.1; DeepSeek-V3, Kimi K2).

    Per layer and token, with ``n`` heads and hidden size ``h`` (shapes as in Hugging Face's
    ``DeepseekV3Attention`` and Megatron-Core's ``MLASelfAttention``):

    - queries: ``W_DQ`` (h x q_lora_rank) -> RMSNorm -> ``W_UQ`` (q_lora_rank x n (nope + rope));
      without query compression (``q_lora_rank`` None or 0) one ``W_Q`` (h x n (nope + rope));
    - keys and values: ``W_DKV`` (h x (kv_lora_rank + rope)), whose last ``rope`` columns are
      the decoupled rotary key shared by all heads -> RMSNorm over the kv_lora_rank latent ->
      ``W_UKV`` (kv_lora_rank x n (nope + v)), the key and value up-projections;
    - output: ``W_O`` (n v x h).

    Training runs the up-projected ("naive") form: queries and keys of head dim nope + rope,
    values of head dim ``v_head_dim``; the absorbed form is an inference optimization.
    """

    q_lora_rank: Integer | None = Field(
        default=None,
        ge=0,
        le=1_000_000,
        description=(
            "Query compression rank (W_DQ: hidden x q_lora_rank); None or 0: queries projected "
            "directly from the hidden state (DeepSeek-V2-Lite)."
        ),
    )
    kv_lora_rank: Integer = Field(
        ge=1, le=1_000_000, description="Key/value latent width (W_DKV's compressed part)."
    )
    qk_rope_head_dim: Integer = Field(
        ge=1, le=100_000, description="Per-head width of the rotary (decoupled) query/key part."
    )
    qk_nope_head_dim: Integer = Field(
        ge=1, le=100_000, description="Per-head width of the query/key part without rotary."
    )
    v_head_dim: Integer = Field(ge=1, le=100_000, description="Per-head value width.")

    @property
    def q_rank(self) -> int:
        """Query compression rank; 0 when queries are not compressed."""
        return self.q_lora_rank or 0

    @property
    def qk_head_dim(self) -> int:
        """Query/key head width the scores are computed over: nope + rope."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


class ModelSpec(Spec):
    """Decoder-only transformer shape.

    Defaults follow GPT-3 conventions (``ffn = 4 * hidden``, multi-head attention); Llama-style
    models set ``num_kv_heads`` (GQA) and ``activation="swiglu"`` with their own FFN width;
    DeepSeek-V2/V3 and Kimi K2 add an ``mla`` block (multi-head latent attention). The
    multi-token-prediction module of DeepSeek-V3 (``num_nextn_predict_layers``) is not modelled:
    its published 671B total excludes MTP's 14B, and so does this spec.
    """

    name: str = Field(default="custom", min_length=1, max_length=200)
    num_layers: Integer = Field(ge=1, le=10_000)
    hidden_size: Integer = Field(ge=1, le=1_000_000)
    num_attention_heads: Integer = Field(ge=1, le=10_000)
    num_kv_heads: Integer | None = Field(
        default=None, ge=1, le=10_000, description="Key/value heads (GQA); default = heads."
    )
    ffn_hidden_size: Integer | None = Field(
        default=None, ge=1, le=10_000_000, description="Dense FFN width; default 4 * hidden."
    )
    vocab_size: Integer = Field(ge=1, le=10_000_000)
    activation: Literal["gelu", "swiglu", "relu2"] = Field(
        default="gelu",
        description=(
            "FFN activation: gelu (2 matrices), swiglu (gated: 3 matrices), relu2 (squared "
            "ReLU, Nemotron: 2 matrices, priced as gelu)."
        ),
    )
    tie_embeddings: bool = False
    moe: MoESpec | None = None
    head_dim: Integer | None = Field(
        default=None, ge=1, le=100_000, description="Per-head width; default hidden / heads."
    )
    mla: MLASpec | None = Field(
        default=None, description="Multi-head latent attention (DeepSeek-V2/V3, Kimi K2)."
    )
    max_position_embeddings: Integer | None = Field(
        default=None,
        ge=1,
        le=100_000_000,
        description=(
            "Longest sequence the model's positions support (HF max_position_embeddings); an "
            "estimate whose training.seq_length exceeds it is refused."
        ),
    )

    @model_validator(mode="after")
    def _shape_consistent(self) -> "ModelSpec":
        if self.num_kv_heads is not None and self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.mla is not None:
            if self.num_kv_heads not in (None, self.num_attention_heads):
                raise ValueError(
                    f"mla: num_kv_heads ({self.num_kv_heads}) must be unset or equal "
                    f"num_attention_heads ({self.num_attention_heads}); multi-head latent "
                    "attention up-projects a key and a value for every head"
                )
            if self.head_dim is not None:
                raise ValueError(
                    "mla: head_dim must be unset; the head widths are mla.qk_nope_head_dim + "
                    "mla.qk_rope_head_dim (queries, keys) and mla.v_head_dim (values)"
                )
        elif self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}) unless head_dim is given"
            )
        if self.moe is not None and self.moe.first_dense_layers > self.num_layers:
            raise ValueError("moe.first_dense_layers exceeds num_layers")
        return self

    # Resolved views -------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        """Key/value heads (``num_kv_heads``, default the attention heads)."""
        return self.num_kv_heads or self.num_attention_heads

    @property
    def ffn_size(self) -> int:
        """FFN hidden width (``ffn_hidden_size``, default 4 x hidden)."""
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def head_size(self) -> int:
        """Query/key head width (MLA: qk_nope_head_dim + qk_rope_head_dim)."""
        if self.mla is not None:
            return self.mla.qk_head_dim
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def value_head_size(self) -> int:
        """Value head width (MLA: v_head_dim; otherwise the head width)."""
        return self.mla.v_head_dim if self.mla is not None else self.head_size

    def check_seq_length(self, seq_length: int) -> None:
        """Raise ``SpecError`` naming ``training.seq_length`` when it exceeds the model's
        ``max_position_embeddings`` (called wherever a model and a training are combined)."""
        limit = self.max_position_embeddings
        if limit is not None and seq_length > limit:
            raise SpecError(
                f"training.seq_length: {seq_length} exceeds model '{self.name}' "
                f"max_position_embeddings ({limit})"
            )

    @property
    def num_moe_layers(self) -> int:
        """Layers whose FFN is an MoE block."""
        if self.moe is None:
            return 0
        candidates = self.num_layers - self.moe.first_dense_layers
        return (candidates + self.moe.layer_interval - 1) // self.moe.layer_interval
