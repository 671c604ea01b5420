"""Transformer shape: what the cost model needs to count parameters, FLOPs and activations."""

from typing import Literal

from pydantic import Field, model_validator

from costmodel.specs.base import Spec


class MoESpec(Spec):
    """Mixture-of-Experts block (GShard / Switch / Mixtral / DeepSeek style)."""

    num_experts: int = Field(ge=1, le=4096, description="Routed experts per MoE layer.")
    top_k: int = Field(ge=1, le=64, description="Experts each token is routed to.")
    expert_ffn_hidden_size: int = Field(ge=1, le=1_000_000, description="FFN width of one expert.")
    layer_interval: int = Field(
        default=1, ge=1, description="Every n-th layer (after the dense ones) is an MoE layer."
    )
    num_shared_experts: int = Field(
        default=0, ge=0, le=64, description="Always-active experts (DeepSeek-MoE)."
    )
    first_dense_layers: int = Field(
        default=0, ge=0, description="Leading layers that keep a dense FFN (DeepSeek-V3: 3)."
    )

    @model_validator(mode="after")
    def _top_k_fits(self) -> "MoESpec":
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds num_experts ({self.num_experts})")
        return self


class ModelSpec(Spec):
    """Decoder-only transformer shape.

    Defaults follow GPT-3 conventions (``ffn = 4 * hidden``, multi-head attention); Llama-style
    models set ``num_kv_heads`` (GQA) and ``activation="swiglu"`` with their own FFN width.
    """

    name: str = Field(default="custom", min_length=1, max_length=200)
    num_layers: int = Field(ge=1, le=10_000)
    hidden_size: int = Field(ge=1, le=1_000_000)
    num_attention_heads: int = Field(ge=1, le=10_000)
    num_kv_heads: int | None = Field(
        default=None, ge=1, le=10_000, description="Key/value heads (GQA); default = heads."
    )
    ffn_hidden_size: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Dense FFN width; default 4 * hidden."
    )
    vocab_size: int = Field(ge=1, le=10_000_000)
    activation: Literal["gelu", "swiglu"] = "gelu"
    tie_embeddings: bool = False
    moe: MoESpec | None = None
    head_dim: int | None = Field(
        default=None, ge=1, le=100_000, description="Per-head width; default hidden / heads."
    )

    @model_validator(mode="after")
    def _shape_consistent(self) -> "ModelSpec":
        if self.num_kv_heads is not None and self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
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
        return self.num_kv_heads or self.num_attention_heads

    @property
    def ffn_size(self) -> int:
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def num_moe_layers(self) -> int:
        """Layers whose FFN is an MoE block."""
        if self.moe is None:
            return 0
        candidates = self.num_layers - self.moe.first_dense_layers
        return (candidates + self.moe.layer_interval - 1) // self.moe.layer_interval
