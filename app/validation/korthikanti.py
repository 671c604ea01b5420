"""Korthikanti et al. 2022 Table 4: one GPT-22B layer's time under each recompute mode.

A unit check of compute + recompute modelling with nothing else in the way (one node, tp 8, no
data or pipeline parallelism). The measured times come from the data set's ``layer_times.csv``;
the overhead of each configuration is its forward+backward time over the baseline's, minus 1.
"""

import csv
from dataclasses import dataclass
from pathlib import Path

from costmodel.api import estimate
from costmodel.params import EfficiencyParams
from costmodel.specs import ClusterSpec, ModelSpec, NodeGroup, Plan, TrainingSpec
from costmodel.specs.plan import Recompute

# Korthikanti et al. Table 3: the 22B model (48 layers, h 6144, 64 heads, vocab 51200), s 2048,
# tp 8 on one DGX A100 80GB node, micro-batch 4; Megatron at the time had no fused attention
# and trained with dropout.
_MODEL = ModelSpec(
    name="GPT-22B", num_layers=48, hidden_size=6144, num_attention_heads=64, vocab_size=51200
)
_TRAINING = TrainingSpec(seq_length=2048, global_batch_size=4, flash_attention=False, dropout=True)
_CLUSTER = ClusterSpec(name="dgx-a100", groups=[NodeGroup(name="g", gpu="A100-80GB", num_nodes=1)])
# Table 4's experiments as (recompute, sequence parallelism).
_CONFIGS: dict[str, tuple[Recompute, bool]] = {
    "Baseline no recompute": ("none", False),
    "Sequence Parallelism": ("none", True),
    "Baseline with recompute": ("full", False),
    "Selective Recompute": ("selective", False),
    "Selective + Sequence": ("selective", True),
}
_BASELINE = "Baseline no recompute"


@dataclass(frozen=True)
class Table4Row:
    """Overheads vs. the no-recompute baseline, as fractions (0.39 = +39%)."""

    config: str
    predicted: float
    measured: float


def _measured_layer_ms(data_dir: Path) -> dict[str, float]:
    """Experiment -> measured forward+backward ms of one layer; empty without the file."""
    path = data_dir / "layer_times.csv"
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as handle:
        return {row["experiment"]: float(row["combined_ms"]) for row in csv.DictReader(handle)}


def _predicted_layer_s(recompute: Recompute, sp: bool, params: EfficiencyParams | None) -> float:
    plan = Plan(dp=1, tp=8, pp=1, micro_batch_size=4, recompute=recompute, sequence_parallel=sp)
    result = estimate(_MODEL, _TRAINING, _CLUSTER, plan, params=params)
    # One micro-batch on the only stage: its forward+backward time over the layer count.
    return result.per_stage[0].time_per_microbatch_s / _MODEL.num_layers


def table4(data_dir: Path, params: EfficiencyParams | None = None) -> list[Table4Row]:
    """Predicted vs. measured overhead per Table 4 configuration (empty without the data)."""
    measured = _measured_layer_ms(data_dir)
    if _BASELINE not in measured:
        return []
    predicted = {
        name: _predicted_layer_s(recompute, sp, params)
        for name, (recompute, sp) in _CONFIGS.items()
        if name in measured
    }
    return [
        Table4Row(
            config=name,
            predicted=predicted[name] / predicted[_BASELINE] - 1.0,
            measured=measured[name] / measured[_BASELINE] - 1.0,
        )
        for name in predicted
    ]
