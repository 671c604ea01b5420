"""OpenAPI examples of request bodies and path parameters, built from the presets.

They are what ``/docs`` offers to try and what the schemathesis test sends first, so each is a
request the service accepts (a 2xx): a fuzzer's random bodies only ever reach the 4xx paths.
"""

from typing import Any

from costmodel.catalog import SpecKind, load_preset

# Small on purpose: an 8B model on one 8-GPU node prices in milliseconds, and a search over it
# enumerates a few hundred plans.
MODEL_PRESET = "llama3-8b"
TRAINING_PRESET = "llama3-8k"
CLUSTER_PRESET = "dgx-a100-8n"
GPU_NAME = "H100-80GB"
STORED_MODEL_NAME = "example-llama3-8b"
STORED_CLUSTER_NAME = "example-dgx-a100-8n"

Examples = dict[str, dict[str, Any]]


def _example(summary: str, value: Any) -> dict[str, Any]:
    return {"summary": summary, "value": value}


def _renamed_preset(kind: SpecKind, preset: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = load_preset(kind, preset).model_dump(mode="json", exclude_none=True)
    return {**spec, "name": name}


def estimate_examples() -> Examples:
    return {
        "presets": _example(
            "Presets by name",
            {
                "preset": "llama3-70b",
                "training": "llama3-8k",
                "cluster_id": "dgx-h100-16n",
                "plan": "tp8-pp4-dp4",
            },
        ),
        "inline_plan": _example(
            "An inline plan",
            {
                "preset": MODEL_PRESET,
                "training": TRAINING_PRESET,
                "cluster_id": CLUSTER_PRESET,
                "plan": {
                    "dp": 64,
                    "tp": 1,
                    "pp": 1,
                    "micro_batch_size": 1,
                    "zero_stage": 3,
                    "recompute": "full",
                },
            },
        ),
    }


def search_examples() -> Examples:
    return {
        "presets": _example(
            "A bounded search over presets",
            {
                "preset": MODEL_PRESET,
                "training": TRAINING_PRESET,
                "cluster_id": CLUSTER_PRESET,
                "objective": "throughput",
                "trials": 50,
                "timeout_s": 60,
            },
        )
    }


def model_examples() -> Examples:
    return {
        "from_preset": _example(
            f"The {MODEL_PRESET} preset under another name",
            _renamed_preset("model", MODEL_PRESET, STORED_MODEL_NAME),
        )
    }


def cluster_examples() -> Examples:
    return {
        "from_preset": _example(
            f"The {CLUSTER_PRESET} preset under another name",
            _renamed_preset("cluster", CLUSTER_PRESET, STORED_CLUSTER_NAME),
        )
    }


def hf_config_examples() -> Examples:
    """A Llama-style ``config.json`` (the keys ``import_hf_config`` reads)."""
    return {
        "llama": _example(
            "A small Llama config.json",
            {
                "_name_or_path": "example/tiny-llama",
                "model_type": "llama",
                "hidden_size": 2048,
                "intermediate_size": 5632,
                "num_hidden_layers": 22,
                "num_attention_heads": 32,
                "num_key_value_heads": 4,
                "vocab_size": 32000,
                "max_position_embeddings": 2048,
                "hidden_act": "silu",
            },
        )
    }


def key_examples(*keys: str) -> Examples:
    """Path examples: ids or names that exist (a preset, or what the body example creates)."""
    return {key: _example(key, key) for key in keys}


def plan_observation_examples() -> Examples:
    return {
        "step_time": _example(
            "A measured step time",
            {"name": "run-1", "source": "example", "step_time_s": 10.0, "peak_memory_gib": 60.0},
        )
    }


def observation_examples() -> Examples:
    return {
        "presets": _example(
            "A run on presets, and its step time",
            {
                **estimate_examples()["inline_plan"]["value"],
                "source": "example",
                "step_time_s": 10.0,
            },
        )
    }


# An nccl-tests table (all_reduce_perf, 16 ranks on 2 nodes of 8 A100), trimmed to a few sizes.
_NCCL_ROWS = [
    (1048576, 262144, 96.57, 10.86, 20.36),
    (16777216, 4194304, 332.4, 50.48, 94.65),
    (268435456, 67108864, 2975.4, 90.22, 169.16),
    (1073741824, 268435456, 11080.0, 96.91, 181.70),
]


def _nccl_table() -> str:
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n"
    )
    rows = "".join(
        f"{size:>12} {count:>13}     float     sum      -1 {us:>8} {alg:>7} {bus:>7}      0\n"
        for size, count, us, alg, bus in _NCCL_ROWS
    )
    return header + rows


def profile_examples() -> Examples:
    return {
        "nccl_tests": _example(
            "nccl-tests output to parse",
            {
                "name": "example-nccl",
                "nccl_tests": {
                    "outputs": [_nccl_table()],
                    "gpu": "A100-80GB",
                    "op": "all_reduce",
                    "ranks": 16,
                    "ranks_per_node": 8,
                },
            },
        )
    }


def calibration_examples() -> Examples:
    return {
        "observations": _example(
            "Fit to the observations reported under a source",
            {
                "name": "example-fit",
                "observation_sources": ["example"],
                "params": ["gemm_efficiency_scale"],
                "k_folds": 2,
            },
        )
    }
