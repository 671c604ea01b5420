"""Validity rules of a plan, as bit flags (vectorized) with messages a user understands."""

from enum import IntFlag

import numpy as np


class Violation(IntFlag):
    """One bit per broken validity rule of a plan; ``describe`` words them."""

    GPU_COUNT = 1 << 0
    HEADS_TP = 1 << 1
    KV_HEADS_TP = 1 << 2
    FFN_TP = 1 << 3
    LAYERS_PP = 1 << 4
    EXPERTS_EP = 1 << 5
    EP_DP = 1 << 6
    BATCH = 1 << 7
    INTERLEAVE_MICROBATCHES = 1 << 8
    SEQ_CP = 1 << 9
    MEMORY = 1 << 10
    PRECISION = 1 << 11
    SP_TP = 1 << 12
    EP_DENSE = 1 << 13
    FRAMEWORK = 1 << 14


# How an out-of-memory reason starts: the one infeasibility a run that really happened may still
# be predicted to have (the memory model's error), unlike a plan the cluster cannot hold at all.
OUT_OF_MEMORY = "out of memory:"


def why_it_cannot_have_run(reasons: list[str]) -> str | None:
    """For a run reported as observed: of its estimate's infeasibility ``reasons``, those that
    say the plan cannot run at all (GPU count, divisibility, batch; all but out of memory), as
    one message, or None when it could have run."""
    impossible = [reason for reason in reasons if not reason.startswith(OUT_OF_MEMORY)]
    return f"this plan cannot have run here: {'; '.join(impossible)}" if impossible else None


def describe(flags: int, facts: dict[str, float | int | str]) -> list[str]:
    """Readable reasons for every violated rule; ``facts`` fills in the numbers."""
    f = facts
    messages = {
        Violation.GPU_COUNT: (
            "plan needs dp*tp*pp*cp = {needed} GPUs but group '{group}' has {available}"
        ),
        Violation.HEADS_TP: "tp={tp} does not divide num_attention_heads={heads}",
        Violation.KV_HEADS_TP: "tp={tp} does not divide num_kv_heads={kv_heads}",
        Violation.FFN_TP: "tp={tp} does not divide the FFN width {ffn}",
        Violation.LAYERS_PP: "{split_rule}",
        Violation.EXPERTS_EP: "ep={ep} does not divide num_experts={experts}",
        Violation.EP_DP: (
            "ep x etp = {ep} x {etp} must divide tp x cp x dp = {tp_cp_dp} (the expert ranks "
            "tile the attention ranks: MoE parallel folding)"
        ),
        Violation.BATCH: (
            "global_batch_size={gbs} is not a multiple of dp*micro_batch_size={dp_mbs}"
        ),
        Violation.INTERLEAVE_MICROBATCHES: (
            "interleaved schedule (vpp={vpp}) needs micro-batches ({microbatches}) to be a "
            "multiple of pp={pp}"
        ),
        Violation.SEQ_CP: "cp={cp} does not divide seq_length={seq}",
        Violation.MEMORY: (
            OUT_OF_MEMORY + " stage {worst_stage} needs {peak_gib:.1f} GiB per GPU but "
            "{gpu} has {capacity_gib:.1f} GiB"
        ),
        Violation.PRECISION: "{gpu} has no {precision} tensor-core support",
        Violation.SP_TP: "sequence_parallel needs tp > 1",
        Violation.EP_DENSE: "ep={ep} > 1 but the model has no MoE layers",
        Violation.FRAMEWORK: "{framework} cannot launch this plan: {framework_why}",
    }
    return [text.format(**f) for flag, text in messages.items() if flags & flag]


def flag(condition: np.ndarray, violation: Violation) -> np.ndarray:
    """``violation``'s bit where ``condition`` holds, else 0: int64 array of ``condition``'s shape
    (``(n_plans,)``)."""
    return np.where(condition, int(violation), 0).astype(np.int64)
