"""What one cell of ``runs.csv`` says, in the cost model's terms (None: the source is silent)."""

from costmodel.specs.plan import Recompute
from costmodel.specs.training import Precision


def int_cell(value: str) -> int | None:
    """A whole number, or None for a blank, non-numeric or fractional cell."""
    try:
        number = float(value) if value.strip() else None
    except ValueError:
        return None
    return int(number) if number is not None and number.is_integer() else None


def float_cell(value: str) -> float | None:
    """A number, or None for a blank or non-numeric cell."""
    try:
        return float(value) if value.strip() else None
    except ValueError:
        return None


def short_source(source: str) -> str:
    """A short label per publication (and per framework for NVIDIA's DGX Cloud tables)."""
    if "dgxc-benchmarking" in source:
        framework = "MaxText" if "maxtext/" in source else "Paxml" if "paxml/" in source else "NeMo"
        return f"DGXC 24.11 {framework}"
    for key in (
        "Narayanan",
        "Korthikanti",
        "llm-foundry",
        "torchtitan",
        "NeMo",
        "Megatron-LM",
        "PaLM",
        "GPT-NeoX",
        "falcon",
    ):
        if key in source:
            suffix = ""
            if key == "llm-foundry":
                suffix = " A100-40GB" if "40GB" in source else " A100-80GB"
            if key == "Narayanan":
                suffix = " T1" if "Table 1" in source else " T2"
            if key == "NeMo" and "24.07" in source:
                suffix = " 24.07"
            return key + suffix
    return source[:30]


def parse_precision(notes: str) -> Precision | None:
    """The GEMM precision from the notes' ``prec=`` field; None when the source omits it.

    torchtitan's "float8 ..." and "BF16+Float8 ..." rows run their linear layers in FP8
    (torchao float8 training), which is what precision "fp8" prices.
    """
    text = notes.split(";")[0].strip().removeprefix("prec=").strip().lower()
    if "fp8" in text or "float8" in text:
        return "fp8"
    if text.startswith("fp16"):
        return "fp16"
    if text.startswith(("bf16", "amp_bf16", "bfloat16", "mixed")):
        return "bf16"
    return None


def parse_recompute(value: str, source: str) -> Recompute | None:
    """Map a source's activation-checkpointing mode onto none / selective / full; None if unstated.

    torchtitan's selective AC is not Megatron's "selective" (which recomputes only the attention
    core): per-op SAC keeps only every other matmul output and re-runs everything else, and
    per-layer SAC fully checkpoints every other layer. Both sit between Megatron-selective and
    full in memory and compute; ``full`` is the nearer of our modes (and the one under which
    the published Llama 2 70B run fits in 80 GB, as it did in reality).
    """
    value = value.strip().lower()
    if value in ("full", "none"):
        return "full" if value == "full" else "none"
    if value.startswith(("selective (op)", "selective (layer)", "selective (per-op")):
        return "full"
    if value.startswith("selective") and "torchtitan" in source:
        return "full"  # torchtitan's default selective AC is per-op SAC (train_configs)
    if value.startswith("selective"):
        return "selective"
    return None  # "unknown", blank, "rematerialization (type not stated)"


def parse_sharding(value: str) -> tuple[int, str | None] | None:
    """(ZeRO stage, the assumption it rests on or None); None when the stage is not stated."""
    value = value.strip()
    if value.startswith("none"):
        return 0, None
    if "ZeRO-3" in value or "FSDP" in value:
        return 3, None
    if "ZeRO-1" in value or "distributed optimizer" in value:
        if "not stated" in value:
            # NeMo's and Megatron's performance recipes enable the distributed optimizer.
            return 1, "sharding not stated: Megatron distributed optimizer (ZeRO-1)"
        return 1, None
    return None  # blank, "ZeRO (stage not stated)"
