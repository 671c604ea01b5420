"""Parameter and FLOP counts of a decoder-only transformer.

Conventions (Narayanan et al. SC'21 Eq. 2-3; PaLM App. B): a GEMM of (M x K) @ (K x N) costs
2*M*N*K FLOPs; backward costs twice the forward; attention scores and the weighted sum each cost
2*s*s*h_q per sequence and layer, counted over the full s x s square (not causal-halved), which is
how Megatron, PaLM and llm-foundry report model FLOPs. Biases and norms are ignored in FLOPs.
"""

from dataclasses import dataclass

from costmodel.specs import ModelSpec


@dataclass(frozen=True)
class LayerShape:
    """Per-layer sizes resolved from a ModelSpec."""

    hidden: int
    q_width: int  # heads * head_dim
    kv_width: int  # kv_heads * head_dim
    heads: int
    kv_heads: int
    ffn: int
    ffn_matrices: int  # 3 for SwiGLU (gate, up, down), 2 for GeLU
    vocab: int
    # MoE (zeros for dense models)
    num_experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int

    @classmethod
    def of(cls, model: ModelSpec) -> "LayerShape":
        moe = model.moe
        return cls(
            hidden=model.hidden_size,
            q_width=model.num_attention_heads * model.head_size,
            kv_width=model.kv_heads * model.head_size,
            heads=model.num_attention_heads,
            kv_heads=model.kv_heads,
            ffn=model.ffn_size,
            ffn_matrices=3 if model.activation == "swiglu" else 2,
            vocab=model.vocab_size,
            num_experts=moe.num_experts if moe else 0,
            top_k=moe.top_k if moe else 0,
            expert_ffn=moe.expert_ffn_hidden_size if moe else 0,
            shared_experts=moe.num_shared_experts if moe else 0,
        )

    # Parameters ---------------------------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        # Q and output projections (h x h_q each) + K and V projections (h x h_kv each).
        return 2 * self.hidden * self.q_width + 2 * self.hidden * self.kv_width

    @property
    def dense_mlp_params(self) -> int:
        return self.ffn_matrices * self.hidden * self.ffn

    @property
    def expert_params(self) -> int:
        """Parameters of ONE routed expert."""
        return self.ffn_matrices * self.hidden * self.expert_ffn

    @property
    def moe_shared_params(self) -> int:
        """Parameters of an MoE layer replicated like dense ones: shared experts + router."""
        return self.shared_experts * self.expert_params + self.hidden * self.num_experts

    @property
    def norm_params(self) -> int:
        return 2 * self.hidden

    # Forward FLOPs per token ----------------------------------------------------------------------
    @property
    def attention_proj_flops(self) -> int:
        return 2 * self.attention_params

    @property
    def dense_mlp_flops(self) -> int:
        return 2 * self.dense_mlp_params

    @property
    def moe_mlp_flops(self) -> int:
        """Active expert FLOPs per token: top_k routed + shared experts + router."""
        return 2 * (self.top_k + self.shared_experts) * self.expert_params + 2 * (
            self.hidden * self.num_experts
        )

    def attention_core_flops(self, seq_length: int) -> int:
        """Scores (Q K^T) + weighted sum (A V), per token: 2 * 2 * s * h_q."""
        return 4 * seq_length * self.q_width

    @property
    def logits_flops(self) -> int:
        return 2 * self.hidden * self.vocab


def layer_counts(model: ModelSpec) -> tuple[int, int]:
    """(dense layers, MoE layers)."""
    moe_layers = model.num_moe_layers
    return model.num_layers - moe_layers, moe_layers


def is_moe_layer(model: ModelSpec, index: int) -> bool:
    """Whether layer ``index`` (0-based) carries an MoE FFN."""
    if model.moe is None or index < model.moe.first_dense_layers:
        return False
    return (index - model.moe.first_dense_layers) % model.moe.layer_interval == 0


def total_params(model: ModelSpec) -> int:
    shape = LayerShape.of(model)
    dense_layers, moe_layers = layer_counts(model)
    per_dense = shape.attention_params + shape.dense_mlp_params + shape.norm_params
    per_moe = (
        shape.attention_params
        + shape.norm_params
        + shape.moe_shared_params
        + shape.num_experts * shape.expert_params
    )
    embeddings = shape.vocab * shape.hidden * (1 if model.tie_embeddings else 2)
    return dense_layers * per_dense + moe_layers * per_moe + embeddings + shape.hidden


def model_flops_per_token(model: ModelSpec, seq_length: int) -> float:
    """Training (fwd + bwd = 3x fwd) model FLOPs per token, no recompute: MFU's numerator.

    = 6 * N_active (matmul params incl. the output projection, not the input embedding lookup)
      + 12 * L * s * h_q (attention, PaLM App. B with the full s x s count).
    """
    shape = LayerShape.of(model)
    dense_layers, moe_layers = layer_counts(model)
    forward = (
        model.num_layers * (shape.attention_proj_flops + shape.attention_core_flops(seq_length))
        + dense_layers * shape.dense_mlp_flops
        + moe_layers * shape.moe_mlp_flops
        + shape.logits_flops
    )
    return 3.0 * forward
