"""Model specs shared by the cost-model tests."""

from costmodel import ModelSpec

# A Llama-2-13B-shaped dense model with grouped-query attention (8 KV heads) and SwiGLU.
LLAMA_LIKE_13B = ModelSpec(
    name="llama-like-13b",
    num_layers=40,
    hidden_size=5120,
    num_attention_heads=40,
    num_kv_heads=8,
    ffn_hidden_size=13824,
    vocab_size=32000,
    activation="swiglu",
)
