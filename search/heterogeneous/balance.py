"""Layer balancing: the layer split of a heterogeneous skeleton's pipeline stages.

Layers start proportional to each stage's peak speed, are re-balanced from the stages' priced
micro-batch times and capped by their memory, then a short hill-climb moves ``vpp`` layers at a
time off the slowest (or fullest) stage. Metis (Um et al. ATC'24) and AMP (Li et al.
NeurIPS'22) balance non-uniform stages the same way. Splits are in units of ``vpp`` layers, so
every stage holds whole interleaving chunks.
"""

from collections.abc import Callable

import numpy as np

from costmodel.specs import ClusterSpec, Estimate
from search.heterogeneous.skeleton import Skeleton, group_speed
from search.objectives import memory_ratio_of_estimate

REBALANCE_ROUNDS = 3
CLIMB_STEPS = 6


def apportion(
    units: int, weights: np.ndarray, unit: int, caps: np.ndarray | None = None
) -> list[int]:
    """Split ``units`` over stages by weight (largest remainder), each >= 1 unit and <= its cap;
    returns layers (units x ``unit``)."""
    count = len(weights)
    weights = np.maximum(np.asarray(weights, dtype=float), 1e-12)
    caps = np.full(count, units) if caps is None else np.maximum(np.asarray(caps), 1)
    if caps.sum() < units:
        caps = caps + (units - caps.sum()) * weights / weights.sum() + 1  # cannot fit: spread
        caps = np.ceil(caps).astype(int)
    shares = np.ones(count, dtype=int)
    free = units - count
    active = np.ones(count, dtype=bool)
    # Water-fill: hand out by weight, freeze stages at their cap, repeat with the rest.
    while free > 0 and active.any():
        ideal = free * weights * active / (weights * active).sum()
        grant = np.minimum(np.floor(ideal).astype(int), caps - shares)
        if grant.sum() == 0:
            room = np.where(active & (shares < caps), ideal - np.floor(ideal) + weights * 1e-9, -1)
            pick = int(np.argmax(room))
            if room[pick] < 0:
                break
            grant = np.zeros(count, dtype=int)
            grant[pick] = 1
        shares += grant
        free -= int(grant.sum())
        active &= shares < caps
    if free > 0:  # every stage at its cap: give the rest to the fastest
        shares[int(np.argmax(weights))] += free
    return [int(s) * unit for s in shares]


def initial_split(
    skeleton: Skeleton, cluster: ClusterSpec, precision: str, num_layers: int
) -> list[int]:
    """Layers proportional to each stage's peak speed (GPU x tp), in units of vpp."""
    if skeleton.layout == "stages":
        speeds = [
            group_speed(cluster.group(name), precision) * tp for name, tp in skeleton.stage_groups()
        ]
    else:
        speeds = [1.0] * skeleton.pp  # every stage spans all pipelines alike
    return apportion(num_layers // skeleton.vpp, np.asarray(speeds), skeleton.vpp)


def step_metric(result: Estimate, max_memory_fraction: float) -> tuple[float, float]:
    """Balancer's order: fitting plans first, then step time (GPUs are fixed by the skeleton,
    so the fastest split is also the cheapest)."""
    ratio = memory_ratio_of_estimate(result, max_memory_fraction)
    return (max(ratio, 1.0), result.step_time_s)


class SplitSearch:
    """The best layer split found so far for one skeleton (``layers`` and its ``result``);
    ``price`` estimates the skeleton with a split, and no split is priced twice."""

    def __init__(
        self,
        skeleton: Skeleton,
        price: Callable[[list[int]], Estimate],
        *,
        num_layers: int,
        max_memory_fraction: float,
    ) -> None:
        self.skeleton = skeleton
        self.price = price
        self.num_layers = num_layers
        self.max_memory_fraction = max_memory_fraction
        self.seen: set[tuple[int, ...]] = set()
        self.layers: list[int] = []
        self.result: Estimate | None = None

    def _try(self, layers: list[int]) -> bool:
        """Price ``layers`` (now seen) and keep it if better: whether it was kept."""
        self.seen.add(tuple(layers))
        candidate = self.price(layers)
        if self.result is None or self._metric(candidate) < self._metric(self.result):
            self.layers, self.result = layers, candidate
            return True
        return False

    def _metric(self, result: Estimate) -> tuple[float, float]:
        return step_metric(result, self.max_memory_fraction)

    def rebalance(self, first: list[int]) -> Estimate:
        """Price ``first``, then re-balance from the priced stage times and memory."""
        self._try(first)
        for _ in range(REBALANCE_ROUNDS):
            assert self.result is not None
            layers = rebalanced(
                self.skeleton, self.layers, self.result, self.num_layers, self.max_memory_fraction
            )
            if tuple(layers) in self.seen:
                break
            self._try(layers)
        assert self.result is not None
        return self.result

    def climb(self) -> Estimate:
        """Hill-climb: move vpp layers at a time off the slowest (or fullest) stage."""
        for _ in range(CLIMB_STEPS):
            assert self.result is not None
            improved = False
            for layers in moves(self.skeleton, self.layers, self.result, self.max_memory_fraction):
                if tuple(layers) in self.seen:
                    continue
                improved |= self._try(layers)
            if not improved:
                break
        assert self.result is not None
        return self.result


def rebalanced(
    skeleton: Skeleton,
    layers: list[int],
    result: Estimate,
    num_layers: int,
    max_memory_fraction: float,
) -> list[int]:
    """Layers proportional to each stage's measured rate (layers per micro-batch second),
    each capped by the layers its memory holds."""
    units = num_layers // skeleton.vpp
    times = np.array([stage.time_per_microbatch_s for stage in result.per_stage])
    rate = np.asarray(layers, dtype=float) / np.maximum(times, 1e-12)
    caps = []
    for n, stage in zip(layers, result.per_stage, strict=True):
        fixed = stage.memory_gib.other
        per_layer = max((stage.peak_memory_gib - fixed) / n, 1e-9)
        caps.append(max(1, int((max_memory_fraction * stage.capacity_gib - fixed) / per_layer)))
    cap_units = np.maximum(np.asarray(caps) // skeleton.vpp, 1)
    return apportion(units, rate, skeleton.vpp, cap_units)


def moves(
    skeleton: Skeleton, layers: list[int], result: Estimate, max_memory_fraction: float
) -> list[list[int]]:
    """Split variants that move vpp layers off the slowest (or fullest) stage."""
    unit = skeleton.vpp
    times = [stage.time_per_microbatch_s for stage in result.per_stage]
    pressure = [stage.peak_memory_gib / stage.capacity_gib for stage in result.per_stage]
    over = max(pressure) > max_memory_fraction
    source = int(np.argmax(pressure if over else times))
    if layers[source] <= unit:
        return []
    targets = {source - 1, source + 1, int(np.argmin(times)), int(np.argmin(pressure))}
    variants = []
    for target in sorted(t for t in targets if 0 <= t < len(layers) and t != source):
        moved = list(layers)
        moved[source] -= unit
        moved[target] += unit
        variants.append(moved)
    return variants
