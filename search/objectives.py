"""Objectives, feasibility under a memory cap, and ranking of priced plans.

Every objective is one or two cost-model metrics with a direction. Ranking works on "scores"
(larger is better) so maximize and minimize share one code path. A plan is feasible when it
passes every structural rule and its worst stage uses at most ``max_memory_fraction`` of its
GPUs' memory; the memory ratio (peak / allowed) doubles as the Optuna constraint value.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from costmodel.feasibility import Violation
from costmodel.specs import Estimate, Plan

Direction = Literal["maximize", "minimize"]

# Share of each GPU's memory a plan may use unless a search says otherwise: the memory estimate
# is within about 15% of measured peaks, and PyTorch's caching allocator fragments (see the
# README's "What peak_memory_gib reports"), so a plan estimated at 95% of HBM may not fit.
DEFAULT_MAX_MEMORY_FRACTION = 0.9


@dataclass(frozen=True)
class Metric:
    """An objective's metric: an ``estimate_many`` key and whether larger or smaller is better."""

    key: str  # an estimate_many key and an Estimate field
    direction: Direction

    def score(self, values: np.ndarray) -> np.ndarray:
        """Larger is better; NaN (no price, no token target) ranks last."""
        scores = values if self.direction == "maximize" else -values
        return np.where(np.isnan(scores), -np.inf, scores)


TOKENS_PER_S = Metric("tokens_per_s", "maximize")
USD_PER_M_TOKENS = Metric("usd_per_million_tokens", "minimize")
TIME_TO_TRAIN = Metric("time_to_train_s", "minimize")
# Goodput (costmodel.goodput): tokens/s x the share of wall time failures, checkpoints and
# restarts leave to kept steps, and the $ per million of those tokens.
EFFECTIVE_TOKENS_PER_S = Metric("effective_tokens_per_s", "maximize")
USD_PER_M_EFFECTIVE_TOKENS = Metric("usd_per_million_effective_tokens", "minimize")

OBJECTIVE_METRICS: dict[str, tuple[Metric, ...]] = {
    "throughput": (TOKENS_PER_S,),
    "cost": (USD_PER_M_TOKENS,),
    "time_to_train": (TIME_TO_TRAIN,),
    "pareto": (TOKENS_PER_S, USD_PER_M_TOKENS),
    "goodput": (EFFECTIVE_TOKENS_PER_S,),
    "pareto_goodput": (EFFECTIVE_TOKENS_PER_S, USD_PER_M_EFFECTIVE_TOKENS),
}
# The estimate_many figures that goodput prices (costmodel.goodput.finish_arrays).
GOODPUT_FIGURES = (
    "goodput",
    "effective_tokens_per_s",
    "checkpoint_interval_s",
    "time_to_train_s",
    "usd_to_train",
    "usd_per_million_effective_tokens",
    "interruptions",
)


def needs_goodput(objective: str) -> bool:
    """Whether ranking by ``objective`` reads a goodput figure (time to train counts failures)."""
    return any(metric.key in GOODPUT_FIGURES for metric in OBJECTIVE_METRICS[objective])


# Figures kept for every evaluated plan (ranking, reports, the service's plan columns).
REPORTED = (
    "tokens_per_s",
    "usd_per_million_tokens",
    "time_to_train_s",
    "step_time_s",
    "mfu",
    "goodput",
    "effective_tokens_per_s",
    "usd_per_million_effective_tokens",
    "checkpoint_interval_s",
)


