"""Parameter and FLOP counts of a decoder-only transformer.

Conventions (Narayanan et al. SC'21 Eq. 2-3; PaLM App. B): a GEMM of (M x K) @ (K x N) costs
2*M*N*K FLOPs; backward costs twice the forward; attention scores cost 2*s*s*(heads * qk head
dim) and the weighted sum 2*s*s*(heads * v head dim) per sequence and layer, counted over the
full s x s square (not causal-halved), which is how Megatron, PaLM and llm-foundry report model
FLOPs. With equal query/key and value head widths (MHA, GQA) that is 4*s*s*h_q. Biases and norms
are ignored in FLOPs.

Multi-head latent attention (DeepSeek-V2 arXiv:2405.04434 Sec. 2.1; the shapes of Hugging
Face's ``DeepseekV3Attention``) replaces the Q/K/V projections by a query down/up-projection
(or one query projection without ``q_lora_rank``), a joint key/value down-projection whose
output also carries the shared rotary key, and a key/value up-projection; training attends
with queries and keys of head dim nope + rope and values of head dim v.

The formulas quoted from the sources: validation/formulas.md.
"""

from dataclasses import dataclass

from costmodel.specs import ModelSpec


@dataclass(frozen=True)
class LayerShape:
    """Per-layer sizes resolved from a ModelSpec."""

    hidden: int
    q_width: int  # heads * query/key head dim (MLA: heads * (nope + rope))
    # Width of each of K and V: kv_heads * head_dim. Under MLA the mean of the up-projected key
    # (heads * (nope + rope)) and value (heads * v) widths, so 2 * kv_width is K + V.
    kv_width: float
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
    # Attention core output = output projection input: heads * v head dim (= q_width but MLA).
    o_width: int
    # MLA (zeros without): query and key/value latent ranks, the shared rotary key's width and
    # W_UKV's output width, heads * (nope + v).
    q_lora: int = 0
    kv_lora: int = 0
    qk_rope: int = 0
    kv_up_width: int = 0

    @classmethod
    def of(cls, model: ModelSpec) -> "LayerShape":
        """The per-layer sizes of ``model`` (GQA, MLA, SwiGLU and MoE resolved)."""
        moe, mla = model.moe, model.mla
        heads = model.num_attention_heads
        q_width = heads * model.head_size
        o_width = heads * model.value_head_size
        return cls(
            hidden=model.hidden_size,
            q_width=q_width,
            kv_width=(q_width + o_width) / 2 if mla else model.kv_heads * model.head_size,
            heads=heads,
            kv_heads=model.kv_heads,
            ffn=model.ffn_size,
            ffn_matrices=3 if model.activation == "swiglu" else 2,
            vocab=model.vocab_size,
            num_experts=moe.num_experts if moe else 0,
            top_k=moe.top_k if moe else 0,
            expert_ffn=moe.expert_ffn_hidden_size if moe else 0,
            shared_experts=moe.num_shared_experts if moe else 0,
            o_width=o_width,
            q_lora=mla.q_rank if mla else 0,
            kv_lora=mla.kv_lora_rank if mla else 0,
            qk_rope=mla.qk_rope_head_dim if mla else 0,
            kv_up_width=heads * (mla.qk_nope_head_dim + mla.v_head_dim) if mla else 0,
        )

    @property
    def mla(self) -> bool:
        """Whether attention is multi-head latent (MLA)."""
        return self.kv_lora > 0

    # Parameters ---------------------------------------------------------------------------------
    @property
    def mla_down_params(self) -> int:
        """MLA's down-projections W_DQ (h x q_lora) and W_DKV (h x (kv_lora + rope)): replicated
        on every tensor-parallel rank in Megatron-Core (``TELinear(parallel_mode="duplicated")``
        in ``MLASelfAttention``); 0 without MLA."""
        if not self.mla:
            return 0
        return self.hidden * (self.q_lora + self.kv_lora + self.qk_rope)

    @property
    def attention_params(self) -> int:
        """Attention weight matrices of one layer (biases and norms excluded)."""
        if not self.mla:
            # Q and output projections (h x h_q each) + K and V projections (h x h_kv each).
            return int(2 * self.hidden * self.q_width + 2 * self.hidden * self.kv_width)
        # W_UQ (q_lora x n (nope + rope)), or W_Q (h x n (nope + rope)) without query
        # compression; W_UKV (kv_lora x n (nope + v)); W_O (n v x h); the down-projections.
        q_up = (self.q_lora or self.hidden) * self.q_width
        kv_up = self.kv_lora * self.kv_up_width
        return self.mla_down_params + q_up + kv_up + self.o_width * self.hidden

    @property
    def dense_mlp_params(self) -> int:
        """Parameters of one dense MLP (2 or 3 matrices of hidden x ffn)."""
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
        """The layer's two norms, plus MLA's RMSNorms over the query and key/value latents."""
        return 2 * self.hidden + self.q_lora + self.kv_lora

    # Forward FLOPs per token ----------------------------------------------------------------------
    @property
    def attention_proj_flops(self) -> int:
        """Forward FLOPs per token of the attention projections."""
        return 2 * self.attention_params

    @property
    def dense_mlp_flops(self) -> int:
        """Forward FLOPs per token of one dense MLP."""
        return 2 * self.dense_mlp_params

    @property
    def moe_mlp_flops(self) -> int:
        """Active expert FLOPs per token: top_k routed + shared experts + router."""
        return 2 * (self.top_k + self.shared_experts) * self.expert_params + 2 * (
            self.hidden * self.num_experts
        )

    def attention_core_flops(self, seq_length: int) -> int:
        """Scores (Q K^T) + weighted sum (A V), per token: 2 s (heads qk_dim + heads v_dim).

        = 2 s (q_width + o_width); with equal query/key and value head widths (MHA, GQA) this
        is the familiar 4 s h_q. MLA (training form): qk_dim = nope + rope, v_dim = v_head_dim.
        """
        return 2 * seq_length * (self.q_width + self.o_width)

    @property
    def logits_flops(self) -> int:
        """Forward FLOPs per token of the output layer (hidden x vocab)."""
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
    """Every weight of the model: layers, norms, input embedding and output layer (once when
    tied). DeepSeek-V3: 671B (its multi-token-prediction module is not modelled)."""
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


def active_params(model: ModelSpec) -> int:
    """Parameters one token uses, counted as DeepSeek does ("36.6B activated, including 0.9B
    for the output head", DeepSeek-V3 README_WEIGHTS.md): every weight but the routed experts a
    token is not sent to and the input embedding table (a lookup, not a matmul); a tied table
    counts once, as the output layer."""
    shape = LayerShape.of(model)
    _, moe_layers = layer_counts(model)
    idle_experts = moe_layers * (shape.num_experts - shape.top_k) * shape.expert_params
    lookup = 0 if model.tie_embeddings else shape.vocab * shape.hidden
    return total_params(model) - idle_experts - lookup


def model_flops_per_token(model: ModelSpec, seq_length: int) -> float:
    """Training (fwd + bwd = 3x fwd) model FLOPs per token, no recompute: MFU's numerator.

    = 6 * N_active (matmul params incl. the output projection, not the input embedding lookup)
      + 6 * L * s * (q_width + o_width) (attention scores and weighted sum, PaLM App. B with the
      full s x s count; 12 * L * s * h_q when query/key and value heads are equally wide).
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
