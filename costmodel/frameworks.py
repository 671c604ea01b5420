"""What each training framework can launch: a table per framework, read by the estimates, the
search space and the launch exports.

``TrainingSpec.framework`` names the runtime a plan is for; a plan it cannot launch is
infeasible (``Violation.FRAMEWORK``) with the settings it cannot express, so a search for that
framework returns only plans it can run. ``any`` launches everything the cost model prices.

- ``megatron`` (Megatron-LM / Megatron-Core / NeMo): ZeRO-1 is the distributed optimizer
  (``--use-distributed-optimizer``); no ZeRO-2/3 in its DDP, no hybrid sharding; 1F1B and
  interleaved 1F1B only (no GPipe); uneven splits (``--decoder-first/last-pipeline-num-layers``),
  CP, EP with folding (``--expert-tensor-parallel-size``), TP comm overlap, optimizer offload
  (``--optimizer-cpu-offload``) all supported.
- ``deepspeed`` (DeepSpeed with Megatron-DeepSpeed TP): ZeRO 0-3, but its pipeline engine only
  with ZeRO-0/1 (``PipelineEngine`` asserts ``zero_optimization_stage < 2``); no interleaved
  schedule, no ring context parallelism (Ulysses is another layout), per-layer activation
  checkpointing only (no selective), expert parallelism over data ranks only (DeepSpeed-MoE,
  no expert tensor parallel size of its own), no uneven explicit splits (``partition_method``
  balances by parameters or uniformly), no TP comm overlap.
- ``torchtitan`` (FSDP2 + TP/PP/CP/EP): shards with FSDP2 (ZeRO-3) or replicates (DDP), HSDP via
  ``data_parallel_shard_degree`` — no ZeRO-1/2; no optimizer-only offload; async TP is its TP
  comm overlap; pipeline schedules 1F1B, interleaved 1F1B and GPipe; selective activation
  checkpointing (its SAC) priced as the cost model's selective/full modes.
All three run one tensor-parallel size on every pipeline stage.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

Framework = Literal["any", "megatron", "deepspeed", "torchtitan"]
FRAMEWORK_NAMES: tuple[Framework, ...] = ("any", "megatron", "deepspeed", "torchtitan")
Columns = Mapping[str, np.ndarray]

_SELECTIVE = 1  # stage.RECOMPUTE_SELECTIVE (not imported: the stage model imports nothing here)
_GPIPE = 1


@dataclass(frozen=True)
class Limit:
    """A setting a framework cannot express: where ``broken`` is True, and why."""

    setting: str
    why: str
    broken: Callable[[Columns], np.ndarray]


def _column(p: Columns, name: str) -> np.ndarray:
    return p[name] if name in p else np.zeros_like(p["dp"])


def _etp(p: Columns) -> np.ndarray:
    etp = _column(p, "etp")
    return np.where(etp > 0, etp, p["tp"])


LIMITS: dict[str, tuple[Limit, ...]] = {
    "any": (),
    "megatron": (
        Limit(
            "zero_stage",
            "Megatron shards only the optimizer states (--use-distributed-optimizer, ZeRO-1)",
            lambda p: _column(p, "zero_stage") >= 2,
        ),
        Limit("dp_shard", "hybrid sharding is FSDP's (HSDP)", lambda p: _column(p, "dp_shard") > 0),
        Limit(
            "schedule",
            "Megatron runs 1F1B or interleaved 1F1B, not GPipe",
            lambda p: _column(p, "schedule") == _GPIPE,
        ),
        Limit(
            "tp_comm_overlap",
            "Megatron's --tp-comm-overlap needs --sequence-parallel",
            lambda p: (_column(p, "tp_comm_overlap") > 0) & (_column(p, "sequence_parallel") == 0),
        ),
    ),
    "deepspeed": (
        Limit(
            "zero_stage",
            "DeepSpeed's pipeline engine runs ZeRO-0/1 only",
            lambda p: (p["pp"] > 1) & (_column(p, "zero_stage") >= 2),
        ),
        Limit("vpp", "DeepSpeed has no interleaved pipeline schedule", lambda p: p["vpp"] > 1),
        Limit("cp", "DeepSpeed has no ring context parallelism", lambda p: p["cp"] > 1),
        Limit(
            "recompute",
            "DeepSpeed checkpoints whole layers (no selective recompute)",
            lambda p: _column(p, "recompute") == _SELECTIVE,
        ),
        Limit(
            "ep",
            "DeepSpeed-MoE places experts over data-parallel ranks (ep divides dp, etp = tp)",
            lambda p: (p["dp"] % p["ep"] != 0) | (_etp(p) != p["tp"]),
        ),
        Limit(
            "first_stage_layers",
            "DeepSpeed partitions layers uniformly or by parameters, not by explicit counts",
            lambda p: (
                (_column(p, "first_stage_layers") > 0) | (_column(p, "last_stage_layers") > 0)
            ),
        ),
        Limit(
            "dp_shard", "no hybrid sharding in this export", lambda p: _column(p, "dp_shard") > 0
        ),
        Limit(
            "tp_comm_overlap",
            "DeepSpeed has no TP communication overlap",
            lambda p: _column(p, "tp_comm_overlap") > 0,
        ),
    ),
    "torchtitan": (
        Limit(
            "zero_stage",
            "torchtitan shards with FSDP2 (ZeRO-3) or replicates (DDP); no ZeRO-1/2",
            lambda p: (_column(p, "zero_stage") == 1) | (_column(p, "zero_stage") == 2),
        ),
        Limit(
            "offload_optimizer",
            "torchtitan offloads FSDP parameters with their states, not the optimizer alone",
            lambda p: _column(p, "offload_optimizer") > 0,
        ),
        Limit(
            "etp",
            "torchtitan's expert tensor parallel degree is 1 or the tensor parallel degree",
            lambda p: (_etp(p) != 1) & (_etp(p) != p["tp"]),
        ),
    ),
}


def broken_limits(framework: str, p: Columns) -> np.ndarray:
    """Per plan: whether ``framework`` cannot launch it, bool ``(n_plans,)``."""
    mask = np.zeros(p["dp"].shape, dtype=bool)
    for limit in LIMITS[framework]:
        mask |= np.asarray(limit.broken(p), dtype=bool)
    return mask


def why_not(framework: str, p: Columns) -> list[str]:
    """For one plan (1-element columns): each setting ``framework`` cannot express, with why."""
    return [
        f"{limit.setting}: {limit.why}"
        for limit in LIMITS[framework]
        if bool(np.asarray(limit.broken(p)).reshape(-1)[0])
    ]


# One plan no table objects to: each search dimension is varied on it alone (``allowed``).
_NEUTRAL = {"dp": 8, "tp": 2, "pp": 1, "cp": 1, "ep": 1, "etp": 0, "vpp": 1, "sequence_parallel": 1}


def allowed(framework: str, setting: str, values: list) -> list:
    """The ``values`` of one plan setting ``framework`` can launch, every other setting left
    at a value no table objects to (the search space lists only these; limits that couple two
    settings, such as DeepSpeed's ZeRO stage with pipelining, are left to the estimate)."""
    kept = []
    for value in values:
        columns = {name: np.array([number]) for name, number in _NEUTRAL.items()}
        columns[setting] = np.array([int(value)])
        if setting == "etp" and value == 1:
            columns["ep"] = np.array([2])  # etp = 1 only means something with experts
        if not bool(broken_limits(framework, columns)[0]):
            kept.append(value)
    return kept


def launchable_by(p: Columns) -> list[str]:
    """The frameworks (besides ``any``) that can launch one plan."""
    return [name for name in FRAMEWORK_NAMES[1:] if not why_not(name, p)]
