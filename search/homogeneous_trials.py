"""Optuna trials over the homogeneous plan space: every trial decodes to a valid plan.

A trial chooses a *structure* (tp, pp, cp, dp, micro_batch_size, vpp, ep) and the options
(ZeRO stage, offload, recompute, sequence parallelism) are then solved exactly:

- structure: each dimension is suggested as an integer on a log scale over its static range
  (``suggest_int(dim, low, high, log=True)``; fixed distributions, as TPE's multivariate model
  and NSGA-II need), and the suggested point is projected onto the nearest valid structural row
  of ``GroupSpace`` (Euclidean distance in log2 space). Projection treats the dimensions
  symmetrically: a point that asks for more GPUs than the group has lands on the valid boundary
  with every degree shrunk a little, instead of leaving whichever dimension comes last with
  what remains. A valid point projects onto itself, so the sampler sees real plan values.
- options: the structure's option combinations (at most a few dozen) are priced in the same
  vectorized call and the best one that fits in memory is kept. With the structure fixed, the GPU
  count and price are fixed too, so the fastest combination is also the cheapest and the
  quickest to train: the choice is exact for every objective. This removes the dimensions that
  interact most with the memory boundary (a bigger micro-batch only fits with a higher ZeRO
  stage or more recompute), which a sampler otherwise has to discover jointly.

The trial records the plan it priced (user attribute ``plan``); its constraint is the memory
overshoot of the best fitting option, or of the least memory-hungry one when none fits.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna

from search.heuristics import heuristic_plans
from search.objectives import (
    OBJECTIVE_METRICS,
    REPORTED,
    Evaluation,
    Metric,
)
from search.params import parameter, sample
from search.pricing import price_group
from search.request import SearchRequest
from search.space import STRUCT_DIMS, GroupSpace

# How many heuristic plans a study is seeded with (the best of the families' candidates).
SEEDS = 4


@dataclass(frozen=True)
class Candidate:
    """One structural row of one group's space: what a trial decodes to."""

    space: int  # index into the trial space's GroupSpace list
    row: int  # structural row of that space


class HomogeneousTrials:
    """The homogeneous plan space of one node group (one GroupSpace per global batch size)."""

    # TPE alone does best here (options are solved per structure, the rest is smooth): local
    # search only uses the trials TPE would waste on repeats.
    local_moves_per_trial = 0

    def __init__(self, request: SearchRequest, spaces: Sequence[GroupSpace]) -> None:
        self.request = request
        self.spaces = list(spaces)
        self.batches = [space.global_batch_size for space in self.spaces]
        self.bounds = {
            dim: (
                int(min(space.rows[dim].min() for space in self.spaces)),
                int(max(space.rows[dim].max() for space in self.spaces)),
            )
            for dim in STRUCT_DIMS
        }
        ladders = {
            dim: sorted({int(v) for space in self.spaces for v in np.unique(space.rows[dim])})
            for dim in STRUCT_DIMS
        }
        self.parameters = [
            p
            for p in (
                parameter("global_batch_size", "categorical", self.batches),
                *(parameter(dim, "int", ladders[dim]) for dim in STRUCT_DIMS),
            )
            if p is not None
        ]
        self._log_rows = [
            np.log2(np.stack([space.rows[dim] for dim in STRUCT_DIMS], axis=1)).astype(np.float32)
            for space in self.spaces
        ]
        # Plans priced by this object (every option of every trial, warm-start screening).
        self.priced = 0
        self.fitting = 0

    @property
    def size(self) -> int:
        """Plans in all spaces."""
        return sum(space.size for space in self.spaces)

    # Decoding ------------------------------------------------------------------------------
    def suggest(self, trial: optuna.Trial) -> Candidate:
        """Sample a structure for ``trial`` and decode it to a candidate."""
        return self.decode(sample(trial, self.parameters))

    def decode(self, raw: dict[str, Any]) -> Candidate:
        """The valid structural row nearest to the sampled point (log2 space)."""
        index = self.batches.index(raw.get("global_batch_size", self.batches[0]))
        wanted = [raw.get(dim, self.bounds[dim][0]) for dim in STRUCT_DIMS]
        target = np.log2(np.asarray(wanted, dtype=np.float32))
        distance = ((self._log_rows[index] - target) ** 2).sum(axis=1)
        return Candidate(space=index, row=int(np.argmin(distance)))

    # Pricing -------------------------------------------------------------------------------
    def evaluate(self, candidates: Sequence[Candidate]) -> list[Evaluation]:
        """Price every option of each candidate's row and keep its best."""
        results: dict[Candidate, Evaluation] = {}
        for index, space in enumerate(self.spaces):
            rows = sorted({c.row for c in candidates if c.space == index})
            if not rows:
                continue
            parts = [space.expand(row, row + 1) for row in rows]
            columns = {dim: np.concatenate([part[dim] for part in parts]) for dim in parts[0]}
            priced = self._price(space, columns)
            start = 0
            for row, part in zip(rows, parts, strict=True):
                count = len(part["tp"])
                results[Candidate(index, row)] = self._best_option(priced[start : start + count])
                start += count
        return [results[candidate] for candidate in candidates]

    def _best_option(self, variants: list[Evaluation]) -> Evaluation:
        metric = _primary(self.request)
        fitting = [v for v in variants if v.feasible]
        if not fitting:
            return min(variants, key=lambda v: v.memory_ratio)
        return max(fitting, key=lambda v: v.scores([metric])[0])

    def _price(self, space: GroupSpace, columns: dict[str, np.ndarray]) -> list[Evaluation]:
        request = self.request
        arrays = price_group(request, space, columns)
        ratio = arrays["memory_ratio"]
        self.priced += len(ratio)
        self.fitting += int((ratio <= 1.0).sum())
        names = (*REPORTED, "peak_memory_gib")
        return [
            Evaluation(
                plan=space.plan({dim: column[i] for dim, column in columns.items()}),
                global_batch_size=space.global_batch_size,
                metrics={name: float(arrays[name][i]) for name in names},
                memory_ratio=float(ratio[i]),
            )
            for i in range(len(ratio))
        ]

    # Warm start ----------------------------------------------------------------------------
    def seeds(self, metrics: Sequence[Metric]) -> list[dict[str, Any]]:
        """Params of the best heuristic plans' structures (fitting ones first)."""
        ranked: list[tuple[tuple[bool, tuple[float, ...]], dict[str, Any]]] = []
        for index, space in enumerate(self.spaces):
            columns = heuristic_plans(space)
            if len(columns["tp"]) == 0:
                continue
            for i, evaluation in enumerate(self._price(space, columns)):
                key = (not evaluation.feasible, tuple(-s for s in evaluation.scores(metrics)))
                ranked.append((key, self._params(index, {d: columns[d][i] for d in STRUCT_DIMS})))
        ranked.sort(key=lambda item: item[0])
        seeds: list[dict[str, Any]] = []
        for _, params in ranked:
            if params not in seeds:
                seeds.append(params)
            if len(seeds) == SEEDS:
                break
        return seeds

    def _params(self, index: int, values: dict[str, Any]) -> dict[str, Any]:
        point = {"global_batch_size": self.batches[index]}
        point.update({dim: int(values[dim]) for dim in STRUCT_DIMS})
        return {p.name: point[p.name] for p in self.parameters}


def _primary(request: SearchRequest) -> Metric:
    return OBJECTIVE_METRICS[request.objective][0]
