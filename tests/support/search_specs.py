"""Small specs shared by the search tests: a 6B Llama-like model and a short training run."""

SMALL_MODEL = {
    "name": "small-6b",
    "num_layers": 24,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "ffn_hidden_size": 14336,
    "vocab_size": 32000,
    "activation": "swiglu",
}
SMALL_TRAINING = {"seq_length": 4096, "global_batch_size": 64, "train_tokens": 1e10}
