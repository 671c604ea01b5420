"""What is being trained: sequence, batch, precision and optimizer."""

from typing import Literal

from pydantic import Field

from costmodel.frameworks import Framework
from costmodel.specs.base import Integer, Number, Spec
from costmodel.specs.reliability import CheckpointSpec

Precision = Literal["bf16", "fp16", "fp8", "tf32", "fp32"]


class TrainingSpec(Spec):
    """Sequence length, global batch, precision, optimizer and the training switches."""

    seq_length: Integer = Field(ge=1, le=10_000_000, description="Tokens per sequence.")
    global_batch_size: Integer = Field(
        ge=1, le=100_000_000, description="Sequences per optimizer step."
    )
    precision: Precision = "bf16"
    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    train_tokens: Number | None = Field(
        default=None, gt=0, le=1e16, description="Tokens to train, for time/cost to train."
    )
    flash_attention: bool = Field(
        default=True,
        description="Fused attention (FlashAttention, Dao et al. 2022): no s^2 activations kept.",
    )
    fused_cross_entropy: bool = Field(
        default=True,
        description=(
            "Fused (vocab-parallel) cross-entropy as in Megatron-LM or flash-attn; False for "
            "PyTorch's unfused upcast + log-softmax, which moves and keeps more per logit."
        ),
    )
    moe_capacity_factor: Number | None = Field(
        default=None,
        gt=0,
        le=64,
        description=(
            "MoE token dropping: each expert takes at most this many times its mean share of "
            "tokens and the rest are dropped (Switch Transformer; Megatron "
            "--moe-expert-capacity-factor with padding to capacity). Every expert then runs "
            "capacity-sized GEMMs and all-to-alls. Default: dropless (the busiest expert sets "
            "the pace, EfficiencyParams.moe_load_imbalance)."
        ),
    )
    framework: Framework = Field(
        default="any",
        description=(
            "Runtime the plan is for (megatron = Megatron-LM/Core/NeMo, deepspeed, torchtitan): "
            "plans it cannot launch are infeasible, and searches return only plans it can "
            "(costmodel.frameworks); any = every plan the cost model prices."
        ),
    )
    dropout: bool = Field(
        default=False,
        description="Dropout layers present (GPT-3/Megatron 2021); modern LLMs train without.",
    )
    checkpoint: CheckpointSpec = Field(
        default_factory=CheckpointSpec,
        description="Checkpoint strategy, interval and hot spares (goodput, costmodel.goodput).",
    )
