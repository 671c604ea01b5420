"""``HeterogeneousTrials``: the trial space of a heterogeneous search (``TrialSpace`` of
``search.optuna_study``): sample and decode skeletons, balance and price them, seed the study."""

import math
from collections.abc import Sequence
from typing import Any

import optuna

from costmodel import estimate
from costmodel.specs import Estimate, Plan
from search.heterogeneous.balance import SplitSearch, initial_split
from search.heterogeneous.decode import SkeletonSpace
from search.heterogeneous.seed import homogeneous_seed, spanning_seeds
from search.heterogeneous.skeleton import LAYOUTS, Skeleton
from search.objectives import (
    OBJECTIVE_METRICS,
    Evaluation,
    Metric,
    memory_ratio_of_estimate,
    metrics_of_estimate,
)
from search.params import sample
from search.request import SearchRequest

# The hill-climb runs only for splits within this fraction of the best plan so far.
CLIMB_WITHIN = 0.95


class HeterogeneousTrials:
    """Skeletons over the request's groups; ``evaluate`` balances and prices them."""

    # Skeletons form a rugged landscape (basins differ in several coupled parameters): local
    # search runs alongside the sampler, two trials after each of its new plans.
    local_moves_per_trial = 2

    def __init__(self, request: SearchRequest, *, replicas: bool = True) -> None:
        self.request = request
        self.groups = request.search_groups
        self.names = [group.name for group in self.groups]
        self.layouts = LAYOUTS if replicas and len(self.groups) > 1 else LAYOUTS[:1]
        self.space = SkeletonSpace(request, self.layouts)
        self.filters = self.space.filters
        self.layers = request.model.num_layers
        self.parameters = self.space.parameters
        self.metrics = OBJECTIVE_METRICS[request.objective]
        self.best_score = -math.inf  # best feasible plan balanced so far (single objective)
        self.priced = 0  # plans priced (every split the balancer tried)
        self.fitting = 0
        self.seed_plans: list[dict[str, Any]] = []

    # Sampling ------------------------------------------------------------------------------
    def suggest(self, trial: optuna.Trial) -> Skeleton:
        """Sample a skeleton (stage groups and degrees) for ``trial``."""
        return self.decode(sample(trial, self.parameters))

    def decode(self, raw: dict[str, Any]) -> Skeleton:
        """The valid skeleton nearest to the sampled values (``SkeletonSpace.decode``)."""
        return self.space.decode(raw)

    # Pricing -------------------------------------------------------------------------------
    def evaluate(self, candidates: Sequence[Skeleton]) -> list[Evaluation]:
        """Balance each skeleton's layers and price it."""
        return [self.balance(skeleton) for skeleton in candidates]

    def _estimate(self, skeleton: Skeleton, layers: list[int]) -> Estimate:
        result = estimate(
            self.request.model,
            self.request.training_for(skeleton.global_batch_size),
            self.request.cluster,
            self.plan(skeleton, layers),
            params=self.request.params,
        )
        self.priced += 1
        self.fitting += memory_ratio_of_estimate(result, self.request.max_memory_fraction) <= 1
        return result

    def plan(self, skeleton: Skeleton, layers: list[int]) -> Plan:
        """The plan of ``skeleton`` with ``layers`` per stage."""
        return skeleton.plan(layers)

    def initial_split(self, skeleton: Skeleton) -> list[int]:
        """Layers proportional to each stage's peak speed (GPU x tp), in units of vpp."""
        return initial_split(
            skeleton, self.request.cluster, self.request.training.precision, self.layers
        )

    def balance(self, skeleton: Skeleton) -> Evaluation:
        """Best layer split found for the skeleton (see ``search.heterogeneous.balance``)."""
        split = SplitSearch(
            skeleton,
            lambda layers: self._estimate(skeleton, layers),
            num_layers=self.layers,
            max_memory_fraction=self.request.max_memory_fraction,
        )
        best = split.rebalance(self.initial_split(skeleton))
        if not self._worth_climbing(best):
            return self._evaluation(skeleton, split.layers, best)
        best = split.climb()
        evaluation = self._evaluation(skeleton, split.layers, best)
        if evaluation.feasible and len(self.metrics) == 1:
            score = evaluation.scores(self.metrics)[0]
            self.best_score = max(self.best_score, score)
        return evaluation

    def _worth_climbing(self, result: Estimate) -> bool:
        """Whether the hill-climb (three quarters of a skeleton's pricing) may pay off: only
        for splits within ``CLIMB_WITHIN`` of the best plan so far (the climb gains a few
        percent at most once the split is re-balanced)."""
        if len(self.metrics) != 1 or not math.isfinite(self.best_score):
            return True
        metric = self.metrics[0]
        value = metrics_of_estimate(result)[metric.key]
        best = self.best_score if metric.direction == "maximize" else -self.best_score
        ratio = value / best if metric.direction == "maximize" else best / value
        return ratio >= CLIMB_WITHIN

    def _evaluation(self, skeleton: Skeleton, layers: list[int], result: Estimate) -> Evaluation:
        plan = self.plan(skeleton, layers)
        ratio = memory_ratio_of_estimate(result, self.request.max_memory_fraction)
        if not self._allowed_totals(plan, result):
            ratio = math.inf
        return Evaluation(
            plan=plan,
            global_batch_size=skeleton.global_batch_size,
            metrics=metrics_of_estimate(result),
            memory_ratio=ratio,
        )

    def _allowed_totals(self, plan: Plan, result: Estimate) -> bool:
        if (plan.dp * plan.cp) % plan.ep:
            return False
        checks = {"pp": plan.pp, "num_gpus": result.num_gpus}
        return all(
            self.filters[dim].allows(value) for dim, value in checks.items() if dim in self.filters
        )

    # Warm start (search.heterogeneous.seed) -------------------------------------------------
    def seeds(self, metrics: Sequence[Metric]) -> list[dict[str, Any]]:
        """Warm-start trial parameters from the seed plans, limited to this space's parameters."""
        names = {p.name for p in self.parameters}
        return [{k: v for k, v in seed.items() if k in names} for seed in self.seed_plans]

    def seed_from(self, plan: Plan, global_batch_size: int) -> None:
        """Queue a homogeneous plan as a one-group skeleton (the single-type baselines)."""
        seed = homogeneous_seed(plan, global_batch_size, self.names, self.request.cluster)
        if seed is not None:
            self.seed_plans.append(seed)

    def seed_spanning(self) -> None:
        """Queue the textbook spanning layouts: every group (fastest zone first), and every
        zone's groups on their own, tp = a node, layers by speed."""
        self.seed_plans += spanning_seeds(
            self.groups, self.request.cluster, self.request.training.precision
        )
