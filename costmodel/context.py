"""Plan-independent facts about one (model, training, efficiency) triple, resolved once."""

from dataclasses import dataclass
from functools import lru_cache

from costmodel.flops import LayerShape, model_flops_per_token
from costmodel.params import EfficiencyParams
from costmodel.specs import ModelSpec, TrainingSpec

# Bytes per parameter by precision, for (weights, gradients, optimizer states per Adam).
# - bf16: Megatron-LM keeps bf16 weights, an fp32 gradient buffer (accumulate-allreduce-grads-
#   in-fp32 is forced on for bf16) and fp32 master + Adam m, v: 2 + 4 + 12 = 18 bytes/param
#   (Megatron-LM docs, distributed optimizer table: "18 bytes" non-distributed).
# - fp16: Rajbhandari et al. (ZeRO, SC'20) Sec. 3.1: 2 + 2 + 12 = 16 bytes/param.
# - fp8: Transformer Engine keeps bf16 weights/grads as bf16 training does (+1 byte FP8 copy).
# - fp32 / tf32: fp32 weights and grads, Adam m and v, no master copy: 4 + 4 + 8.
_BYTES_PER_PARAM = {
    "bf16": (2.0, 4.0, 12.0),
    "fp16": (2.0, 2.0, 12.0),
    "fp8": (3.0, 4.0, 12.0),
    "tf32": (4.0, 4.0, 8.0),
    "fp32": (4.0, 4.0, 8.0),
}
# SGD with momentum keeps one state (+ master copy in mixed precision) instead of Adam's two.
_SGD_OPTIMIZER_BYTES = {"bf16": 8.0, "fp16": 8.0, "fp8": 8.0, "tf32": 4.0, "fp32": 4.0}
# Bytes the Adam update streams per parameter: read fp32 master, m, v and the gradient, write
# master, m, v and the low-precision weight copy.
ADAM_STEP_BYTES_PER_PARAM = 28.0


@dataclass(frozen=True)
class ModelContext:
    """Layer shape, sequence and batch, bytes per parameter/gradient/optimizer state and the
    training switches of one (model, training, params) triple."""

    shape: LayerShape
    seq_length: int
    global_batch_size: int
    precision: str
    activation_bytes: float
    weight_bytes: float
    grad_bytes: float
    optimizer_bytes: float
    flash_attention: bool
    dropout: bool
    fused_cross_entropy: bool
    framework: str
    moe_capacity_factor: float | None
    swiglu: bool
    num_layers: int
    tie_embeddings: bool
    params: EfficiencyParams
    model_flops_per_token: float  # MFU numerator, see flops.model_flops_per_token

    @classmethod
    def build(
        cls, model: ModelSpec, training: TrainingSpec, params: EfficiencyParams
    ) -> "ModelContext":
        """Resolve the context; raises ``SpecError`` when the sequence exceeds the model's
        positions."""
        return _build_context(model, training, params)

    @classmethod
    def _build(
        cls, model: ModelSpec, training: TrainingSpec, params: EfficiencyParams
    ) -> "ModelContext":
        model.check_seq_length(training.seq_length)  # a clear error, not a silent estimate
        weight, grad, optim = _BYTES_PER_PARAM[training.precision]
        if training.optimizer == "sgd":
            optim = _SGD_OPTIMIZER_BYTES[training.precision]
        return cls(
            shape=LayerShape.of(model),
            seq_length=training.seq_length,
            global_batch_size=training.global_batch_size,
            precision=training.precision,
            activation_bytes=4.0 if training.precision in ("fp32", "tf32") else 2.0,
            weight_bytes=weight,
            grad_bytes=grad,
            optimizer_bytes=optim,
            flash_attention=training.flash_attention,
            dropout=training.dropout,
            fused_cross_entropy=training.fused_cross_entropy,
            framework=training.framework,
            moe_capacity_factor=training.moe_capacity_factor,
            swiglu=model.activation == "swiglu",
            num_layers=model.num_layers,
            tie_embeddings=model.tie_embeddings,
            params=params,
            model_flops_per_token=model_flops_per_token(model, training.seq_length),
        )


@lru_cache(maxsize=256)
def _build_context(
    model: ModelSpec, training: TrainingSpec, params: EfficiencyParams
) -> ModelContext:
    # Specs are frozen (hashable) pydantic models: a search prices thousands of plans for one
    # (model, training) pair, so the derived shape is computed once.
    return ModelContext._build(model, training, params)