@dataclass(frozen=True)
class Evaluation:
    """One priced plan."""

    plan: Plan
    global_batch_size: int
    metrics: dict[str, float]  # REPORTED figures + peak_memory_gib
    memory_ratio: float  # worst stage: peak / (fraction * capacity); inf if structurally invalid

    @property
    def feasible(self) -> bool:
        """Whether the plan fits the memory cap (``memory_ratio <= 1``)."""
        return self.memory_ratio <= 1.0

    def values(self, metrics: Sequence[Metric]) -> tuple[float, ...]:
        """The plan's value of each metric, in ``metrics``' order."""
        return tuple(self.metrics[metric.key] for metric in metrics)

    def scores(self, metrics: Sequence[Metric]) -> tuple[float, ...]:
        """The plan's score (larger is better) for each metric, in ``metrics``' order."""
        return tuple(
            float(metric.score(np.asarray(self.metrics[metric.key]))) for metric in metrics
        )


def memory_ratio_of_arrays(arrays: dict[str, np.ndarray], fraction: float) -> np.ndarray:
    """Per plan: peak / allowed memory, or inf where a non-memory rule is broken.

    ``arrays``: ``estimate_many`` output, each ``(n_plans,)``; returns ``(n_plans,)``.
    """
    structural = (arrays["violations"] & ~int(Violation.MEMORY)) == 0
    ratio = arrays["peak_memory_gib"] / (fraction * arrays["capacity_gib"])
    return np.where(structural, ratio, np.inf)


def memory_ratio_of_estimate(estimate: Estimate, fraction: float) -> float:
    """Peak / allowed memory of the estimate's fullest stage, or inf where it is infeasible for
    another reason."""
    ratio = max(
        stage.peak_memory_gib / (fraction * stage.capacity_gib) for stage in estimate.per_stage
    )
    if not estimate.feasible and ratio <= 1.0 / fraction:
        # Infeasible for a reason other than memory (the search space should never produce one).
        return float("inf")
    return float(ratio)


def metrics_of_estimate(estimate: Estimate) -> dict[str, float]:
    """The ``estimate_many`` metrics of one ``Estimate`` (NaN where it has none)."""

    def number(value: float | None) -> float:
        return float("nan") if value is None else float(value)

    return {
        "tokens_per_s": estimate.tokens_per_s,
        "usd_per_million_tokens": number(estimate.usd_per_million_tokens),
        "time_to_train_s": number(estimate.time_to_train_s),
        "step_time_s": estimate.step_time_s,
        "mfu": estimate.mfu,
        "peak_memory_gib": estimate.peak_memory_gib,
        "goodput": number(estimate.goodput.goodput if estimate.goodput else None),
        "effective_tokens_per_s": number(estimate.effective_tokens_per_s),
        "usd_per_million_effective_tokens": number(
            estimate.usd_per_million_tokens / estimate.goodput.goodput
            if estimate.goodput and estimate.usd_per_million_tokens is not None
            else None
        ),
        "checkpoint_interval_s": number(
            estimate.goodput.checkpoint_interval_s if estimate.goodput else None
        ),
    }


def pareto_mask(scores: np.ndarray) -> np.ndarray:
    """Non-dominated rows of a (N, 2) score array (larger is better in both columns).

    Sweep in order of the first score (ties: better second score first); a row is on the front
    when its second score beats every row before it. Exact duplicates keep their first copy.
    """
    if len(scores) == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((-scores[:, 1], -scores[:, 0]))
    best_second = np.maximum.accumulate(scores[order, 1])
    previous_best = np.concatenate([[-np.inf], best_second[:-1]])
    on_front = scores[order, 1] > previous_best
    mask = np.zeros(len(scores), dtype=bool)
    mask[order[on_front]] = True
    return mask


def rank_order(scores: np.ndarray) -> np.ndarray:
    """Indices best-first for (N, 1) scores; ties keep their input order (stable)."""
    return np.argsort(-scores[:, 0], kind="stable")


def spread_along_front(front_scores: np.ndarray, count: int) -> np.ndarray:
    """Indices of ``count`` front points evenly spread from the fastest to the cheapest."""
    order = np.argsort(-front_scores[:, 0], kind="stable")
    if len(order) <= count:
        return order
    picks = np.unique(np.round(np.linspace(0, len(order) - 1, count)).astype(int))
    return order[picks]
