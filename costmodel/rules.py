"""Every structural rule of a plan, written once: a predicate over plan arrays and its message.

The homogeneous estimate (``homogeneous.structural_violations``), the heterogeneous estimate
(each stage's tp against the same predicates) and the search space (``search.space`` filters
its rows with ``violations``) all apply this table, so a plan the search lists is a plan both
estimates accept, and a rule changed here changes everywhere
(``tests/costmodel/test_rules.py`` holds them equal). Memory is not structural
(``Violation.MEMORY``: the estimate's peak against HBM).

Predicates receive the plan columns (``dp``, ``tp``, ``pp``, ``cp``, ``ep``, ``etp``, ``vpp``,
``micro_batch_size``, ``sequence_parallel``; numpy arrays of one length) and the ``Facts`` of
the model, training and group; each returns True where the rule is broken.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from costmodel.feasibility import Violation
from costmodel.flops import LayerShape

Columns = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Facts:
    """What the rules need of the model, the training and the node group."""

    shape: LayerShape
    num_layers: int
    global_batch_size: int
    seq_length: int
    group_gpus: int
    has_precision: bool  # the GPU has tensor cores for the training's precision
    first_stage_layers: np.ndarray | None = None  # the resolved split; < 0 where none exists


@dataclass(frozen=True)
class Rule:
    """One structural rule: its ``Violation`` bit and where plans break it (bool ``(n_plans,)``)."""

    violation: Violation
    broken: Callable[[Columns, Facts], np.ndarray | bool]  # True where broken (or one for all)


def expert_tp(p: Columns) -> np.ndarray:
    """etp column, 0 meaning the attention's tp (Megatron's default)."""
    etp = p.get("etp")
    return p["tp"] if etp is None else np.where(etp > 0, etp, p["tp"])


def _ffn_tp(p: Columns, f: Facts) -> np.ndarray:
    bad = f.shape.ffn % p["tp"] != 0
    if f.shape.num_experts:
        bad |= f.shape.expert_ffn % expert_tp(p) != 0
    return bad


def _microbatches(p: Columns, f: Facts) -> np.ndarray:
    return f.global_batch_size // np.maximum(p["dp"] * p["micro_batch_size"], 1)


def _no_split(p: Columns, f: Facts) -> np.ndarray:
    if f.first_stage_layers is None:
        return np.zeros(p["pp"].shape, dtype=bool)
    return f.first_stage_layers < 0


RULES: tuple[Rule, ...] = (
    Rule(Violation.GPU_COUNT, lambda p, f: p["dp"] * p["tp"] * p["pp"] * p["cp"] > f.group_gpus),
    # Megatron splits attention heads, KV heads and the FFN width over tp ranks.
    Rule(Violation.HEADS_TP, lambda p, f: f.shape.heads % p["tp"] != 0),
    Rule(Violation.KV_HEADS_TP, lambda p, f: f.shape.kv_heads % p["tp"] != 0),
    Rule(Violation.FFN_TP, _ffn_tp),
    Rule(
        Violation.EXPERTS_EP,
        lambda p, f: (f.shape.num_experts % p["ep"] != 0) if f.shape.num_experts else False,
    ),
    # MoE parallel folding: the expert ranks (ep x etp) tile the tp x cp x dp ranks.
    Rule(
        Violation.EP_DP,
        lambda p, f: (
            ((p["tp"] * p["cp"] * p["dp"]) % (p["ep"] * expert_tp(p)) != 0)
            if f.shape.num_experts
            else False
        ),
    ),
    Rule(Violation.EP_DENSE, lambda p, f: (p["ep"] > 1) if not f.shape.num_experts else False),
    Rule(Violation.LAYERS_PP, _no_split),
    Rule(
        Violation.BATCH,
        lambda p, f: f.global_batch_size % (p["dp"] * p["micro_batch_size"]) != 0,
    ),
    # Megatron's interleaved schedule runs micro-batches in groups of pp.
    Rule(
        Violation.INTERLEAVE_MICROBATCHES,
        lambda p, f: (p["vpp"] > 1) & (_microbatches(p, f) % p["pp"] != 0),
    ),
    Rule(Violation.SEQ_CP, lambda p, f: f.seq_length % p["cp"] != 0),
    Rule(Violation.SP_TP, lambda p, f: (p["sequence_parallel"] > 0) & (p["tp"] == 1)),
    Rule(Violation.PRECISION, lambda p, f: not f.has_precision),
)


def violations(p: Columns, facts: Facts, rules: tuple[Rule, ...] = RULES) -> np.ndarray:
    """Bitmask of the broken rules per plan, int64 ``(n_plans,)`` (``feasibility.describe``)."""
    mask = np.zeros(p["dp"].shape, dtype=np.int64)
    for rule in rules:  # np.where broadcasts the rules that hold for every plan (scalars)
        mask |= np.where(rule.broken(p, facts), int(rule.violation), 0)
    return mask
