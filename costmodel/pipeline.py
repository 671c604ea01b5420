"""Pipeline schedules: step time from per-stage micro-batch times.

With m micro-batches, stage times t_i (forward + backward of one micro-batch, including the
stage's point-to-point sends) and v virtual stages per rank, a 1F1B pipeline runs

    T = m * max_i t_i + (sum_i t_i - max_i t_i) / v

The slowest stage sets the steady-state pace (m slots), and the fill + drain is the time for a
micro-batch to traverse the other stages. For identical stages this is Narayanan et al. SC'21's
(m + p - 1) t, with the bubble (p - 1) t shrinking by v under interleaving (their Sec. 2.2.2);
for unequal stages it is the bound used by heterogeneous planners (AMP, Li et al. NeurIPS'22,
Eq. 2; Metis, Um et al. ATC'24), which models the schedule instead of averaging stages. GPipe has
the same time (its memory differs; see ``stage.activations``).

Per-plan arrays have shape ``(n_plans,)``. See README.md, 'How the cost model works'.
"""

from dataclasses import dataclass

import numpy as np

Array = np.ndarray


@dataclass
class Schedule:
    """Pipeline time, bubble (seconds) and slowest stage kind of each plan, arrays of shape
    ``(n_plans,)``."""

    pipeline_s: Array
    bubble_s: Array
    slowest_kind: Array  # index of the slowest stage (kind) per plan


def schedule_from_stage_times(
    total_s: Array, slowest_s: Array, microbatches: Array, vpp: Array | int
) -> tuple[Array, Array]:
    """(pipeline time, bubble) from the sum and the max of stage times."""
    steady = microbatches * slowest_s
    bubble = (total_s - slowest_s) / vpp
    return steady + bubble, bubble


def homogeneous_schedule(
    per_mb: tuple[Array, Array, Array],
    weights: tuple[Array, Array, Array],
    microbatches: Array,
    vpp: Array,
) -> Schedule:
    """Three stage kinds (first, middle, last) with their counts as weights."""
    stacked = np.stack(per_mb)
    present = np.stack(weights) > 0
    masked = np.where(present, stacked, -np.inf)
    slowest_kind = np.argmax(masked, axis=0)
    slowest = np.max(masked, axis=0)
    total = sum(w * t for w, t in zip(weights, per_mb, strict=True))
    pipeline_s, bubble = schedule_from_stage_times(total, slowest, microbatches, vpp)
    return Schedule(pipeline_s=pipeline_s, bubble_s=bubble, slowest_kind=slowest_kind)


def exposed_dp_comm(
    dp_comm: tuple[Array, ...],
    budget: tuple[Array, ...],
    slack: tuple[Array, ...],
    present: tuple[Array, ...],
    interference: float,
) -> Array:
    """Gradient-reduction time left on the critical path after the last backward.

    A stage starts reducing during its last micro-batch's backward (``budget`` it can hide
    behind) and finishes ``slack`` earlier than the first stage, whose backward ends the
    pipeline; the step waits for the latest finisher. Hidden traffic still costs
    ``interference`` of its time (NCCL kernels contend with compute for SMs and HBM).
    """
    exposed = [
        np.where(
            p > 0, np.maximum(interference * np.minimum(c, b), np.maximum(0.0, c - b - s)), 0.0
        )
        for c, b, s, p in zip(dp_comm, budget, slack, present, strict=True)
    ]
    return np.max(np.stack(exposed), axis=0)
